// Start-up: the adoption scan runs beside the first generation's lists and pass. A volume whose
// upstream PV exists unlabelled is published once (adopted, not duplicated), whichever of the
// scan and the pass reaches it first; a scan the apiserver refuses still fails start-up, and
// leaves nothing running.
import assert from 'node:assert/strict';
import { rm } from 'node:fs/promises';
import { describe, it } from 'node:test';
import { ManualClock } from '../../../src/core/clock.js';
import { KubeApiError } from '../../../src/core/kube/cluster.js';
import type { MemoryCluster } from '../../../src/core/kube/memory/memory-cluster.js';
import { NODE_LABEL, persistentVolumeName } from '../../../src/core/pv/naming.js';
import { waitFor } from '../../support/eventually.js';
import { memoryAgentFixture, startMemoryAgent } from '../../support/memory-agent.js';

describe('agent start-up', () => {
  it('adopts the upstream PV of a volume and publishes the others, with no duplicate', async () => {
    const t = await memoryAgentFixture('lvp-startup-');
    for (const d of ['disk1', 'disk2']) t.volumes.addMount(`/mnt/fast/${d}`);
    const upstream = persistentVolumeName('disk1', 'node-a', 'fast');
    await t.cluster.persistentVolumes.create({
      metadata: {
        name: upstream,
        annotations: { 'pv.kubernetes.io/provisioned-by': `local-volume-provisioner-node-a-${t.nodeUid}` },
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
    const agent = await startMemoryAgent(t);
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
        `local-volume-provisioner-node-a-${t.nodeUid}`,
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

  it('asks for its PV and StorageClass lists while the Node is still on its way, and does not list them again', async () => {
    const t = await memoryAgentFixture('lvp-startup-');
    t.volumes.addMount('/mnt/fast/disk1');
    const calls: string[] = [];
    const listed = { persistentVolumes: false, storageClasses: false };
    const watched = Object.create(t.cluster) as MemoryCluster;
    const pvs = Object.create(t.cluster.persistentVolumes) as MemoryCluster['persistentVolumes'];
    pvs.list = (options) => {
      calls.push(`list persistentvolumes ${options?.labelSelector ?? ''}`);
      listed.persistentVolumes = true;
      return t.cluster.persistentVolumes.list(options);
    };
    const classes = Object.create(t.cluster.storageClasses) as MemoryCluster['storageClasses'];
    classes.list = (options) => {
      calls.push('list storageclasses');
      listed.storageClasses = true;
      return t.cluster.storageClasses.list(options);
    };
    const nodes = Object.create(t.cluster.nodes) as MemoryCluster['nodes'];
    nodes.get = async (name, options) => {
      calls.push('get node');
      // The Node answers only once both lists were asked for (or after 2 s, to fail, not hang).
      await waitFor(() => listed.persistentVolumes && listed.storageClasses, 'both lists asked for', 2000).catch(
        () => undefined,
      );
      calls.push('node answered');
      return t.cluster.nodes.get(name, options);
    };
    for (const [key, value] of Object.entries({ persistentVolumes: pvs, storageClasses: classes, nodes }))
      Object.defineProperty(watched, key, { value });
    const agent = await startMemoryAgent(t, {}, watched);
    try {
      await waitFor(
        async () =>
          (await t.cluster.persistentVolumes
            .get(persistentVolumeName('disk1', 'node-a', 'fast'))
            .catch(() => undefined)) !== undefined,
        'disk1 published',
      );
      assert.deepEqual(
        calls.slice(0, 4).sort(),
        ['get node', `list persistentvolumes ${NODE_LABEL}=node-a`, 'list storageclasses', 'node answered'].sort(),
      );
      assert.equal(calls.indexOf('node answered'), 3, `the lists before the Node's answer: ${calls.join(', ')}`);
      assert.deepEqual(
        calls.filter((c) => c.startsWith('list')),
        [`list persistentvolumes ${NODE_LABEL}=node-a`, 'list storageclasses'],
        'the first generation took them: no second list',
      );
    } finally {
      await agent.stop();
      await rm(t.dir, { recursive: true, force: true });
    }
  });

  it('fails when the apiserver refuses the adoption scan, naming what to grant, and leaves nothing running', async () => {
    const t = await memoryAgentFixture('lvp-startup-');
    for (const d of ['disk1', 'disk2']) t.volumes.addMount(`/mnt/fast/${d}`);
    const refusing = Object.create(t.cluster) as MemoryCluster;
    const pvs = Object.create(t.cluster.persistentVolumes) as MemoryCluster['persistentVolumes'];
    pvs.listMetadata = () => Promise.reject(new KubeApiError(403, 'Forbidden', 'persistentvolumes is forbidden'));
    Object.defineProperty(refusing, 'persistentVolumes', { value: pvs });
    // A pass every 20 ms of a clock that moves only when the test says so.
    const clock = new ManualClock(Date.now());
    await assert.rejects(startMemoryAgent(t, { discoveryPeriodMs: 20 }, refusing, undefined, clock), (err: Error) => {
      assert.match(err.message, /needs list and patch on persistentvolumes/u);
      return true;
    });
    // Whatever the generation had begun is stopped: nothing waits on the clock, and ten discovery
    // periods later no pass has published the disk mounted since.
    assert.equal(clock.pendingSleepers, 0, `still waiting on the clock: ${clock.wakeTimes.join(', ')}`);
    const before = (await t.cluster.persistentVolumes.list()).items.length;
    t.volumes.addMount('/mnt/fast/disk3');
    await clock.advance(10 * 20);
    assert.equal((await t.cluster.persistentVolumes.list()).items.length, before);
    await rm(t.dir, { recursive: true, force: true });
  });
});
