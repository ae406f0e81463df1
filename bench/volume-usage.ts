// What the per-volume usage gauges cost on a node with 1,000 PVs (issue 36), in-process on real
// mounts: 1,000 bind mounts of sub-directories of a tmpfs, PVs half Bound (with a claim) and half
// Available. The volume health check's first pass fills the usage from its statfs (no other pass
// reads it); then: the size of /metrics and its series with and without the PVs, the CPU of one
// scrape (the whole registry rendered, as GET /metrics does), the idle health pass with the usage
// kept, the per-class summary each pass event carries, and what the per-node cap leaves past it.
// Medians of --runs.
// Usage (as root, after `npm run build`): node dist/bench/volume-usage.js [--volumes 1000] [--runs 51]
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { systemClock } from '../src/core/clock.js';
import { parseConfigSnapshot } from '../src/core/config/decode/parse.js';
import { snapshotFromFileText } from '../src/core/config/decode/layout.js';
import { VolumeHealth } from '../src/core/health/volume-health.js';
import type { PersistentVolume } from '../src/core/kube/objects.js';
import { MemoryLogger } from '../src/core/log.js';
import { createAgentMetrics } from '../src/core/metrics/agent-metrics.js';
import type { AgentMetrics } from '../src/core/metrics/agent-metrics.js';
import { availableSummary } from '../src/core/metrics/volume-usage.js';
import { LinuxVolumes } from '../src/core/node/linux-volumes.js';
import { buildPersistentVolume } from '../src/core/pv/build.js';
import { withIdentity } from '../src/core/pv/identity.js';
import type { NodeIdentity } from '../src/core/pv/naming.js';
import { bindMount, Cleanup, mountTmpfs } from '../test/support/real-node.js';
import { median } from './support.js';

function flag(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
}
const VOLUMES = flag('volumes', 1000);
const RUNS = flag('runs', 51);
const NODE: NodeIdentity = { name: 'bench-node', uid: 'bench-uid', hostname: 'bench-node', labels: {} };

/** Median CPU and wall ms of `run`, RUNS times. */
function medianOf(run: () => unknown): { cpuMs: number; wallMs: number } {
  const cpu: number[] = [];
  const wall: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const c = process.cpuUsage();
    const t = performance.now();
    run();
    wall.push(performance.now() - t);
    const used = process.cpuUsage(c);
    cpu.push((used.user + used.system) / 1000);
  }
  return { cpuMs: median(cpu), wallMs: median(wall) };
}

async function medianOfAsync(run: () => Promise<unknown>): Promise<{ cpuMs: number; wallMs: number }> {
  const cpu: number[] = [];
  const wall: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const c = process.cpuUsage();
    const t = performance.now();
    await run();
    wall.push(performance.now() - t);
    const used = process.cpuUsage(c);
    cpu.push((used.user + used.system) / 1000);
  }
  return { cpuMs: median(cpu), wallMs: median(wall) };
}

function seriesOf(text: string, prefix: string): number {
  return text.split('\n').filter((l) => l.startsWith(prefix)).length;
}

/** VOLUMES PVs on `disc/v<i>`, half Bound with a claim, their identities recorded. */
async function persistentVolumes(disc: string, volumes: LinuxVolumes): Promise<PersistentVolume[]> {
  const text = `storageClassMap:\n  bench:\n    hostDir: ${disc}\n    mountDir: ${disc}\n`;
  const config = parseConfigSnapshot(snapshotFromFileText('bench.yaml', text)).config;
  const classConfig = config.storageClassMap['bench'];
  if (classConfig === undefined) throw new Error('no class');
  const pvs: PersistentVolume[] = [];
  for (let i = 0; i < VOLUMES; i++) {
    const built = buildPersistentVolume({
      config,
      className: 'bench',
      classConfig,
      entryName: `v${String(i)}`,
      node: NODE,
      capacityBytes: 2 ** 30,
      reclaimPolicy: 'Delete',
      mountOptions: [],
    });
    const pv = withIdentity(built, await volumes.volumeIdentity(join(disc, `v${String(i)}`)), NODE);
    const bound = i % 2 === 0;
    pvs.push({
      ...pv,
      metadata: { ...pv.metadata, uid: `uid-${String(i)}` },
      spec: {
        ...pv.spec,
        ...(bound ? { claimRef: { namespace: `team-${String(i % 7)}`, name: `data-db-${String(i)}` } } : {}),
      },
      status: { phase: bound ? 'Bound' : 'Available' },
    });
  }
  return pvs;
}

