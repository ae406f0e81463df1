// `rollout status` with a staged rollout: each node held to the config its wave gives it, the
// waves counted with the controller's own rule, the verdict of the rollout, and the text and JSON
// views; read from NAME-candidate and NAME-stable on the in-memory cluster.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { Ajv } from 'ajv';
import { ManualClock } from '../../../src/core/clock.js';
import { NO_PASS, statusLease, statusLeaseName } from '../../../src/core/fleet/applied-state.js';
import type { PublishedState } from '../../../src/core/fleet/applied-state.js';
import {
  expectedConfig,
  readRollout,
  stagedSourceOf,
  summarizeRollout,
  waitForRollout,
} from '../../../src/core/staged-rollout/status.js';
import type { RolloutCluster, StagedSource } from '../../../src/core/staged-rollout/status.js';
import { KubeApiError } from '../../../src/core/kube/cluster.js';
import { MemoryCluster } from '../../../src/core/kube/memory/memory-cluster.js';
import type { ConfigMap } from '../../../src/core/kube/objects.js';
import { contentOf, stagedConfigMap, stateAnnotation } from '../../../src/core/staged-rollout/objects.js';
import { ROLLOUT_REQUEST_ANNOTATION, ROLLOUT_STATE_ANNOTATION } from '../../../src/core/rollout-state/annotations.js';
import { encodeRolloutRequest } from '../../../src/core/rollout-state/state.js';
import type { RolloutState } from '../../../src/core/rollout-state/state.js';
import {
  renderRolloutText,
  rolloutExitCode,
  rolloutProgressLine,
  toRolloutJson,
} from '../../../src/render/rollout-status.js';
import { REPO_ROOT } from '../../support/cli.js';

const h = (c: string): string => `sha256:${c.repeat(64)}`;
const NOW = 1_780_000_000_000;
const STABLE = { fingerprint: h('1'), hash: h('a') };
const CANDIDATE = { fingerprint: h('2'), hash: h('b') };
const scope = { namespace: 'kube-system', instance: 'lvp' };
const desiredB = { hash: CANDIDATE.hash, source: 'configmap kube-system/lvp-config' };

/** canary [node-a], wave-1 [node-b, node-c], wave-2 [node-d, node-e]; canary and wave-1 open. */
function rolloutState(overrides: Partial<RolloutState> = {}): RolloutState {
  return {
    phase: 'progressing',
    candidate: CANDIDATE,
    stable: STABLE,
    waves: [
      { name: 'canary', nodes: ['node-a'], size: 1 },
      { name: 'wave-1', nodes: ['node-b', 'node-c'], size: 2 },
      { name: 'wave-2', nodes: ['node-d', 'node-e'], size: 2 },
    ],
    opened: 2,
    waveOpenedAt: NOW - 60_000,
    reverted: false,
    startedAt: NOW - 600_000,
    updatedAt: NOW - 60_000,
    ...overrides,
  };
}

function staged(state: RolloutState | undefined, extra: Partial<StagedSource> = {}): StagedSource {
  return {
    namespace: 'kube-system',
    name: 'lvp-config',
    ...(state !== undefined ? { state } : { stateProblem: 'kube-system/lvp-config-candidate has no rollout state' }),
    stable: STABLE,
    ...extra,
  };
}

function published(node: string, appliedHash: string, extra: Partial<PublishedState> = {}): PublishedState {
  return {
    node,
    appliedHash,
    generation: 2,
    result: 'applied',
    source: 'staged',
    agentVersion: '0.1.0',
    heartbeatAt: NOW - 1000,
    staleAfterMs: 180_000,
    ...extra,
  };
}

const NODES = ['node-a', 'node-b', 'node-c', 'node-d', 'node-f'];
/** node-a and node-b run the candidate (node-b with errors since), node-c not yet, node-d stable; node-e gone. */
const REPORTS = [
  published('node-a', CANDIDATE.hash),
  published('node-b', CANDIDATE.hash, { errorsSinceApply: 2 }),
  published('node-c', STABLE.hash),
  published('node-d', STABLE.hash),
  published('node-f', STABLE.hash),
];

