// The block devices of the node as the disk rules see them (DeviceFacts in devices/model.ts):
// sysfs for what the kernel knows, the udev database for the bus, /dev/disk/by-id for names, the
// mount table and /proc/swaps for what uses a device, and a read-only look at both ends of each
// device for signatures. Nothing here spawns a process or writes to a device; the house style of
// linux-volumes.ts (small synchronous reads of memory filesystems, no `blkid`/`lsblk`).

import { createHash } from 'node:crypto';
import { constants, readFileSync, readdirSync, readlinkSync, realpathSync, statSync } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { readWholeSmallFile } from './small-file.js';
import { basename, dirname, join, relative, resolve, sep } from 'node:path';

import { readGptEntries, readGptHeader } from '../devices/gpt.js';
import type { DeviceFacts, DeviceType, Signature, Transport } from '../devices/model.js';
import { errnoCode, errorMessage } from '../unknown-values.js';
import { parseDeviceNumber, parseUdevProperties, parseUevent } from './identity.js';
import { SECTOR_BYTES, deviceName } from './linux-volumes.js';
import { decodeMountInfoField, parseMountInfo } from './mountinfo.js';

/** What devices() may reuse from an earlier answer (see LinuxBlockDevices.devices). */
export interface DevicesOptions {
  /** The answer of an earlier devices() call of the same inventory. */
  readonly previous?: readonly DeviceFacts[];
}

/** The block devices of a node, read without writing to any of them. */
export interface BlockDeviceInventory {
  /** Every block device the kernel lists, sorted by name; devices that vanish while read are left out. */
  devices(options?: DevicesOptions): Promise<readonly DeviceFacts[]>;
}

/** A cheap fingerprint of the device list, polled between passes to run one when it moves. */
export interface BlockDeviceChangeStamp {
  /**
   * Changes when a device comes or goes (a partition included) or a device's size changes; an
   * implementation may notice more (see LinuxBlockDevices.changeStamp for what it does not). It
   * does not change when a device's contents do (a `mkfs`).
   */
  changeStamp(): Promise<string>;
}

/** The GPT partition name of the partitions this agent carves (DeviceFacts.madeByAgent). */
export const AGENT_PARTITION_NAME = 'lvp-carved';

/** The signature of a device that could not be opened or read (it counts as not blank). */
export const UNREADABLE: Signature = { type: 'unreadable', offset: 0 };

/** How much of each end of a device the probe reads. */
export const PROBE_WINDOW_BYTES = 1024 * 1024;

/** Devices probed at once: enough to overlap slow disks, few enough not to fill libuv's threadpool (4). */
const PROBE_CONCURRENCY = 4;

/** sysfs attributes fit in a page; a longer one is not a value to trust. */
const ATTRIBUTE_BYTES = 4096;
/** A udev record is a few dozen short lines. */
const UDEV_RECORD_BYTES = 16_384;

export class BlockDeviceInventoryError extends Error {
  constructor(
    readonly path: string,
    readonly code: string,
    detail: string,
    options?: ErrorOptions,
  ) {
    super(`${path}: ${detail}`, options);
    this.name = 'BlockDeviceInventoryError';
  }
}

/** A sysfs attribute, trimmed; undefined when missing, unreadable or empty. */
function attribute(dir: string, name: string): string | undefined {
  const text = readWholeSmallFile(join(dir, name), ATTRIBUTE_BYTES)?.trim();
  return text === '' ? undefined : text;
}

/** Names in a directory, sorted; none when it cannot be listed. */
function listNames(dir: string): string[] {
  try {
    return readdirSync(dir).sort();
  } catch {
    return [];
  }
}

function isTrue(flag: string | undefined): boolean {
  return flag === '1';
}

// ---- Signatures ---------------------------------------------------------------------------------

/** The bytes the probe read from a device: its first and last PROBE_WINDOW_BYTES (one window when small). */
export interface DeviceImage {
  readonly sizeBytes: number;
  readonly windows: readonly { readonly offset: number; readonly bytes: Buffer }[];
}

/** Where the probe reads: both ends, or all of a device smaller than two windows. */
export function probeWindows(sizeBytes: number): { offset: number; length: number }[] {
  if (sizeBytes <= 0) return [];
  if (sizeBytes <= 2 * PROBE_WINDOW_BYTES) return [{ offset: 0, length: sizeBytes }];
  return [
    { offset: 0, length: PROBE_WINDOW_BYTES },
    { offset: sizeBytes - PROBE_WINDOW_BYTES, length: PROBE_WINDOW_BYTES },
  ];
}

/** length bytes at offset when the image holds them; undefined when they were not read. */
function bytesAt(image: DeviceImage, offset: number, length: number): Buffer | undefined {
  if (offset < 0) return undefined;
  for (const window of image.windows) {
    const start = offset - window.offset;
    if (start >= 0 && start + length <= window.bytes.length) return window.bytes.subarray(start, start + length);
  }
  return undefined;
}

function hasMagic(image: DeviceImage, offset: number, magic: Buffer): boolean {
  return bytesAt(image, offset, magic.length)?.equals(magic) === true;
}

const latin1 = (text: string): Buffer => Buffer.from(text, 'latin1');

/**
 * A signature found, and which bytes it accounts for when looking for `data`: a filesystem,
 * volume or swap owns the whole device (no `covers`); a partition table only its own sectors
 * (the rest belongs to the partitions).
 */
interface Found extends Signature {
  readonly covers?: readonly [number, number];
}

/** Offsets of a magic in the image, first to last. */
function magicOffsets(image: DeviceImage, offsets: readonly number[], magic: Buffer): number[] {
  return offsets.filter((offset) => hasMagic(image, offset, magic));
}

