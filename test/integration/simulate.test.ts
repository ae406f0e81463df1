// simulate against the real kube-apiserver: a live plan through --kubeconfig (the built CLI) and
// in-process, with proof that no write reaches the server — every object's resourceVersion and
// the counts of PVs, Jobs and Events are unchanged, and a counting wrapper around RestCluster
// sees reads only — while the plan shows the writes the agent would have made.
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { buildCleanupJob } from '../../src/core/cleanup/jobs.js';
import { loadConfig } from '../../src/core/config/source/load.js';
import { isNotFound } from '../../src/core/kube/cluster.js';
import type { Cluster, ResourceClient } from '../../src/core/kube/cluster.js';
import { loadKubeconfig } from '../../src/core/kube/kubeconfig.js';
import type { PersistentVolume } from '../../src/core/kube/objects.js';
import { ReadOnlyCluster, WriteRefusedError } from '../../src/core/kube/read-only-cluster.js';
import { RestCluster } from '../../src/core/kube/rest-cluster.js';
import { simulatePlan } from '../../src/core/simulate/plan.js';
import { NODE_LABEL, persistentVolumeName, PROVISIONED_BY_ANNOTATION } from '../../src/core/pv/naming.js';
import { runCli } from '../support/cli.js';
import { requireTestControlPlane } from '../support/test-cluster.js';

const suffix = Math.random().toString(36).slice(2, 8);
const NODE = `sim-${suffix}`;
const FAST = `sim-${suffix}-fast`;
const RAW = `sim-${suffix}-raw`;
const OLD = `sim-${suffix}-old`;
const NS = 'default';

/** Counts every call per verb; forwards everything. */
class CountingCluster implements Cluster {
  readonly calls = new Map<string, number>();
  readonly persistentVolumes;
  readonly storageClasses;
  readonly nodes;
  readonly events;
  readonly jobs;
  readonly configMaps;
  constructor(inner: Cluster) {
    this.persistentVolumes = this.wrap(inner.persistentVolumes);
    this.storageClasses = this.wrap(inner.storageClasses);
    this.nodes = this.wrap(inner.nodes);
    this.events = this.wrap(inner.events);
    this.jobs = this.wrap(inner.jobs);
    this.configMaps = this.wrap(inner.configMaps);
  }
  private count(verb: string): void {
    this.calls.set(verb, (this.calls.get(verb) ?? 0) + 1);
  }
  private wrap<T>(c: ResourceClient<T>): ResourceClient<T> {
    return {
      get: (n, o) => (this.count('get'), c.get(n, o)),
      list: (o) => (this.count('list'), c.list(o)),
      listMetadata: (o) => (this.count('listMetadata'), c.listMetadata(o)),
      watch: (o) => (this.count('watch'), c.watch(o)),
      create: (x, o) => (this.count('create'), c.create(x, o)),
      update: (x, o) => (this.count('update'), c.update(x, o)),
      updateStatus: (x, o) => (this.count('updateStatus'), c.updateStatus(x, o)),
      patch: (n, p, o) => (this.count('patch'), c.patch(n, p, o)),
      delete: (n, o) => (this.count('delete'), c.delete(n, o)),
    };
  }
  writes(): number {
    return ['create', 'update', 'updateStatus', 'patch', 'delete'].reduce((n, v) => n + (this.calls.get(v) ?? 0), 0);
  }
}

