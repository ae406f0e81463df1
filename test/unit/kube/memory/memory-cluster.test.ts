import assert from 'node:assert/strict';
import { getEventListeners } from 'node:events';
import { describe, it } from 'node:test';

import { ManualClock } from '../../../../src/core/clock.js';
import { KubeApiError, type WatchEvent } from '../../../../src/core/kube/cluster.js';
import { MemoryCluster, applyMergePatch } from '../../../../src/core/kube/memory/memory-cluster.js';
import type { PersistentVolume } from '../../../../src/core/kube/objects.js';
import { clusterContract } from '../../../contract/cluster-contract.js';
import { localPersistentVolume } from '../../../support/persistent-volume.js';

clusterContract('MemoryCluster', () => {
  const cluster = new MemoryCluster();
  return Promise.resolve({
    cluster,
    prefix: 'ct-mem',
    cleanup: () => {
      assert.equal(cluster.activeWatches, 0, 'every watch of the contract suite has ended');
      return Promise.resolve();
    },
    expiredEventsResourceVersion: async () => {
      const before = cluster.resourceVersion;
      await cluster.persistentVolumes.create(pv('ct-mem-compacted'));
      cluster.compact();
      return before;
    },
  });
});

const pv = (name: string, labels: Record<string, string> = {}): PersistentVolume => localPersistentVolume(name, labels);

async function collect<T>(iterable: AsyncIterable<T>, count: number): Promise<T[]> {
  const out: T[] = [];
  if (count === 0) return out;
  for await (const item of iterable) {
    out.push(item);
    if (out.length >= count) break;
  }
  return out;
}

function rejectsGone(promise: Promise<unknown>): Promise<void> {
  return assert.rejects(promise, (error: unknown) => {
    assert.ok(error instanceof KubeApiError);
    assert.equal(error.status, 410);
    assert.equal(error.reason, 'Expired');
    return true;
  });
}

