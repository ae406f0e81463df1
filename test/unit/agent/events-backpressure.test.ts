// The real agent against a cluster whose event writes hang: its Warning events (a directory that
// is not a mount point, every pass) stay queued within the bound, and stop() returns in a few
// seconds (the flush deadline) instead of waiting for the apiserver forever.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Agent } from '../../../src/core/agent/agent.js';
import { MemoryCleaner } from '../../../src/core/cleanup/cleaner.js';
import { systemClock } from '../../../src/core/clock.js';
import type { Cluster } from '../../../src/core/kube/cluster.js';
import { MemoryCluster } from '../../../src/core/kube/memory/memory-cluster.js';
import type { CoreEvent } from '../../../src/core/kube/objects.js';
import { MemoryLogger } from '../../../src/core/log.js';
import { MemoryVolumes } from '../../../src/core/node/memory-volumes.js';
import { writeConfigMapVolume } from '../../support/configmap-volume.js';
import { waitFor } from '../../support/eventually.js';

describe('agent stop() while the apiserver hangs on event writes', () => {
  let root = '';
  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'lvp-events-'));
  });
  after(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it('returns within the flush deadline and counts the events it dropped', async () => {
    const dir = join(root, 'config');
    await writeConfigMapVolume(dir, { storageClassMap: 'fast:\n  hostDir: /mnt/fast\n  mountDir: /mnt/fast\n' });
    const memory = new MemoryCluster();
    await memory.storageClasses.create({ metadata: { name: 'fast' }, provisioner: 'kubernetes.io/no-provisioner' });
    await memory.nodes.create({ metadata: { name: 'node-a', labels: { 'kubernetes.io/hostname': 'node-a' } } });
    const attempts: string[] = [];
    const cluster: Cluster = {
      persistentVolumes: memory.persistentVolumes,
      storageClasses: memory.storageClasses,
      nodes: memory.nodes,
      jobs: memory.jobs,
      configMaps: memory.configMaps,
      events: {
        ...memory.events,
        create: (event: CoreEvent) => {
          attempts.push(event.reason);
          return new Promise<CoreEvent>(() => undefined);
        },
      },
    };
    const volumes = new MemoryVolumes();
    volumes.addDirectory('/mnt/fast');
    volumes.addMount('/mnt/fast/disk1');
    for (let i = 0; i < 5; i++) volumes.addDirectory(`/mnt/fast/not-mounted-${i}`);
    const agent = await Agent.start(
      {
        configPath: dir,
        nodeName: 'node-a',
        namespace: 'default',
        listenAddress: '127.0.0.1:0',
        metricsPath: '/metrics',
        discoveryPeriodMs: 50,
        changePollMs: 20,
        // The not-mounted entries are reported at once: their Events are what backs up.
        mountGraceMs: 0,
        createConcurrency: 4,
        cleanupConcurrency: 2,
        jobImage: 'img',
        startTimeoutMs: 2000,
      },
      { cluster, volumes, cleaner: new MemoryCleaner(), clock: systemClock, logger: new MemoryLogger() },
    );
    await agent.generation.whenReady;
    await waitFor(() => attempts.length > 0, 'an event write was attempted');
    const started = Date.now();
    await agent.stop();
    const took = Date.now() - started;
    assert.ok(took < 8_000, `stop() returned after ${took} ms (flush deadline 5 s)`);
    assert.deepEqual(attempts, ['VolumeDiscoverySkipped'], 'one write in flight, the others queued');
    const metrics = agent['metrics'].registry.render();
    assert.match(metrics, /^local_volume_provisioner_events_dropped_total [1-9]\d*$/mu, 'the queued ones dropped');
  });
});
