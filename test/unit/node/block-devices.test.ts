/**
 * LinuxBlockDevices against a fake node in a temp dir: a sysfs tree laid out as the kernel lays
 * it out (class/block links into devices/…, partitions inside their disk), regular sparse files
 * standing in for the device nodes, a udev database, a by-id directory, a mountinfo and a swaps
 * file. And MemoryBlockDevices; both through the shared contract.
 */
import assert from 'node:assert/strict';
import { mkdirSync, renameSync, rmSync, symlinkSync, truncateSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';

import { buildGpt } from '../../../src/core/devices/gpt.js';
import type { DeviceFacts, Signature } from '../../../src/core/devices/model.js';
import {
  AGENT_PARTITION_NAME,
  BlockDeviceInventoryError,
  LinuxBlockDevices,
  PROBE_WINDOW_BYTES,
  detectSignatures,
  parseSwaps,
  probeWindows,
} from '../../../src/core/node/block-devices.js';
import { MemoryBlockDevices, blankDeviceFacts } from '../../../src/core/node/memory-block-devices.js';
import { MiB, blockDevicesContract, type BlockDevicesFixture } from '../../contract/block-devices-contract.js';
import { asError } from '../../../src/core/unknown-values.js';
import { Cleanup, makeTempDir } from '../../support/real-node.js';
import { FakeNode } from '../../support/fake-block-node.js';

const KiB = 1024;

function find(devices: readonly DeviceFacts[], name: string): DeviceFacts {
  const device = devices.find((d) => d.name === name);
  assert.ok(device !== undefined, `${name} is listed`);
  return device;
}

const u32le = (value: number): Buffer => {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(value);
  return b;
};
const u32be = (value: number): Buffer => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(value);
  return b;
};
const u64le = (value: bigint): Buffer => {
  const b = Buffer.alloc(8);
  b.writeBigUInt64LE(value);
  return b;
};
const BOOT_SIGNATURE = Buffer.from([0x55, 0xaa]);
const MD_MAGIC = 0xa92b4efc;

/** A GPT header at offset naming entriesLba (in sectors of `sector` bytes), 128 entries of 128 bytes. */
function gptHeader(entriesLba: number): Buffer {
  const header = Buffer.alloc(92);
  header.write('EFI PART', 0, 'latin1');
  u64le(BigInt(entriesLba)).copy(header, 72);
  u32le(128).copy(header, 80);
  u32le(128).copy(header, 84);
  return header;
}

/** One device per case: what is written where, and the signatures the probe must find. */
interface SignatureCase {
  readonly name: string;
  readonly what: string;
  readonly sizeBytes?: number;
  readonly writes: readonly (readonly [number, Buffer | string])[];
  readonly expected: readonly Signature[];
}

const SIZE = 8 * MiB;

