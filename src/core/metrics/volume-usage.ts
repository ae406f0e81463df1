// Per-volume usage and per-class Available capacity (docs/observability.md#volume-usage). The
// volume health probe stores each statfs it runs (no extra pass); the gauges are computed from
// this node's PV cache and those samples when /metrics is read, so a PV gone, bound or released
// changes its series at the next scrape, with no pass in between. Per-volume series are capped
// per node: past the cap, PVs (by name order) get none, and a gauge says how many.
import type { PersistentVolumeView } from '../pv/cached.js';
import { capacityBytesOf } from '../pv/cached.js';
import type { FilesystemUsage } from '../node/volumes.js';
import type { Gauge, MetricsRegistry } from './registry.js';

const P = 'local_volume_provisioner';

/** Default cap on per-volume series of one node: 1,666 Filesystem PVs (6 series each), 10,000 Block PVs. */
export const DEFAULT_VOLUME_SERIES_LIMIT = 10_000;

/** Series a Filesystem PV with a statfs sample has (capacity, used, available, inodes ×3). */
export const SERIES_PER_FILESYSTEM_VOLUME = 6;

/** The last statfs of each volume, by PV name and UID: kept by the agent across reloads. */
export type VolumeUsageStore = Map<string, FilesystemUsage>;

/** A PV's key in the usage store (and the volume health's): its name and UID. */
export function volumeKey(pv: PersistentVolumeView): string {
  return `${pv.metadata.name}/${pv.metadata.uid ?? ''}`;
}

export interface AvailableClass {
  /** Available PVs of the class not reserved for a claim (no claimRef). */
  readonly volumes: number;
  /** Their capacities summed (the PVs' spec.capacity, what a claim is bound against). */
  readonly bytes: number;
  /** The largest of them: the largest claim this node can still take in this class. */
  readonly largestBytes: number;
}

/** `storageclass` → `volumeMode` → the Available PVs' count and bytes. */
export type AvailableByClass = Map<string, Map<string, AvailableClass>>;

/** Whether a claim can still be bound to this PV: Available, not being deleted, not reserved. */
export function isOpenForClaims(pv: PersistentVolumeView): boolean {
  return (
    pv.status?.phase === 'Available' && pv.metadata.deletionTimestamp === undefined && pv.spec.claimRef === undefined
  );
}

/** This node's Available PVs, per class and volume mode. */
export function availableByClass(pvs: readonly PersistentVolumeView[]): AvailableByClass {
  type Sum = { volumes: number; bytes: number; largestBytes: number };
  const sums = new Map<string, Map<string, Sum>>();
  const add = (pv: PersistentVolumeView): void => {
    if (!isOpenForClaims(pv)) return;
    const storageclass = pv.spec.storageClassName ?? '';
    const mode = pv.spec.volumeMode ?? 'Filesystem';
    let row = sums.get(storageclass);
    if (row === undefined) sums.set(storageclass, (row = new Map<string, Sum>()));
    let sum = row.get(mode);
    if (sum === undefined) row.set(mode, (sum = { volumes: 0, bytes: 0, largestBytes: 0 }));
    const bytes = capacityBytesOf(pv);
    sum.volumes += 1;
    sum.bytes += bytes;
    sum.largestBytes = Math.max(sum.largestBytes, bytes);
  };
  // forEach: no iteration result per PV under --jitless (this runs on every pass).
  pvs.forEach(add);
  return sums;
}

/** This node's Available PVs per class, volume modes merged (the status and its Lease), classes in name order. */
export function availableSummary(pvs: readonly PersistentVolumeView[]): Record<string, AvailableClass> {
  const out: Record<string, AvailableClass> = {};
  const byClass = availableByClass(pvs);
  for (const storageclass of [...byClass.keys()].sort()) {
    let sum: AvailableClass = { volumes: 0, bytes: 0, largestBytes: 0 };
    for (const a of byClass.get(storageclass)?.values() ?? [])
      sum = {
        volumes: sum.volumes + a.volumes,
        bytes: sum.bytes + a.bytes,
        largestBytes: Math.max(sum.largestBytes, a.largestBytes),
      };
    out[storageclass] = sum;
  }
  return out;
}

/** One PV's per-volume series: its labels, and its values (capacity only without a statfs sample). */
export interface VolumeRow {
  readonly labels: {
    readonly persistentvolume: string;
    readonly storageclass: string;
    readonly claim_namespace: string;
    readonly claim_name: string;
  };
  readonly capacityBytes: number;
  readonly usage?: FilesystemUsage;
}

export interface VolumeRows {
  readonly rows: readonly VolumeRow[];
  /** PVs past the cap: no per-volume series. */
  readonly omitted: number;
  readonly series: number;
}

/**
 * The per-volume rows of this node's Available and Bound PVs (those the health probe watches), in
 * name order, until `limit` series: a Filesystem PV with a sample counts 6, any other 1.
 */
