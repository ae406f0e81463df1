// Recycle benchmark: 100 filesystem volumes (bind mounts of one tmpfs) holding 1,000 files each are
// released at once; timed until every PV has been cleaned, deleted and published again (new UID).
// Run with the default cleanup concurrency and with 1 (serial) in the same run, against the real
// kube-apiserver. Usage (as root, after `npm run build`): node dist/bench/recycle.js
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { Agent } from '../src/core/agent/agent.js';
import { ProcessCleaner } from '../src/core/cleanup/cleaner.js';
import { systemClock } from '../src/core/clock.js';
import { loadKubeconfig } from '../src/core/kube/kubeconfig.js';
import { RestCluster } from '../src/core/kube/rest-cluster.js';
import { silentLogger } from '../src/core/log.js';
import { LinuxVolumes } from '../src/core/node/linux-volumes.js';
import { NODE_LABEL } from '../src/core/pv/naming.js';
import { startControlPlane } from '../test/support/control-plane.js';
import { kubeBinDir } from './support.js';
import { runPvProtectionController } from '../test/support/pv-protection.js';

const VOLUMES = 100;
const FILES = 1000;

const plane = await startControlPlane({ binDir: kubeBinDir() });
const work = mkdtempSync(join(tmpdir(), 'lvp-recycle-'));
const mounts: string[] = [];
const stop = new AbortController();
try {
  const cluster = new RestCluster({ connection: await loadKubeconfig(plane.kubeconfigPath) });
  void runPvProtectionController(cluster, stop.signal, 20);
  const store = join(work, 'store');
  const disc = join(work, 'disc');
  mkdirSync(store);
  mkdirSync(disc);
  spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=1g', 'lvp-test', store]);
  mounts.push(store);
  for (let i = 0; i < VOLUMES; i++) {
    mkdirSync(join(store, `v${i}`));
    mkdirSync(join(disc, `v${i}`));
    spawnSync('mount', ['--bind', join(store, `v${i}`), join(disc, `v${i}`)]);
    mounts.push(join(disc, `v${i}`));
  }
  const fill = (): void => {
    for (let i = 0; i < VOLUMES; i++) {
      for (let d = 0; d < 10; d++) {
        const dir = join(disc, `v${i}`, `dir${d}`);
        mkdirSync(dir, { recursive: true });
        for (let f = 0; f < FILES / 10; f++) writeFileSync(join(dir, `file${f}`), 'x'.repeat(512));
      }
    }
  };
  const rows: string[] = [];
  for (const concurrency of [8, 1]) {
    const node = `recycle-${concurrency}`;
    const sc = `recycle-${concurrency}`;
    await cluster.nodes.create({ metadata: { name: node, labels: { 'kubernetes.io/hostname': node } } });
    await cluster.storageClasses.create({
      metadata: { name: sc },
      provisioner: 'kubernetes.io/no-provisioner',
      reclaimPolicy: 'Delete',
    });
    const configPath = join(work, `${node}.yaml`);
    writeFileSync(configPath, `storageClassMap:\n  ${sc}:\n    hostDir: ${disc}\n    mountDir: ${disc}\n`);
    fill();
    const agent = await Agent.start(
      {
        configPath,
        nodeName: node,
        namespace: 'default',
        listenAddress: '127.0.0.1:0',
        metricsPath: '/metrics',
        discoveryPeriodMs: 10_000,
        changePollMs: 500,
        createConcurrency: 16,
        cleanupConcurrency: concurrency,
        jobImage: undefined,
      },
      {
        cluster,
        volumes: new LinuxVolumes(),
        cleaner: new ProcessCleaner({}),
        clock: systemClock,
        logger: silentLogger,
      },
    );
    await agent.generation.whenReady;
    const pvs = (await cluster.persistentVolumes.list({ labelSelector: `${NODE_LABEL}=${node}` })).items;
    if (pvs.length !== VOLUMES) throw new Error(`expected ${VOLUMES} PVs, found ${pvs.length}`);
    const uids = new Map(pvs.map((pv) => [pv.metadata.name, pv.metadata.uid]));
    const started = performance.now();
    await Promise.all(
      pvs.map(async (pv) => {
        const bound = await cluster.persistentVolumes.update({
          ...pv,
          spec: {
            ...pv.spec,
            claimRef: {
              apiVersion: 'v1',
              kind: 'PersistentVolumeClaim',
              namespace: 'default',
              name: `c-${pv.metadata.name}`,
            },
          },
        });
        await cluster.persistentVolumes.updateStatus({ ...bound, status: { phase: 'Released' } });
      }),
    );
    for (;;) {
      const now = (await cluster.persistentVolumes.list({ labelSelector: `${NODE_LABEL}=${node}` })).items;
      const renewed = now.filter(
        (pv) =>
          pv.metadata.deletionTimestamp === undefined &&
          uids.has(pv.metadata.name) &&
          uids.get(pv.metadata.name) !== pv.metadata.uid,
      );
      if (renewed.length === VOLUMES) break;
      await delay(20);
    }
    const seconds = (performance.now() - started) / 1000;
    await agent.stop();
    const leftovers = Array.from({ length: VOLUMES }, (_, i) => readdirSync(join(disc, `v${i}`)).length).reduce(
      (a, b) => a + b,
      0,
    );
    if (leftovers !== 0) throw new Error(`${leftovers} entries left after cleanup`);
    rows.push(
      `| ${VOLUMES} filesystem volumes × ${FILES.toLocaleString('en')} files: release → all republished, cleanup concurrency ${concurrency} | ${seconds.toFixed(2)} s |`,
    );
    for (const pv of (await cluster.persistentVolumes.list({ labelSelector: `${NODE_LABEL}=${node}` })).items) {
      await cluster.persistentVolumes.delete(pv.metadata.name).catch(() => undefined);
    }
  }
  stop.abort();
  cluster.close();
  console.log(`node ${process.version}`);
  console.log('| what | measured |\n|---|---|');
  for (const r of rows) console.log(r);
} finally {
  stop.abort();
  for (const m of mounts.reverse()) spawnSync('umount', ['-l', m]);
  rmSync(work, { recursive: true, force: true });
  await plane.stop();
}
