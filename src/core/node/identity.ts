// The pure parts of volume identities (see VolumeIdentity in volumes.ts): ids, filesystem UUIDs
// read from superblocks, udev database records and sysfs attribute values. The reading is in
// linux-volumes.ts; the in-memory node builds its identities with the same functions.

import type { IdentitySource, VolumeIdentity } from './volumes.js';

/** An identity; byId is left out when undefined (it is for people, never compared). */
export function makeIdentity(source: IdentitySource, value: string, device: string, byId?: string): VolumeIdentity {
  const id = `${source}:${value}`;
  return byId === undefined ? { id, source, device } : { id, source, device, byId };
}

/** A partition's value: its disk's WWID or serial (or loop backing) with `-part<N>`, as udev names them. */
export function partitionValue(diskValue: string, partition: number): string {
  return `${diskValue}-part${partition}`;
}

/**
 * A directory as stat shows it: its inode, and its birth time in ns (0 when the filesystem keeps
 * none). Inode numbers are reused at once (a new tmpfs's root, an `rm -r` and `mkdir` on ext4):
 * the birth time tells the new directory from the old one.
 */
export interface DirectoryStamp {
  readonly ino: bigint | number;
  readonly birthNs: bigint | number;
}

/** `<uuid>`, or `<uuid>:ino:<inode>:<birth>` for a mount of a sub-directory (a bind mount), so two such mounts differ. */
export function fsUuidValue(uuid: string, mountRoot: string, directory: DirectoryStamp): string {
  return mountRoot === '/' ? uuid : `${uuid}:ino:${directory.ino}:${directory.birthNs}`;
}

/** `<major:minor>:<inode>:<birth>`. */
export function devInoValue(device: string, directory: DirectoryStamp): string {
  return `${device}:${directory.ino}:${directory.birthNs}`;
}

/** The birth part of a loop identity whose backing file cannot be stat'ed here (deleted, another mount namespace). */
export const UNKNOWN_BIRTH = 'unknown';

/**
 * `<major:minor>:<inode>:<birth ns>` of a loop device's backing file. The kernel hands both numbers
 * to the next file at once (delete a file, create one: same inode); the birth tells them apart.
 * Undefined birth (the file cannot be stat'ed here): `unknown`, which equals no recorded birth, so
 * such a disk, which cannot be told from a reused one, never matches an identity recorded with a
 * birth (a refusal is the safe side).
 */
export function loopValue(backingDevice: string, inode: bigint | number, birthNs: bigint | number | undefined): string {
  return `${backingDevice}:${inode}:${birthNs ?? UNKNOWN_BIRTH}`;
}

/** A loop device's backing file as udev records it (ID_LOOP_BACKING_DEVICE, _INODE): no birth. */
export interface LoopBackingNumbers {
  /** `major:minor` of the filesystem holding the file. */
  readonly device: string;
  readonly ino: bigint | number;
}

/**
 * The value of a loop device from udev's record of its backing file and a stat of the path sysfs
 * names (loop/backing_file). Both given: they must name the same device and inode, else neither
 * is trusted (a stale record, or the path names another file in this mount namespace). The birth
 * comes from the stat alone; udev alone gives `unknown` (see loopValue).
 */
export function loopBackingValue(
  fromUdev: LoopBackingNumbers | undefined,
  fromStat: (LoopBackingNumbers & DirectoryStamp) | undefined,
): string | undefined {
  if (fromStat === undefined) {
    return fromUdev === undefined ? undefined : loopValue(fromUdev.device, fromUdev.ino, undefined);
  }
  if (
    fromUdev !== undefined &&
    (fromUdev.device !== fromStat.device || BigInt(fromUdev.ino) !== BigInt(fromStat.ino))
  ) {
    return undefined;
  }
  return loopValue(fromStat.device, fromStat.ino, fromStat.birthNs);
}

