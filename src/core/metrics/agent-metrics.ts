// The agent's metrics. Names and labels of upstream's series are kept (sig-storage-local-static-
// provisioner pkg/metrics); the capacity gauge's meaning is fixed (docs/migration-from-upstream.md).
import type { PersistentVolumeView } from '../pv/cached.js';
import { capacityBytesOf } from '../pv/cached.js';
import type { Counter, Gauge, Histogram } from './registry.js';
import { registerProcessMetrics } from './process-metrics.js';
import { MetricsRegistry } from './registry.js';
import { nodeProcessHost } from '../process-host.js';
import type { ProcessHost } from '../process-host.js';
import { DEFAULT_VOLUME_SERIES_LIMIT, registerVolumeUsageMetrics } from './volume-usage.js';
import type { VolumeUsageStore } from './volume-usage.js';

/** Every volume mode, and every mode with each cleanup method: the series declared at 0 before their first event. */
const MODES = [{ mode: 'Filesystem' }, { mode: 'Block' }];
const MODES_AND_METHODS = MODES.flatMap((m) => [
  { ...m, type: 'process' },
  { ...m, type: 'job' },
]);

const P = 'local_volume_provisioner';

export interface AgentMetrics {
  readonly registry: MetricsRegistry;
  readonly discoveryTotal: Counter;
  readonly discoveryDuration: Histogram;
  readonly capacityBytes: Gauge;
  readonly apiRequests: Counter;
  readonly apiRequestsFailed: Counter;
  readonly apiRequestDuration: Histogram;
  readonly skippedEntries: Gauge;
  readonly discoveryPassDuration: Histogram;
  readonly discoveryPasses: Counter;
  readonly managedVolumes: Gauge;
  readonly adoptedVolumes: Counter;
  readonly deleteTotal: Counter;
  readonly deleteFailed: Counter;
  /** 1 per PV held back because the disk at its path is not the one it was published for. */
  readonly quarantinedVolumes: Gauge;
  /** Disks by rule: the devices a rule selects, by class and state (linked, planned, skipped reason). */
  readonly ruleDevices: Gauge;
  /** 1 per Available or Bound PV whose volume is not healthy, by reason (volume health). */
  readonly abnormalVolumes: Gauge;
  /** Available PVs deleted by the missing-disk policy (`deleteMissingAfter`), by class and reason. */
  readonly missingVolumesDeleted: Counter;
  readonly deleteDuration: Histogram;
  readonly eventsDropped: Counter;
  /** Where the proctable gauges read their values (the process-level cleanup table). */
  cleanupStats: () => { running: number; succeeded: number; failed: number };
  /**
   * Where the capacity and managed-volume gauges read this node's PVs at scrape time (the serving
   * generation's cache): an idle pass computes nothing for an agent nobody scrapes.
   */
  managedPersistentVolumes: () => Iterable<PersistentVolumeView>;
  /** The last statfs of each volume (volume health probe), read by the per-volume gauges at scrape time. */
  readonly volumeUsage: VolumeUsageStore;
  /** This node's name, for the per-class Available gauges' `node` label (set by the agent). */
  nodeName: () => string;
}

/** Sums per (storage class, second label) of this node's PVs, for the two volume gauges. */
function volumeTotals(
  pvs: Iterable<PersistentVolumeView>,
  second: (pv: PersistentVolumeView) => string,
  value: (pv: PersistentVolumeView) => number,
): Map<string, Map<string, number>> {
  const totals = new Map<string, Map<string, number>>();
  for (const pv of pvs) {
    const storageclass = pv.spec.storageClassName ?? '';
    let row = totals.get(storageclass);
    if (row === undefined) totals.set(storageclass, (row = new Map<string, number>()));
    const key = second(pv);
    row.set(key, (row.get(key) ?? 0) + value(pv));
  }
  return totals;
}

/** The cleanup table's gauges (upstream's names; succeeded and failed are cumulative, as upstream). */
const PROCTABLE = [
  ['running', 'In-process cleanups running.'],
  ['succeeded', 'Cleanups that succeeded since the start (cumulative, as upstream).'],
  ['failed', 'Cleanups that failed since the start (cumulative, as upstream).'],
] as const;

type Managed = () => Iterable<PersistentVolumeView>;

