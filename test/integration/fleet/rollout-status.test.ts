// Per-node applied state and `rollout status` end to end: two real agents (`provisioner run`
// processes, node names from MY_NODE_NAME) publish their status Leases to the real apiserver;
// `provisioner rollout status --wait` runs as a process and gates on them.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { parseConfigSnapshot } from '../../../src/core/config/decode/parse.js';
import { snapshotFromDirectoryFiles } from '../../../src/core/config/decode/layout.js';
import { stateFromLease, statusLeaseName, statusSelector } from '../../../src/core/fleet/applied-state.js';
import { loadKubeconfig } from '../../../src/core/kube/kubeconfig.js';
import { RestCluster } from '../../../src/core/kube/rest-cluster.js';
import type { RolloutJson } from '../../../src/render/rollout-status.js';
import { CLI, runCli, stopChildren } from '../../support/cli.js';
import { writeConfigMapVolume } from '../../support/configmap-volume.js';
import { eventually } from '../../support/eventually.js';
import { Cleanup, makeTempDir } from '../../support/real-node.js';
import { requireTestControlPlane } from '../../support/test-cluster.js';

const suffix = Math.random().toString(36).slice(2, 8);
const NAMESPACE = 'default';
const INSTANCE = `lvp-ro-${suffix}`;
const POOL_LABEL = 'lvp-rollout-test';

