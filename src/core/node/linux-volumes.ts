// The real node: /proc/self/mountinfo for the mount table, readdir/lstat/stat/realpath for
// entries, statfs for filesystem sizes and sysfs for block device sizes. Nothing here spawns a
// process (upstream runs `blockdev --getsize64` once per block device; we read sysfs instead).

import { readFileSync } from 'node:fs';
import { lstat, readFile, readdir, realpath, stat, statfs } from 'node:fs/promises';
import { join } from 'node:path';

import { PROC_MOUNTINFO, watchLinuxChanges } from './linux-change-watch.js';
import { parseMountInfo, type MountInfoEntry } from './mountinfo.js';
import { errnoCode, errorMessage } from '../unknown-values.js';
import { NodeVolumeError, wrapSystemError } from './volume-error.js';
import type { ChangeWatch, ChangeWatchOptions, EntryInfo, EntryKind, NodeVolumes } from './volumes.js';

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

  constructor(options: LinuxVolumesOptions = {}) {
    this.mountInfoPath = options.mountInfoPath ?? PROC_MOUNTINFO;
    this.sysRoot = options.sysRoot ?? '/sys';
    this.findmnt = options.findmnt ?? 'findmnt';
    this.readMountTable = options.readMountTable ?? readMountTableSync;
    // findmnt reports every change; the re-read is for a findmnt that stopped reporting without exiting.
    this.mountTableMaxAgeMs = options.mountTableMaxAgeMs ?? 300_000;
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

  /** The mount table: the one in memory while it is known unchanged, else read (see readMountTableSync). */
  private currentMountTable(): readonly MountInfoEntry[] {
    const epoch = this.mountTableEpoch;
    const now = performance.now();
    const last = this.lastMountTable;
    const unchanged = this.runningMountWatches > 0 && last?.epoch === epoch && now - last.at < this.mountTableMaxAgeMs;
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
}
