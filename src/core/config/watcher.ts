// The config watcher: every way the config source can change becomes one coalesced stream of
// "check now" calls for the reload state machine (the triggers table of docs/reload.md).
//
// Triggers, all funnelled into one single-flight check queue:
//   - fs: chokidar on the DIRECTORY (depth 0, followSymlinks off, atomic off), debounced. For a
//     kubelet ConfigMap volume the key files are symlinks `key -> ..data/key` and every update
//     swaps `..data` by rename(2) and deletes the old data directory, so a watch on a key file
//     dies after the first update; a watch on the directory sees every swap. ANY event counts
//     (chokidar's own and its raw fs.watch events): a filter on "change of the key file" would
//     miss updates, and chokidar throttles `change` per path. For a single file, its parent
//     directory is watched, filtered to that name (and kubelet's `..` names).
//   - poll: every pollIntervalMs, the safety net for what inotify cannot see (NFS, missed or
//     overflowed events, a dead watcher). It asks the source's cheap probe first (a directory:
//     stat of its entries, no file opened) and reads the content only when the probe changed.
//   - api: the source's own feed (a ConfigMap watch event), through request().
// SIGHUP and the admin endpoint do not come through here: they ask the reload machine directly,
// which reads the source itself (and reports an unchanged config as a no-op).
//
// The watcher reads only through the ConfigSource port (source/port.ts): it does not know which
// source is in use; the fs feed watches the source's fsWatchPath when it has one.
//
// A check reads the source (one SourceRead: the snapshot and its fingerprint) and calls onChange
// with that read only when the fingerprint differs from the current one, so duplicate events, a
// touch, or kubelet re-projecting identical content (new `..data` target, same bytes) are not
// changes. The reload applies that read: a change is read once.
//
// Coalescing: at most one onChange runs at a time (never re-entrantly), and everything that
// arrives meanwhile collapses into ONE further check after it returns; that check reads the
// source again, so the latest content wins.
//
// The fs watcher repairs itself: a chokidar 'error', the watched directory vanishing or being
// replaced (checked on every check, by device, inode and birth time; inode numbers get reused),
// or the path changing kind all close it and re-create it after a backoff; while it is down the
// poll keeps working, and after a re-creation one check catches up on what was missed. A path
// that does not exist (yet) is watched through its parent directory (no parent either: retried
// with backoff).
//
// Timers go through the Clock port (a ManualClock drives the debounce, poll and backoff too).
// stop() aborts them all, closes chokidar (clearing its throttle timers, see
// clearChokidarThrottles) and waits a few event loop turns for the closed fs.watch handles to go;
// the test runs 1,000 start/stop cycles against process.getActiveResourcesInfo(). An fs call
// chokidar started before close() can still finish a moment after stop() resolves; it leaves
// nothing behind.

import type { Stats } from 'node:fs';
import { realpath, stat } from 'node:fs/promises';
import { basename, dirname, resolve } from 'node:path';
import { watch, type ChokidarOptions, type FSWatcher } from 'chokidar';
import { backoffDelay } from '../backoff.js';
import { TIMER_NOT_NEEDED, type Clock } from '../clock.js';
import type { Logger } from '../log.js';
import { asError, errnoCode, errorMessage } from '../unknown-values.js';
import { sourceLabel } from './source/port.js';
import type { ConfigSource, SourceRead } from './source/port.js';

/**
 * What noticed a possible change; the reload machine's ReloadTrigger extends it with its own
 * requests ('signal', 'admin'):
 * - 'fs': a filesystem event on the source (after the debounce);
 * - 'poll': the periodic check (or a plain request() for a check);
 * - 'api': the API source's watch saw the ConfigMap change.
 */
export type ChangeSource = 'fs' | 'poll' | 'api';

