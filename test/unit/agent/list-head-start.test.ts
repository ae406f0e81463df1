// The head start's rule: lists asked for ahead of a generation are given to it only if they hold
// every PV write the agent made (none in flight when asked, none started since) and are recent;
// lists a change did not use pause the next request. Each list is whole, whatever its pages.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { ManualClock } from '../../../src/core/clock.js';
import {
  HEAD_START_MAX_AGE_MS,
  HEAD_START_PAUSE_AFTER_UNUSED_MS,
  ListHeadStart,
} from '../../../src/core/agent/list-head-start.js';
import type { ListOptions } from '../../../src/core/kube/cluster.js';
import { MemoryCluster } from '../../../src/core/kube/memory/memory-cluster.js';
import { MAX_LIST_PAGES } from '../../../src/core/kube/list-pages.js';
import type { ObjectList, PersistentVolume } from '../../../src/core/kube/objects.js';
import { recordWrites, WriteLedger } from '../../../src/core/kube/write-ledger.js';
import { MemoryLogger } from '../../../src/core/log.js';
import { NODE_LABEL } from '../../../src/core/pv/naming.js';
import { localPersistentVolume } from '../../support/persistent-volume.js';

const pv = (name: string, node = 'node-a'): PersistentVolume => localPersistentVolume(name, { [NODE_LABEL]: node });

function fixture() {
  const memory = new MemoryCluster();
  const clock = new ManualClock(1_000_000);
  const writes = new WriteLedger();
  const logger = new MemoryLogger();
  const persistentVolumes = recordWrites(memory.persistentVolumes, writes);
  const pages: (string | undefined)[] = [];
  const listing = {
    ...persistentVolumes,
    list: (options?: ListOptions) => {
      pages.push(options?.continue);
      return persistentVolumes.list(options);
    },
  };
  const cluster = { persistentVolumes: listing, storageClasses: memory.storageClasses };
  const headStart = new ListHeadStart({ cluster, clock, logger, writes, nodeName: 'node-a' });
  return { memory, clock, writes, logger, persistentVolumes, headStart, pages };
}

describe('ListHeadStart', () => {
  it("gives the generation the node's whole PV list, every page, when nothing was written since", async () => {
    const t = fixture();
    for (let i = 0; i < 1_203; i++) await t.memory.persistentVolumes.create(pv(`pv-${String(i)}`));
    await t.memory.persistentVolumes.create(pv('elsewhere', 'node-b'));
    await t.memory.storageClasses.create({ metadata: { name: 'fast' }, provisioner: 'kubernetes.io/no-provisioner' });
    assert.equal(t.headStart.request(), true);
    const lists = t.headStart.take();
    assert.ok(lists, 'taken');
    const pvs = await lists.persistentVolumes;
    assert.equal(pvs.items.length, 1_203, 'three pages of 500, as one');
    assert.equal(t.pages.length, 3);
    assert.equal(t.pages[0], undefined, 'then two continued');
    assert.equal(pvs.metadata.continue, undefined);
    assert.ok(pvs.metadata.resourceVersion !== undefined, 'the list snapshot to watch on from');
    assert.deepEqual(
      (await lists.storageClasses).items.map((c) => c.metadata.name),
      ['fast'],
    );
    assert.equal(t.headStart.take(), undefined, 'taken once');
  });

  it('a list that never ends fails at the bound (the generation then lists on its own, bounded the same)', async () => {
    const t = fixture();
    let pages = 0;
    const endless = {
      ...t.persistentVolumes,
      list: () => {
        pages += 1;
        return Promise.resolve({ metadata: { continue: `page-${String(pages)}` }, items: [] as PersistentVolume[] });
      },
    };
    const memory = new MemoryCluster();
    const headStart = new ListHeadStart({
      cluster: { persistentVolumes: endless, storageClasses: memory.storageClasses },
      clock: t.clock,
      logger: t.logger,
      writes: t.writes,
      nodeName: 'node-a',
    });
    headStart.request();
    const lists = headStart.take();
    assert.ok(lists);
    await assert.rejects(lists.persistentVolumes, /did not end after 10000 pages/u);
    assert.equal(pages, MAX_LIST_PAGES);
  });

  it('is not taken after a PV write that started since it was asked for; the generation lists again', async () => {
    const t = fixture();
    t.headStart.request();
    await t.persistentVolumes.create(pv('written'));
    assert.equal(t.headStart.take(), undefined);
    assert.ok(t.logger.messages('debug').some((m) => m.includes('not taken')));
  });

  it('is not asked for while a PV write is in flight (the list might not hold it)', async () => {
    const t = fixture();
    const pending = t.persistentVolumes.create(pv('on-its-way'));
    assert.equal(t.headStart.request(), false);
    await pending;
    assert.equal(t.headStart.request(), true, 'asked once the write settled');
    assert.ok(t.headStart.take());
  });

  it('is not taken once older than its bound', async () => {
    const t = fixture();
    t.headStart.request();
    await t.clock.advance(HEAD_START_MAX_AGE_MS + 1);
    assert.equal(t.headStart.take(), undefined);
    t.headStart.request();
    await t.clock.advance(HEAD_START_MAX_AGE_MS);
    assert.ok(t.headStart.take(), 'at the bound it still is');
  });

  it('after lists no generation took, asks for none until the pause is over', async () => {
    const t = fixture();
    assert.equal(t.headStart.request(), true);
    assert.equal(t.headStart.request(), false, 'one held at a time');
    t.headStart.drop();
    assert.equal(t.headStart.take(), undefined, 'dropped lists are gone');
    assert.equal(t.headStart.request(), false);
    await t.clock.advance(HEAD_START_PAUSE_AFTER_UNUSED_MS - 1);
    assert.equal(t.headStart.request(), false);
    await t.clock.advance(1);
    assert.equal(t.headStart.request(), true);
    t.headStart.drop();
    t.headStart.drop();
    await t.clock.advance(HEAD_START_PAUSE_AFTER_UNUSED_MS);
    assert.equal(t.headStart.request(), true, 'a drop with nothing held pauses nothing more');
  });
});

