// The cluster port: the few API operations the agent uses (ResourceClient) on the resources in one
// table (ResourceObjects, RESOURCES), with a real implementation over the Kubernetes REST API
// (rest-cluster.ts) and an in-memory one (memory/memory-cluster.ts), both built on ClusterClients,
// that a shared contract suite (test/contract/cluster-contract.ts) holds to the real apiserver's
// behaviour.
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
import { isRecord } from '../unknown-values.js';

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

/** The object type of each resource the port reaches. */
export interface ResourceObjects {
  readonly persistentVolumes: PersistentVolume;
  readonly storageClasses: StorageClass;
  readonly nodes: Node;
  readonly events: CoreEvent;
  readonly jobs: Job;
  readonly configMaps: ConfigMap;
  readonly leases: Lease;
  readonly persistentVolumeClaims: PersistentVolumeClaim;
  readonly pods: Pod;
}

export type ResourceName = keyof ResourceObjects;

/** A client for each of the named resources. */
export type ResourceClients<K extends ResourceName> = { readonly [P in K]: ResourceClient<ResourceObjects[P]> };

/** What the agent uses. */
export type Cluster = ResourceClients<
  'persistentVolumes' | 'storageClasses' | 'nodes' | 'events' | 'jobs' | 'configMaps'
>;

/**
 * Leases (coordination.k8s.io/v1), apart from Cluster: only the applied-state publisher and
 * `rollout status` use them (src/core/fleet), so test doubles of the agent's port need not.
 */
export type LeaseCluster = ResourceClients<'leases'>;

/**
 * Claims and pods, apart from Cluster: only `provisioner node-cleanup` reads them (a claim to
 * delete, the pods that still use it), so the agent's port and its test doubles need not.
 */
export type NodeCleanupCluster = ResourceClients<'persistentVolumeClaims' | 'pods'>;

/** Where a resource lives in the API and what its objects are called. */
export interface ResourceInfo {
  /** `v1`, `batch/v1`, `storage.k8s.io/v1`: the apiVersion of its objects. */
  readonly apiVersion: string;
  /** The API group: `''` (core), `batch`, `storage.k8s.io`. */
  readonly group: string;
  /** The plural in URLs and messages: `persistentvolumes`. */
  readonly resource: string;
  readonly kind: string;
  readonly namespaced: boolean;
}

function info(apiVersion: string, resource: string, kind: string, namespaced: boolean): ResourceInfo {
  const slash = apiVersion.indexOf('/');
  return { apiVersion, group: slash < 0 ? '' : apiVersion.slice(0, slash), resource, kind, namespaced };
}

/** The one table of the port's resources, for the real client and the in-memory one alike. */
export const RESOURCES: { readonly [K in ResourceName]: ResourceInfo } = {
  persistentVolumes: info('v1', 'persistentvolumes', 'PersistentVolume', false),
  storageClasses: info('storage.k8s.io/v1', 'storageclasses', 'StorageClass', false),
  nodes: info('v1', 'nodes', 'Node', false),
  events: info('v1', 'events', 'Event', true),
  jobs: info('batch/v1', 'jobs', 'Job', true),
  configMaps: info('v1', 'configmaps', 'ConfigMap', true),
  leases: info('coordination.k8s.io/v1', 'leases', 'Lease', true),
  persistentVolumeClaims: info('v1', 'persistentvolumeclaims', 'PersistentVolumeClaim', true),
  pods: info('v1', 'pods', 'Pod', true),
};

/**
 * Every resource's client, built by the implementation's `client`. The fields initialise before
 * the subclass's own fields and constructor run: `client` may only build closures over `this`,
 * never read its state.
 */
export abstract class ClusterClients implements Cluster, LeaseCluster, NodeCleanupCluster {
  readonly persistentVolumes = this.client('persistentVolumes');
  readonly storageClasses = this.client('storageClasses');
  readonly nodes = this.client('nodes');
  readonly events = this.client('events');
  readonly jobs = this.client('jobs');
  readonly configMaps = this.client('configMaps');
  readonly leases = this.client('leases');
  readonly persistentVolumeClaims = this.client('persistentVolumeClaims');
  readonly pods = this.client('pods');

  protected abstract client<K extends ResourceName>(resource: K): ResourceClient<ResourceObjects[K]>;
}

/** The metadata.name of an object handed to a write, when it has one. */
export function objectName(object: unknown): string | undefined {
  const metadata = isRecord(object) ? object['metadata'] : undefined;
  const name = isRecord(metadata) ? metadata['name'] : undefined;
  return typeof name === 'string' ? name : undefined;
}
