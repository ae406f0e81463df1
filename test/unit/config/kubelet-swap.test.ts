// kubelet swapping a ConfigMap volume in the middle of a read (docs/architecture.md, "Config
// pipeline"; directory-read.ts, "The snapshot rule"). The reader's filesystem calls go through a
// wrapper that, at one point of the read, runs kubelet's AtomicWriter steps up to a chosen one
// (before the swap; swapped with 0, some or all of the old data directory's files removed; the
// old directory itself removed) and only then lets the read go on. Whatever the point, the read is
// the whole old config or the whole new one, bytes and fingerprint, never a part of one: listing a
// directory kubelet is emptying returns some or none of its names without an error.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { isDeepStrictEqual } from 'node:util';
import { DirectoryConfigSource } from '../../../src/core/config/source/directory.js';
import { MAX_SWAPPED_READS, nodeDirectoryFs, readSourceBytes } from '../../../src/core/config/source/directory-read.js';
import type { DirectoryFs } from '../../../src/core/config/source/directory-read.js';
import { keysFingerprint } from '../../../src/core/config/source/port.js';
import { ConfigSourceError } from '../../../src/core/errors.js';
import { kubeletUpdateHeldAt, writeConfigMapVolume } from '../../support/configmap-volume.js';
import type { HeldUpdate, KubeletStep } from '../../support/configmap-volume.js';

type Data = Readonly<Record<string, string>>;

const classes = (names: readonly string[], tag: string): string =>
  names.map((n) => `${n}:\n  hostDir: /mnt/${n}\n  mountDir: /mnt/${n}\n  fsType: ${tag}\n`).join('');

/** Four key files; the new config drops one of them and adds two. */
const OLD: Data = {
  storageClassMap: classes(['fast', 'slow', 'bulk'], 'ext4'),
  nodeLabelsForPV: '- topology.kubernetes.io/zone\n',
  labelsForPV: 'tier: old\n',
  minResyncPeriod: '5m0s',
};
const NEW: Data = {
  storageClassMap: classes(['fast', 'slow', 'bulk', 'archive'], 'xfs'),
  labelsForPV: 'tier: new\n',
  minResyncPeriod: '10m0s',
  setPVOwnerRef: 'true',
  useNodeNameOnly: 'true',
};
const OLD_FILES = Object.keys(OLD).length;

const bytesOf = (data: Data): Map<string, Buffer> =>
  new Map(Object.entries(data).map(([name, text]) => [name, Buffer.from(text)]));
const fingerprintOf = (data: Data): string =>
  keysFingerprint(Object.entries(data).map(([name, text]) => ({ name, bytes: Buffer.from(text) })));

/** Which whole config `got` (key name → bytes) is; fails naming the keys when it is neither, e.g. a partial read. */
function wholeConfig(got: ReadonlyMap<string, Buffer>, what: string): 'old' | 'new' {
  if (isDeepStrictEqual(got, bytesOf(OLD))) return 'old';
  if (isDeepStrictEqual(got, bytesOf(NEW))) return 'new';
  assert.fail(
    `${what}: read ${String(got.size)} keys (${[...got.keys()].join(', ') || 'none'}), neither the old config ` +
      `(${Object.keys(OLD).join(', ')}) nor the new one (${Object.keys(NEW).join(', ')}) whole`,
  );
}

type FsCall = keyof DirectoryFs;

/** nodeDirectoryFs, but `after` runs once each call returned (a failed call does not count) before its caller goes on. */
function pausingFs(after: (call: FsCall, path: string) => Promise<void>): DirectoryFs {
  const fs = nodeDirectoryFs;
  const paused =
    <A extends [string, ...unknown[]], R>(call: FsCall, inner: (...args: A) => Promise<R>) =>
    async (...args: A): Promise<R> => {
      const result = await inner(...args);
      await after(call, args[0]);
      return result;
    };
  return {
    stat: paused('stat', fs.stat),
    lstat: paused('lstat', fs.lstat),
    realpath: paused('realpath', fs.realpath),
    readlink: paused('readlink', fs.readlink),
    list: paused('list', fs.list),
    readFile: paused('readFile', fs.readFile),
  };
}