/** The PVs discovery creates and the capacity this node publishes (upstream's series). */
function publishingMetrics(
  registry: MetricsRegistry,
  managed: Managed,
): Pick<AgentMetrics, 'discoveryTotal' | 'discoveryDuration' | 'capacityBytes'> {
  return {
    discoveryTotal: registry
      .counter(`${P}_persistentvolume_discovery_total`, 'Total number of PersistentVolumes created by discovery.', [
        'mode',
      ])
      .declare(MODES),
    discoveryDuration: registry
      .histogram(
        `${P}_persistentvolume_discovery_duration_seconds`,
        'Time from finding a volume to its PersistentVolume being created.',
        ['mode'],
      )
      .declare(MODES),
    capacityBytes: registry.gauge(
      `${P}_persistentvolume_capacity_bytes`,
      'Capacity of the PersistentVolumes this agent manages, per storage class and volume mode.',
      ['storageclass', 'mode'],
      (g) => {
        g.reset();
        const totals = volumeTotals(managed(), (pv) => pv.spec.volumeMode ?? 'Filesystem', capacityBytesOf);
        for (const [storageclass, row] of totals) for (const [mode, bytes] of row) g.set({ storageclass, mode }, bytes);
      },
    ),
  };
}

/** The PersistentVolume API requests (upstream's series). */
function apiServerMetrics(
  registry: MetricsRegistry,
): Pick<AgentMetrics, 'apiRequests' | 'apiRequestsFailed' | 'apiRequestDuration'> {
  return {
    apiRequests: registry.counter(`${P}_apiserver_requests_total`, 'PersistentVolume API requests.', ['method']),
    apiRequestsFailed: registry.counter(
      `${P}_apiserver_requests_failed_total`,
      'Failed PersistentVolume API requests.',
      ['method'],
    ),
    apiRequestDuration: registry.histogram(
      `${P}_apiserver_requests_duration_seconds`,
      'PersistentVolume API request latency.',
      ['method'],
    ),
  };
}

/** Discovery passes: what they skipped, how long they took, and the PVs of this node by phase. */
function discoveryPassMetrics(
  registry: MetricsRegistry,
  managed: Managed,
): Pick<AgentMetrics, 'skippedEntries' | 'discoveryPassDuration' | 'discoveryPasses' | 'managedVolumes'> {
  return {
    skippedEntries: registry.gauge(
      `${P}_discovery_skipped_entries`,
      'Discovery directory entries not published in the last pass, by reason.',
      ['storageclass', 'reason'],
    ),
    discoveryPassDuration: registry.histogram(
      `${P}_discovery_pass_duration_seconds`,
      'Duration of one discovery pass.',
      [],
    ),
    discoveryPasses: registry
      .counter(`${P}_discovery_passes_total`, 'Discovery passes, by result.', ['result'])
      .declare([{ result: 'ok' }, { result: 'problems' }, { result: 'error' }]),
    managedVolumes: registry.gauge(
      `${P}_managed_persistentvolumes`,
      'PersistentVolumes of this node, by storage class and phase.',
      ['storageclass', 'phase'],
      (g) => {
        g.reset();
        const totals = volumeTotals(
          managed(),
          (pv) => pv.status?.phase ?? 'Pending',
          () => 1,
        );
        for (const [storageclass, row] of totals) for (const [phase, n] of row) g.set({ storageclass, phase }, n);
      },
    ),
  };
}

/** PVs deleted after their cleanup, or not (upstream's series). */
function deletionMetrics(registry: MetricsRegistry): Pick<AgentMetrics, 'deleteTotal' | 'deleteFailed'> {
  return {
    deleteTotal: registry
      .counter(`${P}_persistentvolume_delete_total`, 'PersistentVolumes deleted after a successful cleanup.', [
        'mode',
        'type',
      ])
      .declare(MODES_AND_METHODS),
    deleteFailed: registry
      .counter(`${P}_persistentvolume_delete_failed_total`, 'Failed cleanups or PV deletions.', ['mode', 'type'])
      .declare(MODES_AND_METHODS),
  };
}

