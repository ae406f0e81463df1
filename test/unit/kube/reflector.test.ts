// The reflector against servers that misbehave: a LIST that is allowed with a WATCH that is
// forbidden, a WATCH that ends at once, and a failure after a long healthy watch. The in-memory
// cluster serves the lists; the watch is replaced. Time is a ManualClock, so the figures are exact.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { ManualClock } from '../../../src/core/clock.js';
import {
  KubeApiError,
  type ResourceClient,
  type WatchEvent,
  type WatchOptions,
} from '../../../src/core/kube/cluster.js';
import { MemoryCluster } from '../../../src/core/kube/memory/memory-cluster.js';
import type { ObjectList, PersistentVolume } from '../../../src/core/kube/objects.js';
import { MAX_LIST_PAGES } from '../../../src/core/kube/list-pages.js';
import { Reflector, type ReflectorOptions } from '../../../src/core/kube/reflector.js';
import { silentLogger } from '../../../src/core/log.js';
import { waitFor } from '../../support/eventually.js';

function pv(name: string, resourceVersion?: string, path = `/mnt/${name}`): PersistentVolume {
  return {
    metadata: { name, ...(resourceVersion !== undefined ? { resourceVersion } : {}) },
    spec: {
      capacity: { storage: '1Gi' },
      accessModes: ['ReadWriteOnce'],
      local: { path },
      nodeAffinity: {
        required: {
          nodeSelectorTerms: [
            { matchExpressions: [{ key: 'kubernetes.io/hostname', operator: 'In', values: ['n1'] }] },
          ],
        },
      },
    },
  };
}

type WatchBehaviour = (options: WatchOptions) => AsyncIterable<WatchEvent<PersistentVolume>>;

const forbidden: WatchBehaviour = () => ({
  [Symbol.asyncIterator]: () => ({
    next: () =>
      Promise.reject(
        new KubeApiError(403, 'Forbidden', 'persistentvolumes is forbidden: cannot watch resource "persistentvolumes"'),
      ),
  }),
});

const endsAtOnce: WatchBehaviour = () => ({
  [Symbol.asyncIterator]: () => ({ next: () => Promise.resolve({ done: true, value: undefined }) }),
});

/** The in-memory cluster's PV client, with every LIST and WATCH call's time recorded and the watch replaced. */
function misbehaving(
  clock: ManualClock,
  watch: WatchBehaviour,
): { client: ResourceClient<PersistentVolume>; lists: number[]; watches: number[] } {
  const base = new MemoryCluster({ clock }).persistentVolumes;
  const lists: number[] = [];
  const watches: number[] = [];
  return {
    lists,
    watches,
    client: {
      ...base,
      list: (options) => {
        lists.push(clock.now());
        return base.list(options);
      },
      watch: (options) => {
        watches.push(clock.now());
        return watch(options);
      },
    },
  };
}

/** A repeating pseudo-random sequence in [0, 1): distinct jitter per retry, same every run. */
function sequence(): () => number {
  let i = 0;
  const values = [0.1, 0.7, 0.4, 0.9, 0.25, 0.55];
  return () => values[i++ % values.length] ?? 0;
}

/** Moves the clock in steps, letting the reflector finish what it does at each instant first. */
async function runFor(clock: ManualClock, ms: number, step = 50): Promise<void> {
  for (let t = 0; t < ms; t += step) {
    await new Promise((resolve) => setImmediate(resolve));
    await clock.advance(step);
  }
}

function gaps(times: readonly number[]): number[] {
  return times.slice(1).map((t, i) => t - (times[i] ?? 0));
}

function start(
  client: ResourceClient<PersistentVolume>,
  clock: ManualClock,
  random = sequence(),
  more: Pick<ReflectorOptions<PersistentVolume>, 'pageSize' | 'firstPage'> = {},
): { reflector: Reflector<PersistentVolume>; stop: () => Promise<void> } {
  const reflector = new Reflector<PersistentVolume>({
    client,
    clock,
    logger: silentLogger,
    resource: 'persistentvolumes',
    random,
    ...more,
  });
  const abort = new AbortController();
  const running = reflector.run(abort.signal);
  return {
    reflector,
    stop: async () => {
      abort.abort();
      await running;
    },
  };
}

