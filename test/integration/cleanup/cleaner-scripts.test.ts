/**
 * The cleaner scripts in cleaners/ run as the provisioner runs them: as a process with
 * LOCAL_PV_BLKDEVICE (or LOCAL_PV_FILESYSTEM) set and a minimal PATH, against 32 MiB loop devices
 * carrying an ext4 filesystem with a known pattern in a file and raw at a known offset, and
 * against tmpfs volumes with nested mounts. Two kinds of loop device: one backed by a file on
 * the temp dir's filesystem (supports discard: the loop driver punches holes in its file), and
 * one backed by a file on a ramfs (no fallocate there, so no discard), for the paths a disk
 * without discard takes. Everything is undone in `after`, also on failure. The validation tests
 * need no root; the rest do.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import {
  chmodSync,
  closeSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readFileSync,
  readdirSync,
  statSync,
  symlinkSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';

import {
  Cleanup,
  TEST_TMPFS_SOURCE,
  attachLoopDevice,
  bindMount,
  detachLoopDevice,
  makeTempDir,
  mountTable,
  mountTmpfs,
  run,
  skipUnlessRoot,
  unmount,
  type LoopDevice,
} from '../../support/real-node.js';

const MiB = 1024 * 1024;
const DEVICE_BYTES = 32 * MiB;
const skip = skipUnlessRoot();

const CLEANERS = fileURLToPath(new URL('../../../../cleaners/', import.meta.url));
const BLOCK_SCRIPTS = ['quick_reset.sh', 'shred.sh', 'dd_zero.sh', 'blkdiscard.sh'] as const;
const ALL_SCRIPTS = ['common.sh', ...BLOCK_SCRIPTS, 'fsclean.sh'] as const;
/** What a cleaner image's PATH may be; the scripts add the sbin directories themselves. */
const MINIMAL_PATH = '/usr/bin:/bin';

/** Written into a file on the device's filesystem. */
const FILE_MARKER = Buffer.from('LVP-CLEANER-TEST-FILE-MARKER-5f0c1d8e\n');
/**
 * Written raw onto the device at 20 MiB: a data block of the ext2 that quick_reset's mkfs makes
 * (block group 2 holds no superblock backup; its bitmaps and inode table sit at its start), and
 * away from the last 128 KiB, which mke2fs zeroes to wipe old RAID metadata.
 */
const RAW_MARKER = Buffer.from('LVP-CLEANER-TEST-RAW-MARKER-9a7b3c2d\n');
const RAW_OFFSET = 20 * MiB + 12_345;

interface ScriptRun {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs cleaners/<name> as a process (its shebang, its mode), with only PATH and env set. */
function runScript(
  name: string,
  args: readonly string[],
  env: Readonly<Record<string, string>>,
  path = MINIMAL_PATH,
): Promise<ScriptRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(join(CLEANERS, name), args, {
      env: { PATH: path, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: 120_000,
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (code, signal) => {
      resolve({ code, signal, stdout, stderr });
    });
  });
}

function describeRun(result: ScriptRun): string {
  return `exit ${result.code ?? result.signal ?? '?'}\n--- stdout\n${result.stdout}\n--- stderr\n${result.stderr}`;
}

/** `blkid -p`: the signatures found (empty when none; blkid exits 2 then). */
function signatures(device: string): string {
  const probe = spawnSync('blkid', ['-p', device], { encoding: 'utf8' });
  if (probe.status === 2) return '';
  assert.equal(probe.status, 0, `blkid -p ${device}: ${probe.stderr}`);
  return probe.stdout.trim();
}

/** The device's bytes as the device reports them now (page cache dropped first). */
function readDevice(loop: LoopDevice): Buffer {
  run('blockdev', ['--flushbufs', loop.path]);
  const bytes = readFileSync(loop.path);
  assert.equal(bytes.length, loop.sizeBytes);
  return bytes;
}

function isAllZero(bytes: Buffer): boolean {
  return bytes.equals(Buffer.alloc(bytes.length));
}

function supportsDiscard(loop: LoopDevice): boolean {
  return Number(readFileSync(`/sys/block/${loop.name}/queue/discard_max_bytes`, 'utf8').trim()) > 0;
}

