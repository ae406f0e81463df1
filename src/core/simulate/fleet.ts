// The fleet of a staged replay: the operator's ConfigMap, the rollout controller, the other nodes
// with a stand-in agent each, and what the real agent on the scenario's node reads and publishes.
//
// The controller is the real one (`provisioner rollout controller`: src/core/staged-rollout/
// service.ts, one replica, no leader election, no metrics server) with no debounce: a replay's
// instant settles anyway, so what it does lands at the instant that caused it. Every agent reads
// its config as `run --config-source staged:NAME` does, through the real staged source (the
// candidate copy only while its node's wave is open). The real agent applies what it reads with
// its real reload (validation, the reload guard, rollback) and publishes its status Lease with the
// real publisher. A stand-in applies what it reads unless a step told it to fail with the
// candidate, and publishes the state a real agent would, through the same publisher. The
// controller and the agents only meet through the in-memory API server, as through a real one.
import { parseConfigSnapshot } from '../config/decode/parse.js';
import type { ConfigSource, SourceRead } from '../config/source/port.js';
import { StagedConfigSource } from '../config/source/staged.js';
import type { Clock } from '../clock.js';
import type { AdminTarget } from '../agent/reload-types.js';
import { publishAgentState } from '../fleet/agent-state.js';
import type { RunningStatePublisher } from '../fleet/agent-state.js';
import { DEFAULT_STATUS_NAME, stateFromLease, statusLeaseName, statusSelector } from '../fleet/applied-state.js';
import type { AppliedResult, AppliedState, PublishedState } from '../fleet/applied-state.js';
import { StatePublisher } from '../fleet/publisher.js';
import { isAlreadyExists, isNotFound } from '../kube/cluster.js';
import type { Cluster, LeaseCluster, ResourceClient } from '../kube/cluster.js';
import type { ConfigMap, Lease } from '../kube/objects.js';
import { silentLogger } from '../log.js';
import type { Logger } from '../log.js';
import { ROLLOUT_REQUEST_ANNOTATION, stagedConfigMapName, stateOf } from '../rollout-state/annotations.js';
import { EVENT_REASONS } from '../staged-rollout/decide.js';
import { startRolloutController } from '../staged-rollout/service.js';
import type { RunningRolloutController } from '../staged-rollout/service.js';
import type { StagedRolloutPolicy } from '../staged-rollout/policy.js';
import { encodeRolloutRequest } from '../rollout-state/state.js';
import type { RolloutAction, RolloutPhase, RolloutState } from '../rollout-state/state.js';
import { waveMembers } from '../rollout-state/membership.js';
import { errorMessage } from '../unknown-values.js';
import { StepError } from './disks.js';
import type { RolloutWorldView } from './expect.js';
import type { FinalFleetNode, FinalRollout, TimelineEvent } from './report.js';
import { leaseEvents, rolloutEvents } from './rollout-observe.js';
import { DEFAULT_FAILURE_REASONS } from './staged-scenario.js';
import type { FleetNodeSpec, NodeFailure } from './staged-scenario.js';

/** The operator's ConfigMap in a replay (the chart's `<fullname>-config`). */
export const STAGED_CONFIGMAP = 'local-provisioner-config';
/** The agents' reflectors relist this rarely: a watchdog the in-memory server does not need. */
const RELIST_MS = 60 * 60_000;
/** The real agent's config watcher polls this often besides the watch. */
const CONFIG_POLL_MS = 60_000;

function hashOf(read: SourceRead): { hash: string } | { error: string } {
  if (!read.ok) return { error: read.error.message };
  try {
    return { hash: parseConfigSnapshot(read.snapshot).hash };
  } catch (err) {
    return { error: errorMessage(err) };
  }
}

interface Failure {
  readonly how: NodeFailure;
  readonly reason?: string;
  readonly errors: number;
}

interface StandInOptions {
  readonly node: string;
  readonly namespace: string;
  readonly name: string;
  readonly instance: string;
  readonly configMaps: ResourceClient<ConfigMap>;
  readonly leases: ResourceClient<Lease>;
  readonly clock: Clock;
  readonly heartbeatMs: number;
  readonly onSilent: (node: string) => void;
}

/**
 * The agent of a node other than the scenario's: reads the staged copies as an agent does, applies
 * what it reads (or fails with the candidate as told), and publishes its applied state.
 */