void describe('the config each node should run (staged)', () => {
  void it('the candidate in an open wave, the stable config elsewhere (runsCandidate)', () => {
    const s = staged(rolloutState());
    assert.deepEqual(expectedConfig(s, 'node-a'), { expects: 'candidate', hash: CANDIDATE.hash });
    assert.deepEqual(expectedConfig(s, 'node-c'), { expects: 'candidate', hash: CANDIDATE.hash });
    assert.deepEqual(expectedConfig(s, 'node-d'), { expects: 'stable', hash: STABLE.hash }, 'a wave not open');
    assert.deepEqual(expectedConfig(s, 'node-f'), { expects: 'stable', hash: STABLE.hash }, 'in no wave');
    assert.equal(expectedConfig(staged(rolloutState({ phase: 'paused' })), 'node-a').expects, 'candidate');
    assert.equal(expectedConfig(staged(rolloutState({ phase: 'halted' })), 'node-a').expects, 'candidate');
  });

  void it('stable everywhere when the halt reverted, the rollout ended, or there is no readable state', () => {
    for (const state of [
      rolloutState({ phase: 'halted', reverted: true }),
      rolloutState({ phase: 'aborted' }),
      rolloutState({ phase: 'invalid', candidate: { fingerprint: h('2') } }),
      undefined,
    ])
      assert.deepEqual(expectedConfig(staged(state), 'node-a'), { expects: 'stable', hash: STABLE.hash });
    // NAME-stable's content wins over the state's record of it (the agents read NAME-stable).
    const other = { fingerprint: h('3'), hash: h('c') };
    assert.equal(expectedConfig(staged(rolloutState(), { stable: other }), 'node-d').hash, other.hash);
    const noCopy: StagedSource = { namespace: 'kube-system', name: 'lvp-config', state: rolloutState() };
    assert.equal(expectedConfig(noCopy, 'node-d').hash, STABLE.hash, 'without NAME-stable: the state says');
  });
});

void describe('summarizing a staged rollout', () => {
  const status = summarizeRollout(desiredB, scope, NODES, REPORTS, NOW, staged(rolloutState()));

  void it('each node against its expected config; its wave named', () => {
    const byNode = new Map(status.nodes.map((n) => [n.node, n]));
    assert.equal(byNode.get('node-a')?.state, 'in-sync');
    assert.equal(byNode.get('node-a')?.expects, 'candidate');
    assert.equal(byNode.get('node-a')?.wave, 'canary');
    assert.equal(byNode.get('node-c')?.state, 'pending', 'its wave is open: it should run the candidate');
    assert.equal(byNode.get('node-d')?.state, 'in-sync', 'its wave is not open: stable is right');
    assert.equal(byNode.get('node-d')?.expects, 'stable');
    assert.equal(byNode.get('node-f')?.state, 'in-sync');
    assert.equal(byNode.get('node-f')?.wave, undefined, 'joined after the waves were planned');
    assert.equal(status.verdict, 'in-progress');
  });

  void it('a node that applied the candidate but finished no pass under it: pending in its row as in the waves', () => {
    const reports = REPORTS.map((r) =>
      r.node === 'node-c' ? { ...r, appliedHash: CANDIDATE.hash, lastPassHash: NO_PASS } : r,
    );
    const firstPass = summarizeRollout(desiredB, scope, NODES, reports, NOW, staged(rolloutState()));
    const node = firstPass.nodes.find((n) => n.node === 'node-c');
    assert.equal(node?.state, 'pending');
    const wave = firstPass.staged?.waves.find((w) => w.name === 'wave-1');
    assert.equal(wave?.pending, 1, 'the controller counts it pending too');
    assert.match(
      renderRolloutText(firstPass),
      /^node-c +wave-1 +sha256:bbbbbbbbbbbb +pending +applied; no discovery pass under it has finished yet$/m,
    );
    const finished = reports.map((r) => (r.node === 'node-c' ? { ...r, lastPassHash: CANDIDATE.hash } : r));
    const after = summarizeRollout(desiredB, scope, NODES, finished, NOW, staged(rolloutState()));
    assert.equal(after.nodes.find((n) => n.node === 'node-c')?.state, 'in-sync');
  });

  void it('the waves: applied, pending, failed and gone by the controller’s rule, open or not', () => {
    assert.deepEqual(
      status.staged?.waves.map((w) => [w.name, w.nodes, w.open, w.applied, w.pending, w.failed, w.gone]),
      [
        ['canary', 1, true, 1, 0, 0, 0],
        ['wave-1', 2, true, 0, 1, 1, 0],
        ['wave-2', 2, false, 0, 1, 0, 1],
      ],
    );
    assert.equal(status.staged.waves[1]?.openedAt, NOW - 60_000, 'the last open wave');
    assert.equal(status.staged.waves[0]?.openedAt, undefined);
    assert.equal(status.staged.followsDesired, true);
    const baking = summarizeRollout(
      desiredB,
      scope,
      NODES,
      REPORTS,
      NOW,
      staged(rolloutState({ bakeStartedAt: NOW - 5000 })),
    );
    assert.equal(baking.staged?.waves[1]?.bakingSince, NOW - 5000);
  });

  void it('the verdict: complete only once the rollout of the desired config is; halted or aborted: rejected', () => {
    const inSync = NODES.map((n) => published(n, CANDIDATE.hash));
    const verdict = (state: RolloutState | undefined, reports = REPORTS, desired = desiredB, stable = STABLE) =>
      summarizeRollout(desired, scope, NODES, reports, NOW, staged(state, { stable })).verdict;
    const done = rolloutState({ phase: 'complete', stable: CANDIDATE, opened: 3 });
    assert.equal(verdict(done, inSync, desiredB, CANDIDATE), 'complete');
    assert.equal(verdict(done, REPORTS, desiredB, CANDIDATE), 'in-progress', 'complete, but a node is not in sync yet');
    assert.equal(verdict(rolloutState({ phase: 'halted' })), 'rejected');
    assert.equal(verdict(rolloutState({ phase: 'aborted' })), 'rejected');
    assert.equal(verdict(rolloutState({ phase: 'paused' }), inSync), 'in-progress');
    // The operator applied another config the controller has not taken up: whatever the old rollout did.
    const newer = { hash: h('c'), source: 'x' };
    assert.equal(verdict(done, inSync, newer, CANDIDATE), 'in-progress');
    assert.equal(verdict(rolloutState({ phase: 'halted' }), REPORTS, newer), 'in-progress');
    // The ConfigMap set back to the stable config (the controller ended the rollout): done once all run it.
    const back = rolloutState({ phase: 'aborted', candidate: STABLE });
    const onStable = NODES.map((n) => published(n, STABLE.hash));
    assert.equal(verdict(back, onStable, { hash: STABLE.hash, source: 'x' }), 'complete');
    // No readable state: every node runs stable; complete only when that is the desired config.
    assert.equal(verdict(undefined, onStable, { hash: STABLE.hash, source: 'x' }), 'complete');
    assert.equal(verdict(undefined, onStable), 'in-progress');
    // A node that rejected the config it should run beats everything, as unstaged.
    const rejected = [
      ...REPORTS.slice(1),
      published('node-a', STABLE.hash, { result: 'rejected', candidateHash: CANDIDATE.hash }),
    ];
    assert.equal(verdict(rolloutState(), rejected), 'rejected');
    assert.equal(rolloutExitCode(verdict(rolloutState({ phase: 'halted' }))), 1);
  });
});

