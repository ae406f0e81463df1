// The real node: /proc/self/mountinfo for the mount table, readdir/lstat/stat/realpath for
// entries, statfs for filesystem sizes, sysfs for block device sizes, and sysfs, the udev database
// and superblocks for volume identities. Nothing here spawns a process (upstream runs
// `blockdev --getsize64` once per block device; we read sysfs instead).

import { constants, readFileSync, readdirSync, realpathSync, statSync, type BigIntStats } from 'node:fs';
import { lstat, open, readFile, readdir, realpath, stat, statfs } from 'node:fs/promises';
import { readSmallFile, readWholeSmallFile } from './small-file.js';
import { dirname, join } from 'node:path';

import {
  SUPERBLOCK_REGIONS,
  SUPERBLOCK_SPAN,
  attributeValue,
  devInoValue,
  deviceNodeName,
  fsUuidValue,
  loopBackingValue,
  makeIdentity,
  type DirectoryStamp,
  type LoopBackingNumbers,
  normalizeUuid,
  parseDecimal,
  parseDeviceNumber,
  parsePartitionNumber,
  parseUdevProperties,
  parseUevent,
  partitionValue,
  superblockUuid,
  type SuperblockType,
} from './identity.js';
import { PROC_MOUNTINFO, watchLinuxChanges } from './linux-change-watch.js';
import { parseMountInfo, type MountInfoEntry } from './mountinfo.js';
import { errnoCode, errorMessage } from '../unknown-values.js';
import { NodeVolumeError, wrapSystemError } from './volume-error.js';
import type {
  ChangeWatch,
  ChangeWatchOptions,
  EntryInfo,
  EntryKind,
  FilesystemUsage,
  IdentitySource,
  NodeVolumes,
  VolumeIdentity,
} from './volumes.js';

export interface LinuxVolumesOptions {
  /** The mountinfo file to read; default `/proc/self/mountinfo`. */
  readonly mountInfoPath?: string;
  /** Where sysfs is mounted; default `/sys`. Block sizes come from `<sysRoot>/dev/block/M:m/size`. */
  readonly sysRoot?: string;
  /** The util-linux findmnt that reports mount-table changes; default `findmnt` from PATH. */
  readonly findmnt?: string;
  /** Reads the mount table's text; default a synchronous read (tests count the reads). */
  readonly readMountTable?: (path: string) => string;
  /** Longest time an unchanged mount table is answered from memory while a change watch runs; default 5 min. */
  readonly mountTableMaxAgeMs?: number;
  /**
   * Where udev keeps its database; default `/run/udev` (records in `<udevRoot>/data/bM:m`). Often
   * absent in containers: identities then come from sysfs and superblocks alone.
   */
  readonly udevRoot?: string;
  /** Where device nodes are; default `/dev`: superblocks are read from `<devRoot>/<DEVNAME>`, names from `<devRoot>/disk/by-id`. */
  readonly devRoot?: string;
}

/**
 * procfs makes a page of text per read(2): an asynchronous read of a table of 1,000 mounts is 50
 * threadpool round trips, each a wake-up of the event loop; a synchronous one is the same 50 reads
 * in one go. procfs answers from memory, so the loop waits for no device.
 */
const readMountTableSync = (path: string): string => readFileSync(path, 'utf8');

/** sysfs reports block device sizes in 512-byte sectors whatever the device's block size. */
export const SECTOR_BYTES = 512;

/**
 * Splits a Linux `dev_t` into major and minor with glibc's 64-bit encoding (`gnu_dev_major` /
 * `gnu_dev_minor`): major = bits 8–19 and 44–63, minor = bits 0–7 and 20–43. The masks matter
 * with unbounded bigints: `(rdev >> 12) & ~0xff` alone would pull the major's high bits into the
 * minor.
 */
export function decodeDeviceNumber(rdev: bigint): { major: number; minor: number } {
  const major = ((rdev & 0x0000_0000_000f_ff00n) >> 8n) | ((rdev & 0xffff_f000_0000_0000n) >> 32n);
  const minor = (rdev & 0x0000_0000_0000_00ffn) | ((rdev & 0x0000_0fff_fff0_0000n) >> 12n);
  return { major: Number(major), minor: Number(minor) };
}

