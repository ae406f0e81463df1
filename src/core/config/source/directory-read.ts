// Reading a directory or file config source's bytes: bounded, without blocking, regular files only,
// and for a kubelet ConfigMap volume one consistent snapshot. The one walk of a config directory,
// shared by every reader (the agent's start-up, watcher, SIGHUP and admin reloads, diff-config,
// simulate, rollout status), so all see the same keys and refuse the same layouts.
//
// Why each rule (docs/configuration.md, "Limits and special files"):
//   - a key file, or a symlink to one (kubelet's `key -> ..data/key`), must be a regular file
//     (bounded-file.ts);
//   - a directory as a key, a dangling key symlink, or a dangling `..data` cannot be read: skipping it
//     would read as "no such key", e.g. an empty storageClassMap that orphans every PV.
//
// The snapshot rule. kubelet's AtomicWriter writes a new `..<timestamp>` directory, renames a
// `..data_tmp` symlink over `..data`, and only then removes the previous timestamped directory file by
// file. Listing a directory that is being emptied returns some or none of its names without an error,
// so a read that trusted its listing could return a partial or empty config. A read therefore resolves
// `..data` once, lists and reads every key through that resolved directory, and then resolves `..data`
// again: only when it still names the same directory (so no swap, and hence no removal of it, happened
// during the read) is the read a snapshot. Otherwise it starts over, a bounded number of times.
import type { Stats } from 'node:fs';
import { lstat, opendir, readlink, realpath, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { describeFsError, notRegularError, ONLY_REGULAR, readBoundedFile } from '../../bounded-file.js';
import type { BoundedRead } from '../../bounded-file.js';
import { ConfigSourceError, InvalidConfigError } from '../../errors.js';
import type { ConfigIssue } from '../../errors.js';
import { errnoCode } from '../../unknown-values.js';

/** The most one key file may hold: a whole ConfigMap holds at most 1 MiB of data. */
export const MAX_KEY_FILE_BYTES = 1024 * 1024;
/** The most a config source may hold in all: the key files of a directory together, or one YAML file or manifest. */
export const MAX_CONFIG_SOURCE_BYTES = 3 * 1024 * 1024;
/** The most entries a config directory may have (kubelet's `..` names included); the config has about ten keys. */
export const MAX_CONFIG_DIRECTORY_ENTRIES = 256;

/**
 * How many times a directory read that failed is tried again when no swap of `..data` explains the
 * failure (a key vanished, yet `..data` still names the same directory: not kubelet's doing).
 */
export const SWAP_RETRIES = 8;

/**
 * The most reads of one directory while kubelet keeps swapping `..data` under them. Each swap is a
 * whole new version written by kubelet, so reading again makes progress; a storm of swaps faster
 * than a read (a test, or something other than kubelet) ends here with an error that says so, and a
 * running agent keeps its config.
 */
export const MAX_SWAPPED_READS = 64;

/**
 * The filesystem calls a directory read makes: the real ones (nodeDirectoryFs), or a wrapper that
 * pauses inside them, so a test can run kubelet's steps at any point of a read.
 */
export interface DirectoryFs {
  readonly stat: (path: string) => Promise<Stats>;
  readonly lstat: (path: string) => Promise<Stats>;
  readonly realpath: (path: string) => Promise<string>;
  readonly readlink: (path: string) => Promise<string>;
  /** The entry names of a directory, at most `max` + 1 of them (more means too many). */
  readonly list: (path: string, max: number) => Promise<string[]>;
  readonly readFile: (path: string, limit: number) => Promise<BoundedRead>;
}

async function listNames(path: string, max: number): Promise<string[]> {
  const names: string[] = [];
  const dir = await opendir(path);
  try {
    for (let entry = await dir.read(); entry !== null; entry = await dir.read()) {
      names.push(entry.name);
      if (names.length > max) break;
    }
  } finally {
    await dir.close();
  }
  return names;
}

export const nodeDirectoryFs: DirectoryFs = {
  stat: (path) => stat(path),
  lstat: (path) => lstat(path),
  realpath: (path) => realpath(path),
  readlink: (path) => readlink(path),
  list: listNames,
  readFile: readBoundedFile,
};

export interface KeyFileBytes {
  readonly name: string;
  readonly bytes: Buffer;
}

/** A config source's bytes, read at one instant and not yet interpreted. */
export type SourceBytes =
  | {
      readonly kind: 'directory';
      readonly path: string;
      /** The timestamped directory `..data` pointed to during the whole read (a kubelet ConfigMap volume). */
      readonly dataDir?: string;
      /** The keys, sorted by name; `..` names are kubelet's and never keys. */
      readonly files: readonly KeyFileBytes[];
    }
  | { readonly kind: 'file'; readonly path: string; readonly bytes: Buffer };

const MiB = 1024 * 1024;

function sizeText(bytes: number): string {
  return bytes % MiB === 0 ? `${String(bytes / MiB)} MiB` : `${String(bytes)} bytes`;
}

function tooLarge(source: string, path: string, file: string, message: string): InvalidConfigError {
  return new InvalidConfigError(source, [{ severity: 'error', path, message, position: { file } }]);
}

/** The target of `dir/..data`: undefined when there is none, `{ dangling }` when it points nowhere. */
async function resolveDataDir(
  fs: DirectoryFs,
  dir: string,
): Promise<string | { readonly dangling: string } | undefined> {
  const data = join(dir, '..data');
  try {
    return await fs.realpath(data);
  } catch (err) {
    if (errnoCode(err) !== 'ENOENT') throw new ConfigSourceError(dir, describeFsError(err, data));
  }
  try {
    if ((await fs.lstat(data)).isSymbolicLink()) return { dangling: await fs.readlink(data) };
  } catch (err) {
    if (errnoCode(err) !== 'ENOENT') throw new ConfigSourceError(dir, describeFsError(err, data));
  }
  return undefined;
}

/** The sorted entry names of `base`, at most MAX_CONFIG_DIRECTORY_ENTRIES of them. */
async function entryNames(fs: DirectoryFs, dir: string, base: string): Promise<string[]> {
  const names = await fs.list(base, MAX_CONFIG_DIRECTORY_ENTRIES);
  if (names.length > MAX_CONFIG_DIRECTORY_ENTRIES) {
    throw tooLarge(
      dir,
      '',
      dir,
      `has more than ${String(MAX_CONFIG_DIRECTORY_ENTRIES)} entries; a config directory holds one file per config key`,
    );
  }
  return names.sort();
}

/** A retryable "vanished mid-read" (kubelet deleted the old `..data` target); `final` is thrown when retries run out. */
class Vanished extends Error {
  constructor(readonly final: ConfigSourceError) {
    super(final.message);
  }
}

async function readKeys(fs: DirectoryFs, dir: string, base: string, viaData: boolean): Promise<KeyFileBytes[]> {
  const files: KeyFileBytes[] = [];
  const issues: ConfigIssue[] = [];
  let total = 0;
  for (const name of await entryNames(fs, dir, base)) {
    if (name.startsWith('..')) continue;
    const file = join(base, name);
    const shown = join(dir, name);
    let info: Stats;
    try {
      info = await fs.stat(file);
    } catch (err) {
      if (errnoCode(err) !== 'ENOENT') throw new ConfigSourceError(dir, describeFsError(err, shown));
      // Through `..data` it may be mid-swap: read again. Otherwise skipping the key would read as
      // "not set" (e.g. an empty storageClassMap, every PV orphaned).
      const target = await fs.readlink(file).catch(() => undefined);
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
    let read: BoundedRead;
    try {
      read = await fs.readFile(file, MAX_KEY_FILE_BYTES);
    } catch (err) {
      const unreadable = new ConfigSourceError(dir, describeFsError(err, shown));
      throw errnoCode(err) === 'ENOENT' && viaData ? new Vanished(unreadable) : unreadable;
    }
    if (read.kind === 'not-regular') throw await notRegularError(dir, shown, read.info, ONLY_REGULAR);
    if (read.kind === 'too-large') {
      issues.push({
        severity: 'error',
        path: name,
        message: `is larger than ${sizeText(MAX_KEY_FILE_BYTES)}, the most a key file may hold (a ConfigMap holds at most 1 MiB of data)`,
        position: { file: shown },
      });
      continue;
    }
    total += read.bytes.length;
    if (total > MAX_CONFIG_SOURCE_BYTES) {
      issues.push({
        severity: 'error',
        path: '',
        message: `the key files hold more than ${sizeText(MAX_CONFIG_SOURCE_BYTES)} together, the most a config source may hold`,
        position: { file: dir },
      });
      break;
    }
    files.push({ name, bytes: read.bytes });
  }
  if (issues.length > 0) throw new InvalidConfigError(dir, issues);
  return files;
}

/** Whether `..data` still names `dataDir`: no swap happened since it was resolved, so nothing removed it. */
async function stillCurrent(fs: DirectoryFs, dir: string, dataDir: string): Promise<boolean> {
  return (await resolveDataDir(fs, dir)) === dataDir;
}

async function readDirectoryBytes(fs: DirectoryFs, dir: string): Promise<SourceBytes> {
  let last: ConfigSourceError | InvalidConfigError | undefined;
  let reads = 0;
  let swapped = 0;
  let unexplained = 0;
  // A read lost to a swap means kubelet wrote a whole new version meanwhile: read again, up to
  // MAX_SWAPPED_READS; a failure no swap explains is retried SWAP_RETRIES times.
  while (unexplained <= SWAP_RETRIES && reads < MAX_SWAPPED_READS) {
    reads++;
    const data = await resolveDataDir(fs, dir);
    if (typeof data === 'object') {
      last = new ConfigSourceError(
        dir,
        `${join(dir, '..data')}: a dangling symlink (to ${data.dangling}); kubelet's data directory of this volume is missing`,
      );
      unexplained++;
      continue;
    }
    if (data === undefined) return { kind: 'directory', path: dir, files: await readPlainKeys(fs, dir) };
    let files: KeyFileBytes[] | undefined;
    try {
      files = await readKeys(fs, dir, data, true);
    } catch (err) {
      if (err instanceof Vanished) last = err.final;
      else if (errnoCode(err) === 'ENOENT') {
        last = new ConfigSourceError(dir, describeFsError(err, `${dir} (via ..data)`));
      } else if (await stillCurrent(fs, dir, data)) {
        // A problem of the current version (a FIFO as a key, a key too large) is the answer; one of
        // a version kubelet already replaced is not.
        if (err instanceof ConfigSourceError || err instanceof InvalidConfigError) throw err;
        throw new ConfigSourceError(dir, describeFsError(err, `${dir} (via ..data)`));
      } else {
        swapped++;
        continue;
      }
    }
    if (await stillCurrent(fs, dir, data)) {
      if (files !== undefined) return { kind: 'directory', path: dir, dataDir: data, files };
      unexplained++;
    } else {
      swapped++;
    }
  }
  if (swapped > 0 && (last === undefined || swapped >= unexplained)) {
    throw new ConfigSourceError(
      dir,
      `${join(dir, '..data')} changed during ${String(swapped)} of ${String(reads)} reads, faster than the directory could be read; something keeps replacing it`,
    );
  }
  throw last ?? new ConfigSourceError(dir, `${dir}: could not be read`);
}

/** A plain directory of key files (no `..data`): what it holds when listed. */
async function readPlainKeys(fs: DirectoryFs, dir: string): Promise<KeyFileBytes[]> {
  try {
    return await readKeys(fs, dir, dir, false);
  } catch (err) {
    if (err instanceof ConfigSourceError || err instanceof InvalidConfigError) throw err;
    throw new ConfigSourceError(dir, describeFsError(err, dir));
  }
}

/**
 * Reads a config source's bytes: a directory of key files (one consistent snapshot through `..data`),
 * or one regular file. Throws ConfigSourceError (exit 4) when it cannot be read, is not a regular file
 * or directory, has a directory or a dangling symlink as a key, or a dangling `..data`;
 * InvalidConfigError (exit 3) when it holds more than the limits above.
 */
export async function readSourceBytes(path: string, fs: DirectoryFs = nodeDirectoryFs): Promise<SourceBytes> {
  let info: Stats;
  try {
    info = await fs.stat(path);
  } catch (err) {
    throw new ConfigSourceError(path, describeFsError(err, path));
  }
  if (info.isDirectory()) return readDirectoryBytes(fs, path);
  if (!info.isFile()) {
    throw await notRegularError(
      path,
      path,
      info,
      'not a directory or a regular file; a config source is a directory of key files, a YAML file or a ConfigMap manifest',
    );
  }
  let read: BoundedRead;
  try {
    read = await fs.readFile(path, MAX_CONFIG_SOURCE_BYTES);
  } catch (err) {
    throw new ConfigSourceError(path, describeFsError(err, path));
  }
  if (read.kind === 'not-regular') throw await notRegularError(path, path, read.info, ONLY_REGULAR);
  if (read.kind === 'too-large') {
    throw tooLarge(
      path,
      '',
      path,
      `is larger than ${sizeText(MAX_CONFIG_SOURCE_BYTES)}, the most a config file may hold (a ConfigMap holds at most 1 MiB of data)`,
    );
  }
  return { kind: 'file', path, bytes: read.bytes };
}
