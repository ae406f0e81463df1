// The process-level agent (supervisor). It owns what outlives a sync-loop generation — the HTTP
// server, the metrics registry, the event recorder, the cleanup table, the event stream — and the
// current generation. A reload reads and validates the config, stops the current generation
// within a drain deadline, starts the next one, and commits when its caches have synced; if the
// new generation cannot start, the last good config is started again (rollback).
import { within } from '../clock.js';
import type { Clock } from '../clock.js';
import { diffConfigs } from '../config/diff.js';
import { parseConfigSnapshot } from '../config/source.js';
import type { ConfigSnapshot, LoadedConfig } from '../config/source.js';
import type { ProvisionerConfig } from '../config/model.js';
import { DirectoryConfigSource, sourceLabel } from '../config/config-source.js';
import type { ConfigSource, ConfigSourceStatus, SourceRead } from '../config/config-source.js';
import { ConfigMapConfigSource } from '../config/configmap-source.js';
import { ConfigSourceError, InvalidConfigError, StartupError } from '../errors.js';
import type { ConfigIssue } from '../errors.js';
import type { Cluster } from '../kube/cluster.js';
import { EventRecorder } from '../kube/events.js';
import type { Node } from '../kube/objects.js';
import type { LogFields, Logger, LogLevel } from '../log.js';
import { createAgentMetrics } from '../metrics/agent-metrics.js';
import type { AgentMetrics } from '../metrics/agent-metrics.js';
import { createReloadMetrics, hash48 } from '../metrics/reload-metrics.js';
import type { ReloadMetrics } from '../metrics/reload-metrics.js';
import type { NodeVolumes } from '../node/volumes.js';
import type { VolumeCleaner } from '../cleanup/cleaner.js';
import { CleanupTable } from '../cleanup/table.js';
import type { BackoffPolicy, CleanupEntry } from '../cleanup/table.js';
import { reportCleanupFailures } from '../cleanup/reclaim.js';
import { provisionerName } from '../pv/naming.js';
import type { NodeIdentity } from '../pv/naming.js';
import { adoptNodeVolumes } from './adoption.js';
import { Generation, nodeIdentity } from './generation.js';
import type { GenerationSettings, PassSummary } from './generation.js';
import { startHttpServer } from './http.js';
import { startAdminServer } from './admin-server.js';
import type { RunningAdminServer } from './admin-server.js';
import { ConfigWatcher } from '../config/watcher.js';
import { detectSubPathMountOnHost } from '../config/subpath.js';
import { allowCommand, DEFAULT_RELOAD_GUARD_POLICY, guardReload } from '../config/reload-guard.js';
import type { GuardedImpact, GuardVerdict, ReloadGuardPolicy } from '../config/reload-guard.js';
import type { RunningHttpServer } from './http.js';
import type {
  AdminTarget,
  AgentEvent,
  AgentStatusJson,
  AppliedConfigJson,
  CleanupStatus,
  ClassStatus,
  ReloadOutcome,
  ReloadRequest,
  ReloadResult,
} from './reload-types.js';

