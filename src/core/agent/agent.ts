// The process-level agent (supervisor). It owns what outlives a sync-loop generation — the HTTP
// server, the admin endpoint, the metrics registry, the event recorder, the cleanup table, the
// config source and its watcher, the event stream — and the current generation. It starts and
// stops them; a reload is the reload machine's (reload-machine.ts), what observers read is the
// status view's (status-view.ts).
import { within } from '../clock.js';
import type { Clock } from '../clock.js';
import { parseConfigSnapshot } from '../config/decode/parse.js';
import type { ConfigSnapshot, LoadedConfig } from '../config/source/port.js';
import { DirectoryConfigSource } from '../config/source/directory.js';
import { sourceLabel } from '../config/source/port.js';
import type { ConfigSource, ConfigSourceStatus, SourceRead } from '../config/source/port.js';
import { ConfigMapConfigSource } from '../config/source/configmap-api.js';
import { StagedConfigSource } from '../config/source/staged.js';
import { InvalidConfigError, StartupError } from '../errors.js';
import type { ConfigIssue } from '../errors.js';
import type { Cluster } from '../kube/cluster.js';
import { EventRecorder } from '../kube/events.js';
import { countWatches, WatchCount } from '../kube/watch-count.js';
import { recordWrites, WriteLedger } from '../kube/write-ledger.js';
import type { Node } from '../kube/objects.js';
import type { Logger } from '../log.js';
import { createAgentMetrics } from '../metrics/agent-metrics.js';
import { nodeProcessHost } from '../process-host.js';
import type { ProcessHost } from '../process-host.js';
import type { AgentMetrics } from '../metrics/agent-metrics.js';
import { createReloadMetrics } from '../metrics/reload-metrics.js';
import type { ReloadMetrics } from '../metrics/reload-metrics.js';
import type { NodeVolumes } from '../node/volumes.js';
import type { VolumeCleaner } from '../cleanup/cleaner.js';
import type { JobsForbidden } from '../cleanup/job-lookup.js';
import { DeviceRulesState } from '../disk-rules/service.js';
import type { DeviceCarver, DeviceInventory, DiscoveryLinkWriter } from '../devices/ports.js';
import { CleanupTable } from '../cleanup/table.js';
import type { BackoffPolicy } from '../cleanup/table.js';
import { reportCleanupFailures } from '../cleanup/reclaim.js';
import { provisionerName } from '../pv/naming.js';
import type { NodeIdentity } from '../pv/naming.js';
import { errorMessage } from '../unknown-values.js';
import { adoptNodeVolumes } from './adoption.js';
import type { AdoptionResult } from './adoption.js';
import { ErrorsSinceApply } from './errors-since-apply.js';
import { DEFAULT_MIN_PASS_INTERVAL_MS, DEFAULT_MOUNT_GRACE_MS, Generation, nodeIdentity } from './generation.js';
import { ListHeadStart } from './list-head-start.js';
import { startHttpServer } from './http.js';
import type { RunningHttpServer } from './http.js';
import { startAdminServer } from './admin-server.js';
import type { RunningAdminServer } from './admin-server.js';
import { ConfigWatcher } from '../config/watcher.js';
import type { ChangeSource } from '../config/watcher.js';
import { detectSubPathMountOnHost } from '../config/subpath.js';
import type { ReloadGuardPolicy } from '../config/reload-guard.js';
import { DEFAULT_DRAIN_TIMEOUT_MS, ReloadMachine, recordApplied } from './reload-machine.js';
import type { ReloadHost } from './reload-machine.js';
import {
  AgentEventStream,
  appliedConfigJson,
  cleanupStatus,
  passEvent,
  readinessOf,
  statusJson,
  TeeLogger,
} from './status-view.js';
import type {
  AdminTarget,
  AgentEvent,
  AgentStatusJson,
  AppliedConfigJson,
  ReloadRequest,
  ReloadResult,
} from './reload-types.js';
import { RELOAD_OUTCOMES } from './reload-types.js';

