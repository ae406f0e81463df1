// The API source: ConfigMaps read through the cluster port (list + watch, the reflector's relist
// and backoff), so a `kubectl apply` reaches the agent in about a second instead of kubelet's
// 60-120 s volume refresh. ApiConfigSource is the machinery; which ConfigMap it reads is its
// choice: one by name (ConfigMapConfigSource, here), or the staged rollout's copies (staged.ts).
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
import type { GuardedImpact } from '../reload-guard.js';
import type { Logger } from '../../log.js';
import { DirectoryConfigSource } from './directory.js';
import { MAX_CONFIG_DIRECTORY_ENTRIES, MAX_CONFIG_SOURCE_BYTES, MAX_KEY_FILE_BYTES } from './directory-read.js';
import { keysFingerprint, sourceLabel } from './port.js';
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

/** What every source reading ConfigMaps through the API takes. */
export interface ApiSourceOptions {
  readonly client: ResourceClient<ConfigMap>;
  readonly namespace: string;
  readonly clock: Clock;
  readonly logger: Logger;
  /** A mounted copy of the ConfigMap, used until the ConfigMap is first read (only if it exists at start()). */
  readonly fallbackPath?: string;
  /**
   * Longest wait in start() for the ConfigMap (default 5 s for the first list; a staged source
   * waits for its stable copy, default 60 s); with a fallback, the first failure ends it too.
   */
  readonly startTimeoutMs?: number;
  /** The reflector's full relist period, a watchdog against a stalled watch (default 5 min, jittered). */
  readonly relistPeriodMs?: number;
  readonly random?: () => number;
}

export interface ConfigMapSourceOptions extends ApiSourceOptions {
  readonly name: string;
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

/**
 * Which ConfigMaps an API source lists and watches, and which of them is the source now: the one
 * thing the plain ConfigMap source and the staged source do differently.
 */
export interface ApiSourceChoice {
  /** What --config-source named (status().configured). */
  readonly configured: ConfigSourceRef;
  /**
   * The lists + watches, each of one name (a field selector: RBAC can then limit them to those
   * names); `resource` for logs.
   */
  readonly lists: readonly {
    readonly resource: string;
    readonly fieldSelector: string;
    readonly pageSize: number;
  }[];
  readonly defaultStartTimeoutMs: number;
  /**
   * true: start() waits for the chosen ConfigMap to exist, not only for the first list (when no
   * fallback directory serves meanwhile).
   */
  readonly waitForObject: boolean;
  /** true: an empty fallback directory (the mount of an optional ConfigMap not written yet) is none. */
  readonly emptyFallbackIsNone: boolean;
  /**
   * The name of the ConfigMap that is the source now, given the listed ones (after every change);
   * undefined: keep the one read last (the listed ones do not agree yet).
   */
  choose(get: (name: string) => ConfigMap | undefined): string | undefined;
  /** status().inUse while the ConfigMap `name` is read. */
  inUse(name: string): ConfigSourceRef;
  /** Why nothing can be read: the chosen ConfigMap (`label`) was listed and does not exist. */
  absent(label: string): string;
  /** Guarded impacts a live reload of this read of `name` applies anyway (the reload guard's --allow). */
  allows?(name: string, resourceVersion: string): readonly GuardedImpact[];
  /** What the status adds while the ConfigMap `name` is read. */
  status?(name: string): Partial<ConfigSourceStatus>;
}

/**
 * ConfigMaps through the API (a reflector), with the mounted directory as the start-up fallback:
 * the last chosen ConfigMap read is the source, through outages and deletions.
 */
export class ApiConfigSource implements ConfigSource {
  readonly fsWatchPath: string | undefined;
  private readonly reflectors: readonly Reflector<ConfigMap>[];
  private readonly fallback: DirectoryConfigSource | undefined;
  private readonly abort = new AbortController();
  private running: Promise<void> | undefined;
  private listener: SourceListener | undefined;
  /** Whether the fallback directory existed at start(): only then is it used. */
  private fallbackAvailable = false;
  private listed = false;
  private object: ApiSourceStatus['object'] = 'unknown';
  private since: number;
  /** The ConfigMap chosen last (the one whose absence the status and errors name). */
  private chosen: string;
  /** The chosen ConfigMap as last read while present: what a deletion or an outage keeps. */
  private last: { readonly name: string; readonly resourceVersion: string; readonly read: SourceRead } | undefined;
  private lastStatus: string | undefined;
  private lastReachable: boolean | undefined;
  /** Ends start()'s wait (the ConfigMap read, or the fallback directory can serve). */
  private endStartWait: (() => void) | undefined;

