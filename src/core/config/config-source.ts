// The config source port: where the raw config comes from. A source yields SourceReads (the
// snapshot the parser takes, with a fingerprint of what was read); the watcher, the reload state
// machine and the effect table only ever see those, whichever source is in use. Two
// implementations: the mounted directory or file (here) and a ConfigMap read through the API
// (configmap-source.ts).
//
// A change is read once: the watcher's check reads the source, and the reload validates and
// applies that same read; nothing reads the source a second time for it.
import { createHash } from 'node:crypto';
import type { BigIntStats } from 'node:fs';
import { stat } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { systemClock } from '../clock.js';
import { ConfigSourceError, formatIssue, InvalidConfigError, ProvisionerError } from '../errors.js';
import { dns1123SubdomainErrors } from '../kube/validation.js';
import { errnoCode, errorMessage } from '../unknown-values.js';
import { readSourceBytes } from './read.js';
import type { SourceBytes } from './read.js';
import { snapshotFromSourceBytes } from './source.js';
import type { ConfigSnapshot } from './source.js';

/** What a source is, as the status and the published node state show it. */
export type ConfigSourceDescription =
  | { readonly kind: 'directory'; readonly path: string }
  | { readonly kind: 'configmap'; readonly namespace: string; readonly name: string };

/** `configmap:NAMESPACE/NAME` (the --config-source syntax), or the directory's path. */
export function sourceLabel(source: ConfigSourceDescription): string {
  return source.kind === 'directory' ? source.path : `configmap:${source.namespace}/${source.name}`;
}

/** One read of a source: the snapshot, or why it could not be read, with a fingerprint of what was read. */
export type SourceRead = (
  | { readonly ok: true; readonly fingerprint: string; readonly snapshot: ConfigSnapshot }
  | {
      readonly ok: false;
      /** Of the bytes when they were read but are invalid (e.g. too large), else `unreadable:<reason>`. */
      readonly fingerprint: string;
      readonly error: ConfigSourceError | InvalidConfigError;
    }
) & {
  /**
   * What probe() returns as long as the source still holds what this read read; undefined: no
   * such guarantee (the next periodic check reads again).
   */
  readonly probe?: string;
};

/** The API source's view of its ConfigMap. */
export interface ApiSourceStatus {
  /** The last list or watch of the ConfigMap worked (false: the API is unreachable or refuses). */
  readonly reachable: boolean;
  /**
   * present: the ConfigMap exists; deleted: it was deleted (ignored: the last config read from it
   * stays); absent: it was never found; unknown: not listed yet.
   */
  readonly object: 'present' | 'deleted' | 'absent' | 'unknown';
  /** The config held may be older than the ConfigMap: the API is unreachable, or it was never listed. */
  readonly stale: boolean;
  readonly lastError?: string;
  /** When `reachable` or `object` last changed (ms since epoch). */
  readonly since: number;
  /** resourceVersion of the ConfigMap last read. */
  readonly resourceVersion?: string;
}

/** `source` of GET /v1/status: which source is configured, which one the agent reads now, and its health. */
export interface ConfigSourceStatus {
  /** What the agent was told to read (--config-source; default the --config-dir directory). */
  readonly configured: ConfigSourceDescription;
  /** What the config applied and watched comes from now: `configured`, or the fallback directory. */
  readonly inUse: ConfigSourceDescription;
  /** Why `inUse` is the fallback directory (the API source could not be read at start-up). */
  readonly fallbackReason?: string;
  /** The API source's state (configured as a ConfigMap only). */
  readonly api?: ApiSourceStatus;
}

/** What a source tells whoever started it. */
export interface SourceListener {
  /** The content may have changed ('api': a watch event); the watcher reads and compares fingerprints. */
  readonly changed: (by: 'api') => void;
  /** status() changed (API reachability, the ConfigMap deleted or back, the fallback left). */
  readonly statusChanged?: (status: ConfigSourceStatus) => void;
}

export interface ConfigSource {
  status(): ConfigSourceStatus;
  /** A directory or file whose filesystem events may signal a change (the watcher's fs feed); undefined: none. */
  readonly fsWatchPath?: string | undefined;
  /** Starts what the source needs (the API watch); resolves once a first read is meaningful. */
  start(listener: SourceListener): Promise<void>;
  /**
   * Cheap: a value that differs from the last read's `probe` whenever the content may have
   * changed since (file stats, a resourceVersion), so the periodic check reads the content only
   * then. undefined: no such value.
   */
  probe(): Promise<string | undefined>;
  /** Reads the source now, within the bounds of read.ts. Never throws. */
  read(): Promise<SourceRead>;
  stop(): Promise<void>;
}

// ---------------------------------------------------------------------------------------------
// Fingerprints

