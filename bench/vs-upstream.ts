// This agent beside upstream's Go agent (sig-storage-local-static-provisioner, built from source by
// scripts/build-upstream-agent.sh), issue 35's "agent's own footprint" table: both agents against
// ONE real apiserver, real tmpfs bind mounts, alternating run by run (each run starts them one after
// the other, the first of a run alternating), each agent on a Node and a discovery directory of its
// own; each start waits until the processes started before it (bare node, the floor, the run's
// earlier agents) and the control plane have used no CPU for 300 ms. Per run and agent:
//   - spawn → first PV and spawn → all N PVs (default 50), seen by one watch of every PV;
//   - RSS once the N PVs exist, and idle RSS SETTLE seconds after spawn (default 60);
//   - idle CPU (utime + stime) and the maximum RSS over one window shared by every agent of the run,
//     bare node and the Node runtime floor (node + the built-ins the agent needs, run with the image's
//     NODE_OPTIONS);
//   - a burst of B new bind mounts (default 200) → all their PVs: time and the agent's CPU.
// Upstream reads its config only from /etc/provisioner/config: it runs in a mount namespace of its
// own (`unshare -m --propagation slave`) where an overlay on /etc holds that directory, bound to the
// run's config; the discovery directories live on a shared tmpfs so the burst's mounts reach it.
// Every agent of ours runs as the image runs it (`node --jitless bin/run.js run`: the Dockerfile's
// ENTRYPOINT and NODE_OPTIONS) unless variants are given.
// `--upstream none` leaves upstream out (to compare variants of this agent), `--burst 0` the burst.
// Usage (as root, after `npm run build` and `bash scripts/build-upstream-agent.sh`):
//   node dist/bench/vs-upstream.js --upstream ~/.cache/lvp-upstream/<commit>/local-volume-provisioner
//     [--runs 3] [--volumes 50] [--burst 200] [--settle-seconds 60] [--idle-seconds 120]
//     [--ours 'label;NODE_OPTIONS;node flags;agent flags[;bin/run.js[;NAME=value ...]]' ...]   (each --ours
//     adds a variant of this agent; the fifth field runs another build, e.g. a worktree of the
//     baseline, the sixth sets environment variables, e.g. MALLOC_ARENA_MAX=2)
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { loadKubeconfig } from '../src/core/kube/kubeconfig.js';
import type { PersistentVolume } from '../src/core/kube/objects.js';
import { RestCluster } from '../src/core/kube/rest-cluster.js';
import { startControlPlane } from '../test/support/control-plane.js';
import { Cleanup, bindMount, mountTmpfs, run } from '../test/support/real-node.js';
import {
  IMAGE_NODE_ARGS,
  IMAGE_NODE_OPTIONS,
  agentCommandLine,
  quietProcesses,
  cpuSeconds,
  kubeBinDir,
  median,
  numberFlag,
  rssBytesOf,
} from './support.js';

const MiB = 2 ** 20;
const RUNS = numberFlag('--runs', 3);
const VOLUMES = numberFlag('--volumes', 50);
const BURST = numberFlag('--burst', 200);
const SETTLE_SECONDS = numberFlag('--settle-seconds', 60);
const IDLE_SECONDS = numberFlag('--idle-seconds', 120);
const CLASS = 'vs-fs';
/** The built-in modules `provisioner run` cannot do without: the runtime floor loads them and idles. */
const FLOOR_BUILTINS = [
  'node:https',
  'node:zlib',
  'node:child_process',
  'node:fs/promises',
  'node:perf_hooks',
  'node:net',
  'node:dns',
];

function argsOf(name: string): string[] {
  return process.argv.flatMap((a, i) => (a === name ? [process.argv[i + 1] ?? ''] : []));
}
const UPSTREAM = argsOf('--upstream')[0];
if (UPSTREAM === undefined || (UPSTREAM !== 'none' && !existsSync(UPSTREAM))) {
  console.error('usage: node dist/bench/vs-upstream.js --upstream PATH (see scripts/build-upstream-agent.sh)');
  process.exit(2);
}

