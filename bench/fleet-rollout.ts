// Fleet rollout benchmark against a real kube-apiserver + etcd (docs/benchmarks.md):
// - AGENTS agents' config and status sides in one process, sharing nothing but the server: each
//   has its own RestCluster (connection pool, rate limiter), the real ConfigMap API source with the
//   real ConfigWatcher over it (reads parsed by the agent's loader) and the real StatePublisher;
// - apply → every agent applied: a ConfigMap update until each agent's Lease carries the new hash
//   (median, p99, max over several applies);
// - requests per agent per minute when idle (heartbeats, watch renewals, relists), counted per client;
// - `rollout status` (readRollout, and the CLI as a process, several runs) over 1,000 published nodes.
// Run: npm run build && node dist/bench/fleet-rollout.js [--agents 200] [--idle-seconds 120] [--cli-runs 7]
import { loadavg } from 'node:os';
import { ConfigMapConfigSource } from '../src/core/config/source/configmap-api.js';
import { statusLease, statusLeaseName } from '../src/core/fleet/applied-state.js';
import { readRollout } from '../src/core/staged-rollout/status.js';
import { loadKubeconfig } from '../src/core/kube/kubeconfig.js';
import type { ConnectionSettings } from '../src/core/kube/kubeconfig.js';
import { RestCluster } from '../src/core/kube/rest-cluster.js';
import { systemClock } from '../src/core/clock.js';
import { silentLogger } from '../src/core/log.js';
import { startControlPlane } from '../test/support/control-plane.js';
import {
  apiserverVersion,
  applyRevision,
  benchConfigData as configData,
  configHash as hashOf,
  countsBetween,
  kubeBinDir,
  msSummary as ms,
  numberFlag,
  quantile,
  startSimAgent,
  startSimAgents,
  stopSimAgent,
  timeCli,
  totals,
} from './support.js';
import type { SimAgent } from './support.js';

const AGENTS = numberFlag('--agents', 200);
const IDLE_SECONDS = numberFlag('--idle-seconds', 120);
const CLI_RUNS = numberFlag('--cli-runs', 7);
const APPLIES = 5;
const FLEET = 1000;
const NS = 'default';
const INSTANCE = 'bench';
const CM = 'bench-config';

/** One agent's config side on the ConfigMap API source (support.ts startSimAgent). */
const startAgent = (connection: ConnectionSettings, i: number): Promise<SimAgent> =>
  startSimAgent(connection, {
    node: `bench-${String(i).padStart(4, '0')}`,
    namespace: NS,
    instance: INSTANCE,
    source: (client) =>
      new ConfigMapConfigSource({ client, namespace: NS, name: CM, clock: systemClock, logger: silentLogger }),
  });

const binDir = kubeBinDir();
const plane = await startControlPlane({ binDir });
try {
  const connection = await loadKubeconfig(plane.kubeconfigPath);
  const admin = new RestCluster({ connection });
  let revision = 0;
  await admin.configMaps.create({ metadata: { name: CM }, data: configData(revision) });

  const startT0 = Date.now();
  const agents = await startSimAgents(AGENTS, (i) => startAgent(connection, i));
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
    const { hash, at: t0 } = await applyRevision(admin, CM, revision);
    await waitAll(hash);
    for (const a of agents) latencies.push((a.publishedAt.get(hash) ?? NaN) - t0);
    await new Promise((r) => setTimeout(r, 1000));
  }
  latencies.sort((a, b) => a - b);

  // idle requests
  const loadBefore = loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');
  const before = totals(agents.map((a) => a.requests));
  const idleStartedAfterMs = Date.now() - startT0;
  await new Promise((r) => setTimeout(r, IDLE_SECONDS * 1000));
  const idleByKind = countsBetween(before, totals(agents.map((a) => a.requests)));
  const perMinute = (n: number): number => n / AGENTS / (IDLE_SECONDS / 60);
  const perAgentPerMinute = perMinute(idleByKind.reduce((s, [, n]) => s + n, 0));

  for (const a of agents) await stopSimAgent(a);

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
  // The CLI as a process (start-up included), interleaved with bare node and `rollout status --help`.
  const { bare, help, cli, last } = await timeCli(
    ['rollout', 'status', '-n', NS, '--name', 'fleet', '--configmap', `${NS}/${CM}`],
    ['rollout', 'status'],
    CLI_RUNS,
    plane.kubeconfigPath,
  );

  const load = loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');
  console.log(
    `node ${process.version}, ${apiserverVersion(binDir)}, ${String(AGENTS)} agents, load ${load} (1/5/15 min) at the end`,
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
