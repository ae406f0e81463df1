// The status/event view alone: the /v1/status JSON built from plain inputs, readiness, and the
// event stream that no listener can break.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { GenerationStatus } from '../../../src/core/agent/generation.js';
import { AgentEventStream, readinessOf, statusJson, TeeLogger } from '../../../src/core/agent/status-view.js';
import type { StatusInputs } from '../../../src/core/agent/status-view.js';
import type { AgentEvent } from '../../../src/core/agent/reload-types.js';
import type { CleanupEntry } from '../../../src/core/cleanup/table.js';
import { ManualClock } from '../../../src/core/clock.js';
import { parseConfigSnapshot } from '../../../src/core/config/decode/parse.js';
import { snapshotFromDirectoryFiles } from '../../../src/core/config/decode/layout.js';
import type { PersistentVolume } from '../../../src/core/kube/objects.js';
import { MemoryLogger } from '../../../src/core/log.js';

const DIR = '/etc/provisioner/config';
const applied = parseConfigSnapshot(
  snapshotFromDirectoryFiles(DIR, [
    {
      name: 'storageClassMap',
      text: 'fast:\n  hostDir: /mnt/fast\n  mountDir: /mnt/fast\nslow:\n  hostDir: /mnt/slow\n  mountDir: /mnt/slow\n',
    },
  ]),
);

function pv(name: string, className: string, path: string, extra: Partial<PersistentVolume> = {}): PersistentVolume {
  return {
    metadata: { name },
    spec: { storageClassName: className, local: { path }, capacity: { storage: '10Gi' } },
    ...extra,
  };
}

const generation: GenerationStatus = {
  number: 3,
  configHash: applied.hash,
  synced: true,
  ready: true,
  passes: 2,
  persistentVolumes: 3,
  taintRemoved: false,
  lastPass: {
    at: 5_000,
    durationMs: 12,
    entries: 4,
    created: ['pv-b'],
    failed: [],
    skipped: [
      {
        className: 'slow',
        entry: 'junk',
        path: '/mnt/slow/junk',
        reason: 'not-a-mount-point',
        message: 'not a mount point',
      },
    ],
    classProblems: [{ className: 'slow', message: 'hostDir missing' }],
    reclaim: { deleted: ['pv-old'], started: [], orphaned: [], quarantined: [], identitiesRecorded: [] },
    health: { checked: 0, abnormal: [] },
  },
};

const cleanup: CleanupEntry = {
  pvName: 'pv-c',
  pvUid: 'u',
  className: 'fast',
  mode: 'Filesystem',
  path: '/mnt/fast/c',
  command: [],
  capacityBytes: 1,
  method: 'process',
  state: 'failed',
  startedAt: 4_000,
  attempts: 2,
  lastError: 'exit 1',
};

function inputs(extra: Partial<StatusInputs> = {}): StatusInputs {
  return {
    node: 'node-a',
    version: '1.2.3',
    startedAt: 1_000,
    now: 6_000,
    generation,
    persistentVolumes: [
      pv('pv-b', 'fast', '/mnt/fast/b', { status: { phase: 'Bound' } }),
      pv('pv-a', 'fast', '/mnt/fast/a', {
        spec: {
          storageClassName: 'fast',
          local: { path: '/mnt/fast/a' },
          claimRef: { namespace: 'apps', name: 'data' },
        },
      }),
      pv('pv-t', 'slow', '/mnt/slow/t', { metadata: { name: 'pv-t', deletionTimestamp: '2026-01-01T00:00:00Z' } }),
    ],
    applied,
    onDiskHash: 'sha256:other',
    subPath: false,
    source: { configured: { kind: 'directory', path: DIR }, inUse: { kind: 'directory', path: DIR } },
    lastReload: undefined,
    rejected: undefined,
    reloadPending: true,
    errorsSinceApply: 2,
    cleanups: [cleanup],
    host: {
      pid: 4242,
      activeResources: () => ['TCPServerWrap', 'Timeout', 'Timeout'],
      memoryUsage: () => ({ rss: 50e6, heapTotal: 20e6, heapUsed: 12e6, external: 1e6, arrayBuffers: 0 }),
    },
    ...extra,
  };
}