interface Variant {
  readonly label: string;
  readonly kind: 'upstream' | 'ours';
  readonly nodeOptions: string;
  readonly nodeArgs: readonly string[];
  /** Flags after the agent's own (e.g. `--min-pass-interval 0`). */
  readonly agentArgs: readonly string[];
  /** Another build's `bin/run.js` (a baseline to pair with); default this repository's. */
  readonly script?: string;
  /** More environment variables for the agent (`NAME=value` words). */
  readonly env: Readonly<Record<string, string>>;
}
const OURS: Variant[] = argsOf('--ours').map((spec) => {
  const [label = spec, nodeOptions = '', args = '', agentArgs = '', script = '', env = ''] = spec.split(';');
  const words = (text: string): string[] => text.split(' ').filter((a) => a !== '');
  const pairs = words(env).map((w) => [w.slice(0, w.indexOf('=')), w.slice(w.indexOf('=') + 1)] as const);
  return {
    label,
    kind: 'ours',
    nodeOptions,
    nodeArgs: words(args),
    agentArgs: words(agentArgs),
    ...(script !== '' ? { script } : {}),
    env: Object.fromEntries(pairs),
  };
});
const VARIANTS: readonly Variant[] = [
  ...(UPSTREAM === 'none'
    ? []
    : [{ label: 'upstream', kind: 'upstream' as const, nodeOptions: '', nodeArgs: [], agentArgs: [], env: {} }]),
  ...(OURS.length > 0
    ? OURS
    : [
        {
          label: 'this agent',
          kind: 'ours' as const,
          nodeOptions: IMAGE_NODE_OPTIONS,
          nodeArgs: IMAGE_NODE_ARGS,
          agentArgs: [],
          env: {},
        },
      ]),
];

interface Agent {
  readonly pid: number;
  readonly spawnedAt: number;
  readonly stderr: () => string;
  stop(): Promise<void>;
}

const children: ChildProcess[] = [];
// Interrupted: no agent outlives the bench (upstream runs under unshare and would be orphaned).
for (const signal of ['SIGINT', 'SIGTERM'] as const)
  process.once(signal, () => {
    for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
    process.exit(130);
  });

