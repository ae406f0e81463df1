// The agent as its observers see it: the live event stream (GET /v1/events of the admin endpoint,
// the dashboard) and the JSON of GET /v1/status and /v1/config, built from what the supervisor and
// the reload machine hold. Nothing here changes the agent.
import type { DeviceVerdict } from '../disk-rules/decide.js';
import type { Clock } from '../clock.js';
import type { ConfigSourceStatus } from '../config/source/port.js';
import { sourceLabel } from '../config/source/port.js';
import type { LoadedConfig } from '../config/source/port.js';
import type { CleanupEntry } from '../cleanup/table.js';
import type { PersistentVolumeView } from '../pv/cached.js';
import type { LogFields, Logger, LogLevel } from '../log.js';
import type { ProcessHost } from '../process-host.js';
import { availableSummary } from '../metrics/volume-usage.js';
import type { GenerationStatus, PassSummary } from './generation.js';
import type {
  AgentEvent,
  AgentStatusJson,
  AppliedConfigJson,
  ClassStatus,
  CleanupStatus,
  ReloadResult,
} from './reload-types.js';

/** The agent's live events: who listens, and one emit that no listener can break. */
export class AgentEventStream {
  private readonly listeners = new Set<(event: AgentEvent) => void>();

  /** Returns the unsubscribe function. */
  subscribe(listener: (event: AgentEvent) => void): () => void {
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
  }

  /** Whether anyone listens (an event nobody reads need not be computed). */
  get listening(): boolean {
    return this.listeners.size > 0;
  }

  emit(event: AgentEvent): void {
    for (const listener of this.listeners) {
      try {
        listener(event);
      } catch {
        // A broken listener never breaks the agent.
      }
    }
  }

  clear(): void {
    this.listeners.clear();
  }
}

/** Forwards records to the real logger and, but for debug ones, to the agent's event stream. */
export class TeeLogger implements Logger {
  constructor(
    private readonly inner: Logger,
    private readonly stream: AgentEventStream,
    private readonly clock: Clock,
  ) {}
  log(level: LogLevel, text: string, fields: LogFields = {}): void {
    this.inner.log(level, text, fields);
    if (level !== 'debug') this.stream.emit({ type: 'log', at: this.clock.now(), level, message: text, fields });
  }
}

/** Ready once the generation serving has synced its caches and finished its first discovery pass. */
export function readinessOf(generation: GenerationStatus): { ok: boolean; reason: string } {
  if (!generation.synced) return { ok: false, reason: 'caches not synced' };
  if (!generation.ready) return { ok: false, reason: 'first discovery pass not done' };
  return { ok: true, reason: '' };
}

/** What GET /v1/status shows, gathered by the supervisor. */
export interface StatusInputs {
  readonly node: string;
  readonly version: string;
  readonly startedAt: number;
  readonly now: number;
  readonly generation: GenerationStatus;
  /** This node's PVs, as the serving generation's cache holds them. */
  readonly persistentVolumes: readonly PersistentVolumeView[];
  readonly applied: LoadedConfig;
  readonly onDiskHash: string | undefined;
  readonly subPath: boolean;
  readonly source: ConfigSourceStatus;
  readonly lastReload: ReloadResult | undefined;
  readonly rejected: ReloadResult | undefined;
  readonly reloadPending: boolean;
  readonly errorsSinceApply: number;
  readonly cleanups: readonly CleanupEntry[];
  readonly host: Pick<ProcessHost, 'pid' | 'activeResources' | 'memoryUsage'>;
}

export function statusJson(s: StatusInputs): AgentStatusJson {
  const { lastPass } = s.generation;
  return {
    formatVersion: 1,
    node: s.node,
    version: s.version,
    pid: s.host.pid,
    startedAt: s.startedAt,
    now: s.now,
    generation: s.generation.number,
    ready: readinessOf(s.generation).ok,
    config: {
      source: sourceLabel(s.source.inUse),
      appliedHash: s.applied.hash,
      ...(s.onDiskHash !== undefined ? { onDiskHash: s.onDiskHash } : {}),
      subPath: s.subPath,
    },
    source: s.source,
    ...(s.lastReload ? { lastReload: s.lastReload } : {}),
    ...(s.rejected ? { rejected: s.rejected } : {}),
    reloadPending: s.reloadPending,
    errorsSinceApply: s.errorsSinceApply,
    classes: classes(s.applied, s.persistentVolumes, lastPass),
    available: availableSummary(s.persistentVolumes),
    cleanups: s.cleanups.map(cleanupStatus),
    ...(lastPass
      ? {
          lastPass: {
            at: lastPass.at,
            configHash: s.generation.configHash,
            durationMs: lastPass.durationMs,
            created: lastPass.created.length,
            deleted: lastPass.reclaim.deleted.length,
            abnormal: lastPass.health.abnormal.length,
            quarantined: lastPass.reclaim.quarantined.length,
            conflicting: lastPass.skipped.filter((s) => s.reason === 'identity-conflict').length,
            ...(lastPass.devices !== undefined ? { devices: deviceCounts(lastPass.devices.verdicts) } : {}),
          },
          ...(lastPass.devices !== undefined ? { devices: lastPass.devices.verdicts } : {}),
        }
      : {}),
    diagnostics: diagnostics(s.host),
  };
}

