// Reload churn: memory and resources of a real `provisioner run --sandbox` process while its
// config changes again and again. The script swaps a kubelet-style ConfigMap volume
// (test/support/configmap-volume.ts) between two configs every --interval (they differ in
// labelsForPV: each swap is a change the agent applies, restarting its sync loop), with
// --volumes directories as disks of one class (each a PV of the sandbox's in-memory cluster).
// The agent runs with the image's NODE_OPTIONS and node flags (bench/support.ts) unless
// --node-options or --node-args say otherwise. Reloads are counted from the agent's JSON log ("config applied").
//
// Measured: idle RSS (after --idle-seconds, before the first swap), RSS from /proc every second,
// RSS after --baseline applied reloads, at the end and its peak, and from the admin status every
// --status-every seconds the heap in use, the active handles and timers (by type) and the open
// watches of the cluster. Not a timed test: nothing depends on speed.
//
// --diagnose adds `--trace-gc` (summarized: the heap after each mark-compact) and heap snapshots
// (`--heapsnapshot-signal`) after each --snapshot-at count of applied reloads, diffed by
// constructor (count and self size) between the first and the last.
//
// Usage (after `npm run build`): node dist/bench/reload-churn.js [--interval 1000] [--reloads 10000]
//   [--duration-s S] [--volumes 1000] [--baseline 500] [--idle-seconds 30] [--status-every 30]
//   [--node-options "…"] [--node-args "--optimize-for-size"] [--diagnose [--snapshot-at 100,1000]] [--keep]
// --duration-s ends the run after S seconds of churn whatever the count (the 10-minute peak run:
// --interval 250 --duration-s 600). Defaults: the figures (10,000 reloads, one a second).
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as delay } from 'node:timers/promises';
import { AdminClient } from '../src/core/agent/admin-client.js';
import type { AgentStatusJson } from '../src/core/agent/reload-types.js';
import { kubeletUpdate, writeConfigMapVolume } from '../test/support/configmap-volume.js';
import { diffHeapSnapshots, newObjectHolders, summarizeTraceGc } from './heap-diff.js';
import { cpuSeconds, IMAGE_NODE_ARGS, IMAGE_NODE_OPTIONS, REPO_ROOT, rssBytesOf } from './support.js';

function flag(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? (process.argv[i + 1] ?? fallback) : fallback;
}
const INTERVAL_MS = Number(flag('interval', '1000'));
const RELOADS = Number(flag('reloads', '10000'));
const DURATION_S = Number(flag('duration-s', 'Infinity'));
const VOLUMES = Number(flag('volumes', '1000'));
const BASELINE = Number(flag('baseline', '500'));
const IDLE_S = Number(flag('idle-seconds', '30'));
const STATUS_EVERY_S = Number(flag('status-every', '30'));
const NODE_OPTIONS = flag('node-options', IMAGE_NODE_OPTIONS);
// V8 flags node refuses in NODE_OPTIONS (--optimize-for-size, --no-opt…), given before the script.
const NODE_ARGS = flag('node-args', IMAGE_NODE_ARGS.join(' ')).split(' ').filter(Boolean);
const DIAGNOSE = process.argv.includes('--diagnose');
const SNAPSHOT_AT = flag('snapshot-at', '100,1000')
  .split(',')
  .map(Number)
  .filter((n) => n > 0);
const KEEP = process.argv.includes('--keep');

const mib = (bytes: number): string => (bytes / 2 ** 20).toFixed(1);

const work = await mkdtemp(join(tmpdir(), 'lvp-reload-churn-'));
const sandbox = join(work, 'sandbox');
const disks = join(sandbox, 'disks', 'churn');
const configDir = join(work, 'config');
const configOf = (label: string): Record<string, string> => ({
  storageClassMap: `churn:\n  hostDir: ${disks}\n  mountDir: ${disks}\n`,
  labelsForPV: `churn: "${label}"\n`,
});
const CONFIGS = [configOf('a'), configOf('b')] as const;

/** What the agent's log told: where it listens, how many configs it applied, its errors. */
const seen = { listen: '', applied: 0, errors: [] as string[], exited: false };

function startAgent(): ChildProcess {
  // Not in NODE_OPTIONS: node refuses --trace-gc there.
  const diagnose = DIAGNOSE ? ['--trace-gc', '--heapsnapshot-signal=SIGUSR2'] : [];
  const agent = spawn(
    process.execPath,
    [
      ...NODE_ARGS,
      ...diagnose,
      join(REPO_ROOT, 'bin/run.js'),
      'run',
      '--sandbox',
      sandbox,
      '--config-dir',
      configDir,
      '--admin-socket',
      join(work, 'admin.sock'),
      '--listen-address',
      '127.0.0.1:0',
      '--log-format',
      'json',
      '--reload-guard',
      'apply',
    ],
    {
      cwd: work,
      stdio: ['ignore', DIAGNOSE ? 'pipe' : 'ignore', 'pipe'],
      env: { ...process.env, NODE_OPTIONS },
    },
  );
  agent.on('exit', () => {
    seen.exited = true;
  });
  if (DIAGNOSE) agent.stdout?.pipe(createWriteStream(join(work, 'trace-gc.log')));
  createInterface({ input: agent.stderr ?? process.stdin }).on('line', (line) => {
    let record: Record<string, unknown>;
    try {
      record = JSON.parse(line) as Record<string, unknown>;
    } catch {
      seen.errors.push(line.slice(0, 300));
      return;
    }
    if (record['msg'] === 'agent started') seen.listen = String(record['listen']);
    else if (record['msg'] === 'config applied') seen.applied++;
    else if (record['level'] === 'error') seen.errors.push(line.slice(0, 300));
  });
  return agent;
}

