// assert.equal(x?.a, v) narrows x to defined for the reads after it, which still read as optional here.
/* eslint-disable @typescript-eslint/no-unnecessary-condition */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { DEFAULT_POLICY, parseWaves, policyFromFlags } from '../../../src/core/staged-rollout/policy.js';
import type { StagedRolloutPolicy } from '../../../src/core/staged-rollout/policy.js';
import {
  decodeRolloutRequest,
  decodeRolloutState,
  encodeRolloutState,
  runsCandidate,
} from '../../../src/core/rollout-state/state.js';
import type { RolloutState } from '../../../src/core/rollout-state/state.js';
import { MAX_LISTED_NODES, MAX_RANK, waveIndexOf, waveMembers } from '../../../src/core/rollout-state/membership.js';
import { planWaves } from '../../../src/core/staged-rollout/waves.js';
import { UsageError } from '../../../src/core/errors.js';

const nodeName = fc.stringMatching(/^[a-z0-9]([a-z0-9-]{0,15}[a-z0-9])?$/);
const fleet = fc.uniqueArray(nodeName, { minLength: 0, maxLength: 60 });

function waveIndex(policy: StagedRolloutPolicy, nodes: readonly string[]): Map<string, number> {
  const plan = planWaves(
    policy,
    nodes.map((name) => ({ name })),
  );
  assert.ok(plan.ok);
  const index = new Map<string, number>();
  plan.members.forEach((m, i) => {
    for (const n of m) index.set(n, i);
  });
  return index;
}

