// assert.equal(x?.a, v) narrows x to defined for the reads after it, which still read as optional here.
/* eslint-disable @typescript-eslint/no-unnecessary-condition */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { NO_PASS } from '../../../src/core/fleet/applied-state.js';
import type { AppliedResult, PublishedState } from '../../../src/core/fleet/applied-state.js';
import { decide, EVENT_REASONS, nodeProgress } from '../../../src/core/staged-rollout/decide.js';
import type { DesiredContent, RolloutDecision, RolloutView } from '../../../src/core/staged-rollout/decide.js';
import { DEFAULT_POLICY } from '../../../src/core/staged-rollout/policy.js';
import type { StagedRolloutPolicy } from '../../../src/core/staged-rollout/policy.js';
import { decodeRolloutState, encodeRolloutState, runsCandidate } from '../../../src/core/rollout-state/state.js';
import type { ContentRef, RolloutRequest, RolloutState } from '../../../src/core/rollout-state/state.js';
import { waveIndexOf, waveMembers } from '../../../src/core/rollout-state/membership.js';

const h = (c: string): string => `sha256:${c.repeat(64)}`;
const STABLE: ContentRef = { fingerprint: h('1'), hash: h('a') };
const CANDIDATE: DesiredContent = { fingerprint: h('2'), hash: h('b') };
const OTHER: DesiredContent = { fingerprint: h('3'), hash: h('c') };
const T0 = 1_800_000_000_000;

const POLICY: StagedRolloutPolicy = {
  ...DEFAULT_POLICY,
  canary: { kind: 'count', count: 1 },
  waves: [
    { kind: 'percent', value: 50 },
    { kind: 'percent', value: 100 },
  ],
  bakeMs: 60_000,
  progressDeadlineMs: 600_000,
};

/** The canary's first node among `fleet` (waves are rank bounds: their nodes depend on the fleet). */
const canaryOf = (state: RolloutState | undefined, fleet: readonly string[]): string =>
  waveMembers(state?.waves ?? [], fleet)[0]?.[0] ?? '';

function report(node: string, appliedHash: string, now: number, extra: Partial<PublishedState> = {}): PublishedState {
  return {
    node,
    appliedHash,
    generation: 1,
    result: 'applied',
    source: 'staged',
    agentVersion: 'test',
    heartbeatAt: now,
    staleAfterMs: 180_000,
    ...extra,
  };
}

/** A fleet whose agents each apply what runsCandidate says, unless `fails` says the node rejects the candidate. */
class Fleet {
  now = T0;
  stable: ContentRef | undefined = STABLE;
  state: RolloutState | undefined;
  request: RolloutRequest | undefined;
  desired: DesiredContent | undefined = CANDIDATE;
  readonly reports = new Map<string, PublishedState>();
  readonly everRanCandidate = new Set<string>();
  readonly events: string[] = [];
  readonly openedOrder: number[] = [];

  constructor(
    readonly nodes: readonly string[],
    readonly policy: StagedRolloutPolicy = POLICY,
    readonly fails: ReadonlySet<string> = new Set(),
    /** Nodes without a running agent: their reports stay as the test sets them. */
    public offline: ReadonlySet<string> = new Set(),
    /** How the nodes of `fails` fail with the candidate: reject it, or find errors in their first pass under it. */
    readonly failHow: 'rejects' | 'discovery' = 'rejects',
  ) {
    for (const n of nodes) this.reports.set(n, report(n, STABLE.hash ?? '', this.now));
  }

  view(): RolloutView {
    return {
      now: this.now,
      policy: this.policy,
      desired: this.desired,
      stable: this.stable,
      state: this.state,
      request: this.request,
      nodes: this.nodes.map((name) => ({ name })),
      reports: this.reports,
    };
  }

  apply(d: RolloutDecision): void {
    if (d.stable === 'candidate' && this.state !== undefined) this.stable = this.state.candidate;
    if (d.stable === 'desired' && this.desired !== undefined) this.stable = this.desired;
    if (d.state !== undefined) {
      // Every write goes through the annotation: what the agents and the next decision read.
      const decoded = decodeRolloutState(encodeRolloutState(d.state.state));
      assert.ok(decoded.ok, decoded.ok ? '' : decoded.reason);
      if (this.state === undefined || decoded.state.opened !== this.state.opened)
        this.openedOrder.push(decoded.state.opened);
      this.state = decoded.state;
    }
    if (d.clearRequest) this.request = undefined;
    for (const e of d.events) this.events.push(e.reason);
  }