// The model: the agent's PV writes leave, reach the server and are answered at any moment; the
// server answers the head start's list at any moment after it was asked (with what it holds then).
// Whatever the order, lists given to a generation hold every write the agent started before.
type Step = 'write' | 'apply' | 'answerWrite' | 'request' | 'answerList' | 'take' | 'drop' | 'wait';

function modelServer() {
  const applied = new Set<string>();
  const writes: { name: string; applied: boolean; answer: () => void }[] = [];
  const lists: (() => void)[] = [];
  const persistentVolumes = {
    ...new MemoryCluster().persistentVolumes,
    create: (object: PersistentVolume) =>
      new Promise<PersistentVolume>((resolve) => {
        const answer = (): void => {
          resolve(object);
        };
        const write = { name: object.metadata.name, applied: false, answer };
        writes.push(write);
      }),
    list: () =>
      new Promise<ObjectList<PersistentVolume>>((resolve) => {
        lists.push(() => {
          resolve({ metadata: { resourceVersion: '1' }, items: [...applied].map((n) => pv(n)) });
        });
      }),
  };
  const apply = (): void => {
    const write = writes.find((w) => !w.applied);
    if (write === undefined) return;
    write.applied = true;
    applied.add(write.name);
  };
  const answerWrite = (): void => {
    const write = writes.shift();
    if (write === undefined) return;
    if (!write.applied) applied.add(write.name);
    write.answer();
  };
  const answerLists = (): void => {
    for (const answer of lists.splice(0)) answer();
  };
  return { persistentVolumes, apply, answerWrite, answerLists, pending: () => writes.length };
}

describe('ListHeadStart, model', () => {
  it('lists given to a generation hold every PV write the agent started before, in any order of answers', async () => {
    const steps = fc.constantFrom<Step>(
      'write',
      'apply',
      'answerWrite',
      'request',
      'answerList',
      'take',
      'drop',
      'wait',
    );
    await fc.assert(
      fc.asyncProperty(fc.array(steps, { maxLength: 40 }), async (run) => {
        const server = modelServer();
        const memory = new MemoryCluster();
        const clock = new ManualClock(0);
        const writes = new WriteLedger();
        const client = recordWrites(server.persistentVolumes, writes);
        const cluster = { persistentVolumes: client, storageClasses: memory.storageClasses };
        const headStart = new ListHeadStart({ cluster, clock, logger: new MemoryLogger(), writes, nodeName: 'node-a' });
        const given: { lists: Promise<ObjectList<PersistentVolume>>; before: string[] }[] = [];
        const started: string[] = [];
        for (const step of run) {
          if (step === 'write') {
            const name = `w${String(started.length)}`;
            started.push(name);
            void client.create(pv(name));
          } else if (step === 'apply') server.apply();
          else if (step === 'answerWrite') server.answerWrite();
          else if (step === 'request') headStart.request();
          else if (step === 'answerList') server.answerLists();
          else if (step === 'drop') headStart.drop();
          else if (step === 'wait') await clock.advance(HEAD_START_PAUSE_AFTER_UNUSED_MS);
          else {
            const lists = headStart.take();
            if (lists !== undefined) given.push({ lists: lists.persistentVolumes, before: [...started] });
          }
          await Promise.resolve();
        }
        while (server.pending() > 0) server.answerWrite();
        server.answerLists();
        for (const { lists, before } of given) {
          const held = new Set((await lists).items.map((p) => p.metadata.name));
          for (const name of before)
            assert.ok(held.has(name), `${name}, written before the generation, is in its list`);
        }
      }),
      { numRuns: 300 },
    );
  });
});
