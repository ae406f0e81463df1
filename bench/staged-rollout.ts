// Staged rollout benchmark against a real kube-apiserver + etcd (docs/benchmarks.md, issue 26):
// - AGENTS agents' config and status sides, split over WORKERS forked processes that share nothing
//   but the server: each agent as in fleet-rollout.ts (support.ts startSimAgent: its own
//   RestCluster, the real ConfigWatcher, reads parsed by the agent's loader, the real
//   StatePublisher), on the real staged source (a list + watch of NAME-stable and one of
//   NAME-candidate; the candidate iff its wave is open). Workers report their request counts and
//   how late their event loop ran to this process over IPC;
// - this process runs the apiserver, one Node per agent, the real staged rollout controller
//   (startRolloutController, leader election on as in the chart; canary CANARY nodes then
//   25%,50%,100%: 4 waves, bake 0s) and watches of the candidate copy (the states) and of the
//   status Leases (when each node was seen applying each hash: the controller's view);
// - apply → complete (the operator's ConfigMap update until the state is complete and every Lease
//   carries the new hash), several applies; per wave, from the state write that opened it
//   (waveOpenedAt) to each node of the wave seen with the candidate; CPU seconds of every process;
// - idle requests per agent per minute (per client, by kind) with no rollout, then with one held
//   open (the controller restarted with a 1 h bake: the canary applied and baking), and the
//   controller's own requests beside them;
// - `rollout status` over those nodes (the core functions in-process, and the CLI as a process)
//   with the rollout held (exit 6) and after a promote completed it (exit 0).
// Run: npm run build && node dist/bench/staged-rollout.js [--agents 1000] [--workers 4]
//      [--idle-seconds 120] [--cli-runs 7] [--applies 3] [--canary 10]
import { fork } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { loadavg } from 'node:os';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import { systemClock } from '../src/core/clock.js';
import { stateFromLease, statusSelector } from '../src/core/fleet/applied-state.js';
import { readDesiredConfig, readRollout } from '../src/core/staged-rollout/status.js';
import type { RolloutStatus } from '../src/core/staged-rollout/status.js';
import { loadKubeconfig } from '../src/core/kube/kubeconfig.js';
import { DEFAULT_LEADER_ELECTION_TIMING } from '../src/core/kube/leader-election.js';
import type { ConfigMap, Lease } from '../src/core/kube/objects.js';
import { Reflector } from '../src/core/kube/reflector.js';
import { RestCluster } from '../src/core/kube/rest-cluster.js';
import { silentLogger } from '../src/core/log.js';
import { stagedConfigMapName, stateOf } from '../src/core/rollout-state/annotations.js';
import { describePolicy, policyFromFlags } from '../src/core/staged-rollout/policy.js';
import type { StagedRolloutPolicy } from '../src/core/staged-rollout/policy.js';
import { submitRequest, waitForRequest } from '../src/core/staged-rollout/requests.js';
import { startRolloutController } from '../src/core/staged-rollout/service.js';
import type { RunningRolloutController } from '../src/core/staged-rollout/service.js';
import type { RolloutState } from '../src/core/rollout-state/state.js';
import { planWaves } from '../src/core/staged-rollout/waves.js';
import { startControlPlane } from '../test/support/control-plane.js';
import {
  apiserverVersion,
  applyRevision,
  benchConfigData as configData,
  configHash,
  countedCluster,
  countsBetween,
  cpuSeconds,
  kubeBinDir,
  msSummary,
  numberFlag,
  quantile,
  rssBytesOf,
  startStagedSimAgent,
  startSimAgents,
  stopSimAgent,
  timeCli,
  totals,
} from './support.js';
import type { CliTimings, Requests } from './support.js';

