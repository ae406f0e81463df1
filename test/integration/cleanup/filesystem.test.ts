/**
 * deleteVolumeContents on real mounts: a tmpfs volume full of awkward entries (hidden files, deep
 * trees, names with newlines and non-UTF-8 bytes, symlinks pointing out of the volume, read-only
 * directories, FIFOs and device nodes) next to a nested tmpfs mount and same-filesystem bind
 * mounts that must be left alone. Everything lives under a fresh temp dir and is undone in
 * `after`, also on failure. Needs root (the refusal tests do not).
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import {
  chmodSync,
  closeSync,
  constants,
  existsSync,
  lstatSync,
  mkdirSync,
  openSync,
  readFileSync,
  readdirSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';

import { CleanupError, deleteVolumeContents } from '../../../src/core/cleanup/filesystem.js';
import {
  Cleanup,
  bindMount,
  makeTempDir,
  mountTable,
  mountTmpfs,
  run,
  skipUnlessRoot,
} from '../../support/real-node.js';

const MiB = 1024 * 1024;
const skip = skipUnlessRoot();

/** Open file descriptors of this process: a cleanup must close every directory it opened. */
function openFds(): number {
  return readdirSync('/proc/self/fd').length;
}

/** Byte-exact path under dir: `name` may hold any byte but `/` and NUL. */
function bytePath(dir: string, name: readonly number[]): Buffer {
  return Buffer.concat([Buffer.from(`${dir}/`), Buffer.from(name)]);
}

function isCleanupError(code: CleanupError['code']): (error: unknown) => boolean {
  return (error: unknown) => {
    assert.ok(error instanceof CleanupError, `expected a CleanupError, got ${String(error)}`);
    assert.equal(error.code, code, error.message);
    return true;
  };
}

describe('deleteVolumeContents refuses unsafe volume paths', () => {
  const cleanup = new Cleanup();
  after(() => {
    cleanup.run();
  });

  for (const path of ['/', '//', '/tmp/..', '/./', '']) {
    it(`refuses ${JSON.stringify(path)}`, async () => {
      await assert.rejects(deleteVolumeContents(path), isCleanupError('invalid-path'));
    });
  }

  for (const path of ['relative/dir', '.', '..', 'tmp']) {
    it(`refuses the relative path ${JSON.stringify(path)}`, async () => {
      await assert.rejects(deleteVolumeContents(path), (error: unknown) => {
        assert.ok(error instanceof CleanupError && error.code === 'invalid-path');
        assert.match(error.message, /not an absolute path/);
        return true;
      });
    });
  }

  it('refuses a symlink that resolves to /, a regular file and a missing path', async () => {
    const dir = makeTempDir(cleanup, 'lvp-fsclean-refuse-');
    symlinkSync('/', join(dir, 'to-root'));
    writeFileSync(join(dir, 'file'), 'keep me');
    await assert.rejects(deleteVolumeContents(join(dir, 'to-root')), isCleanupError('invalid-path'));
    await assert.rejects(deleteVolumeContents(join(dir, 'file')), isCleanupError('not-a-directory'));
    await assert.rejects(deleteVolumeContents(join(dir, 'missing')), isCleanupError('unreadable'));
    assert.equal(readFileSync(join(dir, 'file'), 'utf8'), 'keep me');
  });
});