function filesystemSignatures(image: DeviceImage): Found[] {
  const found: Found[] = [];
  const add = (type: string, offsets: readonly number[]): void => {
    for (const offset of offsets) found.push({ type, offset });
  };
  add('ext4', magicOffsets(image, [1080], Buffer.from([0x53, 0xef]))); // s_magic 0xEF53, ext2/3/4 alike
  add('xfs', magicOffsets(image, [0], latin1('XFSB')));
  add('btrfs', magicOffsets(image, [65_600], latin1('_BHRfS_M')));
  // The swap header ends its first page: 4 KiB pages, or 8, 16 and 64 KiB on other architectures.
  const swapOffsets = [4096, 8192, 16_384, 65_536].map((page) => page - 10);
  add('swap', [
    ...magicOffsets(image, swapOffsets, latin1('SWAPSPACE2')),
    ...magicOffsets(image, swapOffsets, latin1('SWAP-SPACE')),
  ]);
  // The LVM label may be in any of the first four sectors; wipefs erases its type string (+24).
  const labels = magicOffsets(image, [0, 512, 1024, 1536], latin1('LABELONE'));
  add(
    'LVM2_member',
    labels.filter((label) => hasMagic(image, label + 24, latin1('LVM2 001'))).map((label) => label + 24),
  );
  add('crypto_LUKS', magicOffsets(image, [0], Buffer.from('LUKS\xba\xbe', 'latin1')));
  // LUKS2 keeps a second header at one of these offsets: found even when the first is wiped.
  const luks2Secondary = [16, 32, 64, 128, 256, 512, 1024, 2048, 4096].map((k) => k * 1024);
  add('crypto_LUKS', magicOffsets(image, luks2Secondary, Buffer.from('SKUL\xba\xbe', 'latin1')));
  add('linux_raid_member', raidOffsets(image));
  add('iso9660', magicOffsets(image, [32_769], latin1('CD001')));
  add('zfs_member', zfsOffsets(image).slice(0, 1));
  return [...found, ...bootSectorSignatures(image)];
}

/** md superblocks: v1.2 at 4 KiB, v1.1 at 0, v1.0 near the end (4 KiB aligned), v0.90 in the last 64 KiB block. */
function raidOffsets(image: DeviceImage): number[] {
  const magic = 0xa92b4efc;
  const size = image.sizeBytes;
  const le = (offset: number): boolean => bytesAt(image, offset, 4)?.readUInt32LE() === magic;
  // v0.90 is written in the host's byte order.
  const either = (offset: number): boolean => le(offset) || bytesAt(image, offset, 4)?.readUInt32BE() === magic;
  const offsets: number[] = [];
  if (le(4096)) offsets.push(4096);
  if (le(0)) offsets.push(0);
  const v10 = Math.floor((size - 8192) / 4096) * 4096;
  if (size >= 12_288 && le(v10)) offsets.push(v10);
  const v090 = Math.floor(size / 65_536) * 65_536 - 65_536;
  if (size >= 131_072 && either(v090)) offsets.push(v090);
  return offsets;
}

/** ZFS uberblocks (magic 0x00bab10c as a 64-bit word, either order) in the second half of each of the four labels. */
function zfsOffsets(image: DeviceImage): number[] {
  const label = 256 * 1024;
  const aligned = Math.floor(image.sizeBytes / label) * label;
  const labels = aligned >= 4 * label ? [0, label, aligned - 2 * label, aligned - label] : [0, label];
  const offsets: number[] = [];
  for (const start of labels) {
    for (let offset = start + label / 2; offset < start + label; offset += 1024) {
      if (isUberblockMagic(image, offset)) offsets.push(offset);
    }
  }
  return offsets;
}

/** Whether the 64-bit word at offset is 0x00bab10c in either order (two 32-bit reads: no BigInt, no view). */
function isUberblockMagic(image: DeviceImage, offset: number): boolean {
  for (const { offset: windowOffset, bytes } of image.windows) {
    const start = offset - windowOffset;
    if (start < 0 || start + 8 > bytes.length) continue;
    const low = bytes.readUInt32LE(start);
    const high = bytes.readUInt32LE(start + 4);
    return (low === 0x00bab10c && high === 0) || (low === 0 && high === 0x0cb1ba00);
  }
  return false;
}

/** FAT and NTFS boot sectors (they end with 0x55AA as an MBR does: then it is theirs, not a dos table). */
function bootSectorSignatures(image: DeviceImage): Found[] {
  const bootable = hasMagic(image, 510, Buffer.from([0x55, 0xaa]));
  const found: Found[] = [];
  const fat = magicOffsets(image, [54, 82], latin1('FAT'));
  if (bootable && fat[0] !== undefined) found.push({ type: 'vfat', offset: fat[0] });
  if (hasMagic(image, 3, latin1('NTFS    '))) found.push({ type: 'ntfs', offset: 3 });
  return found;
}

/** The byte range of the partition entries a GPT header names, when the image holds them. */
function gptEntries(image: DeviceImage, header: number, sector: number): [number, number] | undefined {
  const fields = bytesAt(image, header + 72, 16);
  if (fields === undefined) return undefined;
  const start = Number(fields.readBigUInt64LE(0)) * sector;
  const end = start + fields.readUInt32LE(8) * fields.readUInt32LE(12);
  return bytesAt(image, start, end - start) !== undefined && end > start ? [start, end] : undefined;
}

/** The start and name of each used entry of the primary table, when its header and entries check out. */
function gptPartitionNames(image: DeviceImage, block: number): Signature['partitions'] {
  const headerBytes = bytesAt(image, block, block);
  const header = headerBytes === undefined ? undefined : readGptHeader(headerBytes, block);
  if (header === undefined) return undefined;
  const entryBytes = bytesAt(image, header.entriesOffset, header.entriesBytes);
  const entries = entryBytes === undefined ? undefined : readGptEntries(entryBytes, header, block);
  return entries?.map(({ startBytes, name }) => ({ startBytes, name }));
}

