// Volume health against the in-memory node and cluster: which condition each PV is in, that a
// change is said once (on the PV and its claim) and recovery too, and that an unchanged node costs
// no identity reads.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { systemClock } from '../../../src/core/clock.js';
import { parseConfigSnapshot } from '../../../src/core/config/decode/parse.js';
import { snapshotFromFileText } from '../../../src/core/config/decode/layout.js';
import { VolumeHealth } from '../../../src/core/health/volume-health.js';
import { EventRecorder } from '../../../src/core/kube/events.js';
import { MemoryCluster } from '../../../src/core/kube/memory/memory-cluster.js';
import type { PersistentVolume } from '../../../src/core/kube/objects.js';
import { MemoryLogger } from '../../../src/core/log.js';
import { createAgentMetrics } from '../../../src/core/metrics/agent-metrics.js';
import { MemoryVolumes } from '../../../src/core/node/memory-volumes.js';
import type { NodeVolumes } from '../../../src/core/node/volumes.js';
import { withIdentity } from '../../../src/core/pv/identity.js';
import type { NodeIdentity } from '../../../src/core/pv/naming.js';

const NODE: NodeIdentity = { name: 'node-a', uid: 'uid-a', hostname: 'node-a', labels: {} };
const CONFIG = parseConfigSnapshot(
  snapshotFromFileText(
    'c.yaml',
    'storageClassMap:\n  fast:\n    hostDir: /mnt/fast\n    mountDir: /mnt/fast\n  raw:\n    hostDir: /dev/lvp\n    mountDir: /dev/lvp\n    volumeMode: Block\n',
  ),
).config;
const UUID_A = '0b1e8c52-0d9c-4c5e-9d65-2f6d3c1f0a01';
const UUID_B = '77aa0d3e-5b1f-4f0c-8a3e-9e2b6c4d5f02';

async function world() {
  const cluster = new MemoryCluster({ namespaces: ['default', 'ns1'] });
  const memory = new MemoryVolumes();
  memory.addDirectory('/mnt/fast').addDirectory('/dev/lvp');
  memory.addMount('/mnt/fast/disk1', { fsType: 'ext4', uuid: UUID_A });
  memory.addBlockDevice('/dev/sdb', 2 ** 30, { wwid: 'naa.5000c500a1b2c3d4' });
  memory.addSymlink('/dev/lvp/sdb', '/dev/sdb');
  let identityReads = 0;
  const volumes: NodeVolumes = {
    mountPoints: () => memory.mountPoints(),
    listDirectory: (p) => memory.listDirectory(p),
    entryInfo: (p) => memory.entryInfo(p),
    filesystemCapacity: (p) => memory.filesystemCapacity(p),
    blockDeviceCapacity: (p) => memory.blockDeviceCapacity(p),
    volumeIdentity: (p) => {
      identityReads += 1;
      return memory.volumeIdentity(p);
    },
    watchChanges: (o) => memory.watchChanges(o),
  };
  const logger = new MemoryLogger();
  const metrics = createAgentMetrics();
  const events = new EventRecorder({ cluster, clock: systemClock, logger, component: 'test', host: 'node-a' });
  const health = new VolumeHealth({ config: CONFIG, node: NODE }, { volumes, events, metrics, logger });
  const pv = async (name: string, path: string, className: string, bound: boolean): Promise<PersistentVolume> => {
    const base: PersistentVolume = {
      metadata: { name, uid: `uid-${name}` },
      spec: {
        storageClassName: className,
        volumeMode: className === 'raw' ? 'Block' : 'Filesystem',
        local: { path },
        ...(bound ? { claimRef: { namespace: 'ns1', name: `claim-${name}`, uid: `uid-claim-${name}` } } : {}),
      },
      status: { phase: bound ? 'Bound' : 'Available' },
    };
    return withIdentity(base, await memory.volumeIdentity(path), NODE);
  };
  const pvs = [await pv('pv-fs', '/mnt/fast/disk1', 'fast', true), await pv('pv-blk', '/dev/lvp/sdb', 'raw', false)];
  const check = async () => health.check(pvs, await memory.mountPoints());
  const eventsOf = async (reason: string) => {
    await events.flush();
    const all = [
      ...(await cluster.events.list({ namespace: 'default' })).items,
      ...(await cluster.events.list({ namespace: 'ns1' })).items,
    ];
    return all
      .filter((e) => e.reason === reason)
      .map((e) => `${e.involvedObject.kind ?? ''}/${e.involvedObject.namespace ?? ''}/${e.involvedObject.name ?? ''}`)
      .sort();
  };
  return { memory, metrics, check, eventsOf, reads: () => identityReads };
}

describe('volume health', () => {
  it('healthy volumes: nothing to say, and an unchanged node reads no identity again', async () => {
    const w = await world();
    const first = await w.check();
    assert.deepEqual(first, { checked: 2, abnormal: [] });
    const reads = w.reads();
    assert.equal(reads, 2, 'each disk verified once');
    for (let i = 0; i < 5; i++) assert.deepEqual((await w.check()).abnormal, []);
    assert.equal(w.reads(), reads, 'no identity read while nothing changed');
    assert.deepEqual(await w.eventsOf('VolumeConditionAbnormal'), []);
  });

  it('an unmounted filesystem is abnormal once (on the PV and its claim), and normal again when remounted', async () => {
    const w = await world();
    await w.check();
    w.memory.removeMount('/mnt/fast/disk1');
    for (let i = 0; i < 3; i++)
      assert.deepEqual(
        (await w.check()).abnormal.map((a) => [a.pv, a.reason]),
        [['pv-fs', 'not-mounted']],
      );
    assert.equal(w.metrics.abnormalVolumes.get({ persistentvolume: 'pv-fs', reason: 'not-mounted' }), 1);
    assert.deepEqual(await w.eventsOf('VolumeConditionAbnormal'), [
      'PersistentVolume//pv-fs',
      'PersistentVolumeClaim/ns1/claim-pv-fs',
    ]);
    w.memory.addMount('/mnt/fast/disk1', { fsType: 'ext4', uuid: UUID_A });
    assert.deepEqual((await w.check()).abnormal, []);
    assert.equal(w.metrics.abnormalVolumes.get({ persistentvolume: 'pv-fs', reason: 'not-mounted' }), undefined);
    assert.deepEqual(await w.eventsOf('VolumeConditionNormal'), [
      'PersistentVolume//pv-fs',
      'PersistentVolumeClaim/ns1/claim-pv-fs',
    ]);
  });

  it('another filesystem mounted at the path is identity-changed; a missing device node is device-missing', async () => {
    const w = await world();
    await w.check();
    w.memory.removeMount('/mnt/fast/disk1').addMount('/mnt/fast/disk1', { fsType: 'ext4', uuid: UUID_B });
    w.memory.remove('/dev/sdb');
    const abnormal = (await w.check()).abnormal;
    assert.deepEqual(
      abnormal.map((a) => [a.pv, a.reason]),
      [
        ['pv-fs', 'identity-changed'],
        ['pv-blk', 'device-missing'],
      ],
    );
    assert.match(
      abnormal[0]?.message ?? '',
      new RegExp(`published for disk fs-uuid:${UUID_A}, but the disk at the path is fs-uuid:${UUID_B}`, 'u'),
    );
  });
});