/** Retry gaps grow (doubling, within the jitter), stay in [30 s, 60 s) once capped, and differ (jitter). */
function assertBackoff(intervals: readonly number[]): void {
  assert.ok(intervals.length >= 8, `enough retries to see the cap: ${intervals.join(', ')}`);
  const first = intervals[0] ?? 0;
  assert.ok(first >= 800 && first < 1600, `the first retry waits [800 ms, 1.6 s): ${first}`);
  for (const [i, gap] of intervals.entries()) {
    const base = Math.min(30_000, 800 * 2 ** i);
    assert.ok(gap >= base && gap < 2 * base + 50, `retry ${i + 1} waits [${base}, ${2 * base}) ms: ${gap}`);
  }
  const capped = intervals.slice(6);
  for (const gap of capped) assert.ok(gap >= 30_000 && gap < 60_050, `capped retry in [30 s, 60 s): ${gap}`);
  assert.ok(new Set(capped).size > 1, `capped retries are jittered, not in lockstep: ${capped.join(', ')}`);
}

describe('Reflector backoff', () => {
  it('a forbidden watch (list allowed) relists with a growing, capped, jittered delay, not every 500 ms', async () => {
    const clock = new ManualClock(1_000_000);
    const server = misbehaving(clock, forbidden);
    const { reflector, stop } = start(server.client, clock);
    await runFor(clock, 10 * 60_000);
    await stop();
    // 10 minutes: about 20 LISTs (the old loop, reset by every LIST: 1200).
    assert.ok(server.lists.length >= 10 && server.lists.length <= 25, `LIST calls in 10 min: ${server.lists.length}`);
    assert.equal(server.watches.length, server.lists.length, 'one watch attempt per list');
    assertBackoff(gaps(server.lists));
    assert.match(reflector.lastError ?? '', /forbidden/u);
  });

  it('a watch that ends at once is re-opened after a growing, capped, jittered delay, without relisting', async () => {
    const clock = new ManualClock(1_000_000);
    const server = misbehaving(clock, endsAtOnce);
    const { reflector, stop } = start(server.client, clock);
    await runFor(clock, 10 * 60_000);
    await stop();
    assert.equal(server.lists.length, 1, 're-opening a watch needs no relist');
    // The old loop re-opened it with no delay at all: thousands of watches in no time.
    assert.ok(server.watches.length >= 10 && server.watches.length <= 25, `WATCH calls: ${server.watches.length}`);
    assertBackoff(gaps(server.watches));
    assert.match(reflector.lastError ?? '', /ended at once/u);
  });

  it('forgets its failures only after the watch was healthy for a while', async () => {
    const clock = new ManualClock(1_000_000);
    let calls = 0;
    // Five refusals, then a watch that runs 3 minutes and fails, then refusals again.
    const server = misbehaving(clock, (options) => {
      calls += 1;
      if (calls !== 6) return forbidden(options);
      return {
        [Symbol.asyncIterator]: () => ({
          next: async () => {
            await clock.sleep(180_000, options.signal);
            throw new KubeApiError(500, 'InternalError', 'etcd leader changed');
          },
        }),
      };
    });
    const { stop } = start(server.client, clock, () => 0.5);
    await runFor(clock, 4 * 60_000, 100);
    await stop();
    const intervals = gaps(server.lists);
    // 1.2, 2.4, 4.8, 9.6, 19.2 s, then 180 s healthy: the retry after it starts over at 1.2 s.
    assert.deepEqual(intervals.slice(0, 5), [1200, 2400, 4800, 9600, 19200]);
    assert.equal(intervals[5], 180_000 + 1200, `the watch was healthy 3 min, so the retry after it is the first again`);
    assert.equal(intervals[6], 2400);
  });

  it('relists at once on the first 410 Gone, but backs off when every watch is Gone', async () => {
    const clock = new ManualClock(1_000_000);
    const server = misbehaving(clock, () => ({
      [Symbol.asyncIterator]: () => ({
        next: () => Promise.reject(new KubeApiError(410, 'Expired', 'too old resource version')),
      }),
    }));
    const { stop } = start(server.client, clock, () => 0.5);
    await runFor(clock, 60_000, 100);
    await stop();
    const intervals = gaps(server.lists);
    assert.equal(intervals[0], 0, 'the first Gone relists at once');
    assert.deepEqual(intervals.slice(1, 4), [2400, 4800, 9600]);
  });
});

