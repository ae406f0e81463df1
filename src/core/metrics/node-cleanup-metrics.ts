// The node cleanup's metrics. The four counters keep upstream's names and labels
// (sig-storage-local-static-provisioner pkg/metrics/node-cleanup): they count delete attempts, as
// upstream's do. The gauges are this project's own.
import type { Counter, Gauge } from './registry.js';
import { MetricsRegistry } from './registry.js';

const P = 'local_volume_node_cleanup';

export interface NodeCleanupMetrics {
  readonly registry: MetricsRegistry;
  /** `phase`: the PV's phase when it was deleted (Available, Released). */
  readonly volumeDeletes: Counter;
  readonly volumeDeleteFailures: Counter;
  readonly claimDeletes: Counter;
  readonly claimDeleteFailures: Counter;
  /** 1 while this replica holds the leader Lease. */
  readonly leader: Gauge;
  /** Local PVs of the opted-in classes that no Node can use (as of the last pass). */
  readonly strandedVolumes: Gauge;
  readonly eventsDropped: Counter;
}

export function createNodeCleanupMetrics(registry = new MetricsRegistry()): NodeCleanupMetrics {
  return {
    registry,
    volumeDeletes: registry.counter(
      `${P}_persistentvolume_delete_total`,
      'PersistentVolumes of deleted Nodes the cleanup tried to delete, by phase.',
      ['phase'],
    ),
    volumeDeleteFailures: registry.counter(
      `${P}_persistentvolume_delete_failed_total`,
      'PersistentVolume deletions that failed, by phase.',
      ['phase'],
    ),
    claimDeletes: registry.counter(
      `${P}_persistentvolumeclaim_delete_total`,
      'PersistentVolumeClaims bound to PVs of deleted Nodes the cleanup tried to delete.',
    ),
    claimDeleteFailures: registry.counter(
      `${P}_persistentvolumeclaim_delete_failed_total`,
      'PersistentVolumeClaim deletions that failed.',
    ),
    leader: registry.gauge(`${P}_leader`, '1 while this replica is the elected leader and acts, else 0.'),
    strandedVolumes: registry.gauge(
      `${P}_stranded_persistentvolumes`,
      'Local PVs of the opted-in StorageClasses that no Node can use, as of the last pass.',
    ),
    eventsDropped: registry.counter(`${P}_events_dropped_total`, 'Kubernetes Events dropped (queue full or shutdown).'),
  };
}