void describe('rendering a staged rollout', () => {
  const halted = rolloutState({
    phase: 'halted',
    reverted: true,
    halt: {
      wave: 1,
      node: 'node-b',
      reason: '2 discovery or cleanup errors since it applied the candidate',
      at: NOW - 30_000,
    },
    message: 'halted; the open waves run stable again',
  });
  const request = { action: 'resume' as const, candidate: CANDIDATE.fingerprint, by: 'alice', at: NOW - 2000 };
  const status = summarizeRollout(desiredB, scope, NODES, REPORTS, NOW, staged(halted, { request }));

  void it('text: the phase and hashes, a WAVES table above the nodes, the halt and the pending request', () => {
    const text = renderRolloutText(status);
    const lines = text.split('\n');
    assert.match(
      lines[0] ?? '',
      /^rollout halted at wave-1: node node-b; sha256:bbbbbbbbbbbb is not rolled out further$/,
    );
    assert.match(
      text,
      /staged rollout of configmap kube-system\/lvp-config: halted; candidate sha256:bbbbbbbbbbbb, stable sha256:aaaaaaaaaaaa; started 10m ago/,
    );
    const waves = lines.findIndex((l) => l.startsWith('WAVE '));
    const nodes = lines.findIndex((l) => l.startsWith('NODE '));
    assert.ok(waves > 0 && nodes > waves, 'the waves above the node table');
    assert.match(lines[waves] ?? '', /^WAVE +NODES +OPEN +APPLIED +PENDING +FAILED$/);
    assert.match(lines[waves + 2] ?? '', /^wave-1 +2 +yes +0 +1 +1 +opened 60s ago$/);
    assert.match(lines[waves + 3] ?? '', /^wave-2 +2 +no +0 +1 +0 +1 gone$/);
    assert.match(
      text,
      /^halted at wave-1 30s ago: node node-b: 2 discovery or cleanup errors since it applied the candidate; its nodes run stable again$/m,
    );
    assert.match(text, /^request: resume by alice 2s ago, not taken up by the controller yet$/m);
    assert.match(lines[nodes] ?? '', /^NODE +WAVE +APPLIED +STATE +DETAIL$/);
    // Reverted: node-a should run stable again, and still runs the candidate.
    assert.match(text, /^node-a +canary +sha256:bbbbbbbbbbbb +pending +should run the stable sha256:aaaaaaaaaaaa$/m);
    assert.match(text, /^node-f +- +sha256:aaaaaaaaaaaa +in sync$/m);
  });

  void it('the headline and the --wait progress line while it progresses', () => {
    const progressing = summarizeRollout(desiredB, scope, NODES, REPORTS, NOW, staged(rolloutState()));
    assert.match(
      renderRolloutText(progressing),
      /^rollout in progress \(staged, progressing\): 2 of 3 waves open; 4 of 5 nodes run the config of their wave\n/,
    );
    assert.equal(
      rolloutProgressLine(progressing),
      'waiting: progressing, wave-1 open (2 of 3 waves; 0/2 applied); in sync 4/5, pending 1, stale 0, missing 0',
    );
    const behind = summarizeRollout({ hash: h('c'), source: 'x' }, scope, NODES, REPORTS, NOW, staged(rolloutState()));
    assert.match(
      renderRolloutText(behind),
      /^rollout in progress: the staged rollout controller has not taken up sha256:cccccccccccc yet/,
    );
    const unstaged = summarizeRollout(desiredB, scope, NODES, REPORTS, NOW);
    assert.match(rolloutProgressLine(unstaged), /^waiting: in sync 2\/5, pending 3/);
    assert.doesNotMatch(renderRolloutText(unstaged), /WAVE/);
  });

  void it('-o json: the staged object follows docs/schemas/rollout-status.v1.schema.json (format 1, additive)', async () => {
    const schema: unknown = JSON.parse(
      await readFile(join(REPO_ROOT, 'docs/schemas/rollout-status.v1.schema.json'), 'utf8'),
    );
    const ajv = new Ajv({ allErrors: true, strict: false });
    const validate = ajv.compile(schema as object);
    const json = toRolloutJson(status, false);
    assert.ok(validate(JSON.parse(JSON.stringify(json))), ajv.errorsText(validate.errors));
    assert.equal(json.formatVersion, 1);
    assert.deepEqual(json.staged?.halt, {
      wave: 'wave-1',
      node: 'node-b',
      reason: '2 discovery or cleanup errors since it applied the candidate',
      at: new Date(NOW - 30_000).toISOString(),
      reverted: true,
    });
    assert.equal(json.staged.phase, 'halted');
    assert.deepEqual(json.staged.candidate, CANDIDATE);
    assert.deepEqual(json.staged.request, { action: 'resume', by: 'alice', at: new Date(NOW - 2000).toISOString() });
    assert.deepEqual(json.staged.waves[2], {
      name: 'wave-2',
      nodes: 2,
      open: false,
      applied: 0,
      pending: 1,
      failed: 0,
      gone: 1,
    });
    assert.deepEqual(
      json.nodes.map((n) => [n.node, n.expects, n.wave]),
      [
        ['node-a', 'stable', 'canary'],
        ['node-b', 'stable', 'wave-1'],
        ['node-c', 'stable', 'wave-1'],
        ['node-d', 'stable', 'wave-2'],
        ['node-f', 'stable', undefined],
      ],
    );
    // Every phase, no state at all, and the unstaged output validate; a field the schema lacks does not.
    for (const phase of ['progressing', 'paused', 'complete', 'aborted', 'invalid'] as const) {
      const s = summarizeRollout(
        desiredB,
        scope,
        NODES,
        REPORTS,
        NOW,
        staged(rolloutState({ phase, bakeStartedAt: NOW })),
      );
      assert.ok(validate(JSON.parse(JSON.stringify(toRolloutJson(s)))), `${phase}: ${ajv.errorsText(validate.errors)}`);
    }
    const none = toRolloutJson(summarizeRollout(desiredB, scope, NODES, REPORTS, NOW, staged(undefined)));
    assert.ok(validate(JSON.parse(JSON.stringify(none))), ajv.errorsText(validate.errors));
    assert.equal(none.staged?.phase, undefined);
    assert.match(none.staged?.problem ?? '', /has no rollout state/);
    assert.equal(validate({ ...json, staged: { ...json.staged, extra: 1 } }), false);
  });
});