void describe('MemoryCluster (memory-only behaviour)', () => {
  void it('uses one global, increasing resourceVersion across kinds', async () => {
    const cluster = new MemoryCluster();
    const start = Number(cluster.resourceVersion);
    const a = await cluster.persistentVolumes.create(pv('a'));
    const sc = await cluster.storageClasses.create({ metadata: { name: 'sc' }, provisioner: 'x' });
    const b = await cluster.persistentVolumes.create(pv('b'));
    assert.deepEqual(
      [a, sc, b].map((o) => Number(o.metadata.resourceVersion)),
      [start + 1, start + 2, start + 3],
    );
    assert.equal((await cluster.persistentVolumes.list()).metadata.resourceVersion, String(start + 3));
  });

  void it('takes timestamps from the clock', async () => {
    const clock = new ManualClock(Date.UTC(2030, 0, 2, 3, 4, 5, 678));
    const cluster = new MemoryCluster({ clock });
    const created = await cluster.persistentVolumes.create(pv('t'));
    assert.equal(created.metadata.creationTimestamp, '2030-01-02T03:04:05Z');
    await clock.advance(60_000);
    await cluster.persistentVolumes.delete('t');
    assert.equal((await cluster.persistentVolumes.get('t')).metadata.deletionTimestamp, '2030-01-02T03:05:05Z');
  });

  void it('compact() makes older resourceVersions fail with 410 for watches and list continuations', async () => {
    const cluster = new MemoryCluster();
    for (const name of ['a', 'b', 'c']) await cluster.persistentVolumes.create(pv(name));
    const page = await cluster.persistentVolumes.list({ limit: 1 });
    assert.ok(page.metadata.continue);
    const old = page.metadata.resourceVersion ?? '';
    await cluster.persistentVolumes.create(pv('d'));
    // Before compaction the continuation still serves the old snapshot (d is not in it).
    const rest = await cluster.persistentVolumes.list({ limit: 10, continue: page.metadata.continue });
    assert.deepEqual(
      rest.items.map((p) => p.metadata.name),
      ['b', 'c'],
    );
    cluster.compact();
    const signal = new AbortController().signal;
    await rejectsGone(collect(cluster.persistentVolumes.watch({ resourceVersion: old, signal }), 1));
    await rejectsGone(cluster.persistentVolumes.list({ limit: 1, continue: page.metadata.continue }));
    // The current resourceVersion and "0" still work.
    const current = cluster.resourceVersion;
    const controller = new AbortController();
    const watch = collect(cluster.persistentVolumes.watch({ resourceVersion: current, signal: controller.signal }), 1);
    await cluster.persistentVolumes.create(pv('e'));
    const [event] = await watch;
    assert.equal(event?.type, 'ADDED');
    controller.abort();
    assert.equal(cluster.activeWatches, 0);
  });

  void it('keeps only historyLimit changes', async () => {
    const cluster = new MemoryCluster({ historyLimit: 2 });
    const start = cluster.resourceVersion;
    for (const name of ['a', 'b', 'c']) await cluster.persistentVolumes.create(pv(name));
    const signal = new AbortController().signal;
    await rejectsGone(collect(cluster.persistentVolumes.watch({ resourceVersion: start, signal }), 1));
    const controller = new AbortController();
    const afterFirst = String(Number(start) + 1);
    const events = await collect(
      cluster.persistentVolumes.watch({ resourceVersion: afterFirst, signal: controller.signal }),
      2,
    );
    controller.abort();
    assert.deepEqual(
      events.map((e) => (e.type === 'BOOKMARK' ? '' : e.object.metadata.name)),
      ['b', 'c'],
    );
  });

  void it('keeps at most eventLimit Events, the newest; a watch sees the oldest deleted', async () => {
    const cluster = new MemoryCluster({ eventLimit: 3 });
    const event = (name: string) => ({
      metadata: { name, namespace: 'default' },
      involvedObject: { kind: 'Node', name: 'node-a' },
      reason: 'ConfigApplied',
      message: name,
      type: 'Normal' as const,
    });
    const start = cluster.resourceVersion;
    for (const name of ['e1', 'e2', 'e3', 'e4', 'e5'])
      await cluster.events.create(event(name), { namespace: 'default' });
    const kept = await cluster.events.list({ namespace: 'default' });
    assert.deepEqual(
      kept.items.map((e) => e.metadata.name),
      ['e3', 'e4', 'e5'],
    );
    const controller = new AbortController();
    const seen = await collect(cluster.events.watch({ resourceVersion: start, signal: controller.signal }), 7);
    controller.abort();
    assert.deepEqual(
      seen.map((e) => (e.type === 'BOOKMARK' ? '' : `${e.type} ${e.object.metadata.name}`)),
      ['ADDED e1', 'ADDED e2', 'ADDED e3', 'ADDED e4', 'DELETED e1', 'ADDED e5', 'DELETED e2'],
    );
    // Other kinds are not limited.
    for (const name of ['a', 'b', 'c', 'd']) await cluster.persistentVolumes.create(pv(name));
    assert.equal((await cluster.persistentVolumes.list()).items.length, 4);
  });

  void it('ends watches on abort without leaking abort listeners or watchers', async () => {
    const cluster = new MemoryCluster();
    const controller = new AbortController();
    const iterator = cluster.persistentVolumes
      .watch({ resourceVersion: cluster.resourceVersion, signal: controller.signal })
      [Symbol.asyncIterator]();
    const pending = iterator.next();
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(cluster.activeWatches, 1);
    assert.equal(getEventListeners(controller.signal, 'abort').length, 1);
    controller.abort();
    assert.deepEqual(await pending, { done: true, value: undefined });
    assert.equal(cluster.activeWatches, 0);
    assert.equal(getEventListeners(controller.signal, 'abort').length, 0);

    // Many watches on one long-lived signal, each ended by `break`: nothing accumulates.
    const shared = new AbortController();
    await cluster.persistentVolumes.create(pv('x'));
    for (let i = 0; i < 20; i++) {
      for await (const event of cluster.persistentVolumes.watch({ resourceVersion: '0', signal: shared.signal })) {
        assert.equal(event.type, 'ADDED');
        break;
      }
    }
    assert.equal(cluster.activeWatches, 0);
    assert.equal(getEventListeners(shared.signal, 'abort').length, 0);
  });

  void it('ends a watch after timeoutSeconds on the injected clock', async () => {
    const clock = new ManualClock(0);
    const cluster = new MemoryCluster({ clock });
    const controller = new AbortController();
    const iterator = cluster.persistentVolumes
      .watch({ resourceVersion: '0', timeoutSeconds: 30, signal: controller.signal })
      [Symbol.asyncIterator]();
    const pending = iterator.next();
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(clock.pendingSleepers, 1);
    await clock.advance(29_000);
    assert.equal(cluster.activeWatches, 1);
    await clock.advance(1_000);
    assert.deepEqual(await pending, { done: true, value: undefined });
    assert.equal(cluster.activeWatches, 0);
    assert.equal(clock.pendingSleepers, 0);
  });

  void it('sends BOOKMARKs to watches that allow them', async () => {
    const cluster = new MemoryCluster();
    const withBookmarks = new AbortController();
    const without = new AbortController();
    const a = cluster.persistentVolumes
      .watch({ resourceVersion: cluster.resourceVersion, allowBookmarks: true, signal: withBookmarks.signal })
      [Symbol.asyncIterator]();
    const b = cluster.persistentVolumes
      .watch({ resourceVersion: cluster.resourceVersion, signal: without.signal })
      [Symbol.asyncIterator]();
    const nextA = a.next();
    const nextB = b.next();
    await new Promise((resolve) => setImmediate(resolve));
    cluster.sendBookmarks();
    const event: IteratorResult<WatchEvent<PersistentVolume>> = await nextA;
    assert.deepEqual(event.value, { type: 'BOOKMARK', resourceVersion: cluster.resourceVersion });
    without.abort();
    assert.equal((await nextB).done, true);
    withBookmarks.abort();
    assert.equal((await a.next()).done, true);
  });

  void it('generates a name from generateName', async () => {
    const cluster = new MemoryCluster();
    const body = pv('');
    body.metadata = { name: '', generateName: 'gen-' } as PersistentVolume['metadata'];
    const created = await cluster.persistentVolumes.create(body);
    assert.match(created.metadata.name, /^gen-[0-9a-f]{5}$/);
  });

  void it('returns copies: callers cannot change stored objects', async () => {
    const cluster = new MemoryCluster();
    const created = await cluster.persistentVolumes.create(pv('copy', { a: 'b' }));
    created.metadata.labels = { changed: 'yes' };
    const got = await cluster.persistentVolumes.get('copy');
    assert.deepEqual(got.metadata.labels, { a: 'b' });
  });

  void it('applyMergePatch follows RFC 7386', () => {
    // Examples from RFC 7386, appendix A.
    const cases: [unknown, unknown, unknown][] = [
      [{ a: 'b' }, { a: 'c' }, { a: 'c' }],
      [{ a: 'b' }, { b: 'c' }, { a: 'b', b: 'c' }],
      [{ a: 'b' }, { a: null }, {}],
      [{ a: 'b', b: 'c' }, { a: null }, { b: 'c' }],
      [{ a: ['b'] }, { a: 'c' }, { a: 'c' }],
      [{ a: 'c' }, { a: ['b'] }, { a: ['b'] }],
      [{ a: { b: 'c' } }, { a: { b: 'd', c: null } }, { a: { b: 'd' } }],
      [{ a: [{ b: 'c' }] }, { a: [1] }, { a: [1] }],
      [
        ['a', 'b'],
        ['c', 'd'],
        ['c', 'd'],
      ],
      [{ a: 'b' }, ['c'], ['c']],
      [{ a: 'foo' }, null, null],
      [{ a: 'foo' }, 'bar', 'bar'],
      [{ e: null }, { a: 1 }, { e: null, a: 1 }],
      [[1, 2], { a: 'b', c: null }, { a: 'b' }],
      [{}, { a: { bb: { ccc: null } } }, { a: { bb: {} } }],
    ];
    for (const [target, patch, expected] of cases) {
      assert.deepEqual(applyMergePatch(target, patch), expected, JSON.stringify([target, patch]));
    }
    const polluted = applyMergePatch({}, JSON.parse('{"__proto__": {"polluted": true}}'));
    assert.equal(({} as Record<string, unknown>)['polluted'], undefined);
    assert.deepEqual(Object.keys(polluted as object), ['__proto__']);
  });
});
