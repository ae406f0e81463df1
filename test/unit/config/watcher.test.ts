import assert from 'node:assert/strict';
import { mkdir, mkdtemp, realpath, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, afterEach, before, describe, it } from 'node:test';
import { ManualClock, systemClock } from '../../../src/core/clock.js';
import { ConfigSourceError } from '../../../src/core/errors.js';
import { MemoryLogger } from '../../../src/core/log.js';
import { detectSubPathMount, detectSubPathMountOnHost } from '../../../src/core/config/subpath.js';
import { ConfigWatcher, type ChangeSource, type ConfigWatcherOptions } from '../../../src/core/config/watcher.js';
import { DirectoryConfigSource, fingerprintConfigSource } from '../../../src/core/config/source/directory.js';
import { watch, type FSWatcher } from 'chokidar';
import { writeConfigMapVolume } from '../../support/configmap-volume.js';

const sleep = (ms: number): Promise<void> => new Promise((done) => setTimeout(done, ms));

/** Polls until predicate holds; fails with what() after timeoutMs. */
async function waitFor(predicate: () => boolean, what: () => string, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) assert.fail(`timed out after ${String(timeoutMs)} ms waiting for ${what()}`);
    await sleep(10);
  }
}

interface Call {
  readonly source: ChangeSource;
  readonly fingerprint: string;
  /** The fingerprint of the source read inside onChange, as the reload machine would read it. */
  readonly seen: string;
}

/** Waits until the watcher has decided everything it noticed, and has checked at least `checks` times. */
const settled = (watcher: ConfigWatcher, checks = 0): Promise<void> =>
  waitFor(
    () => watcher.stats.settled && watcher.stats.checks >= checks,
    () => `the watcher settled after ${String(checks)} checks (${JSON.stringify(watcher.stats)})`,
  );

/** A watcher whose onChange records every call (and reads the source itself, like the reload machine). */
class Harness {
  readonly calls: Call[] = [];
  readonly logger = new MemoryLogger();
  readonly watcher: ConfigWatcher;
  active = 0;
  maxActive = 0;
  handlerDelayMs = 0;
  failNext = 0;

  constructor(
    readonly path: string,
    options: Partial<ConfigWatcherOptions> = {},
  ) {
    this.watcher = new ConfigWatcher({
      source: new DirectoryConfigSource(path),
      pollIntervalMs: 60_000,
      debounceMs: 40,
      clock: systemClock,
      logger: this.logger,
      onChange: async (source, fingerprint) => {
        this.active++;
        this.maxActive = Math.max(this.maxActive, this.active);
        try {
          const seen = await fingerprintConfigSource(path).catch((error: unknown) => `unreadable:${String(error)}`);
          if (this.handlerDelayMs > 0) await sleep(this.handlerDelayMs);
          this.calls.push({ source, fingerprint, seen });
          if (this.failNext > 0) {
            this.failNext--;
            throw new Error('handler failed on purpose');
          }
        } finally {
          this.active--;
        }
      },
      ...options,
    });
  }

  sources(): ChangeSource[] {
    return this.calls.map((c) => c.source);
  }

  fingerprints(): string[] {
    return this.calls.map((c) => c.fingerprint);
  }

  last(): Call | undefined {
    return this.calls.at(-1);
  }

  async waitForCall(fingerprint: string, timeoutMs?: number): Promise<Call> {
    await waitFor(
      () => this.calls.some((c) => c.fingerprint === fingerprint),
      () =>
        `onChange with ${fingerprint}; calls: ${JSON.stringify(this.calls)}; log: ${JSON.stringify(this.logger.records)}`,
      timeoutMs,
    );
    const call = this.calls.find((c) => c.fingerprint === fingerprint);
    assert.ok(call);
    return call;
  }
}

const CLASS = (dir: string): string => `local:\n  hostDir: ${dir}\n  mountDir: ${dir}\n`;