export function volumeRows(pvs: Iterable<PersistentVolumeView>, usage: VolumeUsageStore, limit: number): VolumeRows {
  const watched = [...pvs].filter((pv) => {
    const phase = pv.status?.phase;
    return (phase === 'Available' || phase === 'Bound') && pv.metadata.deletionTimestamp === undefined;
  });
  watched.sort((a, b) => (a.metadata.name < b.metadata.name ? -1 : a.metadata.name > b.metadata.name ? 1 : 0));
  const rows: VolumeRow[] = [];
  let series = 0;
  let omitted = 0;
  for (const pv of watched) {
    const sample = pv.spec.volumeMode === 'Block' ? undefined : usage.get(volumeKey(pv));
    const cost = sample === undefined ? 1 : SERIES_PER_FILESYSTEM_VOLUME;
    if (omitted > 0 || series + cost > limit) {
      omitted += 1;
      continue;
    }
    series += cost;
    const claim = pv.status?.phase === 'Bound' ? pv.spec.claimRef : undefined;
    rows.push({
      labels: {
        persistentvolume: pv.metadata.name,
        storageclass: pv.spec.storageClassName ?? '',
        claim_namespace: claim?.namespace ?? '',
        claim_name: claim?.name ?? '',
      },
      capacityBytes: sample?.capacityBytes ?? capacityBytesOf(pv),
      ...(sample !== undefined ? { usage: sample } : {}),
    });
  }
  return { rows, omitted, series };
}

export interface VolumeUsageSources {
  /** This node's PVs (the serving generation's cache), read at scrape time. */
  readonly persistentVolumes: () => Iterable<PersistentVolumeView>;
  readonly usage: VolumeUsageStore;
  /** The node's name: a label of the per-class gauges, so "which nodes" needs no relabelling. */
  readonly node: () => string;
  /** Cap on per-volume series (0: none at all). */
  readonly limit: number;
}

const VOLUME_LABELS = ['persistentvolume', 'storageclass', 'claim_namespace', 'claim_name'] as const;
const CLASS_LABELS = ['node', 'storageclass', 'mode'] as const;

type UsageField = Exclude<keyof FilesystemUsage, 'capacityBytes'>;

/** Registers the per-volume and per-class gauges; all of them are filled by the first one's collect. */
export function registerVolumeUsageMetrics(registry: MetricsRegistry, sources: VolumeUsageSources): void {
  const usageGauges: [Gauge, UsageField][] = [];
  // Registered after the capacity gauge (rendered first, its collect fills them all).
  const later: { omitted?: Gauge; classes?: { volumes: Gauge; bytes: Gauge; largest: Gauge } } = {};
  const fill = (capacity: Gauge): void => {
    const pvs = [...sources.persistentVolumes()];
    const { rows, omitted } = volumeRows(pvs, sources.usage, sources.limit);
    for (const g of [capacity, ...usageGauges.map(([g]) => g)]) g.reset();
    for (const row of rows) {
      capacity.set(row.labels, row.capacityBytes);
      const { usage } = row;
      if (usage !== undefined) for (const [g, field] of usageGauges) g.set(row.labels, usage[field]);
    }
    later.omitted?.set({}, omitted);
    const classGauges = later.classes;
    if (classGauges === undefined) return;
    for (const g of Object.values(classGauges)) g.reset();
    const node = sources.node();
    for (const [storageclass, row] of availableByClass(pvs)) {
      for (const [mode, a] of row) {
        const labels = { node, storageclass, mode };
        classGauges.volumes.set(labels, a.volumes);
        classGauges.bytes.set(labels, a.bytes);
        classGauges.largest.set(labels, a.largestBytes);
      }
    }
  };
  registry.gauge(
    `${P}_volume_capacity_bytes`,
    'Capacity of each Available or Bound PV of this node: its filesystem statfs says (volume health probe), else (Block, or not probed yet) the PV spec.',
    VOLUME_LABELS,
    fill,
  );
  const usage = (name: string, help: string, field: UsageField): void => {
    usageGauges.push([registry.gauge(`${P}_${name}`, help, VOLUME_LABELS), field]);
  };
  usage('volume_used_bytes', 'Bytes used on the filesystem of each PV with its own filesystem (statfs).', 'usedBytes');
  usage(
    'volume_available_bytes',
    'Bytes available to unprivileged users on the filesystem of each PV with its own filesystem (statfs).',
    'availableBytes',
  );
  usage('volume_inodes', 'Inodes of the filesystem of each PV with its own filesystem (statfs).', 'inodes');
  usage('volume_inodes_used', 'Inodes used on the filesystem of each PV with its own filesystem.', 'inodesUsed');
  usage('volume_inodes_free', 'Inodes free on the filesystem of each PV with its own filesystem.', 'inodesFree');
  later.omitted = registry.gauge(
    `${P}_volume_stats_omitted`,
    'PVs of this node given no per-volume series because the per-node series cap (--volume-stats-max-series) was reached.',
  );
  later.classes = {
    volumes: registry.gauge(
      `${P}_available_persistentvolumes`,
      'Available PVs of this node not reserved for a claim, per storage class and volume mode.',
      CLASS_LABELS,
    ),
    bytes: registry.gauge(
      `${P}_available_capacity_bytes`,
      'Capacity of the Available PVs of this node not reserved for a claim, summed per storage class and volume mode.',
      CLASS_LABELS,
    ),
    largest: registry.gauge(
      `${P}_available_largest_bytes`,
      'Capacity of the largest Available PV of this node not reserved for a claim, per storage class and volume mode: the largest claim the node can still take.',
      CLASS_LABELS,
    ),
  };
}
