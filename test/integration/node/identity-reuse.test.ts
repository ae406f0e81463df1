/**
 * Invariant I5 on a real node: a loop device detached, its backing file deleted and a new one made
 * under the same name gets the same inode (and, re-attached with `losetup /dev/loopN`, the same
 * loop number) from the kernel; its identity must still differ from the old one. Needs root; every
 * loop device and file is undone by the Cleanup in `after`, also on failure.
 */
import assert from 'node:assert/strict';
import { mkdirSync, renameSync, rmSync, statSync, writeFileSync, type BigIntStats } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it, type TestContext } from 'node:test';

import { LinuxVolumes, decodeDeviceNumber, directoryStamp } from '../../../src/core/node/linux-volumes.js';
import { IDENTITY_ANNOTATION, NODE_UID_ANNOTATION, checkIdentity } from '../../../src/core/pv/identity.js';
import type { PersistentVolume } from '../../../src/core/kube/objects.js';
import { DEVICE_BYTES } from '../../contract/node-volumes-contract.js';
import {
  Cleanup,
  attachLoopDevice,
  detachLoopDevice,
  makeTempDir,
  run,
  skipUnlessRoot,
  type LoopDevice,
} from '../../support/real-node.js';

const skip = skipUnlessRoot();
const NODE = { uid: 'uid-a' };

/** `loop:<M:m>:<inode>`: the device and inode part of a loop identity (the legacy form). */
function numbersOf(stats: BigIntStats): string {
  const { major, minor } = decodeDeviceNumber(stats.dev);
  return `loop:${major}:${minor}:${stats.ino}`;
}

function pvRecording(id: string): PersistentVolume {
  return {
    metadata: { name: 'local-pv-1', annotations: { [IDENTITY_ANNOTATION]: id, [NODE_UID_ANNOTATION]: NODE.uid } },
    spec: { local: { path: '/mnt/fast/disk1' } },
  };
}

function makeSparseFile(path: string, sizeBytes: number): bigint {
  writeFileSync(path, '', { flag: 'wx' });
  run('truncate', ['-s', String(sizeBytes), path]);
  return statSync(path, { bigint: true }).ino;
}

/**
 * Makes a sparse file at path, trying for the inode `wanted` (a deleted file's): ext4 and tmpfs
 * usually hand it back at once; else up to 200 sibling files are made and one with that inode is
 * renamed to path. Returns whether the inode was reused.
 */
function recreateWithInode(dir: string, path: string, sizeBytes: number, wanted: bigint): boolean {
  for (let attempt = 0; attempt < 3; attempt++) {
    if (makeSparseFile(path, sizeBytes) === wanted) return true;
    rmSync(path);
  }
  mkdirSync(join(dir, 'fillers'));
  for (let n = 0; n < 200; n++) {
    const filler = join(dir, 'fillers', String(n));
    if (makeSparseFile(filler, sizeBytes) === wanted) {
      renameSync(filler, path);
      return true;
    }
  }
  makeSparseFile(path, sizeBytes);
  return false;
}

/** Attaches path to loop.path when it is free (`losetup /dev/loopN`), else to any free device. */
function attachAgain(cleanup: Cleanup, loop: LoopDevice, path: string, t: TestContext): LoopDevice {
  const again: LoopDevice = { ...loop, backingFile: path };
  cleanup.defer(`detach ${loop.path} (${path})`, () => {
    detachLoopDevice(again);
  });
  try {
    run('losetup', [loop.path, path]);
    return again;
  } catch {
    // A parallel test file took the device: the inode reuse is still checked.
    t.diagnostic(`${loop.path} was taken by another process; attached elsewhere`);
    const device = run('losetup', ['--find', '--show', path]).trim();
    const name = device.replace(/^\/dev\//, '');
    const other: LoopDevice = { ...loop, path: device, name, backingFile: path };
    cleanup.defer(`detach ${device} (${path})`, () => {
      detachLoopDevice(other);
    });
    return other;
  }
}

describe('I5 on a real node: loop devices and reused numbers', { skip }, () => {
  const cleanup = new Cleanup();
  after(() => {
    cleanup.run();
  });

  it('gives a loop device re-attached to a file made again with the same inode another identity', async (t) => {
    const dir = makeTempDir(cleanup, 'lvp-identity-reuse-');
    const volumes = new LinuxVolumes();
    const file = join(dir, 'backing.img');
    const first = attachLoopDevice(cleanup, file, DEVICE_BYTES);
    const oldStats = statSync(file, { bigint: true });
    const old = await volumes.volumeIdentity(first.path);
    assert.equal(old?.id, `${numbersOf(oldStats)}:${directoryStamp(oldStats).birthNs}`);

    detachLoopDevice(first);
    rmSync(file);
    const reused = recreateWithInode(dir, file, DEVICE_BYTES, oldStats.ino);
    const second = attachAgain(cleanup, first, file, t);
    const newStats = statSync(file, { bigint: true });
    const current = await volumes.volumeIdentity(second.path);
    assert.equal(current?.source, 'loop');
    assert.equal(current.id, `${numbersOf(newStats)}:${directoryStamp(newStats).birthNs}`);
    if (reused) {
      assert.equal(numbersOf(newStats), numbersOf(oldStats), 'the kernel reused the device and inode');
    } else {
      t.diagnostic(`inode ${oldStats.ino} was not handed back: only the weaker property (ids differ) is checked`);
    }
    t.diagnostic(`loop device ${second.path === first.path ? 'reused' : 'not reused'}: ${old.id} -> ${current.id}`);
    if (directoryStamp(newStats).birthNs === 0n) {
      t.skip(`${dir}'s filesystem keeps no birth times: I5 cannot hold there (docs/disk-identity.md)`);
      return;
    }
    assert.notEqual(current.id, old.id, 'a new file is another disk');
    assert.equal(checkIdentity(pvRecording(old.id), current, NODE).kind, 'mismatch', 'the old PV does not match');
    if (reused) {
      const legacy = checkIdentity(pvRecording(numbersOf(oldStats)), current, NODE);
      assert.equal(legacy.kind, 'match', 'a legacy record still matches (I5 open until re-recorded)');
    }
  });

  it('gives birth unknown, matching no recorded birth, when only udev knows the deleted backing file', async () => {
    const dir = makeTempDir(cleanup, 'lvp-identity-deleted-');
    const file = join(dir, 'backing.img');
    const loop = attachLoopDevice(cleanup, file, DEVICE_BYTES);
    const stats = statSync(file, { bigint: true });
    const udev = join(dir, 'udev');
    mkdirSync(join(udev, 'data'), { recursive: true });
    const { major, minor } = decodeDeviceNumber(stats.dev);
    const record = `E:ID_LOOP_BACKING_DEVICE=${major}:${minor}\nE:ID_LOOP_BACKING_INODE=${stats.ino}\n`;
    writeFileSync(join(udev, 'data', `b${loop.major}:${loop.minor}`), record);
    const volumes = new LinuxVolumes({ udevRoot: udev });
    const recorded = await volumes.volumeIdentity(loop.path);
    assert.equal(recorded?.id, `${numbersOf(stats)}:${directoryStamp(stats).birthNs}`, 'udev and the stat agree');
    rmSync(file); // still attached: sysfs names it `… (deleted)`
    const deleted = await volumes.volumeIdentity(loop.path);
    assert.equal(deleted?.id, `${numbersOf(stats)}:unknown`);
    assert.equal(checkIdentity(pvRecording(recorded.id), deleted, NODE).kind, 'mismatch', 'refused, the safe side');
    detachLoopDevice(loop);
  });
});