/** A server whose PVs carry opaque resourceVersions chosen by the test, and whose watch the test feeds. */
function scriptedServer(items: PersistentVolume[]): {
  client: ResourceClient<PersistentVolume>;
  send: (event: WatchEvent<PersistentVolume>) => void;
} {
  const queue: WatchEvent<PersistentVolume>[] = [];
  let wake: (() => void) | undefined;
  const base = new MemoryCluster().persistentVolumes;
  const list = (): Promise<ObjectList<PersistentVolume>> =>
    Promise.resolve({ metadata: { resourceVersion: 'list-0' }, items: structuredClone(items) });
  return {
    send: (event) => {
      queue.push(event);
      wake?.();
    },
    client: {
      ...base,
      list,
      watch: (options) => ({
        async *[Symbol.asyncIterator]() {
          while (!options.signal.aborted) {
            const event = queue.shift();
            if (event !== undefined) {
              yield event;
              continue;
            }
            await new Promise<void>((resolve) => {
              wake = resolve;
              options.signal.addEventListener(
                'abort',
                () => {
                  resolve();
                },
                { once: true },
              );
            });
          }
        },
      }),
    },
  };
}

async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
}

describe('Reflector.upsert (the agent’s own writes, resourceVersions opaque)', () => {
  async function started(items: PersistentVolume[]): Promise<{
    reflector: Reflector<PersistentVolume>;
    send: (event: WatchEvent<PersistentVolume>) => void;
    changes: string[];
    stop: () => Promise<void>;
  }> {
    const server = scriptedServer(items);
    const changes: string[] = [];
    const reflector = new Reflector<PersistentVolume>({
      client: server.client,
      clock: new ManualClock(),
      logger: silentLogger,
      resource: 'persistentvolumes',
      onChange: (type, object) => changes.push(`${type} ${object.metadata.resourceVersion ?? ''}`),
    });
    const abort = new AbortController();
    const running = reflector.run(abort.signal);
    await reflector.synced;
    changes.length = 0;
    return {
      reflector,
      send: server.send,
      changes,
      stop: async () => {
        abort.abort();
        await running;
      },
    };
  }

  it('keeps a change the watch delivered after the write started, whatever the versions look like', async () => {
    // "rv-b" is not a number: Number() ordering made the older write win (NaN compares false).
    const { reflector, send, stop } = await started([pv('a', 'rv-a')]);
    const since = reflector.position();
    send({ type: 'MODIFIED', object: pv('a', 'rv-c', '/mnt/changed-by-someone') });
    await settle();
    reflector.upsert(pv('a', 'rv-b'), since);
    assert.equal(reflector.get('a')?.metadata.resourceVersion, 'rv-c');
    await stop();
  });

  it('keeps versions beyond 2^53 apart (Number() made 9007199254740993 equal to ...992)', async () => {
    const { reflector, send, stop } = await started([pv('a', '9007199254740991')]);
    const since = reflector.position();
    send({ type: 'MODIFIED', object: pv('a', '9007199254740993') });
    await settle();
    reflector.upsert(pv('a', '9007199254740992'), since);
    assert.equal(reflector.get('a')?.metadata.resourceVersion, '9007199254740993');
    await stop();
  });

  it('takes the write when the watch has not touched the object since it started', async () => {
    // "10" then "9": a numeric comparison would refuse it; opaque versions cannot say it is older.
    const { reflector, changes, stop } = await started([pv('a', '10')]);
    const since = reflector.position();
    reflector.upsert(pv('a', '9', '/mnt/written'), since);
    assert.equal(reflector.get('a')?.spec.local?.path, '/mnt/written');
    assert.deepEqual(changes, ['MODIFIED 9']);
    reflector.upsert(pv('b', 'x1'), since);
    assert.equal(reflector.get('b')?.metadata.resourceVersion, 'x1');
    await stop();
  });

  it('skips an unchanged version and never resurrects an object the watch deleted meanwhile', async () => {
    const { reflector, send, changes, stop } = await started([pv('a', 'v1'), pv('b', 'v1')]);
    const since = reflector.position();
    reflector.upsert(pv('a', 'v1'), since);
    assert.deepEqual(changes, [], 'equal versions: nothing changed');
    send({ type: 'DELETED', object: pv('b', 'v2') });
    await settle();
    reflector.upsert(pv('b', 'v1b'), since);
    assert.equal(reflector.get('b'), undefined);
    await stop();
  });
  it('remembers deleted names within a bound; a write older than what it forgot is declined', async () => {
    const { reflector, send, stop } = await started([]);
    const since = reflector.position();
    for (let i = 0; i < 25_000; i++) send({ type: 'DELETED', object: pv(`gone-${i}`, `d${i}`) });
    // Every deletion handled: the last one's tombstone is there.
    await waitFor(() => reflector['touched'].has('gone-24999'), 'the 25,000 deletions handled', 10_000);
    assert.ok(reflector['touched'].size <= 10_000, `tombstones kept: ${reflector['touched'].size}`);
    reflector.upsert(pv('gone-0', 'w0'), since);
    assert.equal(reflector.get('gone-0'), undefined, 'its tombstone is forgotten, so it is not resurrected');
    reflector.upsert(pv('new', 'n1'), reflector.position());
    assert.equal(reflector.get('new')?.metadata.resourceVersion, 'n1', 'a write started after is taken');
    await stop();
  });
});

