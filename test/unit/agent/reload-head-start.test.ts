// A reload's head start: the new generation's lists are asked for while the config change is
// debounced, and the generation takes them instead of listing again; but lists that may miss a PV
// write the agent made since (here: the old generation deleting a PV after its cleanup) are not
// taken, or the new generation would see the Released PV again and wipe its disk a second time.
import assert from 'node:assert/strict';
import { rm } from 'node:fs/promises';
import { describe, it } from 'node:test';
import type { Agent } from '../../../src/core/agent/agent.js';
import { MemoryCleaner } from '../../../src/core/cleanup/cleaner.js';
import type { ListOptions } from '../../../src/core/kube/cluster.js';
import type { MemoryCluster } from '../../../src/core/kube/memory/memory-cluster.js';
import type { ObjectList, PersistentVolume } from '../../../src/core/kube/objects.js';
import { NODE_LABEL, persistentVolumeName } from '../../../src/core/pv/naming.js';
import { writeConfigMapVolume } from '../../support/configmap-volume.js';
import { waitFor } from '../../support/eventually.js';
import { memoryAgentFixture, startMemoryAgent } from '../../support/memory-agent.js';
import type { MemoryAgentFixture } from '../../support/memory-agent.js';

const CHANGED = { storageClassMap: 'fast:\n  hostDir: /mnt/fast\n  mountDir: /mnt/fast\n  fsType: ext4\n' };

/** The fixture's cluster with the node's PV lists counted, and each one answered through `answer`. */
function countingLists(
  t: MemoryAgentFixture,
  answer: (list: () => Promise<ObjectList<PersistentVolume>>, n: number) => Promise<ObjectList<PersistentVolume>>,
): { cluster: MemoryCluster; lists: () => number } {
  let n = 0;
  const cluster = Object.create(t.cluster) as MemoryCluster;
  const pvs = Object.create(t.cluster.persistentVolumes) as MemoryCluster['persistentVolumes'];
  pvs.list = (options?: ListOptions) => {
    if (options?.labelSelector?.startsWith(NODE_LABEL) !== true) return t.cluster.persistentVolumes.list(options);
    n += 1;
    return answer(() => t.cluster.persistentVolumes.list(options), n);
  };
  Object.defineProperty(cluster, 'persistentVolumes', { value: pvs });
  return { cluster, lists: () => n };
}

async function startWatching(t: MemoryAgentFixture, cluster: MemoryCluster, cleaner: MemoryCleaner): Promise<Agent> {
  return startMemoryAgent(
    t,
    { watch: { pollIntervalMs: 60_000, debounceMs: 300 }, minPassIntervalMs: 0, discoveryPeriodMs: 3_600_000 },
    cluster,
    cleaner,
  );
}

/** Every PV write the agent started has been answered (the head start is asked for only then). */
const writesSettled = (agent: Agent): boolean => agent['persistentVolumeWrites'].inFlight === 0;

describe("a reload's head start", () => {
  it('lists while the change is debounced; the new generation takes the lists and does not list again', async () => {
    const t = await memoryAgentFixture('lvp-head-start-');
    for (const d of ['disk1', 'disk2', 'disk3']) t.volumes.addMount(`/mnt/fast/${d}`);
    const counted = countingLists(t, (list) => list());
    const agent = await startWatching(t, counted.cluster, new MemoryCleaner());
    try {
      await waitFor(() => agent.generation.persistentVolumes.size === 3 && writesSettled(agent), '3 PVs published');
      assert.equal(counted.lists(), 1, "start-up's one list");
      await writeConfigMapVolume(t.dir, CHANGED);
      await waitFor(() => agent.generation.number === 2, 'generation 2');
      await agent.generation.whenSynced;
      assert.equal(counted.lists(), 2, 'one list for the reload: the one asked for ahead');
      assert.deepEqual(
        agent.generation.persistentVolumes
          .list()
          .map((pv) => pv.metadata.name)
          .sort(),
        ['disk1', 'disk2', 'disk3'].map((d) => persistentVolumeName(d, 'node-a', 'fast')).sort(),
      );
    } finally {
      await agent.stop();
      await rm(t.dir, { recursive: true, force: true });
    }
  });

  it('is not taken when the old generation deleted a PV after it was asked for: no second cleanup', async () => {
    const t = await memoryAgentFixture('lvp-head-start-');
    t.volumes.addMount('/mnt/fast/disk1');
    const name = persistentVolumeName('disk1', 'node-a', 'fast');
    const deleted = async (): Promise<boolean> =>
      (await t.cluster.persistentVolumes.get(name)).metadata.deletionTimestamp !== undefined;
    // The head start's list (the second) answers as the server did when asked: the PV Released. Before the
    // answer arrives, the old generation cleans the volume and deletes its PV.
    const counted = countingLists(t, async (list, n) => {
      if (n !== 2) return list();
      const asked = await list();
      const pv = await t.cluster.persistentVolumes.get(name);
      await t.cluster.persistentVolumes.updateStatus({ ...pv, status: { phase: 'Released' } });
      await waitFor(deleted, 'the old generation deleted the PV after its cleanup');
      return asked;
    });
    const cleaner = new MemoryCleaner();
    const agent = await startWatching(t, counted.cluster, cleaner);
    try {
      await waitFor(() => agent.generation.persistentVolumes.size === 1 && writesSettled(agent), 'disk1 published');
      const released = (await t.cluster.persistentVolumes.get(name)).status?.phase;
      assert.notEqual(released, 'Released');
      await writeConfigMapVolume(t.dir, CHANGED);
      await waitFor(() => agent.generation.number === 2, 'generation 2');
      await agent.generation.whenReady;
      assert.equal(counted.lists(), 3, 'the generation listed again');
      assert.ok(agent.generation.persistentVolumes.get(name)?.metadata.deletionTimestamp, 'it sees the delete');
      assert.equal(cleaner.calls.length, 1, 'the volume was wiped once');
      assert.equal(agent.cleanups.get(name), undefined, 'no cleanup queued again');
    } finally {
      await agent.stop();
      await rm(t.dir, { recursive: true, force: true });
    }
  });
});
