// The config source port: where the raw config comes from, and the snapshot every reader gets.
// A source yields SourceReads (a snapshot the parser takes, with a fingerprint of what was read);
// the watcher, the reload state machine, the one-shot commands (diff-config, simulate, rollout
// status, the sandbox) and the effect table only ever see those, whichever source is in use. The
// implementations: the mounted directory or file (directory.ts, reading through directory-read.ts),
// one ConfigMap read through the API (configmap-api.ts), and the staged rollout's copies of one
// (staged.ts, on the same API machinery). load.ts reads a source once.
//
// A change is read once: the watcher's check reads the source, and the reload validates and
// applies that same read; nothing reads the source a second time for it.
import { createHash } from 'node:crypto';
import { ConfigSourceError, formatIssue, InvalidConfigError, ProvisionerError } from '../../errors.js';
import type { ConfigIssue, SourcePosition } from '../../errors.js';
import { dns1123SubdomainErrors } from '../../kube/validation.js';
import { errnoCode, errorMessage } from '../../unknown-values.js';
import type { ProvisionerConfig } from '../model.js';
import type { GuardedImpact } from '../reload-guard.js';
import type { RolloutPhase } from '../../rollout-state/state.js';
import type { Node } from 'yaml';
import type { TextOrigin, YamlText } from '../decode/yaml-node.js';

// ---------------------------------------------------------------------------------------------
// The snapshot

/**
 * How the config was laid out where it was read: a directory of one file per key (a mounted
 * ConfigMap, or a plain directory), one YAML file of keys, or one ConfigMap manifest file
 * ('configmap', the value the v1 JSON contracts of diff-config and simulate give it).
 */
export type FileLayout = 'directory' | 'yaml-file' | 'configmap';

/** Where a snapshot was read and how it was laid out there. */
export interface SnapshotOrigin {
  /** The path the user gave (for the API source, `configmap:NS/NAME`). */
  readonly path: string;
  readonly kind: FileLayout;
  /** For a kubelet-style directory: the timestamped directory `..data` pointed to during the read. */
  readonly dataDir?: string;
  /** For a manifest: `namespace/name` of the ConfigMap. */
  readonly configMap?: string;
}

/** The value of one config key, before decoding. */
export type RawValue =
  /** Text to be parsed as YAML: a file of a mounted ConfigMap, or a `data` string of a ConfigMap. */
  | { readonly kind: 'text'; readonly text: string; readonly origin: TextOrigin }
  /** A node of an already parsed YAML file (the single-file layout). */
  | { readonly kind: 'node'; readonly node: Node | null; readonly yaml: YamlText };

export interface RawEntry {
  readonly key: string;
  readonly keyPosition: SourcePosition;
  readonly value: RawValue;
}

/** Everything read from a source at one instant, not yet interpreted. */
export interface ConfigSnapshot {
  readonly source: SnapshotOrigin;
  readonly entries: readonly RawEntry[];
  /** Problems found while splitting the source into keys (e.g. YAML errors of a whole file). */
  readonly issues: readonly ConfigIssue[];
  /** YAML values parsed while splitting the source into keys: its keys' YAML counts on from here (YamlBudget). */
  readonly yamlValues: number;
}

/** A snapshot decoded: the normalized config, its hash, and the warnings found on the way. */
export interface LoadedConfig {
  readonly config: ProvisionerConfig;
  readonly hash: string;
  readonly source: SnapshotOrigin;
  readonly warnings: readonly ConfigIssue[];
  /** Where each class's discovery directories are written, by key path (`storageClassMap.NAME.mountDir`). */
  readonly positions: Readonly<Record<string, SourcePosition>>;
}

// ---------------------------------------------------------------------------------------------
// The port
/**
 * Which source: a directory (or file) path, a ConfigMap, or the staged copies of one (configured
 * `staged`; in use, the copy read: a `configmap` with `staged: true`); as the status and the
 * published node state show it.
 */
export type ConfigSourceRef =
  | { readonly kind: 'directory'; readonly path: string }
  | { readonly kind: 'configmap'; readonly namespace: string; readonly name: string; readonly staged?: true }
  | { readonly kind: 'staged'; readonly namespace: string; readonly name: string };

/**
 * `configmap:NAMESPACE/NAME` and `staged:NAMESPACE/NAME` (the --config-source syntax), the copy a
 * staged source reads as `configmap:NAMESPACE/NAME-candidate (staged)`, or the directory's path.
 */
