// What a replay observes of the agent, driven alone: the tapped cluster forwards every write and
// reports those of PVs, Jobs and Nodes; the tapped cleaner reports start and end; and the writes
// and log records that make a timeline event make it as data, with no sentence in it.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ManualClock } from '../../../src/core/clock.js';
import { MemoryCluster } from '../../../src/core/kube/memory/memory-cluster.js';
import type { Job, PersistentVolume } from '../../../src/core/kube/objects.js';
import {
  jobWriteEvent,
  logEvent,
  nodeWriteEvent,
  pvWriteEvent,
  TappedCleaner,
  tapCluster,
} from '../../../src/core/simulate/observe.js';
import type { ObservedWrite } from '../../../src/core/simulate/observe.js';
import { ScriptedCleaner } from '../../../src/core/simulate/stand-ins.js';

const PV: PersistentVolume = {
  apiVersion: 'v1',
  kind: 'PersistentVolume',
  metadata: { name: 'local-pv-1' },
  spec: {
    capacity: { storage: '20Gi' },
    storageClassName: 'fast',
    local: { path: '/mnt/fast/disk1', fsType: 'ext4' },
    volumeMode: 'Block',
    accessModes: ['ReadWriteOnce'],
    nodeAffinity: {
      required: {
        nodeSelectorTerms: [
          { matchExpressions: [{ key: 'kubernetes.io/hostname', operator: 'In', values: ['node-a'] }] },
        ],
      },
    },
  },
};

