// The reload state machine against the in-memory cluster and node, with configs written the way
// kubelet writes ConfigMap volumes.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Agent } from '../../../src/core/agent/agent.js';
import type { AgentOptions } from '../../../src/core/agent/agent.js';
import { MemoryCleaner } from '../../../src/core/cleanup/cleaner.js';
import { systemClock } from '../../../src/core/clock.js';
import { KubeApiError } from '../../../src/core/kube/cluster.js';
import type { Cluster } from '../../../src/core/kube/cluster.js';
import { MemoryCluster } from '../../../src/core/kube/memory/memory-cluster.js';
import { MemoryLogger } from '../../../src/core/log.js';
import { MemoryVolumes } from '../../../src/core/node/memory-volumes.js';
import { publishAgentState } from '../../../src/core/fleet/agent-state.js';
import { persistentVolumeName } from '../../../src/core/pv/naming.js';
import { writeConfigMapVolume } from '../../support/configmap-volume.js';
import { waitFor } from '../../support/eventually.js';

/** Resolves once `n` discovery passes finished after the call (the agent's own pass events). */
function passesAfter(agent: Agent, n: number): Promise<void> {
  return new Promise((resolve) => {
    let seen = 0;
    const unsubscribe = agent.subscribe((event) => {
      if (event.type !== 'pass' || ++seen < n) return;
      unsubscribe();
      resolve();
    });
  });
}

const CLASS = (extra = ''): string => `fast:\n  hostDir: /mnt/fast\n  mountDir: /mnt/fast\n${extra}`;

