// The process-level cleanup table (upstream's ProcTable, made safer). It outlives sync-loop
// generations so a reload never forgets or repeats a cleanup in flight, runs in-process cleanups
// with bounded concurrency, and records outcomes with the PV's UID so a stale success can never
// let a later PV of the same name be deleted uncleaned (upstream PR #174).
import { backoffDelay } from '../backoff.js';
import type { Clock } from '../clock.js';
import type { VolumeMode } from '../config/model.js';
import type { Logger } from '../log.js';
import type { NodeVolumes } from '../node/volumes.js';
import { NO_IDENTITY } from '../pv/identity.js';
import type { VolumeCleaner } from './cleaner.js';
import { cleanBlockGuarded } from './guard.js';
import { errorMessage } from '../unknown-values.js';

export type CleanupMethod = 'process' | 'job';
export type CleanupState = 'queued' | 'running' | 'succeeded' | 'failed';

export interface CleanupSpec {
  readonly pvName: string;
  readonly pvUid: string;
  readonly className: string;
  readonly mode: VolumeMode;
  /** Path of the volume inside the agent's container. */
  readonly path: string;
  /** blockCleanerCommand for Block volumes. */
  readonly command: readonly string[];
  readonly capacityBytes: number;
  /**
   * The disk identity checked at the path when the cleanup was decided (`none` when the node
   * offers none): the cleaner is refused unless the disk it holds is this one, before and after.
   * Absent: not checked (a Job found running that does not say).
   */
  readonly identity?: string;
  /** Block: the device node the entry resolved to when it was checked; the cleaner gets this, never the entry's link. */
  readonly device?: string;
}

export interface CleanupEntry extends CleanupSpec {
  readonly method: CleanupMethod;
  readonly state: CleanupState;
  readonly startedAt: number;
  readonly finishedAt?: number;
  readonly attempts: number;
  readonly lastError?: string;
  /** After a failure: not retried before this time (exponential backoff). */
  readonly retryAt?: number;
  /** On success: the identity of the disk the cleanup held and found again when it ended (I3). */
  readonly cleaned?: string;
}

export interface BackoffPolicy {
  readonly initialMs: number;
  readonly maxMs: number;
}

export const DEFAULT_BACKOFF: BackoffPolicy = { initialMs: 5_000, maxMs: 300_000 };

export interface CleanupTableOptions {
  readonly cleaner: VolumeCleaner;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly concurrency: number;
  readonly backoff?: BackoffPolicy;
  /** Called whenever an entry changes state (e.g. to trigger a pass that deletes the PV). */
  readonly onChange?: (entry: CleanupEntry) => void;
  /** The node's volumes: each cleanup with an identity is checked against them before and after it runs. */
  readonly volumes?: Pick<NodeVolumes, 'entryInfo' | 'mountPoints' | 'volumeIdentity'>;
}

/** The disk at a cleanup's target is not (or no longer) the one that was checked. */
export class DiskChangedError extends Error {}

/** A Filesystem volume's path is a mount point (I4) of the disk `identity` (I1); else why not. */
async function checkMountedVolume(
  volumes: Pick<NodeVolumes, 'entryInfo' | 'mountPoints' | 'volumeIdentity'>,
  path: string,
  identity: string,
): Promise<void> {
  const info = await volumes.entryInfo(path);
  const mounted =
    info.kind === 'directory' && (await volumes.mountPoints()).some((m) => m.mountPoint === info.realPath);
  if (!mounted) throw new DiskChangedError(`nothing is mounted at ${path}; not emptied`);
  const found = (await volumes.volumeIdentity(path))?.id ?? NO_IDENTITY;
  if (found !== identity) throw new DiskChangedError(`the disk at ${path} is ${found}, not ${identity}`);
}

export class CleanupTable {
  private readonly entries = new Map<string, CleanupEntry>();
  private readonly queue: CleanupSpec[] = [];
  private running = 0;
  private readonly tasks = new Set<Promise<void>>();
  private readonly abort = new AbortController();
  succeededTotal = 0;
  failedTotal = 0;

  constructor(private readonly options: CleanupTableOptions) {}

  get(pvName: string): CleanupEntry | undefined {
    return this.entries.get(pvName);
  }

  list(): CleanupEntry[] {
    return [...this.entries.values()];
  }

  /** Queued or running: the volume must not be published again or cleaned a second time. */
  inProgress(pvName: string): boolean {
    const s = this.entries.get(pvName)?.state;
    return s === 'queued' || s === 'running';
  }

  count(state: CleanupState): number {
    return this.list().filter((e) => e.state === state).length;
  }

  remove(pvName: string): void {
    this.entries.delete(pvName);
  }

  private set(entry: CleanupEntry): void {
    this.entries.set(entry.pvName, entry);
    this.options.onChange?.(entry);
  }

  private backoffFor(attempts: number): number {
    return backoffDelay(attempts - 1, this.options.backoff ?? DEFAULT_BACKOFF);
  }

  /** Queues an in-process cleanup. */
  startProcess(spec: CleanupSpec): void {
    const previous = this.entries.get(spec.pvName);
    const attempts = (previous?.pvUid === spec.pvUid ? previous.attempts : 0) + 1;
    this.set({ ...spec, method: 'process', state: 'queued', startedAt: this.options.clock.now(), attempts });
    this.queue.push(spec);
    this.pump();
  }

  /** Records a cleanup carried out by a Job (created by this agent or found running). */
  trackJob(spec: CleanupSpec, startedAt: number): void {
    const previous = this.entries.get(spec.pvName);
    if (previous?.pvUid === spec.pvUid && previous.method === 'job' && previous.state === 'running') return;
    const attempts = (previous?.pvUid === spec.pvUid ? previous.attempts : 0) + 1;
    this.set({ ...spec, method: 'job', state: 'running', startedAt, attempts });
  }

