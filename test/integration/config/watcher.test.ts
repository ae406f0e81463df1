// subPath detection against real bind mounts (root only): a config file bind-mounted the way
// kubelet mounts a ConfigMap key with `subPath` never sees an update, and is detected as such.
import assert from 'node:assert/strict';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { systemClock } from '../../../src/core/clock.js';
import { MemoryLogger } from '../../../src/core/log.js';
import { detectSubPathMountOnHost } from '../../../src/core/config/subpath.js';
import { ConfigWatcher, type ChangeSource } from '../../../src/core/config/watcher.js';
import { DirectoryConfigSource, fingerprintConfigSource } from '../../../src/core/config/source/directory.js';
import { writeConfigMapVolume } from '../../support/configmap-volume.js';
import { bindMount, Cleanup, makeTempDir, mountTable, skipUnlessRoot } from '../../support/real-node.js';

describe('subPath detection on real bind mounts', { skip: skipUnlessRoot() }, () => {
  const cleanup = new Cleanup();
  after(() => {
    cleanup.run();
  });

  it('flags a file bind-mounted onto another file (mount --bind file file2)', async () => {
    const dir = makeTempDir(cleanup, 'lvp-subpath-');
    const source = join(dir, 'source.yaml');
    const target = join(dir, 'provisioner.yaml');
    await writeFile(source, 'storageClassMap: {}\n');
    await writeFile(target, '');
    assert.deepEqual(await detectSubPathMountOnHost(target), { subPath: false }, 'not yet a mount point');

    bindMount(cleanup, source, target);
    assert.ok(mountTable().some((m) => m.mountPoint === target));
    const detected = await detectSubPathMountOnHost(target);
    assert.equal(detected.subPath, true, JSON.stringify(detected));
    assert.equal(detected.mountPoint, target);
    assert.match(detected.reason ?? '', /bind mount of a single file/);
    assert.deepEqual(await detectSubPathMountOnHost(source), { subPath: false }, 'the source is not a mount point');
  });

  it('flags a kubelet-style subPath mount of a ConfigMap key, which never sees the update', async () => {
    const dir = makeTempDir(cleanup, 'lvp-subpath-');
    // The ConfigMap volume kubelet maintains, and the container's config directory where kubelet
    // bind-mounts one key (subPath: storageClassMap) — the file `..data` pointed to at mount time.
    const volume = join(dir, 'volume');
    await writeConfigMapVolume(volume, { storageClassMap: 'version: 1\n' });
    const container = join(dir, 'etc-provisioner');
    await mkdir(container);
    const keyFile = join(container, 'storageClassMap');
    await writeFile(keyFile, '');
    bindMount(cleanup, join(volume, 'storageClassMap'), keyFile); // mount(8) follows the symlinks
    assert.equal(await readFile(keyFile, 'utf8'), 'version: 1\n');

    assert.deepEqual(await detectSubPathMountOnHost(volume), { subPath: false }, 'the volume itself updates');
    const asDirectory = await detectSubPathMountOnHost(container);
    assert.equal(asDirectory.subPath, true, JSON.stringify(asDirectory));
    assert.equal(asDirectory.mountPoint, keyFile);
    assert.match(asDirectory.reason ?? '', /has no \.\.data/);
    assert.equal((await detectSubPathMountOnHost(keyFile)).subPath, true);

    // Why it matters: kubelet's next update swaps ..data and deletes the old directory; the bind
    // mount keeps the old inode, and neither the fs watcher nor the poll can ever see a change.
    const calls: ChangeSource[] = [];
    const watcher = new ConfigWatcher({
      source: new DirectoryConfigSource(container),
      pollIntervalMs: 50,
      debounceMs: 20,
      clock: systemClock,
      logger: new MemoryLogger(),
      onChange: (source) => {
        calls.push(source);
        return Promise.resolve();
      },
    });
    try {
      await watcher.start();
      const before = watcher.fingerprint;
      await writeConfigMapVolume(volume, { storageClassMap: 'version: 2\n' });
      assert.equal(await readFile(join(volume, 'storageClassMap'), 'utf8'), 'version: 2\n');
      await new Promise((done) => setTimeout(done, 300));
      assert.equal(await readFile(keyFile, 'utf8'), 'version: 1\n', 'the subPath mount still shows the old content');
      assert.equal(await fingerprintConfigSource(container), before);
      assert.ok(watcher.stats.polls >= 2);
      assert.deepEqual(calls, []);
    } finally {
      await watcher.stop();
    }
  });
});
