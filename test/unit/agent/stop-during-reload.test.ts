// Agent.stop() while a reload is held in its drain or its sync phase, on the manual clock and the
// in-memory cluster: once stop() resolves nothing of the agent runs — no generation, no LIST or
// WATCH on the cluster, no timer.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Agent } from '../../../src/core/agent/agent.js';
import { MemoryCleaner } from '../../../src/core/cleanup/cleaner.js';
import { ManualClock } from '../../../src/core/clock.js';
import type { Cluster, ListOptions, ResourceClient, WatchEvent } from '../../../src/core/kube/cluster.js';
import { MemoryCluster } from '../../../src/core/kube/memory/memory-cluster.js';
import { silentLogger } from '../../../src/core/log.js';
import { MemoryVolumes } from '../../../src/core/node/memory-volumes.js';
import { writeConfigMapVolume } from '../../support/configmap-volume.js';
import { waitFor } from '../../support/eventually.js';

const CLASS = (extra = ''): string => `fast:\n  hostDir: /mnt/fast\n  mountDir: /mnt/fast\n${extra}`;
const DRAIN_MS = 10_000;
const START_MS = 30_000;

/** Counts LIST and WATCH calls and can hold them: lists until released (or aborted), watch ends until released. */
class Gate {
  calls = 0;
  holdLists = false;
  /** A watch that was told to stop keeps its generation from stopping until released. */
  stubbornWatches = false;
  private readonly waiting = new Set<() => void>();
  get heldLists(): number {
    return this.waiting.size;
  }
  release(): void {
    this.holdLists = false;
    this.stubbornWatches = false;
    for (const resume of [...this.waiting]) resume();
  }
  private hold(signal: AbortSignal | undefined): Promise<void> {
    return new Promise((resolve, reject) => {
      const done = (): void => {
        this.waiting.delete(done);
        signal?.removeEventListener('abort', aborted);
        resolve();
      };
      const aborted = (): void => {
        this.waiting.delete(done);
        reject(signal?.reason instanceof Error ? signal.reason : new Error('aborted'));
      };
      this.waiting.add(done);
      signal?.addEventListener('abort', aborted, { once: true });
    });
  }
  wrap<T>(client: ResourceClient<T>): ResourceClient<T> {
    const list = async <R>(run: () => Promise<R>, options: ListOptions | undefined): Promise<R> => {
      this.calls += 1;
      if (this.holdLists) await this.hold(options?.signal);
      return run();
    };
    return {
      ...client,
      list: (options) => list(() => client.list(options), options),
      listMetadata: (options) => list(() => client.listMetadata(options), options),
      watch: (options) => {
        this.calls += 1;
        return this.stubborn(client.watch(options));
      },
    };
  }
  private async *stubborn<T>(events: AsyncIterable<WatchEvent<T>>): AsyncGenerator<WatchEvent<T>> {
    try {
      yield* events;
    } finally {
      if (this.stubbornWatches) await this.hold(undefined);
    }
  }
}

