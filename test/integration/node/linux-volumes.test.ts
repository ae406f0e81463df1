/**
 * LinuxVolumes on a real node: tmpfs mounts, bind mounts, loop devices from sparse files and
 * device nodes, all under a fresh temp dir and all undone in `after` hooks, also on failure.
 * Needs root; skips with a message otherwise.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  mkdirSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';

import { buildGpt } from '../../../src/core/devices/gpt.js';
import { LinuxVolumes, decodeDeviceNumber, directoryStamp } from '../../../src/core/node/linux-volumes.js';
import { NodeVolumeError } from '../../../src/core/node/volume-error.js';
import {
  AWKWARD_NAME,
  DEVICE_BYTES,
  FS_BYTES,
  nodeVolumesContract,
  type NodeVolumesFixture,
} from '../../contract/node-volumes-contract.js';
import {
  Cleanup,
  TEST_TMPFS_SOURCE,
  attachLoopDevice,
  bindMount,
  detachLoopDevice,
  loopBackingFile,
  loopDevicesBackedBy,
  makeBlockDeviceNode,
  makeTempDir,
  mountTable,
  mountTmpfs,
  mountsUnder,
  run,
  skipUnlessRoot,
  unmount,
  writeAt,
  type LoopDevice,
} from '../../support/real-node.js';
import { waitFor } from '../../support/eventually.js';

const skip = skipUnlessRoot();

/** PIDs of this process's findmnt children. */
function findmntChildren(): string[] {
  const r = spawnSync('pgrep', ['-P', String(process.pid), '-x', 'findmnt'], { encoding: 'utf8' });
  return r.stdout.split('\n').filter((l) => l !== '');
}

/** Mounts source (a device) on path, creating path; undone by cleanup while that very mount is there. */
function mountDevice(cleanup: Cleanup, source: string, path: string, fsType: string): void {
  mkdirSync(path, { recursive: true });
  run('mount', ['-t', fsType, source, path]);
  const real = realpathSync(path);
  const entry = mountTable().findLast((m) => m.mountPoint === real);
  if (entry === undefined) throw new Error(`mounting ${source} on ${real} succeeded but it is not in the mount table`);
  cleanup.defer(`unmount ${source} at ${real}`, () => {
    if (mountTable().some((m) => m.mountId === entry.mountId && m.mountPoint === real)) unmount(real);
  });
}

/**
 * Makes an ext4 with uuid on a new loop device over backingFile and mounts it on path. The steps
 * undo in reverse (unmount, then detach); the temp dir's own undo catches whatever they leave.
 */
function mountExt4(cleanup: Cleanup, backingFile: string, path: string, sizeBytes: number, uuid: string): LoopDevice {
  const loop = attachLoopDevice(cleanup, backingFile, sizeBytes);
  // No lazy initialisation: nothing is written in the background once mounted.
  run('mkfs.ext4', ['-q', '-F', '-U', uuid, '-E', 'lazy_itable_init=0,lazy_journal_init=0', loop.path]);
  mountDevice(cleanup, loop.path, path, 'ext4');
  return loop;
}

/**
 * Attaches loop (detached first) to a new sparse backingFile. Throws when another process took
 * the device in between (parallel test files attach loop devices too).
 */
function reattachLoopDevice(cleanup: Cleanup, loop: LoopDevice, backingFile: string, sizeBytes: number): LoopDevice {
  detachLoopDevice(loop);
  writeFileSync(backingFile, '', { flag: 'wx' });
  run('truncate', ['-s', String(sizeBytes), backingFile]);
  const again: LoopDevice = { ...loop, backingFile, sizeBytes };
  cleanup.defer(`detach ${loop.path} (${backingFile})`, () => {
    detachLoopDevice(again);
  });
  run('losetup', [loop.path, backingFile]);
  return again;
}