export interface AgentOptions {
  /** The mounted config directory (or file): the source, or with `configMap` the start-up fallback. */
  readonly configPath: string;
  /**
   * Read the config from this ConfigMap through the API (--config-source configmap:NS/NAME), or
   * with `staged` from its staged rollout copies, the candidate while this node's wave is open
   * (--config-source staged:NS/NAME).
   */
  readonly configMap?: { readonly namespace: string; readonly name: string; readonly staged?: boolean };
  readonly nodeName: string;
  readonly namespace: string;
  readonly listenAddress: string;
  readonly metricsPath: string;
  readonly discoveryPeriodMs: number;
  readonly changePollMs: number;
  readonly createConcurrency: number;
  /** In-process cleanups running at once. */
  readonly cleanupConcurrency: number;
  /** Cap on per-volume usage series (--volume-stats-max-series; default 10,000). */
  readonly volumeStatsMaxSeries?: number;
  /** JOB_CONTAINER_IMAGE: the image of cleanup Jobs. */
  readonly jobImage: string | undefined;
  readonly cleanupBackoff?: BackoffPolicy;
  /** Longest wait for the old generation to stop on a reload (default 10 s). */
  readonly drainTimeoutMs?: number;
  /** --mount-grace-period: how long an entry that is not a mount point is pending before it is reported (default 10 s). */
  readonly mountGraceMs?: number;
  /** --min-pass-interval: the least time between passes while changes keep arriving (default 500 ms). */
  readonly minPassIntervalMs?: number;
  /** Longest wait for a new generation's caches to sync before rolling back (default 30 s). */
  readonly startTimeoutMs?: number;
  /** Agent version, for the status. */
  readonly version?: string;
  /** Unix socket of the admin endpoint; undefined: none. */
  readonly adminSocket?: string;
  /**
   * What a live reload does with a change that would orphan PVs or change their ownership and that
   * the request did not allow (docs/reload.md, "The reload guard"); default `refuse`.
   */
  readonly reloadGuard?: ReloadGuardPolicy;
  /**
   * Problems this deployment finds in a config on top of its own validation (the sandbox confines
   * its disks to its directory): an error rejects the config as invalid, at start and on a reload.
   */
  readonly configCheck?: (loaded: LoadedConfig) => readonly ConfigIssue[];
  /** Watch the config source and reload on change; undefined: reload only when asked. */
  readonly watch?: { readonly pollIntervalMs: number; readonly debounceMs: number; readonly useFsEvents?: boolean };
}

export interface AgentDeps {
  readonly cluster: Cluster;
  readonly volumes: NodeVolumes;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly cleaner: VolumeCleaner;
  readonly metrics?: AgentMetrics;
  /** The config source; default from the options (the directory, or the ConfigMap with the directory as fallback). */
  readonly configSource?: ConfigSource;
  /** The process (pid, CPU and memory, umask, kill); default the real one. */
  readonly host?: ProcessHost;
  /** Disks by rule: the node's block devices and the link writer; without them rules are not run. */
  readonly devices?: {
    readonly inventory: DeviceInventory & { changeStamp?(): Promise<string> };
    readonly links: DiscoveryLinkWriter;
    readonly carver?: DeviceCarver;
  };
}

async function fetchNode(cluster: Cluster, clock: Clock, logger: Logger, name: string): Promise<Node> {
  let last: unknown;
  for (let attempt = 1; attempt <= 3; attempt++) {
    try {
      return await cluster.nodes.get(name);
    } catch (err) {
      last = err;
      logger.log('warn', 'could not get the Node', { node: name, attempt, error: errorMessage(err) });
      if (attempt < 3) await clock.sleep(1000);
    }
  }
  throw new StartupError(`cannot get Node ${name}: ${errorMessage(last)}`);
}

