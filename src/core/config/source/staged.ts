// The staged source (--config-source staged:[NAMESPACE/]NAME): the agent side of a staged rollout
// (docs/staged-rollout.md). The agent never reads the operator's ConfigMap NAME; the rollout
// controller copies it into NAME-stable (the config rolled out everywhere) and NAME-candidate (the
// candidate's data, and the rollout state as an annotation). A list + watch of each copy by name
// (so the agent's Role can name exactly the two) feeds the API source machinery of
// configmap-api.ts; the copy read is the candidate iff the state opened this node's wave
// (runsCandidate), else the stable copy, and only the stable copy the state vouches for (its
// fingerprint): the two watches are two streams, and a stable copy the state does not name yet (or
// one edited by hand) is not applied. So a restarted agent outside the open waves starts on stable,
// and a halt that reverts its wave takes it back. The reload guard does not hold back that return
// to stable: the rollout decided it, and what it undoes is what the candidate changed.
//
// Start-up waits for NAME-stable (the controller writes it within seconds of an install), with
// the mounted NAME-stable directory serving meanwhile when there is one (an empty mount is none:
// the copy was never written); without, it fails after startTimeoutMs naming the controller.
// Everything else (outages, deletions) as configmap-api.ts.
import type { ConfigMap } from '../../kube/objects.js';
import { GUARDED_IMPACTS } from '../reload-guard.js';
import type { GuardedImpact } from '../reload-guard.js';
import { stagedConfigMapName, stateOf } from '../../rollout-state/annotations.js';
import type { StagedRole } from '../../rollout-state/annotations.js';
import type { DecodedState } from '../../rollout-state/state.js';
import { runsCandidate } from '../../rollout-state/state.js';
import { ApiConfigSource, configMapLabel, readConfigMapObject } from './configmap-api.js';
import type { ApiSourceChoice, ApiSourceOptions } from './configmap-api.js';
import type { ConfigSourceRef, ConfigSourceStatus } from './port.js';

export interface StagedSourceOptions extends ApiSourceOptions {
  /** The operator's ConfigMap (NAME): the source reads NAME-stable and NAME-candidate, never NAME. */
  readonly name: string;
  /** This agent's node: whether it runs the candidate. */
  readonly nodeName: string;
}

/** Longest start-up wait for NAME-stable (the controller writes it within seconds of an install). */
export const DEFAULT_STAGED_START_TIMEOUT_MS = 60_000;

/** Which copy this node reads, from the two as listed. */
class StagedChoice implements ApiSourceChoice {
  readonly configured: ConfigSourceRef;
  readonly lists: ApiSourceChoice['lists'];
  readonly defaultStartTimeoutMs = DEFAULT_STAGED_START_TIMEOUT_MS;
  readonly waitForObject = true;
  /** The chart mounts NAME-stable `optional: true`: empty until the controller wrote it, so no fallback. */
  readonly emptyFallbackIsNone = true;
  private readonly names: Readonly<Record<StagedRole, string>>;
  /** The candidate's state as last decoded (undefined: no candidate, or no state on it). */
  private state: DecodedState | undefined;
  private role: StagedRole = 'stable';
  /** resourceVersion of the candidate whose damaged state was logged: once each. */
  private warnedVersion: string | undefined;
  /** The stable copy's resourceVersion this node returned to from the candidate: its read passes the guard. */
  private revertTo: string | undefined;
  /** The stable copy's fingerprint when this node went from it to the candidate. */
  private left: string | undefined;
  /** Whether a copy there is was chosen yet (the first one takes stable as it is; choosing nothing does not count). */
  private chose = false;
  /** Fingerprints of the stable copy by resourceVersion (the last one). */
  private stableFingerprint: { readonly resourceVersion: string; readonly fingerprint: string } | undefined;

