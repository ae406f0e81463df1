// Shared by the benchmarks: the real kube-apiserver/etcd binaries (built or cached), the image's
// NODE_OPTIONS, a process's RSS and CPU from /proc, bare node's start, bind-mounted volumes, the
// agent's command line and a watch of a node's PVs; and for the fleet benchmarks (fleet-rollout,
// staged-rollout) an agent's config and status sides, requests counted per client, and the CLI
// timed as a process.
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { systemClock } from '../src/core/clock.js';
import { parseConfigSnapshot } from '../src/core/config/decode/parse.js';
import { snapshotFromDirectoryFiles } from '../src/core/config/decode/layout.js';
import { sourceLabel } from '../src/core/config/source/port.js';
import { StagedConfigSource } from '../src/core/config/source/staged.js';
import type { ConfigSource } from '../src/core/config/source/port.js';
import { ConfigWatcher } from '../src/core/config/watcher.js';
import { InvalidConfigError } from '../src/core/errors.js';
import { statusLeaseName } from '../src/core/fleet/applied-state.js';
import type { AppliedResult, AppliedState } from '../src/core/fleet/applied-state.js';
import { StatePublisher } from '../src/core/fleet/publisher.js';
import type { Cluster, LeaseCluster, ResourceClient } from '../src/core/kube/cluster.js';
import type { ConnectionSettings } from '../src/core/kube/kubeconfig.js';
import type { ConfigMap, Lease } from '../src/core/kube/objects.js';
import { RestCluster } from '../src/core/kube/rest-cluster.js';
import { silentLogger } from '../src/core/log.js';
import { NODE_LABEL } from '../src/core/pv/naming.js';
import { bindMount, mountTmpfs, type Cleanup } from '../test/support/real-node.js';

export const REPO_ROOT = join(import.meta.dirname, '../..');

export function kubeBinDir(): string {
  const r = spawnSync('bash', [join(REPO_ROOT, 'scripts/build-kube-binaries.sh')], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const dir = r.stdout.trim().split('\n').pop();
  if (r.status !== 0 || dir === undefined) throw new Error('cannot build the kube binaries');
  return dir;
}

/** A process's resident set size in bytes, from /proc (NaN when it cannot be read). */
export function rssBytesOf(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/u.exec(readFileSync(`/proc/${String(pid)}/status`, 'utf8'));
  return m ? Number(m[1]) * 1024 : NaN;
}

/** A live process's peak resident set size in bytes (VmHWM), from /proc (NaN when it cannot be read). */
export function peakRssBytesOf(pid: number): number {
  const m = /VmHWM:\s+(\d+) kB/u.exec(readFileSync(`/proc/${String(pid)}/status`, 'utf8'));
  return m ? Number(m[1]) * 1024 : NaN;
}

/** The image's NODE_OPTIONS (its Dockerfile's `ENV NODE_OPTIONS=`), so every agent runs as the image runs it. */
export const IMAGE_NODE_OPTIONS = (
  /^ENV NODE_OPTIONS=(.*)$/mu.exec(readFileSync(join(REPO_ROOT, 'Dockerfile'), 'utf8'))?.[1] ?? ''
).replace(/^"(.*)"$/u, '$1');

/** The node flags of the image's ENTRYPOINT (`node --jitless bin/run.js`: `--jitless`), so an agent runs as the image runs it. */
export const IMAGE_NODE_ARGS: readonly string[] = ((): string[] => {
  const line = /^ENTRYPOINT (\[.*\])$/mu.exec(readFileSync(join(REPO_ROOT, 'Dockerfile'), 'utf8'))?.[1] ?? '[]';
  const entrypoint = JSON.parse(line) as string[];
  const node = entrypoint.indexOf('node');
  if (node < 0) return [];
  const rest = entrypoint.slice(node + 1);
  const script = rest.findIndex((a) => !a.startsWith('-'));
  return script < 0 ? rest : rest.slice(0, script);
})();

export const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? (s[(s.length - 1) / 2] ?? NaN) : ((s[s.length / 2 - 1] ?? 0) + (s[s.length / 2] ?? 0)) / 2;
};