function realFixture(): Promise<NodeVolumesFixture> {
  const cleanup = new Cleanup();
  try {
    const root = makeTempDir(cleanup, 'lvp-contract-');
    let devices = 0;
    const loops = new Map<string, LoopDevice>();
    return Promise.resolve({
      volumes: new LinuxVolumes(),
      root,
      makeDirectory: (path) => {
        mkdirSync(path, { recursive: true });
        return Promise.resolve();
      },
      mountFilesystem: (path, capacity, options) => {
        if (options?.uuid === undefined) mountTmpfs(cleanup, path, capacity);
        else mountExt4(cleanup, join(root, `.ext4-${++devices}`), path, capacity, options.uuid);
        return Promise.resolve();
      },
      unmount: (path) => {
        unmount(path);
        return Promise.resolve();
      },
      remountFilesystem: (path) => {
        const real = realpathSync(path);
        const top = mountTable().findLast((m) => m.mountPoint === real);
        assert.ok(top?.source.startsWith('/dev/') === true, `a device is mounted on ${real}`);
        unmount(real);
        mountDevice(cleanup, top.source, real, top.fsType);
        return Promise.resolve();
      },
      bindMount: (source, target) => {
        bindMount(cleanup, source, target);
        return Promise.resolve();
      },
      makeBlockDevice: (path, size) => {
        // A loop device over a sparse file, reached through a private device node (so removing
        // the node simulates a vanished disk without touching /dev).
        const loop = attachLoopDevice(cleanup, join(root, `.backing-${++devices}`), size);
        makeBlockDeviceNode(cleanup, path, loop.major, loop.minor);
        loops.set(path, loop);
        return Promise.resolve();
      },
      reattachBlockDevice: (path, size) => {
        const loop = loops.get(path);
        assert.ok(loop !== undefined, `${path} was made by makeBlockDevice`);
        const backing = join(root, `.backing-${++devices}`);
        try {
          loops.set(path, reattachLoopDevice(cleanup, loop, backing, size));
        } catch {
          // Another process took the detached device: another loop device, behind the same node path.
          const next = attachLoopDevice(cleanup, `${backing}-again`, size);
          rmSync(path);
          makeBlockDeviceNode(cleanup, path, next.major, next.minor);
          loops.set(path, next);
        }
        return Promise.resolve();
      },
      makeFile: (path) => {
        writeFileSync(path, '', { flag: 'wx' });
        return Promise.resolve();
      },
      makeSymlink: (path, target) => {
        symlinkSync(target, path);
        return Promise.resolve();
      },
      remove: (path) => {
        rmSync(path, { recursive: true });
        return Promise.resolve();
      },
      dispose: () => {
        cleanup.run();
        return Promise.resolve();
      },
    });
  } catch (error) {
    cleanup.run();
    throw error;
  }
}

nodeVolumesContract('LinuxVolumes on a real node (NodeVolumes contract)', realFixture, { skip });

