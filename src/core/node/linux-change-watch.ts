// Change events of the real node, so that discovery does not poll. The kernel wakes poll(2) on
// /proc/self/mountinfo with POLLPRI when the mount table changes; Node cannot wait for POLLPRI and
// inotify reports nothing for procfs files (checked: fs.watch on mountinfo stays silent across a
// mount), so a long-lived `findmnt --poll` (util-linux, in the image) waits for it and prints a
// line per change. inotify (fs.watch) reports entries created, removed or renamed in the watched
// directories, symlinks included. Without findmnt the caller falls back to polling.
import { watch, type FSWatcher } from 'node:fs';
import { readdir, readlink, realpath } from 'node:fs/promises';
import { setTimeout as delay } from 'node:timers/promises';

import { mountChangeConcerns } from './volumes.js';
import type { ChangeWatch, ChangeWatchOptions, ChangeWatchOutcome } from './volumes.js';
import { childProcess } from '../on-demand-builtins.js';

export interface LinuxChangeWatchOptions extends ChangeWatchOptions {
  /** The findmnt command (looked up on PATH unless absolute). */
  readonly findmnt: string;
  /** The mount table discovery reads; only /proc/self/mountinfo has change events. */
  readonly mountInfoPath: string;
  /** Any output of findmnt (a mount-table change, whether or not it concerns the directories). */
  readonly onMountTableChange?: () => void;
}

export const PROC_MOUNTINFO = '/proc/self/mountinfo';
/** The tail of findmnt's stderr kept for the failure reason. */
const STDERR_KEPT = 2048;
/** How long ready waits for findmnt to open the mount table before trusting it anyway. */
const OPEN_WAIT_MS = 2000;
/** A line of findmnt longer than this is not a mount change (paths are at most 4 KiB, escaped 16). */
const LINE_LIMIT = 64 * 1024;

export function watchLinuxChanges(options: LinuxChangeWatchOptions): ChangeWatch {
  const { signal } = options;
  if (options.mountInfoPath !== PROC_MOUNTINFO) {
    const failed: ChangeWatchOutcome = {
      ok: false,
      reason: `the mount table ${options.mountInfoPath} has no change events (only ${PROC_MOUNTINFO})`,
    };
    return { ready: Promise.resolve(failed), done: Promise.resolve(failed) };
  }
  const notify = (): void => {
    if (!signal.aborted) options.onChange();
  };
  const watched = kernelNames(options.directories);
  const directories = directoryWatches(options.directories, notify);

  const child = childProcess().spawn(
    options.findmnt,
    ['--poll', '--noheadings', '--raw', '--output', 'ACTION,TARGET'],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    stderr = (stderr + chunk).slice(-STDERR_KEPT);
  });
  // One line per change: `ACTION TARGET [OLD-TARGET]`. Only changes at, above or below a watched
  // directory are news; on a node kubelet mounts every pod's volumes elsewhere, and each of those
  // would otherwise cost a discovery pass.
  const lines = new MountChangeLines();
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    options.onMountTableChange?.();
    if (lines.push(chunk).some((targets) => mountChangeConcerns(targets, watched()))) {
      directories.watchAll();
      notify();
    }
  });
  const stop = (): void => {
    child.kill('SIGTERM');
  };
  signal.addEventListener('abort', stop, { once: true });

  let spawned = false;
  const done = new Promise<ChangeWatchOutcome>((resolve) => {
    const finish = (outcome: ChangeWatchOutcome): void => {
      signal.removeEventListener('abort', stop);
      directories.closeAll();
      resolve(signal.aborted ? { ok: true } : outcome);
    };
    child.once('error', (error) => {
      if (!spawned) finish({ ok: false, reason: `cannot run ${options.findmnt}: ${error.message}` });
    });
    child.once('close', (code, killedBy) => {
      const status = killedBy === null ? `code ${String(code)}` : `signal ${killedBy}`;
      const detail = stderr.trim();
      finish({ ok: false, reason: `${options.findmnt} --poll exited (${status})${detail ? `: ${detail}` : ''}` });
    });
  });
  const ready = new Promise<ChangeWatchOutcome>((resolve) => {
    void done.then(resolve);
    child.once('spawn', () => {
      spawned = true;
      directories.watchAll();
      void opened(child.pid ?? 0, signal).then(() => {
        resolve({ ok: true });
      });
    });
  });
  return { ready, done };
}