const TICK_S = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;

/** utime + stime of a live process, in seconds (its children not counted). */
export function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${String(pid)}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / TICK_S;
}

/**
 * Resolves once the given processes have used no CPU for `quietMs` (as /proc counts it, in clock
 * ticks; true), or after `maxMs` (false). A start timed right after processes the bench itself
 * started, or while an agent started before it is still busy, times their work as well (issue 35:
 * vs-upstream started a run's first agent beside the bare node's and the runtime floor's starts).
 */
export async function quietProcesses(pids: readonly number[], quietMs = 300, maxMs = 10_000): Promise<boolean> {
  const total = (): number => pids.reduce((sum, pid) => sum + cpuSecondsOrZero(pid), 0);
  const end = performance.now() + maxMs;
  let last = total();
  let since = performance.now();
  while (performance.now() < end) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    const now = total();
    if (now !== last) [last, since] = [now, performance.now()];
    else if (performance.now() - since >= quietMs) return true;
  }
  return false;
}

function cpuSecondsOrZero(pid: number): number {
  try {
    return cpuSeconds(pid);
  } catch {
    return 0; // exited
  }
}

/** When each PV of the node first showed up (performance.now()), from a list and then a watch. */
export function watchPvs(cluster: RestCluster, node: string, signal: AbortSignal): Map<string, number> {
  const seen = new Map<string, number>();
  void (async () => {
    while (!signal.aborted) {
      try {
        const list = await cluster.persistentVolumes.list({ labelSelector: `${NODE_LABEL}=${node}` });
        for (const pv of list.items) if (!seen.has(pv.metadata.name)) seen.set(pv.metadata.name, performance.now());
        for await (const e of cluster.persistentVolumes.watch({
          resourceVersion: list.metadata.resourceVersion ?? '0',
          labelSelector: `${NODE_LABEL}=${node}`,
          signal,
        })) {
          if (e.type === 'ADDED' && !seen.has(e.object.metadata.name))
            seen.set(e.object.metadata.name, performance.now());
        }
      } catch {
        await delay(50);
      }
    }
  })();
  return seen;
}