describe('simulate: observing the agent', () => {
  it('the tapped cluster forwards writes and reports the PV, Job and Node ones (a dry run is not a write)', async () => {
    const inner = new MemoryCluster({ clock: new ManualClock(0) });
    const seen: string[] = [];
    const note =
      (kind: string) =>
      (w: ObservedWrite<{ metadata: { name: string } }>): void => {
        seen.push(`${kind} ${w.verb} ${w.verb === 'delete' ? w.name : w.object.metadata.name}`);
      };
    const cluster = tapCluster(inner, { persistentVolumes: note('pv'), jobs: note('job'), nodes: note('node') });
    await cluster.persistentVolumes.create(PV, { dryRun: true });
    assert.deepEqual(seen, []);
    assert.equal((await inner.persistentVolumes.list()).items.length, 0, 'a dry run writes nothing');
    await cluster.persistentVolumes.create(PV);
    await cluster.persistentVolumes.patch('local-pv-1', { metadata: { labels: { a: 'b' } } });
    await cluster.nodes.create({ metadata: { name: 'node-a' } });
    await cluster.storageClasses.create({ metadata: { name: 'fast' }, provisioner: 'x' });
    await cluster.persistentVolumes.delete('local-pv-1');
    assert.deepEqual(seen, [
      'pv create local-pv-1',
      'pv patch local-pv-1',
      'node create node-a',
      'pv delete local-pv-1',
    ]);
    assert.equal((await inner.storageClasses.get('fast')).metadata.name, 'fast', 'unobserved writes still arrive');
    // pv-protection holds the PV until a controller lets it go: the delete shows as its deletionTimestamp.
    const deleted = await inner.persistentVolumes.get('local-pv-1').catch(() => undefined);
    assert.ok(deleted === undefined || deleted.metadata.deletionTimestamp !== undefined, 'the delete arrived');
  });

  it('PV, Job and Node writes become events with the fields the timeline needs', () => {
    assert.deepEqual(pvWriteEvent({ verb: 'create', object: PV }), {
      type: 'pv-created',
      pv: 'local-pv-1',
      volume: 'fast/disk1',
      capacity: '20Gi',
      volumeMode: 'Block',
      fsType: 'ext4',
    });
    const bare: PersistentVolume = { metadata: { name: 'local-pv-2' }, spec: { local: { path: '/x/d' } } };
    assert.deepEqual(pvWriteEvent({ verb: 'create', object: bare }), {
      type: 'pv-created',
      pv: 'local-pv-2',
      volume: '/d',
      volumeMode: 'Filesystem',
    });
    assert.deepEqual(pvWriteEvent({ verb: 'patch', object: PV }), { type: 'pv-adopted', pv: 'local-pv-1' });
    assert.deepEqual(pvWriteEvent({ verb: 'delete', name: 'local-pv-1' }), { type: 'pv-deleted', pv: 'local-pv-1' });
    assert.equal(pvWriteEvent({ verb: 'updateStatus', object: PV }), undefined);
    const job: Job = {
      metadata: { name: 'cleanup-local-pv-1', labels: { pv: 'local-pv-1' }, annotations: { device: '/dev/x' } },
      spec: {
        template: { spec: { containers: [{ name: 'c', image: 'img:1', command: ['/scripts/shred.sh', '2'] }] } },
      },
    };
    assert.deepEqual(jobWriteEvent({ verb: 'create', object: job }), {
      type: 'job-created',
      job: 'cleanup-local-pv-1',
      pv: 'local-pv-1',
      command: ['/scripts/shred.sh', '2'],
      device: '/dev/x',
      image: 'img:1',
    });
    assert.deepEqual(jobWriteEvent({ verb: 'delete', name: 'j' }), { type: 'job-deleted', job: 'j' });
    assert.equal(jobWriteEvent({ verb: 'updateStatus', object: job }), undefined);
    assert.deepEqual(nodeWriteEvent({ verb: 'patch', object: { metadata: { name: 'node-a' } } }), {
      type: 'node-updated',
      node: 'node-a',
    });
    assert.equal(nodeWriteEvent({ verb: 'create', object: { metadata: { name: 'node-a' } } }), undefined);
  });

  it('log records: skips, class problems, cleanups that cannot start, and other warnings; the rest is quiet', () => {
    const at = (path: string, className: string | undefined): string => `${className ?? '?'}@${path}`;
    const record = (level: 'info' | 'warn', message: string, fields: Record<string, unknown>) => ({
      at: 5,
      level,
      message,
      fields,
    });
    assert.deepEqual(
      logEvent(
        record('info', 'discovery skipped an entry', {
          path: '/mnt/fast/d',
          storageClass: 'fast',
          reason: 'vanished',
          detail: 'gone',
        }),
        at,
      ),
      { type: 'skipped', volume: 'fast@/mnt/fast/d', reason: 'vanished', detail: 'gone' },
    );
    assert.deepEqual(
      logEvent(record('warn', 'discovery failed for a storage class', { storageClass: 'x', detail: 'no' }), at),
      { type: 'class-problem', storageClass: 'x', detail: 'no' },
    );
    assert.deepEqual(logEvent(record('warn', 'cleanup could not start', { pv: 'p', error: 'e' }), at), {
      type: 'cleanup-failed',
      pv: 'p',
      error: 'e',
    });
    assert.deepEqual(logEvent(record('warn', 'odd', { pv: 'p', reason: 'r', n: 2 }), at), {
      type: 'log',
      level: 'warn',
      pv: 'p',
      message: 'odd',
      fields: { n: 2 },
    });
    assert.equal(logEvent(record('warn', 'cleanup failed', { pv: 'p' }), at), undefined, 'shown by the cleaner');
    assert.equal(logEvent(record('info', 'pass finished', {}), at), undefined);
  });

  it('the tapped cleaner reports start, success, failure and an interrupted cleanup', async () => {
    const clock = new ManualClock(0);
    const scripted = new ScriptedCleaner(clock);
    const seen: string[] = [];
    const cleaner = new TappedCleaner(scripted, (event, path, detail) => {
      seen.push(
        `${event} ${path}${detail.command ? ` ${detail.command.join(' ')}` : ''}${detail.error ? `: ${detail.error}` : ''}`,
      );
    });
    const signal = new AbortController().signal;
    await cleaner.cleanBlock('/dev/b', ['/scripts/quick_reset.sh'], { signal });
    scripted.set('/mnt/f', { result: 'fail', durationMs: 0, message: 'boom' });
    await assert.rejects(cleaner.cleanFilesystem('/mnt/f', { signal }), /boom/u);
    scripted.set('/mnt/s', { result: 'succeed', durationMs: Number.POSITIVE_INFINITY });
    const stop = new AbortController();
    const slow = cleaner.cleanFilesystem('/mnt/s', { signal: stop.signal });
    stop.abort();
    await assert.rejects(slow);
    assert.deepEqual(seen, [
      'started /dev/b /scripts/quick_reset.sh',
      'succeeded /dev/b',
      'started /mnt/f',
      'failed /mnt/f: boom',
      'started /mnt/s',
      'interrupted /mnt/s: aborted: the agent stopped',
    ]);
  });
});
