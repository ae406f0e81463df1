// Scenario replay: the REAL Agent (agent.ts: generations, reload state machine, cleanup table,
// Reclaimer, planDiscovery, publishVolumes) runs against a MemoryCluster, MemoryVolumes and a
// ScriptedCleaner on a ManualClock. Steps change that world; the virtual clock moves only when
// the runner moves it, so a scenario replays the same way every time. What the agent did is read
// off its side effects (observe.ts) — the API writes it made, the cleanups it ran, the reloads it
// answered and what it logged — each stamped with virtual time, into a report of data (report.ts).
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent } from '../agent/agent.js';
import type { ReloadRequest, ReloadResult } from '../agent/reload-types.js';
import { ManualClock } from '../clock.js';
import type { ProvisionerConfig } from '../config/model.js';
import { loadConfig } from '../config/source/load.js';
import { ConfigSourceError, formatIssue, InvalidConfigError } from '../errors.js';
import type { SourcePosition } from '../errors.js';
import { isNotFound } from '../kube/cluster.js';
import type { Cluster } from '../kube/cluster.js';
import type { Node } from '../kube/objects.js';
import { MemoryCluster } from '../kube/memory/memory-cluster.js';
import { memoryDiscoveryLinks } from '../node/discovery-links.js';
import { MemoryVolumes } from '../node/memory-volumes.js';
import { errorMessage } from '../unknown-values.js';
import { loadClusterFixture } from './cluster-fixture.js';
import { ConfigFiles } from './config-files.js';
import { runControllerStandIns } from './controllers.js';
import { SimulatedDevices } from './devices.js';
import { derivedUuid, Disks, StepError } from './disks.js';
import { evaluateExpectations } from './expect.js';
import { finalState, worldView } from './world-view.js';
import type { ReplayState } from './world-view.js';
import type { ExpectationResult } from './expect.js';
import { InvalidInputError } from './input.js';
import { loadNodeFacts } from './node-facts.js';
import {
  jobWriteEvent,
  logEvent,
  NodeUids,
  nodeWriteEvent,
  pvWriteEvent,
  TappedCleaner,
  tapCluster,
  TimedLogger,
} from './observe.js';
import type { CleanerEvent, LogRecord } from './observe.js';
import { isRolloutAction, SCENARIO_EPOCH } from './report.js';
import type { ScenarioReport, StepInfo, StepOutcome, StepReport, TimelineAction, TimelineEvent } from './report.js';
import type { Scenario, ScenarioSettings, Step } from './scenario.js';
import { ScriptedCleaner } from './stand-ins.js';
import { applyStep } from './steps.js';
import type { StepWorld } from './steps.js';
import { VirtualTime } from './virtual-time.js';
import { StagedWorld } from './fleet.js';
import type { RunningStatePublisher } from '../fleet/agent-state.js';

export interface ScenarioRunOptions {
  /** Where the runner keeps the config files it hands the agent; default the OS temp directory. */
  readonly tempRoot?: string;
}

class ScenarioRun {
  private readonly clock = new ManualClock(SCENARIO_EPOCH);
  private cluster!: MemoryCluster;
  private agentCluster!: Cluster;
  private readonly volumes = new MemoryVolumes();
  /** The node's block devices (disks by rule), kept in step with /dev in the volumes. */
  private readonly devices = new SimulatedDevices(this.volumes);
  private readonly scripted = new ScriptedCleaner(this.clock);
  private cleaner!: TappedCleaner;
  private readonly logger = new TimedLogger(this.clock);
  private agent: Agent | undefined;
  private tmp = '';
  private configFiles!: ConfigFiles;
  private config!: ProvisionerConfig;
  private nodeName = '';
  private disks!: Disks;
  private actions: TimelineAction[] = [];
  private readonly jobsCreated: string[] = [];
  private readonly cleanupsByPath = new Map<string, number>();
  private lastReload: ReloadResult | undefined;
  private readonly worldStop = new AbortController();
  private readonly controllers: Promise<void>[] = [];
  private readonly steps: StepReport[] = [];
  private readonly time = new VirtualTime(this.clock, () => this.fingerprint());
  /** The Node UIDs the agent sees (deterministic), and how many times the Node was registered. */
  private readonly nodeUids = new NodeUids();
  private nodeRegistrations = 0;
  /** A staged scenario: the operator's ConfigMap, the controller and the fleet. */
  private staged: StagedWorld | undefined;
  /** The keys of the operator's ConfigMap (`apply config` changes them). */
  private operatorConfig: ConfigFiles | undefined;
  /** The real agent's status Lease publisher, and its reload subscription (staged scenarios). */
  private publishing: RunningStatePublisher | undefined;
  private unsubscribe: (() => void) | undefined;
  /** Where the timeline stood when the staged source was last read: a reload it leads to goes there. */
  private readMark: number | undefined;