  /**
   * The agents react: each applies candidate or stable (or rejects the candidate). As a real agent
   * does, one that applies a config publishes it before its first discovery pass under it (no pass
   * yet), and the pass's errors at the next reaction: a node of `fails` with `failHow` 'discovery'
   * applies the candidate, and its first pass under it records an error.
   */
  agents(): void {
    for (const n of this.nodes) {
      if (this.offline.has(n)) continue;
      const wantCandidate = runsCandidate(this.state, n);
      const candidateHash = this.state?.candidate.hash ?? '';
      if (wantCandidate && this.fails.has(n) && this.failHow === 'rejects') {
        this.reports.set(
          n,
          report(n, this.stable?.hash ?? '', this.now, {
            result: 'rejected',
            candidateHash,
            reason: 'class x does not validate here',
          }),
        );
        continue;
      }
      if (wantCandidate) this.everRanCandidate.add(n);
      const hash = wantCandidate ? candidateHash : (this.stable?.hash ?? '');
      const previous = this.reports.get(n);
      if (previous?.appliedHash !== hash) {
        this.reports.set(n, report(n, hash, this.now, { lastPassHash: NO_PASS }));
        continue;
      }
      const errors =
        previous.lastPassHash === NO_PASS
          ? wantCandidate && this.fails.has(n)
            ? 1
            : 0
          : (previous.errorsSinceApply ?? 0);
      this.reports.set(
        n,
        report(n, hash, this.now, { lastPassHash: hash, ...(errors > 0 ? { errorsSinceApply: errors } : {}) }),
      );
    }
  }

  /** Decides until nothing changes, lets the agents react, advances the clock to the next wake. */
  step(): void {
    for (let i = 0; i < 50; i++) {
      const d = decide(this.view());
      this.apply(d);
      if (d.state === undefined && d.stable === undefined) {
        this.agents();
        const again = decide(this.view());
        this.apply(again);
        if (again.state === undefined && again.stable === undefined) {
          this.now = Math.max(this.now + 1000, again.wakeAt ?? this.now + 1000);
          this.agents();
        }
        return;
      }
    }
    assert.fail('decide did not settle in 50 steps');
  }

  run(steps = 60): void {
    for (let i = 0; i < steps && this.state?.phase !== 'complete' && this.state?.phase !== 'halted'; i++) this.step();
  }
}

const names = (n: number): string[] => Array.from({ length: n }, (_, i) => `node-${String(i)}`);

