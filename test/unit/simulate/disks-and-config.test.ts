// The replay's world, driven alone: the config files it hands the agent (inline keys merged over
// a file's, an atomic swap, positions shown in the user's terms) and the node's disks (how a step's
// volume reference resolves, what is ambiguous or unknown, a removed disk still found by name).
import assert from 'node:assert/strict';
import { mkdtemp, readFile, readlink, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ManualClock } from '../../../src/core/clock.js';
import type { ProvisionerConfig } from '../../../src/core/config/model.js';
import { loadConfig } from '../../../src/core/config/source/load.js';
import { MemoryCluster } from '../../../src/core/kube/memory/memory-cluster.js';
import { MemoryVolumes } from '../../../src/core/node/memory-volumes.js';
import { ConfigFiles } from '../../../src/core/simulate/config-files.js';
import { Disks, StepError } from '../../../src/core/simulate/disks.js';

const never = (text: string): never => {
  throw new Error(text);
};

const CLASSES = {
  storageClassMap: {
    fast: { hostDir: '/mnt/fast', mountDir: '/mnt/fast' },
    slow: { hostDir: '/mnt/slow', mountDir: '/mnt/slow' },
  },
};

describe('simulate: the config files of a replay', () => {
  let dir = '';
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'lvp-sim-config-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('inline keys are merged over the keys before them (null removes one), each version swapped in whole', async () => {
    const files = new ConfigFiles(await mkdtemp(join(dir, 'a-')));
    await files.write({ kind: 'inline', keys: { ...CLASSES, useJobForCleaning: true } }, never);
    const first = await readlink(files.path);
    await files.write({ kind: 'inline', keys: { useJobForCleaning: null, minResyncPeriod: '1m' } }, never);
    assert.notEqual(await readlink(files.path), first, 'a new directory, swapped in by one rename');
    assert.equal(await readFile(join(files.path, 'minResyncPeriod'), 'utf8'), '1m');
    await assert.rejects(readFile(join(files.path, 'useJobForCleaning'), 'utf8'), 'null removed the key');
    const { config } = await loadConfig(files.path);
    assert.deepEqual(Object.keys(config.storageClassMap), ['fast', 'slow']);
    assert.equal(files.display, 'config');
  });

  it("a file given by path is pointed at as it is; keys given after it are merged into the file's", async () => {
    const user = join(dir, 'mine.yaml');
    await writeFile(user, 'storageClassMap: |\n  fast: { hostDir: /mnt/fast, mountDir: /mnt/fast }\n');
    const files = new ConfigFiles(await mkdtemp(join(dir, 'b-')));
    await files.write({ kind: 'file', path: user, display: 'mine.yaml' }, never);
    assert.equal(await readlink(files.path), user);
    assert.equal(files.display, 'mine.yaml');
    await files.write({ kind: 'inline', keys: { useJobForCleaning: 'true' } }, never);
    const { config } = await loadConfig(files.path);
    assert.deepEqual(Object.keys(config.storageClassMap), ['fast']);
    assert.equal(config.useJobForCleaning, true);
  });

  it('bad input fails the step: a missing file, a key a ConfigMap cannot have', async () => {
    const files = new ConfigFiles(await mkdtemp(join(dir, 'c-')));
    await assert.rejects(
      files.write({ kind: 'file', path: join(dir, 'none.yaml'), display: 'none.yaml' }, never),
      /^Error: config none\.yaml: ENOENT/u,
    );
    await assert.rejects(
      files.write({ kind: 'inline', keys: { 'a/b': 'x' } }, never),
      /"a\/b" is not a valid ConfigMap key/u,
    );
  });

  it("positions in the runner's files are shown as the user's file or config/KEY", () => {
    const files = new ConfigFiles('/tmp/run');
    const issue = (file: string) => ({
      severity: 'error' as const,
      path: 'storageClassMap',
      message: 'bad',
      position: { file, line: 3, column: 4 },
    });
    assert.deepEqual(files.userIssue(issue('/tmp/run/config/storageClassMap')).position, {
      file: 'config/storageClassMap',
      line: 3,
      column: 4,
    });
    assert.equal(files.userIssue(issue('/tmp/run/config')).position?.file, 'config');
    assert.equal(files.userIssue(issue('/elsewhere')).position?.file, '/elsewhere');
    const none = { severity: 'error' as const, path: '', message: 'x' };
    assert.equal(files.userIssue(none), none);
  });
});

