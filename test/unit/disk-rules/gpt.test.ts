// The GPT a carve writes (src/core/disk-rules/gpt.ts), read back field by field as the UEFI spec
// lays it out: the protective MBR, both headers (and their CRCs, recomputed here), the entry
// arrays, and the partitions: equal whole MiB, MiB-aligned, inside the usable blocks, never
// overlapping, whatever the disk size, block size and count.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { crc32 } from 'node:zlib';
import fc from 'fast-check';

import {
  CARVED_PARTITION_NAME,
  GptLayoutError,
  LINUX_DATA_TYPE_GUID,
  MiB,
  buildGpt,
  decodeGuid,
  encodeGuid,
  readGptEntries,
  readGptHeader,
  type GptImage,
} from '../../../src/core/devices/gpt.js';
import { AGENT_PARTITION_NAME } from '../../../src/core/node/block-devices.js';

/** A GPT header as read from its block. */
interface Header {
  signature: string;
  revision: number;
  headerSize: number;
  headerCrc: number;
  computedCrc: number;
  reserved: number;
  myLba: number;
  alternateLba: number;
  firstUsable: number;
  lastUsable: number;
  diskGuid: string;
  entryLba: number;
  entryCount: number;
  entrySize: number;
  entriesCrc: number;
}

function readHeader(block: Uint8Array): Header {
  const view = new DataView(block.buffer, block.byteOffset, block.byteLength);
  const u64 = (at: number): number => Number(view.getBigUint64(at, true));
  const headerSize = view.getUint32(12, true);
  const zeroed = Uint8Array.from(block.subarray(0, headerSize));
  zeroed.fill(0, 16, 20);
  return {
    signature: Buffer.from(block.subarray(0, 8)).toString('ascii'),
    revision: view.getUint32(8, true),
    headerSize,
    headerCrc: view.getUint32(16, true),
    computedCrc: crc32(zeroed),
    reserved: view.getUint32(20, true),
    myLba: u64(24),
    alternateLba: u64(32),
    firstUsable: u64(40),
    lastUsable: u64(48),
    diskGuid: decodeGuid(block.subarray(56, 72)),
    entryLba: u64(72),
    entryCount: view.getUint32(80, true),
    entrySize: view.getUint32(84, true),
    entriesCrc: view.getUint32(88, true),
  };
}

interface Entry {
  type: string;
  guid: string;
  firstLba: number;
  lastLba: number;
  attributes: bigint;
  name: string;
}

function readEntries(array: Uint8Array): Entry[] {
  const view = new DataView(array.buffer, array.byteOffset, array.byteLength);
  const entries: Entry[] = [];
  for (let at = 0; at < 128 * 128; at += 128) {
    if (array.subarray(at, at + 16).every((b) => b === 0)) continue; // unused entry
    entries.push({
      type: decodeGuid(array.subarray(at, at + 16)),
      guid: decodeGuid(array.subarray(at + 16, at + 32)),
      firstLba: Number(view.getBigUint64(at + 32, true)),
      lastLba: Number(view.getBigUint64(at + 40, true)),
      attributes: view.getBigUint64(at + 48, true),
      name: Buffer.from(array.subarray(at + 56, at + 128))
        .toString('utf16le')
        .replace(/\0+$/u, ''),
    });
  }
  return entries;
}

/** The whole disk image the table would make, to read it back by LBA as a tool would. */
class Disk {
  private readonly blocks = new Map<number, Uint8Array>();
  constructor(
    readonly image: GptImage,
    readonly block: number,
  ) {
    for (const write of [image.primary, image.backup])
      for (let at = 0; at < write.bytes.length; at += block)
        this.blocks.set((write.offset + at) / block, write.bytes.subarray(at, at + block));
  }
  lba(n: number, count = 1): Uint8Array {
    const out = new Uint8Array(count * this.block);
    for (let i = 0; i < count; i++) {
      const data = this.blocks.get(n + i);
      if (data !== undefined) out.set(data, i * this.block);
    }
    return out;
  }
}