/** Bare node's spawn → first line of output, in ms: the start-up every agent start is set against. */
export async function bareNodeStartMs(): Promise<number> {
  const t0 = performance.now();
  const bare = spawn(process.execPath, ['-e', 'console.log(1); setInterval(() => {}, 1e9)'], {
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  await new Promise((r) => bare.stdout.once('data', r));
  const ms = performance.now() - t0;
  bare.kill();
  return ms;
}

/** `n` bind mounts of one tmpfs under a fresh discovery directory `<work>/<name>`; returns it. */
export function bindMountedVolumes(cleanup: Cleanup, work: string, name: string, n: number): string {
  const store = join(work, `${name}-store`);
  const disc = join(work, name);
  mkdirSync(disc);
  mountTmpfs(cleanup, store, 64 * 2 ** 20);
  for (let i = 0; i < n; i++) {
    mkdirSync(join(store, `v${String(i)}`));
    mkdirSync(join(disc, `v${String(i)}`));
    bindMount(cleanup, join(store, `v${String(i)}`), join(disc, `v${String(i)}`));
  }
  return disc;
}

/**
 * `provisioner run`'s arguments to node, as the benches start it: a config, any port, JSON logs;
 * `script` is another build's `bin/run.js` (default: this repository's). The port is `:0`, no host,
 * as the image's default `:8080` has none: with a host, Node's listen looks the address up and
 * tests it against IPv6's link-local range, whose regular expression takes ~7 ms to compile
 * under `--jitless`, a cost the DaemonSet's agent never pays.
 */
export function agentCommandLine(configFile: string, adminSocket: string, script?: string): string[] {
  return [
    script ?? join(REPO_ROOT, 'bin/run.js'),
    'run',
    '--config-dir',
    configFile,
    '--listen-address',
    ':0',
    '--admin-socket',
    adminSocket,
    '--log-format',
    'json',
  ];
}

// ---- the fleet benchmarks ----------------------------------------------------------------------

/** `--name N` on the command line, else `fallback`. */
export function numberFlag(name: string, fallback: number): number {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
}

/** The kube-apiserver's version line (`Kubernetes v1.35.4`) from its binary. */
export function apiserverVersion(binDir: string): string {
  return spawnSync(join(binDir, 'kube-apiserver'), ['--version'], { encoding: 'utf8' }).stdout.trim();
}

export function quantile(sorted: readonly number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
}

/** `median N ms, min N, max N` of some timings. */
export function msSummary(xs: readonly number[]): string {
  const s = [...xs].sort((a, b) => a - b);
  return `median ${quantile(s, 0.5).toFixed(0)} ms, min ${(s[0] ?? NaN).toFixed(0)}, max ${(s[s.length - 1] ?? NaN).toFixed(0)}`;
}

/** The agents' config hash of a ConfigMap's data, by the agent's loader. */
export function configHash(data: Readonly<Record<string, string>>): string {
  return parseConfigSnapshot(
    snapshotFromDirectoryFiles(
      'bench',
      Object.entries(data).map(([name, text]) => ({ name, text })),
    ),
  ).hash;
}

/** Revision `i` of the benchmarks' config: every revision hashes differently. */
export const benchConfigData = (i: number): Record<string, string> => ({
  storageClassMap: `fast:\n  hostDir: /mnt/fast\n  mountDir: /mnt/fast\n  fsType: ext${String(2 + (i % 3))}\n`,
  labelsForPV: `rev: "${String(i)}"\n`,
});

/** Writes revision `revision` of the benchmarks' config into ConfigMap `name`: its hash, and when the update was sent. */
export async function applyRevision(
  cluster: RestCluster,
  name: string,
  revision: number,
): Promise<{ readonly hash: string; readonly at: number }> {
  const data = benchConfigData(revision);
  const configMap = await cluster.configMaps.get(name);
  const at = Date.now();
  await cluster.configMaps.update({ ...configMap, data });
  return { hash: configHash(data), at };
}

/** Requests by `<resource> <verb>` (each call is one request; a watch counts when opened). */
export type Requests = Map<string, number>;

export function counted<T>(client: ResourceClient<T>, resource: string, counter: Requests): ResourceClient<T> {
  const wrap =
    <A extends unknown[], R>(verb: string, fn: (...args: A) => R) =>
    (...args: A): R => {
      const key = `${resource} ${verb}`;
      counter.set(key, (counter.get(key) ?? 0) + 1);
      return fn(...args);
    };
  return {
    get: wrap('get', client.get.bind(client)),
    list: wrap('list', client.list.bind(client)),
    listMetadata: wrap('list', client.listMetadata.bind(client)),
    watch: wrap('watch', client.watch.bind(client)),
    create: wrap('create', client.create.bind(client)),
    update: wrap('update', client.update.bind(client)),
    updateStatus: wrap('update', client.updateStatus.bind(client)),
    patch: wrap('patch', client.patch.bind(client)),
    delete: wrap('delete', client.delete.bind(client)),
  };
}

/** `cluster` with its ConfigMap, Lease, Node and Event clients counted in `counter`. */
export function countedCluster<C extends Cluster & LeaseCluster>(cluster: C, counter: Requests): C {
  const clients = cluster as unknown as Record<string, ResourceClient<unknown>>;
  const wrapped = new Map<PropertyKey, ResourceClient<unknown>>(
    ['configMaps', 'leases', 'nodes', 'events'].map((r) => [
      r,
      counted(clients[r] as ResourceClient<unknown>, r.toLowerCase(), counter),
    ]),
  );
  return new Proxy(cluster, { get: (target, p) => wrapped.get(p) ?? (Reflect.get(target, p, target) as unknown) });
}

/** Counts added up (every agent's, or every worker's). */
export function totals(counts: Iterable<Iterable<readonly [string, number]>>): Requests {
  const sum: Requests = new Map();
  for (const c of counts) for (const [k, n] of c) sum.set(k, (sum.get(k) ?? 0) + n);
  return sum;
}

/** What each kind of request grew by between two totals, largest first. */
export function countsBetween(before: Requests, after: Requests): (readonly [string, number])[] {
  return [...after]
    .map(([k, n]) => [k, n - (before.get(k) ?? 0)] as const)
    .filter(([, n]) => n > 0)
    .sort((x, y) => y[1] - x[1]);
}

export interface SimAgent {
  readonly node: string;
  readonly rest: RestCluster;
  readonly source: ConfigSource;
  readonly watcher: ConfigWatcher;
  readonly publisher: StatePublisher;
  readonly requests: Requests;
  /** When the agent's Lease was written with each hash. */
  readonly publishedAt: Map<string, number>;
}

export interface SimAgentOptions {
  readonly node: string;
  readonly namespace: string;
  /** The provisioner instance of the status Lease (`run --status-name`). */
  readonly instance: string;
  /** The agent's config source over its (counted) ConfigMap client. */
  readonly source: (configMaps: ResourceClient<ConfigMap>) => ConfigSource;
}

/**
 * One agent's config side as the agent wires it (Agent.init): its own RestCluster (connection
 * pool, rate limiter: qps 5, burst 10), the config source, the ConfigWatcher over it (the agent's
 * default --config-sync-period and --config-debounce), each read parsed by the agent's loader, and
 * the StatePublisher told after every reload. Everything else of the agent (volumes, PVs, HTTP)
 * is left out: it does not talk about the config.
 */
export async function startSimAgent(connection: ConnectionSettings, options: SimAgentOptions): Promise<SimAgent> {
  const { node } = options;
  const rest = new RestCluster({ connection, qps: 5, burst: 10 });
  const requests: Requests = new Map();
  const publishedAt = new Map<string, number>();
  const leases = counted(rest.leases, 'leases', requests);
  const recording: ResourceClient<Lease> = {
    ...leases,
    create: async (l, o) => record(await leases.create(l, o)),
    update: async (l, o) => record(await leases.update(l, o)),
  };
  function record(lease: Lease): Lease {
    const hash = lease.metadata.annotations?.['local-static-provisioner/applied-hash'];
    if (hash !== undefined && !publishedAt.has(hash)) publishedAt.set(hash, Date.now());
    return lease;
  }
  const publisher = new StatePublisher({
    leases: recording,
    target: { name: statusLeaseName(options.instance, node), namespace: options.namespace, instance: options.instance },
    clock: systemClock,
    logger: silentLogger,
  });
  const source = options.source(counted(rest.configMaps, 'configmaps', requests));
  let generation = 1;
  let applied = '';
  const state = (result: AppliedResult, extra: { reason?: string; candidateHash?: string } = {}): AppliedState => ({
    node,
    appliedHash: applied,
    generation,
    result,
    ...extra,
    source: sourceLabel(source.status().inUse),
    agentVersion: 'bench',
  });
  const watcher = new ConfigWatcher({
    source,
    pollIntervalMs: 5_000,
    debounceMs: 100,
    deferChecks: true,
    clock: systemClock,
    logger: silentLogger,
    // The reload, reduced to what the published state shows: parse the read, apply it or reject it.
    onChange: (_trigger, _fingerprint, read) => {
      if (!read.ok) {
        publisher.update(state('rejected', { reason: read.error.message }));
        return Promise.resolve();
      }
      try {
        const hash = parseConfigSnapshot(read.snapshot).hash;
        if (hash === applied) return Promise.resolve();
        applied = hash;
        generation += 1;
        publisher.update(state('applied', { candidateHash: hash }));
      } catch (err) {
        if (!(err instanceof InvalidConfigError)) throw err;
        publisher.update(state('rejected', { reason: err.message }));
      }
      return Promise.resolve();
    },
  });
  await source.start({
    changed: (by) => {
      watcher.request(by);
    },
  });
  const first = await watcher.start();
  if (first?.ok !== true) throw new Error(`${node}: cannot read the config source at start-up`);
  applied = parseConfigSnapshot(first.snapshot).hash;
  publisher.start(state('started'));
  watcher.resume();
  return { node, rest, source, watcher, publisher, requests, publishedAt };
}

export async function stopSimAgent(agent: SimAgent): Promise<void> {
  await agent.watcher.stop();
  await agent.source.stop();
  await agent.publisher.stop();
  agent.rest.close();
}

/** A simulated agent on the staged source of `configMap` (the stable and candidate copies, each by name). */
export function startStagedSimAgent(
  connection: ConnectionSettings,
  target: { readonly node: string; readonly namespace: string; readonly instance: string; readonly configMap: string },
): Promise<SimAgent> {
  const { node, namespace, instance, configMap } = target;
  return startSimAgent(connection, {
    node,
    namespace,
    instance,
    source: (client) =>
      new StagedConfigSource({
        client,
        namespace,
        name: configMap,
        nodeName: node,
        clock: systemClock,
        logger: silentLogger,
      }),
  });
}

/** `count` agents, `batch` starting at a time. */
export async function startSimAgents(
  count: number,
  start: (i: number) => Promise<SimAgent>,
  batch = 20,
): Promise<SimAgent[]> {
  const agents: SimAgent[] = [];
  for (let i = 0; i < count; i += batch)
    agents.push(...(await Promise.all(Array.from({ length: Math.min(batch, count - i) }, (_, j) => start(i + j)))));
  return agents;
}

export interface TimedRun {
  readonly ms: number;
  readonly status: number | null;
  readonly stdout: string;
}

/**
 * `node ARGS` as a process with KUBECONFIG set: its wall time, exit code and output. Not
 * spawnSync: the caller's event loop (a controller, watches) keeps running meanwhile.
 */
export async function timeNode(args: readonly string[], kubeconfig: string): Promise<TimedRun> {
  const t0 = performance.now();
  const child = spawn(process.execPath, args, {
    env: { ...process.env, KUBECONFIG: kubeconfig },
    cwd: join(REPO_ROOT, 'bench'),
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  let stdout = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  const status = await new Promise<number | null>((resolve) => child.on('close', resolve));
  return { ms: performance.now() - t0, status, stdout };
}

export interface CliTimings {
  readonly bare: readonly number[];
  readonly help: readonly number[];
  readonly cli: readonly number[];
  /** The last run of the command. */
  readonly last: TimedRun;
}

/**
 * `bin/run.js ARGS` as a process, `runs` times after one warm-up (V8's compile cache then holds
 * the bundle, as any second invocation finds it), interleaved with bare `node -e` and the
 * command's `--help` (oclif and the command's module, no cluster) to show where the time goes.
 */
export async function timeCli(
  args: readonly string[],
  helpArgs: readonly string[],
  runs: number,
  kubeconfig: string,
): Promise<CliTimings> {
  const bin = join(REPO_ROOT, 'bin/run.js');
  const bare: number[] = [];
  const help: number[] = [];
  const cli: number[] = [];
  let last = await timeNode([bin, ...args], kubeconfig);
  for (let k = 0; k < runs; k++) {
    bare.push((await timeNode(['-e', 'console.log(1)'], kubeconfig)).ms);
    help.push((await timeNode([bin, ...helpArgs, '--help'], kubeconfig)).ms);
    last = await timeNode([bin, ...args], kubeconfig);
    cli.push(last.ms);
  }
  return { bare, help, cli, last };
}