function partitionTableSignatures(image: DeviceImage, bootSector: boolean): Found[] {
  const found: Found[] = [];
  // Any 0x55AA not a filesystem's boot sector counts as a dos table (a protective MBR included).
  if (!bootSector && hasMagic(image, 510, Buffer.from([0x55, 0xaa]))) {
    found.push({ type: 'dos', offset: 510, covers: [0, 512] });
  }
  for (const sector of [512, 4096]) {
    if (hasMagic(image, sector, latin1('EFI PART'))) {
      const entries = gptEntries(image, sector, sector);
      const covers = [0, Math.max(2 * sector, entries?.[1] ?? 0)] as const;
      const partitions = gptPartitionNames(image, sector);
      found.push({ type: 'gpt', offset: sector, covers, ...(partitions === undefined ? {} : { partitions }) });
    }
    const backup = image.sizeBytes - sector;
    if (backup > sector && hasMagic(image, backup, latin1('EFI PART'))) {
      const entries = gptEntries(image, backup, sector);
      found.push({ type: 'gpt-backup', offset: backup, covers: [entries?.[0] ?? backup, image.sizeBytes] });
    }
  }
  return found;
}

/** The first non-zero byte of the image outside the given ranges, or undefined. */
function firstUnexplainedByte(image: DeviceImage, covered: readonly (readonly [number, number])[]): number | undefined {
  const zeros = Buffer.alloc(4096);
  for (const window of image.windows) {
    for (let chunk = 0; chunk < window.bytes.length; chunk += zeros.length) {
      const bytes = window.bytes.subarray(chunk, chunk + zeros.length);
      // Most of a device is zeros or far from any table: compare whole chunks natively first.
      if (bytes.equals(zeros.subarray(0, bytes.length))) continue;
      for (let i = 0; i < bytes.length; i++) {
        const offset = window.offset + chunk + i;
        if (bytes[i] !== 0 && !covered.some(([start, end]) => offset >= start && offset < end)) return offset;
      }
    }
  }
  return undefined;
}

/**
 * The signatures in an image of a device, by offset, then `data` at the first non-zero byte no
 * signature explains (none when a filesystem, volume or swap owns the device). An image of zeros
 * has none: the device is blank as far as the probe can tell.
 */
export function detectSignatures(image: DeviceImage): Signature[] {
  const contents = filesystemSignatures(image);
  const bootSector = contents.some((s) => s.type === 'vfat' || s.type === 'ntfs');
  const found = [...contents, ...partitionTableSignatures(image, bootSector)].sort((a, b) => a.offset - b.offset);
  const signatures: Signature[] = found.map(({ type, offset, partitions }) =>
    partitions === undefined ? { type, offset } : { type, offset, partitions },
  );
  if (found.every((s) => s.covers !== undefined)) {
    const data = firstUnexplainedByte(
      image,
      found.flatMap((s) => (s.covers === undefined ? [] : [s.covers])),
    );
    if (data !== undefined) signatures.push({ type: 'data', offset: data });
  }
  return signatures;
}

/** Reads the probe windows of an open device; bytes past a short read (the device shrank) stay zero. */
export async function readDeviceImage(handle: FileHandle, sizeBytes: number): Promise<DeviceImage> {
  const windows = [];
  for (const { offset, length } of probeWindows(sizeBytes)) {
    const bytes = Buffer.alloc(length);
    for (let done = 0, n = -1; n !== 0 && done < length; done += n) {
      ({ bytesRead: n } = await handle.read(bytes, done, length - done, offset + done));
    }
    windows.push({ offset, bytes });
  }
  return { sizeBytes, windows };
}

// ---- The node's view of devices: mounts, swaps, by-id names ------------------------------------

/** What is read once per pass and shared by every device. */
interface NodeContext {
  /** Mount points per `major:minor`, and per source path (btrfs shows an anonymous `0:N` device). */
  readonly mountsByDevice: ReadonlyMap<string, string[]>;
  readonly mountsBySource: ReadonlyMap<string, string[]>;
  /** Active swap devices by `major:minor`, and by kernel name (the path resolved under /dev). */
  readonly swapDevices: ReadonlySet<string>;
  readonly swapNames: ReadonlySet<string>;
  /** /dev/disk/by-id names per kernel name. */
  readonly byIdNames: ReadonlyMap<string, string[]>;
  /** sysfs's real path, so device paths compare whatever links lead to it. */
  readonly sysRoot: string;
  /** /proc/partitions' numbers by name: read only when there are earlier answers to tell again. */
  readonly numbers: ReadonlyMap<string, string>;
  /** Each disk's medium by its sysfs directory, as read this pass: its partitions share it. */
  readonly media: Map<string, string>;
}

function addTo(map: Map<string, string[]>, key: string, value: string): void {
  const list = map.get(key);
  if (list === undefined) map.set(key, [value]);
  else if (!list.includes(value)) list.push(value);
}

/** The kernel name of a path under devRoot (or /dev, as the kernel writes paths), else undefined. */
function nameUnder(path: string, devRoot: string): string | undefined {
  for (const root of [devRoot, '/dev']) {
    const rest = relative(root, path);
    if (rest !== '' && !rest.startsWith('..') && !rest.startsWith(sep)) return rest;
  }
  return undefined;
}

/** The file names /proc/swaps lists (decoded as the kernel escapes them); none when swap is not built in. */
export function parseSwaps(text: string): string[] {
  return text
    .split('\n')
    .slice(1)
    .map((line) => line.split(/[ \t]/)[0] ?? '')
    .filter((field) => field !== '')
    .map(decodeMountInfoField);
}

