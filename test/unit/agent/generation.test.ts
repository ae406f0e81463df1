// The sync loop against the in-memory cluster and node: publishing, scope, change detection,
// adoption, startup taint, events, and a clean stop.
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { describe, it } from 'node:test';
import { adoptNodeVolumes } from '../../../src/core/agent/adoption.js';
import { EARLY_WATCH_ENTRIES, Generation, nodeIdentity } from '../../../src/core/agent/generation.js';
import { ManualClock, systemClock, type Clock } from '../../../src/core/clock.js';
import { parseConfigSnapshot } from '../../../src/core/config/decode/parse.js';
import { snapshotFromFileText } from '../../../src/core/config/decode/layout.js';
import type { LoadedConfig } from '../../../src/core/config/source/port.js';
import { EventRecorder } from '../../../src/core/kube/events.js';
import { MemoryCleaner } from '../../../src/core/cleanup/cleaner.js';
import { CleanupTable } from '../../../src/core/cleanup/table.js';
import { KubeApiError, type Cluster } from '../../../src/core/kube/cluster.js';
import { MemoryCluster } from '../../../src/core/kube/memory/memory-cluster.js';
import type { Node, PersistentVolume } from '../../../src/core/kube/objects.js';
import { MemoryLogger } from '../../../src/core/log.js';
import { createAgentMetrics } from '../../../src/core/metrics/agent-metrics.js';
import { MemoryVolumes } from '../../../src/core/node/memory-volumes.js';
import { IDENTITY_ANNOTATION } from '../../../src/core/pv/identity.js';
import { NODE_LABEL, persistentVolumeName } from '../../../src/core/pv/naming.js';
import { waitFor } from '../../support/eventually.js';

const GiB = 2 ** 30;
const UUID_BACK = '77aa0d3e-5b1f-4f0c-8a3e-9e2b6c4d5f02';

function load(text: string): LoadedConfig {
  return parseConfigSnapshot(snapshotFromFileText('c.yaml', text));
}

async function setup(
  configText = 'storageClassMap:\n  fast:\n    hostDir: /mnt/fast\n    mountDir: /mnt/fast\n',
  node?: Partial<Node['metadata']> & { taints?: NonNullable<Node['spec']>['taints'] },
) {
  const cluster = new MemoryCluster();
  await cluster.storageClasses.create({
    metadata: { name: 'fast' },
    provisioner: 'kubernetes.io/no-provisioner',
    reclaimPolicy: 'Delete',
  });
  const nodeObject = await cluster.nodes.create({
    metadata: { name: 'node-a', labels: { 'kubernetes.io/hostname': 'node-a-host', ...node?.labels } },
    ...(node?.taints ? { spec: { taints: node.taints } } : {}),
  });
  const volumes = new MemoryVolumes();
  volumes.addDirectory('/mnt/fast');
  volumes.addMount('/mnt/fast/disk1', { capacity: 20 * GiB });
  const logger = new MemoryLogger();
  const metrics = createAgentMetrics();
  const events = new EventRecorder({ cluster, clock: systemClock, logger, component: 'test', host: 'node-a' });
  const loaded = load(configText);
  const cleaner = new MemoryCleaner();
  const table = new CleanupTable({ cleaner, clock: systemClock, logger, concurrency: 2 });
  const start = (
    settings: {
      discoveryPeriodMs?: number;
      changePollMs?: number;
      mountGraceMs?: number;
      minPassIntervalMs?: number;
      clock?: Clock;
    } = {},
  ): Generation => {
    const g = new Generation(
      1,
      loaded.config,
      loaded.hash,
      nodeIdentity(nodeObject),
      { cluster, volumes, clock: settings.clock ?? systemClock, logger, metrics, events, table },
      {
        discoveryPeriodMs: settings.discoveryPeriodMs ?? 3_600_000,
        changePollMs: settings.changePollMs ?? 0,
        mountGraceMs: settings.mountGraceMs ?? 0,
        minPassIntervalMs: settings.minPassIntervalMs ?? 0,
        createConcurrency: 4,
        namespace: 'default',
        jobImage: undefined,
      },
    );
    g.start();
    return g;
  };
  return { cluster, volumes, logger, metrics, events, start, nodeObject };
}

