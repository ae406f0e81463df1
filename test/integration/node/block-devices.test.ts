/**
 * LinuxBlockDevices on a real node: loop devices over sparse files in a fresh temp dir, made into
 * ext4 and swap by the real tools and compared with blkid and wipefs, hand-written magic for the
 * formats whose tools are not installed (GPT, MBR, LVM2, XFS), a real mount. Everything is undone
 * in `after` hooks, also on failure. Needs root; skips with a message otherwise.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, realpathSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';

import type { DeviceFacts, Signature } from '../../../src/core/devices/model.js';
import { LinuxBlockDevices, type DevicesOptions } from '../../../src/core/node/block-devices.js';
import {
  Cleanup,
  attachLoopDevice,
  detachLoopDevice,
  makeTempDir,
  mountTable,
  run,
  skipUnlessRoot,
  unmount,
  writeAt,
  type LoopDevice,
} from '../../support/real-node.js';

const skip = skipUnlessRoot();
const MiB = 1024 * 1024;
const DEVICE_BYTES = 16 * MiB;

const inventory = new LinuxBlockDevices();

/** The facts of one loop device from a full inventory of the node (other devices are probed too). */
async function factsOf(loop: LoopDevice, options: DevicesOptions = {}): Promise<DeviceFacts> {
  const device = (await inventory.devices(options)).find((d) => d.name === loop.name);
  assert.ok(device !== undefined, `${loop.name} is listed`);
  return device;
}

async function signaturesOf(loop: LoopDevice): Promise<readonly Signature[]> {
  return (await factsOf(loop)).signatures;
}

/** TYPE from `blkid -p -o export` (low-level probe, no cache); undefined when blkid finds nothing. */
function blkidType(device: string): string | undefined {
  const probe = spawnSync('blkid', ['-p', '-o', 'export', device], { encoding: 'utf8' });
  if (probe.status === 2) return undefined; // nothing found
  assert.equal(probe.status, 0, `blkid -p ${device}: ${probe.stderr}`);
  return /^TYPE=(.*)$/m.exec(probe.stdout)?.[1];
}

/** The signatures `wipefs` lists (it only lists without -a), as type and offset. */
function wipefsSignatures(device: string): Signature[] {
  const text = run('wipefs', ['--json', device]).trim();
  if (text === '') return [];
  const listed = JSON.parse(text) as { signatures: { type: string; offset: string }[] };
  return listed.signatures.map((s) => ({ type: s.type, offset: Number.parseInt(s.offset, 16) }));
}

/** Zeroes both probe windows of a device, through the device (the page cache stays coherent). */
function zeroWindows(loop: LoopDevice): void {
  writeAt(loop.path, 0, Buffer.alloc(MiB));
  writeAt(loop.path, loop.sizeBytes - MiB, Buffer.alloc(MiB));
}

/** Mounts source on path, creating path; undone by cleanup while that very mount is there. */
function mountDevice(cleanup: Cleanup, source: string, path: string, fsType: string): string {
  mkdirSync(path, { recursive: true });
  run('mount', ['-t', fsType, source, path]);
  const real = realpathSync(path);
  const entry = mountTable().findLast((m) => m.mountPoint === real);
  if (entry === undefined) throw new Error(`mounting ${source} on ${real} succeeded but it is not in the mount table`);
  cleanup.defer(`unmount ${source} at ${real}`, () => {
    if (mountTable().some((m) => m.mountId === entry.mountId && m.mountPoint === real)) unmount(real);
  });
  return real;
}