export interface AgentOptions {
  /** The mounted config directory (or file): the source, or with `configMap` the start-up fallback. */
  readonly configPath: string;
  /** Read the config from this ConfigMap through the API (--config-source configmap:NS/NAME). */
  readonly configMap?: { readonly namespace: string; readonly name: string };
  readonly nodeName: string;
  readonly namespace: string;
  readonly listenAddress: string;
  readonly metricsPath: string;
  readonly discoveryPeriodMs: number;
  readonly changePollMs: number;
  readonly createConcurrency: number;
  /** In-process cleanups running at once. */
  readonly cleanupConcurrency: number;
  /** JOB_CONTAINER_IMAGE: the image of cleanup Jobs. */
  readonly jobImage: string | undefined;
  readonly cleanupBackoff?: BackoffPolicy;
  /** Longest wait for the old generation to stop on a reload (default 10 s). */
  readonly drainTimeoutMs?: number;
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
  readonly configCheck?: (config: ProvisionerConfig) => readonly ConfigIssue[];
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
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Forwards records to the real logger and to the agent's event stream. */
class TeeLogger implements Logger {
  constructor(
    private readonly inner: Logger,
    private readonly emit: (event: AgentEvent) => void,
    private readonly clock: Clock,
  ) {}
  log(level: LogLevel, text: string, fields: LogFields = {}): void {
    this.inner.log(level, text, fields);
    if (level !== 'debug') this.emit({ type: 'log', at: this.clock.now(), level, message: text, fields });
  }
}

async function fetchNode(cluster: Cluster, clock: Clock, logger: Logger, name: string): Promise<Node> {
  let last: unknown;
  for (let attempt = 1; attempt <= 3; attempt++) {
    try {
      return await cluster.nodes.get(name);
    } catch (err) {
      last = err;
      logger.log('warn', 'could not get the Node', { node: name, attempt, error: message(err) });
      if (attempt < 3) await clock.sleep(1000);
    }
  }
  throw new StartupError(`cannot get Node ${name}: ${message(last)}`);
}

/** What the guard found, for the result, the log and the Node event. */
function guardReason(verdict: Exclude<GuardVerdict, { verdict: 'apply' }>): string {
  const what = verdict.needs
    .map((impact) => {
      const paths = verdict.guarded.filter((c) => c.impact === impact).map((c) => c.path);
      const effect = impact === 'orphans-pvs' ? 'would orphan existing PVs' : 'would change which PVs the agent owns';
      return `${effect} (${paths.join(', ')})`;
    })
    .join('; ');
  return `a live reload that ${what}`;
}

export class Agent implements AdminTarget {
  private readonly listeners = new Set<(event: AgentEvent) => void>();
  private readonly logger: Logger;
  private readonly metrics: AgentMetrics;
  private readonly reloadMetrics: ReloadMetrics;
  private events!: EventRecorder;
  private http: RunningHttpServer | undefined;
  private admin: RunningAdminServer | undefined;
  private watcher: ConfigWatcher | undefined;
  private readonly source: ConfigSource;
  /** Set once init() got as far as the event recorder. */
  private recording = false;
  private subPath = false;
  private current!: Generation;
  private applied!: LoadedConfig;
  private node!: NodeIdentity;
  private generations = 0;
  private startedAt = 0;
  private onDiskHash: string | undefined;
  private lastReload: ReloadResult | undefined;
  private rejected: ReloadResult | undefined;
  /** The candidate hash last refused by the reload guard: its Node event is sent once. */
  private refusedHash: string | undefined;
  private running: Promise<ReloadResult> | undefined;
  private queued: (ReloadAsk & { promise: Promise<ReloadResult> }) | undefined;
  /** The source status last reported (log, metric, Node event once per change). */
  private sourceReported: ConfigSourceStatus | undefined;
  private stopping = false;
  /** Aborted by stop(): a reload waiting on a drain or a sync gives up at once. */
  private readonly stopped = new AbortController();
  readonly cleanups: CleanupTable;
  adopted = 0;

