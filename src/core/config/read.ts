// Reading a config source's bytes: bounded, without blocking, regular files only. The one walk of a
// config directory, shared by readConfigSnapshot (to parse) and the watcher's fingerprint (to notice
// a change), so both see the same keys and refuse the same layouts.
//
// Why each rule (docs/configuration.md, "Limits and special files"):
//   - a key file, or a symlink to one (kubelet's `key -> ..data/key`), must be a regular file: a FIFO
//     blocks a read forever, /dev/zero never ends. Special files are refused from stat() alone, never
//     opened; the open itself is O_NONBLOCK and re-checked with fstat, in case one is swapped in between.
//   - every read stops at its limit + 1 byte: an oversized or endless file is detected without being
//     read whole.
//   - a directory as a key, a dangling key symlink, or a dangling `..data` cannot be read: skipping it
//     would read as "no such key", e.g. an empty storageClassMap that orphans every PV.
import type { Stats } from 'node:fs';
import { constants } from 'node:fs';
import { lstat, open, opendir, readlink, realpath, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { ConfigSourceError, InvalidConfigError } from '../errors.js';
import type { ConfigIssue } from '../errors.js';
import { errnoCode, errorMessage } from '../unknown-values.js';

/** The most one key file may hold: a whole ConfigMap holds at most 1 MiB of data. */
export const MAX_KEY_FILE_BYTES = 1024 * 1024;
/** The most a config source may hold in all: the key files of a directory together, or one YAML file or manifest. */
export const MAX_CONFIG_SOURCE_BYTES = 3 * 1024 * 1024;
/** The most entries a config directory may have (kubelet's `..` names included); the config has about ten keys. */
export const MAX_CONFIG_DIRECTORY_ENTRIES = 256;

/** How often a directory is read again when kubelet deleted the `..data` target mid-read. */
const SWAP_RETRIES = 5;

export interface KeyFileBytes {
  readonly name: string;
  readonly bytes: Buffer;
}

/** A config source's bytes, read at one instant and not yet interpreted. */
export type SourceBytes =
  | {
      readonly kind: 'directory';
      readonly path: string;
      /** The timestamped directory `..data` pointed to when read (a kubelet ConfigMap volume). */
      readonly dataDir?: string;
      /** The keys, sorted by name; `..` names are kubelet's and never keys. */
      readonly files: readonly KeyFileBytes[];
    }
  | { readonly kind: 'file'; readonly path: string; readonly bytes: Buffer };

const MiB = 1024 * 1024;

function sizeText(bytes: number): string {
  return bytes % MiB === 0 ? `${String(bytes / MiB)} MiB` : `${String(bytes)} bytes`;
}

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
function fileType(info: Stats): string {
  if (info.isDirectory()) return 'a directory';
  if (info.isFIFO()) return 'a FIFO (named pipe)';
  if (info.isSocket()) return 'a socket';
  if (info.isCharacterDevice()) return 'a character device';
  if (info.isBlockDevice()) return 'a block device';
  return 'not a regular file';
}

/** `path` or, when it is a symlink, `path -> target`: a user sees what the link points to. */
async function shownWithTarget(path: string): Promise<string> {
  const link = await lstat(path).then(
    (i) => i.isSymbolicLink(),
    () => false,
  );
  const target = link ? await realpath(path).catch(() => undefined) : undefined;
  return target === undefined ? path : `${path} -> ${target}`;
}

/** Refuses what is not a regular file, naming it and, for a symlink, what it points to. */
async function notRegular(source: string, shown: string, info: Stats, what: string): Promise<ConfigSourceError> {
  return new ConfigSourceError(source, `${await shownWithTarget(shown)}: is ${fileType(info)}, ${what}`);
}

const ONLY_REGULAR = 'not a regular file; only regular files (or symlinks to them) are read';

/**
 * Reads a regular file (a symlink is followed) without blocking, up to `limit` bytes; undefined
 * when it holds more. A file that is not regular is refused with ConfigSourceError (for `source`) naming `shown`
 * (special files are never opened); fs errors are thrown as they are.
 */
async function readBounded(path: string, limit: number, source: string, shown: string): Promise<Buffer | undefined> {
  const info = await stat(path);
  if (!info.isFile()) throw await notRegular(source, shown, info, ONLY_REGULAR);
  // O_NONBLOCK: a FIFO swapped in after the stat blocks neither the open nor a read; fstat refuses it.
  const handle = await open(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
  try {
    const opened = await handle.stat();
    if (!opened.isFile()) throw await notRegular(source, shown, opened, ONLY_REGULAR);
    // st_size is a hint only (/proc files say 0, a file may grow): read until EOF or one byte past the limit.
    let buffer = Buffer.alloc(Math.min(Math.max(opened.size, 4096), limit) + 1);
    let filled = 0;
    for (;;) {
      if (filled === buffer.length) {
        if (buffer.length > limit) return undefined;
        const bigger = Buffer.alloc(Math.min(buffer.length * 2, limit + 1));
        buffer.copy(bigger);
        buffer = bigger;
      }
      const { bytesRead } = await handle.read(buffer, filled, buffer.length - filled, null);
      if (bytesRead === 0) return buffer.subarray(0, filled);
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
  try {
    return await readBounded(path, limit, path, path);
  } catch (err) {
    if (err instanceof ConfigSourceError) throw err;
    throw new ConfigSourceError(path, describeFsError(err, path));
  }
}

function tooLarge(source: string, path: string, file: string, message: string): InvalidConfigError {
  return new InvalidConfigError(source, [{ severity: 'error', path, message, position: { file } }]);
}

/** The target of `dir/..data`: undefined when there is none, `{ dangling }` when it points nowhere. */
async function resolveDataDir(dir: string): Promise<string | { readonly dangling: string } | undefined> {
  const data = join(dir, '..data');
  try {
    return await realpath(data);
  } catch (err) {
    if (errnoCode(err) !== 'ENOENT') throw new ConfigSourceError(dir, describeFsError(err, data));
  }
  try {
    if ((await lstat(data)).isSymbolicLink()) return { dangling: await readlink(data) };
  } catch (err) {
    if (errnoCode(err) !== 'ENOENT') throw new ConfigSourceError(dir, describeFsError(err, data));
  }
  return undefined;
}

/** The sorted entry names of `base`, at most MAX_CONFIG_DIRECTORY_ENTRIES of them. */
async function entryNames(dir: string, base: string): Promise<string[]> {
  const names: string[] = [];
  for await (const entry of await opendir(base)) {
    if (names.length === MAX_CONFIG_DIRECTORY_ENTRIES) {
      throw tooLarge(
        dir,
        '',
        dir,
        `has more than ${String(MAX_CONFIG_DIRECTORY_ENTRIES)} entries; a config directory holds one file per config key`,
      );
    }
    names.push(entry.name);
  }
  return names.sort();
}

/** A retryable "vanished mid-read" (kubelet deleted the old `..data` target); `final` is thrown when retries run out. */
class Vanished extends Error {
  constructor(readonly final: ConfigSourceError) {
    super(final.message);
  }
}

async function readKeys(dir: string, base: string, viaData: boolean): Promise<KeyFileBytes[]> {
  const files: KeyFileBytes[] = [];
  const issues: ConfigIssue[] = [];
  let total = 0;
  for (const name of await entryNames(dir, base)) {
    if (name.startsWith('..')) continue;
    const file = join(base, name);
    const shown = join(dir, name);
    let info: Stats;
    try {
      info = await stat(file);
    } catch (err) {
      if (errnoCode(err) !== 'ENOENT') throw new ConfigSourceError(dir, describeFsError(err, shown));
      // Through `..data` it may be mid-swap: read again. Otherwise skipping the key would read as
      // "not set" (e.g. an empty storageClassMap, every PV orphaned).
      const target = await readlink(file).catch(() => undefined);
      const unreadable = new ConfigSourceError(
        dir,
        target === undefined
          ? describeFsError(err, shown)
          : `${shown}: a dangling symlink (to ${target}); the key cannot be read`,
      );
      throw viaData ? new Vanished(unreadable) : unreadable;
    }
    if (info.isDirectory()) {
      throw new ConfigSourceError(
        dir,
        `${shown}: is a directory; every entry of a config directory, except kubelet's ..-prefixed ones, is a key and must be a regular file`,
      );
    }
    let bytes: Buffer | undefined;
    try {
      bytes = await readBounded(file, MAX_KEY_FILE_BYTES, dir, shown);
    } catch (err) {
      if (err instanceof ConfigSourceError) throw err;
      const unreadable = new ConfigSourceError(dir, describeFsError(err, shown));
      throw errnoCode(err) === 'ENOENT' && viaData ? new Vanished(unreadable) : unreadable;
    }
    if (bytes === undefined) {
      issues.push({
        severity: 'error',
        path: name,
        message: `is larger than ${sizeText(MAX_KEY_FILE_BYTES)}, the most a key file may hold (a ConfigMap holds at most 1 MiB of data)`,
        position: { file: shown },
      });
      continue;
    }
    total += bytes.length;
    if (total > MAX_CONFIG_SOURCE_BYTES) {
      issues.push({
        severity: 'error',
        path: '',
        message: `the key files hold more than ${sizeText(MAX_CONFIG_SOURCE_BYTES)} together, the most a config source may hold`,
        position: { file: dir },
      });
      break;
    }
    files.push({ name, bytes });
  }
  if (issues.length > 0) throw new InvalidConfigError(dir, issues);
  return files;
}

async function readDirectoryBytes(dir: string): Promise<SourceBytes> {
  // kubelet swaps `..data` atomically and then deletes the old directory: read every key through one
  // resolved target, and start over if that target vanished mid-read.
  for (let attempt = 0; ; attempt++) {
    const retry = attempt < SWAP_RETRIES;
    const data = await resolveDataDir(dir);
    if (typeof data === 'object') {
      if (retry) continue;
      throw new ConfigSourceError(
        dir,
        `${join(dir, '..data')}: a dangling symlink (to ${data.dangling}); kubelet's data directory of this volume is missing`,
      );
    }
    try {
      const files = await readKeys(dir, data ?? dir, data !== undefined);
      return data === undefined
        ? { kind: 'directory', path: dir, files }
        : { kind: 'directory', path: dir, dataDir: data, files };
    } catch (err) {
      if (err instanceof Vanished) {
        if (retry) continue;
        throw err.final;
      }
      if (data !== undefined && errnoCode(err) === 'ENOENT' && retry) continue;
      if (err instanceof ConfigSourceError || err instanceof InvalidConfigError) throw err;
      throw new ConfigSourceError(dir, describeFsError(err, data === undefined ? dir : `${dir} (via ..data)`));
    }
  }
}

/**
 * Reads a config source's bytes: a directory of key files (through one resolved `..data`), or one
 * regular file. Throws ConfigSourceError (exit 4) when it cannot be read, is not a regular file or
 * directory, has a directory or a dangling symlink as a key, or a dangling `..data`; InvalidConfigError
 * (exit 3) when it holds more than the limits above.
 */
export async function readSourceBytes(path: string): Promise<SourceBytes> {
  let info: Stats;
  try {
    info = await stat(path);
  } catch (err) {
    throw new ConfigSourceError(path, describeFsError(err, path));
  }
  if (info.isDirectory()) return readDirectoryBytes(path);
  if (!info.isFile()) {
    throw await notRegular(
      path,
      path,
      info,
      'not a directory or a regular file; a config source is a directory of key files, a YAML file or a ConfigMap manifest',
    );
  }
  const bytes = await readRegularFile(path, MAX_CONFIG_SOURCE_BYTES);
  if (bytes === undefined) {
    throw tooLarge(
      path,
      '',
      path,
      `is larger than ${sizeText(MAX_CONFIG_SOURCE_BYTES)}, the most a config file may hold (a ConfigMap holds at most 1 MiB of data)`,
    );
  }
  return { kind: 'file', path, bytes };
}

// ---------------------------------------------------------------------------------------------
// Text

const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** The offset of the first byte that does not start or continue a UTF-8 character; -1 when all do. */
function firstInvalidUtf8(bytes: Uint8Array): number {
  let i = 0;
  while (i < bytes.length) {
    const lead = bytes[i] ?? 0;
    if (lead < 0x80) {
      i++;
      continue;
    }
    const trailing =
      lead >= 0xc2 && lead <= 0xdf ? 1 : lead >= 0xe0 && lead <= 0xef ? 2 : lead >= 0xf0 && lead <= 0xf4 ? 3 : 0;
    if (trailing === 0) return i;
    // Overlong forms, UTF-16 surrogates and code points above U+10FFFF are ruled out by the second byte.
    const low = lead === 0xe0 ? 0xa0 : lead === 0xf0 ? 0x90 : 0x80;
    const high = lead === 0xed ? 0x9f : lead === 0xf4 ? 0x8f : 0xbf;
    const second = bytes[i + 1];
    if (second === undefined || second < low || second > high) return i;
    for (let k = 2; k <= trailing; k++) {
      const next = bytes[i + k];
      if (next === undefined || (next & 0xc0) !== 0x80) return i;
    }
    i += trailing + 1;
  }
  return -1;
}

/**
 * Pure: the text of a config file's bytes, or the problem when they are not UTF-8 (rather than
 * replacing bytes, which would silently change e.g. a path). `path` is the key path for the issue.
 */
export function decodeConfigText(
  bytes: Uint8Array,
  file: string,
  path: string,
): { readonly text: string } | { readonly issue: ConfigIssue } {
  try {
    return { text: UTF8.decode(bytes) };
  } catch {
    const offset = Math.max(0, firstInvalidUtf8(bytes));
    const before = bytes.subarray(0, offset);
    const lineStart = before.lastIndexOf(0x0a) + 1;
    let line = 1;
    for (const b of before) if (b === 0x0a) line++;
    let column = 1;
    for (const b of before.subarray(lineStart)) if ((b & 0xc0) !== 0x80) column++;
    const byte = (bytes[offset] ?? 0).toString(16).padStart(2, '0');
    return {
      issue: {
        severity: 'error',
        path,
        message: `is not valid UTF-8: byte 0x${byte} at offset ${String(offset)} is not part of a character; save the file as UTF-8`,
        position: { file, line, column },
      },
    };
  }
}