export interface ConfigWatcherOptions {
  /** The config source (the port). The fs feed watches its fsWatchPath: a directory, or a file through its parent directory. */
  readonly source: ConfigSource;
  /** Period of the safety-net check (upstream's --config-sync-period; 5 s there). Must be a positive number. */
  readonly pollIntervalMs: number;
  /** Quiet time that ends a burst of fs events (a kubelet swap emits ~5–10 raw events); e.g. 100 ms. */
  readonly debounceMs: number;
  readonly clock: Clock;
  readonly logger: Logger;
  /**
   * Called, never concurrently and never re-entrantly, when the content may have changed.
   * `source` is what noticed; `read` is what the check read (its fingerprint is the watcher's
   * current one from now on): the handler applies that read, not a new one. Returns when
   * handled; whatever arrives meanwhile coalesces into ONE further check after it returns (latest
   * content wins). When it throws, the error is logged and the previous fingerprint is restored,
   * so the next poll tries again. An unreadable source is a read too (`ok: false`): becoming
   * unreadable (and readable again) is a change.
   */
  readonly onChange: (source: ChangeSource, fingerprint: string, read: SourceRead) => Promise<void>;
  /**
   * true: start() reads and returns the initial snapshot, but no check runs (triggers wait) until
   * resume(): the caller applies the initial read first.
   */
  readonly deferChecks?: boolean;
  /** Watch filesystem events (default true). false: the poll and request() only (e.g. on NFS; tests). */
  readonly useFsEvents?: boolean;
  /** The longest a continuous stream of fs events may postpone a check; default 10 × debounceMs. */
  readonly maxDebounceMs?: number;
  /** Delay before re-creating a failed fs watcher: `initial`, doubling per consecutive failure up to `max`. Default 100 ms → 30 s. */
  readonly restartBackoffMs?: { readonly initial: number; readonly max: number };
  /** How long chokidar may take to become ready before the attempt counts as failed; default 10 s. */
  readonly readyTimeoutMs?: number;
  /** Creates the chokidar watcher; default chokidar's watch. A seam for tests that inject watcher failures. */
  readonly createFsWatcher?: (dir: string, options: ChokidarOptions) => FSWatcher;
  /**
   * Told when a change may be under way (true: an fs event, an 'api' request, or a check that
   * read a new fingerprint) and when it is decided (false: no check pending or running, no burst
   * waiting, onChange returned). The periodic poll alone is no activity. Transitions only; `cause`
   * is what began the activity (a poll's: its check read a new fingerprint).
   */
  readonly onActivity?: (active: boolean, cause?: ChangeSource) => void;
}

export interface ConfigWatcherStats {
  /** fs events that counted as triggers (chokidar and raw fs.watch events, after filtering, before debouncing). */
  readonly fsEvents: number;
  /** Poll ticks. */
  readonly polls: number;
  /** Checks after start (a poll whose probe showed no change counts, without a read). */
  readonly checks: number;
  /** Content reads of the source (start included). */
  readonly reads: number;
  /** Probes (cheap stat or version checks) of the source. */
  readonly probes: number;
  /** onChange calls by source. */
  readonly changes: Readonly<Record<ChangeSource, number>>;
  /** chokidar errors, failures to set up the fs watcher, and the watched directory vanishing or being replaced. */
  readonly watcherErrors: number;
  /** fs watcher re-creations (after errors and after the path changed kind, e.g. appeared). */
  readonly watcherRestarts: number;
  /** onChange calls that threw. */
  readonly handlerErrors: number;
  /** Whether an fs watcher is up right now (false with useFsEvents: false, and while it is being re-created). */
  readonly watching: boolean;
  /**
   * Nothing noticed is waiting out a burst, pending or being checked: every trigger so far is
   * decided (its onChange returned). What a caller waits for before it concludes "no change".
   */
  readonly settled: boolean;
}

/** setTimeout's limit; longer delays would fire after 1 ms. */
const MAX_TIMER_MS = 2_147_483_647;

const DEFAULT_BACKOFF = { initial: 100, max: 30_000 } as const;
const DEFAULT_READY_TIMEOUT_MS = 10_000;

// ---------------------------------------------------------------------------------------------
// What chokidar watches

interface WatchTarget {
  /** The directory chokidar watches (a real path). */
  readonly dir: string;
  /** Single-file mode: the name in dir to react to (plus kubelet's `..` names); undefined: anything in dir. */
  readonly name?: string;
  /** Identity of dir: device, inode and birth time (inode numbers alone get reused). */
  readonly id: string;
}

function identity(info: Stats): string {
  return `${String(info.dev)}:${String(info.ino)}:${String(info.birthtimeMs)}`;
}

function targetKey(target: WatchTarget): string {
  return `${target.dir}\0${target.name ?? ''}\0${target.id}`;
}

function describeTarget(target: WatchTarget): string {
  return target.name === undefined ? target.dir : `${target.dir} (for ${target.name})`;
}

