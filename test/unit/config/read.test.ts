// The bounded config reader (read.ts) and the two readers on top of it, readConfigSnapshot and the
// watcher's fingerprint: special files are refused without blocking, every read is bounded, a
// directory as a key and a dangling ..data are unreadable sources, and bytes that are not UTF-8 are
// a problem naming the file, never replaced. The `timeout` of each test is a hang detector (a FIFO
// read blocks forever), not a timing assertion.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  MAX_CONFIG_DIRECTORY_ENTRIES,
  MAX_CONFIG_SOURCE_BYTES,
  MAX_KEY_FILE_BYTES,
  readSourceBytes,
} from '../../../src/core/config/source/directory-read.js';
import { loadConfig, readConfigSnapshot } from '../../../src/core/config/source/load.js';
import { fingerprintConfigSource } from '../../../src/core/config/source/directory.js';
import { ConfigSourceError, InvalidConfigError } from '../../../src/core/errors.js';
import { writeConfigMapVolume } from '../../support/configmap-volume.js';

const HANG = { timeout: 10_000 };
const CLASS = 'local:\n  hostDir: /mnt/a\n  mountDir: /mnt/a\n';

/** `text` padded with a YAML comment to exactly `size` bytes. */
function padded(text: string, size: number): string {
  return `${text}#${'x'.repeat(size - text.length - 2)}\n`;
}

/** Every reader gives the same verdict: readConfigSnapshot, loadConfig and the fingerprint. */
async function assertAllReject(path: string, check: (err: unknown) => boolean): Promise<void> {
  await assert.rejects(readConfigSnapshot(path), check, 'readConfigSnapshot');
  await assert.rejects(loadConfig(path), check, 'loadConfig');
  await assert.rejects(fingerprintConfigSource(path), check, 'fingerprintConfigSource');
}

function sourceError(pattern: RegExp, source: string): (err: unknown) => boolean {
  return (err) => {
    assert.ok(err instanceof ConfigSourceError, `expected a ConfigSourceError, got ${String(err)}`);
    assert.equal(err.exitCode, 4);
    assert.equal(err.source, source);
    assert.match(err.message, pattern);
    return true;
  };
}

function invalid(key: string, file: string, pattern: RegExp): (err: unknown) => boolean {
  return (err) => {
    assert.ok(err instanceof InvalidConfigError, `expected an InvalidConfigError, got ${String(err)}`);
    assert.equal(err.exitCode, 3);
    const issue = err.issues[0];
    assert.equal(issue?.severity, 'error');
    assert.equal(issue.path, key);
    assert.equal(issue.position?.file, file);
    assert.match(issue.message, pattern);
    return true;
  };
}

