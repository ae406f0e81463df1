// Scale benchmarks of discovery and publishing against a real kube-apiserver + etcd:
//   1. 1,000 new volumes → all PVs exist (agent defaults), beside client-go's default rate limit;
//   2. CPU of a discovery pass over 1,000 unchanged entries (real bind mounts and the real mount table);
//   3. RSS of `provisioner run` idle, and with 100,000 PVs of other nodes in the cluster.
// Usage (as root, after `npm run build`): node dist/bench/agent-scale.js [--pvs 100000]
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { DEFAULT_MIN_PASS_INTERVAL_MS, Generation, nodeIdentity } from '../src/core/agent/generation.js';
import { systemClock } from '../src/core/clock.js';
import { parseConfigSnapshot } from '../src/core/config/decode/parse.js';
import { snapshotFromFileText } from '../src/core/config/decode/layout.js';
import { planDiscovery } from '../src/core/discovery/plan.js';
import { discardEvents } from '../src/core/kube/events.js';
import { loadKubeconfig } from '../src/core/kube/kubeconfig.js';
import type { PersistentVolume } from '../src/core/kube/objects.js';
import { RestCluster } from '../src/core/kube/rest-cluster.js';
import { silentLogger } from '../src/core/log.js';
import { MemoryCleaner } from '../src/core/cleanup/cleaner.js';
import { CleanupTable } from '../src/core/cleanup/table.js';
import { createAgentMetrics } from '../src/core/metrics/agent-metrics.js';
import { LinuxVolumes } from '../src/core/node/linux-volumes.js';
import { MemoryVolumes } from '../src/core/node/memory-volumes.js';
import { NODE_LABEL } from '../src/core/pv/naming.js';
import { startControlPlane } from '../test/support/control-plane.js';
import { kubeBinDir, REPO_ROOT as root, rssBytesOf } from './support.js';

const pvsFlag = process.argv.indexOf('--pvs');
const OTHER_PVS = pvsFlag > 0 ? Number(process.argv[pvsFlag + 1]) : 100_000;
const GiB = 2 ** 30;

function config(className: string, dir: string) {
  return parseConfigSnapshot(
    snapshotFromFileText(
      'bench.yaml',
      `storageClassMap:\n  ${className}:\n    hostDir: ${dir}\n    mountDir: ${dir}\n`,
    ),
  );
}

async function publishRun(
  cluster: RestCluster,
  nodeName: string,
  className: string,
  count: number,
  settings: { qps: number; burst: number; concurrency: number },
  connection: Awaited<ReturnType<typeof loadKubeconfig>>,
): Promise<number> {
  const limited = new RestCluster({ connection, qps: settings.qps, burst: settings.burst });
  const node = await cluster.nodes.get(nodeName);
  const volumes = new MemoryVolumes();
  const dir = `/bench/${className}`;
  volumes.addDirectory(dir);
  for (let i = 0; i < count; i++) volumes.addMount(`${dir}/v${i}`, { capacity: 10 * GiB });
  const loaded = config(className, dir);
  const g = new Generation(
    1,
    loaded.config,
    loaded.hash,
    nodeIdentity(node),
    {
      cluster: limited,
      volumes,
      clock: systemClock,
      logger: silentLogger,
      metrics: createAgentMetrics(),
      events: discardEvents,
      table: new CleanupTable({
        cleaner: new MemoryCleaner(),
        clock: systemClock,
        logger: silentLogger,
        concurrency: 1,
      }),
    },
    {
      discoveryPeriodMs: 3_600_000,
      changePollMs: 0,
      mountGraceMs: 0,
      minPassIntervalMs: DEFAULT_MIN_PASS_INTERVAL_MS,
      createConcurrency: settings.concurrency,
      namespace: 'default',
      jobImage: undefined,
    },
  );
  const started = performance.now();
  g.start();
  await g.whenReady;
  const elapsed = performance.now() - started;
  const created = g.status().lastPass?.created.length ?? 0;
  await g.stop();
  limited.close();
  if (created !== count) throw new Error(`created ${created} of ${count}`);
  return elapsed;
}

interface AgentRun {
  readonly rss: number;
  readonly readyMs: number;
  readonly adoptionScan: { scanned: number; pages: number; adopted: number };
}

