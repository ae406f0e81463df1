// Writes a directory exactly the way kubelet's AtomicWriter projects a ConfigMap volume:
// data in a timestamped `..<ts>` directory, `..data` swapped by rename(2), keys as symlinks.
//
// writeConfigMapVolume does one update at once. kubeletUpdate does the same steps one by one and
// can stop between any two of them (onStep), including between the removals of the previous
// timestamped directory's files (os.RemoveAll unlinks them one at a time, in directory order, then
// removes the directory), and can be slowed down there (removalDelayMs), so a test or a soak can
// put a reader at any point of kubelet's update.
import type { Dirent } from 'node:fs';
import { lstat, mkdir, readdir, readlink, rename, rm, rmdir, symlink, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';

let sequence = 0;

/** One step of kubelet's AtomicWriter.Write (the numbers of its doc comment), done. */
export type KubeletStep =
  /** (5, 6) The new timestamped directory holds the payload. */
  | { readonly kind: 'wrote-payload'; readonly stamp: string }
  /** (7) A user-visible `key -> ..data/key` symlink for every key (new keys' are created, others exist). */
  | { readonly kind: 'linked-keys'; readonly stamp: string }
  /** (8) `..data_tmp -> <new ts dir>`. */
  | { readonly kind: 'created-data-tmp'; readonly stamp: string }
  /** (9) `rename(..data_tmp, ..data)`: readers resolving `..data` see the new directory from now on. */
  | { readonly kind: 'swapped'; readonly stamp: string; readonly previous: string | undefined }
  /** (10) The symlinks of keys the new data does not have are removed. */
  | { readonly kind: 'removed-deleted-keys'; readonly names: readonly string[] }
  /** (11) One entry of the previous timestamped directory removed: `removed` of `of` so far. */
  | {
      readonly kind: 'removed-old-file';
      readonly previous: string;
      readonly name: string;
      readonly removed: number;
      readonly of: number;
    }
  /** (11) The previous timestamped directory itself removed (emptied before). */
  | { readonly kind: 'removed-old-dir'; readonly previous: string };

export interface KubeletUpdateOptions {
  /** Awaited after every step: a test holds the writer there until it lets it continue. */
  readonly onStep?: (step: KubeletStep) => Promise<void> | void;
  /**
   * How long to wait before removing file `index` (0-based) of the `of` files of the previous
   * timestamped directory; 0 (or undefined) removes it without waiting. The soak's speed setting.
   */
  readonly removalDelayMs?: (index: number, of: number) => number;
  /** The new timestamped directory's name (`..` included); default a unique kubelet-like name. */
  readonly stamp?: string;
}

/** A kubelet-like timestamped directory name: `..2026_01_02_03_04_05_678<pid>_<n>`, unique in this process. */
export function nextStamp(): string {
  return `..${new Date().toISOString().replace(/[-:.TZ]/gu, '_')}${String(process.pid)}_${String(sequence++)}`;
}

function isErrno(err: unknown, ...codes: readonly string[]): boolean {
  return err instanceof Error && 'code' in err && typeof err.code === 'string' && codes.includes(err.code);
}

/**
 * os.RemoveAll of the previous timestamped directory, one entry at a time in directory order and
 * then the directory, with a step (and the optional delay) around each removal. A previous target
 * that is gone already or is no directory (a symlink included) is removed as `rm -rf` would.
 */
async function removeOldDirectory(dir: string, previous: string, options: KubeletUpdateOptions): Promise<void> {
  const path = join(dir, previous);
  const isDirectory = await lstat(path).then(
    (info) => info.isDirectory(),
    () => false,
  );
  if (!isDirectory) {
    await rm(path, { recursive: true, force: true });
    return;
  }
  const entries: Dirent[] = await readdir(path, { withFileTypes: true });
  let removed = 0;
  for (const entry of entries) {
    const wait = options.removalDelayMs?.(removed, entries.length) ?? 0;
    if (wait > 0) await delay(wait);
    const file = join(path, entry.name);
    if (entry.isDirectory()) await rm(file, { recursive: true, force: true });
    else {
      await unlink(file).catch((err: unknown) => {
        if (!isErrno(err, 'ENOENT')) throw err;
      });
    }
    removed++;
    await options.onStep?.({ kind: 'removed-old-file', previous, name: entry.name, removed, of: entries.length });
  }
  try {
    await rmdir(path);
  } catch {
    await rm(path, { recursive: true, force: true });
  }
  await options.onStep?.({ kind: 'removed-old-dir', previous });
}

/**
 * One kubelet update of the ConfigMap volume `dir` to `data`, step by step (see KubeletStep), the
 * old data directory emptied file by file. Returns the new timestamped directory's name.
 */
export async function kubeletUpdate(
  dir: string,
  data: Readonly<Record<string, string>>,
  options: KubeletUpdateOptions = {},
): Promise<string> {
  await mkdir(dir, { recursive: true });
  let previous: string | undefined;
  try {
    previous = await readlink(join(dir, '..data'));
  } catch {
    previous = undefined;
  }
  const stamp = options.stamp ?? nextStamp();
  await mkdir(join(dir, stamp));
  for (const [key, value] of Object.entries(data)) await writeFile(join(dir, stamp, key), value);
  await options.onStep?.({ kind: 'wrote-payload', stamp });
  // Steps 7-9: new key symlinks, ..data_tmp, atomic rename over ..data.
  for (const key of Object.keys(data)) {
    await symlink(join('..data', key), join(dir, key)).catch((err: unknown) => {
      if (!isErrno(err, 'EEXIST')) throw err;
    });
  }
  await options.onStep?.({ kind: 'linked-keys', stamp });
  await symlink(stamp, join(dir, '..data_tmp'));
  await options.onStep?.({ kind: 'created-data-tmp', stamp });
  await rename(join(dir, '..data_tmp'), join(dir, '..data'));
  await options.onStep?.({ kind: 'swapped', stamp, previous });
  // Steps 10-11: remove symlinks of deleted keys and the old data directory.
  const deleted: string[] = [];
  for (const name of await readdir(dir)) {
    if (!name.startsWith('..') && !(name in data)) {
      await rm(join(dir, name));
      deleted.push(name);
    }
  }
  await options.onStep?.({ kind: 'removed-deleted-keys', names: deleted });
  if (previous !== undefined) await removeOldDirectory(dir, previous, options);
  return stamp;
}

/** One kubelet update of `dir` to `data`, all steps at once. Returns the new timestamped directory's name. */
export async function writeConfigMapVolume(dir: string, data: Readonly<Record<string, string>>): Promise<string> {
  return kubeletUpdate(dir, data);
}

/** A kubelet update held at a step: `reached` once it got there, then `resume()` lets it finish (`done`). */
export interface HeldUpdate {
  /** The step the update is held after; undefined when it finished without meeting one `at` accepted. */
  readonly reached: Promise<KubeletStep | undefined>;
  /** Lets the held update run to its end. */
  resume(): void;
  /** The update's end: the new timestamped directory's name. */
  readonly done: Promise<string>;
}

/** Starts a kubelet update of `dir` to `data` that stops after the first step `at` accepts, until resume(). */
export function kubeletUpdateHeldAt(
  dir: string,
  data: Readonly<Record<string, string>>,
  at: (step: KubeletStep) => boolean,
  options: Omit<KubeletUpdateOptions, 'onStep'> = {},
): HeldUpdate {
  let reach: (step: KubeletStep | undefined) => void = () => undefined;
  const reached = new Promise<KubeletStep | undefined>((resolve) => {
    reach = resolve;
  });
  let resume: () => void = () => undefined;
  const resumed = new Promise<void>((resolve) => {
    resume = resolve;
  });
  let held = false;
  const done = kubeletUpdate(dir, data, {
    ...options,
    onStep: async (step) => {
      if (held || !at(step)) return;
      held = true;
      reach(step);
      await resumed;
    },
  }).finally(() => {
    reach(undefined);
  });
  return { reached, resume, done };
}