const AGENTS = numberFlag('--agents', 1000);
const WORKERS = Math.max(1, Math.min(AGENTS, numberFlag('--workers', 4)));
const IDLE_SECONDS = numberFlag('--idle-seconds', 120);
const CLI_RUNS = numberFlag('--cli-runs', 7);
const APPLIES = numberFlag('--applies', 3);
const CANARY = numberFlag('--canary', 10);
const WAVES = '25%,50%,100%';
const NS = 'default';
const INSTANCE = 'bench';
const CM = 'bench-config';
/** Longest wait for anything the rollout does (a wave, a complete, every Lease). */
const WAIT_MS = 300_000;

const nodeName = (i: number): string => `bench-${String(i).padStart(4, '0')}`;

// ---- IPC between this process and its workers -------------------------------------------------

type ToWorker = { readonly type: 'sample' } | { readonly type: 'stop' };
type FromWorker =
  | { readonly type: 'started'; readonly ms: number }
  /** The agents' request counts, and the event loop's delay since the last sample (ms). */
  | {
      readonly type: 'sample';
      readonly counts: readonly (readonly [string, number])[];
      readonly lag: { readonly p99: number; readonly max: number };
    }
  | { readonly type: 'stopped' }
  | { readonly type: 'failed'; readonly message: string };

/** A worker: agents `--from` to `--to` (exclusive) on the apiserver of `--kubeconfig`. */
async function worker(): Promise<void> {
  const send = (message: FromWorker): void => {
    if (process.connected) process.send?.(message);
  };
  const disconnect = (): void => {
    if (process.connected) process.disconnect();
  };
  // The parent gone (it failed, or was stopped): no agent outlives it.
  process.once('disconnect', () => process.exit(0));
  const i = process.argv.indexOf('--kubeconfig');
  const kubeconfig = process.argv[i + 1] ?? '';
  const from = numberFlag('--from', 0);
  const to = numberFlag('--to', 0);
  try {
    const connection = await loadKubeconfig(kubeconfig);
    const t0 = Date.now();
    const agents = await startSimAgents(to - from, (k) => {
      const node = nodeName(from + k);
      return startStagedSimAgent(connection, { node, namespace: NS, instance: INSTANCE, configMap: CM });
    });
    send({ type: 'started', ms: Date.now() - t0 });
    // How late this process' timers run: 250 agents on shared cores delay every timestamp taken here.
    const lag = monitorEventLoopDelay({ resolution: 10 });
    lag.enable();
    process.on('message', (raw) => {
      const message = raw as ToWorker;
      if (message.type === 'sample') {
        send({
          type: 'sample',
          counts: [...totals(agents.map((a) => a.requests))],
          lag: { p99: lag.percentile(99) / 1e6, max: lag.max / 1e6 },
        });
        lag.reset();
      } else
        void (async () => {
          for (const a of agents) await stopSimAgent(a);
          send({ type: 'stopped' });
          disconnect();
        })();
    });
  } catch (err) {
    const message = err instanceof Error ? (err.stack ?? err.message) : String(err);
    console.error(`[staged-rollout worker ${String(from)}–${String(to)}] ${message}`);
    send({ type: 'failed', message });
    disconnect();
  }
}

interface WorkerHandle {
  readonly child: ChildProcess;
  /** Resolves with the worker's start-up time (its agents started). */
  readonly started: Promise<number>;
  sample(): Promise<{ readonly requests: Requests; readonly lag: { readonly p99: number; readonly max: number } }>;
  stop(): Promise<void>;
}

