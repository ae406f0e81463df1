// `rollout pause|resume|abort|promote`: which phase allows which request (the controller's own
// rule, checked against decide), the request written on NAME-candidate, and --wait reading back
// what the controller made of it; on the in-memory cluster.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { Ajv } from 'ajv';
import { ManualClock } from '../../../src/core/clock.js';
import { RolloutRequestError } from '../../../src/core/errors.js';
import { KubeApiError } from '../../../src/core/kube/cluster.js';
import { MemoryCluster } from '../../../src/core/kube/memory/memory-cluster.js';
import { decide } from '../../../src/core/staged-rollout/decide.js';
import { requestOf, ROLLOUT_REQUEST_ANNOTATION, stateOf } from '../../../src/core/rollout-state/annotations.js';
import { stagedConfigMap, stateAnnotation } from '../../../src/core/staged-rollout/objects.js';
import { DEFAULT_POLICY } from '../../../src/core/staged-rollout/policy.js';
import {
  EXPECTED_PHASE,
  requestedResult,
  requestOutcome,
  requestProblem,
  submitRequest,
  waitForRequest,
} from '../../../src/core/staged-rollout/requests.js';
import type { RequestCluster, RequestResult, SubmittedRequest } from '../../../src/core/staged-rollout/requests.js';
import { ROLLOUT_ACTIONS, ROLLOUT_PHASES } from '../../../src/core/rollout-state/state.js';
import type { RolloutPhase, RolloutState } from '../../../src/core/rollout-state/state.js';
import { renderRequestText, requestExitCode, toRequestJson } from '../../../src/render/rollout-request.js';
import { REPO_ROOT } from '../../support/cli.js';

const h = (c: string): string => `sha256:${c.repeat(64)}`;
const NOW = 1_780_000_000_000;
const NS = 'kube-system';
const TARGET = { namespace: NS, name: 'lvp-config' };
const STABLE = { fingerprint: h('1'), hash: h('a') };
const CANDIDATE = { fingerprint: h('2'), hash: h('b') };

function rolloutState(overrides: Partial<RolloutState> = {}): RolloutState {
  return {
    phase: 'progressing',
    candidate: CANDIDATE,
    stable: STABLE,
    waves: [
      { name: 'canary', nodes: ['node-a'], size: 1 },
      { name: 'wave-1', nodes: ['node-b'], size: 1 },
    ],
    opened: 1,
    waveOpenedAt: NOW - 60_000,
    reverted: false,
    startedAt: NOW - 600_000,
    updatedAt: NOW - 60_000,
    ...overrides,
  };
}

/** A state of `phase` as the controller writes it (a halt with its halt, invalid without a hash). */
function inPhase(phase: RolloutPhase): RolloutState {
  if (phase === 'halted') return rolloutState({ phase, halt: { wave: 0, node: 'node-a', reason: 'x', at: NOW } });
  if (phase === 'invalid') return rolloutState({ phase, candidate: { fingerprint: h('2') }, waves: [], opened: 0 });
  return rolloutState({ phase });
}

async function clusterWith(state: RolloutState | undefined): Promise<MemoryCluster> {
  const cluster = new MemoryCluster({ namespaces: [NS] });
  if (state !== undefined)
    await cluster.configMaps.create(
      stagedConfigMap(NS, 'lvp-config', 'candidate', { storageClassMap: '' }, stateAnnotation(state), undefined),
      { namespace: NS },
    );
  return cluster;
}

const candidateOf = (cluster: MemoryCluster) => cluster.configMaps.get('lvp-config-candidate', { namespace: NS });

/** The controller's step on the stored candidate: decide with the request, the state written, the request cleared. */
async function controllerStep(cluster: MemoryCluster): Promise<void> {
  const cm = await candidateOf(cluster);
  const decoded = stateOf(cm);
  assert.ok(decoded?.ok === true);
  const decision = decide({
    now: NOW + 1000,
    policy: DEFAULT_POLICY,
    desired: CANDIDATE,
    stable: STABLE,
    state: decoded.state,
    request: requestOf(cm),
    nodes: [{ name: 'node-a' }, { name: 'node-b' }],
    reports: new Map(),
  });
  const annotations = Object.fromEntries(
    Object.entries(cm.metadata.annotations ?? {}).filter(([k]) => k !== ROLLOUT_REQUEST_ANNOTATION),
  );
  await cluster.configMaps.update(
    {
      ...cm,
      metadata: {
        ...cm.metadata,
        annotations: {
          ...annotations,
          ...(decision.state !== undefined ? stateAnnotation(decision.state.state) : {}),
        },
      },
    },
    { namespace: NS },
  );
}