function scrapeRows(metrics: AgentMetrics, pvs: readonly PersistentVolume[], label: string): string[] {
  metrics.managedPersistentVolumes = () => pvs;
  const text = metrics.registry.render();
  const perVolume =
    seriesOf(text, 'local_volume_provisioner_volume_') -
    seriesOf(text, 'local_volume_provisioner_volume_stats_omitted');
  const scrape = medianOf(() => metrics.registry.render());
  const omitted = /local_volume_provisioner_volume_stats_omitted (\d+)/u.exec(text)?.[1] ?? '0';
  return [
    `| ${label} | ${(text.length / 1024).toFixed(1)} KiB | ${String(perVolume)} | ${omitted} | ${scrape.cpuMs.toFixed(2)} ms CPU, ${scrape.wallMs.toFixed(2)} ms wall |`,
  ];
}

async function main(): Promise<void> {
  const cleanup = new Cleanup();
  const work = mkdtempSync(join(tmpdir(), 'lvp-usage-bench-'));
  try {
    const store = join(work, 'store');
    const disc = join(work, 'disc');
    mkdirSync(store);
    mkdirSync(disc);
    mountTmpfs(cleanup, store, 64 * 2 ** 20);
    for (let i = 0; i < VOLUMES; i++) {
      mkdirSync(join(store, `v${String(i)}`));
      mkdirSync(join(disc, `v${String(i)}`));
      bindMount(cleanup, join(store, `v${String(i)}`), join(disc, `v${String(i)}`));
    }
    const volumes = new LinuxVolumes();
    const pvs = await persistentVolumes(disc, volumes);
    const text = `storageClassMap:\n  bench:\n    hostDir: ${disc}\n    mountDir: ${disc}\n`;
    const config = parseConfigSnapshot(snapshotFromFileText('bench.yaml', text)).config;
    const metrics = createAgentMetrics();
    const deps = {
      volumes,
      events: { record: () => undefined },
      metrics,
      logger: new MemoryLogger(),
      clock: systemClock,
    };
    const health = new VolumeHealth({ config, node: NODE }, deps);
    const table = await volumes.mountPoints();
    await health.check(pvs, table);
    if (metrics.volumeUsage.size !== VOLUMES) throw new Error(`${String(metrics.volumeUsage.size)} samples`);
    const idle = await medianOfAsync(async () => health.check(pvs, table));
    const summary = medianOf(() => availableSummary(pvs));
    const capped = createAgentMetrics(undefined, { volumeSeriesLimit: 3000 });
    for (const [k, v] of metrics.volumeUsage) capped.volumeUsage.set(k, v);
    const rows = [
      ...scrapeRows(createAgentMetrics(), [], 'no PVs (the registry alone, for scale)'),
      ...scrapeRows(metrics, pvs, `${String(VOLUMES)} Filesystem PVs, default cap (10,000 series)`),
      ...scrapeRows(capped, pvs, `${String(VOLUMES)} Filesystem PVs, --volume-stats-max-series 3000`),
      ...scrapeRows(
        createAgentMetrics(undefined, { volumeSeriesLimit: 0 }),
        pvs,
        `${String(VOLUMES)} Filesystem PVs, --volume-stats-max-series 0`,
      ),
    ];
    console.log(
      `| ${String(VOLUMES)} PVs (half Bound), median of ${String(RUNS)} | /metrics size | per-volume series | PVs omitted | one scrape |`,
    );
    console.log('|---|---|---|---|---|');
    for (const row of rows) console.log(row);
    console.log('');
    console.log(
      `idle health pass with the usage kept: ${idle.cpuMs.toFixed(2)} ms CPU, ${idle.wallMs.toFixed(2)} ms wall`,
    );
    console.log(`per-class Available summary (each pass event, the status): ${summary.cpuMs.toFixed(3)} ms CPU`);
  } finally {
    cleanup.run();
    rmSync(work, { recursive: true, force: true });
  }
}

await main();
