// An in-memory node for fast tests and `simulate`: a tree of directories, block devices, other
// files and symlinks, a mount table and per-filesystem capacities. Its answers follow LinuxVolumes
// (checked by the shared contract in test/contract/node-volumes-contract.ts):
// - paths are absolute; symlinks are followed in every component (relative targets resolve from
//   the link's directory, `..` after a link climbs from the link's target, 40 links at most → ELOOP);
// - entryInfo is 'missing' for ENOENT/ENOTDIR/ELOOP, with isSymlink telling a dangling link apart;
// - mount points are real paths (symlinks resolved when mounting, as mount(8) does) and are
//   compared as exact strings; the table lists mounts in mount order;
// - filesystemCapacity answers for the filesystem on top at the path (the last mounted one
//   whose mount point contains it).
// - volumeIdentity: a block device has the wwid, serial or loop backing it was created with (the
//   first of them; a loop backing's birth, when not given, from the node's clock), else none; a
//   mount point has `fs-uuid:<uuid>` when its filesystem was mounted
//   with a uuid (`:ino:<n>:<birth>` added for a mount of a sub-directory), else, like any
//   directory, `dev-ino:<device of the filesystem holding it>:<n>:<birth>`: n is a per-node inode
//   number of the directory, birth when it was made (a counter); a mount point shows the root of
//   the filesystem mounted there: the directory's n and when the filesystem (device) was first
//   mounted; a bind mount, its source directory's. byId is the first name in /dev/disk/by-id
//   (sorted) whose link leads to the device. A disk swap: unmount and mount with another uuid, or
//   replaceBlockDevice.
// - watchChanges reports mount-table changes at, below or above a watched directory (as the
//   kernel names it, symlinks resolved) and entries created or removed directly in a watched
//   directory (not capacity or size changes), on a microtask after the mutation.
// What it does not model: a mount does not hide or alias directory contents (a bind mount's target
// is its own directory tree), permissions, and file contents.

import { posix } from 'node:path';

import {
  attributeValue,
  devInoValue,
  fsUuidValue,
  loopValue,
  makeIdentity,
  normalizeUuid,
  parseDeviceNumber,
  type DirectoryStamp,
} from './identity.js';
import { encodeMountInfoField } from './mountinfo.js';
import { NodeVolumeError, type NodeVolumeOperation } from './volume-error.js';
import { mountChangeConcerns } from './volumes.js';
import type {
  ChangeWatch,
  ChangeWatchOptions,
  EntryInfo,
  FilesystemUsage,
  IdentitySource,
  MountPoint,
  NodeVolumes,
  VolumeIdentity,
} from './volumes.js';
import { asError } from '../unknown-values.js';

interface DirectoryNode {
  readonly type: 'directory';
  readonly children: Map<string, FsNode>;
  /** The directory's inode number, unique on this node. */
  readonly ino: number;
  /** When it was made, on the node's clock (a counter): its birth time. */
  readonly birthNs: number;
}
interface BlockDeviceNode {
  readonly type: 'block-device';
  size: number;
  device: string;
  /** What identifies the disk behind the node (source and value), when anything does. */
  identity: { readonly source: IdentitySource; readonly value: string } | undefined;
}
interface OtherNode {
  readonly type: 'other';
}
interface SymlinkNode {
  readonly type: 'symlink';
  readonly target: string;
}
type FsNode = DirectoryNode | BlockDeviceNode | OtherNode | SymlinkNode;

export interface MemoryMountOptions {
  /** Default `tmpfs`. */
  readonly fsType?: string;
  /** Default: the fsType. */
  readonly source?: string;
  /** Root of the mount within its filesystem; default `/`. */
  readonly root?: string;
  /** `major:minor` of the filesystem; default a fresh anonymous device `0:N`. */
  readonly device?: string;
  /** Capacity in bytes of the filesystem; default the node's defaultCapacity (kept when the device is already known). */
  readonly capacity?: number;
  /**
   * The filesystem's UUID (8-4-4-4-12 hex, either case), making its identity `fs-uuid:<uuid>`
   * (lowercase), as ext4, XFS or btrfs on a disk; default none (kept when the device is already
   * known), so the identity is `dev-ino:…` as a tmpfs's. Give fsType too: the default stays `tmpfs`.
   */
  readonly uuid?: string;
}