describe('planWaves', () => {
  it('property: every node in exactly one wave, the canary first, the same waves whatever the input order', () => {
    fc.assert(
      fc.property(fleet, fc.integer({ min: 1, max: 5 }), (nodes, count) => {
        const policy: StagedRolloutPolicy = { ...DEFAULT_POLICY, canary: { kind: 'count', count } };
        const plan = planWaves(
          policy,
          nodes.map((name) => ({ name })),
        );
        assert.ok(plan.ok);
        const all = plan.members.flat();
        assert.equal(all.length, nodes.length);
        assert.equal(new Set(all).size, nodes.length);
        if (nodes.length > 0) {
          assert.equal(plan.waves[0]?.name, 'canary');
          assert.equal(plan.members[0]?.length, Math.min(count, nodes.length));
        }
        assert.ok(plan.members.every((m) => m.length > 0));
        assert.deepEqual(
          plan.waves.map((w) => w.size),
          plan.members.map((m) => m.length),
        );
        const reversed = planWaves(
          policy,
          [...nodes].reverse().map((name) => ({ name })),
        );
        assert.deepEqual(reversed, plan);
      }),
    );
  });

  it('property: the stored waves (rank bounds) give back exactly the planned members', () => {
    fc.assert(
      fc.property(fleet, fc.integer({ min: 1, max: 5 }), (nodes, count) => {
        const plan = planWaves(
          { ...DEFAULT_POLICY, canary: { kind: 'count', count } },
          nodes.map((name) => ({ name })),
        );
        assert.ok(plan.ok);
        assert.deepEqual(waveMembers(plan.waves, nodes), plan.members);
        assert.ok(
          plan.waves.every((w) => w.nodes === undefined),
          'a canary by count lists nobody',
        );
      }),
    );
  });

  it('property: frozen at the start, nodes joining and leaving move no other node, and each joining node has one wave', () => {
    fc.assert(
      fc.property(fleet, fleet, fc.integer({ min: 0, max: 60 }), (nodes, joining, leaving) => {
        const plan = planWaves(
          DEFAULT_POLICY,
          nodes.map((name) => ({ name })),
        );
        assert.ok(plan.ok);
        const stay = nodes.slice(Math.min(leaving, nodes.length));
        const now = [...new Set([...stay, ...joining])];
        for (const n of stay)
          assert.equal(
            waveIndexOf(plan.waves, n),
            plan.members.findIndex((m) => m.includes(n)),
            n,
          );
        if (plan.waves.length > 0)
          for (const n of now) assert.notEqual(waveIndexOf(plan.waves, n), undefined, `${n} has a wave`);
      }),
    );
  });

  it('property: a node joining or leaving moves every other node by at most one wave in a new plan', () => {
    fc.assert(
      fc.property(fleet, nodeName, (nodes, extra) => {
        fc.pre(!nodes.includes(extra));
        const before = waveIndex(DEFAULT_POLICY, nodes);
        const after = waveIndex(DEFAULT_POLICY, [...nodes, extra]);
        for (const n of nodes) assert.ok(Math.abs((before.get(n) ?? 0) - (after.get(n) ?? 0)) <= 1, n);
      }),
    );
  });

  it('the stored plan does not grow with the fleet: 10 nodes and 10,000 encode to states of the same size but for the counts', () => {
    const stateOf = (n: number): RolloutState => {
      const plan = planWaves(
        DEFAULT_POLICY,
        Array.from({ length: n }, (_, i) => ({
          name: `ip-10-0-${String(Math.floor(i / 250))}-${String(i % 250)}.ec2.internal`,
        })),
      );
      assert.ok(plan.ok);
      return {
        phase: 'progressing',
        candidate: { fingerprint: `sha256:${'2'.repeat(64)}`, hash: `sha256:${'b'.repeat(64)}` },
        stable: { fingerprint: `sha256:${'1'.repeat(64)}`, hash: `sha256:${'a'.repeat(64)}` },
        waves: plan.waves,
        opened: 1,
        waveOpenedAt: 5,
        reverted: false,
        startedAt: 1,
        updatedAt: 6,
      };
    };
    const small = encodeRolloutState(stateOf(10)).length;
    const large = encodeRolloutState(stateOf(10_000)).length;
    assert.ok(large - small <= 4 * 4, `${String(small)} → ${String(large)} bytes: only the size digits differ`);
    assert.ok(large < 1024, `${String(large)} bytes`);
    const decoded = decodeRolloutState(encodeRolloutState(stateOf(10_000)));
    assert.ok(decoded.ok);
    assert.deepEqual(decoded.state, stateOf(10_000));
  });

  it('canary by selector lists exactly the matching nodes; none matching, or more than can be listed, is an error', () => {
    const policy: StagedRolloutPolicy = { ...DEFAULT_POLICY, canary: { kind: 'selector', selector: 'tier=canary' } };
    const nodes = [
      { name: 'a', labels: { tier: 'canary' } },
      { name: 'b', labels: {} },
      { name: 'c', labels: { tier: 'canary' } },
      { name: 'd' },
    ];
    const plan = planWaves(policy, nodes);
    assert.ok(plan.ok);
    assert.deepEqual(plan.waves[0], { name: 'canary', nodes: ['a', 'c'], size: 2 });
    assert.deepEqual(plan.members[0], ['a', 'c']);
    assert.deepEqual(plan.members.slice(1).flat().sort(), ['b', 'd']);
    assert.equal(waveIndexOf(plan.waves, 'a'), 0, 'listed: the canary whatever its rank');
    assert.ok((waveIndexOf(plan.waves, 'b') ?? 0) > 0, 'b by its rank, after the canary');
    assert.ok((waveIndexOf(plan.waves, 'e') ?? 0) > 0, 'a node that joins later: by its rank, never the canary');
    const none = planWaves(policy, [{ name: 'b' }]);
    assert.deepEqual(none, { ok: false, reason: 'the canary selector tier=canary matches no node' });
    const many = planWaves(
      policy,
      Array.from({ length: MAX_LISTED_NODES + 1 }, (_, i) => ({ name: `n${String(i)}`, labels: { tier: 'canary' } })),
    );
    assert.equal(many.ok, false);
    assert.match(many.ok ? '' : many.reason, /matches 1001 nodes; a canary is at most 1000/u);
  });

  it('cumulative percentages over the nodes outside the canary', () => {
    const nodes = Array.from({ length: 21 }, (_, i) => ({ name: `n${String(i)}` }));
    const plan = planWaves(DEFAULT_POLICY, nodes);
    assert.ok(plan.ok);
    // 1 canary, then 10% of 20 = 2, 50% = 10 (8 more), 100% = 20 (10 more).
    assert.deepEqual(
      plan.waves.map((w, i) => [w.name, w.size, plan.members[i]?.length]),
      [
        ['canary', 1, 1],
        ['wave-1', 2, 2],
        ['wave-2', 8, 8],
        ['wave-3', 10, 10],
      ],
    );
    assert.equal(plan.waves.at(-1)?.upTo, MAX_RANK, 'the last wave takes every rank above the others');
  });
});

describe('policy flags', () => {
  it('parses waves and appends the 100% a list stops short of', () => {
    assert.deepEqual(parseWaves('5,50%'), [
      { kind: 'count', value: 5 },
      { kind: 'percent', value: 50 },
      { kind: 'percent', value: 100 },
    ]);
    for (const bad of ['', '0%', '101%', '50%,20%', 'ten', '5,,10'])
      assert.throws(() => parseWaves(bad), UsageError, bad);
  });

  it('names the flag of a bad value', () => {
    assert.throws(() => policyFromFlags({ canarySelector: 'a in (', canaryCount: undefined }), /--canary-selector/);
    assert.throws(() => policyFromFlags({ canarySelector: 'a=b', canaryCount: 2 }), /exclude each other/);
    assert.throws(() => policyFromFlags({ onHalt: 'panic' }), /--on-halt "panic": expected revert or halt/);
    assert.throws(() => policyFromFlags({ bakeTime: '5 minutes' }), /--bake-time/);
    assert.equal(policyFromFlags({ bakeTime: '0s' }).bakeMs, 0);
    assert.equal(policyFromFlags({ canaryCount: 3 }).canary.kind, 'count');
  });
});

