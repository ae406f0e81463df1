// A scenario's steps, each carried out alone against a small world: what it changes, what it asks
// of the runner (a reload, a restart) and what it reports, and how a step that cannot be carried
// out fails.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { ReloadRequest } from '../../../src/core/agent/reload-types.js';
import { ManualClock } from '../../../src/core/clock.js';
import type { ProvisionerConfig } from '../../../src/core/config/model.js';
import { loadConfig } from '../../../src/core/config/source/load.js';
import { MemoryCluster } from '../../../src/core/kube/memory/memory-cluster.js';
import { MemoryVolumes } from '../../../src/core/node/memory-volumes.js';
import { ConfigFiles } from '../../../src/core/simulate/config-files.js';
import { Disks } from '../../../src/core/simulate/disks.js';
import { SimulatedDevices } from '../../../src/core/simulate/devices.js';
import { parseScenario } from '../../../src/core/simulate/scenario.js';
import type { Step } from '../../../src/core/simulate/scenario.js';
import { ScriptedCleaner } from '../../../src/core/simulate/stand-ins.js';
import { applyStep } from '../../../src/core/simulate/steps.js';
import type { StepWorld } from '../../../src/core/simulate/steps.js';

const fail = (text: string): never => {
  throw new Error(text);
};

function steps(text: string): readonly Step[] {
  const yaml = `name: t\nconfig: { storageClassMap: { fast: { hostDir: /mnt/fast, mountDir: /mnt/fast } } }\nsteps:\n${text}`;
  return parseScenario('s.yaml', yaml, { baseDir: '/' }).steps;
}

describe('simulate: steps, one at a time', () => {
  let dir = '';
  let world: StepWorld;
  const asked: string[] = [];
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'lvp-sim-steps-'));
    const configFiles = new ConfigFiles(dir);
    await configFiles.write(
      { kind: 'inline', keys: { storageClassMap: { fast: { hostDir: '/mnt/fast', mountDir: '/mnt/fast' } } } },
      fail,
    );
    const config: ProvisionerConfig = (await loadConfig(configFiles.path)).config;
    const clock = new ManualClock(0);
    const volumes = new MemoryVolumes();
    volumes.addDirectory('/mnt/fast');
    const cluster = new MemoryCluster({ clock });
    world = {
      cluster,
      disks: new Disks({ volumes, cluster, nodeName: 'node-a', config: () => config }),
      devices: new SimulatedDevices(volumes),
      configFiles,
      cleaner: new ScriptedCleaner(clock),
      clock,
      namespace: 'jobs',
      ensureClassesFor: () => Promise.resolve(),
      reload: (request: ReloadRequest) => {
        asked.push(
          `reload ${request.trigger}${request.force === true ? ' force' : ''} ${(request.allow ?? []).join(',')}`,
        );
        return Promise.resolve();
      },
      restartAgent: () => {
        asked.push('restart');
        return Promise.resolve();
      },
      rebuildNode: () => {
        asked.push('rebuild');
        return Promise.resolve({ node: 'node-a', previousUid: 'uid-1', uid: 'uid-2' });
      },
    };
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('each step reports what it did as data, and asks the runner for reloads and restarts', async () => {
    const all = steps(
      [
        '  - disk added: { name: disk1, class: fast, capacity: 1Gi }',
        '  - cleanup is slow: { volume: disk1, duration: 1m }',
        '  - cleanup fails: { volume: disk1, message: boom }',
        '  - config changed: { useJobForCleaning: true }',
        '  - reload requested: { allow: [orphans-pvs], force: true }',
        '  - agent restarted',
        '  - time passes: 5s',
        '  - disk removed: fast/disk1',
        '',
      ].join('\n'),
    );
    const outcomes = [];
    for (const step of all) outcomes.push(await applyStep(step, world, fail));
    assert.deepEqual(outcomes, [
      {
        type: 'disk added',
        volume: 'fast/disk1',
        path: '/mnt/fast/disk1',
        entryType: 'directory',
        mounted: true,
        capacity: 2 ** 30,
      },
      { type: 'cleanup is slow', volume: 'fast/disk1', durationMs: 60_000, then: 'succeed' },
      { type: 'cleanup fails', volume: 'fast/disk1', message: 'boom', finishedRunning: false },
      { type: 'config changed', config: { kind: 'inline', keys: ['useJobForCleaning'] } },
      { type: 'reload requested', allow: ['orphans-pvs'], force: true },
      { type: 'agent restarted' },
      { type: 'time passes', durationMs: 5_000 },
      { type: 'disk removed', volume: 'fast/disk1', path: '/mnt/fast/disk1' },
    ]);
    assert.deepEqual(asked, ['reload fs ', 'reload admin force orphans-pvs', 'restart']);
  });

  it('a step that names nothing there fails with the reason', async () => {
    const [claim, job] = steps('  - claim bound: disk7\n  - job succeeds: fast/disk8\n');
    assert.ok(claim && job);
    await assert.rejects(applyStep(claim, world, fail), /no volume named "disk7"/u);
    await assert.rejects(
      applyStep(job, world, fail),
      /^Error: no cleanup Job cleanup-local-pv-[0-9a-f]{8} in namespace jobs \(is useJobForCleaning on, and the volume Block\?\)$/u,
    );
  });
});