/**
 * The directories as given and as the kernel names them (a symlink in the path is resolved in the
 * mount table); until realpath answers, as given.
 */
function kernelNames(given: readonly string[]): () => readonly string[] {
  let watched: readonly string[] = given;
  void Promise.all(given.map((dir) => realpath(dir).catch(() => dir))).then((real) => {
    watched = [...new Set([...given, ...real])];
  });
  return () => watched;
}

/** inotify watches of the directories: an entry created, removed or moved in one is news. */
function directoryWatches(
  given: readonly string[],
  notify: () => void,
): { readonly watchAll: () => void; readonly closeAll: () => void } {
  const directories = new Map<string, FSWatcher>();
  // (Re)watches every directory: a mount on a directory itself hides the inode inotify watched.
  const watchAll = (): void => {
    for (const dir of given) {
      directories.get(dir)?.close();
      directories.delete(dir);
      try {
        // 'rename' is an entry created, removed or moved; 'change' (a file written) is not news.
        const watcher = watch(dir, { persistent: false }, (event) => {
          if (event === 'rename') notify();
        });
        watcher.on('error', () => {
          watcher.close();
          if (directories.get(dir) === watcher) directories.delete(dir);
          notify();
        });
        directories.set(dir, watcher);
      } catch {
        // Missing for now: retried on the next mount-table change; the periodic pass covers the rest.
      }
    }
  };
  const closeAll = (): void => {
    for (const watcher of directories.values()) watcher.close();
    directories.clear();
  };
  return { watchAll, closeAll };
}

/**
 * Waits until process pid has the mount table open: from then on every mount change wakes its
 * poll() (the kernel compares the table's event counter with the one seen at open).
 */
async function opened(pid: number, signal: AbortSignal): Promise<void> {
  const deadline = performance.now() + OPEN_WAIT_MS;
  while (!signal.aborted && performance.now() < deadline) {
    try {
      const fds = await readdir(`/proc/${String(pid)}/fd`);
      for (const fd of fds) {
        const target = await readlink(`/proc/${String(pid)}/fd/${fd}`).catch(() => '');
        if (target.endsWith('/mountinfo')) return;
      }
    } catch {
      return; // the process is gone: done reports it
    }
    await delay(2, undefined, { signal }).catch(() => undefined);
  }
}

/**
 * Splits findmnt's output into changes, each the paths it names (target, and old target of a move
 * or unmount), decoded from `--raw`'s `\xHH` escapes. A line that cannot be read is an empty list,
 * which concerns every directory: when in doubt, a pass.
 */
export class MountChangeLines {
  private partial = '';

  push(chunk: string): (readonly string[])[] {
    const text = this.partial + chunk;
    const parts = text.split('\n');
    this.partial = parts.pop() ?? '';
    const changes = parts.filter((line) => line !== '').map(changedPaths);
    if (this.partial.length > LINE_LIMIT) {
      this.partial = '';
      changes.push([]);
    }
    return changes;
  }
}

function changedPaths(line: string): readonly string[] {
  const [action, ...paths] = line.split(' ');
  if (action === undefined || !/^[a-z]+$/u.test(action)) return [];
  const decoded = paths.filter((p) => p !== '').map(decodeRaw);
  return decoded.every((p) => p.startsWith('/')) ? decoded : [];
}

/** findmnt --raw writes unsafe bytes (space, newline, backslash, non-ASCII in the C locale) as \xHH. */
function decodeRaw(text: string): string {
  if (!text.includes('\\')) return text;
  const bytes: number[] = [];
  for (let i = 0; i < text.length; i++) {
    const hex = text[i] === '\\' ? /^x([0-9a-fA-F]{2})/u.exec(text.slice(i + 1, i + 4)) : null;
    if (hex?.[1] !== undefined) {
      bytes.push(Number.parseInt(hex[1], 16));
      i += 3;
    } else bytes.push(...Buffer.from(text[i] ?? '', 'utf8'));
  }
  return Buffer.from(bytes).toString('utf8');
}