function hashEntry(hash: ReturnType<typeof createHash>, name: string, bytes: Uint8Array): void {
  hash.update(name).update('\0').update(String(bytes.length)).update('\0').update(bytes);
}

/**
 * `sha256:<hex>` over sorted (key, bytes): a directory's keys and a ConfigMap's data give the same
 * fingerprint for the same content.
 */
export function keysFingerprint(files: readonly { readonly name: string; readonly bytes: Uint8Array }[]): string {
  const hash = createHash('sha256').update('directory\0');
  for (const f of [...files].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)))
    hashEntry(hash, f.name, f.bytes);
  return `sha256:${hash.digest('hex')}`;
}

/** The fingerprint of what readSourceBytes read. Timestamps, inodes and the `..data` target do not count. */
export function fingerprintOfBytes(path: string, read: SourceBytes): string {
  if (read.kind === 'directory') return keysFingerprint(read.files);
  const hash = createHash('sha256').update('file\0');
  hashEntry(hash, basename(path), read.bytes);
  return `sha256:${hash.digest('hex')}`;
}

/**
 * The content fingerprint of a directory or file source: sha256 over the sorted (name, bytes) of
 * its keys read through one resolved `..data` (readSourceBytes, the same bounded walk as the load),
 * or over a single file's bytes. Throws for what the load refuses.
 */
export async function fingerprintConfigSource(path: string): Promise<string> {
  return fingerprintOfBytes(path, await readSourceBytes(path));
}

/** What an unreadable source's fingerprint says: which problem, so a different one is a change too. */
export function unreadableReason(error: unknown): string {
  if (error instanceof InvalidConfigError) return error.issues.map(formatIssue).join('; ');
  if (error instanceof ProvisionerError) return error.message;
  return errnoCode(error) ?? errorMessage(error);
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

/** Reads a directory or file (readSourceBytes) into a SourceRead. */
export async function readPathSource(path: string): Promise<SourceRead> {
  return (await readPathWithKeys(path)).read;
}

/** readPathSource, and the key names read (what the next stat fingerprint stats); undefined when unreadable. */
async function readPathWithKeys(
  path: string,
): Promise<{ readonly read: SourceRead; readonly keys: readonly string[] | undefined }> {
  const startedAt = systemClock.now();
  let bytes: SourceBytes;
  try {
    bytes = await readSourceBytes(path);
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
  private readonly description: ConfigSourceDescription;
  /** The keys of the last read: what the probe stats. */
  private keys: readonly string[] = [];

  constructor(readonly path: string) {
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
    const { read, keys } = await readPathWithKeys(this.path);
    if (keys !== undefined) this.keys = keys;
    return read;
  }

  stop(): Promise<void> {
    return Promise.resolve();
  }
}

// ---------------------------------------------------------------------------------------------
// --config-source

/** What --config-source asks for; a ConfigMap without a namespace means the pod's. */
export type ConfigSourceSpec =
  { readonly kind: 'directory' } | { readonly kind: 'configmap'; readonly namespace?: string; readonly name: string };

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/u;

/**
 * Pure: `directory` or `configmap:[NAMESPACE/]NAME` → the spec, or why not (for a usage error).
 * NAME must be a ConfigMap name (a DNS-1123 subdomain), NAMESPACE a DNS-1123 label.
 */
export function parseConfigSourceSpec(
  text: string,
): { readonly ok: true; readonly spec: ConfigSourceSpec } | { readonly ok: false; readonly message: string } {
  if (text === 'directory') return { ok: true, spec: { kind: 'directory' } };
  const usage = 'expected `directory` or `configmap:[NAMESPACE/]NAME`';
  if (!text.startsWith('configmap:')) return { ok: false, message: `${JSON.stringify(text)}: ${usage}` };
  const rest = text.slice('configmap:'.length);
  const parts = rest.split('/');
  if (parts.length > 2) return { ok: false, message: `${JSON.stringify(text)}: ${usage}` };
  const name = parts.at(-1) ?? '';
  const namespace = parts.length === 2 ? (parts[0] ?? '') : undefined;
  const nameErrors = dns1123SubdomainErrors(name);
  if (nameErrors.length > 0)
    return { ok: false, message: `${JSON.stringify(name)} is not a valid ConfigMap name: ${nameErrors.join('; ')}` };
  if (namespace !== undefined && (namespace.length > 63 || !DNS1123_LABEL.test(namespace))) {
    return {
      ok: false,
      message: `${JSON.stringify(namespace)} is not a valid namespace: a lowercase RFC 1123 label of at most 63 characters`,
    };
  }
  return {
    ok: true,
    spec: namespace === undefined ? { kind: 'configmap', name } : { kind: 'configmap', namespace, name },
  };
}