describe('simulate against the real apiserver: a live plan, and not one write', () => {
  let cluster: RestCluster;
  let dir = '';
  const pvNames: string[] = [];

  function pv(
    name: string,
    className: string,
    path: string,
    extra: Partial<PersistentVolume['metadata']> = {},
  ): PersistentVolume {
    return {
      apiVersion: 'v1',
      kind: 'PersistentVolume',
      metadata: { name, labels: { [NODE_LABEL]: NODE }, ...extra },
      spec: {
        capacity: { storage: '10Gi' },
        accessModes: ['ReadWriteOnce'],
        persistentVolumeReclaimPolicy: 'Delete',
        storageClassName: className,
        volumeMode: className === RAW ? 'Block' : 'Filesystem',
        local: { path },
        nodeAffinity: {
          required: {
            nodeSelectorTerms: [
              { matchExpressions: [{ key: 'kubernetes.io/hostname', operator: 'In', values: [NODE] }] },
            ],
          },
        },
      },
    };
  }

  async function createPv(object: PersistentVolume, phase?: 'Bound' | 'Released'): Promise<PersistentVolume> {
    pvNames.push(object.metadata.name);
    const created = await cluster.persistentVolumes.create(object);
    if (phase === undefined) return created;
    return cluster.persistentVolumes.updateStatus({ ...created, status: { phase } });
  }

  /** resourceVersion of every object of this test, and how many PVs, Jobs and Events concern it. */
  async function snapshot(): Promise<Record<string, string | number>> {
    const out: Record<string, string | number> = {};
    const pvs = (await cluster.persistentVolumes.list()).items.filter(
      (p) => p.metadata.name.startsWith('local-pv-') && pvNames.includes(p.metadata.name),
    );
    for (const p of pvs) out[`pv/${p.metadata.name}`] = p.metadata.resourceVersion ?? '';
    out['pvs'] = pvs.length;
    const jobs = (await cluster.jobs.list({ namespace: NS, labelSelector: `kubernetes.io/hostname=${NODE}` })).items;
    for (const j of jobs) out[`job/${j.metadata.name}`] = j.metadata.resourceVersion ?? '';
    out['jobs'] = jobs.length;
    const names = new Set([...pvNames, NODE]);
    const events = (await cluster.events.list()).items.filter((e) => names.has(e.involvedObject.name ?? ''));
    out['events'] = events.length;
    const node = await cluster.nodes.get(NODE);
    out[`node/${NODE}`] = node.metadata.resourceVersion ?? '';
    for (const sc of [FAST, RAW])
      out[`sc/${sc}`] = (await cluster.storageClasses.get(sc)).metadata.resourceVersion ?? '';
    return out;
  }

  before(async () => {
    const plane = requireTestControlPlane();
    cluster = new RestCluster({ connection: await loadKubeconfig(plane.kubeconfigPath) });
    dir = await mkdtemp(join(tmpdir(), 'lvp-sim-int-'));
    await cluster.nodes.create({
      metadata: { name: NODE, labels: { 'kubernetes.io/hostname': NODE } },
    });
    for (const name of [FAST, RAW])
      await cluster.storageClasses.create({
        metadata: { name },
        provisioner: 'kubernetes.io/no-provisioner',
        reclaimPolicy: 'Delete',
        volumeBindingMode: 'WaitForFirstConsumer',
      });
    const fastDir = `/mnt/${NODE}/fast`;
    const rawDir = `/dev/${NODE}`;
    await createPv(pv(persistentVolumeName('disk1', NODE, FAST), FAST, `${fastDir}/disk1`), 'Bound');
    await createPv(pv(persistentVolumeName('disk3', NODE, FAST), FAST, `${fastDir}/disk3`), 'Released');
    await createPv(pv(persistentVolumeName('nvme1', NODE, RAW), RAW, `${rawDir}/nvme1`), 'Released');
    const nvme2 = await createPv(pv(persistentVolumeName('nvme2', NODE, RAW), RAW, `${rawDir}/nvme2`), 'Released');
    // Made by upstream before the agent: no node label, the provisioned-by annotation of this node.
    await createPv(
      pv(persistentVolumeName('old1', NODE, OLD), OLD, `/mnt/${NODE}/old/old1`, {
        labels: {},
        annotations: { [PROVISIONED_BY_ANNOTATION]: `local-volume-provisioner-${NODE}` },
      }),
      'Bound',
    );
    const config = `storageClassMap:\n  ${FAST}:\n    hostDir: ${fastDir}\n    mountDir: ${fastDir}\n  ${RAW}:\n    hostDir: ${rawDir}\n    mountDir: ${rawDir}\n    volumeMode: Block\nuseJobForCleaning: true\n`;
    await writeFile(join(dir, 'config.yaml'), config);
    // A Job already cleaning nvme2 (started by an earlier agent process).
    const loaded = await loadConfig(join(dir, 'config.yaml'));
    const classConfig = loaded.config.storageClassMap[RAW];
    assert.ok(classConfig);
    await cluster.jobs.create(
      buildCleanupJob({
        pvName: nvme2.metadata.name,
        pvUid: nvme2.metadata.uid ?? '',
        nodeName: NODE,
        namespace: NS,
        image: 'provisioner:old',
        classConfig,
        config: loaded.config,
        devicePath: `${rawDir}/nvme2`,
        startTime: new Date().toISOString(),
      }),
      { namespace: NS },
    );
    await writeFile(
      join(dir, 'node.yaml'),
      [
        'paths:',
        `  ${fastDir}:`,
        '    - { name: disk1, capacity: 100Gi }',
        '    - { name: disk2, capacity: 200Gi }',
        '    - { name: disk3, capacity: 50Gi }',
        '    - { name: disk4, mounted: false }',
        `  ${rawDir}:`,
        '    - { name: nvme0, type: block, capacity: 1Ti }',
        '    - { name: nvme1, type: block, capacity: 1Ti }',
        '    - { name: nvme2, type: block, capacity: 1Ti }',
        '',
      ].join('\n'),
    );
  });

  after(async () => {
    await cluster.jobs
      .delete(`cleanup-${persistentVolumeName('nvme2', NODE, RAW)}`, { namespace: NS, propagationPolicy: 'Background' })
      .catch(() => undefined);
    for (const name of pvNames) {
      await cluster.persistentVolumes.delete(name).catch(() => undefined);
      await cluster.persistentVolumes.patch(name, { metadata: { finalizers: null } }).catch((err: unknown) => {
        if (!isNotFound(err)) throw err;
      });
    }
    for (const sc of [FAST, RAW]) await cluster.storageClasses.delete(sc).catch(() => undefined);
    await cluster.nodes.delete(NODE).catch(() => undefined);
    cluster.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('the built CLI plans through --kubeconfig: the plan is complete, the cluster untouched', async () => {
    const plane = requireTestControlPlane();
    const before = await snapshot();
    const r = await runCli(
      [
        'simulate',
        '--config',
        join(dir, 'config.yaml'),
        '--node-facts',
        join(dir, 'node.yaml'),
        '--kubeconfig',
        plane.kubeconfigPath,
        '--node',
        NODE,
        '--job-image',
        'provisioner:new',
        '-o',
        'json',
      ],
      { env: { MY_NODE_NAME: '', JOB_CONTAINER_IMAGE: '' } },
    );
    assert.equal(r.code, 0, r.stderr);
    const plan = JSON.parse(r.stdout) as {
      cluster: { source: string };
      create: { pv: string }[];
      cleanups: { pv: string; action: string; method?: string }[];
      skipped: { entry: string; reason: string }[];
      orphaned: { pv: string; reason: string }[];
      adopt: string[];
      writes: { verb: string; resource: string; name: string }[];
    };
    assert.equal(plan.cluster.source, 'live');
    assert.deepEqual(
      plan.create.map((c) => c.pv).sort(),
      [persistentVolumeName('disk2', NODE, FAST), persistentVolumeName('nvme0', NODE, RAW)].sort(),
    );
    const actions = Object.fromEntries(plan.cleanups.map((c) => [c.pv, `${c.action}/${c.method ?? '-'}`]));
    assert.deepEqual(actions, {
      [persistentVolumeName('disk3', NODE, FAST)]: 'clean/process',
      [persistentVolumeName('nvme1', NODE, RAW)]: 'clean/job',
      [persistentVolumeName('nvme2', NODE, RAW)]: 'follow-job/job',
    });
    assert.deepEqual(plan.adopt, [persistentVolumeName('old1', NODE, OLD)]);
    assert.deepEqual(
      plan.orphaned.map((o) => [o.pv, o.reason]),
      [[persistentVolumeName('old1', NODE, OLD), 'class-not-configured']],
    );
    assert.ok(plan.skipped.some((s) => s.entry === 'disk4' && s.reason === 'not-a-mount-point'));
    // The agent's code did try to write — and none of it was sent.
    assert.deepEqual(
      plan.writes.map((w) => `${w.verb} ${w.resource}/${w.name}`).sort(),
      [
        `create jobs/cleanup-${persistentVolumeName('nvme1', NODE, RAW)}`,
        `delete persistentvolumes/${persistentVolumeName('disk3', NODE, FAST)}`,
        `patch persistentvolumes/${persistentVolumeName('old1', NODE, OLD)}`,
        // disk1 is Bound without a disk identity: recorded on first sight (docs/disk-identity.md).
        `patch persistentvolumes/${persistentVolumeName('disk1', NODE, FAST)}`,
      ].sort(),
    );
    assert.deepEqual(await snapshot(), before, 'no object changed, none was created or deleted');
    await cluster.jobs.get(`cleanup-${persistentVolumeName('nvme1', NODE, RAW)}`, { namespace: NS }).then(
      () => assert.fail('the cleanup Job was not created'),
      (err: unknown) => {
        assert.ok(isNotFound(err));
      },
    );
    const old = await cluster.persistentVolumes.get(persistentVolumeName('old1', NODE, OLD));
    assert.equal(old.metadata.labels?.[NODE_LABEL], undefined, 'not adopted');
  });

  it('in-process: a counting wrapper around RestCluster sees reads only', async () => {
    const plane = requireTestControlPlane();
    const rest = new RestCluster({ connection: await loadKubeconfig(plane.kubeconfigPath) });
    const counting = new CountingCluster(rest);
    const before = await snapshot();
    try {
      const result = await simulatePlan({
        config: join(dir, 'config.yaml'),
        from: join(dir, 'config.yaml'),
        nodeName: NODE,
        nodeFacts: { kind: 'fixture', path: join(dir, 'node.yaml') },
        cluster: { kind: 'live', cluster: counting, description: 'test' },
        namespace: NS,
        jobImage: 'provisioner:new',
      });
      assert.ok(result.plan.writes.length >= 3);
      assert.equal(counting.writes(), 0, JSON.stringify([...counting.calls]));
      assert.ok((counting.calls.get('list') ?? 0) > 0 && (counting.calls.get('get') ?? 0) > 0);
      assert.ok((counting.calls.get('listMetadata') ?? 0) > 0, 'the adoption scan ran');
    } finally {
      rest.close();
    }
    assert.deepEqual(await snapshot(), before);
  });

  it('the read-only wrapper refuses a write before it reaches the server', async () => {
    const readOnly = new ReadOnlyCluster(cluster);
    const name = persistentVolumeName('disk1', NODE, FAST);
    const before = await snapshot();
    await assert.rejects(readOnly.persistentVolumes.delete(name), WriteRefusedError);
    await assert.rejects(
      readOnly.persistentVolumes.patch(name, { metadata: { labels: { x: 'y' } } }),
      WriteRefusedError,
    );
    await assert.rejects(readOnly.nodes.update(await readOnly.nodes.get(NODE)), WriteRefusedError);
    assert.deepEqual(await snapshot(), before);
    assert.equal((await readOnly.persistentVolumes.get(name)).metadata.deletionTimestamp, undefined);
  });
});
