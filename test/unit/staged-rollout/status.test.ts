import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { Ajv } from 'ajv';
import fc from 'fast-check';
import { RELOAD_OUTCOMES } from '../../../src/core/agent/reload-types.js';
import { ManualClock } from '../../../src/core/clock.js';
import { NO_PASS, statusLease, statusLeaseName } from '../../../src/core/fleet/applied-state.js';
import type { AppliedResult, PublishedState } from '../../../src/core/fleet/applied-state.js';
import {
  classifyNode,
  NODE_ROLLOUT_STATES,
  readDesiredConfig,
  readRollout,
  summarizeRollout,
  waitForRollout,
} from '../../../src/core/staged-rollout/status.js';
import { MemoryCluster } from '../../../src/core/kube/memory/memory-cluster.js';
import { renderRolloutText, rolloutExitCode, toRolloutJson } from '../../../src/render/rollout-status.js';
import { REPO_ROOT } from '../../support/cli.js';
import { HASH_A, HASH_B } from '../../support/fake-admin.js';

const NOW = 1_780_000_000_000;
const desired = { hash: HASH_A, source: 'configmap kube-system/lvp-config' };
const scope = { namespace: 'kube-system', instance: 'lvp' };

function published(overrides: Partial<PublishedState> = {}): PublishedState {
  return {
    node: 'node-a',
    appliedHash: HASH_A,
    generation: 2,
    result: 'applied',
    source: '/etc/provisioner/config',
    agentVersion: '0.1.0',
    heartbeatAt: NOW - 1000,
    staleAfterMs: 180_000,
    ...overrides,
  };
}

void describe('classifying a node', () => {
  void it('in sync when it applies the desired hash, whatever its last reload did', () => {
    assert.equal(classifyNode('n', HASH_A, published({ result: 'noop' }), NOW).state, 'in-sync');
    assert.equal(
      classifyNode('n', HASH_A, published({ result: 'rejected', candidateHash: HASH_B }), NOW).state,
      'in-sync',
    );
  });

  void it('rejected only when its last reload read exactly the desired config and did not apply it', () => {
    for (const result of ['rejected', 'refused', 'rolled-back', 'failed'] as const) {
      const p = published({ appliedHash: HASH_B, result, candidateHash: HASH_A, reason: 'why' });
      assert.equal(classifyNode('n', HASH_A, p, NOW).state, 'rejected', result);
    }
    // A failure on another config, or one that did not parse: the node has not read the desired one yet.
    const other = published({ appliedHash: HASH_B, result: 'refused', candidateHash: `sha256:${'c'.repeat(64)}` });
    assert.equal(classifyNode('n', HASH_A, other, NOW).state, 'pending');
    const unparsed = published({ appliedHash: HASH_B, result: 'rejected', reason: 'bad YAML' });
    assert.equal(classifyNode('n', HASH_A, unparsed, NOW).state, 'pending');
  });

  void it('pending, not in sync, while it applies the desired hash but no discovery pass under it finished', () => {
    assert.equal(classifyNode('n', HASH_A, published({ lastPassHash: NO_PASS }), NOW).state, 'pending');
    assert.equal(classifyNode('n', HASH_A, published({ lastPassHash: NO_PASS }), NOW).passPending, true);
    assert.equal(classifyNode('n', HASH_A, published({ lastPassHash: HASH_B }), NOW).state, 'pending');
    assert.equal(classifyNode('n', HASH_A, published({ lastPassHash: HASH_A }), NOW).state, 'in-sync');
    // An older agent does not say: in sync on its applied hash, as before.
    assert.equal(classifyNode('n', HASH_A, published({}), NOW).state, 'in-sync');
    // Another config applied, its pass pending: pending because of the config, not the pass.
    const other = classifyNode('n', HASH_A, published({ appliedHash: HASH_B, lastPassHash: NO_PASS }), NOW);
    assert.equal(other.state, 'pending');
    assert.equal(other.passPending, undefined);
  });

  void it('stale when the heartbeat is older than its Lease duration (or absent); missing without a Lease', () => {
    assert.equal(classifyNode('n', HASH_A, published({ heartbeatAt: NOW - 180_001 }), NOW).state, 'stale');
    assert.equal(classifyNode('n', HASH_A, published({ heartbeatAt: NOW - 179_000 }), NOW).state, 'in-sync');
    assert.equal(classifyNode('n', HASH_A, published({ heartbeatAt: undefined }), NOW).state, 'stale');
    assert.equal(classifyNode('n', HASH_A, undefined, NOW).state, 'missing');
  });

  void it('the verdict: rejected beats everything; complete only when every node is in sync', () => {
    const anyState = fc.record({
      applied: fc.boolean(),
      result: fc.constantFrom<AppliedResult>('started', ...RELOAD_OUTCOMES),
      candidateDesired: fc.boolean(),
      age: fc.nat({ max: 400_000 }),
      present: fc.boolean(),
    });
    fc.assert(
      fc.property(fc.array(anyState, { maxLength: 30 }), (specs) => {
        const names = specs.map((_, i) => `node-${String(i)}`);
        const states = specs.flatMap((s, i) =>
          s.present
            ? [
                published({
                  node: `node-${String(i)}`,
                  appliedHash: s.applied ? HASH_A : HASH_B,
                  result: s.result,
                  ...(s.candidateDesired ? { candidateHash: HASH_A } : {}),
                  heartbeatAt: NOW - s.age,
                }),
              ]
            : [],
        );
        const status = summarizeRollout(desired, scope, names, states, NOW);
        const total = NODE_ROLLOUT_STATES.reduce((sum, st) => sum + status.counts[st], 0);
        assert.equal(total, names.length);
        const expected =
          status.counts.rejected > 0
            ? 'rejected'
            : status.counts['in-sync'] === names.length
              ? 'complete'
              : 'in-progress';
        assert.equal(status.verdict, expected);
        assert.equal(rolloutExitCode(status.verdict), { complete: 0, rejected: 1, 'in-progress': 6 }[expected]);
      }),
    );
  });

  void it('nodes outside the Node list are reported apart; the freshest of two Leases of one node counts', () => {
    const status = summarizeRollout(
      desired,
      scope,
      ['node-a'],
      [
        published({ appliedHash: HASH_B, heartbeatAt: NOW - 5000 }),
        published({ heartbeatAt: NOW - 1000 }),
        published({ node: 'gone' }),
      ],
      NOW,
    );
    assert.equal(status.nodes[0]?.state, 'in-sync');
    assert.deepEqual(status.unknownNodes, ['gone']);
  });
});

