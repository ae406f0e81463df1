import assert from 'node:assert/strict';
import fc from 'fast-check';
import { describe, it } from 'node:test';
import { parseConfigSnapshot } from '../../../src/core/config/decode/parse.js';
import { snapshotFromFileText } from '../../../src/core/config/decode/layout.js';
import type { ProvisionerConfig } from '../../../src/core/config/model.js';
import { NameVerdicts, planDiscovery } from '../../../src/core/discovery/plan.js';
import type { DiscoveryPlan } from '../../../src/core/discovery/plan.js';
import type { PersistentVolume, PersistentVolumePhase, StorageClass } from '../../../src/core/kube/objects.js';
import { MemoryVolumes } from '../../../src/core/node/memory-volumes.js';
import { IDENTITY_ANNOTATION } from '../../../src/core/pv/identity.js';
import type { NodeIdentity } from '../../../src/core/pv/naming.js';
import { persistentVolumeName } from '../../../src/core/pv/naming.js';

const GiB = 2 ** 30;
const NODE: NodeIdentity = { name: 'node-a', uid: 'u1', hostname: 'node-a', labels: {} };

function config(text: string): ProvisionerConfig {
  return parseConfigSnapshot(snapshotFromFileText('c.yaml', text)).config;
}

const TWO_CLASSES = config(
  'storageClassMap:\n  fast:\n    hostDir: /mnt/fast\n    mountDir: /discovery/fast\n  block:\n    hostDir: /dev/disk/local\n    mountDir: /discovery/block\n    volumeMode: Block\n    namePattern: "nvme-*,scsi-*"\n',
);

function storageClasses(...items: StorageClass[]): (name: string) => StorageClass | undefined {
  return (name) => items.find((s) => s.metadata.name === name);
}
const SC_FAST: StorageClass = {
  metadata: { name: 'fast' },
  provisioner: 'kubernetes.io/no-provisioner',
  reclaimPolicy: 'Retain',
  mountOptions: ['noatime'],
};
const SC_BLOCK: StorageClass = { metadata: { name: 'block' }, provisioner: 'kubernetes.io/no-provisioner' };

function node(): MemoryVolumes {
  const v = new MemoryVolumes();
  v.addDirectory('/discovery/fast').addDirectory('/discovery/block');
  v.addMount('/discovery/fast/disk1', { capacity: 13 * GiB - 1 });
  v.addDirectory('/discovery/fast/plain');
  v.addFile('/discovery/fast/stray.txt');
  v.addMount('/discovery/fast/with space é', { capacity: 20 * GiB });
  v.addMount('/discovery/fast/bad\nname', { capacity: 20 * GiB });
  v.addDirectory('/elsewhere/dir');
  v.addSymlink('/discovery/fast/link-to-dir', '/elsewhere/dir');
  v.addBlockDevice('/dev/loop7', 64 * 2 ** 20);
  v.addSymlink('/discovery/block/nvme-0', '/dev/loop7');
  v.addSymlink('/discovery/block/nvme-gone', '/dev/loop99');
  v.addSymlink('/discovery/block/sda', '/dev/loop7');
  v.addMount('/discovery/block/scsi-dir', { capacity: 20 * GiB });
  return v;
}

function reasons(plan: DiscoveryPlan): Record<string, string> {
  return Object.fromEntries(plan.skipped.map((s) => [`${s.className}/${s.entry}`, s.reason]));
}

