// The capacity and managed-volume gauges are computed when /metrics is read, from the serving
// generation's PV cache: an idle pass computes nothing for them, and a scrape sees a PV's new
// phase as soon as the watch brought it, with no pass in between.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { Agent } from '../../../src/core/agent/agent.js';
import { MemoryCleaner } from '../../../src/core/cleanup/cleaner.js';
import { systemClock } from '../../../src/core/clock.js';
import { MemoryCluster } from '../../../src/core/kube/memory/memory-cluster.js';
import { MemoryLogger } from '../../../src/core/log.js';
import { MemoryVolumes } from '../../../src/core/node/memory-volumes.js';
import { persistentVolumeName } from '../../../src/core/pv/naming.js';
import { writeConfigMapVolume } from '../../support/configmap-volume.js';
import { waitFor } from '../../support/eventually.js';

const GiB = 2 ** 30;

describe('volume gauges', () => {
  it('are read from the PV cache at scrape time, per storage class, mode and phase', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'lvp-gauges-'));
    const cluster = new MemoryCluster();
    await cluster.storageClasses.create({ metadata: { name: 'fast' }, provisioner: 'kubernetes.io/no-provisioner' });
    await cluster.nodes.create({ metadata: { name: 'node-a', labels: { 'kubernetes.io/hostname': 'node-a' } } });
    const volumes = new MemoryVolumes();
    volumes.addDirectory('/mnt/fast');
    volumes.addMount('/mnt/fast/d1', { capacity: 10 * GiB });
    volumes.addMount('/mnt/fast/d2', { capacity: 20 * GiB });
    await writeConfigMapVolume(dir, { storageClassMap: 'fast:\n  hostDir: /mnt/fast\n  mountDir: /mnt/fast\n' });
    const agent = await Agent.start(
      {
        configPath: dir,
        nodeName: 'node-a',
        namespace: 'default',
        listenAddress: '127.0.0.1:0',
        metricsPath: '/metrics',
        // One pass at start-up and none after: what the gauges show later comes from the cache.
        discoveryPeriodMs: 3_600_000,
        changePollMs: 0,
        createConcurrency: 4,
        cleanupConcurrency: 2,
        jobImage: 'img',
        startTimeoutMs: 2000,
      },
      { cluster, volumes, cleaner: new MemoryCleaner(), clock: systemClock, logger: new MemoryLogger() },
    );
    const render = (): string => agent['metrics'].registry.render();
    const sample = (series: string): number | undefined => {
      const line = render()
        .split('\n')
        .find((l) => l.startsWith(`${series} `));
      return line === undefined ? undefined : Number(line.slice(series.length + 1));
    };
    try {
      await agent.generation.whenReady;
      const capacity =
        'local_volume_provisioner_persistentvolume_capacity_bytes{storageclass="fast",mode="Filesystem"}';
      await waitFor(() => sample(capacity) === 30 * GiB, 'both PVs counted');
      const passes = agent.generation.status().passes;
      const pending = 'local_volume_provisioner_managed_persistentvolumes{storageclass="fast",phase="Pending"}';
      const bound = 'local_volume_provisioner_managed_persistentvolumes{storageclass="fast",phase="Bound"}';
      assert.equal(sample(pending), 2);
      assert.equal(sample(bound), undefined);
      const pv = await cluster.persistentVolumes.get(persistentVolumeName('d1', 'node-a', 'fast'));
      await cluster.persistentVolumes.updateStatus({ ...pv, status: { phase: 'Bound' } });
      await waitFor(() => sample(bound) === 1, 'the bound PV counted as Bound');
      assert.equal(sample(pending), 1);
      assert.equal(agent.generation.status().passes, passes, 'no pass ran in between');
    } finally {
      await agent.stop();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
