// Types shared by the reload state machine, the admin endpoint, `provisioner reload`,
// `diff-config` (the running agent as --from) and the dashboard. JSON-serializable throughout.
import type { AvailableClass } from '../metrics/volume-usage.js';
import type { DeviceVerdict } from '../disk-rules/decide.js';
import type { ConfigIssue } from '../errors.js';
import type { ProvisionerConfig } from '../config/model.js';
import type { ConfigSourceStatus } from '../config/source/port.js';
import type { ChangeSource } from '../config/watcher.js';
import type { GuardedImpact } from '../config/reload-guard.js';

/** What asked for a reload: what the config watcher noticed, SIGHUP ('signal'), or the admin endpoint. */
export type ReloadTrigger = ChangeSource | 'signal' | 'admin';

/**
 * - applied: a new generation serves the new config;
 * - noop: the config read has the hash already applied (and no force);
 * - rejected: the config is invalid; the current generation keeps running;
 * - refused: valid, but a live reload that nobody allowed would orphan PVs or change their
 *   ownership (the reload guard); the current generation keeps running;
 * - rolled-back: the new generation failed to start; the previous config serves again;
 * - failed: reading the config failed (source unreadable) or even the rollback failed.
 */
export const RELOAD_OUTCOMES = ['applied', 'noop', 'rejected', 'refused', 'rolled-back', 'failed'] as const;
export type ReloadOutcome = (typeof RELOAD_OUTCOMES)[number];

export interface ReloadChange {
  readonly path: string;
  readonly action: string;
  readonly impact: string;
  readonly summary: string;
}

export interface ReloadResult {
  readonly outcome: ReloadOutcome;
  readonly trigger: ReloadTrigger;
  readonly forced: boolean;
  /** The generation serving after this reload. */
  readonly generation: number;
  /** Hash of the config serving after this reload. */
  readonly appliedHash: string;
  /** Hash of the config that was read, when it parsed. */
  readonly candidateHash?: string;
  readonly changes: readonly ReloadChange[];
  /** Validation errors (rejected) and warnings. */
  readonly issues: readonly ConfigIssue[];
  /** Why a reload failed, was rolled back or refused. */
  readonly error?: string;
  /** Refused: the impact classes `provisioner reload --allow` must name to apply the candidate. */
  readonly needsAllow?: readonly GuardedImpact[];
  readonly startedAt: number;
  readonly durationMs: number;
}

export interface ReloadRequest {
  readonly trigger: ReloadTrigger;
  /** Restart the sync loop even when the config is unchanged. */
  readonly force?: boolean;
  /** Guarded impact classes this request explicitly allows (`provisioner reload --allow`). */
  readonly allow?: readonly GuardedImpact[];
}

export interface ClassStatus {
  readonly name: string;
  readonly hostDir: string;
  readonly mountDir: string;
  readonly persistentVolumes: readonly {
    readonly name: string;
    readonly path: string;
    readonly capacity: string;
    readonly phase: string;
    readonly claim?: string;
    /**
     * Set while the volume is not healthy (volume health: `not-mounted`, `path-missing`,
     * `device-missing`, `unreadable`, `identity-changed`) or the PV is quarantined
     * (`quarantined: identity-changed` or `quarantined: node-rebuilt`; docs/disk-identity.md).
     */
    readonly condition?: { readonly reason: string; readonly message: string };
  }[];
  readonly skipped: readonly { readonly entry: string; readonly reason: string; readonly message: string }[];
  readonly problem?: string;
}

export interface CleanupStatus {
  readonly pv: string;
  readonly method: 'process' | 'job';
  readonly state: string;
  readonly startedAt: number;
  readonly attempts: number;
  readonly lastError?: string;
  readonly retryAt?: number;
}

