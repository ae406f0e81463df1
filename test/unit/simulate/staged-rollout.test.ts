// Staged rollouts in simulate: the scenario syntax (stagedRollout, fleet, the staged steps and
// expectations) and its errors, the two shipped scenarios (a canary that halts and is reverted, a
// rollout through every wave with a pause, then a promotion), the stand-in agents' failure modes,
// the JSON contract, and the pure reading of the controller's writes and the agents' Leases.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { Ajv } from 'ajv';
import type { PublishedState } from '../../../src/core/fleet/applied-state.js';
import type { ConfigMap } from '../../../src/core/kube/objects.js';
import { InvalidInputError } from '../../../src/core/simulate/input.js';
import type { ScenarioReport } from '../../../src/core/simulate/report.js';
import { leaseEvents, rolloutEvents } from '../../../src/core/simulate/rollout-observe.js';
import { runScenario } from '../../../src/core/simulate/run.js';
import { loadScenario, parseScenario } from '../../../src/core/simulate/scenario.js';
import { ROLLOUT_REQUEST_ANNOTATION, ROLLOUT_STATE_ANNOTATION } from '../../../src/core/rollout-state/annotations.js';
import { encodeRolloutRequest, encodeRolloutState } from '../../../src/core/rollout-state/state.js';
import type { RolloutState } from '../../../src/core/rollout-state/state.js';
import { renderScenarioText, toScenarioJson } from '../../../src/render/simulate.js';
import { REPO_ROOT } from '../../support/cli.js';

const SCENARIOS = join(REPO_ROOT, 'docs/scenarios');
const FAST = 'config:\n  storageClassMap:\n    fast: { hostDir: /mnt/fast, mountDir: /mnt/fast }\n';
const STAGED = 'stagedRollout:\n  canary: { selector: canary=yes }\n  waves: 50%,100%\n  bakeTime: 1m\n';
const FLEET = 'fleet:\n  - { name: node-b, labels: { canary: "yes" } }\n  - node-c\n  - node-d\n';

function staged(steps: readonly string[], head = `${STAGED}${FLEET}`): ReturnType<typeof parseScenario> {
  return parseScenario('s.yaml', `name: t\n${FAST}${head}steps:\n${steps.join('\n')}\n`, { baseDir: '/' });
}

function issuesOf(fn: () => unknown): string[] {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof InvalidInputError, String(err));
    assert.equal(err.exitCode, 3);
    return err.issues.map((i) => `${i.position?.line ?? '?'}:${i.position?.column ?? '?'} ${i.path}: ${i.message}`);
  }
  return assert.fail('expected an InvalidInputError');
}

function actions(r: ScenarioReport): ScenarioReport['steps'][number]['actions'] {
  return r.steps.flatMap((s) => s.actions);
}

function failures(r: ScenarioReport): string[] {
  return r.steps.flatMap((s) =>
    s.expectations.filter((e) => !e.ok).map((e) => `${s.index}: ${e.key} ${JSON.stringify(e.actual)}`),
  );
}