/** A directory is watched itself; a file, or a path that does not exist yet, through its parent. */
async function resolveWatchTarget(path: string): Promise<WatchTarget> {
  const absolute = resolve(path);
  let info: Stats | undefined;
  try {
    info = await stat(absolute);
  } catch (error) {
    const code = errnoCode(error);
    if (code !== 'ENOENT' && code !== 'ENOTDIR') throw error;
  }
  if (info?.isDirectory()) return { dir: await realpath(absolute), id: identity(info) };
  const parent = dirname(absolute);
  const parentInfo = await stat(parent);
  if (!parentInfo.isDirectory()) throw new Error(`${parent}: not a directory`);
  return { dir: await realpath(parent), name: basename(absolute), id: identity(parentInfo) };
}

async function identityOf(dir: string): Promise<string | undefined> {
  try {
    return identity(await stat(dir));
  } catch {
    return undefined;
  }
}

/** In single-file mode: the file itself, and kubelet's names (the file may be a key symlink through `..data`). */
function relevantName(target: WatchTarget, name: string): boolean {
  return target.name === undefined || name === target.name || name.startsWith('..');
}

/**
 * Clears the timers of chokidar's throttle entries, which its close() forgets without clearing
 * (chokidar 5.0.0 index.js: close() does `this._throttled.clear()`; _throttle() arms a plain
 * setTimeout per entry). No option avoids them: every event on the watched directory re-reads it
 * under a 1 s 'readdir' throttle (handler.js _handleRead), which stays armed when close()
 * interrupts that read; per-path 'change', 'watch' and 'remove' throttles add 5–100 ms. Left
 * alone, a stop() right after an fs event would leave a timer running for up to 1 s (the test of
 * 1,000 start/stop cycles catches it). `_throttled` is declared in chokidar's typings but not
 * documented: an upgrade that drops it fails to compile; entries of another shape are skipped.
 */
function clearChokidarThrottles(watcher: FSWatcher): void {
  for (const perPath of watcher._throttled.values()) {
    for (const entry of [...(perPath as Map<unknown, unknown>).values()]) {
      if (typeof entry === 'object' && entry !== null && 'clear' in entry && typeof entry.clear === 'function') {
        (entry.clear as () => unknown)();
      }
    }
  }
}

/** Lets closed fs.watch handles and chokidar's last in-flight fs calls finish (two loop turns suffice; three for margin). */
async function settle(): Promise<void> {
  for (let turn = 0; turn < 3; turn++) await new Promise<void>((done) => setImmediate(done));
}

// ---------------------------------------------------------------------------------------------
// The watcher

interface RestartRequest {
  readonly reason: string;
  readonly error: boolean;
}

/**
 * Usage:
 *
 *   const watcher = new ConfigWatcher({ source, pollIntervalMs: 5000, debounceMs: 100, clock, logger,
 *     onChange: async (by, fingerprint, read) => { await reload(by, read); } });
 *   await watcher.start();        // fs watcher up, initial read done, poll running
 *   await source.start({ changed: (by) => { watcher.request(by); }, ... });
 *   ...
 *   await watcher.stop();         // idempotent; no timer, fs watcher or chokidar instance left
 *
 * One instance runs once: start() at most once, and it cannot be restarted after stop().
 */
export class ConfigWatcher {
  private readonly source: ConfigSource;
  /** The fs feed's path, and what logs name. */
  private readonly path: string;
  private readonly deferChecks: boolean;
  private readonly pollIntervalMs: number;
  private readonly debounceMs: number;
  private readonly maxDebounceMs: number;
  private readonly backoff: { readonly initial: number; readonly max: number };
  private readonly readyTimeoutMs: number;
  private readonly useFsEvents: boolean;
  private readonly clock: Clock;
  private readonly logger: Logger;
  private readonly onChange: (source: ChangeSource, fingerprint: string, read: SourceRead) => Promise<void>;
  private readonly createFsWatcher: (dir: string, options: ChokidarOptions) => FSWatcher;
  private readonly onActivity: ((active: boolean, cause?: ChangeSource) => void) | undefined;
  /** What onActivity was last told. */
  private active = false;

  private readonly abort = new AbortController();
  private started = false;
  private stopped = false;
  private stopping: Promise<void> | undefined;
  /** Set once start() has the initial fingerprint; checks wait for it. */
  private ready = false;

