// Fleet rollout benchmark against a real kube-apiserver + etcd (docs/benchmarks.md):
// - AGENTS agents' config and status sides in one process, sharing nothing but the server: each
//   has its own RestCluster (connection pool, rate limiter), the real ConfigMap API source with the
//   real ConfigWatcher over it (reads parsed by the agent's loader) and the real StatePublisher;
// - apply → every agent applied: a ConfigMap update until each agent's Lease carries the new hash
//   (median, p99, max over several applies);
// - requests per agent per minute when idle (heartbeats, watch renewals, relists), counted per client;
// - `rollout status` (readRollout, and the CLI as a process, several runs) over 1,000 published nodes.
// Run: npm run build && node dist/bench/fleet-rollout.js [--agents 200] [--idle-seconds 120] [--cli-runs 7]
import { spawnSync } from 'node:child_process';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { systemClock } from '../src/core/clock.js';
import { sourceLabel } from '../src/core/config/source/port.js';
import { ConfigMapConfigSource } from '../src/core/config/source/configmap-api.js';
import { parseConfigSnapshot } from '../src/core/config/decode/parse.js';
import { snapshotFromDirectoryFiles } from '../src/core/config/decode/layout.js';
import { ConfigWatcher } from '../src/core/config/watcher.js';
import { InvalidConfigError } from '../src/core/errors.js';
import { statusLease, statusLeaseName } from '../src/core/fleet/applied-state.js';
import type { AppliedResult, AppliedState } from '../src/core/fleet/applied-state.js';
import { StatePublisher } from '../src/core/fleet/publisher.js';
import { readRollout } from '../src/core/fleet/rollout.js';
import type { ResourceClient } from '../src/core/kube/cluster.js';
import { loadKubeconfig } from '../src/core/kube/kubeconfig.js';
import type { ConnectionSettings } from '../src/core/kube/kubeconfig.js';
import type { Lease } from '../src/core/kube/objects.js';
import { RestCluster } from '../src/core/kube/rest-cluster.js';
import { silentLogger } from '../src/core/log.js';
import { startControlPlane } from '../test/support/control-plane.js';
import { kubeBinDir, REPO_ROOT } from './support.js';

const arg = (name: string, fallback: number): number => {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const AGENTS = arg('--agents', 200);
const IDLE_SECONDS = arg('--idle-seconds', 120);
const CLI_RUNS = arg('--cli-runs', 7);
const APPLIES = 5;
const FLEET = 1000;
const NS = 'default';
const INSTANCE = 'bench';
const CM = 'bench-config';

function hashOf(data: Record<string, string>): string {
  return parseConfigSnapshot(
    snapshotFromDirectoryFiles(
      CM,
      Object.entries(data).map(([name, text]) => ({ name, text })),
    ),
  ).hash;
}
const configData = (i: number): Record<string, string> => ({
  storageClassMap: `fast:\n  hostDir: /mnt/fast\n  mountDir: /mnt/fast\n  fsType: ext${String(2 + (i % 3))}\n`,
  labelsForPV: `rev: "${String(i)}"\n`,
});

function quantile(sorted: readonly number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
}

/** Requests by `<resource> <verb>` (each call is one request; a watch counts when opened). */
type Requests = Map<string, number>;

function counted<T>(client: ResourceClient<T>, resource: string, counter: Requests): ResourceClient<T> {
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

/** Every agent's counts added up. */
function totals(agents: readonly { readonly requests: Requests }[]): Requests {
  const sum: Requests = new Map();
  for (const a of agents) for (const [k, n] of a.requests) sum.set(k, (sum.get(k) ?? 0) + n);
  return sum;
}

interface SimAgent {
  readonly node: string;
  readonly rest: RestCluster;
  readonly source: ConfigMapConfigSource;
  readonly watcher: ConfigWatcher;
  readonly publisher: StatePublisher;
  readonly requests: Requests;
  /** When the agent's Lease was written with each hash. */
  readonly publishedAt: Map<string, number>;
}

/**
 * One agent's config side as the agent wires it (Agent.init): the ConfigMap API source, the
 * ConfigWatcher over it (the agent's default --config-sync-period and --config-debounce), each
 * read parsed by the agent's loader, and the StatePublisher told after every reload. Everything
 * else of the agent (volumes, PVs, HTTP) is left out: it does not talk about the config.
 */
async function startAgent(connection: ConnectionSettings, i: number): Promise<SimAgent> {
  const node = `bench-${String(i).padStart(4, '0')}`;
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
    target: { name: statusLeaseName(INSTANCE, node), namespace: NS, instance: INSTANCE },
    clock: systemClock,
    logger: silentLogger,
  });
  const source = new ConfigMapConfigSource({
    client: counted(rest.configMaps, 'configmaps', requests),
    namespace: NS,
    name: CM,
    clock: systemClock,
    logger: silentLogger,
  });
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
  if (first?.ok !== true) throw new Error(`${node}: cannot read the ConfigMap at start-up`);
  applied = parseConfigSnapshot(first.snapshot).hash;
  publisher.start(state('started'));
  watcher.resume();
  return { node, rest, source, watcher, publisher, requests, publishedAt };
}