/** A point of the read at which kubelet runs: the first call the predicate accepts. */
interface ReadPoint {
  readonly name: string;
  readonly matches: (call: FsCall, path: string, dir: string) => boolean;
}

const READ_POINTS: readonly ReadPoint[] = [
  {
    name: 'right after its first realpath of ..data',
    matches: (call, path, dir) => call === 'realpath' && path === join(dir, '..data'),
  },
  { name: 'right after it listed the data directory', matches: (call, path, dir) => call === 'list' && path !== dir },
  { name: 'right after it read the first key file', matches: (call) => call === 'readFile' },
];

/** How far kubelet gets while the read waits: the step its update is held after. */
interface WriterHold {
  readonly name: string;
  readonly at: (step: KubeletStep) => boolean;
}

const WRITER_HOLDS: readonly WriterHold[] = [
  { name: 'before the swap (..data_tmp created)', at: (s) => s.kind === 'created-data-tmp' },
  { name: `swapped, 0 of ${String(OLD_FILES)} old files removed`, at: (s) => s.kind === 'removed-deleted-keys' },
  ...Array.from({ length: OLD_FILES }, (_, i): WriterHold => {
    const k = i + 1;
    return {
      name: `swapped, ${String(k)} of ${String(OLD_FILES)} old files removed`,
      at: (s) => s.kind === 'removed-old-file' && s.removed === k,
    };
  }),
  { name: 'swapped, the old directory removed', at: (s) => s.kind === 'removed-old-dir' },
];