export class Agent implements AdminTarget {
  private readonly stream = new AgentEventStream();
  private readonly logger: Logger;
  private readonly metrics: AgentMetrics;
  private readonly reloadMetrics: ReloadMetrics;
  private events!: EventRecorder;
  /** Error Events since the config serving now was applied (the status Lease's errors-since-apply). */
  private readonly errors = new ErrorsSinceApply();
  /** What the generations and the cleanup table record through: the recorder, counting errors. */
  private readonly errorEvents = this.errors.counting(() => this.events);
  private http: RunningHttpServer | undefined;
  private admin: RunningAdminServer | undefined;
  private watcher: ConfigWatcher | undefined;
  private readonly source: ConfigSource;
  private reloads!: ReloadMachine;
  /** Set once init() got as far as the event recorder. */
  private recording = false;
  private subPath = false;
  private current!: Generation;
  /** Since when a config change noticed by the watcher has been waiting for its decision. */
  private configChangeSince: number | undefined;
  private readonly host: ProcessHost;
  private node!: NodeIdentity;
  private generations = 0;
  /** A generation's lists, asked for ahead of it: with the Node at start-up, with a config change after. */
  private readonly headStart: ListHeadStart;
  /** Every PV write of this agent (the head start's lists must hold them all). */
  private readonly persistentVolumeWrites = new WriteLedger();
  private startedAt = 0;
  /** The source status last reported (log, metric, Node event once per change). */
  private sourceReported: ConfigSourceStatus | undefined;
  readonly cleanups: CleanupTable;
  /** Since when each PV's disk has been missing (volume health): the process's, across reloads. */
  private readonly missingSince = new Map<string, number>();
  private readonly jobsForbidden: JobsForbidden = { since: undefined, logged: false };
  private readonly deviceRulesState = new DeviceRulesState();
  adopted = 0;

  private readonly deps: AgentDeps;
  /** The API watches open: constant across reloads (a generation's reflectors stop with it). */
  private readonly watchCount = new WatchCount();

  private constructor(
    private readonly options: AgentOptions,
    given: AgentDeps,
  ) {
    const counted = countWatches(given.cluster, this.watchCount);
    const cluster = {
      ...counted,
      persistentVolumes: recordWrites(counted.persistentVolumes, this.persistentVolumeWrites),
    };
    const deps = { ...given, cluster };
    this.deps = deps;
    this.logger = new TeeLogger(deps.logger, this.stream, deps.clock);
    this.headStart = new ListHeadStart({
      cluster,
      clock: deps.clock,
      logger: this.logger,
      writes: this.persistentVolumeWrites,
      nodeName: options.nodeName,
    });
    this.host = deps.host ?? nodeProcessHost;
    this.metrics =
      deps.metrics ??
      createAgentMetrics(undefined, {
        host: this.host,
        ...(options.volumeStatsMaxSeries !== undefined ? { volumeSeriesLimit: options.volumeStatsMaxSeries } : {}),
      });
    this.metrics.nodeName = () => options.nodeName;
    this.reloadMetrics = createReloadMetrics(this.metrics.registry, RELOAD_OUTCOMES);
    this.metrics.registry.gauge(
      'local_volume_provisioner_api_watches',
      'API watches open now (the reflectors of the serving generation and the ConfigMap source).',
      [],
      (g) => {
        g.set({}, this.watchCount.open);
      },
    );
    this.source = deps.configSource ?? this.defaultSource();
    this.cleanups = new CleanupTable({
      cleaner: deps.cleaner,
      volumes: deps.volumes,
      clock: deps.clock,
      logger: this.logger,
      concurrency: options.cleanupConcurrency,
      ...(options.cleanupBackoff ? { backoff: options.cleanupBackoff } : {}),
      onChange: (entry) => {
        reportCleanupFailures({ events: this.errorEvents, metrics: this.metrics })(entry);
        this.stream.emit({
          type: 'cleanup',
          at: deps.clock.now(),
          cleanup: cleanupStatus(entry),
          errorsSinceApply: this.errors.count,
        });
        // A finished cleanup wakes the generation serving now, whichever started it.
        if (entry.state === 'succeeded' || entry.state === 'failed') this.current.trigger();
      },
    });
    this.metrics.managedPersistentVolumes = () => (this.generations > 0 ? this.current.persistentVolumes.list() : []);
    this.metrics.cleanupStats = () => ({
      running: this.cleanups.count('running'),
      succeeded: this.cleanups.succeededTotal,
      failed: this.cleanups.failedTotal,
    });
  }

  /** The directory, or the ConfigMap (or its staged copies) with the directory as the start-up fallback. */
  private defaultSource(): ConfigSource {
    const { options, deps } = this;
    if (options.configMap === undefined) return new DirectoryConfigSource(options.configPath);
    const api = {
      client: deps.cluster.configMaps,
      namespace: options.configMap.namespace,
      name: options.configMap.name,
      fallbackPath: options.configPath,
      clock: deps.clock,
      logger: this.logger,
    };
    return options.configMap.staged === true
      ? new StagedConfigSource({ ...api, nodeName: options.nodeName })
      : new ConfigMapConfigSource(api);
  }

