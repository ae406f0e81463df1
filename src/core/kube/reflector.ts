// List + watch into a local store, like client-go's reflector: paginated list, watch from the
// list's resourceVersion, relist on 410 Gone or any error, and a periodic relist as a watchdog
// against watches that silently stall. Everything stops on abort.
//
// Retries go through one Backoff (capped, jittered, exponential) that a successful LIST does not
// reset: only a period without failures does (client-go's backoff manager). Otherwise a server that
// allows the list but refuses the watch gets a full LIST every 500 ms forever. A watch that ends
// at once without an event (a misbehaving server or proxy) counts as a failure too before it is
// re-opened (client-go: "very short watch").
import { MAX_LIST_PAGES } from './list-pages.js';
import { Backoff } from '../backoff.js';
import { isAborted } from '../clock.js';
import type { Clock } from '../clock.js';
import type { Logger } from '../log.js';
import { isGone } from './cluster.js';
import type { ResourceClient, WatchEvent } from './cluster.js';
import { errorMessage } from '../unknown-values.js';
import type { ObjectList, ObjectMeta } from './objects.js';

export interface ReflectorOptions<T, S = T> {
  readonly client: ResourceClient<T>;
  readonly clock: Clock;
  readonly logger: Logger;
  /** For logs. */
  readonly resource: string;
  readonly labelSelector?: string;
  /** A field selector (e.g. `metadata.name=x`: one object). */
  readonly fieldSelector?: string;
  readonly namespace?: string;
  readonly pageSize?: number;
  /**
   * The first page of the first list, requested by the owner before the reflector runs, with the
   * options above (a head start at start-up: the list leaves beside other requests). It is used
   * as a list made then would be; if it failed, the first list is requested as usual.
   */
  readonly firstPage?: Promise<ObjectList<T>>;
  /** Full relist period (the informer "resync"); jittered in [p, 2p). 0 disables. */
  readonly relistPeriodMs?: number;
  readonly random?: () => number;
  /**
   * What the store keeps of each object listed, watched or upserted (client-go's informer
   * transform); without one, the object but its managedFields.
   */
  readonly transform?: (object: T) => S;
  /** Called for every change of the store (not for unchanged objects of a relist). */
  readonly onChange?: (type: 'ADDED' | 'MODIFIED' | 'DELETED', object: S) => void;
  /** Called when lastError changes: a list or watch failed (a message), or works again (undefined). */
  readonly onError?: (error: string | undefined) => void;
}

/** Names of deleted objects remembered for upsert(); beyond this the oldest are forgotten. */
const MAX_TOMBSTONES = 10_000;
/** A watch that ends sooner than this without an event counts as a failure. */
const SHORT_WATCH_MS = 1_000;

/**
 * What the store keeps of an object: all of it but `metadata.managedFields` (which writer owns
 * which field: about half the JSON of a PV the agent wrote, more once controllers touched it).
 * No reader of a cache uses it; client-go's informers drop it with a transform for the same
 * reason. An update built from a cached object leaves the server's managedFields as they were (an
 * update without the field keeps the live object's).
 */
function cacheable<T extends { metadata: ObjectMeta }>(object: T): T {
  if (object.metadata.managedFields === undefined) return object;
  const metadata = { ...object.metadata };
  delete metadata.managedFields;
  return { ...object, metadata };
}

/** Sleeps `ms` unless the signal aborts first; false when it did. */
async function pause(clock: Clock, ms: number, until: AbortSignal): Promise<boolean> {
  try {
    await clock.sleep(ms, until);
    return true;
  } catch {
    return false;
  }
}

/** How one watch went: where to resume, and whether it ended at once without an event. */
interface WatchRun {
  readonly resourceVersion: string;
  readonly received: number;
  readonly openedAt: number;
}

/** What a stored object needs: a name to key it by, a resourceVersion to compare. */
interface Keyed {
  readonly metadata: { readonly name: string; readonly resourceVersion?: string };
}

export class Reflector<T extends { metadata: ObjectMeta }, S extends Keyed = T> {
  private readonly store = new Map<string, S>();
  /** The store's form of an object: the transform, or (S being T then) the object without managedFields. */
  private readonly keep: (object: T) => S;
  /** Sequence number of the last list or watch update of each name (deleted ones too, bounded). */
  private readonly touched = new Map<string, number>();
  private sequence = 0;
  /** Positions before this may have lost their tombstones: upsert() cannot tell, so it declines. */
  private forgottenBefore = 0;
  private syncedResolve: (() => void) | undefined;
  /** Resolves after the first complete list. */
  readonly synced: Promise<void>;
  private lastSyncAt = 0;
  /** Watches opened (for tests and diagnostics). */
  watches = 0;
  private error: string | undefined;

  /** The owner's head start, taken by the first list only. */
  private firstPage: Promise<ObjectList<T>> | undefined;