/** A loop device's backing file, as the kernel names it: its filesystem's device and its inode. */
export interface MemoryLoopBacking {
  /** `major:minor` of the filesystem holding the backing file. */
  readonly device: string;
  readonly inode: number;
  /**
   * The file's birth time in ns; default a fresh one from the node's clock, so a file recreated
   * with the same device and inode (as the kernel does) is another disk.
   */
  readonly birthNs?: bigint | number;
}

/**
 * What identifies the disk behind a block device; the first given counts, as on Linux (wwid, then
 * serial, then loop). None: volumeIdentity answers undefined, as for a disk that reports nothing.
 */
export interface MemoryDiskIdentity {
  /** The disk's WWID: identity `wwid:<wwid>` (blanks as `_`, as read from sysfs), e.g. `naa.5000c500a1b2c3d4`. */
  readonly wwid?: string;
  /** The disk's serial number: identity `serial:<serial>` (blanks as `_`). */
  readonly serial?: string;
  /** A loop device's backing file: identity `loop:<device>:<inode>:<birth>`. */
  readonly loop?: MemoryLoopBacking;
}

export interface MemoryBlockDeviceOptions extends MemoryDiskIdentity {
  /** `major:minor` of the device; default a fresh `7:N` (a loop device). */
  readonly device?: string;
}

export interface MemoryVolumesOptions {
  /** Capacity of filesystems mounted without one, and of `/`; default 100 GiB. */
  readonly defaultCapacity?: number;
  /** Whether `/` is mounted (as on every real node); default true. */
  readonly rootMount?: boolean;
}

/** The most symlinks one lookup follows before ELOOP (Linux's MAXSYMLINKS). */
const MAX_SYMLINKS = 40;
const GiB = 1024 ** 3;

type Lookup = { ok: true; node: FsNode; path: string } | { ok: false; code: 'ENOENT' | 'ENOTDIR' | 'ELOOP' };

function components(path: string): string[] {
  return path.split('/').filter((c) => c !== '' && c !== '.');
}

function isWithin(path: string, mountPoint: string): boolean {
  return mountPoint === '/' || path === mountPoint || path.startsWith(`${mountPoint}/`);
}

export class MemoryVolumes implements NodeVolumes {
  private nextInode = 2;
  /**
   * The node's clock for birth times: it moves on every directory made, filesystem first mounted
   * and loop backing file given without a birth.
   */
  private clock = 1;
  private readonly tree: DirectoryNode = {
    type: 'directory',
    children: new Map(),
    ino: this.nextInode++,
    birthNs: this.clock++,
  };
  private readonly mounts: MountPoint[] = [];
  /** Capacity per filesystem device (`major:minor`), so bind mounts share their source's. */
  private readonly capacities = new Map<string, number>();
  /** Bytes used per filesystem (device); default 0. */
  private readonly used = new Map<string, number>();
  /** UUID per filesystem device, for the filesystems mounted with one (bind mounts share it). */
  private readonly uuids = new Map<string, string>();
  /** Birth time of each filesystem's root, per device: when it was first mounted. */
  private readonly filesystemBirths = new Map<string, number>();
  /** A bind mount's source directory: what stat shows at the bind mount's target. */
  private readonly bindSources = new WeakMap<MountPoint, DirectoryStamp>();
  private nextAnonymousMinor = 100;
  private nextBlockMinor = 0;
  private readonly defaultCapacity: number;
  private readonly watchers = new Set<ChangeWatchOptions>();

  constructor(options: MemoryVolumesOptions = {}) {
    this.defaultCapacity = options.defaultCapacity ?? 100 * GiB;
    if (options.rootMount ?? true) {
      this.mounts.push({ mountPoint: '/', root: '/', fsType: 'ext4', source: '/dev/root', device: '254:0' });
      this.capacities.set('254:0', this.defaultCapacity);
      this.filesystemBirths.set('254:0', this.clock++);
    }
  }

  // ---- NodeVolumes -------------------------------------------------------------------------

  mountPoints(): Promise<readonly MountPoint[]> {
    return settle(() => this.mounts.map((m) => ({ ...m })));
  }

  listDirectory(path: string): Promise<readonly string[]> {
    return settle(() => {
      const found = this.lookup('listDirectory', path, true);
      if (!found.ok) throw this.error('listDirectory', path, found.code);
      if (found.node.type !== 'directory') throw this.error('listDirectory', path, 'ENOTDIR');
      return [...found.node.children.keys()];
    });
  }

