// The pure parts of volume identities (src/core/node/identity.ts), and the superblock reader of
// LinuxVolumes on a real ext4 image made by mkfs.ext4 (no root needed: it is a file).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';

import {
  SUPERBLOCK_REGIONS,
  SUPERBLOCK_SPAN,
  attributeValue,
  devInoValue,
  deviceNodeName,
  formatUuid,
  fsUuidValue,
  loopValue,
  makeIdentity,
  normalizeUuid,
  parseDecimal,
  parseDeviceNumber,
  parsePartitionNumber,
  parseUdevProperties,
  parseUevent,
  parseUuid,
  partitionValue,
  superblockUuid,
  type SuperblockType,
} from '../../../src/core/node/identity.js';
import { readSuperblockUuid } from '../../../src/core/node/linux-volumes.js';

const UUID = '0b1e2f3a-4b5c-4d6e-8f90-a1b2c3d4e5f6';

/** An image of the start of a device with the superblock of type holding uuid (as bytes). */
function superblockImage(
  type: SuperblockType,
  uuid: Uint8Array,
  image: Buffer = Buffer.alloc(SUPERBLOCK_SPAN),
): Buffer {
  switch (type) {
    case 'ext':
      image.writeUInt16LE(0xef53, 1024 + 0x38);
      image.writeUInt32LE(2, 1024 + 0x18); // 4 KiB blocks
      image.set(uuid, 1024 + 0x68);
      break;
    case 'xfs':
      image.write('XFSB', 0, 'latin1');
      image.set(uuid, 32);
      break;
    case 'btrfs':
      image.write('_BHRfS_M', 65536 + 0x40, 'latin1');
      image.set(uuid, 65536 + 0x20);
      break;
  }
  return image;
}

function uuidBytes(text: string): Uint8Array {
  const bytes = parseUuid(text);
  assert.ok(bytes !== undefined);
  return bytes;
}

const nonNilUuid = fc.uint8Array({ minLength: 16, maxLength: 16 }).filter((b) => b.some((x) => x !== 0));

describe('identity ids', () => {
  it('are `<source>:<value>`, with byId only when there is one', () => {
    assert.deepEqual(makeIdentity('wwid', 'naa.5000c500a1b2c3d4', '8:0'), {
      id: 'wwid:naa.5000c500a1b2c3d4',
      source: 'wwid',
      device: '8:0',
    });
    assert.deepEqual(makeIdentity('serial', 'S1', '8:16', 'ata-DISK_S1'), {
      id: 'serial:S1',
      source: 'serial',
      device: '8:16',
      byId: 'ata-DISK_S1',
    });
    assert.ok(!('byId' in makeIdentity('loop', '7:1:2', '7:0', undefined)));
  });

  it('format values: partitions, loop backings, directories, sub-directory mounts', () => {
    assert.equal(partitionValue('naa.5000c500a1b2c3d4', 2), 'naa.5000c500a1b2c3d4-part2');
    assert.equal(loopValue('259:1', 39720268n, 1764670032602085091n), '259:1:39720268:1764670032602085091');
    assert.equal(loopValue('259:1', 39720268n, undefined), '259:1:39720268:unknown', 'a birth that cannot be read');
    assert.equal(devInoValue('0:45', { ino: 1n, birthNs: 1764670032602085091n }), '0:45:1:1764670032602085091');
    assert.equal(devInoValue('254:0', { ino: 12, birthNs: 0 }), '254:0:12:0');
    assert.equal(fsUuidValue(UUID, '/', { ino: 2n, birthNs: 5n }), UUID);
    assert.equal(fsUuidValue(UUID, '/sub dir', { ino: 12n, birthNs: 5n }), `${UUID}:ino:12:5`);
  });
});

describe('UUIDs', () => {
  it('format 16 bytes as 8-4-4-4-12 lowercase hex and parse either case back', () => {
    const bytes = Uint8Array.from([
      0x0b, 0x1e, 0x2f, 0x3a, 0x4b, 0x5c, 0x4d, 0x6e, 0x8f, 0x90, 0xa1, 0xb2, 0xc3, 0xd4, 0xe5, 0xf6,
    ]);
    assert.equal(formatUuid(bytes), UUID);
    assert.deepEqual(parseUuid(UUID.toUpperCase()), bytes);
    assert.equal(normalizeUuid('F1E2D3C4-B5A6-4978-8695-A4B3C2D1E0F9'), 'f1e2d3c4-b5a6-4978-8695-a4b3c2d1e0f9');
    // A view into a larger buffer formats its own 16 bytes.
    assert.equal(formatUuid(Buffer.concat([Buffer.from([9, 9, 9]), bytes]).subarray(3)), UUID);
  });

  it('refuses what is not a UUID', () => {
    for (const text of ['', 'ABCD-1234', `{${UUID}}`, UUID.replaceAll('-', ''), `${UUID}0`, UUID.replace('b', 'g')]) {
      assert.equal(parseUuid(text), undefined, text);
      assert.equal(normalizeUuid(text), undefined, text);
    }
    assert.throws(() => formatUuid(new Uint8Array(15)), RangeError);
  });

  it('property: formatting and parsing round-trip', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 16, maxLength: 16 }), (bytes) => {
        const text = formatUuid(bytes);
        assert.match(text, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
        assert.deepEqual(parseUuid(text), bytes);
      }),
    );
    fc.assert(
      fc.property(fc.uuid(), fc.boolean(), (uuid, upper) => {
        assert.equal(normalizeUuid(upper ? uuid.toUpperCase() : uuid), uuid.toLowerCase());
      }),
    );
  });
});