describe('deleteVolumeContents on real mounts', { skip }, () => {
  const cleanup = new Cleanup();
  after(() => {
    cleanup.run();
  });

  it('empties a tmpfs volume and leaves nested mounts and symlink targets alone', async () => {
    const dir = makeTempDir(cleanup, 'lvp-fsclean-');
    const vol = join(dir, 'volume');
    mountTmpfs(cleanup, vol, 16 * MiB);

    // Outside the volume (on the temp dir's filesystem): symlink targets that must survive.
    const outside = join(dir, 'outside');
    mkdirSync(join(outside, 'target-dir', 'sub'), { recursive: true });
    writeFileSync(join(outside, 'target-file'), 'outside file');
    writeFileSync(join(outside, 'target-dir', 'a'), 'outside a');
    writeFileSync(join(outside, 'target-dir', 'sub', 'b'), 'outside b');

    let made = 0;
    const file = (path: string | Buffer, content = 'data'): void => {
      writeFileSync(path, content);
      made++;
    };
    const directory = (path: string | Buffer): void => {
      mkdirSync(path);
      made++;
    };
    const link = (target: string, path: string): void => {
      symlinkSync(target, path);
      made++;
    };

    // Hidden entries.
    file(join(vol, '.hidden'));
    directory(join(vol, '.hidden-dir'));
    file(join(vol, '.hidden-dir', '.inside'));

    // 50 levels deep, a file on every level.
    let deep = join(vol, 'deep');
    directory(deep);
    for (let level = 1; level <= 50; level++) {
      deep = join(deep, `level-${level}`);
      directory(deep);
      file(join(deep, 'file'), `level ${level}`);
    }

    // Names with a newline, spaces, a tab, shell-ish characters, and bytes that are not UTF-8.
    file(join(vol, 'line\nbreak'));
    file(join(vol, ' leading and trailing '));
    file(join(vol, 'tab\there'));
    file(join(vol, '-rf'));
    file(join(vol, '*'));
    directory(join(vol, 'new\nline dir'));
    file(join(vol, 'new\nline dir', 'inner'));
    const notUtf8File = bytePath(vol, [0x6e, 0x6f, 0x74, 0xff, 0xfe, 0x0a, 0x80]);
    file(notUtf8File);
    const notUtf8Dir = bytePath(vol, [0xc3, 0x28, 0x64, 0x69, 0x72]);
    directory(notUtf8Dir);
    file(Buffer.concat([notUtf8Dir, Buffer.from('/'), Buffer.from([0xe2, 0x82])]));
    assert.equal(
      readdirSync(vol, { encoding: 'buffer' }).filter((n) => n.equals(Buffer.from([0xc3, 0x28, 0x64, 0x69, 0x72])))
        .length,
      1,
      'the non-UTF-8 name was created byte for byte',
    );

    // Symlinks out of the volume (absolute and relative), dangling, and to the nested mount.
    link(join(outside, 'target-file'), join(vol, 'link-to-file'));
    link(join(outside, 'target-dir'), join(vol, 'link-to-dir'));
    link('../outside/target-dir', join(vol, 'relative-link-to-dir'));
    link(join(vol, 'nowhere'), join(vol, 'dangling'));
    link(join(vol, 'keep', 'a', 'nested'), join(vol, 'link-to-nested'));
    link(join(outside, 'target-dir'), join(vol, 'deep', 'level-1', 'link-out'));

    // A hard link, a FIFO and a character device node (unlinked, never opened).
    writeFileSync(join(vol, 'hard-source'), 'hard');
    run('ln', [join(vol, 'hard-source'), join(vol, 'hard-link')]);
    run('mkfifo', [join(vol, 'fifo')]);
    run('mknod', [join(vol, 'null-device'), 'c', '1', '3']);
    made += 4; // hard-source, hard-link, fifo, null-device

    // Read-only files and directories, and a directory nobody may read or enter.
    directory(join(vol, 'read-only'));
    file(join(vol, 'read-only', 'file'));
    directory(join(vol, 'read-only', 'sub'));
    file(join(vol, 'read-only', 'sub', 'file'));
    chmodSync(join(vol, 'read-only', 'file'), 0o444);
    chmodSync(join(vol, 'read-only', 'sub', 'file'), 0o000);
    chmodSync(join(vol, 'read-only', 'sub'), 0o555);
    chmodSync(join(vol, 'read-only'), 0o555);
    directory(join(vol, 'no-access'));
    file(join(vol, 'no-access', 'file'));
    chmodSync(join(vol, 'no-access'), 0o000);

    // A second tmpfs mounted two levels down, with files in it; its parents hold other entries too.
    mkdirSync(join(vol, 'keep', 'a', 'nested'), { recursive: true });
    file(join(vol, 'keep', 'sibling'));
    file(join(vol, 'keep', 'a', 'other'));
    const nested = join(vol, 'keep', 'a', 'nested');
    mountTmpfs(cleanup, nested, 4 * MiB);
    writeFileSync(join(nested, 'n1'), 'nested 1');
    writeFileSync(join(nested, '.hidden'), 'nested hidden');
    mkdirSync(join(nested, 'dir'));
    writeFileSync(join(nested, 'dir', 'n2'), 'nested 2');

    const fds = openFds();
    const result = await deleteVolumeContents(vol);
    assert.equal(openFds(), fds, 'every directory handle was closed');

    assert.deepEqual(result.errors, []);
    assert.deepEqual(result.skippedMounts, [nested]);
    assert.equal(result.removed, made);

    // The volume is kept, empty but for the path to the nested mount.
    assert.ok(statSync(vol).isDirectory());
    assert.ok(
      mountTable().some((m) => m.mountPoint === vol),
      'the volume is still mounted',
    );
    assert.deepEqual(readdirSync(vol), ['keep']);
    assert.deepEqual(readdirSync(join(vol, 'keep')), ['a']);
    assert.deepEqual(readdirSync(join(vol, 'keep', 'a')), ['nested']);

    // The nested mount is untouched.
    assert.deepEqual(readdirSync(nested).sort(), ['.hidden', 'dir', 'n1']);
    assert.equal(readFileSync(join(nested, 'n1'), 'utf8'), 'nested 1');
    assert.equal(readFileSync(join(nested, '.hidden'), 'utf8'), 'nested hidden');
    assert.equal(readFileSync(join(nested, 'dir', 'n2'), 'utf8'), 'nested 2');

    // Symlink targets outside the volume are untouched.
    assert.equal(readFileSync(join(outside, 'target-file'), 'utf8'), 'outside file');
    assert.equal(readFileSync(join(outside, 'target-dir', 'a'), 'utf8'), 'outside a');
    assert.equal(readFileSync(join(outside, 'target-dir', 'sub', 'b'), 'utf8'), 'outside b');
  });

  /** A tmpfs at <dir>/fs with the volume as a plain directory on it and a bind-mount source beside it. */
  function sameFilesystemLayout(): { dir: string; vol: string; source: string; sourceFile: string } {
    const dir = makeTempDir(cleanup, 'lvp-fsclean-bind-');
    const fs = join(dir, 'fs');
    mountTmpfs(cleanup, fs, 16 * MiB);
    const vol = join(fs, 'volume');
    const source = join(fs, 'bind-source');
    mkdirSync(join(source, 'sub'), { recursive: true });
    writeFileSync(join(source, 'file'), 'source file');
    writeFileSync(join(source, 'sub', 'deeper'), 'source deeper');
    const sourceFile = join(fs, 'bind-source-file');
    writeFileSync(sourceFile, 'bound file');

    mkdirSync(join(vol, 'x', 'bound'), { recursive: true });
    writeFileSync(join(vol, 'x', 'other'), 'removed');
    mkdirSync(join(vol, 'y'));
    writeFileSync(join(vol, 'y', 'z'), 'removed');
    writeFileSync(join(vol, 'bound-file'), '');
    bindMount(cleanup, source, join(vol, 'x', 'bound'));
    bindMount(cleanup, sourceFile, join(vol, 'bound-file'));

    // The point of these cases: st_dev alone cannot tell these mounts apart from the volume.
    assert.equal(lstatSync(join(vol, 'x', 'bound')).dev, lstatSync(vol).dev);
    assert.equal(lstatSync(join(vol, 'bound-file')).dev, lstatSync(vol).dev);
    return { dir, vol, source, sourceFile };
  }

  function assertBindMountsIntact(layout: ReturnType<typeof sameFilesystemLayout>): void {
    const { vol, source, sourceFile } = layout;
    assert.deepEqual(readdirSync(vol).sort(), ['bound-file', 'x']);
    assert.deepEqual(readdirSync(join(vol, 'x')), ['bound']);
    assert.equal(readFileSync(join(source, 'file'), 'utf8'), 'source file');
    assert.equal(readFileSync(join(source, 'sub', 'deeper'), 'utf8'), 'source deeper');
    assert.equal(readFileSync(join(vol, 'x', 'bound', 'file'), 'utf8'), 'source file');
    assert.equal(readFileSync(sourceFile, 'utf8'), 'bound file');
  }

  it('leaves same-filesystem bind mounts (same st_dev) alone, found in the mount table', async () => {
    const layout = sameFilesystemLayout();
    const result = await deleteVolumeContents(layout.vol);
    assert.deepEqual(result.errors, []);
    assert.deepEqual(result.skippedMounts.sort(), [join(layout.vol, 'bound-file'), join(layout.vol, 'x', 'bound')]);
    assert.equal(result.removed, 3); // x/other, y/z, y
    assertBindMountsIntact(layout);
  });

  it('still leaves them alone when the mount table does not list them (mount ID, EBUSY)', async () => {
    const layout = sameFilesystemLayout();
    const emptyTable = join(layout.dir, 'empty-mountinfo');
    writeFileSync(emptyTable, '');
    const result = await deleteVolumeContents(layout.vol, { mountInfoPath: emptyTable });
    assert.deepEqual(result.errors, []);
    assert.deepEqual(result.skippedMounts.sort(), [join(layout.vol, 'bound-file'), join(layout.vol, 'x', 'bound')]);
    assertBindMountsIntact(layout);
  });

  it('refuses to clean when the mount table cannot be read', async () => {
    const dir = makeTempDir(cleanup, 'lvp-fsclean-table-');
    writeFileSync(join(dir, 'file'), 'keep');
    await assert.rejects(
      deleteVolumeContents(dir, { mountInfoPath: join(dir, 'no-such-mountinfo') }),
      isCleanupError('mount-table'),
    );
    assert.ok(existsSync(join(dir, 'file')));
  });

  it('empties a tree deeper than PATH_MAX', async () => {
    const dir = makeTempDir(cleanup, 'lvp-fsclean-deep-');
    const vol = join(dir, 'volume');
    mountTmpfs(cleanup, vol, 16 * MiB);
    // Built through /proc/self/fd so no path handed to the kernel exceeds PATH_MAX (4096).
    const levels = 200;
    const name = 'd'.repeat(40);
    let fd = openSync(vol, constants.O_RDONLY | constants.O_DIRECTORY);
    try {
      for (let level = 0; level < levels; level++) {
        writeFileSync(`/proc/self/fd/${fd}/file`, String(level));
        mkdirSync(`/proc/self/fd/${fd}/${name}`);
        const next = openSync(`/proc/self/fd/${fd}/${name}`, constants.O_RDONLY | constants.O_DIRECTORY);
        closeSync(fd);
        fd = next;
      }
    } finally {
      closeSync(fd);
    }
    assert.ok(vol.length + levels * (name.length + 1) > 4096, 'the deepest path is longer than PATH_MAX');

    const fds = openFds();
    const result = await deleteVolumeContents(vol);
    assert.equal(openFds(), fds);
    assert.deepEqual(result.errors, []);
    assert.equal(result.removed, 2 * levels);
    assert.deepEqual(readdirSync(vol), []);
  });

  it('beforeWipe: a refusal deletes nothing; a filesystem mounted over the path once the volume is held is never emptied', async () => {
    const dir = makeTempDir(cleanup, 'lvp-fsclean-held-');
    const vol = join(dir, 'volume');
    mountTmpfs(cleanup, vol, 16 * MiB);
    writeFileSync(join(vol, 'tenant'), 'tenant data');
    const fds = openFds();
    await assert.rejects(
      deleteVolumeContents(vol, { beforeWipe: () => Promise.reject(new Error('not the checked disk')) }),
      /not the checked disk/u,
    );
    assert.deepEqual(readdirSync(vol), ['tenant'], 'a refusal deletes nothing');
    assert.equal(openFds(), fds);

    // Another filesystem mounted over the path between the open and the check: the held directory
    // is no longer what is at the path, so neither is emptied.
    let calls = 0;
    await assert.rejects(
      deleteVolumeContents(vol, {
        beforeWipe: () => {
          calls += 1;
          mountTmpfs(cleanup, vol, 16 * MiB);
          writeFileSync(join(vol, 'other'), 'another disk');
          return Promise.resolve();
        },
      }),
      isCleanupError('unreadable'),
    );
    assert.equal(calls, 1);
    assert.deepEqual(readdirSync(vol), ['other'], 'the filesystem mounted on top is not touched');
    assert.equal(openFds(), fds);
    run('umount', [vol]);
    assert.deepEqual(readdirSync(vol), ['tenant'], 'the held one is not touched either');

    const result = await deleteVolumeContents(vol, { beforeWipe: () => Promise.resolve() });
    assert.equal(result.removed, 1);
    assert.deepEqual(readdirSync(vol), []);
  });

  it('stops between entries when aborted, closing what it opened', async () => {
    const dir = makeTempDir(cleanup, 'lvp-fsclean-abort-');
    const vol = join(dir, 'volume');
    mountTmpfs(cleanup, vol, 16 * MiB);
    const total = 2001;
    for (let i = 1; i < total; i++) writeFileSync(join(vol, `f${i}`), '');
    mkdirSync(join(vol, 'dir'));

    const aborted = new AbortController();
    aborted.abort();
    await assert.rejects(deleteVolumeContents(vol, { signal: aborted.signal }), { name: 'AbortError' });
    assert.equal(readdirSync(vol).length, total, 'nothing is deleted under an already aborted signal');

    const fds = openFds();
    const controller = new AbortController();
    const cleaning = deleteVolumeContents(vol, { signal: controller.signal });
    // Abort once the first entries are gone, i.e. in the middle of the walk.
    while (readdirSync(vol).length === total) await new Promise((resolve) => setImmediate(resolve));
    controller.abort();
    await assert.rejects(cleaning, { name: 'AbortError' });
    assert.equal(openFds(), fds);
    const left = readdirSync(vol).length;
    assert.ok(left > 0 && left < total, `stopped part-way (${left} entries left)`);

    const rest = await deleteVolumeContents(vol);
    assert.equal(rest.removed, left);
    assert.deepEqual(readdirSync(vol), []);
  });

  it('as an unprivileged user, makes read-only directories writable to empty them and restores the volume mode', async () => {
    const dir = makeTempDir(cleanup, 'lvp-fsclean-user-');
    chmodSync(dir, 0o755); // so the unprivileged child can reach the volume
    const vol = join(dir, 'volume');
    mountTmpfs(cleanup, vol, 16 * MiB);
    mkdirSync(join(vol, 'read-only', 'sub'), { recursive: true });
    writeFileSync(join(vol, 'read-only', 'file'), 'r');
    writeFileSync(join(vol, 'read-only', 'sub', 'file'), 'r');
    mkdirSync(join(vol, 'closed', 'inner'), { recursive: true });
    writeFileSync(join(vol, 'closed', 'inner', 'file'), 'c');
    writeFileSync(join(vol, 'no-perms'), 'n');
    mkdirSync(join(vol, 'no-search'));
    writeFileSync(join(vol, 'no-search', 'file'), 's');
    run('chown', ['-R', '65534:65534', vol]);
    chmodSync(join(vol, 'read-only', 'file'), 0o444);
    chmodSync(join(vol, 'read-only', 'sub'), 0o500);
    chmodSync(join(vol, 'read-only'), 0o555);
    chmodSync(join(vol, 'closed', 'inner'), 0o000);
    chmodSync(join(vol, 'closed'), 0o000);
    chmodSync(join(vol, 'no-perms'), 0o000);
    chmodSync(join(vol, 'no-search'), 0o600); // listable, but its entries cannot be reached
    chmodSync(vol, 0o555); // the volume itself is read-only for its owner too

    const moduleUrl = new URL('../../../src/core/cleanup/filesystem.js', import.meta.url).href;
    const script = [
      `const { deleteVolumeContents } = await import(${JSON.stringify(moduleUrl)});`,
      `const result = await deleteVolumeContents(${JSON.stringify(vol)});`,
      'process.stdout.write(JSON.stringify({ uid: process.getuid(), result }));',
    ].join('\n');
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
      uid: 65534,
      gid: 65534,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const code = await new Promise<number | null>((resolve, reject) => {
      child.on('error', reject);
      child.on('close', resolve);
    });
    assert.equal(code, 0, stderr);
    const output = JSON.parse(stdout) as { uid: number; result: { removed: number; errors: unknown[] } };
    assert.equal(output.uid, 65534);
    assert.deepEqual(output.result.errors, []);
    assert.equal(output.result.removed, 10);
    assert.deepEqual(readdirSync(vol), []);
    assert.equal(statSync(vol).mode & 0o7777, 0o555, 'the volume mode is put back');
  });
});
