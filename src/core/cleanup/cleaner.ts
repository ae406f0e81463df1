// The cleaner port: how a volume's data is wiped in this process. The real one runs the class's
// blockCleanerCommand (LOCAL_PV_BLKDEVICE set) or empties a filesystem volume; the in-memory one
// records calls and can be slow or fail on demand (tests, simulate).
import { constants } from 'node:fs';
import { open, readdir, readFile } from 'node:fs/promises';
import type { FileHandle } from 'node:fs/promises';
import { deleteVolumeContents } from './filesystem.js';
import type { NodeVolumes } from '../node/volumes.js';
import { nodeProcessHost } from '../process-host.js';
import type { ProcessHost } from '../process-host.js';
import { errnoCode, errorMessage } from '../unknown-values.js';
import { childProcess } from '../on-demand-builtins.js';

export interface CleanOptions {
  readonly signal: AbortSignal;
  /** Each line the cleaner prints (stdout and stderr). */
  readonly onOutput?: (line: string, stream: 'stdout' | 'stderr') => void;
  /**
   * Called once the cleaner holds what it will wipe (a block device open, a volume's directory
   * handle) and before it writes anything; a rejection refuses the cleanup. The caller checks here
   * that what is held is the disk it checked, so a disk swapped in meanwhile is never the one wiped.
   */
  readonly beforeWipe?: () => Promise<void>;
  /** The PV whose volume this cleanup is for (logs, the in-memory cleaner's record). */
  readonly pv?: string;
}

export interface FilesystemCleanResult {
  readonly removed: number;
  readonly skippedMounts: readonly string[];
}

export interface VolumeCleaner {
  /** Runs argv with LOCAL_PV_BLKDEVICE=device; rejects unless it exits 0. */
  cleanBlock(device: string, command: readonly string[], options: CleanOptions): Promise<void>;
  /** Deletes everything inside the volume, keeping the mount point; never follows symlinks or enters nested mounts. */
  cleanFilesystem(path: string, options: CleanOptions): Promise<FilesystemCleanResult>;
}

export class CleanerFailedError extends Error {}

function lines(onLine: (line: string) => void): (chunk: Buffer) => void {
  let rest = '';
  return (chunk) => {
    const text = rest + chunk.toString('utf8');
    const parts = text.split('\n');
    rest = parts.pop() ?? '';
    for (const p of parts) onLine(p);
  };
}

export interface ProcessCleanerOptions {
  /** After SIGTERM to the cleaner's process group, how long before SIGKILL (default 5 s). */
  readonly killGraceMs?: number;
  /** Signals the cleaner's process group; default the real process. */
  readonly host?: Pick<ProcessHost, 'kill'>;
}

type Kill = ProcessHost['kill'];

/**
 * Whether any process of group `pgid` still runs. A zombie does not count: it has ended, and is
 * waiting for its parent (PID 1 once the leader has exited) to reap it; kill(-pgid, 0) would still
 * find it. Linux: read from /proc; without /proc, kill(-pgid, 0) decides.
 */
async function groupRunning(kill: Kill, pgid: number): Promise<boolean> {
  try {
    kill(-pgid, 0);
  } catch (err) {
    // EPERM: a member exists but changed its credentials; still running.
    if (!(errnoCode(err) === 'EPERM')) return false;
  }
  let pids: string[];
  try {
    pids = (await readdir('/proc')).filter((name) => /^\d+$/u.test(name));
  } catch {
    return true;
  }
  for (const pid of pids) {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
    // pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses, so split after the last ')'.
    const [state, , pgrp] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (pgrp === String(pgid) && state !== 'Z' && state !== 'X') return true;
  }
  return false;
}

function signalGroup(kill: Kill, pgid: number, signal: NodeJS.Signals): void {
  try {
    kill(-pgid, signal);
  } catch {
    // ESRCH: the group is already gone.
  }
}

const sleep = (ms: number): Promise<void> =>
  new Promise((resolve) => {
    setTimeout(resolve, ms);
  });

/**
 * Ends every process of group `pgid`: SIGTERM, then SIGKILL after `graceMs` if any is left, then
 * waits a little for the kernel to end them. Bounded: returns after about graceMs + 2 s at most.
 */