/** One admin status sample: heap, handles and timers by type. */
interface StatusSample {
  readonly applied: number;
  readonly rss: number;
  readonly heapUsed: number;
  readonly resources: Readonly<Record<string, number>>;
  readonly watches: number;
  /** The agent's CPU seconds so far (utime + stime). */
  readonly cpu: number;
}

async function statusSample(admin: AdminClient, pid: number): Promise<StatusSample> {
  const status: AgentStatusJson = await admin.status();
  const metrics = await (await fetch(`http://${seen.listen}/metrics`)).text();
  const watches = /^local_volume_provisioner_api_watches (\S+)$/mu.exec(metrics)?.[1];
  return {
    applied: seen.applied,
    rss: rssBytesOf(pid),
    heapUsed: status.diagnostics?.heapUsedBytes ?? NaN,
    resources: status.diagnostics?.activeResources ?? {},
    watches: watches === undefined ? NaN : Number(watches),
    cpu: cpuSeconds(pid),
  };
}

/** Asks for a heap snapshot and waits until the file is written whole; returns its path. */
async function heapSnapshot(agent: ChildProcess, taken: Set<string>): Promise<string> {
  agent.kill('SIGUSR2');
  for (;;) {
    await delay(500);
    const found = (await readdir(work)).filter((n) => n.endsWith('.heapsnapshot') && !taken.has(n));
    const name = found[0];
    if (name === undefined) continue;
    const path = join(work, name);
    const size = (await stat(path)).size;
    await delay(1000);
    if ((await stat(path)).size !== size) continue;
    const tail = (await readFile(path, 'utf8')).trimEnd().slice(-2);
    if (tail !== ']}') continue;
    taken.add(name);
    return path;
  }
}

const rssSamples: { t: number; applied: number; rss: number }[] = [];
const statusSamples: StatusSample[] = [];
const snapshots: { at: number; path: string }[] = [];

/** The churn: a swap every INTERVAL_MS until RELOADS are applied or DURATION_S passed. */
async function churn(
  agent: ChildProcess,
  admin: AdminClient,
  pid: number,
): Promise<{ seconds: number; swaps: number }> {
  const started = performance.now();
  let swaps = 0;
  let nextStatus = started + STATUS_EVERY_S * 1000;
  let nextRss = started;
  const pendingSnapshots = DIAGNOSE ? [...SNAPSHOT_AT].sort((a, b) => a - b) : [];
  const taken = new Set<string>();
  while (seen.applied < RELOADS && (performance.now() - started) / 1000 < DURATION_S && !seen.exited) {
    const tick = performance.now();
    await kubeletUpdate(configDir, CONFIGS[++swaps % 2] ?? {});
    if (tick >= nextRss) {
      rssSamples.push({ t: (tick - started) / 1000, applied: seen.applied, rss: rssBytesOf(pid) });
      nextRss += 1000;
    }
    if (tick >= nextStatus) {
      statusSamples.push(await statusSample(admin, pid));
      nextStatus += STATUS_EVERY_S * 1000;
    }
    if (pendingSnapshots[0] !== undefined && seen.applied >= pendingSnapshots[0]) {
      snapshots.push({ at: seen.applied, path: await heapSnapshot(agent, taken) });
      pendingSnapshots.shift();
    }
    if (swaps % 500 === 0)
      console.error(
        `… ${String(swaps)} swaps, ${String(seen.applied)} applied, RSS ${mib(rssBytesOf(pid))} MiB, ${((performance.now() - started) / 1000).toFixed(0)} s`,
      );
    await delay(Math.max(0, tick + INTERVAL_MS - performance.now()));
  }
  // A snapshot point the loop ended on (the last reload applied) is taken now.
  if (pendingSnapshots.length > 0 && !seen.exited) {
    await delay(INTERVAL_MS);
    snapshots.push({ at: seen.applied, path: await heapSnapshot(agent, taken) });
  }
  return { seconds: (performance.now() - started) / 1000, swaps };
}

/** RSS samples from `applied` reloads on: the first one's value. */
function rssAfter(applied: number): number {
  return rssSamples.find((s) => s.applied >= applied)?.rss ?? NaN;
}

