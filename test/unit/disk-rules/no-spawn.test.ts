// The rules pass spawns no process (an idle node with many disks pays only sysfs reads and two
// windows per new device): every child_process entry point is counted while the inventory lists a
// fake node of 16 disks and the step runs passes over it (plan mode: nothing to write).
import assert from 'node:assert/strict';
import childProcess from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';

import { systemClock } from '../../../src/core/clock.js';
import type { ProvisionerConfig } from '../../../src/core/config/model.js';
import { DeviceRules, DeviceRulesState } from '../../../src/core/disk-rules/service.js';
import { MemoryLogger } from '../../../src/core/log.js';
import { LinuxVolumes } from '../../../src/core/node/linux-volumes.js';
import { FakeNode } from '../../support/fake-block-node.js';
import { Cleanup, makeTempDir } from '../../support/real-node.js';

const ENTRY_POINTS = ['spawn', 'spawnSync', 'exec', 'execSync', 'execFile', 'execFileSync', 'fork'] as const;

/** Counts calls of every child_process entry point (named ESM imports included) until restored. */
function countSpawns(): { calls: string[]; restore: () => void } {
  const calls: string[] = [];
  const cp = childProcess as unknown as Record<string, (...args: unknown[]) => unknown>;
  const originals = new Map(ENTRY_POINTS.map((name) => [name, cp[name]]));
  for (const name of ENTRY_POINTS) {
    const original = originals.get(name);
    cp[name] = (...args: unknown[]) => {
      calls.push(`${name} ${String(args[0])}`);
      return original?.(...args);
    };
  }
  syncBuiltinESMExports();
  return {
    calls,
    restore: () => {
      for (const [name, original] of originals) if (original !== undefined) cp[name] = original;
      syncBuiltinESMExports();
    },
  };
}

describe('disks by rule spawn no process', () => {
  const cleanup = new Cleanup();
  after(() => {
    cleanup.run();
  });

  it('the inventory and the pass step, over a node of 16 disks, first pass and idle ones', async () => {
    const node = new FakeNode(makeTempDir(cleanup, 'lvp-rules-spawn-'));
    for (let i = 0; i < 16; i += 1)
      node.addDisk(`nvme${String(i)}n1`, { majorMinor: `259:${String(i)}`, sizeBytes: 2 ** 22 });
    const mountDir = join(node.root, 'discovery');
    mkdirSync(mountDir);
    const config = {
      storageClassMap: {
        fast: {
          hostDir: mountDir,
          mountDir,
          namePattern: '*',
          deviceRules: [{ mode: 'plan', types: ['disk'], allowRemovable: false, settleMs: 0 }],
        },
      },
    } as unknown as ProvisionerConfig;
    const inventory = node.inventory();
    const rules = new DeviceRules(
      config,
      { name: 'n', uid: 'u', hostname: 'n', labels: {} },
      {
        inventory,
        volumes: new LinuxVolumes(),
        links: { createLink: () => Promise.reject(new Error('nothing is written in plan mode')) },
        clock: systemClock,
        logger: new MemoryLogger(),
        events: { record: () => undefined },
        state: new DeviceRulesState(),
      },
    );
    const spawns = countSpawns();
    try {
      const first = await rules.pass([]);
      for (let i = 0; i < 3; i += 1) await rules.pass([]);
      await inventory.changeStamp();
      assert.equal(first?.verdicts.length, 16, 'every disk decided');
    } finally {
      spawns.restore();
    }
    assert.deepEqual(spawns.calls, []);
  });

  it('the counter sees a spawn (self-test)', () => {
    const spawns = countSpawns();
    try {
      childProcess.spawnSync('true');
    } finally {
      spawns.restore();
    }
    assert.deepEqual(spawns.calls, ['spawnSync true']);
  });
});
