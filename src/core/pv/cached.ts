// What this node's PV cache keeps of a PersistentVolume: the fields the agent reads, nothing else
// (client-go's informer transform). A whole PV as the server sends it costs ~2 KiB of heap once
// its managedFields are gone (finalizers, timestamps, node affinity, access modes, the kind); the
// projection ~0.7 KiB, and the strings every PV of a node repeats (its node label, provisioner
// name, node UID, class, phase) are shared. Measured in docs/benchmarks.md ("RSS with 1,000 PVs").
//
// A projection is never written back: it lacks fields an update would then clear. Its type carries
// a brand that the write methods refuse (see NotProjected), and the objects carry it at run time
// (a symbol key: JSON never sends it, a spread copy keeps it), so the REST and memory clusters
// refuse a projection, or a copy of one, in an update.
import { PROJECTED } from '../kube/objects.js';
import type { ObjectMeta, PersistentVolume } from '../kube/objects.js';
import { parseQuantity } from '../kube/quantity.js';

/**
 * The fields of a PV its readers read: what both a whole PV and a cached projection have. The
 * optional mark keeps a view from passing for a whole PersistentVolume (whose type forbids it).
 */
export interface PersistentVolumeView {
  readonly [PROJECTED]?: true;
  readonly metadata: Readonly<
    Pick<ObjectMeta, 'name' | 'uid' | 'resourceVersion' | 'deletionTimestamp' | 'labels' | 'annotations'>
  >;
  readonly spec: Readonly<
    Pick<
      PersistentVolume['spec'],
      | 'capacity'
      | 'persistentVolumeReclaimPolicy'
      | 'storageClassName'
      | 'volumeMode'
      | 'local'
      | 'hostPath'
      | 'claimRef'
    >
  >;
  readonly status?: Readonly<Pick<NonNullable<PersistentVolume['status']>, 'phase'>>;
}

/** A PV as this node's cache holds it: a projection, never to be written back. */
export interface CachedPersistentVolume extends PersistentVolumeView {
  readonly [PROJECTED]: true;
}

/** Parsed once per PV object (an informer's unchanged PV is the same object): passes read it every time. */
const capacities = new WeakMap<PersistentVolumeView, number>();

/** The PV's spec.capacity.storage in bytes (0 when absent). */
export function capacityBytesOf(pv: PersistentVolumeView): number {
  let bytes = capacities.get(pv);
  if (bytes === undefined) {
    bytes = parseQuantity(pv.spec.capacity?.['storage'] ?? '0');
    capacities.set(pv, bytes);
  }
  return bytes;
}

/** Whether an object is (a copy of) a cached projection. */
export function isProjected(object: object): boolean {
  return PROJECTED in object;
}

/** Distinct strings shared among the cached PVs of one cache; beyond this, strings are kept as they come. */
const MAX_SHARED_STRINGS = 1_024;

/**
 * Shares equal strings among cached objects: JSON parsing makes a new string for every value of
 * every PV. Bounded, so values that do not repeat (if they were passed) cannot make it grow for ever.
 */
export class StringPool {
  private readonly strings = new Map<string, string>();

  share(value: string): string;
  share(value: string | undefined): string | undefined;
  share(value: string | undefined): string | undefined {
    if (value === undefined) return undefined;
    const known = this.strings.get(value);
    if (known !== undefined) return known;
    if (this.strings.size < MAX_SHARED_STRINGS) this.strings.set(value, value);
    return value;
  }

  get size(): number {
    return this.strings.size;
  }
}

/** Annotations and labels: keys and short values shared (long values such as identities seldom repeat). */
function sharedRecord(
  pool: StringPool,
  record: Readonly<Record<string, string>> | undefined,
): Record<string, string> | undefined {
  if (record === undefined) return undefined;
  // fromEntries defines each key as an own property, as JSON.parse did: an assignment to a key
  // `__proto__` would set the prototype instead (the apiserver refuses such a key; the cache need not care).
  return Object.fromEntries(
    Object.entries(record).map(([key, value]) => [pool.share(key), value.length <= 100 ? pool.share(value) : value]),
  );
}

/** The entries of `fields` that are defined (an absent field stays absent, as in the PV). */
function defined<T extends object>(fields: T): { [K in keyof T]?: Exclude<T[K], undefined> } {
  const out: { [K in keyof T]?: Exclude<T[K], undefined> } = {};
  for (const key of Object.keys(fields) as (keyof T)[]) {
    const value = fields[key];
    if (value !== undefined) out[key] = value as Exclude<T[keyof T], undefined>;
  }
  return out;
}

/** The cache's projection of a PV: exactly the fields of PersistentVolumeView, repeated strings shared. */
export function projectPersistentVolume(pv: PersistentVolume, pool: StringPool): CachedPersistentVolume {
  const { metadata, spec, status } = pv;
  return {
    [PROJECTED]: true,
    metadata: {
      name: metadata.name,
      ...defined({
        uid: metadata.uid,
        resourceVersion: metadata.resourceVersion,
        deletionTimestamp: metadata.deletionTimestamp,
        labels: sharedRecord(pool, metadata.labels),
        annotations: sharedRecord(pool, metadata.annotations),
      }),
    },
    spec: defined({
      capacity: sharedRecord(pool, spec.capacity),
      persistentVolumeReclaimPolicy: pool.share(spec.persistentVolumeReclaimPolicy),
      storageClassName: pool.share(spec.storageClassName),
      volumeMode: pool.share(spec.volumeMode),
      local: spec.local && { path: spec.local.path, ...defined({ fsType: pool.share(spec.local.fsType) }) },
      hostPath: spec.hostPath && { ...spec.hostPath },
      claimRef: spec.claimRef && { ...spec.claimRef },
    }),
    ...(status !== undefined ? { status: defined({ phase: status.phase }) } : {}),
  };
}
