// The cleaner port: how a volume's data is wiped in this process. The real one runs the class's
// blockCleanerCommand (LOCAL_PV_BLKDEVICE set) or empties a filesystem volume; the in-memory one
// records calls and can be slow or fail on demand (tests, simulate).
import { spawn } from 'node:child_process';
import { deleteVolumeContents } from './filesystem.js';

export interface CleanOptions {
  readonly signal: AbortSignal;
  /** Each line the cleaner prints (stdout and stderr). */
  readonly onOutput?: (line: string, stream: 'stdout' | 'stderr') => void;
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

/** The real cleaner. `environment` is the agent's own environment (the command layer passes it). */
export class ProcessCleaner implements VolumeCleaner {
  constructor(private readonly environment: Readonly<Record<string, string | undefined>>) {}

  cleanBlock(device: string, command: readonly string[], options: CleanOptions): Promise<void> {
    const [file, ...args] = command;
    if (file === undefined || file === '') return Promise.reject(new CleanerFailedError('empty block cleaner command'));
    return new Promise((resolve, reject) => {
      const child = spawn(file, args, {
        env: { ...this.environment, LOCAL_PV_BLKDEVICE: device },
        stdio: ['ignore', 'pipe', 'pipe'],
        signal: options.signal,
        killSignal: 'SIGTERM',
      });
      child.stdout.on(
        'data',
        lines((l) => options.onOutput?.(l, 'stdout')),
      );
      child.stderr.on(
        'data',
        lines((l) => options.onOutput?.(l, 'stderr')),
      );
      child.on('error', (err) => {
        reject(new CleanerFailedError(`${file}: ${err.message}`));
      });
      child.on('close', (code, signal) => {
        if (code === 0) resolve();
        else
          reject(
            new CleanerFailedError(
              `${command.join(' ')} exited ${code === null ? `on ${signal ?? 'a signal'}` : `with status ${code}`}`,
            ),
          );
      });
    });
  }

  async cleanFilesystem(path: string, options: CleanOptions): Promise<FilesystemCleanResult> {
    const result = await deleteVolumeContents(path, { signal: options.signal });
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

export interface RecordedClean {
  readonly kind: 'block' | 'filesystem';
  readonly path: string;
  readonly command?: readonly string[];
}

/** In-memory cleaner: every call is recorded; behaviour per path is scripted. */
export class MemoryCleaner implements VolumeCleaner {
  readonly calls: RecordedClean[] = [];
  private readonly plans = new Map<string, { failWith?: string; until?: Promise<void> }>();

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

  private async run(path: string, signal: AbortSignal): Promise<void> {
    const plan = this.plans.get(path);
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
  }

  async cleanBlock(device: string, command: readonly string[], options: CleanOptions): Promise<void> {
    this.calls.push({ kind: 'block', path: device, command });
    await this.run(device, options.signal);
  }

  async cleanFilesystem(path: string, options: CleanOptions): Promise<FilesystemCleanResult> {
    this.calls.push({ kind: 'filesystem', path });
    await this.run(path, options.signal);
    return { removed: 0, skippedMounts: [] };
  }
}