export function sourceLabel(source: ConfigSourceRef): string {
  switch (source.kind) {
    case 'directory':
      return source.path;
    case 'staged':
      return `staged:${source.namespace}/${source.name}`;
    case 'configmap':
      return `configmap:${source.namespace}/${source.name}${source.staged === true ? ' (staged)' : ''}`;
  }
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
  /**
   * Guarded impacts a live reload of this read applies anyway, as `provisioner reload --allow`
   * would (a staged rollout's return to stable: the rollout decided it).
   */
  readonly guardAllows?: readonly GuardedImpact[];
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
  readonly configured: ConfigSourceRef;
  /** What the config applied and watched comes from now: `configured`, or the fallback directory. */
  readonly inUse: ConfigSourceRef;
  /** Why `inUse` is the fallback directory (the API source could not be read at start-up). */
  readonly fallbackReason?: string;
  /** The API source's state (configured as a ConfigMap or staged only). */
  readonly api?: ApiSourceStatus;
  /** Staged source: the copy this node reads (the candidate only while its wave is open). */
  readonly stagedRole?: 'stable' | 'candidate';
  /** Staged source: the rollout's phase, as the candidate's state says (absent: no rollout state). */
  readonly rolloutPhase?: RolloutPhase;
  /** Staged source: why the candidate's rollout state was not understood (the node reads the stable copy). */
  readonly rolloutStateError?: string;
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

/** `sha256:<hex>` of a single-file source: its name and bytes. */
export function fileFingerprint(name: string, bytes: Uint8Array): string {
  const hash = createHash('sha256').update('file\0');
  hashEntry(hash, name, bytes);
  return `sha256:${hash.digest('hex')}`;
}

/** What an unreadable source's fingerprint says: which problem, so a different one is a change too. */
export function unreadableReason(error: unknown): string {
  if (error instanceof InvalidConfigError) return error.issues.map(formatIssue).join('; ');
  if (error instanceof ProvisionerError) return error.message;
  return errnoCode(error) ?? errorMessage(error);
}

// ---------------------------------------------------------------------------------------------
// --config-source

/** What --config-source asks for; a ConfigMap without a namespace means the pod's. */
export type RequestedConfigSource =
  | { readonly kind: 'directory' }
  | { readonly kind: 'configmap' | 'staged'; readonly namespace?: string; readonly name: string };

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/u;
/** The longest suffix a staged source adds to its ConfigMap's name (`-candidate`). */
const STAGED_SUFFIX = '-candidate';

/**
 * Pure: `directory`, `configmap:[NAMESPACE/]NAME` or `staged:[NAMESPACE/]NAME` → the spec, or why
 * not (for a usage error). NAME must be a ConfigMap name (a DNS-1123 subdomain; staged: its copies'
 * names too), NAMESPACE a DNS-1123 label.
 */
export function parseRequestedConfigSource(
  text: string,
): { readonly ok: true; readonly spec: RequestedConfigSource } | { readonly ok: false; readonly message: string } {
  if (text === 'directory') return { ok: true, spec: { kind: 'directory' } };
  const usage = 'expected `directory`, `configmap:[NAMESPACE/]NAME` or `staged:[NAMESPACE/]NAME`';
  const kind = text.startsWith('configmap:') ? 'configmap' : text.startsWith('staged:') ? 'staged' : undefined;
  if (kind === undefined) return { ok: false, message: `${JSON.stringify(text)}: ${usage}` };
  const rest = text.slice(kind.length + 1);
  const parts = rest.split('/');
  if (parts.length > 2) return { ok: false, message: `${JSON.stringify(text)}: ${usage}` };
  const name = parts.at(-1) ?? '';
  const namespace = parts.length === 2 ? (parts[0] ?? '') : undefined;
  const nameErrors = dns1123SubdomainErrors(kind === 'staged' && name !== '' ? `${name}${STAGED_SUFFIX}` : name);
  if (nameErrors.length > 0) {
    const what =
      kind === 'staged' ? 'ConfigMap name to stage (NAME-candidate must be a ConfigMap name)' : 'ConfigMap name';
    return { ok: false, message: `${JSON.stringify(name)} is not a valid ${what}: ${nameErrors.join('; ')}` };
  }
  if (namespace !== undefined && (namespace.length > 63 || !DNS1123_LABEL.test(namespace))) {
    return {
      ok: false,
      message: `${JSON.stringify(namespace)} is not a valid namespace: a lowercase RFC 1123 label of at most 63 characters`,
    };
  }
  return { ok: true, spec: namespace === undefined ? { kind, name } : { kind, namespace, name } };
}