void describe('which phase allows which request', () => {
  void it('exactly those the controller carries out (decide), each to its expected phase', () => {
    for (const phase of ROLLOUT_PHASES) {
      for (const action of ROLLOUT_ACTIONS) {
        const state = inPhase(phase);
        const problem = requestProblem(action, state);
        const decision = decide({
          now: NOW,
          policy: DEFAULT_POLICY,
          desired: state.candidate,
          stable: STABLE,
          state,
          request: { action, candidate: state.candidate.fingerprint, at: NOW },
          nodes: [{ name: 'node-a' }, { name: 'node-b' }],
          reports: new Map(),
        });
        const what = `${action} when ${phase}`;
        if (problem === undefined) {
          assert.equal(decision.state?.state.phase, EXPECTED_PHASE[action], what);
        } else {
          assert.equal(decision.state, undefined, `${what}: the controller would drop it (${problem})`);
          assert.equal(decision.clearRequest, true, what);
        }
      }
    }
  });

  void it('says why in words an operator acts on', () => {
    assert.equal(
      requestProblem('pause', inPhase('paused')),
      'the rollout is paused; only a progressing rollout can be paused',
    );
    assert.match(requestProblem('resume', inPhase('progressing')) ?? '', /only a paused or halted rollout/);
    assert.match(requestProblem('abort', inPhase('complete')) ?? '', /only a progressing, paused or halted rollout/);
    assert.match(requestProblem('promote', inPhase('complete')) ?? '', /stable config already/);
    assert.match(requestProblem('promote', inPhase('invalid')) ?? '', /does not parse/);
    assert.equal(
      requestProblem('promote', inPhase('aborted')),
      undefined,
      'an aborted candidate can still be promoted',
    );
  });
});

void describe('writing a request (in-memory cluster)', () => {
  void it('merge-patches the annotation for the current candidate, by the kubeconfig user, keeping the rest', async () => {
    const cluster = await clusterWith(rolloutState());
    const submitted = await submitRequest(cluster, TARGET, 'pause', { now: () => NOW, by: 'alice' });
    const cm = await candidateOf(cluster);
    assert.deepEqual(requestOf(cm), { action: 'pause', candidate: CANDIDATE.fingerprint, by: 'alice', at: NOW });
    assert.equal(cm.metadata.annotations?.[ROLLOUT_REQUEST_ANNOTATION], submitted.raw);
    assert.equal(stateOf(cm)?.ok, true, 'the state is untouched');
    assert.deepEqual(cm.data, { storageClassMap: '' });
    assert.equal(submitted.before.phase, 'progressing');
    const anonymous = await submitRequest(cluster, TARGET, 'abort', { now: () => NOW });
    assert.equal(anonymous.request.by, undefined, 'no user known: none written');
  });

  void it('refuses with exit 1 without a staged rollout, with an unreadable state, or in the wrong phase', async () => {
    const refused = (reason: 'not-staged' | 'phase', message: RegExp) => (err: unknown) =>
      err instanceof RolloutRequestError &&
      (err as { exitCode: number }).exitCode === 1 &&
      err.reason === reason &&
      message.test(err.message);
    await assert.rejects(
      submitRequest(await clusterWith(undefined), TARGET, 'pause', { now: () => NOW }),
      refused(
        'not-staged',
        /^no staged rollout of configmap kube-system\/lvp-config: kube-system\/lvp-config-candidate does not exist/,
      ),
    );
    const damaged = await clusterWith(rolloutState());
    await damaged.configMaps.patch(
      'lvp-config-candidate',
      { metadata: { annotations: { 'local-static-provisioner/rollout-state': 'not json' } } },
      { namespace: NS },
    );
    await assert.rejects(
      submitRequest(damaged, TARGET, 'pause', { now: () => NOW }),
      refused('not-staged', /the rollout state on .* is unreadable \(not JSON\)/),
    );
    const paused = await clusterWith(inPhase('paused'));
    await assert.rejects(
      submitRequest(paused, TARGET, 'pause', { now: () => NOW }),
      refused('phase', /^cannot pause the staged rollout of lvp-config: the rollout is paused/),
    );
    assert.equal(requestOf(await candidateOf(paused)), undefined, 'nothing written');
  });

  void it('checks against the state it writes on: a conflict (the controller wrote meanwhile) reads and checks again', async () => {
    const cluster = await clusterWith(rolloutState());
    let conflicts = 0;
    const racing: RequestCluster = {
      configMaps: {
        ...cluster.configMaps,
        patch: async (name, patch, options) => {
          if (conflicts === 0) {
            conflicts += 1;
            // The controller pauses the rollout between the CLI's read and its write.
            const cm = await candidateOf(cluster);
            await cluster.configMaps.update(
              { ...cm, metadata: { ...cm.metadata, annotations: stateAnnotation(inPhase('halted')) } },
              options,
            );
          }
          return cluster.configMaps.patch(name, patch, options);
        },
      },
    };
    await assert.rejects(
      submitRequest(racing, TARGET, 'pause', { now: () => NOW }),
      (err: unknown) => err instanceof RolloutRequestError && /the rollout is halted/.test(err.message),
    );
    assert.equal(conflicts, 1);
    const resumed = await submitRequest(racing, TARGET, 'resume', { now: () => NOW });
    assert.equal(resumed.before.phase, 'halted');
  });

  void it('a refused write is a start-up error (exit 5) naming the permissions doc', async () => {
    const cluster = await clusterWith(rolloutState());
    const readOnly: RequestCluster = {
      configMaps: {
        ...cluster.configMaps,
        patch: () =>
          Promise.reject(new KubeApiError(403, 'Forbidden', 'configmaps "lvp-config-candidate" is forbidden')),
      },
    };
    await assert.rejects(
      submitRequest(readOnly, TARGET, 'pause', { now: () => NOW }),
      (err: unknown) =>
        err instanceof Error && 'exitCode' in err && err.exitCode === 5 && /docs\/rollout-status\.md/.test(err.message),
    );
  });
});