async function agentRss(kubeconfigPath: string, nodeName: string, configDir: string): Promise<AgentRun> {
  const started = performance.now();
  const child = spawn(
    process.execPath,
    [
      join(root, 'bin/run.js'),
      'run',
      '--config-dir',
      configDir,
      '--listen-address',
      '127.0.0.1:0',
      '--log-format',
      'json',
    ],
    {
      env: { ...process.env, MY_NODE_NAME: nodeName, KUBECONFIG: kubeconfigPath },
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  );
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  let startedLine: string | undefined;
  while (startedLine === undefined) {
    if (child.exitCode !== null) throw new Error(`agent exited: ${stderr}`);
    startedLine = stderr.split('\n').find((l) => l.includes('"msg":"agent started"'));
    await delay(50);
  }
  const info = JSON.parse(startedLine) as { listen: string; adoptionScan: AgentRun['adoptionScan'] };
  const port = info.listen.split(':').pop() ?? '';
  while ((await fetch(`http://127.0.0.1:${port}/ready`)).status !== 200) await delay(50);
  const readyMs = performance.now() - started;
  await delay(5000); // let start-up garbage be collected
  const samples: number[] = [];
  for (let i = 0; i < 10; i++) {
    samples.push(rssBytesOf(child.pid ?? 0));
    await delay(200);
  }
  child.kill('SIGTERM');
  await new Promise((r) => child.on('exit', r));
  return { rss: Math.max(...samples), readyMs, adoptionScan: info.adoptionScan };
}

const plane = await startControlPlane({ binDir: kubeBinDir() });
const work = mkdtempSync(join(tmpdir(), 'lvp-bench-'));
const mounts: string[] = [];
try {
  const connection = await loadKubeconfig(plane.kubeconfigPath);
  const cluster = new RestCluster({ connection });
  const rows: string[] = [];
  await cluster.nodes.create({ metadata: { name: 'bench-node', labels: { 'kubernetes.io/hostname': 'bench-node' } } });
  for (const sc of ['bench-a', 'bench-b', 'bench-c']) {
    await cluster.storageClasses.create({ metadata: { name: sc }, provisioner: 'kubernetes.io/no-provisioner' });
  }

  // 1. Publishing throughput.
  const ours = await publishRun(
    cluster,
    'bench-node',
    'bench-a',
    1000,
    { qps: 200, burst: 400, concurrency: 16 },
    connection,
  );
  const sample = 50;
  const clientGo = await publishRun(
    cluster,
    'bench-node',
    'bench-b',
    sample,
    { qps: 5, burst: 10, concurrency: 1 },
    connection,
  );
  rows.push(
    `| 1,000 new volumes → all PVs created (defaults: qps 200, burst 400, 16 in flight) | ${(ours / 1000).toFixed(2)} s | ≤ 10 s |`,
  );
  rows.push(
    `| same with client-go's default limiter (qps 5, burst 10, serial), ${sample} volumes measured | ${(clientGo / 1000).toFixed(2)} s for ${sample} → ≈ ${(((clientGo / sample) * 1000) / 1000).toFixed(0)} s for 1,000 | upstream anchor ≈ 200 s |`,
  );

  // 2. CPU of one pass over 1,000 unchanged entries on real bind mounts.
  const store = join(work, 'store');
  const disc = join(work, 'disc');
  mkdirSync(store);
  mkdirSync(disc);
  spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=64m', 'lvp-test', store]);
  mounts.push(store);
  for (let i = 0; i < 1000; i++) {
    mkdirSync(join(store, `v${i}`));
    mkdirSync(join(disc, `v${i}`));
    spawnSync('mount', ['--bind', join(store, `v${i}`), join(disc, `v${i}`)]);
    mounts.push(join(disc, `v${i}`));
  }
  const loaded = config('bench-c', disc);
  const node = nodeIdentity(await cluster.nodes.get('bench-node'));
  const volumes = new LinuxVolumes();
  const first = await planDiscovery({
    config: loaded.config,
    node,
    volumes,
    persistentVolumes: [],
    storageClass: () => ({ metadata: { name: 'bench-c' }, provisioner: 'x' }),
  });
  const published: PersistentVolume[] = first.create.map((c) => c.persistentVolume);
  if (published.length !== 1000) throw new Error(`expected 1000 volumes, planned ${published.length}`);
  const cpu: number[] = [];
  for (let i = 0; i < 30; i++) {
    const before = process.cpuUsage();
    const plan = await planDiscovery({
      config: loaded.config,
      node,
      volumes,
      persistentVolumes: published,
      storageClass: () => ({ metadata: { name: 'bench-c' }, provisioner: 'x' }),
    });
    const used = process.cpuUsage(before);
    if (plan.create.length !== 0) throw new Error('unchanged entries planned for creation');
    cpu.push((used.user + used.system) / 1000);
  }
  cpu.sort((a, b) => a - b);
  rows.push(
    `| discovery pass over 1,000 unchanged entries (real bind mounts, ${spawnSync('wc', ['-l', '/proc/self/mountinfo'], { encoding: 'utf8' }).stdout.trim().split(' ')[0]} mountinfo lines), CPU median / max of 30 | ${cpu[15]?.toFixed(1)} ms / ${cpu[29]?.toFixed(1)} ms | ≤ 20 ms |`,
  );

  // 3. Agent RSS: idle, with 1,000 PVs of its own, and with OTHER_PVS PVs of other nodes.
  const mb = (b: number): string => (b / 2 ** 20).toFixed(1);
  const emptyDir = join(work, 'empty');
  mkdirSync(emptyDir);
  const idleConfig = join(work, 'idle.yaml');
  writeFileSync(idleConfig, `storageClassMap:\n  bench-c:\n    hostDir: ${emptyDir}\n    mountDir: ${emptyDir}\n`);
  const ownConfig = join(work, 'own.yaml');
  writeFileSync(ownConfig, `storageClassMap:\n  bench-c:\n    hostDir: ${disc}\n    mountDir: ${disc}\n`);
  await cluster.nodes.create({ metadata: { name: 'rss-node', labels: { 'kubernetes.io/hostname': 'rss-node' } } });
  await cluster.nodes.create({ metadata: { name: 'own-node', labels: { 'kubernetes.io/hostname': 'own-node' } } });
  const idle = await agentRss(plane.kubeconfigPath, 'rss-node', idleConfig);
  rows.push(
    `| agent RSS, idle (ready + 5 s) | ${mb(idle.rss)} MiB, ready ${(idle.readyMs / 1000).toFixed(2)} s after spawn | ≤ 80 MB |`,
  );
  await agentRss(plane.kubeconfigPath, 'own-node', ownConfig); // publishes its 1,000 PVs
  const own = await agentRss(plane.kubeconfigPath, 'own-node', ownConfig);
  rows.push(
    `| agent RSS with 1,000 PVs of its own (restart) | ${mb(own.rss)} MiB, ready ${(own.readyMs / 1000).toFixed(2)} s | |`,
  );
  const fill = new RestCluster({ connection, qps: 0 });
  let next = 0;
  const filled = performance.now();
  await Promise.all(
    Array.from({ length: 32 }, async () => {
      while (next < OTHER_PVS) {
        const i = next++;
        const other = `other-${i % 500}`;
        await fill.persistentVolumes.create({
          // Half labelled by their own agents, half as upstream created them (unlabelled: the adoption scan pages through those).
          metadata: {
            name: `other-pv-${i}`,
            ...(i % 2 === 0 ? { labels: { [NODE_LABEL]: other } } : {}),
            annotations: { 'pv.kubernetes.io/provisioned-by': `local-volume-provisioner-${other}-uid` },
          },
          spec: {
            capacity: { storage: '100Gi' },
            accessModes: ['ReadWriteOnce'],
            persistentVolumeReclaimPolicy: 'Delete',
            storageClassName: 'bench-c',
            local: { path: `/mnt/disks/vol${i}` },
            nodeAffinity: {
              required: {
                nodeSelectorTerms: [
                  { matchExpressions: [{ key: 'kubernetes.io/hostname', operator: 'In', values: [other] }] },
                ],
              },
            },
          },
        });
      }
    }),
  );
  fill.close();
  const fillSeconds = (performance.now() - filled) / 1000;
  const crowded = await agentRss(plane.kubeconfigPath, 'rss-node', idleConfig);
  rows.push(
    `| agent RSS with ${OTHER_PVS.toLocaleString('en')} PVs of 500 other nodes (half unlabelled, as upstream leaves them; created in ${fillSeconds.toFixed(0)} s) | ${mb(crowded.rss)} MiB, ready ${(crowded.readyMs / 1000).toFixed(2)} s; adoption scan read ${crowded.adoptionScan.scanned.toLocaleString('en')} unlabelled PVs in ${crowded.adoptionScan.pages} pages, adopted ${crowded.adoptionScan.adopted} | ≤ 100 MB |`,
  );
  cluster.close();
  console.log(`node ${process.version}, kube-apiserver ${plane.server}`);
  console.log('| what | measured | target |\n|---|---|---|');
  for (const r of rows) console.log(r);
} finally {
  for (const m of mounts.reverse()) spawnSync('umount', ['-l', m]);
  rmSync(work, { recursive: true, force: true });
  await plane.stop();
}
