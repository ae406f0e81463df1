// Volume health against the in-memory node and cluster: which condition each PV is in, that a
// change is said once (on the PV and its claim) and recovery too, and that an unchanged node costs
// no identity reads.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ManualClock, systemClock } from '../../../src/core/clock.js';
import { parseConfigSnapshot } from '../../../src/core/config/decode/parse.js';
import { snapshotFromFileText } from '../../../src/core/config/decode/layout.js';
import { PROBES_PER_PASS, VolumeHealth } from '../../../src/core/health/volume-health.js';
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
const CLASSES =
  'storageClassMap:\n  fast:\n    hostDir: /mnt/fast\n    mountDir: /mnt/fast\n  raw:\n    hostDir: /dev/lvp\n    mountDir: /dev/lvp\n    volumeMode: Block\n';
const CONFIG = parseConfigSnapshot(snapshotFromFileText('c.yaml', CLASSES)).config;
/** Both classes with the missing-disk policy `policy` (a Go duration). */
function withPolicy(policy: string) {
  const text = CLASSES.replace(/mountDir: (\S+)\n/gu, `mountDir: $1\n    deleteMissingAfter: ${policy}\n`);
  return parseConfigSnapshot(snapshotFromFileText('c.yaml', text)).config;
}
const UUID_A = '0b1e8c52-0d9c-4c5e-9d65-2f6d3c1f0a01';
const UUID_B = '77aa0d3e-5b1f-4f0c-8a3e-9e2b6c4d5f02';