const GUIDS = [
  '11111111-2222-4333-8444-555555555555',
  'AAAAAAAA-BBBB-4CCC-8DDD-EEEEEEEEEEEE',
  '0FC63DAF-0000-4000-8000-000000000001',
];
const DISK_GUID = '01234567-89AB-4CDE-8F01-23456789ABCD';

function sixtyFour(): { image: GptImage; disk: Disk } {
  const image = buildGpt({ sizeBytes: 64 * MiB, partitions: 3, diskGuid: DISK_GUID, partitionGuids: GUIDS });
  return { image, disk: new Disk(image, 512) };
}

describe('GUID encoding', () => {
  it('writes the first three fields little-endian and the rest as written (the spec example)', () => {
    assert.equal(
      Buffer.from(encodeGuid(LINUX_DATA_TYPE_GUID)).toString('hex'),
      'af3dc60f838472478e793d69d8477de4', // as blkid, sfdisk and the spec's tables have it on disk
    );
    assert.equal(decodeGuid(encodeGuid(DISK_GUID.toLowerCase())), DISK_GUID);
    assert.throws(() => encodeGuid('not-a-guid'), GptLayoutError);
  });
});

describe('buildGpt on a 64 MiB disk of 512-byte blocks, 3 partitions', () => {
  it('writes a protective MBR covering the disk', () => {
    const mbr = sixtyFour().disk.lba(0);
    const view = new DataView(mbr.buffer);
    assert.deepEqual([...mbr.subarray(446, 454)], [0x00, 0x00, 0x02, 0x00, 0xee, 0xff, 0xff, 0xff]);
    assert.equal(view.getUint32(454, true), 1);
    assert.equal(view.getUint32(458, true), 64 * 2048 - 1);
    assert.ok(
      mbr.subarray(462, 510).every((b) => b === 0),
      'the other three records are empty',
    );
    assert.ok(
      mbr.subarray(0, 446).every((b) => b === 0),
      'no boot code, no disk signature',
    );
    assert.deepEqual([mbr[510], mbr[511]], [0x55, 0xaa]);
  });

  it('writes the primary header at LBA 1 with its entries at LBA 2..33, and valid CRCs', () => {
    const { image, disk } = sixtyFour();
    const last = 64 * 2048 - 1;
    const header = readHeader(disk.lba(1));
    assert.deepEqual(header, {
      signature: 'EFI PART',
      revision: 0x0001_0000,
      headerSize: 92,
      headerCrc: header.computedCrc,
      computedCrc: header.computedCrc,
      reserved: 0,
      myLba: 1,
      alternateLba: last,
      firstUsable: 34,
      lastUsable: last - 33,
      diskGuid: DISK_GUID,
      entryLba: 2,
      entryCount: 128,
      entrySize: 128,
      entriesCrc: crc32(disk.lba(2, 32)),
    });
    assert.ok(
      disk
        .lba(1)
        .subarray(92)
        .every((b) => b === 0),
      'the rest of the header block is zero',
    );
    assert.equal(image.primary.offset, 0);
    assert.equal(image.primary.bytes.length, 34 * 512);
    assert.equal(image.diskGuid, DISK_GUID);
  });

  it('writes three Linux data partitions named lvp-carved, 20 MiB each from 1 MiB, with the GUIDs given', () => {
    const { image, disk } = sixtyFour();
    const entries = readEntries(disk.lba(2, 32));
    assert.deepEqual(
      entries,
      GUIDS.map((guid, i) => ({
        type: LINUX_DATA_TYPE_GUID,
        guid: guid.toUpperCase(),
        firstLba: 2048 + i * 20 * 2048,
        lastLba: 2048 + (i + 1) * 20 * 2048 - 1,
        attributes: 0n,
        name: 'lvp-carved',
      })),
    );
    assert.deepEqual(
      image.partitions,
      GUIDS.map((guid, i) => ({ number: i + 1, startBytes: (1 + i * 20) * MiB, sizeBytes: 20 * MiB, guid })),
    );
    // 64 MiB - 1 MiB (front) - 33 blocks (backup) leaves 62 MiB and change: 3 × 20, 2 MiB unused.
  });

  it('writes the backup array and header at the end, mirroring the primary', () => {
    const { image, disk } = sixtyFour();
    const last = 64 * 2048 - 1;
    assert.equal(image.backup.offset, (last - 32) * 512);
    assert.equal(image.backup.bytes.length, 33 * 512);
    const primary = readHeader(disk.lba(1));
    const backup = readHeader(disk.lba(last));
    assert.equal(backup.headerCrc, backup.computedCrc);
    assert.deepEqual(
      { ...backup, headerCrc: 0, computedCrc: 0 },
      { ...primary, headerCrc: 0, computedCrc: 0, myLba: last, alternateLba: 1, entryLba: last - 32 },
    );
    assert.deepEqual(disk.lba(last - 32, 32), disk.lba(2, 32), 'the same entry array');
    assert.notEqual(backup.headerCrc, primary.headerCrc);
  });

  it('matches the name the inventory recognises', () => {
    assert.equal(CARVED_PARTITION_NAME, AGENT_PARTITION_NAME);
  });
});