// ---- The inventory -----------------------------------------------------------------------------

export interface LinuxBlockDevicesOptions {
  /** Where sysfs is mounted; default `/sys`: devices are the entries of `<sysRoot>/class/block`. */
  readonly sysRoot?: string;
  /** Where device nodes are; default `/dev`: the probe reads `<devRoot>/<name>`. */
  readonly devRoot?: string;
  /** Default `<devRoot>/disk/by-id`. */
  readonly byIdDir?: string;
  /** udev's database (records `b<major>:<minor>`); default `/run/udev/data`. Often absent in containers. */
  readonly udevDataDir?: string;
  /** Default `/proc/self/mountinfo`. */
  readonly mountInfoPath?: string;
  /** Default `/proc/swaps`. */
  readonly swapsPath?: string;
  /** The kernel's table of disks and partitions (changeStamp); default `/proc/partitions`. */
  readonly partitionsPath?: string;
  /**
   * For tests: a regular file at `<devRoot>/<name>` stands for the device. Default false: only a
   * block device node with the number sysfs gives is read (a /dev of another node, e.g. a
   * container's, may hold other devices under the same names); anything else is `unreadable`.
   */
  readonly acceptRegularFiles?: boolean;
}

/** One device as sysfs shows it: what the probe and the facts start from. */
interface SysfsDevice {
  readonly name: string;
  /** Real path of its sysfs directory. */
  readonly dir: string;
  /** Its sysfs entry's inode: a device added again is a new entry (kernfs does not reuse numbers soon). */
  readonly entry: bigint;
  readonly majorMinor: string;
  readonly sizeBytes: number;
  readonly readOnly: boolean;
  readonly uevent: ReadonlyMap<string, string>;
  readonly isPartition: boolean;
  /** The whole disk of a partition. */
  readonly parent?: { readonly name: string; readonly dir: string; readonly majorMinor: string };
  /** A partition's first byte on its disk (sysfs `start`, in 512-byte sectors whatever the block size). */
  readonly startBytes?: number;
  readonly holders: readonly string[];
  /**
   * The medium's sequence number (sysfs `diskseq`, kernel 5.15+; a partition's is its disk's):
   * new when a loop is re-attached or media change.
   */
  readonly diskSeq: string;
}

/** The facts that stay while a device does (same entry, number, size, medium, udev record): read once, then reused. */
type HardwareFacts = Pick<
  DeviceFacts,
  | 'devicePath'
  | 'type'
  | 'removable'
  | 'rotational'
  | 'model'
  | 'vendor'
  | 'serial'
  | 'wwid'
  | 'transport'
  | 'parent'
  | 'madeByAgent'
>;

/** What an answer was read from (not part of DeviceFacts): what the next pass reuses. */
interface DeviceSource {
  readonly device: SysfsDevice;
  readonly hardware: HardwareFacts;
  /** The disk's udev record as the hardware facts were read (see udevRecordStamp). */
  readonly udevRecord: string;
}

/** A device read from sysfs this pass, and its earlier answer when it is the same device. */
interface DeviceReading extends DeviceSource {
  readonly earlier?: DeviceFacts;
}

/** A device read this pass and its signatures: probed, or the earlier answer's (reused). */
interface ProbedDevice extends DeviceReading {
  readonly signatures: readonly Signature[];
  readonly reused: boolean;
}

/** A by-id directory read younger than this may miss a change its mtime does not show (coarse clocks). */
const BY_ID_SETTLE_NS = 2_000_000_000n;

/** Bytes from a sysfs `size` (512-byte sectors whatever the device's block size). */
function sizeFromSectors(sectors: string | undefined): number | undefined {
  return sectors !== undefined && /^\d+$/.test(sectors) ? Number(BigInt(sectors) * BigInt(SECTOR_BYTES)) : undefined;
}

/** The inode of what a sysfs entry leads to; undefined when it is gone. */
function entryInode(path: string): bigint | undefined {
  try {
    return statSync(path, { bigint: true }).ino;
  } catch {
    return undefined;
  }
}

/** The medium's sequence number: a disk's own, a partition's disk's (read once a pass); empty before kernel 5.15. */
function mediumOf(dir: string, isPartition: boolean, media: Map<string, string>): string {
  const diskDir = isPartition ? dirname(dir) : dir;
  const known = media.get(diskDir);
  if (known !== undefined) return known;
  const medium = attribute(diskDir, 'diskseq') ?? '';
  media.set(diskDir, medium);
  return medium;
}

/** Each disk's partitions by its sysfs directory: the devices whose directory is inside it, sorted. */
function partitionsByDisk(readings: readonly ProbedDevice[]): Map<string, string[]> {
  const partitions = new Map<string, string[]>();
  for (const { device } of readings) if (device.isPartition) addTo(partitions, dirname(device.dir), device.name);
  return partitions;
}

/** The names in each disk's GPT (as answered this pass) by its sysfs directory: what its partitions' PARTNAME would say. */
function tableNamesByDisk(
  disks: readonly ProbedDevice[],
  facts: readonly (DeviceFacts | undefined)[],
): Map<string, NonNullable<Signature['partitions']>> {
  const tables = new Map<string, NonNullable<Signature['partitions']>>();
  disks.forEach(({ device }, i) => {
    const names = facts[i]?.signatures.find((s) => s.type === 'gpt')?.partitions;
    if (names !== undefined) tables.set(device.dir, names);
  });
  return tables;
}

/**
 * A partition's name in its disk's table, for a kernel that did not read it (no PARTNAME: built
 * without its GPT parser, the partitions added by partx); undefined when the kernel did read one
 * (that one is the truth) or the table does not list the partition's start.
 */