function forkWorker(from: number, to: number, kubeconfig: string): WorkerHandle {
  const child = fork(
    import.meta.filename,
    ['--worker', '--kubeconfig', kubeconfig, '--from', String(from), '--to', String(to)],
    {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    },
  );
  type Sample = Awaited<ReturnType<WorkerHandle['sample']>>;
  const waiting: { samples: ((s: Sample) => void)[]; stopped?: () => void } = { samples: [] };
  let startedResolve: (ms: number) => void = () => undefined;
  let startedReject: (err: Error) => void = () => undefined;
  const started = new Promise<number>((resolve, reject) => {
    startedResolve = resolve;
    startedReject = reject;
  });
  child.on('message', (raw) => {
    const message = raw as FromWorker;
    switch (message.type) {
      case 'started':
        startedResolve(message.ms);
        break;
      case 'sample':
        waiting.samples.shift()?.({ requests: new Map(message.counts), lag: message.lag });
        break;
      case 'stopped':
        waiting.stopped?.();
        break;
      case 'failed':
        startedReject(new Error(`worker ${String(from)}–${String(to)} failed: ${message.message}`));
        break;
    }
  });
  child.on('exit', (code) => {
    startedReject(new Error(`worker ${String(from)}–${String(to)} exited (${String(code)}) before it started`));
  });
  const send = (message: ToWorker): void => {
    if (child.connected) child.send(message);
  };
  // A worker that died: its exit rejects `started`; a send racing its exit is no further news.
  child.on('error', () => undefined);
  // A function, not a property read: TypeScript would keep its narrowing across an await.
  const running = (): boolean => child.exitCode === null && child.signalCode === null;
  return {
    child,
    started,
    sample: () =>
      new Promise((resolve) => {
        waiting.samples.push(resolve);
        send({ type: 'sample' });
      }),
    stop: async () => {
      if (!running() || !child.connected) return;
      const stopped = new Promise<void>((resolve) => (waiting.stopped = resolve));
      send({ type: 'stop' });
      await Promise.race([stopped, delay(30_000)]);
      if (running()) child.kill();
    },
  };
}

// ---- this process: the apiserver, the controller, the measurements ------------------------------

/** The counters at one moment: requests (agents', the controller's), CPU seconds, the workers' event-loop delay since the last sample. */
interface Sample {
  readonly at: number;
  readonly agents: Requests;
  readonly controller: Requests;
  readonly cpu: {
    readonly apiserver: number;
    readonly etcd: number;
    readonly workers: number;
    readonly parent: number;
  };
  readonly lag: { readonly p99: number; readonly max: number };
}

/** What happened between two samples. */
interface Interval {
  readonly seconds: number;
  readonly agents: ReturnType<typeof countsBetween>;
  readonly controller: ReturnType<typeof countsBetween>;
  readonly cpu: Sample['cpu'];
  /** The workers' event-loop delay over the interval (the worst worker). */
  readonly lag: Sample['lag'];
}

function interval(a: Sample, b: Sample): Interval {
  return {
    seconds: (b.at - a.at) / 1000,
    agents: countsBetween(a.agents, b.agents),
    controller: countsBetween(a.controller, b.controller),
    cpu: {
      apiserver: b.cpu.apiserver - a.cpu.apiserver,
      etcd: b.cpu.etcd - a.cpu.etcd,
      workers: b.cpu.workers - a.cpu.workers,
      parent: b.cpu.parent - a.cpu.parent,
    },
    lag: b.lag,
  };
}

/** `apiserver 1.2 s, etcd 0.3 s, agents 8.1 s, controller process 0.4 s: 10.0 s of CPU in 28.0 s (0.36 cores)`. */
function cpuLine(i: Interval): string {
  const { apiserver, etcd, workers, parent } = i.cpu;
  const total = apiserver + etcd + workers + parent;
  return `apiserver ${apiserver.toFixed(1)} s, etcd ${etcd.toFixed(1)} s, agents' workers ${workers.toFixed(1)} s, this process (controller) ${parent.toFixed(1)} s: ${total.toFixed(1)} CPU s in ${i.seconds.toFixed(1)} s (${(total / i.seconds).toFixed(2)} cores)`;
}

/** A progress line on stderr (stdout is the table). */
function progress(message: string): void {
  console.error(`[staged-rollout] ${new Date().toISOString().slice(11, 19)} ${message}`);
}

/** A state of the candidate copy as this process saw it (its watch), with when. */
interface SeenState {
  readonly at: number;
  readonly state: RolloutState;
}

async function until<T>(what: string, check: () => T | undefined, ms = WAIT_MS): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await delay(20);
  }
}

