// Scenario replay in-process: the shipped scenarios pass, the demo is docs/scenarios/demo.yaml,
// replays are deterministic, expectations fail as they should, and bad scenarios are reported
// with file, step and field.
import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { DEMO_SCENARIO, demoScenario } from '../../../src/core/simulate/demo.js';
import { InvalidInputError } from '../../../src/core/simulate/input.js';
import { runScenario } from '../../../src/core/simulate/run.js';
import { loadScenario, parseScenario, STEP_TYPES } from '../../../src/core/simulate/scenario.js';
import { renderScenarioText, toScenarioJson } from '../../../src/render/simulate.js';
import { REPO_ROOT } from '../../support/cli.js';

const SCENARIOS = join(REPO_ROOT, 'docs/scenarios');
const FIXTURES = join(REPO_ROOT, 'test/fixtures/simulate');
const FAST = 'config:\n  storageClassMap:\n    fast: { hostDir: /mnt/fast, mountDir: /mnt/fast }\n';

function scenario(steps: string, extra = ''): ReturnType<typeof parseScenario> {
  return parseScenario(
    's.yaml',
    `name: t\n${FAST}${extra}disks:\n  - { name: disk1, class: fast, capacity: 20Gi }\nsteps:\n${steps}`,
    {
      baseDir: '/',
    },
  );
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

describe('simulate: scenarios', () => {
  it('every scenario shipped in docs/scenarios passes', async () => {
    const files = (await readdir(SCENARIOS)).filter((f) => f.endsWith('.yaml')).sort();
    assert.ok(files.length >= 8, files.join(', '));
    for (const f of files) {
      const report = await runScenario(await loadScenario(join(SCENARIOS, f)));
      const failed = report.steps.flatMap((s) =>
        s.expectations.filter((e) => !e.ok).map((e) => `${s.index}: ${e.key}`),
      );
      assert.deepEqual(failed, [], `${f}: ${failed.join('; ')}`);
      assert.ok(report.expectations.total > 0, `${f} checks something`);
    }
  });

  it('the four cleanup transitions clean each volume exactly once and create Jobs only when they started as Jobs', async () => {
    const cleaned = async (file: string): Promise<{ cleanups: number; jobs: number }> => {
      const r = await runScenario(await loadScenario(join(SCENARIOS, file)));
      const actions = r.steps.flatMap((s) => s.actions);
      return {
        cleanups: actions.filter((a) => a.type === 'cleanup-started' || a.type === 'job-created').length,
        jobs: actions.filter((a) => a.type === 'job-created').length,
      };
    };
    assert.deepEqual(await cleaned('cleanup-in-process-to-in-process.yaml'), { cleanups: 1, jobs: 0 });
    assert.deepEqual(await cleaned('cleanup-in-process-to-job.yaml'), { cleanups: 1, jobs: 0 });
    assert.deepEqual(await cleaned('cleanup-job-to-in-process.yaml'), { cleanups: 1, jobs: 1 });
    assert.deepEqual(await cleaned('cleanup-job-to-job.yaml'), { cleanups: 1, jobs: 1 });
  });

  it('the built-in demo is docs/scenarios/demo.yaml, passes, and replays identically', async () => {
    assert.equal(await readFile(join(SCENARIOS, 'demo.yaml'), 'utf8'), DEMO_SCENARIO);
    const servers = (): number => process.getActiveResourcesInfo().filter((r) => r === 'TCPServerWrap').length;
    const before = servers();
    const a = toScenarioJson(await runScenario(demoScenario()));
    assert.equal(servers(), before, 'the agent it ran is stopped: no listener is left');
    const b = toScenarioJson(await runScenario(demoScenario()));
    assert.equal(a.result.passed, true);
    assert.deepEqual(a, b, 'virtual time makes a replay deterministic');
    const types = new Set(a.steps.flatMap((s) => s.actions.map((x) => x.type)));
    for (const t of ['pv-created', 'cleanup-started', 'cleanup-succeeded', 'pv-deleted', 'reload'])
      assert.ok(types.has(t), `the demo shows ${t}`);
    const outcomes = a.steps.flatMap((s) =>
      s.actions.filter((x) => x.type === 'reload').map((x) => x.summary.split(':')[0]),
    );
    assert.deepEqual(outcomes, ['reload applied', 'reload rejected', 'reload applied']);
  });

  it("the report is data: what happened, with no sentence in it (the words are the renderer's)", async () => {
    const r = await runScenario(demoScenario());
    for (const step of r.steps) {
      assert.ok(!('summary' in step), `step ${step.index} carries no summary`);
      for (const a of step.actions) assert.ok(!('summary' in a) && !('details' in a), `${a.type} carries no text`);
    }
    const created = r.steps[0]?.actions.find((a) => a.type === 'pv-created');
    assert.deepEqual(created && { ...created, pv: '' }, {
      at: 0,
      type: 'pv-created',
      pv: '',
      volume: 'fast-disks/disk1',
      capacity: '100Gi',
      volumeMode: 'Filesystem',
    });
    assert.deepEqual(r.steps[2] && { type: r.steps[2].type, claim: 'claim' in r.steps[2] ? r.steps[2].claim : '' }, {
      type: 'claim bound',
      claim: 'shop/data-db-0',
    });
    const rejected = r.steps.flatMap((s) => s.actions).find((a) => a.type === 'reload' && a.outcome === 'rejected');
    assert.ok(rejected?.type === 'reload');
    assert.equal(rejected.problems.length, 1);
    assert.equal(rejected.problems[0]?.position?.file, 'config/storageClassMap', "positions in the user's terms");
  });

  it('a failing expectation is reported with its step, what was expected and what was found', async () => {
    const r = await runScenario(
      scenario(
        [
          '  - disk added: { name: disk2, class: fast, capacity: 30Gi }',
          '    expect: { pvs: 3, pv: { volume: disk2, capacity: 30Gi, fsType: ext4 }, reload: applied }',
          '  - claim bound: disk1',
          '    expect: { pv: { volume: disk1, phase: Bound } }',
          '',
        ].join('\n'),
      ),
    );
    assert.equal(r.passed, false);
    assert.deepEqual(r.expectations, { total: 5, failed: 3 });
    const step1 = r.steps[1];
    assert.deepEqual(
      step1?.expectations.map((e) => [e.key, e.expected, e.actual, e.ok]),
      [
        ['pvs.count', 3, 2, false],
        ['pv[disk2].capacity', '30Gi', '30Gi', true],
        ['pv[disk2].fsType', 'ext4', '', false],
        ['reload', 'applied', '(no reload yet)', false],
      ],
    );
    assert.equal(r.steps[2]?.expectations[0]?.ok, true);
    const text = renderScenarioText(r, { color: false });
    assert.match(text, /^ {10}FAIL {2}pvs\.count: expected 3, got 2$/mu);
    assert.match(text, /^Result: 3 of 5 expectations FAILED:$/mu);
    assert.match(text, /^ {2}step 1\. disk added: pv\[disk2\]\.fsType: expected "ext4", got ""$/mu);
    assert.equal(toScenarioJson(r).exitCode, 1);
  });

  it('time only moves when a step moves it: slow cleanups, periodic passes and the change detector', async () => {
    const r = await runScenario(
      scenario(
        [
          '  - claim bound: disk1',
          '  - cleanup is slow: { volume: disk1, duration: 90s, then: fail, message: disk on fire }',
          '  - claim released: disk1',
          '    expect: { cleanups: { running: 1 } }',
          '  - time passes: 88s',
          '    note: the step itself and its second to react make 90s',
          '    expect: { cleanups: { running: 1 } }',
          '  - time passes: 1s',
          '    expect: { cleanups: { running: 0, failed: 1 }, pv: { volume: disk1, phase: Released } }',
          '',
        ].join('\n'),
      ),
    );
    assert.equal(r.passed, true, JSON.stringify(r.steps.map((s) => s.expectations)));
    const failed = toScenarioJson(r)
      .steps.flatMap((s) => s.actions)
      .find((a) => a.type === 'cleanup-failed');
    assert.ok(failed);
    assert.equal(failed.at, 2_000 + 90_000, 'failed exactly 90 s after it started at +2s');
    assert.match(failed.summary, /disk on fire/u);
  });

  it('disks removed, skipped entries and orphans show up in the timeline', async () => {
    const r = await runScenario(
      scenario(
        [
          '  - disk added: { name: disk2, class: fast, mounted: false }',
          '    expect: { skipped: { disk2: not-a-mount-point, disk1: none } }',
          '  - time passes: 10s',
          '  - disk removed: disk1',
          '    expect: { pvs: 1, pv: { volume: disk1, exists: true } }',
          '',
        ].join('\n'),
      ),
    );
    assert.equal(r.passed, true, JSON.stringify(r.steps.map((s) => s.expectations)));
    const steps = toScenarioJson(r).steps;
    // Not a mount point yet: pending for the mount grace period (10 s), then reported once.
    assert.equal(
      steps[1]?.actions.find((a) => a.type === 'skipped'),
      undefined,
    );
    const skipped = steps[2]?.actions.find((a) => a.type === 'skipped');
    assert.match(skipped?.summary ?? '', /^skipped fast\/disk2: path "\/mnt\/fast\/disk2" is not a valid mount point/u);
    assert.equal(steps.flatMap((s) => s.actions).filter((a) => a.type === 'skipped').length, 1);
  });

  it('config from a file, merged inline keys, and a missing StorageClass when asked not to create it', async () => {
    const r = await runScenario(
      scenario(
        [
          '  - config changed: { useJobForCleaning: true }',
          '    expect: { reload: applied, generation: 2 }',
          '  - config changed:',
          '      storageClassMap:',
          '        fast: { hostDir: /mnt/fast, mountDir: /mnt/fast }',
          '        extra: { hostDir: /mnt/extra, mountDir: /mnt/extra }',
          '    expect: { reload: applied, generation: 3 }',
          `  - config changed: { file: ${JSON.stringify(join(FIXTURES, 'scenario-config.yaml'))} }`,
          '    expect: { reload: applied, generation: 4 }',
          '  - config changed: { useJobForCleaning: true }',
          '    expect: { reload: applied, generation: 5 }',
          `  - config changed: { file: ${JSON.stringify(join(FIXTURES, 'broken-config.yaml'))} }`,
          '    expect: { reload: rejected, generation: 5 }',
          '',
        ].join('\n'),
        // The file drops the class `extra` (orphans-pvs): this test is about merging config inputs, so
        // the reload guard applies it; the guard has its own scenario (class-removed-orphans).
        'settings: { createStorageClasses: false, reloadGuard: apply }\ncluster: ' +
          JSON.stringify(join(FIXTURES, 'scenario-cluster.yaml')) +
          '\n',
      ),
    );
    assert.equal(r.passed, true, JSON.stringify(r.steps.map((s) => s.expectations)));
    const json = toScenarioJson(r);
    const problem = json.steps[2]?.actions.find((a) => a.type === 'class-problem');
    assert.match(problem?.summary ?? '', /^class extra: StorageClass extra not found/u);
    const reload = json.steps[2]?.actions.find((a) => a.type === 'reload');
    assert.match(reload?.details?.join('\n') ?? '', /storageClassMap\.extra \[needs-pod-change\]/u);
    assert.ok(!reload?.details?.some((d) => d.startsWith('useJobForCleaning')), 'the earlier key stays merged in');
    const fromFile = json.steps[3]?.actions.find((a) => a.type === 'reload');
    assert.deepEqual(
      fromFile?.details?.map((d) => d.split(' ')[0]),
      ['storageClassMap.extra', 'storageClassMap.fast.fsType', 'useJobForCleaning'],
    );
    const merged = json.steps[4]?.actions.find((a) => a.type === 'reload');
    assert.deepEqual(
      merged?.details?.map((d) => d.split(' ')[0]),
      ['useJobForCleaning'],
      "merged into the file's keys",
    );
    const rejected = json.steps[5]?.actions.find((a) => a.type === 'reload');
    assert.match(rejected?.details?.[0] ?? '', /broken-config\.yaml:6:18: YAML syntax error/u);
  });

  it('a scenario can start from the plan fixtures: a config file and a node-facts fixture', async () => {
    const basic = join(FIXTURES, 'basic');
    const r = await runScenario(
      parseScenario(
        's.yaml',
        [
          `config: ${JSON.stringify(join(basic, 'config.yaml'))}`,
          `nodeFacts: ${JSON.stringify(join(basic, 'node.yaml'))}`,
          'steps:',
          '  - check:',
          '    expect: { pvs: 7, skipped: { disk4: not-a-mount-point, nvme3: vanished, disk1: none } }',
          '  - claim bound: nvme1',
          '  - claim released: nvme1',
          '    expect: { jobs: { count: 1 }, cleaned: { raw/nvme1: 1 } }',
          '',
        ].join('\n'),
        { baseDir: '/' },
      ),
    );
    assert.equal(r.passed, true, JSON.stringify(r.steps.map((s) => s.expectations)));
  });

  it('an agent restart interrupts in-process cleanups and follows running Jobs', async () => {
    const r = await runScenario(await loadScenario(join(SCENARIOS, 'agent-restart-during-cleanup.yaml')));
    const restart = r.steps.find((s) => s.type === 'agent restarted');
    assert.deepEqual(
      restart?.actions.map((a) => a.type),
      ['cleanup-interrupted', 'agent-stopped', 'agent-started', 'cleanup-started'],
    );
  });
});

describe('simulate: bad scenarios', () => {
  it('an unknown step type lists the valid ones, with file, line and step number', () => {
    const issues = issuesOf(() => scenario('  - disk exploded: disk1\n'));
    assert.equal(issues.length, 1);
    assert.match(issues[0] ?? '', /^8:5 steps\[1\]: unknown step type "disk exploded"; valid step types: (.*)$/u);
    for (const t of STEP_TYPES) assert.ok(issues[0]?.includes(t), t);
  });

  it('every problem of every step at once, each with its field', () => {
    const issues = issuesOf(() =>
      scenario(
        [
          '  - disk added: { name: disk2, class: fast, capacity: lots, mountd: false }',
          '  - time passes: soon',
          '  - cleanup is slow: disk1',
          '  - claim bound: { volume: disk1, claim: nonamespace }',
          '  - claim released: disk1',
          '    expect: { pvs: many, pv: { volume: disk1, phaze: Bound }, reload: aplied, cleanups: { done: 1 } }',
          '  - agent restarted: now',
          '  - disk added: disk2',
          '    config changed: {}',
          '',
        ].join('\n'),
      ),
    );
    const expected = [
      /^8:\d+ steps\[1\]\.disk added\.capacity: expected a capacity/u,
      /^8:\d+ steps\[1\]\.disk added\.mountd: unknown key "mountd"; did you mean "mounted"\?/u,
      /^9:\d+ steps\[2\]\.time passes: invalid duration "soon"/u,
      /^10:\d+ steps\[3\]\.cleanup is slow: needs a duration/u,
      /^11:\d+ steps\[4\]\.claim bound\.claim: expected namespace\/name/u,
      /^13:\d+ steps\[5\]\.expect\.pvs: expected an integer >= 0/u,
      /^13:\d+ steps\[5\]\.expect\.pv\.phaze: unknown key "phaze"; did you mean "phase"\?/u,
      /^13:\d+ steps\[5\]\.expect\.reload: "aplied" is not one of applied, noop, rejected, refused, rolled-back, failed; did you mean "applied"\?/u,
      /^13:\d+ steps\[5\]\.expect\.cleanups\.done: unknown key "done"/u,
      /^14:\d+ steps\[6\]\.agent restarted: "agent restarted" takes no arguments/u,
      /^15:\d+ steps\[7\]: one step type per step, found "disk added", "config changed"/u,
    ];
    for (const re of expected)
      assert.ok(
        issues.some((i) => re.test(i)),
        `${re.source} in\n${issues.join('\n')}`,
      );
    assert.equal(issues.length, expected.length, issues.join('\n'));
  });

  it('reload requested: --allow takes the guarded classes only; settings.reloadGuard a policy', () => {
    const issues = issuesOf(() =>
      parseScenario(
        's.yaml',
        [
          'config: { storageClassMap: "fast: {hostDir: /mnt/fast, mountDir: /mnt/fast}" }',
          'settings: { reloadGuard: never }',
          'steps:',
          '  - reload requested: { allow: [orphans, new-pvs-only], forse: true }',
          '',
        ].join('\n'),
      ),
    );
    assert.equal(issues.length, 3, issues.join('\n'));
    assert.match(issues.join('\n'), /settings\.reloadGuard: "never" is not one of refuse, warn, apply/u);
    assert.match(
      issues.join('\n'),
      /steps\[1\]\.reload requested\.allow\[1\]: "new-pvs-only" is not one of orphans-pvs, ownership-change, orphans, ownership/u,
    );
    assert.match(
      issues.join('\n'),
      /steps\[1\]\.reload requested\.forse: unknown key "forse"; did you mean "force"\?/u,
    );
  });

  it('a step that cannot be carried out fails the run (exit 3) naming the step', async () => {
    await assert.rejects(runScenario(scenario('  - claim released: disk9\n')), (err: unknown) => {
      assert.ok(err instanceof InvalidInputError);
      const issue = err.issues[0];
      assert.ok(issue);
      assert.equal(issue.path, 'steps[1].claim released');
      assert.match(issue.message, /no volume named "disk9" \(disks: disk1\)/u);
      assert.equal(issue.position?.line, 8);
      return true;
    });
    await assert.rejects(runScenario(scenario('  - job succeeds: disk1\n')), /invalid scenario s\.yaml/u);
    await assert.rejects(
      runScenario(
        parseScenario('s.yaml', 'config: { storageClassMap: "fast: {hostDir: x}" }\nsteps: []\n', { baseDir: '/' }),
      ),
      (err: unknown) => {
        assert.ok(err instanceof InvalidInputError);
        assert.match(
          err.issues[0]?.message ?? '',
          /^the starting config is invalid: config\/storageClassMap:1:17: storageClassMap\.fast\.hostDir: must be an absolute path/u,
        );
        return true;
      },
    );
  });

  it('a scenario needs a config and steps; YAML errors keep their position', () => {
    assert.match(
      issuesOf(() => parseScenario('s.yaml', 'name: x\n', { baseDir: '/' })).join('\n'),
      /config: is required[\s\S]*steps: is required/u,
    );
    assert.match(
      issuesOf(() => parseScenario('s.yaml', 'steps: [\n', { baseDir: '/' }))[0] ?? '',
      /^\d+:\d+ : YAML syntax error/u,
    );
  });
});