void describe('rollout status against real agents and the real apiserver', () => {
  const cleanup = new Cleanup();
  const children: ChildProcess[] = [];
  const nodeA = `ro-a-${suffix}`;
  const nodeB = `ro-b-${suffix}`;
  const nodeC = `ro-c-${suffix}`;
  let cluster: RestCluster;
  let root = '';
  let kubeconfig = '';
  const stderr = new Map<string, string>();

  /** storageClassMap with one class per entry: name → hostDir (mountDir the same). */
  function config(classes: Readonly<Record<string, string>>): Record<string, string> {
    const body = Object.entries(classes)
      .map(([name, dir]) => `${name}:\n  hostDir: ${dir}\n  mountDir: ${dir}\n`)
      .join('');
    return { storageClassMap: body };
  }
  function hashOf(data: Record<string, string>): string {
    return parseConfigSnapshot(
      snapshotFromDirectoryFiles(
        '/x',
        Object.entries(data).map(([name, text]) => ({ name, text })),
      ),
    ).hash;
  }
  const dir = (name: string): string => {
    const path = join(root, name);
    mkdirSync(path, { recursive: true });
    return path;
  };

  function startAgent(node: string, configDir: string): ChildProcess {
    const child = spawn(
      process.execPath,
      [
        CLI,
        'run',
        '--config-dir',
        configDir,
        '--listen-address',
        '127.0.0.1:0',
        '--admin-socket',
        join(root, `${node}.sock`),
        '--discovery-period',
        '1s',
        '--config-sync-period',
        '500ms',
        '--status-name',
        INSTANCE,
        '--log-format',
        'json',
      ],
      {
        env: { ...process.env, MY_NODE_NAME: node, MY_NAMESPACE: NAMESPACE, KUBECONFIG: kubeconfig },
        stdio: ['ignore', 'ignore', 'pipe'],
      },
    );
    children.push(child);
    stderr.set(node, '');
    child.stderr.setEncoding('utf8').on('data', (d: string) => stderr.set(node, (stderr.get(node) ?? '') + d));
    return child;
  }

  async function publishedHash(node: string): Promise<string | undefined> {
    const lease = await cluster.leases
      .get(statusLeaseName(INSTANCE, node), { namespace: NAMESPACE })
      .catch(() => undefined);
    return lease === undefined ? undefined : stateFromLease(lease)?.appliedHash;
  }

  const rollout = (args: readonly string[]): ReturnType<typeof runCli> =>
    runCli(
      ['rollout', 'status', '-n', NAMESPACE, '--name', INSTANCE, '--selector', `${POOL_LABEL}=${suffix}`, ...args],
      { env: { KUBECONFIG: kubeconfig }, timeoutMs: 90_000 },
    );

  const cfgA = (): string => join(root, 'config-a');
  const cfgB = (): string => join(root, 'config-b');
  let x0: Record<string, string> = {};
  let x1: Record<string, string> = {};

  before(async () => {
    const plane = requireTestControlPlane();
    kubeconfig = plane.kubeconfigPath;
    cluster = new RestCluster({ connection: await loadKubeconfig(kubeconfig) });
    root = makeTempDir(cleanup, 'lvp-rollout-');
    for (const node of [nodeA, nodeB]) {
      await cluster.nodes.create({
        metadata: { name: node, labels: { 'kubernetes.io/hostname': node, [POOL_LABEL]: suffix } },
      });
    }
    x0 = config({ c: dir('disks-c') });
    x1 = config({ c: dir('disks-c'), d: dir('disks-d') });
    await writeConfigMapVolume(cfgA(), x0);
    await writeConfigMapVolume(cfgB(), x0);
    startAgent(nodeA, cfgA());
    startAgent(nodeB, cfgB());
    const h0 = hashOf(x0);
    await eventually(
      async () => ((await publishedHash(nodeA)) === h0 && (await publishedHash(nodeB)) === h0 ? true : undefined),
      `both agents publish ${h0}; agent logs: ${[...stderr.values()].join('\n').slice(-2000)}`,
      30_000,
    );
  });

  after(async () => {
    await stopChildren(children);
    const leases = await cluster.leases.list({ namespace: NAMESPACE, labelSelector: statusSelector(INSTANCE) });
    for (const lease of leases.items) await cluster.leases.delete(lease.metadata.name, { namespace: NAMESPACE });
    for (const node of [nodeA, nodeB, nodeC]) await cluster.nodes.delete(node).catch(() => undefined);
    cluster.close();
    cleanup.run();
  });

  void it('each agent publishes a Lease kubectl can read: node, hash, generation, result, source, version, heartbeat', async () => {
    const lease = await cluster.leases.get(statusLeaseName(INSTANCE, nodeA), { namespace: NAMESPACE });
    const annotations = lease.metadata.annotations ?? {};
    assert.equal(annotations['local-static-provisioner/node'], nodeA);
    assert.equal(annotations['local-static-provisioner/applied-hash'], hashOf(x0));
    assert.equal(annotations['local-static-provisioner/generation'], '1');
    assert.equal(annotations['local-static-provisioner/last-result'], 'started');
    assert.equal(annotations['local-static-provisioner/source'], cfgA());
    assert.match(annotations['local-static-provisioner/agent-version'] ?? '', /^\d+\.\d+\.\d+/);
    assert.equal(lease.spec?.holderIdentity, nodeA);
    assert.equal(lease.spec.leaseDurationSeconds, 180);
    assert.ok(Date.now() - Date.parse(lease.spec.renewTime ?? '') < 60_000, 'a fresh heartbeat');
  });

  void it('--wait exits 0 once every node applies the desired config', async () => {
    const desiredDir = join(root, 'desired-1');
    await writeConfigMapVolume(desiredDir, x1);
    // Started before the agents see the change: it must wait for it.
    const waiting = rollout(['--config', desiredDir, '--wait', '--timeout', '60s', '-o', 'json']);
    await new Promise((r) => setTimeout(r, 1500));
    await writeConfigMapVolume(cfgA(), x1);
    await writeConfigMapVolume(cfgB(), x1);
    const result = await waiting;
    assert.equal(result.code, 0, result.stdout + result.stderr);
    const json = JSON.parse(result.stdout) as RolloutJson;
    assert.equal(json.verdict, 'complete');
    assert.equal(json.timedOut, false);
    assert.equal(json.desired.hash, hashOf(x1));
    assert.deepEqual(
      json.nodes.map((n) => [n.node, n.state, n.lastResult]),
      [
        [nodeA, 'in-sync', 'applied'],
        [nodeB, 'in-sync', 'applied'],
      ],
    );
    assert.match(result.stderr, /waiting: in sync [01]\/2/, 'progress while it waited');
  });

  void it('--wait exits 1 when a node rejects the desired config, naming the node and the reason', async () => {
    // Only node B reads the new config, which moves class c's discovery directory: its reload
    // guard refuses it (it would orphan PVs). Node A has not read it: pending.
    const x2 = config({ c: dir('disks-c2'), d: dir('disks-d') });
    await writeConfigMapVolume(cfgB(), x2);
    const desiredDir = join(root, 'desired-2');
    await writeConfigMapVolume(desiredDir, x2);
    const result = await rollout(['--config', desiredDir, '--wait', '--timeout', '60s']);
    assert.equal(result.code, 1, result.stdout + result.stderr);
    assert.match(result.stdout, /^rollout rejected: 1 of 2 nodes rejected/);
    const row = result.stdout.split('\n').find((l) => l.startsWith(nodeB)) ?? '';
    assert.match(
      row,
      /rejected +refused: a live reload that would orphan existing PVs \(storageClassMap\.c\.hostDir\)/,
    );
    const rowA = result.stdout.split('\n').find((l) => l.startsWith(nodeA)) ?? '';
    assert.match(rowA, /pending/);
    // Without --wait the same answer at once.
    const now = await rollout(['--config', desiredDir, '-o', 'json']);
    assert.equal(now.code, 1);
    const json = JSON.parse(now.stdout) as RolloutJson;
    const b = json.nodes.find((n) => n.node === nodeB);
    assert.equal(b?.state, 'rejected');
    assert.equal(b.lastResult, 'refused');
    assert.equal(b.candidateHash, hashOf(x2));
    assert.equal(b.appliedHash, hashOf(x1), 'node B keeps serving the previous config');
  });

  void it('--wait exits 6 at the timeout while a node is pending or has no agent', async () => {
    await cluster.nodes.create({
      metadata: { name: nodeC, labels: { 'kubernetes.io/hostname': nodeC, [POOL_LABEL]: suffix } },
    });
    const desiredDir = join(root, 'desired-1b');
    await writeConfigMapVolume(desiredDir, x1);
    const started = Date.now();
    const result = await rollout(['--config', desiredDir, '--wait', '--timeout', '2s']);
    assert.equal(result.code, 6, result.stdout + result.stderr);
    assert.ok(Date.now() - started >= 2000);
    assert.match(result.stdout, /^rollout timed out: 2 of 3 nodes apply/);
    assert.match(result.stdout.split('\n').find((l) => l.startsWith(nodeC)) ?? '', /missing agent/);
    // A desired config that does not exist: exit 4; an invalid one: exit 3.
    const missing = await rollout(['--configmap', `${NAMESPACE}/no-such-${suffix}`]);
    assert.equal(missing.code, 4, missing.stderr);
    assert.match(missing.stderr, /configmap default\/no-such-\w+ does not exist/);
    const bad = join(root, 'desired-bad');
    await writeConfigMapVolume(bad, { storageClassMap: 'c: [' });
    const invalid = await rollout(['--config', bad]);
    assert.equal(invalid.code, 3, invalid.stderr);
  });
});