  private current: string | undefined;
  /** The probe that vouches for the last content read: a poll whose probe equals it reads nothing. */
  private lastProbe: string | undefined;
  /** What noticed the check waiting to run (the first of the triggers coalesced into it). */
  private pending: ChangeSource | undefined;
  private draining = false;
  /** The fs-reading part of the check in progress (not onChange), awaited by stop(). */
  private observing: Promise<unknown> | undefined;

  private burstStartedAt: number | undefined;
  private lastEventAt = 0;

  private fsw: FSWatcher | undefined;
  private fswTarget: WatchTarget | undefined;
  /** The watched directory reported an event about itself (deleted or moved): re-create on the next check. */
  private fswSuspect = false;
  private restartRequested: ((request: RestartRequest) => void) | undefined;

  private readonly tasks = new Set<Promise<void>>();

  private readonly counters = {
    fsEvents: 0,
    polls: 0,
    checks: 0,
    reads: 0,
    probes: 0,
    changes: { fs: 0, poll: 0, api: 0 } satisfies Record<ChangeSource, number>,
    watcherErrors: 0,
    watcherRestarts: 0,
    handlerErrors: 0,
  };

  constructor(options: ConfigWatcherOptions) {
    const positive = (name: string, value: number, allowZero = false): number => {
      if (!Number.isFinite(value) || value < 0 || (!allowZero && value === 0)) {
        throw new RangeError(`ConfigWatcher: ${name} must be a ${allowZero ? 'non-negative' : 'positive'} number`);
      }
      return value;
    };
    const { source } = options;
    this.source = source;
    this.path = source.fsWatchPath ?? sourceLabel(source.status().configured);
    this.deferChecks = options.deferChecks === true;
    this.pollIntervalMs = positive('pollIntervalMs', options.pollIntervalMs);
    this.debounceMs = positive('debounceMs', options.debounceMs, true);
    this.maxDebounceMs = positive('maxDebounceMs', options.maxDebounceMs ?? options.debounceMs * 10, true);
    const backoff = options.restartBackoffMs ?? DEFAULT_BACKOFF;
    this.backoff = {
      initial: positive('restartBackoffMs.initial', backoff.initial),
      max: positive('restartBackoffMs.max', backoff.max),
    };
    this.readyTimeoutMs = positive('readyTimeoutMs', options.readyTimeoutMs ?? DEFAULT_READY_TIMEOUT_MS);
    this.useFsEvents = (options.useFsEvents ?? true) && source.fsWatchPath !== undefined;
    this.clock = options.clock;
    this.logger = options.logger;
    this.onChange = options.onChange;
    this.onActivity = options.onActivity;
    this.createFsWatcher = options.createFsWatcher ?? watch;
  }

  /** The current fingerprint: read at start, then the last one handed to onChange or acknowledged. */
  get fingerprint(): string | undefined {
    return this.current;
  }

  /** A snapshot of the counters. */
  get stats(): ConfigWatcherStats {
    const c = this.counters;
    return {
      fsEvents: c.fsEvents,
      polls: c.polls,
      checks: c.checks,
      reads: c.reads,
      probes: c.probes,
      changes: { ...c.changes },
      watcherErrors: c.watcherErrors,
      watcherRestarts: c.watcherRestarts,
      handlerErrors: c.handlerErrors,
      watching: this.fsw !== undefined,
      settled: this.pending === undefined && this.burstStartedAt === undefined && !this.draining,
    };
  }

  /**
   * Sets up the fs watcher (waits for its first attempt; a failure is logged and retried with
   * backoff, not thrown), reads the source (no onChange for it: it is the current content), starts
   * the poll and returns that initial read (undefined when stopped meanwhile). Callable once.
   */
  async start(): Promise<SourceRead | undefined> {
    if (this.started) throw new Error('ConfigWatcher.start() can be called only once');
    this.started = true;
    if (this.isStopped()) return undefined;
    if (this.useFsEvents) {
      let attempted: () => void = () => undefined;
      const firstAttempt = new Promise<void>((done) => {
        attempted = done;
      });
      this.track(this.superviseFsWatcher(attempted));
      await firstAttempt;
    }
    if (this.isStopped()) return undefined;
    const read = await this.observe(false);
    if (this.isStopped()) return undefined;
    this.current = read.fingerprint;
    this.track(this.pollLoop());
    if (!this.deferChecks) this.resume();
    return read;
  }