/** `loop:<M:m>:<inode>` (a partition's: `-part<N>` added): the loop form recorded before births were added. */
const LEGACY_LOOP_ID = /^loop:(\d+:\d+:\d+)(-part\d+)?$/;
const LOOP_ID = /^loop:(\d+:\d+:\d+):(\d+|unknown)(-part\d+)?$/; // unknown: UNKNOWN_BIRTH

/** Whether id is a loop identity of the form recorded before births were added (no birth). */
export function isLegacyLoopId(id: string): boolean {
  return LEGACY_LOOP_ID.test(id);
}

/**
 * The birth part (`<ns>` or `unknown`) of `current` when it is the legacy loop id `recorded` with
 * a birth added: the same backing device and inode (and partition); else undefined. A legacy id
 * cannot tell a file recreated with the same numbers from the recorded one.
 */
export function legacyLoopIdExtension(recorded: string, current: string): string | undefined {
  const old = LEGACY_LOOP_ID.exec(recorded);
  const now = LOOP_ID.exec(current);
  return old !== null && now !== null && old[1] === now[1] && old[2] === now[3] ? now[2] : undefined;
}

const DEVICE_NUMBER = /^(0|[1-9]\d{0,9}):(0|[1-9]\d{0,9})$/;

/** A `major:minor` as sysfs and udev write it (decimal), trimmed; undefined when it is anything else. */
export function parseDeviceNumber(text: string | undefined): string | undefined {
  const trimmed = text?.trim();
  return trimmed !== undefined && DEVICE_NUMBER.test(trimmed) ? trimmed : undefined;
}

/** A decimal inode or partition number; undefined when it is anything else. */
export function parseDecimal(text: string | undefined): bigint | undefined {
  const trimmed = text?.trim();
  return trimmed !== undefined && /^(0|[1-9]\d{0,19})$/.test(trimmed) ? BigInt(trimmed) : undefined;
}

/** A partition number from sysfs `partition` (1 and up). */
export function parsePartitionNumber(text: string | undefined): number | undefined {
  const n = parseDecimal(text);
  return n !== undefined && n >= 1n && n <= 1_000_000n ? Number(n) : undefined;
}

/**
 * A sysfs or udev value (a WWID, a serial) as an id part: trimmed, runs of blanks as one `_` (as
 * udev writes ID_SERIAL, so both sources agree). Undefined when empty or holding control characters.
 */
export function attributeValue(text: string | undefined): string | undefined {
  if (text === undefined) return undefined;
  const value = text.trim().replace(/[ \t]+/g, '_');
  // eslint-disable-next-line no-control-regex -- control characters are exactly what is refused
  if (value === '' || /[\u0000-\u001f\u007f]/.test(value)) return undefined;
  return value;
}

/**
 * The `E:KEY=VALUE` properties of a udev database record (/run/udev/data/bM:m). When the read was
 * cut short (truncated), the last, possibly partial, line is ignored.
 */
export function parseUdevProperties(text: string, truncated = false): ReadonlyMap<string, string> {
  const lines = text.split('\n');
  if (truncated) lines.pop();
  const properties = new Map<string, string>();
  for (const line of lines) {
    if (!line.startsWith('E:')) continue;
    const equals = line.indexOf('=');
    if (equals <= 2) continue;
    properties.set(line.slice(2, equals), line.slice(equals + 1));
  }
  return properties;
}

/** 16 bytes as a UUID in the usual form: 8-4-4-4-12 lowercase hex. */
export function formatUuid(bytes: Uint8Array): string {
  if (bytes.length !== 16) throw new RangeError(`a UUID is 16 bytes, got ${bytes.length}`);
  const hex = Buffer.from(bytes.buffer, bytes.byteOffset, 16).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** The 16 bytes of a UUID written 8-4-4-4-12 in hex of either case; undefined when it is not one. */
export function parseUuid(text: string): Uint8Array | undefined {
  if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(text)) return undefined;
  return new Uint8Array(Buffer.from(text.replaceAll('-', ''), 'hex'));
}