/** Mounts a ramfs on dir (no fallocate: a loop device over a file in it cannot discard). */
function mountRamfs(cleanup: Cleanup, dir: string): void {
  mkdirSync(dir, { recursive: true });
  run('mount', ['-t', 'ramfs', '-o', 'mode=0700', TEST_TMPFS_SOURCE, dir]);
  cleanup.defer(`unmount ramfs at ${dir}`, () => {
    if (mountTable().some((m) => m.mountPoint === dir)) unmount(dir);
  });
}

/**
 * A 32 MiB loop device over a file in backingDir, with an ext4 filesystem holding a file full of
 * FILE_MARKER, and RAW_MARKER written raw at RAW_OFFSET. Both are checked to be readable.
 */
function preparedDevice(cleanup: Cleanup, dir: string, backingDir: string): LoopDevice {
  const loop = attachLoopDevice(cleanup, join(backingDir, 'backing'), DEVICE_BYTES);
  run('mkfs.ext4', ['-q', loop.path]);
  const mnt = join(dir, 'mnt');
  mkdirSync(mnt);
  run('mount', [loop.path, mnt]);
  const unmountNow = cleanup.defer(`unmount ${mnt}`, () => {
    if (mountTable().some((m) => m.mountPoint === mnt)) unmount(mnt);
  });
  writeFileSync(join(mnt, 'secret'), Buffer.concat(Array.from({ length: 4096 }, () => FILE_MARKER)));
  unmountNow();

  const fd = openSync(loop.path, 'r+');
  try {
    const raw = Buffer.concat(Array.from({ length: 64 }, () => RAW_MARKER));
    writeSync(fd, raw, 0, raw.length, RAW_OFFSET);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }

  const bytes = readDevice(loop);
  assert.ok(bytes.includes(FILE_MARKER), 'the file marker is on the device before cleaning');
  assert.ok(bytes.includes(RAW_MARKER), 'the raw marker is on the device before cleaning');
  assert.match(signatures(loop.path), /TYPE="ext4"/);
  return loop;
}

