// Fleet rollout benchmark against a real kube-apiserver + etcd (docs/benchmarks.md):
// - AGENTS simulated agents in one process, sharing nothing but the server: each has its own
//   RestCluster (connection pool, rate limiter), a watch of the one ConfigMap (the config watcher of
//   the API source, simulated until it lands) and the real StatePublisher;
// - apply → every agent applied: a ConfigMap update until each agent's Lease carries the new hash
//   (median, p99, max over several applies);
// - requests per agent per minute when idle (heartbeats, watch renewals), counted per client;
// - `rollout status` (readRollout, and the CLI as a process) over 1,000 published nodes.
// Run: npm run build && node dist/bench/fleet-rollout.js [--agents 200] [--idle-seconds 120]
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { isAborted, systemClock } from '../src/core/clock.js';
import { parseConfigSnapshot, snapshotFromDirectoryFiles } from '../src/core/config/source.js';
import { statusLease, statusLeaseName } from '../src/core/fleet/applied-state.js';
import type { AppliedState } from '../src/core/fleet/applied-state.js';
import { StatePublisher } from '../src/core/fleet/publisher.js';
import { readRollout } from '../src/core/fleet/rollout.js';
import type { ResourceClient } from '../src/core/kube/cluster.js';
import { loadKubeconfig } from '../src/core/kube/kubeconfig.js';
import type { ConfigMap, Lease } from '../src/core/kube/objects.js';
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

/** Counts the requests of one client (each call is one request; a watch counts when opened). */
function counted<T>(client: ResourceClient<T>, counter: { n: number }): ResourceClient<T> {
  const wrap =
    <A extends unknown[], R>(fn: (...args: A) => R) =>
    (...args: A): R => {
      counter.n += 1;
      return fn(...args);
    };
  return {
    get: wrap(client.get.bind(client)),
    list: wrap(client.list.bind(client)),
    listMetadata: wrap(client.listMetadata.bind(client)),
    watch: wrap(client.watch.bind(client)),
    create: wrap(client.create.bind(client)),
    update: wrap(client.update.bind(client)),
    updateStatus: wrap(client.updateStatus.bind(client)),
    patch: wrap(client.patch.bind(client)),
    delete: wrap(client.delete.bind(client)),
  };
}

interface SimAgent {
  readonly node: string;
  readonly rest: RestCluster;
  readonly publisher: StatePublisher;
  readonly requests: { n: number };
  /** When the agent's Lease was written with each hash. */
  readonly publishedAt: Map<string, number>;
  readonly stop: AbortController;
}

const plane = await startControlPlane({ binDir: kubeBinDir() });
try {
  const connection = await loadKubeconfig(plane.kubeconfigPath);
  const admin = new RestCluster({ connection });
  let revision = 0;
  await admin.configMaps.create({ metadata: { name: CM, labels: { bench: CM } }, data: configData(revision) });

  const agents: SimAgent[] = [];
  for (let i = 0; i < AGENTS; i++) {
    const node = `bench-${String(i).padStart(4, '0')}`;
    const rest = new RestCluster({ connection, qps: 5, burst: 10 });
    const requests = { n: 0 };
    const publishedAt = new Map<string, number>();
    const leases = counted(rest.leases, requests);
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
    const state = (hash: string, generation: number): AppliedState => ({
      node,
      appliedHash: hash,
      generation,
      result: generation === 1 ? 'started' : 'applied',
      source: `configmap ${NS}/${CM}`,
      agentVersion: 'bench',
    });
    publisher.start(state(hashOf(configData(0)), 1));
    const stop = new AbortController();
    const configMaps = counted(rest.configMaps, requests);
    // The config watcher: list, then watch from its resourceVersion, renewing the watch (as a reflector does).
    void (async () => {
      let generation = 1;
      let applied = hashOf(configData(0));
      while (!isAborted(stop.signal)) {
        try {
          const list = await configMaps.list({ namespace: NS, labelSelector: `bench=${CM}` });
          let rv = list.metadata.resourceVersion ?? '0';
          while (!isAborted(stop.signal)) {
            for await (const event of configMaps.watch({
              namespace: NS,
              labelSelector: `bench=${CM}`,
              resourceVersion: rv,
              allowBookmarks: true,
              timeoutSeconds: 300 + Math.floor(Math.random() * 300),
              signal: stop.signal,
            })) {
              if (event.type === 'BOOKMARK') {
                rv = event.resourceVersion;
                continue;
              }
              const cm: ConfigMap = event.object;
              rv = cm.metadata.resourceVersion ?? rv;
              const hash = hashOf(cm.data ?? {});
              if (hash !== applied) {
                applied = hash;
                generation += 1;
                publisher.update(state(hash, generation));
              }
            }
          }
        } catch {
          await new Promise((r) => setTimeout(r, 1000));
        }
      }
    })();
    agents.push({ node, rest, publisher, requests, publishedAt, stop });
  }
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
  const before = agents.reduce((s, a) => s + a.requests.n, 0);
  await new Promise((r) => setTimeout(r, IDLE_SECONDS * 1000));
  const idle = agents.reduce((s, a) => s + a.requests.n, 0) - before;
  const perAgentPerMinute = idle / AGENTS / (IDLE_SECONDS / 60);

  for (const a of agents) {
    a.stop.abort();
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
  // The CLI as a process (start-up included); the bench agents' nodes count as missing, so select.
  const dir = join(REPO_ROOT, 'bench');
  const cliT0 = performance.now();
  const cli = spawnSync(
    process.execPath,
    [join(REPO_ROOT, 'bin/run.js'), 'rollout', 'status', '-n', NS, '--name', 'fleet', '--configmap', `${NS}/${CM}`],
    { env: { ...process.env, KUBECONFIG: plane.kubeconfigPath }, cwd: dir, encoding: 'utf8' },
  );
  const cliMs = performance.now() - cliT0;

  console.log(`node ${process.version}, kube-apiserver ${plane.server}, ${String(AGENTS)} agents`);
  console.log(
    `apply → every agent applied (${String(APPLIES)} applies × ${String(AGENTS)} agents): median ${String(quantile(latencies, 0.5))} ms, p99 ${String(quantile(latencies, 0.99))} ms, max ${String(latencies[latencies.length - 1])} ms`,
  );
  console.log(`idle: ${perAgentPerMinute.toFixed(2)} requests per agent per minute over ${String(IDLE_SECONDS)} s`);
  console.log(
    `rollout status over ${String(FLEET)} published nodes (readRollout): median ${quantile(reads, 0.5).toFixed(0)} ms, max ${(reads[reads.length - 1] ?? NaN).toFixed(0)} ms`,
  );
  console.log(
    `rollout status CLI process: ${cliMs.toFixed(0)} ms, exit ${String(cli.status)} (${cli.stdout.split('\n')[0] ?? ''})`,
  );
  admin.close();
} finally {
  await plane.stop();
}