  /** With deferChecks: lets checks run (those triggered meanwhile run now). */
  resume(): void {
    if (this.ready || this.isStopped() || !this.started) return;
    this.ready = true;
    if (this.pending !== undefined) this.kick();
  }

  /**
   * Asks for a check now (e.g. 'api': the source's watch saw an event); coalesces with everything
   * else, and like any check calls onChange only when the fingerprint changed. Ignored after stop().
   */
  request(source: ChangeSource = 'poll'): void {
    this.trigger(source);
  }

  /**
   * Accepts `fingerprint` as the current one (e.g. after the reload machine applied or rejected a
   * config it read itself), so no check fires for it again.
   */
  acknowledge(fingerprint: string): void {
    this.current = fingerprint;
  }

  /**
   * Stops every trigger: closes chokidar, aborts every timer, waits for the fs reads of a check in
   * progress (not for an onChange in progress, which may itself be what calls stop()), and resolves
   * when no handle of this watcher is left. No onChange starts after stop() is called. Idempotent.
   */
  stop(): Promise<void> {
    this.stopping ??= this.shutdown();
    return this.stopping;
  }

  private async shutdown(): Promise<void> {
    this.stopped = true;
    this.pending = undefined;
    this.abort.abort();
    this.restartRequested?.({ reason: 'stopped', error: false });
    await Promise.allSettled([...this.tasks, ...(this.observing ? [this.observing] : [])]);
    const hadWatcher = this.fsw !== undefined;
    await this.closeFsWatcher();
    if (hadWatcher || this.useFsEvents) await settle();
  }

  /** Read through a call: the compiler would keep `this.stopped` narrowed across awaits. */
  private isStopped(): boolean {
    return this.stopped;
  }

  private track(task: Promise<void>): void {
    this.tasks.add(task);
    void task.finally(() => this.tasks.delete(task));
  }

  /** Sleeps on the clock; false when stopped meanwhile. */
  private async pause(ms: number, signal: AbortSignal = this.abort.signal): Promise<boolean> {
    try {
      await this.clock.sleep(Math.min(ms, MAX_TIMER_MS), signal);
      return !this.stopped;
    } catch {
      return false;
    }
  }

  // --- the check queue -------------------------------------------------------------------------

  private trigger(source: ChangeSource): void {
    if (this.isStopped()) return;
    if (source !== 'poll') this.setActive(true, source);
    this.pending ??= source;
    if (this.ready) this.kick();
  }

  private setActive(active: boolean, cause?: ChangeSource): void {
    if (active === this.active) return;
    this.active = active;
    this.onActivity?.(active, cause);
  }

  /** Nothing pending, running or waiting out a burst: whatever was noticed is decided. */
  private settleActivity(): void {
    if (this.pending === undefined && this.burstStartedAt === undefined && !this.draining) this.setActive(false);
  }

  private kick(): void {
    if (this.draining || this.stopped) return;
    this.draining = true;
    // Not tracked for stop(): it may be awaiting onChange, which may itself be what calls stop().
    this.drain().catch((error: unknown) => {
      this.logger.log('error', 'config watcher check failed', { path: this.path, error: errorMessage(error) });
    });
  }

  private async drain(): Promise<void> {
    try {
      while (!this.isStopped()) {
        const noticedBy = this.pending;
        if (noticedBy === undefined) break;
        this.pending = undefined;
        await this.check(noticedBy);
      }
    } finally {
      this.draining = false;
      this.settleActivity();
    }
  }

  /**
   * The source side of a check: read the content (unless `skipIfProbed` and the source's probe
   * still equals the one that vouched for the last read: then undefined), then make sure the fs
   * watcher still covers the source. In this order: a change after the check is either seen by a
   * watcher that was verified afterwards, or it changed what must be watched, and the re-created
   * watcher's catch-up check reads it. Never throws.
   */
  private observe(verify: boolean): Promise<SourceRead>;
  private observe(verify: boolean, skipIfProbed: true): Promise<SourceRead | undefined>;
  private observe(verify: boolean, skipIfProbed = false): Promise<SourceRead | undefined> {
    const task = (async () => {
      if (skipIfProbed) {
        this.counters.probes++;
        const probe = await this.source.probe().catch(() => undefined);
        if (probe !== undefined && probe === this.lastProbe) return undefined;
      }
      this.counters.reads++;
      const read = await this.source.read();
      this.lastProbe = read.probe;
      if (verify) await this.verifyFsWatcher();
      return read;
    })();
    this.observing = task;
    return task.finally(() => {
      if (this.observing === task) this.observing = undefined;
    });
  }

