// Discovery and PV publishing on real tmpfs/bind mounts and a loop device, against the real
// kube-apiserver: the agent (in-process) and `provisioner run` (as a process).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Agent } from '../../../src/core/agent/agent.js';
import { adoptNodeVolumes } from '../../../src/core/agent/adoption.js';
import { nodeIdentity } from '../../../src/core/agent/generation.js';
import { isNotFound } from '../../../src/core/kube/cluster.js';
import { loadKubeconfig } from '../../../src/core/kube/kubeconfig.js';
import type { PersistentVolume } from '../../../src/core/kube/objects.js';
import { RestCluster } from '../../../src/core/kube/rest-cluster.js';
import { MemoryLogger } from '../../../src/core/log.js';
import { NODE_LABEL, persistentVolumeName } from '../../../src/core/pv/naming.js';
import { CLI, REPO_ROOT } from '../../support/cli.js';
import {
  attachLoopDevice,
  bindMount,
  Cleanup,
  makeTempDir,
  mountTmpfs,
  skipUnlessRoot,
} from '../../support/real-node.js';
import { requireTestControlPlane } from '../../support/test-cluster.js';
import { eventually } from '../../support/eventually.js';
import { startLinuxAgent } from '../../support/memory-agent.js';

const MiB = 2 ** 20;
const suffix = Math.random().toString(36).slice(2, 8);
const NODE = `disc-${suffix}`;
const FAST = `disc-${suffix}-fast`;
const BLOCK = `disc-${suffix}-block`;

