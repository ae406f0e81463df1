// A read-only client that keeps only metadata: the list asks the server for metadata alone
// (PartialObjectMetadataList) and the watch drops the rest, so a cache of Nodes holds names and
// labels, not images and conditions. The node cleanup and the staged rollout controller use it.
import type { ResourceClient, WatchEvent, WatchOptions } from './cluster.js';
import type { ObjectMeta } from './objects.js';

export type MetadataOnly = { metadata: ObjectMeta };

export function metadataClient<T extends MetadataOnly>(client: ResourceClient<T>): ResourceClient<MetadataOnly> {
  const strip = (object: MetadataOnly): MetadataOnly => ({ metadata: object.metadata });
  return {
    get: async (name, options) => strip(await client.get(name, options)),
    list: (options) => client.listMetadata(options),
    listMetadata: (options) => client.listMetadata(options),
    watch: (options: WatchOptions) => ({
      async *[Symbol.asyncIterator](): AsyncGenerator<WatchEvent<MetadataOnly>> {
        for await (const event of client.watch(options)) {
          yield event.type === 'BOOKMARK' ? event : { type: event.type, object: strip(event.object) };
        }
      },
    }),
    create: () => Promise.reject(new Error('read-only')),
    update: () => Promise.reject(new Error('read-only')),
    updateStatus: () => Promise.reject(new Error('read-only')),
    patch: () => Promise.reject(new Error('read-only')),
    delete: () => Promise.reject(new Error('read-only')),
  };
}
