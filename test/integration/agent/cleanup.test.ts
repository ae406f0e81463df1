// Cleanup and reclaim end to end: real mounts, a real loop device, the project's cleaner scripts,
// the real kube-apiserver; the agent in-process and `provisioner run` as a process.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
  chmodSync,
} from 'node:fs';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { AdminClient } from '../../../src/core/agent/admin-client.js';
import { Agent } from '../../../src/core/agent/agent.js';
import { ProcessCleaner } from '../../../src/core/cleanup/cleaner.js';
import { systemClock } from '../../../src/core/clock.js';
import { isNotFound } from '../../../src/core/kube/cluster.js';
import { loadKubeconfig } from '../../../src/core/kube/kubeconfig.js';
import type { PersistentVolume } from '../../../src/core/kube/objects.js';
import { RestCluster } from '../../../src/core/kube/rest-cluster.js';
import { MemoryLogger } from '../../../src/core/log.js';
import { LinuxVolumes } from '../../../src/core/node/linux-volumes.js';
import { NODE_LABEL, persistentVolumeName } from '../../../src/core/pv/naming.js';
import { CLI, REPO_ROOT } from '../../support/cli.js';
import { bindPersistentVolume, markJob, releasePersistentVolume } from '../../support/cluster.js';
import {
  attachLoopDevice,
  Cleanup,
  makeTempDir,
  mountTmpfs,
  readAt,
  skipUnlessRoot,
  writeAt,
} from '../../support/real-node.js';
import { adminKubeConfig, requireTestControlPlane } from '../../support/test-cluster.js';
import { eventually } from '../../support/eventually.js';
import { passesFromNow } from '../../support/passes.js';
import { runPvProtectionController } from '../../support/pv-protection.js';

const MiB = 2 ** 20;
const suffix = Math.random().toString(36).slice(2, 8);