describe('discovery on a real node against the real apiserver', { skip: skipUnlessRoot() }, () => {
  const cleanup = new Cleanup();
  let cluster: RestCluster;
  let root = '';
  let configDir = '';
  const fastDir = (): string => join(root, 'fast');
  const blockDir = (): string => join(root, 'block');

  async function pvsOf(className: string): Promise<PersistentVolume[]> {
    const list = await cluster.persistentVolumes.list({ labelSelector: `${NODE_LABEL}=${NODE}` });
    return list.items.filter((pv) => pv.spec.storageClassName === className);
  }

  function writeConfig(extra = ''): void {
    writeFileSync(
      join(configDir, 'storageClassMap'),
      `${FAST}:\n  hostDir: /host${fastDir()}\n  mountDir: ${fastDir()}\n  fsType: ext4\n${BLOCK}:\n  hostDir: /dev/disk/by-lvp\n  mountDir: ${blockDir()}\n  volumeMode: Block\n${extra}`,
    );
    writeFileSync(join(configDir, 'nodeLabelsForPV'), '- topology.kubernetes.io/zone\n');
    writeFileSync(join(configDir, 'labelsForPV'), 'team: storage\n');
  }

  async function startAgent(): Promise<Agent> {
    return startLinuxAgent(cluster, configDir, NODE);
  }

  before(async () => {
    const plane = requireTestControlPlane();
    cluster = new RestCluster({ connection: await loadKubeconfig(plane.kubeconfigPath) });
    await cluster.nodes.create({
      metadata: {
        name: NODE,
        labels: { 'kubernetes.io/hostname': `${NODE}-host`, 'topology.kubernetes.io/zone': 'zone-a' },
      },
    });
    await cluster.storageClasses.create({
      metadata: { name: FAST },
      provisioner: 'kubernetes.io/no-provisioner',
      reclaimPolicy: 'Retain',
      mountOptions: ['noatime'],
      volumeBindingMode: 'WaitForFirstConsumer',
    });
    root = makeTempDir(cleanup, 'lvp-discovery-');
    configDir = join(root, 'config');
    for (const d of [configDir, fastDir(), blockDir()]) mkdirSync(d);
    writeConfig();
  });

  after(async () => {
    try {
      const all = await cluster.persistentVolumes.list({ labelSelector: `${NODE_LABEL}=${NODE}` });
      for (const pv of all.items) {
        await cluster.persistentVolumes
          .patch(pv.metadata.name, { metadata: { finalizers: null } })
          .catch(() => undefined);
        await cluster.persistentVolumes.delete(pv.metadata.name).catch((err: unknown) => {
          if (!isNotFound(err)) throw err;
        });
      }
      for (const sc of [FAST, BLOCK]) await cluster.storageClasses.delete(sc).catch(() => undefined);
      await cluster.nodes.delete(NODE).catch(() => undefined);
    } finally {
      cluster.close();
      cleanup.run();
    }
  });

  it('publishes a mounted directory with every PV field as upstream does, and a block device through a symlink', async () => {
    const disk = join(fastDir(), 'disk1');
    mkdirSync(disk);
    mountTmpfs(cleanup, disk, 32 * MiB);
    mkdirSync(join(fastDir(), 'plain-dir'));
    const loop = attachLoopDevice(cleanup, join(root, 'block.img'), 64 * MiB);
    symlinkSync(loop.path, join(blockDir(), 'nvme-1'));

    const agent = await startAgent();
    try {
      await agent.generation.whenReady;
      const fast = await eventually(async () => (await pvsOf(FAST))[0], 'the directory PV');
      const node = await cluster.nodes.get(NODE);
      assert.equal(fast.metadata.name, persistentVolumeName('disk1', NODE, FAST));
      assert.deepEqual(fast.metadata.labels, {
        'topology.kubernetes.io/zone': 'zone-a',
        team: 'storage',
        [NODE_LABEL]: NODE,
      });
      assert.equal(
        fast.metadata.annotations?.['pv.kubernetes.io/provisioned-by'],
        `local-volume-provisioner-${NODE}-${node.metadata.uid ?? ''}`,
      );
      assert.deepEqual(fast.spec.capacity, { storage: '32Mi' });
      assert.deepEqual(fast.spec.accessModes, ['ReadWriteOnce']);
      assert.equal(fast.spec.persistentVolumeReclaimPolicy, 'Retain');
      assert.equal(fast.spec.storageClassName, FAST);
      assert.equal(fast.spec.volumeMode, 'Filesystem');
      assert.deepEqual(fast.spec.mountOptions, ['noatime']);
      assert.deepEqual(fast.spec.local, { path: `/host${disk}`, fsType: 'ext4' });
      assert.deepEqual(fast.spec.nodeAffinity, {
        required: {
          nodeSelectorTerms: [
            { matchExpressions: [{ key: 'kubernetes.io/hostname', operator: 'In', values: [`${NODE}-host`] }] },
          ],
        },
      });

      // The block class has no StorageClass yet: a class problem, no PV, no unready pod.
      const status = agent.generation.status();
      assert.ok(status.lastPass?.classProblems.some((p) => p.className === BLOCK && p.message.includes('not found')));
      assert.equal((await pvsOf(BLOCK)).length, 0);
      assert.equal(agent.readiness().ok, true);
      // The plain directory is skipped with upstream's reason, visible in the status.
      const plain = status.lastPass?.skipped.find((s) => s.entry === 'plain-dir');
      assert.equal(plain?.reason, 'not-a-mount-point');
      assert.equal(plain.message, `path "${join(fastDir(), 'plain-dir')}" is not a valid mount point`);

      await cluster.storageClasses.create({ metadata: { name: BLOCK }, provisioner: 'kubernetes.io/no-provisioner' });
      const block = await eventually(
        async () => (await pvsOf(BLOCK))[0],
        'the block PV after its StorageClass appeared',
      );
      assert.equal(block.metadata.name, persistentVolumeName('nvme-1', NODE, BLOCK));
      assert.equal(block.spec.volumeMode, 'Block');
      assert.deepEqual(block.spec.capacity, { storage: '64Mi' });
      assert.deepEqual(block.spec.local, { path: '/dev/disk/by-lvp/nvme-1' });
      assert.equal(block.spec.persistentVolumeReclaimPolicy, 'Delete');
    } finally {
      await agent.stop();
    }
  });

  it('adopts a PV that upstream created, adding only the node label', async () => {
    const node = await cluster.nodes.get(NODE);
    const name = `disc-${suffix}-upstream`;
    await cluster.persistentVolumes.create({
      metadata: {
        name,
        annotations: {
          'pv.kubernetes.io/provisioned-by': `local-volume-provisioner-${NODE}-${node.metadata.uid ?? ''}`,
        },
      },
      spec: {
        capacity: { storage: '1Gi' },
        accessModes: ['ReadWriteOnce'],
        persistentVolumeReclaimPolicy: 'Delete',
        storageClassName: FAST,
        local: { path: '/mnt/upstream/disk' },
        nodeAffinity: {
          required: {
            nodeSelectorTerms: [
              { matchExpressions: [{ key: 'kubernetes.io/hostname', operator: 'In', values: [`${NODE}-host`] }] },
            ],
          },
        },
      },
    });
    const before = await cluster.persistentVolumes.get(name);
    const result = await adoptNodeVolumes({ cluster, logger: new MemoryLogger() }, nodeIdentity(node));
    assert.ok(result.adopted.includes(name));
    const after = await cluster.persistentVolumes.get(name);
    assert.deepEqual(after.metadata.labels, { [NODE_LABEL]: NODE });
    assert.deepEqual(after.spec, before.spec);
    assert.deepEqual(after.metadata.annotations, before.metadata.annotations);
    assert.equal(after.metadata.uid, before.metadata.uid);
  });

  it('publishes 200 volumes (bind mounts of one tmpfs)', async () => {
    const store = join(root, 'store');
    mkdirSync(store);
    mountTmpfs(cleanup, store, 256 * MiB);
    for (let i = 0; i < 200; i++) {
      mkdirSync(join(store, `v${i}`));
      const target = join(fastDir(), `bulk-${String(i).padStart(3, '0')}`);
      mkdirSync(target);
      bindMount(cleanup, join(store, `v${i}`), target);
    }
    const agent = await startAgent();
    try {
      await agent.generation.whenReady;
      const bulk = await eventually(
        async () => {
          const pvs = (await pvsOf(FAST)).filter((pv) => pv.spec.local?.path.includes('/bulk-') === true);
          return pvs.length >= 200 ? pvs : undefined;
        },
        '200 PVs',
        60_000,
      );
      assert.equal(bulk.length, 200);
      assert.equal(new Set(bulk.map((pv) => pv.spec.local?.path)).size, 200, 'one PV per path');
      for (const pv of bulk)
        assert.equal(pv.metadata.name, persistentVolumeName(pv.spec.local?.path.split('/').pop() ?? '', NODE, FAST));
    } finally {
      await agent.stop();
    }
  });

  it('`provisioner run` as a process: ready, metrics, graceful SIGTERM, its name and version in managedFields', async () => {
    const plane = requireTestControlPlane();
    // A volume only this process publishes: its PV's managedFields name the process's field manager.
    const disk = join(fastDir(), 'disk-process');
    mkdirSync(disk);
    mountTmpfs(cleanup, disk, 16 * MiB);
    const pkg = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { name: string; version: string };
    const child = spawn(
      process.execPath,
      [CLI, 'run', '--config-dir', configDir, '--listen-address', '127.0.0.1:0', '--log-format', 'json'],
      {
        env: { ...process.env, MY_NODE_NAME: NODE, KUBECONFIG: plane.kubeconfigPath },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const exited = new Promise<number | null>((resolve) =>
      child.on('exit', (code) => {
        resolve(code);
      }),
    );
    try {
      const port = await eventually(
        async () => {
          const m = /"msg":"agent started".*?"listen":"[^"]*:(\d+)"/u.exec(stderr);
          return Promise.resolve(m?.[1]);
        },
        'the agent to start',
        20_000,
      );
      await eventually(
        async () => ((await fetch(`http://127.0.0.1:${port}/ready`)).status === 200 ? true : undefined),
        'ready',
      );
      const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      assert.match(
        metrics,
        /^local_volume_provisioner_persistentvolume_capacity_bytes\{storageclass="[^"]+",mode="Filesystem"\} \d+/mu,
      );
      assert.equal((await fetch(`http://127.0.0.1:${port}/healthz`)).status, 200);
      const pv = await eventually(
        async () =>
          (await pvsOf(FAST)).find((p) => p.metadata.name === persistentVolumeName('disk-process', NODE, FAST)),
        'the PV of disk-process',
      );
      // The object's fields (not its status, which a controller manager may write) are the agent's.
      const writers = (pv.metadata.managedFields ?? [])
        .filter((f) => f.subresource === undefined)
        .map((f) => f.manager);
      assert.deepEqual(writers, [`${pkg.name}/${pkg.version}`], JSON.stringify(pv.metadata.managedFields));
    } finally {
      child.kill('SIGTERM');
    }
    assert.equal(await exited, 0, stderr);
    assert.match(stderr, /"msg":"agent stopped"/u);
  });

  it('`provisioner run`: 200 mkdir then 200 mounts raise no Warning; an entry left unmounted is reported once after the grace period', async () => {
    const plane = requireTestControlPlane();
    const store = join(root, 'burst-store');
    mkdirSync(store);
    mountTmpfs(cleanup, store, 256 * MiB);
    const child = spawn(
      process.execPath,
      [
        CLI,
        'run',
        '--config-dir',
        configDir,
        '--listen-address',
        '127.0.0.1:0',
        '--log-format',
        'json',
        '--discovery-period',
        '1h',
        // 200 mounts take a few seconds here, many more on a loaded machine: the grace period is
        // longer than the default (10 s) so the burst lands within it however slow the mounts are.
        '--mount-grace-period',
        '30s',
      ],
      {
        env: { ...process.env, MY_NODE_NAME: NODE, KUBECONFIG: plane.kubeconfigPath },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const exited = new Promise<number | null>((resolve) =>
      child.on('exit', (code) => {
        resolve(code);
      }),
    );
    const burstEvents = async (): Promise<string[]> =>
      (await cluster.events.list({ namespace: 'default' })).items
        .filter(
          (e) =>
            e.reason === 'VolumeDiscoverySkipped' && e.involvedObject.name === NODE && e.message.includes('/burst-'),
        )
        .map((e) => e.message);
    try {
      const port = await eventually(
        async () => Promise.resolve(/"msg":"agent started".*?"listen":"[^"]*:(\d+)"/u.exec(stderr)?.[1]),
        'the agent to start',
        20_000,
      );
      await eventually(
        async () => ((await fetch(`http://127.0.0.1:${port}/ready`)).status === 200 ? true : undefined),
        'ready',
      );
      // As an operator's script prepares disks: every directory made, then each mounted; one left
      // unmounted. The new entries trigger passes while the mounts are still landing.
      const target = (i: number): string => join(fastDir(), `burst-${String(i).padStart(3, '0')}`);
      const burstStarted = Date.now();
      for (let i = 0; i < 200; i++) {
        mkdirSync(join(store, `v${i}`));
        mkdirSync(target(i));
      }
      mkdirSync(join(fastDir(), 'burst-left'));
      for (let i = 0; i < 200; i++) bindMount(cleanup, join(store, `v${i}`), target(i));
      const burstMs = Date.now() - burstStarted;
      assert.ok(burstMs < 30_000, `the mounts took ${burstMs} ms, longer than the grace period: the test cannot judge`);
      await eventually(
        async () => {
          const n = (await pvsOf(FAST)).filter((pv) => pv.spec.local?.path.includes('/burst-') === true).length;
          return n >= 200 ? n : undefined;
        },
        '200 PVs of the burst',
        60_000,
      );
      const reported = await eventually(
        async () => {
          const messages = await burstEvents();
          return messages.length > 0 ? messages : undefined;
        },
        'the Warning for the entry left unmounted',
        60_000,
      );
      assert.deepEqual(
        reported.map((m) => m.split(':')[0]),
        [join(fastDir(), 'burst-left')],
        'only the entry left unmounted is reported',
      );
      const warned = stderr
        .split('\n')
        .filter((l) => l.includes('"msg":"discovery skipped an entry"') && l.includes('/burst-'));
      assert.equal(warned.length, 1, warned.join('\n'));
      assert.match(warned[0] ?? '', /burst-left/u);
    } finally {
      child.kill('SIGTERM');
    }
    assert.equal(await exited, 0, stderr);
  });
});