describe('a sync-loop generation', () => {
  it('publishes the volumes it finds, labelled for this node, and becomes ready', async () => {
    const t = await setup();
    const g = t.start();
    try {
      await g.whenReady;
      const pv = await t.cluster.persistentVolumes.get(persistentVolumeName('disk1', 'node-a', 'fast'));
      assert.equal(pv.spec.local?.path, '/mnt/fast/disk1');
      assert.equal(pv.spec.capacity?.['storage'], '20Gi');
      assert.equal(pv.metadata.labels?.[NODE_LABEL], 'node-a');
      assert.deepEqual(pv.spec.nodeAffinity?.required?.nodeSelectorTerms[0]?.matchExpressions?.[0]?.values, [
        'node-a-host',
      ]);
      const s = g.status();
      assert.equal(s.ready, true);
      assert.deepEqual(s.lastPass?.created, [pv.metadata.name]);
      assert.equal(t.metrics.discoveryTotal.get({ mode: 'Filesystem' }), 1);
    } finally {
      await g.stop();
    }
  });

  it('publishes a new mount at once through change events, not after the discovery period or a poll', async () => {
    const t = await setup();
    // Neither the discovery period nor the fallback poll comes round within the test's 3 s wait.
    const g = t.start({ changePollMs: 3_600_000 });
    try {
      await g.whenReady;
      t.volumes.addMount('/mnt/fast/disk2', { capacity: 11 * GiB });
      const name = persistentVolumeName('disk2', 'node-a', 'fast');
      await waitFor(
        async () => (await t.cluster.persistentVolumes.list()).items.some((p) => p.metadata.name === name),
        'disk2 published',
      );
    } finally {
      await g.stop();
    }
  });

  it('falls back to polling, with a warning naming the reason, when the node cannot report changes', async () => {
    const t = await setup();
    const unavailable = Promise.resolve({ ok: false as const, reason: 'findmnt: not found' });
    t.volumes.watchChanges = () => ({ ready: unavailable, done: unavailable });
    const g = t.start({ changePollMs: 20 });
    try {
      await g.whenReady;
      t.volumes.addMount('/mnt/fast/disk3', { capacity: 11 * GiB });
      const name = persistentVolumeName('disk3', 'node-a', 'fast');
      await waitFor(
        async () => (await t.cluster.persistentVolumes.list()).items.some((p) => p.metadata.name === name),
        'disk3 published by the poll',
      );
      const warning = t.logger.records.find((r) => r.message.includes('polling for changes'));
      assert.equal(warning?.level, 'warn');
      assert.equal(warning.fields['reason'], 'findmnt: not found');
    } finally {
      await g.stop();
    }
  });

  it('adopts a PV of this node that appears unlabelled after start instead of failing every pass (upstream #209)', async () => {
    const t = await setup();
    const uid = t.nodeObject.metadata.uid ?? '';
    const name = persistentVolumeName('late', 'node-a', 'fast');
    // Created by an upstream agent, unlabelled, after this agent's start-up scan.
    const g = t.start({ discoveryPeriodMs: 20 });
    try {
      await g.whenReady;
      await t.cluster.persistentVolumes.create({
        metadata: {
          name,
          annotations: { 'pv.kubernetes.io/provisioned-by': `local-volume-provisioner-node-a-${uid}` },
        },
        spec: {
          capacity: { storage: '1Gi' },
          accessModes: ['ReadWriteOnce'],
          storageClassName: 'fast',
          local: { path: '/mnt/fast/late-elsewhere' },
          nodeAffinity: {
            required: {
              nodeSelectorTerms: [
                { matchExpressions: [{ key: 'kubernetes.io/hostname', operator: 'In', values: ['node-a-host'] }] },
              ],
            },
          },
        },
      });
      t.volumes.addMount('/mnt/fast/late', { capacity: 11 * GiB });
      await waitFor(() => g.persistentVolumes.get(name) !== undefined, 'the late PV adopted into the cache');
      assert.equal((await t.cluster.persistentVolumes.get(name)).metadata.labels?.[NODE_LABEL], 'node-a');
      await waitFor(() => g.status().passes >= 3, 'more passes');
      assert.deepEqual(g.status().lastPass?.failed, [], 'no AlreadyExists failure left');
    } finally {
      await g.stop();
    }
  });

  it(`with more than ${String(EARLY_WATCH_ENTRIES)} entries, starts the change watch while the first pass runs (one mount table for the rest of it)`, async () => {
    const t = await setup();
    for (let i = 2; i <= EARLY_WATCH_ENTRIES + 1; i++) t.volumes.addMount(`/mnt/fast/disk${String(i)}`);
    const watchChanges = t.volumes.watchChanges.bind(t.volumes);
    const volumeIdentity = t.volumes.volumeIdentity.bind(t.volumes);
    let watchStarted = (): void => undefined;
    const started = new Promise<void>((resolve) => (watchStarted = resolve));
    let passedBeforeWatch: boolean | undefined;
    const g: Generation = t.start({ changePollMs: 3_600_000 });
    t.volumes.watchChanges = (options) => {
      passedBeforeWatch = g.status().lastPass !== undefined;
      watchStarted();
      return watchChanges(options);
    };
    // The first pass's identities wait for the watch (2 s at most: then the test fails, not hangs).
    t.volumes.volumeIdentity = async (path) => {
      await Promise.race([started, delay(2000)]);
      return volumeIdentity(path);
    };
    try {
      await g.whenReady;
      assert.equal(passedBeforeWatch, false, 'the watch started before the first pass ended');
      assert.equal(g.status().lastPass?.created.length, EARLY_WATCH_ENTRIES + 1);
    } finally {
      await g.stop();
    }
  });

  it('starts the change watch after the first pass; its ready triggers a pass that covers a mount made before it', async () => {
    const t = await setup();
    const watchChanges = t.volumes.watchChanges.bind(t.volumes);
    let passedBeforeWatch: boolean | undefined;
    let readyNow: (() => void) | undefined;
    const g: Generation = t.start({ changePollMs: 3_600_000 });
    t.volumes.watchChanges = (options) => {
      passedBeforeWatch = g.status().lastPass !== undefined;
      const watch = watchChanges(options);
      // Ready only once the test made its mount: the watch could not have reported it.
      const ready = new Promise<Awaited<typeof watch.ready>>((resolve) => {
        readyNow = () => {
          void watch.ready.then(resolve);
        };
      });
      return { ready, done: watch.done };
    };
    try {
      await g.whenReady;
      await waitFor(() => readyNow !== undefined, 'the watch started');
      assert.equal(passedBeforeWatch, true, 'the first pass ran before the watch started');
      t.volumes.addMount('/mnt/fast/disk2', { capacity: 11 * GiB });
      readyNow?.();
      const name = persistentVolumeName('disk2', 'node-a', 'fast');
      await waitFor(
        async () => (await t.cluster.persistentVolumes.list()).items.some((p) => p.metadata.name === name),
        'disk2 published by the pass the ready triggered',
      );
    } finally {
      await g.stop();
    }
  });

  it('the polling fallback’s first listing triggers a pass: a mount made before the polling began is published', async () => {
    const t = await setup();
    let unavailableNow: (() => void) | undefined;
    const unavailable = new Promise<{ ok: false; reason: string }>((resolve) => {
      unavailableNow = () => {
        resolve({ ok: false, reason: 'findmnt: not found' });
      };
    });
    t.volumes.watchChanges = () => ({ ready: unavailable, done: unavailable });
    const g = t.start({ changePollMs: 20 });
    try {
      await g.whenReady;
      t.volumes.addMount('/mnt/fast/disk3', { capacity: 11 * GiB });
      unavailableNow?.(); // the polling starts now, its first listing already holding disk3
      const name = persistentVolumeName('disk3', 'node-a', 'fast');
      await waitFor(
        async () => (await t.cluster.persistentVolumes.list()).items.some((p) => p.metadata.name === name),
        'disk3 published',
      );
    } finally {
      await g.stop();
    }
  });

  it("caches only this node's PVs", async () => {
    const t = await setup();
    const other: PersistentVolume = {
      metadata: { name: 'other-node-pv', labels: { [NODE_LABEL]: 'node-b' } },
      spec: {
        capacity: { storage: '1Gi' },
        accessModes: ['ReadWriteOnce'],
        local: { path: '/mnt/fast/disk1' },
        nodeAffinity: {
          required: {
            nodeSelectorTerms: [
              { matchExpressions: [{ key: 'kubernetes.io/hostname', operator: 'In', values: ['node-b'] }] },
            ],
          },
        },
      },
    };
    await t.cluster.persistentVolumes.create(other);
    const g = t.start();
    try {
      await g.whenReady;
      assert.equal(g.persistentVolumes.get('other-node-pv'), undefined);
      assert.equal(g.persistentVolumes.size, 1, 'only its own, just created');
    } finally {
      await g.stop();
    }
  });

  it('reports a skipped entry once (log, Node event, metric), not on every pass', async () => {
    const t = await setup();
    t.volumes.addDirectory('/mnt/fast/not-mounted');
    const g = t.start({ discoveryPeriodMs: 20 });
    try {
      await g.whenReady;
      await waitFor(() => g.status().passes >= 4, 'four passes');
      await t.events.flush();
      const events = (await t.cluster.events.list({ namespace: 'default' })).items.filter(
        (e) => e.reason === 'VolumeDiscoverySkipped',
      );
      assert.equal(events.length, 1);
      assert.equal(events[0]?.involvedObject.kind, 'Node');
      assert.match(
        events[0].message,
        /\/mnt\/fast\/not-mounted: path "\/mnt\/fast\/not-mounted" is not a valid mount point/u,
      );
      assert.equal(t.logger.messages('warn').filter((m) => m === 'discovery skipped an entry').length, 1);
      assert.equal(t.metrics.skippedEntries.get({ storageclass: 'fast', reason: 'not-a-mount-point' }), 1);
      assert.deepEqual(
        g.status().lastPass?.skipped.map((s) => s.reason),
        ['not-a-mount-point'],
      );
      assert.equal(g.status().ready, true, 'a bad entry does not make the agent unready');
    } finally {
      await g.stop();
    }
  });

  it('does not report an entry mounted within the mount grace period (mkdir, then mount)', async () => {
    const t = await setup();
    const clock = new ManualClock(1_000_000);
    const g = t.start({ mountGraceMs: 10_000, clock });
    try {
      await g.whenReady;
      t.volumes.addDirectory('/mnt/fast/new');
      g.trigger();
      await waitFor(
        () => g.status().lastPass?.skipped.some((s) => s.path === '/mnt/fast/new') === true,
        'a pass that saw the directory',
      );
      await clock.advance(9_000);
      t.volumes.addMount('/mnt/fast/new', { capacity: 5 * GiB });
      g.trigger();
      const pvName = persistentVolumeName('new', 'node-a', 'fast');
      await waitFor(() => g.status().lastPass?.created.includes(pvName) === true, 'the PV of the mounted entry');
      await t.events.flush();
      const skippedEvents = (await t.cluster.events.list({ namespace: 'default' })).items.filter(
        (e) => e.reason === 'VolumeDiscoverySkipped',
      );
      assert.deepEqual(skippedEvents, [], 'no Warning for an entry mounted within the grace period');
      assert.equal(t.logger.messages('warn').filter((m) => m === 'discovery skipped an entry').length, 0);
      assert.equal(
        t.logger.messages('debug').filter((m) => m === 'discovery waits for an entry to become a mount point').length,
        1,
        'the wait is logged once, at debug',
      );
    } finally {
      await g.stop();
    }
  });

  it('reports an entry still not mounted when its grace period ends, once, without waiting for the discovery period', async () => {
    const t = await setup();
    const clock = new ManualClock(1_000_000);
    const g = t.start({ mountGraceMs: 10_000, clock });
    try {
      await g.whenReady;
      t.volumes.addDirectory('/mnt/fast/forgotten');
      g.trigger();
      await waitFor(
        () => g.status().lastPass?.skipped.some((s) => s.path === '/mnt/fast/forgotten') === true,
        'a pass that saw the directory',
      );
      const passes = g.status().passes;
      assert.equal(t.logger.messages('warn').filter((m) => m === 'discovery skipped an entry').length, 0);
      // The discovery period is an hour: only the grace deadline wakes the loop.
      await clock.advance(10_000);
      await waitFor(() => g.status().passes > passes, 'a pass at the end of the grace period');
      await waitFor(
        () => t.logger.messages('warn').filter((m) => m === 'discovery skipped an entry').length === 1,
        'the entry reported',
      );
      g.trigger();
      await waitFor(() => g.status().passes > passes + 1, 'one more pass');
      await t.events.flush();
      const skippedEvents = (await t.cluster.events.list({ namespace: 'default' })).items.filter(
        (e) => e.reason === 'VolumeDiscoverySkipped',
      );
      assert.equal(skippedEvents.length, 1, 'one Node Event, not one per pass');
      assert.match(skippedEvents[0]?.message ?? '', /\/mnt\/fast\/forgotten: .* is not a valid mount point/u);
      assert.equal(t.logger.messages('warn').filter((m) => m === 'discovery skipped an entry').length, 1);
    } finally {
      await g.stop();
    }
  });

  it('takes the changes of a burst together, a pass at most every --min-pass-interval, and a change after a quiet spell at once', async () => {
    const t = await setup();
    const clock = new ManualClock(1_000_000);
    const g = t.start({ minPassIntervalMs: 250, clock });
    const created = (entry: string): boolean =>
      g.status().lastPass?.created.includes(persistentVolumeName(entry, 'node-a', 'fast')) === true;
    try {
      await g.whenReady;
      // A quiet spell: the next change is taken at once, with no time passing.
      await clock.advance(1_000);
      t.volumes.addMount('/mnt/fast/lone', { capacity: 5 * GiB });
      g.trigger();
      await waitFor(() => created('lone'), 'the lone mount published without the clock moving');
      const at = g.status().lastPass?.at ?? 0;
      const passes = g.status().passes;
      // A burst right after it: the loop waits for the interval, and everything meanwhile joins one pass.
      t.volumes.addMount('/mnt/fast/burst1', { capacity: 5 * GiB });
      g.trigger();
      await waitFor(() => clock.wakeTimes.includes(at + 250), 'the loop waiting for the interval');
      assert.equal(g.status().passes, passes, 'no pass before the interval');
      t.volumes.addMount('/mnt/fast/burst2', { capacity: 5 * GiB });
      g.trigger();
      await clock.advance(250);
      await waitFor(() => created('burst1') && created('burst2'), 'both mounts of the burst in one pass');
      assert.equal(g.status().passes, passes + 1, 'one pass for the burst');
      assert.equal(g.status().lastPass?.at, at + 250);
    } finally {
      await g.stop();
    }
  });

  it('stopped while waiting for the interval, stops at once', async () => {
    const t = await setup();
    const clock = new ManualClock(1_000_000);
    const g = t.start({ minPassIntervalMs: 60_000, clock });
    await g.whenReady;
    const at = g.status().lastPass?.at ?? 0;
    g.trigger();
    await waitFor(() => clock.wakeTimes.includes(at + 60_000), 'the loop waiting for the interval');
    const passes = g.status().passes;
    await g.stop();
    assert.equal(g.status().passes, passes, 'no pass after stop');
    assert.equal(clock.wakeTimes.includes(at + 60_000), false, 'its timer cancelled');
  });

  it('missing-disk policy: deletes an Available PV whose disk is gone for deleteMissingAfter, and republishes it when the disk returns', async () => {
    const t = await setup(
      'storageClassMap:\n  fast:\n    hostDir: /mnt/fast\n    mountDir: /mnt/fast\n    deleteMissingAfter: 30m\n',
    );
    const clock = new ManualClock(1_000_000);
    const g = t.start({ clock });
    const name = persistentVolumeName('disk1', 'node-a', 'fast');
    try {
      await g.whenReady;
      const published = await t.cluster.persistentVolumes.get(name);
      // The PV controller makes it Available.
      await t.cluster.persistentVolumes.updateStatus({ ...published, status: { phase: 'Available' } });
      t.volumes.removeMount('/mnt/fast/disk1');
      const passes = g.status().passes;
      g.trigger();
      await waitFor(
        () => g.status().passes > passes && g.status().lastPass?.health.abnormal.some((a) => a.pv === name) === true,
        'a pass that saw the disk missing',
      );
      await clock.advance(29 * 60_000);
      g.trigger();
      await waitFor(() => g.status().passes > passes + 1, 'a pass before the deadline');
      assert.equal((await t.cluster.persistentVolumes.list()).items.length, 1, 'kept before the deadline');
      await clock.advance(60_000);
      g.trigger();
      await waitFor(
        async () => (await t.cluster.persistentVolumes.get(name)).metadata.deletionTimestamp !== undefined,
        'the PV deleted',
      );
      // The pv-protection controller lets an unbound PV go.
      const deleting = await t.cluster.persistentVolumes.get(name);
      await t.cluster.persistentVolumes.update({ ...deleting, metadata: { ...deleting.metadata, finalizers: [] } });
      await waitFor(async () => (await t.cluster.persistentVolumes.list()).items.length === 0, 'the PV gone');
      assert.equal(t.metrics.missingVolumesDeleted.get({ storageclass: 'fast', reason: 'not-mounted' }), 1);
      await t.events.flush();
      const deletedEvents = (await t.cluster.events.list({ namespace: 'default' })).items.filter(
        (e) => e.reason === 'VolumeMissingDeleted',
      );
      assert.equal(deletedEvents.length, 1);
      assert.match(deletedEvents[0]?.message ?? '', /missing for 30m0s .* deleteMissingAfter: 30m0s/u);
      // Another disk is mounted at the path: discovery publishes it as a new PV with its own identity.
      t.volumes.addMount('/mnt/fast/disk1', { capacity: 20 * GiB, fsType: 'ext4', uuid: UUID_BACK });
      g.trigger();
      await waitFor(async () => (await t.cluster.persistentVolumes.list()).items.length === 1, 'the PV republished');
      const republished = await t.cluster.persistentVolumes.get(name);
      assert.notEqual(republished.metadata.uid, published.metadata.uid);
      assert.equal(republished.metadata.annotations?.[IDENTITY_ANNOTATION], `fs-uuid:${UUID_BACK}`);
    } finally {
      await g.stop();
    }
  });

  it('removes the startup taint once discovery is ready (upstream never does)', async () => {
    const t = await setup(
      'storageClassMap:\n  fast:\n    hostDir: /mnt/fast\n    mountDir: /mnt/fast\nremoveNodeNotReadyTaint: true\nprovisionerNotReadyNodeTaintKey: example.com/agent-not-ready\n',
      {
        taints: [
          { key: 'example.com/agent-not-ready', effect: 'NoSchedule' },
          { key: 'other', effect: 'NoSchedule' },
        ],
      },
    );
    const g = t.start();
    try {
      await g.whenReady;
      await waitFor(() => g.status().taintRemoved, 'taint removed');
      const node = await t.cluster.nodes.get('node-a');
      // The apiserver's admission adds node.kubernetes.io/not-ready on create; only ours goes.
      const keys = node.spec?.taints?.map((x) => x.key) ?? [];
      assert.ok(!keys.includes('example.com/agent-not-ready'), keys.join(','));
      assert.ok(keys.includes('other'), keys.join(','));
    } finally {
      await g.stop();
    }
  });

  it('stops everything it started: no watch is left open', async () => {
    const t = await setup();
    const g = t.start({ changePollMs: 10, discoveryPeriodMs: 10 });
    await g.whenReady;
    assert.ok(t.cluster.activeWatches >= 2);
    await g.stop();
    assert.equal(t.cluster.activeWatches, 0);
  });

  it('stopped during a discovery pass, ends with the pass, not one discovery period later', async () => {
    const t = await setup();
    let entered = (): void => undefined;
    let release = (): void => undefined;
    const inPass = new Promise<void>((resolve) => {
      entered = resolve;
    });
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const listDirectory = t.volumes.listDirectory.bind(t.volumes);
    t.volumes.listDirectory = async (path) => {
      entered();
      await gate;
      return listDirectory(path);
    };
    // Longer than the hang detector below, short enough that a failing run still ends.
    const g = t.start({ discoveryPeriodMs: 30_000 });
    await inPass;
    const stopped = g.stop();
    release();
    // A hang detector, not a timing assertion.
    const timer = new AbortController();
    const outcome = await Promise.race([
      stopped.then(() => 'stopped'),
      delay(10_000, 'still running', { signal: timer.signal }),
    ]);
    timer.abort();
    assert.equal(outcome, 'stopped');
  });
});