  constructor(private readonly options: StagedSourceOptions) {
    const { namespace, name } = options;
    this.configured = { kind: 'staged', namespace, name };
    this.names = { stable: stagedConfigMapName(name, 'stable'), candidate: stagedConfigMapName(name, 'candidate') };
    this.lists = (['stable', 'candidate'] as const).map((role) => ({
      resource: `configmap ${namespace}/${this.names[role]}`,
      fieldSelector: `metadata.name=${this.names[role]}`,
      pageSize: 1,
    }));
  }

  private fingerprintOf(stable: ConfigMap): string {
    const resourceVersion = stable.metadata.resourceVersion ?? '';
    if (this.stableFingerprint?.resourceVersion !== resourceVersion) {
      const fingerprint = readConfigMapObject(this.options.namespace, this.names.stable, stable).fingerprint;
      this.stableFingerprint = { resourceVersion, fingerprint };
    }
    return this.stableFingerprint.fingerprint;
  }

  choose(get: (name: string) => ConfigMap | undefined): string | undefined {
    const candidate = get(this.names.candidate);
    this.state = stateOf(candidate);
    if (this.state?.ok === false && candidate?.metadata.resourceVersion !== this.warnedVersion) {
      this.warnedVersion = candidate?.metadata.resourceVersion;
      this.options.logger.log('warn', 'the staged rollout state is damaged: this node reads the stable config', {
        configMap: configMapLabel(this.options.namespace, this.names.candidate),
        reason: this.state.reason,
      });
    }
    const role: StagedRole =
      this.state?.ok === true && runsCandidate(this.state.state, this.options.nodeName) ? 'candidate' : 'stable';
    if (role === 'stable' && this.chose && this.state?.ok === true) {
      // Only the stable copy the state names: the other watch may not have brought it yet.
      const stable = get(this.names.stable);
      if (stable !== undefined && this.fingerprintOf(stable) !== this.state.state.stable.fingerprint) return undefined;
    }
    if (get(this.names[role]) !== undefined) this.chose = true;
    const stable = get(this.names.stable);
    if (role === 'candidate' && this.role === 'stable')
      this.left = stable === undefined ? undefined : this.fingerprintOf(stable);
    // The pass is for going back to the stable config the node left, not for a new one (a
    // completion or promotion brings the candidate as stable: forward, guarded as any change).
    if (role === 'stable' && this.role === 'candidate')
      this.revertTo =
        stable !== undefined && this.left !== undefined && this.fingerprintOf(stable) === this.left
          ? stable.metadata.resourceVersion
          : undefined;
    if (role === 'candidate') this.revertTo = undefined;
    if (role !== this.role) {
      this.options.logger.log('info', `staged config: this node now reads the ${role} copy`, {
        configMap: configMapLabel(this.options.namespace, this.names[role]),
        ...(this.state?.ok === true ? { phase: this.state.state.phase } : {}),
      });
      this.role = role;
    }
    return this.names[role];
  }

  allows(name: string, resourceVersion: string): readonly GuardedImpact[] {
    return name === this.names.stable && this.revertTo !== undefined && resourceVersion === this.revertTo
      ? GUARDED_IMPACTS
      : [];
  }

  inUse(name: string): ConfigSourceRef {
    return { kind: 'configmap', namespace: this.options.namespace, name, staged: true };
  }

  absent(label: string): string {
    return `${label} does not exist: the staged rollout controller (provisioner rollout controller) writes it from ${configMapLabel(this.options.namespace, this.options.name)}; is it running?`;
  }

  status(name: string): Partial<ConfigSourceStatus> {
    return {
      stagedRole: name === this.names.candidate ? 'candidate' : 'stable',
      ...(this.state?.ok === true ? { rolloutPhase: this.state.state.phase } : {}),
      ...(this.state?.ok === false ? { rolloutStateError: this.state.reason } : {}),
    };
  }
}

/** The staged rollout's copies of a ConfigMap through the API: the candidate while this node's wave is open. */
export class StagedConfigSource extends ApiConfigSource {
  constructor(options: StagedSourceOptions) {
    super(options, new StagedChoice(options));
  }
}