  private async check(source: ChangeSource): Promise<void> {
    this.counters.checks++;
    // Only a 'poll' check (the periodic one, a plain request()) trusts the probe: an fs or watch event reads.
    const read = source === 'poll' ? await this.observe(this.useFsEvents, true) : await this.observe(this.useFsEvents);
    if (this.isStopped() || read === undefined) return;
    const fingerprint = read.fingerprint;
    const previous = this.current;
    if (fingerprint === previous) return;
    this.logger.log('debug', 'config source changed', { path: this.path, source, fingerprint, previous });
    this.setActive(true, source);
    this.current = fingerprint;
    this.counters.changes[source]++;
    try {
      await this.onChange(source, fingerprint, read);
    } catch (error) {
      this.counters.handlerErrors++;
      // Not handled: forget it, so the next poll reads and offers it again (unless acknowledged meanwhile).
      if (this.current === fingerprint) this.current = previous;
      this.lastProbe = undefined;
      this.logger.log('error', 'config change handler failed; the next poll retries', {
        path: this.path,
        source,
        error: errorMessage(error),
      });
    }
  }

  private async pollLoop(): Promise<void> {
    while (await this.pause(this.pollIntervalMs)) {
      this.counters.polls++;
      this.trigger('poll');
    }
  }

  // --- fs events -------------------------------------------------------------------------------

  private noteFsEvent(): void {
    if (this.isStopped()) return;
    this.counters.fsEvents++;
    this.lastEventAt = this.clock.now();
    this.setActive(true, 'fs');
    if (this.burstStartedAt !== undefined) return;
    this.burstStartedAt = this.lastEventAt;
    this.track(this.debounce());
  }

  /** Waits until the burst has been quiet for debounceMs (or lasted maxDebounceMs), then triggers one check. */
  private async debounce(): Promise<void> {
    for (;;) {
      const startedAt = this.burstStartedAt ?? this.lastEventAt;
      const due = Math.min(this.lastEventAt + this.debounceMs, startedAt + this.maxDebounceMs);
      const wait = due - this.clock.now();
      if (wait <= 0) break;
      if (!(await this.pause(wait))) return;
    }
    this.burstStartedAt = undefined;
    this.trigger('fs');
  }

  /** Keeps an fs watcher up: opens it, waits until it must be re-created, backs off, repeats. */
  private async superviseFsWatcher(firstAttempted: () => void): Promise<void> {
    let failures = 0;
    let first = true;
    while (!this.isStopped()) {
      let openedAt: number | undefined;
      let retry: RestartRequest | undefined;
      try {
        const target = await resolveWatchTarget(this.path);
        if (this.isStopped()) break;
        await this.openFsWatcher(target);
        openedAt = this.clock.now();
        if (!first) {
          this.logger.log('info', 'config fs watcher re-created', {
            path: this.path,
            watching: describeTarget(target),
          });
          this.trigger('fs'); // catch up on whatever happened while it was down
        }
      } catch (error) {
        if (this.isStopped()) break;
        this.counters.watcherErrors++;
        retry = { reason: errorMessage(error), error: true };
      }
      if (first) {
        first = false;
        firstAttempted();
      }
      if (openedAt !== undefined) {
        retry = await new Promise<RestartRequest>((done) => {
          this.restartRequested = done;
        });
        this.restartRequested = undefined;
      }
      await this.closeFsWatcher();
      if (this.stopped || retry === undefined) break;
      if (openedAt !== undefined && this.clock.now() - openedAt >= this.backoff.max) failures = 0;
      const delay = backoffDelay(failures, { initialMs: this.backoff.initial, maxMs: this.backoff.max });
      failures++;
      this.counters.watcherRestarts++;
      this.logger.log(
        retry.error ? 'warn' : 'info',
        retry.error
          ? 'config fs watcher failed; the poll keeps checking until it is re-created'
          : 'config fs watcher is being re-created',
        { path: this.path, reason: retry.reason, retryInMs: delay, pollIntervalMs: this.pollIntervalMs },
      );
      if (!(await this.pause(delay))) break;
    }
    if (first) firstAttempted();
  }

