// The PV write ledger: every write counted when it starts and when it settles (answered, refused,
// or thrown before it left); reads and watches are not writes.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { KubeApiError } from '../../../src/core/kube/cluster.js';
import type { ResourceClient } from '../../../src/core/kube/cluster.js';
import { MemoryCluster } from '../../../src/core/kube/memory/memory-cluster.js';
import type { PersistentVolume } from '../../../src/core/kube/objects.js';
import { recordWrites, WriteLedger } from '../../../src/core/kube/write-ledger.js';
import { localPersistentVolume } from '../../support/persistent-volume.js';

describe('WriteLedger', () => {
  it('counts each write from its start to its answer, and no read', async () => {
    const memory = new MemoryCluster();
    const ledger = new WriteLedger();
    const client = recordWrites(memory.persistentVolumes, ledger);
    const created = client.create(localPersistentVolume('a'));
    assert.deepEqual([ledger.started, ledger.inFlight], [1, 1], 'counted as it leaves');
    await created;
    assert.deepEqual([ledger.started, ledger.inFlight], [1, 0]);
    await client.patch('a', { metadata: { labels: { x: 'y' } } });
    const got = await client.get('a');
    await client.update(got);
    await client.updateStatus({ ...(await client.get('a')), status: { phase: 'Released' } });
    await client.list();
    await client.listMetadata();
    await client.delete('a');
    assert.deepEqual([ledger.started, ledger.settled], [5, 5], 'create, patch, update, status, delete');
  });

  it('settles a write the server refuses, and one that throws before it leaves', async () => {
    const ledger = new WriteLedger();
    const memory = new MemoryCluster();
    const refusing: ResourceClient<PersistentVolume> = {
      ...memory.persistentVolumes,
      delete: () => Promise.reject(new KubeApiError(403, 'Forbidden', 'no')),
      patch: () => {
        throw new Error('bad patch');
      },
    };
    const client = recordWrites(refusing, ledger);
    await assert.rejects(client.delete('x'), /no/u);
    assert.throws(() => client.patch('x', {}), /bad patch/u);
    assert.deepEqual([ledger.started, ledger.settled], [2, 2]);
  });
});