class StandInAgent {
  private readonly source: StagedConfigSource;
  private publisher: StatePublisher | undefined;
  private state: AppliedState | undefined;
  private failure: Failure | undefined;
  /** The fingerprint of the last read it acted on (as the config watcher's current one). */
  private acknowledged: string | undefined;
  private silent = false;
  private onCandidate = false;

  constructor(private readonly o: StandInOptions) {
    this.source = new StagedConfigSource({
      client: o.configMaps,
      namespace: o.namespace,
      name: o.name,
      nodeName: o.node,
      clock: o.clock,
      logger: silentLogger,
      relistPeriodMs: RELIST_MS,
      random: () => 0.5,
    });
  }

  private readsCandidate(): boolean {
    return this.source.status().stagedRole === 'candidate';
  }

  private newPublisher(): StatePublisher {
    const { o } = this;
    return new StatePublisher({
      leases: o.leases,
      target: { name: statusLeaseName(o.instance, o.node), namespace: o.namespace, instance: o.instance },
      clock: o.clock,
      logger: silentLogger,
      heartbeatMs: o.heartbeatMs,
      random: () => 0.5,
    });
  }

  async start(): Promise<void> {
    await this.source.start({
      changed: () => {
        void this.sync();
      },
    });
    const read = await this.source.read();
    const loaded = hashOf(read);
    if (!('hash' in loaded)) throw new Error(`stand-in agent on ${this.o.node}: ${loaded.error}`);
    this.acknowledged = read.fingerprint;
    this.onCandidate = this.readsCandidate();
    this.state = {
      node: this.o.node,
      appliedHash: loaded.hash,
      generation: 1,
      result: 'started',
      source: `staged:${this.o.namespace}/${this.o.name}`,
      agentVersion: 'simulate (stand-in)',
      // A stand-in's discovery pass is instant: it has run one under whatever it applies.
      lastPassHash: loaded.hash,
    };
    this.publisher = this.newPublisher();
    this.publisher.start(this.state);
  }

  private publish(changes: {
    readonly appliedHash?: string;
    readonly generation?: number;
    readonly result: AppliedResult;
    readonly candidateHash?: string;
    readonly reason?: string;
    readonly errorsSinceApply?: number;
  }): void {
    const current = this.state;
    if (current === undefined) return;
    const next: AppliedState = {
      node: current.node,
      appliedHash: changes.appliedHash ?? current.appliedHash,
      generation: changes.generation ?? current.generation,
      result: changes.result,
      ...(changes.reason !== undefined ? { reason: changes.reason } : {}),
      ...(changes.candidateHash !== undefined ? { candidateHash: changes.candidateHash } : {}),
      source: current.source,
      agentVersion: current.agentVersion,
      ...(changes.errorsSinceApply !== undefined ? { errorsSinceApply: changes.errorsSinceApply } : {}),
      lastPassHash: changes.appliedHash ?? current.appliedHash,
    };
    this.state = next;
    this.publisher?.update(next);
  }

  /** What the agent's config watcher and reload do with a change of the staged copies. */
  private async sync(): Promise<void> {
    const read = await this.source.read();
    const current = this.state;
    if (this.silent || current === undefined || read.fingerprint === this.acknowledged) return;
    const candidate = this.readsCandidate();
    const loaded = hashOf(read);
    if (!('hash' in loaded)) {
      this.acknowledged = read.fingerprint;
      this.publish({ ...this.kept(), result: read.ok ? 'rejected' : 'failed', reason: loaded.error });
      return;
    }
    const failure = candidate ? this.failure : undefined;
    if (loaded.hash === current.appliedHash) {
      this.acknowledged = read.fingerprint;
      this.onCandidate = candidate;
      this.publish({ ...this.kept(), result: 'noop', candidateHash: loaded.hash });
      return;
    }
    switch (failure?.how) {
      case 'stuck':
        return; // It keeps what it runs; `node fixed` makes it read again.
      case 'silent':
        this.goSilent();
        return;
      case 'rejected':
      case 'refused':
      case 'rolled-back':
      case 'failed':
        this.acknowledged = read.fingerprint;
        this.publish({
          ...this.kept(),
          result: failure.how,
          candidateHash: loaded.hash,
          reason: failure.reason ?? DEFAULT_FAILURE_REASONS[failure.how],
        });
        return;
      case 'errors':
      case undefined:
        break;
    }
    this.acknowledged = read.fingerprint;
    this.onCandidate = candidate;
    this.publish({
      appliedHash: loaded.hash,
      generation: current.generation + 1,
      result: 'applied',
      candidateHash: loaded.hash,
      ...(failure?.how === 'errors' ? { errorsSinceApply: failure.errors } : {}),
    });
  }

