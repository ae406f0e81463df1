// The API source: one ConfigMap, read through the cluster port (list + watch with a field
// selector on its name, the reflector's relist and backoff), so a `kubectl apply` reaches the agent
// in about a second instead of kubelet's 60-120 s volume refresh.
//
// What it does when things go wrong (docs/operations.md):
//   - the API unreachable (or refusing): the last ConfigMap read stays the snapshot, so the running
//     config stays; status().api says unreachable and stale until a list or watch works again;
//   - the ConfigMap deleted: reported (status, and the agent logs, counts and records a Node
//     event) and ignored: the last snapshot stays, nothing is wiped; re-created: read again;
//   - at start-up, before the ConfigMap was ever read (the API refuses, or it does not exist): the
//     mounted directory `fallbackPath`, when there is one, is the source in use until the
//     ConfigMap is read; the status says so and why.
// The ConfigMap's data goes through the same bounds as a mounted directory (directory-read.ts).
import { stat } from 'node:fs/promises';
import type { Clock } from '../../clock.js';
import { ConfigSourceError, InvalidConfigError } from '../../errors.js';
import type { ConfigIssue } from '../../errors.js';
import type { ResourceClient } from '../../kube/cluster.js';
import type { ConfigMap } from '../../kube/objects.js';
import { Reflector } from '../../kube/reflector.js';
import type { Logger } from '../../log.js';
import { DirectoryConfigSource } from './directory.js';
import { MAX_CONFIG_DIRECTORY_ENTRIES, MAX_CONFIG_SOURCE_BYTES, MAX_KEY_FILE_BYTES } from './directory-read.js';
import { keysFingerprint } from './port.js';
import type {
  ApiSourceStatus,
  ConfigSnapshot,
  ConfigSource,
  ConfigSourceRef,
  ConfigSourceStatus,
  RawEntry,
  SourceListener,
  SourceRead,
} from './port.js';

export interface ConfigMapSourceOptions {
  readonly client: ResourceClient<ConfigMap>;
  readonly namespace: string;
  readonly name: string;
  readonly clock: Clock;
  readonly logger: Logger;
  /** A mounted copy of the ConfigMap, used until the ConfigMap is first read (only if it exists at start()). */
  readonly fallbackPath?: string;
  /** Longest wait in start() for the first list (default 5 s); with a fallback, the first failure ends it too. */
  readonly startTimeoutMs?: number;
  /** The reflector's full relist period, a watchdog against a stalled watch (default 5 min, jittered). */
  readonly relistPeriodMs?: number;
  readonly random?: () => number;
}

const DEFAULT_START_TIMEOUT_MS = 5_000;
const DEFAULT_RELIST_MS = 5 * 60_000;
const MiB = 1024 * 1024;

/** `configmap:NAMESPACE/NAME`: the snapshot's path, the prefix of every issue position. */
export function configMapLabel(namespace: string, name: string): string {
  return `configmap:${namespace}/${name}`;
}

/**
 * Pure: a ConfigMap object → a SourceRead, within the bounds of a mounted directory (at most
 * MAX_CONFIG_DIRECTORY_ENTRIES keys, MAX_KEY_FILE_BYTES per key, MAX_CONFIG_SOURCE_BYTES in all).
 * Positions name `configmap:NS/NAME/KEY`.
 */
