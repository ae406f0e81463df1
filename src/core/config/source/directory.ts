// The directory source: a mounted ConfigMap directory (kubelet's `..data` layout), a plain
// directory of keys, or one YAML file. Its reads go through directory-read.ts (bounded, one
// consistent snapshot); its probe is a stat fingerprint, so the periodic check reads content only
// when something changed.
import type { BigIntStats } from 'node:fs';
import { stat } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { systemClock } from '../../clock.js';
import { ConfigSourceError, InvalidConfigError } from '../../errors.js';
import { errorMessage } from '../../unknown-values.js';
import { snapshotFromSourceBytes } from '../decode/layout.js';
import { nodeDirectoryFs, readSourceBytes } from './directory-read.js';
import type { DirectoryFs, SourceBytes } from './directory-read.js';
import { fileFingerprint, keysFingerprint, unreadableReason } from './port.js';
import type { ConfigSource, ConfigSourceRef, ConfigSourceStatus, SourceRead } from './port.js';

/** The fingerprint of what readSourceBytes read. Timestamps, inodes and the `..data` target do not count. */
export function fingerprintOfBytes(path: string, read: SourceBytes): string {
  if (read.kind === 'directory') return keysFingerprint(read.files);
  return fileFingerprint(basename(path), read.bytes);
}

/**
 * The content fingerprint of a directory or file source: sha256 over the sorted (name, bytes) of
 * its keys read through one resolved `..data` (readSourceBytes, the same bounded walk as the load),
 * or over a single file's bytes. Throws for what the load refuses.
 */
export async function fingerprintConfigSource(path: string): Promise<string> {
  return fingerprintOfBytes(path, await readSourceBytes(path));
}

// ---------------------------------------------------------------------------------------------
// The directory (or file) source

/**
 * File timestamps this close to now are not trusted to reveal a later rewrite (same size, same
 * coarse timestamp): a probe of such a source is "racy" and always leads to a content read (git's
 * racily-clean index entries). 2 s covers every Linux filesystem's timestamp granularity.
 */
const RACY_MS = 2_000;

let racyProbes = 0;

/**
 * A stat fingerprint of a directory source: device, inode, mode, size, mtime and ctime of the
 * directory itself (an entry added, removed or renamed, kubelet's `..data` swap included, changes
 * its mtime), of `..data` (followed: kubelet's current data directory) and of each of `keys`
 * (followed: a key's file), all stat'ed at once; or of the file, for a file source. No file is
 * opened and no directory listed (listing costs several times a stat). While any timestamp is
 * younger than RACY_MS before `since` (default now; a read's start, for the value that vouches
 * for that read) it is unique on every call.
 */
export async function statFingerprint(
  path: string,
  keys: readonly string[],
  since = systemClock.now(), // file timestamps are wall-clock time
): Promise<string> {
  const wallNow = Math.min(since, systemClock.now());
  const statOf = (p: string): Promise<BigIntStats | undefined> => stat(p, { bigint: true }).catch(() => undefined);
  const top = await statOf(path);
  const names = top?.isDirectory() === true ? ['..data', ...keys] : [];
  const infos = await Promise.all(names.map((name) => statOf(join(path, name))));
  const all = [top, ...infos];
  const racy = all.some(
    (info) =>
      info !== undefined && (Number(info.mtimeMs) > wallNow - RACY_MS || Number(info.ctimeMs) > wallNow - RACY_MS),
  );
  const parts = all.map((info, i) => {
    const name = i === 0 ? '.' : (names[i - 1] ?? '');
    if (info === undefined) return `${name}\0-`;
    return `${name}\0${String(info.dev)}:${String(info.ino)}:${String(info.mode)}:${String(info.size)}:${String(info.mtimeNs)}:${String(info.ctimeNs)}`;
  });
  if (racy) return `racy:${String(++racyProbes)}`;
  // Compared for equality only, and with the last probe only: the stats themselves, unhashed.
  return `stat:${parts.join('\n')}`;
}

/** Reads a directory or file (readSourceBytes) into a SourceRead, and the key names read (what the next stat fingerprint stats); undefined when unreadable. */
async function readPathWithKeys(
  path: string,
  fs: DirectoryFs,
): Promise<{ readonly read: SourceRead; readonly keys: readonly string[] | undefined }> {
  const startedAt = systemClock.now();
  let bytes: SourceBytes;
  try {
    bytes = await readSourceBytes(path, fs);
  } catch (error) {
    const read: SourceRead = {
      ok: false,
      fingerprint: `unreadable:${unreadableReason(error)}`,
      error:
        error instanceof ConfigSourceError || error instanceof InvalidConfigError
          ? error
          : new ConfigSourceError(path, `${path}: ${errorMessage(error)}`),
    };
    return { read, keys: undefined };
  }
  const fingerprint = fingerprintOfBytes(path, bytes);
  const keys = bytes.kind === 'directory' ? bytes.files.map((f) => f.name) : [];
  // Taken after the read, but racy for anything touched since the read began: a change during
  // or after the read makes it unique, so the next periodic check reads again.
  const probe = await statFingerprint(path, keys, startedAt);
  try {
    return { read: { ok: true, fingerprint, snapshot: snapshotFromSourceBytes(path, bytes), probe }, keys };
  } catch (error) {
    if (error instanceof InvalidConfigError) return { read: { ok: false, fingerprint, error, probe }, keys };
    throw error;
  }
}

/** The mounted ConfigMap directory (kubelet's `..data` layout), a plain directory of keys, or one YAML file. */
export class DirectoryConfigSource implements ConfigSource {
  readonly fsWatchPath: string;
  private readonly description: ConfigSourceRef;
  /** The keys of the last read: what the probe stats. */
  private keys: readonly string[] = [];

  constructor(
    readonly path: string,
    private readonly fs: DirectoryFs = nodeDirectoryFs,
  ) {
    this.fsWatchPath = path;
    this.description = { kind: 'directory', path };
  }

  status(): ConfigSourceStatus {
    return { configured: this.description, inUse: this.description };
  }

  start(): Promise<void> {
    return Promise.resolve();
  }

  probe(): Promise<string> {
    return statFingerprint(this.path, this.keys);
  }

  async read(): Promise<SourceRead> {
    const { read, keys } = await readPathWithKeys(this.path, this.fs);
    if (keys !== undefined) this.keys = keys;
    return read;
  }

  stop(): Promise<void> {
    return Promise.resolve();
  }
}
