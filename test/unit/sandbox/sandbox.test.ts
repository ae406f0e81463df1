// The sandbox module alone (src/core/sandbox): what `provisioner run --sandbox DIR` gets from one
// openSandbox call, and how it follows the agent once attached. The CLI's own story is
// test/unit/cli/sandbox.test.ts.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { after, describe, it } from 'node:test';
import type { AgentEvent, ReloadOutcome, ReloadResult } from '../../../src/core/agent/reload-types.js';
import type { ProvisionerConfig } from '../../../src/core/config/model.js';
import { parseConfigSnapshot } from '../../../src/core/config/decode/parse.js';
import { readConfigSnapshot } from '../../../src/core/config/source/load.js';
import { LinuxVolumes } from '../../../src/core/node/linux-volumes.js';
import { KubeApiError } from '../../../src/core/kube/cluster.js';
import {
  openSandbox,
  SANDBOX_EVENT_LIMIT,
  SANDBOX_HISTORY_LIMIT,
  SANDBOX_NODE,
  type SandboxAgent,
} from '../../../src/core/sandbox/sandbox.js';
import { waitFor } from '../../support/eventually.js';
import { localPersistentVolume } from '../../support/persistent-volume.js';

const roots: string[] = [];
after(() => {
  for (const root of roots) rmSync(root, { recursive: true, force: true });
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'lvp-sandbox-module-'));
  roots.push(dir);
  return dir;
}

async function sandboxMounts(volumes: { mountPoints(): Promise<readonly { mountPoint: string; fsType: string }[]> }) {
  return (await volumes.mountPoints())
    .filter((m) => m.fsType === 'sandbox')
    .map((m) => m.mountPoint)
    .sort();
}

/** Waits for probe to hold, for at most 5 s. */
function eventually(probe: () => Promise<boolean>, what: string): Promise<void> {
  return waitFor(probe, what, 5000);
}