/** The inverse of decodeDeviceNumber (glibc's `makedev`); for tests. */
export function encodeDeviceNumber(major: number, minor: number): bigint {
  const ma = BigInt(major);
  const mi = BigInt(minor);
  return ((ma & 0xfffn) << 8n) | ((ma & 0xffff_f000n) << 32n) | (mi & 0xffn) | ((mi & 0xffff_ff00n) << 12n);
}

/** `major:minor` of a dev_t. */
export function deviceName(dev: bigint): string {
  const { major, minor } = decodeDeviceNumber(dev);
  return `${major}:${minor}`;
}

let birthTimesKept: boolean | undefined;

/**
 * A directory's (or a loop backing file's) inode and birth time. Without statx (old kernels,
 * strict seccomp profiles) libuv reports ctime as the birth time, which moves with every change:
 * then 0. procfs keeps no birth time, so a non-zero one for /proc/self says which is the case
 * (once per process).
 */
export function directoryStamp(stats: BigIntStats): DirectoryStamp {
  if (birthTimesKept === undefined) {
    try {
      birthTimesKept = statSync('/proc/self', { bigint: true }).birthtimeNs === 0n;
    } catch {
      birthTimesKept = false;
    }
  }
  return { ino: stats.ino, birthNs: birthTimesKept ? stats.birthtimeNs : 0n };
}

/** sysfs attributes fit in a page; a longer one is not a value to trust. */
const ATTRIBUTE_BYTES = 4096;
/** A udev record is a few dozen short lines. */
const UDEV_RECORD_BYTES = 16_384;

/** A sysfs attribute's text, or undefined when missing, unreadable or longer than an attribute can be. */
function readAttribute(path: string): string | undefined {
  return readWholeSmallFile(path, ATTRIBUTE_BYTES);
}

/**
 * The filesystem UUID in the superblock of the device (or image file) at path: at most
 * SUPERBLOCK_SPAN bytes read, in SUPERBLOCK_REGIONS. With expectedDevice, only when path is that
 * block device (a /dev of another node, e.g. a container's, may hold other nodes under the same
 * names). Undefined when it cannot be read or holds no known superblock.
 */