void describe('rendering', () => {
  const status = summarizeRollout(
    desired,
    scope,
    ['node-a', 'node-b', 'node-c', 'node-d', 'node-e', 'node-f'],
    [
      published({
        node: 'node-a',
        volumesAbnormal: 2,
        volumesQuarantined: 1,
        volumesConflicting: 2,
        devicesLinked: 3,
        devicesSkipped: 1,
        lastPassHash: HASH_A,
      }),
      published({
        node: 'node-b',
        appliedHash: HASH_B,
        result: 'refused',
        candidateHash: HASH_A,
        reason: 'a live reload that would orphan existing PVs (storageClassMap.fast.hostDir) was refused',
      }),
      published({ node: 'node-c', appliedHash: HASH_B, result: 'started' }),
      published({ node: 'node-d', heartbeatAt: NOW - 600_000 }),
      published({ node: 'node-f', lastPassHash: NO_PASS }),
    ],
    NOW,
  );

  void it('a table: node, applied hash, state and the reason of a rejection', () => {
    const text = renderRolloutText(status);
    assert.match(text, /^rollout rejected: 1 of 6 nodes rejected sha256:aaaaaaaaaaaa\n/);
    assert.match(text, /in sync 1, pending 2, rejected 1, stale 1, missing 1/);
    const lines = text.split('\n');
    const row = (node: string): string => lines.find((l) => l.startsWith(`${node} `)) ?? '';
    assert.match(
      row('node-a'),
      /sha256:aaaaaaaaaaaa +in sync +2 volumes abnormal, 1 PV quarantined, 2 entries of a disk already used, 1 device a rule skips$/,
    );
    assert.match(row('node-b'), /sha256:bbbbbbbbbbbb +rejected +refused: a live reload that would orphan existing PVs/);
    assert.match(row('node-c'), /pending +has not read the desired config yet/);
    assert.match(row('node-d'), /stale heartbeat +last heartbeat 10m ago/);
    assert.match(row('node-e'), /^node-e +- +missing agent/);
    assert.match(row('node-f'), /sha256:aaaaaaaaaaaa +pending +applied; no discovery pass under it has finished yet$/);
  });

  void it('-o json follows docs/schemas/rollout-status.v1.schema.json', async () => {
    const schema: unknown = JSON.parse(
      await readFile(join(REPO_ROOT, 'docs/schemas/rollout-status.v1.schema.json'), 'utf8'),
    );
    const ajv = new Ajv({ allErrors: true, strict: false });
    const validate = ajv.compile(schema as object);
    const json = toRolloutJson(status, true);
    assert.ok(validate(JSON.parse(JSON.stringify(json))), ajv.errorsText(validate.errors));
    assert.equal(json.nodes[1]?.reason?.startsWith('a live reload'), true);
    assert.equal(json.nodes[3]?.heartbeatAgeSeconds, 600);
    assert.equal(json.nodes[0]?.volumesAbnormal, 2);
    assert.equal(json.nodes[0].volumesQuarantined, 1);
    assert.equal(json.nodes[0].volumesConflicting, 2);
    assert.equal(json.nodes[2]?.volumesAbnormal, undefined, 'absent when none');
    assert.deepEqual(json.nodes[4], { node: 'node-e', state: 'missing' });
    assert.equal(json.nodes[0].devicesLinked, 3);
    assert.equal(json.nodes[0].lastPassHash, HASH_A);
    assert.equal(json.nodes[5]?.state, 'pending');
    assert.equal(json.nodes[5].lastPassHash, NO_PASS);
    assert.equal(json.nodes[2]?.lastPassHash, undefined, 'absent for an agent that does not say');
    // A change to the output that the schema does not allow fails here.
    assert.equal(validate({ ...json, extra: 1 }), false);
  });
});