describe('staged rollout decide()', () => {
  it('adopts the ConfigMap as stable on the first start, and starts nothing', () => {
    const f = new Fleet(names(3));
    f.stable = undefined;
    const d = decide(f.view());
    assert.equal(d.stable, 'desired');
    assert.equal(d.state?.state.phase, 'complete');
    assert.deepEqual(
      d.events.map((e) => e.reason),
      [EVENT_REASONS.adopted],
    );
  });

  it('opens the canary first, then each wave after its bake, then makes the candidate stable', () => {
    const f = new Fleet(names(10));
    f.step();
    assert.equal(f.state?.phase, 'progressing');
    assert.equal(f.state?.opened, 1);
    assert.equal(f.state?.waves[0]?.name, 'canary');
    assert.equal(f.everRanCandidate.size, 1, 'only the canary took the candidate');
    f.run();
    assert.equal(f.state?.phase, 'complete');
    assert.deepEqual(f.stable, { fingerprint: CANDIDATE.fingerprint, hash: CANDIDATE.hash });
    assert.deepEqual(f.openedOrder, [1, 2, 3]);
    assert.ok(f.events.includes(EVENT_REASONS.completed));
    // Each wave baked: the rollout took at least (waves × bake).
    assert.ok(f.now - T0 >= 3 * POLICY.bakeMs, `took ${String(f.now - T0)} ms`);
  });

  it('halts at the canary when the canary rejects the candidate: no other node ever runs it, the canary reverts', () => {
    const probe = new Fleet(names(8));
    probe.step();
    const canary = canaryOf(probe.state, names(8));
    const f = new Fleet(names(8), POLICY, new Set([canary]));
    f.run();
    assert.equal(f.state?.phase, 'halted');
    assert.equal(f.state?.halt?.node, canary);
    assert.equal(f.state?.halt?.wave, 0);
    assert.match(f.state?.halt?.reason ?? '', /rejected the candidate: class x does not validate here/);
    assert.equal(f.state?.reverted, true);
    assert.equal(f.everRanCandidate.size, 0);
    assert.ok(names(8).every((n) => !runsCandidate(f.state, n)));
    assert.deepEqual(f.stable, STABLE, 'stable is unchanged');
    assert.ok(f.events.includes(EVENT_REASONS.halted));
  });

  it('on halt "halt" leaves the open waves on the candidate', () => {
    const probe = new Fleet(names(8));
    probe.step();
    const canary = canaryOf(probe.state, names(8));
    const f = new Fleet(names(8), { ...POLICY, onHalt: 'halt' }, new Set([canary]));
    f.run();
    assert.equal(f.state?.phase, 'halted');
    assert.equal(f.state?.reverted, false);
    assert.equal(runsCandidate(f.state, canary), true);
  });

  it('halts on a stale heartbeat, on errors since apply, and at the progress deadline', () => {
    const f = new Fleet(names(4));
    f.step();
    const canary = canaryOf(f.state, names(4));
    // Stale: the canary ran at the start, and its last heartbeat is now older than its staleAfter.
    f.reports.set(canary, report(canary, CANDIDATE.hash ?? '', f.state?.startedAt ?? 0));
    f.now = (f.state?.startedAt ?? 0) + 200_000;
    f.apply(decide(f.view()));
    assert.equal(f.state?.phase, 'halted');
    assert.match(f.state?.halt?.reason ?? '', /heartbeat is stale/);

    const g = new Fleet(names(4));
    g.step();
    const c2 = canaryOf(g.state, names(4));
    g.reports.set(c2, report(c2, CANDIDATE.hash ?? '', g.now, { errorsSinceApply: 2 }));
    g.apply(decide(g.view()));
    assert.equal(g.state?.phase, 'halted');
    assert.match(g.state?.halt?.reason ?? '', /2 discovery or cleanup errors/);

    const k = new Fleet(names(4));
    k.step();
    const c3 = canaryOf(k.state, names(4));
    // alive (a fresh heartbeat) but still on stable
    k.now = (k.state?.waveOpenedAt ?? 0) + POLICY.progressDeadlineMs - 1;
    k.reports.set(c3, report(c3, STABLE.hash ?? '', k.now));
    const waiting = decide(k.view());
    assert.equal(waiting.state, undefined);
    assert.equal(waiting.wakeAt, (k.state?.waveOpenedAt ?? 0) + POLICY.progressDeadlineMs);
    k.now += 1;
    k.reports.set(c3, report(c3, STABLE.hash ?? '', k.now));
    k.apply(decide(k.view()));
    assert.equal(k.state?.phase, 'halted');
    assert.match(k.state?.halt?.reason ?? '', /did not apply the candidate within 600s/);
  });

  it('plans over and waits for the nodes that run an agent (a fresh status Lease); the others hold no wave back', () => {
    const f = new Fleet(names(6), POLICY, new Set(), new Set(['node-4', 'node-5']));
    f.reports.delete('node-4');
    f.reports.set('node-5', report('node-5', STABLE.hash ?? '', f.now - 10 * 180_000));
    f.step();
    assert.equal(
      f.state?.waves.reduce((n, w) => n + w.size, 0),
      4,
      'planned over node-0 … node-3',
    );
    f.run();
    assert.equal(f.state?.phase, 'complete', 'no wave waited for node-4 or node-5');
    assert.deepEqual([...f.everRanCandidate].sort(), ['node-0', 'node-1', 'node-2', 'node-3']);
  });

  it('a node whose agent starts during the rollout is held to its wave by rank: it takes the candidate once its wave is open, and its rejection halts', () => {
    const fleet = names(8);
    const late = fleet[7] ?? '';
    const f = new Fleet(fleet, POLICY, new Set([late]), new Set([late]));
    f.reports.delete(late);
    f.step();
    assert.equal(
      f.state?.waves.reduce((n, w) => n + w.size, 0),
      7,
    );
    const wave = waveIndexOf(f.state?.waves ?? [], late);
    assert.notEqual(wave, undefined, 'the late node has a wave by its rank');
    // its agent starts now, and rejects the candidate once its wave is open
    f.offline = new Set();
    f.run();
    assert.equal(f.state?.phase, 'halted');
    assert.equal(f.state?.halt?.node, late);
    assert.equal(f.state?.halt?.wave, wave);
  });

  it('with no agent reporting (every Lease stale or missing) the rollout halts before the canary, never completes', () => {
    const f = new Fleet(names(3));
    f.reports.clear();
    f.run();
    assert.equal(f.state?.phase, 'halted');
    assert.match(f.state?.halt?.reason ?? '', /no node has a fresh status Lease/);
    assert.deepEqual(f.stable, STABLE);
  });

  it('the same candidate in other bytes goes on without starting again', () => {
    const f = new Fleet(names(10));
    f.step();
    f.step();
    const opened = f.state?.opened ?? 0;
    assert.ok(opened >= 1);
    f.desired = { fingerprint: h('6'), hash: CANDIDATE.hash ?? '' };
    const d = decide(f.view());
    assert.equal(d.state?.content, 'desired');
    f.apply(d);
    assert.equal(f.state?.opened, opened);
    assert.equal(f.state?.candidate.fingerprint, h('6'));
    assert.ok(!f.events.includes(EVENT_REASONS.superseded));
  });

  it('a new apply mid-rollout supersedes the candidate and starts again from the canary', () => {
    const f = new Fleet(names(10));
    f.step();
    f.step();
    f.step();
    assert.ok((f.state?.opened ?? 0) >= 2, `opened ${String(f.state?.opened)}`);
    f.desired = OTHER;
    f.apply(decide(f.view()));
    assert.equal(f.state?.phase, 'progressing');
    assert.equal(f.state?.candidate.fingerprint, OTHER.fingerprint);
    assert.equal(f.state?.opened, 1);
    assert.ok(f.events.includes(EVENT_REASONS.superseded));
    assert.equal(names(10).filter((n) => runsCandidate(f.state, n)).length, 1);
  });

  it('a new apply while paused starts the new rollout paused, no wave open; resume opens its canary', () => {
    const f = new Fleet(names(10));
    f.step();
    f.request = { action: 'pause', candidate: f.state?.candidate.fingerprint ?? '', at: f.now };
    f.apply(decide(f.view()));
    assert.equal(f.state?.phase, 'paused');
    f.desired = OTHER;
    const d = decide(f.view());
    f.apply(d);
    assert.equal(f.state?.phase, 'paused');
    assert.equal(f.state?.candidate.fingerprint, OTHER.fingerprint);
    assert.equal(f.state?.opened, 0);
    assert.ok(f.events.includes(EVENT_REASONS.superseded));
    assert.match(d.events.find((e) => e.reason === EVENT_REASONS.started)?.message ?? '', /paused, as the rollout/);
    assert.equal(names(10).filter((n) => runsCandidate(f.state, n)).length, 0, 'no node runs the new candidate');
    // it stays paused whatever the nodes do
    f.step();
    assert.equal(f.state?.phase, 'paused');
    f.request = { action: 'resume', candidate: OTHER.fingerprint, at: f.now };
    f.apply(decide(f.view()));
    assert.equal(f.state?.phase, 'progressing');
    assert.equal(f.state?.opened, 1);
    assert.equal(names(10).filter((n) => runsCandidate(f.state, n)).length, f.state?.waves[0]?.size);
  });

  it('the ConfigMap set back to stable ends the rollout: every node runs stable', () => {
    const f = new Fleet(names(5));
    f.step();
    f.desired = { ...STABLE };
    f.apply(decide(f.view()));
    assert.equal(f.state?.phase, 'aborted');
    assert.ok(names(5).every((n) => !runsCandidate(f.state, n)));
  });

  it('a config that does not parse reaches no node', () => {
    const f = new Fleet(names(3));
    f.desired = { fingerprint: h('4'), invalidReason: 'storageClassMap: not a map' };
    f.apply(decide(f.view()));
    assert.equal(f.state?.phase, 'invalid');
    assert.ok(f.events.includes(EVENT_REASONS.invalid));
    assert.ok(names(3).every((n) => !runsCandidate(f.state, n)));
  });

  it('an invalid ConfigMap set back to stable ends as aborted, with RolloutAborted (as the docs say)', () => {
    const f = new Fleet(names(3));
    f.desired = { fingerprint: h('4'), invalidReason: 'storageClassMap: not a map' };
    f.apply(decide(f.view()));
    assert.equal(f.state?.phase, 'invalid');
    f.desired = { ...STABLE };
    const d = decide(f.view());
    f.apply(d);
    assert.equal(f.state?.phase, 'aborted');
    assert.equal(f.state?.candidate.fingerprint, STABLE.fingerprint);
    assert.deepEqual(
      d.events.map((e) => e.reason),
      [EVENT_REASONS.aborted],
    );
    assert.match(d.events[0]?.message ?? '', /did not parse is back to the stable config/);
    assert.ok(names(3).every((n) => !runsCandidate(f.state, n)));
    // and it stays so: nothing more to decide
    assert.equal(decide(f.view()).state, undefined);
  });

  it('the same config in other bytes becomes stable without a rollout', () => {
    const f = new Fleet(names(3));
    f.desired = { fingerprint: h('5'), hash: STABLE.hash ?? '' };
    const d = decide(f.view());
    assert.equal(d.stable, 'desired');
    assert.equal(d.state?.state.phase, 'complete');
  });

  it('acts on pause, resume, abort and promote for the current candidate only', () => {
    const f = new Fleet(names(6));
    f.step();
    const fp = f.state?.candidate.fingerprint ?? '';
    f.request = { action: 'pause', candidate: h('9'), at: f.now };
    f.apply(decide(f.view()));
    assert.equal(f.state?.phase, 'progressing', 'a request for another candidate is dropped');
    assert.equal(f.request, undefined);

    f.request = { action: 'pause', candidate: fp, by: 'alice', at: f.now };
    f.apply(decide(f.view()));
    assert.equal(f.state?.phase, 'paused');
    const opened = f.state?.opened;
    f.agents();
    f.now += 10 * POLICY.bakeMs;
    f.apply(decide(f.view()));
    f.apply(decide(f.view()));
    assert.equal(f.state?.opened, opened, 'a paused rollout opens no wave');

    f.request = { action: 'resume', candidate: fp, at: f.now };
    f.apply(decide(f.view()));
    assert.equal(f.state?.phase, 'progressing');

    f.request = { action: 'promote', candidate: fp, at: f.now };
    f.apply(decide(f.view()));
    assert.equal(f.state?.phase, 'complete');
    assert.equal(f.stable?.fingerprint, fp);
    assert.ok(f.events.includes(EVENT_REASONS.promoted));

    const g = new Fleet(names(6));
    g.step();
    g.request = { action: 'abort', candidate: g.state?.candidate.fingerprint ?? '', at: g.now };
    g.apply(decide(g.view()));
    assert.equal(g.state?.phase, 'aborted');
    assert.ok(names(6).every((n) => !runsCandidate(g.state, n)));
    // The aborted content stays in the ConfigMap: it does not start again.
    const again = decide(g.view());
    assert.equal(again.state, undefined);
  });

  it('resume after a halt retries the halted wave', () => {
    const probe = new Fleet(names(5));
    probe.step();
    const canary = canaryOf(probe.state, names(5));
    const f = new Fleet(names(5), POLICY, new Set([canary]));
    f.run();
    assert.equal(f.state?.phase, 'halted');
    f.request = { action: 'resume', candidate: f.state?.candidate.fingerprint ?? '', at: f.now };
    f.apply(decide(f.view()));
    assert.equal(f.state?.phase, 'progressing');
    assert.equal(f.state?.reverted, false);
    assert.equal(f.state?.halt, undefined);
    assert.equal(runsCandidate(f.state, canary), true);
  });

  it('a wave waits for its nodes’ first discovery pass under the candidate, even without a bake: a canary whose pass fails halts, no other node ran it', () => {
    const fleet = names(8);
    const probe = new Fleet(fleet);
    probe.step();
    const canary = canaryOf(probe.state, fleet);
    const f = new Fleet(fleet, { ...POLICY, bakeMs: 0 }, new Set([canary]), new Set(), 'discovery');
    f.step();
    // The canary applied the candidate and published it; its pass has not finished.
    f.reports.set(canary, report(canary, CANDIDATE.hash ?? '', f.now, { lastPassHash: NO_PASS }));
    const waiting = decide(f.view());
    assert.equal(waiting.state, undefined, 'no wave opens on an applied candidate without a pass under it');
    f.run();
    assert.equal(f.state?.phase, 'halted');
    assert.equal(f.state?.halt?.node, canary);
    assert.match(f.state?.halt?.reason ?? '', /1 discovery or cleanup error since it applied the candidate/);
    assert.deepEqual([...f.everRanCandidate], [canary]);
    assert.deepEqual(f.openedOrder, [1], 'only the canary ever opened');
    // The same canary with a clean pass: the next wave opens at once (bake 0).
    const g = new Fleet(fleet, { ...POLICY, bakeMs: 0 });
    g.run();
    assert.equal(g.state?.phase, 'complete');
    assert.deepEqual(g.openedOrder, [1, 2, 3]);
  });

  it('property: waves open in order, only open waves run the candidate, a failing node stops every later wave', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 40 }),
        fc.option(fc.nat({ max: 39 }), { nil: undefined }),
        fc.constantFrom<StagedRolloutPolicy['waves']>(
          [{ kind: 'percent', value: 100 }],
          [
            { kind: 'percent', value: 25 },
            { kind: 'percent', value: 100 },
          ],
          [
            { kind: 'count', value: 2 },
            { kind: 'percent', value: 50 },
            { kind: 'percent', value: 100 },
          ],
        ),
        fc.integer({ min: 1, max: 3 }),
        fc.constantFrom<'rejects' | 'discovery'>('rejects', 'discovery'),
        fc.constantFrom(0, POLICY.bakeMs),
        (n, failing, waves, canaryCount, failHow, bakeMs) => {
          const nodes = names(n);
          const failNode = failing !== undefined && failing < n ? nodes[failing] : undefined;
          const f = new Fleet(
            nodes,
            { ...POLICY, waves, bakeMs, canary: { kind: 'count', count: canaryCount } },
            new Set(failNode !== undefined ? [failNode] : []),
            new Set(),
            failHow,
          );
          f.run(200);
          const state = f.state;
          assert.ok(state !== undefined);
          for (let i = 1; i < f.openedOrder.length; i++)
            assert.ok((f.openedOrder[i] ?? 0) > (f.openedOrder[i - 1] ?? 0));
          if (failNode === undefined) {
            assert.equal(state.phase, 'complete');
            assert.equal(f.everRanCandidate.size, n);
          } else {
            assert.equal(state.phase, 'halted');
            const failWave = waveIndexOf(state.waves, failNode);
            assert.equal(state.halt?.wave, failWave);
            const members = waveMembers(state.waves, nodes);
            for (let w = (failWave ?? 0) + 1; w < state.waves.length; w++)
              for (const node of members[w] ?? [])
                assert.ok(!f.everRanCandidate.has(node), `${node} of a later wave ran it`);
            assert.ok(
              nodes.every((x) => !runsCandidate(state, x)),
              'reverted',
            );
          }
        },
      ),
      { numRuns: 60 },
    );
  });
});

