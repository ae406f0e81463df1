// Reading a file that anyone on the node may have put there (a config key, a kubeconfig, a
// simulate fixture): regular files only, without blocking, never more than a limit.
//   - special files are refused from stat() alone, never opened: a FIFO blocks a read forever,
//     /dev/zero never ends; the open itself is O_NONBLOCK and re-checked with fstat, in case one is
//     swapped in between;
//   - a read stops at its limit + 1 byte: an oversized or endless file is found without being read whole.
import type { Stats } from 'node:fs';
import { constants } from 'node:fs';
import { lstat, open, realpath, stat } from 'node:fs/promises';
import { ConfigSourceError } from './errors.js';
import { errnoCode, errorMessage } from './unknown-values.js';

/** What a bounded read found: the bytes, more than the limit, or a file that is not regular. */
export type BoundedRead =
  | { readonly kind: 'bytes'; readonly bytes: Buffer }
  | { readonly kind: 'too-large' }
  | { readonly kind: 'not-regular'; readonly info: Stats };

export function describeFsError(err: unknown, path: string): string {
  switch (errnoCode(err)) {
    case 'ENOENT':
      return `${path}: no such file or directory`;
    case 'EACCES':
    case 'EPERM':
      return `${path}: permission denied`;
    case 'ENOTDIR':
      return `${path}: a path component is not a directory`;
    case 'ELOOP':
      return `${path}: too many levels of symbolic links`;
    default:
      return `${path}: ${errorMessage(err)}`;
  }
}

/** What a non-regular file is, for messages. */
export function fileType(info: Stats): string {
  if (info.isDirectory()) return 'a directory';
  if (info.isFIFO()) return 'a FIFO (named pipe)';
  if (info.isSocket()) return 'a socket';
  if (info.isCharacterDevice()) return 'a character device';
  if (info.isBlockDevice()) return 'a block device';
  return 'not a regular file';
}

/** `path` or, when it is a symlink, `path -> target`: a user sees what the link points to. */
export async function shownWithTarget(path: string): Promise<string> {
  const link = await lstat(path).then(
    (i) => i.isSymbolicLink(),
    () => false,
  );
  const target = link ? await realpath(path).catch(() => undefined) : undefined;
  return target === undefined ? path : `${path} -> ${target}`;
}

export const ONLY_REGULAR = 'not a regular file; only regular files (or symlinks to them) are read';

/** Refuses what is not a regular file, naming it and, for a symlink, what it points to. */
export async function notRegularError(
  source: string,
  shown: string,
  info: Stats,
  what: string,
): Promise<ConfigSourceError> {
  return new ConfigSourceError(source, `${await shownWithTarget(shown)}: is ${fileType(info)}, ${what}`);
}

/**
 * Reads a regular file (a symlink is followed) without blocking, up to `limit` bytes. Special files
 * are never opened. fs errors (ENOENT, EACCES, …) are thrown as they are.
 */
export async function readBoundedFile(path: string, limit: number): Promise<BoundedRead> {
  const info = await stat(path);
  if (!info.isFile()) return { kind: 'not-regular', info };
  // O_NONBLOCK: a FIFO swapped in after the stat blocks neither the open nor a read; fstat refuses it.
  const handle = await open(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
  try {
    const opened = await handle.stat();
    if (!opened.isFile()) return { kind: 'not-regular', info: opened };
    // st_size is a hint only (/proc files say 0, a file may grow): read until EOF or one byte past the limit.
    let buffer = Buffer.alloc(Math.min(Math.max(opened.size, 4096), limit) + 1);
    let filled = 0;
    for (;;) {
      if (filled === buffer.length) {
        if (buffer.length > limit) return { kind: 'too-large' };
        const bigger = Buffer.alloc(Math.min(buffer.length * 2, limit + 1));
        buffer.copy(bigger);
        buffer = bigger;
      }
      const { bytesRead } = await handle.read(buffer, filled, buffer.length - filled, null);
      if (bytesRead === 0) return { kind: 'bytes', bytes: buffer.subarray(0, filled) };
      filled += bytesRead;
    }
  } finally {
    await handle.close();
  }
}

/**
 * Reads a regular file (a symlink is followed) without blocking, up to `limit` bytes; undefined
 * when it holds more. Throws ConfigSourceError naming the path when it cannot be read or is not a
 * regular file (FIFO, socket, device, directory).
 */
export async function readRegularFile(path: string, limit: number): Promise<Buffer | undefined> {
  let read: BoundedRead;
  try {
    read = await readBoundedFile(path, limit);
  } catch (err) {
    throw new ConfigSourceError(path, describeFsError(err, path));
  }
  if (read.kind === 'not-regular') throw await notRegularError(path, path, read.info, ONLY_REGULAR);
  return read.kind === 'bytes' ? read.bytes : undefined;
}