void describe('reading a rollout from the cluster (in-memory)', () => {
  async function fleet(count: number): Promise<MemoryCluster> {
    const cluster = new MemoryCluster({ namespaces: ['default', 'kube-system'] });
    for (let i = 0; i < count; i++) {
      const node = `node-${String(i).padStart(4, '0')}`;
      await cluster.nodes.create({ metadata: { name: node, labels: { pool: i % 2 === 0 ? 'even' : 'odd' } } });
      await cluster.leases.create(
        statusLease(
          { name: statusLeaseName('lvp', node), namespace: 'kube-system', instance: 'lvp' },
          { node, appliedHash: HASH_A, generation: 1, result: 'started', source: '/c', agentVersion: 't' },
          NOW,
          180_000,
        ),
        { namespace: 'kube-system' },
      );
    }
    return cluster;
  }

  void it('pages through Leases and Nodes; --selector narrows the Nodes that count', async () => {
    const cluster = await fleet(1200);
    const all = await readRollout(cluster, scope, desired, () => NOW);
    assert.equal(all.nodes.length, 1200);
    assert.equal(all.verdict, 'complete');
    const even = await readRollout(cluster, { ...scope, nodeSelector: 'pool=even' }, desired, () => NOW);
    assert.equal(even.nodes.length, 600);
    assert.equal(even.unknownNodes.length, 600);
    const other = await readRollout(cluster, { ...scope, instance: 'other' }, desired, () => NOW);
    assert.equal(other.counts.missing, 1200);
  });

  void it('the desired hash of a ConfigMap is the hash an agent computes from the same keys mounted', async () => {
    const cluster = await fleet(0);
    const data = { storageClassMap: 'fast:\n  hostDir: /mnt/fast\n  mountDir: /mnt/fast\n' };
    await cluster.configMaps.create(
      { metadata: { name: 'cfg', namespace: 'kube-system' }, data },
      { namespace: 'kube-system' },
    );
    const fromApi = await readDesiredConfig(cluster, { kind: 'configmap', namespace: 'kube-system', name: 'cfg' });
    const { mkdtemp, rm, writeFile } = await import('node:fs/promises');
    const { tmpdir } = await import('node:os');
    const dir = await mkdtemp(join(tmpdir(), 'lvp-desired-'));
    try {
      await writeFile(join(dir, 'storageClassMap'), data.storageClassMap);
      const fromDir = await readDesiredConfig(undefined, { kind: 'path', path: dir });
      assert.equal(fromApi.hash, fromDir.hash);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    await assert.rejects(
      readDesiredConfig(cluster, { kind: 'configmap', namespace: 'kube-system', name: 'nope' }),
      (err: unknown) => err instanceof Error && 'exitCode' in err && err.exitCode === 4,
    );
  });

  void it('--wait: returns as soon as the rollout completes, or with timedOut at the deadline', async () => {
    const cluster = await fleet(2);
    const clock = new ManualClock(NOW);
    const behind = { hash: HASH_B, source: 'x' };
    const waiting = waitForRollout(cluster, scope, behind, { clock, timeoutMs: 10_000, intervalMs: 1000 });
    for (let i = 0; i < 12; i++) await clock.advance(1000);
    const timed = await waiting;
    assert.equal(timed.timedOut, true);
    assert.equal(timed.status.verdict, 'in-progress');
    const done = await waitForRollout(cluster, scope, desired, { clock, timeoutMs: 10_000 });
    assert.equal(done.timedOut, false);
    assert.equal(done.status.verdict, 'complete');
  });
});
