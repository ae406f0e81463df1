// LinuxVolumes parts that need no root: device number decoding, a fixture mountinfo, and entries
// in a temp dir. The real-mount behaviour is in test/integration/node/linux-volumes.test.ts.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';

import { LinuxVolumes, decodeDeviceNumber, encodeDeviceNumber } from '../../../src/core/node/linux-volumes.js';
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
