/**
 * The behaviour every NodeVolumes implementation shares. Registered by
 * test/unit/node/memory-volumes.test.ts (MemoryVolumes) and
 * test/integration/node/linux-volumes.test.ts (LinuxVolumes on real tmpfs mounts and loop devices),
 * so the in-memory node used by fast tests and `simulate` cannot drift from the real one.
 */
import assert from 'node:assert/strict';
import { posix } from 'node:path';
import { after, before, describe, it } from 'node:test';

import { NodeVolumeError } from '../../src/core/node/volume-error.js';
import type { NodeVolumes, VolumeIdentity } from '../../src/core/node/volumes.js';

export const MiB = 1024 * 1024;
/** Size of the filesystems the contract mounts (a page multiple, so tmpfs reports it exactly). */
export const FS_BYTES = 16 * MiB;
/** Size of the block devices the contract creates (a sector multiple). */
export const DEVICE_BYTES = 64 * MiB;
/** A name with a space, a tab, a newline, a backslash and non-ASCII characters. */
export const AWKWARD_NAME = 'vol 1\tä\nö 日本 🙂 back\\slash';

/** One node under test plus the means to shape it. All paths are absolute. */
export interface NodeVolumesFixture {
  readonly volumes: NodeVolumes;
  /** A fresh empty directory to work under, as a real path (no symlinks in it). */
  readonly root: string;
  /** Creates a directory and its missing parents. */
  makeDirectory(path: string): Promise<void>;
  /**
   * Creates the directory path and mounts a fresh filesystem of capacityBytes on it: a `tmpfs`, or
   * with options.uuid an `ext4` with that UUID (on Linux made by `mkfs.ext4 -U` on a new loop device).
   */
  mountFilesystem(path: string, capacityBytes: number, options?: { readonly uuid?: string }): Promise<void>;
  /** Unmounts the topmost filesystem mounted at path. */
  unmount(path: string): Promise<void>;
  /** Unmounts the topmost filesystem at path (one with a UUID) and mounts that same filesystem there again. */
  remountFilesystem(path: string): Promise<void>;
  /** Bind-mounts the directory source on target, creating target when missing. */
  bindMount(source: string, target: string): Promise<void>;
  /** Creates a block device node of sizeBytes at path (the parent exists): a loop device over a fresh backing file. */
  makeBlockDevice(path: string, sizeBytes: number): Promise<void>;
  /** Attaches the loop device behind the block device node at path to another fresh backing file of sizeBytes. */
  reattachBlockDevice(path: string, sizeBytes: number): Promise<void>;
  /** Creates a regular file (the parent exists). */
  makeFile(path: string): Promise<void>;
  /** Creates a symlink at path to target, which need not exist (the parent exists). */
  makeSymlink(path: string, target: string): Promise<void>;
  /** Removes an entry and everything under it; a symlink itself, not its target. */
  remove(path: string): Promise<void>;
  /** Undoes everything the fixture created. */
  dispose(): Promise<void>;
}

function volumeError(operation: string, path: string, code: string): (error: unknown) => boolean {
  return (error) => {
    assert.ok(error instanceof NodeVolumeError, `expected a NodeVolumeError, got ${String(error)}`);
    assert.equal(error.operation, operation);
    assert.equal(error.path, path);
    assert.equal(error.code, code);
    assert.ok(error.message.includes(JSON.stringify(path)), `the message names the path: ${error.message}`);
    return true;
  };
}

/**
 * Registers the contract tests under `describe(name)`. setup runs once (before all); each test
 * works in its own fresh directory under the fixture's root.
 */
