// The staged rollout's copies of a ConfigMap, written into the in-memory cluster as the rollout
// controller would: NAME-stable (data) and NAME-candidate (data and the rollout state).
import type { ResourceClient } from '../../src/core/kube/cluster.js';
import type { ConfigMap } from '../../src/core/kube/objects.js';
import { contentOf, stagedConfigMap, stateAnnotation } from '../../src/core/staged-rollout/objects.js';
import { stagedConfigMapName } from '../../src/core/rollout-state/annotations.js';
import type { StagedRole } from '../../src/core/rollout-state/annotations.js';
import { ROLLOUT_STATE_ANNOTATION } from '../../src/core/rollout-state/annotations.js';
import type { RolloutState } from '../../src/core/rollout-state/state.js';

const FINGERPRINT = `sha256:${'0'.repeat(64)}`;

/** A rollout of the candidate in two waves: `canary` (node-a) and `wave-1` (node-b), `opened` of them open. */
export function rolloutState(opened: number, extra: Partial<RolloutState> = {}): RolloutState {
  return {
    phase: 'progressing',
    candidate: { fingerprint: FINGERPRINT },
    stable: { fingerprint: FINGERPRINT },
    waves: [
      { name: 'canary', nodes: ['node-a'], size: 1 },
      { name: 'wave-1', nodes: ['node-b'], size: 1 },
    ],
    opened,
    waveOpenedAt: 1,
    reverted: false,
    startedAt: 1,
    updatedAt: 1,
    ...extra,
  };
}

/** The rollout halted at the canary (node-a) and reverted: the candidate runs nowhere. */
export function revertedState(): RolloutState {
  return rolloutState(1, {
    phase: 'halted',
    reverted: true,
    halt: { wave: 0, node: 'node-a', reason: 'test', at: 2 },
  });
}

/** Writes (creates or updates) one copy of `name`: its data, and for the candidate the state (a string: raw). */
export async function writeStaged(
  client: ResourceClient<ConfigMap>,
  namespace: string,
  name: string,
  role: StagedRole,
  data: Readonly<Record<string, string>>,
  state?: RolloutState | string,
): Promise<ConfigMap> {
  const existing = await client.get(stagedConfigMapName(name, role), { namespace }).catch(() => undefined);
  // The state names the stable copy there is, as the controller's does (the agent applies only that one).
  const stable =
    role === 'candidate'
      ? await client.get(stagedConfigMapName(name, 'stable'), { namespace }).catch(() => undefined)
      : undefined;
  const annotations =
    state === undefined
      ? {}
      : typeof state === 'string'
        ? { [ROLLOUT_STATE_ANNOTATION]: state }
        : stateAnnotation({
            ...state,
            candidate: contentRef(namespace, name, data),
            ...(stable !== undefined ? { stable: contentRef(namespace, name, stable.data ?? {}) } : {}),
          });
  const object = stagedConfigMap(namespace, name, role, data, annotations, existing);
  return existing === undefined ? client.create(object, { namespace }) : client.update(object, { namespace });
}

function contentRef(
  namespace: string,
  name: string,
  data: Readonly<Record<string, string>>,
): RolloutState['candidate'] {
  const content = contentOf(namespace, name, { metadata: { name }, data: { ...data } });
  return content.hash === undefined
    ? { fingerprint: content.fingerprint }
    : { fingerprint: content.fingerprint, hash: content.hash };
}