describe("simulate: the replay node's disks", () => {
  let config: ProvisionerConfig;
  before(async () => {
    const dir = await mkdtemp(join(tmpdir(), 'lvp-sim-disks-'));
    const files = new ConfigFiles(dir);
    await files.write({ kind: 'inline', keys: CLASSES }, never);
    config = (await loadConfig(files.path)).config;
    await rm(dir, { recursive: true, force: true });
  });

  function disks(): { disks: Disks; volumes: MemoryVolumes } {
    const volumes = new MemoryVolumes();
    volumes.addDirectory('/mnt/fast');
    volumes.addDirectory('/mnt/slow');
    const cluster = new MemoryCluster({ clock: new ManualClock(0) });
    return { volumes, disks: new Disks({ volumes, cluster, nodeName: 'node-a', config: () => config }) };
  }

  it('a volume is named by entry, class/entry or path; the PV name follows the class', async () => {
    const { disks: d } = disks();
    d.add({ name: 'disk1', className: 'fast', type: 'directory', mounted: true }, never);
    d.add({ name: 'disk9', dir: '/srv', type: 'directory', mounted: true }, never);
    const byEntry = await d.resolve('disk1');
    assert.equal(byEntry.display, 'fast/disk1');
    assert.equal(byEntry.path, '/mnt/fast/disk1');
    assert.match(byEntry.pvName ?? '', /^local-pv-[0-9a-f]{8}$/u);
    assert.deepEqual(await d.resolve('fast/disk1'), byEntry);
    assert.deepEqual(await d.resolve('/mnt/fast/disk1'), byEntry);
    const outside = await d.resolve('disk9');
    assert.equal(outside.display, '/srv/disk9', 'no class holds it: named by its path');
    assert.equal(outside.pvName, undefined);
    assert.equal(d.volumeAt('/mnt/fast/disk1', d.classOfPath('/mnt/fast/disk1')), 'fast/disk1');
    assert.equal(d.pvNameAt('/mnt/fast/disk1'), byEntry.pvName);
    assert.equal(d.present, 2);
  });

  it('an entry in two classes is ambiguous; an unknown one lists the disks', async () => {
    const { disks: d } = disks();
    d.add({ name: 'disk1', className: 'fast', type: 'directory', mounted: true }, never);
    d.add({ name: 'disk1', className: 'slow', type: 'directory', mounted: true }, never);
    await assert.rejects(d.resolve('disk1'), (err: unknown) => {
      assert.ok(err instanceof StepError);
      assert.equal(err.message, 'volume "disk1" is ambiguous: fast/disk1, slow/disk1; write class/entry');
      return true;
    });
    await assert.rejects(d.resolve('nope'), /no volume named "nope" \(disks: disk1, disk1\)$/u);
    await assert.rejects(d.resolve('gold/disk1'), /class gold is not configured/u);
    assert.throws(
      () => d.add({ name: 'x', className: 'gold', type: 'directory', mounted: true }, never),
      /class gold is not configured: use a configured class or dir/u,
    );
  });

  it('a removed disk is gone from the node but still found by name; removing nothing fails', async () => {
    const { disks: d, volumes } = disks();
    d.add({ name: 'disk1', className: 'fast', type: 'directory', mounted: true }, never);
    const v = await d.resolve('disk1');
    await d.remove(v, never);
    assert.equal((await volumes.entryInfo(v.path)).kind, 'missing');
    assert.equal(
      (await volumes.mountPoints()).some((m) => m.mountPoint === v.path),
      false,
    );
    assert.deepEqual(await d.resolve('disk1'), v);
    assert.equal(d.present, 0);
    await assert.rejects(d.remove(v, never), /fast\/disk1: nothing at \/mnt\/fast\/disk1/u);
  });
});