describe('a discovery pass (plan)', () => {
  it("publishes mounted directories and block devices, skipping everything else with upstream's reasons", async () => {
    const plan = await planDiscovery({
      config: TWO_CLASSES,
      node: NODE,
      volumes: node(),
      persistentVolumes: [],
      storageClass: storageClasses(SC_FAST, SC_BLOCK),
    });
    assert.deepEqual(plan.classProblems, []);
    assert.deepEqual(
      plan.create.map((c) => [
        c.className,
        c.entry,
        c.detectedMode,
        c.capacityBytes,
        c.persistentVolume.spec.local?.path,
      ]),
      [
        ['block', 'nvme-0', 'Block', 64 * 2 ** 20, '/dev/disk/local/nvme-0'],
        ['fast', 'disk1', 'Filesystem', 12 * GiB, '/mnt/fast/disk1'],
        ['fast', 'with space é', 'Filesystem', 20 * GiB, '/mnt/fast/with space é'],
      ],
    );
    assert.deepEqual(reasons(plan), {
      'fast/bad\nname': 'unsafe-name',
      'fast/link-to-dir': 'symlink-to-directory',
      'fast/plain': 'not-a-mount-point',
      'fast/stray.txt': 'not-a-volume',
      'block/nvme-gone': 'vanished',
      'block/sda': 'name-pattern',
      'block/scsi-dir': 'mode-mismatch',
    });
    const plain = plan.skipped.find((s) => s.entry === 'plain');
    assert.equal(plain?.message, 'path "/discovery/fast/plain" is not a valid mount point');
    const fast = plan.create[1]?.persistentVolume;
    assert.equal(fast?.spec.persistentVolumeReclaimPolicy, 'Retain');
    assert.deepEqual(fast.spec.mountOptions, ['noatime']);
    assert.equal(
      plan.create[0]?.persistentVolume.spec.persistentVolumeReclaimPolicy,
      'Delete',
      'no reclaimPolicy → Delete',
    );
    assert.equal(plan.entries, 10);
  });

  it('never publishes an entry twice: known PV name, or its path used by another PV', async () => {
    const known: PersistentVolume = {
      metadata: { name: persistentVolumeName('disk1', 'node-a', 'fast') },
      spec: { local: { path: '/mnt/fast/disk1' } },
    };
    const squatter: PersistentVolume = {
      metadata: { name: 'renamed-class-pv' },
      spec: { local: { path: '/mnt/fast/with space é' } },
    };
    const plan = await planDiscovery({
      config: TWO_CLASSES,
      node: NODE,
      volumes: node(),
      persistentVolumes: [known, squatter],
      storageClass: storageClasses(SC_FAST, SC_BLOCK),
    });
    assert.deepEqual(
      plan.create.map((c) => c.entry),
      ['nvme-0'],
    );
    const r = reasons(plan);
    assert.equal(r['fast/disk1'], 'already-published');
    assert.equal(r['fast/with space é'], 'path-in-use');
    assert.equal(plan.skipped.find((s) => s.entry === 'with space é')?.persistentVolume, 'renamed-class-pv');
  });

  it('waits for a cleanup in progress before publishing the volume again', async () => {
    const pvName = persistentVolumeName('disk1', 'node-a', 'fast');
    const plan = await planDiscovery({
      config: TWO_CLASSES,
      node: NODE,
      volumes: node(),
      persistentVolumes: [],
      storageClass: storageClasses(SC_FAST, SC_BLOCK),
      cleanupInProgress: (name) => name === pvName,
    });
    assert.equal(reasons(plan)['fast/disk1'], 'cleanup-in-progress');
  });

  it('reports a missing StorageClass, an unsupported reclaim policy and a missing mountDir per class', async () => {
    const volumes = new MemoryVolumes();
    const plan = await planDiscovery({
      config: config(
        'storageClassMap:\n  a:\n    hostDir: /a\n    mountDir: /a\n  b:\n    hostDir: /b\n    mountDir: /b\n  c:\n    hostDir: /c\n    mountDir: /c\n',
      ),
      node: NODE,
      volumes,
      persistentVolumes: [],
      storageClass: storageClasses(
        { metadata: { name: 'b' }, provisioner: 'x', reclaimPolicy: 'Recycle' },
        { metadata: { name: 'c' }, provisioner: 'x' },
      ),
    });
    assert.deepEqual(
      plan.classProblems.map((p) => p.className),
      ['a', 'b', 'c'],
    );
    assert.match(plan.classProblems[0]?.message ?? '', /StorageClass a not found/u);
    assert.match(plan.classProblems[1]?.message ?? '', /reclaimPolicy Recycle/u);
    assert.match(plan.classProblems[2]?.message ?? '', /cannot read discovery directory \/c/u);
  });
});