async function endGroup(kill: Kill, pgid: number, graceMs: number): Promise<void> {
  if (!(await groupRunning(kill, pgid))) return;
  signalGroup(kill, pgid, 'SIGTERM');
  const deadline = Date.now() + graceMs;
  while (Date.now() < deadline) {
    await sleep(25);
    if (!(await groupRunning(kill, pgid))) return;
  }
  signalGroup(kill, pgid, 'SIGKILL');
  const killed = Date.now() + 2_000;
  while (Date.now() < killed && (await groupRunning(kill, pgid))) await sleep(25);
}

/**
 * The real cleaner. `environment` is the agent's own environment (the command layer passes it).
 *
 * The command runs in a process group of its own (detached), so that what it starts can be ended
 * with it: on abort, the whole group gets SIGTERM, then SIGKILL after a grace period. When the
 * command itself exits, whatever it left running in its group is ended the same way before the
 * result counts: exit 0 means "the device is wiped", after which the PV is deleted and the device
 * published again for a new claim; a leftover `dd` or `shred` still writing to it would then
 * destroy the next tenant's data, and after a failure it would race the retry. A cleaner that
 * wants work to outlive it must not be a blockCleanerCommand.
 */
export class ProcessCleaner implements VolumeCleaner {
  constructor(
    private readonly environment: Readonly<Record<string, string | undefined>>,
    private readonly options: ProcessCleanerOptions = {},
  ) {}

  async cleanBlock(device: string, command: readonly string[], options: CleanOptions): Promise<void> {
    const [file] = command;
    if (file === undefined || file === '') throw new CleanerFailedError('empty block cleaner command');
    if (options.signal.aborted) throw new CleanerFailedError(`${command.join(' ')}: aborted`);
    if (options.beforeWipe === undefined) return this.runBlockCleaner(device, command, options);
    // Held open while the cleaner runs: a loop device held cannot be detached and bound to another
    // file under the same number, and a disk pulled leaves the held one failing, never another.
    const held = await holdBlockDevice(device);
    try {
      await options.beforeWipe();
      await this.runBlockCleaner(device, command, options);
    } finally {
      await held.close();
    }
  }

  private runBlockCleaner(device: string, command: readonly string[], options: CleanOptions): Promise<void> {
    const [file = '', ...args] = command;
    const graceMs = this.options.killGraceMs ?? 5_000;
    const host = this.options.host ?? nodeProcessHost;
    const kill: Kill = (pid, signal) => {
      host.kill(pid, signal);
    };
    return new Promise((resolve, reject) => {
      const child = childProcess().spawn(file, args, {
        env: { ...this.environment, LOCAL_PV_BLKDEVICE: device },
        stdio: ['ignore', 'pipe', 'pipe'],
        detached: true,
      });
      const pgid = child.pid;
      let aborted = false;
      let ending: Promise<void> | undefined;
      const end = (): Promise<void> =>
        (ending ??= pgid === undefined ? Promise.resolve() : endGroup(kill, pgid, graceMs));
      const onAbort = (): void => {
        aborted = true;
        void end();
      };
      options.signal.addEventListener('abort', onAbort, { once: true });
      child.stdout.on(
        'data',
        lines((l) => options.onOutput?.(l, 'stdout')),
      );
      child.stderr.on(
        'data',
        lines((l) => options.onOutput?.(l, 'stderr')),
      );
      child.on('error', (err) => {
        options.signal.removeEventListener('abort', onAbort);
        reject(new CleanerFailedError(`${file}: ${err.message}`));
      });
      // 'exit', not 'close': a background child holding the pipes would delay 'close' until it ends.
      child.on('exit', (code, signal) => {
        options.signal.removeEventListener('abort', onAbort);
        void end().then(() => {
          if (code === 0 && !aborted) resolve();
          else
            reject(
              new CleanerFailedError(
                `${command.join(' ')} ${aborted ? 'aborted' : 'exited'} ${code === null ? `on ${signal ?? 'a signal'}` : `with status ${code}`}`,
              ),
            );
        });
      });
    });
  }