  entryInfo(path: string): Promise<EntryInfo> {
    return settle((): EntryInfo => {
      const self = this.lookup('entryInfo', path, false);
      if (!self.ok) return { kind: 'missing', isSymlink: false };
      const isSymlink = self.node.type === 'symlink';
      const target = this.lookup('entryInfo', path, true);
      if (!target.ok) return { kind: 'missing', isSymlink };
      const kind = target.node.type === 'directory' || target.node.type === 'block-device' ? target.node.type : 'other';
      return { kind, isSymlink, realPath: target.path };
    });
  }

  filesystemCapacity(path: string): Promise<number> {
    return settle(() => {
      const found = this.lookup('filesystemCapacity', path, true);
      if (!found.ok) throw this.error('filesystemCapacity', path, found.code);
      const mount = this.mountContaining(found.path);
      if (mount === undefined) throw this.error('filesystemCapacity', path, 'ENOENT', 'no filesystem is mounted there');
      return this.capacities.get(mount.device) ?? this.defaultCapacity;
    });
  }

  /** Bytes from the capacity and setUsed; inodes one per 16 KiB of capacity, one used per 64 KiB used. */
  filesystemUsage(path: string): Promise<FilesystemUsage> {
    return settle(() => {
      const found = this.lookup('filesystemUsage', path, true);
      if (!found.ok) throw this.error('filesystemUsage', path, found.code);
      const mount = this.mountContaining(found.path);
      if (mount === undefined) throw this.error('filesystemUsage', path, 'ENOENT', 'no filesystem is mounted there');
      const capacityBytes = this.capacities.get(mount.device) ?? this.defaultCapacity;
      const usedBytes = Math.min(capacityBytes, this.used.get(mount.device) ?? 0);
      const inodes = Math.floor(capacityBytes / 16384);
      const inodesUsed = Math.min(inodes, Math.ceil(usedBytes / 65536));
      return {
        capacityBytes,
        usedBytes,
        availableBytes: capacityBytes - usedBytes,
        inodes,
        inodesUsed,
        inodesFree: inodes - inodesUsed,
      };
    });
  }

  blockDeviceCapacity(path: string): Promise<number> {
    return settle(() => {
      const found = this.lookup('blockDeviceCapacity', path, true);
      if (!found.ok) throw this.error('blockDeviceCapacity', path, found.code);
      if (found.node.type !== 'block-device')
        throw this.error('blockDeviceCapacity', path, 'ENOTBLK', 'not a block device');
      return found.node.size;
    });
  }

  volumeIdentity(path: string): Promise<VolumeIdentity | undefined> {
    return settle(() => {
      const found = this.lookup('volumeIdentity', path, true);
      if (!found.ok) throw this.error('volumeIdentity', path, found.code);
      const { node } = found;
      if (node.type === 'block-device') {
        if (node.identity === undefined) return undefined;
        return makeIdentity(node.identity.source, node.identity.value, node.device, this.byIdName(node.device));
      }
      if (node.type !== 'directory') {
        throw this.error('volumeIdentity', path, 'ENOTBLK', 'neither a directory nor a block device');
      }
      const mount = this.mountContaining(found.path);
      if (mount === undefined) throw this.error('volumeIdentity', path, 'ENOENT', 'no filesystem is mounted there');
      const isMountPoint = mount.mountPoint === found.path;
      const stamp = isMountPoint ? this.mountRootStamp(mount, node) : node;
      const uuid = isMountPoint ? this.uuids.get(mount.device) : undefined;
      if (uuid !== undefined) return makeIdentity('fs-uuid', fsUuidValue(uuid, mount.root, stamp), mount.device);
      return makeIdentity('dev-ino', devInoValue(mount.device, stamp), mount.device);
    });
  }

  watchChanges(options: ChangeWatchOptions): ChangeWatch {
    const ended: Promise<{ ok: true }> = Promise.resolve({ ok: true });
    if (options.signal.aborted) return { ready: ended, done: ended };
    this.watchers.add(options);
    const done = new Promise<{ ok: true }>((resolve) => {
      options.signal.addEventListener(
        'abort',
        () => {
          this.watchers.delete(options);
          resolve({ ok: true });
        },
        { once: true },
      );
    });
    return { ready: Promise.resolve({ ok: true }), done };
  }