async function world(config = CONFIG, options: { availableFs?: boolean } = {}) {
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
  const clock = new ManualClock(1_000_000);
  /** The agent's, for its lifetime: a reload's new checker keeps the clock. */
  const missingSince = new Map<string, number>();
  /** A VolumeHealth on this node, as a generation of that config builds it (a reload builds a new one). */
  const healthFor = (c: typeof config) =>
    new VolumeHealth({ config: c, node: NODE }, { volumes, events, metrics, logger, clock, cluster, missingSince });
  const health = healthFor(config);
  const pv = async (name: string, path: string, className: string, bound: boolean): Promise<PersistentVolume> => {
    const base: PersistentVolume = {
      metadata: { name, uid: `uid-${name}` },
      spec: {
        storageClassName: className,
        volumeMode: className === 'raw' ? 'Block' : 'Filesystem',
        local: { path },
        accessModes: ['ReadWriteOnce'],
        capacity: { storage: '1Gi' },
        nodeAffinity: {
          required: {
            nodeSelectorTerms: [
              { matchExpressions: [{ key: 'kubernetes.io/hostname', operator: 'In', values: ['node-a'] }] },
            ],
          },
        },
        ...(bound ? { claimRef: { namespace: 'ns1', name: `claim-${name}`, uid: `uid-claim-${name}` } } : {}),
      },
      status: { phase: bound ? 'Bound' : 'Available' },
    };
    return withIdentity(base, await memory.volumeIdentity(path), NODE);
  };
  const pvs = [
    await pv('pv-fs', '/mnt/fast/disk1', 'fast', options.availableFs !== true),
    await pv('pv-blk', '/dev/lvp/sdb', 'raw', false),
  ];
  for (const p of pvs) await cluster.persistentVolumes.create({ metadata: p.metadata, spec: p.spec });
  // The PVs as the cluster has them (with their UIDs), in their phases: what the informer would list.
  const listed = async (): Promise<PersistentVolume[]> =>
    (await cluster.persistentVolumes.list()).items
      .map((p) => ({ ...p, status: pvs.find((q) => q.metadata.name === p.metadata.name)?.status ?? {} }))
      .sort(
        (a, b) =>
          pvs.findIndex((q) => q.metadata.name === a.metadata.name) -
          pvs.findIndex((q) => q.metadata.name === b.metadata.name),
      );
  const check = async (h = health) => h.check(await listed(), await memory.mountPoints());
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
  const eventMessages = async (reason: string) => {
    await events.flush();
    return (await cluster.events.list({ namespace: 'default' })).items
      .filter((e) => e.reason === reason)
      .map((e) => `${e.involvedObject.name ?? ''}: ${e.message}`);
  };
  /** The PVs not being deleted (a deleted PV may wait for the pv-protection finalizer). */
  const names = async () =>
    (await cluster.persistentVolumes.list()).items
      .filter((p) => p.metadata.deletionTimestamp === undefined)
      .map((p) => p.metadata.name)
      .sort();
  return {
    memory,
    metrics,
    check,
    healthFor,
    listed,
    eventsOf,
    eventMessages,
    names,
    clock,
    reads: () => identityReads,
  };
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

const MINUTE = 60_000;

describe('the missing-disk policy (deleteMissingAfter)', () => {
  const deletedCount = (w: Awaited<ReturnType<typeof world>>, reason = 'device-missing') =>
    w.metrics.missingVolumesDeleted.get({ storageclass: 'raw', reason });

  it('keeps an Available PV missing for less than the policy, and deletes it once after: Event, metric', async () => {
    const w = await world(withPolicy('30m'));
    await w.check();
    w.memory.remove('/dev/sdb');
    assert.deepEqual(
      (await w.check()).abnormal.map((a) => [a.pv, a.reason]),
      [['pv-blk', 'device-missing']],
    );
    await w.clock.advance(29 * MINUTE);
    const kept = await w.check();
    assert.equal(kept.deleted, undefined);
    assert.deepEqual(await w.names(), ['pv-blk', 'pv-fs']);
    await w.clock.advance(MINUTE);
    const pass = await w.check();
    assert.deepEqual(pass.deleted, ['pv-blk']);
    assert.deepEqual(pass.abnormal, [], 'a deleted PV is no longer abnormal');
    assert.deepEqual(await w.names(), ['pv-fs']);
    assert.equal(deletedCount(w), 1);
    assert.equal(w.metrics.abnormalVolumes.get({ persistentvolume: 'pv-blk', reason: 'device-missing' }), undefined);
    const messages = await w.eventMessages('VolumeMissingDeleted');
    assert.equal(messages.length, 1);
    assert.match(messages[0] ?? '', /^pv-blk: Deleted PV "pv-blk": its disk has been missing for 30m0s /u);
    assert.match(messages[0] ?? '', /storage class raw has deleteMissingAfter: 30m0s/u);
    await w.clock.advance(60 * MINUTE);
    assert.equal((await w.check()).deleted, undefined);
    assert.equal(deletedCount(w), 1, 'deleted once');
  });

  it('does not delete twice when the informer still lists the deleted PV', async () => {
    const w = await world(withPolicy('10m'));
    const health = w.healthFor(withPolicy('10m'));
    w.memory.remove('/dev/sdb');
    const stale = await w.listed();
    await health.check(stale, await w.memory.mountPoints());
    await w.clock.advance(10 * MINUTE);
    assert.deepEqual((await health.check(stale, await w.memory.mountPoints())).deleted, ['pv-blk']);
    const again = await health.check(stale, await w.memory.mountPoints());
    assert.equal(again.deleted, undefined);
    assert.equal(deletedCount(w), 1);
  });

  it('never deletes a Bound PV: Events on the PV and its claim only', async () => {
    const w = await world(withPolicy('5m'));
    await w.check();
    w.memory.removeMount('/mnt/fast/disk1');
    await w.check();
    await w.clock.advance(24 * 60 * MINUTE);
    const pass = await w.check();
    assert.equal(pass.deleted, undefined);
    assert.deepEqual(
      pass.abnormal.map((a) => [a.pv, a.reason]),
      [['pv-fs', 'not-mounted']],
    );
    assert.deepEqual(await w.names(), ['pv-blk', 'pv-fs']);
    assert.deepEqual(await w.eventsOf('VolumeConditionAbnormal'), [
      'PersistentVolume//pv-fs',
      'PersistentVolumeClaim/ns1/claim-pv-fs',
    ]);
    assert.deepEqual(await w.eventMessages('VolumeMissingDeleted'), []);
  });

  it('restarts the clock when the disk is back before the deadline', async () => {
    const w = await world(withPolicy('30m'));
    w.memory.remove('/dev/sdb');
    await w.check();
    await w.clock.advance(20 * MINUTE);
    await w.check();
    w.memory.addBlockDevice('/dev/sdb', 2 ** 30, { wwid: 'naa.5000c500a1b2c3d4' });
    assert.deepEqual((await w.check()).abnormal, []);
    w.memory.remove('/dev/sdb');
    await w.check();
    await w.clock.advance(20 * MINUTE);
    assert.equal((await w.check()).deleted, undefined, 'missing for 20m since it went missing again');
    await w.clock.advance(10 * MINUTE);
    assert.deepEqual((await w.check()).deleted, ['pv-blk']);
  });

  it('never deletes with a policy of 0s or none', async () => {
    for (const config of [withPolicy('0s'), CONFIG]) {
      assert.equal(config.storageClassMap['raw']?.deleteMissingAfter, undefined);
      const w = await world(config);
      w.memory.remove('/dev/sdb');
      await w.check();
      await w.clock.advance(1000 * 60 * MINUTE);
      assert.equal((await w.check()).deleted, undefined);
      assert.deepEqual(await w.names(), ['pv-blk', 'pv-fs']);
    }
  });

  it('counts only a missing disk: another disk at the path (identity-changed) is never deleted', async () => {
    const w = await world(withPolicy('5m'), { availableFs: true });
    await w.check();
    w.memory.removeMount('/mnt/fast/disk1').addMount('/mnt/fast/disk1', { fsType: 'ext4', uuid: UUID_B });
    await w.check();
    await w.clock.advance(60 * MINUTE);
    const pass = await w.check();
    assert.deepEqual(
      pass.abnormal.map((a) => [a.pv, a.reason]),
      [['pv-fs', 'identity-changed']],
    );
    assert.equal(pass.deleted, undefined);
  });

  it('deletes an Available Filesystem PV that is not mounted', async () => {
    const w = await world(withPolicy('5m'), { availableFs: true });
    w.memory.removeMount('/mnt/fast/disk1');
    await w.check();
    await w.clock.advance(5 * MINUTE);
    assert.deepEqual((await w.check()).deleted, ['pv-fs']);
    assert.equal(w.metrics.missingVolumesDeleted.get({ storageclass: 'fast', reason: 'not-mounted' }), 1);
  });

  it('keeps the clock across a reload: enabling it deletes a PV already missing that long at the next pass', async () => {
    const w = await world(CONFIG);
    w.memory.remove('/dev/sdb');
    await w.check();
    await w.clock.advance(45 * MINUTE);
    assert.equal((await w.check()).deleted, undefined, 'off');
    const reloaded = w.healthFor(withPolicy('30m'));
    assert.deepEqual((await w.check(reloaded)).deleted, ['pv-blk']);
  });
});

describe('the missing-disk policy wiring', () => {
  it('refuses to start with a policy but no cluster client to delete with', () => {
    const volumes = new MemoryVolumes();
    const deps = {
      volumes,
      events: { record: () => undefined },
      metrics: createAgentMetrics(),
      logger: new MemoryLogger(),
    };
    assert.throws(
      () => new VolumeHealth({ config: withPolicy('30m'), node: NODE }, deps),
      /have deleteMissingAfter, but no cluster client/u,
    );
    assert.doesNotThrow(() => new VolumeHealth({ config: CONFIG, node: NODE }, deps));
  });
});

describe('volume health on many PVs', () => {
  it('probes healthy, unmoved volumes in turns (PROBES_PER_PASS a pass) and still finds an unreadable one within a round', async () => {
    const memory = new MemoryVolumes();
    memory.addDirectory('/mnt/fast');
    const count = 3 * PROBES_PER_PASS;
    for (let i = 0; i < count; i++) memory.addMount(`/mnt/fast/d${String(i)}`);
    let statfs = 0;
    let failing = '';
    const volumes: NodeVolumes = {
      mountPoints: () => memory.mountPoints(),
      listDirectory: (p) => memory.listDirectory(p),
      entryInfo: (p) => memory.entryInfo(p),
      filesystemCapacity: (p) => {
        statfs += 1;
        return p === failing ? Promise.reject(new Error('EIO: i/o error')) : memory.filesystemCapacity(p);
      },
      blockDeviceCapacity: (p) => memory.blockDeviceCapacity(p),
      volumeIdentity: (p) => memory.volumeIdentity(p),
      watchChanges: (o) => memory.watchChanges(o),
    };
    const pvs: PersistentVolume[] = [];
    for (let i = 0; i < count; i++) {
      const path = `/mnt/fast/d${String(i)}`;
      const base: PersistentVolume = {
        metadata: { name: `pv-${String(i)}`, uid: `uid-${String(i)}` },
        spec: { storageClassName: 'fast', volumeMode: 'Filesystem', local: { path } },
        status: { phase: 'Available' },
      };
      pvs.push(withIdentity(base, await memory.volumeIdentity(path), NODE));
    }
    const logger = new MemoryLogger();
    const events = { record: () => undefined };
    const health = new VolumeHealth(
      { config: CONFIG, node: NODE },
      { volumes, events, metrics: createAgentMetrics(), logger, clock: new ManualClock(0) },
    );
    const check = async () => health.check(pvs, await memory.mountPoints());
    await check();
    assert.equal(statfs, count, 'the first pass looks at every volume');
    const perPass: number[] = [];
    for (let pass = 0; pass < 3; pass++) {
      statfs = 0;
      assert.deepEqual((await check()).abnormal, []);
      perPass.push(statfs);
    }
    assert.deepEqual(
      perPass,
      [PROBES_PER_PASS, PROBES_PER_PASS, PROBES_PER_PASS],
      'a round of 3 passes probes each once',
    );
    const victim = count - 2;
    failing = `/mnt/fast/d${String(victim)}`;
    const found: string[] = [];
    for (let pass = 0; pass < 3 && found.length === 0; pass++)
      found.push(...(await check()).abnormal.map((a) => `${a.pv} ${a.reason}`));
    assert.deepEqual(found, [`pv-${String(victim)} unreadable`], 'found on its turn, within one round');
  });
});

describe('volume health keeps the usage its statfs read', () => {
  it('one statfs per probe turn feeds the usage gauges (no other pass); a gone or abnormal volume drops its sample', async () => {
    const memory = new MemoryVolumes();
    memory.addDirectory('/mnt/fast');
    const count = 2 * PROBES_PER_PASS;
    for (let i = 0; i < count; i++) memory.addMount(`/mnt/fast/d${String(i)}`, { capacity: 2 ** 30 });
    let usageReads = 0;
    let capacityReads = 0;
    const volumes: NodeVolumes = {
      mountPoints: () => memory.mountPoints(),
      listDirectory: (p) => memory.listDirectory(p),
      entryInfo: (p) => memory.entryInfo(p),
      filesystemCapacity: (p) => {
        capacityReads += 1;
        return memory.filesystemCapacity(p);
      },
      filesystemUsage: (p) => {
        usageReads += 1;
        return memory.filesystemUsage(p);
      },
      blockDeviceCapacity: (p) => memory.blockDeviceCapacity(p),
      volumeIdentity: (p) => memory.volumeIdentity(p),
      watchChanges: (o) => memory.watchChanges(o),
    };
    const pvs: PersistentVolume[] = [];
    for (let i = 0; i < count; i++) {
      const path = `/mnt/fast/d${String(i)}`;
      const base: PersistentVolume = {
        metadata: { name: `pv-${String(i)}`, uid: `uid-${String(i)}` },
        spec: { storageClassName: 'fast', volumeMode: 'Filesystem', local: { path } },
        status: { phase: 'Available' },
      };
      pvs.push(withIdentity(base, await memory.volumeIdentity(path), NODE));
    }
    const metrics = createAgentMetrics();
    const health = new VolumeHealth(
      { config: CONFIG, node: NODE },
      { volumes, events: { record: () => undefined }, metrics, logger: new MemoryLogger(), clock: new ManualClock(0) },
    );
    const check = async (list = pvs) => health.check(list, await memory.mountPoints());
    await check();
    assert.equal(usageReads, count, 'the first pass reads every volume once');
    assert.equal(metrics.volumeUsage.size, count);
    assert.equal(metrics.volumeUsage.get('pv-3/uid-3')?.usedBytes, 0);
    memory.setUsed('/mnt/fast/d3', 2 ** 20);
    usageReads = 0;
    await check();
    await check();
    assert.equal(usageReads, 2 * PROBES_PER_PASS, 'a round of quiet passes: one statfs per volume, no more');
    assert.equal(capacityReads, 0, 'no second statfs for the capacity');
    assert.equal(metrics.volumeUsage.get('pv-3/uid-3')?.usedBytes, 2 ** 20, 'the new usage within one round');
    // Unmounted: abnormal, and its sample goes (the directory's statfs would be another filesystem's).
    memory.removeMount('/mnt/fast/d5');
    const result = await check();
    assert.deepEqual(
      result.abnormal.map((a) => a.pv),
      ['pv-5'],
    );
    assert.equal(metrics.volumeUsage.has('pv-5/uid-5'), false);
    // A PV gone from the list: its sample is dropped on the next full pass.
    await check(pvs.slice(1));
    assert.equal(metrics.volumeUsage.has('pv-0/uid-0'), false);
    assert.equal(metrics.volumeUsage.size, count - 2);
  });
});
