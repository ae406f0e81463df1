// provisioner simulate through the built CLI, as a process: the demo, scenarios that pass and
// fail, plans from fixtures, bad input (exit 3, no stack trace), usage errors, and the JSON
// contract (docs/schemas/simulate.v1.schema.json) checked with ajv.
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Ajv } from 'ajv';
import { parse } from 'yaml';
import { REPO_ROOT, runCli } from '../../support/cli.js';

const BASIC = 'test/fixtures/simulate/basic';
const PLAN = [
  'simulate',
  '--config',
  `${BASIC}/config.yaml`,
  '--node-facts',
  `${BASIC}/node.yaml`,
  '--cluster',
  `${BASIC}/cluster.yaml`,
  '--job-image',
  'local-volume-provisioner:v3',
];
const FAST = 'config:\n  storageClassMap:\n    fast: { hostDir: /mnt/fast, mountDir: /mnt/fast }\n';

describe('provisioner simulate (process)', () => {
  let dir = '';
  let validate: (data: unknown) => boolean;
  let schemaErrors: () => string;
  const file = (name: string): string => join(dir, name);
  const env = { MY_NODE_NAME: '', JOB_CONTAINER_IMAGE: '', KUBECONFIG: '' };

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'lvp-sim-cli-'));
    const schema: unknown = JSON.parse(await readFile(join(REPO_ROOT, 'docs/schemas/simulate.v1.schema.json'), 'utf8'));
    const ajv = new Ajv({ allErrors: true, strict: false });
    const compiled = ajv.compile(schema as object);
    validate = (data) => compiled(data);
    schemaErrors = () => ajv.errorsText(compiled.errors);
    await writeFile(
      file('pass.yaml'),
      `name: passes\n${FAST}disks:\n  - { name: disk1, class: fast, capacity: 20Gi }\nsteps:\n  - claim bound: disk1\n  - claim released: disk1\n    expect: { cleaned: { disk1: 1 }, pvs: 1 }\n`,
    );
    await writeFile(
      file('fail.yaml'),
      `name: fails\n${FAST}disks:\n  - { name: disk1, class: fast, capacity: 20Gi }\nsteps:\n  - disk added: { name: disk2, class: fast, capacity: 30Gi }\n    expect: { pvs: 3 }\n  - config changed: { useJobForCleaning: true }\n    expect: { reload: rejected, generation: 2 }\n`,
    );
    await writeFile(
      file('bad.yaml'),
      `name: bad\n${FAST}steps:\n  - disk added: { name: disk2, class: fast, capacity: lots }\n  - disk exploded: disk1\n`,
    );
    await writeFile(file('two-nodes.yaml'), 'kind: Node\nmetadata: {name: a}\n---\nkind: Node\nmetadata: {name: b}\n');
    await writeFile(file('bad-node.yaml'), 'paths:\n  /mnt/fast:\n    - { name: disk1, type: blok }\n');
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('--demo tells the story in a few seconds, with no cluster and no root, and exits 0', async () => {
    const started = Date.now();
    const r = await runCli(['simulate', '--demo'], { env });
    assert.equal(r.code, 0, r.stderr);
    assert.ok(Date.now() - started < 10_000, 'a few seconds');
    assert.match(r.stdout, /^Scenario: demo: a day in the life of a node {2}\(<demo>\)$/mu);
    assert.match(r.stdout, /^\+0s +start: node node-a: 2 disks, 1 class configured$/mu);
    assert.match(r.stdout, /cleanup started: in-process, deleting the contents of \/mnt\/fast-disks\/disk1$/mu);
    assert.match(r.stdout, /reload rejected: 1 problem; generation 2 keeps serving sha256:/u);
    assert.match(r.stdout, /config\/storageClassMap:5:16: storageClassMap: YAML syntax error/u);
    assert.match(r.stdout, /^Result: all \d+ expectations passed\.$/mu);
    assert.equal(r.stderr, '');
  });

  it('a scenario whose expectations hold exits 0; -o json follows the schema', async () => {
    const r = await runCli(['simulate', '--scenario', file('pass.yaml'), '-o', 'json'], { env });
    assert.equal(r.code, 0, r.stderr);
    const json = JSON.parse(r.stdout) as { kind: string; result: { passed: boolean }; exitCode: number };
    assert.ok(validate(json), schemaErrors());
    assert.equal(json.kind, 'scenario');
    assert.deepEqual([json.result.passed, json.exitCode], [true, 0]);
  });

  it('a failed expectation exits 1 and says which step and what differed', async () => {
    const r = await runCli(['simulate', '--scenario', file('fail.yaml')], { env });
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stdout, /^ +FAIL {2}pvs\.count: expected 3, got 2$/mu);
    assert.match(r.stdout, /^Result: 2 of 3 expectations FAILED:$/mu);
    assert.match(r.stdout, /^ {2}step 1\. disk added: pvs\.count: expected 3, got 2$/mu);
    assert.match(r.stdout, /^ {2}step 2\. config changed: reload: expected "rejected", got "applied"$/mu);
    const json = await runCli(['simulate', '--scenario', file('fail.yaml'), '-o', 'json'], { env });
    assert.equal(json.code, 1);
    const parsed: unknown = JSON.parse(json.stdout);
    assert.ok(validate(parsed), schemaErrors());
    assert.equal((parsed as { exitCode: number }).exitCode, 1);
  });

  it('a malformed scenario exits 3 with file, line, step and field; no stack trace', async () => {
    const r = await runCli(['simulate', '--scenario', file('bad.yaml')], { env });
    assert.equal(r.code, 3);
    assert.match(r.stderr, /^error: invalid scenario .*bad\.yaml \(2 problems\)$/mu);
    assert.match(
      r.stderr,
      /^ {2}.*bad\.yaml:6:55: steps\[1\]\.disk added\.capacity: expected a capacity such as 10Gi, 500G or a byte count, found the string "lots"$/mu,
    );
    assert.match(
      r.stderr,
      /^ {2}.*bad\.yaml:7:5: steps\[2\]: unknown step type "disk exploded"; valid step types: disk added, disk removed, disk pulled, disk swapped, device added, device removed, claim bound, claim released, config changed, reload requested, cleanup succeeds, cleanup fails, cleanup is slow, job succeeds, job fails, identity accepted, agent restarted, node rebuilt, time passes, check, apply config, rollout pause, rollout resume, rollout abort, rollout promote, node fails candidate, node fixed$/mu,
    );
    assert.doesNotMatch(r.stderr, /^\s+at /mu, 'no stack trace');
    assert.equal(r.stdout, '');
    const json = await runCli(['simulate', '--scenario', file('bad.yaml'), '-o', 'json'], { env });
    assert.equal(json.code, 3);
    const parsed = JSON.parse(json.stdout) as { error: { code: string; issues: { path: string; line: number }[] } };
    assert.ok(validate(parsed), schemaErrors());
    assert.deepEqual(
      parsed.error.issues.map((i) => [i.path, i.line]),
      [
        ['steps[1].disk added.capacity', 6],
        ['steps[2]', 7],
      ],
    );
  });

  it('a malformed fixture exits 3; a missing file exits 4', async () => {
    const r = await runCli(
      [...PLAN.slice(0, 3), '--node-facts', file('bad-node.yaml'), '--cluster', `${BASIC}/cluster.yaml`],
      {
        env,
      },
    );
    assert.equal(r.code, 3);
    assert.match(r.stderr, /^error: invalid node-facts fixture .*bad-node\.yaml \(1 problem\)$/mu);
    assert.match(
      r.stderr,
      /bad-node\.yaml:3:28: paths\.\/mnt\/fast\[0\]\.type: "blok" is not one of directory, block, file, symlink; did you mean "block"\?$/mu,
    );
    const missing = await runCli(['simulate', '--scenario', file('nope.yaml')], { env });
    assert.equal(missing.code, 4);
    assert.match(missing.stderr, /^error: .*nope\.yaml: no such file or directory$/mu);
  });

  it('plans from fixtures: text, JSON by the schema, and YAML with the full manifests', async () => {
    const text = await runCli(PLAN, { env });
    assert.equal(text.code, 0, text.stderr);
    assert.equal(text.stdout, await readFile(join(REPO_ROOT, BASIC, 'plan.txt'), 'utf8'));
    assert.match(text.stderr, /^warning: .*cluster\.yaml:\d+:\d+: \[document 6\]\.kind: ConfigMap ignored/mu);
    const json = await runCli([...PLAN, '-o', 'json'], { env });
    assert.equal(json.code, 0, json.stderr);
    const plan: unknown = JSON.parse(json.stdout);
    assert.ok(validate(plan), schemaErrors());
    const yaml = await runCli([...PLAN, '-o', 'yaml'], { env });
    assert.equal(yaml.code, 0, yaml.stderr);
    const fromYaml = parse(yaml.stdout) as {
      create: { manifest: { kind: string; spec: { local: { path: string } } } }[];
    };
    assert.deepEqual((plan as { create: unknown[] }).create.length, fromYaml.create.length);
    const first = fromYaml.create[0];
    assert.ok(first);
    assert.equal(first.manifest.kind, 'PersistentVolume');
    assert.equal(first.manifest.spec.local.path, '/mnt/fast/disk2');
    const withFrom = await runCli([...PLAN, '--from', `${BASIC}/from.yaml`, '-o', 'json'], { env });
    assert.equal(withFrom.code, 0, withFrom.stderr);
    const reload: unknown = JSON.parse(withFrom.stdout);
    assert.ok(validate(reload), schemaErrors());
    assert.deepEqual(
      (reload as { reload: { changes: { path: string; impact: string }[] } }).reload.changes.map((c) => c.impact),
      ['new-pvs-only', 'orphans-pvs', 'needs-pod-change'],
    );
  });

  it('plans device rules from fixtures: the devices section, and the reload that switches a rule to apply', async () => {
    const devices = 'test/fixtures/simulate/devices';
    const args = [
      'simulate',
      '--config',
      `${devices}/config.yaml`,
      '--node-facts',
      `${devices}/node.yaml`,
      '--cluster',
      `${devices}/cluster.yaml`,
      '--job-image',
      'img',
    ];
    const text = await runCli([...args, '--from', `${devices}/from.yaml`], { env });
    assert.equal(text.code, 0, text.stderr);
    assert.match(text.stdout, /^Devices selected by device rules \(5\):$/mu);
    assert.match(text.stdout, /^ {2}~ device nvme1n1: planned \(local-nvme\) -> link \(local-nvme\)$/mu);
    assert.match(
      text.stdout,
      /^Devices: 2 to link, 1 planned \(rules in plan mode\), 1 already linked, 1 skipped\.$/mu,
    );
    const json = await runCli([...args, '--from', `${devices}/from.yaml`, '-o', 'json'], { env });
    assert.equal(json.code, 0, json.stderr);
    const plan = JSON.parse(json.stdout) as {
      devices: { summary: { link: number } };
      reload: { changes: { impact: string }[] };
    };
    assert.ok(validate(plan), schemaErrors());
    assert.equal(plan.devices.summary.link, 2);
    assert.deepEqual(
      plan.reload.changes.map((c) => c.impact),
      ['claims-devices'],
    );
    await writeFile(file('bad-devices.yaml'), 'devices:\n  - { name: nvme1n1, size: 1Ti, transport: nvm }\n');
    const bad = await runCli(
      [...args.slice(0, 3), '--node-facts', file('bad-devices.yaml'), '--cluster', `${devices}/cluster.yaml`],
      { env },
    );
    assert.equal(bad.code, 3);
    assert.match(
      bad.stderr,
      /bad-devices\.yaml:2:\d+: devices\[0\]\.transport: "nvm" is not one of .*did you mean "nvme"\?$/mu,
    );
  });

  it('usage errors exit 2', async () => {
    const both = await runCli(['simulate', '--demo', '--config', 'x.yaml'], { env });
    assert.equal(both.code, 2);
    assert.match(both.stderr, /--demo replays a scenario; these flags only apply to plans: --config/u);
    const twoNodes = await runCli(
      [...PLAN.slice(0, 3), '--node-facts', `${BASIC}/node.yaml`, '--cluster', file('two-nodes.yaml')],
      { env },
    );
    assert.equal(twoNodes.code, 2);
    assert.match(twoNodes.stderr, /--node is required: the cluster fixture has 2 Nodes \(a, b\)/u);
    const badOutput = await runCli(['simulate', '--demo', '-o', 'xml'], { env });
    assert.equal(badOutput.code, 2);
  });
});
