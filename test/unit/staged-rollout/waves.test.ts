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
} from '../../../src/core/staged-rollout/state.js';
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
  plan.waves.forEach((w, i) => {
    for (const n of w.nodes) index.set(n, i);
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
        const all = plan.waves.flatMap((w) => w.nodes);
        assert.equal(all.length, nodes.length);
        assert.equal(new Set(all).size, nodes.length);
        if (nodes.length > 0) {
          assert.equal(plan.waves[0]?.name, 'canary');
          assert.equal(plan.waves[0]?.nodes.length, Math.min(count, nodes.length));
        }
        assert.ok(plan.waves.every((w) => w.nodes.length > 0));
        const reversed = planWaves(
          policy,
          [...nodes].reverse().map((name) => ({ name })),
        );
        assert.deepEqual(reversed, plan);
      }),
    );
  });

  it('property: a node joining or leaving moves every other node by at most one wave', () => {
    fc.assert(
      fc.property(fleet, nodeName, (nodes, extra) => {
        fc.pre(!nodes.includes(extra));
        const before = waveIndex(DEFAULT_POLICY, nodes);
        const after = waveIndex(DEFAULT_POLICY, [...nodes, extra]);
        for (const n of nodes) assert.ok(Math.abs((before.get(n) ?? 0) - (after.get(n) ?? 0)) <= 1, n);
      }),
    );
  });

  it('canary by selector takes exactly the matching nodes; none matching is an error', () => {
    const policy: StagedRolloutPolicy = { ...DEFAULT_POLICY, canary: { kind: 'selector', selector: 'tier=canary' } };
    const nodes = [
      { name: 'a', labels: { tier: 'canary' } },
      { name: 'b', labels: {} },
      { name: 'c', labels: { tier: 'canary' } },
      { name: 'd' },
    ];
    const plan = planWaves(policy, nodes);
    assert.ok(plan.ok);
    assert.deepEqual(plan.waves[0], { name: 'canary', nodes: ['a', 'c'] });
    const none = planWaves(policy, [{ name: 'b' }]);
    assert.deepEqual(none, { ok: false, reason: 'the canary selector tier=canary matches no node' });
  });

  it('cumulative percentages over the nodes outside the canary', () => {
    const nodes = Array.from({ length: 21 }, (_, i) => ({ name: `n${String(i)}` }));
    const plan = planWaves(DEFAULT_POLICY, nodes);
    assert.ok(plan.ok);
    // 1 canary, then 10% of 20 = 2, 50% = 10 (8 more), 100% = 20 (10 more).
    assert.deepEqual(
      plan.waves.map((w) => [w.name, w.nodes.length]),
      [
        ['canary', 1],
        ['wave-1', 2],
        ['wave-2', 8],
        ['wave-3', 10],
      ],
    );
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
      waves: [{ name: 'canary', nodes: ['n1'] }],
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
      JSON.stringify({ ...state, format: 2 }),
      encodeRolloutState({ ...state, opened: 2 }),
      encodeRolloutState({ ...state, waves: [{ name: 'canary', nodes: ['n1', 'n1'] }] }),
      encodeRolloutState({ ...state, waves: [{ name: 'canary', nodes: ['Not A Node'] }] }),
      'x'.repeat(300 * 1024),
    ])
      assert.equal(decodeRolloutState(bad).ok, false, bad.slice(0, 60));
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
