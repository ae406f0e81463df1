// Hot reload end to end: `provisioner run` as a process against the real kube-apiserver, its config
// updated the way kubelet updates a ConfigMap volume, observed through the admin endpoint.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { basename, join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { AdminClient } from '../../../src/core/agent/admin-client.js';
import type { AgentStatusJson } from '../../../src/core/agent/reload-types.js';
import { parseConfigSnapshot } from '../../../src/core/config/decode/parse.js';
import { snapshotFromDirectoryFiles } from '../../../src/core/config/decode/layout.js';
import { isNotFound } from '../../../src/core/kube/cluster.js';
import { loadKubeconfig } from '../../../src/core/kube/kubeconfig.js';
import type { PersistentVolume } from '../../../src/core/kube/objects.js';
import { RestCluster } from '../../../src/core/kube/rest-cluster.js';
import { persistentVolumeName } from '../../../src/core/pv/naming.js';
import { CLI } from '../../support/cli.js';
import {
  bindPersistentVolume,
  markJob,
  rbacRolesFromManifests,
  releasePersistentVolume,
  tokenForServiceAccount,
} from '../../support/cluster.js';
import { writeConfigMapVolume } from '../../support/configmap-volume.js';
import { attachLoopDevice, Cleanup, makeTempDir, mountTmpfs, skipUnlessRoot } from '../../support/real-node.js';
import { adminKubeConfig, requireTestControlPlane } from '../../support/test-cluster.js';
import { eventually } from '../../support/eventually.js';
import { passesFromNow } from '../../support/passes.js';
import { runPvProtectionController } from '../../support/pv-protection.js';

const suffix = Math.random().toString(36).slice(2, 8);
const MiB = 2 ** 20;

function hashOf(dir: string, data: Record<string, string>): string {
  return parseConfigSnapshot(
    snapshotFromDirectoryFiles(
      dir,
      Object.entries(data).map(([name, text]) => ({ name, text })),
    ),
  ).hash;
}

interface RunningAgent {
  readonly child: ChildProcess;
  readonly client: AdminClient;
  readonly exited: Promise<number | null>;
  stderr(): string;
}

