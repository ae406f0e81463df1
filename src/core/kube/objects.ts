// The Kubernetes objects the agent reads and writes, as they travel in JSON (timestamps are
// RFC 3339 strings, quantities are strings). Only the fields the agent uses are typed.

export interface ObjectMeta {
  name: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: OwnerReference[];
  finalizers?: string[];
  /** Who wrote which fields (server-set); `manager` is the writer's fieldManager. */
  managedFields?: ManagedFieldsEntry[];
}

export interface ManagedFieldsEntry {
  manager?: string;
  operation?: string;
  subresource?: string;
  time?: string;
}

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

export interface NodeSelectorRequirement {
  key: string;
  operator: string;
  values?: string[];
}

export interface NodeSelectorTerm {
  matchExpressions?: NodeSelectorRequirement[];
  matchFields?: NodeSelectorRequirement[];
}

export interface ObjectReference {
  apiVersion?: string;
  kind?: string;
  name?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
}

/**
 * Marks a cache's projection of an object (pv/cached.ts), in its type and at run time: it lacks
 * fields, so it is never written back. A whole object's type forbids the mark, so a projection is
 * not taken for one.
 */
export const PROJECTED: unique symbol = Symbol.for('local-volume-provisioner/projected');

/** Throws when a cache's projection (or a copy of one) is about to be written: it lacks fields the write would clear. */
export function refuseProjection(object: unknown): void {
  if (typeof object === 'object' && object !== null && PROJECTED in object)
    throw new TypeError("a cache's projection is not written back: read the object from the server first");
}

export type PersistentVolumePhase = 'Pending' | 'Available' | 'Bound' | 'Released' | 'Failed';

export interface PersistentVolume {
  /** A projection is not a PersistentVolume (see PROJECTED). */
  readonly [PROJECTED]?: never;
  apiVersion?: 'v1';
  kind?: 'PersistentVolume';
  metadata: ObjectMeta;
  spec: {
    capacity?: Record<string, string>;
    accessModes?: string[];
    persistentVolumeReclaimPolicy?: string;
    storageClassName?: string;
    volumeMode?: string;
    mountOptions?: string[];
    local?: { path: string; fsType?: string };
    hostPath?: { path: string; type?: string };
    nodeAffinity?: { required?: { nodeSelectorTerms: NodeSelectorTerm[] } };
    claimRef?: ObjectReference;
  };
  status?: { phase?: PersistentVolumePhase; message?: string; reason?: string };
}

export interface StorageClass {
  apiVersion?: 'storage.k8s.io/v1';
  kind?: 'StorageClass';
  metadata: ObjectMeta;
  provisioner: string;
  reclaimPolicy?: string;
  mountOptions?: string[];
  volumeBindingMode?: string;
}

export interface Taint {
  key: string;
  value?: string;
  effect: string;
  timeAdded?: string;
}

export interface Node {
  apiVersion?: 'v1';
  kind?: 'Node';
  metadata: ObjectMeta;
  spec?: { taints?: Taint[]; unschedulable?: boolean };
}

export interface ConfigMap {
  apiVersion?: 'v1';
  kind?: 'ConfigMap';
  metadata: ObjectMeta;
  data?: Record<string, string>;
  binaryData?: Record<string, string>;
  immutable?: boolean;
}

export interface CoreEvent {
  apiVersion?: 'v1';
  kind?: 'Event';
  metadata: ObjectMeta;
  involvedObject: ObjectReference;
  reason: string;
  message: string;
  type: 'Normal' | 'Warning';
  source?: { component?: string; host?: string };
  firstTimestamp?: string;
  lastTimestamp?: string;
  count?: number;
  reportingComponent?: string;
  reportingInstance?: string;
}

export interface ListMeta {
  resourceVersion?: string;
  continue?: string;
  remainingItemCount?: number;
}

export interface ObjectList<T> {
  metadata: ListMeta;
  items: T[];
}

export interface Container {
  name: string;
  image?: string;
  command?: string[];
  args?: string[];
  env?: { name: string; value?: string }[];
  securityContext?: { privileged?: boolean };
  volumeMounts?: { name: string; mountPath: string; readOnly?: boolean }[];
}

export interface Job {
  apiVersion?: 'batch/v1';
  kind?: 'Job';
  metadata: ObjectMeta;
  spec?: {
    backoffLimit?: number;
    ttlSecondsAfterFinished?: number;
    template: {
      metadata?: { labels?: Record<string, string>; annotations?: Record<string, string> };
      spec: {
        containers: Container[];
        restartPolicy?: string;
        nodeSelector?: Record<string, string>;
        tolerations?: Record<string, unknown>[];
        volumes?: { name: string; hostPath?: { path: string; type?: string } }[];
        serviceAccountName?: string;
      };
    };
  };
  status?: {
    active?: number;
    succeeded?: number;
    failed?: number;
    startTime?: string;
    completionTime?: string;
    conditions?: { type: string; status: string; reason?: string; message?: string; lastTransitionTime?: string }[];
  };
}

export interface PersistentVolumeClaim {
  apiVersion?: 'v1';
  kind?: 'PersistentVolumeClaim';
  metadata: ObjectMeta;
  spec: {
    accessModes?: string[];
    resources?: { requests?: Record<string, string> };
    storageClassName?: string;
    volumeName?: string;
    volumeMode?: string;
  };
  status?: { phase?: string };
}

/** Only what tells which claims a pod uses and whether it holds them (scheduled, not finished). */
export interface Pod {
  apiVersion?: 'v1';
  kind?: 'Pod';
  metadata: ObjectMeta;
  spec: {
    nodeName?: string;
    containers: Container[];
    volumes?: { name: string; persistentVolumeClaim?: { claimName: string; readOnly?: boolean } }[];
  };
  status?: { phase?: string };
}

/** coordination.k8s.io/v1 Lease: renewTime and acquireTime are MicroTime (RFC 3339 with 6 fraction digits). */
export interface Lease {
  apiVersion?: 'coordination.k8s.io/v1';
  kind?: 'Lease';
  metadata: ObjectMeta;
  spec?: {
    holderIdentity?: string;
    leaseDurationSeconds?: number;
    acquireTime?: string;
    renewTime?: string;
    leaseTransitions?: number;
  };
}
