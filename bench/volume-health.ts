// What volume health and disk identity cost on a node with 1,000 PVs (issue 27), in-process, on
// real mounts: 1,000 bind mounts of sub-directories of one filesystem (a tmpfs: `dev-ino`
// identities; an ext4 on a loop device: `fs-uuid` read from its superblock, as in a container
// without /run/udev). For each: the health check's first pass (every identity read), its idle pass
// (nothing changed: no identity read), and, in the same run, the idle discovery pass the agent runs
// anyway, so the health check is judged as a share of it. CPU from process.cpuUsage, wall from
// performance.now; medians of --runs passes.
// Usage (as root, after `npm run build`): node dist/bench/volume-health.js [--volumes 1000] [--runs 21]
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseConfigSnapshot } from '../src/core/config/decode/parse.js';
import { snapshotFromFileText } from '../src/core/config/decode/layout.js';
import { NameVerdicts, planDiscovery } from '../src/core/discovery/plan.js';
import { VolumeHealth } from '../src/core/health/volume-health.js';
import type { EventSink } from '../src/core/kube/events.js';
import type { PersistentVolume } from '../src/core/kube/objects.js';
import { MemoryLogger } from '../src/core/log.js';
import { MemoryCluster } from '../src/core/kube/memory/memory-cluster.js';
import { systemClock } from '../src/core/clock.js';
import { createAgentMetrics } from '../src/core/metrics/agent-metrics.js';
import { LinuxVolumes } from '../src/core/node/linux-volumes.js';
import { buildPersistentVolume } from '../src/core/pv/build.js';
import { withIdentity } from '../src/core/pv/identity.js';
import type { NodeIdentity } from '../src/core/pv/naming.js';
import { attachLoopDevice, bindMount, Cleanup, mountTmpfs } from '../test/support/real-node.js';
import { median } from './support.js';

function flag(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
}
const VOLUMES = flag('volumes', 1000);
const RUNS = flag('runs', 21);
const NODE: NodeIdentity = { name: 'bench-node', uid: 'bench-uid', hostname: 'bench-node', labels: {} };

interface Measured {
  readonly wallMs: number;
  readonly cpuMs: number;
}

async function measure(run: () => Promise<unknown>): Promise<Measured> {
  const cpu = process.cpuUsage();
  const t0 = performance.now();
  await run();
  const wallMs = performance.now() - t0;
  const used = process.cpuUsage(cpu);
  return { wallMs, cpuMs: (used.user + used.system) / 1000 };
}

async function medianOf(run: () => Promise<unknown>): Promise<Measured> {
  const samples: Measured[] = [];
  for (let i = 0; i < RUNS; i++) samples.push(await measure(run));
  return { wallMs: median(samples.map((s) => s.wallMs)), cpuMs: median(samples.map((s) => s.cpuMs)) };
}

/** `fs` mounted at `store`, VOLUMES sub-directories of it bind-mounted at `<disc>/v<i>`. */
function volumesOn(cleanup: Cleanup, work: string, name: string, mountStore: (store: string) => void): string {
  const store = join(work, `${name}-store`);
  const disc = join(work, name);
  mkdirSync(store);
  mkdirSync(disc);
  mountStore(store);
  for (let i = 0; i < VOLUMES; i++) {
    mkdirSync(join(store, `v${String(i)}`));
    mkdirSync(join(disc, `v${String(i)}`));
    bindMount(cleanup, join(store, `v${String(i)}`), join(disc, `v${String(i)}`));
  }
  return disc;
}

async function benchOne(label: string, disc: string): Promise<string[]> {
  const volumes = new LinuxVolumes();
  // As in the agent: the change watch runs, so an unchanged mount table is not read again.
  const watching = new AbortController();
  const watch = volumes.watchChanges({ directories: [disc], signal: watching.signal, onChange: () => undefined });
  const ready = await watch.ready;
  if (!ready.ok) throw new Error(`no change watch: ${ready.reason}`);
  try {
    return await measureOn(label, disc, volumes);
  } finally {
    watching.abort();
    await watch.done;
  }
}

