// A Cluster that can only read. Every write method of every resource throws WriteRefusedError
// before anything is sent, so code handed this wrapper (`provisioner simulate`) cannot change the
// cluster whatever it does: the guarantee holds by construction, not by care.
import { ExitCode, ProvisionerError } from '../errors.js';
import { objectName, RESOURCES, type Cluster, type ResourceClient, type ResourceObjects } from './cluster.js';
import type { ConfigMap, CoreEvent, Job, Node, PersistentVolume, StorageClass } from './objects.js';

/** The verbs that change the cluster; the wrapper refuses each of them. */
export const WRITE_VERBS = ['create', 'update', 'updateStatus', 'patch', 'delete'] as const;
export type WriteVerb = (typeof WRITE_VERBS)[number];

/** A write reached a read-only cluster: a bug in the caller (simulate never writes). */
export class WriteRefusedError extends ProvisionerError {
  readonly exitCode = ExitCode.Internal;
  readonly code = 'write-refused';
  constructor(
    readonly verb: WriteVerb,
    readonly resource: string,
    readonly objectName: string,
  ) {
    super(`refused to ${verb} ${resource}/${objectName}: this cluster connection is read-only`);
    this.name = 'WriteRefusedError';
  }
}

function nameOf(object: unknown): string {
  return objectName(object) ?? '?';
}

/** `cluster`'s client of one resource, with every write refused. */
function readOnly<K extends keyof Cluster>(cluster: Cluster, key: K): ResourceClient<ResourceObjects[K]> {
  const inner: ResourceClient<ResourceObjects[K]> = cluster[key];
  const { resource } = RESOURCES[key];
  const refuse = (verb: WriteVerb, name: string): Promise<never> =>
    Promise.reject(new WriteRefusedError(verb, resource, name));
  return {
    get: (name, options) => inner.get(name, options),
    list: (options) => inner.list(options),
    listMetadata: (options) => inner.listMetadata(options),
    watch: (options) => inner.watch(options),
    create: (object) => refuse('create', nameOf(object)),
    update: (object) => refuse('update', nameOf(object)),
    updateStatus: (object) => refuse('updateStatus', nameOf(object)),
    patch: (name) => refuse('patch', name),
    delete: (name) => refuse('delete', name),
  };
}

export class ReadOnlyCluster implements Cluster {
  readonly persistentVolumes: ResourceClient<PersistentVolume>;
  readonly storageClasses: ResourceClient<StorageClass>;
  readonly nodes: ResourceClient<Node>;
  readonly events: ResourceClient<CoreEvent>;
  readonly jobs: ResourceClient<Job>;
  readonly configMaps: ResourceClient<ConfigMap>;

  constructor(inner: Cluster) {
    this.persistentVolumes = readOnly(inner, 'persistentVolumes');
    this.storageClasses = readOnly(inner, 'storageClasses');
    this.nodes = readOnly(inner, 'nodes');
    this.events = readOnly(inner, 'events');
    this.jobs = readOnly(inner, 'jobs');
    this.configMaps = readOnly(inner, 'configMaps');
  }
}