const SIGNATURE_CASES: readonly SignatureCase[] = [
  { name: 'blank', what: 'an all-zero device is blank', writes: [], expected: [] },
  {
    name: 'dos',
    what: 'an MBR with one partition entry',
    writes: [
      [446 + 4, Buffer.from([0x83])],
      [510, BOOT_SIGNATURE],
    ],
    expected: [{ type: 'dos', offset: 510 }],
  },
  {
    name: 'gpt',
    what: 'a GPT with its protective MBR, entries and backup at the end; the tables explain their own bytes',
    writes: [
      [446 + 4, Buffer.from([0xee])],
      [510, BOOT_SIGNATURE],
      [512, gptHeader(2)],
      [1024, 'an entry'],
      [SIZE - 33 * 512, 'a backup entry'],
      [SIZE - 512, gptHeader(SIZE / 512 - 33)],
    ],
    expected: [
      { type: 'dos', offset: 510 },
      { type: 'gpt', offset: 512 },
      { type: 'gpt-backup', offset: SIZE - 512 },
    ],
  },
  {
    name: 'gptdata',
    what: 'a GPT and bytes no table explains: data after the named ones',
    writes: [
      [512, gptHeader(2)],
      [512 * KiB, 'payload'],
    ],
    expected: [
      { type: 'gpt', offset: 512 },
      { type: 'data', offset: 512 * KiB },
    ],
  },
  {
    name: 'gpt4k',
    what: 'a GPT of 4 KiB sectors, primary and backup',
    writes: [
      [4096, 'EFI PART'],
      [SIZE - 4096, 'EFI PART'],
    ],
    expected: [
      { type: 'gpt', offset: 4096 },
      { type: 'gpt-backup', offset: SIZE - 4096 },
    ],
  },
  {
    name: 'gptbackup',
    what: 'only the backup GPT left (the start was wiped)',
    writes: [[SIZE - 512, gptHeader(SIZE / 512 - 33)]],
    expected: [{ type: 'gpt-backup', offset: SIZE - 512 }],
  },
  {
    name: 'ext4',
    what: 'ext4 (0xEF53 at 1080), which owns the rest of the device',
    writes: [
      [1080, Buffer.from([0x53, 0xef])],
      [2048, 'group descriptors'],
      [SIZE - 100, 'more metadata'],
    ],
    expected: [{ type: 'ext4', offset: 1080 }],
  },
  { name: 'xfs', what: 'xfs', writes: [[0, 'XFSB']], expected: [{ type: 'xfs', offset: 0 }] },
  { name: 'btrfs', what: 'btrfs', writes: [[65_600, '_BHRfS_M']], expected: [{ type: 'btrfs', offset: 65_600 }] },
  {
    name: 'swap',
    what: 'swap of 4 KiB pages',
    writes: [[4086, 'SWAPSPACE2']],
    expected: [{ type: 'swap', offset: 4086 }],
  },
  {
    name: 'swap64k',
    what: 'old-style swap of 64 KiB pages',
    writes: [[65_526, 'SWAP-SPACE']],
    expected: [{ type: 'swap', offset: 65_526 }],
  },
  {
    name: 'lvm',
    what: 'an LVM2 label in the second sector (reported where wipefs erases: the type string)',
    writes: [
      [512, 'LABELONE'],
      [536, 'LVM2 001'],
    ],
    expected: [{ type: 'LVM2_member', offset: 536 }],
  },
  {
    name: 'lvmhalf',
    what: 'a LABELONE without the LVM2 type is only data',
    writes: [[0, 'LABELONE']],
    expected: [{ type: 'data', offset: 0 }],
  },
  { name: 'luks', what: 'LUKS', writes: [[0, 'LUKS\xba\xbe']], expected: [{ type: 'crypto_LUKS', offset: 0 }] },
  {
    name: 'luks2',
    what: "LUKS2's secondary header alone",
    writes: [[16 * KiB, 'SKUL\xba\xbe']],
    expected: [{ type: 'crypto_LUKS', offset: 16 * KiB }],
  },
  {
    name: 'md12',
    what: 'md v1.2',
    writes: [[4096, u32le(MD_MAGIC)]],
    expected: [{ type: 'linux_raid_member', offset: 4096 }],
  },
  {
    name: 'md11',
    what: 'md v1.1',
    writes: [[0, u32le(MD_MAGIC)]],
    expected: [{ type: 'linux_raid_member', offset: 0 }],
  },
  {
    name: 'md10',
    what: 'md v1.0 at the end, 4 KiB aligned',
    sizeBytes: SIZE + 1536,
    writes: [[SIZE - 8192, u32le(MD_MAGIC)]],
    expected: [{ type: 'linux_raid_member', offset: SIZE - 8192 }],
  },
  {
    name: 'md090',
    what: 'md v0.90 big-endian in the last whole 64 KiB block but one',
    sizeBytes: SIZE + 100 * KiB,
    writes: [[SIZE, u32be(MD_MAGIC)]],
    expected: [{ type: 'linux_raid_member', offset: SIZE }],
  },
  {
    name: 'md090le',
    what: 'md v0.90 little-endian',
    writes: [[SIZE - 65_536, u32le(MD_MAGIC)]],
    expected: [{ type: 'linux_raid_member', offset: SIZE - 65_536 }],
  },
  { name: 'iso', what: 'iso9660', writes: [[32_769, 'CD001']], expected: [{ type: 'iso9660', offset: 32_769 }] },
  {
    name: 'vfat',
    what: 'FAT16: its boot sector is not a dos table',
    writes: [
      [54, 'FAT16   '],
      [510, BOOT_SIGNATURE],
    ],
    expected: [{ type: 'vfat', offset: 54 }],
  },
  {
    name: 'vfat32',
    what: 'FAT32',
    writes: [
      [82, 'FAT32   '],
      [510, BOOT_SIGNATURE],
    ],
    expected: [{ type: 'vfat', offset: 82 }],
  },
  {
    name: 'ntfs',
    what: 'NTFS',
    writes: [
      [3, 'NTFS    '],
      [510, BOOT_SIGNATURE],
    ],
    expected: [{ type: 'ntfs', offset: 3 }],
  },
  {
    name: 'zfs',
    what: 'a ZFS uberblock in the first label',
    writes: [[128 * KiB + 2 * KiB, u64le(0xbab10cn)]],
    expected: [{ type: 'zfs_member', offset: 130 * KiB }],
  },
  {
    name: 'zfsend',
    what: 'a ZFS uberblock (big-endian) in the last label only',
    sizeBytes: SIZE + 100 * KiB,
    writes: [[SIZE - 256 * KiB + 128 * KiB + 5 * KiB, Buffer.from([0, 0, 0, 0, 0, 0xba, 0xb1, 0x0c])]],
    expected: [{ type: 'zfs_member', offset: SIZE - 123 * KiB }],
  },
  {
    name: 'dataend',
    what: 'a non-zero byte in the last window: data',
    writes: [[SIZE - 100, 'x']],
    expected: [{ type: 'data', offset: SIZE - 100 }],
  },
  {
    name: 'beyond',
    what: 'bytes between the windows are never read; the first byte of the last window is',
    writes: [
      [PROBE_WINDOW_BYTES, 'middle'],
      [SIZE - PROBE_WINDOW_BYTES - 1, 'y'],
      [SIZE - PROBE_WINDOW_BYTES, 'z'],
    ],
    expected: [{ type: 'data', offset: SIZE - PROBE_WINDOW_BYTES }],
  },
  {
    name: 'small',
    what: 'a device under 2 MiB is read whole: ext4 at its start, md v1.0 at its end',
    sizeBytes: MiB,
    writes: [
      [1080, Buffer.from([0x53, 0xef])],
      [MiB - 8192, u32le(MD_MAGIC)],
    ],
    expected: [
      { type: 'ext4', offset: 1080 },
      { type: 'linux_raid_member', offset: MiB - 8192 },
    ],
  },
];

