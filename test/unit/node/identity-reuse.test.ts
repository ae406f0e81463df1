// Invariant I5: an identity never matches a different disk that reuses freed numbers (a loop
// device's backing file deleted and another created: the kernel hands back the same inode and loop
// number). The birth time tells them apart; legacy records (no birth) keep matching their disk.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, realpathSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';

import type { PersistentVolume } from '../../../src/core/kube/objects.js';
import {
  UNKNOWN_BIRTH,
  devInoValue,
  fsUuidValue,
  loopBackingValue,
  loopValue,
  makeIdentity,
  partitionValue,
} from '../../../src/core/node/identity.js';
import { LinuxVolumes, decodeDeviceNumber, directoryStamp } from '../../../src/core/node/linux-volumes.js';
import { MemoryVolumes } from '../../../src/core/node/memory-volumes.js';
import type { VolumeIdentity } from '../../../src/core/node/volumes.js';
import {
  IDENTITY_ANNOTATION,
  NODE_UID_ANNOTATION,
  checkIdentity,
  hasLegacyIdentity,
  identityMatches,
  legacyIdentityUpgrade,
} from '../../../src/core/pv/identity.js';

const NODE = { uid: 'uid-a' };
const UUID = '0b1e2f3a-4b5c-4d6e-8f90-a1b2c3d4e5f6';

const devices = fc.tuple(fc.nat(4095), fc.nat(1_048_575)).map(([major, minor]) => `${major}:${minor}`);
const inodes = fc.bigInt({ min: 1n, max: 2n ** 64n - 1n });
/** Two birth times, the second later (a file made again after the first was deleted). */
const births = fc
  .tuple(fc.bigInt({ min: 0n, max: 2n ** 62n }), fc.bigInt({ min: 1n, max: 2n ** 40n }))
  .map(([first, later]) => [first, first + later] as const);
const partitions = fc.option(fc.integer({ min: 1, max: 128 }), { nil: undefined });

function loopIdentity(value: string, partition?: number): VolumeIdentity {
  return makeIdentity('loop', partition === undefined ? value : partitionValue(value, partition), '7:0');
}

function pvRecording(id: string, nodeUid = NODE.uid): PersistentVolume {
  return {
    metadata: { name: 'local-pv-1', annotations: { [IDENTITY_ANNOTATION]: id, [NODE_UID_ANNOTATION]: nodeUid } },
    spec: { local: { path: '/mnt/fast/disk1' } },
  };
}

describe('I5: an object made again with the same numbers has another identity', () => {
  it('property: a loop backing file, a directory and a mounted sub-directory with a later birth differ', () => {
    fc.assert(
      fc.property(devices, inodes, births, (device, ino, [first, later]) => {
        assert.notEqual(loopValue(device, ino, later), loopValue(device, ino, first));
        assert.notEqual(devInoValue(device, { ino, birthNs: later }), devInoValue(device, { ino, birthNs: first }));
        assert.notEqual(
          fsUuidValue(UUID, '/sub', { ino, birthNs: later }),
          fsUuidValue(UUID, '/sub', { ino, birthNs: first }),
        );
      }),
    );
  });

  it('property: a loop backing whose birth cannot be read equals none with a birth', () => {
    fc.assert(
      fc.property(devices, inodes, births, (device, ino, [birth]) => {
        assert.equal(loopValue(device, ino, undefined), `${device}:${ino}:${UNKNOWN_BIRTH}`);
        assert.notEqual(loopValue(device, ino, undefined), loopValue(device, ino, birth));
        const recorded = pvRecording(loopIdentity(loopValue(device, ino, birth)).id);
        assert.equal(checkIdentity(recorded, loopIdentity(loopValue(device, ino, undefined)), NODE).kind, 'mismatch');
      }),
    );
  });

  it('property: MemoryVolumes gives a loop device recreated with the same device and inode another identity', async () => {
    await fc.assert(
      fc.asyncProperty(devices, fc.nat(2 ** 40), births, async (device, inode, [first, later]) => {
        const node = new MemoryVolumes();
        node.addBlockDevice('/dev/loop0', 512, { loop: { device, inode } });
        node.addBlockDevice('/dev/loop1', 512, { loop: { device, inode } });
        const [a, b] = [await node.volumeIdentity('/dev/loop0'), await node.volumeIdentity('/dev/loop1')];
        assert.notEqual(a?.id, b?.id, 'two files made with the same numbers by default');
        node.replaceBlockDevice('/dev/loop0', 512, { loop: { device, inode } });
        const recreated = await node.volumeIdentity('/dev/loop0');
        assert.match(recreated?.id ?? '', new RegExp(`^loop:${device}:${inode}:\\d+$`));
        assert.notEqual(recreated?.id, a?.id, 'replaced with no birth given: a recreated file');
        node.replaceBlockDevice('/dev/loop0', 512, { loop: { device, inode, birthNs: first } });
        const atFirst = await node.volumeIdentity('/dev/loop0');
        assert.equal(atFirst?.id, `loop:${loopValue(device, inode, first)}`);
        node.replaceBlockDevice('/dev/loop0', 512, { loop: { device, inode, birthNs: later } });
        assert.notEqual((await node.volumeIdentity('/dev/loop0'))?.id, atFirst.id);
        node.replaceBlockDevice('/dev/loop0', 512, { loop: { device, inode, birthNs: first } });
        assert.deepEqual(await node.volumeIdentity('/dev/loop0'), atFirst, 'the same file: the same identity');
      }),
      { numRuns: 50 },
    );
  });

  it('MemoryVolumes refuses a birth that is not a non-negative integer', () => {
    const node = new MemoryVolumes();
    for (const birthNs of [-1, 0.5, Number.NaN, -1n]) {
      assert.throws(() => node.addBlockDevice('/dev/loop9', 1, { loop: { device: '7:0', inode: 1, birthNs } }), {
        code: 'EINVAL',
      });
    }
  });
});