/** Attaches a read-only loop device (`losetup --read-only`); undo detaches it. */
function attachReadOnlyLoopDevice(cleanup: Cleanup, backingFile: string): LoopDevice {
  writeFileSync(backingFile, '', { flag: 'wx' });
  run('truncate', ['-s', String(DEVICE_BYTES), backingFile]);
  const path = run('losetup', ['--find', '--show', '--read-only', backingFile]).trim();
  const name = path.replace(/^\/dev\//, '');
  const [major, minor] = readFileSync(`/sys/block/${name}/dev`, 'utf8').trim().split(':').map(Number);
  const loop: LoopDevice = { path, name, major: major ?? -1, minor: minor ?? -1, backingFile, sizeBytes: DEVICE_BYTES };
  cleanup.defer(`detach ${path} (${backingFile})`, () => {
    detachLoopDevice(loop);
  });
  return loop;
}

describe('cleaner scripts: files and argument checks', () => {
  const cleanup = new Cleanup();
  after(() => {
    cleanup.run();
  });

  it('are executable bash scripts in strict mode that share common.sh', () => {
    const common = readFileSync(join(CLEANERS, 'common.sh'), 'utf8');
    assert.match(common, /^set -euo pipefail$/m);
    for (const name of ALL_SCRIPTS) {
      const path = join(CLEANERS, name);
      assert.equal(statSync(path).mode & 0o111, 0o111, `${name} is executable`);
      const text = readFileSync(path, 'utf8');
      assert.ok(text.startsWith('#!/bin/bash\n'), `${name} starts with #!/bin/bash`);
      if (name !== 'common.sh') {
        assert.match(text, /^source "\$\(dirname -- "\$\{BASH_SOURCE\[0\]\}"\)\/common\.sh"$/m, name);
      }
    }
  });

  for (const name of BLOCK_SCRIPTS) {
    it(`${name} fails with a clear message without LOCAL_PV_BLKDEVICE, or when it is not a block device`, async () => {
      const dir = makeTempDir(cleanup, 'lvp-cleaners-args-');
      const regular = join(dir, 'regular-file');
      writeFileSync(regular, 'not a disk');

      const unset = await runScript(name, [], {});
      assert.equal(unset.code, 1, describeRun(unset));
      assert.match(unset.stderr, /LOCAL_PV_BLKDEVICE is not set/);

      const file = await runScript(name, [], { LOCAL_PV_BLKDEVICE: regular });
      assert.equal(file.code, 1, describeRun(file));
      assert.match(file.stderr, new RegExp(`LOCAL_PV_BLKDEVICE=${regular} is not a block device`));
      assert.equal(readFileSync(regular, 'utf8'), 'not a disk');

      const missing = await runScript(name, [], { LOCAL_PV_BLKDEVICE: join(dir, 'missing') });
      assert.equal(missing.code, 1, describeRun(missing));
      assert.match(missing.stderr, /missing does not exist/);
    });
  }

  it('shred.sh and dd_zero.sh reject a pass count that is not a whole number', async () => {
    for (const [name, count] of [
      ['shred.sh', 'three'],
      ['dd_zero.sh', '-1'],
      ['dd_zero.sh', '1; rm -rf /'],
    ] as const) {
      const result = await runScript(name, [count], { LOCAL_PV_BLKDEVICE: '/dev/null' });
      assert.equal(result.code, 1, describeRun(result));
      assert.match(result.stderr, /number of passes must be a whole number/);
    }
  });

  it('fsclean.sh fails with a clear message without LOCAL_PV_FILESYSTEM, or when it is not a directory or is /', async () => {
    const dir = makeTempDir(cleanup, 'lvp-cleaners-args-');
    const regular = join(dir, 'regular-file');
    writeFileSync(regular, 'keep');
    symlinkSync('/', join(dir, 'root-link'));
    const cases: [Record<string, string>, RegExp][] = [
      [{}, /LOCAL_PV_FILESYSTEM is not set/],
      [{ LOCAL_PV_FILESYSTEM: regular }, /is not a directory/],
      [{ LOCAL_PV_FILESYSTEM: join(dir, 'missing') }, /does not exist/],
      [{ LOCAL_PV_FILESYSTEM: '/' }, /is the root directory/],
      [{ LOCAL_PV_FILESYSTEM: join(dir, 'root-link') }, /is the root directory/],
    ];
    for (const [env, message] of cases) {
      const result = await runScript('fsclean.sh', [], env);
      assert.equal(result.code, 1, describeRun(result));
      assert.match(result.stderr, message);
    }
    assert.equal(readFileSync(regular, 'utf8'), 'keep');
  });

  it('run without ionice, saying so', async () => {
    const dir = makeTempDir(cleanup, 'lvp-cleaners-args-');
    const bin = join(dir, 'bin');
    mkdirSync(bin);
    symlinkSync('/usr/bin/dirname', join(bin, 'dirname'));
    const result = await runScript('quick_reset.sh', [], {}, bin);
    assert.equal(result.code, 1, describeRun(result));
    assert.match(result.stderr, /ionice is not available here; running at normal I\/O priority/);
    assert.match(result.stderr, /LOCAL_PV_BLKDEVICE is not set/);
  });
});

describe('block cleaner scripts on loop devices', { skip }, () => {
  const cleanup = new Cleanup();
  after(() => {
    cleanup.run();
  });

  /** A prepared device that supports discard, as loop devices over a regular file do here. */
  function discardingDevice(prefix: string): LoopDevice {
    const dir = makeTempDir(cleanup, prefix);
    const loop = preparedDevice(cleanup, dir, dir);
    assert.ok(supportsDiscard(loop), `a loop device over a file in ${dir} supports discard on this kernel`);
    return loop;
  }

  /** A prepared device without discard: a loop device over a file on a ramfs. */
  function nonDiscardingDevice(prefix: string): LoopDevice {
    const dir = makeTempDir(cleanup, prefix);
    mountRamfs(cleanup, join(dir, 'ramfs'));
    const loop = preparedDevice(cleanup, dir, join(dir, 'ramfs'));
    assert.equal(supportsDiscard(loop), false, 'a loop device over a ramfs file cannot discard');
    return loop;
  }

  function assertNoSignatures(loop: LoopDevice): void {
    assert.equal(signatures(loop.path), '', `blkid -p ${loop.path} finds no signature`);
  }

  function assertMarkersGone(bytes: Buffer): void {
    assert.equal(bytes.includes(FILE_MARKER), false, 'the file marker is gone');
    assert.equal(bytes.includes(RAW_MARKER), false, 'the raw marker is gone');
  }

  it('quick_reset.sh makes a filesystem, then wipes every signature (and mkfs discards the old data)', async () => {
    const loop = discardingDevice('lvp-cleaners-quick-');
    const result = await runScript('quick_reset.sh', [], { LOCAL_PV_BLKDEVICE: loop.path });
    assert.equal(result.code, 0, describeRun(result));
    assert.match(result.stdout, new RegExp(`\\+ ionice -c 3 mkfs -F ${loop.path}`));
    assert.match(result.stdout, /Discarding device blocks: .*done/);
    assert.match(result.stdout, new RegExp(`\\+ ionice -c 3 wipefs -a ${loop.path}`));
    assert.match(result.stdout, /bytes were erased at offset 0x00000438 \(ext2\): 53 ef/);
    assertNoSignatures(loop);
    assertMarkersGone(readDevice(loop));
  });

  it('quick_reset.sh on a device without discard removes the signatures but not the old data', async () => {
    const loop = nonDiscardingDevice('lvp-cleaners-quick-nodiscard-');
    const result = await runScript('quick_reset.sh', [], { LOCAL_PV_BLKDEVICE: loop.path });
    assert.equal(result.code, 0, describeRun(result));
    assertNoSignatures(loop);
    const bytes = readDevice(loop);
    // A reset, not an erase: data blocks mkfs did not write are still readable.
    assert.ok(bytes.includes(RAW_MARKER), 'the raw marker is still on the device');
  });

  it('shred.sh 1 overwrites the device with random data, then zeros', async () => {
    const loop = discardingDevice('lvp-cleaners-shred-');
    const result = await runScript('shred.sh', ['1'], { LOCAL_PV_BLKDEVICE: loop.path });
    assert.equal(result.code, 0, describeRun(result));
    assert.match(result.stdout, new RegExp(`\\+ ionice -c 3 shred -v -z -f -n 1 ${loop.path}`));
    assert.match(result.stderr, /pass 1\/2 \(random\)/);
    assert.match(result.stderr, /pass 2\/2 \(000000\)/);
    assertNoSignatures(loop);
    assert.ok(isAllZero(readDevice(loop)), 'the whole device reads zero');
  });

  it('dd_zero.sh writes zeros to the end of the device, taking "No space left on device" as done', async () => {
    const loop = discardingDevice('lvp-cleaners-dd-');
    const result = await runScript('dd_zero.sh', [], { LOCAL_PV_BLKDEVICE: loop.path });
    assert.equal(result.code, 0, describeRun(result));
    assert.match(result.stdout, /Pass 1 of 1/);
    assert.match(result.stdout, /No space left on device/);
    assert.match(result.stdout, new RegExp(`${DEVICE_BYTES} bytes .* copied`));
    assertNoSignatures(loop);
    assert.ok(isAllZero(readDevice(loop)), 'the whole device reads zero');
  });

  it('dd_zero.sh fails when dd fails for another reason (a read-only device)', async () => {
    const dir = makeTempDir(cleanup, 'lvp-cleaners-dd-ro-');
    const loop = attachReadOnlyLoopDevice(cleanup, join(dir, 'backing'));
    const result = await runScript('dd_zero.sh', [], { LOCAL_PV_BLKDEVICE: loop.path });
    assert.equal(result.code, 1, describeRun(result));
    assert.match(result.stderr, /dd failed on .* before reaching the end of the device/);
    assert.doesNotMatch(result.stdout, /Zeroed/);
  });

  it('blkdiscard.sh discards the whole device (loop devices support discard here)', async () => {
    const loop = discardingDevice('lvp-cleaners-discard-');
    const result = await runScript('blkdiscard.sh', [], { LOCAL_PV_BLKDEVICE: loop.path });
    assert.equal(result.code, 0, describeRun(result));
    assert.match(result.stdout, new RegExp(`${loop.path}: Discarded ${DEVICE_BYTES} bytes from the offset 0`));
    assertNoSignatures(loop);
    assert.ok(isAllZero(readDevice(loop)), 'the discarded device reads zero');
  });

  it('blkdiscard.sh fails clearly on a device without discard and leaves it as it was', async () => {
    const loop = nonDiscardingDevice('lvp-cleaners-discard-none-');
    const result = await runScript('blkdiscard.sh', [], { LOCAL_PV_BLKDEVICE: loop.path });
    assert.equal(result.code, 1, describeRun(result));
    assert.match(result.stderr, new RegExp(`${loop.path} does not support discard`));
    assert.match(signatures(loop.path), /TYPE="ext4"/);
    const bytes = readDevice(loop);
    assert.ok(bytes.includes(FILE_MARKER) && bytes.includes(RAW_MARKER), 'nothing was touched');
  });
});

describe('fsclean.sh on real mounts', { skip }, () => {
  const cleanup = new Cleanup();
  after(() => {
    cleanup.run();
  });

  it('empties a tmpfs volume but never enters nested tmpfs mounts or follows symlinks', async () => {
    const dir = makeTempDir(cleanup, 'lvp-cleaners-fsclean-');
    const vol = join(dir, 'volume');
    mountTmpfs(cleanup, vol, 16 * MiB);
    const outside = join(dir, 'outside');
    mkdirSync(outside);
    writeFileSync(join(outside, 'target'), 'outside');

    writeFileSync(join(vol, '.hidden'), 'h');
    writeFileSync(join(vol, 'line\nbreak'), 'n');
    writeFileSync(join(vol, '-rf'), 'r');
    mkdirSync(join(vol, 'deep', 'er', 'est'), { recursive: true });
    writeFileSync(join(vol, 'deep', 'er', 'est', 'file'), 'd');
    symlinkSync(outside, join(vol, 'link-out'));
    mkdirSync(join(vol, 'read-only'));
    writeFileSync(join(vol, 'read-only', 'file'), 'r');
    chmodSync(join(vol, 'read-only'), 0o555);

    // One nested mount at the top level (rm's --one-file-system alone would empty it), one deeper.
    const top = join(vol, 'top-mount');
    mountTmpfs(cleanup, top, 4 * MiB);
    writeFileSync(join(top, 'kept'), 'top');
    const deep = join(vol, 'a', 'b', 'deep-mount');
    mountTmpfs(cleanup, deep, 4 * MiB);
    mkdirSync(join(deep, 'dir'));
    writeFileSync(join(deep, 'dir', 'kept'), 'deep');
    writeFileSync(join(vol, 'a', 'sibling'), 's');
    writeFileSync(join(vol, 'a', 'b', 'sibling'), 's');

    const result = await runScript('fsclean.sh', [], { LOCAL_PV_FILESYSTEM: vol });
    assert.equal(result.code, 0, describeRun(result));
    assert.match(result.stdout, new RegExp(`Skipping mount point ${top}`));
    assert.match(result.stdout, new RegExp(`Skipping mount point ${deep}`));
    assert.match(result.stdout, /\+ ionice -c 3 rm -rf --one-file-system -- /);

    assert.deepEqual(readdirSync(vol).sort(), ['a', 'top-mount']);
    assert.deepEqual(readdirSync(join(vol, 'a')), ['b']);
    assert.deepEqual(readdirSync(join(vol, 'a', 'b')), ['deep-mount']);
    assert.equal(readFileSync(join(top, 'kept'), 'utf8'), 'top');
    assert.equal(readFileSync(join(deep, 'dir', 'kept'), 'utf8'), 'deep');
    assert.equal(readFileSync(join(outside, 'target'), 'utf8'), 'outside');
  });

  it('leaves a same-filesystem bind mount alone (and works without ionice)', async () => {
    const dir = makeTempDir(cleanup, 'lvp-cleaners-fsclean-bind-');
    const fs = join(dir, 'fs');
    mountTmpfs(cleanup, fs, 16 * MiB);
    const vol = join(fs, 'volume');
    const source = join(fs, 'source');
    mkdirSync(join(source, 'sub'), { recursive: true });
    writeFileSync(join(source, 'sub', 'file'), 'source');
    mkdirSync(join(vol, 'x', 'bound'), { recursive: true });
    writeFileSync(join(vol, 'x', 'other'), 'o');
    bindMount(cleanup, source, join(vol, 'x', 'bound'));
    assert.equal(statSync(join(vol, 'x', 'bound')).dev, statSync(vol).dev, 'same st_dev');

    // A PATH with just the tools fsclean.sh needs, and no ionice.
    const bin = join(dir, 'bin');
    mkdirSync(bin);
    for (const tool of ['dirname', 'realpath', 'stat', 'findmnt', 'find', 'rm']) {
      symlinkSync(`/usr/bin/${tool}`, join(bin, tool));
    }
    const result = await runScript('fsclean.sh', [], { LOCAL_PV_FILESYSTEM: vol }, bin);
    assert.equal(result.code, 0, describeRun(result));
    assert.match(result.stderr, /ionice is not available/);
    assert.match(result.stdout, new RegExp(`Skipping mount point ${join(vol, 'x', 'bound')}`));
    assert.deepEqual(readdirSync(vol), ['x']);
    assert.deepEqual(readdirSync(join(vol, 'x')), ['bound']);
    assert.equal(readFileSync(join(source, 'sub', 'file'), 'utf8'), 'source');
  });
});