export function nodeVolumesContract(
  name: string,
  setup: () => Promise<NodeVolumesFixture>,
  options: { skip?: string | false } = {},
): void {
  describe(name, { skip: options.skip ?? false }, () => {
    let fixture: NodeVolumesFixture | undefined;
    let counter = 0;

    before(async () => {
      fixture = await setup();
    });
    after(async () => {
      await fixture?.dispose();
    });

    /** The fixture and a fresh directory for one test. */
    async function fresh(): Promise<{ fx: NodeVolumesFixture; volumes: NodeVolumes; dir: string }> {
      assert.ok(fixture !== undefined, 'fixture set up');
      const dir = posix.join(fixture.root, `t${++counter}`);
      await fixture.makeDirectory(dir);
      return { fx: fixture, volumes: fixture.volumes, dir };
    }

    describe('listDirectory', () => {
      it('lists first-level names only, hidden and awkward ones included, symlinks by their own name', async () => {
        const { fx, volumes, dir } = await fresh();
        await fx.makeDirectory(posix.join(dir, 'a', 'nested'));
        await fx.makeDirectory(posix.join(dir, '.hidden'));
        await fx.makeDirectory(posix.join(dir, AWKWARD_NAME));
        await fx.makeFile(posix.join(dir, 'file'));
        await fx.makeSymlink(posix.join(dir, 'link'), posix.join(dir, 'a'));
        await fx.makeSymlink(posix.join(dir, 'dangling'), posix.join(dir, 'nowhere'));
        const names = [...(await volumes.listDirectory(dir))].sort();
        assert.deepEqual(names, ['.hidden', 'a', AWKWARD_NAME, 'dangling', 'file', 'link'].sort());
      });

      it('lists an empty directory as empty', async () => {
        const { volumes, dir } = await fresh();
        assert.deepEqual(await volumes.listDirectory(dir), []);
      });

      it('follows a symlink to a directory', async () => {
        const { fx, volumes, dir } = await fresh();
        await fx.makeDirectory(posix.join(dir, 'target', 'x'));
        await fx.makeSymlink(posix.join(dir, 'link'), 'target');
        assert.deepEqual(await volumes.listDirectory(posix.join(dir, 'link')), ['x']);
      });

      it('fails with ENOENT for a missing directory and ENOTDIR for a file, naming the path', async () => {
        const { fx, volumes, dir } = await fresh();
        const missing = posix.join(dir, 'missing');
        await assert.rejects(volumes.listDirectory(missing), volumeError('listDirectory', missing, 'ENOENT'));
        const file = posix.join(dir, 'file');
        await fx.makeFile(file);
        await assert.rejects(volumes.listDirectory(file), volumeError('listDirectory', file, 'ENOTDIR'));
      });
    });

    describe('entryInfo', () => {
      it('reports a directory with its real path', async () => {
        const { fx, volumes, dir } = await fresh();
        const path = posix.join(dir, AWKWARD_NAME);
        await fx.makeDirectory(path);
        assert.deepEqual(await volumes.entryInfo(path), { kind: 'directory', isSymlink: false, realPath: path });
      });

      it("reports a regular file as 'other'", async () => {
        const { fx, volumes, dir } = await fresh();
        const path = posix.join(dir, 'file');
        await fx.makeFile(path);
        assert.deepEqual(await volumes.entryInfo(path), { kind: 'other', isSymlink: false, realPath: path });
      });

      it('reports a block device, and one behind a chain of relative and absolute symlinks', async () => {
        const { fx, volumes, dir } = await fresh();
        await fx.makeDirectory(posix.join(dir, 'dev'));
        await fx.makeDirectory(posix.join(dir, 'by-id'));
        const device = posix.join(dir, 'dev', 'disk0');
        await fx.makeBlockDevice(device, DEVICE_BYTES);
        await fx.makeSymlink(posix.join(dir, 'by-id', 'disk-a'), '../dev/disk0');
        const link = posix.join(dir, 'ssd1');
        await fx.makeSymlink(link, posix.join(dir, 'by-id', 'disk-a'));
        assert.deepEqual(await volumes.entryInfo(device), { kind: 'block-device', isSymlink: false, realPath: device });
        assert.deepEqual(await volumes.entryInfo(link), { kind: 'block-device', isSymlink: true, realPath: device });
      });

      it('follows a symlink to a directory and resolves symlinks in parent components', async () => {
        const { fx, volumes, dir } = await fresh();
        const real = posix.join(dir, 'real');
        await fx.makeDirectory(posix.join(real, 'sub'));
        await fx.makeSymlink(posix.join(dir, 'alias'), 'real');
        assert.deepEqual(await volumes.entryInfo(posix.join(dir, 'alias')), {
          kind: 'directory',
          isSymlink: true,
          realPath: real,
        });
        assert.deepEqual(await volumes.entryInfo(posix.join(dir, 'alias', 'sub')), {
          kind: 'directory',
          isSymlink: false,
          realPath: posix.join(real, 'sub'),
        });
        // `..` after a symlink climbs from the link's target, not from the link.
        await fx.makeDirectory(posix.join(dir, 'deep', 'er'));
        await fx.makeSymlink(posix.join(dir, 'jump'), posix.join(dir, 'deep', 'er'));
        assert.equal((await volumes.entryInfo(`${dir}/jump/../er`)).realPath, posix.join(dir, 'deep', 'er'));
      });

      it("reports 'missing' for a missing path, a path under a file, a dangling link and a link loop", async () => {
        const { fx, volumes, dir } = await fresh();
        assert.deepEqual(await volumes.entryInfo(posix.join(dir, 'missing')), { kind: 'missing', isSymlink: false });
        await fx.makeFile(posix.join(dir, 'file'));
        assert.deepEqual(await volumes.entryInfo(posix.join(dir, 'file', 'child')), {
          kind: 'missing',
          isSymlink: false,
        });
        await fx.makeSymlink(posix.join(dir, 'dangling'), posix.join(dir, 'nowhere'));
        assert.deepEqual(await volumes.entryInfo(posix.join(dir, 'dangling')), { kind: 'missing', isSymlink: true });
        await fx.makeSymlink(posix.join(dir, 'loop-a'), 'loop-b');
        await fx.makeSymlink(posix.join(dir, 'loop-b'), 'loop-a');
        assert.deepEqual(await volumes.entryInfo(posix.join(dir, 'loop-a')), { kind: 'missing', isSymlink: true });
      });

      it("reports a vanished block device behind a symlink as 'missing'", async () => {
        const { fx, volumes, dir } = await fresh();
        const device = posix.join(dir, 'disk0');
        const link = posix.join(dir, AWKWARD_NAME);
        await fx.makeBlockDevice(device, DEVICE_BYTES);
        await fx.makeSymlink(link, device);
        assert.equal((await volumes.entryInfo(link)).kind, 'block-device');
        await fx.remove(device);
        assert.deepEqual(await volumes.entryInfo(link), { kind: 'missing', isSymlink: true });
        await assert.rejects(volumes.blockDeviceCapacity(link), volumeError('blockDeviceCapacity', link, 'ENOENT'));
      });

      it('reports a mount point as a directory', async () => {
        const { fx, volumes, dir } = await fresh();
        const mnt = posix.join(dir, 'mnt');
        await fx.mountFilesystem(mnt, FS_BYTES);
        assert.deepEqual(await volumes.entryInfo(mnt), { kind: 'directory', isSymlink: false, realPath: mnt });
      });
    });

    describe('mountPoints', () => {
      it('lists a mount at its exact path, awkward characters decoded, and forgets it once unmounted', async () => {
        const { fx, volumes, dir } = await fresh();
        const mnt = posix.join(dir, AWKWARD_NAME);
        const spaced = posix.join(dir, 'disk with spaces');
        await fx.mountFilesystem(mnt, FS_BYTES);
        await fx.mountFilesystem(spaced, FS_BYTES);
        await fx.makeDirectory(posix.join(dir, 'plain'));
        const table = await volumes.mountPoints();
        const ours = table.filter((m) => m.mountPoint.startsWith(`${dir}/`));
        assert.deepEqual(
          ours.map((m) => m.mountPoint),
          [mnt, spaced],
        );
        for (const m of ours) {
          assert.equal(m.fsType, 'tmpfs');
          assert.equal(m.root, '/');
          assert.match(m.device, /^\d+:\d+$/);
        }
        assert.notEqual(ours[0]?.device, ours[1]?.device, 'two filesystems, two devices');
        assert.ok(
          table.some((m) => m.mountPoint === '/'),
          'the root filesystem is listed',
        );
        await fx.unmount(mnt);
        const after = (await volumes.mountPoints()).filter((m) => m.mountPoint.startsWith(`${dir}/`));
        assert.deepEqual(
          after.map((m) => m.mountPoint),
          [spaced],
        );
      });

      it('records the real path when mounting through a symlink', async () => {
        const { fx, volumes, dir } = await fresh();
        await fx.makeDirectory(posix.join(dir, 'real', 'mnt'));
        await fx.makeSymlink(posix.join(dir, 'alias'), 'real');
        await fx.mountFilesystem(posix.join(dir, 'alias', 'mnt'), FS_BYTES);
        const ours = (await volumes.mountPoints()).filter((m) => m.mountPoint.startsWith(`${dir}/`));
        assert.deepEqual(
          ours.map((m) => m.mountPoint),
          [posix.join(dir, 'real', 'mnt')],
        );
      });

      it('lists stacked mounts on one path in mount order', async () => {
        const { fx, volumes, dir } = await fresh();
        const mnt = posix.join(dir, 'mnt');
        await fx.mountFilesystem(mnt, FS_BYTES);
        await fx.mountFilesystem(mnt, 2 * FS_BYTES);
        const ours = (await volumes.mountPoints()).filter((m) => m.mountPoint === mnt);
        assert.equal(ours.length, 2);
        assert.equal(await volumes.filesystemCapacity(mnt), 2 * FS_BYTES, 'the top mount answers');
        await fx.unmount(mnt);
        assert.equal((await volumes.mountPoints()).filter((m) => m.mountPoint === mnt).length, 1);
        assert.equal(await volumes.filesystemCapacity(mnt), FS_BYTES);
      });
    });

    describe('filesystemCapacity', () => {
      it('is the size of the filesystem mounted at the path, or of the one holding it', async () => {
        const { fx, volumes, dir } = await fresh();
        const mnt = posix.join(dir, 'disk with spaces');
        await fx.mountFilesystem(mnt, FS_BYTES);
        await fx.makeDirectory(posix.join(mnt, 'sub'));
        await fx.makeSymlink(posix.join(dir, 'link'), mnt);
        assert.equal(await volumes.filesystemCapacity(mnt), FS_BYTES);
        assert.equal(await volumes.filesystemCapacity(posix.join(mnt, 'sub')), FS_BYTES);
        assert.equal(await volumes.filesystemCapacity(posix.join(dir, 'link')), FS_BYTES, 'symlinks are followed');
      });

      it('matches mount points by whole path components, not string prefixes', async () => {
        const { fx, volumes, dir } = await fresh();
        await fx.mountFilesystem(posix.join(dir, 'mnt'), FS_BYTES);
        await fx.makeDirectory(posix.join(dir, 'mnt2'));
        assert.notEqual(await volumes.filesystemCapacity(posix.join(dir, 'mnt2')), FS_BYTES);
      });

      it('fails with ENOENT for a missing path, naming it', async () => {
        const { volumes, dir } = await fresh();
        const missing = posix.join(dir, 'missing');
        await assert.rejects(volumes.filesystemCapacity(missing), volumeError('filesystemCapacity', missing, 'ENOENT'));
      });
    });

    describe('filesystemUsage', () => {
      it('is one statfs: the capacity filesystemCapacity gives, used + available within it, inodes used + free', async () => {
        const { fx, volumes, dir } = await fresh();
        const mnt = posix.join(dir, 'disk');
        await fx.mountFilesystem(mnt, FS_BYTES);
        assert.ok(volumes.filesystemUsage !== undefined, 'both implementations read usage');
        const usage = await volumes.filesystemUsage(mnt);
        assert.equal(usage.capacityBytes, FS_BYTES);
        assert.ok(usage.usedBytes >= 0 && usage.availableBytes > 0, JSON.stringify(usage));
        assert.ok(usage.usedBytes + usage.availableBytes <= usage.capacityBytes, JSON.stringify(usage));
        assert.ok(usage.inodes > 0 && usage.inodesUsed + usage.inodesFree === usage.inodes, JSON.stringify(usage));
        const missing = posix.join(dir, 'missing');
        await assert.rejects(volumes.filesystemUsage(missing), volumeError('filesystemUsage', missing, 'ENOENT'));
      });
    });

    describe('blockDeviceCapacity', () => {
      it('is the size of the device, also through symlinks', async () => {
        const { fx, volumes, dir } = await fresh();
        const device = posix.join(dir, 'disk0');
        await fx.makeBlockDevice(device, DEVICE_BYTES);
        await fx.makeSymlink(posix.join(dir, 'ssd'), 'disk0');
        assert.equal(await volumes.blockDeviceCapacity(device), DEVICE_BYTES);
        assert.equal(await volumes.blockDeviceCapacity(posix.join(dir, 'ssd')), DEVICE_BYTES);
      });

      it('fails with ENOTBLK for a directory or a file and ENOENT for a missing or dangling path', async () => {
        const { fx, volumes, dir } = await fresh();
        const file = posix.join(dir, 'file');
        await fx.makeFile(file);
        await assert.rejects(volumes.blockDeviceCapacity(dir), volumeError('blockDeviceCapacity', dir, 'ENOTBLK'));
        await assert.rejects(volumes.blockDeviceCapacity(file), volumeError('blockDeviceCapacity', file, 'ENOTBLK'));
        const missing = posix.join(dir, 'missing');
        await assert.rejects(
          volumes.blockDeviceCapacity(missing),
          volumeError('blockDeviceCapacity', missing, 'ENOENT'),
        );
        const dangling = posix.join(dir, 'dangling');
        await fx.makeSymlink(dangling, posix.join(dir, 'nowhere'));
        await assert.rejects(
          volumes.blockDeviceCapacity(dangling),
          volumeError('blockDeviceCapacity', dangling, 'ENOENT'),
        );
      });
    });

    describe('volumeIdentity', () => {
      /** The identity at path, which must have one. */
      async function identityOf(volumes: NodeVolumes, path: string): Promise<VolumeIdentity> {
        const identity = await volumes.volumeIdentity(path);
        assert.ok(identity !== undefined, `${path} has an identity`);
        assert.equal(identity.id.split(':')[0], identity.source, 'the id starts with its source');
        assert.match(identity.device, /^\d+:\d+$/);
        return identity;
      }

      async function topMountDevice(volumes: NodeVolumes, mountPoint: string): Promise<string> {
        const mount = (await volumes.mountPoints()).findLast((m) => m.mountPoint === mountPoint);
        assert.ok(mount !== undefined, `${mountPoint} is mounted`);
        return mount.device;
      }

      it('is dev-ino for a tmpfs mount point, on its device, and changes once another tmpfs is mounted there', async () => {
        const { fx, volumes, dir } = await fresh();
        const mnt = posix.join(dir, AWKWARD_NAME);
        await fx.mountFilesystem(mnt, FS_BYTES);
        const first = await identityOf(volumes, mnt);
        const device = await topMountDevice(volumes, mnt);
        assert.equal(first.source, 'dev-ino');
        assert.match(first.id, new RegExp(`^dev-ino:${device}:\\d+:\\d+$`));
        assert.equal(first.device, device);
        assert.deepEqual(await volumes.volumeIdentity(mnt), first, 'the same while nothing changed');
        await fx.unmount(mnt);
        await fx.mountFilesystem(mnt, FS_BYTES);
        const second = await identityOf(volumes, mnt);
        assert.equal(second.source, 'dev-ino');
        assert.notEqual(second.id, first.id, 'a new tmpfs is a new, empty volume');
      });

      it('is fs-uuid for a filesystem with a UUID: kept across a remount, another for another filesystem there', async () => {
        const { fx, volumes, dir } = await fresh();
        const mnt = posix.join(dir, 'disk with spaces');
        await fx.mountFilesystem(mnt, FS_BYTES, { uuid: '0b1e2f3a-4b5c-4d6e-8f90-a1b2c3d4e5f6' });
        const first = await identityOf(volumes, mnt);
        assert.deepEqual(
          { id: first.id, source: first.source, device: first.device },
          {
            id: 'fs-uuid:0b1e2f3a-4b5c-4d6e-8f90-a1b2c3d4e5f6',
            source: 'fs-uuid',
            device: await topMountDevice(volumes, mnt),
          },
        );
        await fx.makeSymlink(posix.join(dir, 'link'), mnt);
        assert.deepEqual(await volumes.volumeIdentity(posix.join(dir, 'link')), first, 'symlinks are followed');
        await fx.remountFilesystem(mnt);
        assert.equal((await identityOf(volumes, mnt)).id, first.id, 'the same filesystem mounted again');
        await fx.unmount(mnt);
        // Written in capitals: the id has the usual lowercase form whatever the UUID was made from.
        await fx.mountFilesystem(mnt, FS_BYTES, { uuid: 'F1E2D3C4-B5A6-4978-8695-A4B3C2D1E0F9' });
        assert.equal((await identityOf(volumes, mnt)).id, 'fs-uuid:f1e2d3c4-b5a6-4978-8695-a4b3c2d1e0f9');
      });

      it('tells bind mounts of two sub-directories of one filesystem apart, and from the filesystem', async () => {
        const { fx, volumes, dir } = await fresh();
        const uuid = '3c9d5e7f-1a2b-4c3d-9e8f-7a6b5c4d3e2f';
        const fs = posix.join(dir, 'fs');
        await fx.mountFilesystem(fs, FS_BYTES, { uuid });
        await fx.makeDirectory(posix.join(fs, 'a'));
        await fx.makeDirectory(posix.join(fs, 'b'));
        await fx.bindMount(posix.join(fs, 'a'), posix.join(dir, 'x'));
        await fx.bindMount(posix.join(fs, 'b'), posix.join(dir, 'y'));
        await fx.bindMount(posix.join(fs, 'a'), posix.join(dir, 'z'));
        const x = await identityOf(volumes, posix.join(dir, 'x'));
        const y = await identityOf(volumes, posix.join(dir, 'y'));
        const z = await identityOf(volumes, posix.join(dir, 'z'));
        assert.match(x.id, new RegExp(`^fs-uuid:${uuid}:ino:\\d+:\\d+$`));
        assert.match(y.id, new RegExp(`^fs-uuid:${uuid}:ino:\\d+:\\d+$`));
        assert.notEqual(x.id, y.id);
        assert.equal(z.id, x.id, 'one directory bind-mounted twice is one volume');
        assert.equal((await identityOf(volumes, fs)).id, `fs-uuid:${uuid}`);
      });

      it('is dev-ino for a directory that is not a mount point, on the device of the filesystem holding it', async () => {
        const { fx, volumes, dir } = await fresh();
        const mnt = posix.join(dir, 'mnt');
        await fx.mountFilesystem(mnt, FS_BYTES);
        await fx.makeDirectory(posix.join(mnt, 'one'));
        await fx.makeDirectory(posix.join(mnt, 'two'));
        const device = await topMountDevice(volumes, mnt);
        const one = await identityOf(volumes, posix.join(mnt, 'one'));
        const two = await identityOf(volumes, posix.join(mnt, 'two'));
        assert.equal(one.source, 'dev-ino');
        assert.equal(one.device, device);
        assert.match(one.id, new RegExp(`^dev-ino:${device}:\\d+:\\d+$`));
        assert.notEqual(one.id, two.id);
        assert.notEqual(one.id, (await identityOf(volumes, mnt)).id);
      });

      it('is another identity for a directory removed and made again, also bind-mounted (inode numbers are reused)', async () => {
        const { fx, volumes, dir } = await fresh();
        const fs = posix.join(dir, 'fs');
        await fx.mountFilesystem(fs, FS_BYTES, { uuid: '5e6f7a8b-9c0d-4e1f-8a2b-3c4d5e6f7a8b' });
        const sub = posix.join(fs, 'vol');
        const bind = posix.join(dir, 'bind');
        await fx.makeDirectory(sub);
        await fx.bindMount(sub, bind);
        const [oldDir, oldBind] = [await identityOf(volumes, sub), await identityOf(volumes, bind)];
        await fx.unmount(bind);
        await fx.remove(sub);
        await fx.makeDirectory(sub);
        await fx.bindMount(sub, bind);
        const [newDir, newBind] = [await identityOf(volumes, sub), await identityOf(volumes, bind)];
        assert.equal(newDir.source, 'dev-ino');
        assert.equal(newBind.source, 'fs-uuid');
        assert.notEqual(newDir.id, oldDir.id, 'the directory');
        assert.notEqual(newBind.id, oldBind.id, 'the bind mount of it');
      });

      it('is loop for a loop device, the same through a symlink, and another once it is re-attached to another file', async () => {
        const { fx, volumes, dir } = await fresh();
        const device = posix.join(dir, 'disk0');
        await fx.makeBlockDevice(device, DEVICE_BYTES);
        await fx.makeDirectory(posix.join(dir, 'discovery'));
        const link = posix.join(dir, 'discovery', AWKWARD_NAME);
        await fx.makeSymlink(link, '../disk0');
        const first = await identityOf(volumes, device);
        assert.equal(first.source, 'loop');
        assert.match(first.id, /^loop:\d+:\d+:\d+:\d+$/, 'backing device, inode and birth');
        assert.deepEqual(await volumes.volumeIdentity(link), first);
        await fx.reattachBlockDevice(device, DEVICE_BYTES);
        const second = await identityOf(volumes, link);
        assert.equal(second.source, 'loop');
        assert.notEqual(second.id, first.id, 'another backing file is another disk');
        assert.deepEqual(await volumes.volumeIdentity(device), second);
      });

      it('rejects a missing path and a dangling symlink (ENOENT) and a regular file (ENOTBLK), naming the path', async () => {
        const { fx, volumes, dir } = await fresh();
        const missing = posix.join(dir, 'missing');
        await assert.rejects(volumes.volumeIdentity(missing), volumeError('volumeIdentity', missing, 'ENOENT'));
        const dangling = posix.join(dir, 'dangling');
        await fx.makeSymlink(dangling, posix.join(dir, 'nowhere'));
        await assert.rejects(volumes.volumeIdentity(dangling), volumeError('volumeIdentity', dangling, 'ENOENT'));
        const file = posix.join(dir, 'file');
        await fx.makeFile(file);
        await assert.rejects(volumes.volumeIdentity(file), volumeError('volumeIdentity', file, 'ENOTBLK'));
      });
    });

    describe('watchChanges', () => {
      /** A watch of dirs that counts reports; next() resolves on the next report (or fails after 3 s). */
      async function watching(volumes: NodeVolumes, directories: readonly string[]) {
        const abort = new AbortController();
        let reports = 0;
        let waiter: (() => void) | undefined;
        const watch = volumes.watchChanges({
          directories,
          signal: abort.signal,
          onChange: () => {
            reports++;
            waiter?.();
          },
        });
        assert.deepEqual(await watch.ready, { ok: true });
        return {
          watch,
          reports: () => reports,
          abort: () => {
            abort.abort();
          },
          /** Runs change, then waits for a report it caused. */
          async reported(what: string, change: () => Promise<void>): Promise<void> {
            const seen = new Promise<void>((resolve, reject) => {
              const timer = setTimeout(() => {
                reject(new Error(`no change reported within 3 s for ${what}`));
              }, 3000);
              waiter = () => {
                clearTimeout(timer);
                resolve();
              };
            });
            await change();
            await seen;
            waiter = undefined;
          },
        };
      }

      it('reports mounting and unmounting in, on and above a watched directory, not elsewhere', async () => {
        const { fx, volumes, dir } = await fresh();
        const watched = posix.join(dir, 'discovery');
        await fx.makeDirectory(watched);
        await fx.makeDirectory(posix.join(dir, 'elsewhere'));
        const mnt = posix.join(watched, 'disk 1');
        await fx.makeDirectory(mnt);
        const w = await watching(volumes, [watched]);
        try {
          // Kubelet mounts every pod's volumes outside the discovery directories: not news. The
          // report that follows is the next mount's, and the only one.
          await fx.mountFilesystem(posix.join(dir, 'elsewhere'), FS_BYTES);
          await w.reported('a mount in the directory', () => fx.mountFilesystem(mnt, FS_BYTES));
          assert.equal(w.reports(), 1, 'the mount elsewhere was not reported');
          await w.reported('an unmount', () => fx.unmount(mnt));
          await w.reported('a mount above the directory (it hides it)', () => fx.mountFilesystem(dir, FS_BYTES));
          await w.reported('its unmount', () => fx.unmount(dir));
        } finally {
          w.abort();
          assert.deepEqual(await w.watch.done, { ok: true });
        }
      });

      it('reports entries created and removed in a watched directory: a directory, a block-device symlink, a file', async () => {
        const { fx, volumes, dir } = await fresh();
        const watched = posix.join(dir, 'discovery');
        await fx.makeDirectory(watched);
        await fx.makeDirectory(posix.join(dir, 'dev'));
        await fx.makeBlockDevice(posix.join(dir, 'dev', 'disk0'), DEVICE_BYTES);
        const w = await watching(volumes, [watched]);
        try {
          await w.reported('a new directory', () => fx.makeDirectory(posix.join(watched, AWKWARD_NAME)));
          await w.reported('a new symlink', () => fx.makeSymlink(posix.join(watched, 'ssd1'), '../dev/disk0'));
          await w.reported('a new file', () => fx.makeFile(posix.join(watched, 'file')));
          await w.reported('a removed symlink', () => fx.remove(posix.join(watched, 'ssd1')));
        } finally {
          w.abort();
          await w.watch.done;
        }
      });

      it('keeps watching a directory after a filesystem was mounted on it', async () => {
        const { fx, volumes, dir } = await fresh();
        const watched = posix.join(dir, 'discovery');
        await fx.makeDirectory(watched);
        const w = await watching(volumes, [watched]);
        try {
          await w.reported('a mount on the directory', () => fx.mountFilesystem(watched, FS_BYTES));
          await w.reported('an entry in the new filesystem', () => fx.makeDirectory(posix.join(watched, 'vol')));
        } finally {
          w.abort();
          await w.watch.done;
          await fx.unmount(watched);
        }
      });

      it('reports nothing after the signal aborted, and settles done', async () => {
        const { fx, volumes, dir } = await fresh();
        const watched = posix.join(dir, 'discovery');
        await fx.makeDirectory(watched);
        const w = await watching(volumes, [watched]);
        w.abort();
        assert.deepEqual(await w.watch.done, { ok: true });
        const before = w.reports();
        await fx.makeDirectory(posix.join(watched, 'late'));
        await fx.mountFilesystem(posix.join(dir, 'late-mount'), FS_BYTES);
        await new Promise((resolve) => setTimeout(resolve, 200));
        assert.equal(w.reports(), before);
      });
    });
  });
}
