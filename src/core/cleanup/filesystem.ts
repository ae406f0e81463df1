// Empties a filesystem volume in process, the way upstream's `DeleteContents` does (remove every
// entry inside the volume, keep the volume directory itself), but without its hazards:
//
// * Symlinks are never followed: a link is unlinked, its target (even a directory outside the
//   volume) is never touched.
// * Nested mount points are never entered: a directory whose st_dev differs from the volume's,
//   or whose mount ID (/proc/self/fdinfo) differs from the volume's (a bind mount of the same
//   filesystem has the same st_dev), and any entry whose path is a mount point in
//   /proc/self/mountinfo, or that unlink reports busy, is skipped and reported; the directories
//   above it stay, since they are not empty. Reported paths are under the volume's real path.
// * Directory walks are race-safe and depth-unlimited: every directory is held open (O_PATH,
//   O_NOFOLLOW) and its entries are reached through `/proc/self/fd/<fd>/<name>`, which is what
//   openat/unlinkat would do: a directory swapped for a symlink half-way is never followed, and
//   paths stay short however deep the tree (no PATH_MAX limit, no recursion: an explicit stack).
// * Names are Buffers throughout (readdir with `encoding: 'buffer'`), so names with newlines or
//   bytes that are not UTF-8 are neither lost nor mis-decoded. Reported paths are decoded as
//   UTF-8 for display only.
// * A directory we may not read or write (mode 0555, 0000, ...) is made u+rwx first when an
//   operation in it fails with EACCES/EPERM; root rarely needs this (CAP_DAC_OVERRIDE), other
//   users do. The volume directory's own mode is restored afterwards.
//
// No process is spawned. Linux only (/proc/self/fd, /proc/self/fdinfo, /proc/self/mountinfo).

import { constants } from 'node:fs';
import { chmod, lstat, open, readFile, readdir, realpath, rmdir, unlink, type FileHandle } from 'node:fs/promises';
import { isAbsolute, resolve } from 'node:path';

import { parseMountInfo } from '../node/mountinfo.js';
import { errnoCode, errorMessage } from '../unknown-values.js';

export interface FilesystemCleanupError {
  /** The entry's path (decoded as UTF-8 for display). */
  readonly path: string;
  readonly message: string;
}

export interface FilesystemCleanupResult {
  /** Entries (files, links, directories, ...) removed. */
  removed: number;
  /** Nested mount points found inside the volume and left untouched (their parents stay too). */
  skippedMounts: string[];
  /** Entries that could not be removed; the rest of the volume was still cleaned. */
  errors: FilesystemCleanupError[];
}

export interface DeleteVolumeContentsOptions {
  /** Aborts between entries; the promise then rejects with the signal's reason. */
  readonly signal?: AbortSignal | undefined;
  /** The mount table to consult for nested mounts; default `/proc/self/mountinfo`. */
  readonly mountInfoPath?: string | undefined;
  /**
   * Called once the volume's directory is held open, before anything is deleted; a rejection
   * refuses the cleanup. Afterwards the held directory must still be the one at the path, so
   * what the caller checked here is what is emptied, whatever is mounted there meanwhile.
   */
  readonly beforeWipe?: (() => Promise<void>) | undefined;
}

export type CleanupErrorCode = 'invalid-path' | 'not-a-directory' | 'unreadable' | 'mount-table';

/** The volume cannot be cleaned at all (nothing was deleted). */
export class CleanupError extends Error {
  constructor(
    readonly code: CleanupErrorCode,
    readonly path: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'CleanupError';
  }
}

/** O_PATH is not in fs.constants; 010000000 on every architecture Node supports on Linux. */
const O_PATH = 0o10000000;
const OPEN_DIRECTORY = O_PATH | constants.O_DIRECTORY | constants.O_NOFOLLOW;
const SLASH = Buffer.from('/');
const PERMISSION_CODES = new Set(['EACCES', 'EPERM']);
/** Vanished under us (someone else removed it): not an error, not ours to count. */
const GONE_CODES = new Set(['ENOENT']);

interface Frame {
  /** An O_PATH handle on the directory; entries are reached through /proc/self/fd/<fd>/. */
  readonly handle: FileHandle;
  /** The directory's path as the caller would see it. */
  readonly path: Buffer;
  /** The frame of the directory containing this one, and this one's name there; none for the root. */
  readonly parent: Frame | undefined;
  readonly name: Buffer;
  names: Buffer[] | undefined;
  next: number;
  /** Something inside stays (a mount, an error): do not try to remove this directory. */
  keep: boolean;
  /** The mode before we made the directory u+rwx, when we did. */
  originalMode: number | undefined;
}

