// The event recorder while the apiserver hangs on event writes: its queue stays at the bound, the
// oldest events are dropped and counted, the warning is rate-limited, and flush() returns at its
// deadline.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { ManualClock } from '../../../src/core/clock.js';
import type { Cluster } from '../../../src/core/kube/cluster.js';
import { EventRecorder } from '../../../src/core/kube/events.js';
import { MemoryCluster } from '../../../src/core/kube/memory/memory-cluster.js';
import type { CoreEvent } from '../../../src/core/kube/objects.js';
import { MemoryLogger } from '../../../src/core/log.js';
import { createAgentMetrics } from '../../../src/core/metrics/agent-metrics.js';

/** The in-memory cluster, with event creates that hang until `release()` (then they go through). */
function hangingEvents(): { cluster: Cluster; memory: MemoryCluster; creates: string[]; release: () => void } {
  const memory = new MemoryCluster();
  const creates: string[] = [];
  let release: () => void = () => undefined;
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  const events = {
    ...memory.events,
    create: async (event: CoreEvent, options?: { namespace?: string }): Promise<CoreEvent> => {
      creates.push(event.message);
      await released;
      return memory.events.create(event, options);
    },
  };
  return {
    cluster: {
      persistentVolumes: memory.persistentVolumes,
      storageClasses: memory.storageClasses,
      nodes: memory.nodes,
      jobs: memory.jobs,
      configMaps: memory.configMaps,
      events,
    },
    memory,
    creates,
    release: () => {
      release();
    },
  };
}

const node = { kind: 'Node', name: 'node-a', uid: 'u1' };

describe('EventRecorder with an apiserver that hangs on event writes', () => {
  it('gives every event of a burst in one millisecond its own name, so none is refused as a duplicate', async () => {
    const memory = new MemoryCluster();
    const recorder = new EventRecorder({
      cluster: memory,
      clock: new ManualClock(1_000_000),
      logger: new MemoryLogger(),
      component: 'test',
      host: 'node-a',
      maxQueued: 5000,
    });
    for (let i = 0; i < 2000; i++) recorder.record(node, 'Warning', 'DiscoveryFailed', `problem ${String(i)}`);
    await recorder.flush();
    const written = (await memory.events.list({ namespace: 'default' })).items;
    assert.equal(written.length, 2000);
    assert.equal(new Set(written.map((e) => e.metadata.name)).size, 2000);
    assert.ok(written.every((e) => /^node-a\.[0-9a-f]+$/u.test(e.metadata.name)));
  });

  it('forgets the repeat key of an event once its window is over: unique events (one per reload) stay bounded', async () => {
    const memory = new MemoryCluster();
    const clock = new ManualClock(1_000_000);
    const recorder = new EventRecorder({
      cluster: memory,
      clock,
      logger: new MemoryLogger(),
      component: 'test',
      host: 'node-a',
      repeatAfterMs: 60_000,
    });
    // A reload a second for an hour: each ConfigApplied message names its generation.
    for (let generation = 1; generation <= 3600; generation++) {
      recorder.record(node, 'Normal', 'ConfigApplied', `generation ${String(generation)} applies config x`);
      await clock.advance(1000);
    }
    assert.ok(recorder.tracked <= 61, `${String(recorder.tracked)} repeat keys kept`);
    // A repeat within the window is still suppressed, and sent again after it.
    recorder.record(node, 'Warning', 'DiscoveryFailed', 'same');
    await clock.advance(30_000);
    recorder.record(node, 'Warning', 'DiscoveryFailed', 'same');
    await clock.advance(31_000);
    recorder.record(node, 'Warning', 'DiscoveryFailed', 'same');
    await recorder.flush();
    const sent = (await memory.events.list({ namespace: 'default' })).items.filter((e) => e.message === 'same');
    assert.equal(sent.length, 2);
  });

  it('keeps at most maxQueued events, drops and counts the oldest, warns once a minute', async () => {
    const clock = new ManualClock(1_000_000);
    const server = hangingEvents();
    const logger = new MemoryLogger();
    const metrics = createAgentMetrics();
    const recorder = new EventRecorder({
      cluster: server.cluster,
      clock,
      logger,
      component: 'test',
      host: 'node-a',
      maxQueued: 100,
      dropped: metrics.eventsDropped,
    });
    for (let i = 0; i < 5000; i++) recorder.record(node, 'Warning', 'DiscoveryFailed', `problem ${i}`);
    assert.equal(recorder.queued, 100, 'the queue stays at its bound');
    assert.equal(recorder.dropped, 4900);
    assert.equal(metrics.eventsDropped.get(), 4900);
    assert.match(metrics.registry.render(), /^local_volume_provisioner_events_dropped_total 4900$/mu);
    assert.deepEqual(server.creates, ['problem 0'], 'one write in flight, the rest wait');
    const warnings = (): string[] => logger.messages('warn').filter((m) => /event queue is full/u.test(m));
    assert.equal(warnings().length, 1, 'one warning for a burst of drops');
    assert.equal(logger.records.find((r) => /event queue is full/u.test(r.message))?.fields['dropped'], 1);

    await clock.advance(30_000);
    recorder.record(node, 'Warning', 'DiscoveryFailed', 'later');
    assert.equal(warnings().length, 1, 'still one within a minute');
    await clock.advance(30_000);
    recorder.record(node, 'Warning', 'DiscoveryFailed', 'a minute later');
    assert.equal(warnings().length, 2, 'the next warning after a minute');
    const second = logger.records.filter((r) => /event queue is full/u.test(r.message))[1];
    assert.equal(second?.fields['dropped'], 4901, 'with the number dropped since the last one');
    assert.equal(recorder.dropped, 4902);
    assert.equal(recorder.queued, 100);

    // The newest events are the ones kept: once the API answers, they are written.
    server.release();
    await recorder.flush();
    const written = (await server.memory.events.list({ namespace: 'default' })).items.map((e) => e.message);
    assert.equal(written.length, 100, 'the write in flight and the 99 newest');
    for (const kept of ['problem 0', 'problem 4999', 'later', 'a minute later'])
      assert.ok(written.includes(kept), kept);
    assert.ok(!written.includes('problem 1') && !written.includes('problem 4901'), 'the oldest were dropped');
    assert.equal(recorder.queued, 0);
  });

  it('flush() returns at its deadline while a write hangs, dropping (and counting) what is left', async () => {
    const clock = new ManualClock(0);
    const server = hangingEvents();
    const metrics = createAgentMetrics();
    const recorder = new EventRecorder({
      cluster: server.cluster,
      clock,
      logger: new MemoryLogger(),
      component: 'test',
      host: 'node-a',
      dropped: metrics.eventsDropped,
    });
    for (let i = 0; i < 10; i++) recorder.record(node, 'Normal', 'VolumeDelete', `deleted ${i}`);
    let returned = false;
    const flushed = recorder.flush(5_000).then(() => {
      returned = true;
    });
    await clock.advance(4_999);
    assert.equal(returned, false, 'waits for the writes up to the deadline');
    await clock.advance(1);
    await flushed;
    assert.equal(returned, true);
    assert.equal(recorder.dropped, 9, 'the nine queued behind the hanging write');
    assert.equal(metrics.eventsDropped.get(), 9);
    server.release();
  });
});
