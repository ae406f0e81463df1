import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { AppliedResult, PublishedState } from '../../../src/core/fleet/applied-state.js';
import { APPLIED_RESULTS, NO_PASS } from '../../../src/core/fleet/applied-state.js';
import { FleetIndex } from '../../../src/core/staged-rollout/fleet-index.js';
import { walkOpenWaves } from '../../../src/core/staged-rollout/open-waves.js';
import type { OpenWaveProgress } from '../../../src/core/staged-rollout/open-waves.js';
import { DEFAULT_POLICY } from '../../../src/core/staged-rollout/policy.js';
import type { RolloutState } from '../../../src/core/rollout-state/state.js';
import type { Wave } from '../../../src/core/rollout-state/membership.js';
import { planWaves } from '../../../src/core/staged-rollout/waves.js';
import type { FleetNode } from '../../../src/core/staged-rollout/waves.js';

const NAMES = Array.from({ length: 8 }, (_, i) => `node-${String(i)}`);
const CANDIDATE = 'sha256:candidate';
const STABLE = 'sha256:stable';

function wavesOf(canary: 'count' | 'selector'): readonly Wave[] {
  const nodes = NAMES.map((name, i) => ({ name, labels: { canary: i % 5 === 0 ? 'yes' : 'no' } }));
  const policy = {
    ...DEFAULT_POLICY,
    canary:
      canary === 'count'
        ? ({ kind: 'count', count: 2 } as const)
        : ({ kind: 'selector', selector: 'canary=yes' } as const),
  };
  const plan = planWaves(policy, nodes);
  assert.ok(plan.ok);
  return plan.waves;
}
const PLANS = [wavesOf('count'), wavesOf('selector')];

function stateWith(plan: number, opened: number, startedAt: number, hash: string | undefined): RolloutState {
  const waves = PLANS[plan] ?? [];
  return {
    phase: 'progressing',
    candidate: { fingerprint: `f-${hash ?? 'none'}`, ...(hash !== undefined ? { hash } : {}) },
    stable: { fingerprint: 'f-stable', hash: STABLE },
    // a copy, as a decoded state write gives: equal content, another array
    waves: waves.map((w) => ({ ...w })),
    opened: Math.min(opened, waves.length),
    waveOpenedAt: startedAt,
    reverted: false,
    startedAt,
    updatedAt: startedAt,
  };
}

type Command =
  | { readonly kind: 'node'; readonly i: number; readonly canary: boolean }
  | { readonly kind: 'deleteNode'; readonly i: number }
  | {
      readonly kind: 'lease';
      readonly key: number;
      readonly node: number;
      readonly applied: boolean;
      readonly result: AppliedResult;
      readonly refused: 'candidate' | 'other' | 'none';
      readonly errors: number;
      /** The config of its last pass: none yet, the one it applied, the other one, or not said (an older agent). */
      readonly pass: 'none' | 'applied' | 'other' | 'unsaid';
      readonly beat: number;
      readonly staleAfterMs: number;
    }
  | { readonly kind: 'deleteLease'; readonly key: number }
  | { readonly kind: 'tick'; readonly ms: number }
  | { readonly kind: 'edge'; readonly key: number; readonly by: number }
  | { readonly kind: 'state'; readonly plan: number; readonly opened: number; readonly startedAt: number }
  | { readonly kind: 'open' };

const command: fc.Arbitrary<Command> = fc.oneof(
  fc.record({ kind: fc.constant('node' as const), i: fc.nat(7), canary: fc.boolean() }),
  fc.record({ kind: fc.constant('deleteNode' as const), i: fc.nat(7) }),
  fc.record({
    kind: fc.constant('lease' as const),
    key: fc.nat(9),
    node: fc.nat(7),
    applied: fc.boolean(),
    result: fc.constantFrom(...APPLIED_RESULTS),
    refused: fc.constantFrom('candidate' as const, 'other' as const, 'none' as const),
    errors: fc.constantFrom(0, 0, 0, 2),
    pass: fc.constantFrom<'none' | 'applied' | 'other' | 'unsaid'>('none', 'applied', 'applied', 'other', 'unsaid'),
    beat: fc.nat(60),
    staleAfterMs: fc.constantFrom(0, 40_000, 40_000),
  }),
  fc.record({ kind: fc.constant('deleteLease' as const), key: fc.nat(9) }),
  fc.record({ kind: fc.constant('tick' as const), ms: fc.integer({ min: -5_000, max: 30_000 }) }),
  // to the very moment a Lease turns stale, a millisecond before or after (the boundaries)
  fc.record({ kind: fc.constant('edge' as const), key: fc.nat(9), by: fc.integer({ min: -1, max: 1 }) }),
  fc.record({
    kind: fc.constant('state' as const),
    plan: fc.nat(1),
    opened: fc.nat(5),
    startedAt: fc.integer({ min: 0, max: 600_000 }),
  }),
  fc.constant({ kind: 'open' as const }),
);

/** What the index is given, kept plainly: the walk reads it. */
class Model {
  readonly nodes = new Map<string, FleetNode>();
  readonly leases = new Map<string, PublishedState>();
  now = 100_000;
  state = stateWith(0, 2, 50_000, CANDIDATE);