export async function readSuperblockUuid(
  path: string,
  expectedDevice?: string,
): Promise<{ readonly type: SuperblockType; readonly uuid: string } | undefined> {
  let handle;
  try {
    handle = await open(path, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch {
    return undefined;
  }
  try {
    if (expectedDevice !== undefined) {
      const stats = await handle.stat({ bigint: true });
      if (!stats.isBlockDevice() || deviceName(stats.rdev) !== expectedDevice) return undefined;
    }
    const image = Buffer.alloc(SUPERBLOCK_SPAN);
    for (const { offset, length } of SUPERBLOCK_REGIONS) {
      // Short reads happen at the end of a small device; what is not read stays zero.
      for (let done = 0, n = -1; n !== 0 && done < length; done += n) {
        ({ bytesRead: n } = await handle.read(image, offset + done, length - done, offset + done));
      }
    }
    return superblockUuid(image);
  } catch {
    return undefined;
  } finally {
    await handle.close().catch(() => undefined);
  }
}

/**
 * The mount on top at mountPoint: the one at that path no other one there is mounted on (mount
 * order and table order can differ after moves); the last one when that says nothing.
 */
function topMountAt(table: readonly MountInfoEntry[], mountPoint: string): MountInfoEntry | undefined {
  const here = table.filter((m) => m.mountPoint === mountPoint);
  const tops = here.filter((m) => !here.some((other) => other.parentId === m.mountId && other !== m));
  return tops.length === 1 ? tops[0] : here.at(-1);
}

/** Path errors that mean "nothing usable is there" rather than a failure. */
const MISSING_CODES = new Set(['ENOENT', 'ENOTDIR', 'ELOOP']);

function isMissing(error: unknown): boolean {
  const code = errnoCode(error);
  return code !== undefined && MISSING_CODES.has(code);
}

export class LinuxVolumes implements NodeVolumes {
  readonly mountInfoPath: string;
  readonly sysRoot: string;
  readonly findmnt: string;
  private readonly readMountTable: (path: string) => string;
  private readonly mountTableMaxAgeMs: number;
  /**
   * The last mount table read, its parse, and the mount-table epoch it was read in. The epoch
   * moves on every change a running findmnt reports (anywhere, not only the changes that start a
   * pass) and whenever a watch starts or ends: while a watch runs and the epoch has not moved, the
   * table is the one the kernel has, and an idle pass does not read it again.
   */
  private lastMountTable:
    | {
        readonly text: string;
        readonly entries: readonly MountInfoEntry[];
        readonly epoch: number;
        readonly at: number;
      }
    | undefined;
  private mountTableEpoch = 0;
  private runningMountWatches = 0;
  readonly udevRoot: string;
  readonly devRoot: string;
  /**
   * by-id names per device (`major:minor` → first name in sorted order), kept while the directory
   * is unchanged: a pass over 1,000 volumes lists it once. Only names listed well after the
   * directory's last change are kept (a change in the same timestamp tick would go unseen).
   */
  private byIdNames: { readonly stamp: string; readonly names: ReadonlyMap<string, string> } | undefined;

  constructor(options: LinuxVolumesOptions = {}) {
    this.mountInfoPath = options.mountInfoPath ?? PROC_MOUNTINFO;
    this.sysRoot = options.sysRoot ?? '/sys';
    this.findmnt = options.findmnt ?? 'findmnt';
    this.readMountTable = options.readMountTable ?? readMountTableSync;
    // findmnt reports every change; the re-read is for a findmnt that stopped reporting without exiting.
    this.mountTableMaxAgeMs = options.mountTableMaxAgeMs ?? 300_000;
    this.udevRoot = options.udevRoot ?? '/run/udev';
    this.devRoot = options.devRoot ?? '/dev';
  }

  /** A long-lived `findmnt --poll` child for the mount table, inotify for the directories. */
  watchChanges(options: ChangeWatchOptions): ChangeWatch {
    const watch = watchLinuxChanges({
      ...options,
      findmnt: this.findmnt,
      mountInfoPath: this.mountInfoPath,
      onMountTableChange: () => {
        this.mountTableEpoch++;
      },
    });
    void watch.ready.then((outcome) => {
      if (!outcome.ok) return;
      this.runningMountWatches++;
      this.mountTableEpoch++;
      void watch.done.then(() => {
        this.runningMountWatches--;
        this.mountTableEpoch++;
      });
    });
    return watch;
  }

  mountPoints(): Promise<readonly MountInfoEntry[]> {
    // A throw in the executor is the rejection.
    return new Promise((resolve) => {
      resolve(this.currentMountTable());
    });
  }

  /**
   * The mount table: the one in memory while it is known unchanged, else read (see
   * readMountTableSync); fresh: read it whatever is known.
   */
  private currentMountTable(fresh = false): readonly MountInfoEntry[] {
    const epoch = this.mountTableEpoch;
    const now = performance.now();
    const last = this.lastMountTable;
    const unchanged =
      !fresh && this.runningMountWatches > 0 && last?.epoch === epoch && now - last.at < this.mountTableMaxAgeMs;
    if (unchanged) return last.entries;
    let text: string;
    try {
      text = this.readMountTable(this.mountInfoPath);
    } catch (error) {
      throw wrapSystemError('mountPoints', this.mountInfoPath, error);
    }
    if (last?.text === text) {
      this.lastMountTable = { ...last, epoch, at: now };
      return last.entries;
    }
    try {
      const entries = parseMountInfo(text);
      this.lastMountTable = { text, entries, epoch, at: now };
      return entries;
    } catch (error) {
      const detail = errorMessage(error);
      throw new NodeVolumeError('mountPoints', this.mountInfoPath, 'EINVAL', detail, { cause: error });
    }
  }

  async listDirectory(path: string): Promise<readonly string[]> {
    try {
      return await readdir(path);
    } catch (error) {
      throw wrapSystemError('listDirectory', path, error);
    }
  }

  async entryInfo(path: string): Promise<EntryInfo> {
    let isSymlink: boolean;
    try {
      isSymlink = (await lstat(path)).isSymbolicLink();
    } catch (error) {
      if (isMissing(error)) return { kind: 'missing', isSymlink: false };
      throw wrapSystemError('entryInfo', path, error);
    }
    try {
      const stats = await stat(path);
      const kind: EntryKind = stats.isDirectory() ? 'directory' : stats.isBlockDevice() ? 'block-device' : 'other';
      return { kind, isSymlink, realPath: await realpath(path) };
    } catch (error) {
      // A dangling or looping link, or the entry vanished between the calls.
      if (isMissing(error)) return { kind: 'missing', isSymlink };
      throw wrapSystemError('entryInfo', path, error);
    }
  }

  async filesystemCapacity(path: string): Promise<number> {
    try {
      const info = await statfs(path, { bigint: true });
      return Number(info.blocks * info.bsize);
    } catch (error) {
      throw wrapSystemError('filesystemCapacity', path, error);
    }
  }

  async filesystemUsage(path: string): Promise<FilesystemUsage> {
    try {
      const info = await statfs(path, { bigint: true });
      return {
        capacityBytes: Number(info.blocks * info.bsize),
        usedBytes: Number((info.blocks - info.bfree) * info.bsize),
        availableBytes: Number(info.bavail * info.bsize),
        inodes: Number(info.files),
        inodesUsed: Number(info.files - info.ffree),
        inodesFree: Number(info.ffree),
      };
    } catch (error) {
      throw wrapSystemError('filesystemUsage', path, error);
    }
  }

  async blockDeviceCapacity(path: string): Promise<number> {
    let rdev: bigint;
    try {
      const stats = await stat(path, { bigint: true });
      if (!stats.isBlockDevice()) {
        throw new NodeVolumeError('blockDeviceCapacity', path, 'ENOTBLK', 'not a block device');
      }
      rdev = stats.rdev;
    } catch (error) {
      throw wrapSystemError('blockDeviceCapacity', path, error);
    }
    const { major, minor } = decodeDeviceNumber(rdev);
    const sizePath = join(this.sysRoot, 'dev', 'block', `${major}:${minor}`, 'size');
    let text: string;
    try {
      text = await readFile(sizePath, 'utf8');
    } catch (error) {
      const code = errnoCode(error) ?? 'EIO';
      throw new NodeVolumeError(
        'blockDeviceCapacity',
        path,
        code,
        `cannot read the size of block device ${major}:${minor} from ${sizePath}`,
        { cause: error },
      );
    }
    const sectors = text.trim();
    if (!/^\d+$/.test(sectors)) {
      throw new NodeVolumeError(
        'blockDeviceCapacity',
        path,
        'EINVAL',
        `${sizePath} holds ${JSON.stringify(text)}, not a sector count`,
      );
    }
    return Number(BigInt(sectors) * BigInt(SECTOR_BYTES));
  }

  /**
   * Block device: its WWID, serial or loop backing (blockDeviceIdentity). Directory: the UUID of
   * the filesystem mounted on it (udev's, else its superblock's), else device, inode and birth time.
   */
  async volumeIdentity(path: string): Promise<VolumeIdentity | undefined> {
    let stats: BigIntStats;
    try {
      stats = await stat(path, { bigint: true });
      if (stats.isBlockDevice()) return await this.blockDeviceIdentity(deviceName(stats.rdev));
      if (!stats.isDirectory()) {
        throw new NodeVolumeError('volumeIdentity', path, 'ENOTBLK', 'neither a directory nor a block device');
      }
    } catch (error) {
      throw wrapSystemError('volumeIdentity', path, error);
    }
    const device = deviceName(stats.dev);
    let realPath: string;
    try {
      realPath = await realpath(path);
    } catch (error) {
      throw wrapSystemError('volumeIdentity', path, error);
    }
    const mount = this.mountAt(path, realPath, device);
    const filesystem = mount === undefined ? undefined : await this.filesystemUuid(mount);
    if (mount !== undefined && filesystem !== undefined) {
      return makeIdentity(
        'fs-uuid',
        fsUuidValue(filesystem.uuid, mount.root, directoryStamp(stats)),
        filesystem.device,
      );
    }
    return makeIdentity('dev-ino', devInoValue(device, directoryStamp(stats)), device);
  }

  /**
   * The identity of block device `major:minor` (what volumeIdentity answers for a block device):
   * its WWID, else its serial, else its loop device's backing file, from sysfs and the udev
   * database; a partition's is its disk's with `-part<N>`. Undefined when the node offers none.
   */
  async blockDeviceIdentity(device: string): Promise<VolumeIdentity | undefined> {
    const base = join(this.sysRoot, 'dev', 'block', device);
    const partition = parsePartitionNumber(readAttribute(join(base, 'partition')));
    const disk = partition === undefined ? { dir: base, device } : this.parentDisk(base);
    if (disk === undefined) return undefined;
    const found = await this.diskIdentity(disk.dir, disk.device);
    if (found === undefined) return undefined;
    const value = partition === undefined ? found.value : partitionValue(found.value, partition);
    return makeIdentity(found.source, value, device, this.byIdName(device));
  }

  /** The disk holding a partition: /sys/dev/block/M:m links to the partition's directory, inside its disk's. */
  private parentDisk(partitionDir: string): { dir: string; device: string } | undefined {
    let real: string;
    try {
      real = realpathSync(partitionDir);
    } catch {
      return undefined;
    }
    const dir = dirname(real);
    const device = parseDeviceNumber(readAttribute(join(dir, 'dev')));
    return device === undefined ? undefined : { dir, device };
  }

  private async diskIdentity(
    dir: string,
    device: string,
  ): Promise<{ source: IdentitySource; value: string } | undefined> {
    // SCSI/SATA disks have device/wwid; NVMe namespaces have wwid (their device is the controller).
    const wwid =
      attributeValue(readAttribute(join(dir, 'device', 'wwid'))) ?? attributeValue(readAttribute(join(dir, 'wwid')));
    if (wwid !== undefined) return { source: 'wwid', value: wwid };
    const udev = this.udevProperties(device);
    // virtio-blk has its serial on the disk, SCSI on the device.
    const serial =
      attributeValue(readAttribute(join(dir, 'device', 'serial'))) ??
      attributeValue(readAttribute(join(dir, 'serial'))) ??
      attributeValue(udev?.get('ID_SERIAL'));
    if (serial !== undefined) return { source: 'serial', value: serial };
    const loop = await this.loopBacking(dir, udev);
    return loop === undefined ? undefined : { source: 'loop', value: loop };
  }

  /**
   * `<major:minor>:<inode>:<birth>` of an attached loop device's backing file (loopBackingValue).
   * sysfs has only its path (loop/backing_file, there while attached); udev has device and inode
   * as the kernel reports them (ID_LOOP_BACKING_*) but no birth; a stat of the path has all three
   * as this process sees it. A file that cannot be stat'ed here (deleted, another mount namespace)
   * has birth `unknown`: it could be a newer file with the old numbers, so it never matches a
   * recorded birth.
   */
  private async loopBacking(dir: string, udev: ReadonlyMap<string, string> | undefined): Promise<string | undefined> {
    const file = readAttribute(join(dir, 'loop', 'backing_file'))?.replace(/\n$/, '');
    if (file === undefined) return undefined;
    const udevDevice = parseDeviceNumber(udev?.get('ID_LOOP_BACKING_DEVICE'));
    const udevInode = parseDecimal(udev?.get('ID_LOOP_BACKING_INODE'));
    const fromUdev =
      udevDevice !== undefined && udevInode !== undefined ? { device: udevDevice, ino: udevInode } : undefined;
    // A deleted file's path may name a newer file by now.
    let fromStat: (LoopBackingNumbers & DirectoryStamp) | undefined;
    if (file.startsWith('/') && !file.endsWith(' (deleted)')) {
      const stats = await stat(file, { bigint: true }).catch(() => undefined);
      const usable = stats !== undefined && (stats.isFile() || stats.isBlockDevice());
      fromStat = usable ? { device: deviceName(stats.dev), ...directoryStamp(stats) } : undefined;
    }
    return loopBackingValue(fromUdev, fromStat);
  }

  /** The `E:` properties of udev's record of a block device; undefined without one (no udev here). */
  private udevProperties(device: string): ReadonlyMap<string, string> | undefined {
    const read = readSmallFile(join(this.udevRoot, 'data', `b${device}`), UDEV_RECORD_BYTES);
    return read === undefined ? undefined : parseUdevProperties(read.text, read.truncated);
  }

  /** The first name in sorted order in <devRoot>/disk/by-id whose link resolves to the block device. */
  private byIdName(device: string): string | undefined {
    const dir = join(this.devRoot, 'disk', 'by-id');
    let stats: BigIntStats;
    try {
      stats = statSync(dir, { bigint: true });
    } catch {
      this.byIdNames = undefined;
      return undefined;
    }
    const stamp = `${stats.ino}:${stats.mtimeNs}:${stats.ctimeNs}`;
    if (this.byIdNames?.stamp === stamp) return this.byIdNames.names.get(device);
    const names = new Map<string, string>();
    let entries: string[];
    try {
      entries = readdirSync(dir).sort();
    } catch {
      return undefined;
    }
    for (const name of entries) {
      try {
        const target = statSync(join(dir, name), { bigint: true });
        const key = deviceName(target.rdev);
        if (target.isBlockDevice() && !names.has(key)) names.set(key, name);
      } catch {
        // A dangling link: no device to name.
      }
    }
    const lastChangeMs = Number((stats.mtimeNs > stats.ctimeNs ? stats.mtimeNs : stats.ctimeNs) / 1_000_000n);
    this.byIdNames = Date.now() - lastChangeMs > 2000 ? { stamp, names } : undefined;
    return names.get(device);
  }

  /**
   * The mount on top at realPath when it is the filesystem the path is on (device as stat reports
   * it): a table answered from memory may be stale, and a mount hidden under a later mount on a
   * parent directory is listed but not what the path shows.
   */
  private mountAt(path: string, realPath: string, device: string): MountInfoEntry | undefined {
    let mount = topMountAt(this.mountTableFor(path, false), realPath);
    if (mount !== undefined && mount.device !== device) mount = topMountAt(this.mountTableFor(path, true), realPath);
    return mount?.device === device ? mount : undefined;
  }

  private mountTableFor(path: string, fresh: boolean): readonly MountInfoEntry[] {
    try {
      return this.currentMountTable(fresh);
    } catch (error) {
      const code = errnoCode(error) ?? 'EIO';
      const detail = `cannot read the mount table ${this.mountInfoPath}: ${errorMessage(error)}`;
      throw new NodeVolumeError('volumeIdentity', path, code, detail, { cause: error });
    }
  }

  /**
   * The UUID of a mount's filesystem with the block device it is on: udev's ID_FS_UUID, else the
   * superblock's. btrfs and others show an anonymous `0:N` in mountinfo; their device is the source.
   */
  private async filesystemUuid(mount: MountInfoEntry): Promise<{ uuid: string; device: string } | undefined> {
    let device = mount.device;
    let uevent = readAttribute(join(this.sysRoot, 'dev', 'block', device, 'uevent'));
    if (uevent === undefined && mount.source.startsWith('/')) {
      const source = await stat(mount.source, { bigint: true }).catch(() => undefined);
      if (source?.isBlockDevice() === true) {
        device = deviceName(source.rdev);
        uevent = readAttribute(join(this.sysRoot, 'dev', 'block', device, 'uevent'));
      }
    }
    const fromUdev = this.udevProperties(device)?.get('ID_FS_UUID');
    if (fromUdev !== undefined) {
      const uuid = normalizeUuid(fromUdev) ?? attributeValue(fromUdev);
      if (uuid !== undefined) return { uuid, device };
    }
    const node = deviceNodeName(uevent === undefined ? undefined : parseUevent(uevent).get('DEVNAME'));
    if (node === undefined) return undefined;
    const superblock = await readSuperblockUuid(join(this.devRoot, node), device);
    return superblock === undefined ? undefined : { uuid: superblock.uuid, device };
  }
}