describe('ConfigWatcher', () => {
  let root = '';
  let counter = 0;
  const fresh = (name: string): string => join(root, `${name}-${String(counter++)}`);
  const harnesses: Harness[] = [];
  const harness = (path: string, options?: Partial<ConfigWatcherOptions>): Harness => {
    const h = new Harness(path, options);
    harnesses.push(h);
    return h;
  };

  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'lvp-watcher-'));
  });
  afterEach(async () => {
    await Promise.all(harnesses.splice(0).map((h) => h.watcher.stop()));
  });
  after(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it('sees every AtomicWriter swap, not only the first, each with the new fingerprint', async () => {
    const dir = fresh('cm');
    await writeConfigMapVolume(dir, { storageClassMap: CLASS('/mnt/v0') });
    const h = harness(dir);
    await h.watcher.start();
    assert.equal(h.watcher.fingerprint, await fingerprintConfigSource(dir));
    assert.equal(h.watcher.stats.watching, true);
    const expected: string[] = [];
    for (let i = 1; i <= 4; i++) {
      await writeConfigMapVolume(dir, { storageClassMap: CLASS(`/mnt/v${String(i)}`) });
      const fingerprint = await fingerprintConfigSource(dir);
      expected.push(fingerprint);
      const call = await h.waitForCall(fingerprint);
      assert.equal(call.source, 'fs', 'noticed by the fs watcher, not the poll');
      assert.equal(call.seen, fingerprint);
      assert.equal(h.watcher.fingerprint, fingerprint);
    }
    assert.deepEqual(h.fingerprints(), expected, 'exactly one onChange per update');
    assert.equal(h.watcher.stats.changes.fs, 4);
    assert.equal(h.watcher.stats.polls, 0);
    assert.equal(h.watcher.stats.watcherErrors, 0);
  });

  it('reports a key added and a key removed', async () => {
    const dir = fresh('cm-keys');
    await writeConfigMapVolume(dir, { storageClassMap: CLASS('/mnt/a') });
    const h = harness(dir);
    await h.watcher.start();

    await writeConfigMapVolume(dir, { storageClassMap: CLASS('/mnt/a'), useJobForCleaning: 'true' });
    const added = await fingerprintConfigSource(dir);
    await h.waitForCall(added);

    await writeConfigMapVolume(dir, { storageClassMap: CLASS('/mnt/a') });
    const removed = await fingerprintConfigSource(dir);
    assert.notEqual(removed, added);
    await h.waitForCall(removed);
    assert.deepEqual(h.fingerprints(), [added, removed]);
  });

  it('does not call onChange for an identical rewrite (same content, new ..data target)', async () => {
    const dir = fresh('cm-same');
    const data = { storageClassMap: CLASS('/mnt/same'), minResyncPeriod: '5m' };
    const firstTarget = await writeConfigMapVolume(dir, data);
    const h = harness(dir);
    await h.watcher.start();
    const before = h.watcher.stats;
    const secondTarget = await writeConfigMapVolume(dir, data);
    assert.notEqual(secondTarget, firstTarget);
    await settled(h.watcher, before.checks + 1);
    const checked = h.watcher.stats.checks;
    h.watcher.request('poll');
    await settled(h.watcher, checked + 1);
    assert.deepEqual(h.sources(), []);
    assert.ok(h.watcher.stats.fsEvents > before.fsEvents, 'the swap was seen');
  });

  it('coalesces 50 updates within a second into a handful of calls, the last seeing the final content', async (t) => {
    const dir = fresh('cm-burst');
    await writeConfigMapVolume(dir, { storageClassMap: CLASS('/mnt/burst-start') });
    const h = harness(dir, { debounceMs: 50 });
    await h.watcher.start();
    const started = Date.now();
    for (let i = 0; i < 50; i++) {
      await writeConfigMapVolume(dir, { storageClassMap: CLASS(`/mnt/burst-${String(i)}`) });
    }
    t.diagnostic(`50 updates took ${String(Date.now() - started)} ms`);
    const final = await fingerprintConfigSource(dir);
    await h.waitForCall(final);
    await settled(h.watcher); // nothing more may follow
    assert.equal(h.last()?.fingerprint, final, 'the last call carries the final content');
    assert.equal(h.last()?.seen, final, 'and onChange reads the final content');
    assert.ok(h.calls.length >= 1 && h.calls.length <= 10, `a handful of calls, got ${String(h.calls.length)}`);
    assert.ok(h.watcher.stats.fsEvents >= 50, `raw events: ${String(h.watcher.stats.fsEvents)}`);
    assert.equal(h.maxActive, 1);
  });

  it('never overlaps a slow onChange, and ends with the latest content', async () => {
    const dir = fresh('cm-slow');
    await writeConfigMapVolume(dir, { storageClassMap: CLASS('/mnt/slow-0') });
    const h = harness(dir, { debounceMs: 20 });
    h.handlerDelayMs = 200;
    await h.watcher.start();
    for (let i = 1; i <= 8; i++) {
      await writeConfigMapVolume(dir, { storageClassMap: CLASS(`/mnt/slow-${String(i)}`) });
      h.watcher.request('api'); // requests coalesce too
      await sleep(60);
    }
    const final = await fingerprintConfigSource(dir);
    await h.waitForCall(final);
    await settled(h.watcher);
    assert.equal(h.active, 0, 'the last call finished');
    assert.equal(h.maxActive, 1, 'at most one onChange at a time');
    assert.equal(h.last()?.fingerprint, final);
    // 8 updates × (fs + api) over ~500 ms with 200 ms handlers: at most one call running and one pending.
    assert.ok(h.calls.length <= 6, `coalesced into ${String(h.calls.length)} calls`);
  });

  it('request() checks now, calls onChange only for a change, and coalesces while onChange runs', async () => {
    const dir = fresh('cm-request');
    await writeConfigMapVolume(dir, { storageClassMap: CLASS('/mnt/r0') });
    const h = harness(dir, { useFsEvents: false });
    await h.watcher.start();
    await writeConfigMapVolume(dir, { storageClassMap: CLASS('/mnt/r1') });
    const changed = await fingerprintConfigSource(dir);
    assert.equal(h.watcher.stats.watching, false, 'no fs watcher: nothing notices the write');
    assert.deepEqual(h.sources(), [], 'no fs events and no poll yet');
    h.watcher.request();
    const call = await h.waitForCall(changed);
    assert.equal(call.source, 'poll');

    let checks = h.watcher.stats.checks;
    h.watcher.request('api');
    await settled(h.watcher, checks + 1);
    assert.deepEqual(h.sources(), ['poll'], 'a check of unchanged content calls nothing');

    // While one call runs, any number of requests coalesce into ONE more check, which reads the
    // latest content and is reported as the first of them.
    h.handlerDelayMs = 150;
    await writeConfigMapVolume(dir, { storageClassMap: CLASS('/mnt/r2') });
    h.watcher.request('api');
    await waitFor(
      () => h.active === 1,
      () => 'the call for r2 to run',
    );
    checks = h.watcher.stats.checks;
    await writeConfigMapVolume(dir, { storageClassMap: CLASS('/mnt/r3') });
    const latest = await fingerprintConfigSource(dir);
    h.watcher.request('poll');
    h.watcher.request('api');
    h.watcher.request('poll');
    await h.waitForCall(latest);
    await settled(h.watcher);
    assert.deepEqual(h.sources(), ['poll', 'api', 'poll']);
    assert.equal(h.last()?.seen, latest);
    assert.equal(h.watcher.stats.checks, checks + 1, 'three requests, one check');
  });

  it('onActivity: active from a swap’s first fs event until its onChange returned; an identical rewrite ends it too; the poll alone never starts it', async () => {
    const dir = fresh('cm-activity');
    await writeConfigMapVolume(dir, { storageClassMap: CLASS('/mnt/a0') });
    const told: { active: boolean; calls: number }[] = [];
    const causes: (string | undefined)[] = [];
    const h2: Harness = harness(dir, {
      pollIntervalMs: 30,
      onActivity: (active, cause) => {
        told.push({ active, calls: h2.calls.length });
        causes.push(cause);
      },
    });
    h2.handlerDelayMs = 150;
    await h2.watcher.start();
    // a poll's trigger would say so at once, before its check is counted
    await waitFor(
      () => h2.watcher.stats.checks >= 3,
      () => 'three polls checked',
    );
    assert.deepEqual(told, [], 'polls of unchanged content: no activity');
    await writeConfigMapVolume(dir, { storageClassMap: CLASS('/mnt/a1') });
    await h2.waitForCall(await fingerprintConfigSource(dir));
    await waitFor(
      () => told.length === 2,
      () => `true then false; told ${JSON.stringify(told)}`,
    );
    assert.deepEqual(told, [
      { active: true, calls: 0 },
      { active: false, calls: 1 },
    ]);
    // the same bytes under a new ..data target: noticed, checked, nothing to do
    await writeConfigMapVolume(dir, { storageClassMap: CLASS('/mnt/a1') });
    await waitFor(
      () => told.length === 4,
      () => `a second true then false; told ${JSON.stringify(told)}`,
    );
    assert.deepEqual(told.slice(2), [
      { active: true, calls: 1 },
      { active: false, calls: 1 },
    ]);
    assert.deepEqual(causes, ['fs', undefined, 'fs', undefined], 'begun by fs events');
  });

  it('onActivity: an api request is activity until its change is handled; a change the poll finds is activity from its read', async () => {
    const dir = fresh('cm-activity-api');
    await writeConfigMapVolume(dir, { storageClassMap: CLASS('/mnt/b0') });
    const told: boolean[] = [];
    const causes: (string | undefined)[] = [];
    const clock = new ManualClock(1_000_000);
    const h = harness(dir, {
      useFsEvents: false,
      pollIntervalMs: 5000,
      clock,
      onActivity: (active, cause) => {
        told.push(active);
        if (active) causes.push(cause);
      },
    });
    await h.watcher.start();
    await writeConfigMapVolume(dir, { storageClassMap: CLASS('/mnt/b1') });
    h.handlerDelayMs = 100;
    h.watcher.request('api');
    assert.deepEqual(told, [true], 'at once, before the read');
    await h.waitForCall(await fingerprintConfigSource(dir));
    await waitFor(
      () => told.length === 2,
      () => `false after the call; told ${JSON.stringify(told)}`,
    );
    assert.deepEqual(told, [true, false]);
    await writeConfigMapVolume(dir, { storageClassMap: CLASS('/mnt/b2') });
    await clock.advance(5000);
    await h.waitForCall(await fingerprintConfigSource(dir));
    await waitFor(
      () => told.length === 4,
      () => `the poll's change: true then false; told ${JSON.stringify(told)}`,
    );
    const checks = h.watcher.stats.checks;
    await clock.advance(5000);
    await waitFor(
      () => h.watcher.stats.checks > checks,
      () => 'the next poll checked',
    );
    assert.deepEqual(told, [true, false, true, false], 'a poll that reads nothing new is no activity');
    assert.deepEqual(causes, ['api', 'poll'], 'begun by the request, then by the poll that read the change');
  });

  it('the poll alone detects a change (fs events off)', async () => {
    const dir = fresh('cm-poll');
    await writeConfigMapVolume(dir, { storageClassMap: CLASS('/mnt/p0') });
    const h = harness(dir, { useFsEvents: false, pollIntervalMs: 50 });
    await h.watcher.start();
    await waitFor(
      () => h.watcher.stats.polls >= 3,
      () => 'three polls',
    );
    await settled(h.watcher, 3);
    assert.deepEqual(h.sources(), [], 'polls of unchanged content call nothing');
    await writeConfigMapVolume(dir, { storageClassMap: CLASS('/mnt/p1') });
    const changed = await fingerprintConfigSource(dir);
    const call = await h.waitForCall(changed);
    assert.equal(call.source, 'poll');
    const stats = h.watcher.stats;
    assert.equal(stats.fsEvents, 0);
    assert.equal(stats.watching, false);
    assert.ok(stats.polls >= 3);
    assert.equal(stats.changes.poll, 1);
  });

  it('the poll runs on the injected clock', async () => {
    const dir = fresh('cm-manual');
    await writeConfigMapVolume(dir, { storageClassMap: CLASS('/mnt/m0') });
    const clock = new ManualClock(1_000_000);
    const h = harness(dir, { useFsEvents: false, pollIntervalMs: 5000, clock });
    await h.watcher.start();
    await writeConfigMapVolume(dir, { storageClassMap: CLASS('/mnt/m1') });
    const changed = await fingerprintConfigSource(dir);
    await clock.advance(4999);
    await sleep(50);
    assert.deepEqual(h.sources(), []);
    await clock.advance(1);
    const call = await h.waitForCall(changed);
    assert.equal(call.source, 'poll');
    await h.watcher.stop();
    assert.equal(clock.pendingSleepers, 0, 'stop() aborts the poll sleep');
  });

  it('acknowledge() makes a fingerprint current, so no check fires for it', async () => {
    const dir = fresh('cm-ack');
    await writeConfigMapVolume(dir, { storageClassMap: CLASS('/mnt/k0') });
    const h = harness(dir, { useFsEvents: false });
    await h.watcher.start();
    await writeConfigMapVolume(dir, { storageClassMap: CLASS('/mnt/k1') });
    const applied = await fingerprintConfigSource(dir);
    h.watcher.acknowledge(applied);
    assert.equal(h.watcher.fingerprint, applied);
    const checks = h.watcher.stats.checks;
    h.watcher.request();
    await settled(h.watcher, checks + 1);
    assert.deepEqual(h.sources(), []);
  });

  it('deferChecks: start() returns the initial read, and what triggers before resume() is checked then', async () => {
    const dir = fresh('cm-deferred');
    await writeConfigMapVolume(dir, { storageClassMap: CLASS('/mnt/d0') });
    const h = harness(dir, { deferChecks: true, debounceMs: 200 });
    const initial = await h.watcher.start();
    assert.equal(initial?.fingerprint, await fingerprintConfigSource(dir));
    assert.equal(h.watcher.fingerprint, initial.fingerprint);
    // Changed while the caller applies the initial read: noticed (the watch event first, the fs
    // events after the debounce), but held until resume().
    await writeConfigMapVolume(dir, { storageClassMap: CLASS('/mnt/d1') });
    h.watcher.request('api');
    const changed = await fingerprintConfigSource(dir);
    await waitFor(
      () => h.watcher.stats.fsEvents > 0,
      () => 'the fs events of the update',
    );
    await sleep(400);
    assert.deepEqual(h.sources(), []);
    assert.equal(h.watcher.stats.checks, 0);
    h.watcher.resume();
    const call = await h.waitForCall(changed);
    assert.equal(call.source, 'api', 'the first trigger that waited');
    await settled(h.watcher);
    assert.equal(h.calls.length, 1);
    assert.equal(h.watcher.stats.checks, 1, 'the waiting triggers coalesced into one check');
  });

  it('retries on the next poll when onChange throws', async () => {
    const dir = fresh('cm-throw');
    await writeConfigMapVolume(dir, { storageClassMap: CLASS('/mnt/t0') });
    const h = harness(dir, { useFsEvents: false, pollIntervalMs: 50 });
    h.failNext = 1;
    await h.watcher.start();
    await writeConfigMapVolume(dir, { storageClassMap: CLASS('/mnt/t1') });
    const changed = await fingerprintConfigSource(dir);
    await waitFor(
      () => h.calls.length >= 2,
      () => 'the retry',
    );
    assert.deepEqual(h.fingerprints().slice(0, 2), [changed, changed]);
    assert.equal(h.watcher.stats.handlerErrors, 1);
    assert.deepEqual(h.logger.messages('error'), ['config change handler failed; the next poll retries']);
    // three more polls, each decided
    const polls = h.watcher.stats.polls;
    await waitFor(
      () => h.watcher.stats.polls >= polls + 3,
      () => 'three more polls',
    );
    await settled(h.watcher);
    assert.equal(h.calls.length, 2, 'handled once it succeeded');
  });

  it('survives the watched directory vanishing and coming back (fs events, not only the poll)', async () => {
    const dir = fresh('cm-vanish');
    await writeConfigMapVolume(dir, { storageClassMap: CLASS('/mnt/g0') });
    const h = harness(dir, { restartBackoffMs: { initial: 20, max: 200 } });
    await h.watcher.start();
    await rm(dir, { recursive: true });
    await h.waitForCall(`unreadable:${dir}: no such file or directory`);
    assert.equal(h.last()?.source, 'fs');
    await waitFor(
      () => h.watcher.stats.watcherErrors >= 1 && h.watcher.stats.watching,
      () => `the watcher re-created on the parent: ${JSON.stringify(h.watcher.stats)}`,
    );
    assert.ok(
      h.logger.messages('warn').includes('config fs watcher failed; the poll keeps checking until it is re-created'),
    );

    await writeConfigMapVolume(dir, { storageClassMap: CLASS('/mnt/g1') });
    const back = await fingerprintConfigSource(dir);
    assert.equal((await h.waitForCall(back)).source, 'fs');
    await waitFor(
      () => h.logger.records.some((r) => r.message === 'config fs watcher re-created' && r.fields['watching'] === dir),
      () => `watching ${dir} itself again: ${JSON.stringify(h.logger.records)}`,
    );
    // Once back on the directory itself, swaps are seen again.
    await writeConfigMapVolume(dir, { storageClassMap: CLASS('/mnt/g2') });
    const next = await fingerprintConfigSource(dir);
    assert.equal((await h.waitForCall(next)).source, 'fs');
    assert.equal(h.watcher.stats.polls, 0);
  });

  it('re-creates the fs watcher after a failed setup and after a chokidar error, with backoff', async () => {
    const dir = fresh('cm-error');
    await writeConfigMapVolume(dir, { storageClassMap: CLASS('/mnt/e0') });
    const created: FSWatcher[] = [];
    let failSetups = 1;
    const h = harness(dir, {
      restartBackoffMs: { initial: 20, max: 10_000 }, // never up long enough to reset the backoff
      createFsWatcher: (path, options) => {
        if (failSetups-- > 0) throw new Error('simulated: cannot set up inotify');
        const watcher = watch(path, options);
        created.push(watcher);
        return watcher;
      },
    });
    await h.watcher.start(); // resolves although the first setup failed
    assert.equal(h.watcher.stats.watcherErrors, 1);
    await waitFor(
      () => h.watcher.stats.watching,
      () => 'the retry',
    );
    await writeConfigMapVolume(dir, { storageClassMap: CLASS('/mnt/e1') });
    assert.equal((await h.waitForCall(await fingerprintConfigSource(dir))).source, 'fs');

    const first = created[0];
    assert.ok(first);
    first.emit(
      'error',
      Object.assign(new Error('ENOSPC: System limit for number of file watchers reached'), { code: 'ENOSPC' }),
    );
    await waitFor(
      () => created.length === 2 && h.watcher.stats.watching,
      () => `a new watcher: ${JSON.stringify(h.watcher.stats)}`,
    );
    assert.equal(first.closed, true, 'the failed watcher is closed');
    assert.equal(h.watcher.stats.watcherErrors, 2);
    await writeConfigMapVolume(dir, { storageClassMap: CLASS('/mnt/e2') });
    assert.equal((await h.waitForCall(await fingerprintConfigSource(dir))).source, 'fs');
    const warnings = h.logger.records.filter((r) => r.level === 'warn');
    assert.deepEqual(
      warnings.map((r) => r.fields['reason']),
      ['simulated: cannot set up inotify', 'chokidar error: ENOSPC: System limit for number of file watchers reached'],
    );
    assert.deepEqual(
      warnings.map((r) => r.fields['retryInMs']),
      [20, 40],
      'consecutive failures back off',
    );
  });

  it('watches a path that does not exist yet, through its parent', async () => {
    const parent = fresh('later');
    await mkdir(parent);
    const file = join(parent, 'config.yaml');
    const h = harness(file);
    await h.watcher.start();
    assert.equal(h.watcher.fingerprint, `unreadable:${file}: no such file or directory`);
    assert.equal(h.watcher.stats.watching, true);
    await writeFile(file, 'useJobForCleaning: "true"\n');
    const created = await fingerprintConfigSource(file);
    assert.equal((await h.waitForCall(created)).source, 'fs');
  });

  describe('a single file', () => {
    it('sees in-place writes and editor-style replaces (temp file + rename), and ignores its neighbours', async () => {
      const dir = fresh('file');
      await mkdir(dir);
      const file = join(dir, 'provisioner.yaml');
      await writeFile(file, 'storageClassMap: {}\n');
      await writeFile(join(dir, 'neighbour.yaml'), 'x: 1\n');
      const h = harness(file);
      await h.watcher.start();
      assert.equal(h.watcher.fingerprint, await fingerprintConfigSource(file));

      await writeFile(file, 'useJobForCleaning: "true"\n');
      const inPlace = await fingerprintConfigSource(file);
      assert.equal((await h.waitForCall(inPlace)).source, 'fs');

      for (let i = 0; i < 3; i++) {
        await writeFile(join(dir, '.provisioner.yaml.swp'), `minResyncPeriod: ${String(i + 1)}m\n`);
        await rename(join(dir, '.provisioner.yaml.swp'), file);
        const replaced = await fingerprintConfigSource(file);
        assert.equal((await h.waitForCall(replaced)).source, 'fs', `replace ${String(i + 1)}`);
      }
      assert.equal(h.calls.length, 4);

      const events = h.watcher.stats.fsEvents;
      const checks = h.watcher.stats.checks;
      await writeFile(join(dir, 'neighbour.yaml'), 'x: 2\n');
      await writeFile(join(dir, 'another.yaml'), 'y: 1\n');
      await sleep(200);
      assert.equal(h.watcher.stats.fsEvents, events, 'other files in the directory are not events');
      assert.equal(h.watcher.stats.checks, checks);
      assert.equal(h.calls.length, 4);
    });

    it('sees updates of a key file given directly (a symlink through ..data)', async () => {
      const dir = fresh('cm-key');
      await writeConfigMapVolume(dir, { storageClassMap: CLASS('/mnt/f0'), other: 'a' });
      const key = join(dir, 'storageClassMap');
      const h = harness(key);
      await h.watcher.start();
      for (let i = 1; i <= 3; i++) {
        await writeConfigMapVolume(dir, { storageClassMap: CLASS(`/mnt/f${String(i)}`), other: 'a' });
        const changed = await fingerprintConfigSource(key);
        assert.equal((await h.waitForCall(changed)).source, 'fs');
      }
      const calls = h.calls.length;
      await writeConfigMapVolume(dir, { storageClassMap: CLASS('/mnt/f3'), other: 'b' });
      await sleep(200);
      assert.equal(h.calls.length, calls, 'another key changing is not a change of this file');
    });
  });

  describe('start and stop', () => {
    it('stop() is idempotent, also before start(); start() runs once', async () => {
      const dir = fresh('cm-stop');
      await writeConfigMapVolume(dir, { storageClassMap: CLASS('/mnt/s') });
      const h = harness(dir);
      await Promise.all([h.watcher.stop(), h.watcher.stop()]);
      await h.watcher.start(); // stopped first: does nothing
      assert.equal(h.watcher.stats.watching, false);
      await assert.rejects(h.watcher.start(), /only once/);

      const g = harness(dir);
      const starting = g.watcher.start();
      const stopping = g.watcher.stop(); // while start() is setting up
      await Promise.all([starting, stopping]);
      assert.equal(g.watcher.stats.watching, false);
      await writeConfigMapVolume(dir, { storageClassMap: CLASS('/mnt/s2') });
      g.watcher.request('api'); // a change, but stopped
      await sleep(100);
      assert.deepEqual(g.sources(), []);
    });

    it('stop() called from inside onChange resolves, and no call follows', async () => {
      const dir = fresh('cm-stop-inside');
      await writeConfigMapVolume(dir, { storageClassMap: CLASS('/mnt/in0') });
      const sources: ChangeSource[] = [];
      const watcher: ConfigWatcher = new ConfigWatcher({
        source: new DirectoryConfigSource(dir),
        pollIntervalMs: 20,
        debounceMs: 10,
        clock: systemClock,
        logger: new MemoryLogger(),
        onChange: async (source) => {
          sources.push(source);
          await writeConfigMapVolume(dir, { storageClassMap: CLASS('/mnt/in2') });
          watcher.request('api'); // a change pending when stop() comes: dropped
          await watcher.stop();
        },
      });
      await watcher.start();
      await writeConfigMapVolume(dir, { storageClassMap: CLASS('/mnt/in1') });
      await waitFor(
        () => sources.length > 0,
        () => 'the first call',
      );
      await watcher.stop();
      await sleep(150);
      assert.equal(sources.length, 1);
      assert.equal(watcher.stats.watching, false);
    });

    it('leaves no active handle behind over 1,000 start/stop cycles, also right after fs events', async () => {
      const dir = fresh('cm-cycles');
      const data = { storageClassMap: CLASS('/mnt/c') };
      await writeConfigMapVolume(dir, data);
      const file = join(dir, 'storageClassMap');
      const resources = (filter: (type: string) => boolean = () => true): string => {
        const counts = new Map<string, number>();
        for (const type of process.getActiveResourcesInfo().filter(filter))
          counts.set(type, (counts.get(type) ?? 0) + 1);
        return JSON.stringify([...counts].sort(([a], [b]) => a.localeCompare(b)));
      };
      const notFsCall = (type: string): boolean => !type.startsWith('FSReq');
      for (let turn = 0; turn < 10; turn++) await new Promise((done) => setImmediate(done));
      const baseline = resources();
      const handlesBaseline = resources(notFsCall);
      // chokidar may still have fs calls in flight that it started before close(): they finish by
      // themselves (given up to 2 s on a busy machine). Anything else must be gone within a few loop turns.
      const settled = async (): Promise<string> => {
        const deadline = Date.now() + 2000;
        for (let turn = 0; resources() !== baseline; turn++) {
          const onlyFsCalls = resources(notFsCall) === handlesBaseline;
          if (turn >= 200 && !(onlyFsCalls && Date.now() < deadline)) break;
          await new Promise((done) => setImmediate(done));
        }
        return resources();
      };
      let calls = 0;
      for (let i = 0; i < 1000; i++) {
        const watcher = new ConfigWatcher({
          source: new DirectoryConfigSource(i % 2 === 0 ? dir : file), // directory and single-file modes
          pollIntervalMs: 3_600_000,
          debounceMs: 100,
          clock: systemClock,
          logger: new MemoryLogger(),
          onChange: () => {
            calls++;
            return Promise.resolve();
          },
        });
        await watcher.start();
        if (i === 0) assert.notEqual(resources(), baseline, 'a running watcher holds handles');
        // Every tenth cycle stops in the middle of kubelet's swap (identical content: no onChange),
        // while chokidar re-reads the directory under its throttle timers.
        const swap = i % 10 === 5;
        if (swap) {
          await writeConfigMapVolume(dir, data);
          await waitFor(
            () => watcher.stats.fsEvents > 0,
            () => 'the events of the swap',
          );
        }
        await watcher.stop();
        await watcher.stop();
        if (swap || i % 100 === 0) assert.equal(await settled(), baseline, `after cycle ${String(i)}`);
      }
      assert.equal(await settled(), baseline);
      assert.equal(calls, 0);
    });
  });
});