  constructor(
    private readonly scenario: Scenario,
    private readonly options: ScenarioRunOptions,
  ) {}

  private get settings(): ScenarioSettings {
    return this.scenario.settings;
  }

  private now(): number {
    return this.clock.now() - SCENARIO_EPOCH;
  }

  /** Adds an event to the timeline now; `before` puts it ahead of the actions recorded since that index. */
  private record(event: TimelineEvent, before?: number): void {
    const entry = { at: this.now(), ...event };
    if (before === undefined) this.actions.push(entry);
    else this.actions.splice(before, 0, entry);
    // A reload in flight is told after what the controller and the fleet did meanwhile.
    if (this.readMark !== undefined && isRolloutAction(event.type)) this.readMark = this.actions.length;
  }

  private fail(step: { index: number; position: SourcePosition; type: string }, text: string): never {
    throw new InvalidInputError('scenario', this.scenario.file, [
      { severity: 'error', path: `steps[${step.index}].${step.type}`, message: text, position: step.position },
    ]);
  }

  // ---- the world ------------------------------------------------------------------------------

  private async ensureClassesFor(config: ProvisionerConfig): Promise<void> {
    for (const [name, c] of Object.entries(config.storageClassMap)) {
      if (this.settings.createDiscoveryDirectories) {
        try {
          this.volumes.addDirectory(c.mountDir);
        } catch {
          // Something else is there: discovery reports it.
        }
      }
      if (!this.settings.createStorageClasses) continue;
      await this.cluster.storageClasses
        .create({
          apiVersion: 'storage.k8s.io/v1',
          kind: 'StorageClass',
          metadata: { name },
          provisioner: 'kubernetes.io/no-provisioner',
          reclaimPolicy: 'Delete',
          volumeBindingMode: 'WaitForFirstConsumer',
        })
        .catch(() => undefined);
    }
  }

  /** Stand-ins for the controllers a real cluster runs: the PV controller and pv-protection, Job GC. */
  private startControllers(): void {
    this.controllers.push(...runControllerStandIns(this.cluster, this.worldStop.signal));
  }

  private onCleaner(event: CleanerEvent, path: string, detail: { command?: readonly string[]; error?: string }): void {
    const volume = this.disks.volumeAt(path, this.disks.classOfPath(path));
    const pv = this.disks.pvNameAt(path);
    const ref = { volume, ...(pv !== undefined ? { pv } : {}) };
    switch (event) {
      case 'started':
        this.cleanupsByPath.set(path, (this.cleanupsByPath.get(path) ?? 0) + 1);
        this.record({ type: 'cleanup-started', ...ref, path, ...(detail.command ? { command: detail.command } : {}) });
        return;
      case 'succeeded':
        this.record({ type: 'cleanup-succeeded', ...ref });
        return;
      case 'failed':
        this.record({ type: 'cleanup-failed', ...ref, error: detail.error ?? '?' });
        return;
      case 'interrupted':
        this.record({ type: 'cleanup-interrupted', ...ref });
        return;
    }
  }

  /** An agent log record worth a timeline line becomes one, in the order things happened. */
  private onLog(r: LogRecord): void {
    const event = logEvent(
      r,
      (path, className) => this.disks.volumeAt(path, className),
      (pv) => this.disks.volumeOfPv(pv),
    );
    if (event) this.actions.push({ at: r.at - SCENARIO_EPOCH, ...event });
  }