  reports(): Map<string, PublishedState> {
    const out = new Map<string, PublishedState>();
    for (const r of this.leases.values()) {
      const seen = out.get(r.node);
      if (seen === undefined || (r.heartbeatAt ?? 0) > (seen.heartbeatAt ?? 0)) out.set(r.node, r);
    }
    return out;
  }
}

function apply(c: Command, model: Model, index: FleetIndex): void {
  switch (c.kind) {
    case 'node': {
      const node = { name: NAMES[c.i] ?? '', labels: { canary: c.canary ? 'yes' : 'no' } };
      model.nodes.set(node.name, node);
      index.setNode(node);
      return;
    }
    case 'deleteNode':
      model.nodes.delete(NAMES[c.i] ?? '');
      index.deleteNode(NAMES[c.i] ?? '');
      return;
    case 'lease': {
      const [appliedHash, otherHash] = c.applied ? [CANDIDATE, STABLE] : [STABLE, CANDIDATE];
      const report: PublishedState = {
        node: NAMES[c.node] ?? '',
        appliedHash,
        generation: 1,
        result: c.result,
        ...(c.refused === 'none' ? {} : { candidateHash: c.refused === 'candidate' ? CANDIDATE : 'sha256:other' }),
        ...(c.errors > 0 ? { errorsSinceApply: c.errors } : {}),
        ...(c.pass === 'unsaid'
          ? {}
          : {
              lastPassHash: c.pass === 'none' ? NO_PASS : c.pass === 'applied' ? appliedHash : otherHash,
            }),
        source: '/etc/provisioner/config',
        agentVersion: 'test',
        // distinct per Lease of a node, so "the freshest" has one answer
        heartbeatAt: c.beat * 2_000 + c.key,
        staleAfterMs: c.staleAfterMs,
      };
      model.leases.set(`l${String(c.key)}`, report);
      index.setLease(`l${String(c.key)}`, report);
      return;
    }
    case 'deleteLease':
      model.leases.delete(`l${String(c.key)}`);
      index.deleteLease(`l${String(c.key)}`);
      return;
    case 'tick':
      model.now += c.ms;
      return;
    case 'edge': {
      const r = model.leases.get(`l${String(c.key)}`);
      if (r?.heartbeatAt !== undefined) model.now = r.heartbeatAt + r.staleAfterMs + c.by;
      return;
    }
    case 'state':
      model.state = stateWith(c.plan, c.opened, c.startedAt, CANDIDATE);
      return;
    case 'open':
      model.state = { ...model.state, waves: [...model.state.waves], opened: model.state.opened + 1 };
  }
}

function plain(p: OpenWaveProgress): unknown {
  return {
    applied: p.applied,
    pending: p.pending,
    failed: p.failed,
    firstFailure: p.firstFailure,
    firstPending: p.firstPending(),
    nextStaleAt: p.nextStaleAt,
  };
}

describe('FleetIndex', () => {
  it('property: the open waves’ progress kept per event equals a walk of every node, after any events and any time', () => {
    fc.assert(
      fc.property(fc.array(command, { minLength: 1, maxLength: 60, size: 'max' }), fc.nat(1), (commands, askEvery) => {
        const model = new Model();
        const index = new FleetIndex();
        commands.forEach((c, step) => {
          apply(c, model, index);
          // Ask at some steps only: the index must catch up on whatever happened in between.
          if (step % (askEvery + 1) !== 0 && step !== commands.length - 1) return;
          const reports = model.reports();
          assert.deepEqual(new Map(index.reports), reports, 'the freshest report of each node');
          assert.deepEqual(
            index
              .nodes()
              .map((n) => n.name)
              .sort(),
            [...model.nodes.keys()].sort(),
          );
          const want = walkOpenWaves([...model.nodes.values()], reports, model.state, model.now);
          assert.deepEqual(plain(index.openWaves(model.state, model.now)), plain(want), `after step ${String(step)}`);
        });
      }),
      { numRuns: 300 },
    );
  });

  it('a Lease event updates the counts without another walk; a stale heartbeat turns a node failing in time', () => {
    const index = new FleetIndex();
    const state = stateWith(0, 3, 0, CANDIDATE);
    const report = (node: string, applied: boolean, beat: number): PublishedState => ({
      node,
      appliedHash: applied ? CANDIDATE : STABLE,
      generation: 1,
      result: 'applied',
      source: 's',
      agentVersion: 'v',
      heartbeatAt: beat,
      staleAfterMs: 40_000,
    });
    for (const name of NAMES) {
      index.setNode({ name });
      index.setLease(name, report(name, false, 1_000));
    }
    const before = index.openWaves(state, 2_000);
    assert.equal(before.applied, 0);
    assert.ok(before.pending > 0);
    assert.equal(before.nextStaleAt, 41_001);
    const open = NAMES.filter((n) => walkOpenWaves([{ name: n }], index.reports, state, 2_000).pending === 1);
    const first = open[0] ?? '';
    index.setLease(first, report(first, true, 2_000));
    const after = index.openWaves(state, 3_000);
    assert.equal(after.applied, 1);
    assert.equal(after.pending, before.pending - 1);
    // 41 s on, every heartbeat but the renewed one is stale: they fail, and the first is reported
    const late = index.openWaves(state, 41_500);
    assert.equal(late.failed, before.pending - 1);
    assert.match(late.firstFailure?.why ?? '', /heartbeat is stale/);
    assert.equal(late.nextStaleAt, 42_001);
  });
});