describe('LinuxBlockDevices signatures (fake node)', () => {
  const cleanup = new Cleanup();
  let devices: readonly DeviceFacts[] = [];

  before(async () => {
    const node = new FakeNode(makeTempDir(cleanup, 'lvp-blockdev-'));
    SIGNATURE_CASES.forEach((c, i) => {
      node.addDisk(`sig-${c.name}`, { majorMinor: `8:${16 * i}`, sizeBytes: c.sizeBytes ?? SIZE });
      for (const [offset, bytes] of c.writes) node.write(`sig-${c.name}`, offset, bytes);
    });
    node.addDisk('sig-nonode', { majorMinor: '8:2000', sizeBytes: SIZE, noNode: true });
    node.addDisk('sig-empty', { majorMinor: '7:9', sizeBytes: 0 });
    devices = await node.inventory().devices();
  });
  after(() => {
    cleanup.run();
  });

  for (const c of SIGNATURE_CASES) {
    it(`${c.name}: ${c.what}`, () => {
      assert.deepEqual(find(devices, `sig-${c.name}`).signatures, c.expected);
    });
  }

  it('marks a device it cannot open unreadable, and lists the others', () => {
    assert.deepEqual(find(devices, 'sig-nonode').signatures, [{ type: 'unreadable', offset: 0 }]);
    assert.equal(devices.length, SIGNATURE_CASES.length + 2);
  });

  it('reads nothing of a device of size 0 (a detached loop): no signatures', () => {
    assert.deepEqual(find(devices, 'sig-empty').signatures, []);
  });

  it('reads both ends of a big device, all of a small one', () => {
    assert.deepEqual(probeWindows(0), []);
    assert.deepEqual(probeWindows(2 * MiB), [{ offset: 0, length: 2 * MiB }]);
    assert.deepEqual(probeWindows(3 * MiB), [
      { offset: 0, length: MiB },
      { offset: 2 * MiB, length: MiB },
    ]);
    assert.deepEqual(detectSignatures({ sizeBytes: 0, windows: [] }), []);
  });
});

describe('LinuxBlockDevices facts (fake node)', () => {
  const cleanup = new Cleanup();
  let node: FakeNode;
  let inventory: LinuxBlockDevices;
  let devices: readonly DeviceFacts[] = [];
  const ata = 'pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0';

  before(async () => {
    node = new FakeNode(makeTempDir(cleanup, 'lvp-blockdev-'));
    node.addDisk('sda', {
      majorMinor: '8:0',
      sizeBytes: 64 * MiB,
      bus: ata,
      rotational: true,
      device: { model: 'Samsung SSD 870 \n', vendor: 'ATA     \n', wwid: '  naa.5002538f4  \n' },
    });
    node.udevRecord('8:0', { ID_BUS: 'ata', ID_SERIAL_SHORT: 'S5Y1NX0R' });
    node.addPartition('sda', 'sda1', { majorMinor: '8:1', sizeBytes: 16 * MiB, number: 1, partName: 'lvp-carved' });
    node.addPartition('sda', 'sda2', { majorMinor: '8:2', sizeBytes: 16 * MiB, number: 2, partName: 'data' });
    node.addHolder('sda2', 'dm-0');
    node.addDisk('dm-0', { majorMinor: '253:0', sizeBytes: 8 * MiB, attributes: { 'dm/uuid': 'LVM-abc\n' } });
    node.addDisk('dm-1', { majorMinor: '253:1', sizeBytes: 8 * MiB, attributes: { 'dm/uuid': 'mpath-3600a0b8\n' } });
    node.addDisk('md0', { majorMinor: '9:0', sizeBytes: 8 * MiB });
    node.addDisk('loop0', { majorMinor: '7:0', sizeBytes: 8 * MiB });
    const nvme = 'pci0000:00/0000:00:03.0/nvme/nvme0';
    node.addDisk('nvme0n1', { majorMinor: '259:0', sizeBytes: 8 * MiB, bus: nvme, attributes: { wwid: 'eui.0025\n' } });
    node.attribute('nvme0n1', 'device/serial', 'S4EWNX0 \n');
    node.addPartition('nvme0n1', 'nvme0n1p1', { majorMinor: '259:1', sizeBytes: 4 * MiB, number: 1 });
    const virtio = 'pci0000:00/0000:00:02.0/virtio1';
    node.addDisk('vda', { majorMinor: '254:16', sizeBytes: 8 * MiB, bus: virtio, attributes: { serial: 'vd-1\n' } });
    addTransportDisks(node);
    addUsers(node);
    inventory = node.inventory();
    devices = await inventory.devices();
  });
  after(() => {
    cleanup.run();
  });

  it('reads a whole disk: size, flags, trimmed model, vendor and WWID, serial from udev, partitions, by-id names', () => {
    assert.deepEqual(find(devices, 'sda'), {
      name: 'sda',
      devicePath: '/dev/sda',
      majorMinor: '8:0',
      type: 'disk',
      sizeBytes: 64 * MiB,
      readOnly: false,
      removable: false,
      rotational: true,
      model: 'Samsung SSD 870',
      vendor: 'ATA',
      serial: 'S5Y1NX0R',
      wwid: 'naa.5002538f4',
      transport: 'sata',
      byIdNames: ['ata-Samsung_SSD_870_S5Y1NX0R', 'wwn-0x5002538f4'],
      partitions: ['sda1', 'sda2'],
      holders: [],
      mountPoints: [],
      swapActive: false,
      signatures: [],
      madeByAgent: false,
    });
  });

  it("reads a partition: its disk as parent, the disk's hardware facts, made by the agent when its GPT name says so", () => {
    const sda1 = find(devices, 'sda1');
    assert.equal(sda1.type, 'part');
    assert.equal(sda1.parent, 'sda');
    assert.equal(sda1.madeByAgent, true);
    assert.equal(sda1.rotational, true, "the disk's queue/rotational");
    assert.deepEqual([sda1.model, sda1.serial, sda1.transport], ['Samsung SSD 870', 'S5Y1NX0R', 'sata']);
    assert.equal(sda1.wwid, undefined, 'a partition has no WWID of its own');
    assert.deepEqual(sda1.byIdNames, ['ata-Samsung_SSD_870_S5Y1NX0R-part1']);
    assert.equal(find(devices, 'sda2').madeByAgent, false, 'another GPT name');
    assert.equal(find(devices, 'nvme0n1p1').madeByAgent, false, 'no GPT name');
    assert.equal(find(devices, 'nvme0n1p1').parent, 'nvme0n1');
    assert.equal(find(devices, 'sda').parent, undefined);
  });

  it('lists holders', () => {
    assert.deepEqual(find(devices, 'sda2').holders, ['dm-0']);
    assert.deepEqual(find(devices, 'sda1').holders, []);
  });

  it('names types by DEVTYPE and driver: part, loop, dm, mpath (dm/uuid), md, disk', () => {
    const types = ['sda', 'sda1', 'loop0', 'dm-0', 'dm-1', 'md0', 'nvme0n1', 'nvme0n1p1'].map(
      (name) => find(devices, name).type,
    );
    assert.deepEqual(types, ['disk', 'part', 'loop', 'dm', 'mpath', 'md', 'disk', 'part']);
  });

  it('tells transports: nvme by name, virtio by sysfs path, udev ID_BUS and ID_PATH, the sysfs path without udev', () => {
    const transports = Object.fromEntries(devices.map((d) => [d.name, d.transport]));
    assert.deepEqual(
      {
        nvme0n1: transports['nvme0n1'],
        nvme0n1p1: transports['nvme0n1p1'],
        vda: transports['vda'],
        sda: transports['sda'],
        sdb: transports['sdb'],
        sdc: transports['sdc'],
        sdd: transports['sdd'],
        sde: transports['sde'],
        sdf: transports['sdf'],
        sdg: transports['sdg'],
        sdh: transports['sdh'],
        loop0: transports['loop0'],
      },
      {
        nvme0n1: 'nvme',
        nvme0n1p1: 'nvme',
        vda: 'virtio',
        sda: 'sata',
        sdb: 'sas',
        sdc: 'usb',
        sdd: 'usb',
        sde: 'scsi',
        sdf: 'usb',
        sdg: 'sas',
        sdh: 'unknown',
        loop0: 'unknown',
      },
    );
  });

  it('reads serials from device/serial (NVMe) and serial (virtio), WWIDs from wwid', () => {
    assert.equal(find(devices, 'nvme0n1').serial, 'S4EWNX0');
    assert.equal(find(devices, 'nvme0n1').wwid, 'eui.0025');
    assert.equal(find(devices, 'vda').serial, 'vd-1');
    assert.equal(find(devices, 'vda').wwid, undefined);
    assert.equal(find(devices, 'sdh').serial, '');
  });

  it('reads read-only and removable flags', () => {
    assert.equal(find(devices, 'sdh').readOnly, true);
    assert.equal(find(devices, 'sdf').removable, true);
    assert.equal(find(devices, 'sde').readOnly, false);
  });

  it('finds mount points by major:minor (a path with a space, a bind mount) and by source (btrfs shows 0:N)', () => {
    assert.deepEqual(find(devices, 'dm-0').mountPoints, ['/mnt/a b', '/var/lib/bound']);
    assert.deepEqual(find(devices, 'sde').mountPoints, ['/srv/btrfs']);
    assert.deepEqual(find(devices, 'sda').mountPoints, []);
  });

  it('finds active swaps by their /dev name and through a link that resolves to the device; a swap file is none', () => {
    assert.equal(find(devices, 'sdc').swapActive, true);
    assert.equal(find(devices, 'sdd').swapActive, true);
    assert.equal(find(devices, 'sdb').swapActive, false);
    assert.deepEqual(parseSwaps('Filename Type\n/dev/a\\040b partition 1 0 -2\n'), ['/dev/a b']);
  });

  it('lists by-id names sorted, ignoring dangling links, links elsewhere and entries that are no links', () => {
    assert.deepEqual(find(devices, 'sdb').byIdNames, []);
    assert.deepEqual(find(devices, 'nvme0n1').byIdNames, ['nvme-eui.0025', 'nvme-model_S4EWNX0']);
  });

  it('answers the same facts on an idle pass (previous) as on a fresh read', async () => {
    const idle = await inventory.devices({ previous: devices });
    assert.deepEqual(idle, devices);
    assert.deepEqual(await inventory.devices({ previous: idle }), devices);
  });
});