  /**
   * Outcome of a Job-based cleanup, read from the Job's status. `cleaned`: the identity the Job's
   * guard held and checked (a Job of this agent's); absent for a Job that does not say.
   */
  finishJob(pvName: string, outcome: { ok: true; cleaned?: string } | { ok: false; error: string }): void {
    const entry = this.entries.get(pvName);
    if (entry?.state !== 'running') return;
    this.finish(entry, outcome);
  }

  /** Records a failure that happened before any cleanup could run (missing path, no Job image…). */
  recordFailure(spec: CleanupSpec, method: CleanupMethod, error: string): CleanupEntry {
    const previous = this.entries.get(spec.pvName);
    const attempts = (previous?.pvUid === spec.pvUid ? previous.attempts : 0) + 1;
    const now = this.options.clock.now();
    const entry: CleanupEntry = {
      ...spec,
      method,
      state: 'failed',
      startedAt: now,
      finishedAt: now,
      attempts,
      lastError: error,
      retryAt: now + this.backoffFor(attempts),
    };
    this.failedTotal += 1;
    this.set(entry);
    return entry;
  }

  private finish(entry: CleanupEntry, outcome: { ok: true; cleaned?: string } | { ok: false; error: string }): void {
    const now = this.options.clock.now();
    if (outcome.ok) {
      this.succeededTotal += 1;
      const cleaned = outcome.cleaned !== undefined ? { cleaned: outcome.cleaned } : {};
      this.set({ ...entry, state: 'succeeded', finishedAt: now, ...cleaned });
    } else {
      this.failedTotal += 1;
      this.set({
        ...entry,
        state: 'failed',
        finishedAt: now,
        lastError: outcome.error,
        retryAt: now + this.backoffFor(entry.attempts),
      });
    }
  }

  private pump(): void {
    while (this.running < this.options.concurrency && !this.abort.signal.aborted) {
      const spec = this.queue.shift();
      if (!spec) return;
      const entry = this.entries.get(spec.pvName);
      if (entry?.pvUid !== spec.pvUid || entry.state !== 'queued') continue;
      this.running += 1;
      const task = this.runOne(entry).finally(() => {
        this.running -= 1;
        this.tasks.delete(task);
        this.pump();
      });
      this.tasks.add(task);
    }
  }

  private async runOne(queued: CleanupEntry): Promise<void> {
    const { logger } = this.options;
    const entry: CleanupEntry = { ...queued, state: 'running', startedAt: this.options.clock.now() };
    this.set(entry);
    logger.log('info', 'cleanup started', {
      pv: entry.pvName,
      mode: entry.mode,
      path: entry.path,
      ...(entry.device !== undefined ? { device: entry.device } : {}),
      attempt: entry.attempts,
    });
    try {
      await this.wipe(entry);
      if (this.abort.signal.aborted) return;
      logger.log('info', 'cleanup succeeded', { pv: entry.pvName });
      this.finish(entry, entry.identity !== undefined ? { ok: true, cleaned: entry.identity } : { ok: true });
    } catch (err) {
      if (this.abort.signal.aborted) return;
      const error = errorMessage(err);
      logger.log('error', 'cleanup failed', { pv: entry.pvName, error, attempt: entry.attempts });
      this.finish(entry, { ok: false, error });
    }
  }

  /**
   * Runs the cleaner on what was checked, bound to the identity checked (I1, I3): a Block volume's
   * resolved device through the guard Jobs run too (held open, checked once held and after the
   * cleaner); a Filesystem volume's directory, held, checked the same way and required to be a mount
   * point (I4). A cleanup without an identity (nothing to check against) runs as it is.
   */
  private async wipe(entry: CleanupEntry): Promise<void> {
    const { cleaner, logger, volumes } = this.options;
    const signal = this.abort.signal;
    const onOutput = (line: string, stream: 'stdout' | 'stderr'): void => {
      logger.log('info', 'cleaner output', { pv: entry.pvName, stream, line });
    };
    const { identity } = entry;
    const guarded = volumes !== undefined && identity !== undefined;
    if (entry.mode === 'Block') {
      const device = entry.device ?? entry.path;
      if (guarded)
        await cleanBlockGuarded(
          { device, identity, command: entry.command, pv: entry.pvName },
          { volumes, cleaner, onOutput },
          signal,
        );
      else await cleaner.cleanBlock(device, entry.command, { signal, onOutput, pv: entry.pvName });
      return;
    }
    const check = guarded ? () => checkMountedVolume(volumes, entry.path, identity) : undefined;
    const result = await cleaner.cleanFilesystem(entry.path, {
      signal,
      onOutput,
      pv: entry.pvName,
      ...(check !== undefined ? { beforeWipe: check } : {}),
    });
    if (check !== undefined && !signal.aborted)
      await check().catch((err: unknown) => {
        throw new DiskChangedError(`${errorMessage(err)}: it changed while it was cleaned; the cleanup does not count`);
      });
    for (const m of result.skippedMounts) {
      logger.log('warn', 'cleanup left a nested mount point untouched', { pv: entry.pvName, mount: m });
    }
  }

  /** Process shutdown: stops running cleaners (a restarted agent cleans those volumes again from the start). */
  async stop(): Promise<void> {
    this.abort.abort(new Error('agent stopping'));
    this.queue.length = 0;
    await Promise.allSettled([...this.tasks]);
  }
}