describe('nodeProgress', () => {
  const now = T0;
  const results: AppliedResult[] = ['rejected', 'refused', 'rolled-back', 'failed'];
  it('a node that did not apply the candidate it read fails; one that read another is pending', () => {
    for (const result of results) {
      const p = nodeProgress('n', h('b'), report('n', h('a'), now, { result, candidateHash: h('b') }), true, now);
      assert.equal(p.kind, 'failed');
      const q = nodeProgress('n', h('b'), report('n', h('a'), now, { result, candidateHash: h('c') }), true, now);
      assert.equal(q.kind, 'pending');
    }
    assert.equal(nodeProgress('n', h('b'), undefined, false, now).kind, 'gone');
    assert.equal(nodeProgress('n', h('b'), undefined, true, now).kind, 'pending');
    assert.equal(nodeProgress('n', h('b'), report('n', h('b'), now), true, now).kind, 'applied');
  });

  it('an applied candidate is pending until a discovery pass under it finished; its errors fail it either way; an older agent (no pass hash) is applied', () => {
    const applied = (extra: Partial<PublishedState>): ReturnType<typeof nodeProgress> =>
      nodeProgress('n', h('b'), report('n', h('b'), now, extra), true, now);
    assert.deepEqual(applied({ lastPassHash: NO_PASS }), {
      kind: 'pending',
      why: 'applied the candidate; no discovery pass under it has finished yet',
    });
    assert.equal(applied({ lastPassHash: h('a') }).kind, 'pending', 'the last pass ran under stable');
    assert.equal(applied({ lastPassHash: h('b') }).kind, 'applied');
    assert.equal(applied({ lastPassHash: NO_PASS, errorsSinceApply: 1 }).kind, 'failed');
    assert.equal(applied({}).kind, 'applied');
  });
});