describe('LinuxBlockDevices on real loop devices', { skip }, () => {
  const cleanup = new Cleanup();
  let dir = '';
  let files = 0;
  const attach = (): LoopDevice => attachLoopDevice(cleanup, join(dir, `backing-${++files}`), DEVICE_BYTES);

  before(() => {
    dir = makeTempDir(cleanup, 'lvp-blockdev-');
  });
  after(() => {
    cleanup.run();
  });

  it('reads a blank loop device: type loop, its number and size, no signatures, no users', async () => {
    const loop = attach();
    const facts = await factsOf(loop);
    assert.equal(facts.type, 'loop');
    assert.equal(facts.devicePath, loop.path);
    assert.equal(facts.majorMinor, `${loop.major}:${loop.minor}`);
    assert.equal(facts.sizeBytes, DEVICE_BYTES);
    assert.equal(facts.readOnly, false);
    assert.deepEqual(facts.signatures, []);
    assert.deepEqual([facts.partitions, facts.holders, facts.mountPoints], [[], [], []]);
    assert.equal(facts.swapActive, false);
  });

  it('sees mkfs.ext4, then mkswap, as blkid and wipefs do; after wipefs -a only leftovers (data), after zeroing nothing', async () => {
    const loop = attach();
    run('mkfs.ext4', ['-q', '-F', loop.path]);
    assert.deepEqual(await signaturesOf(loop), [{ type: 'ext4', offset: 1080 }]);
    assert.equal(blkidType(loop.path), 'ext4');
    assert.deepEqual(wipefsSignatures(loop.path), [{ type: 'ext4', offset: 1080 }]);

    run('mkswap', [loop.path]);
    assert.deepEqual(await signaturesOf(loop), [{ type: 'swap', offset: 4086 }]);
    assert.equal(blkidType(loop.path), 'swap');
    assert.deepEqual(wipefsSignatures(loop.path), [{ type: 'swap', offset: 4086 }]);

    run('wipefs', ['-a', loop.path]);
    assert.equal(blkidType(loop.path), undefined, 'blkid finds nothing');
    // wipefs erases magic strings only: the rest of the swap header (at 1 KiB) is still there.
    assert.deepEqual(await signaturesOf(loop), [{ type: 'data', offset: 1024 }]);

    zeroWindows(loop);
    assert.deepEqual(await signaturesOf(loop), [], 'blank again');
  });

  it('finds hand-written MBR, GPT (both headers), LVM2 and XFS magic', async () => {
    const loop = attach();
    const size = loop.sizeBytes;
    writeAt(loop.path, 446 + 4, Buffer.from([0xee]));
    writeAt(loop.path, 510, Buffer.from([0x55, 0xaa]));
    assert.deepEqual(await signaturesOf(loop), [{ type: 'dos', offset: 510 }]);
    writeAt(loop.path, 512, Buffer.from('EFI PART', 'latin1'));
    writeAt(loop.path, size - 512, Buffer.from('EFI PART', 'latin1'));
    assert.deepEqual(await signaturesOf(loop), [
      { type: 'dos', offset: 510 },
      { type: 'gpt', offset: 512 },
      { type: 'gpt-backup', offset: size - 512 },
    ]);

    zeroWindows(loop);
    writeAt(loop.path, 512, Buffer.from('LABELONE', 'latin1'));
    writeAt(loop.path, 536, Buffer.from('LVM2 001', 'latin1'));
    assert.deepEqual(await signaturesOf(loop), [{ type: 'LVM2_member', offset: 536 }]);

    zeroWindows(loop);
    writeAt(loop.path, 0, Buffer.from('XFSB', 'latin1'));
    assert.deepEqual(await signaturesOf(loop), [{ type: 'xfs', offset: 0 }]);
  });

  it('shows the mount point of a mounted loop device, and none once unmounted', async () => {
    const loop = attach();
    run('mkfs.ext4', ['-q', '-F', loop.path]);
    const mountPoint = mountDevice(cleanup, loop.path, join(dir, 'mount point'), 'ext4');
    assert.deepEqual((await factsOf(loop)).mountPoints, [mountPoint]);
    unmount(mountPoint);
    assert.deepEqual((await factsOf(loop)).mountPoints, []);
  });

  it('reuses signatures only for the same medium: a write through the device is not seen, a re-attached file is', async (t) => {
    const loop = attach();
    const first = await inventory.devices();
    writeAt(loop.path, 0, Buffer.from('XFSB', 'latin1'));
    const reused = await inventory.devices({ previous: first });
    assert.deepEqual(
      reused.find((d) => d.name === loop.name)?.signatures,
      [],
      'unchanged device: the earlier answer is reused',
    );
    // The same loop device over another file of the same size: same name, number and size.
    detachLoopDevice(loop);
    const backing = join(dir, `backing-${++files}`);
    writeFileSync(backing, '', { flag: 'wx' });
    run('truncate', ['-s', String(DEVICE_BYTES), backing]);
    writeAt(backing, 1080, Buffer.from([0x53, 0xef]));
    try {
      run('losetup', [loop.path, backing]);
    } catch {
      t.diagnostic(`${loop.path} was taken by another process once detached; re-attach check skipped`);
      return;
    }
    cleanup.defer(`detach ${loop.path} (${backing})`, () => {
      detachLoopDevice({ ...loop, backingFile: backing });
    });
    const reattached = await factsOf(loop, { previous: reused });
    assert.deepEqual(reattached.signatures, [{ type: 'ext4', offset: 1080 }], 'a new diskseq: probed again');
  });

  it('changes its stamp when a loop device is attached, resized or detached', async () => {
    const stamp = await inventory.changeStamp();
    const loop = attach();
    const attached = await inventory.changeStamp();
    assert.notEqual(attached, stamp, 'attached');
    run('truncate', ['-s', String(2 * DEVICE_BYTES), loop.backingFile]);
    run('losetup', ['--set-capacity', loop.path]);
    const resized = await inventory.changeStamp();
    assert.notEqual(resized, attached, 'resized (/proc/partitions)');
    detachLoopDevice(loop);
    assert.notEqual(await inventory.changeStamp(), resized, 'detached: size 0, out of /proc/partitions');
  });

  it('answers the same facts on an idle pass as on a fresh read, and reads the read-only flag again', async () => {
    const loop = attach();
    const fresh = await inventory.devices();
    const idle = await inventory.devices({ previous: fresh });
    const facts = (devices: readonly DeviceFacts[]): DeviceFacts | undefined =>
      devices.find((d) => d.name === loop.name);
    assert.deepEqual(facts(idle), facts(fresh));
    run('blockdev', ['--setro', loop.path]);
    cleanup.defer(`blockdev --setrw ${loop.path}`, () => {
      run('blockdev', ['--setrw', loop.path]);
    });
    assert.equal(facts(await inventory.devices({ previous: idle }))?.readOnly, true);
  });
});