/** Disks whose transport comes from udev records or, without one, from their sysfs path. */
function addTransportDisks(node: FakeNode): void {
  const scsi = (host: number): string => `pci0000:00/0000:00:10.0/host${host}/target${host}:0:0/${host}:0:0:0`;
  node.addDisk('sdb', { majorMinor: '8:16', sizeBytes: 8 * MiB, bus: scsi(1) });
  node.udevRecord('8:16', { ID_BUS: 'scsi', ID_PATH: 'pci-0000:00:10.0-sas-0x5000c500a1b2c3d4-lun-0' });
  node.addDisk('sdc', { majorMinor: '8:32', sizeBytes: 8 * MiB, bus: scsi(2) });
  node.udevRecord('8:32', { ID_BUS: 'usb' });
  node.addDisk('sdd', { majorMinor: '8:48', sizeBytes: 8 * MiB, bus: scsi(3) });
  node.udevRecord('8:48', { ID_BUS: 'scsi', ID_PATH: 'pci-0000:00:14.0-usb-0:1:1.0-scsi-0:0:0:0' });
  node.addDisk('sde', { majorMinor: '8:64', sizeBytes: 8 * MiB, bus: scsi(4) });
  node.udevRecord('8:64', { ID_BUS: 'scsi', ID_PATH: 'pci-0000:00:05.0-scsi-0:0:0:0' });
  const usb = 'pci0000:00/0000:00:14.0/usb1/1-1/1-1:1.0/host5/target5:0:0/5:0:0:0';
  node.addDisk('sdf', { majorMinor: '8:80', sizeBytes: 8 * MiB, bus: usb, removable: true });
  const sas = 'pci0000:00/0000:00:11.0/host6/port-6:0/end_device-6:0/target6:0:0/6:0:0:0';
  node.addDisk('sdg', { majorMinor: '8:96', sizeBytes: 8 * MiB, bus: sas });
  node.addDisk('sdh', { majorMinor: '8:112', sizeBytes: 8 * MiB, bus: 'platform/some-controller', ro: true });
}

