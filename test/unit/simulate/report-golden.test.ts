// The replay's report, rendered, byte for byte: every scenario shipped in docs/scenarios as text,
// the built-in demo in colour and as JSON, and two scenarios that reach the rarer timeline lines.
// The expected files (test/fixtures/simulate/reports) are the output of the code before the
// replay was split from its words (issue 18); change them only when the output is meant to change.
import assert from 'node:assert/strict';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { demoScenario } from '../../../src/core/simulate/demo.js';
import { runScenario } from '../../../src/core/simulate/run.js';
import { loadScenario, parseScenario } from '../../../src/core/simulate/scenario.js';
import type { Scenario } from '../../../src/core/simulate/scenario.js';
import { renderScenarioText, toScenarioJson } from '../../../src/render/simulate.js';
import { REPO_ROOT } from '../../support/cli.js';

const SCENARIOS = join(REPO_ROOT, 'docs/scenarios');
const EXPECTED = join(REPO_ROOT, 'test/fixtures/simulate/reports');
const FAST = 'config:\n  storageClassMap:\n    fast: { hostDir: /mnt/fast, mountDir: /mnt/fast }\n';

function inline(steps: readonly string[]): Scenario {
  return parseScenario(
    's.yaml',
    `name: t\n${FAST}disks:\n  - { name: disk1, class: fast, capacity: 20Gi }\nsteps:\n${steps.join('\n')}\n`,
    { baseDir: '/' },
  );
}

/** UPDATE_GOLDEN=1 rewrites the expected file with the actual output (review the diff). */
const UPDATE = process.env['UPDATE_GOLDEN'] === '1';

async function assertGolden(actual: string, name: string): Promise<void> {
  if (UPDATE) await writeFile(join(EXPECTED, name), actual);
  assert.equal(actual, await readFile(join(EXPECTED, name), 'utf8'), `${name} differs (UPDATE_GOLDEN=1 rewrites it)`);
}

/** Paths in the output that depend on where the repository is checked out. */
function portable(text: string): string {
  return text.replaceAll(REPO_ROOT, '<repo>');
}

describe('simulate: the rendered report, byte for byte', () => {
  it('every scenario in docs/scenarios, as text', async () => {
    const files = (await readdir(SCENARIOS)).filter((f) => f.endsWith('.yaml')).sort();
    assert.ok(files.length >= 9, files.join(', '));
    for (const f of files) {
      const report = await runScenario(await loadScenario(join(SCENARIOS, f)));
      const name = f.replace(/\.yaml$/u, '.txt');
      await assertGolden(portable(renderScenarioText(report, { color: false })), name);
    }
  });

  it('a staged rollout as JSON: the rollout and fleet lines, the policy, the rollout at the end', async () => {
    const report = await runScenario(await loadScenario(join(SCENARIOS, 'staged-rollout-halted-canary.yaml')));
    await assertGolden(portable(JSON.stringify(toScenarioJson(report), null, 2)), 'staged-rollout-halted-canary.json');
  });

  it('the built-in demo in colour and as JSON', async () => {
    const report = await runScenario(demoScenario());
    await assertGolden(renderScenarioText(report, { color: true }), 'builtin-demo.color.txt');
    await assertGolden(JSON.stringify(toScenarioJson(report), null, 2), 'builtin-demo.json');
  });

  it('slow and finished cleanups, reloads asked for with flags, an agent restart', async () => {
    const report = await runScenario(
      inline([
        '  - claim bound: disk1',
        '  - cleanup is slow: { volume: disk1, duration: 90s, then: fail, message: disk on fire }',
        '  - claim released: disk1',
        '    expect: { cleanups: { running: 1 } }',
        '  - time passes: 88s',
        '    note: the step itself',
        '    expect: { cleanups: { running: 1 } }',
        '  - time passes: 1s',
        '  - cleanup succeeds: disk1',
        '  - reload requested: { allow: [orphans-pvs], force: true }',
        '  - reload requested',
        '  - agent restarted',
      ]),
    );
    await assertGolden(renderScenarioText(report, { color: false }), 'slow-cleanup-reload-restart.txt');
  });

  it('disks of every kind: not mounted, removed, block, a file; claims with a namespace', async () => {
    const report = await runScenario(
      inline([
        '  - disk added: { name: disk2, class: fast, mounted: false }',
        '  - disk removed: disk1',
        '  - disk added: { name: blk, dir: /mnt/fast, type: block, capacity: 5Gi }',
        '  - disk added: { name: f1, class: fast, type: file }',
        '  - cleanup fails: { volume: disk2, message: boom }',
        '  - claim bound: { volume: fast/blk, claim: ns1/c1 }',
        '  - claim released: blk',
        // disk2 is still not mounted when the mount grace period ends: reported then, once.
        '  - time passes: 10s',
      ]),
    );
    await assertGolden(renderScenarioText(report, { color: false }), 'disks-of-every-kind.txt');
    await assertGolden(JSON.stringify(toScenarioJson(report), null, 2), 'disks-of-every-kind.json');
  });
});
