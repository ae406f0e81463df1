// Every page of a list as one: pages merged in order at the list's resourceVersion, and a list
// that never ends stopped at the bound with ListTooLongError (rollout status names it in its words).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ListOptions } from '../../../src/core/kube/cluster.js';
import { listAllPages, ListTooLongError } from '../../../src/core/kube/list-pages.js';
import { MemoryCluster } from '../../../src/core/kube/memory/memory-cluster.js';
import type { ObjectList } from '../../../src/core/kube/objects.js';
import { localPersistentVolume } from '../../support/persistent-volume.js';

describe('listAllPages', () => {
  it('merges the pages in order, asking each with the options and the last continue token', async () => {
    const memory = new MemoryCluster();
    for (let i = 0; i < 7; i++) await memory.persistentVolumes.create(localPersistentVolume(`pv-${String(i)}`));
    const asked: ListOptions[] = [];
    const list = await listAllPages(
      (o) => {
        asked.push(o);
        return memory.persistentVolumes.list(o);
      },
      { limit: 3 },
    );
    assert.deepEqual(
      list.items.map((pv) => pv.metadata.name),
      [0, 1, 2, 3, 4, 5, 6].map((i) => `pv-${String(i)}`),
    );
    assert.equal(asked.length, 3);
    assert.ok(asked.every((o) => o.limit === 3));
    assert.deepEqual(
      asked.map((o) => o.continue === undefined),
      [true, false, false],
    );
    assert.equal(list.metadata.continue, undefined);
    assert.ok(list.metadata.resourceVersion !== undefined);
  });

  it('stops a list that never ends at the bound, having asked for no page past it', async () => {
    let pages = 0;
    const endless = (): Promise<ObjectList<never>> => {
      pages += 1;
      return Promise.resolve({ metadata: { continue: `c${String(pages)}` }, items: [] });
    };
    const failed = await listAllPages(endless, {}, 5).catch((err: unknown) => err);
    assert.ok(failed instanceof ListTooLongError);
    assert.equal(failed.maxPages, 5);
    assert.equal(pages, 5);
  });
});
