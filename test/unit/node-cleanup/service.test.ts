import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { systemClock } from '../../../src/core/clock.js';
import { MemoryCluster } from '../../../src/core/kube/memory/memory-cluster.js';
import { silentLogger } from '../../../src/core/log.js';
import { startNodeCleanup } from '../../../src/core/node-cleanup/service.js';
import { eventually } from '../../support/eventually.js';
import { holderAfterStopWithRenewInFlight, leaseFaults, withLeases } from '../../support/lease-faults.js';

const SETTINGS = {
  storageClassNames: new Set(['local-storage']),
  gracePeriodMs: 60_000,
  discoveryIntervalMs: 10_000,
  resyncMs: 0,
  dryRun: false,
};

describe('node cleanup service: metrics server and leader lease', () => {
  it("serves upstream's metric names and the leader gauge; stopping releases the lease", async () => {
    const cluster = new MemoryCluster();
    const service = await startNodeCleanup(
      {
        settings: SETTINGS,
        listenAddress: '127.0.0.1:0',
        metricsPath: '/metrics',
        identity: 'replica-a',
        leaderElection: {
          name: 'node-cleanup',
          namespace: 'default',
          timing: { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 },
        },
      },
      { cluster, clock: systemClock, logger: silentLogger },
    );
    try {
      const url = `http://127.0.0.1:${String(service.port)}`;
      await eventually(async () => ((await fetch(`${url}/readyz`)).status === 200 ? true : undefined), 'ready');
      const text = await eventually(async () => {
        const body = await (await fetch(`${url}/metrics`)).text();
        return /^local_volume_node_cleanup_leader 1$/mu.test(body) ? body : undefined;
      }, 'the leader gauge at 1');
      for (const name of [
        'local_volume_node_cleanup_persistentvolume_delete_total',
        'local_volume_node_cleanup_persistentvolume_delete_failed_total',
        'local_volume_node_cleanup_persistentvolumeclaim_delete_total',
        'local_volume_node_cleanup_persistentvolumeclaim_delete_failed_total',
      ]) {
        assert.match(text, new RegExp(`^# TYPE ${name} counter$`, 'mu'));
      }
      assert.equal((await cluster.leases.get('node-cleanup')).spec?.holderIdentity, 'replica-a');
    } finally {
      await service.stop();
    }
    assert.equal((await cluster.leases.get('node-cleanup')).spec?.holderIdentity, '', 'released on stop');
    assert.equal(service.metrics.leader.get(), 0);
  });

  it('a stop while a renew’s answer is on its way still releases the lease (the elector’s release path)', async () => {
    // The stop abandons the renew in flight; its write already moved the resourceVersion. Both
    // leader-elected services stop through LeaderElector.release (this test is in each).
    const cluster = new MemoryCluster();
    const faults = leaseFaults(cluster.leases);
    const service = await startNodeCleanup(
      {
        settings: SETTINGS,
        listenAddress: '',
        metricsPath: '/metrics',
        identity: 'replica-a',
        leaderElection: {
          name: 'node-cleanup',
          namespace: 'default',
          timing: { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 50 },
        },
      },
      { cluster: withLeases(cluster, faults.client), clock: systemClock, logger: silentLogger },
    );
    const holder = await holderAfterStopWithRenewInFlight(cluster, faults, 'node-cleanup', 'replica-a', service);
    assert.equal(holder, '', 'released on stop');
  });
});