export function readConfigMapObject(namespace: string, name: string, object: ConfigMap): SourceRead {
  const label = configMapLabel(namespace, name);
  const data = object.data ?? {};
  const keys = Object.keys(data).sort();
  const files = keys.map((key) => ({ name: key, bytes: Buffer.from(data[key] ?? '', 'utf8') }));
  const fingerprint = keysFingerprint(files);
  const errors: ConfigIssue[] = [];
  const warnings: ConfigIssue[] = [];
  if (keys.length > MAX_CONFIG_DIRECTORY_ENTRIES) {
    errors.push({
      severity: 'error',
      path: 'data',
      message: `has more than ${String(MAX_CONFIG_DIRECTORY_ENTRIES)} keys; the config has about ten`,
      position: { file: label },
    });
  }
  let total = 0;
  for (const f of files) {
    total += f.bytes.length;
    if (f.bytes.length > MAX_KEY_FILE_BYTES) {
      errors.push({
        severity: 'error',
        path: f.name,
        message: `is larger than ${String(MAX_KEY_FILE_BYTES / MiB)} MiB, the most a key may hold`,
        position: { file: `${label}/${f.name}` },
      });
    }
  }
  if (total > MAX_CONFIG_SOURCE_BYTES) {
    errors.push({
      severity: 'error',
      path: 'data',
      message: `the keys hold more than ${String(MAX_CONFIG_SOURCE_BYTES / MiB)} MiB together, the most a config source may hold`,
      position: { file: label },
    });
  }
  if (Object.keys(object.binaryData ?? {}).length > 0) {
    warnings.push({
      severity: 'warning',
      path: 'binaryData',
      message: 'binaryData keys are not read as configuration',
      position: { file: label },
    });
  }
  if (errors.length > 0)
    return { ok: false, fingerprint, error: new InvalidConfigError(label, [...errors, ...warnings]) };
  const entries = keys.map((key): RawEntry => {
    const file = `${label}/${key}`;
    return {
      key,
      keyPosition: { file },
      value: { kind: 'text', text: data[key] ?? '', origin: { file, lineOffset: 0, columnOffset: 0 } },
    };
  });
  const snapshot: ConfigSnapshot = {
    source: { path: label, kind: 'configmap', configMap: `${namespace}/${name}` },
    entries,
    issues: warnings,
    yamlValues: 0,
  };
  return { ok: true, fingerprint, snapshot };
}

/** The ConfigMap through the API, with the mounted directory as the start-up fallback. */
export class ConfigMapConfigSource implements ConfigSource {
  readonly fsWatchPath: string | undefined;
  private readonly description: ConfigSourceRef;
  private readonly label: string;
  private readonly reflector: Reflector<ConfigMap>;
  private readonly fallback: DirectoryConfigSource | undefined;
  private readonly abort = new AbortController();
  private running: Promise<void> | undefined;
  private listener: SourceListener | undefined;
  /** Whether the fallback directory existed at start(): only then is it used. */
  private fallbackAvailable = false;
  private listed = false;
  private object: ApiSourceStatus['object'] = 'unknown';
  private since: number;
  /** The read of the ConfigMap as last seen present: what a deletion or an outage keeps. */
  private last: { readonly resourceVersion: string; readonly read: SourceRead } | undefined;
  private lastStatus: string | undefined;
  private lastReachable: boolean | undefined;
  /** Ends start()'s wait (a first failure while the fallback directory can serve). */
  private endStartWait: (() => void) | undefined;

  constructor(private readonly options: ConfigMapSourceOptions) {
    const { namespace, name } = options;
    this.description = { kind: 'configmap', namespace, name };
    this.label = configMapLabel(namespace, name);
    this.since = options.clock.now();
    this.fallback = options.fallbackPath !== undefined ? new DirectoryConfigSource(options.fallbackPath) : undefined;
    this.fsWatchPath = options.fallbackPath;
    this.reflector = new Reflector<ConfigMap>({
      client: options.client,
      clock: options.clock,
      logger: options.logger,
      resource: `configmap ${namespace}/${name}`,
      namespace,
      fieldSelector: `metadata.name=${name}`,
      pageSize: 1,
      relistPeriodMs: options.relistPeriodMs ?? DEFAULT_RELIST_MS,
      ...(options.random ? { random: options.random } : {}),
      onChange: (type) => {
        this.observeObject(type === 'DELETED');
      },
      onError: () => {
        this.statusMayHaveChanged();
      },
    });
  }

  /** True once the ConfigMap was read: from then on it is the source, whatever happens to the API. */
  private get hasContent(): boolean {
    return this.last !== undefined;
  }

  private usingFallback(): boolean {
    return !this.hasContent && this.fallbackAvailable && this.fallback !== undefined;
  }

  private observeObject(deleted: boolean): void {
    this.listed = true;
    const was = this.object;
    this.object = deleted ? (this.hasContent ? 'deleted' : 'absent') : 'present';
    if (this.object !== was) this.since = this.options.clock.now();
    if (!deleted) {
      const current = this.reflector.get(this.options.name);
      if (current !== undefined) {
        this.last = {
          resourceVersion: current.metadata.resourceVersion ?? '',
          read: readConfigMapObject(this.options.namespace, this.options.name, current),
        };
      }
    }
    this.statusMayHaveChanged();
    if (!deleted) this.listener?.changed('api');
  }