function fdPath(frame: Frame, name?: Buffer): Buffer {
  const dir = Buffer.from(`/proc/self/fd/${frame.handle.fd}`);
  return name === undefined ? dir : Buffer.concat([dir, SLASH, name]);
}

function childPath(parent: Buffer, name: Buffer): Buffer {
  return Buffer.concat([parent, SLASH, name]);
}

function describe(operation: string, error: unknown): string {
  const code = errnoCode(error);
  const message = errorMessage(error);
  // Node's messages read "EACCES: permission denied, unlink '/proc/self/fd/23/x'": keep the
  // middle, since the path in it is our fd path, not the caller's.
  const detail = code !== undefined ? (new RegExp(`^${code}: ([^,]*)`).exec(message)?.[1] ?? message) : message;
  return code !== undefined ? `${operation}: ${code}: ${detail}` : `${operation}: ${detail}`;
}

/** The mount ID of an open file (`mnt_id:` in /proc/self/fdinfo), or undefined if unavailable. */
async function mountIdOf(handle: FileHandle): Promise<number | undefined> {
  try {
    const text = await readFile(`/proc/self/fdinfo/${handle.fd}`, 'utf8');
    const match = /^mnt_id:\s*(\d+)$/m.exec(text);
    return match?.[1] === undefined ? undefined : Number(match[1]);
  } catch {
    return undefined;
  }
}

async function mountPointsUnder(root: string, mountInfoPath: string): Promise<Set<string>> {
  let text: string;
  try {
    text = await readFile(mountInfoPath, 'utf8');
  } catch (error) {
    throw new CleanupError('mount-table', root, `cannot read the mount table ${mountInfoPath}: ${String(error)}`, {
      cause: error,
    });
  }
  try {
    const prefix = `${root}/`;
    return new Set(
      parseMountInfo(text)
        .map((m) => m.mountPoint)
        .filter((p) => p.startsWith(prefix)),
    );
  } catch (error) {
    throw new CleanupError('mount-table', root, `cannot parse the mount table ${mountInfoPath}: ${String(error)}`, {
      cause: error,
    });
  }
}

/** Opens an O_PATH handle on a directory, never following a final symlink (ELOOP/ENOTDIR instead). */
async function openDirectory(path: Buffer): Promise<FileHandle> {
  return open(path, OPEN_DIRECTORY);
}

/** Closes a frame's handle; for a directory that stays (the volume, a parent of a mount), first puts back the mode we changed. */
async function closeFrame(frame: Frame): Promise<void> {
  if (frame.originalMode !== undefined && (frame.parent === undefined || frame.keep)) {
    try {
      await chmod(fdPath(frame), frame.originalMode);
    } catch {
      // Best effort: the volume stays usable with u+rwx.
    }
  }
  await frame.handle.close();
}

/**
 * The caller's check, then: the directory held is still the one at the volume's path (a mount
 * over it, or one gone, between the open and the check would make them differ).
 */
async function checkHeldRoot(
  handle: FileHandle,
  root: string,
  volumePath: string,
  beforeWipe: () => Promise<void>,
): Promise<void> {
  await beforeWipe();
  const held = await handle.stat({ bigint: true });
  let now;
  try {
    now = await lstat(root, { bigint: true });
  } catch (error) {
    throw new CleanupError('unreadable', volumePath, `cannot stat ${volumePath}: ${describe('lstat', error)}`, {
      cause: error,
    });
  }
  if (held.dev !== now.dev || held.ino !== now.ino)
    throw new CleanupError('unreadable', volumePath, `${volumePath} changed while it was being opened; not cleaned`);
}

/** Runs op in frame's directory; on EACCES/EPERM makes the directory u+rwx once and retries. */
async function inDirectory<T>(frame: Frame, op: () => Promise<T>): Promise<T> {
  try {
    return await op();
  } catch (error) {
    const code = errnoCode(error);
    if (code === undefined || !PERMISSION_CODES.has(code) || frame.originalMode !== undefined) throw error;
    const mode = Number((await frame.handle.stat({ bigint: true })).mode) & 0o7777;
    if ((mode & 0o700) === 0o700) throw error;
    // chmod through the magic link changes the very directory we hold open (O_PATH has no fchmod).
    await chmod(fdPath(frame), mode | 0o700);
    frame.originalMode = mode;
    return await op();
  }
}