  /** Loads the config (invalid at start-up: the typed error, exit non-zero), starts everything, returns once serving. */
  static async start(options: AgentOptions, deps: AgentDeps): Promise<Agent> {
    const agent = new Agent(options, deps);
    try {
      await agent.init();
    } catch (err) {
      // Whatever started before the failure is stopped: a failed start leaves nothing running.
      await agent.watcher?.stop();
      await agent.source.stop();
      await agent.admin?.close();
      if (agent.generations > 0) await agent.current.stop();
      await agent.http?.close();
      throw err;
    }
    return agent;
  }

  /** Validates one read of the config source, then applies options.configCheck. */
  private parseChecked(snapshot: ConfigSnapshot): LoadedConfig {
    const loaded = parseConfigSnapshot(snapshot);
    const extra = this.options.configCheck?.(loaded) ?? [];
    if (extra.length === 0) return loaded;
    const issues = [...loaded.warnings, ...extra];
    if (extra.some((i) => i.severity === 'error')) throw new InvalidConfigError(loaded.source.path, issues);
    return { ...loaded, warnings: issues };
  }

  private async init(): Promise<void> {
    const { deps, options } = this;
    // Start-up round trips overlap where nothing orders them: the Node is fetched while the config
    // is read (an invalid config still fails start-up first).
    const nodeFetch = fetchNode(deps.cluster, deps.clock, this.logger, options.nodeName);
    nodeFetch.catch(() => undefined);
    this.headStart.request();
    const loaded = await this.readFirstConfig();
    this.identifyNode(await nodeFetch);
    const adoptionScan = this.startAdoptionScan();
    this.startRecording(loaded);
    const http = await this.listen();
    this.startedAt = deps.clock.now();
    this.current = this.newGeneration(loaded);
    this.reloads = this.reloadMachine(loaded);
    // Bound before the generation starts, like the listen address: a taken socket fails start-up at
    // once, before any volume is published.
    if (options.adminSocket !== undefined) this.admin = await this.startAdmin(options.adminSocket);
    this.current.start();
    const adoption = await adoptionScan;
    this.adopted = adoption.adopted.length;
    recordApplied(this.reloadMetrics, this.current.number, loaded.hash);
    if (this.source.status().inUse.kind === 'directory') await this.checkSubPathMount();
    this.watcher?.resume();
    this.logger.log('info', 'agent started', {
      node: this.node.name,
      config: loaded.hash,
      source: sourceLabel(this.source.status().inUse),
      classes: Object.keys(loaded.config.storageClassMap).length,
      listen: `${http.host}:${String(http.port)}`,
      adoptionScan: { scanned: adoption.scanned, pages: adoption.pages, adopted: adoption.adopted.length },
    });
  }

  /**
   * Starts the config source and reads it once: with a watcher, its first read (its checks wait
   * until the agent serves, so a change meanwhile is checked then); without, one read here.
   */
  private async readFirstConfig(): Promise<LoadedConfig> {
    await this.source.start({
      changed: (by) => {
        this.watcher?.request(by);
      },
      statusChanged: (status) => {
        this.reportSource(status);
      },
    });
    this.reportSource(this.source.status());
    if (this.options.watch) this.watcher = this.configWatcher(this.options.watch);
    const read = this.watcher ? await this.watcher.start() : await this.source.read();
    if (read === undefined) throw new StartupError('stopped while reading the config');
    if (!read.ok) throw read.error;
    const loaded = this.parseChecked(read.snapshot);
    for (const w of loaded.warnings) this.logger.log('warn', 'config warning', { path: w.path, detail: w.message });
    return loaded;
  }

  private identifyNode(nodeObject: Node): void {
    this.node = nodeIdentity(nodeObject);
    if (nodeObject.metadata.labels?.['kubernetes.io/hostname'] === undefined) {
      this.logger.log('warn', 'the Node has no kubernetes.io/hostname label; PV node affinity uses the node name', {
        node: this.node.name,
      });
    }
  }