  private apiStatus(): ApiSourceStatus {
    const lastError = this.reflector.lastError;
    const reachable = this.listed && lastError === undefined;
    return {
      reachable,
      object: this.object,
      stale: !reachable,
      ...(lastError !== undefined ? { lastError } : {}),
      since: this.since,
      ...(this.last !== undefined ? { resourceVersion: this.last.resourceVersion } : {}),
    };
  }

  private fallbackReason(): string {
    const error = this.reflector.lastError;
    if (error !== undefined) return `cannot read ${this.label}: ${error}`;
    if (this.listed) return `${this.label} does not exist`;
    return `${this.label} was not listed yet`;
  }

  status(): ConfigSourceStatus {
    const fallback = this.usingFallback() ? this.fallback : undefined;
    return {
      configured: this.description,
      inUse: fallback !== undefined ? fallback.status().inUse : this.description,
      ...(fallback !== undefined ? { fallbackReason: this.fallbackReason() } : {}),
      api: this.apiStatus(),
    };
  }

  /** Tells the listener when the source in use, reachability or the object's state changed (not the error text alone). */
  private statusMayHaveChanged(): void {
    const reachable = this.apiStatus().reachable;
    if (this.lastReachable !== undefined && reachable !== this.lastReachable) this.since = this.options.clock.now();
    this.lastReachable = reachable;
    const s = this.status();
    if (s.api?.lastError !== undefined && this.usingFallback()) this.endStartWait?.();
    const key = JSON.stringify([s.inUse, reachable, s.api?.object]);
    if (key === this.lastStatus) return;
    this.lastStatus = key;
    this.listener?.statusChanged?.(s);
  }

  /**
   * Starts the list + watch and waits for the first list (at most startTimeoutMs; with a fallback
   * directory, a first failure ends the wait too: the directory serves meanwhile).
   */
  async start(listener: SourceListener): Promise<void> {
    if (this.running !== undefined) throw new Error('ConfigMapConfigSource.start() can be called only once');
    this.listener = listener;
    if (this.options.fallbackPath !== undefined) {
      this.fallbackAvailable = await stat(this.options.fallbackPath).then(
        (info) => info.isDirectory() || info.isFile(),
        () => false,
      );
    }
    const failed = new Promise<void>((resolve) => {
      this.endStartWait = resolve;
    });
    this.running = this.reflector.run(this.abort.signal);
    void this.reflector.synced.then(() => {
      this.listed = true;
      if (this.object === 'unknown') {
        this.object = this.reflector.get(this.options.name) !== undefined ? 'present' : 'absent';
        this.since = this.options.clock.now();
      }
      this.statusMayHaveChanged();
    });
    const deadline = new AbortController();
    try {
      await Promise.race([
        this.reflector.synced,
        failed,
        this.options.clock
          .sleep(
            this.options.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS,
            AbortSignal.any([deadline.signal, this.abort.signal]),
          )
          .catch(() => undefined),
      ]);
    } finally {
      deadline.abort();
      this.endStartWait = undefined;
    }
    // Let the synced handler above run before the first read.
    await Promise.resolve();
    this.statusMayHaveChanged();
  }

  probe(): Promise<string | undefined> {
    if (this.usingFallback() && this.fallback !== undefined) {
      return this.fallback.probe().then((p) => `fallback:${p}`);
    }
    return Promise.resolve(`${this.object}:${this.last?.resourceVersion ?? ''}`);
  }

  async read(): Promise<SourceRead> {
    if (this.last !== undefined) return { ...this.last.read, probe: (await this.probe()) ?? '' };
    if (this.usingFallback() && this.fallback !== undefined) {
      const read = await this.fallback.read();
      return read.probe === undefined ? read : { ...read, probe: `fallback:${read.probe}` };
    }
    const reason = this.fallbackReason();
    return { ok: false, fingerprint: `unreadable:${reason}`, error: new ConfigSourceError(this.label, reason) };
  }

  async stop(): Promise<void> {
    this.abort.abort();
    this.listener = undefined;
    await this.running;
  }
}
