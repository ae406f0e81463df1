// Counts the API watches a process has open, whatever opens them (a generation's reflectors, the
// ConfigMap source): the agent's clients go through countWatches, and its metrics read the count.
// A leak of watches across reloads shows as a count that grows with the generations.
import type { Cluster, ResourceClient, WatchEvent, WatchOptions } from './cluster.js';

export class WatchCount {
  /** Watches open now: from the first read of their stream to its end. */
  open = 0;
  /** Watches opened since the start. */
  opened = 0;
}

async function* counted<T>(events: AsyncIterable<WatchEvent<T>>, count: WatchCount): AsyncGenerator<WatchEvent<T>> {
  count.open += 1;
  count.opened += 1;
  try {
    yield* events;
  } finally {
    count.open -= 1;
  }
}

function countedClient<T>(client: ResourceClient<T>, count: WatchCount): ResourceClient<T> {
  return {
    get: (name, options) => client.get(name, options),
    list: (options) => client.list(options),
    listMetadata: (options) => client.listMetadata(options),
    watch: (options: WatchOptions) => counted(client.watch(options), count),
    create: (object, options) => client.create(object, options),
    update: (object, options) => client.update(object, options),
    updateStatus: (object, options) => client.updateStatus(object, options),
    patch: (name, patch, options) => client.patch(name, patch, options),
    delete: (name, options) => client.delete(name, options),
  };
}

/** `cluster` with every watch counted in `count`. */
export function countWatches(cluster: Cluster, count: WatchCount): Cluster {
  return {
    persistentVolumes: countedClient(cluster.persistentVolumes, count),
    storageClasses: countedClient(cluster.storageClasses, count),
    nodes: countedClient(cluster.nodes, count),
    events: countedClient(cluster.events, count),
    jobs: countedClient(cluster.jobs, count),
    configMaps: countedClient(cluster.configMaps, count),
  };
}