function newFrame(handle: FileHandle, path: Buffer, parent: Frame | undefined, name: Buffer): Frame {
  return { handle, path, parent, name, names: undefined, next: 0, keep: false, originalMode: undefined };
}

/**
 * Step 1: the volume's real path, or a refusal (relative, `/`, or resolving to `/`). The mount
 * table has real paths, so everything after this compares against the real path.
 */
async function resolveVolumeRoot(volumePath: string, signal: AbortSignal | undefined): Promise<string> {
  if (volumePath === '' || !isAbsolute(volumePath)) {
    throw new CleanupError(
      'invalid-path',
      volumePath,
      `refusing to clean ${JSON.stringify(volumePath)}: not an absolute path`,
    );
  }
  if (resolve(volumePath) === '/') {
    throw new CleanupError('invalid-path', volumePath, 'refusing to clean the root directory /');
  }
  signal?.throwIfAborted();

  let root: string;
  try {
    root = await realpath(volumePath);
  } catch (error) {
    throw new CleanupError('unreadable', volumePath, `cannot resolve ${volumePath}: ${describe('realpath', error)}`, {
      cause: error,
    });
  }
  if (root === '/') {
    throw new CleanupError('invalid-path', volumePath, `refusing to clean ${volumePath}: it resolves to /`);
  }
  return root;
}

/** The volume's directory, held open, with what tells a nested mount apart from it. */
interface HeldRoot {
  readonly handle: FileHandle;
  readonly dev: bigint;
  /** Undefined when /proc/self/fdinfo has none. */
  readonly mountId: number | undefined;
}

/**
 * Step 2: holds the volume's directory open and runs the caller's check on it (beforeWipe, then
 * checkHeldRoot). On a refusal the handle is closed again and nothing has been deleted.
 */
async function openRoot(
  root: string,
  volumePath: string,
  beforeWipe: (() => Promise<void>) | undefined,
): Promise<HeldRoot> {
  let handle: FileHandle;
  try {
    handle = await openDirectory(Buffer.from(root));
  } catch (error) {
    const code = errnoCode(error);
    throw new CleanupError(
      code === 'ENOTDIR' ? 'not-a-directory' : 'unreadable',
      volumePath,
      code === 'ENOTDIR' ? `${volumePath} is not a directory` : `cannot open ${volumePath}: ${describe('open', error)}`,
      { cause: error },
    );
  }
  try {
    const stat = await handle.stat({ bigint: true });
    if (beforeWipe !== undefined) await checkHeldRoot(handle, root, volumePath, beforeWipe);
    return { handle, dev: stat.dev, mountId: await mountIdOf(handle) };
  } catch (error) {
    await handle.close();
    throw error;
  }
}

/**
 * Step 3: the walk. An explicit stack of held directories, deepest last: `list` reads a
 * directory's names, `visit` handles one entry (unlink, skip a mount, or `descend` into a
 * directory), and `finish` removes a directory once it is empty.
 */
class VolumeWalker {
  private readonly result: FilesystemCleanupResult = { removed: 0, skippedMounts: [], errors: [] };
  private readonly stack: Frame[];

  constructor(
    private readonly root: HeldRoot,
    rootPath: string,
    private readonly mountPoints: ReadonlySet<string>,
  ) {
    this.stack = [newFrame(root.handle, Buffer.from(rootPath), undefined, Buffer.alloc(0))];
  }

  /** Walks until the stack is empty; on abort or an unexpected error closes what is still open. */
  async run(signal: AbortSignal | undefined): Promise<FilesystemCleanupResult> {
    try {
      for (let frame = this.stack.at(-1); frame !== undefined; frame = this.stack.at(-1)) {
        const names = await this.list(frame);
        const name = names[frame.next];
        if (name !== undefined) {
          frame.next++;
          signal?.throwIfAborted();
          await this.visit(frame, name);
          continue;
        }
        this.stack.pop();
        await closeFrame(frame);
        await this.finish(frame);
      }
    } finally {
      for (const frame of this.stack.reverse()) await closeFrame(frame);
    }
    return this.result;
  }

  private fail(path: Buffer, message: string, frame: Frame): void {
    this.result.errors.push({ path: path.toString(), message });
    frame.keep = true;
  }

  private skipMount(display: string, frame: Frame): void {
    this.result.skippedMounts.push(display);
    frame.keep = true;
  }