describe('hot reload of `provisioner run` against the real apiserver', { skip: skipUnlessRoot() }, () => {
  const cleanup = new Cleanup();
  const stopController = new AbortController();
  let cluster: RestCluster;
  let root = '';
  const agents: ChildProcess[] = [];

  function startAgent(
    name: string,
    configDir: string,
    options: { kubeconfig?: string; args?: readonly string[] } = {},
  ): RunningAgent {
    const socket = join(root, `${name}.sock`);
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
        socket,
        '--discovery-period',
        '500ms',
        '--log-format',
        'json',
        ...(options.args ?? []),
      ],
      {
        env: {
          ...process.env,
          MY_NODE_NAME: name,
          KUBECONFIG: options.kubeconfig ?? requireTestControlPlane().kubeconfigPath,
          JOB_CONTAINER_IMAGE: 'registry.example/provisioner:test',
        },
        stdio: ['ignore', 'ignore', 'pipe'],
      },
    );
    agents.push(child);
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const exited = new Promise<number | null>((resolve) =>
      child.on('exit', (code) => {
        resolve(code);
      }),
    );
    return { child, client: new AdminClient(socket, { timeoutMs: 30_000 }), exited, stderr: () => stderr };
  }

  async function ready(agent: RunningAgent): Promise<AgentStatusJson> {
    return eventually(async () => {
      if (agent.child.exitCode !== null) assert.fail(`agent exited ${String(agent.child.exitCode)}: ${agent.stderr()}`);
      const s = await agent.client.status().catch(() => undefined);
      return s?.ready === true ? s : undefined;
    }, 'the agent to be ready');
  }

  async function applied(agent: RunningAgent, hash: string): Promise<AgentStatusJson> {
    return eventually(
      async () => {
        const s = await agent.client.status();
        return s.config.appliedHash === hash ? s : undefined;
      },
      `config ${hash.slice(0, 19)} applied`,
    );
  }

  async function setupNode(name: string): Promise<void> {
    await cluster.nodes.create({ metadata: { name, labels: { 'kubernetes.io/hostname': name } } });
    await cluster.storageClasses.create({
      metadata: { name: `${name}-sc` },
      provisioner: 'kubernetes.io/no-provisioner',
      reclaimPolicy: 'Delete',
    });
  }

  before(async () => {
    cluster = new RestCluster({ connection: await loadKubeconfig(requireTestControlPlane().kubeconfigPath) });
    root = makeTempDir(cleanup, 'lvp-reload-');
    void runPvProtectionController(cluster, stopController.signal);
  });

  after(async () => {
    stopController.abort();
    for (const a of agents) if (a.exitCode === null) a.kill('SIGKILL');
    try {
      const jobs = await cluster.jobs.list({ namespace: 'default', labelSelector: 'pv' });
      for (const job of jobs.items)
        await cluster.jobs
          .delete(job.metadata.name, { namespace: 'default', propagationPolicy: 'Background' })
          .catch(() => undefined);
    } finally {
      cluster.close();
      cleanup.run();
    }
  });

  it('follows kubelet AtomicWriter updates: successive swaps, a key added and removed, an invalid edit between valid ones, 50 updates in a second', async () => {
    const node = `rl-${suffix}-aw`;
    await setupNode(node);
    const disc = join(root, 'aw-disks');
    mkdirSync(disc);
    const dir = join(root, 'aw-config');
    const cls = (extra = ''): string => `${node}-sc:\n  hostDir: ${disc}\n  mountDir: ${disc}\n${extra}`;
    await writeConfigMapVolume(dir, { storageClassMap: cls() });
    const agent = startAgent(node, dir);
    try {
      const first = await ready(agent);
      assert.equal(first.generation, 1);
      assert.equal(first.config.subPath, false);
      const steps: Record<string, string>[] = [
        { storageClassMap: cls('  fsType: ext4\n') },
        { storageClassMap: cls('  fsType: xfs\n') },
        { storageClassMap: cls('  fsType: xfs\n'), labelsForPV: 'team: storage\n' },
        { storageClassMap: cls('  fsType: xfs\n') },
      ];
      let generation = 1;
      for (const data of steps) {
        await writeConfigMapVolume(dir, data);
        const s = await applied(agent, hashOf(dir, data));
        generation += 1;
        assert.equal(s.generation, generation, 'one generation per distinct update');
      }
      // An invalid edit: rejected, the running generation stays.
      await writeConfigMapVolume(dir, { storageClassMap: cls('  namePattern: *\n') });
      const rejected = await eventually(async () => {
        const s = await agent.client.status();
        return s.rejected?.outcome === 'rejected' ? s : undefined;
      }, 'the invalid config to be rejected');
      assert.equal(rejected.generation, generation);
      assert.equal(rejected.config.appliedHash, hashOf(dir, steps[3] ?? {}));
      assert.equal(rejected.ready, true);
      const valid = { storageClassMap: cls('  fsType: ext3\n') };
      await writeConfigMapVolume(dir, valid);
      const recovered = await applied(agent, hashOf(dir, valid));
      assert.equal(recovered.rejected, undefined);
      generation = recovered.generation;
      // A burst: 50 updates within one second end with the last one applied, coalesced.
      let last: Record<string, string> = {};
      for (let i = 0; i < 50; i++) {
        last = { storageClassMap: cls(`  fsType: fs${String(i)}\n`) };
        await writeConfigMapVolume(dir, last);
        await delay(15);
      }
      const final = await applied(agent, hashOf(dir, last));
      assert.ok(
        final.generation > generation && final.generation <= generation + 50,
        `generation ${String(generation)} → ${String(final.generation)}`,
      );
      // Nothing older applied afterwards: no reload queued, and three discovery passes later
      // still the last content, in the same generation.
      await eventually(
        async () => ((await agent.client.status()).reloadPending ? undefined : true),
        'no reload queued',
      );
      await passesFromNow(() => agent.client.status());
      const settled = await agent.client.status();
      assert.equal(settled.config.appliedHash, hashOf(dir, last), 'nothing older applied afterwards');
      assert.equal(settled.generation, final.generation, 'no reload applied afterwards');
    } finally {
      agent.child.kill('SIGTERM');
      assert.equal(await agent.exited, 0, agent.stderr());
    }
  });

  it('a disk mounted right after a config swap gets the swapped config: its PV is held until the reload decides (5 trials)', async () => {
    const node = `rl-${suffix}-hold`;
    await setupNode(node);
    const disc = join(root, 'hold-disks');
    mkdirSync(disc);
    const dir = join(root, 'hold-config');
    const cls = (fsType: string): string =>
      `${node}-sc:\n  hostDir: ${disc}\n  mountDir: ${disc}\n  fsType: ${fsType}\n`;
    await writeConfigMapVolume(dir, { storageClassMap: cls('ext4') });
    const agent = startAgent(node, dir);
    try {
      await ready(agent);
      const fsTypes = ['xfs', 'ext3', 'btrfs', 'ext4', 'xfs'];
      for (const [i, fsType] of fsTypes.entries()) {
        await writeConfigMapVolume(dir, { storageClassMap: cls(fsType) });
        // the operator's next disk, mounted a moment after the edit reached the node
        await delay(10);
        const path = join(disc, `vol${String(i)}`);
        mkdirSync(path);
        mountTmpfs(cleanup, path, MiB);
        const pv = await eventually(
          async () =>
            cluster.persistentVolumes
              .get(persistentVolumeName(`vol${String(i)}`, node, `${node}-sc`))
              .catch(() => undefined),
          `the PV of ${path}`,
        );
        assert.equal(pv.spec.local?.fsType, fsType, `trial ${String(i + 1)}: the PV has the edit's fsType`);
      }
    } finally {
      agent.child.kill('SIGTERM');
      assert.equal(await agent.exited, 0, agent.stderr());
    }
  });

  it('keeps cleanups in flight across reloads: the four transitions each clean once, and delete only after the cleanup', async () => {
    const node = `rl-${suffix}-tx`;
    await setupNode(node);
    const disc = join(root, 'tx-disks');
    mkdirSync(disc);
    const markers = join(root, 'tx-markers');
    mkdirSync(markers);
    const script = join(root, 'tx-cleaner.sh');
    // One marker file per device: a line per run; waits while <device>.hold exists.
    writeFileSync(
      script,
      `#!/bin/sh\nname=$(basename "$LOCAL_PV_BLKDEVICE")\necho start >> ${markers}/$name\nwhile [ -e ${markers}/$name.hold ]; do sleep 0.05; done\necho done >> ${markers}/$name\n`,
    );
    chmodSync(script, 0o755);
    // The cleaner is given the device node the entry resolves to: markers are named after it.
    const deviceOf = new Map<string, string>();
    for (const d of ['a', 'b', 'c', 'd']) {
      const loop = attachLoopDevice(cleanup, join(root, `tx-${d}.img`), 4 * MiB);
      symlinkSync(loop.path, join(disc, `disk-${d}`));
      deviceOf.set(d, basename(loop.path));
    }
    const marker = (d: string): string => join(markers, deviceOf.get(d) ?? `disk-${d}`);
    const dir = join(root, 'tx-config');
    const config = (jobs: boolean, args = ''): Record<string, string> => ({
      storageClassMap: `${node}-sc:\n  hostDir: /dev/disk/by-lvp\n  mountDir: ${disc}\n  volumeMode: Block\n  blockCleanerCommand: ["${script}"${args}]\n`,
      useJobForCleaning: jobs ? 'yes' : 'no',
    });
    await writeConfigMapVolume(dir, config(false));
    const agent = startAgent(node, dir);
    const runs = (d: string): string[] =>
      existsSync(marker(d)) ? readFileSync(marker(d), 'utf8').trim().split('\n') : [];
    const pvOf = (d: string): Promise<PersistentVolume> =>
      cluster.persistentVolumes.get(persistentVolumeName(`disk-${d}`, node, `${node}-sc`));
    const release = async (d: string): Promise<PersistentVolume> => {
      const pv = await eventually(() => pvOf(d).catch(() => undefined), `PV of disk-${d}`);
      await bindPersistentVolume(adminKubeConfig(), pv.metadata.name, {
        namespace: 'default',
        name: `claim-${d}-${suffix}`,
      });
      await releasePersistentVolume(adminKubeConfig(), pv.metadata.name);
      return pv;
    };
    const republished = async (pv: PersistentVolume): Promise<void> => {
      await eventually(async () => {
        const now = await cluster.persistentVolumes.get(pv.metadata.name).catch((err: unknown) => {
          if (isNotFound(err)) return undefined;
          throw err;
        });
        return now !== undefined && now.metadata.uid !== pv.metadata.uid && now.metadata.deletionTimestamp === undefined
          ? true
          : undefined;
      }, `${pv.metadata.name} republished`);
    };
    const jobOf = (pv: PersistentVolume) => cluster.jobs.get(`cleanup-${pv.metadata.name}`, { namespace: 'default' });
    const reloadTo = async (data: Record<string, string>): Promise<void> => {
      await writeConfigMapVolume(dir, data);
      await applied(agent, hashOf(dir, data));
    };
    try {
      await ready(agent);
      // in-process → in-process
      writeFileSync(`${marker('a')}.hold`, '');
      const a = await release('a');
      await eventually(() => (runs('a').includes('start') ? true : undefined), 'disk-a cleanup started');
      await reloadTo(config(false, ', "again"'));
      assert.equal((await agent.client.status()).cleanups.find((c) => c.pv === a.metadata.name)?.state, 'running');
      assert.equal((await pvOf('a')).metadata.uid, a.metadata.uid, 'not deleted while cleaning');
      rmSync(`${marker('a')}.hold`);
      await republished(a);
      assert.deepEqual(runs('a'), ['start', 'done'], 'in-process → in-process: cleaned once');

      // in-process → Job
      writeFileSync(`${marker('b')}.hold`, '');
      const b = await release('b');
      await eventually(() => (runs('b').includes('start') ? true : undefined), 'disk-b cleanup started');
      await reloadTo(config(true));
      await passesFromNow(() => agent.client.status());
      await assert.rejects(jobOf(b), isNotFound, 'no Job for a volume being cleaned in-process');
      rmSync(`${marker('b')}.hold`);
      await republished(b);
      assert.deepEqual(runs('b'), ['start', 'done'], 'in-process → Job: cleaned once');

      // Job → in-process
      const c = await release('c');
      const jobC = await eventually(() => jobOf(c).catch(() => undefined), 'the cleanup Job of disk-c');
      await reloadTo(config(false));
      await passesFromNow(() => agent.client.status());
      assert.deepEqual(runs('c'), [], 'Job → in-process: no in-process cleanup');
      assert.equal((await pvOf('c')).metadata.uid, c.metadata.uid, 'not deleted before the Job succeeded');
      await markJob(adminKubeConfig(), 'default', jobC.metadata.name, 'succeeded');
      await republished(c);
      assert.deepEqual(runs('c'), []);

      // Job → Job
      await reloadTo(config(true));
      const d = await release('d');
      const jobD = await eventually(() => jobOf(d).catch(() => undefined), 'the cleanup Job of disk-d');
      await reloadTo(config(true, ', "again"'));
      await passesFromNow(() => agent.client.status());
      assert.equal((await jobOf(d)).metadata.uid, jobD.metadata.uid, 'Job → Job: the same Job');
      await markJob(adminKubeConfig(), 'default', jobD.metadata.name, 'succeeded');
      await republished(d);
      assert.deepEqual(runs('d'), []);
    } finally {
      agent.child.kill('SIGTERM');
      assert.equal(await agent.exited, 0, agent.stderr());
    }
  });

  it('rolls back when the new generation cannot start (no Jobs RBAC), and stops cleanly on SIGTERM in the middle of a reload', async () => {
    const node = `rl-${suffix}-rb`;
    await setupNode(node);
    const roles = rbacRolesFromManifests(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: lvp-test-no-jobs-${suffix}
rules:
- apiGroups: [""]
  resources: [persistentvolumes]
  verbs: [get, list, watch, create, delete, patch, update]
- apiGroups: [storage.k8s.io]
  resources: [storageclasses]
  verbs: [get, list, watch]
- apiGroups: [""]
  resources: [nodes]
  verbs: [get, update]
- apiGroups: ["", events.k8s.io]
  resources: [events]
  verbs: [create, update, patch]
`);
    const access = await tokenForServiceAccount(adminKubeConfig(), 'default', `lvp-no-jobs-${suffix}`, ...roles);
    const plane = requireTestControlPlane();
    const kubeconfig = join(root, 'no-jobs.kubeconfig');
    writeFileSync(
      kubeconfig,
      `apiVersion: v1\nkind: Config\nclusters: [{name: t, cluster: {server: "${plane.server}", certificate-authority: "${plane.caFile}"}}]\nusers: [{name: u, user: {token: "${access.token}"}}]\ncontexts: [{name: c, context: {cluster: t, user: u}}]\ncurrent-context: c\n`,
    );
    const disc = join(root, 'rb-disks');
    mkdirSync(disc);
    const dir = join(root, 'rb-config');
    const base = { storageClassMap: `${node}-sc:\n  hostDir: ${disc}\n  mountDir: ${disc}\n` };
    await writeConfigMapVolume(dir, base);
    const agent = startAgent(node, dir, { kubeconfig, args: ['--start-timeout', '2s'] });
    try {
      await ready(agent);
      await writeConfigMapVolume(dir, { ...base, useJobForCleaning: 'yes' });
      const rolledBack = await eventually(async () => {
        const s = await agent.client.status();
        return s.rejected?.outcome === 'rolled-back' ? s : undefined;
      }, 'the rollback');
      assert.match(rolledBack.rejected?.error ?? '', /jobs: .*forbidden/u);
      assert.equal(rolledBack.config.appliedHash, hashOf(dir, base));
      await eventually(
        async () => ((await agent.client.status()).ready ? true : undefined),
        'ready again after the rollback',
      );
      // Another slow reload, and SIGTERM while it waits for the new generation: once that
      // generation's Job list was refused again (its log line), before its start times out.
      const refusals = (): number => agent.stderr().match(/jobs[^\n]*forbidden/gu)?.length ?? 0;
      const refusedBefore = refusals();
      let answered = false;
      const slow = agent.client
        .reload({ force: true })
        .catch(() => undefined)
        .finally(() => (answered = true));
      await eventually(
        () => Promise.resolve(refusals() > refusedBefore ? true : undefined),
        'the Job list refused again',
      );
      assert.equal(answered, false, 'the reload still waits for its generation');
      agent.child.kill('SIGTERM');
      assert.equal(await agent.exited, 0, agent.stderr());
      await slow;
      assert.match(agent.stderr(), /"msg":"agent stopped"/u);
      assert.equal(readdirSync(root).includes(`${node}.sock`), false, 'the admin socket is removed');
    } finally {
      if (agent.child.exitCode === null) agent.child.kill('SIGKILL');
      await access.cleanup();
    }
  });

  it('1,000 reloads leave no open files, handles or watches behind', async () => {
    const node = `rl-${suffix}-k`;
    await setupNode(node);
    const disc = join(root, 'k-disks');
    mkdirSync(disc);
    const dir = join(root, 'k-config');
    await writeConfigMapVolume(dir, { storageClassMap: `${node}-sc:\n  hostDir: ${disc}\n  mountDir: ${disc}\n` });
    const agent = startAgent(node, dir);
    const fds = (): number => readdirSync(`/proc/${String(agent.child.pid)}/fd`).length;
    const handles = (s: AgentStatusJson): number =>
      Object.values(s.diagnostics?.activeResources ?? {}).reduce((a, b) => a + b, 0);
    try {
      await ready(agent);
      for (let i = 0; i < 20; i++) await agent.client.reload({ force: true });
      await passesFromNow(() => agent.client.status(), 2);
      const before = await agent.client.status();
      const fdsBefore = fds();
      for (let i = 0; i < 1000; i++) {
        const r = await agent.client.reload({ force: true });
        assert.equal(r.outcome, 'applied');
      }
      // The stopped generations' requests end and their handles close: flat again within 10 s
      // (the assertions below say by how much when not).
      let after = await agent.client.status();
      let fdsAfter = fds();
      await eventually(
        async () => {
          after = await agent.client.status();
          fdsAfter = fds();
          return fdsAfter <= fdsBefore + 3 && handles(after) <= handles(before) + 3 ? true : undefined;
        },
        'open files and handles flat again',
        10_000,
      ).catch(() => undefined);
      assert.ok(fdsAfter <= fdsBefore + 3, `open files ${String(fdsBefore)} → ${String(fdsAfter)}`);
      assert.ok(
        handles(after) <= handles(before) + 3,
        `handles ${JSON.stringify(before.diagnostics?.activeResources)} → ${JSON.stringify(after.diagnostics?.activeResources)}`,
      );
      assert.equal(after.generation, before.generation + 1000);
      assert.equal(after.ready, true);
    } finally {
      agent.child.kill('SIGTERM');
      assert.equal(await agent.exited, 0, agent.stderr());
    }
  });
});