describe('LinuxVolumes on a real node', { skip }, () => {
  const cleanup = new Cleanup();
  const volumes = new LinuxVolumes();
  let dir = '';

  before(() => {
    dir = makeTempDir(cleanup);
  });
  after(() => {
    cleanup.run();
  });

  it('reports mount-table changes at its directories through one findmnt child, which is gone once the watch is done', async () => {
    const abort = new AbortController();
    let reports = 0;
    const discovery = join(dir, 'discovery dir');
    mkdirSync(discovery);
    const watch = volumes.watchChanges({
      directories: [discovery],
      signal: abort.signal,
      onChange: () => {
        reports++;
      },
    });
    assert.deepEqual(await watch.ready, { ok: true });
    const children = findmntChildren();
    assert.equal(children.length, 1, `one findmnt child: ${children.join(',')}`);
    // A mount elsewhere (kubelet mounting a pod's volumes) is not news for discovery. Unfiltered,
    // findmnt's line arrives within milliseconds; half a second of silence says it was dropped.
    mountTmpfs(cleanup, join(dir, 'elsewhere'), FS_BYTES);
    await delay(500);
    assert.equal(reports, 0, 'a mount outside the directories is not reported');
    mountTmpfs(cleanup, join(discovery, 'disk 1'), FS_BYTES);
    await waitFor(() => reports > 0, 'the mount in the discovery directory reported');
    abort.abort();
    assert.deepEqual(await watch.done, { ok: true });
    assert.deepEqual(findmntChildren(), [], 'the findmnt child was stopped');
  });

  it('reads the mount table again only after findmnt reported a change, any change, while a watch runs', async () => {
    const table = { reads: 0 };
    // Read through a function: the assertions below would otherwise narrow the count to a constant.
    const readsSoFar = (): number => table.reads;
    const counted = new LinuxVolumes({
      readMountTable: (path) => {
        table.reads++;
        return readFileSync(path, 'utf8');
      },
    });
    const mounted = async (path: string): Promise<boolean> =>
      (await counted.mountPoints()).some((m) => m.mountPoint === path);
    await counted.mountPoints();
    await counted.mountPoints();
    assert.equal(table.reads, 2, 'without a watch, every call reads the table');
    const abort = new AbortController();
    const watch = counted.watchChanges({ directories: [dir], signal: abort.signal, onChange: () => undefined });
    assert.deepEqual(await watch.ready, { ok: true });
    await delay(50); // the watch's start is an epoch of its own
    await counted.mountPoints();
    const settled = table.reads;
    for (let i = 0; i < 5; i++) await counted.mountPoints();
    assert.equal(table.reads, settled, 'an unchanged table is answered from memory');
    // A mount outside the watched directories starts no pass, but the table changed.
    const elsewhere = join(dir, 'cached-elsewhere');
    mountTmpfs(cleanup, elsewhere, FS_BYTES);
    await waitFor(() => mounted(elsewhere), 'the new mount in the table read after findmnt reported it');
    assert.ok(readsSoFar() > settled, 'read again after the change');
    abort.abort();
    await watch.done;
    await delay(10);
    const stopped = table.reads;
    await counted.mountPoints();
    await counted.mountPoints();
    assert.equal(table.reads, stopped + 2, 'once the watch ended, every call reads the table again');
  });

  it('answers from memory no longer than the maximum age while a watch runs', async () => {
    const table = { reads: 0 };
    const counted = new LinuxVolumes({
      mountTableMaxAgeMs: 100,
      readMountTable: (path) => {
        table.reads++;
        return readFileSync(path, 'utf8');
      },
    });
    const abort = new AbortController();
    const watch = counted.watchChanges({ directories: [dir], signal: abort.signal, onChange: () => undefined });
    try {
      assert.deepEqual(await watch.ready, { ok: true });
      await delay(50);
      await counted.mountPoints();
      const first = table.reads;
      await counted.mountPoints();
      assert.equal(table.reads, first);
      await delay(150);
      await counted.mountPoints();
      assert.equal(table.reads, first + 1, 'read again after the maximum age');
    } finally {
      abort.abort();
      await watch.done;
    }
  });

  it('says why when findmnt cannot run, so the caller can poll instead', async () => {
    const missing = join(dir, 'no-such-findmnt');
    const watch = new LinuxVolumes({ findmnt: missing }).watchChanges({
      directories: [dir],
      signal: new AbortController().signal,
      onChange: () => undefined,
    });
    const ready = await watch.ready;
    assert.ok(!ready.ok, 'not ready');
    assert.ok(ready.reason.includes(missing) && ready.reason.includes('ENOENT'), ready.reason);
    assert.deepEqual(await watch.done, ready);
  });

  it('reads a 16 MiB tmpfs at a path with a space: exact path, device, source and capacity', async () => {
    const mnt = join(dir, 'disk one');
    const entry = mountTmpfs(cleanup, mnt, FS_BYTES);
    const table = await volumes.mountPoints();
    const ours = table.filter((m) => m.mountPoint === mnt);
    assert.equal(ours.length, 1);
    const [mount] = ours;
    assert.ok(mount !== undefined);
    assert.equal(mount.fsType, 'tmpfs');
    assert.equal(mount.source, TEST_TMPFS_SOURCE);
    assert.equal(mount.root, '/');
    assert.equal(mount.device, entry.device);
    // The mount's device is the one stat reports for files on it.
    const { major, minor } = decodeDeviceNumber(statSync(mnt, { bigint: true }).dev);
    assert.equal(mount.device, `${major}:${minor}`);
    assert.equal(await volumes.filesystemCapacity(mnt), 16 * 1024 * 1024);
  });

  it('shows a bind mount of a subdirectory with the sub-path as root and the same device', async () => {
    const mnt = join(dir, 'bind-src');
    mountTmpfs(cleanup, mnt, FS_BYTES);
    mkdirSync(join(mnt, 'sub dir'));
    const target = join(dir, 'bind target');
    bindMount(cleanup, join(mnt, 'sub dir'), target);
    const table = await volumes.mountPoints();
    const source = table.findLast((m) => m.mountPoint === mnt);
    const bind = table.findLast((m) => m.mountPoint === target);
    assert.ok(source !== undefined && bind !== undefined);
    assert.equal(bind.root, '/sub dir');
    assert.equal(bind.device, source.device);
    assert.equal(bind.fsType, 'tmpfs');
    assert.equal(await volumes.filesystemCapacity(target), FS_BYTES);
    assert.deepEqual(await volumes.listDirectory(target), [], 'the bind target shows the source sub-directory');
    writeFileSync(join(mnt, 'sub dir', 'seen'), '');
    assert.deepEqual(await volumes.listDirectory(target), ['seen']);
  });

  it('decodes a mount point with a newline, a tab, a backslash and non-ASCII characters', async () => {
    const mnt = join(dir, AWKWARD_NAME);
    mountTmpfs(cleanup, mnt, FS_BYTES);
    assert.ok((await volumes.mountPoints()).some((m) => m.mountPoint === mnt));
    assert.equal(await volumes.filesystemCapacity(mnt), FS_BYTES);
  });

  it('sizes a loop device through a symlink to /dev/loopN from sysfs (64 MiB), without spawning', async () => {
    const loop = attachLoopDevice(cleanup, join(dir, 'backing-64m'), DEVICE_BYTES);
    const link = join(dir, 'ssd-link');
    symlinkSync(loop.path, link);
    assert.deepEqual(await volumes.entryInfo(link), { kind: 'block-device', isSymlink: true, realPath: loop.path });
    assert.equal(await volumes.blockDeviceCapacity(link), 64 * 1024 * 1024);
    assert.equal(await volumes.blockDeviceCapacity(loop.path), DEVICE_BYTES);
  });

  it('reads a detached loop device as size 0 (sysfs keeps the node, with no backing file)', async (t) => {
    const loop = attachLoopDevice(cleanup, join(dir, 'backing-detach'), DEVICE_BYTES);
    assert.equal(await volumes.blockDeviceCapacity(loop.path), DEVICE_BYTES);
    detachLoopDevice(loop);
    assert.deepEqual(loopDevicesBackedBy(loop.backingFile), []);
    // /dev/loopN stays (it belongs to the loop driver), so the entry is still a block device.
    assert.equal((await volumes.entryInfo(loop.path)).kind, 'block-device');
    // Another process (a parallel test file) may attach the free device at any moment; only a
    // reading taken while it stayed detached says anything.
    const before = loopBackingFile(loop.name);
    const size = await volumes.blockDeviceCapacity(loop.path);
    if (before === undefined && loopBackingFile(loop.name) === undefined) {
      assert.equal(size, 0);
    } else {
      t.diagnostic(`${loop.path} was re-attached by another process; size check skipped`);
    }
  });

  it('names both the device and the sysfs file when sysfs has no size for the device', async () => {
    const loop = attachLoopDevice(cleanup, join(dir, 'backing-nosys'), DEVICE_BYTES);
    const fakeSys = join(dir, 'fake-sys');
    mkdirSync(fakeSys);
    const withoutSysfs = new LinuxVolumes({ sysRoot: fakeSys });
    await assert.rejects(withoutSysfs.blockDeviceCapacity(loop.path), (error) => {
      assert.ok(error instanceof NodeVolumeError);
      assert.equal(error.code, 'ENOENT');
      assert.equal(error.path, loop.path);
      assert.ok(error.message.includes(join(fakeSys, 'dev', 'block', `${loop.major}:${loop.minor}`, 'size')));
      return true;
    });
    // A fake sysfs answers instead of the real one: the size file is all that is read.
    mkdirSync(join(fakeSys, 'dev', 'block', `${loop.major}:${loop.minor}`), { recursive: true });
    writeFileSync(join(fakeSys, 'dev', 'block', `${loop.major}:${loop.minor}`, 'size'), '3\n');
    assert.equal(await withoutSysfs.blockDeviceCapacity(loop.path), 3 * 512);
  });

  it("reads an ext4 mount's UUID from its superblock without udev, and prefers udev's ID_FS_UUID when there is a record", async () => {
    const uuid = '7d1c2b3a-4e5f-4a6b-9c8d-0e1f2a3b4c5d';
    const mnt = join(dir, 'ext4 for udev');
    const loop = mountExt4(cleanup, join(dir, 'backing-ext4-udev'), mnt, FS_BYTES, uuid);
    const udev = join(dir, 'fake-udev');
    mkdirSync(join(udev, 'data'), { recursive: true });
    const withUdev = new LinuxVolumes({ udevRoot: udev });
    assert.deepEqual(await withUdev.volumeIdentity(mnt), {
      id: `fs-uuid:${uuid}`,
      source: 'fs-uuid',
      device: `${loop.major}:${loop.minor}`,
    });
    writeFileSync(
      join(udev, 'data', `b${loop.major}:${loop.minor}`),
      'E:ID_FS_TYPE=ext4\nE:ID_FS_UUID=C0FFEE00-1111-4222-8333-444455556666\n',
    );
    assert.equal((await withUdev.volumeIdentity(mnt))?.id, 'fs-uuid:c0ffee00-1111-4222-8333-444455556666');
  });

  it('reads no superblock from a /dev node that is not the device sysfs names (a /dev of another node)', async () => {
    const mnt = join(dir, 'ext4 with a foreign dev');
    const loop = mountExt4(
      cleanup,
      join(dir, 'backing-ext4-dev'),
      mnt,
      FS_BYTES,
      '9a8b7c6d-5e4f-4321-8fed-cba987654321',
    );
    const fakeDev = join(dir, 'fake-dev');
    mkdirSync(fakeDev);
    // A regular file with another ext4, where loopN should be.
    const made = spawnSync('mkfs.ext4', [
      '-q',
      '-F',
      '-U',
      '11111111-2222-4333-8444-555555555555',
      join(fakeDev, loop.name),
      '8M',
    ]);
    assert.equal(made.status, 0, String(made.stderr));
    const volumes = new LinuxVolumes({ devRoot: fakeDev, udevRoot: join(dir, 'no-udev') });
    const identity = await volumes.volumeIdentity(mnt);
    assert.equal(identity?.source, 'dev-ino');
    assert.equal(identity.device, `${loop.major}:${loop.minor}`);
  });

  it('names a block device by its first /dev/disk/by-id link, sorted, and takes a loop backing from udev only when it agrees', async () => {
    const loop = attachLoopDevice(cleanup, join(dir, 'backing-by-id'), DEVICE_BYTES);
    const fakeDev = join(dir, 'fake-dev-by-id');
    mkdirSync(join(fakeDev, 'disk', 'by-id'), { recursive: true });
    symlinkSync(loop.path, join(fakeDev, 'disk', 'by-id', 'wwn-0x5000'));
    symlinkSync(loop.path, join(fakeDev, 'disk', 'by-id', 'scsi-0QEMU'));
    symlinkSync('/dev/null', join(fakeDev, 'disk', 'by-id', 'a-character-device'));
    symlinkSync(join(dir, 'nowhere'), join(fakeDev, 'disk', 'by-id', 'a-dangling-link'));
    const udev = join(dir, 'fake-udev-loop');
    mkdirSync(join(udev, 'data'), { recursive: true });
    const volumes = new LinuxVolumes({ devRoot: fakeDev, udevRoot: udev });
    const backing = statSync(loop.backingFile, { bigint: true });
    const { major, minor } = decodeDeviceNumber(backing.dev);
    const expected = {
      id: `loop:${major}:${minor}:${backing.ino}:${directoryStamp(backing).birthNs}`,
      source: 'loop',
      device: `${loop.major}:${loop.minor}`,
      byId: 'scsi-0QEMU',
    };
    assert.deepEqual(await volumes.volumeIdentity(loop.path), expected);
    const record = join(udev, 'data', `b${loop.major}:${loop.minor}`);
    writeFileSync(record, `E:ID_LOOP_BACKING_DEVICE=${major}:${minor}\nE:ID_LOOP_BACKING_INODE=${backing.ino}\n`);
    assert.deepEqual(await volumes.volumeIdentity(loop.path), expected);
    writeFileSync(record, `E:ID_LOOP_BACKING_DEVICE=${major}:${minor}\nE:ID_LOOP_BACKING_INODE=${backing.ino + 1n}\n`);
    assert.equal(
      await volumes.volumeIdentity(loop.path),
      undefined,
      'udev and the kernel disagree: neither is trusted',
    );
  });

  it('has no identity for a detached loop device', async (t) => {
    const loop = attachLoopDevice(cleanup, join(dir, 'backing-detached-identity'), DEVICE_BYTES);
    assert.equal((await volumes.volumeIdentity(loop.path))?.source, 'loop');
    detachLoopDevice(loop);
    const identity = await volumes.volumeIdentity(loop.path);
    // As above: a parallel test file may attach the free device at any moment.
    if (loopBackingFile(loop.name) === undefined) assert.equal(identity, undefined);
    else t.diagnostic(`${loop.path} was re-attached by another process; check skipped`);
  });

  it('leaves nothing mounted under its temp dir once cleaned up (self-check of the helpers)', () => {
    const local = new Cleanup();
    const scratch = makeTempDir(local);
    mountTmpfs(local, join(scratch, 'a'), FS_BYTES);
    mountTmpfs(local, join(scratch, 'a', 'nested'), FS_BYTES);
    bindMount(local, join(scratch, 'a'), join(scratch, 'b'));
    attachLoopDevice(local, join(scratch, 'backing'), DEVICE_BYTES);
    assert.equal(mountsUnder(scratch).length, 3);
    local.run();
    assert.deepEqual(mountsUnder(scratch), []);
    assert.deepEqual(loopDevicesBackedBy(scratch), []);
    assert.throws(() => statSync(scratch), { code: 'ENOENT' });
    assert.equal(local.pending, 0);
  });

  it('detaches a loop device the kubelet stacked on a test loop device (through a bind mount since gone) first', () => {
    const local = new Cleanup();
    const scratch = makeTempDir(local);
    const loop = attachLoopDevice(local, join(scratch, 'backing'), DEVICE_BYTES);
    // what kubelet does for a Block volume: bind the device node to a file, loop it, and (stopped
    // by force) leave the loop behind with its bind mount gone: sysfs then shows only "/"
    const bound = join(scratch, 'device-bind');
    writeFileSync(bound, '');
    run('mount', ['--bind', loop.path, bound]);
    let stacked: string;
    try {
      stacked = run('losetup', ['--find', '--show', bound])
        .trim()
        .replace(/^\/dev\//, '');
    } finally {
      run('umount', ['-l', bound]);
    }
    const backing = loopBackingFile(stacked);
    try {
      assert.notEqual(backing, undefined);
      local.run();
      assert.deepEqual(loopDevicesBackedBy(scratch), []);
      assert.equal(loopBackingFile(stacked), undefined, `${stacked} (stacked on ${loop.path}) detached too`);
    } finally {
      if (loopBackingFile(stacked) === backing && backing !== undefined) run('losetup', ['-d', `/dev/${stacked}`]);
    }
  });

  it('leaves no partition behind: those partx added (as the carver does) are deleted before the detach', () => {
    const local = new Cleanup();
    const scratch = makeTempDir(local);
    const loop = attachLoopDevice(local, join(scratch, 'backing'), 64 * 2 ** 20);
    const image = buildGpt({ sizeBytes: 64 * 2 ** 20, partitions: 2 });
    writeAt(loop.path, image.primary.offset, Buffer.from(image.primary.bytes));
    writeAt(loop.path, image.backup.offset, Buffer.from(image.backup.bytes));
    const listed = (): string[] =>
      readdirSync(`/sys/block/${loop.name}`).filter((entry) => entry.startsWith(`${loop.name}p`));
    try {
      run('partx', ['-a', loop.path]);
      assert.deepEqual(listed().sort(), [`${loop.name}p1`, `${loop.name}p2`], 'partx added them');
    } finally {
      local.run();
    }
    assert.deepEqual(listed(), [], `no partition of ${loop.name} left for its next user`);
  });
});
