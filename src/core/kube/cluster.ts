// The cluster port: the few API operations the agent uses, with a real implementation over the
// Kubernetes REST API (rest-cluster.ts) and an in-memory one (memory-cluster.ts) that a shared
// contract suite (test/contract/cluster-contract.ts) holds to the real apiserver's behaviour.
import type {
  ConfigMap,
  CoreEvent,
  Job,
  Lease,
  Node,
  ObjectList,
  ObjectMeta,
  PersistentVolume,
  PersistentVolumeClaim,
  Pod,
  StorageClass,
} from './objects.js';

/** A failed API call, with the HTTP status and the Status reason the apiserver returned. */
export class KubeApiError extends Error {
  constructor(
    readonly status: number,
    /** `NotFound`, `AlreadyExists`, `Conflict`, `Expired` (410 on watch/list), `Forbidden`, `Invalid`, … */
    readonly reason: string,
    message: string,
  ) {
    super(message);
    this.name = 'KubeApiError';
  }
}

export function isNotFound(err: unknown): boolean {
  return err instanceof KubeApiError && err.status === 404;
}
export function isAlreadyExists(err: unknown): boolean {
  return err instanceof KubeApiError && err.status === 409 && err.reason === 'AlreadyExists';
}
export function isConflict(err: unknown): boolean {
  return err instanceof KubeApiError && err.status === 409 && err.reason === 'Conflict';
}
export function isGone(err: unknown): boolean {
  return err instanceof KubeApiError && err.status === 410;
}

export interface ListOptions {
  readonly namespace?: string;
  readonly labelSelector?: string;
  /** Only `metadata.name` and `metadata.namespace` terms (`=`, `==`, `!=`), which every resource supports. */
  readonly fieldSelector?: string;
  readonly limit?: number;
  readonly continue?: string;
  readonly signal?: AbortSignal;
}

export interface WatchOptions {
  readonly namespace?: string;
  readonly labelSelector?: string;
  /** As in ListOptions. */
  readonly fieldSelector?: string;
  /** Start after this resourceVersion (from a list). A compacted one fails with 410 Gone. */
  readonly resourceVersion: string;
  readonly allowBookmarks?: boolean;
  readonly timeoutSeconds?: number;
  /** Ends the watch: the iterator returns. */
  readonly signal: AbortSignal;
}

export type WatchEvent<T> =
  | { readonly type: 'ADDED' | 'MODIFIED' | 'DELETED'; readonly object: T }
  | { readonly type: 'BOOKMARK'; readonly resourceVersion: string };

export interface NamespaceOption {
  readonly namespace?: string;
}

export interface DeleteOptions extends NamespaceOption {
  /** Precondition: only delete the object with this UID (409 Conflict otherwise). */
  readonly uid?: string;
  readonly propagationPolicy?: 'Foreground' | 'Background' | 'Orphan';
  /** Pods: how long the object stays terminating; 0 deletes it at once (a force delete). */
  readonly gracePeriodSeconds?: number;
}

export interface ResourceClient<T> {
  get(name: string, options?: NamespaceOption): Promise<T>;
  list(options?: ListOptions): Promise<ObjectList<T>>;
  /** Like list, but only each object's metadata (PartialObjectMetadataList): scans stay small. */
  listMetadata(options?: ListOptions): Promise<ObjectList<{ metadata: ObjectMeta }>>;
  /** Streams changes after options.resourceVersion until the signal aborts or the server ends it. */
  watch(options: WatchOptions): AsyncIterable<WatchEvent<T>>;
  create(object: T, options?: NamespaceOption & { readonly dryRun?: boolean }): Promise<T>;
  /** PUT: fails with 409 Conflict when object.metadata.resourceVersion is stale. */
  update(object: T, options?: NamespaceOption): Promise<T>;
  /** PUT to the status subresource. */
  updateStatus(object: T, options?: NamespaceOption): Promise<T>;
  /** JSON merge patch (RFC 7386). */
  patch(name: string, patch: unknown, options?: NamespaceOption): Promise<T>;
  delete(name: string, options?: DeleteOptions): Promise<void>;
}

export interface Cluster {
  readonly persistentVolumes: ResourceClient<PersistentVolume>;
  readonly storageClasses: ResourceClient<StorageClass>;
  readonly nodes: ResourceClient<Node>;
  readonly events: ResourceClient<CoreEvent>;
  readonly jobs: ResourceClient<Job>;
  readonly configMaps: ResourceClient<ConfigMap>;
}

/**
 * Leases (coordination.k8s.io/v1), apart from Cluster: only the applied-state publisher and
 * `rollout status` use them (src/core/fleet), so test doubles of the agent's port need not.
 */
export interface LeaseCluster {
  readonly leases: ResourceClient<Lease>;
}

/**
 * Claims and pods, apart from Cluster: only `provisioner node-cleanup` reads them (a claim to
 * delete, the pods that still use it), so the agent's port and its test doubles need not.
 */
export interface NodeCleanupCluster {
  readonly persistentVolumeClaims: ResourceClient<PersistentVolumeClaim>;
  readonly pods: ResourceClient<Pod>;
}