  constructor(private readonly options: ReflectorOptions<T, S>) {
    this.keep = options.transform ?? (cacheable as unknown as (object: T) => S);
    this.firstPage = options.firstPage;
    this.synced = new Promise((resolve) => {
      this.syncedResolve = resolve;
    });
  }

  /** The last list or watch error, cleared by a successful list or a watch event. */
  get lastError(): string | undefined {
    return this.error;
  }

  private set lastError(error: string | undefined) {
    const changed = error !== this.error;
    this.error = error;
    if (changed) this.options.onError?.(error);
  }

  get(name: string): S | undefined {
    return this.store.get(name);
  }

  list(): S[] {
    return [...this.store.values()];
  }

  get size(): number {
    return this.store.size;
  }

  /** When the store was last confirmed against a full list (ms since epoch), 0 before. */
  get lastSync(): number {
    return this.lastSyncAt;
  }

  /** Where the store is in the list/watch stream: take it before a write, pass it to upsert(). */
  position(): number {
    return this.sequence;
  }

  /**
   * Records an object the agent itself wrote (a write started at `since`, from position()), so
   * the next pass sees it before the watch does.
   *
   * resourceVersions are opaque (only equality means anything), so the write is not ordered
   * against the store by its version. Instead: the watch delivers every change of an object in
   * order, including this write. If the list or watch has updated this name since the write
   * started, the store is at least as new as the write or the watch is about to deliver it: keep
   * the store (accepting the older write would roll back a change the watch already delivered,
   * and nothing would correct it before the next relist). Otherwise the write is the newest the
   * agent knows. client-go keeps its own writes out of the informer store for the same reason;
   * its MutationCache overlays them but orders them by parsing the version as an etcd integer.
   */
  upsert(written: T, since: number): void {
    const object = this.keep(written);
    const name = this.key(object);
    const old = this.store.get(name);
    if (old !== undefined && old.metadata.resourceVersion === object.metadata.resourceVersion) return;
    const touchedAt = this.touched.get(name);
    if (touchedAt !== undefined ? touchedAt > since : since < this.forgottenBefore) return;
    this.store.set(name, object);
    this.options.onChange?.(old ? 'MODIFIED' : 'ADDED', object);
  }

  private key(object: Keyed): string {
    return object.metadata.name;
  }

  /** Stores what the list or watch says about an object; `undefined` deletes it. */
  private observe(name: string, object: S | undefined): void {
    this.sequence += 1;
    this.touched.delete(name);
    this.touched.set(name, this.sequence);
    if (object === undefined) this.store.delete(name);
    else this.store.set(name, object);
    // Bound the tombstones: the oldest entries that are not in the store any more go first, down
    // to half the bound at once so that the scan is rare.
    if (this.touched.size > this.store.size + MAX_TOMBSTONES) {
      for (const [n, at] of this.touched) {
        if (this.touched.size <= this.store.size + MAX_TOMBSTONES / 2) break;
        if (this.store.has(n)) continue;
        this.touched.delete(n);
        this.forgottenBefore = Math.max(this.forgottenBefore, at + 1);
      }
    }
  }

  private async relist(signal: AbortSignal): Promise<string> {
    const { client, labelSelector, fieldSelector, namespace } = this.options;
    const seen = new Map<string, S>();
    let continueToken: string | undefined;
    let resourceVersion = '';
    const listPage = (): Promise<ObjectList<T>> =>
      client.list({
        ...(labelSelector !== undefined ? { labelSelector } : {}),
        ...(fieldSelector !== undefined ? { fieldSelector } : {}),
        ...(namespace !== undefined ? { namespace } : {}),
        limit: this.options.pageSize ?? 500,
        ...(continueToken !== undefined ? { continue: continueToken } : {}),
        signal,
      });
    let head = this.firstPage;
    this.firstPage = undefined;
    let pages = 0;
    do {
      if (++pages > MAX_LIST_PAGES)
        throw new Error(`the ${this.options.resource} list did not end after ${String(MAX_LIST_PAGES)} pages`);
      const page = head !== undefined ? await head.catch(listPage) : await listPage();
      head = undefined;
      for (const item of page.items) seen.set(this.key(item), this.keep(item));
      continueToken =
        page.metadata.continue !== undefined && page.metadata.continue !== '' ? page.metadata.continue : undefined;
      resourceVersion = page.metadata.resourceVersion ?? resourceVersion;
    } while (continueToken !== undefined);
    for (const [name, old] of [...this.store]) {
      if (!seen.has(name)) {
        this.observe(name, undefined);
        this.options.onChange?.('DELETED', old);
      }
    }
    for (const [name, item] of seen) {
      const old = this.store.get(name);
      this.observe(name, item);
      if (!old) this.options.onChange?.('ADDED', item);
      else if (old.metadata.resourceVersion !== item.metadata.resourceVersion)
        this.options.onChange?.('MODIFIED', item);
    }
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
    const { clock } = this.options;
    // client-go's reflector: 800 ms doubling to 30 s, jittered to [d, 2d), reset after 2 min healthy.
    const backoff = new Backoff({ clock, ...(this.options.random ? { random: this.options.random } : {}) });
    while (!signal.aborted) {
      try {
        const resourceVersion = await this.relist(signal);
        await this.watchUntilRelist(signal, resourceVersion, backoff);
      } catch (err) {
        if (isAborted(signal)) break;
        const wait = this.noteFailure(err, backoff);
        if (wait > 0 && !(await pause(clock, wait, signal))) break;
      }
    }
  }

