// The controller's view of the fleet, kept up to date one event at a time: the Nodes, the
// freshest status Lease of each, and the open waves' progress of the rollout in flight. A Lease
// that changes costs a map update and a heap push (O(log n)), not a walk of 10,000 nodes; the
// walk happens once per rollout state written (a wave opening), when membership can change. Its
// answers equal walkOpenWaves' (open-waves.ts) for the same nodes, reports and time.
import type { PublishedState } from '../fleet/applied-state.js';
import {
  beforeInWaveOrder,
  nodeProgress,
  reportedProgress,
  rolloutWaveOf,
  staleAt,
  type OpenWaveNode,
  type OpenWaveProgress,
} from './open-waves.js';
import type { RolloutState } from '../rollout-state/state.js';
import type { Wave } from '../rollout-state/membership.js';
import type { FleetNode } from './waves.js';

type Kind = 'applied' | 'pending' | 'failed' | 'stale';

interface Member {
  readonly wave: number;
  kind: Kind;
  readonly staleAt: number | undefined;
}

interface Due {
  readonly at: number;
  readonly node: string;
}

/** A binary min-heap of due times (ties in any order). */
class DueHeap {
  private readonly items: Due[] = [];

  get size(): number {
    return this.items.length;
  }

  peek(): Due | undefined {
    return this.items[0];
  }

  push(item: Due): void {
    const a = this.items;
    a.push(item);
    for (let i = a.length - 1; i > 0;) {
      const parent = (i - 1) >> 1;
      const [p, c] = [a[parent], a[i]];
      if (p === undefined || c === undefined || p.at <= c.at) break;
      [a[parent], a[i]] = [c, p];
      i = parent;
    }
  }

  pop(): Due | undefined {
    const a = this.items;
    const top = a[0];
    const last = a.pop();
    if (a.length === 0 || last === undefined) return top;
    a[0] = last;
    for (let i = 0; ;) {
      const [l, r] = [2 * i + 1, 2 * i + 2];
      let least = i;
      if ((a[l]?.at ?? Infinity) < (a[least]?.at ?? Infinity)) least = l;
      if ((a[r]?.at ?? Infinity) < (a[least]?.at ?? Infinity)) least = r;
      if (least === i) break;
      const [x, y] = [a[i], a[least]];
      if (x === undefined || y === undefined) break;
      [a[i], a[least]] = [y, x];
      i = least;
    }
    return top;
  }
}

const wavesKeys = new WeakMap<readonly Wave[], string>();

/** What a rollout's membership depends on (not `opened`: open waves are a prefix, read at query time). */
function rolloutKey(state: RolloutState): string {
  let waves = wavesKeys.get(state.waves);
  if (waves === undefined) {
    waves = JSON.stringify(state.waves);
    wavesKeys.set(state.waves, waves);
  }
  return `${String(state.startedAt)}\u0000${state.candidate.hash ?? ''}\u0000${waves}`;
}

/** The progress of one rollout's nodes, by wave, updated per node. */
class TrackedRollout {
  private readonly members = new Map<string, Member>();
  private readonly counts: Record<Kind, number>[];
  private readonly failing = new Set<string>();
  private readonly pending = new Set<string>();
  private readonly due: DueHeap[];
  private readonly hash: string;

  constructor(
    readonly key: string,
    public state: RolloutState,
    /** The time the stale kinds are as of; never goes back (a clock that does rebuilds the rollout). */
    public now: number,
  ) {
    this.hash = state.candidate.hash ?? '';
    this.counts = state.waves.map(() => ({ applied: 0, pending: 0, failed: 0, stale: 0 }));
    this.due = state.waves.map(() => new DueHeap());
  }

  /** The node's membership and progress from its report (undefined: no Node or no Lease). */
  update(node: string, report: PublishedState | undefined): void {
    this.remove(node);
    const wave = rolloutWaveOf(this.state, node, report);
    if (wave === undefined || report === undefined) return;
    const at = staleAt(report);
    const fresh = reportedProgress(this.hash, report).kind;
    const kind: Kind = at !== undefined && this.now > at ? 'stale' : fresh === 'gone' ? 'pending' : fresh;
    this.members.set(node, { wave, kind, staleAt: at });
    this.count(node, wave, kind, 1);
    const heap = this.due[wave];
    if (kind !== 'stale' && at !== undefined && heap !== undefined) {
      heap.push({ at, node });
      if (heap.size > 4 * this.members.size + 64) this.compact(wave);
    }
  }

  /** Marks the nodes whose heartbeat went stale by `now`. */
  advanceTo(now: number): void {
    this.now = now;
    this.due.forEach((heap) => {
      for (let top = heap.peek(); top !== undefined && top.at < now; top = heap.peek()) {
        heap.pop();
        const m = this.members.get(top.node);
        if (m?.staleAt !== top.at || m.kind === 'stale') continue;
        this.count(top.node, m.wave, m.kind, -1);
        m.kind = 'stale';
        this.count(top.node, m.wave, 'stale', 1);
      }
    });
  }

  progress(reportOf: (node: string) => PublishedState | undefined): OpenWaveProgress {
    const { opened } = this.state;
    const totals = { applied: 0, pending: 0, failed: 0 };
    for (const c of this.counts.slice(0, opened)) {
      totals.applied += c.applied;
      totals.pending += c.pending;
      totals.failed += c.failed + c.stale;
    }
    const why = (node: string): string => {
      const p = nodeProgress(node, this.hash, reportOf(node), true, this.now);
      return p.kind === 'failed' || p.kind === 'pending' ? p.why : '';
    };
    const failure = this.first(this.failing);
    return {
      ...totals,
      firstFailure: failure === undefined ? undefined : { ...failure, why: why(failure.node) },
      firstPending: () => {
        const pending = this.first(this.pending);
        return pending === undefined ? undefined : { ...pending, why: why(pending.node) };
      },
      nextStaleAt: this.nextStaleAt(),
    };
  }