  // ---- Mutations (tests, simulate) ---------------------------------------------------------
  // Every add* creates missing parent directories (like `mkdir -p`) and throws EEXIST when the
  // path already holds something (addDirectory accepts an existing directory).

  /** Creates a directory and its missing parents. */
  addDirectory(path: string): this {
    this.makeDirectories(path);
    return this;
  }

  /** Creates a file that is neither a directory nor a block device (a regular file, a socket...). */
  addFile(path: string): this {
    this.create(path, { type: 'other' });
    return this;
  }

  /**
   * Creates a block device node of sizeBytes; device defaults to a fresh `7:N` (a loop device).
   * Its identity comes from options.wwid, serial or loop (see MemoryDiskIdentity); none by default.
   */
  addBlockDevice(path: string, sizeBytes: number, options: MemoryBlockDeviceOptions = {}): this {
    assertSize(sizeBytes, path);
    const device = this.deviceOption(path, options.device) ?? `7:${this.nextBlockMinor++}`;
    const identity = this.diskIdentity(path, options);
    this.create(path, { type: 'block-device', size: sizeBytes, device, identity });
    return this;
  }

  /**
   * Puts another disk behind the existing block device at path (followed): a new size and identity
   * (none unless options give one), the device number kept unless options.device gives one. As on
   * Linux, where a swapped disk may come back under the same /dev node, the directory is unchanged.
   * A loop backing given without a birth is a new file: another identity even with the same numbers.
   */
  replaceBlockDevice(path: string, sizeBytes: number, options: MemoryBlockDeviceOptions = {}): this {
    assertSize(sizeBytes, path);
    const found = this.lookup('mutate', path, true);
    if (!found.ok) throw this.error('mutate', path, found.code);
    if (found.node.type !== 'block-device') throw this.error('mutate', path, 'ENOTBLK', 'not a block device');
    const device = this.deviceOption(path, options.device) ?? found.node.device;
    const identity = this.diskIdentity(path, options);
    found.node.size = sizeBytes;
    found.node.device = device;
    found.node.identity = identity;
    return this;
  }

  /** Changes the size of an existing block device (path is followed). */
  setBlockDeviceSize(path: string, sizeBytes: number): this {
    assertSize(sizeBytes, path);
    const found = this.lookup('mutate', path, true);
    if (!found.ok) throw this.error('mutate', path, found.code);
    if (found.node.type !== 'block-device') throw this.error('mutate', path, 'ENOTBLK', 'not a block device');
    found.node.size = sizeBytes;
    return this;
  }

  /** Creates a symlink at path pointing at target (absolute or relative to the link's directory; need not exist). */
  addSymlink(path: string, target: string): this {
    if (target === '') throw this.error('mutate', path, 'ENOENT', 'empty symlink target');
    this.create(path, { type: 'symlink', target });
    return this;
  }

  /**
   * Mounts a filesystem on path (creating the directory if missing, like `mkdir -p` + `mount`).
   * The table records the real path, symlinks resolved. Mounting again on the same path stacks.
   */
  addMount(path: string, options: MemoryMountOptions = {}): this {
    const mountPoint = this.mountTarget(path);
    const fsType = options.fsType ?? 'tmpfs';
    const device = this.deviceOption(path, options.device) ?? `0:${this.nextAnonymousMinor++}`;
    if (options.capacity !== undefined) assertSize(options.capacity, path);
    const uuid = options.uuid === undefined ? undefined : normalizeUuid(options.uuid);
    if (options.uuid !== undefined && uuid === undefined) {
      throw this.error('mutate', path, 'EINVAL', `${JSON.stringify(options.uuid)} is not a UUID`);
    }
    if (options.capacity !== undefined || !this.capacities.has(device)) {
      this.capacities.set(device, options.capacity ?? this.defaultCapacity);
    }
    if (uuid !== undefined) this.uuids.set(device, uuid);
    if (!this.filesystemBirths.has(device)) this.filesystemBirths.set(device, this.clock++);
    this.mounts.push({ mountPoint, root: options.root ?? '/', fsType, source: options.source ?? fsType, device });
    this.mountChanged(mountPoint);
    return this;
  }

