// List + watch into a local store, like client-go's reflector: paginated list, watch from the
// list's resourceVersion, relist on 410 Gone or any error with capped exponential backoff, and a
// periodic relist as a watchdog against watches that silently stall. Everything stops on abort.
import { isAborted } from '../clock.js';
import type { Clock } from '../clock.js';
import type { Logger } from '../log.js';
import { isGone } from './cluster.js';
import type { ResourceClient } from './cluster.js';
import type { ObjectMeta } from './objects.js';

export interface ReflectorOptions<T> {
  readonly client: ResourceClient<T>;
  readonly clock: Clock;
  readonly logger: Logger;
  /** For logs. */
  readonly resource: string;
  readonly labelSelector?: string;
  readonly namespace?: string;
  readonly pageSize?: number;
  /** Full relist period (the informer "resync"); jittered in [p, 2p). 0 disables. */
  readonly relistPeriodMs?: number;
  readonly random?: () => number;
  /** Called for every change of the store (not for unchanged objects of a relist). */
  readonly onChange?: (type: 'ADDED' | 'MODIFIED' | 'DELETED', object: T) => void;
}

export class Reflector<T extends { metadata: ObjectMeta }> {
  private readonly store = new Map<string, T>();
  private syncedResolve: (() => void) | undefined;
  /** Resolves after the first complete list. */
  readonly synced: Promise<void>;
  private lastSyncAt = 0;
  relists = 0;
  /** The last list or watch error, cleared by a successful list. */
  lastError: string | undefined;

  constructor(private readonly options: ReflectorOptions<T>) {
    this.synced = new Promise((resolve) => {
      this.syncedResolve = resolve;
    });
  }

  get(name: string): T | undefined {
    return this.store.get(name);
  }

  list(): T[] {
    return [...this.store.values()];
  }

  get size(): number {
    return this.store.size;
  }

  /** When the store was last confirmed against a full list (ms since epoch), 0 before. */
  get lastSync(): number {
    return this.lastSyncAt;
  }

  /** Records an object the agent itself just wrote, so the next pass sees it before the watch does. */
  upsert(object: T): void {
    const name = object.metadata.name;
    const old = this.store.get(name);
    if (old && Number(old.metadata.resourceVersion ?? 0) > Number(object.metadata.resourceVersion ?? 0)) return;
    this.store.set(name, object);
    this.options.onChange?.(old ? 'MODIFIED' : 'ADDED', object);
  }

  forget(name: string): void {
    const old = this.store.get(name);
    if (old) {
      this.store.delete(name);
      this.options.onChange?.('DELETED', old);
    }
  }

  private key(object: T): string {
    return object.metadata.name;
  }

  private async relist(signal: AbortSignal): Promise<string> {
    const { client, labelSelector, namespace } = this.options;
    const seen = new Map<string, T>();
    let continueToken: string | undefined;
    let resourceVersion = '';
    do {
      const page = await client.list({
        ...(labelSelector !== undefined ? { labelSelector } : {}),
        ...(namespace !== undefined ? { namespace } : {}),
        limit: this.options.pageSize ?? 500,
        ...(continueToken !== undefined ? { continue: continueToken } : {}),
        signal,
      });
      for (const item of page.items) seen.set(this.key(item), item);
      continueToken =
        page.metadata.continue !== undefined && page.metadata.continue !== '' ? page.metadata.continue : undefined;
      resourceVersion = page.metadata.resourceVersion ?? resourceVersion;
    } while (continueToken !== undefined);
    for (const [name, old] of this.store) {
      if (!seen.has(name)) {
        this.store.delete(name);
        this.options.onChange?.('DELETED', old);
      }
    }
    for (const [name, item] of seen) {
      const old = this.store.get(name);
      this.store.set(name, item);
      if (!old) this.options.onChange?.('ADDED', item);
      else if (old.metadata.resourceVersion !== item.metadata.resourceVersion)
        this.options.onChange?.('MODIFIED', item);
    }
    this.relists += 1;
    this.lastError = undefined;
    this.lastSyncAt = this.options.clock.now();
    this.syncedResolve?.();
    this.syncedResolve = undefined;
    return resourceVersion;
  }

  private nextRelistDelay(): number {
    const period = this.options.relistPeriodMs ?? 0;
    if (period <= 0) return Infinity;
    return period * (1 + (this.options.random ?? Math.random)());
  }

  /** Runs until the signal aborts. Never throws except on abort. */
  async run(signal: AbortSignal): Promise<void> {
    const { client, clock, logger, resource } = this.options;
    let failures = 0;
    while (!signal.aborted) {
      try {
        let resourceVersion = await this.relist(signal);
        failures = 0;
        const relistAt = clock.now() + this.nextRelistDelay();
        // One watch controller per relist period: stopping it makes the loop relist.
        const watchScope = new AbortController();
        const stopWatch = (): void => {
          watchScope.abort();
        };
        signal.addEventListener('abort', stopWatch, { once: true });
        const timer = Number.isFinite(relistAt)
          ? clock.sleep(relistAt - clock.now(), watchScope.signal).then(stopWatch, () => undefined)
          : Promise.resolve();
        try {
          while (!watchScope.signal.aborted) {
            const events = client.watch({
              resourceVersion,
              allowBookmarks: true,
              timeoutSeconds: 300,
              signal: watchScope.signal,
              ...(this.options.labelSelector !== undefined ? { labelSelector: this.options.labelSelector } : {}),
              ...(this.options.namespace !== undefined ? { namespace: this.options.namespace } : {}),
            });
            for await (const event of events) {
              if (event.type === 'BOOKMARK') {
                resourceVersion = event.resourceVersion;
                continue;
              }
              const object = event.object;
              resourceVersion = object.metadata.resourceVersion ?? resourceVersion;
              if (event.type === 'DELETED') {
                if (this.store.delete(this.key(object))) this.options.onChange?.('DELETED', object);
              } else {
                const existed = this.store.has(this.key(object));
                this.store.set(this.key(object), object);
                this.options.onChange?.(existed ? 'MODIFIED' : 'ADDED', object);
              }
            }
            // The server ended the watch (timeout): resume from the last resourceVersion.
          }
        } finally {
          signal.removeEventListener('abort', stopWatch);
          watchScope.abort();
          await timer;
        }
      } catch (err) {
        if (isAborted(signal)) break;
        failures += 1;
        this.lastError = err instanceof Error ? err.message : String(err);
        const delay = isGone(err) ? 0 : Math.min(30_000, 500 * 2 ** Math.min(failures - 1, 6));
        logger.log(isGone(err) ? 'info' : 'warn', `${resource} watch ended; relisting`, {
          error: err instanceof Error ? err.message : String(err),
          retryInMs: delay,
        });
        if (delay > 0) {
          try {
            await clock.sleep(delay, signal);
          } catch {
            break;
          }
        }
      }
    }
  }
}