  constructor(
    private readonly options: ApiSourceOptions,
    private readonly choice: ApiSourceChoice,
  ) {
    const { namespace } = options;
    this.since = options.clock.now();
    this.chosen = choice.choose(() => undefined) ?? '';
    this.fallback = options.fallbackPath !== undefined ? new DirectoryConfigSource(options.fallbackPath) : undefined;
    this.fsWatchPath = options.fallbackPath;
    this.reflectors = choice.lists.map(
      ({ resource, fieldSelector, pageSize }) =>
        new Reflector<ConfigMap>({
          client: options.client,
          clock: options.clock,
          logger: options.logger,
          resource,
          namespace,
          fieldSelector,
          pageSize,
          relistPeriodMs: options.relistPeriodMs ?? DEFAULT_RELIST_MS,
          ...(options.random ? { random: options.random } : {}),
          onChange: () => {
            if (this.listed) this.observe();
          },
          onError: () => {
            this.statusMayHaveChanged();
          },
        }),
    );
  }

  private get(name: string): ConfigMap | undefined {
    for (const r of this.reflectors) {
      const object = r.get(name);
      if (object !== undefined) return object;
    }
    return undefined;
  }

  private get lastError(): string | undefined {
    return this.reflectors.map((r) => r.lastError).find((e) => e !== undefined);
  }

  /** True once a chosen ConfigMap was read: from then on it is the source, whatever happens to the API. */
  private get hasContent(): boolean {
    return this.last !== undefined;
  }

  private usingFallback(): boolean {
    return !this.hasContent && this.fallbackAvailable && this.fallback !== undefined;
  }

  /** After a change of the listed ConfigMaps: which one is the source, and its content. */
  private observe(): void {
    this.listed = true;
    const name = this.choice.choose((n) => this.get(n));
    // The listed ones do not agree yet: the last read stays, not what its ConfigMap holds now.
    if (name === undefined) {
      this.statusMayHaveChanged();
      return;
    }
    this.chosen = name;
    const current = this.get(name);
    const was = this.object;
    this.object = current !== undefined ? 'present' : this.hasContent ? 'deleted' : 'absent';
    if (this.object !== was) this.since = this.options.clock.now();
    if (current !== undefined) {
      const resourceVersion = current.metadata.resourceVersion ?? '';
      if (this.last?.name !== name || this.last.resourceVersion !== resourceVersion)
        this.last = { name, resourceVersion, read: readConfigMapObject(this.options.namespace, name, current) };
    }
    this.statusMayHaveChanged();
    // A deletion of the ConfigMap read is ignored: the last content stays, nothing to re-read.
    if (current !== undefined) this.listener?.changed('api');
  }

