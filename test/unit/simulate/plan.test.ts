// simulate's plan mode against fixtures: golden plans (text and JSON), the read-only guarantee of
// the stand-ins, and the fixture formats' error reporting.
import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { before, describe, it } from 'node:test';
import { ManualClock } from '../../../src/core/clock.js';
import { loadConfig } from '../../../src/core/config/source/load.js';
import { parseConfigSnapshot } from '../../../src/core/config/decode/parse.js';
import { snapshotFromFileText } from '../../../src/core/config/decode/layout.js';
import { isNotFound } from '../../../src/core/kube/cluster.js';
import { MemoryCluster } from '../../../src/core/kube/memory/memory-cluster.js';
import { ReadOnlyCluster, WRITE_VERBS, WriteRefusedError } from '../../../src/core/kube/read-only-cluster.js';
import type { Cluster } from '../../../src/core/kube/cluster.js';
import { buildClusterFixture } from '../../../src/core/simulate/cluster-fixture.js';
import { InvalidInputError } from '../../../src/core/simulate/input.js';
import { nodeFactsVolumes, parseNodeFacts } from '../../../src/core/simulate/node-facts.js';
import { planPass, simulatePlan } from '../../../src/core/simulate/plan.js';
import type { SimulationPlan } from '../../../src/core/simulate/plan.js';
import { nodeIdentity } from '../../../src/core/agent/generation.js';
import { renderPlanText, toPlanJson } from '../../../src/render/simulate.js';
import { REPO_ROOT } from '../../support/cli.js';

const BASIC = 'test/fixtures/simulate/basic';
const NOW = Date.UTC(2030, 0, 1, 12, 0, 0);
const UPDATE = process.env['UPDATE_GOLDEN'] === '1';

async function golden(name: string, actual: string): Promise<void> {
  const path = join(REPO_ROOT, BASIC, name);
  if (UPDATE) await writeFile(path, actual);
  const expected = await readFile(path, 'utf8').catch(() => '');
  assert.equal(actual, expected, `${name} differs from the golden file (UPDATE_GOLDEN=1 rewrites it)`);
}

function plan(options: { from?: string; jobImage?: string } = {}): Promise<SimulationPlan> {
  return simulatePlan({
    config: `${BASIC}/config.yaml`,
    ...(options.from !== undefined ? { from: options.from } : {}),
    nodeFacts: { kind: 'fixture', path: `${BASIC}/node.yaml` },
    cluster: { kind: 'fixture', path: `${BASIC}/cluster.yaml` },
    namespace: 'default',
    jobImage: options.jobImage ?? 'local-volume-provisioner:v3',
    clock: new ManualClock(NOW),
  });
}