describe('the bounded config reader', () => {
  let root = '';
  let n = 0;
  const fresh = async (name: string): Promise<string> => {
    const dir = join(root, `${name}-${String(n++)}`);
    await mkdir(dir);
    return dir;
  };
  const servers: Server[] = [];
  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'lvp-read-'));
  });
  after(async () => {
    for (const s of servers) s.close();
    await rm(root, { recursive: true, force: true });
  });

  it('refuses a FIFO as a key file without blocking, naming it', HANG, async () => {
    const dir = await fresh('fifo');
    await writeFile(join(dir, 'useJobForCleaning'), 'true');
    execFileSync('mkfifo', [join(dir, 'storageClassMap')]);
    await assertAllReject(
      dir,
      sourceError(/storageClassMap: is a FIFO \(named pipe\), not a regular file; only regular files/u, dir),
    );
  });

  it('refuses a FIFO as the config path itself without blocking', HANG, async () => {
    const fifo = join(await fresh('fifo-top'), 'config.yaml');
    execFileSync('mkfifo', [fifo]);
    await assertAllReject(
      fifo,
      sourceError(
        /config\.yaml: is a FIFO \(named pipe\), not a directory or a regular file; a config source is/u,
        fifo,
      ),
    );
  });

  it('refuses a FIFO behind a kubelet key symlink (through ..data)', HANG, async () => {
    const dir = await fresh('fifo-cm');
    const stamp = await writeConfigMapVolume(dir, { storageClassMap: CLASS, nodeLabelsForPV: '' });
    await rm(join(dir, stamp, 'nodeLabelsForPV'));
    execFileSync('mkfifo', [join(dir, stamp, 'nodeLabelsForPV')]);
    await assertAllReject(
      dir,
      sourceError(
        new RegExp(`^${join(dir, 'nodeLabelsForPV')} -> ${join(dir, stamp, 'nodeLabelsForPV')}: is a FIFO`, 'u'),
        dir,
      ),
    );
  });

  it('refuses a socket as a key file', HANG, async () => {
    const dir = await fresh('socket');
    const server = createServer();
    servers.push(server);
    await new Promise<void>((done) => server.listen(join(dir, 'storageClassMap'), done));
    await assertAllReject(dir, sourceError(/storageClassMap: is a socket, not a regular file/u, dir));
  });

  it('refuses a key that links to /dev/zero or /dev/urandom without reading it', HANG, async () => {
    for (const device of ['/dev/zero', '/dev/urandom']) {
      const dir = await fresh('device');
      await symlink(device, join(dir, 'storageClassMap'));
      await assertAllReject(
        dir,
        sourceError(new RegExp(`storageClassMap -> ${device}: is a character device, not a regular file`, 'u'), dir),
      );
    }
    await assertAllReject('/dev/zero', sourceError(/^\/dev\/zero: is a character device/u, '/dev/zero'));
  });

  it('accepts a key file of exactly the limit and refuses one byte more', HANG, async () => {
    const dir = await fresh('key-limit');
    await writeFile(join(dir, 'storageClassMap'), padded(CLASS, MAX_KEY_FILE_BYTES));
    const read = await readSourceBytes(dir);
    assert.equal(read.kind === 'directory' ? read.files[0]?.bytes.length : -1, MAX_KEY_FILE_BYTES);
    assert.equal((await loadConfig(dir)).config.storageClassMap['local']?.hostDir, '/mnt/a');
    assert.match(await fingerprintConfigSource(dir), /^sha256:/u);

    await writeFile(join(dir, 'storageClassMap'), padded(CLASS, MAX_KEY_FILE_BYTES + 1));
    await assertAllReject(
      dir,
      invalid('storageClassMap', join(dir, 'storageClassMap'), /^is larger than 1 MiB, the most a key file may hold/u),
    );
  });

  it('refuses key files that are too large together', HANG, async () => {
    const dir = await fresh('total');
    const keys = Math.floor(MAX_CONFIG_SOURCE_BYTES / MAX_KEY_FILE_BYTES) + 1;
    for (let i = 0; i < keys; i++) await writeFile(join(dir, `key${String(i)}`), padded('', MAX_KEY_FILE_BYTES));
    await assertAllReject(dir, invalid('', dir, /^the key files hold more than 3 MiB together/u));
  });

  it('bounds a single YAML file or manifest: exactly the limit is read, one byte more is refused', HANG, async () => {
    const file = join(await fresh('file-limit'), 'config.yaml');
    await writeFile(
      file,
      padded(`storageClassMap: |\n  local:\n    hostDir: /mnt/a\n    mountDir: /mnt/a\n`, MAX_CONFIG_SOURCE_BYTES),
    );
    assert.equal((await loadConfig(file)).config.storageClassMap['local']?.mountDir, '/mnt/a');
    await writeFile(file, padded('storageClassMap: ""\n', MAX_CONFIG_SOURCE_BYTES + 1));
    await assertAllReject(file, invalid('', file, /^is larger than 3 MiB, the most a config file may hold/u));
  });

  it('refuses a directory with more entries than a config can have', HANG, async () => {
    const dir = await fresh('entries');
    for (let i = 0; i <= MAX_CONFIG_DIRECTORY_ENTRIES; i++) await writeFile(join(dir, `k${String(i)}`), '');
    await assertAllReject(dir, invalid('', dir, /^has more than 256 entries/u));
  });

  it('a directory as a key is an unreadable source, not an empty config', HANG, async () => {
    const dir = await fresh('dir-key');
    await mkdir(join(dir, 'storageClassMap'));
    await assertAllReject(dir, sourceError(/storageClassMap: is a directory; every entry of a config directory/u, dir));

    // The same inside a kubelet volume (a key symlink to a directory of the data directory).
    const cm = await fresh('dir-key-cm');
    const stamp = await writeConfigMapVolume(cm, { storageClassMap: CLASS });
    await rm(join(cm, stamp, 'storageClassMap'));
    await mkdir(join(cm, stamp, 'storageClassMap'));
    await assertAllReject(cm, sourceError(/storageClassMap: is a directory/u, cm));
  });

  it('a dangling ..data is an unreadable source naming it, not "no ..data"', HANG, async () => {
    const dir = await fresh('dangling-data');
    const stamp = await writeConfigMapVolume(dir, { storageClassMap: CLASS });
    await rm(join(dir, stamp), { recursive: true });
    await assertAllReject(
      dir,
      sourceError(new RegExp(`^${join(dir, '..data')}: a dangling symlink \\(to ${stamp}\\)`, 'u'), dir),
    );
  });

  it('a dangling key symlink in a directory without ..data is an unreadable source', HANG, async () => {
    const dir = await fresh('dangling-key');
    await symlink('nowhere', join(dir, 'storageClassMap'));
    await assertAllReject(dir, sourceError(/storageClassMap: a dangling symlink \(to nowhere\)/u, dir));

    // Through ..data it is read again (kubelet may be mid-swap), then refused the same way.
    const cm = await fresh('dangling-key-cm');
    const stamp = await writeConfigMapVolume(cm, { storageClassMap: CLASS });
    await rm(join(cm, stamp, 'storageClassMap'));
    await symlink('nowhere', join(cm, stamp, 'storageClassMap'));
    await assertAllReject(
      cm,
      sourceError(new RegExp(`^${join(cm, 'storageClassMap')}: a dangling symlink \\(to nowhere\\)`, 'u'), cm),
    );
  });

  it('bytes that are not UTF-8 are a problem naming the file, line and column, never replaced', HANG, async () => {
    const dir = await fresh('utf8');
    // hostDir "/mnt/\xff" would silently become "/mnt/\ufffd" (another path).
    await writeFile(
      join(dir, 'storageClassMap'),
      Buffer.concat([Buffer.from('local:\n  hostDir: /mnt/é'), Buffer.from([0xff]), Buffer.from('\n  mountDir: /m\n')]),
    );
    await writeFile(join(dir, 'nodeLabelsForPV'), Buffer.from([0x2d, 0x20, 0xc3, 0x28]));
    const check = (err: unknown): boolean => {
      assert.ok(err instanceof InvalidConfigError, String(err));
      assert.deepEqual(
        err.issues.map((i) => [i.path, i.position, i.message]),
        [
          [
            'nodeLabelsForPV',
            { file: join(dir, 'nodeLabelsForPV'), line: 1, column: 3 },
            'is not valid UTF-8: byte 0xc3 at offset 2 is not part of a character; save the file as UTF-8',
          ],
          [
            'storageClassMap',
            { file: join(dir, 'storageClassMap'), line: 2, column: 18 },
            'is not valid UTF-8: byte 0xff at offset 25 is not part of a character; save the file as UTF-8',
          ],
        ],
      );
      return true;
    };
    await assert.rejects(readConfigSnapshot(dir), check);
    await assert.rejects(loadConfig(dir), check);

    const file = join(dir, '..single.yaml');
    await writeFile(
      file,
      Buffer.concat([Buffer.from('useJobForCleaning: "'), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from('"\n')]),
    );
    await assert.rejects(loadConfig(file), invalid('', file, /^is not valid UTF-8: byte 0xed at offset 20/u));
  });

  it('keeps what valid UTF-8 holds: multi-byte characters and a byte order mark', HANG, async () => {
    const file = join(await fresh('utf8-ok'), 'config.yaml');
    await writeFile(file, '\ufeffstorageClassMap: |\n  local:\n    hostDir: /mnt/ä€😀\n    mountDir: /mnt/a\n');
    assert.equal((await loadConfig(file)).config.storageClassMap['local']?.hostDir, '/mnt/ä€😀');
  });
});