/** Mounts, swaps and by-id links of the facts node. */
function addUsers(node: FakeNode): void {
  writeFileSync(
    node.mountInfo,
    [
      '1 0 254:0 / / rw - ext4 /dev/root rw',
      '40 1 253:0 / /mnt/a\\040b rw,relatime shared:5 - ext4 /dev/mapper/vg-data rw',
      '41 1 253:0 /sub /var/lib/bound rw,relatime - ext4 /dev/mapper/vg-data rw',
      '42 1 0:45 / /srv/btrfs rw - btrfs /dev/sde rw,space_cache=v2',
      '',
    ].join('\n'),
  );
  mkdirSync(join(node.root, 'links'));
  symlinkSync(join(node.dev, 'sdd'), join(node.root, 'links', 'swap-link'));
  writeFileSync(
    node.swaps,
    [
      'Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority',
      `${node.dev}/sdc                               partition\t8388604\t\t0\t\t-2`,
      `${join(node.root, 'links', 'swap-link')}        partition\t8388604\t\t0\t\t-3`,
      `${join(node.root, 'swapfile')}                  file\t\t1048572\t\t0\t\t-4`,
      '',
    ].join('\n'),
  );
  writeFileSync(join(node.root, 'swapfile'), '');
  node.byId('wwn-0x5002538f4', '../../sda');
  node.byId('ata-Samsung_SSD_870_S5Y1NX0R', '../../sda');
  node.byId('ata-Samsung_SSD_870_S5Y1NX0R-part1', '../../sda1');
  node.byId('nvme-model_S4EWNX0', '../../nvme0n1');
  node.byId('nvme-eui.0025', `${node.dev}/nvme0n1`);
  node.byId('dangling', '../../sdz');
  node.byId('elsewhere', '/tmp/not-a-device');
  writeFileSync(join(node.dev, 'disk', 'by-id', 'not-a-link'), '');
}

describe('LinuxBlockDevices: the agent’s partitions on a kernel that did not read their names (fake node)', () => {
  const cleanup = new Cleanup();
  let devices: readonly DeviceFacts[] = [];

  /** A disk of 64 MiB carved into 3 by buildGpt, its partitions added as partx adds them (no PARTNAME). */
  const carvedDisk = (
    node: FakeNode,
    name: string,
    major: number,
    gpt: { name?: string; tear?: boolean } = {},
  ): void => {
    const image = buildGpt({
      sizeBytes: 64 * MiB,
      partitions: 3,
      ...(gpt.name === undefined ? {} : { partitionName: gpt.name }),
    });
    node.addDisk(name, { majorMinor: `${String(major)}:0`, sizeBytes: 64 * MiB });
    const primary = Buffer.from(image.primary.bytes);
    if (gpt.tear === true) primary[2 * 512 + 60] = 0x41; // a byte of the first entry's name: the array's CRC fails
    node.write(name, image.primary.offset, primary);
    node.write(name, image.backup.offset, Buffer.from(image.backup.bytes));
    for (const p of image.partitions)
      node.addPartition(name, `${name}p${String(p.number)}`, {
        majorMinor: `${String(major)}:${String(p.number)}`,
        sizeBytes: p.sizeBytes,
        number: p.number,
        startBytes: p.startBytes,
      });
  };

  before(async () => {
    const node = new FakeNode(makeTempDir(cleanup, 'lvp-blockdev-names-'));
    carvedDisk(node, 'loop1', 7);
    carvedDisk(node, 'loop2', 8, { name: 'scratch' });
    carvedDisk(node, 'loop3', 9, { tear: true });
    carvedDisk(node, 'loop4', 10);
    // the kernel read a name for this one: it is the truth, whatever the table says
    node.attribute(
      'loop4p1',
      'uevent',
      'MAJOR=10\nMINOR=1\nDEVNAME=loop4p1\nDEVTYPE=partition\nPARTN=1\nPARTNAME=data\n',
    );
    // a partition at a start the table does not list
    node.attribute('loop4p2', 'start', '4\n');
    devices = await node.inventory().devices();
  });
  after(() => {
    cleanup.run();
  });

  const made = (disk: string): boolean[] => [1, 2, 3].map((n) => find(devices, `${disk}p${String(n)}`).madeByAgent);

  it('reads the names from the disk’s own GPT: partitions named lvp-carved are the agent’s', () => {
    assert.deepEqual(made('loop1'), [true, true, true]);
    assert.deepEqual(
      find(devices, 'loop1')
        .signatures.find((s) => s.type === 'gpt')
        ?.partitions?.map((p) => p.name),
      ['lvp-carved', 'lvp-carved', 'lvp-carved'],
    );
  });

  it('a disk carved between two passes: its partitions are the agent’s on the idle pass that follows (the disk probed again first)', async () => {
    const node = new FakeNode(makeTempDir(cleanup, 'lvp-blockdev-carve-'));
    node.addDisk('loop7', { majorMinor: '7:7', sizeBytes: 64 * MiB });
    const inventory = node.inventory();
    const before = await inventory.devices();
    assert.deepEqual(find(before, 'loop7').signatures, [], 'blank');
    const image = buildGpt({ sizeBytes: 64 * MiB, partitions: 2 });
    node.write('loop7', image.primary.offset, Buffer.from(image.primary.bytes));
    node.write('loop7', image.backup.offset, Buffer.from(image.backup.bytes));
    for (const p of image.partitions)
      node.addPartition('loop7', `loop7p${String(p.number)}`, {
        majorMinor: `7:${String(100 + p.number)}`,
        sizeBytes: p.sizeBytes,
        number: p.number,
        startBytes: p.startBytes,
      });
    const after = await inventory.devices({ previous: before });
    assert.deepEqual(
      ['loop7p1', 'loop7p2'].map((n) => find(after, n).madeByAgent),
      [true, true],
    );
    assert.deepEqual(
      after.map((d) => d.name),
      ['loop7', 'loop7p1', 'loop7p2'],
      'in name order',
    );
  });

  it('another name, a table whose entries fail their CRC, a kernel name, or a start the table does not list: not the agent’s', () => {
    assert.deepEqual(made('loop2'), [false, false, false]);
    assert.deepEqual(made('loop3'), [false, false, false]);
    assert.equal(find(devices, 'loop3').signatures.find((s) => s.type === 'gpt')?.partitions, undefined);
    assert.deepEqual(made('loop4'), [false, false, true]);
  });
});