describe('fingerprintConfigSource', () => {
  let root = '';
  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'lvp-fingerprint-'));
  });
  after(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it('depends on key names and bytes only, read through ..data', async () => {
    const a = join(root, 'a');
    const b = join(root, 'b');
    await writeConfigMapVolume(a, { x: '1', y: '2' });
    await writeConfigMapVolume(b, { y: '2', x: '1' });
    await writeConfigMapVolume(b, { y: '2', x: '1' });
    const fa = await fingerprintConfigSource(a);
    assert.match(fa, /^sha256:[0-9a-f]{64}$/);
    assert.equal(await fingerprintConfigSource(b), fa, 'same keys and bytes, different ..data target');
    await writeConfigMapVolume(b, { y: '2', z: '1' });
    assert.notEqual(await fingerprintConfigSource(b), fa, 'a renamed key');
    await writeConfigMapVolume(b, { y: '2', x: '1 ' });
    assert.notEqual(await fingerprintConfigSource(b), fa, 'one more byte');

    // A plain directory with the same files: the same fingerprint; `..` names are not keys.
    const plain = join(root, 'plain');
    await mkdir(join(plain, '..2026_old'), { recursive: true });
    await writeFile(join(plain, 'x'), '1');
    await writeFile(join(plain, 'y'), '2');
    await writeFile(join(plain, '..2026_old', 'x'), 'old');
    assert.equal(await fingerprintConfigSource(plain), fa);

    assert.notEqual(await fingerprintConfigSource(join(plain, 'x')), fa, 'a file differs from a directory');
    await assert.rejects(
      fingerprintConfigSource(join(root, 'nothing')),
      (err: unknown) =>
        err instanceof ConfigSourceError && err.message === `${join(root, 'nothing')}: no such file or directory`,
    );
    // What the load refuses, the fingerprint refuses too (they used to be skipped, as if absent).
    await symlink('missing', join(plain, 'dangling'));
    await assert.rejects(fingerprintConfigSource(plain), /dangling: a dangling symlink \(to missing\)/u);
    await rm(join(plain, 'dangling'));
    await mkdir(join(plain, 'subdir'));
    await assert.rejects(fingerprintConfigSource(plain), /subdir: is a directory/u);
  });
});