  private recordReload(r: ReloadResult, before: number): void {
    this.lastReload = r;
    this.record(
      {
        type: 'reload',
        outcome: r.outcome,
        generation: r.generation,
        appliedHash: r.appliedHash,
        changes: r.changes,
        problems: r.issues.filter((i) => i.severity === 'error').map((i) => this.configFiles.userIssue(i)),
        ...(r.error !== undefined ? { error: r.error } : {}),
        ...(r.needsAllow !== undefined ? { needsAllow: r.needsAllow } : {}),
      },
      before,
    );
  }

  // ---- driving the agent ------------------------------------------------------------------------

  /** Changes whenever anything happened in the world. */
  private fingerprint(): string {
    const table = this.agent?.cleanups;
    return [
      this.cluster.resourceVersion,
      this.actions.length,
      this.logger.records.length,
      this.scripted.calls.length,
      this.clock.pendingSleepers,
      table ? (['queued', 'running', 'succeeded', 'failed'] as const).map((s) => table.count(s)).join(',') : '',
    ].join('|');
  }

  private async startAgent(): Promise<void> {
    const s = this.settings;
    const mark = this.actions.length;
    const staged = this.staged;
    // Staged: the agent reads the stable or candidate copy through the API, as `run
    // --config-source staged:…` does, and reloads when its watch sees them change.
    const stagedDeps =
      staged === undefined
        ? {}
        : {
            configSource: staged.agentSource(this.agentCluster.configMaps, this.logger, () => {
              this.readMark = this.actions.length;
            }),
          };
    const agent = await this.time.drive(
      Agent.start(
        {
          configPath: this.configFiles.path,
          nodeName: this.nodeName,
          namespace: s.namespace,
          listenAddress: '127.0.0.1:0',
          metricsPath: '/metrics',
          discoveryPeriodMs: s.discoveryPeriodMs,
          changePollMs: s.changePollMs,
          mountGraceMs: s.mountGraceMs,
          minPassIntervalMs: s.minPassIntervalMs,
          createConcurrency: 4,
          cleanupConcurrency: s.cleanupConcurrency,
          jobImage: s.jobImage,
          cleanupBackoff: { initialMs: s.cleanupBackoffMs, maxMs: Math.max(s.cleanupBackoffMs, 300_000) },
          drainTimeoutMs: 10_000,
          startTimeoutMs: 30_000,
          reloadGuard: s.reloadGuard,
          version: 'simulate',
          ...(staged !== undefined ? { watch: StagedWorld.agentWatch } : {}),
        },
        {
          cluster: this.agentCluster,
          volumes: this.volumes,
          clock: this.clock,
          logger: this.logger,
          cleaner: this.cleaner,
          // Disks by rule: the links the agent makes land in the in-memory node it discovers.
          devices: {
            inventory: this.devices.inventory,
            links: memoryDiscoveryLinks(this.volumes),
            carver: this.devices,
          },
          ...stagedDeps,
        },
      ),
    );
    this.agent = agent;
    if (staged !== undefined) {
      this.publishing = staged.publish(agent);
      // The reloads the agent's watcher starts (the runner's own are recorded where it asks).
      this.unsubscribe = agent.subscribe((event) => {
        if (event.type !== 'reload' || event.result.trigger === 'admin' || event.result.trigger === 'fs') return;
        if (event.result.outcome === 'applied' || event.result.outcome === 'rolled-back')
          this.config = agent.appliedConfig().config;
        this.recordReload(event.result, this.readMark ?? this.actions.length);
        this.readMark = undefined;
      });
    }
    const applied = agent.appliedConfig();
    this.record(
      { type: 'agent-started', generation: applied.generation, configHash: applied.hash, adopted: agent.adopted },
      mark,
    );
    await this.time.settle();
  }

  private async stopAgent(): Promise<void> {
    const agent = this.agent;
    if (!agent) return;
    this.agent = undefined;
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    await this.publishing?.stop();
    this.publishing = undefined;
    const cleanupsInFlight = agent.cleanups.count('running') + agent.cleanups.count('queued');
    await this.time.drive(agent.stop());
    this.record({ type: 'agent-stopped', cleanupsInFlight });
    await this.time.settle();
  }

  // ---- setup ----------------------------------------------------------------------------------