  /**
   * Bind-mounts source on target (`mount --bind`): same device, fsType, source and capacity as
   * the filesystem holding source; root is source's path within that filesystem.
   */
  addBindMount(source: string, target: string): this {
    const found = this.lookup('mutate', source, true);
    if (!found.ok) throw this.error('mutate', source, found.code);
    const from = this.mountContaining(found.path);
    if (from === undefined) throw this.error('mutate', source, 'ENOENT', 'no filesystem is mounted there');
    const relative = from.mountPoint === '/' ? found.path : found.path.slice(from.mountPoint.length);
    const root = posix.join(from.root, relative === '' ? '/' : relative);
    const { node } = found;
    const stamp =
      node.type !== 'directory' ? undefined : from.mountPoint === found.path ? this.mountRootStamp(from, node) : node;
    this.addMount(target, { fsType: from.fsType, source: from.source, device: from.device, root });
    const bind = this.mounts.at(-1);
    if (bind !== undefined && stamp !== undefined) this.bindSources.set(bind, stamp);
    return this;
  }

  /** Unmounts the topmost mount at exactly path (symlinks resolved); EINVAL when nothing is mounted there. */
  removeMount(path: string): this {
    const found = this.lookup('mutate', path, true);
    const mountPoint = found.ok ? found.path : posix.resolve(path);
    const index = this.mounts.findLastIndex((m) => m.mountPoint === mountPoint);
    if (index < 0) throw this.error('mutate', path, 'EINVAL', 'not a mount point');
    this.mounts.splice(index, 1);
    this.mountChanged(mountPoint);
    return this;
  }

  /** Sets the capacity of the filesystem mounted at exactly mountPoint (shared with its bind mounts). */
  setCapacity(mountPoint: string, bytes: number): this {
    assertSize(bytes, mountPoint);
    const found = this.lookup('mutate', mountPoint, true);
    const real = found.ok ? found.path : posix.resolve(mountPoint);
    const mount = this.mounts.findLast((m) => m.mountPoint === real);
    if (mount === undefined) throw this.error('mutate', mountPoint, 'EINVAL', 'not a mount point');
    this.capacities.set(mount.device, bytes);
    return this;
  }

  /** Sets the bytes used on the filesystem mounted at exactly mountPoint (filesystemUsage). */
  setUsed(mountPoint: string, bytes: number): this {
    assertSize(bytes, mountPoint);
    const found = this.lookup('mutate', mountPoint, true);
    const real = found.ok ? found.path : posix.resolve(mountPoint);
    const mount = this.mounts.findLast((m) => m.mountPoint === real);
    if (mount === undefined) throw this.error('mutate', mountPoint, 'EINVAL', 'not a mount point');
    this.used.set(mount.device, bytes);
    return this;
  }

  /**
   * Removes an entry and everything under it (`rm -rf`; a symlink itself, not its target).
   * ENOENT when missing; EBUSY when a mount point is at or under it (as rmdir fails on Linux).
   */
  remove(path: string): this {
    const parent = this.lookup('mutate', posix.dirname(posix.resolve(path)), true);
    const name = posix.basename(posix.resolve(path));
    if (!parent.ok) throw this.error('mutate', path, parent.code);
    if (parent.node.type !== 'directory') throw this.error('mutate', path, 'ENOTDIR');
    if (name === '' || !parent.node.children.has(name)) throw this.error('mutate', path, 'ENOENT');
    const real = posix.join(parent.path, name);
    if (parent.node.children.get(name)?.type === 'directory' && this.mounts.some((m) => isWithin(m.mountPoint, real))) {
      throw this.error('mutate', path, 'EBUSY', 'a filesystem is mounted at or under it');
    }
    parent.node.children.delete(name);
    this.entryChanged(parent.path);
    return this;
  }

  /**
   * The mount table as /proc/self/mountinfo text (mount IDs from 21, options invented), so the
   * same table can be fed to LinuxVolumes through its mountInfoPath.
   */
  mountInfoText(): string {
    return this.mounts
      .map((m, i) => {
        const parent = this.mounts.findLastIndex(
          (p, j) => j < i && p.mountPoint !== m.mountPoint && isWithin(m.mountPoint, p.mountPoint),
        );
        const fields = [
          String(21 + i),
          String(parent < 0 ? 1 : 21 + parent),
          m.device,
          encodeMountInfoField(m.root),
          encodeMountInfoField(m.mountPoint),
          'rw,relatime',
          '-',
          encodeMountInfoField(m.fsType),
          encodeMountInfoField(m.source),
          'rw',
        ];
        return `${fields.join(' ')}\n`;
      })
      .join('');
  }