describe('detectSubPathMount', () => {
  const TABLE = [
    '22 1 0:21 / / rw,relatime - overlay overlay rw,lowerdir=/l',
    // kubelet's subPath mount of one ConfigMap key onto a file of the container
    '1200 22 253:1 /var/lib/kubelet/pods/u/volume-subpaths/config/provisioner/0 /etc/provisioner/storageClassMap rw,relatime - ext4 /dev/vda1 rw',
    '1201 22 253:1 /var/lib/kubelet/pods/u/volume-subpaths/config/provisioner/1 /etc/single.yaml rw,relatime - ext4 /dev/vda1 rw',
    // a whole ConfigMap volume (a directory mount)
    '1202 22 0:55 / /etc/volume rw,relatime - tmpfs tmpfs rw',
    '1203 22 253:1 /x /etc/with\\040space/key rw,relatime - ext4 /dev/vda1 rw',
  ].join('\n');

  it('flags a file that is a mount point', () => {
    const result = detectSubPathMount('/etc/single.yaml', TABLE);
    assert.equal(result.subPath, true);
    assert.equal(result.mountPoint, '/etc/single.yaml');
    assert.match(result.reason ?? '', /subPath/);
    assert.deepEqual(detectSubPathMount('/etc/other.yaml', TABLE, { kind: 'file' }), { subPath: false });
  });

  it('flags a directory without ..data when a key file is a mount point', () => {
    const result = detectSubPathMount('/etc/provisioner/', TABLE, {
      kind: 'directory',
      entries: ['useJobForCleaning', 'storageClassMap'],
    });
    assert.equal(result.subPath, true);
    assert.equal(result.mountPoint, '/etc/provisioner/storageClassMap');
    assert.match(result.reason ?? '', /no \.\.data/);
    assert.deepEqual(detectSubPathMount('/etc/provisioner', TABLE, { kind: 'directory', entries: ['other'] }), {
      subPath: false,
    });
  });

  it('never flags a ConfigMap volume directory (..data present) nor a directory mount', () => {
    assert.deepEqual(
      detectSubPathMount('/etc/provisioner', TABLE, {
        kind: 'directory',
        entries: ['..data', '..2026_01_01', 'storageClassMap'],
      }),
      { subPath: false },
    );
    assert.deepEqual(detectSubPathMount('/etc/volume', TABLE, { kind: 'directory', entries: ['storageClassMap'] }), {
      subPath: false,
    });
  });

  it('matches mount points with escaped characters', () => {
    assert.equal(
      detectSubPathMount('/etc/with space', TABLE, { kind: 'directory', entries: ['key'] }).mountPoint,
      '/etc/with space/key',
    );
  });

  describe('on the host', () => {
    let root = '';
    before(async () => {
      root = await realpath(await mkdtemp(join(tmpdir(), 'lvp-subpath-')));
    });
    after(async () => {
      await rm(root, { recursive: true, force: true });
    });

    it('reads the path and a mount table file', async () => {
      const file = join(root, 'config.yaml');
      await writeFile(file, 'x: 1\n');
      const table = join(root, 'mountinfo');
      await writeFile(
        table,
        `22 1 0:21 / / rw - overlay overlay rw\n1200 22 253:1 /f ${file} rw - ext4 /dev/vda1 rw\n`,
      );
      assert.equal((await detectSubPathMountOnHost(file, { mountInfoPath: table })).subPath, true);
      assert.equal((await detectSubPathMountOnHost(root, { mountInfoPath: table })).subPath, true, 'as a key');

      const volume = join(root, 'volume');
      await writeConfigMapVolume(volume, { 'config.yaml': 'x: 1\n' });
      assert.deepEqual(await detectSubPathMountOnHost(volume, { mountInfoPath: table }), { subPath: false });
    });

    it('reports why it could not check, without throwing', async () => {
      const missing = await detectSubPathMountOnHost(join(root, 'missing'));
      assert.equal(missing.subPath, false);
      assert.match(missing.reason ?? '', /could not check.*ENOENT/);
      const badTable = join(root, 'bad-mountinfo');
      await writeFile(badTable, 'garbage\n');
      const bad = await detectSubPathMountOnHost(root, { mountInfoPath: badTable });
      assert.equal(bad.subPath, false);
      assert.match(bad.reason ?? '', /mountinfo line 1/);
    });
  });
});