function namedInTable(
  device: SysfsDevice,
  tables: ReadonlyMap<string, NonNullable<Signature['partitions']>>,
): string | undefined {
  if (device.parent === undefined || device.startBytes === undefined || device.uevent.has('PARTNAME')) return undefined;
  return tables.get(device.parent.dir)?.find((p) => p.startBytes === device.startBytes)?.name;
}

/**
 * Device numbers by kernel name from /proc/partitions (`major minor #blocks name`): one read for
 * every device but those of size 0, which it leaves out.
 */
function partitionTableNumbers(text: string): Map<string, string> {
  const numbers = new Map<string, string>();
  for (const line of text.split('\n')) {
    const fields = line.trim().split(/\s+/);
    const [major = '', minor = '', , name] = fields;
    if (fields.length === 4 && name !== undefined && /^\d+$/.test(major) && /^\d+$/.test(minor)) {
      numbers.set(name, `${major}:${minor}`);
    }
  }
  return numbers;
}

function sameList(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((item, i) => item === b[i]);
}

/**
 * The real inventory. devices() lists sysfs and reads the node's tables (mountinfo, swaps) on
 * every call, and probes every device's signatures (two windows of 1 MiB each, 4 devices at a
 * time) unless an earlier answer stands.
 *
 * Idle passes: changeStamp() costs two reads whatever the number of devices; while it is
 * unchanged a caller may skip devices() altogether. devices({ previous }), `previous` being an
 * answer of this same instance, reads a few attributes per device: a device on the same sysfs
 * entry with the same `major:minor`, size, medium (diskseq) and udev record keeps its hardware facts (model,
 * serial, WWID, transport, type, parent, partition name...) and, when its partitions are the same
 * too, its signatures; its read-only flag, holders, partitions, mounts, swap use and by-id names
 * are read again. Neither sees a write to a device's contents (a `mkfs` by an admin): a caller
 * about to write to a device (carve, format, link) must look at it with a fresh devices() call first.
 */
export class LinuxBlockDevices implements BlockDeviceInventory, BlockDeviceChangeStamp {
  readonly sysRoot: string;
  readonly devRoot: string;
  readonly byIdDir: string;
  readonly udevDataDir: string;
  readonly mountInfoPath: string;
  readonly swapsPath: string;
  readonly partitionsPath: string;
  private readonly acceptRegularFiles: boolean;
  private readonly sources = new WeakMap<DeviceFacts, DeviceSource>();
  /** The last by-id read and the directory's inode and mtime it was made at. */
  private byIdCache: { readonly stamp: string; readonly names: ReadonlyMap<string, string[]> } | undefined;

  constructor(options: LinuxBlockDevicesOptions = {}) {
    this.sysRoot = options.sysRoot ?? '/sys';
    this.devRoot = options.devRoot ?? '/dev';
    this.byIdDir = options.byIdDir ?? join(this.devRoot, 'disk', 'by-id');
    this.udevDataDir = options.udevDataDir ?? '/run/udev/data';
    this.mountInfoPath = options.mountInfoPath ?? '/proc/self/mountinfo';
    this.swapsPath = options.swapsPath ?? '/proc/swaps';
    this.partitionsPath = options.partitionsPath ?? '/proc/partitions';
    this.acceptRegularFiles = options.acceptRegularFiles ?? false;
  }

  private get classDir(): string {
    return join(this.sysRoot, 'class', 'block');
  }

  /**
   * The `<sysRoot>/class/block` listing and /proc/partitions (number, size in KiB and name of every
   * disk and partition of non-zero size), hashed: two reads whatever the number of devices. It
   * moves when a device comes or goes or a size changes. It does not see a read-only flag, holders
   * or another medium of the same size (a loop re-attached to another file), nor a resize under
   * 1 KiB: devices() reads those on every call, so the periodic full pass catches them.
   */
  changeStamp(): Promise<string> {
    // A throw in the executor is the rejection.
    return new Promise((resolvePromise) => {
      const names = this.deviceNames();
      const table = this.readTable(this.partitionsPath, false);
      resolvePromise(createHash('sha256').update(names.join('\n')).update('\0').update(table).digest('hex'));
    });
  }