  private apiStatus(): ApiSourceStatus {
    const lastError = this.lastError;
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

  /** Why nothing was read from the API (yet). */
  private unreadReason(): string {
    const label = configMapLabel(this.options.namespace, this.chosen);
    const error = this.lastError;
    if (error !== undefined) return `cannot read ${label}: ${error}`;
    if (this.listed) return this.choice.absent(label);
    return `${label} was not listed yet`;
  }

  status(): ConfigSourceStatus {
    const fallback = this.usingFallback() ? this.fallback : undefined;
    const name = this.last?.name ?? this.chosen;
    return {
      configured: this.choice.configured,
      inUse: fallback !== undefined ? fallback.status().inUse : this.choice.inUse(name),
      ...(fallback !== undefined ? { fallbackReason: this.unreadReason() } : {}),
      api: this.apiStatus(),
      ...this.choice.status?.(name),
    };
  }

  /** Whether start() may return: something to serve, or nothing more worth waiting for. */
  private startCanEnd(): boolean {
    if (this.hasContent) return true;
    if (this.fallbackAvailable && (this.listed || this.lastError !== undefined)) return true;
    return this.listed && !this.choice.waitForObject;
  }

  /**
   * Tells the listener when the source in use, reachability, the object's state or what the
   * choice reports changed (not the error text alone).
   */
  private statusMayHaveChanged(): void {
    const reachable = this.apiStatus().reachable;
    if (this.lastReachable !== undefined && reachable !== this.lastReachable) this.since = this.options.clock.now();
    this.lastReachable = reachable;
    if (this.startCanEnd()) this.endStartWait?.();
    const s = this.status();
    const key = JSON.stringify([
      s.inUse,
      reachable,
      s.api?.object,
      this.choice.status?.(this.last?.name ?? this.chosen),
    ]);
    if (key === this.lastStatus) return;
    this.lastStatus = key;
    this.listener?.statusChanged?.(s);
  }

  /**
   * Starts the list + watch and waits for the first list (at most startTimeoutMs; with a fallback
   * directory, a first failure ends the wait too: the directory serves meanwhile; a choice that
   * waits for its object waits for it).
   */
  async start(listener: SourceListener): Promise<void> {
    if (this.running !== undefined) throw new Error(`${this.constructor.name}.start() can be called only once`);
    this.listener = listener;
    if (this.options.fallbackPath !== undefined) {
      this.fallbackAvailable = await stat(this.options.fallbackPath).then(
        (info) => info.isDirectory() || info.isFile(),
        () => false,
      );
      // kubelet mounts an optional ConfigMap that does not exist as an empty directory.
      if (this.fallbackAvailable && this.choice.emptyFallbackIsNone && this.fallback !== undefined) {
        const read = await this.fallback.read();
        this.fallbackAvailable = !read.ok || read.snapshot.entries.length > 0;
      }
    }
    const ended = new Promise<void>((resolve) => {
      this.endStartWait = resolve;
    });
    this.running = Promise.all(this.reflectors.map((r) => r.run(this.abort.signal))).then(() => undefined);
    // The choice is made once every list is in: one list alone may not show what the other says.
    void Promise.all(this.reflectors.map((r) => r.synced)).then(() => {
      this.observe();
    });
    const deadline = new AbortController();
    try {
      await Promise.race([
        ended,
        this.options.clock
          .sleep(
            this.options.startTimeoutMs ?? this.choice.defaultStartTimeoutMs,
            AbortSignal.any([deadline.signal, this.abort.signal]),
          )
          .catch(() => undefined),
      ]);
    } finally {
      deadline.abort();
      this.endStartWait = undefined;
    }
    this.statusMayHaveChanged();
  }

  probe(): Promise<string | undefined> {
    if (this.usingFallback() && this.fallback !== undefined) {
      return this.fallback.probe().then((p) => `fallback:${p}`);
    }
    return Promise.resolve(`${this.object}:${this.last?.name ?? ''}:${this.last?.resourceVersion ?? ''}`);
  }

  async read(): Promise<SourceRead> {
    if (this.last !== undefined) {
      const allows = this.choice.allows?.(this.last.name, this.last.resourceVersion) ?? [];
      return {
        ...this.last.read,
        ...(allows.length > 0 ? { guardAllows: allows } : {}),
        probe: (await this.probe()) ?? '',
      };
    }
    if (this.usingFallback() && this.fallback !== undefined) {
      const read = await this.fallback.read();
      return read.probe === undefined ? read : { ...read, probe: `fallback:${read.probe}` };
    }
    const reason = this.unreadReason();
    return {
      ok: false,
      fingerprint: `unreadable:${reason}`,
      error: new ConfigSourceError(sourceLabel(this.choice.configured), reason),
    };
  }

  async stop(): Promise<void> {
    this.abort.abort();
    this.listener = undefined;
    await this.running;
  }
}

/** One ConfigMap through the API, with the mounted directory as the start-up fallback. */
export class ConfigMapConfigSource extends ApiConfigSource {
  constructor(options: ConfigMapSourceOptions) {
    const { namespace, name } = options;
    const ref: ConfigSourceRef = { kind: 'configmap', namespace, name };
    super(options, {
      configured: ref,
      lists: [{ resource: `configmap ${namespace}/${name}`, fieldSelector: `metadata.name=${name}`, pageSize: 1 }],
      defaultStartTimeoutMs: DEFAULT_START_TIMEOUT_MS,
      waitForObject: false,
      emptyFallbackIsNone: false,
      choose: () => name,
      inUse: () => ref,
      absent: (label) => `${label} does not exist`,
    });
  }
}