/** Devices linked (now or before), skipped for a reason (settling is not one), and planned (plan mode). */
function deviceCounts(verdicts: readonly DeviceVerdict[]): { linked: number; skipped: number; planned: number } {
  const count = (test: (v: DeviceVerdict) => boolean): number => verdicts.filter(test).length;
  return {
    linked: count(
      (v) => v.kind === 'linked' || v.kind === 'carved' || ((v.kind === 'link' || v.kind === 'carve') && v.apply),
    ),
    skipped: count((v) => v.kind === 'skip' && v.reason !== 'settling'),
    planned: count((v) => (v.kind === 'link' || v.kind === 'carve') && !v.apply),
  };
}

/** Each class of the applied config: its PVs (by path), what the last pass skipped, its problem. */
function classes(
  applied: LoadedConfig,
  pvs: readonly PersistentVolumeView[],
  lastPass: PassSummary | undefined,
): ClassStatus[] {
  const conditions = new Map<string, { reason: string; message: string }>();
  for (const a of lastPass?.health.abnormal ?? []) conditions.set(a.pv, { reason: a.reason, message: a.message });
  for (const q of lastPass?.reclaim.quarantined ?? [])
    conditions.set(q.pv, { reason: `quarantined: ${q.reason}`, message: q.message });
  const conditionOf = (pv: string): { condition?: { reason: string; message: string } } => {
    const condition = conditions.get(pv);
    return condition !== undefined ? { condition } : {};
  };
  return Object.entries(applied.config.storageClassMap).map(([name, c]) => {
    const problem = lastPass?.classProblems.find((p) => p.className === name)?.message;
    return {
      name,
      hostDir: c.hostDir,
      mountDir: c.mountDir,
      persistentVolumes: pvs
        .filter((pv) => pv.spec.storageClassName === name)
        .map((pv) => ({
          name: pv.metadata.name,
          path: pv.spec.local?.path ?? '',
          capacity: pv.spec.capacity?.['storage'] ?? '',
          phase: pv.metadata.deletionTimestamp !== undefined ? 'Terminating' : (pv.status?.phase ?? 'Pending'),
          ...(pv.spec.claimRef?.name !== undefined
            ? { claim: `${pv.spec.claimRef.namespace ?? ''}/${pv.spec.claimRef.name}` }
            : {}),
          ...conditionOf(pv.metadata.name),
        }))
        .sort((a, b) => (a.path < b.path ? -1 : 1)),
      skipped: (lastPass?.skipped ?? [])
        .filter((s) => s.className === name)
        .map((s) => ({ entry: s.entry, reason: s.reason, message: s.message })),
      ...(problem !== undefined ? { problem } : {}),
    };
  });
}

/** GET /v1/config. */
export function appliedConfigJson(applied: LoadedConfig, generation: number): AppliedConfigJson {
  return {
    formatVersion: 1,
    hash: applied.hash,
    source: applied.source.path,
    generation,
    config: applied.config,
  };
}

export function passEvent(
  generation: number,
  configHash: string,
  pass: PassSummary,
  errorsSinceApply?: number,
  persistentVolumes?: readonly PersistentVolumeView[],
): AgentEvent {
  return {
    type: 'pass',
    at: pass.at,
    generation,
    configHash,
    created: pass.created,
    deleted: pass.reclaim.deleted,
    skipped: pass.skipped.length,
    abnormal: pass.health.abnormal.length,
    quarantined: pass.reclaim.quarantined.length,
    ...(errorsSinceApply !== undefined ? { errorsSinceApply } : {}),
    ...(persistentVolumes !== undefined ? { available: availableSummary(persistentVolumes) } : {}),
  };
}

export function cleanupStatus(e: CleanupEntry): CleanupStatus {
  return {
    pv: e.pvName,
    method: e.method,
    state: e.state,
    startedAt: e.startedAt,
    attempts: e.attempts,
    ...(e.lastError !== undefined ? { lastError: e.lastError } : {}),
    ...(e.retryAt !== undefined ? { retryAt: e.retryAt } : {}),
  };
}

function diagnostics(
  host: Pick<ProcessHost, 'activeResources' | 'memoryUsage'>,
): NonNullable<AgentStatusJson['diagnostics']> {
  const activeResources: Record<string, number> = {};
  for (const type of host.activeResources()) activeResources[type] = (activeResources[type] ?? 0) + 1;
  const memory = host.memoryUsage();
  return { activeResources, rssBytes: memory.rss, heapUsedBytes: memory.heapUsed };
}