describe('LinuxBlockDevices change stamp and reuse (fake node)', () => {
  const cleanup = new Cleanup();
  const fresh = (): FakeNode => new FakeNode(makeTempDir(cleanup, 'lvp-blockdev-'));
  after(() => {
    cleanup.run();
  });

  it('moves its stamp on a size, partition or device change; not on reads, content writes, ro, holders or medium', async () => {
    const node = fresh();
    node.addDisk('sda', { majorMinor: '8:0', sizeBytes: 8 * MiB });
    const inventory = node.inventory();
    const stamp = await inventory.changeStamp();
    await inventory.devices();
    node.write('sda', 1080, Buffer.from([0x53, 0xef]));
    assert.equal(await inventory.changeStamp(), stamp, 'unchanged');
    const changes: [string, () => void, () => void][] = [
      [
        'size',
        () => {
          node.resize('sda', 16 * MiB);
        },
        () => {
          node.resize('sda', 8 * MiB);
        },
      ],
      [
        'partition',
        () => {
          node.addPartition('sda', 'sda1', { majorMinor: '8:1', sizeBytes: MiB, number: 1 });
        },
        () => {
          node.remove('sda1');
        },
      ],
      [
        'device',
        () => {
          node.addDisk('sdb', { majorMinor: '8:16', sizeBytes: MiB });
        },
        () => {
          node.remove('sdb');
        },
      ],
      [
        'device of size 0 (not in /proc/partitions)',
        () => {
          node.addDisk('loop7', { majorMinor: '7:7', sizeBytes: 0 });
        },
        () => {
          node.remove('loop7');
        },
      ],
    ];
    for (const [what, change, undo] of changes) {
      change();
      assert.notEqual(await inventory.changeStamp(), stamp, `a ${what} change moves the stamp`);
      undo();
      assert.equal(await inventory.changeStamp(), stamp, `undoing the ${what} change restores it`);
    }
    // Two reads only: these are left to devices(), which reads them on every call.
    node.attribute('sda', 'ro', '1\n');
    node.addHolder('sda', 'dm-3');
    node.attribute('sda', 'diskseq', '12\n');
    assert.equal(await inventory.changeStamp(), stamp, 'ro, holders and diskseq are not in the stamp');
    assert.deepEqual(
      (await inventory.devices()).map((d) => [d.readOnly, d.holders]),
      [[true, ['dm-3']]],
    );
  });

  it('reuses the signatures of unchanged devices from its previous answer, and probes changed ones again', async () => {
    const node = fresh();
    node.addDisk('sda', { majorMinor: '8:0', sizeBytes: 8 * MiB, attributes: { diskseq: '5\n' } });
    node.addDisk('sdb', { majorMinor: '8:16', sizeBytes: 8 * MiB, attributes: { diskseq: '6\n' } });
    node.addDisk('sdc', { majorMinor: '8:32', sizeBytes: 8 * MiB, noNode: true });
    const inventory = node.inventory();
    const first = await inventory.devices();
    assert.deepEqual(find(first, 'sdc').signatures, [{ type: 'unreadable', offset: 0 }]);
    for (const name of ['sda', 'sdb']) node.write(name, 1080, Buffer.from([0x53, 0xef]));
    writeFileSync(join(node.dev, 'sdc'), '');
    truncateSync(join(node.dev, 'sdc'), 8 * MiB);
    const second = await inventory.devices({ previous: first });
    assert.deepEqual(find(second, 'sda').signatures, [], 'reused: contents are not looked at');
    assert.deepEqual(find(second, 'sdc').signatures, [], 'an unreadable answer is never reused');
    node.resize('sda', 16 * MiB);
    node.attribute('sdb', 'diskseq', '7\n');
    const third = await inventory.devices({ previous: second });
    const ext4 = [{ type: 'ext4', offset: 1080 }];
    assert.deepEqual(find(third, 'sda').signatures, ext4, 'resized: probed again');
    assert.deepEqual(find(third, 'sdb').signatures, ext4, 'another medium (diskseq): probed again');
    const copies = second.map((d) => ({ ...d }));
    const other = await node.inventory().devices({ previous: copies });
    assert.deepEqual(find(other, 'sdb').signatures, ext4, 'facts this instance did not answer are not trusted');
    assert.deepEqual(find(await inventory.devices(), 'sda').signatures, ext4, 'without previous, all are probed');
  });

  it('keeps hardware facts on an idle pass and reads ro, holders, partitions, mounts, swaps and by-id names again', async () => {
    const node = fresh();
    node.addDisk('sda', { majorMinor: '8:0', sizeBytes: 8 * MiB, device: { model: 'Old model\n' } });
    const inventory = node.inventory();
    const first = await inventory.devices();
    node.attribute('sda', 'device/model', 'New model\n');
    node.attribute('sda', 'ro', '1\n');
    node.addHolder('sda', 'md0');
    node.write('sda', 510, BOOT_SIGNATURE);
    node.addPartition('sda', 'sda1', { majorMinor: '8:1', sizeBytes: MiB, number: 1 });
    writeFileSync(node.mountInfo, '1 0 254:0 / / rw - ext4 /dev/root rw\n40 1 8:0 / /mnt/sda rw - ext4 /dev/sda rw\n');
    writeFileSync(node.swaps, `Filename Type Size Used Priority\n${node.dev}/sda1 partition 1024 0 -2\n`);
    node.byId('wwn-0x5000', '../../sda');
    const second = await inventory.devices({ previous: first });
    const sda = find(second, 'sda');
    assert.equal(sda.model, 'Old model', 'hardware facts stay while the device does');
    assert.deepEqual(
      [sda.readOnly, sda.holders, sda.partitions, sda.mountPoints, sda.byIdNames],
      [true, ['md0'], ['sda1'], ['/mnt/sda'], ['wwn-0x5000']],
    );
    assert.deepEqual(sda.signatures, [{ type: 'dos', offset: 510 }], 'other partitions: probed again');
    assert.equal(find(second, 'sda1').swapActive, true);
    assert.equal(find(await inventory.devices(), 'sda').model, 'New model', 'a fresh read reads them');
  });

  it('reads the hardware facts again once udev writes its record (serial, bus), as after a device appears', async () => {
    const node = fresh();
    const scsi = 'pci0000:00/0000:00:10.0/host1/target1:0:0/1:0:0:0';
    node.addDisk('sda', { majorMinor: '8:0', sizeBytes: 8 * MiB, bus: scsi });
    const inventory = node.inventory();
    const first = await inventory.devices();
    assert.deepEqual([find(first, 'sda').serial, find(first, 'sda').transport], ['', 'unknown']);
    assert.equal(find(await inventory.devices({ previous: first }), 'sda').serial, '', 'no record yet');
    node.udevRecord('8:0', { ID_BUS: 'ata', ID_SERIAL_SHORT: 'S5Y1' });
    const second = await inventory.devices({ previous: first });
    assert.deepEqual([find(second, 'sda').serial, find(second, 'sda').transport], ['S5Y1', 'sata']);
  });

  it("reads a partition the kernel made again (a new sysfs entry) afresh; its medium is its disk's", async () => {
    const node = fresh();
    node.addDisk('sda', { majorMinor: '8:0', sizeBytes: 8 * MiB, attributes: { diskseq: '5\n' } });
    node.addPartition('sda', 'sda1', { majorMinor: '8:1', sizeBytes: MiB, number: 1, partName: 'data' });
    const inventory = node.inventory();
    const first = await inventory.devices();
    assert.equal(find(first, 'sda1').madeByAgent, false);
    // The table re-read: sda1 again, same number and size, now named by the agent. The old
    // directory is moved aside, not removed, so that its inode cannot be handed to the new one.
    renameSync(node.dirOf('sda1'), join(node.root, 'sda1-before'));
    rmSync(join(node.sys, 'class', 'block', 'sda1'));
    node.addPartition('sda', 'sda1', { majorMinor: '8:1', sizeBytes: MiB, number: 1, partName: AGENT_PARTITION_NAME });
    const second = await inventory.devices({ previous: first });
    assert.equal(find(second, 'sda1').madeByAgent, true);
    node.write('sda1', 1080, Buffer.from([0x53, 0xef]));
    assert.deepEqual(find(await inventory.devices({ previous: second }), 'sda1').signatures, [], 'reused');
    node.attribute('sda', 'diskseq', '6\n');
    const third = await inventory.devices({ previous: second });
    assert.deepEqual(find(third, 'sda1').signatures, [{ type: 'ext4', offset: 1080 }], "the disk's medium changed");
  });

  it('reads by-id names again when the directory changes, and reuses them while its mtime stands', async () => {
    const node = fresh();
    node.addDisk('sda', { majorMinor: '8:0', sizeBytes: 8 * MiB });
    node.byId('a', '../../sda');
    const byId = join(node.dev, 'disk', 'by-id');
    const settled = new Date(Date.now() - 60_000);
    utimesSync(byId, settled, settled);
    const inventory = node.inventory();
    const first = await inventory.devices();
    assert.deepEqual(find(first, 'sda').byIdNames, ['a']);
    // Not what udev can do (its changes move the mtime): shows the last read stands.
    rmSync(join(byId, 'a'));
    node.byId('b', '../../sda');
    utimesSync(byId, settled, settled);
    assert.deepEqual(find(await inventory.devices({ previous: first }), 'sda').byIdNames, ['a']);
    node.byId('c', '../../sda');
    assert.deepEqual(find(await inventory.devices({ previous: first }), 'sda').byIdNames, ['b', 'c']);
  });
});

