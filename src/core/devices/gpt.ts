// The GUID partition table the agent writes when a rule carves a blank disk into N equal
// partitions (UEFI spec 2.10, chapter 5): a protective MBR, the primary header and entry array at
// the start, their backup at the end. Pure: it returns the bytes and where they go; writing them
// is src/core/node/carve.ts's job. Equal partitions of whole MiB, each starting on a MiB
// boundary, so every partition (and any PV on it) is the same size and well aligned whatever the
// disk's erase block; the remainder (under N MiB) is left unused at the end.
import { randomUUID } from 'node:crypto';
import { zlib } from '../on-demand-builtins.js';

/** "Linux filesystem data": what the kernel, blkid and partitioning tools expect for plain data. */
export const LINUX_DATA_TYPE_GUID = '0FC63DAF-8483-4772-8E79-3D69D8477DE4';

/** The name of every partition the agent makes; the inventory's AGENT_PARTITION_NAME reads it back. */
export const CARVED_PARTITION_NAME = 'lvp-carved';

export const MiB = 1024 * 1024;

/** The spec's minimum array (128 entries of 128 bytes); everyone writes exactly this. */
export const GPT_ENTRY_COUNT = 128;
export const GPT_ENTRY_BYTES = 128;
const ENTRY_ARRAY_BYTES = GPT_ENTRY_COUNT * GPT_ENTRY_BYTES;
const HEADER_BYTES = 92;
const NAME_CHARS = 36;
const MAX_PARTITIONS = GPT_ENTRY_COUNT;

export interface GptRequest {
  readonly sizeBytes: number;
  /** 512 or 4096 in practice: the device's logical block size (sysfs queue/logical_block_size). */
  readonly logicalBlockBytes?: number;
  readonly partitions: number;
  readonly diskGuid?: string;
  /** One per partition, in order. */
  readonly partitionGuids?: readonly string[];
  /** Makes a GUID (default crypto.randomUUID); for reproducible tests. */
  readonly random?: () => string;
  /** Default CARVED_PARTITION_NAME. */
  readonly partitionName?: string;
}

export interface GptPartition {
  /** 1-based, as the kernel numbers it (`sdb1`, `nvme0n1p1`). */
  readonly number: number;
  readonly startBytes: number;
  readonly sizeBytes: number;
  readonly guid: string;
}

/** A run of bytes and the device offset they go to. */
export interface GptWrite {
  readonly offset: number;
  readonly bytes: Uint8Array;
}

export interface GptImage {
  /** Protective MBR, primary header, primary entry array: LBA 0 to FirstUsableLBA - 1. */
  readonly primary: GptWrite;
  /** Backup entry array and backup header: the last blocks of the device. */
  readonly backup: GptWrite;
  readonly diskGuid: string;
  readonly partitions: readonly GptPartition[];
}

/** Why a table cannot be laid out; `too-small` is the one a caller meets on a real disk. */
export class GptLayoutError extends Error {
  constructor(
    readonly code: 'too-small' | 'invalid',
    message: string,
  ) {
    super(message);
    this.name = 'GptLayoutError';
  }
}

const GUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/iu;

/**
 * A GUID in the on-disk form: the first three fields little-endian, the last two as written
 * (the "mixed-endian" encoding of UEFI and Microsoft GUIDs).
 */
export function encodeGuid(guid: string): Uint8Array {
  if (!GUID_PATTERN.test(guid)) throw new GptLayoutError('invalid', `not a GUID: ${JSON.stringify(guid)}`);
  const hex = guid.replaceAll('-', '');
  const bytes = Uint8Array.from({ length: 16 }, (_, i) => parseInt(hex.slice(i * 2, i * 2 + 2), 16));
  bytes.subarray(0, 4).reverse();
  bytes.subarray(4, 6).reverse();
  bytes.subarray(6, 8).reverse();
  return bytes;
}