describe('buildGpt, other shapes', () => {
  it('lays out 4096-byte blocks: entries in LBA 2..5, usable from 6, backup in the last 5 blocks', () => {
    const image = buildGpt({ sizeBytes: 64 * MiB, logicalBlockBytes: 4096, partitions: 2 });
    const disk = new Disk(image, 4096);
    const last = (64 * MiB) / 4096 - 1;
    const header = readHeader(disk.lba(1));
    assert.equal(header.headerCrc, header.computedCrc);
    assert.deepEqual([header.firstUsable, header.lastUsable, header.entryLba], [6, last - 5, 2]);
    assert.equal(header.entriesCrc, crc32(disk.lba(2, 4)));
    assert.equal(new DataView(disk.lba(0).buffer).getUint32(458, true), last);
    assert.equal(readHeader(disk.lba(last)).entryLba, last - 4);
    assert.equal(image.primary.bytes.length, 6 * 4096);
    assert.equal(image.backup.bytes.length, 5 * 4096);
    assert.deepEqual(
      image.partitions.map((p) => [p.startBytes / MiB, p.sizeBytes / MiB]),
      [
        [1, 31],
        [32, 31],
      ],
    );
  });

  it('caps the protective MBR at 2^32 - 1 blocks on a disk over 2 TiB', () => {
    const image = buildGpt({ sizeBytes: 3 * 2 ** 40, partitions: 1 });
    assert.equal(new DataView(image.primary.bytes.buffer).getUint32(458, true), 0xffff_ffff);
    assert.equal(readHeader(image.primary.bytes.subarray(512, 1024)).alternateLba, (3 * 2 ** 40) / 512 - 1);
  });

  it('makes fresh random GUIDs unless given, and uses the generator it is handed', () => {
    const a = buildGpt({ sizeBytes: 64 * MiB, partitions: 4 });
    const b = buildGpt({ sizeBytes: 64 * MiB, partitions: 4 });
    const all = [a.diskGuid, b.diskGuid, ...a.partitions.map((p) => p.guid), ...b.partitions.map((p) => p.guid)];
    assert.equal(new Set(all).size, 10);
    let n = 0;
    const counted = buildGpt({
      sizeBytes: 64 * MiB,
      partitions: 2,
      random: () => `00000000-0000-4000-8000-00000000000${String(++n)}`,
    });
    assert.deepEqual(
      [counted.partitions[0]?.guid, counted.partitions[1]?.guid, counted.diskGuid],
      [
        '00000000-0000-4000-8000-000000000001',
        '00000000-0000-4000-8000-000000000002',
        '00000000-0000-4000-8000-000000000003',
      ],
    );
  });

  it('takes 128 partitions, and one partition of the whole usable space', () => {
    const many = buildGpt({ sizeBytes: 200 * MiB, partitions: 128 });
    assert.equal(many.partitions.length, 128);
    assert.ok(many.partitions.every((p) => p.sizeBytes === MiB));
    assert.equal(readEntries(new Disk(many, 512).lba(2, 32)).length, 128);
    const one = buildGpt({ sizeBytes: 64 * MiB, partitions: 1 });
    assert.deepEqual(
      one.partitions.map((p) => [p.startBytes, p.sizeBytes]),
      [[MiB, 62 * MiB]],
    );
  });

  it('refuses a disk too small for N partitions of 1 MiB, naming the sizes', () => {
    const tooSmall = (sizeBytes: number, partitions: number): void => {
      assert.throws(
        () => buildGpt({ sizeBytes, partitions }),
        (e: unknown) => e instanceof GptLayoutError && e.code === 'too-small' && /cannot hold/u.test(e.message),
      );
    };
    tooSmall(2 * MiB, 1); // 1 MiB front + the backup's 33 blocks leave under 1 MiB
    tooSmall(64 * MiB, 63);
    tooSmall(512 * 40, 1);
    assert.equal(buildGpt({ sizeBytes: 2 * MiB + 33 * 512, partitions: 1 }).partitions[0]?.sizeBytes, MiB);
  });

  it('rejects what is not a table request', () => {
    const invalid = (request: Parameters<typeof buildGpt>[0]): void => {
      assert.throws(
        () => buildGpt(request),
        (e: unknown) => e instanceof GptLayoutError && e.code === 'invalid',
      );
    };
    invalid({ sizeBytes: 64 * MiB, partitions: 0 });
    invalid({ sizeBytes: 64 * MiB, partitions: 129 });
    invalid({ sizeBytes: 64 * MiB, partitions: 1.5 });
    invalid({ sizeBytes: 64 * MiB + 1, partitions: 1 });
    invalid({ sizeBytes: 64 * MiB, logicalBlockBytes: 1000, partitions: 1 });
    invalid({ sizeBytes: 64 * MiB, partitions: 2, partitionGuids: [GUIDS[0] ?? ''] });
    invalid({ sizeBytes: 64 * MiB, partitions: 1, partitionGuids: ['nope'] });
    invalid({ sizeBytes: 64 * MiB, partitions: 1, partitionName: 'x'.repeat(37) });
  });
});