void describe('waiting for the controller', () => {
  void it('done once the controller cleared the request and the phase is the expected one', async () => {
    for (const [action, from] of [
      ['pause', 'progressing'],
      ['resume', 'halted'],
      ['resume', 'paused'],
      ['abort', 'paused'],
      ['promote', 'halted'],
    ] as const) {
      const cluster = await clusterWith(inPhase(from));
      const submitted = await submitRequest(cluster, TARGET, action, { now: () => NOW });
      assert.equal(requestOutcome(submitted, await candidateOf(cluster)).outcome, 'pending');
      await controllerStep(cluster);
      const result = await waitForRequest(cluster, submitted, { clock: new ManualClock(NOW), timeoutMs: 5000 });
      assert.equal(result.outcome, 'done', `${action} from ${from}: ${result.detail ?? ''}`);
      assert.equal(result.after?.phase, EXPECTED_PHASE[action]);
      assert.equal(requestExitCode(result.outcome), 0);
    }
  });

  void it('resumed and halted again at once (another halt): done; the same halt still there: dropped', () => {
    const halted = inPhase('halted');
    const submitted: SubmittedRequest = {
      target: TARGET,
      request: { action: 'resume', candidate: CANDIDATE.fingerprint, at: NOW },
      raw: 'x',
      before: halted,
    };
    const candidate = (state: RolloutState) =>
      stagedConfigMap(NS, 'lvp-config', 'candidate', {}, stateAnnotation(state), undefined);
    const again = { ...halted, halt: { wave: 0, node: 'node-a', reason: 'y', at: NOW + 5000 } };
    assert.equal(requestOutcome(submitted, candidate(again)).outcome, 'done');
    assert.equal(requestOutcome(submitted, candidate(halted)).outcome, 'dropped');
  });

  void it('dropped when the controller cleared it without acting; replaced by another request; gone with the copy', async () => {
    const cluster = await clusterWith(rolloutState());
    const submitted = await submitRequest(cluster, TARGET, 'pause', { now: () => NOW });
    // The rollout completed before the controller took the pause up: it clears it and does nothing.
    const cm = await candidateOf(cluster);
    await cluster.configMaps.update(
      { ...cm, metadata: { ...cm.metadata, annotations: stateAnnotation(inPhase('complete')) } },
      { namespace: NS },
    );
    const dropped = await waitForRequest(cluster, submitted, { clock: new ManualClock(NOW), timeoutMs: 5000 });
    assert.equal(dropped.outcome, 'dropped');
    assert.equal(dropped.detail, 'the rollout is complete: pause no longer applied when the controller took it up');
    assert.equal(requestExitCode(dropped.outcome), 1);
    // A new apply superseded the candidate.
    const superseded = stagedConfigMap(
      NS,
      'lvp-config',
      'candidate',
      {},
      stateAnnotation(rolloutState({ candidate: { fingerprint: h('3'), hash: h('c') } })),
      undefined,
    );
    assert.equal(requestOutcome(submitted, superseded).detail, 'a new config superseded the candidate');
    const other = stagedConfigMap(
      NS,
      'lvp-config',
      'candidate',
      {},
      {
        ...stateAnnotation(rolloutState()),
        [ROLLOUT_REQUEST_ANNOTATION]: '{"action":"abort"}',
      },
      undefined,
    );
    assert.equal(requestOutcome(submitted, other).outcome, 'replaced');
    assert.equal(requestOutcome(submitted, undefined).outcome, 'dropped');
  });

  void it('timed out when nobody takes it up (no controller), reading every second', async () => {
    const cluster = await clusterWith(rolloutState());
    const submitted = await submitRequest(cluster, TARGET, 'pause', { now: () => NOW });
    const clock = new ManualClock(NOW);
    let reads = 0;
    const counting: RequestCluster = {
      configMaps: {
        ...cluster.configMaps,
        get: (name, options) => {
          reads += 1;
          return cluster.configMaps.get(name, options);
        },
      },
    };
    const waiting = waitForRequest(counting, submitted, { clock, timeoutMs: 3000 });
    let settled = false;
    void waiting.then(() => (settled = true));
    const done = (): boolean => settled;
    for (let i = 0; i < 10 && !done(); i++) {
      // Each second once the waiter sleeps (after its read).
      while (clock.pendingSleepers === 0 && !done()) await new Promise((r) => setImmediate(r));
      await clock.advance(1000);
    }
    const result = await waiting;
    assert.equal(result.outcome, 'timed-out');
    assert.match(result.detail ?? '', /is `provisioner rollout controller` running\?/);
    assert.equal(reads, 4, 'at 0, 1, 2 and 3 s');
    assert.equal(requestExitCode(result.outcome), 6);
  });
});