/** The inverse of encodeGuid, upper case as the spec writes GUIDs. */
export function decodeGuid(bytes: Uint8Array): string {
  const b = Uint8Array.from(bytes.subarray(0, 16));
  b.subarray(0, 4).reverse();
  b.subarray(4, 6).reverse();
  b.subarray(6, 8).reverse();
  const hex = Buffer.from(b).toString('hex').toUpperCase();
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** Where everything goes, in logical blocks. */
interface Layout {
  readonly block: number;
  readonly lastLba: number;
  readonly entryBlocks: number;
  readonly firstUsable: number;
  readonly lastUsable: number;
  readonly partitions: readonly { readonly startLba: number; readonly blocks: number }[];
}

function checkRequest(sizeBytes: number, block: number, count: number): void {
  if (!Number.isInteger(count) || count < 1 || count > MAX_PARTITIONS)
    throw new GptLayoutError('invalid', `partitions must be an integer from 1 to ${MAX_PARTITIONS}, not ${count}`);
  if (!Number.isInteger(block) || block < 512 || block > MiB || (block & (block - 1)) !== 0)
    throw new GptLayoutError('invalid', `logical block size ${block} is not a power of two from 512 to 1 MiB`);
  if (!Number.isSafeInteger(sizeBytes) || sizeBytes <= 0 || sizeBytes % block !== 0)
    throw new GptLayoutError('invalid', `size ${sizeBytes} is not a positive multiple of the block size ${block}`);
}

/** The partitions: from the first MiB boundary in the usable area, equal whole MiB each. */
export function layOut(sizeBytes: number, block: number, count: number): Layout {
  checkRequest(sizeBytes, block, count);
  const lastLba = sizeBytes / block - 1;
  const entryBlocks = Math.ceil(ENTRY_ARRAY_BYTES / block);
  const firstUsable = 2 + entryBlocks;
  const lastUsable = lastLba - 1 - entryBlocks;
  const startBytes = Math.ceil((firstUsable * block) / MiB) * MiB;
  const endBytes = (lastUsable + 1) * block;
  const eachMiB = endBytes > startBytes ? Math.floor((endBytes - startBytes) / MiB / count) : 0;
  if (eachMiB < 1)
    throw new GptLayoutError(
      'too-small',
      `a ${sizeBytes}-byte disk cannot hold ${count} partition(s) of at least 1 MiB after the GPT (needs ${startBytes + count * MiB + (entryBlocks + 1) * block} bytes)`,
    );
  const blocks = (eachMiB * MiB) / block;
  const partitions = Array.from({ length: count }, (_, i) => ({ startLba: startBytes / block + i * blocks, blocks }));
  return { block, lastLba, entryBlocks, firstUsable, lastUsable, partitions };
}

/** LBA 0: a protective MBR, one 0xEE partition covering the disk (capped at 2^32 - 1 blocks). */
function protectiveMbr(layout: Layout): Uint8Array {
  const bytes = new Uint8Array(layout.block);
  const view = new DataView(bytes.buffer);
  const record = 446;
  bytes.set([0x00, 0x00, 0x02, 0x00], record); // not bootable; CHS of LBA 1
  bytes[record + 4] = 0xee;
  bytes.set([0xff, 0xff, 0xff], record + 5); // CHS of the end: not representable
  view.setUint32(record + 8, 1, true);
  view.setUint32(record + 12, Math.min(layout.lastLba, 0xffff_ffff), true);
  bytes[510] = 0x55;
  bytes[511] = 0xaa;
  return bytes;
}

/** The entry array: the first N entries used, the rest zero (unused). */
function entryArray(layout: Layout, guids: readonly string[], name: string): Uint8Array {
  const bytes = new Uint8Array(layout.entryBlocks * layout.block);
  const view = new DataView(bytes.buffer);
  const type = encodeGuid(LINUX_DATA_TYPE_GUID);
  const utf16 = Buffer.from(name, 'utf16le');
  layout.partitions.forEach((p, i) => {
    const at = i * GPT_ENTRY_BYTES;
    bytes.set(type, at);
    bytes.set(encodeGuid(guids[i] ?? ''), at + 16);
    view.setBigUint64(at + 32, BigInt(p.startLba), true);
    view.setBigUint64(at + 40, BigInt(p.startLba + p.blocks - 1), true);
    bytes.set(utf16, at + 56);
  });
  return bytes;
}

/** One header block; `primary` says which copy (they differ in MyLBA, AlternateLBA and PartitionEntryLBA). */
function header(layout: Layout, diskGuid: Uint8Array, entriesCrc: number, primary: boolean): Uint8Array {
  const bytes = new Uint8Array(layout.block);
  const view = new DataView(bytes.buffer);
  const my = primary ? 1 : layout.lastLba;
  const entryLba = primary ? 2 : layout.lastLba - layout.entryBlocks;
  bytes.set(Buffer.from('EFI PART', 'ascii'), 0);
  view.setUint32(8, 0x0001_0000, true);
  view.setUint32(12, HEADER_BYTES, true);
  view.setBigUint64(24, BigInt(my), true);
  view.setBigUint64(32, BigInt(primary ? layout.lastLba : 1), true);
  view.setBigUint64(40, BigInt(layout.firstUsable), true);
  view.setBigUint64(48, BigInt(layout.lastUsable), true);
  bytes.set(diskGuid, 56);
  view.setBigUint64(72, BigInt(entryLba), true);
  view.setUint32(80, GPT_ENTRY_COUNT, true);
  view.setUint32(84, GPT_ENTRY_BYTES, true);
  view.setUint32(88, entriesCrc, true);
  // The header CRC covers HeaderSize bytes with its own field zero, which it still is here.
  view.setUint32(16, zlib().crc32(bytes.subarray(0, HEADER_BYTES)), true);
  return bytes;
}

function checkName(name: string): void {
  if (name.length > NAME_CHARS)
    throw new GptLayoutError('invalid', `partition name ${JSON.stringify(name)} is over ${NAME_CHARS} characters`);
}

/** The protective MBR, both headers and both entry arrays for N equal partitions on a blank disk. */
export function buildGpt(request: GptRequest): GptImage {
  const { sizeBytes, logicalBlockBytes = 512, partitions: count, random = randomUUID } = request;
  const name = request.partitionName ?? CARVED_PARTITION_NAME;
  checkName(name);
  const layout = layOut(sizeBytes, logicalBlockBytes, count);
  const given = request.partitionGuids;
  if (given !== undefined && given.length !== count)
    throw new GptLayoutError('invalid', `${given.length} partition GUIDs given for ${count} partitions`);
  const guids = given ?? Array.from({ length: count }, () => random());
  const diskGuid = request.diskGuid ?? random();
  const diskGuidBytes = encodeGuid(diskGuid);
  const entries = entryArray(layout, guids, name);
  const entriesCrc = zlib().crc32(entries);
  const block = layout.block;
  const primary = new Uint8Array(layout.firstUsable * block);
  primary.set(protectiveMbr(layout), 0);
  primary.set(header(layout, diskGuidBytes, entriesCrc, true), block);
  primary.set(entries, 2 * block);
  const backup = new Uint8Array((layout.entryBlocks + 1) * block);
  backup.set(entries, 0);
  backup.set(header(layout, diskGuidBytes, entriesCrc, false), layout.entryBlocks * block);
  return {
    primary: { offset: 0, bytes: primary },
    backup: { offset: (layout.lastLba - layout.entryBlocks) * block, bytes: backup },
    diskGuid: diskGuid.toUpperCase(),
    partitions: layout.partitions.map((p, i) => ({
      number: i + 1,
      startBytes: p.startLba * block,
      sizeBytes: p.blocks * block,
      guid: (guids[i] ?? '').toUpperCase(),
    })),
  };
}

// ---- Reading a table back -------------------------------------------------------------------------

/** One used entry of a GPT, as the table says (not as the kernel sees it). */
export interface GptEntry {
  readonly number: number;
  readonly startBytes: number;
  readonly sizeBytes: number;
  readonly name: string;
}

/** What a GPT header says of its entry array. */
export interface GptHeader {
  readonly entriesOffset: number;
  readonly entrySize: number;
  readonly entriesBytes: number;
  readonly entriesCrc: number;
}

/** Where a header says its entry array is, when the header checks out (signature, size, CRC). */
export function readGptHeader(bytes: Uint8Array, block: number): GptHeader | undefined {
  if (bytes.length < HEADER_BYTES || Buffer.from(bytes.subarray(0, 8)).toString('latin1') !== 'EFI PART')
    return undefined;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const size = view.getUint32(12, true);
  if (size < HEADER_BYTES || size > bytes.length || size > block) return undefined;
  const copy = Uint8Array.from(bytes.subarray(0, size));
  new DataView(copy.buffer).setUint32(16, 0, true);
  if (zlib().crc32(copy) !== view.getUint32(16, true)) return undefined;
  const count = view.getUint32(80, true);
  const entrySize = view.getUint32(84, true);
  // The spec: entries of 128 × 2^n bytes; a bound on the array keeps a forged header from asking for gigabytes.
  if (entrySize < GPT_ENTRY_BYTES || entrySize % GPT_ENTRY_BYTES !== 0 || count * entrySize > 4 * ENTRY_ARRAY_BYTES)
    return undefined;
  return {
    entriesOffset: Number(view.getBigUint64(72, true)) * block,
    entrySize,
    entriesBytes: count * entrySize,
    entriesCrc: view.getUint32(88, true),
  };
}

/**
 * The used entries of an entry array whose CRC is the header's, numbered from 1 by slot as the
 * kernel numbers them; undefined when the CRC does not match (a torn or foreign table).
 */
export function readGptEntries(entries: Uint8Array, header: GptHeader, block: number): GptEntry[] | undefined {
  if (entries.length !== header.entriesBytes || zlib().crc32(entries) !== header.entriesCrc) return undefined;
  const view = new DataView(entries.buffer, entries.byteOffset, entries.byteLength);
  const { entrySize } = header;
  const used: GptEntry[] = [];
  for (let at = 0, slot = 1; at + GPT_ENTRY_BYTES <= entries.length; at += entrySize, slot += 1) {
    if (entries.subarray(at, at + 16).every((b) => b === 0)) continue;
    const first = Number(view.getBigUint64(at + 32, true));
    const last = Number(view.getBigUint64(at + 40, true));
    const raw = Buffer.from(entries.subarray(at + 56, at + 56 + NAME_CHARS * 2)).toString('utf16le');
    const nul = raw.indexOf('\0');
    used.push({
      number: slot,
      startBytes: first * block,
      sizeBytes: (last - first + 1) * block,
      name: nul === -1 ? raw : raw.slice(0, nul),
    });
  }
  return used;
}
