// The per-node footprint of `provisioner run` (issue 13), every figure beside bare
// `node -e 'setInterval(()=>{},1e9)'` measured in the same run, against the real apiserver and
// real mounts:
//   1. start → first PV, interleaved with bare node's start → first output line;
//   2. 1,000 new volumes (real bind mounts) → all PVs, by the agent process;
//   3. a new mount → its PV, and a new block-device symlink → its PV (the change events);
//   4. idle CPU (utime+stime from /proc) and RSS over one window shared by bare node and agents
//      with 50 and 1,000 PVs, 50-PV agents under V8 flags, and a 50-PV agent scraped every 15 s;
//   5. start-up bytes on the wire (a counting TCP proxy on loopback) with 10,000 unlabelled PVs
//      of other nodes in the cluster, and that agent's idle RSS.
//   6. idle RSS with --foreign-max (100,000) unlabelled PVs of other nodes.
// Every agent runs with the image's NODE_OPTIONS (from the Dockerfile).
// Usage (as root, after `npm run build`): node dist/bench/footprint.js [--idle-seconds 240] [--foreign 10000]
//   [--foreign-max 100000] [--agent-node-flags "--flag ..."]
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { loadKubeconfig } from '../src/core/kube/kubeconfig.js';
import type { PersistentVolume } from '../src/core/kube/objects.js';
import { RestCluster } from '../src/core/kube/rest-cluster.js';
import { startControlPlane } from '../test/support/control-plane.js';
import { Cleanup, attachLoopDevice, bindMount, mountTmpfs } from '../test/support/real-node.js';
import {
  agentCommandLine,
  bareNodeStartMs,
  bindMountedVolumes,
  IMAGE_NODE_OPTIONS,
  cpuSeconds,
  kubeBinDir,
  median,
  rssBytesOf,
  watchPvs,
} from './support.js';

function flag(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
}
const IDLE_SECONDS = flag('idle-seconds', 240);
const FOREIGN = flag('foreign', 10_000);
/** Then as many more, up to this, for the idle-RSS row of a large cluster (0: skip). */
const FOREIGN_MAX = flag('foreign-max', 100_000);
const STARTS = flag('starts', 7);
const SETTLE_SECONDS = flag('settle-seconds', 60);
const nodeFlagsAt = process.argv.indexOf('--agent-node-flags');
/** Node flags of every agent (before each variant's own). */
const AGENT_NODE_FLAGS =
  nodeFlagsAt > 0 ? (process.argv[nodeFlagsAt + 1] ?? '').split(' ').filter((f) => f !== '') : [];
const MiB = 2 ** 20;

function childrenOf(pid: number): number[] {
  const out: number[] = [];
  for (const task of readdirSync(`/proc/${String(pid)}/task`)) {
    const text = readFileSync(`/proc/${String(pid)}/task/${task}/children`, 'utf8').trim();
    if (text !== '') out.push(...text.split(' ').map(Number));
  }
  return out;
}

const cleanup = new Cleanup();
const work = mkdtempSync(join(tmpdir(), 'lvp-footprint-'));
cleanup.defer(`remove ${work}`, () => {
  rmSync(work, { recursive: true, force: true });
});
// A real cluster's etcd compaction (5 min): the harness' 5 s would expire the continue token of a
// 100,000-PV adoption scan mid-way (410 Gone).
const plane = await startControlPlane({ binDir: kubeBinDir(), etcdCompactionIntervalSeconds: 300 });
const children: ChildProcess[] = [];

interface Agent {
  readonly child: ChildProcess;
  readonly pid: number;
  readonly spawnedAt: number;
  readonly stderr: () => string;
  stop(): Promise<void>;
}

function startAgent(
  name: string,
  configFile: string,
  kubeconfig: string,
  nodeArgs: readonly string[] = [],
  agentArgs: readonly string[] = [],
): Agent {
  const spawnedAt = performance.now();
  const child = spawn(
    process.execPath,
    [...AGENT_NODE_FLAGS, ...nodeArgs, ...agentCommandLine(configFile, join(work, `${name}.sock`)), ...agentArgs],
    {
      env: { ...process.env, MY_NODE_NAME: name, KUBECONFIG: kubeconfig, NODE_OPTIONS: IMAGE_NODE_OPTIONS },
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  );
  children.push(child);
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => {
    stderr = (stderr + d).slice(-200_000);
  });
  return {
    child,
    pid: child.pid ?? 0,
    spawnedAt,
    stderr: () => stderr,
    stop: async () => {
      if (child.exitCode !== null) return;
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    },
  };
}