describe('LinuxBlockDevices on a changing or foreign node (fake node)', () => {
  const cleanup = new Cleanup();
  const fresh = (): FakeNode => new FakeNode(makeTempDir(cleanup, 'lvp-blockdev-'));
  after(() => {
    cleanup.run();
  });

  it('skips a device that vanishes while it is probed, and one whose sysfs entry is a dangling link', async () => {
    const node = fresh();
    node.addDisk('sda', { majorMinor: '8:0', sizeBytes: 8 * MiB });
    node.addDisk('sdb', { majorMinor: '8:16', sizeBytes: 8 * MiB });
    node.addDisk('sdc', { majorMinor: '8:32', sizeBytes: 8 * MiB });
    symlinkSync('../../devices/virtual/block/gone', join(node.sys, 'class', 'block', 'sdz'));
    // sysfs is read before the first await: the probes are under way once devices() returns.
    const pending = node.inventory().devices();
    node.remove('sdb');
    rmSync(join(node.sys, 'class', 'block', 'sdc'));
    rmSync(node.dirOf('sdc'), { recursive: true });
    const devices = await pending;
    assert.deepEqual(
      devices.map((d) => d.name),
      ['sda'],
    );
  });

  it('reads only block device nodes unless told otherwise: a regular file at /dev/<name> is unreadable', async () => {
    const node = fresh();
    node.addDisk('sda', { majorMinor: '8:0', sizeBytes: 8 * MiB });
    const devices = await node.inventory({ acceptRegularFiles: false }).devices();
    assert.deepEqual(find(devices, 'sda').signatures, [{ type: 'unreadable', offset: 0 }]);
  });

  it('fails when sysfs or the mount table cannot be read (a device in use must not look unused); no swaps file is none', async () => {
    const node = fresh();
    node.addDisk('sda', { majorMinor: '8:0', sizeBytes: MiB });
    const noSwaps = await node.inventory({ swapsPath: join(node.root, 'no-swaps') }).devices();
    assert.equal(find(noSwaps, 'sda').swapActive, false);
    await assert.rejects(node.inventory({ mountInfoPath: join(node.root, 'none') }).devices(), (error) => {
      assert.ok(error instanceof BlockDeviceInventoryError);
      assert.equal(error.code, 'ENOENT');
      return true;
    });
    await assert.rejects(node.inventory({ sysRoot: join(node.root, 'no-sys') }).devices(), BlockDeviceInventoryError);
    await assert.rejects(
      node.inventory({ sysRoot: join(node.root, 'no-sys') }).changeStamp(),
      BlockDeviceInventoryError,
    );
    await assert.rejects(node.inventory({ partitionsPath: join(node.root, 'none') }).changeStamp(), (error) => {
      assert.ok(error instanceof BlockDeviceInventoryError);
      assert.equal(error.code, 'ENOENT');
      return true;
    });
  });
});