  /** The error count of the config it keeps running (a reload that did not apply leaves it). */
  private kept(): { errorsSinceApply?: number } {
    const errors = this.state?.errorsSinceApply;
    return errors !== undefined ? { errorsSinceApply: errors } : {};
  }

  private goSilent(): void {
    if (this.silent) return;
    this.silent = true;
    const publisher = this.publisher;
    this.publisher = undefined;
    void publisher?.stop();
    this.o.onSilent(this.o.node);
  }

  /** From now on it fails with the candidate this way; `errors` and `silent` at once if it runs it. */
  fail(failure: Failure): void {
    this.failure = failure;
    if (!this.onCandidate) return;
    const state = this.state;
    if (failure.how === 'errors' && state !== undefined)
      this.publish({
        result: state.result,
        ...(state.candidateHash !== undefined ? { candidateHash: state.candidateHash } : {}),
        ...(state.reason !== undefined ? { reason: state.reason } : {}),
        errorsSinceApply: failure.errors,
      });
    if (failure.how === 'silent') this.goSilent();
  }

  /** It applies candidates again; a silent one starts publishing again and reads what it should run. */
  fix(): void {
    this.failure = undefined;
    this.acknowledged = undefined;
    if (this.silent) {
      this.silent = false;
      this.publisher = this.newPublisher();
      if (this.state !== undefined) this.publisher.start(this.state);
    }
    void this.sync();
  }

  async stop(): Promise<void> {
    await this.source.stop();
    await this.publisher?.stop();
  }
}

/** The controller logs each Event it records too: the rollout's own lines say those already. */
function withoutEventEchoes(logger: Logger): Logger {
  const reasons = new Set<string>(Object.values(EVENT_REASONS));
  return {
    log: (level, message, fields = {}) => {
      const reason = fields['reason'];
      if (typeof reason === 'string' && reasons.has(reason)) return;
      logger.log(level, message, fields);
    },
  };
}

/** A ConfigSource that tells `onRead` when it is read (the replay places a reload's line there). */
function readHooked(source: ConfigSource, onRead: () => void): ConfigSource {
  return {
    status: () => source.status(),
    fsWatchPath: source.fsWatchPath,
    start: (listener) => source.start(listener),
    probe: () => source.probe(),
    read: () => {
      onRead();
      return source.read();
    },
    stop: () => source.stop(),
  };
}

export interface StagedWorldOptions {
  readonly cluster: Cluster & LeaseCluster;
  readonly clock: Clock;
  /** The controller's warnings (they become timeline lines). */
  readonly logger: Logger;
  readonly namespace: string;
  readonly policy: StagedRolloutPolicy;
  /** The scenario's node: the real agent runs there. */
  readonly node: string;
  /** The scenario's fleet (the scenario's node may be in it, for its labels). */
  readonly fleet: readonly FleetNodeSpec[];
  readonly heartbeatMs: number;
  /** Adds a line to the timeline, now. */
  readonly record: (event: TimelineEvent) => void;
}

/** What a config hash is to the rollout: its candidate, its stable config, another, or unknown (none reported). */
function configOf(state: RolloutState | undefined, hash: string | undefined): FinalFleetNode['config'] {
  if (hash === undefined) return 'unknown';
  if (hash === state?.stable.hash) return 'stable';
  return hash === state?.candidate.hash ? 'candidate' : 'other';
}

/** A node of the fleet as its status Lease reports it at `now` (none: it never reported). */
function fleetNode(
  fleet: { readonly node: string; readonly agent: 'real' | 'stand-in' },
  report: PublishedState | undefined,
  state: RolloutState | undefined,
  now: number,
): FinalFleetNode {
  const stale =
    report !== undefined &&
    report.heartbeatAt !== undefined &&
    report.staleAfterMs > 0 &&
    now - report.heartbeatAt > report.staleAfterMs;
  return {
    node: fleet.node,
    agent: fleet.agent,
    ...(report !== undefined ? { applied: report.appliedHash, result: report.result } : {}),
    config: configOf(state, report?.appliedHash),
    stale,
  };
}