async function measureOn(label: string, disc: string, volumes: LinuxVolumes): Promise<string[]> {
  const configText = `storageClassMap:\n  bench:\n    hostDir: ${disc}\n    mountDir: ${disc}\n`;
  const config = parseConfigSnapshot(snapshotFromFileText('bench.yaml', configText)).config;
  const classConfig = config.storageClassMap['bench'];
  if (classConfig === undefined) throw new Error('no class');
  const pvs: PersistentVolume[] = [];
  for (let i = 0; i < VOLUMES; i++) {
    const pv = buildPersistentVolume({
      config,
      className: 'bench',
      classConfig,
      entryName: `v${String(i)}`,
      node: NODE,
      capacityBytes: 2 ** 30,
      reclaimPolicy: 'Delete',
      mountOptions: [],
    });
    const identity = await volumes.volumeIdentity(join(disc, `v${String(i)}`));
    const recorded = withIdentity(pv, identity, NODE);
    pvs.push({
      ...recorded,
      metadata: { ...recorded.metadata, uid: `uid-${String(i)}` },
      status: { phase: i % 2 === 0 ? 'Bound' : 'Available' },
    });
  }
  const events: EventSink = { record: () => undefined };
  // No class has a missing-disk policy: the cluster is never written.
  const deps = {
    volumes,
    events,
    metrics: createAgentMetrics(),
    logger: new MemoryLogger(),
    clock: systemClock,
    cluster: new MemoryCluster(),
  };
  const sampleId = pvs[0]?.metadata.annotations?.['local-static-provisioner/volume-identity'] ?? '';

  // First pass of a fresh checker: every identity read.
  const firsts: Measured[] = [];
  for (let i = 0; i < Math.min(RUNS, 7); i++) {
    const fresh = new VolumeHealth({ config, node: NODE }, deps);
    firsts.push(await measure(async () => fresh.check(pvs, await volumes.mountPoints())));
  }
  const first = { wallMs: median(firsts.map((s) => s.wallMs)), cpuMs: median(firsts.map((s) => s.cpuMs)) };
  const health = new VolumeHealth({ config, node: NODE }, deps);
  const summary = await health.check(pvs, await volumes.mountPoints());
  if (summary.checked !== VOLUMES || summary.abnormal.length > 0)
    throw new Error(`${label}: ${String(summary.checked)} checked, ${String(summary.abnormal.length)} abnormal`);
  // The pass reads the mount table once for discovery and health alike: it is not the health check's cost.
  const table = await volumes.mountPoints();
  const idle = await medianOf(async () => health.check(pvs, table));
  const mountTable = await medianOf(async () => volumes.mountPoints());
  const verdicts = new NameVerdicts();
  const discovery = await medianOf(async () =>
    planDiscovery({
      config,
      node: NODE,
      volumes,
      persistentVolumes: pvs,
      storageClass: () => ({ metadata: { name: 'bench' }, provisioner: 'kubernetes.io/no-provisioner' }),
      nameVerdicts: verdicts,
    }),
  );
  // A node's first discovery pass: every entry new, its identity read and checked against every PV
  // of the node and the pass's other entries (one disk, one PV). Against the other half of the PVs
  // (so half the entries are checked against a PV list of 500 and planned, half are published).
  const half = pvs.filter((_, i) => i % 2 === 1);
  const firstPlans: Measured[] = [];
  let planned = 0;
  for (let i = 0; i < Math.min(RUNS, 7); i++)
    firstPlans.push(
      await measure(async () => {
        const plan = await planDiscovery({
          config,
          node: NODE,
          volumes,
          persistentVolumes: half,
          storageClass: () => ({ metadata: { name: 'bench' }, provisioner: 'kubernetes.io/no-provisioner' }),
        });
        planned = plan.create.length;
      }),
    );
  if (planned !== VOLUMES - half.length) throw new Error(`${label}: ${String(planned)} planned`);
  const firstPlan = {
    wallMs: median(firstPlans.map((s) => s.wallMs)),
    cpuMs: median(firstPlans.map((s) => s.cpuMs)),
  };
  const ms = (m: Measured): string => `${m.wallMs.toFixed(1)} ms wall, ${m.cpuMs.toFixed(1)} ms CPU`;
  return [
    `| ${label} (\`${sampleId.split(':')[0] ?? ''}\`), first health pass: ${String(VOLUMES)} identities read | ${ms(first)} | |`,
    `| ${label}, idle health pass (nothing changed: no identity read) | ${ms(idle)} | ${(idle.cpuMs / Math.max(discovery.cpuMs, 0.001)).toFixed(2)}× the idle discovery pass |`,
    `| ${label}, idle discovery pass (the same run, for scale) | ${ms(discovery)} | 1.00 |`,
    `| ${label}, reading the (unchanged) mount table, which both use | ${ms(mountTable)} | |`,
    `| ${label}, discovery pass with ${String(planned)} new entries among ${String(half.length)} PVs: each identity read and checked (one disk, one PV) | ${ms(firstPlan)} | |`,
  ];
}

async function main(): Promise<void> {
  const cleanup = new Cleanup();
  const work = mkdtempSync(join(tmpdir(), 'lvp-health-bench-'));
  try {
    const tmpfsDisc = volumesOn(cleanup, work, 'tmpfs', (store) => mountTmpfs(cleanup, store, 64 * 2 ** 20));
    const ext4Disc = volumesOn(cleanup, work, 'ext4', (store) => {
      const loop = attachLoopDevice(cleanup, join(work, 'ext4.img'), 64 * 2 ** 20);
      const mkfs = spawnSync('mkfs.ext4', ['-F', '-q', '-U', '0b1e8c52-0d9c-4c5e-9d65-2f6d3c1f0a01', loop.path], {
        encoding: 'utf8',
      });
      if (mkfs.status !== 0) throw new Error(`mkfs.ext4: ${mkfs.stderr}`);
      const mount = spawnSync('mount', [loop.path, store], { encoding: 'utf8' });
      if (mount.status !== 0) throw new Error(`mount: ${mount.stderr}`);
      // Deferred after the loop device's detach: undone before it (last in, first out).
      cleanup.defer(`unmount ${store}`, () => {
        spawnSync('umount', ['-l', store]);
      });
    });
    const rows = [
      `| ${String(VOLUMES)} PVs, median of ${String(RUNS)} passes | figure | ratio |`,
      '|---|---|---|',
      ...(await benchOne('bind mounts of a tmpfs', tmpfsDisc)),
      ...(await benchOne('bind mounts of an ext4 (superblock, no udev)', ext4Disc)),
    ];
    console.log(rows.join('\n'));
  } finally {
    cleanup.run();
    rmSync(work, { recursive: true, force: true });
  }
}

await main();
