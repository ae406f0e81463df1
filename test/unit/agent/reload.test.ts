// The reload state machine against the in-memory cluster and node, with configs written the way
// kubelet writes ConfigMap volumes.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { Agent } from '../../../src/core/agent/agent.js';
import { MemoryCleaner } from '../../../src/core/cleanup/cleaner.js';
import { systemClock } from '../../../src/core/clock.js';
import { KubeApiError } from '../../../src/core/kube/cluster.js';
import type { Cluster } from '../../../src/core/kube/cluster.js';
import { MemoryCluster } from '../../../src/core/kube/memory-cluster.js';
import { MemoryLogger } from '../../../src/core/log.js';
import { MemoryVolumes } from '../../../src/core/node/memory-volumes.js';
import { persistentVolumeName } from '../../../src/core/pv/naming.js';
import { writeConfigMapVolume } from '../../support/configmap-volume.js';
import { waitFor } from '../../support/eventually.js';

const CLASS = (extra = ''): string => `fast:\n  hostDir: /mnt/fast\n  mountDir: /mnt/fast\n${extra}`;

describe('config reload', () => {
  let root = '';
  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'lvp-reload-'));
  });
  after(async () => {
    await rm(root, { recursive: true, force: true });
  });

  async function start(name: string, options: { wrap?: (m: MemoryCluster) => Cluster; startTimeoutMs?: number } = {}) {
    const dir = join(root, name);
    await writeConfigMapVolume(dir, { storageClassMap: CLASS() });
    const memory = new MemoryCluster();
    const cluster = options.wrap ? options.wrap(memory) : memory;
    await memory.storageClasses.create({ metadata: { name: 'fast' }, provisioner: 'kubernetes.io/no-provisioner' });
    await memory.nodes.create({ metadata: { name: 'node-a', labels: { 'kubernetes.io/hostname': 'node-a' } } });
    const volumes = new MemoryVolumes();
    volumes.addDirectory('/mnt/fast');
    volumes.addMount('/mnt/fast/disk1');
    const cleaner = new MemoryCleaner();
    const logger = new MemoryLogger();
    const agent = await Agent.start(
      {
        configPath: dir,
        nodeName: 'node-a',
        namespace: 'default',
        listenAddress: '127.0.0.1:0',
        metricsPath: '/metrics',
        discoveryPeriodMs: 50,
        changePollMs: 20,
        createConcurrency: 4,
        cleanupConcurrency: 2,
        jobImage: 'img',
        startTimeoutMs: options.startTimeoutMs ?? 2000,
      },
      { cluster, volumes, cleaner, clock: systemClock, logger },
    );
    await agent.generation.whenReady;
    return { dir, memory, volumes, cleaner, logger, agent };
  }

  it('applies a changed config in a new generation and reports the changes', async () => {
    const t = await start('apply');
    try {
      await writeConfigMapVolume(t.dir, { storageClassMap: CLASS('  fsType: ext4\n') });
      const r = await t.agent.reload({ trigger: 'admin' });
      assert.equal(r.outcome, 'applied');
      assert.equal(r.generation, 2);
      assert.deepEqual(
        r.changes.map((c) => [c.path, c.impact]),
        [['storageClassMap.fast.fsType', 'new-pvs-only']],
      );
      assert.equal(t.agent.status().config.appliedHash, r.appliedHash);
      assert.equal(t.agent.appliedConfig().config.storageClassMap['fast']?.fsType, 'ext4');
      t.volumes.addMount('/mnt/fast/disk2');
      await waitFor(async () => {
        const pv = await t.memory.persistentVolumes
          .get(persistentVolumeName('disk2', 'node-a', 'fast'))
          .catch(() => undefined);
        return pv?.spec.local?.fsType === 'ext4';
      }, 'disk2 published with the new fsType');
      const old = await t.memory.persistentVolumes.get(persistentVolumeName('disk1', 'node-a', 'fast'));
      assert.equal(old.spec.local?.fsType, undefined, 'existing PVs are not rewritten');
      const metrics = t.agent['metrics'].registry.render();
      assert.match(metrics, /^local_volume_provisioner_config_generation 2$/mu);
      assert.match(metrics, /^local_volume_provisioner_config_reloads_total\{result="applied"\} 1$/mu);
      assert.match(metrics, /^local_volume_provisioner_config_last_reload_successful 1$/mu);
    } finally {
      await t.agent.stop();
    }
  });

  it('an unchanged config (even rewritten) is a no-op; --force restarts the loop anyway', async () => {
    const t = await start('noop');
    try {
      await writeConfigMapVolume(t.dir, { storageClassMap: `# reformatted\n${CLASS()}` });
      const r = await t.agent.reload({ trigger: 'fs' });
      assert.equal(r.outcome, 'noop');
      assert.equal(r.generation, 1);
      const forced = await t.agent.reload({ trigger: 'admin', force: true });
      assert.equal(forced.outcome, 'applied');
      assert.equal(forced.generation, 2);
      assert.equal(forced.forced, true);
    } finally {
      await t.agent.stop();
    }
  });

  it('rejects an invalid config, keeps the running generation serving, and recovers on the next valid one', async () => {
    const t = await start('reject');
    try {
      await writeConfigMapVolume(t.dir, { storageClassMap: `${CLASS()}  namePattern: *\n` });
      const r = await t.agent.reload({ trigger: 'fs' });
      assert.equal(r.outcome, 'rejected');
      assert.equal(r.generation, 1);
      assert.ok(r.issues.some((i) => i.severity === 'error' && i.message.includes('quote it')));
      const status = t.agent.status();
      assert.equal(status.rejected?.outcome, 'rejected');
      assert.equal(status.config.onDiskHash, undefined);
      // The old generation still works: a new disk is published under the old config.
      t.volumes.addMount('/mnt/fast/disk3');
      await waitFor(
        async () =>
          (await t.memory.persistentVolumes
            .get(persistentVolumeName('disk3', 'node-a', 'fast'))
            .catch(() => undefined)) !== undefined,
        'disk3 published',
      );
      assert.equal(t.agent.readiness().ok, true);
      await waitFor(async () => {
        const events = await t.memory.events.list({ namespace: 'default' });
        return events.items.some((e) => e.reason === 'ConfigRejected' && e.involvedObject.kind === 'Node');
      }, 'a ConfigRejected event on the Node');
      assert.match(
        t.agent['metrics'].registry.render(),
        /^local_volume_provisioner_config_last_reload_successful 0$/mu,
      );
      await writeConfigMapVolume(t.dir, { storageClassMap: CLASS('  fsType: xfs\n') });
      const ok = await t.agent.reload({ trigger: 'fs' });
      assert.equal(ok.outcome, 'applied');
      assert.equal(t.agent.status().rejected, undefined);
    } finally {
      await t.agent.stop();
    }
  });

  it('rejects an alias to no anchor (namePattern: *disk), which used to read as "not set" and apply as a no-op', async () => {
    const t = await start('alias');
    try {
      await writeConfigMapVolume(t.dir, { storageClassMap: `${CLASS()}  namePattern: *disk\n  fsType: *xfs\n` });
      const r = await t.agent.reload({ trigger: 'fs' });
      assert.equal(r.outcome, 'rejected');
      assert.equal(r.generation, 1);
      assert.deepEqual(
        r.issues.filter((i) => i.severity === 'error').map((i) => [i.path, i.position?.line]),
        [
          ['storageClassMap.fast.namePattern', 4],
          ['storageClassMap.fast.fsType', 5],
        ],
      );
      assert.equal(t.agent.appliedConfig().config.storageClassMap['fast']?.namePattern, '*');
      assert.equal(t.agent.readiness().ok, true);
    } finally {
      await t.agent.stop();
    }
  });

  it('coalesces a burst of requests into at most one pending reload that sees the latest content', async () => {
    const t = await start('burst');
    try {
      await writeConfigMapVolume(t.dir, { storageClassMap: CLASS('  fsType: fs1\n') });
      const results = Array.from({ length: 10 }, () => t.agent.reload({ trigger: 'fs' }));
      assert.equal(t.agent.status().reloadPending, true);
      // More content lands meanwhile and the watcher asks again: it joins the pending reload or follows it.
      await writeConfigMapVolume(t.dir, { storageClassMap: CLASS('  fsType: fs9\n') });
      results.push(t.agent.reload({ trigger: 'fs' }));
      const settled = await Promise.all(results);
      const generations = new Set(settled.map((r) => r.generation));
      assert.ok(generations.size <= 3, `eleven requests, at most three reloads: ${[...generations].join(',')}`);
      assert.ok(t.agent.generation.number <= 4);
      assert.equal(t.agent.appliedConfig().config.storageClassMap['fast']?.fsType, 'fs9', 'the latest content wins');
    } finally {
      await t.agent.stop();
    }
  });

  it('rolls back to the last good config when the new generation cannot start', async () => {
    // A service account without Jobs RBAC: listing Jobs is forbidden.
    const forbiddenJobs = (memory: MemoryCluster): Cluster => ({
      persistentVolumes: memory.persistentVolumes,
      storageClasses: memory.storageClasses,
      nodes: memory.nodes,
      events: memory.events,
      jobs: {
        ...memory.jobs,
        list: () =>
          Promise.reject(
            new KubeApiError(
              403,
              'Forbidden',
              'jobs.batch is forbidden: User "system:serviceaccount:x:y" cannot list resource "jobs"',
            ),
          ),
      },
    });
    const t = await start('rollback', { wrap: forbiddenJobs, startTimeoutMs: 400 });
    try {
      await writeConfigMapVolume(t.dir, { storageClassMap: CLASS(), useJobForCleaning: 'yes' });
      const r = await t.agent.reload({ trigger: 'fs' });
      assert.equal(r.outcome, 'rolled-back');
      assert.match(r.error ?? '', /jobs: .*forbidden/u);
      assert.equal(t.agent.appliedConfig().config.useJobForCleaning, false);
      assert.equal(r.generation, 3, 'generation 2 failed, generation 3 runs the old config');
      await t.agent.generation.whenReady;
      assert.equal(t.agent.readiness().ok, true);
    } finally {
      await t.agent.stop();
    }
  });

  it('keeps process-level state: a cleanup in flight survives the reload and is not repeated', async () => {
    const t = await start('inflight');
    try {
      const name = persistentVolumeName('disk1', 'node-a', 'fast');
      let finish = (): void => undefined;
      t.cleaner.hold('/mnt/fast/disk1', new Promise((r) => (finish = r)));
      const pv = await t.memory.persistentVolumes.get(name);
      await t.memory.persistentVolumes.updateStatus({ ...pv, status: { phase: 'Released' } });
      await waitFor(() => t.agent.cleanups.get(name)?.state === 'running', 'cleanup running');
      await writeConfigMapVolume(t.dir, { storageClassMap: CLASS('  fsType: ext4\n') });
      assert.equal((await t.agent.reload({ trigger: 'fs' })).outcome, 'applied');
      assert.equal(t.agent.cleanups.get(name)?.state, 'running', 'still running in generation 2');
      finish();
      await waitFor(
        async () => (await t.memory.persistentVolumes.get(name)).metadata.deletionTimestamp !== undefined,
        'PV deleted after the cleanup',
      );
      assert.equal(t.cleaner.calls.length, 1);
    } finally {
      await t.agent.stop();
    }
  });

  it('leaks nothing over 200 reloads: watches, listeners and handles stay flat', async () => {
    const t = await start('leak');
    try {
      await t.agent.reload({ trigger: 'admin', force: true });
      const watchesBefore = t.memory.activeWatches;
      const handlesBefore = process.getActiveResourcesInfo().length;
      for (let i = 0; i < 200; i++) await t.agent.reload({ trigger: 'admin', force: true });
      await delay(50);
      assert.equal(t.agent.generation.number, 202);
      assert.equal(t.memory.activeWatches, watchesBefore);
      const handlesAfter = process.getActiveResourcesInfo().length;
      assert.ok(handlesAfter <= handlesBefore + 2, `handles ${String(handlesBefore)} → ${String(handlesAfter)}`);
    } finally {
      await t.agent.stop();
    }
  });
});