/** The wave of the rollout's halt, if it halted at one. */
function haltWaveOf(state: RolloutState | undefined): string | undefined {
  const halt = state?.halt;
  return halt !== undefined ? state?.waves[halt.wave]?.name : undefined;
}

/** What the expectations see of the rollout (`none` for what there is not). */
function rolloutWorld(state: RolloutState | undefined, nodes: readonly FinalFleetNode[]): RolloutWorldView {
  const on = (hash: string | undefined): string[] =>
    hash === undefined ? [] : nodes.filter((n) => n.applied === hash).map((n) => n.node);
  const halt = state?.halt;
  return {
    phase: state?.phase ?? 'none',
    opened: state !== undefined && state.opened > 0 ? (state.waves[state.opened - 1]?.name ?? 'none') : 'none',
    haltedAt: haltWaveOf(state) ?? 'none',
    haltedNode: halt !== undefined && halt.node !== '' ? halt.node : 'none',
    reverted: state?.reverted ?? false,
    onCandidate: on(state?.candidate.hash),
    onStable: on(state?.stable.hash),
  };
}

/** The rollout of the report's end state: its waves with their nodes, its halt, the fleet. */
function finalRollout(
  state: RolloutState | undefined,
  world: RolloutWorldView,
  nodes: readonly FinalFleetNode[],
): FinalRollout {
  const halt = state?.halt;
  const haltWave = haltWaveOf(state);
  const members = waveMembers(
    state?.waves ?? [],
    nodes.map((n) => n.node),
  );
  return {
    phase: world.phase,
    ...(state?.candidate.hash !== undefined ? { candidate: state.candidate.hash } : {}),
    ...(state?.stable.hash !== undefined ? { stable: state.stable.hash } : {}),
    waves: (state?.waves ?? []).map((w, i) => ({
      name: w.name,
      nodes: members[i] ?? [],
      open: i < (state?.opened ?? 0),
    })),
    ...(halt !== undefined
      ? { halt: { ...(haltWave !== undefined ? { wave: haltWave } : {}), node: halt.node, reason: halt.reason } }
      : {}),
    reverted: world.reverted,
    ...(state?.message !== undefined ? { message: state.message } : {}),
    nodes,
  };
}

/** The staged rollout of a replay: the operator's ConfigMap, the controller, the fleet. */
export class StagedWorld {
  readonly name = STAGED_CONFIGMAP;
  readonly instance = DEFAULT_STATUS_NAME;
  private controller: RunningRolloutController | undefined;
  private readonly standIns = new Map<string, StandInAgent>();
  /** The Leases client every agent publishes through: each write is compared with the node's last. */
  private readonly leases: ResourceClient<Lease>;
  private readonly lastLease = new Map<string, PublishedState>();
  /** The rollout state last written, and candidates that never became stable (for `reverted`). */
  private rollout: RolloutState | undefined;
  private readonly pastCandidates = new Set<string>();

  constructor(private readonly o: StagedWorldOptions) {
    this.leases = this.observedLeases(o.cluster.leases);
  }

  /** The nodes of the fleet, sorted: the scenario's node and the stand-ins. */
  get nodes(): readonly { readonly node: string; readonly agent: 'real' | 'stand-in' }[] {
    const names = new Set([this.o.node, ...this.o.fleet.map((f) => f.name)]);
    return [...names].sort().map((node) => ({ node, agent: node === this.o.node ? 'real' : 'stand-in' }));
  }

  private get standInSpecs(): readonly FleetNodeSpec[] {
    return this.o.fleet.filter((f) => f.name !== this.o.node);
  }

  private observedLeases(inner: ResourceClient<Lease>): ResourceClient<Lease> {
    const seen = (lease: Lease): Lease => {
      const state = stateFromLease(lease);
      if (state === undefined) return lease;
      const prev = this.lastLease.get(state.node);
      this.lastLease.set(state.node, state);
      const configs = {
        ...(this.rollout?.candidate.hash !== undefined ? { candidate: this.rollout.candidate.hash } : {}),
        ...(this.rollout?.stable.hash !== undefined ? { stable: this.rollout.stable.hash } : {}),
        pastCandidates: this.pastCandidates,
      };
      for (const e of leaseEvents(prev, state, configs)) this.o.record(e);
      return lease;
    };
    return {
      ...inner,
      create: async (object, options) => seen(await inner.create(object, options)),
      update: async (object, options) => seen(await inner.update(object, options)),
    };
  }

