// The real node: /proc/self/mountinfo for the mount table, readdir/lstat/stat/realpath for
// entries, statfs for filesystem sizes and sysfs for block device sizes. Nothing here spawns a
// process (upstream runs `blockdev --getsize64` once per block device; we read sysfs instead).

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
}

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
  /** The last mount table read and its parse: an unchanged table (every idle pass) is not parsed again. */
  private lastMountTable: { readonly text: string; readonly entries: readonly MountInfoEntry[] } | undefined;

  constructor(options: LinuxVolumesOptions = {}) {
    this.mountInfoPath = options.mountInfoPath ?? PROC_MOUNTINFO;
    this.sysRoot = options.sysRoot ?? '/sys';
    this.findmnt = options.findmnt ?? 'findmnt';
  }

  /** A long-lived `findmnt --poll` child for the mount table, inotify for the directories. */
  watchChanges(options: ChangeWatchOptions): ChangeWatch {
    return watchLinuxChanges({ ...options, findmnt: this.findmnt, mountInfoPath: this.mountInfoPath });
  }

  async mountPoints(): Promise<readonly MountInfoEntry[]> {
    let text: string;
    try {
      text = await readFile(this.mountInfoPath, 'utf8');
    } catch (error) {
      throw wrapSystemError('mountPoints', this.mountInfoPath, error);
    }
    if (this.lastMountTable?.text === text) return this.lastMountTable.entries;
    try {
      const entries = parseMountInfo(text);
      this.lastMountTable = { text, entries };
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