describe('Agent.stop() during a reload', () => {
  let root = '';
  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'lvp-stop-reload-'));
  });
  after(async () => {
    await rm(root, { recursive: true, force: true });
  });

  async function start(name: string) {
    const dir = join(root, name);
    await writeConfigMapVolume(dir, { storageClassMap: CLASS() });
    const memory = new MemoryCluster();
    await memory.storageClasses.create({ metadata: { name: 'fast' }, provisioner: 'kubernetes.io/no-provisioner' });
    await memory.nodes.create({ metadata: { name: 'node-a', labels: { 'kubernetes.io/hostname': 'node-a' } } });
    const gate = new Gate();
    const cluster: Cluster = {
      persistentVolumes: gate.wrap(memory.persistentVolumes),
      storageClasses: gate.wrap(memory.storageClasses),
      jobs: gate.wrap(memory.jobs),
      nodes: memory.nodes,
      events: memory.events,
      configMaps: memory.configMaps,
    };
    const volumes = new MemoryVolumes();
    volumes.addDirectory('/mnt/fast');
    volumes.addMount('/mnt/fast/disk1');
    const clock = new ManualClock(1_780_000_000_000);
    const agent = await Agent.start(
      {
        configPath: dir,
        nodeName: 'node-a',
        namespace: 'default',
        listenAddress: '127.0.0.1:0',
        metricsPath: '/metrics',
        discoveryPeriodMs: 10_000,
        changePollMs: 0,
        createConcurrency: 4,
        cleanupConcurrency: 2,
        jobImage: 'img',
        drainTimeoutMs: DRAIN_MS,
        startTimeoutMs: START_MS,
      },
      { cluster, volumes, cleaner: new MemoryCleaner(), clock, logger: silentLogger },
    );
    await agent.generation.whenReady;
    // The next reload has something to apply.
    await writeConfigMapVolume(dir, { storageClassMap: CLASS('  fsType: ext4\n') });
    return { agent, gate, clock };
  }

  /** Lets woken tasks run their next steps (the manual clock does not move). */
  const settle = async (): Promise<void> => {
    for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
  };

  it(
    'held in its drain phase: no generation starts after stop(), nothing runs after it resolves',
    { timeout: 20_000 },
    async () => {
      const t = await start('drain');
      const old = t.agent.generation;
      try {
        t.gate.stubbornWatches = true;
        const reload = t.agent.reload({ trigger: 'admin' });
        await waitFor(() => old.signal.aborted, 'the old generation draining');
        await settle();
        const callsAtStop = t.gate.calls;
        const stopping = t.agent.stop();
        await settle();
        // Past the drain deadline: the old code started the new generation here.
        await t.clock.advance(DRAIN_MS);
        await settle();
        t.gate.release();
        await stopping;
        const r = await reload;
        assert.equal(t.gate.calls, callsAtStop, 'no LIST/WATCH after stop() was called');
        assert.equal(r.outcome, 'failed');
        assert.match(r.error ?? '', /stopping/u);
        assert.equal(t.agent.generation.number, 1, 'no generation was started once stopping');
        assert.ok(t.agent.generation.signal.aborted, 'the current generation is stopped');
        await t.clock.advance(START_MS * 2);
        await settle();
        assert.equal(t.gate.calls, callsAtStop, 'still no LIST/WATCH');
        assert.equal(t.clock.pendingSleepers, 0, 'no timers left');
      } finally {
        t.gate.release();
        await t.agent.generation.stop();
      }
    },
  );

  it(
    'held in its sync phase: no rollback generation after stop(), no LIST/WATCH, no timers',
    { timeout: 20_000 },
    async () => {
      const t = await start('sync');
      try {
        t.gate.holdLists = true;
        const reload = t.agent.reload({ trigger: 'admin' });
        await waitFor(() => t.agent.generation.number === 2 && t.gate.heldLists > 0, 'the new generation listing');
        const stopping = t.agent.stop();
        await settle();
        // The old code waited for the reload up to the drain deadline.
        await t.clock.advance(DRAIN_MS);
        await stopping;
        const callsAfterStop = t.gate.calls;
        assert.ok(t.agent.generation.signal.aborted, 'the current generation is stopped');
        assert.equal(t.clock.pendingSleepers, 0, 'no timers left (the sync wait gave up)');
        // Past the start deadline: the old code rolled back and started generation 3, which listed.
        await t.clock.advance(START_MS * 2);
        await settle();
        assert.equal(t.gate.calls, callsAfterStop, 'no LIST/WATCH after stop() resolved');
        assert.equal(t.agent.generation.number, 2, 'no rollback generation');
        assert.ok(t.agent.generation.signal.aborted);
        const r = await reload;
        assert.equal(r.outcome, 'failed');
        assert.match(r.error ?? '', /stopping/u);
      } finally {
        t.gate.release();
        await t.agent.generation.stop();
      }
    },
  );
});
