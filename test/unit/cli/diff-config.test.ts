// diff-config through the built CLI, as a process: output, exit codes and the JSON contract.
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Ajv } from 'ajv';
import { REPO_ROOT, runCli } from '../../support/cli.js';
import { writeConfigMapVolume } from '../../support/configmap-volume.js';

const FIXTURES = join(REPO_ROOT, 'test/fixtures/upstream');
const CLASS = 'storageClassMap:\n  fast:\n    hostDir: /mnt/fast\n    mountDir: /mnt/fast\n';

describe('provisioner diff-config (process)', () => {
  let dir = '';
  let validate: (data: unknown) => boolean;
  let schemaErrors: () => string;
  const file = (name: string): string => join(dir, name);

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'lvp-diff-cli-'));
    const schema: unknown = JSON.parse(
      await readFile(join(REPO_ROOT, 'docs/schemas/diff-config.v1.schema.json'), 'utf8'),
    );
    const ajv = new Ajv({ allErrors: true, strict: false });
    const compiled = ajv.compile(schema as object);
    validate = (data) => compiled(data);
    schemaErrors = () => ajv.errorsText(compiled.errors);
    await writeFile(file('a.yaml'), CLASS);
    await writeFile(
      file('a-reformatted.yaml'),
      `storageClassMap: {fast: {mountDir: "/mnt/fast/", hostDir: /mnt/fast, namePattern: "*"}}\nuseJobForCleaning: off\n`,
    );
    await writeFile(file('fstype.yaml'), `${CLASS}    fsType: ext4\n`);
    await writeFile(file('renamed.yaml'), CLASS.replace('fast:', 'nvme:'));
    await writeFile(file('broken.yaml'), `${CLASS}    volumeMode: block\n    namePattern: *\n`);
    await writeFile(file('invalid.yaml'), `${CLASS}    volumeMode: block\nuseJobForCleaning: sometimes\n`);
    const rule = (mode: string): string =>
      `${CLASS}    deviceRules:\n      - {mode: ${mode}, transports: [nvme], minSize: 100Gi}\n`;
    await writeFile(file('rules-plan.yaml'), rule('plan'));
    await writeFile(file('rules-apply.yaml'), rule('apply'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('exits 0 and says so when only the layout differs (directory vs file)', async () => {
    const volume = join(dir, 'volume');
    await writeConfigMapVolume(volume, { storageClassMap: 'fast:\n  hostDir: /mnt/fast\n  mountDir: /mnt/fast\n' });
    const r = await runCli(['diff-config', '--from', volume, '--to', file('a-reformatted.yaml')]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^No differences \(sha256:[0-9a-f]{64}\)\.\n$/u);
  });

  it('exits 1 with a unified diff, one line per change with its impact, and a summary', async () => {
    const r = await runCli(['diff-config', '--from', file('a.yaml'), '--to', file('fstype.yaml')]);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stdout, /^--- from: .*a\.yaml\tsha256:/mu);
    assert.match(r.stdout, /^- {4}fsType: ""$/mu);
    assert.match(r.stdout, /^\+ {4}fsType: ext4$/mu);
    assert.match(r.stdout, /^ {2}~ storageClassMap\.fast\.fsType: "" -> "ext4" {2}\[new-pvs-only\] New PVs get/mu);
    assert.match(r.stdout, /^Summary: 1 change \(1 new-pvs-only\)\.$/mu);
    assert.ok(!r.stdout.includes('\u001b['), 'no colour when stdout is not a terminal');
  });

  it('colours only when asked (or on a terminal)', async () => {
    const r = await runCli(['diff-config', '--from', file('a.yaml'), '--to', file('fstype.yaml'), '--color']);
    assert.equal(r.code, 1);
    assert.ok(r.stdout.includes('\u001b[32m+    fsType: ext4\u001b[0m'), r.stdout);
  });

  it('--fail-on gates on impact classes: exit 1 only for the chosen ones', async () => {
    const newPvsOnly = await runCli([
      'diff-config',
      '--from',
      file('a.yaml'),
      '--to',
      file('fstype.yaml'),
      '--fail-on',
      'orphans,ownership',
    ]);
    assert.equal(newPvsOnly.code, 0, 'a new-pvs-only change passes an orphans/ownership gate');
    assert.match(newPvsOnly.stdout, /Gate --fail-on orphans-pvs,ownership-change: passed\./u);

    const rename = await runCli([
      'diff-config',
      '--from',
      file('a.yaml'),
      '--to',
      file('renamed.yaml'),
      '--fail-on',
      'orphans',
    ]);
    assert.equal(rename.code, 1);
    assert.match(rename.stdout, /> storageClassMap\.fast -> storageClassMap\.nvme {2}\[orphans-pvs\]/u);
    assert.match(rename.stdout, /FAILED by storageClassMap\.nvme/u);

    const any = await runCli(['diff-config', '--from', file('a.yaml'), '--to', file('fstype.yaml'), '--fail-on=any']);
    assert.equal(any.code, 1);
  });

  it('--fail-on claims-devices (alias devices) trips on an apply rule, not on a plan rule', async () => {
    const gate = (to: string, ...failOn: string[]) =>
      runCli(['diff-config', '--from', file('a.yaml'), '--to', file(to), ...failOn.flatMap((f) => ['--fail-on', f])]);
    const plan = await gate('rules-plan.yaml', 'claims-devices');
    assert.equal(plan.code, 0, plan.stderr);
    assert.match(plan.stdout, /^ {2}\+ storageClassMap\.fast\.deviceRules\[0\] {2}\[none\] Reports the devices/mu);
    assert.match(plan.stdout, /Gate --fail-on claims-devices: passed\./u);

    const apply = await gate('rules-apply.yaml', 'devices');
    assert.equal(apply.code, 1, apply.stderr);
    assert.match(apply.stdout, /^ {2}\+ storageClassMap\.fast\.deviceRules\[0\] {2}\[claims-devices\] Takes devices/mu);
    assert.match(apply.stdout, /^\+ {8}minSize: 100Gi$/mu);
    assert.match(apply.stdout, /Summary: 1 change \(1 claims-devices\)\./u);
    assert.match(apply.stdout, /Gate --fail-on claims-devices: FAILED by storageClassMap\.fast\.deviceRules\[0\]\./u);

    const switched = await runCli([
      'diff-config',
      '--from',
      file('rules-plan.yaml'),
      '--to',
      file('rules-apply.yaml'),
      '--fail-on',
      'any',
      '-o',
      'json',
    ]);
    assert.equal(switched.code, 1);
    const out: unknown = JSON.parse(switched.stdout);
    assert.ok(validate(out), schemaErrors());
    const json = out as {
      changes: {
        path: string;
        field: string;
        action: string;
        impact: string;
        before: { mode: string };
        after: { mode: string; minSize: string };
      }[];
      summary: { byImpact: Record<string, number> };
      gate: { failOn: string[]; tripped: string[] };
    };
    assert.deepEqual(
      json.changes.map((c) => [c.path, c.field, c.action, c.impact, c.before.mode, c.after.mode, c.after.minSize]),
      [
        [
          'storageClassMap.fast.deviceRules[0]',
          'storageClassMap.*.deviceRules',
          'enabled',
          'claims-devices',
          'plan',
          'apply',
          '100Gi',
        ],
      ],
    );
    assert.equal(json.summary.byImpact['claims-devices'], 1);
    assert.equal(json.gate.failOn.at(-1), 'claims-devices', '--fail-on any includes claims-devices');
    assert.deepEqual(json.gate.tripped, ['storageClassMap.fast.deviceRules[0]']);

    const back = await runCli([
      'diff-config',
      '--from',
      file('rules-apply.yaml'),
      '--to',
      file('a.yaml'),
      '--fail-on',
      'claims-devices',
    ]);
    assert.equal(back.code, 0, 'removing a rule claims nothing');
    assert.match(
      back.stdout,
      /^ {2}- storageClassMap\.fast\.deviceRules\[0\] {2}\[none\] The rule takes no more devices/mu,
    );
  });

  it('-o json follows the documented schema, and agrees with the exit code', async () => {
    const r = await runCli([
      'diff-config',
      '--from',
      join(FIXTURES, 'default_example_provisioner_generated.yaml'),
      '--to',
      join(FIXTURES, 'helm-configmap.yaml'),
      '-o',
      'json',
    ]);
    assert.equal(r.code, 1, r.stderr);
    const out: unknown = JSON.parse(r.stdout);
    assert.ok(validate(out), schemaErrors());
    const json = out as {
      exitCode: number;
      identical: boolean;
      changes: { path: string; impact: string }[];
      to: { configMap: string };
    };
    assert.equal(json.exitCode, 1);
    assert.equal(json.identical, false);
    assert.equal(json.to.configMap, 'kube-system/local-static-provisioner-config');
    assert.deepEqual(
      json.changes.map((c) => [c.path, c.impact]),
      [
        ['storageClassMap.local-block', 'needs-pod-change'],
        ['nodeLabelsForPV', 'new-pvs-only'],
        ['labelsForPV', 'new-pvs-only'],
        ['useJobForCleaning', 'needs-pod-change'],
        ['jobTolerations', 'next-cleanup'],
        ['minResyncPeriod', 'none'],
        ['useNodeNameOnly', 'ownership-change'],
        ['setPVOwnerRef', 'new-pvs-only'],
      ],
    );
    const same = await runCli(['diff-config', '--from', file('a.yaml'), '--to', file('a.yaml'), '-o', 'json']);
    assert.equal(same.code, 0);
    const sameJson: unknown = JSON.parse(same.stdout);
    assert.ok(validate(sameJson), schemaErrors());
  });

  it('an invalid config: exit 3, every problem with file:line:col and key path, no stack trace', async () => {
    const r = await runCli(['diff-config', '--from', file('a.yaml'), '--to', file('invalid.yaml')]);
    assert.equal(r.code, 3);
    const lines = r.stderr.trim().split('\n');
    assert.equal(lines[0], `error: invalid configuration in ${file('invalid.yaml')} (2 problems)`);
    assert.ok(
      lines.includes(
        `  ${file('invalid.yaml')}:5:17: storageClassMap.fast.volumeMode: unsupported volume mode "block": expected "Filesystem" or "Block"; did you mean "Block"?`,
      ),
      r.stderr,
    );
    assert.ok(
      lines.some((l) => l.includes('invalid.yaml:6:20: useJobForCleaning: expected a boolean')),
      r.stderr,
    );
    assert.doesNotMatch(r.stderr, /\n\s+at /u, 'no stack trace');
    assert.equal(r.stdout, '');
  });

  it('the unquoted namePattern: * is explained, and -o json reports errors as JSON', async () => {
    const r = await runCli(['diff-config', '--from', file('a.yaml'), '--to', file('broken.yaml'), '-o', 'json']);
    assert.equal(r.code, 3);
    const out: unknown = JSON.parse(r.stdout);
    assert.ok(validate(out), schemaErrors());
    const err = (out as { error: { code: string; issues: { message: string; line: number }[] } }).error;
    assert.equal(err.code, 'invalid-config');
    assert.ok(
      err.issues.some((i) => i.message.includes('quote it, e.g. namePattern: "*"') && i.line === 6),
      JSON.stringify(err),
    );
  });

  it('a path that does not exist: exit 4 naming it', async () => {
    const r = await runCli(['diff-config', '--from', join(dir, 'missing'), '--to', file('a.yaml')]);
    assert.equal(r.code, 4);
    assert.equal(r.stderr.trim(), `error: ${join(dir, 'missing')}: no such file or directory`);
  });

  it('bad flags: exit 2', async () => {
    const missingTo = await runCli(['diff-config', '--from', file('a.yaml')]);
    assert.equal(missingTo.code, 2);
    assert.match(missingTo.stderr, /Missing required flag to/u);
    const badGate = await runCli(['diff-config', '--to', file('a.yaml'), '--fail-on', 'everything']);
    assert.equal(badGate.code, 2);
  });

  it('--help lists the command and its flags', async () => {
    const r = await runCli(['diff-config', '--help']);
    assert.equal(r.code, 0);
    assert.match(r.stdout, /--fail-on/u);
    assert.match(r.stdout, /Exit codes: 0 no differences, 1 differences/u);
    const top = await runCli(['--help']);
    assert.equal(top.code, 0);
    assert.match(top.stdout, /diff-config/u);
    // the rollout topic says what the topic is, not what its first command (abort) does
    assert.match(top.stdout, /^ {2}rollout +See and steer config rollouts across the fleet/mu);
    assert.doesNotMatch(top.stdout, /^ {2}rollout +Abort/mu);
  });
});