  /** The directory's names, read once; an unreadable directory has none and stays. */
  private async list(frame: Frame): Promise<Buffer[]> {
    if (frame.names === undefined) {
      try {
        frame.names = await inDirectory(frame, () => readdir(fdPath(frame), { encoding: 'buffer' }));
      } catch (error) {
        frame.names = [];
        this.fail(frame.path, describe('readdir', error), frame);
      }
    }
    return frame.names;
  }

  private async visit(frame: Frame, name: Buffer): Promise<void> {
    const path = childPath(frame.path, name);
    const display = path.toString();
    const viaFd = fdPath(frame, name);
    let stat;
    try {
      stat = await inDirectory(frame, () => lstat(viaFd, { bigint: true }));
    } catch (error) {
      if (GONE_CODES.has(errnoCode(error) ?? '')) return;
      this.fail(path, describe('lstat', error), frame);
      return;
    }
    // Only a directory's st_dev tells a mount: on overlayfs, files may report their layer's device.
    if (this.mountPoints.has(display) || (stat.isDirectory() && stat.dev !== this.root.dev)) {
      this.skipMount(display, frame);
      return;
    }
    if (stat.isDirectory()) await this.descend(frame, name, path, stat.ino);
    else await this.unlink(frame, path, viaFd);
  }

  private async unlink(frame: Frame, path: Buffer, viaFd: Buffer): Promise<void> {
    try {
      await inDirectory(frame, () => unlink(viaFd));
      this.result.removed++;
    } catch (error) {
      const code = errnoCode(error);
      if (GONE_CODES.has(code ?? '')) return;
      // EBUSY: a mount point the table did not show (mounted after we read it).
      if (code === 'EBUSY') this.skipMount(path.toString(), frame);
      else this.fail(path, describe('unlink', error), frame);
    }
  }

  /** Opens the directory and pushes it, unless it is another mount or not the one lstat saw. */
  private async descend(frame: Frame, name: Buffer, path: Buffer, ino: bigint): Promise<void> {
    let handle: FileHandle;
    try {
      handle = await inDirectory(frame, () => openDirectory(fdPath(frame, name)));
    } catch (error) {
      if (GONE_CODES.has(errnoCode(error) ?? '')) return;
      this.fail(path, describe('open', error), frame);
      return;
    }
    let push = false;
    try {
      const opened = await handle.stat({ bigint: true });
      const mountId = await mountIdOf(handle);
      const rootMountId = this.root.mountId;
      if (
        opened.dev !== this.root.dev ||
        (mountId !== undefined && rootMountId !== undefined && mountId !== rootMountId)
      ) {
        // A bind mount of the same filesystem, or mounted after we read the table.
        this.skipMount(path.toString(), frame);
      } else if (opened.ino !== ino) {
        this.fail(path, 'open: replaced while cleaning', frame);
      } else {
        push = true;
      }
    } catch (error) {
      this.fail(path, describe('fstat', error), frame);
    }
    if (!push) {
      await handle.close();
      return;
    }
    this.stack.push(newFrame(handle, path, frame, name));
  }

  /** Removes an emptied directory from its parent; one that keeps something keeps its parent too. */
  private async finish(frame: Frame): Promise<void> {
    const parent = frame.parent;
    if (parent === undefined) return;
    if (frame.keep) {
      parent.keep = true;
      return;
    }
    try {
      await inDirectory(parent, () => rmdir(fdPath(parent, frame.name)));
      this.result.removed++;
    } catch (error) {
      if (GONE_CODES.has(errnoCode(error) ?? '')) return;
      this.fail(frame.path, describe('rmdir', error), parent);
    }
  }
}

/**
 * Deletes every entry inside volumePath and keeps volumePath itself. Never follows symlinks and
 * never enters nested mount points (reported in `skippedMounts`). Failures on single entries are
 * collected in `errors` and the rest is still cleaned; a volume that cannot be cleaned at all
 * (relative path, `/`, not a directory, mount table unreadable) throws {@link CleanupError}.
 */
export async function deleteVolumeContents(
  volumePath: string,
  options: DeleteVolumeContentsOptions = {},
): Promise<FilesystemCleanupResult> {
  const root = await resolveVolumeRoot(volumePath, options.signal);
  const mountPoints = await mountPointsUnder(root, options.mountInfoPath ?? '/proc/self/mountinfo');
  const held = await openRoot(root, volumePath, options.beforeWipe);
  return new VolumeWalker(held, root, mountPoints).run(options.signal);
}