void describe('reading a staged rollout from the cluster (in-memory)', () => {
  const NS = 'kube-system';
  const stableData = { storageClassMap: 'fast:\n  hostDir: /mnt/fast\n  mountDir: /mnt/fast\n' };
  const candidateData = {
    storageClassMap: `${stableData.storageClassMap}slow:\n  hostDir: /mnt/slow\n  mountDir: /mnt/slow\n`,
  };
  const cm = (data: Record<string, string>): ConfigMap => ({ metadata: { name: 'x', namespace: NS }, data });
  const stableRef = contentOf(NS, 'lvp-config', cm(stableData));
  const candidateRef = contentOf(NS, 'lvp-config', cm(candidateData));

  async function fleet(state: RolloutState | undefined): Promise<MemoryCluster> {
    const cluster = new MemoryCluster({ namespaces: ['default', NS] });
    await cluster.configMaps.create(
      { metadata: { name: 'lvp-config', namespace: NS }, data: candidateData },
      { namespace: NS },
    );
    await cluster.configMaps.create(stagedConfigMap(NS, 'lvp-config', 'stable', stableData, {}, undefined), {
      namespace: NS,
    });
    if (state !== undefined)
      await cluster.configMaps.create(
        stagedConfigMap(NS, 'lvp-config', 'candidate', candidateData, stateAnnotation(state), undefined),
        { namespace: NS },
      );
    for (const [node, hash] of [
      ['node-a', candidateRef.hash],
      ['node-b', stableRef.hash],
      ['node-c', stableRef.hash],
    ] as const) {
      await cluster.nodes.create({ metadata: { name: node } });
      await cluster.leases.create(
        statusLease(
          { name: statusLeaseName('lvp', node), namespace: NS, instance: 'lvp' },
          { node, appliedHash: hash ?? '', generation: 1, result: 'applied', source: 'staged', agentVersion: 't' },
          NOW,
          180_000,
        ),
        { namespace: NS },
      );
    }
    return cluster;
  }

  const stateOfFleet = (overrides: Partial<RolloutState> = {}): RolloutState =>
    rolloutState({
      candidate: { fingerprint: candidateRef.fingerprint, ...(candidateRef.hash ? { hash: candidateRef.hash } : {}) },
      stable: { fingerprint: stableRef.fingerprint, ...(stableRef.hash ? { hash: stableRef.hash } : {}) },
      waves: [
        { name: 'canary', nodes: ['node-a'], size: 1 },
        { name: 'wave-1', nodes: ['node-b', 'node-c'], size: 2 },
      ],
      opened: 1,
      ...overrides,
    });
  const desired = (): { hash: string; source: string } => ({ hash: candidateRef.hash ?? '', source: 'configmap' });
  const query = { ...scope, stagedOf: { namespace: NS, name: 'lvp-config' } };

  void it('one GET of each copy: the state, NAME-stable’s content, a pending request; absent copies: not staged', async () => {
    const cluster = await fleet(stateOfFleet());
    const status = await readRollout(cluster, query, desired(), () => NOW);
    assert.equal(status.staged?.state?.phase, 'progressing');
    assert.equal(status.staged.stable?.hash, stableRef.hash);
    assert.deepEqual(
      status.nodes.map((n) => [n.node, n.expects, n.state]),
      [
        ['node-a', 'candidate', 'in-sync'],
        ['node-b', 'stable', 'in-sync'],
        ['node-c', 'stable', 'in-sync'],
      ],
    );
    assert.equal(status.verdict, 'in-progress');
    const raw = encodeRolloutRequest({ action: 'pause', candidate: candidateRef.fingerprint, at: NOW });
    await cluster.configMaps.patch(
      'lvp-config-candidate',
      { metadata: { annotations: { [ROLLOUT_REQUEST_ANNOTATION]: raw } } },
      { namespace: NS },
    );
    assert.equal((await readRollout(cluster, query, desired(), () => NOW)).staged?.request?.action, 'pause');
    // Without the query's ConfigMap, or for another one: the view is unstaged.
    assert.equal((await readRollout(cluster, scope, desired(), () => NOW)).staged, undefined);
    const other = await readRollout(
      cluster,
      { ...scope, stagedOf: { namespace: NS, name: 'nope' } },
      desired(),
      () => NOW,
    );
    assert.equal(other.staged, undefined);
    assert.equal(other.counts.pending, 2, 'unstaged: held to the desired config');
  });

  void it('a candidate copy whose state is damaged: every node held to stable, the problem shown', async () => {
    const cluster = await fleet(stateOfFleet());
    await cluster.configMaps.patch(
      'lvp-config-candidate',
      { metadata: { annotations: { [ROLLOUT_STATE_ANNOTATION]: '{"format":99}' } } },
      { namespace: NS },
    );
    const status = await readRollout(cluster, query, desired(), () => NOW);
    assert.equal(status.staged?.state, undefined);
    assert.match(status.staged?.stateProblem ?? '', /unreadable \(format 99 is not 2 \(or 1\)\)/);
    assert.deepEqual(
      status.nodes.map((n) => n.expects),
      ['stable', 'stable', 'stable'],
    );
    assert.equal(status.verdict, 'in-progress', 'the desired config is not the stable one');
    assert.equal(stagedSourceOf({ namespace: NS, name: 'x', candidate: undefined, stable: undefined }), undefined);
  });

  void it('a reader not allowed to get the copies (an older Role): the unstaged view, with a note', async () => {
    const cluster = await fleet(stateOfFleet());
    const forbidden: RolloutCluster = {
      nodes: cluster.nodes,
      leases: cluster.leases,
      configMaps: {
        ...cluster.configMaps,
        get: (name, options) =>
          name.endsWith('-candidate') || name.endsWith('-stable')
            ? Promise.reject(new KubeApiError(403, 'Forbidden', `configmaps "${name}" is forbidden`))
            : cluster.configMaps.get(name, options),
      },
    };
    const status = await readRollout(forbidden, query, desired(), () => NOW);
    assert.equal(status.staged, undefined);
    assert.match(
      status.stagedProblem ?? '',
      /cannot get configmaps lvp-config-candidate, lvp-config-stable .*forbidden/,
    );
    assert.match(renderRolloutText(status), /^note: cannot get configmaps/m);
  });

  void it('--wait: 0 once the rollout is complete and every node in sync; 1 at a halt', async () => {
    const clock = new ManualClock(NOW);
    const cluster = await fleet(
      stateOfFleet({ phase: 'halted', halt: { wave: 0, node: 'node-a', reason: 'x', at: NOW } }),
    );
    const halted = await waitForRollout(cluster, query, desired(), { clock, timeoutMs: 10_000 });
    assert.equal(halted.status.verdict, 'rejected');
    assert.equal(halted.timedOut, false);
    const done = stateOfFleet({ phase: 'complete', opened: 2, stable: stateOfFleet().candidate });
    const candidate = await cluster.configMaps.get('lvp-config-candidate', { namespace: NS });
    await cluster.configMaps.update(
      { ...candidate, metadata: { ...candidate.metadata, annotations: stateAnnotation(done) } },
      { namespace: NS },
    );
    await cluster.configMaps.update(
      stagedConfigMap(
        NS,
        'lvp-config',
        'stable',
        candidateData,
        {},
        await cluster.configMaps.get('lvp-config-stable', { namespace: NS }),
      ),
      { namespace: NS },
    );
    // Complete, but node-b and node-c still run the old stable: in progress until they apply it.
    const waiting = waitForRollout(cluster, query, desired(), { clock, timeoutMs: 10_000, intervalMs: 1000 });
    for (const node of ['node-b', 'node-c']) {
      const name = statusLeaseName('lvp', node);
      await cluster.leases.update(
        statusLease(
          { name, namespace: NS, instance: 'lvp' },
          {
            node,
            appliedHash: candidateRef.hash ?? '',
            generation: 2,
            result: 'applied',
            source: 'staged',
            agentVersion: 't',
          },
          NOW,
          180_000,
          await cluster.leases.get(name, { namespace: NS }),
        ),
        { namespace: NS },
      );
    }
    const ended = { settled: false };
    void waiting.then(() => (ended.settled = true));
    for (let i = 0; i < 15 && !ended.settled; i++) await clock.advance(1000);
    const complete = await waiting;
    assert.equal(complete.status.verdict, 'complete');
    assert.equal(rolloutExitCode(complete.status.verdict), 0);
  });
});