function spawnAgent(command: string, args: readonly string[], env: NodeJS.ProcessEnv): Agent {
  const spawnedAt = performance.now();
  const child = spawn(command, args, { env, stdio: ['ignore', 'ignore', 'pipe'] });
  children.push(child);
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => {
    stderr = (stderr + d).slice(-100_000);
  });
  return {
    pid: child.pid ?? 0,
    spawnedAt,
    stderr: () => stderr,
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/** Upstream in a mount namespace whose /etc/provisioner/config is `configDir` (an overlay on /etc). */
function startUpstream(node: string, configDir: string, scratch: string, kubeconfig: string): Agent {
  mkdirSync(scratch, { recursive: true });
  const script = [
    'set -e',
    'mount -t tmpfs lvp-vs-etc "$1"',
    'mkdir "$1/u" "$1/w"',
    'mount -t overlay lvp-vs-etc -o lowerdir=/etc,upperdir="$1/u",workdir="$1/w" /etc',
    'mkdir -p /etc/provisioner/config',
    'mount --bind "$2" /etc/provisioner/config',
    'shift 2',
    'exec "$@"',
  ].join('\n');
  return spawnAgent(
    'unshare',
    [
      '-m',
      '--propagation',
      'slave',
      'sh',
      '-c',
      script,
      'sh',
      scratch,
      configDir,
      UPSTREAM ?? '',
      '--listen-address=127.0.0.1:0',
    ],
    { PATH: process.env['PATH'], MY_NODE_NAME: node, MY_NAMESPACE: 'default', KUBECONFIG: kubeconfig },
  );
}

function startOurs(v: Variant, node: string, configFile: string, socket: string, kubeconfig: string): Agent {
  const args = [...v.nodeArgs, ...agentCommandLine(configFile, socket, v.script), ...v.agentArgs];
  return spawnAgent(process.execPath, args, {
    ...process.env,
    MY_NODE_NAME: node,
    KUBECONFIG: kubeconfig,
    NODE_OPTIONS: v.nodeOptions,
    ...v.env,
  });
}

/** The node a PV is pinned to (its required node affinity on kubernetes.io/hostname). */
function nodeOf(pv: PersistentVolume): string | undefined {
  for (const term of pv.spec.nodeAffinity?.required?.nodeSelectorTerms ?? [])
    for (const e of term.matchExpressions ?? []) if (e.key === 'kubernetes.io/hostname') return e.values?.[0];
  return undefined;
}

/** When each PV first showed up (performance.now()), by node, from one list and watch of every PV. */
function watchEveryPv(cluster: RestCluster, signal: AbortSignal): Map<string, Map<string, number>> {
  const byNode = new Map<string, Map<string, number>>();
  const saw = (pv: PersistentVolume): void => {
    const node = nodeOf(pv);
    if (node === undefined) return;
    const seen = byNode.get(node) ?? new Map<string, number>();
    byNode.set(node, seen);
    if (!seen.has(pv.metadata.name)) seen.set(pv.metadata.name, performance.now());
  };
  void (async () => {
    while (!signal.aborted) {
      try {
        const list = await cluster.persistentVolumes.list();
        list.items.forEach(saw);
        const events = cluster.persistentVolumes.watch({
          resourceVersion: list.metadata.resourceVersion ?? '0',
          signal,
        });
        for await (const e of events) if (e.type === 'ADDED' || e.type === 'MODIFIED') saw(e.object);
      } catch {
        await delay(50);
      }
    }
  })();
  return byNode;
}

async function until(check: () => boolean, what: string, ms: number): Promise<void> {
  const end = performance.now() + ms;
  while (!check()) {
    if (performance.now() > end) throw new Error(`timed out: ${what}`);
    await delay(5);
  }
}

/** n bind mounts of one fresh tmpfs, each a directory `<prefix><i>` of `disc`. */
function volumes(cleanup: Cleanup, store: string, disc: string, n: number, prefix: string): void {
  mountTmpfs(cleanup, store, 64 * MiB);
  for (let i = 0; i < n; i++) {
    mkdirSync(join(store, `${prefix}${String(i)}`));
    bindMount(cleanup, join(store, `${prefix}${String(i)}`), join(disc, `${prefix}${String(i)}`));
  }
}

const loadavg = (): string => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');

/** One measure's figures by variant label, over the runs. */
type Figures = Map<string, Map<string, number[]>>;
function record(figures: Figures, measure: string, label: string, value: number): void {
  const byLabel = figures.get(measure) ?? new Map<string, number[]>();
  figures.set(measure, byLabel);
  byLabel.set(label, [...(byLabel.get(label) ?? []), value]);
}

interface Setting {
  readonly cluster: RestCluster;
  readonly pvs: Map<string, Map<string, number>>;
  readonly kubeconfig: string;
  readonly work: string;
  readonly figures: Figures;
  /** The apiserver's and etcd's: quiet too before a start is timed. */
  readonly planePids: readonly number[];
}

interface Running {
  readonly v: Variant;
  readonly agent: Agent;
  readonly node: string;
  readonly disc: string;
}

/** Starts one variant on a fresh Node and discovery directory; records its start-up figures. */
async function startOne(
  s: Setting,
  cleanup: Cleanup,
  v: Variant,
  runNo: number,
  i: number,
  others: readonly number[],
): Promise<Running> {
  const node = `vs-${String(runNo)}-${String(i)}-${v.kind}`;
  await s.cluster.nodes.create({ metadata: { name: node, labels: { 'kubernetes.io/hostname': node } } });
  const base = join(s.work, node);
  const disc = join(base, 'disc');
  mkdirSync(disc, { recursive: true });
  volumes(cleanup, join(base, 'store'), disc, VOLUMES, 'v');
  // The bench's own processes (the floor's two starts, the agent started before this one, the
  // control plane after the last run's deletes) quiet first.
  if (!(await quietProcesses([...others, ...s.planePids])))
    console.error(`${v.label}: the other processes were not quiet within 10 s; timed anyway`);
  const agent =
    v.kind === 'upstream'
      ? startUpstream(node, upstreamConfig(base, disc), join(base, 'etc'), s.kubeconfig)
      : startOurs(v, node, oursConfig(base, disc), join(base, 'admin.sock'), s.kubeconfig);
  const seen = (): Map<string, number> => s.pvs.get(node) ?? new Map<string, number>();
  await until(
    () => seen().size >= VOLUMES,
    `${v.label}: ${String(VOLUMES)} PVs (${agent.stderr().slice(-2000)})`,
    // upstream creates at client-go's default 5 requests a second: 1,000 PVs take ~200 s
    Math.max(120_000, VOLUMES * 400),
  );
  const rss = rssBytesOf(agent.pid);
  const times = [...seen().values()];
  record(s.figures, 'spawn → first PV (ms)', v.label, Math.min(...times) - agent.spawnedAt);
  record(s.figures, `spawn → all ${String(VOLUMES)} PVs (ms)`, v.label, Math.max(...times) - agent.spawnedAt);
  record(s.figures, `RSS once the ${String(VOLUMES)} PVs exist (MiB)`, v.label, rss / MiB);
  return { v, agent, node, disc };
}

function upstreamConfig(base: string, disc: string): string {
  const dir = join(base, 'config');
  mkdirSync(dir);
  writeFileSync(join(dir, 'storageClassMap'), `${CLASS}:\n  hostDir: ${disc}\n  mountDir: ${disc}\n`);
  return dir;
}

function oursConfig(base: string, disc: string): string {
  const file = join(base, 'config.yaml');
  writeFileSync(file, `storageClassMap:\n  ${CLASS}:\n    hostDir: ${disc}\n    mountDir: ${disc}\n`);
  return file;
}

/** The shared idle window: idle RSS at SETTLE s after each spawn, then CPU and max RSS over the window. */
async function idle(s: Setting, running: readonly Running[], floors: readonly [string, number][]): Promise<void> {
  const last = Math.max(...running.map((r) => r.agent.spawnedAt));
  for (const r of [...running].sort((a, b) => a.agent.spawnedAt - b.agent.spawnedAt)) {
    await delay(Math.max(0, r.agent.spawnedAt + SETTLE_SECONDS * 1000 - performance.now()));
    record(
      s.figures,
      `idle RSS ${String(SETTLE_SECONDS)} s after spawn (MiB)`,
      r.v.label,
      rssBytesOf(r.agent.pid) / MiB,
    );
  }
  await delay(Math.max(0, last + SETTLE_SECONDS * 1000 - performance.now()));
  const pids: [string, number][] = [...running.map((r): [string, number] => [r.v.label, r.agent.pid]), ...floors];
  const cpu0 = pids.map(([, pid]) => cpuSeconds(pid));
  const rssMax = pids.map(() => 0);
  const end = performance.now() + IDLE_SECONDS * 1000;
  while (performance.now() < end) {
    await delay(5000);
    pids.forEach(([, pid], i) => (rssMax[i] = Math.max(rssMax[i] ?? 0, rssBytesOf(pid))));
  }
  pids.forEach(([label, pid], i) => {
    record(s.figures, `idle CPU over ${String(IDLE_SECONDS)} s (s)`, label, cpuSeconds(pid) - (cpu0[i] ?? 0));
    record(s.figures, `idle RSS, max over the window (MiB)`, label, (rssMax[i] ?? 0) / MiB);
    const status = readFileSync(`/proc/${String(pid)}/status`, 'utf8');
    for (const part of ['RssAnon', 'RssFile'] as const) {
      const kB = new RegExp(`${part}:\\s+(\\d+) kB`, 'u').exec(status)?.[1];
      record(
        s.figures,
        `  of which ${part === 'RssAnon' ? 'anonymous' : 'file-backed'}, at the window's end (MiB)`,
        label,
        Number(kB) / 1024,
      );
    }
  });
}

/** BURST new bind mounts into one agent's directory → all their PVs: time and the agent's CPU. */
async function burst(s: Setting, cleanup: Cleanup, r: Running): Promise<void> {
  const seen = (): number => s.pvs.get(r.node)?.size ?? 0;
  const cpu0 = cpuSeconds(r.agent.pid);
  const t0 = performance.now();
  volumes(cleanup, join(s.work, r.node, 'burst-store'), r.disc, BURST, 'b');
  const mounted = performance.now();
  await until(() => seen() >= VOLUMES + BURST, `${r.v.label}: the burst's PVs`, 300_000);
  const times = [...(s.pvs.get(r.node)?.values() ?? [])];
  const cpu = cpuSeconds(r.agent.pid) - cpu0;
  record(
    s.figures,
    `${String(BURST)} mounts in a burst → all PVs, from the first mount (s)`,
    r.v.label,
    (Math.max(...times) - t0) / 1000,
  );
  record(s.figures, `CPU to publish ${String(BURST)} PVs in a burst (s)`, r.v.label, cpu);
  record(s.figures, `(the burst's ${String(BURST)} mounts took, s)`, r.v.label, (mounted - t0) / 1000);
}

function floorProcesses(): [string, number][] {
  const bare = spawn(process.execPath, ['-e', 'setInterval(()=>{},1e9)'], { stdio: 'ignore', env: {} });
  const floorScript = `for (const m of ${JSON.stringify(FLOOR_BUILTINS)}) process.getBuiltinModule(m); setInterval(()=>{},1e9)`;
  const floor = spawn(process.execPath, ['-e', floorScript], {
    stdio: 'ignore',
    env: { NODE_OPTIONS: IMAGE_NODE_OPTIONS },
  });
  children.push(bare, floor);
  return [
    ['bare node', bare.pid ?? 0],
    ['Node runtime floor (node + built-ins, image NODE_OPTIONS)', floor.pid ?? 0],
  ];
}

async function oneRun(s: Setting, runNo: number): Promise<void> {
  const cleanup = new Cleanup();
  const order = runNo % 2 === 0 ? [...VARIANTS] : [...VARIANTS].reverse();
  const running: Running[] = [];
  const load0 = loadavg();
  try {
    const floors = floorProcesses();
    for (const [i, v] of order.entries())
      running.push(
        await startOne(s, cleanup, v, runNo, i, [...floors.map(([, pid]) => pid), ...running.map((r) => r.agent.pid)]),
      );
    await idle(s, running, floors);
    for (const [, pid] of floors) process.kill(pid);
    if (BURST > 0) for (const r of running) await burst(s, cleanup, r);
  } finally {
    for (const r of running) await r.agent.stop();
    for (const r of running) {
      for (const name of s.pvs.get(r.node)?.keys() ?? [])
        await s.cluster.persistentVolumes.delete(name).catch(() => undefined);
      await s.cluster.nodes.delete(r.node).catch(() => undefined);
    }
    cleanup.run();
  }
  console.error(
    `run ${String(runNo + 1)}: order ${order.map((v) => v.label).join(' → ')}, load ${load0} → ${loadavg()}; spawn → first PV ${running.map((r) => `${r.v.label} ${(s.figures.get('spawn → first PV (ms)')?.get(r.v.label)?.at(-1) ?? NaN).toFixed(0)} ms`).join(', ')}`,
  );
}

function fmt(xs: readonly number[] | undefined, digits: number): string {
  if (xs === undefined || xs.length === 0) return '—';
  const f = (x: number): string =>
    x.toLocaleString('en', { maximumFractionDigits: digits, minimumFractionDigits: digits });
  return xs.length === 1 ? f(xs[0] ?? NaN) : `${f(median(xs))} (${f(Math.min(...xs))}–${f(Math.max(...xs))})`;
}

function table(figures: Figures, runs = RUNS): string {
  const labels = [...new Set([...figures.values()].flatMap((m) => [...m.keys()]))];
  const head = `| measure (median (min–max) of ${String(runs)} runs) | ${labels.join(' | ')} |\n|---|${labels.map(() => '---|').join('')}`;
  const rows = [...figures.entries()].map(([measure, byLabel]) => {
    const digits = measure.includes('(ms)') ? 0 : measure.includes('CPU') ? 2 : 1;
    return `| ${measure} | ${labels.map((l) => fmt(byLabel.get(l), digits)).join(' | ')} |`;
  });
  return [head, ...rows].join('\n');
}

const work = mkdtempSync(join(tmpdir(), 'lvp-vs-upstream-'));
const outer = new Cleanup();
outer.defer(`remove ${work}`, () => {
  rmSync(work, { recursive: true, force: true });
});
const plane = await startControlPlane({ binDir: kubeBinDir() });
const stop = new AbortController();
try {
  // The discovery directories on a shared mount, so that mounts made later reach upstream's namespace.
  mountTmpfs(outer, work, 16 * MiB);
  run('mount', ['--make-rshared', work]);
  const connection = await loadKubeconfig(plane.kubeconfigPath);
  const cluster = new RestCluster({ connection, qps: 0 });
  await cluster.storageClasses.create({
    metadata: { name: CLASS },
    provisioner: 'kubernetes.io/no-provisioner',
    reclaimPolicy: 'Delete',
  });
  const setting: Setting = {
    cluster,
    pvs: watchEveryPv(cluster, stop.signal),
    kubeconfig: plane.kubeconfigPath,
    work,
    figures: new Map(),
    planePids: [plane.pids.apiserver, plane.pids.etcd],
  };
  await delay(500);
  const loadStart = loadavg();
  const date = new Date().toISOString();
  for (let r = 0; r < RUNS; r++) {
    await oneRun(setting, r);
    console.error(table(setting.figures, r + 1)); // the figures so far, should a later run fail
  }
  console.log(table(setting.figures));
  console.log(
    `\n${date}, node ${process.version}, ${String(RUNS)} runs, ${String(VOLUMES)} volumes, burst ${String(BURST)}, settle ${String(SETTLE_SECONDS)} s, idle window ${String(IDLE_SECONDS)} s; image NODE_OPTIONS=${IMAGE_NODE_OPTIONS}; load ${loadStart} → ${loadavg()}; variants: ${VARIANTS.map((v) => `${v.label} [NODE_OPTIONS=${v.nodeOptions}${v.nodeArgs.length > 0 ? `; ${v.nodeArgs.join(' ')}` : ''}${v.agentArgs.length > 0 ? `; agent ${v.agentArgs.join(' ')}` : ''}]`).join(', ')}`,
  );
  stop.abort();
  cluster.close();
} finally {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  await delay(200);
  outer.run();
  await plane.stop();
}
