import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ManualClock } from '../../../src/core/clock.js';
import { stateFromLease } from '../../../src/core/fleet/applied-state.js';
import type { AppliedState } from '../../../src/core/fleet/applied-state.js';
import { StatePublisher } from '../../../src/core/fleet/publisher.js';
import { KubeApiError } from '../../../src/core/kube/cluster.js';
import type { ResourceClient } from '../../../src/core/kube/cluster.js';
import { MemoryCluster } from '../../../src/core/kube/memory/memory-cluster.js';
import type { Lease } from '../../../src/core/kube/objects.js';
import { MemoryLogger } from '../../../src/core/log.js';
import { HASH_A, HASH_B } from '../../support/fake-admin.js';

const target = { name: 'lvp-node-a', namespace: 'default', instance: 'lvp' };
const STATE: AppliedState = {
  node: 'node-a',
  appliedHash: HASH_A,
  generation: 1,
  result: 'started',
  source: '/etc/provisioner/config',
  agentVersion: '0.1.0',
};

async function settle(): Promise<void> {
  for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
}

function setup(leases?: ResourceClient<Lease>): {
  cluster: MemoryCluster;
  clock: ManualClock;
  logger: MemoryLogger;
  publisher: StatePublisher;
} {
  const clock = new ManualClock(1_780_000_000_000);
  const cluster = new MemoryCluster({ clock });
  const logger = new MemoryLogger();
  const publisher = new StatePublisher({
    leases: leases ?? cluster.leases,
    target,
    clock,
    logger,
    heartbeatMs: 60_000,
    random: () => 0.5,
  });
  return { cluster, clock, logger, publisher };
}

void describe('the applied-state publisher', () => {
  void it('creates the Lease at start, writes a change at once, and otherwise only the heartbeat', async () => {
    const { cluster, clock, publisher } = setup();
    publisher.start(STATE);
    await settle();
    const first = await cluster.leases.get(target.name);
    assert.equal(stateFromLease(first)?.appliedHash, HASH_A);
    assert.equal(first.spec?.leaseDurationSeconds, 180);
    assert.equal(publisher.writes, 1);

    publisher.update(STATE); // unchanged: nothing written
    await clock.advance(30_000);
    assert.equal(publisher.writes, 1);

    publisher.update({ ...STATE, appliedHash: HASH_B, generation: 2, result: 'applied' });
    await settle();
    assert.equal(publisher.writes, 2);
    const second = await cluster.leases.get(target.name);
    assert.equal(stateFromLease(second)?.appliedHash, HASH_B);
    assert.equal(stateFromLease(second)?.generation, 2);

    // The heartbeat: one write per period (60 s, random 0.5 → no jitter), and nothing in between.
    await clock.advance(59_000);
    assert.equal(publisher.writes, 2);
    await clock.advance(1_000);
    await settle();
    assert.equal(publisher.writes, 3);
    const renewed = await cluster.leases.get(target.name);
    assert.equal(Date.parse(renewed.spec?.renewTime ?? ''), clock.now());
    await publisher.stop();
  });

  void it('re-creates a deleted Lease and re-reads one written by someone else (409)', async () => {
    const { cluster, clock, publisher } = setup();
    publisher.start(STATE);
    await settle();
    await cluster.leases.delete(target.name);
    publisher.update({ ...STATE, generation: 2 });
    await settle();
    await clock.advance(5_000);
    await settle();
    assert.equal(stateFromLease(await cluster.leases.get(target.name))?.generation, 2);
    const lease = await cluster.leases.get(target.name);
    await cluster.leases.update({
      ...lease,
      metadata: { ...lease.metadata, labels: { ...lease.metadata.labels, x: 'y' } },
    });
    publisher.update({ ...STATE, generation: 3 });
    await settle();
    await clock.advance(5_000);
    await settle();
    const after = await cluster.leases.get(target.name);
    assert.equal(stateFromLease(after)?.generation, 3);
    assert.equal(after.metadata.labels?.['x'], 'y', "someone else's label survives");
    await publisher.stop();
  });

  void it('retries a failing write a bounded number of times with backoff, then waits for the heartbeat', async () => {
    let calls = 0;
    const failing: ResourceClient<Lease> = {
      ...new MemoryCluster().leases,
      get: () => {
        calls += 1;
        return Promise.reject(new KubeApiError(503, 'ServiceUnavailable', 'apiserver down'));
      },
    };
    const { clock, logger, publisher } = setup(failing);
    publisher.start(STATE);
    for (let i = 0; i < 60; i++) {
      await settle();
      await clock.advance(1_000);
    }
    const count = (): number => calls;
    assert.equal(count(), 5, 'five attempts, then it waits for the next heartbeat');
    assert.equal(logger.records.filter((r) => r.level === 'warn').length, 1);
    await clock.advance(30_000);
    await settle();
    assert.ok(count() > 5, 'the heartbeat tries again');
    await publisher.stop();
  });
});