  private first(nodes: ReadonlySet<string>): Omit<OpenWaveNode, 'why'> | undefined {
    let first: { node: string; wave: number } | undefined;
    for (const node of nodes) {
      const wave = this.members.get(node)?.wave;
      if (wave === undefined || wave >= this.state.opened) continue;
      const here = { node, wave };
      if (first === undefined || beforeInWaveOrder(here, first)) first = here;
    }
    return first;
  }

  private nextStaleAt(): number | undefined {
    let next: number | undefined;
    this.due.slice(0, this.state.opened).forEach((heap) => {
      // Entries of a report since replaced, or of a node gone, are dropped when they reach the top.
      for (let top = heap.peek(); top !== undefined; top = heap.peek()) {
        const m = this.members.get(top.node);
        if (m?.staleAt === top.at && m.kind !== 'stale') {
          next = Math.min(next ?? Infinity, top.at + 1);
          break;
        }
        heap.pop();
      }
    });
    return next;
  }

  private remove(node: string): void {
    const m = this.members.get(node);
    if (m === undefined) return;
    this.count(node, m.wave, m.kind, -1);
    this.members.delete(node);
  }

  private count(node: string, wave: number, kind: Kind, delta: 1 | -1): void {
    const c = this.counts[wave];
    if (c !== undefined) c[kind] += delta;
    const set = kind === 'pending' ? this.pending : kind === 'applied' ? undefined : this.failing;
    if (delta > 0) set?.add(node);
    else set?.delete(node);
  }

  private compact(wave: number): void {
    const heap = new DueHeap();
    for (const [node, m] of this.members)
      if (m.wave === wave && m.kind !== 'stale' && m.staleAt !== undefined) heap.push({ at: m.staleAt, node });
    this.due[wave] = heap;
  }
}

function sameLabels(a: FleetNode, b: FleetNode): boolean {
  const [x, y] = [a.labels ?? {}, b.labels ?? {}];
  const keys = Object.keys(x);
  return keys.length === Object.keys(y).length && keys.every((k) => x[k] === y[k]);
}

/** The Nodes and status Leases the controller watches, and the rollout in flight's progress over them. */
export class FleetIndex {
  private readonly nodeByName = new Map<string, FleetNode>();
  private nodeList: readonly FleetNode[] | undefined;
  private readonly leaseReports = new Map<string, PublishedState>();
  private readonly leasesOfNode = new Map<string, Set<string>>();
  private readonly freshest = new Map<string, PublishedState>();
  private rollout: TrackedRollout | undefined;

  /** Each node's freshest published state (several Leases of one node: a copied instance). */
  get reports(): ReadonlyMap<string, PublishedState> {
    return this.freshest;
  }

  nodes(): readonly FleetNode[] {
    this.nodeList ??= [...this.nodeByName.values()];
    return this.nodeList;
  }

  /** A Node added or changed; returns whether it is new or its labels changed. */
  setNode(node: FleetNode): boolean {
    const known = this.nodeByName.get(node.name);
    if (known !== undefined && sameLabels(known, node)) return false;
    this.nodeByName.set(node.name, node);
    this.nodeList = undefined;
    if (known === undefined) this.rollout?.update(node.name, this.freshest.get(node.name));
    return true;
  }

  deleteNode(name: string): void {
    if (!this.nodeByName.delete(name)) return;
    this.nodeList = undefined;
    this.rollout?.update(name, undefined);
  }

  /** A status Lease added or changed (`key`: its name); undefined: it carries no state. */
  setLease(key: string, report: PublishedState | undefined): void {
    const before = this.leaseReports.get(key)?.node;
    if (report === undefined) this.leaseReports.delete(key);
    else this.leaseReports.set(key, report);
    if (before !== undefined && before !== report?.node) this.leasesOfNode.get(before)?.delete(key);
    if (report !== undefined) {
      const keys = this.leasesOfNode.get(report.node) ?? new Set<string>();
      keys.add(key);
      this.leasesOfNode.set(report.node, keys);
      this.refreshNode(report.node);
    }
    if (before !== undefined && before !== report?.node) this.refreshNode(before);
  }

  deleteLease(key: string): void {
    this.setLease(key, undefined);
  }

  /** The open waves' progress of `state` at `now` (membership rebuilt when the rollout's plan changed). */
  openWaves(state: RolloutState, now: number): OpenWaveProgress {
    const key = rolloutKey(state);
    let rollout = this.rollout;
    if (rollout?.key !== key || now < rollout.now) {
      rollout = new TrackedRollout(key, state, now);
      for (const name of this.nodeByName.keys()) rollout.update(name, this.freshest.get(name));
      this.rollout = rollout;
    }
    rollout.state = state;
    rollout.advanceTo(now);
    return rollout.progress((node) => this.freshest.get(node));
  }

  /** The node's freshest report from its Leases, and its progress in the rollout. */
  private refreshNode(node: string): void {
    let best: PublishedState | undefined;
    const keys = this.leasesOfNode.get(node);
    for (const key of keys ?? []) {
      const r = this.leaseReports.get(key);
      if (r !== undefined && (best === undefined || (r.heartbeatAt ?? 0) > (best.heartbeatAt ?? 0))) best = r;
    }
    if (best === undefined) {
      this.freshest.delete(node);
      this.leasesOfNode.delete(node);
    } else this.freshest.set(node, best);
    if (this.nodeByName.has(node)) this.rollout?.update(node, best);
  }
}