/** A UUID in the usual form, or undefined (for values from udev, which writes other forms for e.g. vfat). */
export function normalizeUuid(text: string): string | undefined {
  const bytes = parseUuid(text);
  return bytes === undefined ? undefined : formatUuid(bytes);
}

export type SuperblockType = 'ext' | 'xfs' | 'btrfs';

/** Where the superblocks this module knows are: read these ranges of a device into one image. */
export const SUPERBLOCK_REGIONS: readonly { readonly offset: number; readonly length: number }[] = [
  { offset: 0, length: 4096 }, // XFS at 0, ext2/3/4 at 1024
  { offset: 65536, length: 4096 }, // btrfs
];
/** The size of an image holding every region (bytes outside the regions may stay zero). */
export const SUPERBLOCK_SPAN = 65536 + 4096;

const EXT_SUPERBLOCK = 1024;
const BTRFS_SUPERBLOCK = 65536;

function isNil(bytes: Uint8Array): boolean {
  return bytes.every((b) => b === 0);
}

function uuidAt(image: Uint8Array, offset: number): string | undefined {
  const bytes = image.subarray(offset, offset + 16);
  return isNil(bytes) ? undefined : formatUuid(bytes);
}

/** Where a type's UUID is when its magic is there, else undefined. */
function uuidOffset(view: Buffer, type: SuperblockType): number | undefined {
  switch (type) {
    case 'ext': {
      const sb = EXT_SUPERBLOCK;
      if (view.length < sb + 0x78 || view.readUInt16LE(sb + 0x38) !== 0xef53) return undefined;
      // s_log_block_size: blocks are 1 KiB << n, at most 64 KiB; more says this is not ext.
      return view.readUInt32LE(sb + 0x18) > 6 ? undefined : sb + 0x68;
    }
    case 'xfs':
      return view.length >= 48 && view.toString('latin1', 0, 4) === 'XFSB' ? 32 : undefined;
    case 'btrfs': {
      const sb = BTRFS_SUPERBLOCK;
      const magic = view.length >= sb + 0x48 && view.toString('latin1', sb + 0x40, sb + 0x48) === '_BHRfS_M';
      return magic ? sb + 0x20 : undefined;
    }
  }
}

/**
 * The filesystem UUID in an image of the start of a device (offset 0; SUPERBLOCK_REGIONS filled):
 * ext2/3/4, XFS or btrfs. Undefined when no magic is found, the UUID is nil, or the magics of more
 * than one type are there (leftovers of an earlier filesystem: blkid refuses such a device too).
 */
export function superblockUuid(
  image: Uint8Array,
): { readonly type: SuperblockType; readonly uuid: string } | undefined {
  const view = Buffer.from(image.buffer, image.byteOffset, image.length);
  const found = (['ext', 'xfs', 'btrfs'] as const).flatMap((type) => {
    const offset = uuidOffset(view, type);
    return offset === undefined ? [] : [{ type, offset }];
  });
  const [only] = found;
  if (only === undefined || found.length > 1) return undefined;
  const uuid = uuidAt(image, only.offset);
  return uuid === undefined ? undefined : { type: only.type, uuid };
}

/** The KEY=VALUE lines of a sysfs `uevent` file (MAJOR, MINOR, DEVNAME, DEVTYPE...). */
export function parseUevent(text: string): ReadonlyMap<string, string> {
  const properties = new Map<string, string>();
  for (const line of text.split('\n')) {
    const equals = line.indexOf('=');
    if (equals > 0) properties.set(line.slice(0, equals), line.slice(equals + 1));
  }
  return properties;
}

/** A uevent DEVNAME (`sdb`, `loop3`, `mapper/x`...) as a path under /dev; undefined when it would leave it. */
export function deviceNodeName(devname: string | undefined): string | undefined {
  if (devname === undefined || devname === '' || devname.startsWith('/') || devname.includes('\0')) return undefined;
  return devname.split('/').some((part) => part === '' || part === '.' || part === '..') ? undefined : devname;
}