describe('simulate: staged rollout scenarios, parsed', () => {
  it('reads the chart values, the fleet and the staged steps', () => {
    const s = staged(
      [
        '  - node fails candidate: { node: node-c, how: errors, errors: 3, reason: no cleaner }',
        '  - node fails candidate: node-d',
        '  - apply config: { useJobForCleaning: true }',
        '    expect: { rollout: { phase: halted, opened: canary, haltedAt: canary, haltedNode: node-c, reverted: true }, nodesOnCandidate: [node-c, node-b], nodesOnStable: 2 }',
        '  - rollout pause: { by: alice }',
        '  - rollout resume',
        '  - rollout abort:',
        '    expect: { rollout: aborted }',
        '  - rollout promote',
        '  - node fixed: node-c',
      ],
      `${STAGED}  progressDeadline: 2m\n  onHalt: halt\n  enabled: true\n${FLEET}`,
    );
    assert.deepEqual(s.stagedRollout?.policy, {
      canary: { kind: 'selector', selector: 'canary=yes' },
      waves: [
        { kind: 'percent', value: 50 },
        { kind: 'percent', value: 100 },
      ],
      bakeMs: 60_000,
      progressDeadlineMs: 120_000,
      onHalt: 'halt',
    });
    assert.deepEqual(s.stagedRollout.fleet, [
      { name: 'node-b', labels: { canary: 'yes' } },
      { name: 'node-c', labels: {} },
      { name: 'node-d', labels: {} },
    ]);
    assert.deepEqual(
      s.steps.map((x) => x.type),
      [
        'node fails candidate',
        'node fails candidate',
        'apply config',
        'rollout pause',
        'rollout resume',
        'rollout abort',
        'rollout promote',
        'node fixed',
      ],
    );
    assert.deepEqual(s.steps[0] && { ...s.steps[0], position: undefined }, {
      index: 1,
      position: undefined,
      type: 'node fails candidate',
      node: 'node-c',
      how: 'errors',
      errors: 3,
      reason: 'no cleaner',
    });
    const defaults = s.steps[1];
    assert.ok(defaults?.type === 'node fails candidate');
    assert.deepEqual([defaults.how, defaults.errors, defaults.reason], ['rejected', 1, undefined]);
    assert.deepEqual(s.steps[2]?.expect?.nodesOnCandidate, { nodes: ['node-b', 'node-c'] }, 'sorted');
    assert.deepEqual(s.steps[2].expect.nodesOnStable, { count: 2 });
    assert.deepEqual(s.steps[5]?.expect?.rollout, { phase: 'aborted' });
    const pause = s.steps[3];
    assert.ok(pause?.type === 'rollout pause');
    assert.equal(pause.by, 'alice');
  });

  it('a fleet by count is node-01 … with the labels; the defaults are the chart defaults', () => {
    const s = staged(['  - check'], 'stagedRollout: {}\nfleet: { count: 3, labels: { zone: a } }\n');
    assert.deepEqual(
      s.stagedRollout?.fleet.map((f) => [f.name, f.labels]),
      [
        ['node-01', { zone: 'a' }],
        ['node-02', { zone: 'a' }],
        ['node-03', { zone: 'a' }],
      ],
    );
    assert.deepEqual(s.stagedRollout.policy.canary, { kind: 'count', count: 1 });
    assert.equal(s.stagedRollout.policy.bakeMs, 5 * 60_000);
    assert.equal(s.settings.statusHeartbeatMs, 60_000);
  });

  it('bad stagedRollout and fleet values are named by field, with their position', () => {
    const issues = issuesOf(() =>
      staged(
        ['  - check'],
        [
          'stagedRollout:',
          '  canary: { selector: "a in (", count: 2 }',
          '  waves: 50%,20%',
          '  bakeTime: 5 minutes',
          '  progressDeadline: 10ms',
          '  onHalt: rollback',
          '  enabled: false',
          '  bake: 1m',
          'fleet:',
          '  - node-b',
          '  - node-b',
          '  - Node_C',
          '  - { name: node-d, labels: { "bad key!": x } }',
          '',
        ].join('\n'),
      ),
    );
    const expected = [
      /^6:\d+ stagedRollout\.canary\.selector: unable to parse requirement/u,
      /^7:\d+ stagedRollout\.waves: 20% does not reach further than the wave before it/u,
      /^8:\d+ stagedRollout\.bakeTime: "5 minutes": invalid duration/u,
      /^9:\d+ stagedRollout\.progressDeadline: 10ms: must be at least 1s/u,
      /^10:\d+ stagedRollout\.onHalt: "rollback" is not one of revert, halt/u,
      /^11:\d+ stagedRollout\.enabled: false: remove the stagedRollout block/u,
      /^12:\d+ stagedRollout\.bake: unknown key "bake"/u,
      /^15:\d+ fleet\[1\]: node node-b is listed twice/u,
      /^16:\d+ fleet\[2\]: "Node_C" is not a valid Node name/u,
      /^17:\d+ fleet\[3\]\.labels\.bad key!: not a valid label key/u,
    ];
    for (const re of expected)
      assert.ok(
        issues.some((i) => re.test(i)),
        `${re.source} in\n${issues.join('\n')}`,
      );
    assert.equal(issues.length, expected.length, issues.join('\n'));
  });

  it('staged steps and expectations need a stagedRollout block; config changed does not go with one', () => {
    const plain = issuesOf(() =>
      parseScenario(
        's.yaml',
        [
          `name: t`,
          FAST.trimEnd(),
          'fleet: [node-b]',
          'steps:',
          '  - apply config: { useJobForCleaning: true }',
          '  - rollout promote',
          '  - check:',
          '    expect: { rollout: complete, nodesOnStable: 1 }',
          '',
        ].join('\n'),
        { baseDir: '/' },
      ),
    );
    assert.deepEqual(
      plain.map((i) => i.replace(/^\d+:\d+ /u, '')),
      [
        'fleet: needs a stagedRollout: block (the fleet takes part in a staged rollout)',
        'steps[1]: "apply config" needs a stagedRollout: block (the staged rollout controller and its fleet)',
        'steps[2]: "rollout promote" needs a stagedRollout: block (the staged rollout controller and its fleet)',
        'steps[3].expect.rollout: needs a stagedRollout: block (a scenario without one has no rollout)',
        'steps[3].expect.nodesOnStable: needs a stagedRollout: block (a scenario without one has no rollout)',
      ],
    );
    const withStaged = issuesOf(() =>
      staged([
        '  - config changed: { useJobForCleaning: true }',
        '  - node fails candidate: { node: node-x, how: exploded, errors: 2 }',
        '  - node fails candidate: { how: errors }',
        '  - node fixed: node-z',
        '  - rollout pause: { who: alice }',
        '  - check:',
        '    expect: { rollout: { phase: halte, wave: canary }, nodesOnCandidate: { node-b: true } }',
      ]),
    );
    const expected = [
      /^\d+:\d+ steps\[1\]: with stagedRollout, the operator's change is "apply config"/u,
      /^\d+:\d+ steps\[2\]\.node fails candidate\.node: "node-x" is not a node of the fleet \(node-b, node-c, node-d\)/u,
      /^\d+:\d+ steps\[2\]\.node fails candidate\.how: "exploded" is not one of rejected, refused, rolled-back, failed, errors, silent, stuck/u,
      /^\d+:\d+ steps\[2\]\.node fails candidate\.errors: only with how: errors/u,
      /^\d+:\d+ steps\[3\]\.node fails candidate\.node: is required/u,
      /^\d+:\d+ steps\[4\]\.node fixed: "node-z" is not a node of the fleet/u,
      /^\d+:\d+ steps\[5\]\.rollout pause\.who: unknown key "who"/u,
      /^\d+:\d+ steps\[6\]\.expect\.rollout\.phase: "halte" is not one of progressing, paused, halted, complete, aborted, invalid, none; did you mean "halted"\?/u,
      /^\d+:\d+ steps\[6\]\.expect\.rollout\.wave: unknown key "wave"/u,
      /^\d+:\d+ steps\[6\]\.expect\.nodesOnCandidate: expected a list/u,
    ];
    for (const re of expected)
      assert.ok(
        withStaged.some((i) => re.test(i)),
        `${re.source} in\n${withStaged.join('\n')}`,
      );
    assert.equal(withStaged.length, expected.length, withStaged.join('\n'));
  });

  it('a failure scripted for the real agent’s node is a step that cannot be carried out (exit 3)', async () => {
    const s = staged(['  - node fails candidate: node-a'], `${STAGED}fleet: [node-a, node-b]\n`);
    await assert.rejects(runScenario(s), (err: unknown) => {
      assert.ok(err instanceof InvalidInputError);
      assert.equal(err.issues[0]?.path, 'steps[1].node fails candidate');
      assert.match(err.issues[0].message, /node-a runs the real agent/u);
      return true;
    });
  });
});