  /** The ConfigMaps client of the controller: each write of the candidate copy says what it did. */
  private observedConfigMaps(inner: ResourceClient<ConfigMap>): ResourceClient<ConfigMap> {
    const candidateName = stagedConfigMapName(this.name, 'candidate');
    const around = async (object: ConfigMap, write: () => Promise<ConfigMap>): Promise<ConfigMap> => {
      if (object.metadata.name !== candidateName) return write();
      const before = await inner.get(candidateName, { namespace: this.o.namespace }).catch(() => undefined);
      const after = await write();
      const decoded = stateOf(after);
      if (decoded?.ok === true) {
        const previous = this.rollout;
        this.rollout = decoded.state;
        for (const hash of [previous?.candidate.hash, decoded.state.candidate.hash])
          if (hash !== undefined) this.pastCandidates.add(hash);
        if (decoded.state.stable.hash !== undefined) this.pastCandidates.delete(decoded.state.stable.hash);
      }
      for (const e of rolloutEvents(
        before,
        after,
        this.o.policy.bakeMs,
        this.nodes.map((n) => n.node),
      ))
        this.o.record(e);
      return after;
    };
    return {
      ...inner,
      create: (object, options) => around(object, () => inner.create(object, options)),
      update: (object, options) => around(object, () => inner.update(object, options)),
    };
  }

  private get ns(): { namespace: string } {
    return { namespace: this.o.namespace };
  }