describe('superblockUuid', () => {
  for (const type of ['ext', 'xfs', 'btrfs'] as const) {
    it(`finds the UUID of ${type}`, () => {
      assert.deepEqual(superblockUuid(superblockImage(type, uuidBytes(UUID))), { type, uuid: UUID });
    });
  }

  it('reads ext and XFS from the first region alone (a device shorter than btrfs needs)', () => {
    const short = superblockImage('ext', uuidBytes(UUID)).subarray(0, SUPERBLOCK_REGIONS[0]?.length);
    assert.deepEqual(superblockUuid(short), { type: 'ext', uuid: UUID });
    assert.equal(superblockUuid(Buffer.alloc(0)), undefined);
    assert.equal(superblockUuid(Buffer.alloc(1100)), undefined);
  });

  it('has none for an empty device, a nil UUID, an implausible ext superblock, or the magics of two filesystems', () => {
    assert.equal(superblockUuid(Buffer.alloc(SUPERBLOCK_SPAN)), undefined);
    assert.equal(superblockUuid(superblockImage('xfs', new Uint8Array(16))), undefined);
    const bigBlocks = superblockImage('ext', uuidBytes(UUID));
    bigBlocks.writeUInt32LE(7, 1024 + 0x18);
    assert.equal(superblockUuid(bigBlocks), undefined);
    // An ext4 made over an old btrfs whose superblock survived: blkid calls this ambivalent too.
    const both = superblockImage('btrfs', uuidBytes(UUID), superblockImage('ext', uuidBytes(UUID)));
    assert.equal(superblockUuid(both), undefined);
  });

  it('reads no more than 128 KiB', () => {
    assert.ok(SUPERBLOCK_SPAN <= 128 * 1024);
    for (const { offset, length } of SUPERBLOCK_REGIONS) assert.ok(offset + length <= SUPERBLOCK_SPAN);
  });

  it('property: any UUID written in any known superblock is found again', () => {
    fc.assert(
      fc.property(fc.constantFrom('ext', 'xfs', 'btrfs'), nonNilUuid, (type: SuperblockType, bytes) => {
        assert.deepEqual(superblockUuid(superblockImage(type, bytes)), { type, uuid: formatUuid(bytes) });
      }),
    );
  });

  it('property: never throws on arbitrary bytes, and answers a well-formed UUID or nothing', () => {
    const patch = fc.record({ at: fc.nat({ max: SUPERBLOCK_SPAN - 1 }), bytes: fc.uint8Array({ maxLength: 64 }) });
    fc.assert(
      fc.property(
        fc.nat({ max: SUPERBLOCK_SPAN }),
        fc.array(patch, { maxLength: 8 }),
        fc.constantFrom(undefined, 'ext', 'xfs', 'btrfs'),
        (length, patches, planted: SuperblockType | undefined) => {
          const image =
            planted === undefined ? Buffer.alloc(SUPERBLOCK_SPAN) : superblockImage(planted, uuidBytes(UUID));
          for (const { at, bytes } of patches) image.set(bytes.subarray(0, SUPERBLOCK_SPAN - at), at);
          const found = superblockUuid(image.subarray(0, length));
          if (found !== undefined) assert.equal(normalizeUuid(found.uuid), found.uuid);
        },
      ),
    );
  });
});

