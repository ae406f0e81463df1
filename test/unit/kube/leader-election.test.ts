import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ManualClock } from '../../../src/core/clock.js';
import type { ResourceClient } from '../../../src/core/kube/cluster.js';
import {
  DEFAULT_LEADER_ELECTION_TIMING,
  electionStep,
  LeaderElector,
  leaderElectionTimingProblem,
  observe,
  releasedLease,
} from '../../../src/core/kube/leader-election.js';
import { MemoryCluster } from '../../../src/core/kube/memory/memory-cluster.js';
import type { Lease } from '../../../src/core/kube/objects.js';
import { silentLogger } from '../../../src/core/log.js';

const TARGET = { name: 'node-cleanup', namespace: 'default', identity: 'a', leaseDurationMs: 15_000 };

function held(holder: string, renewTime = '2026-12-01T14:00:00.000000Z', transitions = 0): Lease {
  return {
    metadata: { name: 'node-cleanup', namespace: 'default', resourceVersion: '7' },
    spec: {
      holderIdentity: holder,
      leaseDurationSeconds: 15,
      acquireTime: '2026-12-01T13:00:00.000000Z',
      renewTime,
      leaseTransitions: transitions,
    },
  };
}

describe('leader election: the decision (client-go tryAcquireOrRenew)', () => {
  it('creates the lease when there is none', () => {
    const step = electionStep(TARGET, undefined, Date.parse('2026-12-01T14:00:00Z'));
    assert.ok(step.kind === 'create');
    assert.equal(step.lease.spec?.holderIdentity, 'a');
    assert.equal(step.lease.spec.leaseDurationSeconds, 15);
    assert.equal(step.lease.spec.renewTime, '2026-12-01T14:00:00.000000Z');
  });

  it('waits while another holder’s record changed less than its lease duration ago, by the local observation time', () => {
    // The remote renewTime is an hour old (clock skew or a stale record): only when this candidate
    // saw the record change counts.
    const observedAt = 1_000_000;
    const observation = observe(undefined, held('b', '2026-12-01T13:00:00.000000Z'), observedAt);
    const step = electionStep(TARGET, observation, observedAt + 14_999);
    assert.deepEqual(step, { kind: 'wait', holder: 'b', expiresAt: observedAt + 15_000 });
    const later = electionStep(TARGET, observation, observedAt + 15_000);
    assert.ok(later.kind === 'update' && later.acquiring);
    assert.equal(later.lease.spec?.holderIdentity, 'a');
    assert.equal(later.lease.spec.leaseTransitions, 1, 'a takeover counts a transition');
    assert.equal(later.lease.metadata.resourceVersion, '7', 'the write is conditional on what was read');
  });

  it('an unchanged record keeps its first observation time; a changed one restarts it', () => {
    const first = observe(undefined, held('b'), 100);
    assert.equal(observe(first, held('b'), 9_000).changedAt, 100);
    assert.equal(observe(first, held('b', '2026-12-01T14:00:02.000000Z'), 9_000).changedAt, 9_000);
  });

  it('renews its own lease keeping acquireTime and transitions; takes a released (holderless) lease at once', () => {
    const mine = observe(undefined, held('a', undefined, 3), 0);
    const renew = electionStep(TARGET, mine, 1_000);
    assert.ok(renew.kind === 'update' && !renew.acquiring);
    assert.equal(renew.lease.spec?.acquireTime, '2026-12-01T13:00:00.000000Z');
    assert.equal(renew.lease.spec.leaseTransitions, 3);
    const released = observe(undefined, releasedLease(observe(undefined, held('b', undefined, 3), 0), 0), 5);
    assert.equal(released.record.holderIdentity, '');
    const take = electionStep(TARGET, released, 6);
    assert.ok(take.kind === 'update' && take.acquiring);
    assert.equal(take.lease.spec?.leaseTransitions, 4);
  });

  it('refuses timings that cannot keep a single leader', () => {
    assert.equal(leaderElectionTimingProblem(DEFAULT_LEADER_ELECTION_TIMING), undefined);
    assert.match(
      leaderElectionTimingProblem({ leaseDurationMs: 10_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 }) ?? '',
      /greater than the renew deadline/,
    );
    assert.match(
      leaderElectionTimingProblem({ leaseDurationMs: 15_000, renewDeadlineMs: 2_000, retryPeriodMs: 2_000 }) ?? '',
      /1\.2/,
    );
  });
});

/** A lease client that can be cut off: its requests then hang (a partitioned replica). */
function cuttable(client: ResourceClient<Lease>): { client: ResourceClient<Lease>; cut: () => void } {
  let cut = false;
  const hang = <T>(): Promise<T> => new Promise<T>(() => undefined);
  return {
    cut: () => {
      cut = true;
    },
    client: {
      ...client,
      get: (name, options) => (cut ? hang() : client.get(name, options)),
      create: (object, options) => (cut ? hang() : client.create(object, options)),
      update: (object, options) => (cut ? hang() : client.update(object, options)),
    },
  };
}

