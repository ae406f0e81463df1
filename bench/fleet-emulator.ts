// An emulated fleet for the fleet-scale benchmark (docs/benchmarks.md, issue 35): many nodes'
// status Leases kept by one process, cheaply, where a real agent per node would not fit on the
// machine. It does for every node what the agent's staged source and StatePublisher do, and no
// more:
// - one list + watch of NAME-stable and one of NAME-candidate, by name (an agent holds the same two;
//   here they serve every emulated node at once);
// - on a change of either (at once: the agent's watcher checks a watch event at once), for every
//   node: the candidate iff runsCandidate(state, node), else the stable copy, and only the stable
//   copy the state names (its fingerprint), as StagedChoice decides; the config hash by the agent's
//   loader, once per copy;
// - a node whose hash changed gets its status Lease updated (statusLease, as StatePublisher writes
//   it: result `applied`, the generation up by one, the candidate hash); the others are not written;
// - heartbeats: every Lease renewed every `heartbeatMs` (±10 %), stale after 3 of them
//   (leaseDurationSeconds), as StatePublisher does, with a period of the caller's choosing;
// - every write through one client with a bounded rate (qps), changes before heartbeats, at most
//   one write in flight per node, the Lease's resourceVersion kept from the last write (no read
//   before a write; a 409 reads it again).
// What it leaves out: a watch per node (the apiserver sends each write to two watchers here, not
// to one per node), the config's validation and reload on each node (a parse per copy here),
// rejected configs (the benchmark's revisions all parse), and parallelism: a wave's emulated nodes
// write one after the other at `qps`, where real agents would write at once.
import { setTimeout as delay } from 'node:timers/promises';
import { systemClock } from '../src/core/clock.js';
import { sourceLabel } from '../src/core/config/source/port.js';
import { statusLease, statusLeaseName } from '../src/core/fleet/applied-state.js';
import type { AppliedState, StatusLeaseTarget } from '../src/core/fleet/applied-state.js';
import { STALE_HEARTBEATS } from '../src/core/fleet/publisher.js';
import { isAlreadyExists, isConflict, isNotFound } from '../src/core/kube/cluster.js';
import type { ResourceClient } from '../src/core/kube/cluster.js';
import type { ConnectionSettings } from '../src/core/kube/kubeconfig.js';
import type { ConfigMap, Lease } from '../src/core/kube/objects.js';
import { Reflector } from '../src/core/kube/reflector.js';
import { RestCluster } from '../src/core/kube/rest-cluster.js';
import { silentLogger } from '../src/core/log.js';
import { contentOf } from '../src/core/staged-rollout/objects.js';
import { stagedConfigMapName, stateOf } from '../src/core/rollout-state/annotations.js';
import type { StagedRole } from '../src/core/rollout-state/annotations.js';
import type { DesiredContent } from '../src/core/staged-rollout/decide.js';
import { runsCandidate } from '../src/core/rollout-state/state.js';
import { counted } from './support.js';
import type { Requests } from './support.js';

export interface EmulatedFleetOptions {
  readonly connection: ConnectionSettings;
  readonly namespace: string;
  /** The provisioner instance of the status Leases. */
  readonly instance: string;
  /** The operator's ConfigMap (the copies are NAME-stable and NAME-candidate). */
  readonly configMap: string;
  readonly nodes: readonly string[];
  /** The emulator's client: requests per second (and burst). */
  readonly qps: number;
  /** Heartbeat period of every emulated node (a real agent: 60 s). */
  readonly heartbeatMs: number;
  /** Writes in flight at once (the rate limiter paces them). */
  readonly writers?: number;
}

/** One emulated node: what it runs, and its Lease as last written. */
interface EmulatedNode {
  readonly name: string;
  readonly target: StatusLeaseTarget;
  /** The config hash it runs, and from which copy. */
  applied: string;
  role: StagedRole;
  generation: number;
  result: AppliedState['result'];
  lease: Lease | undefined;
  nextBeatAt: number;
}

/** What the emulator did so far (counters; the parent takes differences). */
export interface EmulatorFigures {
  readonly leaseWrites: number;
  readonly heartbeats: number;
  readonly stateWrites: number;
  readonly conflicts: number;
  readonly failures: number;
  readonly decisions: number;
  /** Nodes whose state change is not written yet. */
  readonly backlog: number;
}