  private constructor(
    private readonly options: AgentOptions,
    private readonly deps: AgentDeps,
  ) {
    this.logger = new TeeLogger(
      deps.logger,
      (e) => {
        this.emit(e);
      },
      deps.clock,
    );
    this.metrics = deps.metrics ?? createAgentMetrics();
    this.reloadMetrics = createReloadMetrics(this.metrics.registry);
    this.source =
      deps.configSource ??
      (options.configMap !== undefined
        ? new ConfigMapConfigSource({
            client: deps.cluster.configMaps,
            namespace: options.configMap.namespace,
            name: options.configMap.name,
            fallbackPath: options.configPath,
            clock: deps.clock,
            logger: this.logger,
          })
        : new DirectoryConfigSource(options.configPath));
    const reportFailures = (entry: CleanupEntry): void => {
      reportCleanupFailures({ events: this.events, metrics: this.metrics })(entry);
    };
    this.cleanups = new CleanupTable({
      cleaner: deps.cleaner,
      clock: deps.clock,
      logger: this.logger,
      concurrency: options.cleanupConcurrency,
      ...(options.cleanupBackoff ? { backoff: options.cleanupBackoff } : {}),
      onChange: (entry) => {
        reportFailures(entry);
        this.emit({ type: 'cleanup', at: deps.clock.now(), cleanup: cleanupStatus(entry) });
        // A finished cleanup wakes the generation serving now, whichever started it.
        if (entry.state === 'succeeded' || entry.state === 'failed') this.current.trigger();
      },
    });
    this.metrics.cleanupStats = () => ({
      running: this.cleanups.count('running'),
      succeeded: this.cleanups.succeededTotal,
      failed: this.cleanups.failedTotal,
    });
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
    const extra = this.options.configCheck?.(loaded.config) ?? [];
    if (extra.length === 0) return loaded;
    const issues = [...loaded.warnings, ...extra];
    if (extra.some((i) => i.severity === 'error')) throw new InvalidConfigError(loaded.source.path, issues);
    return { ...loaded, warnings: issues };
  }

  private async init(): Promise<void> {
    const { deps, options } = this;
    await this.source.start({
      changed: (by) => {
        this.watcher?.request(by);
      },
      statusChanged: (status) => {
        this.reportSource(status);
      },
    });
    this.reportSource(this.source.status());
    // The source is read once: with a watcher, its first read (its checks wait until the agent
    // serves, so a change meanwhile is checked then); without, one read here.
    if (options.watch) {
      this.watcher = new ConfigWatcher({
        source: this.source,
        pollIntervalMs: options.watch.pollIntervalMs,
        debounceMs: options.watch.debounceMs,
        ...(options.watch.useFsEvents !== undefined ? { useFsEvents: options.watch.useFsEvents } : {}),
        deferChecks: true,
        clock: deps.clock,
        logger: this.logger,
        onChange: async (source, _fingerprint, read) => {
          await this.reloadWith({ trigger: source }, read);
        },
      });
    }
    const read = this.watcher ? await this.watcher.start() : await this.source.read();
    if (read === undefined) throw new StartupError('stopped while reading the config');
    if (!read.ok) throw read.error;
    const loaded = this.parseChecked(read.snapshot);
    for (const w of loaded.warnings) this.logger.log('warn', 'config warning', { path: w.path, detail: w.message });
    const nodeObject = await fetchNode(deps.cluster, deps.clock, this.logger, options.nodeName);
    this.node = nodeIdentity(nodeObject);
    if (nodeObject.metadata.labels?.['kubernetes.io/hostname'] === undefined) {
      this.logger.log('warn', 'the Node has no kubernetes.io/hostname label; PV node affinity uses the node name', {
        node: this.node.name,
      });
    }
    let adoption: Awaited<ReturnType<typeof adoptNodeVolumes>>;
    try {
      adoption = await adoptNodeVolumes(
        { cluster: deps.cluster, logger: this.logger, metrics: this.metrics },
        this.node,
      );
    } catch (err) {
      // Typically upstream's ClusterRole still in place (no list/patch of PVs): say what to grant.
      throw new StartupError(
        `cannot label the PersistentVolumes of this node that upstream created (needs list and patch on persistentvolumes): ${message(err)}`,
      );
    }
    this.adopted = adoption.adopted.length;
    this.events = new EventRecorder({
      cluster: deps.cluster,
      clock: deps.clock,
      logger: this.logger,
      component: provisionerName(this.node, loaded.config.useNodeNameOnly),
      host: this.node.name,
      dropped: this.metrics.eventsDropped,
    });
    this.recording = true;
    try {
      this.http = await startHttpServer({
        listenAddress: options.listenAddress,
        metricsPath: options.metricsPath,
        metrics: () => this.metrics.registry.render(),
        live: () => ({ ok: true, reason: '' }),
        ready: () => this.readiness(),
      });
    } catch (err) {
      throw new StartupError(`cannot listen on ${options.listenAddress}: ${message(err)}`);
    }
    this.startedAt = deps.clock.now();
    this.applied = loaded;
    this.onDiskHash = loaded.hash;
    this.current = this.newGeneration(loaded);
    // Bound before the generation starts, like the listen address: a taken socket fails start-up at
    // once, before any volume is published.
    if (options.adminSocket !== undefined) {
      this.admin = await startAdminServer({ socketPath: options.adminSocket, target: this, logger: this.logger });
    }
    this.current.start();
    this.recordApplied();
    if (this.source.status().inUse.kind === 'directory') {
      const subPath = await detectSubPathMountOnHost(options.configPath);
      this.subPath = subPath.subPath;
      if (subPath.subPath)
        this.logger.log('warn', 'hot reload impossible: the config is a subPath mount', { detail: subPath.reason });
    }
    this.watcher?.resume();
    this.logger.log('info', 'agent started', {
      node: this.node.name,
      config: loaded.hash,
      source: sourceLabel(this.source.status().inUse),
      classes: Object.keys(loaded.config.storageClassMap).length,
      listen: `${this.http.host}:${String(this.http.port)}`,
      adoptionScan: { scanned: adoption.scanned, pages: adoption.pages, adopted: adoption.adopted.length },
    });
  }