describe('config reload', () => {
  let root = '';
  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'lvp-reload-'));
  });
  after(async () => {
    await rm(root, { recursive: true, force: true });
  });

  interface StartOptions {
    wrap?: (m: MemoryCluster) => Cluster;
    startTimeoutMs?: number;
    /** The ConfigMap's keys (default: the class `fast`). */
    config?: Readonly<Record<string, string>>;
    reloadGuard?: AgentOptions['reloadGuard'];
    watch?: boolean;
    /** Reuse the config directory of an earlier start (a restart). */
    keepConfig?: boolean;
  }

  async function start(name: string, options: StartOptions = {}) {
    const dir = join(root, name);
    if (options.keepConfig !== true) await writeConfigMapVolume(dir, options.config ?? { storageClassMap: CLASS() });
    const memory = new MemoryCluster();
    const cluster = options.wrap ? options.wrap(memory) : memory;
    for (const sc of ['fast', 'slow'])
      await memory.storageClasses.create({ metadata: { name: sc }, provisioner: 'kubernetes.io/no-provisioner' });
    await memory.nodes.create({ metadata: { name: 'node-a', labels: { 'kubernetes.io/hostname': 'node-a' } } });
    const volumes = new MemoryVolumes();
    volumes.addDirectory('/mnt/fast');
    volumes.addMount('/mnt/fast/disk1');
    volumes.addDirectory('/mnt/slow');
    volumes.addMount('/mnt/slow/hdd1');
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
        ...(options.reloadGuard !== undefined ? { reloadGuard: options.reloadGuard } : {}),
        ...(options.watch === true ? { watch: { pollIntervalMs: 40, debounceMs: 10 } } : {}),
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
      configMaps: memory.configMaps,
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

  describe('the reload guard', () => {
    const TWO = { storageClassMap: `${CLASS()}slow:\n  hostDir: /mnt/slow\n  mountDir: /mnt/slow\n` };
    const metric = (agent: Agent, series: string): string | undefined =>
      new RegExp(`^${series.replace(/[{}]/gu, '\\$&')} (\\S+)$`, 'mu').exec(agent['metrics'].registry.render())?.[1];
    const refusedEvents = async (memory: MemoryCluster) =>
      (await memory.events.list({ namespace: 'default' })).items.filter(
        (e) => e.reason === 'ConfigRefused' && e.involvedObject.kind === 'Node',
      );

    it('refuses a watched change that orphans PVs: running config stays, reason, one Node event, metric, status; --allow applies it', async () => {
      const t = await start('guard-refuse', { config: TWO, watch: true });
      try {
        await waitFor(() => t.agent.generation.persistentVolumes.list().length === 2, 'both classes published');
        const before = t.agent.status().config.appliedHash;
        await writeConfigMapVolume(t.dir, { storageClassMap: CLASS() });
        await waitFor(() => t.agent.status().lastReload?.outcome === 'refused', 'the watcher-triggered reload refused');
        const status = t.agent.status();
        const refused = status.rejected;
        assert.equal(refused?.outcome, 'refused');
        assert.ok(refused.trigger === 'fs' || refused.trigger === 'poll', refused.trigger);
        assert.equal(status.generation, 1, 'no new generation');
        assert.equal(status.config.appliedHash, before);
        assert.equal(refused.candidateHash, status.config.onDiskHash, 'status shows the refused candidate');
        assert.deepEqual(refused.needsAllow, ['orphans-pvs']);
        assert.match(refused.error ?? '', /would orphan existing PVs \(storageClassMap\.slow\)/u);
        assert.match(refused.error ?? '', /provisioner reload --allow orphans-pvs/u);
        assert.ok(t.agent.appliedConfig().config.storageClassMap['slow'], 'the running config keeps the class');
        assert.equal(metric(t.agent, 'local_volume_provisioner_config_reloads_total{result="refused"}'), '1');
        assert.equal(metric(t.agent, 'local_volume_provisioner_config_reload_refused'), '1');
        assert.equal(metric(t.agent, 'local_volume_provisioner_config_last_reload_successful'), '0');
        await waitFor(async () => (await refusedEvents(t.memory)).length === 1, 'a ConfigRefused event on the Node');

        // The watcher does not retry the same content: five of its polls later, still one attempt.
        const polls = (): number => t.agent['watcher']?.stats.polls ?? 0;
        const from = polls();
        await waitFor(() => polls() >= from + 5, 'five more polls of the config watcher');
        assert.equal(metric(t.agent, 'local_volume_provisioner_config_reloads_total{result="refused"}'), '1');
        // SIGHUP and `reload` without --allow are live reloads too: refused, but no second event.
        assert.equal((await t.agent.reload({ trigger: 'signal' })).outcome, 'refused');
        const plain = await t.agent.reload({ trigger: 'admin', force: true });
        assert.equal(plain.outcome, 'refused', 'force is not allow');
        assert.equal(metric(t.agent, 'local_volume_provisioner_config_reloads_total{result="refused"}'), '3');
        assert.equal(
          t.logger.records.filter((r) => r.message.startsWith('config refused') && r.level === 'warn').length,
          1,
          'warned once per refused content',
        );
        await t.agent['events'].flush();
        assert.equal((await refusedEvents(t.memory)).length, 1, 'one Node event per refused content');

        const allowed = await t.agent.reload({ trigger: 'admin', allow: ['orphans-pvs'] });
        assert.equal(allowed.outcome, 'applied');
        assert.equal(allowed.generation, 2);
        assert.equal(t.agent.appliedConfig().config.storageClassMap['slow'], undefined);
        assert.equal(t.agent.status().rejected, undefined);
        assert.equal(metric(t.agent, 'local_volume_provisioner_config_reload_refused'), '0');
        // The orphaned PV is left alone, never deleted.
        await t.memory.persistentVolumes.get(persistentVolumeName('hdd1', 'node-a', 'slow'));
      } finally {
        await t.agent.stop();
      }
    });

    it('a restart applies what a live reload refused (start-up is not guarded)', async () => {
      const t = await start('guard-restart', { config: TWO });
      await writeConfigMapVolume(t.dir, { storageClassMap: CLASS() });
      const r = await t.agent.reload({ trigger: 'signal' });
      await t.agent.stop();
      assert.equal(r.outcome, 'refused');
      const again = await start('guard-restart', { keepConfig: true });
      try {
        assert.equal(again.agent.status().config.appliedHash, r.candidateHash);
        assert.equal(again.agent.appliedConfig().config.storageClassMap['slow'], undefined);
      } finally {
        await again.agent.stop();
      }
    });

    it('an ownership change is refused too; allowing only orphans-pvs is not enough', async () => {
      const t = await start('guard-owner');
      try {
        await writeConfigMapVolume(t.dir, { storageClassMap: CLASS(), useNodeNameOnly: 'true' });
        const r = await t.agent.reload({ trigger: 'admin', allow: ['orphans-pvs'] });
        assert.equal(r.outcome, 'refused');
        assert.deepEqual(r.needsAllow, ['ownership-change']);
        assert.equal((await t.agent.reload({ trigger: 'admin', allow: ['ownership-change'] })).outcome, 'applied');
      } finally {
        await t.agent.stop();
      }
    });

    it('policy warn applies with a warning and a Warning event; policy apply applies', async () => {
      const w = await start('guard-warn', { config: TWO, reloadGuard: 'warn' });
      try {
        await writeConfigMapVolume(w.dir, { storageClassMap: CLASS() });
        const r = await w.agent.reload({ trigger: 'fs' });
        assert.equal(r.outcome, 'applied');
        assert.ok(
          r.issues.some(
            (i) => i.severity === 'warning' && i.path === 'storageClassMap.slow' && /orphans-pvs/u.test(i.message),
          ),
        );
        await waitFor(async () => {
          const events = await w.memory.events.list({ namespace: 'default' });
          return events.items.some((e) => e.reason === 'UnsafeConfigApplied' && e.type === 'Warning');
        }, 'an UnsafeConfigApplied Warning event');
      } finally {
        await w.agent.stop();
      }
      const a = await start('guard-apply', { config: TWO, reloadGuard: 'apply' });
      try {
        await writeConfigMapVolume(a.dir, { storageClassMap: CLASS() });
        const r = await a.agent.reload({ trigger: 'fs' });
        assert.equal(r.outcome, 'applied');
        assert.equal(r.issues.length, 0);
      } finally {
        await a.agent.stop();
      }
    });
  });

  it('leaks nothing over 200 reloads: watches, listeners and handles stay flat', async () => {
    const t = await start('leak');
    try {
      await t.agent.reload({ trigger: 'admin', force: true });
      const watchesBefore = t.memory.activeWatches;
      const handlesBefore = process.getActiveResourcesInfo().length;
      for (let i = 0; i < 200; i++) await t.agent.reload({ trigger: 'admin', force: true });
      assert.equal(t.agent.generation.number, 202);
      // The last stopped generation's watches and timers close as their requests end: flat within 3 s.
      await waitFor(
        () => t.memory.activeWatches === watchesBefore && process.getActiveResourcesInfo().length <= handlesBefore + 2,
        `watches back to ${String(watchesBefore)} and handles to at most ${String(handlesBefore + 2)}`,
      );
    } finally {
      await t.agent.stop();
    }
  });

  describe('errors since apply', () => {
    const ERRORS = 'local-static-provisioner/errors-since-apply';
    const BROKEN = { storageClassMap: `${CLASS()}slow:\n  hostDir: /mnt/missing\n  mountDir: /mnt/missing\n` };

    it('counts discovery and cleanup failures since the config applied, resets on an applied reload, and the Lease carries it', async () => {
      const t = await start('errors', { config: BROKEN });
      const publishing = publishAgentState(t.agent, {
        leases: t.memory.leases,
        target: { name: 'lvp-node-a', namespace: 'default', instance: 'lvp' },
        clock: systemClock,
        logger: t.logger,
      });
      const annotation = async (): Promise<string | undefined> =>
        (await t.memory.leases.get('lvp-node-a').catch(() => undefined))?.metadata.annotations?.[ERRORS];
      try {
        // The class whose discovery directory is missing: one DiscoveryFailed, not one per pass.
        await waitFor(() => t.agent.status().errorsSinceApply === 1, 'the discovery failure counted');
        await waitFor(async () => (await annotation()) === '1', 'the count published');
        // A reload that reads the same config (noop) keeps the count.
        assert.equal((await t.agent.reload({ trigger: 'admin' })).outcome, 'noop');
        assert.equal(t.agent.status().errorsSinceApply, 1);
        // Passes that report nothing new publish nothing: five passes started after the noop.
        await passesAfter(t.agent, 1);
        const writes = publishing.publisher.writes;
        await passesAfter(t.agent, 5);
        assert.equal(t.agent.status().errorsSinceApply, 1);
        assert.equal(publishing.publisher.writes, writes, 'passes with nothing new publish nothing');

        // Applied (the directory mounted, another fsType): the count starts again for the new config.
        t.volumes.addDirectory('/mnt/missing');
        await writeConfigMapVolume(t.dir, {
          storageClassMap: BROKEN.storageClassMap.replace(
            'mountDir: /mnt/fast\n',
            'mountDir: /mnt/fast\n  fsType: ext4\n',
          ),
        });
        assert.equal((await t.agent.reload({ trigger: 'admin' })).outcome, 'applied');
        assert.equal(t.agent.status().errorsSinceApply, 0);
        await waitFor(async () => (await annotation()) === undefined, 'the count cleared on the Lease');

        // A cleanup that fails counts, and is published without waiting for a heartbeat.
        t.cleaner.fail('/mnt/fast/disk1', 'disk on fire');
        const name = persistentVolumeName('disk1', 'node-a', 'fast');
        await waitFor(
          async () => (await t.memory.persistentVolumes.get(name).catch(() => undefined)) !== undefined,
          'the PV published',
        );
        const pv = await t.memory.persistentVolumes.get(name);
        await t.memory.persistentVolumes.updateStatus({ ...pv, status: { phase: 'Released' } });
        await waitFor(() => (t.agent.status().errorsSinceApply ?? 0) >= 1, 'the cleanup failure counted');
        await waitFor(async () => Number((await annotation()) ?? '0') >= 1, 'the cleanup failure published');
      } finally {
        await publishing.stop();
        await t.agent.stop();
      }
    });
  });
});