  /**
   * The adoption scan runs beside the generation's first lists and pass: a PV it labels enters
   * the generation's node-scoped watch as ADDED, and a pass that meets one not labelled yet
   * adopts it itself (create → AlreadyExists → adoptNodeVolume). Start-up still fails if it does.
   */
  private startAdoptionScan(): Promise<AdoptionResult> {
    const adoptionScan = adoptNodeVolumes(
      { cluster: this.deps.cluster, logger: this.logger, metrics: this.metrics },
      this.node,
    ).catch((err: unknown) => {
      // Typically upstream's ClusterRole still in place (no list/patch of PVs): say what to grant.
      throw new StartupError(
        `cannot label the PersistentVolumes of this node that upstream created (needs list and patch on persistentvolumes): ${errorMessage(err)}`,
      );
    });
    adoptionScan.catch(() => undefined);
    return adoptionScan;
  }

  private startRecording(loaded: LoadedConfig): void {
    const { deps } = this;
    this.events = new EventRecorder({
      cluster: deps.cluster,
      clock: deps.clock,
      logger: this.logger,
      component: provisionerName(this.node, loaded.config.useNodeNameOnly),
      host: this.node.name,
      dropped: this.metrics.eventsDropped,
    });
    this.recording = true;
  }

  /** The metrics and health endpoint. */
  private async listen(): Promise<RunningHttpServer> {
    const { options } = this;
    try {
      this.http = await startHttpServer({
        listenAddress: options.listenAddress,
        metricsPath: options.metricsPath,
        metrics: () => this.metrics.registry.render(),
        live: () => ({ ok: true, reason: '' }),
        ready: () => this.readiness(),
      });
    } catch (err) {
      throw new StartupError(`cannot listen on ${options.listenAddress}: ${errorMessage(err)}`);
    }
    return this.http;
  }

  private reloadMachine(loaded: LoadedConfig): ReloadMachine {
    const { deps, options } = this;
    return new ReloadMachine({
      host: this.reloadHost(),
      clock: deps.clock,
      logger: this.logger,
      metrics: this.reloadMetrics,
      applied: loaded,
      staged: this.source.status().configured.kind === 'staged',
      ...(options.reloadGuard !== undefined ? { reloadGuard: options.reloadGuard } : {}),
      ...(options.drainTimeoutMs !== undefined ? { drainTimeoutMs: options.drainTimeoutMs } : {}),
      ...(options.startTimeoutMs !== undefined ? { startTimeoutMs: options.startTimeoutMs } : {}),
    });
  }

  private startAdmin(socketPath: string): Promise<RunningAdminServer> {
    return startAdminServer({
      socketPath,
      target: this,
      logger: this.logger,
      host: this.host,
    });
  }

  /** A config directory mounted with subPath never sees kubelet's updates: say so. */
  private async checkSubPathMount(): Promise<void> {
    const subPath = await detectSubPathMountOnHost(this.options.configPath);
    this.subPath = subPath.subPath;
    if (subPath.subPath)
      this.logger.log('warn', 'hot reload impossible: the config is a subPath mount', { detail: subPath.reason });
  }

  private newGeneration(loaded: LoadedConfig): Generation {
    this.generations += 1;
    // A start, an applied reload or a rollback: errors count from here for another config.
    this.errors.applying(loaded.hash);
    return new Generation(
      this.generations,
      loaded.config,
      loaded.hash,
      this.node,
      {
        cluster: this.deps.cluster,
        volumes: this.deps.volumes,
        clock: this.deps.clock,
        logger: this.logger,
        metrics: this.metrics,
        events: this.errorEvents,
        table: this.cleanups,
        missingSince: this.missingSince,
        jobsForbidden: this.jobsForbidden,
        ...(this.deps.devices !== undefined
          ? { deviceRules: { ...this.deps.devices, state: this.deviceRulesState } }
          : {}),
        host: this.host,
        publishHeld: () => this.publishHeld(),
        onPass: (generation, pass) => {
          const pvs = this.stream.listening && this.generations > 0 ? this.current.persistentVolumes.list() : undefined;
          this.stream.emit(passEvent(generation, loaded.hash, pass, this.errors.count, pvs));
        },
      },
      {
        discoveryPeriodMs: this.options.discoveryPeriodMs,
        changePollMs: this.options.changePollMs,
        mountGraceMs: this.options.mountGraceMs ?? DEFAULT_MOUNT_GRACE_MS,
        minPassIntervalMs: this.options.minPassIntervalMs ?? DEFAULT_MIN_PASS_INTERVAL_MS,
        createConcurrency: this.options.createConcurrency,
        namespace: this.options.namespace,
        jobImage: this.options.jobImage,
      },
      // Only if nothing was written since it was asked for; nothing keeps it after (its pages).
      this.headStart.take(),
    );
  }