async function ready(
  agent: Agent,
): Promise<{ readyMs: number; port: string; adoptionScan: { scanned: number; pages: number } }> {
  let line: string | undefined;
  while (line === undefined) {
    if (agent.child.exitCode !== null) throw new Error(`agent exited: ${agent.stderr()}`);
    line = agent
      .stderr()
      .split('\n')
      .find((l) => l.includes('"msg":"agent started"'));
    await delay(20);
  }
  const info = JSON.parse(line) as { listen: string; adoptionScan: { scanned: number; pages: number } };
  const port = info.listen.split(':').pop() ?? '';
  while ((await fetch(`http://127.0.0.1:${port}/ready`)).status !== 200) await delay(20);
  return { readyMs: performance.now() - agent.spawnedAt, port, adoptionScan: info.adoptionScan };
}

async function until(check: () => boolean, what: string, ms = 60_000): Promise<void> {
  const end = performance.now() + ms;
  while (!check()) {
    if (performance.now() > end) throw new Error(`timed out: ${what}`);
    await delay(2);
  }
}

function classYaml(classes: Record<string, { dir: string; block?: boolean }>): string {
  return `storageClassMap:\n${Object.entries(classes)
    .map(
      ([name, c]) =>
        `  ${name}:\n    hostDir: ${c.dir}\n    mountDir: ${c.dir}\n${c.block === true ? '    volumeMode: Block\n' : ''}`,
    )
    .join('')}`;
}

/** n bind mounts of one tmpfs under a fresh discovery directory. */
function volumesDir(name: string, n: number): string {
  return bindMountedVolumes(cleanup, work, name, n);
}