describe('Reflector store: what it keeps of an object', () => {
  /** A PV as the apiserver returns it: with the managedFields of its writer. */
  function written(name: string, resourceVersion: string): PersistentVolume {
    const object = pv(name, resourceVersion);
    return {
      ...object,
      metadata: {
        ...object.metadata,
        labels: { 'local-static-provisioner/node': 'n1' },
        managedFields: [
          { manager: 'local-volume-provisioner-ts/0.1.0', operation: 'Update', time: '2026-12-01T00:00:00Z' },
        ],
      },
    };
  }
  function withoutManagedFields(object: PersistentVolume): PersistentVolume {
    const metadata = { ...object.metadata };
    delete metadata.managedFields;
    return { ...object, metadata };
  }

  it('drops metadata.managedFields from listed, watched and written objects, and keeps every other field', async () => {
    const server = scriptedServer([written('listed', 'v1')]);
    const changed: PersistentVolume[] = [];
    const reflector = new Reflector<PersistentVolume>({
      client: server.client,
      clock: new ManualClock(),
      logger: silentLogger,
      resource: 'persistentvolumes',
      onChange: (_type, object) => changed.push(object),
    });
    const abort = new AbortController();
    const running = reflector.run(abort.signal);
    await reflector.synced;
    server.send({ type: 'ADDED', object: written('watched', 'v2') });
    await settle();
    const mine = written('mine', 'v3');
    reflector.upsert(mine, reflector.position());
    for (const name of ['listed', 'watched', 'mine']) {
      const cached = reflector.get(name);
      assert.ok(cached, name);
      assert.equal(cached.metadata.managedFields, undefined, `${name}: managedFields cached`);
      assert.deepEqual(cached, withoutManagedFields(written(name, cached.metadata.resourceVersion ?? '')));
    }
    assert.deepEqual(
      changed.map((o) => [o.metadata.name, o.metadata.managedFields]),
      [
        ['listed', undefined],
        ['watched', undefined],
        ['mine', undefined],
      ],
    );
    assert.equal(mine.metadata.managedFields?.length, 1, 'the written object itself is left as it was');
    abort.abort();
    await running;
  });
});

describe('Reflector head start (a first page requested before it runs)', () => {
  /** The in-memory cluster's PV client, each LIST's options recorded. */
  function counted(clock: ManualClock): {
    client: ResourceClient<PersistentVolume>;
    base: ResourceClient<PersistentVolume>;
    lists: (string | undefined)[];
  } {
    const base = new MemoryCluster({ clock }).persistentVolumes;
    const lists: (string | undefined)[] = [];
    return {
      base,
      lists,
      client: {
        ...base,
        list: (options) => {
          lists.push(options?.continue);
          return base.list(options);
        },
      },
    };
  }

  function reflectorWith(
    client: ResourceClient<PersistentVolume>,
    clock: ManualClock,
    firstPage: Promise<ObjectList<PersistentVolume>>,
    pageSize = 500,
  ): { reflector: Reflector<PersistentVolume>; stop: () => Promise<void> } {
    return start(client, clock, sequence(), { pageSize, firstPage });
  }

  it('takes the page as its first list, then watches from its resourceVersion: a change in between is not lost', async () => {
    const clock = new ManualClock();
    const { client, base, lists } = counted(clock);
    await base.create(pv('before'));
    const head = base.list({ limit: 500 });
    await base.create(pv('between')); // after the head start's list, before the reflector runs
    const { reflector, stop } = reflectorWith(client, clock, head);
    await reflector.synced;
    assert.deepEqual(lists, [], 'no LIST of its own');
    for (let i = 0; i < 20 && reflector.get('between') === undefined; i++) await settle();
    assert.deepEqual(
      reflector
        .list()
        .map((o) => o.metadata.name)
        .sort(),
      ['before', 'between'],
    );
    await stop();
  });

  it('lists the following pages itself, from the head start’s continue token', async () => {
    const clock = new ManualClock();
    const { client, base, lists } = counted(clock);
    for (const name of ['a', 'b', 'c', 'd', 'e']) await base.create(pv(name));
    const head = base.list({ limit: 2 });
    const { reflector, stop } = reflectorWith(client, clock, head, 2);
    await reflector.synced;
    assert.equal(lists.length, 2, 'pages 2 and 3');
    assert.ok(
      lists.every((token) => token !== undefined && token !== ''),
      'each from a continue token',
    );
    assert.deepEqual(
      reflector
        .list()
        .map((o) => o.metadata.name)
        .sort(),
      ['a', 'b', 'c', 'd', 'e'],
    );
    await stop();
  });

  it('lists as usual when the head start failed, and only the first list takes it', async () => {
    const clock = new ManualClock();
    const { client, base, lists } = counted(clock);
    await base.create(pv('x'));
    const { reflector, stop } = reflectorWith(
      client,
      clock,
      Promise.reject(new KubeApiError(500, 'InternalError', 'etcd is down')),
    );
    await reflector.synced;
    assert.deepEqual(lists, [undefined], 'one LIST of its own, from the start');
    assert.ok(reflector.get('x'));
    await stop();
  });
});

