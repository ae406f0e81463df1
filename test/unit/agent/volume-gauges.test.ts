// The capacity and managed-volume gauges are computed when /metrics is read, from the serving
// generation's PV cache: an idle pass computes nothing for them, and a scrape sees a PV's new
// phase as soon as the watch brought it, with no pass in between.
import assert from 'node:assert/strict';
import { rm } from 'node:fs/promises';
import { describe, it } from 'node:test';
import { persistentVolumeName } from '../../../src/core/pv/naming.js';
import { waitFor } from '../../support/eventually.js';
import { memoryAgentFixture, startMemoryAgent } from '../../support/memory-agent.js';

const GiB = 2 ** 30;

describe('volume gauges', () => {
  it('are read from the PV cache at scrape time, per storage class, mode and phase', async () => {
    const t = await memoryAgentFixture('lvp-gauges-');
    const { cluster } = t;
    t.volumes.addMount('/mnt/fast/d1', { capacity: 10 * GiB });
    t.volumes.addMount('/mnt/fast/d2', { capacity: 20 * GiB });
    // One pass at start-up and none after (the fixture's default): what the gauges show later
    // comes from the cache.
    const agent = await startMemoryAgent(t);
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
      await rm(t.dir, { recursive: true, force: true });
    }
  });
});