  async cleanFilesystem(path: string, options: CleanOptions): Promise<FilesystemCleanResult> {
    const result = await deleteVolumeContents(path, {
      signal: options.signal,
      ...(options.beforeWipe !== undefined ? { beforeWipe: options.beforeWipe } : {}),
    });
    if (result.errors.length > 0) {
      throw new CleanerFailedError(
        `could not delete ${result.errors.length} entries of ${path}: ${result.errors
          .slice(0, 3)
          .map((e) => `${e.path}: ${e.message}`)
          .join('; ')}`,
      );
    }
    return { removed: result.removed, skippedMounts: result.skippedMounts };
  }
}

/** Opens a block device to hold it (read-only, never following a final symlink: the caller resolved it). */
async function holdBlockDevice(device: string): Promise<FileHandle> {
  let handle: FileHandle;
  try {
    handle = await open(device, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (err) {
    throw new CleanerFailedError(`cannot open ${device}: ${errorMessage(err)}`);
  }
  try {
    if (!(await handle.stat()).isBlockDevice()) throw new CleanerFailedError(`${device} is not a block device`);
  } catch (err) {
    await handle.close();
    throw err instanceof CleanerFailedError
      ? err
      : new CleanerFailedError(`cannot stat ${device}: ${errorMessage(err)}`);
  }
  return handle;
}

export interface RecordedClean {
  readonly kind: 'block' | 'filesystem';
  readonly path: string;
  readonly command?: readonly string[];
}

export interface MemoryCleanerOptions {
  /** The in-memory node: a cleanup fails, as a real one would, when nothing is at its path. */
  readonly volumes?: Pick<NodeVolumes, 'entryInfo'>;
  /** Told when a cleanup holds its target (after beforeWipe passed): from here on it writes. */
  readonly onOpen?: (call: RecordedClean, pv: string | undefined) => void;
  /** Told when a cleanup finished wiping its target. */
  readonly onWiped?: (call: RecordedClean, pv: string | undefined) => void;
}

/** In-memory cleaner: every call is recorded; behaviour per path is scripted. */
export class MemoryCleaner implements VolumeCleaner {
  readonly calls: RecordedClean[] = [];
  private readonly plans = new Map<string, { failWith?: string; until?: Promise<void> }>();

  constructor(private readonly options: MemoryCleanerOptions = {}) {}

  /** The next cleanups of path fail with this message (until cleared). */
  fail(path: string, message: string): void {
    this.plans.set(path, { ...this.plans.get(path), failWith: message });
  }
  /** Cleanups of path wait for this promise (a slow disk). */
  hold(path: string, until: Promise<void>): void {
    this.plans.set(path, { ...this.plans.get(path), until });
  }
  clear(path: string): void {
    this.plans.delete(path);
  }

  private async run(call: RecordedClean, options: CleanOptions): Promise<void> {
    this.calls.push(call);
    const { signal } = options;
    if (this.options.volumes !== undefined) {
      const info = await this.options.volumes.entryInfo(call.path);
      if (info.kind === 'missing') throw new CleanerFailedError(`${call.path}: no such file or directory`);
    }
    await options.beforeWipe?.();
    this.options.onOpen?.(call, options.pv);
    const plan = this.plans.get(call.path);
    if (plan?.until) {
      await Promise.race([
        plan.until,
        new Promise((_, reject) => {
          signal.addEventListener(
            'abort',
            () => {
              reject(new CleanerFailedError('aborted'));
            },
            { once: true },
          );
        }),
      ]);
    }
    if (plan?.failWith !== undefined) throw new CleanerFailedError(plan.failWith);
    this.options.onWiped?.(call, options.pv);
  }

  async cleanBlock(device: string, command: readonly string[], options: CleanOptions): Promise<void> {
    await this.run({ kind: 'block', path: device, command }, options);
  }

  async cleanFilesystem(path: string, options: CleanOptions): Promise<FilesystemCleanResult> {
    await this.run({ kind: 'filesystem', path }, options);
    return { removed: 0, skippedMounts: [] };
  }
}