describe('I5: a loop backing read through udev and through sysfs', () => {
  it('property: udev numbers that agree with the stat give the stat’s id (with its birth); disagreeing ones, none', () => {
    fc.assert(
      fc.property(devices, inodes, births, devices, inodes, (device, ino, [birth], otherDevice, otherIno) => {
        const stat = { device, ino, birthNs: birth };
        const viaSysfs = loopBackingValue(undefined, stat);
        assert.equal(viaSysfs, loopValue(device, ino, birth));
        assert.equal(loopBackingValue({ device, ino }, stat), viaSysfs);
        if (ino <= BigInt(Number.MAX_SAFE_INTEGER))
          assert.equal(loopBackingValue({ device, ino: Number(ino) }, stat), viaSysfs);
        fc.pre(otherDevice !== device || otherIno !== ino);
        assert.equal(loopBackingValue({ device: otherDevice, ino: otherIno }, stat), undefined);
        assert.equal(loopBackingValue({ device, ino }, undefined), loopValue(device, ino, undefined));
        assert.equal(loopBackingValue(undefined, undefined), undefined);
      }),
    );
  });

  describe('LinuxVolumes on a fake sysfs and udev database, with a real backing file', () => {
    let dir = '';
    let sys = '';
    let udev = '';
    let backing = '';
    let expected = '';

    function loopDevice(number: string, backingFile: string): void {
      const path = join(sys, 'devices', 'virtual', 'block', `loop-${number.replace(':', '-')}`);
      mkdirSync(join(path, 'loop'), { recursive: true });
      writeFileSync(join(path, 'dev'), `${number}\n`);
      writeFileSync(join(path, 'loop', 'backing_file'), `${backingFile}\n`);
      symlinkSync(path, join(sys, 'dev', 'block', number));
    }

    function udevRecord(number: string, device: string, ino: bigint): void {
      writeFileSync(
        join(udev, 'data', `b${number}`),
        `E:ID_LOOP_BACKING_DEVICE=${device}\nE:ID_LOOP_BACKING_INODE=${ino}\n`,
      );
    }

    before(() => {
      dir = realpathSync(mkdtempSync(join(tmpdir(), 'lvp-identity-reuse-')));
      sys = join(dir, 'sys');
      udev = join(dir, 'udev');
      mkdirSync(join(sys, 'dev', 'block'), { recursive: true });
      mkdirSync(join(udev, 'data'), { recursive: true });
      backing = join(dir, 'backing.img');
      writeFileSync(backing, '');
      const stats = statSync(backing, { bigint: true });
      const { major, minor } = decodeDeviceNumber(stats.dev);
      expected = `loop:${major}:${minor}:${stats.ino}:${directoryStamp(stats).birthNs}`;
    });
    after(() => {
      rmSync(dir, { recursive: true, force: true });
    });

    it('gives the same id through udev and the stat as through the stat alone, with the birth', async () => {
      const volumes = new LinuxVolumes({ sysRoot: sys, udevRoot: udev, devRoot: join(dir, 'dev') });
      loopDevice('7:10', backing);
      assert.equal((await volumes.blockDeviceIdentity('7:10'))?.id, expected, 'sysfs alone');
      const [, major, minor, ino] = expected.split(':');
      udevRecord('7:10', `${major}:${minor}`, BigInt(ino ?? ''));
      assert.equal((await volumes.blockDeviceIdentity('7:10'))?.id, expected, 'udev and sysfs');
    });

    it('gives birth unknown when only udev knows the file (another mount namespace, or deleted)', async () => {
      const volumes = new LinuxVolumes({ sysRoot: sys, udevRoot: udev, devRoot: join(dir, 'dev') });
      loopDevice('7:11', '/not/in/this/namespace.img');
      udevRecord('7:11', '259:1', 39720268n);
      assert.equal((await volumes.blockDeviceIdentity('7:11'))?.id, 'loop:259:1:39720268:unknown');
      loopDevice('7:12', `${backing} (deleted)`);
      const [, major, minor, ino] = expected.split(':');
      udevRecord('7:12', `${major}:${minor}`, BigInt(ino ?? ''));
      const deleted = await volumes.blockDeviceIdentity('7:12');
      assert.equal(deleted?.id, `loop:${major}:${minor}:${ino}:unknown`);
      const recorded = pvRecording(expected);
      assert.equal(checkIdentity(recorded, deleted, NODE).kind, 'mismatch', 'never taken for the recorded file');
    });
  });
});