/** A synchronous change as the fixture's promise (a throw as a rejection). */
function promised(change: () => unknown): Promise<void> {
  try {
    change();
    return Promise.resolve();
  } catch (error) {
    return Promise.reject(asError(error));
  }
}

function fakeNodeFixture(): Promise<BlockDevicesFixture> {
  const cleanup = new Cleanup();
  const node = new FakeNode(makeTempDir(cleanup, 'lvp-blockdev-contract-'));
  return Promise.resolve({
    inventory: node.inventory(),
    addDisk: (name, majorMinor, sizeBytes) =>
      promised(() => {
        node.addDisk(name, { majorMinor, sizeBytes });
      }),
    writeExt4: (name) =>
      promised(() => {
        node.write(name, 1080, Buffer.from([0x53, 0xef]));
      }),
    resize: (name, sizeBytes) =>
      promised(() => {
        node.resize(name, sizeBytes);
      }),
    remove: (name) =>
      promised(() => {
        node.remove(name);
      }),
    dispose: () =>
      promised(() => {
        cleanup.run();
      }),
  });
}

function memoryFixture(): Promise<BlockDevicesFixture> {
  const inventory = new MemoryBlockDevices();
  return Promise.resolve({
    inventory,
    addDisk: (name, majorMinor, sizeBytes) =>
      promised(() => {
        inventory.add(blankDeviceFacts(name, majorMinor, { sizeBytes }));
      }),
    writeExt4: (name) => promised(() => inventory.update(name, { signatures: [{ type: 'ext4', offset: 1080 }] })),
    resize: (name, sizeBytes) => promised(() => inventory.update(name, { sizeBytes })),
    remove: (name) =>
      promised(() => {
        inventory.remove(name);
      }),
    dispose: () => Promise.resolve(),
  });
}

blockDevicesContract('LinuxBlockDevices on a fake node (BlockDeviceInventory contract)', fakeNodeFixture);
blockDevicesContract('MemoryBlockDevices (BlockDeviceInventory contract)', memoryFixture);

describe('MemoryBlockDevices', () => {
  it('answers copies of the facts set, sorted, and counts its answers', async () => {
    const inventory = new MemoryBlockDevices([blankDeviceFacts('sdb', '8:16'), blankDeviceFacts('sda', '8:0')]);
    const devices = await inventory.devices();
    assert.deepEqual(
      devices.map((d) => d.name),
      ['sda', 'sdb'],
    );
    const [first] = devices;
    assert.ok(first !== undefined);
    (first.signatures as Signature[]).push({ type: 'data', offset: 0 });
    assert.deepEqual(inventory.get('sda')?.signatures, [], 'the answer is a copy');
    assert.equal(inventory.devicesCalls, 1);
  });

  it('refuses a second device of a name, and changes to or removal of one it does not have', () => {
    const inventory = new MemoryBlockDevices([blankDeviceFacts('sda', '8:0')]);
    assert.throws(() => {
      inventory.add(blankDeviceFacts('sda', '8:0'));
    }, /already exists/);
    assert.throws(() => inventory.update('sdz', { sizeBytes: 1 }), /no block device sdz/);
    assert.throws(() => {
      inventory.remove('sdz');
    }, /no block device sdz/);
    assert.equal(inventory.update('sda', { mountPoints: ['/mnt'] }).mountPoints[0], '/mnt');
  });

  it('keeps its stamp over signature and mount changes, as the real one does', async () => {
    const inventory = new MemoryBlockDevices([blankDeviceFacts('sda', '8:0')]);
    const stamp = await inventory.changeStamp();
    inventory.update('sda', { signatures: [{ type: 'xfs', offset: 0 }], mountPoints: ['/x'] });
    assert.equal(await inventory.changeStamp(), stamp);
    inventory.update('sda', { holders: ['dm-0'] });
    assert.notEqual(await inventory.changeStamp(), stamp);
  });
});