  private requestRestart(request: RestartRequest): void {
    if (request.error) this.counters.watcherErrors++;
    const restart = this.restartRequested;
    this.restartRequested = undefined;
    restart?.(request);
  }

  /** Creates the chokidar watcher for target and waits for it to be ready. */
  private async openFsWatcher(target: WatchTarget): Promise<void> {
    const watcher = this.createFsWatcher(target.dir, {
      depth: 0,
      followSymlinks: false,
      ignoreInitial: true,
      atomic: false,
      persistent: true,
      ...(target.name === undefined
        ? {}
        : {
            ignored: (path: string) =>
              path !== target.dir && !(dirname(path) === target.dir && relevantName(target, basename(path))),
          }),
    });
    this.fsw = watcher;
    this.fswTarget = target;
    this.fswSuspect = false;
    let isReady = false;
    const selfName = basename(target.dir);

    watcher.on('all', (_event, path) => {
      if (!isReady || this.fsw !== watcher) return;
      if (target.name !== undefined && !(dirname(path) === target.dir && relevantName(target, basename(path)))) return;
      this.noteFsEvent();
    });
    watcher.on('raw', (_event, name, details) => {
      if (!isReady || this.fsw !== watcher) return;
      const watchedPath =
        typeof details === 'object' && details !== null && 'watchedPath' in details ? details.watchedPath : undefined;
      if (watchedPath === target.dir) {
        // The directory's own watch: `name` is an entry of it, or the directory itself when it was deleted or moved.
        if (name === selfName) this.fswSuspect = true;
        else if (!relevantName(target, name)) return;
      }
      this.noteFsEvent();
    });

    const timeout = new AbortController();
    try {
      await new Promise<void>((ready, fail) => {
        watcher.on('error', (error: unknown) => {
          if (this.fsw !== watcher) return;
          if (!isReady) {
            fail(asError(error));
            return;
          }
          this.requestRestart({ reason: `chokidar error: ${errorMessage(error)}`, error: true });
        });
        watcher.once('ready', () => {
          isReady = true;
          ready();
        });
        void this.pause(this.readyTimeoutMs, AbortSignal.any([this.abort.signal, timeout.signal])).then((expired) => {
          if (expired) fail(new Error(`chokidar was not ready after ${String(this.readyTimeoutMs)} ms`));
          else if (this.isStopped()) fail(new Error('stopped'));
        });
      });
    } finally {
      timeout.abort(TIMER_NOT_NEEDED);
    }
  }

  private async closeFsWatcher(): Promise<void> {
    const watcher = this.fsw;
    if (watcher === undefined) return;
    this.fsw = undefined;
    this.fswTarget = undefined;
    clearChokidarThrottles(watcher);
    try {
      const closing = watcher.close(); // removes every listener
      // An fs call chokidar started before close() may still fail and emit 'error'; with no listener
      // that would be an uncaught exception.
      watcher.on('error', () => undefined);
      await closing;
    } catch (error) {
      this.logger.log('warn', 'closing the config fs watcher failed', { path: this.path, error: errorMessage(error) });
    }
  }

  /** Part of every check: is the fs watcher still watching the right, living directory? */
  private async verifyFsWatcher(): Promise<void> {
    const current = this.fswTarget;
    if (current === undefined || this.restartRequested === undefined) return; // down: the supervisor is on it
    let target: WatchTarget;
    try {
      target = await resolveWatchTarget(this.path);
    } catch (error) {
      this.requestRestart({ reason: `cannot resolve what to watch: ${errorMessage(error)}`, error: true });
      return;
    }
    if (this.fswTarget !== current) return; // replaced meanwhile
    if (targetKey(target) !== targetKey(current)) {
      const intact = (await identityOf(current.dir)) === current.id;
      this.requestRestart(
        intact
          ? { reason: `now watching ${describeTarget(target)} instead of ${describeTarget(current)}`, error: false }
          : { reason: `the watched directory ${current.dir} vanished or was replaced`, error: true },
      );
    } else if (this.fswSuspect) {
      this.requestRestart({
        reason: `the watched directory ${current.dir} reported itself deleted or moved`,
        error: false,
      });
    }
  }
}