try {
  const connection = await loadKubeconfig(plane.kubeconfigPath);
  const cluster = new RestCluster({ connection, qps: 0 });
  const nodes = new Set<string>();
  const node = async (name: string): Promise<void> => {
    if (nodes.has(name)) return;
    nodes.add(name);
    await cluster.nodes.create({ metadata: { name, labels: { 'kubernetes.io/hostname': name } } });
  };
  for (const sc of ['fp-fs', 'fp-block']) {
    await cluster.storageClasses.create({
      metadata: { name: sc },
      provisioner: 'kubernetes.io/no-provisioner',
      reclaimPolicy: 'Delete',
    });
  }
  // Each row is printed as soon as it is measured, so a failure later keeps the figures so far.
  console.log('| what | measured | vs bare node | target |\n|---|---|---|---|');
  const rows = {
    push(row: string): void {
      console.log(row);
    },
  };
  const stopAll = new AbortController();

  // 1. Start → first PV, interleaved with bare node's start → first line.
  const one = volumesDir('start', 1);
  const startConfig = join(work, 'start.yaml');
  writeFileSync(startConfig, classYaml({ 'fp-fs': { dir: one } }));
  const bareStarts: number[] = [];
  const agentStarts: number[] = [];
  for (let i = 0; i < STARTS; i++) {
    bareStarts.push(await bareNodeStartMs());
    const name = `start-${String(i)}`;
    await node(name);
    const seen = watchPvs(cluster, name, stopAll.signal);
    await delay(300); // the watch is established
    const agent = startAgent(name, startConfig, plane.kubeconfigPath);
    await until(() => seen.size > 0, 'first PV');
    agentStarts.push((seen.values().next().value ?? NaN) - agent.spawnedAt);
    await agent.stop();
  }
  const bareStart = median(bareStarts);
  rows.push(
    `| start → first PV (median of ${String(STARTS)}, interleaved) | ${median(agentStarts).toFixed(0)} ms; bare node start → first line ${bareStart.toFixed(0)} ms | +${(median(agentStarts) - bareStart).toFixed(0)} ms | ≤ bare + 150 ms |`,
  );

  // 2. 1,000 volumes → PVs, the real agent on real bind mounts.
  const thousandDir = volumesDir('thousand', 1000);
  const thousandConfig = join(work, 'thousand.yaml');
  writeFileSync(thousandConfig, classYaml({ 'fp-fs': { dir: thousandDir } }));
  await node('thousand');
  const thousandSeen = watchPvs(cluster, 'thousand', stopAll.signal);
  await delay(300);
  const publisher = startAgent('thousand', thousandConfig, plane.kubeconfigPath);
  await until(() => thousandSeen.size >= 1000, '1,000 PVs', 120_000);
  const publishMs = Math.max(...thousandSeen.values()) - publisher.spawnedAt;
  await publisher.stop();
  rows.push(
    `| 1,000 new volumes (bind mounts) → all PVs, from agent spawn | ${(publishMs / 1000).toFixed(2)} s | | ≤ 10 s |`,
  );

  // 3. New mount → PV, new block-device symlink → PV, on a running agent.
  const fiftyDir = volumesDir('fifty', 35);
  const blockDir = join(work, 'fifty-block');
  mkdirSync(blockDir);
  const fiftyConfig = join(work, 'fifty.yaml');
  writeFileSync(fiftyConfig, classYaml({ 'fp-fs': { dir: fiftyDir }, 'fp-block': { dir: blockDir, block: true } }));
  await node('fifty');
  const fiftySeen = watchPvs(cluster, 'fifty', stopAll.signal);
  const fifty = startAgent('fifty', fiftyConfig, plane.kubeconfigPath);
  await ready(fifty);
  await until(() => fiftySeen.size >= 35, '35 PVs');
  const mountLatency: number[] = [];
  const extraStore = join(work, 'extra-store');
  mountTmpfs(cleanup, extraStore, 16 * MiB);
  for (let i = 0; i < 10; i++) {
    await delay(500);
    const before = fiftySeen.size;
    mkdirSync(join(extraStore, `m${String(i)}`));
    mkdirSync(join(fiftyDir, `m${String(i)}`));
    const t0 = performance.now();
    bindMount(cleanup, join(extraStore, `m${String(i)}`), join(fiftyDir, `m${String(i)}`));
    await until(() => fiftySeen.size > before, 'the new mount published', 15_000);
    mountLatency.push([...fiftySeen.values()].reduce((a, b) => Math.max(a, b)) - t0);
  }
  const linkLatency: number[] = [];
  for (let i = 0; i < 5; i++) {
    await delay(500);
    const loop = attachLoopDevice(cleanup, join(work, `loop-${String(i)}.img`), 64 * MiB);
    const before = fiftySeen.size;
    const t0 = performance.now();
    symlinkSync(loop.path, join(blockDir, `disk${String(i)}`));
    await until(() => fiftySeen.size > before, 'the new symlink published', 15_000);
    linkLatency.push([...fiftySeen.values()].reduce((a, b) => Math.max(a, b)) - t0);
  }
  rows.push(
    `| new mount → its PV (10 bind mounts; median / max) | ${median(mountLatency).toFixed(0)} / ${Math.max(...mountLatency).toFixed(0)} ms | | ≤ 1 s |`,
  );
  rows.push(
    `| new block-device symlink → its PV (5 loop devices; median / max) | ${median(linkLatency).toFixed(0)} / ${Math.max(...linkLatency).toFixed(0)} ms | | ≤ 1 s |`,
  );

  // 4. The idle window, shared: bare node, 50 PVs (above), 1,000 PVs (restarted), 50 PVs under V8 flags.
  const variants: { label: string; agent: Agent; pvs: number; scrapePort?: string }[] = [
    { label: 'agent, 50 PVs', agent: fifty, pvs: 50 },
  ];
  const restarted = startAgent('thousand', thousandConfig, plane.kubeconfigPath);
  await ready(restarted);
  variants.push({ label: 'agent, 1,000 PVs (restarted)', agent: restarted, pvs: 1000 });
  // [label, node flags, agent flags]
  const flagSets: [string, string[], string[]][] = [
    ['node --lite-mode', ['--lite-mode'], []],
    ['node --max-opt=1 (no Maglev/TurboFan)', ['--max-opt=1'], []],
    ['node --max-opt=2 (no TurboFan)', ['--max-opt=2'], []],
    ['node --max-opt=2 --optimize-for-size', ['--max-opt=2', '--optimize-for-size'], []],
    ['node --optimize-for-size', ['--optimize-for-size'], []],
    ['--config-sync-period=1h (no config content poll)', [], ['--config-sync-period=1h']],
  ];
  for (const [i, [label, args, agentArgs]] of flagSets.entries()) {
    const name = `flags-${String(i)}`;
    const dir = volumesDir(name, 50);
    const config = join(work, `${name}.yaml`);
    writeFileSync(config, classYaml({ 'fp-fs': { dir } }));
    await node(name);
    const agent = startAgent(name, config, plane.kubeconfigPath, args, agentArgs);
    await ready(agent);
    variants.push({ label: `agent, 50 PVs, ${label}`, agent, pvs: 50 });
  }
  // Scraped as Prometheus would (every 15 s): what a node pays whose agent is monitored (the
  // event-loop sampler runs from the first scrape on, and each scrape renders every series).
  {
    const name = 'scraped';
    const dir = volumesDir(name, 50);
    const config = join(work, `${name}.yaml`);
    writeFileSync(config, classYaml({ 'fp-fs': { dir } }));
    await node(name);
    const agent = startAgent(name, config, plane.kubeconfigPath);
    const { port } = await ready(agent);
    variants.push({ label: 'agent, 50 PVs, /metrics scraped every 15 s', agent, pvs: 50, scrapePort: port });
  }
  const scrapeAll = async (): Promise<void> => {
    for (const v of variants)
      if (v.scrapePort !== undefined) await (await fetch(`http://127.0.0.1:${v.scrapePort}/metrics`)).text();
  };
  const scraping = setInterval(() => void scrapeAll(), 15_000);
  const bare = spawn(process.execPath, ['-e', 'setInterval(()=>{},1e9)'], { stdio: 'ignore' });
  children.push(bare);
  await delay(SETTLE_SECONDS * 1000); // start-up garbage collected, JIT tiered up, PVs settled
  const bareCpu0 = cpuSeconds(bare.pid ?? 0);
  const cpu0 = variants.map((v) => cpuSeconds(v.agent.pid));
  const rssMax = variants.map(() => 0);
  let bareRss = 0;
  const windowEnd = performance.now() + IDLE_SECONDS * 1000;
  while (performance.now() < windowEnd) {
    await delay(5000);
    bareRss = Math.max(bareRss, rssBytesOf(bare.pid ?? 0));
    variants.forEach((v, i) => (rssMax[i] = Math.max(rssMax[i] ?? 0, rssBytesOf(v.agent.pid))));
  }
  clearInterval(scraping);
  const bareCpu = cpuSeconds(bare.pid ?? 0) - bareCpu0;
  rows.push(
    `| bare node, idle ${String(IDLE_SECONDS)} s (same window, after ${String(SETTLE_SECONDS)} s to settle) | CPU ${bareCpu.toFixed(2)} s, RSS ${(bareRss / MiB).toFixed(1)} MiB | 1.00 | |`,
  );
  variants.forEach((v, i) => {
    const cpu = cpuSeconds(v.agent.pid) - (cpu0[i] ?? 0);
    const kids = childrenOf(v.agent.pid);
    const kidRss = kids.reduce((n, k) => n + rssBytesOf(k), 0);
    const rssV = rssMax[i] ?? 0;
    rows.push(
      `| ${v.label}, idle ${String(IDLE_SECONDS)} s | CPU ${cpu.toFixed(2)} s (bare +${(cpu - bareCpu).toFixed(2)} s), RSS ${(rssV / MiB).toFixed(1)} MiB + findmnt ${(kidRss / MiB).toFixed(1)} MiB | RSS ${(rssV / bareRss).toFixed(2)}× | ${v.pvs === 50 ? '≤ 0.15 s, ≤ 60 MB' : '≤ 0.3 s, ≤ 70 MB'} |`,
    );
  });
  for (const v of variants) await v.agent.stop();
  bare.kill();

  // 5. Start-up bytes on the wire with FOREIGN unlabelled PVs of other nodes, then idle RSS with
  //    FOREIGN_MAX of them.
  let next = 0;
  const createForeign = async (upTo: number): Promise<void> => {
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next < upTo) {
          const i = next++;
          const other = `other-${String(i % 100)}`;
          await cluster.persistentVolumes.create({
            metadata: {
              name: `foreign-${String(i)}`,
              annotations: { 'pv.kubernetes.io/provisioned-by': `local-volume-provisioner-${other}-uid` },
            },
            spec: {
              capacity: { storage: '100Gi' },
              accessModes: ['ReadWriteOnce'],
              persistentVolumeReclaimPolicy: 'Delete',
              storageClassName: 'fp-fs',
              local: { path: `/mnt/disks/vol${String(i)}` },
              nodeAffinity: {
                required: {
                  nodeSelectorTerms: [
                    { matchExpressions: [{ key: 'kubernetes.io/hostname', operator: 'In', values: [other] }] },
                  ],
                },
              },
            } satisfies PersistentVolume['spec'],
          });
        }
      }),
    );
  };
  const upstream = new URL(plane.server);
  let toServer = 0;
  let toAgent = 0;
  const proxy = createServer((client) => {
    const up = createConnection(Number(upstream.port), upstream.hostname);
    // Without this, Nagle's algorithm on the proxy's two sockets meets delayed ACKs: ~40 ms added
    // to many small requests (the adoption scan's pages), which the agent does not see unproxied.
    client.setNoDelay(true);
    up.setNoDelay(true);
    client.on('data', (d: Buffer) => (toServer += d.length));
    up.on('data', (d: Buffer) => (toAgent += d.length));
    client.pipe(up).on('error', () => client.destroy());
    up.pipe(client).on('error', () => up.destroy());
    client.on('error', () => up.destroy());
    up.on('error', () => client.destroy());
  });
  await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
  const address = proxy.address();
  const proxyPort = typeof address === 'object' && address !== null ? address.port : 0;
  const proxied = join(work, 'proxied.kubeconfig');
  writeFileSync(
    proxied,
    readFileSync(plane.kubeconfigPath, 'utf8').replace(plane.server, `https://127.0.0.1:${String(proxyPort)}`),
  );
  const emptyDir = join(work, 'empty');
  mkdirSync(emptyDir);
  const emptyConfig = join(work, 'empty.yaml');
  writeFileSync(emptyConfig, classYaml({ 'fp-fs': { dir: emptyDir } }));
  for (const count of [FOREIGN, ...(FOREIGN_MAX > FOREIGN ? [FOREIGN_MAX] : [])]) {
    const createdAt = performance.now();
    await createForeign(count);
    const createS = (performance.now() - createdAt) / 1000;
    const name = `wire-${String(count)}`;
    await node(name);
    toServer = 0;
    toAgent = 0;
    const wired = startAgent(name, emptyConfig, proxied);
    const wiredReady = await ready(wired);
    const wireBytes = toAgent + toServer;
    const received = toAgent;
    await delay(20_000); // start-up garbage collected
    let wiredRss = 0;
    for (let i = 0; i < 6; i++) {
      wiredRss = Math.max(wiredRss, rssBytesOf(wired.pid));
      await delay(5000);
    }
    await wired.stop();
    rows.push(
      `| start-up with ${count.toLocaleString('en')} unlabelled PVs of other nodes (created in ${createS.toFixed(0)} s): bytes on the wire until ready (both directions, TLS) | ${(wireBytes / MiB).toFixed(2)} MiB (${(received / MiB).toFixed(2)} MiB received); adoption scan ${String(wiredReady.adoptionScan.scanned)} PVs in ${String(wiredReady.adoptionScan.pages)} pages; ready ${(wiredReady.readyMs / 1000).toFixed(2)} s; idle RSS ${(wiredRss / MiB).toFixed(1)} MiB | RSS ${(wiredRss / bareRss).toFixed(2)}× | ${count <= 10_000 ? '≤ 1 MB' : '≤ 70 MB RSS'} |`,
    );
  }
  proxy.close();

  stopAll.abort();
  cluster.close();
  const load = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
  console.log(
    `node ${process.version}, agents with NODE_OPTIONS=${IMAGE_NODE_OPTIONS} (the image's), kube-apiserver ${plane.server}, load ${load}`,
  );
} finally {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  await delay(200);
  cleanup.run();
  await plane.stop();
}