interface Replica {
  readonly elector: LeaderElector;
  readonly stop: AbortController;
  readonly done: Promise<void>;
  readonly cut: () => void;
}

function replica(cluster: MemoryCluster, clock: ManualClock, identity: string): Replica {
  const { client, cut } = cuttable(cluster.leases);
  const elector = new LeaderElector({
    leases: client,
    name: 'node-cleanup',
    namespace: 'default',
    identity,
    clock,
    logger: silentLogger,
    random: () => 0.5,
  });
  const stop = new AbortController();
  return { elector, stop, done: elector.run(stop.signal), cut };
}

/** Read through a call: the getter's value changes across awaits. */
function leads(r: Replica): boolean {
  return r.elector.leading !== undefined;
}

/** Advances the clock in small steps, asserting at every step that at most one replica leads. */
async function advance(clock: ManualClock, ms: number, replicas: readonly Replica[]): Promise<void> {
  for (let t = 0; t < ms; t += 100) {
    await clock.advance(100);
    // Let the requests (promise chains on the in-memory apiserver) settle.
    await new Promise((resolve) => setImmediate(resolve));
    const leaders = replicas.filter(leads).map((r) => r.elector.identity);
    assert.ok(leaders.length <= 1, `two leaders at ${String(clock.now())}: ${leaders.join(', ')}`);
  }
}

describe('leader election: replicas on the in-memory apiserver and a manual clock', () => {
  it('one replica leads; when it is cut off it stops acting before the other takes over', async () => {
    const clock = new ManualClock(Date.parse('2026-12-01T14:00:00Z'));
    const cluster = new MemoryCluster({ clock });
    const a = replica(cluster, clock, 'a');
    await advance(clock, 100, [a]);
    assert.ok(leads(a), 'the first replica acquires a new lease at once');
    const b = replica(cluster, clock, 'b');
    await advance(clock, 60_000, [a, b]);
    assert.ok(leads(a) && !leads(b), 'renewals keep b waiting');
    const term = a.elector.leading;
    assert.ok(term !== undefined);
    const lastRenew = Date.parse((await cluster.leases.get('node-cleanup')).spec?.renewTime ?? '');
    a.cut();
    await advance(clock, 12_500, [a, b]);
    assert.equal(term.aborted, true, 'a stops acting within the renew deadline (+ one retry period)');
    assert.ok(!leads(b), 'b does not lead before the lease can have expired');
    let tookOverAt: number | undefined;
    for (let i = 0; i < 200 && tookOverAt === undefined; i++) {
      await advance(clock, 100, [a, b]);
      if (leads(b)) tookOverAt = clock.now();
    }
    assert.ok(tookOverAt !== undefined, 'b takes over');
    assert.ok(
      tookOverAt - lastRenew >= 15_000,
      `b waited out the lease duration after a's last renewal (${String(tookOverAt - lastRenew)} ms)`,
    );
    const lease = await cluster.leases.get('node-cleanup');
    assert.equal(lease.spec?.holderIdentity, 'b');
    assert.equal(lease.spec.leaseTransitions, 1);
    a.stop.abort();
    b.stop.abort();
    await a.done;
    await b.done;
  });

  it('release clears the holder: the other replica takes over at its next retry, not after the lease duration', async () => {
    const clock = new ManualClock(Date.parse('2026-12-01T14:00:00Z'));
    const cluster = new MemoryCluster({ clock });
    const a = replica(cluster, clock, 'a');
    await advance(clock, 100, [a]);
    const b = replica(cluster, clock, 'b');
    await advance(clock, 10_000, [a, b]);
    const term = a.elector.leading;
    assert.ok(term !== undefined);
    a.stop.abort();
    await a.done;
    assert.equal(term.aborted, true, 'stopping ends the term before the release');
    assert.equal(await a.elector.release(), true);
    assert.equal((await cluster.leases.get('node-cleanup')).spec?.holderIdentity, '');
    const releasedAt = clock.now();
    let tookOverAt: number | undefined;
    for (let i = 0; i < 100 && tookOverAt === undefined; i++) {
      await advance(clock, 100, [a, b]);
      if (leads(b)) tookOverAt = clock.now();
    }
    assert.ok(tookOverAt !== undefined && tookOverAt - releasedAt <= 2 * 2_000 * 1.2 + 200, 'b took over at once');
    b.stop.abort();
    await b.done;
    assert.equal(await a.elector.release(), false, 'a does not hold it any more: nothing to release');
  });

  it('two candidates racing for a fresh lease: one wins (the other gets a 409)', async () => {
    const clock = new ManualClock(Date.parse('2026-12-01T14:00:00Z'));
    const cluster = new MemoryCluster({ clock });
    const replicas = ['a', 'b', 'c'].map((id) => replica(cluster, clock, id));
    await advance(clock, 30_000, replicas);
    assert.equal(replicas.filter(leads).length, 1);
    for (const r of replicas) r.stop.abort();
    await Promise.all(replicas.map((r) => r.done));
  });
});
