// Reclaiming released PVs against the in-memory cluster, node and cleaner: what is cleaned, how,
// when the PV is deleted, backoff, and the seed's four cleanup transitions across a reload.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MemoryCleaner } from '../../../src/core/cleanup/cleaner.js';
import { Reclaimer, reportCleanupFailures } from '../../../src/core/cleanup/reclaim.js';
import type { JobLookup } from '../../../src/core/cleanup/reclaim.js';
import { CleanupTable } from '../../../src/core/cleanup/table.js';
import { ManualClock, systemClock, type Clock } from '../../../src/core/clock.js';
import { parseConfigSnapshot } from '../../../src/core/config/decode/parse.js';
import { snapshotFromFileText } from '../../../src/core/config/decode/layout.js';
import type { ProvisionerConfig } from '../../../src/core/config/model.js';
import { isNotFound, KubeApiError } from '../../../src/core/kube/cluster.js';
import { EventRecorder } from '../../../src/core/kube/events.js';
import { MemoryCluster } from '../../../src/core/kube/memory/memory-cluster.js';
import type { Job, PersistentVolume } from '../../../src/core/kube/objects.js';
import { MemoryLogger } from '../../../src/core/log.js';
import { createAgentMetrics } from '../../../src/core/metrics/agent-metrics.js';
import { MemoryVolumes } from '../../../src/core/node/memory-volumes.js';
import { IDENTITY_ACTION_ANNOTATION, IDENTITY_ANNOTATION, NODE_UID_ANNOTATION } from '../../../src/core/pv/identity.js';
import type { NodeIdentity } from '../../../src/core/pv/naming.js';
import { waitFor } from '../../support/eventually.js';

const NODE: NodeIdentity = { name: 'node-a', uid: 'uid-a', hostname: 'node-a', labels: {} };
const PROCESS =
  'storageClassMap:\n  fast:\n    hostDir: /mnt/fast\n    mountDir: /mnt/fast\n  raw:\n    hostDir: /dev/lvp\n    mountDir: /dev/lvp\n    volumeMode: Block\n    blockCleanerCommand: ["/scripts/shred.sh", "2"]\n';
const JOBS = `${PROCESS}useJobForCleaning: "yes"\n`;

function config(text: string): ProvisionerConfig {
  return parseConfigSnapshot(snapshotFromFileText('c.yaml', text)).config;
}