describe('the status view', () => {
  it('builds /v1/status from the supervisor’s and the reload machine’s state', () => {
    const s = statusJson(inputs());
    assert.equal(s.node, 'node-a');
    assert.equal(s.pid, 4242, 'the pid comes from the injected process host');
    assert.deepEqual(s.diagnostics, {
      activeResources: { TCPServerWrap: 1, Timeout: 2 },
      rssBytes: 50e6,
      heapUsedBytes: 12e6,
    });
    assert.equal(s.generation, 3);
    assert.equal(s.ready, true);
    assert.equal(s.errorsSinceApply, 2);
    assert.deepEqual(s.config, { source: DIR, appliedHash: applied.hash, onDiskHash: 'sha256:other', subPath: false });
    assert.equal(s.reloadPending, true);
    assert.equal('lastReload' in s, false);
    const [fast, slow] = s.classes;
    assert.deepEqual(
      fast?.persistentVolumes.map((p) => [p.name, p.phase, p.claim]),
      [
        ['pv-a', 'Pending', 'apps/data'],
        ['pv-b', 'Bound', undefined],
      ],
      'by path; no status is Pending',
    );
    assert.equal(fast.problem, undefined);
    assert.deepEqual(
      slow?.persistentVolumes.map((p) => p.phase),
      ['Terminating'],
    );
    assert.deepEqual(slow.skipped, [{ entry: 'junk', reason: 'not-a-mount-point', message: 'not a mount point' }]);
    assert.equal(slow.problem, 'hostDir missing');
    assert.deepEqual(s.cleanups, [
      { pv: 'pv-c', method: 'process', state: 'failed', startedAt: 4_000, attempts: 2, lastError: 'exit 1' },
    ]);
    assert.deepEqual(s.lastPass, {
      at: 5_000,
      configHash: applied.hash,
      durationMs: 12,
      created: 1,
      deleted: 1,
      abnormal: 0,
      quarantined: 0,
      conflicting: 0,
    });
  });

  it('is ready once the caches synced and the first pass ran', () => {
    assert.deepEqual(readinessOf({ ...generation, synced: false, ready: false }), {
      ok: false,
      reason: 'caches not synced',
    });
    assert.deepEqual(readinessOf({ ...generation, ready: false }), {
      ok: false,
      reason: 'first discovery pass not done',
    });
    assert.equal(statusJson(inputs({ generation: { ...generation, ready: false } })).ready, false);
  });
});

describe('the event stream', () => {
  it('a listener that throws breaks neither the emitter nor the other listeners; unsubscribe stops delivery', () => {
    const stream = new AgentEventStream();
    const seen: AgentEvent[] = [];
    stream.subscribe(() => {
      throw new Error('broken listener');
    });
    const unsubscribe = stream.subscribe((e) => seen.push(e));
    const event: AgentEvent = { type: 'log', at: 1, level: 'info', message: 'one', fields: {} };
    stream.emit(event);
    unsubscribe();
    stream.emit({ ...event, message: 'two' });
    assert.deepEqual(seen, [event]);
  });

  it('the tee logger streams all but debug records, and logs every one', () => {
    const stream = new AgentEventStream();
    const seen: string[] = [];
    stream.subscribe((e) => {
      if (e.type === 'log') seen.push(`${e.level} ${e.message} ${String(e.at)}`);
    });
    const inner = new MemoryLogger();
    const logger = new TeeLogger(inner, stream, new ManualClock(42));
    logger.log('debug', 'noise');
    logger.log('warn', 'careful', { x: 1 });
    assert.deepEqual(seen, ['warn careful 42']);
    assert.deepEqual(inner.messages(), ['noise', 'careful']);
  });
});