  private settings(): GenerationSettings {
    return {
      discoveryPeriodMs: this.options.discoveryPeriodMs,
      changePollMs: this.options.changePollMs,
      createConcurrency: this.options.createConcurrency,
      namespace: this.options.namespace,
      jobImage: this.options.jobImage,
    };
  }

  private newGeneration(loaded: LoadedConfig): Generation {
    this.generations += 1;
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
        events: this.events,
        table: this.cleanups,
        onPass: (generation, pass) => {
          this.emitPass(generation, pass);
        },
      },
      this.settings(),
    );
  }

  private emitPass(generation: number, pass: PassSummary): void {
    this.emit({
      type: 'pass',
      at: pass.at,
      generation,
      created: pass.created,
      deleted: pass.reclaim.deleted,
      skipped: pass.skipped.length,
    });
  }

  private recordApplied(): void {
    const m = this.reloadMetrics;
    m.generation.set({}, this.current.number);
    m.configHash.set({}, hash48(this.applied.hash));
    m.configInfo.reset();
    m.configInfo.set({ hash: this.applied.hash, generation: String(this.current.number) }, 1);
  }

  get generation(): Generation {
    return this.current;
  }

  get httpPort(): number {
    return this.http?.port ?? 0;
  }

  readiness(): { ok: boolean; reason: string } {
    const s = this.current.status();
    if (!s.synced) return { ok: false, reason: 'caches not synced' };
    if (!s.ready) return { ok: false, reason: 'first discovery pass not done' };
    return { ok: true, reason: '' };
  }

  // ---- reload -------------------------------------------------------------------------------

  /**
   * Reloads the config. One reload runs at a time; requests arriving meanwhile coalesce into a
   * single pending one (latest content wins, `force` if any asked for it), whose result they all get.
   */
  reload(request: ReloadRequest): Promise<ReloadResult> {
    return this.reloadWith(request, undefined);
  }

  /** A reload of `read` (what the watcher read), or of a fresh read of the source when undefined. */
  private reloadWith(request: ReloadRequest, read: SourceRead | undefined): Promise<ReloadResult> {
    this.reloadMetrics.watchEvents.inc({ source: request.trigger });
    const allow = request.allow ?? [];
    if (this.running === undefined)
      return this.begin({ trigger: request.trigger, force: request.force === true, allow, read });
    if (this.queued) {
      // Joining requests share one reload: force if any asked, allowed what any allowed, and the
      // latest content: the newest read, or a fresh read when one asked without one.
      this.queued.force ||= request.force === true;
      this.queued.allow = [...new Set([...this.queued.allow, ...allow])];
      this.queued.read = read;
      return this.queued.promise;
    }
    // `force`, `allow` and `read` of the pending request may still change by requests that join it.
    const pending: ReloadAsk = { trigger: request.trigger, force: request.force === true, allow, read };
    const promise = this.running
      .catch(() => undefined)
      .then(() => {
        this.queued = undefined;
        this.reloadMetrics.reloadPending.set({}, 0);
        return this.begin(pending);
      });
    this.queued = Object.assign(pending, { promise });
    this.reloadMetrics.reloadPending.set({}, 1);
    return promise;
  }

  private begin(ask: ReloadAsk): Promise<ReloadResult> {
    const run = this.runReload(ask).finally(() => {
      if (this.running === run) this.running = undefined;
    });
    this.running = run;
    return run;
  }

  private finishReload(result: ReloadResult): ReloadResult {
    const m = this.reloadMetrics;
    m.reloads.inc({ result: result.outcome });
    m.reloadRefused.set({}, result.outcome === 'refused' ? 1 : 0);
    if (result.outcome !== 'refused') this.refusedHash = undefined;
    this.lastReload = result;
    if (result.outcome === 'applied' || result.outcome === 'noop') {
      this.rejected = undefined;
      m.lastReloadSuccessful.set({}, 1);
      if (result.outcome === 'applied') m.lastReloadSuccessTimestamp.set({}, result.startedAt / 1000);
    } else {
      this.rejected = result;
      m.lastReloadSuccessful.set({}, 0);
    }
    this.emit({ type: 'reload', at: this.deps.clock.now(), result });
    return result;
  }

  private result(
    outcome: ReloadOutcome,
    fields: {
      trigger: ReloadRequest['trigger'];
      force: boolean;
      startedAt: number;
      candidateHash?: string;
      changes?: ReloadResult['changes'];
      issues?: readonly ConfigIssue[];
      error?: string;
      needsAllow?: readonly GuardedImpact[];
    },
  ): ReloadResult {
    return {
      outcome,
      trigger: fields.trigger,
      forced: fields.force,
      generation: this.current.number,
      appliedHash: this.applied.hash,
      ...(fields.candidateHash !== undefined ? { candidateHash: fields.candidateHash } : {}),
      changes: fields.changes ?? [],
      issues: fields.issues ?? [],
      ...(fields.error !== undefined ? { error: fields.error } : {}),
      ...(fields.needsAllow !== undefined ? { needsAllow: fields.needsAllow } : {}),
      startedAt: fields.startedAt,
      durationMs: this.deps.clock.now() - fields.startedAt,
    };
  }

  /** A method, not the field: TypeScript would carry a test of the field across the awaits. */
  private isStopping(): boolean {
    return this.stopping;
  }

  /** A reload that finds the agent stopping gives up before starting anything. */
  private abandoned(base: { trigger: ReloadRequest['trigger']; force: boolean; startedAt: number }): ReloadResult {
    this.logger.log('info', 'reload abandoned: the agent is stopping', { trigger: base.trigger });
    return this.finishReload(this.result('failed', { ...base, error: 'the agent is stopping' }));
  }

  private nodeRef(): { apiVersion: 'v1'; kind: 'Node'; name: string; uid: string } {
    return { apiVersion: 'v1', kind: 'Node', name: this.node.name, uid: this.node.uid };
  }

  /** The guard said refuse: the running config stays; log and Node event once per candidate. */
  private refuse(
    verdict: Extract<GuardVerdict, { verdict: 'refuse' }>,
    loaded: LoadedConfig,
    changes: ReloadResult['changes'],
    base: { trigger: ReloadRequest['trigger']; force: boolean; startedAt: number },
  ): ReloadResult {
    const command = allowCommand(verdict.needs);
    const error = `${guardReason(verdict)} was refused; generation ${String(this.current.number)} keeps serving ${this.applied.hash}. Apply it with \`${command}\` or by restarting the agent`;
    const first = this.refusedHash !== loaded.hash;
    this.refusedHash = loaded.hash;
    this.logger.log(first ? 'warn' : 'info', 'config refused by the reload guard: the running config stays', {
      config: loaded.hash,
      needsAllow: verdict.needs.join(','),
      changes: verdict.guarded.map((c) => c.path).join(', '),
      trigger: base.trigger,
    });
    if (first) this.events.record(this.nodeRef(), 'Warning', 'ConfigRefused', `config ${loaded.hash}: ${error}`);
    return this.finishReload(
      this.result('refused', {
        ...base,
        candidateHash: loaded.hash,
        changes,
        issues: loaded.warnings,
        error,
        needsAllow: verdict.needs,
      }),
    );
  }

  private async runReload(ask: ReloadAsk): Promise<ReloadResult> {
    const { trigger, force, allow } = ask;
    const { clock } = this.deps;
    const startedAt = clock.now();
    const base = { trigger, force, startedAt };
    if (this.stopping) return this.result('failed', { ...base, error: 'the agent is stopping' });
    let read = ask.read;
    if (read === undefined) {
      read = await this.source.read();
      // Read here, not by the watcher: it need not offer this content again.
      this.watcher?.acknowledge(read.fingerprint);
    }
    const where = read.ok ? read.snapshot.source.path : sourceLabel(this.source.status().inUse);
    let loaded: LoadedConfig;
    try {
      if (!read.ok) throw read.error;
      loaded = this.parseChecked(read.snapshot);
    } catch (err) {
      if (this.isStopping()) return this.abandoned(base);
      if (err instanceof InvalidConfigError) {
        this.onDiskHash = undefined;
        const errors = err.issues.filter((i) => i.severity === 'error');
        this.logger.log('error', 'config rejected: the running config stays', {
          source: where,
          problems: errors.length,
          first: errors[0]?.message,
        });
        this.events.record(
          this.nodeRef(),
          'Warning',
          'ConfigRejected',
          `config in ${where} rejected (${errors.length} problems; first: ${errors[0] ? `${errors[0].path}: ${errors[0].message}` : '?'}); still applying ${this.applied.hash}`,
        );
        return this.finishReload(this.result('rejected', { ...base, issues: err.issues }));
      }
      const error = err instanceof ConfigSourceError ? err.message : `cannot read the config: ${message(err)}`;
      this.logger.log('error', 'config reload failed: the running config stays', { error });
      return this.finishReload(this.result('failed', { ...base, error }));
    }
    if (this.isStopping()) return this.abandoned(base);
    this.onDiskHash = loaded.hash;
    if (loaded.hash === this.applied.hash && !force) {
      return this.finishReload(this.result('noop', { ...base, candidateHash: loaded.hash, issues: loaded.warnings }));
    }
    const changes = diffConfigs(this.applied.config, loaded.config).map((c) => ({
      path: c.path,
      action: c.action,
      impact: c.effect.impact,
      summary: c.effect.summary,
    }));
    const verdict = guardReload(changes, this.options.reloadGuard ?? DEFAULT_RELOAD_GUARD_POLICY, allow);
    if (verdict.verdict === 'refuse') return this.refuse(verdict, loaded, changes, base);
    const guardWarnings: ConfigIssue[] =
      verdict.verdict === 'warn'
        ? verdict.guarded.map((c) => ({
            severity: 'warning',
            path: c.path,
            message: `applied by a live reload although it is ${c.impact} (--reload-guard=warn)`,
          }))
        : [];
    const restartStarted = clock.now();
    // Re-read the Node: nodeLabelsForPV copies its labels as they are now.
    try {
      this.node = nodeIdentity(await this.deps.cluster.nodes.get(this.options.nodeName));
    } catch (err) {
      this.logger.log('warn', 'could not re-read the Node; keeping its last known labels', { error: message(err) });
    }
    if (this.isStopping()) return this.abandoned(base);
    const old = this.current;
    const drained = await within(clock, old.stop(), this.options.drainTimeoutMs ?? 10_000, this.stopped.signal);
    // Never start a generation once stopping: stop() stops the current one (still `old`).
    if (this.isStopping()) return this.abandoned(base);
    if (!drained.ok)
      this.logger.log(
        'warn',
        'the old generation did not stop within the drain deadline; starting the new one anyway',
        { generation: old.number },
      );
    const next = this.newGeneration(loaded);
    this.current = next;
    next.start();
    const synced = await within(clock, next.whenSynced, this.options.startTimeoutMs ?? 30_000, this.stopped.signal);
    // Stopping while the new generation syncs: stop() stops it (it is current); no rollback starts.
    if (this.isStopping()) return this.abandoned(base);
    if (synced.ok) {
      this.applied = loaded;
      this.recordApplied();
      this.reloadMetrics.restartDuration.observe({}, (clock.now() - restartStarted) / 1000);
      this.logger.log('info', 'config applied', {
        generation: next.number,
        config: loaded.hash,
        changes: changes.length,
        trigger,
      });
      this.events.record(
        this.nodeRef(),
        'Normal',
        'ConfigApplied',
        `generation ${String(next.number)} applies config ${loaded.hash} (${String(changes.length)} changes)`,
      );
      if (verdict.verdict === 'warn') {
        const reason = guardReason(verdict);
        this.logger.log('warn', 'config applied although the reload guard would refuse it (--reload-guard=warn)', {
          config: loaded.hash,
          changes: verdict.guarded.map((c) => c.path).join(', '),
        });
        this.events.record(
          this.nodeRef(),
          'Warning',
          'UnsafeConfigApplied',
          `config ${loaded.hash}: ${reason} was applied (--reload-guard=warn)`,
        );
      }
      return this.finishReload(
        this.result('applied', {
          ...base,
          candidateHash: loaded.hash,
          changes,
          issues: [...loaded.warnings, ...guardWarnings],
        }),
      );
    }
    // The new generation cannot start (a missing permission, an unreachable API): roll back.
    const error = `generation ${String(next.number)} did not sync within ${String(this.options.startTimeoutMs ?? 30_000)} ms: ${next.syncError() ?? 'no error reported'}`;
    await next.stop();
    if (this.isStopping()) return this.abandoned(base);
    const previous = this.newGeneration(this.applied);
    this.current = previous;
    previous.start();
    this.recordApplied();
    this.logger.log('error', 'config could not be applied; rolled back to the last good config', {
      error,
      config: this.applied.hash,
    });
    this.events.record(this.nodeRef(), 'Warning', 'ConfigRolledBack', `${error}; rolled back to ${this.applied.hash}`);
    return this.finishReload(
      this.result('rolled-back', { ...base, candidateHash: loaded.hash, changes, issues: loaded.warnings, error }),
    );
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
            `${label} was deleted; ignored: config ${this.applied.hash} stays applied`,
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

  // ---- admin target ---------------------------------------------------------------------------

  subscribe(listener: (event: AgentEvent) => void): () => void {
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
  }

  private emit(event: AgentEvent): void {
    for (const listener of this.listeners) {
      try {
        listener(event);
      } catch {
        // A broken listener never breaks the agent.
      }
    }
  }

  appliedConfig(): AppliedConfigJson {
    return {
      formatVersion: 1,
      hash: this.applied.hash,
      source: this.applied.source.path,
      generation: this.current.number,
      config: this.applied.config,
    };
  }

  status(): AgentStatusJson {
    const gen = this.current.status();
    const pvs = this.current.persistentVolumes.list();
    const classes: ClassStatus[] = Object.entries(this.applied.config.storageClassMap).map(([name, c]) => {
      const problem = gen.lastPass?.classProblems.find((p) => p.className === name)?.message;
      return {
        name,
        hostDir: c.hostDir,
        mountDir: c.mountDir,
        persistentVolumes: pvs
          .filter((pv) => pv.spec.storageClassName === name)
          .map((pv) => ({
            name: pv.metadata.name,
            path: pv.spec.local?.path ?? '',
            capacity: pv.spec.capacity?.['storage'] ?? '',
            phase: pv.metadata.deletionTimestamp !== undefined ? 'Terminating' : (pv.status?.phase ?? 'Pending'),
            ...(pv.spec.claimRef?.name !== undefined
              ? { claim: `${pv.spec.claimRef.namespace ?? ''}/${pv.spec.claimRef.name}` }
              : {}),
          }))
          .sort((a, b) => (a.path < b.path ? -1 : 1)),
        skipped: (gen.lastPass?.skipped ?? [])
          .filter((s) => s.className === name)
          .map((s) => ({ entry: s.entry, reason: s.reason, message: s.message })),
        ...(problem !== undefined ? { problem } : {}),
      };
    });
    return {
      formatVersion: 1,
      node: this.node.name,
      version: this.options.version ?? 'dev',
      pid: process.pid,
      startedAt: this.startedAt,
      now: this.deps.clock.now(),
      generation: this.current.number,
      ready: this.readiness().ok,
      config: {
        source: sourceLabel(this.source.status().inUse),
        appliedHash: this.applied.hash,
        ...(this.onDiskHash !== undefined ? { onDiskHash: this.onDiskHash } : {}),
        subPath: this.subPath,
      },
      source: this.source.status(),
      ...(this.lastReload ? { lastReload: this.lastReload } : {}),
      ...(this.rejected ? { rejected: this.rejected } : {}),
      reloadPending: this.queued !== undefined,
      classes,
      cleanups: this.cleanups.list().map(cleanupStatus),
      ...(gen.lastPass
        ? {
            lastPass: {
              at: gen.lastPass.at,
              durationMs: gen.lastPass.durationMs,
              created: gen.lastPass.created.length,
              deleted: gen.lastPass.reclaim.deleted.length,
            },
          }
        : {}),
      diagnostics: diagnostics(),
    };
  }

  // ---- lifecycle ------------------------------------------------------------------------------

  /**
   * Graceful stop: a reload in progress gives up at its next step (it never starts a generation
   * once stopping); then the current generation, cleanups and servers stop. Nothing runs after.
   */
  async stop(): Promise<void> {
    this.stopping = true;
    this.stopped.abort();
    await this.watcher?.stop();
    await this.source.stop();
    const pending = this.queued?.promise ?? this.running;
    if (pending) await within(this.deps.clock, pending, this.options.drainTimeoutMs ?? 10_000);
    // Whatever is current now: a reload that gave up left either the old or an unsynced new one.
    await this.current.stop();
    await this.cleanups.stop();
    await this.admin?.close();
    await this.events.flush();
    await this.http?.close();
    this.listeners.clear();
    this.deps.logger.log('info', 'agent stopped', { generations: this.generations });
  }
}