  async devices(options: DevicesOptions = {}): Promise<readonly DeviceFacts[]> {
    const names = this.deviceNames();
    const previous = new Map(options.previous?.map((facts) => [facts.name, facts]));
    const context = this.readContext(previous.size > 0);
    // Each device's sysfs side is read just before its probe, so that the probes overlap the reads.
    const probed = await mapBounded(names, PROBE_CONCURRENCY, (name) =>
      this.readAndProbe(name, previous.get(name), context),
    );
    const readings = probed.filter((reading) => reading !== undefined);
    const partitions = partitionsByDisk(readings);
    // Disks first: a disk whose partitions changed is probed again in its answer, and its
    // partitions are named from that table (a freshly carved disk's reused probe had none).
    const disks = readings.filter((r) => !r.device.isPartition);
    const diskFacts = await mapBounded(disks, PROBE_CONCURRENCY, (reading) =>
      this.answer(reading, context, partitions.get(reading.device.dir) ?? [], new Map()),
    );
    const tables = tableNamesByDisk(disks, diskFacts);
    const partitionFacts = await mapBounded(
      readings.filter((r) => r.device.isPartition),
      PROBE_CONCURRENCY,
      (reading) => this.answer(reading, context, [], tables),
    );
    return [...diskFacts, ...partitionFacts]
      .filter((facts) => facts !== undefined)
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  /** One device read and probed, or with the earlier answer's signatures; undefined when gone. */
  private async readAndProbe(
    name: string,
    earlier: DeviceFacts | undefined,
    context: NodeContext,
  ): Promise<ProbedDevice | undefined> {
    const reading = this.readDevice(name, earlier, context);
    if (reading === undefined) return undefined;
    const kept = reading.earlier?.signatures;
    if (kept !== undefined && !kept.some((s) => s.type === UNREADABLE.type)) {
      return { ...reading, signatures: kept, reused: true };
    }
    const signatures = await this.probeStill(reading.device);
    return signatures === undefined ? undefined : { ...reading, signatures, reused: false };
  }

  /** The kernel names of all block devices, sorted. */
  private deviceNames(): string[] {
    try {
      return readdirSync(this.classDir).sort();
    } catch (error) {
      const detail = `cannot list block devices: ${errorMessage(error)}`;
      throw new BlockDeviceInventoryError(this.classDir, errnoCode(error) ?? 'EIO', detail, { cause: error });
    }
  }

  /** /proc/partitions' device numbers; none when it cannot be read. */
  private tableNumbers(): Map<string, string> {
    try {
      // Read to the end: procfs hands over a page per read.
      return partitionTableNumbers(readFileSync(this.partitionsPath, 'utf8'));
    } catch {
      return new Map();
    }
  }

  /** One device's sysfs side and hardware facts, the earlier answer's when it is the same device; undefined when gone. */
  private readDevice(name: string, earlier: DeviceFacts | undefined, context: NodeContext): DeviceReading | undefined {
    const source = earlier === undefined ? undefined : this.sources.get(earlier);
    if (earlier !== undefined && source !== undefined) {
      const still = this.rereadSysfsDevice(source.device, context);
      if (still !== undefined && this.udevRecordStamp(still) === source.udevRecord) {
        return { device: still, hardware: source.hardware, udevRecord: source.udevRecord, earlier };
      }
    }
    const device = this.readSysfsDevice(name, context.media);
    if (device === undefined) return undefined;
    // Before the record is read: a rewrite in between shows on the next pass.
    const udevRecord = this.udevRecordStamp(device);
    return { device, hardware: this.readHardware(device, context), udevRecord };
  }

  /**
   * The inode and mtime of the udev record of a device's disk, '' without one. udev writes it
   * after the device appears (serial, bus) and again on each change event, each time as a new
   * file: a moved stamp means the hardware facts are read again.
   */
  private udevRecordStamp(device: SysfsDevice): string {
    const path = join(this.udevDataDir, `b${(device.parent ?? device).majorMinor}`);
    try {
      const stats = statSync(path, { bigint: true, throwIfNoEntry: false });
      return stats === undefined ? '' : `${String(stats.ino)}:${String(stats.mtimeNs)}`;
    } catch {
      return '';
    }
  }

  /** The facts of a device read this pass; undefined when it went while probed again. */
  private async answer(
    reading: ProbedDevice,
    context: NodeContext,
    partitions: readonly string[],
    tables: ReadonlyMap<string, NonNullable<Signature['partitions']>>,
  ): Promise<DeviceFacts | undefined> {
    const { device } = reading;
    // Other partitions than before: a new table, which the reused signatures would miss.
    const stale = reading.reused && !sameList(reading.earlier?.partitions ?? [], partitions);
    const signatures = stale ? await this.probeStill(device) : reading.signatures;
    if (signatures === undefined) return undefined;
    const described = this.describe(reading, context, partitions);
    const madeByAgent = described.madeByAgent || namedInTable(device, tables) === AGENT_PARTITION_NAME;
    const answer: DeviceFacts = { ...described, madeByAgent, signatures };
    this.sources.set(answer, { device, hardware: reading.hardware, udevRecord: reading.udevRecord });
    return answer;
  }

  /** The device's signatures; undefined when it is gone. */
  private async probeStill(device: SysfsDevice): Promise<readonly Signature[] | undefined> {
    const signatures = await this.probe(device);
    // Gone, or another device under the name by now: what was read may be of either.
    return signatures !== undefined && this.stillThere(device) ? signatures : undefined;
  }

  /** Whether sysfs still lists the device under its name and number. */
  private stillThere(device: SysfsDevice): boolean {
    return parseDeviceNumber(attribute(join(this.classDir, device.name), 'dev')) === device.majorMinor;
  }

  /** The sysfs side of a device; undefined when it is gone (or half there: no number). */
  private readSysfsDevice(name: string, media: Map<string, string>): SysfsDevice | undefined {
    let dir: string;
    try {
      dir = realpathSync(join(this.classDir, name));
    } catch {
      return undefined;
    }
    const entry = entryInode(dir);
    const majorMinor = parseDeviceNumber(attribute(dir, 'dev'));
    const sizeBytes = sizeFromSectors(attribute(dir, 'size'));
    if (entry === undefined || majorMinor === undefined || sizeBytes === undefined) return undefined;
    const uevent = parseUevent(readWholeSmallFile(join(dir, 'uevent'), ATTRIBUTE_BYTES) ?? '');
    const isPartition = uevent.get('DEVTYPE') === 'partition' || attribute(dir, 'partition') !== undefined;
    const parentDir = dirname(dir);
    const parentNumber = isPartition ? parseDeviceNumber(attribute(parentDir, 'dev')) : undefined;
    const device: SysfsDevice = {
      name,
      dir,
      entry,
      majorMinor,
      sizeBytes,
      readOnly: isTrue(attribute(dir, 'ro')),
      uevent,
      isPartition,
      holders: listNames(join(dir, 'holders')),
      diskSeq: mediumOf(dir, isPartition, media),
    };
    if (parentNumber === undefined) return device;
    const parent = { name: basename(parentDir), dir: parentDir, majorMinor: parentNumber };
    const startBytes = sizeFromSectors(attribute(dir, 'start'));
    return { ...device, parent, ...(startBytes === undefined ? {} : { startBytes }) };
  }

  /**
   * A device read earlier, read again where it was: undefined unless it is the same device (same
   * sysfs entry, number, size and medium), else with what may change while it stays read anew.
   * Its number in /proc/partitions, when listed there, spares reading `dev`.
   */
  private rereadSysfsDevice(known: SysfsDevice, context: NodeContext): SysfsDevice | undefined {
    const { dir } = known;
    const same =
      entryInode(join(this.classDir, known.name)) === known.entry &&
      (context.numbers.get(known.name) ?? parseDeviceNumber(attribute(dir, 'dev'))) === known.majorMinor &&
      sizeFromSectors(attribute(dir, 'size')) === known.sizeBytes &&
      // An entry has the attributes it was made with: no diskseq then (before 5.15), none now.
      (known.diskSeq === '' || mediumOf(dir, known.isPartition, context.media) === known.diskSeq);
    if (!same) return undefined;
    return { ...known, readOnly: isTrue(attribute(dir, 'ro')), holders: listNames(join(dir, 'holders')) };
  }

  /** The facts that stay while the device does; a partition's hardware facts are its disk's. */
  private readHardware(device: SysfsDevice, context: NodeContext): HardwareFacts {
    const disk = device.parent ?? device;
    const udev = this.udevProperties(disk.majorMinor);
    const serial = attribute(disk.dir, 'device/serial') ?? attribute(disk.dir, 'serial') ?? udev.get('ID_SERIAL_SHORT');
    // A partition has no WWID of its own (its identity is its disk's with -partN, see identity.ts).
    const wwid = attribute(device.dir, 'wwid') ?? attribute(device.dir, 'device/wwid');
    const hardware: HardwareFacts = {
      devicePath: join('/dev', device.name),
      type: deviceType(device.name, device.isPartition, attribute(device.dir, 'dm/uuid')),
      removable: isTrue(attribute(disk.dir, 'removable')),
      rotational: isTrue(attribute(disk.dir, 'queue/rotational')),
      model: attribute(disk.dir, 'device/model') ?? '',
      vendor: attribute(disk.dir, 'device/vendor') ?? '',
      serial: serial?.trim() ?? '',
      transport: deviceTransport(disk.name, relative(context.sysRoot, disk.dir), udev),
      madeByAgent: device.isPartition && device.uevent.get('PARTNAME') === AGENT_PARTITION_NAME,
    };
    const withParent = device.parent === undefined ? hardware : { ...hardware, parent: device.parent.name };
    return wwid === undefined ? withParent : { ...withParent, wwid };
  }

  /** Everything but the signatures: what this pass read, and the hardware facts (read now or before). */
  private describe(
    { device, hardware }: DeviceReading,
    context: NodeContext,
    partitions: readonly string[],
  ): Omit<DeviceFacts, 'signatures'> {
    const { devicePath } = hardware;
    const facts: Omit<DeviceFacts, 'signatures'> = {
      name: device.name,
      devicePath,
      majorMinor: device.majorMinor,
      type: hardware.type,
      sizeBytes: device.sizeBytes,
      readOnly: device.readOnly,
      removable: hardware.removable,
      rotational: hardware.rotational,
      model: hardware.model,
      vendor: hardware.vendor,
      serial: hardware.serial,
      transport: hardware.transport,
      byIdNames: context.byIdNames.get(device.name) ?? [],
      partitions,
      holders: device.holders,
      mountPoints: [
        ...new Set([
          ...(context.mountsByDevice.get(device.majorMinor) ?? []),
          ...(context.mountsBySource.get(devicePath) ?? []),
        ]),
      ],
      swapActive: context.swapDevices.has(device.majorMinor) || context.swapNames.has(device.name),
      madeByAgent: hardware.madeByAgent,
    };
    const withParent = hardware.parent === undefined ? facts : { ...facts, parent: hardware.parent };
    return hardware.wwid === undefined ? withParent : { ...withParent, wwid: hardware.wwid };
  }

  /** udev's `E:` properties for a device; none without a record (no udev here). */
  private udevProperties(majorMinor: string): ReadonlyMap<string, string> {
    const text = readWholeSmallFile(join(this.udevDataDir, `b${majorMinor}`), UDEV_RECORD_BYTES);
    return parseUdevProperties(text ?? '');
  }

  /**
   * The device's signatures; undefined when it vanished. Opened read-only (never O_EXCL: a device
   * in use stays usable to its owner) and only the probe windows are read.
   */
  private async probe(device: SysfsDevice): Promise<readonly Signature[] | undefined> {
    if (device.sizeBytes === 0) return []; // an empty loop or card reader: nothing to read
    // I/O to a suspended device-mapper device waits until it is resumed: never start one.
    if (isTrue(attribute(device.dir, 'dm/suspended'))) return [UNREADABLE];
    let handle: FileHandle;
    try {
      handle = await open(join(this.devRoot, device.name), constants.O_RDONLY | constants.O_NONBLOCK);
    } catch {
      return this.stillThere(device) ? [UNREADABLE] : undefined;
    }
    try {
      if (!(await this.isNodeOf(handle, device))) return [UNREADABLE];
      return detectSignatures(await readDeviceImage(handle, device.sizeBytes));
    } catch {
      return this.stillThere(device) ? [UNREADABLE] : undefined;
    } finally {
      await handle.close().catch(() => undefined);
    }
  }

  /** Whether the open file is the device sysfs describes (see LinuxBlockDevicesOptions.acceptRegularFiles). */
  private async isNodeOf(handle: FileHandle, device: SysfsDevice): Promise<boolean> {
    const stats = await handle.stat({ bigint: true });
    if (stats.isBlockDevice()) return deviceName(stats.rdev) === device.majorMinor;
    return this.acceptRegularFiles && stats.isFile();
  }

  /** The mount table, active swaps and by-id names, read once per pass; /proc/partitions' numbers when asked. */
  private readContext(withNumbers: boolean): NodeContext {
    const mountsByDevice = new Map<string, string[]>();
    const mountsBySource = new Map<string, string[]>();
    for (const mount of parseMountInfo(this.readTable(this.mountInfoPath, false))) {
      addTo(mountsByDevice, mount.device, mount.mountPoint);
      if (mount.source.startsWith('/')) addTo(mountsBySource, mount.source, mount.mountPoint);
    }
    const byIdNames = this.byIdNames();
    const numbers = withNumbers ? this.tableNumbers() : new Map<string, string>();
    const sysRoot = realSysRoot(this.sysRoot);
    return { mountsByDevice, mountsBySource, ...this.readSwaps(), byIdNames, sysRoot, numbers, media: new Map() };
  }

  /** A procfs table's text; a missing one is empty when optional (no swap support), else an error. */
  private readTable(path: string, optional: boolean): string {
    try {
      // Synchronously, as linux-volumes.ts reads the mount table: procfs answers from memory.
      return readFileSync(path, 'utf8');
    } catch (error) {
      const code = errnoCode(error) ?? 'EIO';
      if (optional && code === 'ENOENT') return '';
      throw new BlockDeviceInventoryError(path, code, `cannot read: ${errorMessage(error)}`, { cause: error });
    }
  }

  /** Active swaps by device number (a /dev/mapper link, a node elsewhere) and by name under /dev. */
  private readSwaps(): { swapDevices: Set<string>; swapNames: Set<string> } {
    const swapDevices = new Set<string>();
    const swapNames = new Set<string>();
    for (const file of parseSwaps(this.readTable(this.swapsPath, true))) {
      const literal = nameUnder(file, this.devRoot);
      if (literal !== undefined) swapNames.add(literal);
      try {
        const stats = statSync(file, { bigint: true });
        if (stats.isBlockDevice()) swapDevices.add(deviceName(stats.rdev));
        const real = nameUnder(realpathSync(file), this.devRoot);
        if (real !== undefined) swapNames.add(real);
      } catch {
        // Gone, or a path of another mount namespace: the literal name is all there is.
      }
    }
    return { swapDevices, swapNames };
  }

  /**
   * by-id names per kernel name; the last read's while the directory's mtime stands (udev adds,
   * replaces and removes links there, each of which moves it) and is not too recent to tell.
   */
  private byIdNames(): ReadonlyMap<string, string[]> {
    let stamp: string | undefined;
    try {
      const stats = statSync(this.byIdDir, { bigint: true });
      const settled = BigInt(Date.now()) * 1_000_000n - stats.mtimeNs > BY_ID_SETTLE_NS;
      stamp = settled ? `${String(stats.ino)}:${String(stats.mtimeNs)}` : undefined;
    } catch {
      stamp = undefined; // no directory: read (and find nothing) every time
    }
    if (stamp !== undefined && this.byIdCache?.stamp === stamp) return this.byIdCache.names;
    const names = this.readByIdNames();
    this.byIdCache = stamp === undefined ? undefined : { stamp, names };
    return names;
  }

  /** by-id names per kernel name, from the links' text (udev writes `../../sdb`): no device is touched. */
  private readByIdNames(): Map<string, string[]> {
    const names = new Map<string, string[]>();
    for (const id of listNames(this.byIdDir)) {
      let target: string;
      try {
        target = readlinkSync(join(this.byIdDir, id));
      } catch {
        continue; // not a link
      }
      const name = nameUnder(resolve(this.byIdDir, target), this.devRoot);
      if (name !== undefined) addTo(names, name, id);
    }
    return names;
  }
}

/** sysfs's real path, so device paths compare whatever links lead to it. */
function realSysRoot(sysRoot: string): string {
  try {
    return realpathSync(sysRoot);
  } catch {
    return sysRoot;
  }
}

/** What the kernel says a device is: DEVTYPE partition, else by its driver's name. */
export function deviceType(name: string, isPartition: boolean, dmUuid: string | undefined): DeviceType {
  if (isPartition) return 'part';
  if (name.startsWith('loop')) return 'loop';
  if (name.startsWith('dm-')) return dmUuid?.startsWith('mpath-') === true ? 'mpath' : 'dm';
  if (name.startsWith('md')) return 'md';
  return 'disk';
}

/**
 * How a whole disk is attached: NVMe by name, virtio by its sysfs path, else udev's ID_BUS and
 * ID_PATH. Without udev (a container without /run/udev) the sysfs path still tells ATA, SAS and
 * USB apart.
 */
export function deviceTransport(name: string, sysfsPath: string, udev: ReadonlyMap<string, string>): Transport {
  if (name.startsWith('nvme')) return 'nvme';
  const path = `/${sysfsPath}`;
  if (path.includes('/virtio')) return 'virtio';
  const bus = udev.get('ID_BUS');
  const idPath = udev.get('ID_PATH') ?? '';
  if (bus === 'ata') return 'sata';
  if (bus === 'usb') return 'usb';
  if (bus === 'scsi') return idPath.includes('sas') ? 'sas' : idPath.includes('usb') ? 'usb' : 'scsi';
  if (path.includes('/usb')) return 'usb';
  if (path.includes('/ata')) return 'sata';
  if (path.includes('/end_device-')) return 'sas';
  return 'unknown';
}

/** work over items, at most `limit` at once, answers in the items' order. */
async function mapBounded<T, R>(items: readonly T[], limit: number, work: (item: T) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    for (let index = next++; index < items.length; index = next++) {
      results[index] = await work(items[index] as T);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}