describe('rollout state encoding', () => {
  it('round-trips and refuses what it did not write', () => {
    const state = {
      phase: 'halted' as const,
      candidate: { fingerprint: `sha256:${'2'.repeat(64)}`, hash: `sha256:${'b'.repeat(64)}` },
      stable: { fingerprint: `sha256:${'1'.repeat(64)}`, hash: `sha256:${'a'.repeat(64)}` },
      waves: [{ name: 'canary', nodes: ['n1'], size: 1 }],
      opened: 1,
      waveOpenedAt: 5,
      reverted: true,
      halt: { wave: 0, node: 'n1', reason: 'rejected', at: 6 },
      startedAt: 1,
      updatedAt: 6,
    };
    const decoded = decodeRolloutState(encodeRolloutState(state));
    assert.deepEqual(decoded, { ok: true, state });
    for (const bad of [
      'nope',
      '[]',
      JSON.stringify({ ...state, format: 3 }),
      encodeRolloutState({ ...state, opened: 2 }),
      encodeRolloutState({ ...state, waves: [{ name: 'canary', nodes: ['n1', 'n1'], size: 2 }] }),
      encodeRolloutState({ ...state, waves: [{ name: 'canary', nodes: ['Not A Node'], size: 1 }] }),
      encodeRolloutState({ ...state, waves: [{ name: 'canary', size: 1 }] }),
      encodeRolloutState({ ...state, waves: [{ name: 'canary', upTo: 'FFFF', size: 1 }] }),
      encodeRolloutState({
        ...state,
        waves: [
          { name: 'canary', upTo: '8000000000000000', size: 1 },
          { name: 'wave-1', upTo: '7fffffffffffffff', size: 1 },
        ],
      }),
      JSON.stringify({ ...JSON.parse(encodeRolloutState(state)), waves: [{ name: 'canary', nodes: ['n1'] }] }),
      encodeRolloutState({
        ...state,
        waves: [
          {
            name: 'canary',
            nodes: Array.from({ length: MAX_LISTED_NODES + 1 }, (_, i) => `n${String(i)}`),
            size: MAX_LISTED_NODES + 1,
          },
        ],
      }),
      'x'.repeat(300 * 1024),
    ])
      assert.equal(decodeRolloutState(bad).ok, false, bad.slice(0, 60));
  });

  it('reads a format-1 state (every node listed, as controllers before format 2 wrote it): the sizes are the lists', () => {
    const v1 = {
      format: 1,
      phase: 'progressing',
      candidate: { fingerprint: `sha256:${'2'.repeat(64)}`, hash: `sha256:${'b'.repeat(64)}` },
      stable: { fingerprint: `sha256:${'1'.repeat(64)}`, hash: `sha256:${'a'.repeat(64)}` },
      waves: [
        { name: 'canary', nodes: ['n1'] },
        { name: 'wave-1', nodes: Array.from({ length: 1500 }, (_, i) => `m${String(i)}`) },
      ],
      opened: 1,
      waveOpenedAt: 5,
      reverted: false,
      startedAt: 1,
      updatedAt: 6,
    };
    const decoded = decodeRolloutState(JSON.stringify(v1));
    assert.ok(decoded.ok, decoded.ok ? '' : decoded.reason);
    assert.deepEqual(
      decoded.state.waves.map((w) => [w.name, w.size, w.upTo]),
      [
        ['canary', 1, undefined],
        ['wave-1', 1500, undefined],
      ],
    );
    assert.equal(runsCandidate(decoded.state, 'n1'), true);
    assert.equal(runsCandidate(decoded.state, 'm7'), false, 'wave-1 is not open');
    assert.equal(waveIndexOf(decoded.state.waves, 'not-listed'), undefined, 'format 1: a node not listed has no wave');
  });

  it('decodes a request only when every field is valid', () => {
    const fp = `sha256:${'2'.repeat(64)}`;
    assert.deepEqual(decodeRolloutRequest(JSON.stringify({ action: 'pause', candidate: fp, at: 3 })), {
      action: 'pause',
      candidate: fp,
      at: 3,
    });
    assert.equal(decodeRolloutRequest(JSON.stringify({ action: 'delete', candidate: fp, at: 3 })), undefined);
    assert.equal(decodeRolloutRequest(JSON.stringify({ action: 'pause', candidate: 'x', at: 3 })), undefined);
    assert.equal(decodeRolloutRequest('{'), undefined);
  });
});
