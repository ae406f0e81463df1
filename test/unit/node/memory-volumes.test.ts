import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { MemoryVolumes } from '../../../src/core/node/memory-volumes.js';
import { parseMountInfo } from '../../../src/core/node/mountinfo.js';
import { NodeVolumeError } from '../../../src/core/node/volume-error.js';
import { asError } from '../../../src/core/unknown-values.js';
import { nodeVolumesContract, type NodeVolumesFixture } from '../../contract/node-volumes-contract.js';

/** Adapts a synchronous mutation to the fixture's promise-returning shape (throwing → rejecting). */
function promised<A extends unknown[]>(mutate: (...args: A) => unknown): (...args: A) => Promise<void> {
  return (...args) => {
    try {
      mutate(...args);
      return Promise.resolve();
    } catch (error) {
      return Promise.reject(asError(error));
    }
  };
}

function memoryFixture(): Promise<NodeVolumesFixture> {
  const volumes = new MemoryVolumes();
  const root = '/tmp/lvp-contract';
  volumes.addDirectory(root);
  // Loop devices as the Linux fixture makes them: each over a new backing file on the root filesystem.
  let backingFiles = 0;
  const freshBacking = () => ({ loop: { device: '254:0', inode: 1000 + ++backingFiles } });
  return Promise.resolve({
    volumes,
    root,
    makeDirectory: promised((path: string) => volumes.addDirectory(path)),
    mountFilesystem: promised((path: string, capacity: number, options?: { readonly uuid?: string }) =>
      options?.uuid === undefined
        ? volumes.addMount(path, { fsType: 'tmpfs', source: 'lvp-test', capacity })
        : volumes.addMount(path, { fsType: 'ext4', source: '/dev/loop', capacity, uuid: options.uuid }),
    ),
    unmount: promised((path: string) => volumes.removeMount(path)),
    remountFilesystem: async (path: string) => {
      const real = (await volumes.entryInfo(path)).realPath;
      const top = (await volumes.mountPoints()).findLast((m) => m.mountPoint === real);
      assert.ok(top !== undefined, `${path} is mounted`);
      volumes.removeMount(path);
      // The same device: the same filesystem, its UUID and capacity kept.
      volumes.addMount(path, { fsType: top.fsType, source: top.source, device: top.device, root: top.root });
    },
    bindMount: promised((source: string, target: string) => volumes.addBindMount(source, target)),
    makeBlockDevice: promised((path: string, size: number) => volumes.addBlockDevice(path, size, freshBacking())),
    reattachBlockDevice: promised((path: string, size: number) =>
      volumes.replaceBlockDevice(path, size, freshBacking()),
    ),
    makeFile: promised((path: string) => volumes.addFile(path)),
    makeSymlink: promised((path: string, target: string) => volumes.addSymlink(path, target)),
    remove: promised((path: string) => volumes.remove(path)),
    dispose: () => Promise.resolve(),
  });
}

nodeVolumesContract('MemoryVolumes (NodeVolumes contract)', memoryFixture);