export class EmulatedFleet {
  readonly requests: Requests = new Map();
  private readonly rest: RestCluster;
  private readonly leases: ResourceClient<Lease>;
  private readonly nodes: EmulatedNode[];
  private readonly copies: Record<StagedRole, Reflector<ConfigMap>>;
  private readonly names: Record<StagedRole, string>;
  /** Nodes with a state to write (changes first), then nodes whose heartbeat is due. */
  private readonly changed = new Set<EmulatedNode>();
  private readonly due = new Set<EmulatedNode>();
  private readonly inFlight = new Set<EmulatedNode>();
  private readonly stopping = new AbortController();
  private readonly contents = new WeakMap<ConfigMap, DesiredContent>();
  /** Writers waiting for something to write. */
  private idle: (() => void)[] = [];
  private decideSoon: NodeJS.Immediate | undefined;
  private beatTimer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> | undefined;
  private counts = { leaseWrites: 0, heartbeats: 0, stateWrites: 0, conflicts: 0, failures: 0, decisions: 0 };

  constructor(private readonly options: EmulatedFleetOptions) {
    const { connection, qps, namespace, instance, configMap } = options;
    this.rest = new RestCluster({ connection, qps, burst: Math.max(1, Math.round(qps)) });
    this.leases = counted(this.rest.leases, 'leases', this.requests);
    const configMaps = counted(this.rest.configMaps, 'configmaps', this.requests);
    this.names = {
      stable: stagedConfigMapName(configMap, 'stable'),
      candidate: stagedConfigMapName(configMap, 'candidate'),
    };
    const copy = (role: StagedRole): Reflector<ConfigMap> =>
      new Reflector<ConfigMap>({
        client: configMaps,
        clock: systemClock,
        logger: silentLogger,
        resource: `configmap ${namespace}/${this.names[role]}`,
        namespace,
        fieldSelector: `metadata.name=${this.names[role]}`,
        // The agent's API source relists every 5–10 min.
        relistPeriodMs: 300_000 + Math.round(Math.random() * 300_000),
        onChange: () => {
          this.schedule();
        },
      });
    this.copies = { stable: copy('stable'), candidate: copy('candidate') };
    this.nodes = options.nodes.map((name) => ({
      name,
      target: { name: statusLeaseName(instance, name), namespace, instance },
      applied: '',
      role: 'stable',
      generation: 1,
      result: 'started',
      lease: undefined,
      nextBeatAt: Infinity,
    }));
  }

  get figures(): EmulatorFigures {
    return { ...this.counts, backlog: this.changed.size };
  }

  /** Reads both copies, then creates every node's Lease on what it runs; resolves once all are written. */
  async start(): Promise<void> {
    const signal = this.stopping.signal;
    const watches = Promise.all([this.copies.stable.run(signal), this.copies.candidate.run(signal)]);
    await Promise.all([this.copies.stable.synced, this.copies.candidate.synced]);
    if (!this.decide(true)) throw new Error(`${this.names.stable} does not exist: is the controller running?`);
    const writers = Array.from({ length: this.options.writers ?? 24 }, () => this.writer());
    this.running = Promise.all([watches, ...writers]);
    while (this.nodes.some((n) => n.lease === undefined)) {
      if (signal.aborted) return;
      await delay(200);
    }
    this.beatTimer = setInterval(() => {
      this.beat();
    }, 1000);
  }

  async stop(): Promise<void> {
    clearInterval(this.beatTimer);
    if (this.decideSoon !== undefined) clearImmediate(this.decideSoon);
    this.stopping.abort();
    this.wakeWriters();
    await this.running;
    this.rest.close();
  }

  /** A copy changed: decide at once (an agent checks a watch event at once), events of one tick together. */
  private schedule(): void {
    if (this.decideSoon !== undefined || this.running === undefined) return;
    this.decideSoon = setImmediate(() => {
      this.decideSoon = undefined;
      this.decide(false);
    });
  }

  private content(configMap: ConfigMap, role: StagedRole): DesiredContent {
    let content = this.contents.get(configMap);
    if (content === undefined) {
      content = contentOf(this.options.namespace, this.names[role], configMap);
      this.contents.set(configMap, content);
    }
    return content;
  }