const plane = await startControlPlane({ binDir: kubeBinDir() });
try {
  const connection = await loadKubeconfig(plane.kubeconfigPath);
  const admin = new RestCluster({ connection });
  let revision = 0;
  await admin.configMaps.create({ metadata: { name: CM }, data: configData(revision) });

  const startT0 = Date.now();
  const agents: SimAgent[] = [];
  for (let i = 0; i < AGENTS; i += 20) {
    agents.push(
      ...(await Promise.all(Array.from({ length: Math.min(20, AGENTS - i) }, (_, j) => startAgent(connection, i + j)))),
    );
  }
  const startedMs = Date.now() - startT0;
  const first = hashOf(configData(0));
  const waitAll = async (hash: string): Promise<void> => {
    const deadline = Date.now() + 120_000;
    while (agents.some((a) => !a.publishedAt.has(hash))) {
      if (Date.now() > deadline) throw new Error(`not every agent published ${hash}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  await waitAll(first);
  await new Promise((r) => setTimeout(r, 3000)); // watches open

  // apply → every agent applied
  const latencies: number[] = [];
  for (let k = 0; k < APPLIES; k++) {
    revision += 1;
    const data = configData(revision);
    const hash = hashOf(data);
    const cm = await admin.configMaps.get(CM);
    const t0 = Date.now();
    await admin.configMaps.update({ ...cm, data });
    await waitAll(hash);
    for (const a of agents) latencies.push((a.publishedAt.get(hash) ?? NaN) - t0);
    await new Promise((r) => setTimeout(r, 1000));
  }
  latencies.sort((a, b) => a - b);

  // idle requests
  const loadBefore = loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');
  const before = totals(agents);
  const idleStartedAfterMs = Date.now() - startT0;
  await new Promise((r) => setTimeout(r, IDLE_SECONDS * 1000));
  const after = totals(agents);
  const perMinute = (n: number): number => n / AGENTS / (IDLE_SECONDS / 60);
  const idleByKind = [...after]
    .map(([k, n]) => [k, n - (before.get(k) ?? 0)] as const)
    .filter(([, n]) => n > 0)
    .sort((x, y) => y[1] - x[1]);
  const perAgentPerMinute = perMinute(idleByKind.reduce((s, [, n]) => s + n, 0));

  for (const a of agents) {
    await a.watcher.stop();
    await a.source.stop();
    await a.publisher.stop();
    a.rest.close();
  }

  // rollout status on FLEET published nodes, all in sync with the ConfigMap as it is now
  const now = Date.now();
  const current = hashOf(configData(revision));
  for (let i = 0; i < FLEET; i += 50) {
    await Promise.all(
      Array.from({ length: Math.min(50, FLEET - i) }, async (_, j) => {
        const node = `fleet-${String(i + j).padStart(4, '0')}`;
        await admin.nodes.create({ metadata: { name: node } });
        await admin.leases.create(
          statusLease(
            { name: statusLeaseName('fleet', node), namespace: NS, instance: 'fleet' },
            { node, appliedHash: current, generation: 1, result: 'started', source: 'x', agentVersion: 'bench' },
            now,
            3_600_000,
          ),
        );
      }),
    );
  }
  const query = { namespace: NS, instance: 'fleet' };
  const desired = { hash: current, source: 'bench' };
  const reads: number[] = [];
  for (let k = 0; k < 5; k++) {
    const t0 = performance.now();
    const status = await readRollout(admin, query, desired, () => Date.now());
    reads.push(performance.now() - t0);
    if (status.counts['in-sync'] !== FLEET) throw new Error(`expected ${String(FLEET)} in sync`);
  }
  reads.sort((a, b) => a - b);
  // The CLI as a process (start-up included), interleaved with bare node and `rollout status
  // --help` (oclif and the command's module, no cluster) to show where the time goes.
  const run = (args: readonly string[]): { ms: number; status: number | null; stdout: string } => {
    const t0 = performance.now();
    const r = spawnSync(process.execPath, args, {
      env: { ...process.env, KUBECONFIG: plane.kubeconfigPath },
      cwd: join(REPO_ROOT, 'bench'),
      encoding: 'utf8',
    });
    return { ms: performance.now() - t0, status: r.status, stdout: r.stdout };
  };
  const bin = join(REPO_ROOT, 'bin/run.js');
  const cliArgs = [bin, 'rollout', 'status', '-n', NS, '--name', 'fleet', '--configmap', `${NS}/${CM}`];
  const bare: number[] = [];
  const help: number[] = [];
  const cli: number[] = [];
  let last = run(cliArgs); // warms V8's compile cache, as any second invocation finds it
  for (let k = 0; k < CLI_RUNS; k++) {
    bare.push(run(['-e', 'console.log(1)']).ms);
    help.push(run([bin, 'rollout', 'status', '--help']).ms);
    last = run(cliArgs);
    cli.push(last.ms);
  }
  for (const xs of [bare, help, cli]) xs.sort((a, b) => a - b);
  const ms = (xs: readonly number[]): string =>
    `median ${quantile(xs, 0.5).toFixed(0)} ms, min ${(xs[0] ?? NaN).toFixed(0)}, max ${(xs[xs.length - 1] ?? NaN).toFixed(0)}`;

  const load = loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');
  console.log(
    `node ${process.version}, kube-apiserver ${plane.server}, ${String(AGENTS)} agents, load ${load} (1/5/15 min) at the end`,
  );
  console.log(
    `${String(AGENTS)} agents started (source listed, the watcher's first read parsed) in ${String(startedMs)} ms`,
  );
  console.log(
    `apply → every agent applied (${String(APPLIES)} applies × ${String(AGENTS)} agents): median ${String(quantile(latencies, 0.5))} ms, p99 ${String(quantile(latencies, 0.99))} ms, max ${String(latencies[latencies.length - 1])} ms`,
  );
  console.log(
    `idle: ${perAgentPerMinute.toFixed(2)} requests per agent per minute over ${String(IDLE_SECONDS)} s from ${(idleStartedAfterMs / 1000).toFixed(0)} s after the first agent started (${idleByKind.map(([k, n]) => `${k} ${perMinute(n).toFixed(2)}`).join(', ')}; load before ${loadBefore})`,
  );
  console.log(
    `rollout status over ${String(FLEET)} published nodes (readRollout): median ${quantile(reads, 0.5).toFixed(0)} ms, max ${(reads[reads.length - 1] ?? NaN).toFixed(0)} ms`,
  );
  console.log(`bare node -e (${String(CLI_RUNS)} runs): ${ms(bare)}`);
  console.log(`rollout status --help as a process: ${ms(help)}`);
  console.log(
    `rollout status CLI process over ${String(FLEET)} nodes: ${ms(cli)}, exit ${String(last.status)} (${last.stdout.split('\n')[0] ?? ''})`,
  );
  admin.close();
} finally {
  await plane.stop();
}