  /**
   * The fleet's Nodes (the scenario's own gets its labels), the operator's ConfigMap holding the
   * starting config's keys, and the controller, which adopts it as stable.
   */
  async start(keys: Readonly<Record<string, string>>): Promise<void> {
    const { cluster } = this.o;
    for (const f of this.o.fleet) {
      if (f.name === this.o.node) {
        if (Object.keys(f.labels).length > 0) await cluster.nodes.patch(f.name, { metadata: { labels: f.labels } });
        continue;
      }
      try {
        await cluster.nodes.create({
          metadata: { name: f.name, labels: { 'kubernetes.io/hostname': f.name, ...f.labels } },
        });
      } catch (err) {
        // A cluster fixture's Node: it gets the fleet's labels.
        if (!isAlreadyExists(err)) throw err;
        if (Object.keys(f.labels).length > 0) await cluster.nodes.patch(f.name, { metadata: { labels: f.labels } });
      }
    }
    await cluster.configMaps.create(
      {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: this.name, namespace: this.o.namespace },
        data: { ...keys },
      },
      this.ns,
    );
    this.controller = await startRolloutController(
      {
        settings: {
          namespace: this.o.namespace,
          name: this.name,
          instance: this.instance,
          policy: this.o.policy,
          resyncMs: RELIST_MS,
          debounceMs: 0,
        },
        listenAddress: '',
        metricsPath: '/metrics',
        identity: 'simulate',
        leaderElection: undefined,
      },
      {
        cluster: { ...cluster, configMaps: this.observedConfigMaps(cluster.configMaps), leases: cluster.leases },
        clock: this.o.clock,
        logger: withoutEventEchoes(this.o.logger),
        random: () => 0.5,
      },
    );
  }

  /** Starts a stand-in agent on every other node of the fleet (once the stable copy exists). */
  async startStandIns(): Promise<void> {
    for (const f of this.standInSpecs) {
      const agent = new StandInAgent({
        node: f.name,
        namespace: this.o.namespace,
        name: this.name,
        instance: this.instance,
        configMaps: this.o.cluster.configMaps,
        leases: this.leases,
        clock: this.o.clock,
        heartbeatMs: this.o.heartbeatMs,
        onSilent: (node) => {
          this.o.record({ type: 'node-silent', node });
        },
      });
      this.standIns.set(f.name, agent);
      await agent.start();
    }
  }

  /** The real agent's config source (a new one per agent process); `onRead` is told of every read. */
  agentSource(client: ResourceClient<ConfigMap>, logger: Logger, onRead: () => void): ConfigSource {
    const source = new StagedConfigSource({
      client,
      namespace: this.o.namespace,
      name: this.name,
      nodeName: this.o.node,
      clock: this.o.clock,
      logger,
      relistPeriodMs: RELIST_MS,
      random: () => 0.5,
    });
    return readHooked(source, onRead);
  }

  /** The real agent's config watcher: the watch's changes, and a poll. */
  static readonly agentWatch = { pollIntervalMs: CONFIG_POLL_MS, debounceMs: 100, useFsEvents: false } as const;

  /** Publishes the real agent's applied state, as `run` does. */
  publish(agent: AdminTarget): RunningStatePublisher {
    return publishAgentState(agent, {
      leases: this.leases,
      target: {
        name: statusLeaseName(this.instance, this.o.node),
        namespace: this.o.namespace,
        instance: this.instance,
      },
      clock: this.o.clock,
      logger: silentLogger,
      heartbeatMs: this.o.heartbeatMs,
      random: () => 0.5,
    });
  }

  /** `kubectl apply` of the operator's ConfigMap with these keys. */
  async applyConfig(keys: Readonly<Record<string, string>>): Promise<void> {
    const { configMaps } = this.o.cluster;
    const current = await configMaps.get(this.name, this.ns);
    await configMaps.update({ ...current, data: { ...keys } }, this.ns);
  }

  /** `provisioner rollout pause|resume|abort|promote`: the request on the candidate copy, for its candidate. */
  async request(action: RolloutAction, by: string | undefined): Promise<{ candidate?: string; phase: RolloutPhase }> {
    const name = stagedConfigMapName(this.name, 'candidate');
    let candidate: ConfigMap;
    try {
      candidate = await this.o.cluster.configMaps.get(name, this.ns);
    } catch (err) {
      if (isNotFound(err)) throw new StepError(`no rollout: ${name} does not exist`);
      throw err;
    }
    const decoded = stateOf(candidate);
    if (decoded?.ok !== true) throw new StepError(`no rollout: ${name} holds no rollout state`);
    const state = decoded.state;
    const request = encodeRolloutRequest({
      action,
      candidate: state.candidate.fingerprint,
      ...(by !== undefined ? { by } : {}),
      at: this.o.clock.now(),
    });
    await this.o.cluster.configMaps.patch(
      name,
      { metadata: { annotations: { [ROLLOUT_REQUEST_ANNOTATION]: request } } },
      this.ns,
    );
    return { ...(state.candidate.hash !== undefined ? { candidate: state.candidate.hash } : {}), phase: state.phase };
  }

  private standIn(node: string): StandInAgent {
    const agent = this.standIns.get(node);
    if (agent === undefined)
      throw new StepError(
        node === this.o.node
          ? `${node} runs the real agent: what it does with the candidate is its own (its reload, its disks)`
          : `${node} is not a node of the fleet`,
      );
    return agent;
  }

  /** `node fails candidate`. */
  fail(node: string, failure: Failure): void {
    this.standIn(node).fail(failure);
  }

  /** `node fixed`. */
  fix(node: string): void {
    this.standIn(node).fix();
  }

  /** The rollout as the controller stored it and the fleet's Leases report it, at `now`. */
  async view(now: number): Promise<{ readonly world: RolloutWorldView; readonly final: FinalRollout }> {
    const state = await this.rolloutState();
    const reports = await this.reports();
    const nodes = this.nodes.map((n) => fleetNode(n, reports.get(n.node), state, now));
    const world = rolloutWorld(state, nodes);
    return { world, final: finalRollout(state, world, nodes) };
  }

  /** The rollout state on the candidate copy (none: no copy, or no state on it). */
  private async rolloutState(): Promise<RolloutState | undefined> {
    const candidate = await this.o.cluster.configMaps
      .get(stagedConfigMapName(this.name, 'candidate'), this.ns)
      .catch(() => undefined);
    const decoded = stateOf(candidate);
    return decoded?.ok === true ? decoded.state : undefined;
  }

  /** The state each node's status Lease reports, by node. */
  private async reports(): Promise<Map<string, PublishedState>> {
    const reports = new Map<string, PublishedState>();
    const leases = await this.o.cluster.leases.list({ ...this.ns, labelSelector: statusSelector(this.instance) });
    for (const lease of leases.items) {
      const s = stateFromLease(lease);
      if (s !== undefined) reports.set(s.node, s);
    }
    return reports;
  }

  async stop(): Promise<void> {
    await Promise.allSettled([...this.standIns.values()].map((a) => a.stop()));
    await this.controller?.stop();
  }
}