describe('a read of a kubelet ConfigMap volume that kubelet updates meanwhile', () => {
  let root = '';
  let volumes = 0;
  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'lvp-kubelet-swap-'));
  });
  after(async () => {
    await rm(root, { recursive: true, force: true });
  });

  /**
   * A volume holding OLD, read through `read(fs)`; at `point` of the read kubelet updates it to NEW
   * as far as `hold`, and the read goes on from there. Returns what the read returned.
   */
  async function readDuringUpdate<T>(
    point: ReadPoint,
    hold: WriterHold,
    read: (dir: string, fs: DirectoryFs) => Promise<T>,
  ): Promise<T> {
    const dir = join(root, `volume-${String(volumes++)}`);
    await writeConfigMapVolume(dir, OLD);
    let update: HeldUpdate | undefined;
    const fs = pausingFs(async (call, path) => {
      if (update !== undefined || !point.matches(call, path, dir)) return;
      update = kubeletUpdateHeldAt(dir, NEW, hold.at);
      assert.ok(await update.reached, `kubelet's update never got ${hold.name}`);
    });
    try {
      const result = await read(dir, fs);
      assert.ok(update, `the read never got ${point.name}`);
      return result;
    } finally {
      update?.resume();
      await update?.done;
    }
  }

  for (const point of READ_POINTS) {
    for (const hold of WRITER_HOLDS) {
      it(`kubelet runs ${point.name}, up to ${hold.name}: the whole old or new config, never a part`, async () => {
        const bytes = await readDuringUpdate(point, hold, (dir, fs) => readSourceBytes(dir, fs));
        assert.equal(bytes.kind, 'directory');
        const which = wholeConfig(new Map(bytes.files.map((f) => [f.name, f.bytes])), 'readSourceBytes');
        assert.ok(bytes.dataDir !== undefined, 'read through ..data');
        assert.equal(
          keysFingerprint(bytes.files),
          fingerprintOf(which === 'old' ? OLD : NEW),
          'the fingerprint of what was read',
        );

        // The source the watcher and the reloads read: its snapshot and fingerprint.
        const read = await readDuringUpdate(point, hold, (dir, fs) => new DirectoryConfigSource(dir, fs).read());
        assert.ok(read.ok, `the source read failed: ${read.ok ? '' : read.error.message}`);
        const keys = new Map(
          read.snapshot.entries.map((e) => [e.key, Buffer.from(e.value.kind === 'text' ? e.value.text : '')]),
        );
        const seen = wholeConfig(keys, 'DirectoryConfigSource.read');
        assert.equal(read.fingerprint, fingerprintOf(seen === 'old' ? OLD : NEW));
        assert.ok([fingerprintOf(OLD), fingerprintOf(NEW)].includes(read.fingerprint));
      });
    }
  }

  it(`gives up after ${String(MAX_SWAPPED_READS)} reads when ..data changes during every one, saying so`, async () => {
    // Something other than kubelet: a new data directory behind ..data on every resolve, the old
    // ones left in place (their removal is held until the read gave up).
    const dir = join(root, `volume-${String(volumes++)}`);
    await writeConfigMapVolume(dir, OLD);
    const updates: HeldUpdate[] = [];
    let lists = 0;
    const fs = pausingFs(async (call, path) => {
      if (call === 'list' && path !== dir) lists++;
      if (call !== 'realpath' || path !== join(dir, '..data')) return;
      const update = kubeletUpdateHeldAt(dir, updates.length % 2 === 0 ? NEW : OLD, (s) => s.kind === 'swapped');
      updates.push(update);
      await update.reached;
    });
    try {
      await assert.rejects(readSourceBytes(dir, fs), (err: unknown) => {
        assert.ok(err instanceof ConfigSourceError, `expected a ConfigSourceError, got ${String(err)}`);
        assert.equal(err.source, dir);
        assert.match(
          err.message,
          new RegExp(
            `\\.\\.data changed during ${String(MAX_SWAPPED_READS)} of ${String(MAX_SWAPPED_READS)} reads, faster than the directory could be read`,
            'u',
          ),
        );
        return true;
      });
      assert.equal(lists, MAX_SWAPPED_READS, 'one listing per attempt');
      assert.equal(updates.length, 2 * MAX_SWAPPED_READS, 'two resolves of ..data per attempt');
    } finally {
      // One after the other, as kubelet's updates run.
      for (const update of updates) {
        update.resume();
        await update.done;
      }
    }
    // Once it stops changing, the volume reads whole again.
    const settled = await readSourceBytes(dir);
    assert.equal(settled.kind, 'directory');
    wholeConfig(new Map(settled.files.map((f) => [f.name, f.bytes])), 'settled');
  });

  it(`gives up after ${String(MAX_SWAPPED_READS)} reads when kubelet swaps and removes the data directory under every one, saying so`, async () => {
    // kubelet itself, faster than every read: each resolve of ..data names a directory that is
    // gone by the time it is listed.
    const dir = join(root, `volume-${String(volumes++)}`);
    await writeConfigMapVolume(dir, OLD);
    let resolves = 0;
    const fs = pausingFs(async (call, path) => {
      if (call !== 'realpath' || path !== join(dir, '..data')) return;
      resolves++;
      await writeConfigMapVolume(dir, resolves % 2 === 1 ? NEW : OLD);
    });
    await assert.rejects(readSourceBytes(dir, fs), (err: unknown) => {
      assert.ok(err instanceof ConfigSourceError, `expected a ConfigSourceError, got ${String(err)}`);
      assert.equal(err.source, dir);
      // Not the last attempt's "no such file" of a directory kubelet removed: the swaps are the reason.
      assert.match(
        err.message,
        new RegExp(`\\.\\.data changed during ${String(MAX_SWAPPED_READS)} of ${String(MAX_SWAPPED_READS)} reads`, 'u'),
      );
      assert.doesNotMatch(err.message, /no such file/u);
      return true;
    });
    assert.equal(resolves, 2 * MAX_SWAPPED_READS, 'two resolves of ..data per attempt, each one swapped away at once');
  });
});