/** The disks: what the device rules select, and the PVs whose disk is missing, unhealthy or another one. */
function diskMetrics(
  registry: MetricsRegistry,
): Pick<AgentMetrics, 'ruleDevices' | 'quarantinedVolumes' | 'abnormalVolumes' | 'missingVolumesDeleted'> {
  return {
    ruleDevices: registry.gauge(
      `${P}_rule_devices`,
      'Block devices a device rule selects, by storage class and state: linked, carved, link and carve (apply, this pass), planned (plan mode), or the reason one is skipped (docs/disk-rules.md).',
      ['storageclass', 'state'],
    ),
    quarantinedVolumes: registry.gauge(
      `${P}_persistentvolume_quarantined`,
      'PVs not cleaned, deleted or republished because the disk at their path is not the one they were published for (docs/disk-identity.md).',
      ['persistentvolume', 'reason'],
    ),
    abnormalVolumes: registry.gauge(
      `${P}_volume_health_abnormal`,
      'Available or Bound PVs whose volume is not healthy: not mounted, device or path missing, unreadable, or another disk at the path (docs/disk-identity.md).',
      ['persistentvolume', 'reason'],
    ),
    missingVolumesDeleted: registry.counter(
      `${P}_persistentvolume_missing_deleted_total`,
      'Available PVs deleted because their disk was missing for the class deleteMissingAfter (docs/disk-identity.md).',
      ['storageclass', 'reason'],
    ),
  };
}

/** From a cleanup's start to its PV's deletion (upstream's series). */
function deletionDurationMetrics(registry: MetricsRegistry): Pick<AgentMetrics, 'deleteDuration'> {
  return {
    deleteDuration: registry.histogram(
      `${P}_persistentvolume_delete_duration_seconds`,
      'From the start of a cleanup to the deletion of its PersistentVolume.',
      ['mode', 'type', 'capacity', 'cleanup_command'],
      [1, 5, 10, 30, 60, 300, 600, 1800, 3600, 7200, 14400],
    ),
  };
}

/** Events the agent could not write, and upstream's PVs it took over. */
function eventAndAdoptionMetrics(registry: MetricsRegistry): Pick<AgentMetrics, 'eventsDropped' | 'adoptedVolumes'> {
  return {
    eventsDropped: registry.counter(
      `${P}_events_dropped_total`,
      'Kubernetes Events dropped unwritten: the queue was full while the apiserver was slow, or left at shutdown.',
      [],
    ),
    adoptedVolumes: registry.counter(
      `${P}_adopted_persistentvolumes_total`,
      'Upstream-created PersistentVolumes labelled for this agent.',
      [],
    ),
  };
}

export function createAgentMetrics(
  registry = new MetricsRegistry(),
  options: { startTimeSeconds?: number; host?: ProcessHost; volumeSeriesLimit?: number } = {},
): AgentMetrics {
  const start = options.startTimeSeconds ?? Date.now() / 1000;
  const holder: { metrics?: AgentMetrics } = {};
  const stats = (): { running: number; succeeded: number; failed: number } =>
    holder.metrics?.cleanupStats() ?? { running: 0, succeeded: 0, failed: 0 };
  const managed = (): Iterable<PersistentVolumeView> => holder.metrics?.managedPersistentVolumes() ?? [];
  for (const [key, help] of PROCTABLE)
    registry.gauge(`${P}_proctable_${key}`, help, [], (g) => {
      g.set({}, stats()[key]);
    });
  registerProcessMetrics(registry, { startTimeSeconds: start, host: options.host ?? nodeProcessHost });
  const volumeUsage: VolumeUsageStore = new Map();
  registerVolumeUsageMetrics(registry, {
    persistentVolumes: managed,
    usage: volumeUsage,
    node: () => holder.metrics?.nodeName() ?? '',
    limit: options.volumeSeriesLimit ?? DEFAULT_VOLUME_SERIES_LIMIT,
  });
  // In this order: /metrics lists the series in the order they are registered.
  const metrics: AgentMetrics = {
    registry,
    ...publishingMetrics(registry, managed),
    ...apiServerMetrics(registry),
    ...discoveryPassMetrics(registry, managed),
    ...deletionMetrics(registry),
    ...diskMetrics(registry),
    ...deletionDurationMetrics(registry),
    ...eventAndAdoptionMetrics(registry),
    cleanupStats: () => ({ running: 0, succeeded: 0, failed: 0 }),
    managedPersistentVolumes: () => [],
    volumeUsage,
    nodeName: () => '',
  };
  holder.metrics = metrics;
  return metrics;
}