  // ---- Internals ---------------------------------------------------------------------------

  private deviceOption(path: string, device: string | undefined): string | undefined {
    if (device === undefined || parseDeviceNumber(device) === device) return device;
    throw this.error('mutate', path, 'EINVAL', `device ${JSON.stringify(device)} is not major:minor`);
  }

  /** What stat shows at a mount point: the root of the filesystem mounted there (or a bind mount's source). */
  private mountRootStamp(mount: MountPoint, directory: DirectoryNode): DirectoryStamp {
    return this.bindSources.get(mount) ?? { ino: directory.ino, birthNs: this.filesystemBirths.get(mount.device) ?? 0 };
  }

  /** The identity options give, normalized as LinuxVolumes reads them from sysfs. */
  private diskIdentity(path: string, options: MemoryDiskIdentity): BlockDeviceNode['identity'] {
    const invalid = (what: string): NodeVolumeError => this.error('mutate', path, 'EINVAL', what);
    if (options.wwid !== undefined) {
      const value = attributeValue(options.wwid);
      if (value === undefined) throw invalid(`wwid ${JSON.stringify(options.wwid)} is empty or has control characters`);
      return { source: 'wwid', value };
    }
    if (options.serial !== undefined) {
      const value = attributeValue(options.serial);
      if (value === undefined) {
        throw invalid(`serial ${JSON.stringify(options.serial)} is empty or has control characters`);
      }
      return { source: 'serial', value };
    }
    if (options.loop !== undefined) {
      const { device, inode, birthNs = this.clock++ } = options.loop;
      if (parseDeviceNumber(device) !== device)
        throw invalid(`loop device ${JSON.stringify(device)} is not major:minor`);
      if (!Number.isSafeInteger(inode) || inode < 0) throw invalid(`loop inode ${inode} is not a non-negative integer`);
      const wholeBirth = typeof birthNs === 'bigint' || Number.isSafeInteger(birthNs);
      if (!wholeBirth || birthNs < 0) throw invalid(`loop birth ${birthNs} is not a non-negative integer`);
      return { source: 'loop', value: loopValue(device, inode, birthNs) };
    }
    return undefined;
  }

  /** The first name in /dev/disk/by-id (sorted) whose link leads to a block device numbered device. */
  private byIdName(device: string): string | undefined {
    const dir = '/dev/disk/by-id';
    const found = this.lookup('volumeIdentity', dir, true);
    if (!found.ok || found.node.type !== 'directory') return undefined;
    return [...found.node.children.keys()].sort().find((name) => {
      const target = this.lookup('volumeIdentity', `${dir}/${name}`, true);
      return target.ok && target.node.type === 'block-device' && target.node.device === device;
    });
  }

  private error(operation: NodeVolumeOperation, path: string, code: string, detail?: string): NodeVolumeError {
    return new NodeVolumeError(operation, path, code, detail ?? DESCRIPTIONS[code] ?? code);
  }

  /**
   * The mount a path lookup lands on: the last mounted one whose mount point contains the real
   * path. The containing mounts all sit on the path's ancestor chain, so the last one is on top
   * (a later mount on an ancestor shadows an earlier, deeper one, as on Linux).
   */
  private mountContaining(realPath: string): MountPoint | undefined {
    return this.mounts.findLast((mount) => isWithin(realPath, mount.mountPoint));
  }

  /**
   * Path walk with Linux semantics. followLast: whether a symlink in the last component is
   * followed (stat) or returned (lstat). The returned path is the real path of the node found.
   */
  private lookup(operation: NodeVolumeOperation, path: string, followLast: boolean): Lookup {
    if (!path.startsWith('/')) {
      throw new NodeVolumeError(operation, path, 'EINVAL', 'the in-memory node only takes absolute paths');
    }
    // A trailing slash follows a final symlink, as on Linux.
    const follow = followLast || path.endsWith('/');
    const pending = components(path);
    const stack: { name: string; node: DirectoryNode }[] = [];
    let current: FsNode = this.tree;
    let links = 0;
    while (pending.length > 0) {
      const name = pending.shift() ?? '';
      if (current.type !== 'directory') return { ok: false, code: 'ENOTDIR' };
      if (name === '..') {
        current = stack.pop()?.node ?? this.tree;
        continue;
      }
      const child = current.children.get(name);
      if (child === undefined) return { ok: false, code: 'ENOENT' };
      if (child.type === 'symlink' && (pending.length > 0 || follow)) {
        if (++links > MAX_SYMLINKS) return { ok: false, code: 'ELOOP' };
        if (child.target.startsWith('/')) {
          stack.length = 0;
          current = this.tree;
        }
        pending.unshift(...components(child.target));
        continue;
      }
      stack.push({ name, node: current });
      current = child;
    }
    // A trailing slash or `/.` demands a directory, as on Linux.
    if (current.type !== 'directory' && /\/\.?$/.test(path) && path !== '/') return { ok: false, code: 'ENOTDIR' };
    return { ok: true, node: current, path: `/${stack.map((s) => s.name).join('/')}` };
  }