describe('simulate: staged rollout replays', () => {
  it('the halted canary: the halt stops every later wave, the canary reverts, the others never apply it', async () => {
    const r = await runScenario(await loadScenario(join(SCENARIOS, 'staged-rollout-halted-canary.yaml')));
    assert.deepEqual(failures(r), []);
    const all = actions(r);
    // The candidate reached the canary and no other node: no later wave opened, ever.
    const opened = all.flatMap((a) => (a.type === 'rollout-wave-opened' ? [a.wave] : []));
    assert.deepEqual(opened, ['canary']);
    const onCandidate = all.flatMap((a) => (a.type === 'node-applied' && a.config === 'candidate' ? [a.node] : []));
    assert.deepEqual(onCandidate, ['node-c']);
    const halt = all.find((a) => a.type === 'rollout-halted');
    assert.ok(halt?.type === 'rollout-halted');
    assert.deepEqual([halt.wave, halt.node, halt.reverted], ['canary', 'node-c', true]);
    const reverted = all.findIndex((a) => a.type === 'node-reverted' && a.node === 'node-c');
    assert.ok(reverted > all.indexOf(halt), 'the canary went back to stable after the halt');
    // This node (the real agent) never reloaded.
    assert.equal(all.filter((a) => a.type === 'reload').length, 0);
    const final = r.final.rollout;
    assert.deepEqual(
      final?.waves.map((w) => [w.name, w.open]),
      [
        ['canary', true],
        ['wave-1', false],
        ['wave-2', false],
      ],
    );
    assert.ok(final.nodes.every((n) => n.config === 'stable'));
  });

  it('the promotion: waves in order, a pause that holds, the real agent applies with its wave, then promoted', async () => {
    const r = await runScenario(await loadScenario(join(SCENARIOS, 'staged-rollout-promote.yaml')));
    assert.deepEqual(failures(r), []);
    const all = actions(r);
    const opened = all.flatMap((a) => (a.type === 'rollout-wave-opened' ? [`${a.wave}@${String(a.at)}`] : []));
    assert.deepEqual(opened, ['canary@0', 'wave-1@300000', 'wave-2@2404000', 'canary@2705000']);
    const pause = r.steps.find((s) => s.type === 'rollout pause');
    const resume = r.steps.find((s) => s.type === 'rollout resume');
    assert.ok(pause && resume);
    assert.ok(
      !all.some((a) => a.type === 'rollout-wave-opened' && a.at > pause.at && a.at < resume.at),
      'no wave opens while paused',
    );
    // node-a's reload to the candidate happened when wave-1 opened, not before.
    const reloads = all.filter((a) => a.type === 'reload');
    assert.deepEqual(
      reloads.map((a) => a.at),
      [300_000, 2_706_000],
    );
    assert.ok(all.some((a) => a.type === 'rollout-completed'));
    assert.ok(all.some((a) => a.type === 'rollout-promoted'));
  });

  it('replays the same every time, and the JSON follows the schema', async () => {
    const schema: unknown = JSON.parse(await readFile(join(REPO_ROOT, 'docs/schemas/simulate.v1.schema.json'), 'utf8'));
    const ajv = new Ajv({ allErrors: true, strict: false });
    const validate = ajv.compile(schema as object);
    const types = new Set<string>();
    for (const f of ['staged-rollout-halted-canary.yaml', 'staged-rollout-promote.yaml']) {
      const a = toScenarioJson(await runScenario(await loadScenario(join(SCENARIOS, f))));
      const b = toScenarioJson(await runScenario(await loadScenario(join(SCENARIOS, f))));
      assert.deepEqual(a, b, `${f}: virtual time makes a replay deterministic`);
      assert.ok(validate(a), `${f}: ${ajv.errorsText(validate.errors)}`);
      assert.equal(a.stagedRollout?.fleet.length, 6);
      assert.equal(a.settings['statusHeartbeatMs'], 60_000);
      for (const s of a.steps) {
        types.add(s.type);
        for (const x of s.actions) types.add(x.type);
      }
    }
    for (const t of [
      'apply config',
      'rollout pause',
      'rollout resume',
      'rollout promote',
      'node fails candidate',
      'rollout-adopted',
      'rollout-started',
      'rollout-wave-opened',
      'rollout-baking',
      'rollout-halted',
      'rollout-paused',
      'rollout-resumed',
      'rollout-promoted',
      'rollout-completed',
      'rollout-aborted',
      'node-applied',
      'node-reverted',
      'node-errors',
    ])
      assert.ok(types.has(t), t);
  });

  it('the real agent as the canary: its reload guard refuses the candidate, and that halts the rollout', async () => {
    const r = await runScenario(
      parseScenario(
        's.yaml',
        [
          'name: t',
          FAST.trimEnd(),
          'disks:',
          '  - { name: disk1, class: fast, capacity: 20Gi }',
          'stagedRollout: { canary: { selector: canary=yes } }',
          'fleet: [{ name: node-a, labels: { canary: "yes" } }, node-b, node-c]',
          'steps:',
          '  - apply config:',
          '      storageClassMap:',
          '        slow: { hostDir: /mnt/slow, mountDir: /mnt/slow }',
          '    expect: { rollout: { phase: halted, haltedAt: canary, haltedNode: node-a }, nodesOnCandidate: [] }',
          '',
        ].join('\n'),
        { baseDir: '/' },
      ),
    );
    assert.deepEqual(failures(r), []);
    const started = actions(r).find((a) => a.type === 'rollout-started');
    assert.ok(started?.type === 'rollout-started');
    assert.deepEqual(started.waves[0], { name: 'canary', nodes: ['node-a'] }, 'the fleet labelled the scenario node');
    const refused = actions(r).find((a) => a.type === 'node-not-applied');
    assert.ok(refused?.type === 'node-not-applied');
    assert.deepEqual([refused.node, refused.result], ['node-a', 'refused']);
    assert.ok(
      actions(r).some((a) => a.type === 'reload' && a.outcome === 'refused'),
      "the agent's own reload",
    );
  });

  it('stand-ins that reject, go silent or never apply halt the rollout as the controller says', async () => {
    const r = await runScenario(
      staged(
        [
          '  - node fails candidate: { node: node-b, how: refused, reason: would orphan 2 PVs }',
          '  - apply config: { useJobForCleaning: true }',
          '    expect: { rollout: { phase: halted, haltedNode: node-b }, nodesOnCandidate: [] }',
          '  - node fixed: node-b',
          '    expect: { nodesOnCandidate: [node-b] }',
          '  - node fails candidate: { node: node-c, how: silent }',
          '  - rollout resume',
          '  - time passes: 10m',
          '    expect: { rollout: { phase: halted, opened: wave-1, haltedNode: node-c } }',
          '  - node fixed: node-c',
          '  - node fails candidate: { node: node-d, how: stuck }',
          '  - rollout resume',
          '  - time passes: 30m',
          '    expect: { rollout: { phase: halted, haltedAt: wave-2, haltedNode: node-d } }',
        ],
        `${STAGED}  progressDeadline: 5m\n  onHalt: halt\n${FLEET}settings: { statusHeartbeat: 30s }\n`,
      ),
    );
    assert.deepEqual(failures(r), []);
    const halts = actions(r).flatMap((a) => (a.type === 'rollout-halted' ? [`${a.node}: ${a.reason}`] : []));
    assert.equal(halts.length, 3, halts.join('\n'));
    assert.match(halts[0] ?? '', /^node-b: refused the candidate: would orphan 2 PVs$/u);
    assert.match(halts[1] ?? '', /^node-c: its heartbeat is stale/u);
    assert.match(halts[2] ?? '', /^node-d: did not apply the candidate within 300s of its wave opening/u);
    assert.ok(actions(r).some((a) => a.type === 'node-silent' && a.node === 'node-c'));
    const text = renderScenarioText(r, { color: false });
    assert.match(text, /node-b refused sha256:[0-9a-f]{12}: would orphan 2 PVs$/mu);
    assert.match(
      text,
      /rollout HALTED at canary \(node-b: refused the candidate: would orphan 2 PVs\); its nodes keep the candidate \(on halt: halt\)$/mu,
    );
    assert.match(text, /^Rollout of sha256:[0-9a-f]{12} \(stable sha256:[0-9a-f]{12}\): halted at wave-2 \(node-d: /mu);
  });
});

describe('simulate: reading the rollout off the objects', () => {
  const H = (c: string): string => `sha256:${c.repeat(64)}`;
  const base: RolloutState = {
    phase: 'progressing',
    candidate: { fingerprint: H('1'), hash: H('a') },
    stable: { fingerprint: H('2'), hash: H('b') },
    waves: [
      { name: 'canary', nodes: ['n1'], size: 1 },
      { name: 'wave-1', nodes: ['n2', 'n3'], size: 2 },
    ],
    opened: 1,
    waveOpenedAt: 0,
    reverted: false,
    startedAt: 0,
    updatedAt: 0,
  };
  const cm = (state: RolloutState | undefined, request?: string): ConfigMap => ({
    metadata: {
      name: 'c-candidate',
      annotations: {
        ...(state !== undefined ? { [ROLLOUT_STATE_ANNOTATION]: encodeRolloutState(state) } : {}),
        ...(request !== undefined ? { [ROLLOUT_REQUEST_ANNOTATION]: request } : {}),
      },
    },
  });

  it('each write of the state says what the controller did', () => {
    const types = (before: RolloutState | undefined, after: RolloutState, request?: string): string[] =>
      rolloutEvents(cm(before, request), cm(after), 60_000, ['n1', 'n2', 'n3']).map((e) => e.type);
    assert.deepEqual(types(undefined, { ...base, phase: 'complete', waves: [], opened: 0 }), ['rollout-adopted']);
    assert.deepEqual(
      types({ ...base, phase: 'complete' }, { ...base, candidate: { fingerprint: H('3'), hash: H('c') } }),
      ['rollout-started', 'rollout-wave-opened'],
    );
    assert.deepEqual(types(base, { ...base, candidate: { fingerprint: H('3'), hash: H('c') } }), [
      'rollout-superseded',
      'rollout-started',
      'rollout-wave-opened',
    ]);
    assert.deepEqual(types(base, { ...base, bakeStartedAt: 5 }), ['rollout-baking']);
    assert.deepEqual(types(base, { ...base, opened: 2 }), ['rollout-wave-opened']);
    assert.deepEqual(
      types(base, { ...base, phase: 'halted', reverted: true, halt: { wave: 0, node: 'n1', reason: 'r', at: 1 } }),
      ['rollout-halted'],
    );
    const promote = encodeRolloutRequest({ action: 'promote', candidate: H('1'), by: 'alice', at: 1 });
    const promoted = rolloutEvents(cm(base, promote), cm({ ...base, phase: 'complete' }), 0, ['n1', 'n2', 'n3']);
    assert.deepEqual(promoted, [{ type: 'rollout-promoted', candidate: H('a'), by: 'alice' }]);
    assert.deepEqual(types({ ...base, opened: 2, bakeStartedAt: 1 }, { ...base, opened: 2, phase: 'complete' }), [
      'rollout-completed',
    ]);
    assert.deepEqual(types({ ...base, phase: 'paused' }, base), ['rollout-resumed']);
    assert.deepEqual(types(base, base), [], 'a write that changes nothing says nothing');
  });

  it("each status Lease says what its node did, against the node's last one", () => {
    const lease = (over: Partial<PublishedState>): PublishedState => ({
      node: 'n1',
      appliedHash: H('b'),
      generation: 1,
      result: 'started',
      source: 's',
      agentVersion: 'v',
      heartbeatAt: 0,
      staleAfterMs: 180_000,
      ...over,
    });
    const configs = { candidate: H('a'), stable: H('b'), pastCandidates: new Set([H('a')]) };
    assert.deepEqual(leaseEvents(undefined, lease({}), configs), [], 'the first Lease: nothing to say');
    assert.deepEqual(leaseEvents(lease({}), lease({ heartbeatAt: 60_000 }), configs), [], 'a heartbeat');
    assert.deepEqual(
      leaseEvents(lease({}), lease({ appliedHash: H('a'), generation: 2, errorsSinceApply: 2 }), configs),
      [
        { type: 'node-applied', node: 'n1', hash: H('a'), config: 'candidate', generation: 2 },
        { type: 'node-errors', node: 'n1', errors: 2, hash: H('a') },
      ],
    );
    assert.deepEqual(leaseEvents(lease({ appliedHash: H('a') }), lease({ generation: 3 }), configs), [
      { type: 'node-reverted', node: 'n1', hash: H('b'), generation: 3 },
    ]);
    assert.deepEqual(
      leaseEvents(lease({}), lease({ result: 'rejected', candidateHash: H('a'), reason: 'bad' }), configs),
      [{ type: 'node-not-applied', node: 'n1', result: 'rejected', hash: H('a'), reason: 'bad' }],
    );
  });
});