describe('name verdicts kept between passes', () => {
  it('property: a pass with the verdicts of earlier passes plans exactly what a pass without them plans', async () => {
    const entryName = fc.constantFrom('disk1', 'disk2', 'nvme-0', 'nvme-1', 'scsi-a', 'sda', 'bad\u0001name', 'x y');
    // One step: the entries present in each class, and which of their PVs exist.
    const step = fc.record({
      fast: fc.uniqueArray(entryName, { maxLength: 6 }),
      block: fc.uniqueArray(entryName, { maxLength: 6 }),
      published: fc.uniqueArray(entryName, { maxLength: 4 }),
    });
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 5 }), async (steps) => {
        const verdicts = new NameVerdicts();
        for (const s of steps) {
          const v = new MemoryVolumes();
          v.addDirectory('/discovery/fast').addDirectory('/discovery/block');
          v.addBlockDevice('/dev/loop7', 64 * 2 ** 20);
          for (const e of s.fast) v.addMount(`/discovery/fast/${e}`, { capacity: 20 * GiB });
          for (const e of s.block) v.addSymlink(`/discovery/block/${e}`, '/dev/loop7');
          const pvs: PersistentVolume[] = s.published.map((e) => ({
            metadata: { name: persistentVolumeName(e, NODE.name, 'fast') },
            spec: { local: { path: `/mnt/fast/${e}` } },
          }));
          const input = {
            config: TWO_CLASSES,
            node: NODE,
            volumes: v,
            persistentVolumes: pvs,
            storageClass: storageClasses(SC_FAST, SC_BLOCK),
          };
          const fresh = await planDiscovery(input);
          const kept = await planDiscovery({ ...input, nameVerdicts: verdicts });
          assert.deepEqual(kept, fresh);
        }
      }),
      { numRuns: 150 },
    );
  });

  it('an idle pass reuses the skips of published entries and names: no new SkippedEntry for them', async () => {
    const verdicts = new NameVerdicts();
    const v = node();
    const published: PersistentVolume[] = [
      {
        metadata: { name: persistentVolumeName('disk1', NODE.name, 'fast') },
        spec: { local: { path: '/mnt/fast/disk1' } },
      },
    ];
    const input = {
      config: TWO_CLASSES,
      node: NODE,
      volumes: v,
      persistentVolumes: published,
      storageClass: storageClasses(SC_FAST, SC_BLOCK),
      nameVerdicts: verdicts,
    };
    const one = await planDiscovery(input);
    const two = await planDiscovery(input);
    const byEntry = (plan: DiscoveryPlan, entry: string) => plan.skipped.find((s) => s.entry === entry);
    assert.equal(byEntry(one, 'disk1')?.reason, 'already-published');
    assert.equal(byEntry(two, 'disk1'), byEntry(one, 'disk1'), 'the same object');
    assert.equal(byEntry(one, 'sda')?.reason, 'name-pattern');
    assert.equal(byEntry(two, 'sda'), byEntry(one, 'sda'), 'the same object');
    // What the node says is read again on every pass: a plain directory's skip is new each time.
    assert.equal(byEntry(one, 'plain')?.reason, 'not-a-mount-point');
    assert.notEqual(byEntry(two, 'plain'), byEntry(one, 'plain'));
    // Unpublished, the entry is planned again at once (the kept skip holds only while its PV exists).
    const three = await planDiscovery({ ...input, persistentVolumes: [] });
    assert.ok(three.create.some((c) => c.entry === 'disk1'));
    assert.equal(byEntry(three, 'disk1'), undefined);
    assert.deepEqual(await planDiscovery(input), one);
  });

  it('a cleanup that ends while the pass runs: the entry is examined in that pass, as before', async () => {
    const v = node();
    let cleaning = true;
    const plan = await planDiscovery({
      config: TWO_CLASSES,
      node: NODE,
      volumes: v,
      persistentVolumes: [],
      storageClass: storageClasses(SC_FAST, SC_BLOCK),
      // The first question about disk1 says "cleaning"; the cleanup ends before its turn comes.
      cleanupInProgress: (name) => {
        if (name !== persistentVolumeName('disk1', NODE.name, 'fast')) return false;
        const answer = cleaning;
        cleaning = false;
        return answer;
      },
    });
    assert.ok(plan.create.some((c) => c.entry === 'disk1'));
  });

  it('starts afresh for another config or node', async () => {
    const verdicts = new NameVerdicts();
    const v = node();
    const input = {
      config: TWO_CLASSES,
      node: NODE,
      volumes: v,
      persistentVolumes: [],
      storageClass: storageClasses(SC_FAST, SC_BLOCK),
    };
    await planDiscovery({ ...input, nameVerdicts: verdicts });
    const other: NodeIdentity = { ...NODE, name: 'node-b' };
    const kept = await planDiscovery({ ...input, node: other, nameVerdicts: verdicts });
    const fresh = await planDiscovery({ ...input, node: other });
    assert.deepEqual(kept, fresh);
    assert.ok(
      kept.create.every(
        (c) => c.persistentVolume.metadata.name !== persistentVolumeName(c.entry, 'node-a', c.className),
      ),
    );
    const narrower = config(
      'storageClassMap:\n  fast:\n    hostDir: /mnt/fast\n    mountDir: /discovery/fast\n    namePattern: "disk*"\n  block:\n    hostDir: /dev/disk/local\n    mountDir: /discovery/block\n    volumeMode: Block\n    namePattern: "nvme-*,scsi-*"\n',
    );
    assert.deepEqual(
      await planDiscovery({ ...input, config: narrower, nameVerdicts: verdicts }),
      await planDiscovery({ ...input, config: narrower }),
    );
  });
});