  private async setup(): Promise<void> {
    const sc = this.scenario;
    this.tmp = await mkdtemp(join(this.options.tempRoot ?? tmpdir(), 'lvp-simulate-'));
    this.configFiles = new ConfigFiles(this.tmp);
    const fixture = await this.loadCluster();
    this.nodeName = sc.node ?? (fixture.nodes.length === 1 ? (fixture.nodes[0] ?? 'node-a') : 'node-a');
    this.disks = new Disks({
      volumes: this.volumes,
      cluster: this.cluster,
      nodeName: this.nodeName,
      config: () => this.config,
    });
    await this.registerNode(fixture.uids);
    this.cluster.addNamespace(this.settings.namespace);
    await this.loadStartingConfig();
    await this.ensureClassesFor(this.config);
    if (sc.nodeFacts) await this.addNodeFacts(sc.nodeFacts);
    this.devices.addAll(sc.devices, this.setupFail(undefined, 'devices'));
    sc.disks.forEach((d, i) => {
      this.disks.add(d, this.setupFail(d.position, `disks[${i}]`));
    });
    this.tapAgentWorld();
    this.startControllers();
    if (sc.stagedRollout) await this.setupStaged(sc.stagedRollout, this.setupFail(undefined, 'config'));
  }

  /** Fails the setup: a problem of the scenario's starting world, at `path`. */
  private setupFail(position: SourcePosition | undefined, path: string): (text: string) => never {
    return (text: string): never => {
      throw new InvalidInputError('scenario', this.scenario.file, [
        { severity: 'error', path, message: text, ...(position ? { position } : {}) },
      ]);
    };
  }

  /** The cluster fixture's objects in memory (or an empty cluster), with its Nodes and uids. */
  private async loadCluster(): Promise<{
    readonly nodes: readonly string[];
    readonly uids: ReadonlyMap<string, string>;
  }> {
    const { cluster } = this.scenario;
    if (!cluster) {
      this.cluster = new MemoryCluster({ clock: this.clock });
      return { nodes: [], uids: new Map() };
    }
    const fixture = await loadClusterFixture(cluster.path, { clock: this.clock });
    this.cluster = fixture.cluster;
    return { nodes: fixture.nodes, uids: fixture.uids };
  }

  /** The scenario's Node (the fixture's, or created); the agent sees the fixture's UID, or one derived from the name. */
  private async registerNode(fixtureUids: ReadonlyMap<string, string>): Promise<void> {
    let node: Node;
    try {
      node = await this.cluster.nodes.get(this.nodeName);
    } catch (err) {
      if (!isNotFound(err)) throw err;
      node = await this.cluster.nodes.create({
        metadata: { name: this.nodeName, labels: { 'kubernetes.io/hostname': this.nodeName } },
      });
    }
    const realUid = node.metadata.uid ?? '';
    this.nodeUids.set(realUid, fixtureUids.get(realUid) ?? this.nextNodeUid());
  }

  /** The starting config, written where the agent reads it; its problems are the scenario's. */
  private async loadStartingConfig(): Promise<void> {
    const fail = this.setupFail(undefined, 'config');
    await this.configFiles.write(this.scenario.config, fail);
    try {
      this.config = (await loadConfig(this.configFiles.path)).config;
    } catch (err) {
      if (err instanceof InvalidConfigError) {
        throw new InvalidInputError(
          'scenario',
          this.scenario.file,
          err.issues
            .filter((i) => i.severity === 'error')
            .map((i) => ({
              severity: 'error' as const,
              path: 'config',
              message: `the starting config is invalid: ${formatIssue(this.configFiles.userIssue(i))}`,
            })),
        );
      }
      // Name the user's config, not the runner's link to it.
      if (err instanceof ConfigSourceError)
        fail(err.message.replaceAll(this.configFiles.path, this.configFiles.display));
      throw err;
    }
  }

  /** A node-facts fixture: its block devices, directories and entries on the in-memory node. */
  private async addNodeFacts(nodeFacts: NonNullable<Scenario['nodeFacts']>): Promise<void> {
    const { display, path } = nodeFacts;
    const fail = (text: string): never => this.setupFail(undefined, 'nodeFacts')(`${display}: ${text}`);
    const { facts } = await loadNodeFacts(path);
    // Devices first: an entry of the fixture may be a symlink to one of their by-id names.
    this.devices.addAll(facts.devices, fail);
    for (const dir of facts.directories) {
      try {
        this.volumes.addDirectory(dir);
      } catch (err) {
        fail(`${dir}: ${errorMessage(err)}`);
      }
    }
    for (const e of [...facts.entries].sort((a, b) => Number(a.type === 'symlink') - Number(b.type === 'symlink')))
      this.disks.addFact(e, fail);
  }