  /** mkdir -p; returns the directory. */
  private makeDirectories(path: string): DirectoryNode {
    if (!path.startsWith('/'))
      throw this.error('mutate', path, 'EINVAL', 'the in-memory node only takes absolute paths');
    let walked = '';
    let current: DirectoryNode = this.tree;
    for (const name of components(posix.resolve(path))) {
      walked = `${walked}/${name}`;
      let child = current.children.get(name);
      if (child?.type === 'symlink') {
        const found = this.lookup('mutate', walked, true);
        if (!found.ok) throw this.error('mutate', path, found.code);
        child = found.node;
      }
      if (child === undefined) {
        child = { type: 'directory', children: new Map(), ino: this.nextInode++, birthNs: this.clock++ };
        current.children.set(name, child);
        this.entryChanged(posix.dirname(walked));
      }
      if (child.type !== 'directory') throw this.error('mutate', path, 'ENOTDIR', `${walked} is not a directory`);
      current = child;
    }
    return current;
  }

  private create(path: string, node: FsNode): void {
    const resolved = posix.resolve(path);
    const name = posix.basename(resolved);
    if (!path.startsWith('/') || name === '') throw this.error('mutate', path, 'EINVAL', 'not an absolute file path');
    const parent = this.makeDirectories(posix.dirname(resolved));
    if (parent.children.has(name)) throw this.error('mutate', path, 'EEXIST');
    parent.children.set(name, node);
    this.entryChanged(posix.dirname(resolved));
  }

  /** An entry was created or removed in directory (given as a real path, or as resolved by the caller). */
  private entryChanged(directory: string): void {
    this.notify((watched) => {
      const found = this.lookup('mutate', watched, true);
      return watched === directory || (found.ok && found.path === directory);
    });
  }

  /** A mount or unmount at mountPoint: news for the watchers of a directory at, above or below it. */
  private mountChanged(mountPoint: string): void {
    this.notify((watched) => {
      const found = this.lookup('mutate', watched, true);
      return mountChangeConcerns([mountPoint], found.ok ? [watched, found.path] : [watched]);
    });
  }

  /** Tells the watchers that watch a directory matching `concerns`, after the mutation. */
  private notify(concerns: (directory: string) => boolean): void {
    for (const watcher of this.watchers) {
      if (watcher.directories.some(concerns)) {
        queueMicrotask(() => {
          if (!watcher.signal.aborted) watcher.onChange();
        });
      }
    }
  }

  private mountTarget(path: string): string {
    const found = this.lookup('mutate', path, true);
    if (found.ok) return found.path;
    if (found.code !== 'ENOENT') throw this.error('mutate', path, found.code);
    this.makeDirectories(path);
    const created = this.lookup('mutate', path, true);
    if (!created.ok) throw this.error('mutate', path, created.code);
    return created.path;
  }
}

const DESCRIPTIONS: Readonly<Record<string, string>> = {
  ENOENT: 'no such file or directory',
  ENOTDIR: 'not a directory',
  ELOOP: 'too many levels of symbolic links',
  EEXIST: 'file already exists',
};

/** Runs a synchronous query as a promise: its result resolves, its error rejects. */
function settle<T>(query: () => T): Promise<T> {
  try {
    return Promise.resolve(query());
  } catch (error) {
    return Promise.reject(asError(error));
  }
}

function assertSize(bytes: number, path: string): void {
  if (!Number.isSafeInteger(bytes) || bytes < 0) {
    throw new NodeVolumeError('mutate', path, 'EINVAL', `size ${bytes} is not a non-negative integer`);
  }
}