  /** The watcher of the config source: each change it reads goes to the reload machine; its activity holds new PVs. */
  private configWatcher(watch: NonNullable<AgentOptions['watch']>): ConfigWatcher {
    return new ConfigWatcher({
      source: this.source,
      pollIntervalMs: watch.pollIntervalMs,
      debounceMs: watch.debounceMs,
      ...(watch.useFsEvents !== undefined ? { useFsEvents: watch.useFsEvents } : {}),
      deferChecks: true,
      clock: this.deps.clock,
      logger: this.logger,
      onActivity: (active, cause) => {
        this.noteConfigActivity(active, cause);
      },
      onChange: async (source, _fingerprint, read) => {
        await this.reloads.request(
          { trigger: source, ...(read.guardAllows !== undefined ? { allow: read.guardAllows } : {}) },
          read,
        );
      },
    });
  }

  /** A config change noticed (held) or decided (released: a pass publishes what was held under what serves now). */
  private noteConfigActivity(active: boolean, cause: ChangeSource | undefined): void {
    if (active) {
      // The new generation's lists load while the change is debounced, read and validated. Only for
      // kubelet's swap of the mounted ConfigMap (it swaps only changed data): a staged rollout's
      // state writes reach every agent as API events, and most decide nothing to apply.
      if (this.configChangeSince === undefined && this.generations > 0 && cause === 'fs') this.headStart.request();
      this.configChangeSince ??= this.deps.clock.now();
      return;
    }
    this.headStart.drop();
    const wasHeld = this.configChangeSince !== undefined;
    this.configChangeSince = undefined;
    if (wasHeld && this.generations > 0) this.current.trigger();
  }

  /** New PVs wait while a config change is decided, at most PUBLISH_HOLD_MAX_MS (a reload that hangs never stops publishing). */
  private publishHeld(): boolean {
    const since = this.configChangeSince;
    return since !== undefined && this.deps.clock.now() - since < PUBLISH_HOLD_MAX_MS;
  }

  /** What the reload machine drives: the source, the generations, the Node and its events. */
  private reloadHost(): ReloadHost {
    return {
      read: async (): Promise<SourceRead> => {
        const read = await this.source.read();
        this.watcher?.acknowledge(read.fingerprint);
        return read;
      },
      sourceLabel: () => sourceLabel(this.source.status().inUse),
      parse: (snapshot) => this.parseChecked(snapshot),
      refreshNode: async () => {
        try {
          this.node = nodeIdentity(await this.deps.cluster.nodes.get(this.options.nodeName));
        } catch (err) {
          this.logger.log('warn', 'could not re-read the Node; keeping its last known labels', {
            error: errorMessage(err),
          });
        }
      },
      current: () => this.current,
      launch: (loaded) => {
        const next = this.newGeneration(loaded);
        this.current = next;
        next.start();
        return next;
      },
      nodeEvent: (type, reason, message) => {
        this.events.record(this.nodeRef(), type, reason, message);
      },
      finished: (result) => {
        this.stream.emit({ type: 'reload', at: this.deps.clock.now(), result });
      },
    };
  }

  get generation(): Generation {
    return this.current;
  }

  /** API watches open now (tests, the api_watches metric). */
  get apiWatches(): number {
    return this.watchCount.open;
  }

  readiness(): { ok: boolean; reason: string } {
    return readinessOf(this.current.status());
  }

  /**
   * Reloads the config. One reload runs at a time; requests arriving meanwhile coalesce into a
   * single pending one (latest content wins, `force` if any asked for it), whose result they all get.
   */
  reload(request: ReloadRequest): Promise<ReloadResult> {
    return this.reloads.request(request, undefined);
  }

  private nodeRef(): { apiVersion: 'v1'; kind: 'Node'; name: string; uid: string } {
    return { apiVersion: 'v1', kind: 'Node', name: this.node.name, uid: this.node.uid };
  }

  // ---- the config source ------------------------------------------------------------------------

