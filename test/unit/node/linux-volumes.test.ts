// LinuxVolumes parts that need no root: device number decoding, a fixture mountinfo, and entries
// in a temp dir. The real-mount behaviour is in test/integration/node/linux-volumes.test.ts.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, realpathSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';

import {
  LinuxVolumes,
  decodeDeviceNumber,
  directoryStamp,
  encodeDeviceNumber,
} from '../../../src/core/node/linux-volumes.js';
import { MemoryVolumes } from '../../../src/core/node/memory-volumes.js';
import { parseConfigSnapshot } from '../../../src/core/config/decode/parse.js';
import { snapshotFromFileText } from '../../../src/core/config/decode/layout.js';
import { planDiscovery } from '../../../src/core/discovery/plan.js';
import { NodeVolumeError } from '../../../src/core/node/volume-error.js';

describe('decodeDeviceNumber', () => {
  it('splits dev_t values the way glibc does', () => {
    assert.deepEqual(decodeDeviceNumber(0x0700n), { major: 7, minor: 0 }); // loop0
    assert.deepEqual(decodeDeviceNumber(0x0801n), { major: 8, minor: 1 }); // sda1
    assert.deepEqual(decodeDeviceNumber(0x10301n), { major: 259, minor: 1 }); // nvme0n1p1 (blkext)
    // Minor bits 8..19 live above the major's low 12 bits.
    assert.deepEqual(decodeDeviceNumber(0x00100700n), { major: 7, minor: 256 });
    // Major bits 12..31 live at bits 44..63.
    assert.deepEqual(decodeDeviceNumber(0x0000_1000_0000_0000n), { major: 0x1000, minor: 0 });
  });

  it('property: inverts makedev for 32-bit majors and minors', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 0xffffffff }), fc.integer({ min: 0, max: 0xffffffff }), (major, minor) => {
        assert.deepEqual(decodeDeviceNumber(encodeDeviceNumber(major, minor)), { major, minor });
      }),
    );
  });
});