describe('MemoryVolumes specifics', () => {
  it('shares capacity between a filesystem and its bind mounts, with the root as a sub-path', async () => {
    const node = new MemoryVolumes({ defaultCapacity: 1000 });
    node.addMount('/mnt/disks/a', { capacity: 4096, device: '0:50' }).addDirectory('/mnt/disks/a/sub');
    node.addBindMount('/mnt/disks/a/sub', '/bind');
    const bind = (await node.mountPoints()).find((m) => m.mountPoint === '/bind');
    assert.deepEqual(bind, { mountPoint: '/bind', root: '/sub', fsType: 'tmpfs', source: 'tmpfs', device: '0:50' });
    assert.equal(await node.filesystemCapacity('/bind'), 4096);
    node.setCapacity('/bind', 8192);
    assert.equal(await node.filesystemCapacity('/mnt/disks/a'), 8192);
    assert.equal(await node.filesystemCapacity('/mnt'), 1000, 'the root filesystem');
  });

  it('bind-mounts a directory of the root filesystem with its full path as root', async () => {
    const node = new MemoryVolumes();
    node.addDirectory('/data/x');
    node.addBindMount('/data/x', '/mnt/x');
    const bind = (await node.mountPoints()).at(-1);
    assert.equal(bind?.root, '/data/x');
    assert.equal(bind.device, '254:0');
  });

  it('resizes block devices and rejects bad sizes', async () => {
    const node = new MemoryVolumes();
    node.addBlockDevice('/dev/sdb', 512).addSymlink('/dev/disk/by-id/b', '/dev/sdb');
    node.setBlockDeviceSize('/dev/disk/by-id/b', 2048);
    assert.equal(await node.blockDeviceCapacity('/dev/sdb'), 2048);
    assert.throws(() => node.addBlockDevice('/dev/sdc', -1), NodeVolumeError);
    assert.throws(() => node.addBlockDevice('/dev/sdd', 1.5), NodeVolumeError);
  });

  it('refuses to remove a mount point or a directory holding one (EBUSY), and unmounting an unmounted path (EINVAL)', () => {
    const node = new MemoryVolumes();
    node.addMount('/mnt/disks/a');
    assert.throws(() => node.remove('/mnt/disks/a'), { code: 'EBUSY' });
    assert.throws(() => node.remove('/mnt'), { code: 'EBUSY' });
    node.removeMount('/mnt/disks/a');
    assert.throws(() => node.removeMount('/mnt/disks/a'), { code: 'EINVAL' });
    node.remove('/mnt');
    assert.throws(() => node.remove('/mnt'), { code: 'ENOENT' });
  });

  it('rejects creating over an existing entry (EEXIST) and under a file (ENOTDIR)', () => {
    const node = new MemoryVolumes();
    node.addFile('/f');
    assert.throws(() => node.addFile('/f'), { code: 'EEXIST' });
    assert.throws(() => node.addDirectory('/f/x'), { code: 'ENOTDIR' });
    node.addDirectory('/d').addDirectory('/d');
  });

  it('only takes absolute paths', async () => {
    const node = new MemoryVolumes();
    await assert.rejects(node.listDirectory('relative'), { code: 'EINVAL' });
    assert.throws(() => node.addDirectory('relative'), { code: 'EINVAL' });
  });

  it('treats a trailing slash on a file as ENOTDIR and follows a final symlink before it', async () => {
    const node = new MemoryVolumes();
    node.addFile('/f').addDirectory('/d').addSymlink('/l', '/d');
    assert.deepEqual(await node.entryInfo('/f/'), { kind: 'missing', isSymlink: false });
    assert.deepEqual(await node.entryInfo('/l/'), { kind: 'directory', isSymlink: false, realPath: '/d' });
  });

  it('answers capacity from the mount on top: a later mount on an ancestor shadows a deeper one', async () => {
    const node = new MemoryVolumes();
    node.addMount('/a/b', { capacity: 1 });
    assert.equal(await node.filesystemCapacity('/a/b'), 1);
    node.addMount('/a', { capacity: 2 });
    assert.equal(await node.filesystemCapacity('/a/b'), 2);
    node.addMount('/a/b', { capacity: 3 });
    assert.equal(await node.filesystemCapacity('/a/b'), 3);
    assert.equal(await node.filesystemCapacity('/a'), 2);
  });

  it('can start without a root mount', async () => {
    const node = new MemoryVolumes({ rootMount: false });
    node.addDirectory('/x');
    assert.deepEqual(await node.mountPoints(), []);
    await assert.rejects(node.filesystemCapacity('/x'), { code: 'ENOENT' });
  });

  it('renders its mount table as mountinfo that parses back to the same table', async () => {
    const node = new MemoryVolumes();
    node.addMount('/mnt/disks/with space\nand newline', { capacity: 1 });
    node.addMount('/mnt/disks/with space\nand newline/inner', { fsType: 'ext4', source: '/dev/sdb 1' });
    const parsed = parseMountInfo(node.mountInfoText());
    assert.deepEqual(
      parsed.map(({ mountPoint, root, fsType, source, device }) => ({ mountPoint, root, fsType, source, device })),
      await node.mountPoints(),
    );
    assert.deepEqual(
      parsed.map((m) => [m.mountId, m.parentId]),
      [
        [21, 1],
        [22, 21],
        [23, 22],
      ],
    );
  });

  it('gives a block device the identity it was made with: wwid, else serial, else loop; none without', async () => {
    const node = new MemoryVolumes();
    node.addBlockDevice('/dev/sda', 512, { device: '8:0', wwid: ' naa.5000c500a1b2c3d4\n', serial: 'S1' });
    node.addBlockDevice('/dev/vda', 512, { device: '254:16', serial: 'QEMU HARDDISK  QM1' });
    node.addBlockDevice('/dev/loop3', 512, {
      loop: { device: '259:1', inode: 39720268, birthNs: 1764670032602085091n },
    });
    node.addBlockDevice('/dev/sdz', 512);
    assert.deepEqual(await node.volumeIdentity('/dev/sda'), {
      id: 'wwid:naa.5000c500a1b2c3d4',
      source: 'wwid',
      device: '8:0',
    });
    assert.equal(
      (await node.volumeIdentity('/dev/vda'))?.id,
      'serial:QEMU_HARDDISK_QM1',
      'blanks as _, as sysfs reads',
    );
    assert.equal((await node.volumeIdentity('/dev/loop3'))?.id, 'loop:259:1:39720268:1764670032602085091');
    assert.equal(await node.volumeIdentity('/dev/sdz'), undefined);
    assert.throws(() => node.addBlockDevice('/dev/sdy', 1, { wwid: ' ' }), { code: 'EINVAL' });
    assert.throws(() => node.addBlockDevice('/dev/sdy', 1, { serial: 'a\u0000b' }), { code: 'EINVAL' });
    assert.throws(() => node.addBlockDevice('/dev/sdy', 1, { loop: { device: '259', inode: 1 } }), { code: 'EINVAL' });
    assert.throws(() => node.addBlockDevice('/dev/sdy', 1, { loop: { device: '7:0', inode: -1 } }), { code: 'EINVAL' });
    assert.throws(() => node.addBlockDevice('/dev/sdy', 1, { device: 'sdy' }), { code: 'EINVAL' });
  });

  it('names a block device by the first /dev/disk/by-id link (sorted) that leads to it', async () => {
    const node = new MemoryVolumes();
    node.addBlockDevice('/dev/sdb', 512, { device: '8:16', wwid: 'naa.1' });
    node.addSymlink('/dev/disk/by-id/wwn-0x1', '../../sdb');
    node.addSymlink('/dev/disk/by-id/scsi-1', '/dev/sdb');
    node.addSymlink('/dev/disk/by-id/dangling', '/dev/nowhere');
    node.addSymlink('/mnt/disks/ssd1', '/dev/disk/by-id/wwn-0x1');
    assert.deepEqual(await node.volumeIdentity('/mnt/disks/ssd1'), {
      id: 'wwid:naa.1',
      source: 'wwid',
      device: '8:16',
      byId: 'scsi-1',
    });
  });

  it('swaps the disk behind a block device: another identity and size, the same node and device number', async () => {
    const node = new MemoryVolumes();
    node.addBlockDevice('/dev/sdb', 512, { device: '8:16', wwid: 'naa.old' }).addSymlink('/mnt/disks/b', '/dev/sdb');
    node.replaceBlockDevice('/mnt/disks/b', 1024, { wwid: 'naa.new' });
    assert.deepEqual(await node.volumeIdentity('/dev/sdb'), { id: 'wwid:naa.new', source: 'wwid', device: '8:16' });
    assert.equal(await node.blockDeviceCapacity('/dev/sdb'), 1024);
    node.replaceBlockDevice('/dev/sdb', 1024);
    assert.equal(await node.volumeIdentity('/dev/sdb'), undefined, 'a disk that reports nothing');
    node.addDirectory('/d');
    assert.throws(() => node.replaceBlockDevice('/d', 1), { code: 'ENOTBLK' });
    assert.throws(() => node.replaceBlockDevice('/missing', 1), { code: 'ENOENT' });
  });

  it('keeps a filesystem UUID with its device (remounts, bind mounts of its root) and refuses a malformed one', async () => {
    const node = new MemoryVolumes();
    const uuid = '0b1e2f3a-4b5c-4d6e-8f90-a1b2c3d4e5f6';
    node.addMount('/mnt/disks/a', { fsType: 'ext4', device: '8:17', uuid: uuid.toUpperCase() });
    node.addBindMount('/mnt/disks/a', '/mnt/bind');
    const id = `fs-uuid:${uuid}`;
    assert.deepEqual(await node.volumeIdentity('/mnt/disks/a'), { id, source: 'fs-uuid', device: '8:17' });
    assert.equal((await node.volumeIdentity('/mnt/bind'))?.id, id, 'the whole filesystem again');
    node.removeMount('/mnt/disks/a').addMount('/mnt/disks/a', { fsType: 'ext4', device: '8:17' });
    assert.equal((await node.volumeIdentity('/mnt/disks/a'))?.id, id);
    assert.throws(() => node.addMount('/mnt/disks/c', { uuid: 'ABCD-1234' }), { code: 'EINVAL' });
    assert.throws(() => node.addMount('/mnt/disks/c', { device: '8' }), { code: 'EINVAL' });
  });

  it('gives directories stable dev-ino identities on the filesystem holding them, and needs one', async () => {
    const node = new MemoryVolumes();
    node.addDirectory('/data/a').addDirectory('/data/b');
    const a = await node.volumeIdentity('/data/a');
    assert.match(a?.id ?? '', /^dev-ino:254:0:\d+:\d+$/);
    assert.deepEqual(await node.volumeIdentity('/data/a'), a);
    assert.notEqual((await node.volumeIdentity('/data/b'))?.id, a?.id);
    const bare = new MemoryVolumes({ rootMount: false }).addDirectory('/x');
    await assert.rejects(bare.volumeIdentity('/x'), { code: 'ENOENT', operation: 'volumeIdentity' });
  });
});