describe('one disk, one PV (I2)', () => {
  const CLASSES = config(
    'storageClassMap:\n  fast:\n    hostDir: /mnt/fast\n    mountDir: /mnt/fast\n  blk:\n    hostDir: /mnt/blk\n    mountDir: /mnt/blk\n    volumeMode: Block\n',
  );
  const SC = storageClasses(
    { metadata: { name: 'fast' }, provisioner: 'kubernetes.io/no-provisioner' },
    { metadata: { name: 'blk' }, provisioner: 'kubernetes.io/no-provisioner' },
  );
  const UUID_A = '0b1e8c52-0d9c-4c5e-9d65-2f6d3c1f0a01';
  const UUID_C = '0b1e8c52-0d9c-4c5e-9d65-2f6d3c1f0a03';
  function disks(): MemoryVolumes {
    const v = new MemoryVolumes();
    v.addDirectory('/mnt/fast').addDirectory('/mnt/blk');
    v.addMount('/mnt/fast/a', { fsType: 'ext4', uuid: UUID_A, device: '8:1' });
    v.addBindMount('/mnt/fast/a', '/mnt/fast/b');
    v.addMount('/mnt/fast/c', { fsType: 'ext4', uuid: UUID_C, device: '8:3' });
    v.addBlockDevice('/dev/d1', GiB, { serial: 'S1' });
    v.addSymlink('/mnt/blk/x', '/dev/d1').addSymlink('/mnt/blk/y', '/dev/d1');
    // A device with no identity at all: two entries of it are told by the device node.
    v.addBlockDevice('/dev/d2', GiB);
    v.addSymlink('/mnt/blk/p', '/dev/d2').addSymlink('/mnt/blk/q', '/dev/d2');
    return v;
  }
  function recordedOn(name: string, id: string, phase: PersistentVolumePhase): PersistentVolume {
    return {
      metadata: { name, annotations: { [IDENTITY_ANNOTATION]: id } },
      spec: { local: { path: `/mnt/fast/${name}` } },
      status: { phase },
    };
  }

  it('two entries of one disk in a pass (a bind mount, two links): neither is published, each names the other', async () => {
    const plan = await planDiscovery({
      config: CLASSES,
      node: NODE,
      volumes: disks(),
      persistentVolumes: [],
      storageClass: SC,
    });
    assert.deepEqual(
      plan.create.map((c) => c.entry),
      ['c'],
    );
    const conflicts = plan.skipped.filter((x) => x.reason === 'identity-conflict');
    assert.deepEqual(Object.fromEntries(conflicts.map((x) => [x.path, x.otherEntry])), {
      '/mnt/fast/a': '/mnt/fast/b',
      '/mnt/fast/b': '/mnt/fast/a',
      '/mnt/blk/x': '/mnt/blk/y',
      '/mnt/blk/y': '/mnt/blk/x',
      '/mnt/blk/p': '/mnt/blk/q',
      '/mnt/blk/q': '/mnt/blk/p',
    });
    assert.match(conflicts[0]?.message ?? '', /neither is published until one of them is removed/u);
  });

  it('an entry whose disk is recorded on a PV of the node, whatever its phase, is not published and names the PV', async () => {
    for (const phase of ['Available', 'Bound', 'Released', 'Failed'] as const) {
      const holder = recordedOn('old', `fs-uuid:${UUID_C}`, phase);
      const plan = await planDiscovery({
        config: CLASSES,
        node: NODE,
        volumes: disks(),
        persistentVolumes: [holder],
        storageClass: SC,
      });
      assert.equal(
        plan.create.some((c) => c.entry === 'c'),
        false,
        phase,
      );
      const skip = plan.skipped.find((x) => x.entry === 'c');
      assert.equal(skip?.reason, 'identity-conflict', phase);
      assert.equal(skip.persistentVolume, 'old');
      assert.match(skip.message, /is PersistentVolume old's \(published at \/mnt\/fast\/old\)/u);
    }
  });

  it('a legacy loop record (no birth time) holds its disk as well', async () => {
    const v = new MemoryVolumes();
    v.addDirectory('/mnt/blk');
    v.addBlockDevice('/dev/loop3', GiB, { loop: { device: '254:0', inode: 77, birthNs: 5 } });
    v.addSymlink('/mnt/blk/moved', '/dev/loop3');
    const plan = await planDiscovery({
      config: CLASSES,
      node: NODE,
      volumes: v,
      persistentVolumes: [recordedOn('legacy', 'loop:254:0:77', 'Bound')],
      storageClass: SC,
    });
    assert.deepEqual(plan.create, []);
    assert.equal(plan.skipped.find((x) => x.entry === 'moved')?.persistentVolume, 'legacy');
  });
});

describe('a discovery pass examines entries a few at once', () => {
  /** The node with each entry's reads answered after a delay from `delays` (in turns of the event loop). */
  function slowNode(delays: readonly number[]): { volumes: MemoryVolumes; maxInFlight: () => number } {
    const volumes = node();
    // Two entries of one disk: the later one's examination may finish first; the verdict must not change.
    volumes.addSymlink('/discovery/block/nvme-1', '/dev/loop7');
    let inFlight = 0;
    let most = 0;
    let call = 0;
    const entryInfo = volumes.entryInfo.bind(volumes);
    volumes.entryInfo = async (path) => {
      inFlight += 1;
      most = Math.max(most, inFlight);
      const turns = delays[call++ % Math.max(1, delays.length)] ?? 0;
      for (let i = 0; i < turns; i++) await new Promise((resolve) => setImmediate(resolve));
      inFlight -= 1;
      return entryInfo(path);
    };
    return { volumes, maxInFlight: () => most };
  }

  it('whatever order the reads finish in, the plan is the one made reading one entry after the other', async () => {
    const input = {
      config: TWO_CLASSES,
      node: NODE,
      persistentVolumes: [],
      storageClass: storageClasses(SC_FAST, SC_BLOCK),
    };
    const sequential = await planDiscovery({ ...input, volumes: slowNode([0]).volumes });
    assert.ok(
      sequential.skipped.some((s) => s.reason === 'identity-conflict'),
      'the two entries of one disk',
    );
    await fc.assert(
      fc.asyncProperty(fc.array(fc.integer({ min: 0, max: 6 }), { minLength: 1, maxLength: 12 }), async (delays) => {
        const plan = await planDiscovery({ ...input, volumes: slowNode(delays).volumes });
        assert.deepEqual(plan, sequential);
      }),
      { numRuns: 60 },
    );
  });

  it('reads several entries at once, and at most 8', async () => {
    const slow = slowNode([3]);
    for (let i = 0; i < 30; i++)
      slow.volumes.addMount(`/discovery/fast/many-${String(i).padStart(2, '0')}`, { capacity: GiB });
    const plan = await planDiscovery({
      config: TWO_CLASSES,
      node: NODE,
      volumes: slow.volumes,
      persistentVolumes: [],
      storageClass: storageClasses(SC_FAST, SC_BLOCK),
    });
    assert.equal(plan.create.filter((c) => c.entry.startsWith('many-')).length, 30);
    assert.equal(slow.maxInFlight(), 8);
  });
});