describe('LinuxVolumes without root', () => {
  let dir = '';
  before(() => {
    dir = realpathSync(mkdtempSync(join(tmpdir(), 'lvp-linux-unit-')));
  });
  after(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('reads the mount table from an injected mountinfo file', async () => {
    const memory = new MemoryVolumes().addMount('/mnt/disks/a b', { capacity: 1 });
    const file = join(dir, 'mountinfo');
    writeFileSync(file, memory.mountInfoText());
    const volumes = new LinuxVolumes({ mountInfoPath: file });
    const table = await volumes.mountPoints();
    assert.deepEqual(
      table.map((m) => m.mountPoint),
      ['/', '/mnt/disks/a b'],
    );
  });

  it('parses an unchanged mount table once, and a pass still publishes a mount made since the last pass', async () => {
    const disc = join(dir, 'skip-disc');
    mkdirSync(join(disc, 'v1'), { recursive: true });
    const file = join(dir, 'skip-mountinfo');
    const memory = new MemoryVolumes();
    writeFileSync(file, memory.mountInfoText());
    const volumes = new LinuxVolumes({ mountInfoPath: file });
    const cfg = parseConfigSnapshot(
      snapshotFromFileText('c.yaml', `storageClassMap:\n  fast:\n    hostDir: ${disc}\n    mountDir: ${disc}\n`),
    ).config;
    const pass = (): ReturnType<typeof planDiscovery> =>
      planDiscovery({
        config: cfg,
        node: { name: 'node-a', uid: 'u1', hostname: 'node-a', labels: {} },
        volumes,
        persistentVolumes: [],
        storageClass: (name) => (name === 'fast' ? { metadata: { name }, provisioner: 'x' } : undefined),
      });
    const first = await pass();
    assert.deepEqual(first.create, []);
    assert.equal(first.skipped[0]?.reason, 'not-a-mount-point');
    // The idle pass: the same bytes give the same (immutable) table, not a new parse.
    assert.equal(await volumes.mountPoints(), await volumes.mountPoints());
    // A mount made between passes changes the bytes: the next pass sees and publishes it.
    memory.addMount(join(disc, 'v1'), { capacity: 1 });
    writeFileSync(file, memory.mountInfoText());
    const second = await pass();
    assert.deepEqual(
      second.create.map((c) => c.path),
      [join(disc, 'v1')],
    );
  });

  it('reads its own mount table by default, with / in it', async () => {
    const table = await new LinuxVolumes().mountPoints();
    assert.ok(table.some((m) => m.mountPoint === '/'));
  });

  it('reports an unreadable or malformed mountinfo with its path', async () => {
    const missing = join(dir, 'no-mountinfo');
    await assert.rejects(new LinuxVolumes({ mountInfoPath: missing }).mountPoints(), (error) => {
      assert.ok(error instanceof NodeVolumeError);
      assert.equal(error.code, 'ENOENT');
      assert.equal(error.path, missing);
      return true;
    });
    const bad = join(dir, 'bad-mountinfo');
    writeFileSync(bad, 'garbage\n');
    await assert.rejects(new LinuxVolumes({ mountInfoPath: bad }).mountPoints(), (error) => {
      assert.ok(error instanceof NodeVolumeError);
      assert.equal(error.code, 'EINVAL');
      assert.match(error.message, /line 1/);
      return true;
    });
  });

  it('classifies entries and follows symlinks', async () => {
    const volumes = new LinuxVolumes();
    const base = join(dir, 'entries');
    mkdirSync(base);
    mkdirSync(join(base, 'd'));
    writeFileSync(join(base, 'f'), '');
    symlinkSync('d', join(base, 'ld'));
    symlinkSync('nowhere', join(base, 'dangling'));
    assert.deepEqual(await volumes.entryInfo(join(base, 'ld')), {
      kind: 'directory',
      isSymlink: true,
      realPath: join(base, 'd'),
    });
    assert.equal((await volumes.entryInfo(join(base, 'f'))).kind, 'other');
    assert.deepEqual(await volumes.entryInfo(join(base, 'dangling')), { kind: 'missing', isSymlink: true });
    assert.deepEqual(await volumes.entryInfo('/dev/null'), { kind: 'other', isSymlink: false, realPath: '/dev/null' });
    assert.deepEqual([...(await volumes.listDirectory(base))].sort(), ['d', 'dangling', 'f', 'ld']);
    assert.ok((await volumes.filesystemCapacity(base)) > 0);
    await assert.rejects(volumes.blockDeviceCapacity('/dev/null'), { code: 'ENOTBLK', path: '/dev/null' });
  });
});

describe('LinuxVolumes identities from a fake sysfs and udev database', () => {
  let dir = '';
  let sys = '';
  let udev = '';
  let volumes: LinuxVolumes;

  /** Writes files (path → content) under root, making parents. */
  function files(root: string, contents: Record<string, string>): void {
    for (const [path, content] of Object.entries(contents)) {
      mkdirSync(dirname(join(root, path)), { recursive: true });
      writeFileSync(join(root, path), content);
    }
  }

  /** A block device's sysfs directory at devices/<path>, linked from dev/block/<device> as the kernel does. */
  function device(path: string, number: string, attributes: Record<string, string> = {}): void {
    files(join(sys, 'devices', path), { dev: `${number}\n`, ...attributes });
    mkdirSync(join(sys, 'dev', 'block'), { recursive: true });
    symlinkSync(join('..', '..', 'devices', path), join(sys, 'dev', 'block', number));
  }

  function udevRecord(number: string, properties: Record<string, string>): void {
    const lines = Object.entries(properties).map(([key, value]) => `E:${key}=${value}\n`);
    files(udev, { [`data/b${number}`]: `S:disk/by-id/x\nI:123\n${lines.join('')}G:systemd\n` });
  }

  before(() => {
    dir = realpathSync(mkdtempSync(join(tmpdir(), 'lvp-identity-unit-')));
    sys = join(dir, 'sys');
    udev = join(dir, 'udev');
    mkdirSync(join(udev, 'data'), { recursive: true });
    volumes = new LinuxVolumes({ sysRoot: sys, udevRoot: udev, devRoot: join(dir, 'dev') });
  });
  after(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it("reads a SCSI disk's WWID, and gives its partitions the disk's with -part<N>", async () => {
    device('pci0/host0/block/sda', '8:0', { 'device/wwid': 'naa.5000c500a1b2c3d4\n', 'device/serial': 'S1\n' });
    device('pci0/host0/block/sda/sda2', '8:2', { partition: '2\n' });
    assert.deepEqual(await volumes.blockDeviceIdentity('8:0'), {
      id: 'wwid:naa.5000c500a1b2c3d4',
      source: 'wwid',
      device: '8:0',
    });
    assert.deepEqual(await volumes.blockDeviceIdentity('8:2'), {
      id: 'wwid:naa.5000c500a1b2c3d4-part2',
      source: 'wwid',
      device: '8:2',
    });
  });

  it("reads an NVMe namespace's WWID from the disk (its device is the controller, whose serial is shared)", async () => {
    device('pci0/nvme/nvme0/nvme0n1', '259:0', { wwid: 'eui.0025388b91b2c3d4\n', 'device/serial': 'S4EW   \n' });
    assert.equal((await volumes.blockDeviceIdentity('259:0'))?.id, 'wwid:eui.0025388b91b2c3d4');
  });

  it('writes blanks inside a WWID as _', async () => {
    device('pci0/ata1/block/sdb', '8:16', { 'device/wwid': 't10.ATA     QEMU HARDDISK   QM00001 \n' });
    assert.equal((await volumes.blockDeviceIdentity('8:16'))?.id, 'wwid:t10.ATA_QEMU_HARDDISK_QM00001');
  });

  it("falls back to the serial: the device's, virtio-blk's on the disk, else udev's ID_SERIAL (partitions: the disk's record)", async () => {
    device('virtio1/block/vda', '254:0', { serial: '1726632441746738\n' });
    assert.deepEqual(await volumes.blockDeviceIdentity('254:0'), {
      id: 'serial:1726632441746738',
      source: 'serial',
      device: '254:0',
    });
    device('pci0/ata2/block/sdc', '8:32');
    device('pci0/ata2/block/sdc/sdc3', '8:35', { partition: '3\n' });
    udevRecord('8:32', { ID_SERIAL: 'QEMU_HARDDISK_QM00003', ID_FS_UUID: UUID_NOT_USED });
    assert.equal((await volumes.blockDeviceIdentity('8:32'))?.id, 'serial:QEMU_HARDDISK_QM00003');
    assert.equal((await volumes.blockDeviceIdentity('8:35'))?.id, 'serial:QEMU_HARDDISK_QM00003-part3');
  });

  it("takes a loop device's backing device and inode from udev when the path cannot be followed here, birth unknown", async () => {
    device('virtual/block/loop3', '7:3', { 'loop/backing_file': '/nowhere/in/this/namespace.img\n' });
    udevRecord('7:3', { ID_LOOP_BACKING_DEVICE: '259:1', ID_LOOP_BACKING_INODE: '39720268' });
    assert.deepEqual(await volumes.blockDeviceIdentity('7:3'), {
      id: 'loop:259:1:39720268:unknown',
      source: 'loop',
      device: '7:3',
    });
  });

  it('else from a stat of the backing file; trusts neither when both answer and disagree', async () => {
    const backing = join(dir, 'backing file.img');
    writeFileSync(backing, '');
    const stats = statSync(backing, { bigint: true });
    const { major, minor } = decodeDeviceNumber(stats.dev);
    const expected = `loop:${major}:${minor}:${stats.ino}:${directoryStamp(stats).birthNs}`;
    device('virtual/block/loop4', '7:4', { 'loop/backing_file': `${backing}\n` });
    assert.equal((await volumes.blockDeviceIdentity('7:4'))?.id, expected);
    udevRecord('7:4', { ID_LOOP_BACKING_DEVICE: '259:1', ID_LOOP_BACKING_INODE: String(stats.ino) });
    assert.equal(await volumes.blockDeviceIdentity('7:4'), undefined, 'a stale record, or another file at that path');
    udevRecord('7:4', {
      ID_LOOP_BACKING_DEVICE: expected.split(':').slice(1, 3).join(':'),
      ID_LOOP_BACKING_INODE: String(stats.ino),
    });
    assert.equal((await volumes.blockDeviceIdentity('7:4'))?.id, expected, 'both agree');
  });

  it('has no loop identity for a detached loop device (a udev record left behind is not believed) or a deleted backing file', async () => {
    device('virtual/block/loop5', '7:5');
    udevRecord('7:5', { ID_LOOP_BACKING_DEVICE: '259:1', ID_LOOP_BACKING_INODE: '7' });
    assert.equal(await volumes.blockDeviceIdentity('7:5'), undefined);
    device('virtual/block/loop6', '7:6', { 'loop/backing_file': `${join(dir, 'gone.img')} (deleted)\n` });
    writeFileSync(join(dir, 'gone.img (deleted)'), ''); // a file that happens to have that name
    assert.equal(await volumes.blockDeviceIdentity('7:6'), undefined);
  });

  it('treats unexpected content as unavailable: control characters, oversized files, directories, FIFOs, garbage', async () => {
    device('pci0/odd/block/sdd', '8:48', { 'device/wwid': 'naa.\u0001bad\n', serial: `${'x'.repeat(5000)}\n` });
    mkdirSync(join(sys, 'devices', 'pci0', 'odd', 'block', 'sdd', 'wwid'));
    execFileSync('mkfifo', [join(sys, 'devices', 'pci0', 'odd', 'block', 'sdd', 'device', 'serial')]);
    files(udev, { 'data/b8:48': `E:ID_SERIAL=${'y'.repeat(20_000)}` });
    assert.equal(await volumes.blockDeviceIdentity('8:48'), undefined, 'nothing usable, and no hang on the FIFO');
    device('pci0/odd/block/sde', '8:64', { partition: 'garbage\n', 'device/wwid': 'naa.1\n' });
    assert.equal((await volumes.blockDeviceIdentity('8:64'))?.id, 'wwid:naa.1', 'not a partition after all');
    device('pci0/orphan-part', '8:81', { partition: '1\n' });
    assert.equal(await volumes.blockDeviceIdentity('8:81'), undefined, "a partition whose disk's number is unreadable");
    assert.equal(await volumes.blockDeviceIdentity('8:99'), undefined, 'no such device in sysfs');
  });
});

const UUID_NOT_USED = '00000000-0000-4000-8000-000000000001';

describe('LinuxVolumes.volumeIdentity of directories, with a fake mount table', () => {
  let dir = '';
  let udev = '';
  let device = '';
  let stamp = '';

  before(() => {
    dir = realpathSync(mkdtempSync(join(tmpdir(), 'lvp-identity-dirs-')));
    udev = join(dir, 'udev');
    mkdirSync(join(udev, 'data'), { recursive: true });
    mkdirSync(join(dir, 'vol'));
    const stats = statSync(join(dir, 'vol'), { bigint: true });
    const { major, minor } = decodeDeviceNumber(stats.dev);
    device = `${major}:${minor}`;
    const { ino, birthNs } = directoryStamp(stats);
    stamp = `${ino}:${birthNs}`;
  });
  after(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  /** LinuxVolumes over a mount table of these lines (no real sysfs: udev is the only filesystem UUID source). */
  function withTable(...lines: string[]): LinuxVolumes {
    const table = join(dir, `mountinfo-${Math.random().toString(36).slice(2)}`);
    writeFileSync(table, `26 1 ${device} / / rw - ext4 /dev/root rw\n${lines.join('\n')}\n`);
    return new LinuxVolumes({ mountInfoPath: table, sysRoot: join(dir, 'no-sys'), udevRoot: udev });
  }

  it('is dev-ino (device, inode, birth time) for a directory that is not a mount point', async () => {
    const volumes = withTable();
    assert.deepEqual(await volumes.volumeIdentity(join(dir, 'vol')), {
      id: `dev-ino:${device}:${stamp}`,
      source: 'dev-ino',
      device,
    });
  });

  it("is fs-uuid from udev's ID_FS_UUID for a mount point, lowercase, with :ino: for a sub-directory's mount", async () => {
    writeFileSync(join(udev, 'data', `b${device}`), `E:ID_FS_UUID=${UUID_NOT_USED.toUpperCase()}\n`);
    const vol = join(dir, 'vol');
    const whole = withTable(`30 26 ${device} / ${vol} rw - ext4 fake rw`);
    assert.deepEqual(await whole.volumeIdentity(vol), { id: `fs-uuid:${UUID_NOT_USED}`, source: 'fs-uuid', device });
    const sub = withTable(`30 26 ${device} /data/sub ${vol} rw - ext4 fake rw`);
    assert.equal((await sub.volumeIdentity(vol))?.id, `fs-uuid:${UUID_NOT_USED}:ino:${stamp}`);
    writeFileSync(join(udev, 'data', `b${device}`), 'E:ID_FS_UUID=ABCD-1234\n');
    assert.equal((await whole.volumeIdentity(vol))?.id, 'fs-uuid:ABCD-1234', 'a vfat volume id as udev writes it');
  });

  it('takes the mount on top, and trusts no listed mount whose device is not the one the path is on', async () => {
    writeFileSync(join(udev, 'data', `b${device}`), `E:ID_FS_UUID=${UUID_NOT_USED}\n`);
    const vol = join(dir, 'vol');
    // Listed top first (as after a move): mount 31 is on mount 30, so 31 is what the path shows.
    const stacked = withTable(`31 30 ${device} / ${vol} rw - ext4 fake rw`, `30 26 9:9 / ${vol} rw - ext4 fake rw`);
    assert.equal((await stacked.volumeIdentity(vol))?.id, `fs-uuid:${UUID_NOT_USED}`);
    // A stale table, or a mount hidden by a later one on a parent directory.
    const other = withTable(`30 26 9:9 / ${vol} rw - ext4 fake rw`);
    assert.equal((await other.volumeIdentity(vol))?.id, `dev-ino:${device}:${stamp}`);
  });

  it('rejects a missing path, a file, a character device and an unreadable mount table, naming the path', async () => {
    const volumes = withTable();
    const missing = join(dir, 'missing');
    await assert.rejects(volumes.volumeIdentity(missing), { name: 'NodeVolumeError', code: 'ENOENT', path: missing });
    writeFileSync(join(dir, 'file'), '');
    await assert.rejects(volumes.volumeIdentity(join(dir, 'file')), { code: 'ENOTBLK', operation: 'volumeIdentity' });
    await assert.rejects(volumes.volumeIdentity('/dev/null'), { code: 'ENOTBLK', path: '/dev/null' });
    const noTable = new LinuxVolumes({ mountInfoPath: join(dir, 'no-mountinfo') });
    await assert.rejects(noTable.volumeIdentity(join(dir, 'vol')), (error) => {
      assert.ok(error instanceof NodeVolumeError);
      assert.equal(error.operation, 'volumeIdentity');
      assert.equal(error.code, 'ENOENT');
      assert.equal(error.path, join(dir, 'vol'));
      assert.ok(error.message.includes(join(dir, 'no-mountinfo')), error.message);
      return true;
    });
  });
});