describe('legacy loop records (`loop:<M:m>:<inode>`, before births)', () => {
  const birthParts = fc.oneof(fc.bigInt({ min: 0n, max: 2n ** 63n }).map(String), fc.constant(UNKNOWN_BIRTH));

  it('property: match only a current loop id with the same device and inode (and partition), whatever its birth', () => {
    fc.assert(
      fc.property(
        devices,
        inodes,
        partitions,
        devices,
        inodes,
        partitions,
        birthParts,
        (device, ino, partition, currentDevice, currentIno, currentPartition, birth) => {
          const legacy = loopIdentity(`${device}:${ino}`, partition).id;
          const current = loopIdentity(`${currentDevice}:${currentIno}:${birth}`, currentPartition);
          const same = device === currentDevice && ino === currentIno && partition === currentPartition;
          for (const publishedOn of ['uid-a', 'uid-b']) {
            const verdict = checkIdentity(pvRecording(legacy, publishedOn), current, NODE);
            assert.equal(verdict.kind, same ? 'match' : 'mismatch', `${legacy} vs ${current.id}`);
          }
          assert.equal(identityMatches(legacy, current.id), same);
          assert.ok(hasLegacyIdentity(pvRecording(legacy)));
          assert.equal(legacyIdentityUpgrade(pvRecording(legacy), current), same && birth !== UNKNOWN_BIRTH);
        },
      ),
    );
  });

  it('property: a legacy record matches no identity of another source or form', () => {
    fc.assert(
      fc.property(devices, inodes, fc.string(), (device, ino, suffix) => {
        const legacy = pvRecording(`loop:${device}:${ino}`);
        fc.pre(suffix !== '' && !/^:(\d+|unknown)$/.test(suffix));
        const others = [
          makeIdentity('loop', `${device}:${ino}${suffix}`, '7:0'),
          makeIdentity('dev-ino', `${device}:${ino}:0`, device),
          makeIdentity('wwid', `${device}:${ino}`, '8:0'),
        ];
        for (const current of others) {
          const { id } = current;
          assert.equal(checkIdentity(legacy, current, NODE).kind, 'mismatch', id);
          assert.equal(legacyIdentityUpgrade(legacy, current), false, id);
        }
        assert.equal(checkIdentity(legacy, undefined, NODE).kind, 'mismatch');
      }),
    );
  });

  it('property: a record with a birth is never upgraded and matches its own id only', () => {
    fc.assert(
      fc.property(devices, inodes, births, (device, ino, [first, later]) => {
        const recorded = pvRecording(loopIdentity(loopValue(device, ino, first)).id);
        assert.equal(hasLegacyIdentity(recorded), false);
        for (const birth of [later, undefined]) {
          const current = loopIdentity(loopValue(device, ino, birth));
          assert.equal(checkIdentity(recorded, current, NODE).kind, 'mismatch');
          assert.equal(legacyIdentityUpgrade(recorded, current), false);
        }
        assert.equal(checkIdentity(recorded, loopIdentity(loopValue(device, ino, first)), NODE).kind, 'match');
      }),
    );
  });
});