/** A reload to run: what asked, whether forced, which guarded impacts it allows. */
interface ReloadAsk {
  readonly trigger: ReloadRequest['trigger'];
  force: boolean;
  allow: readonly GuardedImpact[];
  /** What the watcher read (the reload applies exactly that); undefined: read the source when it runs. */
  read: SourceRead | undefined;
}

/** The states of the config_source_state metric. */
const SOURCE_STATES = ['ok', 'unreachable', 'deleted', 'fallback'] as const;

/** One word for a source status: the metric's state label. */
function sourceState(status: ConfigSourceStatus): (typeof SOURCE_STATES)[number] {
  if (status.fallbackReason !== undefined) return 'fallback';
  if (status.api === undefined) return 'ok';
  if (!status.api.reachable) return 'unreachable';
  if (status.api.object === 'deleted') return 'deleted';
  return 'ok';
}

function diagnostics(): NonNullable<AgentStatusJson['diagnostics']> {
  const activeResources: Record<string, number> = {};
  for (const type of process.getActiveResourcesInfo()) activeResources[type] = (activeResources[type] ?? 0) + 1;
  const memory = process.memoryUsage();
  return { activeResources, rssBytes: memory.rss, heapUsedBytes: memory.heapUsed };
}

function cleanupStatus(e: CleanupEntry): CleanupStatus {
  return {
    pv: e.pvName,
    method: e.method,
    state: e.state,
    startedAt: e.startedAt,
    attempts: e.attempts,
    ...(e.lastError !== undefined ? { lastError: e.lastError } : {}),
    ...(e.retryAt !== undefined ? { retryAt: e.retryAt } : {}),
  };
}