  /** What the agent does is read off its cleaner, its API writes and its log, onto the timeline. */
  private tapAgentWorld(): void {
    this.cleaner = new TappedCleaner(this.scripted, (event, path, detail) => {
      this.onCleaner(event, path, detail);
    });
    this.agentCluster = tapCluster(
      this.cluster,
      {
        persistentVolumes: (write) => {
          const event = pvWriteEvent(write);
          if (event) this.record(event);
        },
        jobs: (write) => {
          if (write.verb === 'create') this.jobsCreated.push(write.object.metadata.name);
          const event = jobWriteEvent(write);
          if (event) this.record(event);
        },
        nodes: (write) => {
          const event = nodeWriteEvent(write);
          if (event) this.record(event);
        },
      },
      this.nodeUids,
    );
    this.logger.onRecord = (record) => {
      this.onLog(record);
    };
  }

  /**
   * The operator's ConfigMap holding the starting config, the controller (which adopts it as
   * stable) and the fleet's stand-in agents; the real agent starts after them, on the stable copy.
   */
  private async setupStaged(
    spec: NonNullable<Scenario['stagedRollout']>,
    fail: (text: string) => never,
  ): Promise<void> {
    const dir = join(this.tmp, 'operator');
    await mkdir(dir);
    this.operatorConfig = new ConfigFiles(dir);
    await this.operatorConfig.write(this.scenario.config, fail);
    this.staged = new StagedWorld({
      cluster: this.cluster,
      clock: this.clock,
      logger: this.logger,
      namespace: this.settings.namespace,
      policy: spec.policy,
      node: this.nodeName,
      fleet: spec.fleet,
      heartbeatMs: this.settings.statusHeartbeatMs,
      record: (event) => {
        this.record(event);
      },
    });
    await this.staged.start(this.operatorConfig.data);
    await this.time.settle();
    await this.staged.startStandIns();
    await this.time.settle();
  }

  /** A UID for the next registration of the Node, derived from its name and how many came before. */
  private nextNodeUid(): string {
    this.nodeRegistrations += 1;
    return derivedUuid(`simulated Node ${this.nodeName}, registration ${this.nodeRegistrations}`);
  }

  /** The node reinstalled: its agent stops, the Node object is registered again (a new UID), a new agent starts. */
  private async rebuildNode(): Promise<{ node: string; previousUid: string; uid: string }> {
    await this.stopAgent();
    const old = await this.cluster.nodes.get(this.nodeName);
    const previousUid = this.nodeUids.shown(old.metadata.uid ?? '');
    await this.cluster.nodes.delete(this.nodeName);
    // A new node registers with its kubelet's labels; nothing else of the old object survives.
    const created = await this.cluster.nodes.create({
      metadata: { name: this.nodeName, ...(old.metadata.labels ? { labels: old.metadata.labels } : {}) },
    });
    const uid = this.nextNodeUid();
    this.nodeUids.set(created.metadata.uid ?? '', uid);
    await this.time.settle();
    await this.startAgent();
    return { node: this.nodeName, previousUid, uid };
  }

  // ---- steps ----------------------------------------------------------------------------------

  /** Reloads the agent as asked; the applied config changes only when a new generation serves. */
  private async reload(request: ReloadRequest, fail: (text: string) => never): Promise<void> {
    const agent = this.agent;
    if (!agent) fail('no agent is running');
    const mark = this.actions.length;
    const result = await this.time.drive(agent.reload(request));
    if (result.outcome === 'applied' || result.outcome === 'rolled-back') this.config = agent.appliedConfig().config;
    this.recordReload(result, mark);
  }