describe('Reflector list bound', () => {
  it(`fails a list that has not ended after ${String(MAX_LIST_PAGES)} pages (a server that always answers "continue")`, async () => {
    const clock = new ManualClock();
    const base = new MemoryCluster({ clock }).persistentVolumes;
    let pages = 0;
    const endless: ResourceClient<PersistentVolume> = {
      ...base,
      list: () => {
        pages += 1;
        return Promise.resolve({ metadata: { resourceVersion: '1', continue: `page-${String(pages)}` }, items: [] });
      },
    };
    const { reflector, stop } = start(endless, clock);
    try {
      for (let i = 0; i < 100 && reflector.lastError === undefined; i++) await settle();
      assert.match(reflector.lastError ?? '', /persistentvolumes list did not end after 10000 pages/u);
      assert.equal(pages, MAX_LIST_PAGES, 'no page asked for past the bound');
    } finally {
      await stop();
    }
  });
});

describe('Reflector stop', () => {
  it('stops when aborted right after its first list, before its watch opened (a reload right after the sync)', async () => {
    const clock = new ManualClock();
    const client = new MemoryCluster({ clock }).persistentVolumes;
    const reflector = new Reflector<PersistentVolume>({ client, clock, logger: silentLogger, resource: 'pvs' });
    const abort = new AbortController();
    const running = reflector.run(abort.signal);
    await reflector.synced;
    abort.abort(); // before run() goes on from the list to the watch
    const state = { returned: false };
    void running.then(() => {
      state.returned = true;
    });
    for (let i = 0; i < 20 && !state.returned; i++) await settle();
    assert.ok(state.returned, 'run() returned after the abort');
  });
});

describe('Reflector store: a transform', () => {
  it('stores and reports the transform of every listed, watched and upserted object', async () => {
    const server = scriptedServer([pv('listed', 'v1')]);
    const changed: string[] = [];
    const reflector = new Reflector<
      PersistentVolume,
      { metadata: { name: string; resourceVersion?: string }; path: string }
    >({
      client: server.client,
      clock: new ManualClock(),
      logger: silentLogger,
      resource: 'persistentvolumes',
      transform: (object) => ({
        metadata: { name: object.metadata.name, resourceVersion: object.metadata.resourceVersion ?? '' },
        path: object.spec.local?.path ?? '',
      }),
      onChange: (type, object) => changed.push(`${type} ${object.path}`),
    });
    const abort = new AbortController();
    const running = reflector.run(abort.signal);
    await reflector.synced;
    server.send({ type: 'ADDED', object: pv('watched', 'v2') });
    await settle();
    reflector.upsert(pv('mine', 'v3'), reflector.position());
    server.send({ type: 'DELETED', object: pv('watched', 'v4') });
    await settle();
    assert.deepEqual(reflector.get('listed'), {
      metadata: { name: 'listed', resourceVersion: 'v1' },
      path: '/mnt/listed',
    });
    assert.deepEqual(
      reflector.list().map((o) => o.path),
      ['/mnt/listed', '/mnt/mine'],
    );
    assert.deepEqual(changed, ['ADDED /mnt/listed', 'ADDED /mnt/watched', 'ADDED /mnt/mine', 'DELETED /mnt/watched']);
    abort.abort();
    await running;
  });
});