describe('udev records and sysfs values', () => {
  const RECORD = [
    'S:disk/by-id/ata-QEMU_HARDDISK_QM00001',
    'L:0',
    'I:1751234567',
    'E:ID_SERIAL=QEMU_HARDDISK_QM00001',
    'E:ID_FS_UUID=0B1E2F3A-4B5C-4D6E-8F90-A1B2C3D4E5F6',
    'E:ID_FS_LABEL=a=b=c',
    'E:=no key',
    'E:ID_MODEL=',
    'G:systemd',
    '',
  ].join('\n');

  it('parses the E: properties of a udev database record, values with = and empty ones included', () => {
    const properties = parseUdevProperties(RECORD);
    assert.deepEqual(Object.fromEntries(properties), {
      ID_SERIAL: 'QEMU_HARDDISK_QM00001',
      ID_FS_UUID: '0B1E2F3A-4B5C-4D6E-8F90-A1B2C3D4E5F6',
      ID_FS_LABEL: 'a=b=c',
      ID_MODEL: '',
    });
  });

  it('ignores the last, partial line of a record read only in part', () => {
    const cut = 'E:ID_SERIAL=QEMU_HARDDISK_QM00001\nE:ID_FS_UUID=0b1e';
    assert.deepEqual(Object.fromEntries(parseUdevProperties(cut, true)), { ID_SERIAL: 'QEMU_HARDDISK_QM00001' });
    assert.equal(parseUdevProperties(cut, false).get('ID_FS_UUID'), '0b1e');
  });

  it('property: never throws, and every property comes from an E: line', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 300 }), fc.boolean(), (text, truncated) => {
        for (const [key, value] of parseUdevProperties(text, truncated)) {
          assert.ok(text.includes(`E:${key}=${value}`));
        }
      }),
    );
  });

  it('turns sysfs attributes into id parts: trimmed, blanks as _, none when empty or with control characters', () => {
    assert.equal(attributeValue('naa.5000c500a1b2c3d4\n'), 'naa.5000c500a1b2c3d4');
    assert.equal(
      attributeValue('t10.ATA     QEMU HARDDISK                           QM00001 \n'),
      't10.ATA_QEMU_HARDDISK_QM00001',
    );
    assert.equal(attributeValue(' \n'), undefined);
    assert.equal(attributeValue('bad\u0001serial'), undefined);
    assert.equal(attributeValue('two\nlines'), undefined);
    assert.equal(attributeValue(undefined), undefined);
  });

  it('reads device numbers, decimals and partition numbers strictly', () => {
    assert.equal(parseDeviceNumber('259:1\n'), '259:1');
    for (const bad of ['08:1', '8:', ':1', '8:1:2', 'x', '', undefined])
      assert.equal(parseDeviceNumber(bad), undefined);
    assert.equal(parseDecimal('39720268\n'), 39720268n);
    assert.equal(parseDecimal('18446744073709551615'), 18446744073709551615n, 'a 64-bit inode, exactly');
    for (const bad of ['-1', '1.5', '0x10', '', '012']) assert.equal(parseDecimal(bad), undefined);
    assert.equal(parsePartitionNumber('3\n'), 3);
    assert.equal(parsePartitionNumber('0'), undefined);
    assert.equal(parsePartitionNumber('p1'), undefined);
  });

  it('reads uevent files and keeps device names inside /dev', () => {
    const uevent = parseUevent('MAJOR=7\nMINOR=0\nDEVNAME=loop0\nDEVTYPE=disk\nDISKSEQ=9\n');
    assert.equal(uevent.get('DEVNAME'), 'loop0');
    assert.equal(deviceNodeName('mapper/vg-lv'), 'mapper/vg-lv');
    for (const bad of ['', '/dev/sda', '../sda', 'a/../b', 'a//b', 'x\0', undefined]) {
      assert.equal(deviceNodeName(bad), undefined, String(bad));
    }
  });
});

const hasMkfs = spawnSync('mkfs.ext4', ['-V'], { encoding: 'utf8' }).status === 0;

describe('readSuperblockUuid on real images (the fallback where /run/udev is absent)', () => {
  let dir = '';
  before(() => {
    dir = realpathSync(mkdtempSync(join(tmpdir(), 'lvp-superblock-')));
  });
  after(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it(
    'reads the UUID of an ext4 made by mkfs.ext4 -U',
    { skip: hasMkfs ? false : 'mkfs.ext4 is not installed' },
    async () => {
      const image = join(dir, 'ext4.img');
      const uuid = 'F1E2D3C4-B5A6-4978-8695-A4B3C2D1E0F9';
      const made = spawnSync('mkfs.ext4', ['-q', '-F', '-U', uuid, image, '8M'], { encoding: 'utf8' });
      assert.equal(made.status, 0, made.stderr);
      assert.deepEqual(await readSuperblockUuid(image), { type: 'ext', uuid: uuid.toLowerCase() });
      // Not a block device: refused when one is expected (a /dev node that is not what sysfs named).
      assert.equal(await readSuperblockUuid(image, '7:0'), undefined);
    },
  );

  it('reads images built here, and nothing from a missing path, a directory or a short file', async () => {
    const xfs = join(dir, 'xfs.img');
    writeFileSync(xfs, superblockImage('xfs', uuidBytes(UUID)).subarray(0, 4096));
    assert.deepEqual(await readSuperblockUuid(xfs), { type: 'xfs', uuid: UUID });
    const btrfs = join(dir, 'btrfs.img');
    writeFileSync(btrfs, superblockImage('btrfs', uuidBytes(UUID)));
    assert.deepEqual(await readSuperblockUuid(btrfs), { type: 'btrfs', uuid: UUID });
    assert.equal(await readSuperblockUuid(join(dir, 'missing')), undefined);
    mkdirSync(join(dir, 'a-directory'));
    assert.equal(await readSuperblockUuid(join(dir, 'a-directory')), undefined);
    writeFileSync(join(dir, 'short'), 'XFSB');
    assert.equal(await readSuperblockUuid(join(dir, 'short')), undefined);
  });
});