  /** Carries out a step; returns what it did, for the timeline. */
  private apply(step: Step): Promise<StepOutcome> {
    const world: StepWorld = {
      cluster: this.cluster,
      disks: this.disks,
      devices: this.devices,
      configFiles: this.configFiles,
      cleaner: this.scripted,
      clock: this.clock,
      namespace: this.settings.namespace,
      ensureClassesFor: (config) => this.ensureClassesFor(config),
      reload: (request, fail) => this.reload(request, fail),
      restartAgent: async () => {
        await this.stopAgent();
        await this.startAgent();
      },
      rebuildNode: () => this.rebuildNode(),
      ...(this.staged !== undefined && this.operatorConfig !== undefined
        ? { staged: { world: this.staged, operatorConfig: this.operatorConfig } }
        : {}),
    };
    return applyStep(step, world, (text) => this.fail(step, text));
  }

  // ---- expectations ---------------------------------------------------------------------------

  private async check(step: Step): Promise<ExpectationResult[]> {
    if (!step.expect) return [];
    const e = step.expect;
    const refs = [
      ...e.pv.map((p) => p.volume),
      ...Object.keys(e.cleaned),
      ...Object.keys(e.skipped),
      ...Object.keys(e.quarantined),
    ];
    try {
      return evaluateExpectations(e, await worldView(this.state(), refs));
    } catch (err) {
      if (err instanceof StepError) this.fail(step, err.message);
      throw err;
    }
  }

  // ---- the run --------------------------------------------------------------------------------

  private finishStep(report: StepOutcome & Omit<StepInfo, 'actions'>): void {
    this.steps.push({ ...report, actions: this.actions });
    this.actions = [];
  }

  async run(): Promise<ScenarioReport> {
    try {
      await this.setup();
      await this.startAgent();
      this.finishStep({
        type: 'start',
        node: this.nodeName,
        disks: this.disks.present,
        classes: Object.keys(this.config.storageClassMap).length,
        ...(this.staged !== undefined ? { fleet: this.staged.nodes.length } : {}),
        ...(this.devices.disks > 0 ? { devices: this.devices.disks } : {}),
        index: 0,
        at: 0,
        expectations: [],
      });
      for (const step of this.scenario.steps) {
        const at = this.now();
        const outcome = await this.apply(step);
        await this.time.settle();
        if (step.type === 'time passes') await this.time.advance(step.durationMs);
        else if (step.type !== 'check') await this.time.advance(this.settings.reactionMs);
        const expectations = await this.check(step);
        this.finishStep({
          ...outcome,
          index: step.index,
          at,
          ...(step.note !== undefined ? { note: step.note } : {}),
          expectations,
        });
      }
      return await this.report();
    } finally {
      await this.teardown();
    }
  }

  /** What the replay reads back from the world. */
  private state(): ReplayState {
    return {
      cluster: this.cluster,
      agent: this.agent,
      disks: this.disks,
      nodeName: this.nodeName,
      namespace: this.settings.namespace,
      jobsCreated: this.jobsCreated,
      cleanupsByPath: this.cleanupsByPath,
      lastReload: this.lastReload?.outcome,
      ...(this.staged !== undefined ? { rollout: this.staged.view.bind(this.staged, this.clock.now()) } : {}),
    };
  }

  private async report(): Promise<ScenarioReport> {
    const all = this.steps.flatMap((s) => s.expectations);
    const failed = all.filter((e) => !e.ok).length;
    return {
      name: this.scenario.name,
      file: this.scenario.file,
      ...(this.scenario.description !== undefined ? { description: this.scenario.description } : {}),
      node: this.nodeName,
      settings: this.settings,
      ...(this.staged !== undefined && this.scenario.stagedRollout !== undefined
        ? {
            stagedRollout: {
              policy: this.scenario.stagedRollout.policy,
              configMap: this.staged.name,
              fleet: this.staged.nodes,
            },
          }
        : {}),
      steps: this.steps,
      expectations: { total: all.length, failed },
      passed: failed === 0,
      final: await finalState(this.state(), this.now()),
    };
  }

  private async teardown(): Promise<void> {
    try {
      await this.stopAgent().catch(() => undefined);
      await this.staged?.stop();
    } finally {
      this.worldStop.abort();
      await Promise.allSettled(this.controllers);
      if (this.tmp !== '') await rm(this.tmp, { recursive: true, force: true });
    }
  }
}

/** Replays a scenario with the real agent on a virtual clock. Nothing outside a temp directory is touched. */
export function runScenario(scenario: Scenario, options: ScenarioRunOptions = {}): Promise<ScenarioReport> {
  return new ScenarioRun(scenario, options).run();
}