/** A stand-in for the started agent: the config it applies, and its event stream. */
class FakeAgent implements SandboxAgent {
  readonly listeners = new Set<(event: AgentEvent) => void>();
  constructor(public config: ProvisionerConfig) {}
  appliedConfig(): { config: ProvisionerConfig } {
    return { config: this.config };
  }
  subscribe(listener: (event: AgentEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
  /** Emits what the agent emits after it applied a reload to `config`. */
  applied(config: ProvisionerConfig, outcome: ReloadOutcome = 'applied'): void {
    if (outcome === 'applied') this.config = config;
    const result: ReloadResult = {
      outcome,
      trigger: 'fs',
      forced: false,
      generation: 2,
      appliedHash: 'sha256:test',
      changes: [],
      issues: [],
      startedAt: 0,
      durationMs: 0,
    };
    for (const listener of this.listeners) listener({ type: 'reload', at: 0, result });
  }
}

describe('openSandbox', () => {
  it('lays out DIR and builds the cluster (Node, StorageClasses), the node and the agent options at once', async () => {
    const dir = tempDir();
    const sandbox = await openSandbox({
      dir,
      configPath: undefined,
      adminSocket: undefined,
      nodeName: '',
      node: new LinuxVolumes(),
    });
    const disks = join(dir, 'disks');
    assert.deepEqual(sandbox.layout, {
      root: dir,
      configDir: join(dir, 'config'),
      disksDir: disks,
      adminSocket: join(dir, 'admin.sock'),
    });
    assert.equal(sandbox.agentOptions.configPath, join(dir, 'config'));
    assert.equal(sandbox.agentOptions.nodeName, SANDBOX_NODE);
    assert.equal(sandbox.agentOptions.adminSocket, join(dir, 'admin.sock'));

    const node = await sandbox.cluster.nodes.get(SANDBOX_NODE);
    assert.equal(node.metadata.labels?.['kubernetes.io/hostname'], SANDBOX_NODE);
    const classes = await sandbox.cluster.storageClasses.list();
    assert.deepEqual(
      classes.items.map((c) => [c.metadata.name, c.provisioner, c.volumeBindingMode]),
      [['local-storage', 'kubernetes.io/no-provisioner', 'WaitForFirstConsumer']],
    );
    // The sample config's discovery directory holds vol1 and vol2: each counts as a mounted disk.
    assert.deepEqual(await sandboxMounts(sandbox.volumes), [
      join(disks, 'local-storage', 'vol1'),
      join(disks, 'local-storage', 'vol2'),
    ]);

    const loaded = parseConfigSnapshot(await readConfigSnapshot(join(dir, 'config')));
    assert.deepEqual(sandbox.agentOptions.configCheck(loaded), []);
    // A class outside the disks directory is refused where its mountDir is written (file:line:column).
    const elsewhere = join(tempDir(), 'config');
    mkdirSync(elsewhere);
    writeFileSync(join(elsewhere, 'storageClassMap'), 'x:\n  hostDir: /etc\n  mountDir: /etc\n');
    const outside = parseConfigSnapshot(await readConfigSnapshot(elsewhere));
    const [issue, ...more] = sandbox.agentOptions.configCheck(outside);
    assert.deepEqual(more, []);
    assert.equal(issue?.path, 'storageClassMap.x.mountDir');
    assert.match(issue.message, /outside the sandbox's disks directory/u);
    assert.deepEqual(issue.position, { file: join(elsewhere, 'storageClassMap'), line: 3, column: 13 });
  });

  it("keeps the user's config source, admin socket and node name", async () => {
    const dir = tempDir();
    const configDir = join(tempDir(), 'my-config');
    const discovery = join(dir, 'disks', 'fast');
    mkdirSync(join(discovery, 'd1'), { recursive: true });
    mkdirSync(configDir);
    writeFileSync(join(configDir, 'storageClassMap'), `fast:\n  hostDir: ${discovery}\n  mountDir: ${discovery}\n`);
    const sandbox = await openSandbox({
      dir,
      configPath: configDir,
      adminSocket: join(dir, 'other.sock'),
      nodeName: 'worker-1',
      node: new LinuxVolumes(),
    });
    assert.equal(sandbox.agentOptions.configPath, configDir);
    assert.equal(sandbox.agentOptions.adminSocket, join(dir, 'other.sock'));
    assert.equal(sandbox.agentOptions.nodeName, 'worker-1');
    await sandbox.cluster.nodes.get('worker-1');
    assert.deepEqual(
      (await sandbox.cluster.storageClasses.list()).items.map((c) => c.metadata.name),
      ['fast'],
    );
    assert.deepEqual(await sandboxMounts(sandbox.volumes), [join(discovery, 'd1')]);
  });

  it('once attached, follows the applied config: its disks, and a StorageClass per new class', async () => {
    const dir = tempDir();
    const sandbox = await openSandbox({
      dir,
      configPath: undefined,
      adminSocket: undefined,
      nodeName: '',
      node: new LinuxVolumes(),
    });
    const initial = parseConfigSnapshot(await readConfigSnapshot(join(dir, 'config'))).config;
    const agent = new FakeAgent(initial);
    const detach = sandbox.attach(agent);

    const fast = join(dir, 'disks', 'fast');
    mkdirSync(join(fast, 'nvme0'), { recursive: true });
    writeFileSync(join(dir, 'config', 'storageClassMap'), `fast:\n  hostDir: ${fast}\n  mountDir: ${fast}\n`);
    const next = parseConfigSnapshot(await readConfigSnapshot(join(dir, 'config'))).config;
    // A reload that did not apply changes nothing.
    agent.applied(next, 'rejected');
    await delay(50);
    assert.deepEqual(
      (await sandbox.cluster.storageClasses.list()).items.map((c) => c.metadata.name),
      ['local-storage'],
    );
    assert.deepEqual(await sandboxMounts(sandbox.volumes), [
      join(dir, 'disks', 'local-storage', 'vol1'),
      join(dir, 'disks', 'local-storage', 'vol2'),
    ]);
    agent.applied(next);
    await eventually(
      async () => (await sandbox.cluster.storageClasses.list()).items.some((c) => c.metadata.name === 'fast'),
      'the StorageClass of the new class',
    );
    assert.deepEqual(await sandboxMounts(sandbox.volumes), [join(fast, 'nvme0')]);

    detach();
    assert.equal(agent.listeners.size, 0);
  });

  it('once attached, moves a new unclaimed PV to Available as the PV controller does; a claimed one and one after detach stay as written', async () => {
    const dir = tempDir();
    const sandbox = await openSandbox({
      dir,
      configPath: undefined,
      adminSocket: undefined,
      nodeName: '',
      node: new LinuxVolumes(),
    });
    const pvs = sandbox.cluster.persistentVolumes;
    const pv = (name: string, claimed = false): Parameters<typeof pvs.create>[0] => {
      const base = localPersistentVolume(name, {}, SANDBOX_NODE);
      return claimed ? { ...base, spec: { ...base.spec, claimRef: { namespace: 'default', name: 'c' } } } : base;
    };
    await pvs.create(pv('before-attach'));
    const detach = sandbox.attach(
      new FakeAgent(parseConfigSnapshot(await readConfigSnapshot(join(dir, 'config'))).config),
    );
    await pvs.create(pv('after-attach'));
    await pvs.create(pv('claimed', true));
    await eventually(async () => {
      const phases = await Promise.all(
        ['before-attach', 'after-attach'].map(async (n) => (await pvs.get(n)).status?.phase),
      );
      return phases.every((p) => p === 'Available');
    }, 'both unclaimed PVs Available');
    assert.equal((await pvs.get('claimed')).status?.phase, 'Pending', 'claimed: binding is not the sandbox’s job');
    detach();
    // its PV watch closed: nothing is left to move a PV created now
    await eventually(() => Promise.resolve(sandbox.cluster.activeWatches === 0), 'the PV watch closed on detach');
    await pvs.create(pv('after-detach'));
    assert.equal((await pvs.get('after-detach')).status?.phase, 'Pending', 'nothing runs after detach');
  });

  it('keeps the newest Events and a bounded change history: the cluster lives in the agent process', async () => {
    const sandbox = await openSandbox({
      dir: tempDir(),
      configPath: undefined,
      adminSocket: undefined,
      nodeName: '',
      node: new LinuxVolumes(),
    });
    const start = sandbox.cluster.resourceVersion;
    // More Events than it keeps (each applied reload records one on the Node), and more changes
    // than its history holds.
    for (let i = 0; i < SANDBOX_HISTORY_LIMIT; i++) {
      await sandbox.cluster.events.create(
        {
          metadata: { name: `ev-${String(i)}`, namespace: 'default' },
          involvedObject: { kind: 'Node', name: SANDBOX_NODE },
          reason: 'ConfigApplied',
          message: `generation ${String(i)}`,
          type: 'Normal',
        },
        { namespace: 'default' },
      );
    }
    const events = await sandbox.cluster.events.list({ namespace: 'default' });
    assert.equal(events.items.length, SANDBOX_EVENT_LIMIT);
    assert.equal(events.items[0]?.metadata.name, `ev-${String(SANDBOX_HISTORY_LIMIT - SANDBOX_EVENT_LIMIT)}`);
    // The changes of the start are compacted away: a watch from there relists (410), as after etcd compaction.
    const watch = sandbox.cluster.events.watch({ resourceVersion: start, signal: AbortSignal.timeout(1000) });
    await assert.rejects(
      watch[Symbol.asyncIterator]().next(),
      (err: unknown) => err instanceof KubeApiError && err.status === 410,
    );
  });
});
