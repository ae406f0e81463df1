import assert from 'node:assert/strict';
import { chmod, mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ConfigSourceError, InvalidConfigError } from '../../../src/core/errors.js';
import { loadConfig, readConfigSnapshot } from '../../../src/core/config/source/load.js';
import { writeConfigMapVolume } from '../../support/configmap-volume.js';

const CLASS = (dir: string): string => `local:\n  hostDir: ${dir}\n  mountDir: ${dir}\n`;

describe('config sources', () => {
  let root = '';
  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'lvp-source-'));
  });
  after(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it('reads a kubelet ConfigMap volume through ..data and follows every swap', async () => {
    const dir = join(root, 'volume');
    const first = await writeConfigMapVolume(dir, { storageClassMap: CLASS('/mnt/a') });
    const a = await loadConfig(dir);
    assert.equal(a.source.dataDir, join(dir, first));
    assert.equal(a.config.storageClassMap['local']?.hostDir, '/mnt/a');

    await writeConfigMapVolume(dir, { storageClassMap: CLASS('/mnt/b'), useJobForCleaning: 'yes' });
    const b = await loadConfig(dir);
    assert.equal(b.config.storageClassMap['local']?.hostDir, '/mnt/b');
    assert.equal(b.config.useJobForCleaning, true);

    await writeConfigMapVolume(dir, { storageClassMap: CLASS('/mnt/c') });
    const c = await loadConfig(dir);
    assert.equal(c.config.useJobForCleaning, false, 'a removed key is gone, not remembered');
    assert.notEqual(a.hash, b.hash);
    assert.notEqual(b.hash, c.hash);
  });

  it('never takes names starting with .. as keys', async () => {
    const dir = join(root, 'plain');
    await mkdir(join(dir, '..2026_11_30_old'), { recursive: true });
    await writeFile(join(dir, '..2026_11_30_old', 'storageClassMap'), 'not: [valid');
    await writeFile(join(dir, 'storageClassMap'), CLASS('/mnt/plain'));
    await writeFile(join(dir, '.hidden-but-a-key'), 'x');
    const snapshot = await readConfigSnapshot(dir);
    assert.deepEqual(
      snapshot.entries.map((e) => e.key),
      ['.hidden-but-a-key', 'storageClassMap'],
    );
    assert.equal(snapshot.source.dataDir, undefined);
    // A subdirectory is a key that cannot be read (it used to be skipped: a config without that key).
    await mkdir(join(dir, 'subdir'));
    await assert.rejects(readConfigSnapshot(dir), ConfigSourceError);
  });

  it('reads a single YAML file whose values are ConfigMap-style strings', async () => {
    const file = join(root, 'keys.yaml');
    await writeFile(
      file,
      `storageClassMap: |\n  local:\n    hostDir: /mnt/s\n    mountDir: /mnt/s\nuseJobForCleaning: "yes"\n`,
    );
    const loaded = await loadConfig(file);
    assert.equal(loaded.source.kind, 'yaml-file');
    assert.equal(loaded.config.storageClassMap['local']?.mountDir, '/mnt/s');
    assert.equal(loaded.config.useJobForCleaning, true);
  });

  it('a path that does not exist is a source error naming the path', async () => {
    const missing = join(root, 'nope');
    await assert.rejects(loadConfig(missing), (err: unknown) => {
      assert.ok(err instanceof ConfigSourceError);
      assert.equal(err.message, `${missing}: no such file or directory`);
      assert.equal(err.exitCode, 4);
      return true;
    });
  });

  it('an unreadable key file is a source error naming the file', async (t) => {
    if (process.getuid?.() === 0) {
      // root reads mode-000 files; use a dangling ..data-free symlink loop instead.
      const dir = join(root, 'loop');
      await mkdir(dir);
      await symlink('storageClassMap', join(dir, 'storageClassMap'));
      await assert.rejects(loadConfig(dir), (err: unknown) => {
        assert.ok(err instanceof ConfigSourceError);
        assert.match(err.message, /loop/u);
        return true;
      });
      return;
    }
    const dir = join(root, 'unreadable');
    await mkdir(dir);
    await writeFile(join(dir, 'storageClassMap'), CLASS('/x'));
    await chmod(join(dir, 'storageClassMap'), 0o000);
    t.after(() => chmod(join(dir, 'storageClassMap'), 0o600));
    await assert.rejects(loadConfig(dir), ConfigSourceError);
  });

  it('a manifest without a ConfigMap, or with two, is rejected with the reason', async () => {
    const file = join(root, 'ds.yaml');
    await writeFile(file, 'apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: x}\n');
    await assert.rejects(loadConfig(file), (err: unknown) => {
      assert.ok(err instanceof InvalidConfigError);
      assert.match(err.issues[0]?.message ?? '', /no ConfigMap in this manifest \(found DaemonSet\)/u);
      return true;
    });
    const two = join(root, 'two.yaml');
    await writeFile(two, 'kind: ConfigMap\ndata: {}\n---\nkind: ConfigMap\ndata: {}\n');
    await assert.rejects(loadConfig(two), /invalid configuration/u);
  });
});
