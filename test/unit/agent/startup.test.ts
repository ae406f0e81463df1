// Start-up: the adoption scan runs beside the first generation's lists and pass. A volume whose
// upstream PV exists unlabelled is published once (adopted, not duplicated), whichever of the
// scan and the pass reaches it first; a scan the apiserver refuses still fails start-up, and
// leaves nothing running.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { Agent } from '../../../src/core/agent/agent.js';
import { MemoryCleaner } from '../../../src/core/cleanup/cleaner.js';
import { systemClock } from '../../../src/core/clock.js';
import { KubeApiError } from '../../../src/core/kube/cluster.js';
import type { Cluster } from '../../../src/core/kube/cluster.js';
import { MemoryCluster } from '../../../src/core/kube/memory/memory-cluster.js';
import { MemoryLogger } from '../../../src/core/log.js';
import { MemoryVolumes } from '../../../src/core/node/memory-volumes.js';
import { NODE_LABEL, persistentVolumeName } from '../../../src/core/pv/naming.js';
import { writeConfigMapVolume } from '../../support/configmap-volume.js';
import { waitFor } from '../../support/eventually.js';

async function setup(): Promise<{ dir: string; cluster: MemoryCluster; volumes: MemoryVolumes; uid: string }> {
  const dir = await mkdtemp(join(tmpdir(), 'lvp-startup-'));
  await writeConfigMapVolume(dir, { storageClassMap: 'fast:\n  hostDir: /mnt/fast\n  mountDir: /mnt/fast\n' });
  const cluster = new MemoryCluster();
  await cluster.storageClasses.create({ metadata: { name: 'fast' }, provisioner: 'kubernetes.io/no-provisioner' });
  const node = await cluster.nodes.create({
    metadata: { name: 'node-a', labels: { 'kubernetes.io/hostname': 'node-a' } },
  });
  const volumes = new MemoryVolumes();
  volumes.addDirectory('/mnt/fast');
  for (const d of ['disk1', 'disk2']) volumes.addMount(`/mnt/fast/${d}`);
  return { dir, cluster, volumes, uid: node.metadata.uid ?? '' };
}

function start(dir: string, cluster: Cluster, volumes: MemoryVolumes): Promise<Agent> {
  return Agent.start(
    {
      configPath: dir,
      nodeName: 'node-a',
      namespace: 'default',
      listenAddress: '127.0.0.1:0',
      metricsPath: '/metrics',
      discoveryPeriodMs: 3_600_000,
      changePollMs: 0,
      createConcurrency: 4,
      cleanupConcurrency: 2,
      jobImage: 'img',
      startTimeoutMs: 2000,
    },
    { cluster, volumes, cleaner: new MemoryCleaner(), clock: systemClock, logger: new MemoryLogger() },
  );
}

describe('agent start-up', () => {
  it('adopts the upstream PV of a volume and publishes the others, with no duplicate', async () => {
    const t = await setup();
    const upstream = persistentVolumeName('disk1', 'node-a', 'fast');
    await t.cluster.persistentVolumes.create({
      metadata: {
        name: upstream,
        annotations: { 'pv.kubernetes.io/provisioned-by': `local-volume-provisioner-node-a-${t.uid}` },
      },
      spec: {
        capacity: { storage: '100Gi' },
        accessModes: ['ReadWriteOnce'],
        persistentVolumeReclaimPolicy: 'Delete',
        storageClassName: 'fast',
        local: { path: '/mnt/fast/disk1' },
        nodeAffinity: {
          required: {
            nodeSelectorTerms: [
              { matchExpressions: [{ key: 'kubernetes.io/hostname', operator: 'In', values: ['node-a'] }] },
            ],
          },
        },
      },
    });
    const agent = await start(t.dir, t.cluster, t.volumes);
    try {
      // The scan or the first pass labels it, whichever comes first (both, in a tight race: each
      // patch counts).
      assert.match(
        agent['metrics'].registry.render(),
        /^local_volume_provisioner_adopted_persistentvolumes_total [12]$/mu,
      );
      const adopted = await t.cluster.persistentVolumes.get(upstream);
      assert.equal(adopted.metadata.labels?.[NODE_LABEL], 'node-a');
      assert.equal(
        adopted.metadata.annotations?.['pv.kubernetes.io/provisioned-by'],
        `local-volume-provisioner-node-a-${t.uid}`,
      );
      const disk2 = persistentVolumeName('disk2', 'node-a', 'fast');
      await waitFor(
        async () => (await t.cluster.persistentVolumes.get(disk2).catch(() => undefined)) !== undefined,
        'disk2 published',
      );
      await waitFor(
        () => agent.generation.persistentVolumes.get(upstream) !== undefined,
        'the adopted PV in the cache',
      );
      const all = (await t.cluster.persistentVolumes.list()).items;
      assert.deepEqual(all.map((pv) => pv.metadata.name).sort(), [upstream, disk2].sort());
    } finally {
      await agent.stop();
      await rm(t.dir, { recursive: true, force: true });
    }
  });

  it('fails when the apiserver refuses the adoption scan, naming what to grant, and leaves nothing running', async () => {
    const t = await setup();
    const refusing = Object.create(t.cluster) as MemoryCluster;
    const pvs = Object.create(t.cluster.persistentVolumes) as MemoryCluster['persistentVolumes'];
    pvs.listMetadata = () => Promise.reject(new KubeApiError(403, 'Forbidden', 'persistentvolumes is forbidden'));
    Object.defineProperty(refusing, 'persistentVolumes', { value: pvs });
    await assert.rejects(start(t.dir, refusing, t.volumes), (err: Error) => {
      assert.match(err.message, /needs list and patch on persistentvolumes/u);
      return true;
    });
    // Whatever the generation had begun is stopped: no later pass publishes anything.
    const before = (await t.cluster.persistentVolumes.list()).items.length;
    t.volumes.addMount('/mnt/fast/disk3');
    await new Promise((r) => setTimeout(r, 200));
    assert.equal((await t.cluster.persistentVolumes.list()).items.length, before);
    await rm(t.dir, { recursive: true, force: true });
  });
});
