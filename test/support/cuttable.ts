// A resource client of the in-memory cluster that can be cut: every call fails with a 503 and open
// watches end in that error, as when the API is unreachable; set it back and it works again.
import { KubeApiError } from '../../src/core/kube/cluster.js';
import type { ResourceClient, WatchEvent } from '../../src/core/kube/cluster.js';

/** `inner`, which can be cut: every call fails and open watches end in an error while `down.value`. */
export function cuttable<T>(inner: ResourceClient<T>): { client: ResourceClient<T>; down: { value: boolean } } {
  const down = { value: false };
  const cuts = new Set<AbortController>();
  const unavailable = (): KubeApiError => new KubeApiError(503, 'ServiceUnavailable', 'connection refused (test)');
  const guard = <R>(call: () => Promise<R>): Promise<R> => (down.value ? Promise.reject(unavailable()) : call());
  const client: ResourceClient<T> = {
    ...inner,
    get: (name, options) => guard(() => inner.get(name, options)),
    list: (options) => guard(() => inner.list(options)),
    watch: (options) => ({
      [Symbol.asyncIterator]: async function* (): AsyncGenerator<WatchEvent<T>> {
        if (down.value) throw unavailable();
        const cut = new AbortController();
        cuts.add(cut);
        try {
          for await (const event of inner.watch({ ...options, signal: AbortSignal.any([options.signal, cut.signal]) }))
            yield event;
          if (cut.signal.aborted && !options.signal.aborted) throw unavailable();
        } finally {
          cuts.delete(cut);
        }
      },
    }),
  };
  const toggle = {
    get value(): boolean {
      return down.value;
    },
    set value(v: boolean) {
      down.value = v;
      if (v) for (const c of cuts) c.abort();
    },
  };
  return { client, down: toggle };
}