describe('simulate: plans from fixtures (golden)', () => {
  before(() => {
    // Fixture paths in the output are relative to the repository, as a user would type them.
    process.chdir(REPO_ROOT);
  });

  it('plans one pass: PVs to create, cleanups and deletions, skips, orphans, adoption, writes', async () => {
    const p = await plan();
    await golden('plan.txt', renderPlanText(p, { color: false }));
    await golden('plan.json', `${JSON.stringify(toPlanJson(p), null, 2)}\n`);
    assert.deepEqual(
      p.plan.create.map((c) => [c.pv, c.className, c.entry, c.capacity, c.volumeMode]),
      [
        ['local-pv-25d37046', 'fast', 'disk2', '200Gi', 'Filesystem'],
        ['local-pv-ec499a83', 'raw', 'nvme0', '1Ti', 'Block'],
      ],
    );
    assert.deepEqual(
      p.plan.cleanups.map((c) => [c.pv, c.action, c.method ?? '-', c.deleteAfter]),
      [
        ['local-pv-5277544d', 'clean', 'process', true],
        ['local-pv-775718f1', 'follow-job', 'job', true],
        ['local-pv-7861486e', 'clean', 'job', true],
        ['local-pv-997e43d2', 'retain', '-', false],
      ],
    );
    const job = p.plan.cleanups.find((c) => c.pv === 'local-pv-7861486e')?.job?.manifest;
    assert.ok(job);
    assert.equal(job.metadata.labels?.['pvuuid'], 'aaaaaaaa-0000-0000-0000-000000000011', "the fixture's PV uid");
    assert.equal(job.metadata.annotations?.['start-time'], new Date(NOW).toISOString());
    assert.deepEqual(
      p.plan.skipped.filter((s) => s.reason !== 'already-published').map((s) => [s.entry, s.reason]),
      [
        ['disk4', 'not-a-mount-point'],
        ['disk5.img', 'not-a-volume'],
        ['scratch', 'name-pattern'],
        ['nvme3', 'vanished'],
      ],
    );
    assert.deepEqual(
      p.plan.orphaned.map((o) => [o.pv, o.reason]),
      [['local-pv-bc80c0e4', 'class-not-configured']],
    );
    assert.deepEqual(p.plan.adopt, ['local-pv-bc80c0e4']);
    assert.deepEqual(
      p.plan.writes.map((w) => `${w.verb} ${w.resource}/${w.name}`),
      [
        'patch persistentvolumes/local-pv-bc80c0e4',
        // an Available PV of the fixture without a disk identity: recorded on first sight
        'patch persistentvolumes/local-pv-e4175caf',
        'create jobs/cleanup-local-pv-7861486e',
        'delete persistentvolumes/local-pv-5277544d',
      ],
    );
    assert.ok(p.warnings.some((w) => w.message.includes('ConfigMap ignored')));
  });

  it('with --from: the config changes with their effect rows, and what changes on this node', async () => {
    const p = await plan({ from: `${BASIC}/from.yaml` });
    await golden('reload.txt', renderPlanText(p, { color: false }));
    const r = p.reload;
    assert.ok(r);
    assert.deepEqual(
      r.changes.map((c) => [c.path, c.effect.impact]),
      [
        ['storageClassMap.fast.namePattern', 'new-pvs-only'],
        ['storageClassMap.old', 'orphans-pvs'],
        ['useJobForCleaning', 'needs-pod-change'],
      ],
    );
    assert.deepEqual(
      r.delta.cleanups.map((c) => [c.pv, c.before?.method, c.after?.method]),
      [['local-pv-7861486e', 'process', 'job']],
    );
    assert.deepEqual(
      r.delta.orphaned.added.map((o) => o.pv),
      ['local-pv-bc80c0e4'],
    );
    assert.deepEqual(
      r.delta.skipped.removed.map((s) => [s.entry, s.reason]),
      [['scratch', 'not-a-mount-point']],
    );
  });

  it('without a Job image a Job cleanup is reported as failing, and nothing is created', async () => {
    const p = await simulatePlan({
      config: `${BASIC}/config.yaml`,
      nodeFacts: { kind: 'fixture', path: `${BASIC}/node.yaml` },
      cluster: { kind: 'fixture', path: `${BASIC}/cluster.yaml` },
      namespace: 'default',
      jobImage: undefined,
      clock: new ManualClock(NOW),
    });
    const c = p.plan.cleanups.find((x) => x.pv === 'local-pv-7861486e');
    assert.ok(c);
    assert.equal(c.action, 'fail');
    assert.match(c.message, /JOB_CONTAINER_IMAGE/u);
    assert.ok(!p.plan.writes.some((w) => w.resource === 'jobs' && w.verb === 'create'));
  });

  it('asks for --node when the cluster fixture has several Nodes, and names a missing one', async () => {
    const { writeFile: write, mkdtemp, rm } = await import('node:fs/promises');
    const { tmpdir } = await import('node:os');
    const dir = await mkdtemp(join(tmpdir(), 'lvp-sim-plan-'));
    try {
      await write(join(dir, 'two.yaml'), 'kind: Node\nmetadata: {name: a}\n---\nkind: Node\nmetadata: {name: b}\n');
      const base = {
        config: `${BASIC}/config.yaml`,
        nodeFacts: { kind: 'fixture' as const, path: `${BASIC}/node.yaml` },
        cluster: { kind: 'fixture' as const, path: join(dir, 'two.yaml') },
        namespace: 'default',
        jobImage: undefined,
      };
      await assert.rejects(simulatePlan(base), /--node is required: the cluster fixture has 2 Nodes \(a, b\)/u);
      await assert.rejects(simulatePlan({ ...base, nodeName: 'c' }), (err: unknown) => {
        assert.ok(err instanceof InvalidInputError);
        assert.match(err.issues[0]?.message ?? '', /no Node named c \(Nodes: a, b\)/u);
        return true;
      });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('simulate: nothing is ever written', () => {
  it('the read-only cluster refuses every write of every resource, and reads pass through', async () => {
    const memory = new MemoryCluster();
    await memory.nodes.create({ metadata: { name: 'n1' } });
    const ro = new ReadOnlyCluster(memory);
    const rv = memory.resourceVersion;
    const resources: (keyof Cluster)[] = ['persistentVolumes', 'storageClasses', 'nodes', 'events', 'jobs'];
    for (const resource of resources) {
      const client = ro[resource] as unknown as Record<
        (typeof WRITE_VERBS)[number],
        (...a: unknown[]) => Promise<unknown>
      >;
      for (const verb of WRITE_VERBS) {
        const arg = verb === 'patch' || verb === 'delete' ? 'n1' : { metadata: { name: 'n1' } };
        await assert.rejects(client[verb](arg, {}), (err: unknown) => {
          assert.ok(err instanceof WriteRefusedError, `${resource}.${verb}`);
          assert.equal(err.verb, verb);
          assert.equal(err.exitCode, 70);
          return true;
        });
      }
    }
    assert.equal(memory.resourceVersion, rv, 'nothing reached the server');
    assert.equal((await ro.nodes.get('n1')).metadata.name, 'n1');
    assert.equal((await ro.nodes.list()).items.length, 1);
  });

  it("a pass planned against a cluster leaves it exactly as it was, while recording the agent's writes", async () => {
    const text = await readFile(join(REPO_ROOT, BASIC, 'cluster.yaml'), 'utf8');
    const fixture = await buildClusterFixture('cluster.yaml', text);
    const facts = parseNodeFacts('node.yaml', await readFile(join(REPO_ROOT, BASIC, 'node.yaml'), 'utf8'));
    const volumes = nodeFactsVolumes(facts);
    const before = fixture.cluster.resourceVersion;
    const dump = async (): Promise<string> =>
      JSON.stringify([
        (await fixture.cluster.persistentVolumes.list()).items,
        (await fixture.cluster.jobs.list()).items,
        (await fixture.cluster.events.list()).items,
        (await fixture.cluster.nodes.list()).items,
      ]);
    const snapshot = await dump();
    const loaded = await loadConfig(join(REPO_ROOT, BASIC, 'config.yaml'));
    const node = nodeIdentity(await fixture.cluster.nodes.get('node-a'));
    const p = await planPass(loaded, {
      cluster: new ReadOnlyCluster(fixture.cluster),
      uids: fixture.uids,
      volumes,
      node,
      namespace: 'default',
      jobImage: 'img',
      clock: new ManualClock(NOW),
    });
    assert.ok(p.writes.length >= 3, 'the agent code did try to write');
    assert.equal(fixture.cluster.resourceVersion, before);
    assert.equal(await dump(), snapshot);
    await fixture.cluster.jobs.get('cleanup-local-pv-7861486e', { namespace: 'default' }).then(
      () => assert.fail('no Job was created'),
      (err: unknown) => {
        assert.ok(isNotFound(err));
      },
    );
  });
});

describe('simulate: fixture errors name the file, line and field', () => {
  it('node facts: unknown keys, wrong types and impossible entries, all at once', () => {
    const text = [
      'paths:',
      '  /mnt/fast:',
      '    - { name: disk1, capacity: huge }',
      '    - { name: disk2, type: blok }',
      '    - { name: disk3, type: block }',
      '    - { name: disk4, type: file, mounted: true }',
      '    - { name: a/b, mountd: true }',
      '  relative: []',
      '',
    ].join('\n');
    assert.throws(
      () => parseNodeFacts('node.yaml', text),
      (err: unknown) => {
        assert.ok(err instanceof InvalidInputError);
        assert.equal(err.exitCode, 3);
        assert.match(err.message, /^invalid node-facts fixture node\.yaml \(\d+ problems\)$/u);
        const lines = err.issues.map(
          (i) => `${i.position?.line ?? '?'}:${i.position?.column ?? '?'} ${i.path}: ${i.message}`,
        );
        const expect = [
          /^3:\d+ paths\.\/mnt\/fast\[0\]\.capacity: expected a capacity/u,
          /^4:\d+ paths\.\/mnt\/fast\[1\]\.type: "blok" is not one of directory, block, file, symlink; did you mean "block"\?/u,
          /^5:\d+ paths\.\/mnt\/fast\[2\]\.capacity: a block device needs a capacity/u,
          /^6:\d+ paths\.\/mnt\/fast\[3\]\.mounted: only a directory can be mounted/u,
          /^7:\d+ paths\.\/mnt\/fast\[4\]\.mountd: unknown key "mountd"; did you mean "mounted"\?/u,
          /^7:\d+ paths\.\/mnt\/fast\[4\]\.name: "a\/b" is not a directory entry name/u,
          /^8:\d+ paths\.relative: must be an absolute directory path/u,
        ];
        for (const re of expect)
          assert.ok(
            lines.some((l) => re.test(l)),
            `${re.source} in\n${lines.join('\n')}`,
          );
        return true;
      },
    );
  });

  it('cluster fixtures: objects the apiserver would reject, duplicates and YAML errors', async () => {
    const bad = [
      'kind: PersistentVolume',
      'metadata: { name: Bad_Name }',
      'spec: { capacity: { storage: 1Gi }, accessModes: [ReadWriteOnce], local: { path: /x } }',
      '---',
      'kind: StorageClass',
      'metadata: { name: fast }',
      'provisioner: x',
      '---',
      'kind: StorageClass',
      'metadata: { name: fast }',
      'provisioner: x',
      '---',
      'kind: Node',
      'metadata: {}',
      '',
    ].join('\n');
    await assert.rejects(buildClusterFixture('c.yaml', bad), (err: unknown) => {
      assert.ok(err instanceof InvalidInputError);
      const text = err.issues.map((i) => `${i.position?.line ?? '?'} ${i.message}`).join('\n');
      assert.match(text, /^9 duplicate StorageClass fast$/mu);
      assert.match(text, /^13 a Node needs metadata\.name$/mu);
      return true;
    });
    await assert.rejects(
      buildClusterFixture('c.yaml', 'kind: PersistentVolume\nmetadata: { name: Bad_Name }\nspec: {}\n'),
      (err: unknown) => {
        assert.ok(err instanceof InvalidInputError);
        assert.match(err.issues[0]?.message ?? '', /^PersistentVolume Bad_Name: .*Invalid value: "Bad_Name"/u);
        assert.equal(err.issues[0]?.position?.line, 1);
        return true;
      },
    );
    await assert.rejects(buildClusterFixture('c.yaml', 'kind: [\n'), (err: unknown) => {
      assert.ok(err instanceof InvalidInputError);
      assert.match(err.issues[0]?.message ?? '', /YAML syntax error/u);
      return true;
    });
  });

  it('parses the config the fixtures are planned with', () => {
    assert.ok(parseConfigSnapshot(snapshotFromFileText('c.yaml', 'storageClassMap: {}\n')));
  });
});