describe('buildGpt, whatever the disk', () => {
  it('partitions are equal whole MiB, MiB-aligned, inside the usable blocks, in order, never overlapping; the tables check out', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(512, 4096),
        fc.integer({ min: 1, max: 128 }),
        // Small disks (where too-small and the remainder matter) as often as anything up to 512 TiB.
        fc.oneof(fc.integer({ min: 1, max: (256 * MiB) / 512 }), fc.integer({ min: 1, max: 2 ** 49 / 4096 })),
        (block, count, units) => {
          const sizeBytes = units * block;
          let image: GptImage;
          try {
            image = buildGpt({ sizeBytes, logicalBlockBytes: block, partitions: count });
          } catch (error) {
            // Too small only when N MiB really do not fit between the first MiB and the backup.
            assert.ok(error instanceof GptLayoutError && error.code === 'too-small');
            const backupBytes = (Math.ceil(16384 / block) + 1) * block;
            assert.ok(MiB + count * MiB > sizeBytes - backupBytes);
            return;
          }
          const disk = new Disk(image, block);
          const last = sizeBytes / block - 1;
          const primary = readHeader(disk.lba(1));
          const backup = readHeader(disk.lba(last));
          const entryBlocks = Math.ceil(16384 / block);
          assert.equal(primary.headerCrc, primary.computedCrc);
          assert.equal(backup.headerCrc, backup.computedCrc);
          assert.equal(primary.entriesCrc, crc32(disk.lba(2, entryBlocks)));
          assert.equal(backup.entriesCrc, crc32(disk.lba(backup.entryLba, entryBlocks)));
          assert.equal(backup.entryLba + entryBlocks, last, 'the backup array sits right before the backup header');
          const entries = readEntries(disk.lba(2, entryBlocks));
          assert.equal(entries.length, count);
          const size = image.partitions[0]?.sizeBytes ?? 0;
          entries.forEach((e, i) => {
            const p = image.partitions[i];
            assert.ok(p !== undefined);
            assert.equal(p.startBytes % MiB, 0);
            assert.equal(p.sizeBytes, size);
            assert.equal(p.sizeBytes % MiB, 0);
            assert.equal(e.firstLba * block, p.startBytes);
            assert.equal((e.lastLba + 1) * block, p.startBytes + p.sizeBytes);
            assert.ok(e.firstLba >= primary.firstUsable && e.lastLba <= primary.lastUsable);
            if (i > 0) assert.ok(e.firstLba > (entries[i - 1]?.lastLba ?? Infinity), 'no overlap, in order');
          });
          // Equal and as large as they can be: one more MiB each would not fit.
          const usableEnd = (primary.lastUsable + 1) * block;
          assert.ok(MiB + count * (size + MiB) > usableEnd);
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('reading a table back (readGptHeader, readGptEntries)', () => {
  /** The primary header and entry array of an image, read as the inventory reads them. */
  const readBack = (image: GptImage, block: number): ReturnType<typeof readGptEntries> => {
    const bytes = image.primary.bytes;
    const header = readGptHeader(bytes.subarray(block, 2 * block), block);
    if (header === undefined) return undefined;
    return readGptEntries(
      bytes.subarray(header.entriesOffset, header.entriesOffset + header.entriesBytes),
      header,
      block,
    );
  };

  it('reads back every partition written: number, start, size and name, whatever the disk', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(512, 4096),
        fc.integer({ min: 1, max: 128 }),
        fc.integer({ min: 200, max: 4096 }),
        fc.string({ minLength: 0, maxLength: 36 }),
        (block, count, mib, name) => {
          const image = buildGpt({
            sizeBytes: mib * MiB,
            logicalBlockBytes: block,
            partitions: count,
            partitionName: name,
          });
          const entries = readBack(image, block);
          assert.deepEqual(
            entries,
            image.partitions.map((p) => ({ number: p.number, startBytes: p.startBytes, sizeBytes: p.sizeBytes, name })),
          );
        },
      ),
      { numRuns: 200 },
    );
  });

  it('refuses a table with any byte of the header or the used entries changed (the CRCs no longer match)', () => {
    const block = 512;
    const image = buildGpt({ sizeBytes: 64 * MiB, partitions: 3 });
    fc.assert(
      fc.property(
        // header bytes the CRC covers, or bytes of the three used entries
        fc.oneof(
          fc.integer({ min: block, max: block + 91 }),
          fc.integer({ min: 2 * block, max: 2 * block + 3 * 128 - 1 }),
        ),
        fc.integer({ min: 1, max: 255 }),
        (offset, flip) => {
          const bytes = Uint8Array.from(image.primary.bytes);
          bytes[offset] = (bytes[offset] ?? 0) ^ flip;
          assert.equal(readBack({ ...image, primary: { offset: 0, bytes } }, block), undefined);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('refuses what is not a header, and a header asking for an entry array past the bound', () => {
    assert.equal(readGptHeader(new Uint8Array(512), 512), undefined);
    assert.equal(readGptHeader(Buffer.from('EFI PART'), 512), undefined, 'shorter than a header');
    const image = buildGpt({ sizeBytes: 64 * MiB, partitions: 1 });
    const header = Uint8Array.from(image.primary.bytes.subarray(512, 1024));
    const view = new DataView(header.buffer);
    view.setUint32(80, 1_000_000, true); // a million entries
    view.setUint32(16, 0, true);
    view.setUint32(16, crc32(header.subarray(0, 92)), true);
    assert.equal(readGptHeader(header, 512), undefined);
  });
});