  /**
   * A change of the source's state: a log line, the metric, and (once the agent records events)
   * a Node event when the ConfigMap is deleted or back. Nothing else: the running config stays.
   */
  private reportSource(status: ConfigSourceStatus): void {
    const before = this.sourceReported;
    this.sourceReported = status;
    const state = sourceState(status);
    const m = this.reloadMetrics;
    for (const s of SOURCE_STATES)
      m.configSourceState.set({ kind: status.configured.kind, state: s }, s === state ? 1 : 0);
    if (before === undefined || sourceState(before) === state) return;
    const label = sourceLabel(status.configured);
    const fields = {
      source: label,
      inUse: sourceLabel(status.inUse),
      ...(status.api?.lastError !== undefined ? { error: status.api.lastError } : {}),
      ...(status.fallbackReason !== undefined ? { reason: status.fallbackReason } : {}),
    };
    switch (state) {
      case 'unreachable':
        this.logger.log('warn', 'config source unreachable: the last good config stays', fields);
        break;
      case 'deleted':
        this.logger.log('warn', 'the ConfigMap of the config was deleted: ignored, the running config stays', fields);
        if (this.recording)
          this.events.record(
            this.nodeRef(),
            'Warning',
            'ConfigSourceDeleted',
            `${label} was deleted; ignored: config ${this.reloads.applied.hash} stays applied`,
          );
        break;
      case 'fallback':
        this.logger.log('warn', 'config source not readable: the mounted directory is used until it is', fields);
        break;
      case 'ok':
        this.logger.log('info', 'config source readable again', fields);
        if (before.api?.object === 'deleted' && this.recording)
          this.events.record(this.nodeRef(), 'Normal', 'ConfigSourceRestored', `${label} exists again`);
        break;
    }
  }

  // ---- admin target (the status view) -----------------------------------------------------------

  subscribe(listener: (event: AgentEvent) => void): () => void {
    return this.stream.subscribe(listener);
  }

  appliedConfig(): AppliedConfigJson {
    return appliedConfigJson(this.reloads.applied, this.current.number);
  }

  status(): AgentStatusJson {
    const { reloads } = this;
    return statusJson({
      node: this.node.name,
      version: this.options.version ?? 'dev',
      startedAt: this.startedAt,
      now: this.deps.clock.now(),
      generation: this.current.status(),
      persistentVolumes: this.current.persistentVolumes.list(),
      applied: reloads.applied,
      onDiskHash: reloads.onDiskHash,
      subPath: this.subPath,
      source: this.source.status(),
      lastReload: reloads.lastReload,
      rejected: reloads.rejected,
      reloadPending: reloads.pending,
      errorsSinceApply: this.errors.count,
      cleanups: this.cleanups.list(),
      host: this.host,
    });
  }

  // ---- lifecycle ------------------------------------------------------------------------------

  /**
   * Graceful stop: a reload in progress gives up at its next step (it never starts a generation
   * once stopping); then the current generation, cleanups and servers stop. Nothing runs after.
   */
  async stop(): Promise<void> {
    this.reloads.halt();
    await this.watcher?.stop();
    await this.source.stop();
    const pending = this.reloads.inFlight();
    if (pending) await within(this.deps.clock, pending, this.options.drainTimeoutMs ?? DEFAULT_DRAIN_TIMEOUT_MS);
    // Whatever is current now: a reload that gave up left either the old or an unsynced new one.
    await this.current.stop();
    await this.cleanups.stop();
    await this.admin?.close();
    await this.events.flush();
    await this.http?.close();
    this.stream.clear();
    this.deps.logger.log('info', 'agent stopped', { generations: this.generations });
  }
}

/** The states of the config_source_state metric. */
const SOURCE_STATES = ['ok', 'unreachable', 'deleted', 'fallback'] as const;

/**
 * The longest new PVs wait for a config change to be decided: the reload's drain deadline (a
 * debounce, a read and a reload take well under a second; past this, the change is stuck and
 * publishing goes on under the running config).
 */
export const PUBLISH_HOLD_MAX_MS = DEFAULT_DRAIN_TIMEOUT_MS;

/** One word for a source status: the metric's state label. */
function sourceState(status: ConfigSourceStatus): (typeof SOURCE_STATES)[number] {
  if (status.fallbackReason !== undefined) return 'fallback';
  if (status.api === undefined) return 'ok';
  if (!status.api.reachable) return 'unreachable';
  if (status.api.object === 'deleted') return 'deleted';
  return 'ok';
}