describe('cleanup on a real node against the real apiserver', { skip: skipUnlessRoot() }, () => {
  const cleanup = new Cleanup();
  const stopController = new AbortController();
  let cluster: RestCluster;
  let root = '';

  async function setupNode(
    name: string,
    classes: string,
    extraConfig = '',
  ): Promise<{ configDir: string; classNames: string[] }> {
    await cluster.nodes.create({ metadata: { name, labels: { 'kubernetes.io/hostname': name } } });
    const classNames = [...classes.matchAll(/^(\S+):$/gmu)].map((m) => m[1] ?? '');
    for (const sc of classNames) {
      await cluster.storageClasses.create({
        metadata: { name: sc },
        provisioner: 'kubernetes.io/no-provisioner',
        reclaimPolicy: 'Delete',
      });
    }
    const configDir = join(root, `config-${name}`);
    mkdirSync(configDir);
    writeFileSync(join(configDir, 'storageClassMap'), classes);
    if (extraConfig !== '') writeFileSync(join(configDir, 'useJobForCleaning'), extraConfig);
    return { configDir, classNames };
  }

  function startAgent(nodeName: string, configDir: string, extra: { jobImage?: string } = {}): Promise<Agent> {
    return Agent.start(
      {
        configPath: configDir,
        nodeName,
        namespace: 'default',
        listenAddress: '127.0.0.1:0',
        metricsPath: '/metrics',
        discoveryPeriodMs: 300,
        changePollMs: 100,
        createConcurrency: 4,
        cleanupConcurrency: 4,
        jobImage: extra.jobImage,
        cleanupBackoff: { initialMs: 300, maxMs: 600 },
      },
      {
        cluster,
        volumes: new LinuxVolumes(),
        cleaner: new ProcessCleaner(process.env),
        clock: systemClock,
        logger: new MemoryLogger(),
      },
    );
  }

  async function pvFor(nodeName: string, entry: string, className: string): Promise<PersistentVolume> {
    const name = persistentVolumeName(entry, nodeName, className);
    return eventually(async () => {
      try {
        const pv = await cluster.persistentVolumes.get(name);
        return pv.metadata.deletionTimestamp === undefined ? pv : undefined;
      } catch (err) {
        if (isNotFound(err)) return undefined;
        throw err;
      }
    }, `PV ${name}`);
  }

  async function bindAndRelease(pv: PersistentVolume): Promise<void> {
    const kc = adminKubeConfig();
    await bindPersistentVolume(kc, pv.metadata.name, {
      namespace: 'default',
      name: `claim-${pv.metadata.name}`,
      uid: `uid-${suffix}`,
    });
    await releasePersistentVolume(kc, pv.metadata.name);
  }

  async function republished(pv: PersistentVolume, ms = 30_000): Promise<PersistentVolume> {
    return eventually(
      async () => {
        try {
          const now = await cluster.persistentVolumes.get(pv.metadata.name);
          return now.metadata.uid !== pv.metadata.uid && now.metadata.deletionTimestamp === undefined ? now : undefined;
        } catch (err) {
          if (isNotFound(err)) return undefined;
          throw err;
        }
      },
      `${pv.metadata.name} republished with a new UID`,
      ms,
    );
  }

  before(async () => {
    cluster = new RestCluster({ connection: await loadKubeconfig(requireTestControlPlane().kubeconfigPath) });
    root = makeTempDir(cleanup, 'lvp-cleanup-');
    void runPvProtectionController(cluster, stopController.signal);
  });

  after(async () => {
    stopController.abort();
    try {
      const all = await cluster.persistentVolumes.list({ labelSelector: NODE_LABEL });
      for (const pv of all.items.filter((p) => p.metadata.name.startsWith('local-pv-'))) {
        const node = pv.metadata.labels?.[NODE_LABEL] ?? '';
        if (!node.startsWith(`cl-${suffix}`)) continue;
        await cluster.persistentVolumes
          .patch(pv.metadata.name, { metadata: { finalizers: null } })
          .catch(() => undefined);
        await cluster.persistentVolumes.delete(pv.metadata.name).catch(() => undefined);
      }
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

  it('wipes a filesystem volume (hidden file, nested dirs, symlinks out, a nested mount) and republishes it with a new UID', async () => {
    const node = `cl-${suffix}-fs`;
    const disc = join(root, 'fs');
    mkdirSync(disc);
    const { configDir, classNames } = await setupNode(node, `${node}-sc:\n  hostDir: ${disc}\n  mountDir: ${disc}\n`);
    const vol = join(disc, 'vol1');
    mkdirSync(vol);
    mountTmpfs(cleanup, vol, 16 * MiB);
    const outside = join(root, 'outside');
    mkdirSync(outside);
    writeFileSync(join(outside, 'target.txt'), 'precious');
    writeFileSync(join(vol, '.hidden'), 'x');
    mkdirSync(join(vol, 'nested/a/b'), { recursive: true });
    writeFileSync(join(vol, 'nested/a/b/data.bin'), Buffer.alloc(4096, 7));
    symlinkSync(join(outside, 'target.txt'), join(vol, 'link-to-file'));
    symlinkSync(outside, join(vol, 'link-to-dir'));
    mkdirSync(join(vol, 'inner'));
    mountTmpfs(cleanup, join(vol, 'inner'), 4 * MiB);
    writeFileSync(join(vol, 'inner', 'keep.txt'), 'keep');

    const agent = await startAgent(node, configDir);
    try {
      const pv = await pvFor(node, 'vol1', classNames[0] ?? '');
      await bindAndRelease(pv);
      const again = await republished(pv);
      assert.equal(again.spec.local?.path, vol);
      assert.deepEqual(readdirSync(vol), ['inner'], 'only the nested mount point is left');
      assert.equal(readFileSync(join(vol, 'inner', 'keep.txt'), 'utf8'), 'keep', 'the nested mount is untouched');
      assert.equal(readFileSync(join(outside, 'target.txt'), 'utf8'), 'precious', "the symlink's target is untouched");
      assert.ok(existsSync(outside));
    } finally {
      await agent.stop();
    }
  });

  it('wipes a block volume on a loop device in-process with the dd_zero cleaner script', async () => {
    const node = `cl-${suffix}-blk`;
    const disc = join(root, 'blk');
    mkdirSync(disc);
    const loop = attachLoopDevice(cleanup, join(root, 'blk.img'), 16 * MiB);
    const pattern = Buffer.from('OLD-TENANT-DATA-'.repeat(256));
    writeAt(loop.path, 0, pattern);
    writeAt(loop.path, 8 * MiB, pattern);
    symlinkSync(loop.path, join(disc, 'nvme-a'));
    const { configDir, classNames } = await setupNode(
      node,
      `${node}-sc:\n  hostDir: /dev/disk/by-lvp\n  mountDir: ${disc}\n  volumeMode: Block\n  blockCleanerCommand: ["${join(REPO_ROOT, 'cleaners/dd_zero.sh')}"]\n`,
    );
    const agent = await startAgent(node, configDir);
    try {
      const pv = await pvFor(node, 'nvme-a', classNames[0] ?? '');
      assert.equal(pv.spec.volumeMode, 'Block');
      await bindAndRelease(pv);
      await republished(pv);
      assert.ok(
        readAt(loop.path, 0, pattern.length).equals(Buffer.alloc(pattern.length)),
        'start of the device zeroed',
      );
      assert.ok(
        readAt(loop.path, 8 * MiB, pattern.length).equals(Buffer.alloc(pattern.length)),
        'middle of the device zeroed',
      );
    } finally {
      await agent.stop();
    }
  });

  it('with job cleaning: creates the Job and deletes the PV only after the Job succeeded', async () => {
    const node = `cl-${suffix}-job`;
    const disc = join(root, 'job');
    mkdirSync(disc);
    const loop = attachLoopDevice(cleanup, join(root, 'job.img'), 8 * MiB);
    symlinkSync(loop.path, join(disc, 'nvme-j'));
    const { configDir, classNames } = await setupNode(
      node,
      `${node}-sc:\n  hostDir: /dev/disk/by-lvp\n  mountDir: ${disc}\n  volumeMode: Block\n`,
      'yes',
    );
    const agent = await startAgent(node, configDir, { jobImage: 'registry.example/provisioner:test' });
    try {
      const pv = await pvFor(node, 'nvme-j', classNames[0] ?? '');
      await bindAndRelease(pv);
      const jobName = `cleanup-${pv.metadata.name}`;
      const job = await eventually(
        async () => cluster.jobs.get(jobName, { namespace: 'default' }).catch(() => undefined),
        'the cleanup Job',
      );
      assert.equal(job.metadata.labels?.['pvuuid'], pv.metadata.uid);
      await passesFromNow(() => agent.status());
      assert.equal(
        (await cluster.persistentVolumes.get(pv.metadata.name)).metadata.uid,
        pv.metadata.uid,
        'PV kept while the Job runs',
      );
      await markJob(adminKubeConfig(), 'default', jobName, 'succeeded');
      await republished(pv);
      await eventually(
        async () =>
          await cluster.jobs.get(jobName, { namespace: 'default' }).then(
            () => undefined,
            (err: unknown) => (isNotFound(err) ? true : undefined),
          ),
        'the Job deleted',
      );
    } finally {
      await agent.stop();
    }
  });

  it('a failing cleaner: backoff, a VolumeFailedDelete event, and a retry that succeeds once fixed', async () => {
    const node = `cl-${suffix}-fail`;
    const disc = join(root, 'fail');
    mkdirSync(disc);
    const loop = attachLoopDevice(cleanup, join(root, 'fail.img'), 8 * MiB);
    symlinkSync(loop.path, join(disc, 'nvme-f'));
    const flag = join(root, 'fail.flag');
    const marker = join(root, 'fail.marker');
    writeFileSync(flag, '');
    const script = join(root, 'flaky-cleaner.sh');
    writeFileSync(
      script,
      `#!/bin/sh\necho "attempt on $LOCAL_PV_BLKDEVICE" >> ${marker}\nif [ -e ${flag} ]; then echo "simulated failure" >&2; exit 3; fi\n`,
    );
    chmodSync(script, 0o755);
    const { configDir, classNames } = await setupNode(
      node,
      `${node}-sc:\n  hostDir: /dev/disk/by-lvp\n  mountDir: ${disc}\n  volumeMode: Block\n  blockCleanerCommand: ["${script}"]\n`,
    );
    const agent = await startAgent(node, configDir);
    try {
      const pv = await pvFor(node, 'nvme-f', classNames[0] ?? '');
      await bindAndRelease(pv);
      await eventually(async () => {
        const events = await cluster.events.list({ namespace: 'default' });
        return events.items.some((e) => e.reason === 'VolumeFailedDelete' && e.involvedObject.name === pv.metadata.name)
          ? true
          : undefined;
      }, 'a VolumeFailedDelete event');
      await delay(1000);
      const attemptsWhileBroken = readFileSync(marker, 'utf8').trim().split('\n').length;
      assert.ok(
        attemptsWhileBroken >= 2 && attemptsWhileBroken <= 5,
        `backoff, not a retry every pass: ${attemptsWhileBroken} attempts in ~1.5 s`,
      );
      assert.equal(
        (await cluster.persistentVolumes.get(pv.metadata.name)).metadata.uid,
        pv.metadata.uid,
        'never deleted uncleaned',
      );
      rmSync(flag);
      await republished(pv);
      assert.equal(agent.cleanups.get(pv.metadata.name), undefined);
    } finally {
      await agent.stop();
    }
  });

  it('`provisioner run` killed mid-cleanup and restarted: the volume is cleaned again, and only then is the PV deleted', async () => {
    const node = `cl-${suffix}-kill`;
    const disc = join(root, 'kill');
    mkdirSync(disc);
    const loop = attachLoopDevice(cleanup, join(root, 'kill.img'), 8 * MiB);
    symlinkSync(loop.path, join(disc, 'nvme-k'));
    const hold = join(root, 'kill.hold');
    const marker = join(root, 'kill.marker');
    writeFileSync(hold, '');
    const script = join(root, 'slow-cleaner.sh');
    writeFileSync(
      script,
      `#!/bin/sh\necho start >> ${marker}\nwhile [ -e ${hold} ]; do sleep 0.05; done\necho done >> ${marker}\n`,
    );
    chmodSync(script, 0o755);
    const { configDir, classNames } = await setupNode(
      node,
      `${node}-sc:\n  hostDir: /dev/disk/by-lvp\n  mountDir: ${disc}\n  volumeMode: Block\n  blockCleanerCommand: ["${script}"]\n`,
    );
    const plane = requireTestControlPlane();
    const socket = join(root, 'kill.sock');
    const spawnAgent = (): ChildProcess =>
      spawn(
        process.execPath,
        [
          CLI,
          'run',
          '--config-dir',
          configDir,
          '--listen-address',
          '127.0.0.1:0',
          '--discovery-period',
          '300ms',
          '--admin-socket',
          socket,
        ],
        {
          env: { ...process.env, MY_NODE_NAME: node, KUBECONFIG: plane.kubeconfigPath },
          stdio: 'ignore',
        },
      );
    const lines = (): string[] => (existsSync(marker) ? readFileSync(marker, 'utf8').trim().split('\n') : []);
    let agent = spawnAgent();
    try {
      const pv = await pvFor(node, 'nvme-k', classNames[0] ?? '');
      await bindAndRelease(pv);
      await eventually(() => (lines().includes('start') ? true : undefined), 'the first cleanup to start');
      agent.kill('SIGKILL');
      await new Promise((r) => agent.on('exit', r));
      // The container dies with its agent: so do the cleaner processes it started.
      spawnSync('pkill', ['-KILL', '-f', script]);
      assert.equal((await cluster.persistentVolumes.get(pv.metadata.name)).metadata.uid, pv.metadata.uid);
      agent = spawnAgent();
      await eventually(
        () => (lines().filter((l) => l === 'start').length === 2 ? true : undefined),
        'the cleanup to start again after the restart',
      );
      const client = new AdminClient(socket, { timeoutMs: 10_000 });
      await passesFromNow(() => client.status());
      assert.equal(
        (await cluster.persistentVolumes.get(pv.metadata.name)).metadata.uid,
        pv.metadata.uid,
        'not deleted before the new cleanup finished',
      );
      rmSync(hold);
      await republished(pv);
      assert.deepEqual(lines(), ['start', 'start', 'done']);
    } finally {
      agent.kill('SIGTERM');
      await new Promise((r) => {
        if (agent.exitCode !== null) r(undefined);
        else agent.on('exit', r);
      });
      if (existsSync(hold)) rmSync(hold);
    }
  });
});