  /** Watches from the list's resourceVersion until the relist is due or the signal aborts; throws on a failed watch. */
  private async watchUntilRelist(signal: AbortSignal, listedAt: string, backoff: Backoff): Promise<void> {
    const { clock } = this.options;
    const relistAt = clock.now() + this.nextRelistDelay();
    // One watch controller per relist period: stopping it makes the loop relist.
    const watchScope = new AbortController();
    const stopWatch = (): void => {
      watchScope.abort();
    };
    signal.addEventListener('abort', stopWatch, { once: true });
    // Stopped between the list and here (a stop right after the sync): the listener never fires.
    if (signal.aborted) stopWatch();
    const timer = Number.isFinite(relistAt)
      ? clock.sleep(relistAt - clock.now(), watchScope.signal).then(stopWatch, () => undefined)
      : Promise.resolve();
    try {
      let resourceVersion = listedAt;
      while (!watchScope.signal.aborted) {
        const watch = await this.watchOnce(resourceVersion, watchScope.signal);
        resourceVersion = watch.resourceVersion;
        if (isAborted(watchScope.signal)) break;
        // The server ended the watch: resume from the last resourceVersion, after a pause if it was short.
        const delay = this.shortWatchDelay(watch, backoff);
        if (delay !== undefined && !(await pause(clock, delay, watchScope.signal))) break;
      }
    } finally {
      signal.removeEventListener('abort', stopWatch);
      watchScope.abort();
      await timer;
    }
  }

  /** Opens one watch and applies its events until it ends. */
  private async watchOnce(from: string, scope: AbortSignal): Promise<WatchRun> {
    const { client, clock, labelSelector, fieldSelector, namespace } = this.options;
    const openedAt = clock.now();
    let received = 0;
    let resourceVersion = from;
    this.watches += 1;
    const events = client.watch({
      resourceVersion,
      allowBookmarks: true,
      timeoutSeconds: 300,
      signal: scope,
      ...(labelSelector !== undefined ? { labelSelector } : {}),
      ...(fieldSelector !== undefined ? { fieldSelector } : {}),
      ...(namespace !== undefined ? { namespace } : {}),
    });
    for await (const event of events) {
      received += 1;
      // The watch works (again): an earlier "ended at once" is no longer the state.
      if (received === 1) this.lastError = undefined;
      resourceVersion = this.applyWatchEvent(event, resourceVersion);
    }
    return { resourceVersion, received, openedAt };
  }

  /** One watch event into the store; returns the resourceVersion to resume from. */
  private applyWatchEvent(event: WatchEvent<T>, resourceVersion: string): string {
    if (event.type === 'BOOKMARK') return event.resourceVersion;
    const object = this.keep(event.object);
    const name = this.key(object);
    const existed = this.store.has(name);
    if (event.type === 'DELETED') {
      this.observe(name, undefined);
      if (existed) this.options.onChange?.('DELETED', object);
    } else {
      this.observe(name, object);
      this.options.onChange?.(existed ? 'MODIFIED' : 'ADDED', object);
    }
    return object.metadata.resourceVersion ?? resourceVersion;
  }

  /**
   * A watch that ended at once with nothing in it is a server refusing to watch: the backoff's
   * delay before re-opening it, else undefined (re-open now).
   */
  private shortWatchDelay(watch: WatchRun, backoff: Backoff): number | undefined {
    const { clock, logger, resource } = this.options;
    if (watch.received !== 0 || clock.now() - watch.openedAt >= SHORT_WATCH_MS) return undefined;
    const delay = backoff.next();
    this.lastError = `the ${resource} watch ended at once without an event`;
    logger.log('warn', `${resource} watch ended at once; re-opening it later`, { retryInMs: delay });
    return delay;
  }

  /**
   * A failed list or watch: how long to wait before relisting. 410 Gone is routine (the watch's
   * resourceVersion was compacted): relist at once, unless it keeps happening.
   */
  private noteFailure(err: unknown, backoff: Backoff): number {
    const { logger, resource } = this.options;
    this.lastError = errorMessage(err);
    const routine = isGone(err) && backoff.fresh;
    const delay = backoff.next();
    const wait = routine ? 0 : delay;
    logger.log(isGone(err) ? 'info' : 'warn', `${resource} watch ended; relisting`, {
      error: this.lastError,
      retryInMs: wait,
    });
    return wait;
  }
}
