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
  return Promise.resolve({
    volumes,
    root,
    makeDirectory: promised((path: string) => volumes.addDirectory(path)),
    mountFilesystem: promised((path: string, capacity: number) =>
      volumes.addMount(path, { fsType: 'tmpfs', source: 'lvp-test', capacity }),
    ),
    unmount: promised((path: string) => volumes.removeMount(path)),
    makeBlockDevice: promised((path: string, size: number) => volumes.addBlockDevice(path, size)),
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
});