void describe('rendering a request', () => {
  const submitted: SubmittedRequest = {
    target: TARGET,
    request: { action: 'abort', candidate: CANDIDATE.fingerprint, by: 'alice', at: NOW },
    raw: 'x',
    before: inPhase('halted'),
  };
  const results: RequestResult[] = [
    requestedResult(submitted),
    {
      ...submitted,
      outcome: 'done',
      after: { ...inPhase('aborted'), message: 'aborted by alice: every node runs stable' },
      waitedMs: 1234,
    },
    {
      ...submitted,
      outcome: 'dropped',
      after: inPhase('complete'),
      detail: 'the rollout is complete: …',
      waitedMs: 1000,
    },
    {
      ...submitted,
      outcome: 'replaced',
      after: inPhase('halted'),
      detail: 'another request took its place',
      waitedMs: 0,
    },
    { ...submitted, outcome: 'timed-out', after: undefined, detail: 'not taken up', waitedMs: 60_000 },
  ];

  void it('text: one line saying what happened', () => {
    assert.equal(
      renderRequestText(results[0] as RequestResult),
      'abort requested for the staged rollout of configmap kube-system/lvp-config (candidate sha256:bbbbbbbbbbbb, halted); the controller carries it out (`rollout status` shows it, `--wait` waits for it)\n',
    );
    assert.equal(
      renderRequestText(results[1] as RequestResult),
      'aborted the staged rollout of configmap kube-system/lvp-config (candidate sha256:bbbbbbbbbbbb); now aborted\nmessage: aborted by alice: every node runs stable\n',
    );
    assert.match(
      renderRequestText(results[2] as RequestResult),
      /^abort not carried out on the staged rollout .*: the rollout is complete/,
    );
    assert.match(
      renderRequestText(results[4] as RequestResult),
      /^abort requested .*, not taken up within 60s: not taken up\n$/,
    );
  });

  void it('-o json follows docs/schemas/rollout-request.v1.schema.json', async () => {
    const schema: unknown = JSON.parse(
      await readFile(join(REPO_ROOT, 'docs/schemas/rollout-request.v1.schema.json'), 'utf8'),
    );
    const ajv = new Ajv({ allErrors: true, strict: false });
    const validate = ajv.compile(schema as object);
    for (const result of results) {
      const json = toRequestJson(result);
      assert.ok(validate(JSON.parse(JSON.stringify(json))), `${result.outcome}: ${ajv.errorsText(validate.errors)}`);
    }
    const done = toRequestJson(results[1] as RequestResult);
    assert.deepEqual(done, {
      formatVersion: 1,
      action: 'abort',
      configMap: 'kube-system/lvp-config',
      outcome: 'done',
      request: { action: 'abort', candidate: CANDIDATE.fingerprint, by: 'alice', at: new Date(NOW).toISOString() },
      candidate: CANDIDATE,
      phaseBefore: 'halted',
      phase: 'aborted',
      message: 'aborted by alice: every node runs stable',
      waitedSeconds: 1.2,
    });
    assert.equal(validate({ ...done, extra: 1 }), false);
    const refused = {
      formatVersion: 1,
      error: { code: 'rollout-refused', exitCode: 1, message: 'no staged rollout', issues: [] },
    };
    assert.ok(validate(refused), ajv.errorsText(validate.errors));
  });
});
