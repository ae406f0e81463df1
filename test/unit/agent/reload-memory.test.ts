// Memory under reload churn (docs/benchmarks.md, "Reload churn"): a reload leaves nothing of the
// old generation reachable, and what outlives generations stays the same size. Reloads run
// in-process on the in-memory implementations; a forced GC (--expose-gc set at run time, since
// the test runner passes no node flags) and WeakRefs tell whether old generations were collected.
import assert from 'node:assert/strict';
import { rm } from 'node:fs/promises';
import { setTimeout as delay } from 'node:timers/promises';
import { describe, it } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { writeConfigMapVolume } from '../../support/configmap-volume.js';
import { memoryAgentFixture, startMemoryAgent } from '../../support/memory-agent.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/** Collects until nothing more goes (finalization and WeakRef clearing need a turn of the loop). */
async function collectGarbage(): Promise<void> {
  for (let i = 0; i < 4; i++) {
    gc();
    await delay(10);
  }
}

const CLASS = 'fast:\n  hostDir: /mnt/fast\n  mountDir: /mnt/fast\n';

describe('memory under reload churn', () => {
  it('collects every old generation and keeps watches, listeners and handles flat over 150 applied reloads', async () => {
    const fixture = await memoryAgentFixture('lvp-reload-memory-');
    for (let i = 0; i < 20; i++) fixture.volumes.addMount(`/mnt/fast/disk${String(i)}`);
    const agent = await startMemoryAgent(fixture, { changePollMs: 50 });
    try {
      const generations: WeakRef<object>[] = [];
      const reloadTo = async (label: string): Promise<void> => {
        await writeConfigMapVolume(fixture.dir, { storageClassMap: CLASS, labelsForPV: `churn: "${label}"\n` });
        const result = await agent.reload({ trigger: 'admin' });
        assert.equal(result.outcome, 'applied', result.error);
        generations.push(new WeakRef(agent.generation));
      };
      await reloadTo('warm');
      await delay(50);
      const watches = agent.apiWatches;
      const handles = process.getActiveResourcesInfo().length;
      for (let i = 0; i < 150; i++) await reloadTo(i % 2 ? 'a' : 'b');
      await delay(100);
      await collectGarbage();
      const alive = generations.filter((g) => g.deref() !== undefined).length;
      // The serving generation, and at most the one before it (its last pass's promise settling).
      assert.ok(alive <= 2, `${String(alive)} of ${String(generations.length)} generations still reachable`);
      assert.equal(agent.apiWatches, watches);
      assert.equal(fixture.cluster.activeWatches, watches);
      const handlesAfter = process.getActiveResourcesInfo().length;
      assert.ok(handlesAfter <= handles + 2, `handles ${String(handles)} → ${String(handlesAfter)}`);
    } finally {
      await agent.stop();
      await rm(fixture.dir, { recursive: true, force: true });
    }
  });
});
