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
import { leaseFaults } from '../../support/lease-faults.js';

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

function replica(
  cluster: MemoryCluster,
  clock: ManualClock,
  identity: string,
  leases: ResourceClient<Lease> = cluster.leases,
): Replica {
  const { client, cut } = cuttable(leases);
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

/** Advances the clock until `done` has resolved (a request the elector sends at its next retry). */
async function advanceUntil(clock: ManualClock, done: Promise<void>, replicas: readonly Replica[]): Promise<void> {
  const state = { settled: false };
  void done.then(() => (state.settled = true));
  for (let i = 0; i < 200 && !state.settled; i++) await advance(clock, 100, replicas);
  assert.ok(state.settled, 'the awaited request was sent');
}

/** Advances until `r` leads; the time it took. */
async function untilLeads(clock: ManualClock, r: Replica, replicas: readonly Replica[]): Promise<number> {
  const from = clock.now();
  for (let i = 0; i < 200 && !leads(r); i++) await advance(clock, 100, replicas);
  assert.ok(leads(r), `${r.elector.identity} leads`);
  return clock.now() - from;
}

/** The retry period (2 s) with the largest jitter, and a step: a handover without waiting out the lease. */
const AT_NEXT_RETRY_MS = 2_000 * 2.2 + 200;

async function holderOf(cluster: MemoryCluster): Promise<string | undefined> {
  return (await cluster.leases.get('node-cleanup')).spec?.holderIdentity;
}

describe('leader election: the release when a replica stops', () => {
  it('a renew whose write landed but whose answer had not come at the stop: the release reads again and clears the holder', async () => {
    // The rollout controller's 409 ("the object has been modified"): the stop abandoned a renew in
    // flight, whose write bumped the resourceVersion the release was about to write at.
    const clock = new ManualClock(Date.parse('2026-12-01T14:00:00Z'));
    const cluster = new MemoryCluster({ clock });
    const faults = leaseFaults(cluster.leases);
    const a = replica(cluster, clock, 'a', faults.client);
    await advance(clock, 100, [a]);
    const b = replica(cluster, clock, 'b');
    await advance(clock, 3_000, [a, b]);
    const held = faults.holdNextReply();
    await advanceUntil(clock, held.reached, [a, b]);
    a.stop.abort();
    await a.done;
    const releasing = a.elector.release();
    held.deliver();
    assert.equal(await releasing, true, 'released');
    assert.equal(await holderOf(cluster), '');
    assert.ok((await untilLeads(clock, b, [a, b])) <= AT_NEXT_RETRY_MS, 'b takes over at its next retry');
    b.stop.abort();
    await b.done;
  });

  it('a 409 on the first release write (another write since the read): it reads again and retries', async () => {
    const clock = new ManualClock(Date.parse('2026-12-01T14:00:00Z'));
    const cluster = new MemoryCluster({ clock });
    const faults = leaseFaults(cluster.leases);
    const a = replica(cluster, clock, 'a', faults.client);
    await advance(clock, 2_500, [a]);
    assert.ok(leads(a));
    a.stop.abort();
    await a.done;
    // A late renew of a's (still a's, a newer resourceVersion) lands between the read and the write.
    faults.beforeNextRelease(async () => {
      const current = await cluster.leases.get('node-cleanup');
      await cluster.leases.update({ ...current, spec: { ...current.spec, renewTime: '2026-12-01T14:00:03.000000Z' } });
    });
    assert.equal(await a.elector.release(), true);
    assert.equal(faults.releaseWrites, 2, 'the first write got the 409, the second released');
    assert.equal(await holderOf(cluster), '');
  });

  it('never clears a successor: a lease another replica took (before, or between the read and the write) is left to it', async () => {
    for (const when of ['before the stop', 'between the read and the write'] as const) {
      const clock = new ManualClock(Date.parse('2026-12-01T14:00:00Z'));
      const cluster = new MemoryCluster({ clock });
      const faults = leaseFaults(cluster.leases);
      const a = replica(cluster, clock, 'a', faults.client);
      await advance(clock, 2_500, [a]);
      assert.ok(leads(a));
      a.stop.abort();
      await a.done;
      // c took the lease over (after a partition a has not noticed, say).
      const takeOver = async (): Promise<void> => {
        const current = await cluster.leases.get('node-cleanup');
        await cluster.leases.update({ ...current, spec: { ...current.spec, holderIdentity: 'c' } });
      };
      if (when === 'before the stop') await takeOver();
      else faults.beforeNextRelease(takeOver);
      const before = await cluster.leases.get('node-cleanup');
      assert.equal(await a.elector.release(), false, `${when}: nothing of a's to release`);
      const after = await cluster.leases.get('node-cleanup');
      assert.equal(after.spec?.holderIdentity, 'c', `${when}: c keeps the lease`);
      if (when === 'before the stop')
        assert.equal(after.metadata.resourceVersion, before.metadata.resourceVersion, 'not written at all');
    }
  });

  it('a renew still on its way at the stop (its read not answered yet): the release waits for it, so it cannot take the lease back', async () => {
    // Released first, that renew would read a holderless lease and take it: a stopped leader.
    const clock = new ManualClock(Date.parse('2026-12-01T14:00:00Z'));
    const cluster = new MemoryCluster({ clock });
    const faults = leaseFaults(cluster.leases);
    const a = replica(cluster, clock, 'a', faults.client);
    await advance(clock, 2_500, [a]);
    assert.ok(leads(a));
    const read = faults.holdNextRead();
    await advanceUntil(clock, read.reached, [a]);
    a.stop.abort();
    await a.done;
    const releasing = a.elector.release();
    // One turn for the release's requests (the in-memory apiserver answers within it), then the renew's.
    await new Promise((resolve) => setImmediate(resolve));
    read.deliver();
    assert.equal(await releasing, true);
    await faults.idle();
    assert.equal(await holderOf(cluster), '', 'the renew did not take the lease back');
  });

  it('a candidate stopped with its acquire in flight: the lease its late write took is released', async () => {
    const clock = new ManualClock(Date.parse('2026-12-01T14:00:00Z'));
    const cluster = new MemoryCluster({ clock });
    const a = replica(cluster, clock, 'a');
    await advance(clock, 100, [a]);
    const faults = leaseFaults(cluster.leases);
    const b = replica(cluster, clock, 'b', faults.client);
    await advance(clock, 3_000, [a, b]);
    const held = faults.holdNextReply();
    a.stop.abort();
    await a.done;
    assert.equal(await a.elector.release(), true);
    // b's next retry takes the released lease; it is stopped before it hears so.
    await advanceUntil(clock, held.reached, [a, b]);
    assert.equal(await holderOf(cluster), 'b');
    b.stop.abort();
    await b.done;
    const releasing = b.elector.release();
    held.deliver();
    assert.equal(await releasing, true, 'released');
    assert.equal(b.elector.leading, undefined, 'b never acted');
    assert.equal(await holderOf(cluster), '');
  });
});