function upstreamPv(name: string, by: string): PersistentVolume {
  return {
    metadata: { name, annotations: { 'pv.kubernetes.io/provisioned-by': by }, labels: { keep: 'me' } },
    spec: {
      capacity: { storage: '1Gi' },
      accessModes: ['ReadWriteOnce'],
      persistentVolumeReclaimPolicy: 'Delete',
      storageClassName: 'fast',
      local: { path: `/mnt/fast/${name}` },
      nodeAffinity: {
        required: {
          nodeSelectorTerms: [
            { matchExpressions: [{ key: 'kubernetes.io/hostname', operator: 'In', values: ['node-a-host'] }] },
          ],
        },
      },
    },
  };
}

describe('adoption of upstream PVs', () => {
  it("labels this node's PVs (either annotation form) and touches nothing else", async () => {
    const t = await setup();
    const uid = t.nodeObject.metadata.uid ?? '';
    await t.cluster.persistentVolumes.create(upstreamPv('up-1', `local-volume-provisioner-node-a-${uid}`));
    await t.cluster.persistentVolumes.create(upstreamPv('up-2', 'local-volume-provisioner-node-a'));
    await t.cluster.persistentVolumes.create(upstreamPv('theirs', 'local-volume-provisioner-node-b'));
    const before = await t.cluster.persistentVolumes.get('up-1');
    const result = await adoptNodeVolumes({ cluster: t.cluster, logger: t.logger }, nodeIdentity(t.nodeObject), {
      pageSize: 1,
    });
    assert.deepEqual([...result.adopted].sort(), ['up-1', 'up-2']);
    assert.equal(result.pages, 3, 'paginated');
    const after = await t.cluster.persistentVolumes.get('up-1');
    assert.deepEqual(after.metadata.labels, { keep: 'me', [NODE_LABEL]: 'node-a' });
    assert.deepEqual(after.spec, before.spec);
    assert.deepEqual(after.metadata.annotations, before.metadata.annotations);
    assert.equal((await t.cluster.persistentVolumes.get('theirs')).metadata.labels?.[NODE_LABEL], undefined);
    const again = await adoptNodeVolumes({ cluster: t.cluster, logger: t.logger }, nodeIdentity(t.nodeObject));
    assert.deepEqual(again.adopted, [], 'the scan only lists unlabelled PVs');
  });

  it('starts the scan over when a continue token expired between pages (410), and no more than 3 times', async () => {
    const t = await setup();
    const uid = t.nodeObject.metadata.uid ?? '';
    for (const name of ['up-1', 'up-2', 'up-3'])
      await t.cluster.persistentVolumes.create(upstreamPv(name, `local-volume-provisioner-node-a-${uid}`));
    // The scan's continued pages fail with 410 this many times.
    const pvs = t.cluster.persistentVolumes;
    const listMetadata = pvs.listMetadata.bind(pvs);
    const withExpiries = (expiries: number): Cluster => {
      let left = expiries;
      pvs.listMetadata = (options) => {
        if (options?.continue !== undefined && left > 0) {
          left -= 1;
          return Promise.reject(new KubeApiError(410, 'Expired', 'The provided continue parameter is too old'));
        }
        return listMetadata(options);
      };
      return t.cluster;
    };
    const result = await adoptNodeVolumes({ cluster: withExpiries(2), logger: t.logger }, nodeIdentity(t.nodeObject), {
      pageSize: 1,
    });
    assert.deepEqual([...result.adopted].sort(), ['up-1', 'up-2', 'up-3']);
    // Every continued page expires: each start-over adopts one more PV, the fourth 410 stands.
    for (const name of ['up-4', 'up-5', 'up-6', 'up-7', 'up-8'])
      await t.cluster.persistentVolumes.create(upstreamPv(name, `local-volume-provisioner-node-a-${uid}`));
    await assert.rejects(
      adoptNodeVolumes({ cluster: withExpiries(Infinity), logger: t.logger }, nodeIdentity(t.nodeObject), {
        pageSize: 1,
      }),
      (err) => err instanceof KubeApiError && err.status === 410,
    );
  });

  it('scans in pages of at most 500 PVs by default: the heap a page grows stays small', async () => {
    const t = await setup();
    const uid = t.nodeObject.metadata.uid ?? '';
    for (let i = 0; i < 1200; i++)
      await t.cluster.persistentVolumes.create(upstreamPv(`other-${String(i)}`, 'local-volume-provisioner-node-b'));
    await t.cluster.persistentVolumes.create(upstreamPv('mine', `local-volume-provisioner-node-a-${uid}`));
    const pvs = t.cluster.persistentVolumes;
    const listMetadata = pvs.listMetadata.bind(pvs);
    const pageSizes: number[] = [];
    pvs.listMetadata = async (options) => {
      const page = await listMetadata(options);
      pageSizes.push(page.items.length);
      return page;
    };
    const result = await adoptNodeVolumes({ cluster: t.cluster, logger: t.logger }, nodeIdentity(t.nodeObject));
    assert.deepEqual(pageSizes, [500, 500, 201]);
    assert.deepEqual(result, { scanned: 1201, pages: 3, adopted: ['mine'] });
  });
});