/** GET /v1/status of the admin endpoint. */
export interface AgentStatusJson {
  readonly formatVersion: 1;
  readonly node: string;
  readonly version: string;
  readonly pid: number;
  readonly startedAt: number;
  readonly now: number;
  readonly generation: number;
  readonly ready: boolean;
  readonly config: {
    /** Where the applied config comes from: the directory's path, or `configmap:NAMESPACE/NAME` (source.inUse). */
    readonly source: string;
    readonly appliedHash: string;
    /** Hash of the last snapshot read from the source (even if rejected); differs while a change is pending or rejected. */
    readonly onDiskHash?: string;
    /** The source can never update (mounted with subPath). */
    readonly subPath: boolean;
  };
  /**
   * The config source: configured (`--config-source`, default the directory), in use (the
   * fallback directory while the ConfigMap could not be read at start-up, and why), and for the
   * API source whether the API is reachable, the ConfigMap present or deleted, the config stale.
   */
  readonly source: ConfigSourceStatus;
  readonly lastReload?: ReloadResult;
  /** The last reload not applied (rejected, refused, rolled back or failed), until a later one succeeds. */
  readonly rejected?: ReloadResult;
  readonly reloadPending: boolean;
  /**
   * Warning Events of discovery or cleanup failures (DiscoveryFailed, VolumeFailedDelete) recorded
   * since the config serving now was applied, at most 999999; absent from older agents.
   */
  readonly errorsSinceApply?: number;
  readonly classes: readonly ClassStatus[];
  /**
   * Available PVs not reserved for a claim, per storage class: how many, their bytes, the largest
   * (docs/observability.md#volume-usage); absent from older agents.
   */
  readonly available?: Readonly<Record<string, AvailableClass>>;
  readonly cleanups: readonly CleanupStatus[];
  readonly lastPass?: {
    readonly at: number;
    /** The config the pass ran under: the serving generation's (absent from older agents). */
    readonly configHash?: string;
    readonly durationMs: number;
    readonly created: number;
    readonly deleted: number;
    /** Available or Bound PVs whose volume is not healthy (docs/disk-identity.md). */
    readonly abnormal: number;
    /** Released PVs quarantined: another disk is at their path. */
    readonly quarantined: number;
    /** Discovery entries not published: their disk is already a PV's, or is at two entries (absent: an older agent). */
    readonly conflicting?: number;
    /** Disks by rule (absent without rules): devices linked, skipped (settling not counted), planned. */
    readonly devices?: { readonly linked: number; readonly skipped: number; readonly planned: number };
  };
  /** Disks by rule: every device a rule selects and its verdict, at the last pass (absent without rules). */
  readonly devices?: readonly DeviceVerdict[];
  /** Process health for leak checks: open handles by type (timers, sockets, fs watchers…), memory. */
  readonly diagnostics?: {
    readonly activeResources: Readonly<Record<string, number>>;
    readonly rssBytes: number;
    readonly heapUsedBytes: number;
  };
}

/** GET /v1/config: the config the agent applies now. */
export interface AppliedConfigJson {
  readonly formatVersion: 1;
  readonly hash: string;
  readonly source: string;
  readonly generation: number;
  readonly config: ProvisionerConfig;
}

/** One line of GET /v1/events (newline-delimited JSON). */
export type AgentEvent =
  | { readonly type: 'status'; readonly at: number; readonly status: AgentStatusJson }
  | { readonly type: 'reload'; readonly at: number; readonly result: ReloadResult }
  | {
      readonly type: 'pass';
      readonly at: number;
      readonly generation: number;
      /** The config the pass ran under (absent from older agents). */
      readonly configHash?: string;
      readonly created: readonly string[];
      readonly deleted: readonly string[];
      readonly skipped: number;
      /** Available or Bound PVs whose volume is not healthy after this pass. */
      readonly abnormal: number;
      /** Released PVs quarantined after this pass. */
      readonly quarantined: number;
      /** AgentStatusJson.errorsSinceApply after this pass. */
      readonly errorsSinceApply?: number;
      /** AgentStatusJson.available after this pass. */
      readonly available?: Readonly<Record<string, AvailableClass>>;
    }
  | {
      readonly type: 'cleanup';
      readonly at: number;
      readonly cleanup: CleanupStatus;
      /** AgentStatusJson.errorsSinceApply after this change (a failed cleanup counts). */
      readonly errorsSinceApply?: number;
    }
  | {
      readonly type: 'log';
      readonly at: number;
      readonly level: string;
      readonly message: string;
      readonly fields: Readonly<Record<string, unknown>>;
    };

/** What the admin endpoint serves: the agent, or a fake in tests. */
export interface AdminTarget {
  status(): AgentStatusJson;
  appliedConfig(): AppliedConfigJson;
  reload(request: ReloadRequest): Promise<ReloadResult>;
  /** Live events; returns the unsubscribe function. */
  subscribe(listener: (event: AgentEvent) => void): () => void;
}