  /**
   * Every node's config under the copies now (StagedChoice's rule); the nodes whose hash changed
   * are queued. At start-up every node takes the stable copy as it is. False: no stable copy.
   */
  private decide(first: boolean): boolean {
    const stable = this.copies.stable.get(this.names.stable);
    const candidate = this.copies.candidate.get(this.names.candidate);
    if (stable === undefined) return false;
    this.counts.decisions += 1;
    const decoded = stateOf(candidate);
    const state = decoded?.ok === true ? decoded.state : undefined;
    const stableContent = this.content(stable, 'stable');
    // Only the stable copy the state names: the other watch may not have brought it yet.
    const stableVouched = first || state === undefined || stableContent.fingerprint === state.stable.fingerprint;
    const candidateHash = candidate === undefined ? undefined : this.content(candidate, 'candidate').hash;
    for (const node of this.nodes) {
      const role: StagedRole = runsCandidate(state, node.name) ? 'candidate' : 'stable';
      const hash = role === 'candidate' ? candidateHash : stableVouched ? stableContent.hash : undefined;
      if (hash === undefined || (hash === node.applied && role === node.role)) continue;
      node.role = role;
      if (hash === node.applied) continue;
      if (!first) {
        node.generation += 1;
        node.result = 'applied';
      }
      node.applied = hash;
      this.due.delete(node);
      this.changed.add(node);
    }
    this.wakeWriters();
    return true;
  }

  /** Queues every node whose heartbeat is due and that has nothing else to write. */
  private beat(): void {
    const now = Date.now();
    for (const node of this.nodes)
      if (node.nextBeatAt <= now && !this.changed.has(node) && !this.inFlight.has(node)) this.due.add(node);
    if (this.due.size > 0) this.wakeWriters();
  }

  private wakeWriters(): void {
    const idle = this.idle;
    this.idle = [];
    for (const wake of idle) wake();
  }

  /** The next node to write: a state change first, else a heartbeat; none in flight already. */
  private next(): { readonly node: EmulatedNode; readonly change: boolean } | undefined {
    for (const queue of [this.changed, this.due])
      for (const node of queue)
        if (!this.inFlight.has(node)) {
          queue.delete(node);
          return { node, change: queue === this.changed };
        }
    return undefined;
  }

  private async writer(): Promise<void> {
    while (!this.stopping.signal.aborted) {
      const next = this.next();
      if (next === undefined) {
        await new Promise<void>((resolve) => this.idle.push(resolve));
        continue;
      }
      this.inFlight.add(next.node);
      await this.write(next.node, next.change);
      this.inFlight.delete(next.node);
    }
  }

  private stateOf(node: EmulatedNode): AppliedState {
    const inUse = {
      kind: 'configmap',
      namespace: this.options.namespace,
      name: this.names[node.role],
      staged: true,
    } as const;
    return {
      node: node.name,
      appliedHash: node.applied,
      generation: node.generation,
      result: node.result,
      ...(node.result === 'applied' ? { candidateHash: node.applied } : {}),
      source: sourceLabel(inUse),
      agentVersion: 'bench-emulated',
    };
  }

  /** One Lease write (a state change or a heartbeat); on failure the node is queued again. */
  private async write(node: EmulatedNode, change: boolean): Promise<void> {
    const { heartbeatMs, namespace } = this.options;
    const lease = statusLease(node.target, this.stateOf(node), Date.now(), heartbeatMs * STALE_HEARTBEATS, node.lease);
    const ns = { namespace };
    try {
      node.lease = node.lease === undefined ? await this.leases.create(lease, ns) : await this.leases.update(lease, ns);
      this.counts.leaseWrites += 1;
      if (change) this.counts.stateWrites += 1;
      else this.counts.heartbeats += 1;
      node.nextBeatAt = Date.now() + Math.round(heartbeatMs * (0.9 + 0.2 * Math.random()));
    } catch (err) {
      if (this.stopping.signal.aborted) return;
      if (isConflict(err) || isAlreadyExists(err)) {
        this.counts.conflicts += 1;
        node.lease = await this.leases.get(node.target.name, ns).catch(() => undefined);
      } else {
        this.counts.failures += 1;
        if (isNotFound(err)) node.lease = undefined;
        await delay(500);
      }
      (change ? this.changed : this.due).add(node);
    }
  }
}