const perMinute = (n: number, per: number, seconds: number): number => n / per / (seconds / 60);
const byKind = (counts: readonly (readonly [string, number])[], per: number, seconds: number): string =>
  counts.map(([k, n]) => `${k} ${perMinute(n, per, seconds).toFixed(2)}`).join(', ') || 'none';
const load = (): string =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');

async function main(): Promise<void> {
  const binDir = kubeBinDir();
  const plane = await startControlPlane({ binDir });
  const workers: WorkerHandle[] = [];
  let controller: RunningRolloutController | undefined;
  const stopStates = new AbortController();
  try {
    const connection = await loadKubeconfig(plane.kubeconfigPath);
    const admin = new RestCluster({ connection });
    let revision = 0;
    await admin.configMaps.create({ metadata: { name: CM, namespace: NS }, data: configData(revision) });
    for (let i = 0; i < AGENTS; i += 50)
      await Promise.all(
        Array.from({ length: Math.min(50, AGENTS - i) }, (_, j) =>
          admin.nodes.create({ metadata: { name: nodeName(i + j) } }),
        ),
      );

    // The controller as the chart runs it (its default qps/burst and election timing), in here.
    const controllerRequests: Requests = new Map();
    const controllerCluster = countedCluster(new RestCluster({ connection, qps: 20, burst: 40 }), controllerRequests);
    const policyOf = (bakeTime: string): StagedRolloutPolicy =>
      policyFromFlags({ canaryCount: CANARY, waves: WAVES, bakeTime });
    const startController = (bakeTime: string): Promise<RunningRolloutController> =>
      startRolloutController(
        {
          settings: { namespace: NS, name: CM, instance: INSTANCE, policy: policyOf(bakeTime), resyncMs: 600_000 },
          listenAddress: '',
          metricsPath: '/metrics',
          identity: 'bench',
          leaderElection: {
            name: 'local-volume-rollout-controller',
            namespace: NS,
            timing: DEFAULT_LEADER_ELECTION_TIMING,
          },
        },
        { cluster: controllerCluster, clock: systemClock, logger: silentLogger },
      );
    controller = await startController('0s');
    const stableDeadline = Date.now() + 60_000;
    while ((await admin.configMaps.get(stagedConfigMapName(CM, 'stable')).catch(() => undefined)) === undefined) {
      if (Date.now() > stableDeadline) throw new Error('the controller did not write the stable copy');
      await delay(100);
    }

    // Every state the candidate copy goes through, as a watch here sees it.
    const seen: SeenState[] = [];
    const states = new Reflector<ConfigMap>({
      client: admin.configMaps,
      clock: systemClock,
      logger: silentLogger,
      resource: 'candidate copy',
      namespace: NS,
      fieldSelector: `metadata.name=${stagedConfigMapName(CM, 'candidate')}`,
      onChange: (_type, object) => {
        const decoded = stateOf(object);
        if (decoded?.ok === true) seen.push({ at: Date.now(), state: decoded.state });
      },
    });
    const statesRunning = states.run(stopStates.signal);
    const stateOfHash = (hash: string, check: (s: RolloutState) => boolean): SeenState | undefined =>
      seen.find((s) => s.state.candidate.hash === hash && check(s.state));

    // Requests, CPU seconds of every process, and the workers' event-loop delay, at one moment.
    const sample = async (): Promise<Sample> => {
      const fromWorkers = await Promise.all(workers.map((w) => w.sample()));
      const own = process.cpuUsage();
      return {
        at: Date.now(),
        agents: totals(fromWorkers.map((w) => w.requests)),
        controller: new Map(controllerRequests),
        cpu: {
          apiserver: cpuSeconds(plane.pids.apiserver),
          etcd: cpuSeconds(plane.pids.etcd),
          workers: workers.reduce((n, w) => n + (w.child.pid !== undefined ? cpuSeconds(w.child.pid) : 0), 0),
          parent: (own.user + own.system) / 1e6,
        },
        lag: {
          p99: Math.max(0, ...fromWorkers.map((w) => w.lag.p99)),
          max: Math.max(0, ...fromWorkers.map((w) => w.lag.max)),
        },
      };
    };
    // When this process first saw each node's Lease carry each hash (hash → node → ms since the
    // epoch): what the controller sees too, and unlike a timestamp taken in a worker it does not
    // wait for that worker's event loop once the write is sent.
    const published = new Map<string, Map<string, number>>();
    const leaseWatch = new Reflector<Lease>({
      client: admin.leases,
      clock: systemClock,
      logger: silentLogger,
      resource: 'status leases',
      namespace: NS,
      labelSelector: statusSelector(INSTANCE),
      onChange: (_type, lease) => {
        const state = stateFromLease(lease);
        if (state === undefined) return;
        let nodes = published.get(state.appliedHash);
        if (nodes === undefined) published.set(state.appliedHash, (nodes = new Map<string, number>()));
        if (!nodes.has(state.node)) nodes.set(state.node, Date.now());
      },
    });
    const leasesRunning = leaseWatch.run(stopStates.signal);

    // The agents.
    const atStart = await sample();
    const startT0 = Date.now();
    for (let w = 0; w < WORKERS; w++) {
      const from = Math.floor((w * AGENTS) / WORKERS);
      const to = Math.floor(((w + 1) * AGENTS) / WORKERS);
      workers.push(forkWorker(from, to, plane.kubeconfigPath));
    }
    const workerStartMs = await Promise.all(workers.map((w) => w.started));
    const startedMs = Date.now() - startT0;
    const startup = interval(atStart, await sample());
    const mb = (pid: number | undefined): string =>
      `${(pid === undefined ? NaN : rssBytesOf(pid) / 2 ** 20).toFixed(0)} MB`;
    const rss = `workers ${workers.map((w) => mb(w.child.pid)).join(', ')}; apiserver ${mb(plane.pids.apiserver)}, etcd ${mb(plane.pids.etcd)}, this process ${mb(process.pid)}`;
    progress(`${String(AGENTS)} agents started in ${(startedMs / 1000).toFixed(1)} s`);

    const leasesWith = (hash: string): Map<string, number> => published.get(hash) ?? new Map<string, number>();
    const allPublished = (hash: string): true | undefined => (leasesWith(hash).size >= AGENTS ? true : undefined);
    await until('every agent publishing the first config', () => allPublished(configHash(configData(0))));
    await delay(3000); // watches open

    // ---- apply → complete, and each wave ----
    const plan = planWaves(
      policyOf('0s'),
      Array.from({ length: AGENTS }, (_, i) => ({ name: nodeName(i) })),
    );
    const waveCount = plan.ok ? plan.waves.length : 0;
    const applyToComplete: number[] = [];
    const applyToAllLeases: number[] = [];
    const applyToCanaryOpen: number[] = [];
    const lastAppliedToComplete: number[] = [];
    /** Per wave: every node's open → applied (ms), each apply's open → all applied, and the controller's next open. */
    const waves = Array.from({ length: waveCount }, () => ({
      name: '',
      nodes: 0,
      latencies: [] as number[],
      allApplied: [] as number[],
      /** The wave's last node applied → the next wave's waveOpenedAt (the controller's reaction). */
      toNextOpen: [] as number[],
      /** waveOpenedAt → this process saw that state (the write and a watch delivery). */
      seenDelay: [] as number[],
    }));
    const rollouts: Interval[] = [];
    /** Writes of the candidate copy per rollout (each one an event to every agent). */
    const writesSeen: number[] = [];
    for (let k = 0; k < APPLIES; k++) {
      revision += 1;
      const before = await sample();
      const { hash, at: t0 } = await applyRevision(admin, CM, revision);
      const complete = await until(`rollout ${String(k + 1)} complete`, () => {
        const halted = stateOfHash(hash, (s) => s.phase === 'halted' || s.phase === 'invalid');
        if (halted !== undefined)
          throw new Error(`rollout ${String(k + 1)}: ${JSON.stringify(halted.state.halt ?? halted.state.message)}`);
        return stateOfHash(hash, (s) => s.phase === 'complete');
      });
      await until(`every Lease on rollout ${String(k + 1)}'s config`, () => allPublished(hash));
      rollouts.push(interval(before, await sample()));
      writesSeen.push(seen.filter((st) => st.state.candidate.hash === hash).length);
      const leases = leasesWith(hash);
      const lastLease = Math.max(...leases.values());
      applyToComplete.push(Math.max(complete.at, lastLease) - t0);
      applyToAllLeases.push(lastLease - t0);
      let previousLast: number | undefined;
      for (let i = 0; i < waveCount; i++) {
        const opened = stateOfHash(hash, (s) => s.opened === i + 1 && s.phase === 'progressing');
        const wave = opened?.state.waves[i];
        const slot = waves[i];
        if (opened === undefined || wave === undefined || slot === undefined)
          throw new Error(`rollout ${String(k + 1)}: wave ${String(i)} was not seen opening`);
        const openAt = opened.state.waveOpenedAt;
        if (i === 0) applyToCanaryOpen.push(openAt - t0);
        if (previousLast !== undefined) waves[i - 1]?.toNextOpen.push(openAt - previousLast);
        slot.name = wave.name;
        const members = plan.ok ? (plan.members[i] ?? []) : [];
        slot.nodes = members.length;
        slot.seenDelay.push(opened.at - openAt);
        const lats = members.map((n) => (leases.get(n) ?? NaN) - openAt);
        slot.latencies.push(...lats);
        slot.allApplied.push(Math.max(...lats));
        previousLast = openAt + Math.max(...lats);
      }
      lastAppliedToComplete.push(complete.state.updatedAt - (previousLast ?? NaN));
      progress(`rollout ${String(k + 1)}: apply → complete ${String(applyToComplete.at(-1))} ms`);
      await delay(1000);
    }

    // ---- idle, no rollout ----
    const idle = async (what: string): Promise<Interval & { readonly from: number; readonly load: string }> => {
      progress(`idle window (${what}), ${String(IDLE_SECONDS)} s`);
      const before = await sample();
      const loadBefore = load();
      await delay(IDLE_SECONDS * 1000);
      return {
        ...interval(before, await sample()),
        from: (before.at - startT0) / 1000,
        load: `${loadBefore} → ${load()}`,
      };
    };
    const idleNone = await idle('no rollout');

    // ---- a rollout held open: the controller restarted with a 1 h bake, the canary applied and baking ----
    await controller.stop();
    controller = await startController('1h');
    revision += 1;
    const { hash: heldHash } = await applyRevision(admin, CM, revision);
    const held = await until('the canary baking', () =>
      stateOfHash(heldHash, (s) => s.phase === 'progressing' && s.opened === 1 && s.bakeStartedAt !== undefined),
    );
    const canaryNodes = held.state.waves[0]?.size ?? 0;
    // What every state write sends to every agent: the candidate copy, state and data, as JSON.
    const candidateBytes = JSON.stringify(await admin.configMaps.get(stagedConfigMapName(CM, 'candidate'))).length;
    const idleHeld = await idle('rollout held');
    const stillHeld = stateOfHash(heldHash, (s) => s.opened > 1 || s.phase !== 'progressing');
    if (stillHeld !== undefined) throw new Error(`the held rollout moved on: ${stillHeld.state.phase}`);

    // ---- rollout status, held (in progress) then complete ----
    const query = { namespace: NS, instance: INSTANCE, stagedOf: { namespace: NS, name: CM } };
    const readStatus = async (): Promise<{ ms: number; status: RolloutStatus }> => {
      const t0 = performance.now();
      const desired = await readDesiredConfig(admin, { kind: 'configmap', namespace: NS, name: CM });
      const status = await readRollout(admin, query, desired, () => Date.now());
      return { ms: performance.now() - t0, status };
    };
    const statusRuns = async (): Promise<{ reads: number[]; status: RolloutStatus }> => {
      const reads: number[] = [];
      let last = await readStatus();
      for (let k = 0; k < 5; k++) {
        last = await readStatus();
        reads.push(last.ms);
      }
      return { reads, status: last.status };
    };
    const cliArgs = ['rollout', 'status', '-n', NS, '--name', INSTANCE, '--configmap', `${NS}/${CM}`];
    const heldStatus = await statusRuns();
    const heldCli = await timeCli(cliArgs, ['rollout', 'status'], CLI_RUNS, plane.kubeconfigPath);

    const beforePromote = await sample();
    const promoteT0 = Date.now();
    const submitted = await submitRequest(admin, { namespace: NS, name: CM }, 'promote', {
      now: () => Date.now(),
      by: 'bench',
    });
    const promoted = await waitForRequest(admin, submitted, { clock: systemClock, timeoutMs: 60_000, intervalMs: 50 });
    if (promoted.outcome !== 'done') throw new Error(`promote: ${promoted.outcome} ${promoted.detail ?? ''}`);
    await until('every Lease on the promoted config', () => allPublished(heldHash));
    const promoteToAllLeases = Math.max(...leasesWith(heldHash).values()) - promoteT0;
    const promoteToComplete = (stateOfHash(heldHash, (st) => st.phase === 'complete')?.at ?? NaN) - promoteT0;
    const promotion = interval(beforePromote, await sample());
    await delay(1000);
    const doneStatus = await statusRuns();
    const doneCli = await timeCli(cliArgs, ['rollout', 'status'], CLI_RUNS, plane.kubeconfigPath);

    // ---- the table ----
    const sorted = (xs: readonly number[]): number[] => [...xs].sort((a, b) => a - b);
    const dist = (xs: readonly number[]): string => {
      const s = sorted(xs);
      return `median ${String(quantile(s, 0.5))} ms, p99 ${String(quantile(s, 0.99))} ms, max ${String(s[s.length - 1])} ms`;
    };
    const list = (xs: readonly number[]): string => xs.map((x) => x.toFixed(0)).join(', ') + ' ms';
    const allNodes = waves.flatMap((w) => w.latencies);
    const idleLine = (name: string, r: Awaited<ReturnType<typeof idle>>): string[] => {
      const total = r.agents.reduce((n, [, c]) => n + c, 0);
      const ctl = r.controller.reduce((n, [, c]) => n + c, 0);
      return [
        `| idle API requests per agent per minute, ${name} (${r.seconds.toFixed(0)} s from ${r.from.toFixed(0)} s; load ${r.load}) | ${perMinute(total, AGENTS, r.seconds).toFixed(2)}: ${byKind(r.agents, AGENTS, r.seconds)} |`,
        `| the controller's requests per minute meanwhile | ${perMinute(ctl, 1, r.seconds).toFixed(1)}: ${byKind(r.controller, 1, r.seconds)} |`,
        `| CPU meanwhile | ${cpuLine(r)}; agents' CPU per agent per minute ${((r.cpu.workers * 1000) / AGENTS / (r.seconds / 60)).toFixed(1)} ms |`,
      ];
    };
    const statusLine = (s: RolloutStatus): string =>
      `verdict ${s.verdict}, phase ${s.staged?.state?.phase ?? '-'}, waves ${s.staged?.waves.map((w) => `${w.name} ${String(w.applied)}/${String(w.nodes)}${w.open ? '' : ' (closed)'}`).join(', ') ?? '-'}`;
    const cliLine = (c: CliTimings): string =>
      `${msSummary(c.cli)}, exit ${String(c.last.status)} (bare node -e ${msSummary(c.bare)}; --help ${msSummary(c.help)})`;
    const rows = [
      `| agents | ${String(AGENTS)} in ${String(WORKERS)} worker processes, started in ${(startedMs / 1000).toFixed(1)} s (workers: ${list(workerStartMs)}) |`,
      `| start-up CPU | ${cpuLine(startup)} |`,
      `| RSS once started | ${rss} |`,
      `| policy | ${describePolicy(policyOf('0s'))}: ${waves.map((w) => `${w.name} ${String(w.nodes)}`).join(', ')} |`,
      `| apply → complete (${String(APPLIES)} applies: state complete and every Lease on the new hash) | ${list(applyToComplete)} |`,
      `| apply → every Lease on the new hash | ${list(applyToAllLeases)} |`,
      `| apply → canary opened (controller: debounce, plan, write) | ${list(applyToCanaryOpen)} |`,
      ...waves.map(
        (w) =>
          `| ${w.name} (${String(w.nodes)} nodes): open → node applied | ${dist(w.latencies)}; open → all applied per apply ${list(w.allApplied)}${w.toNextOpen.length > 0 ? `; last applied → next wave open ${list(w.toNextOpen)}` : ''} |`,
      ),
      `| every wave's nodes pooled: open → node applied | ${dist(allNodes)} |`,
      `| waveOpenedAt → this process saw the state (write + watch) | ${dist(waves.flatMap((w) => w.seenDelay))} |`,
      `| last wave all applied → complete (controller's updatedAt) | ${list(lastAppliedToComplete)} |`,
      `| candidate-copy writes seen per rollout (+1 stable-copy write at complete) | ${writesSeen.join(', ')}; the copy is ${String(candidateBytes)} bytes of JSON (GET, managedFields included) |`,
      ...rollouts.map(
        (r, k) =>
          `| rollout ${String(k + 1)}: CPU; workers' event-loop delay (worst worker) | ${cpuLine(r)}; delay p99 ${r.lag.p99.toFixed(0)} ms, max ${r.lag.max.toFixed(0)} ms |`,
      ),
      ...rollouts.map(
        (r, k) =>
          `| rollout ${String(k + 1)}: the agents' requests (all of them) | ${r.agents.map(([kind, n]) => `${kind} ${String(n)}`).join(', ')} |`,
      ),
      ...idleLine('no rollout', idleNone),
      ...idleLine(`rollout held (canary of ${String(canaryNodes)} baking, 1 h bake)`, idleHeld),
      `| readDesiredConfig + readRollout in-process, rollout held (5 runs) | ${msSummary(heldStatus.reads)}; ${statusLine(heldStatus.status)} |`,
      `| \`rollout status\` as a process, rollout held (${String(CLI_RUNS)} runs) | ${cliLine(heldCli)} |`,
      `| promote (request sent) → state complete seen; → every Lease on the candidate | ${String(promoteToComplete)} ms; ${String(promoteToAllLeases)} ms |`,
      `| promote: CPU; workers' event-loop delay (worst worker) | ${cpuLine(promotion)}; delay p99 ${promotion.lag.p99.toFixed(0)} ms, max ${promotion.lag.max.toFixed(0)} ms |`,
      `| readDesiredConfig + readRollout in-process, complete (5 runs) | ${msSummary(doneStatus.reads)}; ${statusLine(doneStatus.status)} |`,
      `| \`rollout status\` as a process, complete (${String(CLI_RUNS)} runs) | ${cliLine(doneCli)} |`,
    ];
    console.log(`node ${process.version}, ${apiserverVersion(binDir)}, load ${load()} (1/5/15 min) at the end`);
    console.log('| measure | figure |\n|---|---|');
    for (const r of rows) console.log(r);
    admin.close();
    stopStates.abort();
    await statesRunning;
    await leasesRunning;
  } finally {
    stopStates.abort();
    await Promise.all(workers.map((w) => w.stop()));
    await controller?.stop();
    await plane.stop();
  }
}

if (process.argv.includes('--worker')) await worker();
else await main();
