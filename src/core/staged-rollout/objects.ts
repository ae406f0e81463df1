// Where a staged rollout lives in the API (docs/architecture.md "Staged rollout: the state model"):
//   <name>            the operator's ConfigMap (kubectl apply): the desired config; only the
//                     controller reads it when staged rollout is on
//   <name>-stable     the last config rolled out everywhere; written by the controller; the agents'
//                     config outside the open waves, and (mounted) their start-up fallback
//   <name>-candidate  the candidate's copy (data) and the rollout state (an annotation), written by
//                     the controller in one object so an agent never sees a state without its
//                     content; the operator's requests (pause, resume, abort, promote) are a second
//                     annotation the CLI writes and the controller clears
// Both copies carry a label naming the operator's ConfigMap (for kubectl and cleanup); an agent
// lists and watches each by name, so its Role names exactly the two. Pure.
import { formatIssue, InvalidConfigError, ProvisionerError } from '../errors.js';
import { parseConfigSnapshot } from '../config/decode/parse.js';
import { readConfigMapObject } from '../config/source/configmap-api.js';
import type { ConfigMap } from '../kube/objects.js';
import { nodeLabelValue } from '../pv/naming.js';
import { errorMessage } from '../unknown-values.js';
import type { DesiredContent } from './decide.js';
import type { ContentRef } from '../rollout-state/state.js';
import { encodeRolloutState } from '../rollout-state/state.js';
import {
  CONFIG_HASH_ANNOTATION,
  ROLLOUT_REQUEST_ANNOTATION,
  ROLLOUT_STATE_ANNOTATION,
  STAGED_CONFIG_OF_LABEL,
  STAGED_ROLE_LABEL,
  stagedConfigMapName,
  type StagedRole,
} from '../rollout-state/annotations.js';
import type { RolloutState } from '../rollout-state/state.js';

/** The label selector of both copies of `name`. */
export function stagedSelector(name: string): string {
  return `${STAGED_CONFIG_OF_LABEL}=${nodeLabelValue(name)}`;
}

/** A ConfigMap's data → its content reference (fingerprint, and hash when it parses). */
export function contentOf(namespace: string, name: string, configMap: ConfigMap): DesiredContent {
  const read = readConfigMapObject(namespace, name, configMap);
  if (!read.ok) return { fingerprint: read.fingerprint, invalidReason: read.error.message };
  try {
    return { fingerprint: read.fingerprint, hash: parseConfigSnapshot(read.snapshot).hash };
  } catch (err) {
    const reason =
      err instanceof InvalidConfigError
        ? err.issues
            .filter((i) => i.severity === 'error')
            .map(formatIssue)
            .slice(0, 3)
            .join('; ')
        : err instanceof ProvisionerError
          ? err.message
          : errorMessage(err);
    return { fingerprint: read.fingerprint, invalidReason: reason.slice(0, 1024) };
  }
}

/** The ConfigMap holding `data` as the stable or candidate copy of `name`; keeps `existing`'s foreign metadata. */
export function stagedConfigMap(
  namespace: string,
  name: string,
  role: StagedRole,
  data: Readonly<Record<string, string>>,
  annotations: Readonly<Record<string, string>>,
  existing: ConfigMap | undefined,
): ConfigMap {
  const foreign = Object.fromEntries(
    Object.entries(existing?.metadata.annotations ?? {}).filter(
      ([k]) => k !== ROLLOUT_STATE_ANNOTATION && k !== ROLLOUT_REQUEST_ANNOTATION && k !== CONFIG_HASH_ANNOTATION,
    ),
  );
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      ...(existing?.metadata ?? {}),
      name: stagedConfigMapName(name, role),
      namespace,
      labels: {
        ...(existing?.metadata.labels ?? {}),
        [STAGED_CONFIG_OF_LABEL]: nodeLabelValue(name),
        [STAGED_ROLE_LABEL]: role,
      },
      annotations: { ...foreign, ...annotations },
    },
    data: { ...data },
  };
}

export function stateAnnotation(state: RolloutState): Record<string, string> {
  return { [ROLLOUT_STATE_ANNOTATION]: encodeRolloutState(state) };
}

/** The stable copy's content reference, as its annotation records it (fingerprint recomputed from its data). */
export function stableRefOf(namespace: string, name: string, stable: ConfigMap | undefined): ContentRef | undefined {
  if (stable === undefined) return undefined;
  const content = contentOf(namespace, name, stable);
  return content.hash === undefined
    ? { fingerprint: content.fingerprint }
    : { fingerprint: content.fingerprint, hash: content.hash };
}
