import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { systemClock } from '../../../src/core/clock.js';
import { MemoryCluster } from '../../../src/core/kube/memory/memory-cluster.js';
import { silentLogger } from '../../../src/core/log.js';
import { policyFromFlags } from '../../../src/core/staged-rollout/policy.js';
import { startRolloutController } from '../../../src/core/staged-rollout/service.js';
import { eventually } from '../../support/eventually.js';
import { holderAfterStopWithRenewInFlight, leaseFaults, withLeases } from '../../support/lease-faults.js';

const SETTINGS = {
  namespace: 'default',
  name: 'lvp-config',
  instance: 'lvp',
  policy: policyFromFlags({}),
  resyncMs: 0,
};

describe('staged rollout controller service: metrics server and leader lease', () => {
  it('adopts the ConfigMap as the leader, serves the rollout metrics; stopping releases the lease', async () => {
    const cluster = new MemoryCluster();
    await cluster.configMaps.create({
      metadata: { name: 'lvp-config', namespace: 'default' },
      data: { storageClassMap: 'local:\n  hostDir: /mnt/disks\n  mountDir: /mnt/disks\n' },
    });
    const service = await startRolloutController(
      {
        settings: SETTINGS,
        listenAddress: '127.0.0.1:0',
        metricsPath: '/metrics',
        identity: 'replica-a',
        leaderElection: {
          name: 'rollout-controller',
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
        return /^local_volume_rollout_phase\{phase="complete"\} 1$/mu.test(body) ? body : undefined;
      }, 'the adopted rollout in the phase gauge');
      assert.match(text, /^local_volume_rollout_leader 1$/mu);
      for (const name of ['local_volume_rollout_halts_total', 'local_volume_rollout_completed_total'])
        assert.match(text, new RegExp(`^# TYPE ${name} counter$`, 'mu'));
      for (const name of [
        'local_volume_rollout_waves',
        'local_volume_rollout_waves_opened',
        'local_volume_rollout_nodes',
      ])
        assert.match(text, new RegExp(`^# TYPE ${name} gauge$`, 'mu'));
      const stable = await cluster.configMaps.get('lvp-config-stable', { namespace: 'default' });
      assert.equal(stable.data?.['storageClassMap']?.includes('/mnt/disks'), true);
      assert.equal((await cluster.leases.get('rollout-controller')).spec?.holderIdentity, 'replica-a');
      const events = await eventually(async () => {
        const list = await cluster.events.list({ namespace: 'default' });
        return list.items.length > 0 ? list.items : undefined;
      }, 'the adoption Event');
      assert.equal(events[0]?.source?.component, 'local-volume-rollout-controller');
      assert.equal(events[0].involvedObject.name, 'lvp-config');
    } finally {
      await service.stop();
    }
    assert.equal((await cluster.leases.get('rollout-controller')).spec?.holderIdentity, '', 'released on stop');
    assert.equal(service.metrics.leader.get(), 0);
  });

  it('a stop while a renew’s answer is on its way still releases the lease (the elector’s release path)', async () => {
    // The stop abandons the renew in flight; its write already moved the resourceVersion. Both
    // leader-elected services stop through LeaderElector.release (this test is in each).
    const cluster = new MemoryCluster();
    await cluster.configMaps.create({
      metadata: { name: 'lvp-config', namespace: 'default' },
      data: { storageClassMap: 'local:\n  hostDir: /mnt/disks\n  mountDir: /mnt/disks\n' },
    });
    const faults = leaseFaults(cluster.leases);
    const service = await startRolloutController(
      {
        settings: SETTINGS,
        listenAddress: '',
        metricsPath: '/metrics',
        identity: 'replica-a',
        leaderElection: {
          name: 'rollout-controller',
          namespace: 'default',
          timing: { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 50 },
        },
      },
      { cluster: withLeases(cluster, faults.client), clock: systemClock, logger: silentLogger },
    );
    const holder = await holderAfterStopWithRenewInFlight(cluster, faults, 'rollout-controller', 'replica-a', service);
    assert.equal(holder, '', 'released on stop');
  });
});