function report(idle: StatusSample, end: StatusSample, run: { seconds: number; swaps: number }): void {
  const peak = Math.max(...rssSamples.map((s) => s.rss));
  const afterBaseline = rssSamples.filter((s) => s.applied >= BASELINE);
  const tenth = Math.max(1, Math.floor(afterBaseline.length / 10));
  const medianOf = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
  const early = medianOf(afterBaseline.slice(0, tenth).map((s) => s.rss));
  const late = medianOf(afterBaseline.slice(-tenth).map((s) => s.rss));
  const handles = (s: StatusSample): string =>
    Object.entries(s.resources)
      .sort()
      .map(([k, n]) => `${k} ${String(n)}`)
      .join(', ');
  console.log(
    `node ${process.version} ${NODE_ARGS.join(' ')}, NODE_OPTIONS=${NODE_OPTIONS || '(none)'}, ${String(VOLUMES)} volumes, a swap every ${String(INTERVAL_MS)} ms`,
  );
  console.log('| what | figure |\n|---|---|');
  const row = (what: string, value: string): void => {
    console.log(`| ${what} | ${value} |`);
  };
  row(
    'swaps, reloads applied',
    `${String(run.swaps)} swaps, ${String(seen.applied)} applied in ${run.seconds.toFixed(0)} s`,
  );
  row('idle RSS (before the first swap)', `${mib(idle.rss)} MiB, heap in use ${mib(idle.heapUsed)} MiB`);
  row('peak RSS (sampled every second)', `${mib(peak)} MiB = idle + ${mib(peak - idle.rss)} MiB`);
  row(`RSS after ${String(BASELINE)} reloads → at the end`, `${mib(rssAfter(BASELINE))} → ${mib(end.rss)} MiB`);
  row(
    `RSS, median of the first and last tenth after ${String(BASELINE)} reloads`,
    `${mib(early)} → ${mib(late)} MiB (${late >= early ? '+' : ''}${mib(late - early)} MiB)`,
  );
  const cpu = end.cpu - idle.cpu;
  row(
    'agent CPU during the churn',
    `${cpu.toFixed(1)} s, ${((cpu / Math.max(1, seen.applied)) * 1000).toFixed(1)} ms a reload`,
  );
  row('heap in use, idle → end', `${mib(idle.heapUsed)} → ${mib(end.heapUsed)} MiB`);
  row('active handles and requests, idle', handles(idle));
  row('active handles and requests, end', handles(end));
  const allResources = statusSamples.map((s) => Object.values(s.resources).reduce((a, b) => a + b, 0));
  row(
    'active resources in all samples (min–max)',
    `${String(Math.min(...allResources))}–${String(Math.max(...allResources))}`,
  );
  // Sampled mid-reload, a count can be lower: the old generation's watches ended, the new one's not open yet.
  const watches = statusSamples.map((s) => s.watches);
  row(
    'open API watches: idle, end (all samples min–max)',
    `${String(idle.watches)}, ${String(end.watches)} (${String(Math.min(...watches))}–${String(Math.max(...watches))})`,
  );
  for (const line of seen.errors.slice(0, 5)) console.log(`  agent error: ${line}`);
}

async function diagnosis(): Promise<void> {
  if (!DIAGNOSE) return;
  console.log('\ntrace-gc (heap after each mark-compact, MiB):');
  console.log(summarizeTraceGc(await readFile(join(work, 'trace-gc.log'), 'utf8')));
  const first = snapshots[0];
  const last = snapshots.at(-1);
  if (first === undefined || last === undefined || first === last) return;
  console.log(`\nheap snapshots after ${String(first.at)} and ${String(last.at)} reloads (in ${work}):`);
  const [before, after] = [await readFile(first.path, 'utf8'), await readFile(last.path, 'utf8')];
  console.log(diffHeapSnapshots(before, after));
  console.log('new objects by the oldest object holding them:');
  console.log(newObjectHolders(before, after));
}

for (let i = 0; i < VOLUMES; i++) await mkdir(join(disks, `v${String(i)}`), { recursive: true });
await writeConfigMapVolume(configDir, CONFIGS[0]);
const agent = startAgent();
const pid = agent.pid ?? 0;
try {
  for (let i = 0; seen.listen === ''; i++) {
    if (seen.exited || i > 1200) throw new Error(`the agent did not start: ${seen.errors.join('\n')}`);
    await delay(50);
  }
  const admin = new AdminClient(join(work, 'admin.sock'), { timeoutMs: 30_000 });
  await delay(IDLE_S * 1000);
  const idle = await statusSample(admin, pid);
  statusSamples.push(idle);
  const run = await churn(agent, admin, pid);
  await delay(2000);
  const end = await statusSample(admin, pid);
  statusSamples.push(end);
  if (seen.exited) throw new Error(`the agent exited: ${seen.errors.join('\n')}`);
  report(idle, end, run);
  await diagnosis();
} finally {
  agent.kill('SIGTERM');
  await Promise.race([new Promise((r) => agent.once('exit', r)), delay(10_000)]);
  if (!seen.exited) agent.kill('SIGKILL');
  if (!KEEP) await rm(work, { recursive: true, force: true });
}