/** clock: the cleanup table's and the reclaimer's (a ManualClock for a test of back-off times). */
function world(clock: Clock = systemClock) {
  const cluster = new MemoryCluster();
  const volumes = new MemoryVolumes();
  volumes.addDirectory('/mnt/fast').addDirectory('/dev/lvp');
  volumes.addMount('/mnt/fast/disk1');
  volumes.addBlockDevice('/dev/loop9', 2 ** 30);
  volumes.addSymlink('/dev/lvp/nvme-1', '/dev/loop9');
  const cleaner = new MemoryCleaner();
  const logger = new MemoryLogger();
  const metrics = createAgentMetrics();
  const events = new EventRecorder({ cluster, clock: systemClock, logger, component: 'test', host: 'node-a' });
  const table = new CleanupTable({
    cleaner,
    clock,
    logger,
    concurrency: 2,
    backoff: { initialMs: 30, maxMs: 60 },
    onChange: reportCleanupFailures({ events, metrics }),
  });
  const readJob = async (name: string): Promise<Job | undefined> => {
    try {
      return await cluster.jobs.get(name, { namespace: 'default' });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  };
  /** How the lookup answers: a watch cache that has not seen the Jobs yet; an apiserver starting up (403). */
  const lookup = { cacheLags: false, forbidden: false };
  const forbidden = (): KubeApiError =>
    new KubeApiError(403, 'Forbidden', 'jobs.batch is forbidden: the authorizer is not ready');
  const jobs: JobLookup = {
    // as the agent's lookup without a Job watch: a 403 means none (a chart without Job permissions)
    get: (name) => (lookup.forbidden || lookup.cacheLags ? Promise.resolve(undefined) : readJob(name)),
    read: (name) => (lookup.forbidden ? Promise.reject(forbidden()) : readJob(name)),
  };
  const reclaimer = (text: string, jobImage: string | null = 'provisioner:test'): Reclaimer =>
    new Reclaimer(
      { config: config(text), node: NODE, namespace: 'default', jobImage: jobImage ?? undefined },
      { cluster, volumes, clock, logger, metrics, events, table, jobs },
    );
  async function released(name: string, path: string, className: string, policy = 'Delete'): Promise<PersistentVolume> {
    await cluster.persistentVolumes.create({
      metadata: { name },
      spec: {
        capacity: { storage: '1Gi' },
        accessModes: ['ReadWriteOnce'],
        persistentVolumeReclaimPolicy: policy,
        storageClassName: className,
        local: { path },
        nodeAffinity: {
          required: {
            nodeSelectorTerms: [
              { matchExpressions: [{ key: 'kubernetes.io/hostname', operator: 'In', values: ['node-a'] }] },
            ],
          },
        },
      },
    });
    const pv = await cluster.persistentVolumes.get(name);
    return cluster.persistentVolumes.updateStatus({ ...pv, status: { phase: 'Released' } });
  }
  const list = async (): Promise<PersistentVolume[]> => (await cluster.persistentVolumes.list()).items;
  /** A deleted PV keeps the pv-protection finalizer on a bare apiserver: it is gone once marked for deletion. */
  const gone = async (name: string): Promise<boolean> => {
    try {
      return (await cluster.persistentVolumes.get(name)).metadata.deletionTimestamp !== undefined;
    } catch (err) {
      return isNotFound(err);
    }
  };
  async function markJob(name: string, outcome: 'succeeded' | 'failed'): Promise<void> {
    const job = await cluster.jobs.get(name, { namespace: 'default' });
    const now = new Date().toISOString();
    const status: NonNullable<Job['status']> =
      outcome === 'succeeded'
        ? { succeeded: 1, startTime: now, completionTime: now, conditions: [{ type: 'Complete', status: 'True' }] }
        : {
            failed: 7,
            startTime: now,
            conditions: [
              {
                type: 'Failed',
                status: 'True',
                reason: 'BackoffLimitExceeded',
                message: 'Job has reached the specified backoff limit',
              },
            ],
          };
    await cluster.jobs.updateStatus({ ...job, status }, { namespace: 'default' });
  }
  return {
    cluster,
    volumes,
    cleaner,
    logger,
    metrics,
    events,
    table,
    reclaimer,
    released,
    list,
    gone,
    markJob,
    lookup,
  };
}

describe('reclaiming released PVs', () => {
  it('cleans a filesystem volume in-process and deletes its PV only after the cleanup succeeded', async () => {
    const w = world();
    await w.released('pv-fs', '/mnt/fast/disk1', 'fast');
    let finish = (): void => undefined;
    w.cleaner.hold('/mnt/fast/disk1', new Promise((r) => (finish = r)));
    const r = w.reclaimer(PROCESS);
    assert.deepEqual((await r.pass(await w.list())).started, ['pv-fs']);
    await waitFor(() => w.table.get('pv-fs')?.state === 'running', 'running');
    await r.pass(await w.list());
    assert.equal(await w.gone('pv-fs'), false, 'not deleted while the cleanup runs');
    finish();
    await waitFor(() => w.table.get('pv-fs')?.state === 'succeeded', 'succeeded');
    assert.deepEqual((await r.pass(await w.list())).deleted, ['pv-fs']);
    assert.equal(await w.gone('pv-fs'), true);
    assert.deepEqual(w.cleaner.calls, [{ kind: 'filesystem', path: '/mnt/fast/disk1' }]);
    assert.equal(w.metrics.deleteTotal.get({ mode: 'Filesystem', type: 'process' }), 1);
    assert.equal(w.table.get('pv-fs'), undefined);
  });

  it('a cache that has not seen the delete yet does not start the cleanup again', async () => {
    const w = world();
    await w.released('pv-fs', '/mnt/fast/disk1', 'fast');
    const r = w.reclaimer(PROCESS);
    await r.pass(await w.list());
    await waitFor(() => w.table.get('pv-fs')?.state === 'succeeded', 'succeeded');
    // the informer's copy from before the delete (a watch that lags or broke, seen on a real node)
    const stale = await w.list();
    assert.deepEqual((await r.pass(stale)).deleted, ['pv-fs']);
    for (let i = 0; i < 3; i++)
      assert.deepEqual(await r.pass(stale), {
        deleted: [],
        started: [],
        orphaned: [],
        quarantined: [],
        identitiesRecorded: [],
      });
    assert.deepEqual(w.cleaner.calls, [{ kind: 'filesystem', path: '/mnt/fast/disk1' }], 'cleaned once');
    assert.equal(w.table.get('pv-fs'), undefined);
    // a later PV of that name (another UID) is not held back
    const later = stale.map((pv) => ({ ...pv, metadata: { ...pv.metadata, uid: 'uid-of-a-later-pv' } }));
    assert.deepEqual((await r.pass(later)).started, ['pv-fs']);
  });

  it('runs the Block cleaner command for a block volume, with a VolumeDelete event', async () => {
    const w = world();
    await w.released('pv-raw', '/dev/lvp/nvme-1', 'raw');
    const r = w.reclaimer(PROCESS);
    await r.pass(await w.list());
    await waitFor(() => w.table.get('pv-raw')?.state === 'succeeded', 'succeeded');
    await r.pass(await w.list());
    assert.deepEqual(w.cleaner.calls, [{ kind: 'block', path: '/dev/loop9', command: ['/scripts/shred.sh', '2'] }]);
    assert.equal(await w.gone('pv-raw'), true);
    await w.events.flush();
    const events = (await w.cluster.events.list({ namespace: 'default' })).items;
    assert.ok(
      events.some((e) => e.reason === 'VolumeDelete' && e.type === 'Normal' && e.involvedObject.name === 'pv-raw'),
    );
  });

  it('leaves Retain alone and warns once about Recycle and unknown policies', async () => {
    const w = world();
    await w.released('pv-retain', '/mnt/fast/disk1', 'fast', 'Retain');
    await w.released('pv-recycle', '/mnt/fast/disk1', 'fast', 'Recycle');
    const r = w.reclaimer(PROCESS);
    for (let i = 0; i < 3; i++) await r.pass(await w.list());
    assert.deepEqual(w.cleaner.calls, []);
    assert.equal(await w.gone('pv-retain'), false);
    await w.events.flush();
    const reasons = (await w.cluster.events.list({ namespace: 'default' })).items.map((e) => e.reason);
    assert.deepEqual(reasons, ['VolumeUnsupportedReclaimPolicy']);
  });

  it('backs off after a failing cleaner, reports it, and succeeds once the cause is fixed', async () => {
    const clock = new ManualClock(Date.now());
    const w = world(clock);
    await w.released('pv-fs', '/mnt/fast/disk1', 'fast');
    w.cleaner.fail('/mnt/fast/disk1', 'device busy');
    const r = w.reclaimer(PROCESS);
    await r.pass(await w.list());
    await waitFor(() => w.table.get('pv-fs')?.state === 'failed', 'failed');
    const failed = w.table.get('pv-fs');
    assert.equal(failed?.lastError, 'device busy');
    assert.ok((failed.retryAt ?? 0) > clock.now(), 'a retry time in the future');
    await r.pass(await w.list());
    assert.equal(w.cleaner.calls.length, 1, 'no retry before the backoff expires');
    assert.equal(w.metrics.deleteFailed.get({ mode: 'Filesystem', type: 'process' }), 1);
    await w.events.flush();
    assert.ok(
      (await w.cluster.events.list({ namespace: 'default' })).items.some(
        (e) => e.reason === 'VolumeFailedDelete' && e.message === 'Error cleaning PV "pv-fs": device busy',
      ),
    );
    w.cleaner.clear('/mnt/fast/disk1');
    await clock.advance(40);
    await r.pass(await w.list());
    await waitFor(() => w.table.get('pv-fs')?.state === 'succeeded', 'succeeded');
    assert.equal(w.table.get('pv-fs')?.attempts, 2);
    await r.pass(await w.list());
    assert.equal(await w.gone('pv-fs'), true);
    assert.equal(w.cleaner.calls.length, 2);
  });

  it('never deletes a PV whose volume path is missing', async () => {
    const w = world();
    await w.released('pv-lost', '/mnt/fast/vanished', 'fast');
    const r = w.reclaimer(PROCESS);
    for (let i = 0; i < 3; i++) await r.pass(await w.list());
    assert.equal(await w.gone('pv-lost'), false);
    assert.deepEqual(w.cleaner.calls, []);
    assert.match(w.table.get('pv-lost')?.lastError ?? '', /does not exist; the PV is kept/u);
    assert.equal(
      w.metrics.deleteFailed.get({ mode: 'Filesystem', type: 'process' }),
      1,
      'backoff: one failure recorded, not one per pass',
    );
  });

  it("never lets an earlier PV's finished cleanup delete a new PV of the same name (upstream PR #174)", async () => {
    const w = world();
    w.table.startProcess({
      pvName: 'pv-fs',
      pvUid: 'an-older-uid',
      className: 'fast',
      mode: 'Filesystem',
      path: '/mnt/fast/disk1',
      command: [],
      capacityBytes: 1,
    });
    await waitFor(() => w.table.get('pv-fs')?.state === 'succeeded', 'old cleanup succeeded');
    await w.released('pv-fs', '/mnt/fast/disk1', 'fast');
    const r = w.reclaimer(PROCESS);
    const first = await r.pass(await w.list());
    assert.deepEqual(first.deleted, [], 'not deleted on the strength of the old record');
    assert.deepEqual(first.started, ['pv-fs']);
  });

  it('leaves a PV of an unconfigured class alone, reported once as orphaned', async () => {
    const w = world();
    await w.released('pv-old', '/mnt/old/disk', 'old-class');
    const r = w.reclaimer(PROCESS);
    const s = await r.pass(await w.list());
    await r.pass(await w.list());
    assert.match(s.orphaned[0]?.reason ?? '', /storage class old-class is not configured/u);
    assert.equal(await w.gone('pv-old'), false);
    assert.equal(w.logger.messages('warn').filter((m) => m.includes('old-class')).length, 1);
  });
});

describe('job-based cleaning', () => {
  it('creates an upstream-compatible Job and deletes the PV (then the Job) only after the Job succeeded', async () => {
    const w = world();
    const pv = await w.released('pv-raw', '/dev/lvp/nvme-1', 'raw');
    const r = w.reclaimer(JOBS);
    await r.pass(await w.list());
    const job = await w.cluster.jobs.get('cleanup-pv-raw', { namespace: 'default' });
    assert.deepEqual(job.metadata.labels, {
      'kubernetes.io/hostname': 'node-a',
      pv: 'pv-raw',
      pvuuid: pv.metadata.uid,
    });
    assert.equal(job.metadata.annotations?.['device'], '/dev/loop9', 'the device checked, not the entry');
    assert.ok(!Number.isNaN(Date.parse(job.metadata.annotations['start-time'] ?? '')));
    const pod = job.spec?.template.spec;
    assert.ok(pod);
    assert.deepEqual(pod.nodeSelector, { 'kubernetes.io/hostname': 'node-a' });
    assert.equal(pod.restartPolicy, 'OnFailure');
    const [container] = pod.containers;
    assert.ok(container);
    assert.deepEqual(
      container.command,
      ['provisioner', 'clean-block', '--device', '/dev/loop9', '--identity', 'none', '--', '/scripts/shred.sh', '2'],
      'the class cleaner behind the guard, bound to the device and identity checked',
    );
    assert.deepEqual(container.env, [{ name: 'LOCAL_PV_BLKDEVICE', value: '/dev/loop9' }]);
    assert.equal(container.image, 'provisioner:test');
    assert.deepEqual(
      pod.volumes?.map((v) => v.hostPath?.path),
      ['/dev/lvp', '/dev'],
    );
    await r.pass(await w.list());
    assert.equal(await w.gone('pv-raw'), false, 'not deleted while the Job runs');
    await w.markJob('cleanup-pv-raw', 'succeeded');
    assert.deepEqual((await r.pass(await w.list())).deleted, ['pv-raw']);
    assert.equal(await w.gone('pv-raw'), true);
    await assert.rejects(w.cluster.jobs.get('cleanup-pv-raw', { namespace: 'default' }), isNotFound);
    assert.deepEqual(w.cleaner.calls, [], 'nothing cleaned in-process');
  });

  it('no second Job for a PV it deleted while the cache still lists it Released', async () => {
    const w = world();
    await w.released('pv-raw', '/dev/lvp/nvme-1', 'raw');
    const r = w.reclaimer(JOBS);
    await r.pass(await w.list());
    await w.markJob('cleanup-pv-raw', 'succeeded');
    const stale = await w.list();
    assert.deepEqual((await r.pass(stale)).deleted, ['pv-raw']);
    await assert.rejects(w.cluster.jobs.get('cleanup-pv-raw', { namespace: 'default' }), isNotFound);
    assert.deepEqual((await r.pass(stale)).started, []);
    await assert.rejects(
      w.cluster.jobs.get('cleanup-pv-raw', { namespace: 'default' }),
      isNotFound,
      'no new cleanup Job for the deleted PV',
    );
  });

  it('reports a failed Job, keeps it for inspection during the backoff, then replaces it', async () => {
    const clock = new ManualClock(Date.now());
    const w = world(clock);
    await w.released('pv-raw', '/dev/lvp/nvme-1', 'raw');
    const r = w.reclaimer(JOBS);
    await r.pass(await w.list());
    const firstUid = (await w.cluster.jobs.get('cleanup-pv-raw', { namespace: 'default' })).metadata.uid;
    await w.markJob('cleanup-pv-raw', 'failed');
    await r.pass(await w.list());
    assert.equal(w.table.get('pv-raw')?.state, 'failed');
    assert.match(w.table.get('pv-raw')?.lastError ?? '', /BackoffLimitExceeded/u);
    assert.equal(
      (await w.cluster.jobs.get('cleanup-pv-raw', { namespace: 'default' })).metadata.uid,
      firstUid,
      'kept during backoff',
    );
    await clock.advance(40);
    await r.pass(await w.list());
    const second = await w.cluster.jobs.get('cleanup-pv-raw', { namespace: 'default' });
    assert.notEqual(second.metadata.uid, firstUid, 'a new Job after the backoff');
    assert.equal(await w.gone('pv-raw'), false);
    await w.events.flush();
    assert.ok(
      (await w.cluster.events.list({ namespace: 'default' })).items.some(
        (e) => e.reason === 'VolumeFailedDelete' && e.message.includes('BackoffLimitExceeded'),
      ),
    );
  });

  it('without JOB_CONTAINER_IMAGE: a clear failure, no Job, no deletion', async () => {
    const w = world();
    await w.released('pv-raw', '/dev/lvp/nvme-1', 'raw');
    await w.reclaimer(JOBS, null).pass(await w.list());
    assert.match(w.table.get('pv-raw')?.lastError ?? '', /JOB_CONTAINER_IMAGE/u);
    assert.equal((await w.cluster.jobs.list({ namespace: 'default' })).items.length, 0);
  });
});

describe('a cleanup counts for the disk it cleaned (I3)', () => {
  it('a Job that cleaned another disk than the one the PV records now (accepted since) does not count: cleaned again', async () => {
    const w = world();
    w.volumes.replaceBlockDevice('/dev/loop9', 2 ** 30, { serial: 'A' });
    await w.released('pv-raw', '/dev/lvp/nvme-1', 'raw');
    const record = (id: string): Promise<PersistentVolume> =>
      w.cluster.persistentVolumes.patch('pv-raw', {
        metadata: { annotations: { [IDENTITY_ANNOTATION]: id, [NODE_UID_ANNOTATION]: 'uid-a' } },
      });
    await record('serial:A');
    const r = w.reclaimer(JOBS);
    await r.pass(await w.list());
    const first = await w.cluster.jobs.get('cleanup-pv-raw', { namespace: 'default' });
    assert.ok(first.spec?.template.spec.containers[0]?.command?.includes('serial:A'));
    // Another disk put in and accepted by the operator before the Job's success was seen.
    w.volumes.replaceBlockDevice('/dev/loop9', 2 ** 30, { serial: 'B' });
    await record('serial:B');
    await w.markJob('cleanup-pv-raw', 'succeeded');
    await r.pass(await w.list());
    assert.equal(await w.gone('pv-raw'), false, 'not deleted: the Job cleaned serial:A, the PV is serial:B');
    const again = await w.cluster.jobs.get('cleanup-pv-raw', { namespace: 'default' });
    assert.notEqual(again.metadata.uid, first.metadata.uid, 'a new Job');
    assert.ok(again.spec?.template.spec.containers[0]?.command?.includes('serial:B'), 'for the disk at the path now');
    await w.markJob('cleanup-pv-raw', 'succeeded');
    await r.pass(await w.list());
    assert.equal(await w.gone('pv-raw'), true, 'deleted once its own disk was cleaned');
  });

  it('an in-process cleanup of a disk swapped while it ran does not count; the PV is deleted after a cleanup of its own disk', async () => {
    const w = world();
    const table = new CleanupTable({
      cleaner: w.cleaner,
      volumes: w.volumes,
      clock: systemClock,
      logger: w.logger,
      concurrency: 2,
      backoff: { initialMs: 0, maxMs: 0 },
    });
    w.volumes.replaceBlockDevice('/dev/loop9', 2 ** 30, { serial: 'A' });
    w.volumes.addBlockDevice('/dev/loop8', 2 ** 30, { serial: 'B' });
    await w.released('pv-raw', '/dev/lvp/nvme-1', 'raw');
    await w.cluster.persistentVolumes.patch('pv-raw', {
      metadata: { annotations: { [IDENTITY_ANNOTATION]: 'serial:A', [NODE_UID_ANNOTATION]: 'uid-a' } },
    });
    const r = new Reclaimer(
      { config: config(PROCESS), node: NODE, namespace: 'default', jobImage: undefined },
      {
        ...w,
        clock: systemClock,
        table,
        jobs: { get: () => Promise.resolve(undefined), read: () => Promise.resolve(undefined) },
      },
    );
    let finish = (): void => undefined;
    w.cleaner.hold('/dev/loop9', new Promise((resolve) => (finish = resolve)));
    await r.pass(await w.list());
    await waitFor(() => table.get('pv-raw')?.state === 'running', 'running');
    // The disk behind the device node is replaced while the cleaner runs (not possible for a held loop device; a model of a pulled disk).
    w.volumes.replaceBlockDevice('/dev/loop9', 2 ** 30, { serial: 'C' });
    finish();
    await waitFor(() => table.get('pv-raw')?.state === 'failed', 'failed');
    assert.match(table.get('pv-raw')?.lastError ?? '', /changed while it was cleaned.*does not count/u);
    await r.pass(await w.list());
    assert.equal(await w.gone('pv-raw'), false, 'not deleted');
    // Its own disk back: cleaned again, then deleted.
    w.volumes.replaceBlockDevice('/dev/loop9', 2 ** 30, { serial: 'A' });
    w.cleaner.clear('/dev/loop9');
    await r.pass(await w.list());
    await waitFor(() => table.get('pv-raw')?.state === 'succeeded', 'succeeded');
    assert.equal(table.get('pv-raw')?.cleaned, 'serial:A');
    await r.pass(await w.list());
    assert.equal(await w.gone('pv-raw'), true);
    assert.equal(w.cleaner.calls.length, 2, 'cleaned twice: once swapped (not counted), once on its own disk');
  });
});

describe("the seed's four cleanup transitions across a reload: each volume cleaned exactly once", () => {
  it('in-process → in-process', async () => {
    const w = world();
    await w.released('pv-raw', '/dev/lvp/nvme-1', 'raw');
    let finish = (): void => undefined;
    w.cleaner.hold('/dev/loop9', new Promise((r) => (finish = r)));
    await w.reclaimer(PROCESS).pass(await w.list());
    const next = w.reclaimer(PROCESS.replace('"2"', '"3"')); // reload with a new cleaner command
    await next.pass(await w.list());
    finish();
    await waitFor(() => w.table.get('pv-raw')?.state === 'succeeded', 'succeeded');
    await next.pass(await w.list());
    assert.equal(await w.gone('pv-raw'), true);
    assert.equal(w.cleaner.calls.length, 1);
  });

  it('in-process → Job', async () => {
    const w = world();
    await w.released('pv-raw', '/dev/lvp/nvme-1', 'raw');
    let finish = (): void => undefined;
    w.cleaner.hold('/dev/loop9', new Promise((r) => (finish = r)));
    await w.reclaimer(PROCESS).pass(await w.list());
    const next = w.reclaimer(JOBS);
    await next.pass(await w.list());
    assert.equal(
      (await w.cluster.jobs.list({ namespace: 'default' })).items.length,
      0,
      'no Job for a volume being cleaned in-process',
    );
    finish();
    await waitFor(() => w.table.get('pv-raw')?.state === 'succeeded', 'succeeded');
    await next.pass(await w.list());
    assert.equal(await w.gone('pv-raw'), true);
    assert.equal(w.cleaner.calls.length, 1);
  });

  it('Job → in-process (upstream cleaned twice here)', async () => {
    const w = world();
    await w.released('pv-raw', '/dev/lvp/nvme-1', 'raw');
    await w.reclaimer(JOBS).pass(await w.list());
    const next = w.reclaimer(PROCESS);
    await next.pass(await w.list());
    await next.pass(await w.list());
    assert.deepEqual(w.cleaner.calls, [], 'the Job is followed, not redone in-process');
    assert.equal(await w.gone('pv-raw'), false);
    await w.markJob('cleanup-pv-raw', 'succeeded');
    await next.pass(await w.list());
    assert.equal(await w.gone('pv-raw'), true);
    assert.deepEqual(w.cleaner.calls, []);
  });

  it('Job → Job', async () => {
    const w = world();
    await w.released('pv-raw', '/dev/lvp/nvme-1', 'raw');
    await w.reclaimer(JOBS).pass(await w.list());
    const uid = (await w.cluster.jobs.get('cleanup-pv-raw', { namespace: 'default' })).metadata.uid;
    const next = w.reclaimer(JOBS.replace('"2"', '"3"'));
    await next.pass(await w.list());
    assert.equal(
      (await w.cluster.jobs.get('cleanup-pv-raw', { namespace: 'default' })).metadata.uid,
      uid,
      'the same Job',
    );
    await w.markJob('cleanup-pv-raw', 'succeeded');
    await next.pass(await w.list());
    assert.equal(await w.gone('pv-raw'), true);
    assert.equal((await w.cluster.jobs.list({ namespace: 'default' })).items.length, 0);
  });

  it('after a process restart (empty table) a running Job is found and followed, not duplicated', async () => {
    const w = world();
    await w.released('pv-raw', '/dev/lvp/nvme-1', 'raw');
    await w.reclaimer(JOBS).pass(await w.list());
    for (const e of w.table.list()) w.table.remove(e.pvName);
    const restarted = w.reclaimer(JOBS);
    await restarted.pass(await w.list());
    assert.equal(w.table.get('pv-raw')?.method, 'job');
    assert.equal((await w.cluster.jobs.list({ namespace: 'default' })).items.length, 1);
    await w.markJob('cleanup-pv-raw', 'succeeded');
    await restarted.pass(await w.list());
    assert.equal(await w.gone('pv-raw'), true);
  });

  for (const [how, set] of [
    ['a watch cache that has not seen the new Job yet', (w: ReturnType<typeof world>) => (w.lookup.cacheLags = true)],
    [
      'an apiserver starting up that answers 403 (its authorizer not ready) and the agent switched to in-process',
      (w: ReturnType<typeof world>) => (w.lookup.forbidden = true),
    ],
  ] as const) {
    it(`a running Job is not taken as gone on ${how}: followed to its end, the volume cleaned once`, async () => {
      const w = world();
      await w.released('pv-raw', '/dev/lvp/nvme-1', 'raw');
      await w.reclaimer(JOBS).pass(await w.list());
      const uid = (await w.cluster.jobs.get('cleanup-pv-raw', { namespace: 'default' })).metadata.uid;
      set(w);
      const next = w.reclaimer(w.lookup.forbidden ? PROCESS : JOBS);
      for (let i = 0; i < 3; i += 1) await next.pass(await w.list());
      assert.equal(w.table.get('pv-raw')?.state, 'running', 'still following the Job');
      assert.equal(
        (await w.cluster.jobs.get('cleanup-pv-raw', { namespace: 'default' })).metadata.uid,
        uid,
        'the Job kept, not deleted and started again',
      );
      w.lookup.cacheLags = false;
      w.lookup.forbidden = false;
      await w.markJob('cleanup-pv-raw', 'succeeded');
      await next.pass(await w.list());
      assert.equal(await w.gone('pv-raw'), true);
      assert.deepEqual(w.cleaner.calls, [], 'never cleaned in-process besides the Job');
    });
  }

  describe('disk identity', () => {
    const UUID_A = '0b1e8c52-0d9c-4c5e-9d65-2f6d3c1f0a01';
    const UUID_B = '77aa0d3e-5b1f-4f0c-8a3e-9e2b6c4d5f02';
    /** disk1 as an ext4 of UUID_A, and a Released PV that recorded it on this node. */
    async function recordedWorld(recorded: string, nodeUid = 'uid-a') {
      const w = world();
      w.volumes.removeMount('/mnt/fast/disk1').addMount('/mnt/fast/disk1', { fsType: 'ext4', uuid: UUID_A });
      await w.released('pv-fs', '/mnt/fast/disk1', 'fast');
      await w.cluster.persistentVolumes.patch('pv-fs', {
        metadata: { annotations: { [IDENTITY_ANNOTATION]: recorded, [NODE_UID_ANNOTATION]: nodeUid } },
      });
      return w;
    }
    const swapDisk = (w: ReturnType<typeof world>, uuid: string): void => {
      w.volumes.removeMount('/mnt/fast/disk1').addMount('/mnt/fast/disk1', { fsType: 'ext4', uuid });
    };
    const warnings = async (w: ReturnType<typeof world>, reason: string): Promise<string[]> => {
      await w.events.flush();
      return (await w.cluster.events.list({ namespace: 'default' })).items
        .filter((e) => e.reason === reason)
        .map((e) => e.message);
    };

    it('cleans a Released PV whose disk is the recorded one', async () => {
      const w = await recordedWorld(`fs-uuid:${UUID_A}`);
      const r = w.reclaimer(PROCESS);
      assert.deepEqual((await r.pass(await w.list())).started, ['pv-fs']);
      await waitFor(() => w.table.get('pv-fs')?.state === 'succeeded', 'succeeded');
      assert.deepEqual((await r.pass(await w.list())).deleted, ['pv-fs']);
    });

    it('quarantines a Released PV whose path holds another disk: never cleaned or deleted, reported once; the right disk back, it is cleaned', async () => {
      const w = await recordedWorld(`fs-uuid:${UUID_A}`);
      swapDisk(w, UUID_B);
      const r = w.reclaimer(PROCESS);
      for (let i = 0; i < 3; i++) {
        const summary = await r.pass(await w.list());
        assert.deepEqual(summary.started, []);
        assert.deepEqual(
          summary.quarantined.map((q) => [q.pv, q.reason]),
          [['pv-fs', 'identity-changed']],
        );
      }
      assert.deepEqual(w.cleaner.calls, [], 'never wiped');
      assert.equal(await w.gone('pv-fs'), false, 'never deleted');
      assert.equal(w.metrics.quarantinedVolumes.get({ persistentvolume: 'pv-fs', reason: 'identity-changed' }), 1);
      const messages = await warnings(w, 'VolumeIdentityMismatch');
      assert.equal(messages.length, 1, 'one Warning Event for three passes');
      assert.match(
        messages[0] ?? '',
        new RegExp(`published for disk fs-uuid:${UUID_A}, but the disk at the path is fs-uuid:${UUID_B}`, 'u'),
      );
      assert.match(messages[0] ?? '', /kubectl annotate pv pv-fs local-static-provisioner\/identity-action=accept/u);
      swapDisk(w, UUID_A);
      const back = await r.pass(await w.list());
      assert.deepEqual(back.started, ['pv-fs']);
      assert.deepEqual(back.quarantined, []);
      assert.equal(
        w.metrics.quarantinedVolumes.get({ persistentvolume: 'pv-fs', reason: 'identity-changed' }),
        undefined,
      );
    });

    it('an operator’s accept records the disk now at the path, clears the action and lets the cleanup run in the same pass', async () => {
      const w = await recordedWorld(`fs-uuid:${UUID_A}`);
      swapDisk(w, UUID_B);
      const r = w.reclaimer(PROCESS);
      assert.equal((await r.pass(await w.list())).quarantined.length, 1);
      await w.cluster.persistentVolumes.patch('pv-fs', {
        metadata: { annotations: { [IDENTITY_ACTION_ANNOTATION]: 'accept' } },
      });
      const summary = await r.pass(await w.list());
      assert.deepEqual(summary.identitiesRecorded, ['pv-fs']);
      assert.deepEqual(summary.started, ['pv-fs']);
      const annotations = (await w.cluster.persistentVolumes.get('pv-fs')).metadata.annotations ?? {};
      assert.equal(annotations[IDENTITY_ANNOTATION], `fs-uuid:${UUID_B}`);
      assert.equal(annotations[IDENTITY_ACTION_ANNOTATION], undefined, 'the action is cleared');
      assert.equal((await warnings(w, 'VolumeIdentityAccepted')).length, 1);
      await waitFor(() => w.table.get('pv-fs')?.state === 'succeeded', 'succeeded');
      assert.deepEqual(w.cleaner.calls, [{ kind: 'filesystem', path: '/mnt/fast/disk1' }]);
    });

    it('a disk swapped after its cleanup, before the PV is deleted: kept, not republished', async () => {
      const w = await recordedWorld(`fs-uuid:${UUID_A}`);
      let finish = (): void => undefined;
      w.cleaner.hold('/mnt/fast/disk1', new Promise((resolve) => (finish = resolve)));
      const r = w.reclaimer(PROCESS);
      await r.pass(await w.list());
      swapDisk(w, UUID_B);
      finish();
      await waitFor(() => w.table.get('pv-fs')?.state === 'succeeded', 'succeeded');
      const summary = await r.pass(await w.list());
      assert.deepEqual(summary.deleted, []);
      assert.deepEqual(
        summary.quarantined.map((q) => q.pv),
        ['pv-fs'],
      );
      assert.equal(await w.gone('pv-fs'), false);
      assert.match((await warnings(w, 'VolumeIdentityMismatch'))[0] ?? '', /not deleted, the PV is kept/u);
    });

    it('a node rebuilt under the same name: a PV of the old Node UID is verified by its disk, or quarantined', async () => {
      const same = await recordedWorld(`fs-uuid:${UUID_A}`, 'uid-old');
      assert.deepEqual((await same.reclaimer(PROCESS).pass(await same.list())).started, ['pv-fs']);
      const unverifiable = await recordedWorld('none', 'uid-old');
      const summary = await unverifiable.reclaimer(PROCESS).pass(await unverifiable.list());
      assert.deepEqual(
        summary.quarantined.map((q) => [q.pv, q.reason]),
        [['pv-fs', 'node-rebuilt']],
      );
      assert.deepEqual(unverifiable.cleaner.calls, []);
    });

    it('an identity that cannot be recorded (the disk is missing now) is retried every pass and logged once', async () => {
      const w = world();
      await w.released('pv-gone', '/mnt/fast/gone', 'fast');
      const pv = await w.cluster.persistentVolumes.get('pv-gone');
      await w.cluster.persistentVolumes.updateStatus({ ...pv, status: { phase: 'Available' } });
      const r = w.reclaimer(PROCESS);
      for (let i = 0; i < 3; i++) assert.deepEqual((await r.pass(await w.list())).identitiesRecorded, []);
      assert.equal(w.logger.messages('warn').filter((m) => m === 'could not record a disk identity').length, 1);
      w.volumes.addMount('/mnt/fast/gone', { fsType: 'ext4', uuid: UUID_B });
      assert.deepEqual(
        (await r.pass(await w.list())).identitiesRecorded,
        ['pv-gone'],
        'recorded once the disk is there',
      );
    });

    it('records the identity of an Available or Bound PV that has none (taken over from upstream), never of a Released one', async () => {
      const w = world();
      await w.released('pv-released', '/mnt/fast/disk1', 'fast');
      w.volumes.addMount('/mnt/fast/disk2', { fsType: 'ext4', uuid: UUID_B });
      await w.released('pv-available', '/mnt/fast/disk2', 'fast');
      const available = await w.cluster.persistentVolumes.get('pv-available');
      await w.cluster.persistentVolumes.updateStatus({ ...available, status: { phase: 'Available' } });
      const r = w.reclaimer(PROCESS);
      const summary = await r.pass(await w.list());
      assert.deepEqual(summary.identitiesRecorded, ['pv-available']);
      assert.deepEqual(summary.started, ['pv-released'], 'upstream’s Released PV is cleaned as upstream would');
      const annotations = (await w.cluster.persistentVolumes.get('pv-available')).metadata.annotations ?? {};
      assert.equal(annotations[IDENTITY_ANNOTATION], `fs-uuid:${UUID_B}`);
      assert.equal(annotations[NODE_UID_ANNOTATION], 'uid-a');
      assert.equal(
        (await w.cluster.persistentVolumes.get('pv-released')).metadata.annotations?.[IDENTITY_ANNOTATION],
        undefined,
      );
      assert.deepEqual((await r.pass(await w.list())).identitiesRecorded, [], 'recorded once');
    });
  });
});
