// Staged rollout at fleet scale against a real kube-apiserver + etcd (docs/benchmarks.md, issue 35):
// what a rollout costs when the fleet is larger than the machine can run real agents for.
// - AGENTS real agents (support.ts startSimAgent: the real StagedConfigSource, ConfigWatcher and
//   StatePublisher, each with its own RestCluster), split over WORKERS forked processes;
// - EMULATED more nodes kept by one forked process (fleet-emulator.ts: one watch of each copy, every
//   node decided with runsCandidate, only the Leases whose hash changed written, through a client
//   of EMULATOR_QPS; heartbeats every HEARTBEAT seconds, stale after 3);
// - the real controller (startRolloutController, leader election as in the chart, qps 20 / burst 40)
//   in its own forked process, so its CPU seconds and RSS in /proc are its own; canary CANARY nodes
//   then 25%,50%,100%, bake 0s;
// - this process: the apiserver and etcd, one Node per node, the operator's applies, and watches
//   of both copies (every write, its JSON size and state) and of the status Leases (when each node
//   was seen on each hash: the controller's view).
// Reported: the state's bytes (the annotation, and the candidate copy's JSON), the bytes each
// agent's two watches receive per rollout (the copies' writes × their JSON size), apply →
// complete, per wave open → applied (real and emulated nodes apart), CPU seconds of every process
// per rollout and over an idle window, the controller's RSS.
// Run: npm run build && node dist/bench/fleet-scale.js [--agents 300] [--emulated 9700] [--workers 2]
//      [--applies 3] [--canary 10] [--emulator-qps 150] [--emulated-heartbeat 600] [--idle-seconds 60]
import { loadavg } from 'node:os';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import { systemClock } from '../src/core/clock.js';
import { stateFromLease, statusSelector } from '../src/core/fleet/applied-state.js';
import { loadKubeconfig } from '../src/core/kube/kubeconfig.js';
import { DEFAULT_LEADER_ELECTION_TIMING } from '../src/core/kube/leader-election.js';
import type { ConfigMap, Lease } from '../src/core/kube/objects.js';
import { Reflector } from '../src/core/kube/reflector.js';
import { RestCluster } from '../src/core/kube/rest-cluster.js';
import { silentLogger } from '../src/core/log.js';
import {
  ROLLOUT_STATE_ANNOTATION,
  STAGED_ROLE_LABEL,
  stagedConfigMapName,
  stateOf,
} from '../src/core/rollout-state/annotations.js';
import { stagedSelector } from '../src/core/staged-rollout/objects.js';
import { describePolicy, policyFromFlags } from '../src/core/staged-rollout/policy.js';
import type { StagedRolloutPolicy } from '../src/core/staged-rollout/policy.js';
import { startRolloutController } from '../src/core/staged-rollout/service.js';
import type { RolloutState } from '../src/core/rollout-state/state.js';
import { planWaves } from '../src/core/staged-rollout/waves.js';
import { startControlPlane } from '../test/support/control-plane.js';
import type { ControlPlane } from '../test/support/control-plane.js';
import { EmulatedFleet } from './fleet-emulator.js';
import { forkRole, serveRole } from './processes.js';
import type { RoleHandle, RunningRole } from './processes.js';
import {
  apiserverVersion,
  applyRevision,
  benchConfigData as configData,
  configHash,
  countedCluster,
  countsBetween,
  cpuSeconds,
  kubeBinDir,
  numberFlag,
  peakRssBytesOf,
  quantile,
  rssBytesOf,
  startStagedSimAgent,
  startSimAgents,
  stopSimAgent,
  totals,
} from './support.js';
import type { Requests } from './support.js';

const AGENTS = numberFlag('--agents', 300);
const EMULATED = numberFlag('--emulated', 9700);
const NODES = AGENTS + EMULATED;
const WORKERS = Math.max(0, Math.min(AGENTS, numberFlag('--workers', 2)));
const APPLIES = numberFlag('--applies', 3);
const CANARY = numberFlag('--canary', 10);
const EMULATOR_QPS = numberFlag('--emulator-qps', 150);
const HEARTBEAT_S = numberFlag('--emulated-heartbeat', 600);
const IDLE_SECONDS = numberFlag('--idle-seconds', 60);
const WAVES = '25%,50%,100%';
const NS = 'default';
const INSTANCE = 'bench';
const CM = 'bench-config';
/** Longest wait for anything the rollout does (a wave, a complete, every Lease). */
const WAIT_MS = 600_000;

const nodeName = (i: number): string => `bench-${String(i).padStart(5, '0')}`;
const namesOf = (from: number, to: number): string[] => Array.from({ length: to - from }, (_, k) => nodeName(from + k));
const policyOf = (bakeTime: string): StagedRolloutPolicy =>
  policyFromFlags({ canaryCount: CANARY, waves: WAVES, bakeTime });

/** A progress line on stderr (stdout is the table). */
function progress(message: string): void {
  console.error(`[fleet-scale] ${new Date().toISOString().slice(11, 19)} ${message}`);
}

const flag = (name: string): string => {
  const i = process.argv.indexOf(name);
  return i > 0 ? (process.argv[i + 1] ?? '') : '';
};

// ---- the forked roles ---------------------------------------------------------------------------

/** What every role reports when sampled: its requests, how late its event loop ran, its own counters. */
interface RoleSample {
  readonly counts: readonly (readonly [string, number])[];
  readonly lag: { readonly p99: number; readonly max: number };
  readonly figures: Readonly<Record<string, number>>;
}

/** How late this process' event loop ran since the last call (ms). */
function lagSampler(): () => RoleSample['lag'] {
  const lag = monitorEventLoopDelay({ resolution: 10 });
  lag.enable();
  return () => {
    const value = { p99: lag.percentile(99) / 1e6, max: lag.max / 1e6 };
    lag.reset();
    return value;
  };
}

/** Real agents `from` to `to` (exclusive), each on the staged source. */
async function agentsRole(): Promise<RunningRole> {
  const connection = await loadKubeconfig(flag('--kubeconfig'));
  const from = numberFlag('--from', 0);
  const t0 = Date.now();
  const agents = await startSimAgents(numberFlag('--to', 0) - from, (k) => {
    const node = nodeName(from + k);
    return startStagedSimAgent(connection, { node, namespace: NS, instance: INSTANCE, configMap: CM });
  });
  const lag = lagSampler();
  return {
    ready: Date.now() - t0,
    calls: {
      sample: (): RoleSample => ({ counts: [...totals(agents.map((a) => a.requests))], lag: lag(), figures: {} }),
    },
    stop: async () => {
      for (const a of agents) await stopSimAgent(a);
    },
  };
}

/** Emulated nodes `from` to `to` (exclusive): their Leases, once all are written. */
async function emulatorRole(): Promise<RunningRole> {
  const fleet = new EmulatedFleet({
    connection: await loadKubeconfig(flag('--kubeconfig')),
    namespace: NS,
    instance: INSTANCE,
    configMap: CM,
    nodes: namesOf(numberFlag('--from', 0), numberFlag('--to', 0)),
    qps: EMULATOR_QPS,
    heartbeatMs: HEARTBEAT_S * 1000,
  });
  const t0 = Date.now();
  await fleet.start();
  const lag = lagSampler();
  return {
    ready: Date.now() - t0,
    calls: { sample: (): RoleSample => ({ counts: [...fleet.requests], lag: lag(), figures: { ...fleet.figures } }) },
    stop: () => fleet.stop(),
  };
}

/** The rollout controller as the chart runs it (its qps/burst, leader election), bake `--bake`. */
async function controllerRole(): Promise<RunningRole> {
  const connection = await loadKubeconfig(flag('--kubeconfig'));
  const requests: Requests = new Map();
  const cluster = countedCluster(new RestCluster({ connection, qps: 20, burst: 40 }), requests);
  const running = await startRolloutController(
    {
      settings: { namespace: NS, name: CM, instance: INSTANCE, policy: policyOf(flag('--bake')), resyncMs: 600_000 },
      listenAddress: '',
      metricsPath: '/metrics',
      identity: 'bench',
      leaderElection: {
        name: 'local-volume-rollout-controller',
        namespace: NS,
        timing: DEFAULT_LEADER_ELECTION_TIMING,
      },
    },
    { cluster, clock: systemClock, logger: silentLogger },
  );
  const lag = lagSampler();
  return {
    ready: 0,
    calls: {
      sample: (): RoleSample => ({
        counts: [...requests],
        lag: lag(),
        figures: { passes: running.controller.passes, heapUsed: process.memoryUsage().heapUsed },
      }),
    },
    stop: () => running.stop(),
  };
}

// ---- this process: what it sees ----------------------------------------------------------------

/** A write of either copy as this process' watch saw it: what each agent's watch of it receives. */
interface CopyWrite {
  readonly at: number;
  readonly role: string;
  /** The object as JSON (managedFields included), about what a watch event carries. */
  readonly bytes: number;
  /** The state annotation's length (the candidate copy; 0 on the stable copy). */
  readonly stateBytes: number;
  readonly state: RolloutState | undefined;
}

/** This process' watches: every write of the copies, and when each node was first seen on each hash. */
class FleetObserver {
  readonly writes: CopyWrite[] = [];
  /** hash → node → ms since the epoch. */
  readonly published = new Map<string, Map<string, number>>();

  run(admin: RestCluster, signal: AbortSignal): Promise<unknown> {
    const common = { clock: systemClock, logger: silentLogger, namespace: NS };
    const copies = new Reflector<ConfigMap>({
      ...common,
      client: admin.configMaps,
      resource: 'the copies',
      labelSelector: stagedSelector(CM),
      onChange: (type, object) => {
        if (type !== 'DELETED') this.copyWritten(object);
      },
    });
    const leases = new Reflector<Lease>({
      ...common,
      client: admin.leases,
      resource: 'status leases',
      labelSelector: statusSelector(INSTANCE),
      onChange: (_type, lease) => {
        const state = stateFromLease(lease);
        if (state === undefined) return;
        let nodes = this.published.get(state.appliedHash);
        if (nodes === undefined) this.published.set(state.appliedHash, (nodes = new Map<string, number>()));
        if (!nodes.has(state.node)) nodes.set(state.node, Date.now());
      },
    });
    return Promise.all([copies.run(signal), leases.run(signal)]);
  }

  private copyWritten(object: ConfigMap): void {
    const decoded = stateOf(object);
    this.writes.push({
      at: Date.now(),
      role: object.metadata.labels?.[STAGED_ROLE_LABEL] ?? '?',
      bytes: Buffer.byteLength(JSON.stringify(object)),
      stateBytes: object.metadata.annotations?.[ROLLOUT_STATE_ANNOTATION]?.length ?? 0,
      state: decoded?.ok === true ? decoded.state : undefined,
    });
  }

  leasesWith(hash: string): Map<string, number> {
    return this.published.get(hash) ?? new Map<string, number>();
  }

  /** The first state seen for candidate `hash` that passes `check`, with when it was seen. */
  stateOf(hash: string, check: (s: RolloutState) => boolean): { at: number; state: RolloutState } | undefined {
    const write = this.writes.find((w) => w.state?.candidate.hash === hash && check(w.state));
    return write?.state === undefined ? undefined : { at: write.at, state: write.state };
  }
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

const load = (): string =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');

// ---- samples: requests, CPU seconds, RSS ------------------------------------------------------

interface Fleet {
  readonly plane: ControlPlane;
  readonly admin: RestCluster;
  readonly observer: FleetObserver;
  readonly controller: RoleHandle;
  readonly emulator: RoleHandle | undefined;
  readonly workers: readonly RoleHandle[];
}

interface Cpu {
  readonly apiserver: number;
  readonly etcd: number;
  readonly controller: number;
  readonly emulator: number;
  readonly agents: number;
  readonly parent: number;
}

interface Sample {
  readonly at: number;
  readonly agents: Requests;
  readonly controller: RoleSample;
  readonly emulator: RoleSample | undefined;
  readonly cpu: Cpu;
  /** The agents' workers' event-loop delay since the last sample (the worst worker). */
  readonly lag: RoleSample['lag'];
}

const cpuOf = (h: RoleHandle | undefined): number =>
  h?.child.pid === undefined || h.child.exitCode !== null ? 0 : cpuSeconds(h.child.pid);

async function sample(fleet: Fleet): Promise<Sample> {
  const ask = async (h: RoleHandle): Promise<RoleSample> => (await h.call('sample')) as RoleSample;
  const [controller, emulator, ...workers] = await Promise.all([
    ask(fleet.controller),
    fleet.emulator === undefined ? undefined : ask(fleet.emulator),
    ...fleet.workers.map(ask),
  ]);
  const own = process.cpuUsage();
  const fromWorkers = workers;
  return {
    at: Date.now(),
    agents: totals(fromWorkers.map((w) => w.counts)),
    controller,
    emulator,
    cpu: {
      apiserver: cpuSeconds(fleet.plane.pids.apiserver),
      etcd: cpuSeconds(fleet.plane.pids.etcd),
      controller: cpuOf(fleet.controller),
      emulator: cpuOf(fleet.emulator),
      agents: fleet.workers.reduce((n, w) => n + cpuOf(w), 0),
      parent: (own.user + own.system) / 1e6,
    },
    lag: {
      p99: Math.max(0, ...fromWorkers.map((w) => w.lag.p99)),
      max: Math.max(0, ...fromWorkers.map((w) => w.lag.max)),
    },
  };
}

/** What happened between two samples. */
interface Interval {
  readonly seconds: number;
  readonly cpu: Cpu;
  readonly agents: ReturnType<typeof countsBetween>;
  readonly controller: ReturnType<typeof countsBetween>;
  readonly emulator: ReturnType<typeof countsBetween>;
  /** The emulator's counters' growth (writes, heartbeats, …). */
  readonly emulated: Readonly<Record<string, number>>;
  readonly passes: number;
  readonly lag: RoleSample['lag'];
}

function interval(a: Sample, b: Sample): Interval {
  const cpu = Object.fromEntries(
    Object.entries(b.cpu).map(([k, v]) => [k, v - a.cpu[k as keyof Cpu]]),
  ) as unknown as Cpu;
  const emulated = Object.fromEntries(
    Object.entries(b.emulator?.figures ?? {}).map(([k, v]) => [k, v - (a.emulator?.figures[k] ?? 0)]),
  );
  return {
    seconds: (b.at - a.at) / 1000,
    cpu,
    agents: countsBetween(a.agents, b.agents),
    controller: countsBetween(new Map(a.controller.counts), new Map(b.controller.counts)),
    emulator: countsBetween(new Map(a.emulator?.counts ?? []), new Map(b.emulator?.counts ?? [])),
    emulated,
    passes: (b.controller.figures['passes'] ?? 0) - (a.controller.figures['passes'] ?? 0),
    lag: b.lag,
  };
}

const s1 = (n: number): string => n.toFixed(1);

/** `controller 1.2 s, apiserver 3.4 s, …: 10.0 CPU s in 28.0 s (0.36 cores)`. */
function cpuLine(i: Interval): string {
  const { controller, apiserver, etcd, emulator, agents, parent } = i.cpu;
  const total = controller + apiserver + etcd + emulator + agents + parent;
  return `controller ${s1(controller)} s, apiserver ${s1(apiserver)} s, etcd ${s1(etcd)} s, emulator ${s1(emulator)} s, real agents' workers ${s1(agents)} s, this process ${s1(parent)} s: ${s1(total)} CPU s in ${s1(i.seconds)} s (${(total / i.seconds).toFixed(2)} cores)`;
}

const mib = (bytes: number): string => `${(bytes / 2 ** 20).toFixed(0)} MiB`;

function rssLine(fleet: Fleet): string {
  const of = (pid: number | undefined): string => (pid === undefined ? '-' : mib(rssBytesOf(pid)));
  const peak = (pid: number | undefined): string => (pid === undefined ? '-' : mib(peakRssBytesOf(pid)));
  const c = fleet.controller.child.pid;
  return `controller ${of(c)} (peak ${peak(c)}), apiserver ${of(fleet.plane.pids.apiserver)} (peak ${peak(fleet.plane.pids.apiserver)}), etcd ${of(fleet.plane.pids.etcd)}, emulator ${of(fleet.emulator?.child.pid)}, workers ${fleet.workers.map((w) => of(w.child.pid)).join(', ') || '-'}, this process ${of(process.pid)}`;
}

// ---- setting up -----------------------------------------------------------------------------

/** The operator's ConfigMap and one Node per node, 50 at a time. */
async function createObjects(admin: RestCluster): Promise<void> {
  await admin.configMaps.create({ metadata: { name: CM, namespace: NS }, data: configData(0) });
  for (let i = 0; i < NODES; i += 50)
    await Promise.all(
      Array.from({ length: Math.min(50, NODES - i) }, (_, j) =>
        admin.nodes.create({ metadata: { name: nodeName(i + j) } }),
      ),
    );
}

/** The controller forked, and its stable copy written. */
async function startController(admin: RestCluster, kubeconfig: string): Promise<RoleHandle> {
  const controller = forkRole(
    import.meta.filename,
    ['--role', 'controller', '--kubeconfig', kubeconfig, '--bake', '0s', ...process.argv.slice(2)],
    'controller',
  );
  await controller.ready;
  const deadline = Date.now() + 60_000;
  while ((await admin.configMaps.get(stagedConfigMapName(CM, 'stable')).catch(() => undefined)) === undefined) {
    if (Date.now() > deadline) throw new Error('the controller did not write the stable copy');
    await delay(100);
  }
  return controller;
}

/** The emulator and the agents' workers forked, all started: their start-up times (ms). */
async function startNodes(
  kubeconfig: string,
  into: { emulator?: RoleHandle; workers: RoleHandle[] },
): Promise<{ readonly emulator: number; readonly workers: number[] }> {
  const role = (name: string, from: number, to: number): RoleHandle =>
    forkRole(
      import.meta.filename,
      // The role's flags first (the first occurrence counts), then this run's (--emulator-qps, …).
      [
        '--role',
        name,
        '--kubeconfig',
        kubeconfig,
        '--from',
        String(from),
        '--to',
        String(to),
        ...process.argv.slice(2),
      ],
      `${name} ${String(from)}–${String(to)}`,
    );
  if (EMULATED > 0) into.emulator = role('emulator', AGENTS, NODES);
  for (let w = 0; w < WORKERS; w++)
    into.workers.push(role('agents', Math.floor((w * AGENTS) / WORKERS), Math.floor(((w + 1) * AGENTS) / WORKERS)));
  const [emulator, ...workers] = await Promise.all([into.emulator?.ready ?? 0, ...into.workers.map((w) => w.ready)]);
  return { emulator: Number(emulator), workers: workers.map(Number) };
}

// ---- a rollout ----------------------------------------------------------------------------------

interface WaveFigures {
  readonly name: string;
  readonly real: number;
  readonly emulated: number;
  /** Open → each node seen applied (ms), the real agents' and the emulated nodes' apart. */
  readonly realLatencies: readonly number[];
  readonly emulatedLatencies: readonly number[];
  /** Open → the wave's last node seen applied. */
  readonly allApplied: number;
  /** The wave's last node applied → the next wave's waveOpenedAt (the controller's reaction). */
  readonly toNextOpen: number | undefined;
}

interface RolloutFigures {
  readonly applyToComplete: number;
  readonly applyToAllLeases: number;
  readonly applyToCanaryOpen: number;
  readonly lastAppliedToComplete: number;
  readonly waves: readonly WaveFigures[];
  readonly candidateWrites: readonly CopyWrite[];
  readonly stableWrites: readonly CopyWrite[];
  readonly cost: Interval;
  readonly controllerRss: number;
}

/** Each wave's figures for candidate `hash`, from the states and Leases this process saw. */
function waveFigures(observer: FleetObserver, hash: string, members: readonly (readonly string[])[]): WaveFigures[] {
  const leases = observer.leasesWith(hash);
  const waves: WaveFigures[] = [];
  let previousLast: number | undefined;
  members.forEach((names, i) => {
    const opened = observer.stateOf(hash, (s) => s.opened === i + 1 && s.phase === 'progressing');
    const wave = opened?.state.waves[i];
    if (opened === undefined || wave === undefined) throw new Error(`wave ${String(i)} was not seen opening`);
    const openAt = opened.state.waveOpenedAt;
    const previous = waves.at(-1);
    if (previous !== undefined && previousLast !== undefined)
      waves[waves.length - 1] = { ...previous, toNextOpen: openAt - previousLast };
    const latency = (n: string): number => (leases.get(n) ?? NaN) - openAt;
    const real = names.filter((n) => Number(n.slice(6)) < AGENTS);
    const emulated = names.filter((n) => Number(n.slice(6)) >= AGENTS);
    const all = names.map(latency);
    waves.push({
      name: wave.name,
      real: real.length,
      emulated: emulated.length,
      realLatencies: real.map(latency),
      emulatedLatencies: emulated.map(latency),
      allApplied: Math.max(...all),
      toNextOpen: undefined,
    });
    previousLast = openAt + Math.max(...all);
  });
  return waves;
}

/** One apply of `revision`, until the state is complete and every Lease carries its hash. */
async function rollout(
  fleet: Fleet,
  revision: number,
  members: readonly (readonly string[])[],
): Promise<RolloutFigures> {
  const { observer } = fleet;
  const before = await sample(fleet);
  const { hash, at: t0 } = await applyRevision(fleet.admin, CM, revision);
  const complete = await until(`rollout ${String(revision)} complete`, () => {
    const halted = observer.stateOf(hash, (s) => s.phase === 'halted' || s.phase === 'invalid');
    if (halted !== undefined)
      throw new Error(`rollout ${String(revision)}: ${JSON.stringify(halted.state.halt ?? halted.state.message)}`);
    return observer.stateOf(hash, (s) => s.phase === 'complete');
  });
  await until(`every Lease on rollout ${String(revision)}'s config`, () =>
    observer.leasesWith(hash).size >= NODES ? true : undefined,
  );
  const cost = interval(before, await sample(fleet));
  const lastLease = Math.max(...observer.leasesWith(hash).values());
  const waves = waveFigures(observer, hash, members);
  const canary = observer.stateOf(hash, (s) => s.opened === 1 && s.phase === 'progressing');
  const lastOpen = observer.stateOf(hash, (s) => s.opened === members.length && s.phase === 'progressing');
  const end = Math.max(complete.at, lastLease);
  const during = observer.writes.filter((w) => w.at >= t0 && w.at <= end);
  return {
    applyToComplete: end - t0,
    applyToAllLeases: lastLease - t0,
    applyToCanaryOpen: (canary?.state.waveOpenedAt ?? NaN) - t0,
    lastAppliedToComplete:
      complete.state.updatedAt - ((lastOpen?.state.waveOpenedAt ?? NaN) + (waves.at(-1)?.allApplied ?? NaN)),
    waves,
    candidateWrites: during.filter((w) => w.role === 'candidate'),
    stableWrites: during.filter((w) => w.role === 'stable'),
    cost,
    controllerRss: fleet.controller.child.pid === undefined ? NaN : rssBytesOf(fleet.controller.child.pid),
  };
}

// ---- the table -----------------------------------------------------------------------------------

const list = (xs: readonly number[], unit = ' ms'): string => xs.map((x) => x.toFixed(0)).join(', ') + unit;
const dist = (xs: readonly number[]): string => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? '-' : `median ${quantile(s, 0.5).toFixed(0)} / p99 ${quantile(s, 0.99).toFixed(0)} ms`;
};
const sum = (xs: readonly number[]): number => xs.reduce((n, x) => n + x, 0);
const kb = (bytes: number): string => `${(bytes / 1000).toFixed(1)} KB`;
const byKind = (counts: readonly (readonly [string, number])[]): string =>
  counts.map(([k, n]) => `${k} ${String(n)}`).join(', ') || 'none';

/** The rows about state bytes and what each agent receives per rollout. */
function bytesRows(rollouts: readonly RolloutFigures[]): string[] {
  const states = rollouts.flatMap((r) => r.candidateWrites.map((w) => w.stateBytes));
  const candidates = rollouts.flatMap((r) => r.candidateWrites.map((w) => w.bytes));
  const stables = rollouts.flatMap((r) => r.stableWrites.map((w) => w.bytes));
  const perAgent = rollouts.map(
    (r) => sum(r.candidateWrites.map((w) => w.bytes)) + sum(r.stableWrites.map((w) => w.bytes)),
  );
  return [
    `| state annotation (rollout-state), bytes: min / max over every write seen | ${String(Math.min(...states))} / ${String(Math.max(...states))} |`,
    `| candidate copy as JSON (managedFields included), bytes: min / max | ${String(Math.min(...candidates))} / ${String(Math.max(...candidates))} |`,
    `| stable copy as JSON, bytes | ${stables.length === 0 ? '-' : `${String(Math.min(...stables))} / ${String(Math.max(...stables))}`} |`,
    `| writes per rollout: candidate copy; stable copy | ${rollouts.map((r) => String(r.candidateWrites.length)).join(', ')}; ${rollouts.map((r) => String(r.stableWrites.length)).join(', ')} |`,
    `| bytes each agent's two watches receive per rollout (Σ the copies' writes) | ${perAgent.map(kb).join(', ')} |`,
    `| the same × ${String(NODES)} nodes (what the apiserver sends a fleet of agents per rollout) | ${perAgent.map((b) => `${((b * NODES) / 1e6).toFixed(1)} MB`).join(', ')} |`,
  ];
}

function rolloutRows(rollouts: readonly RolloutFigures[]): string[] {
  const waveCount = rollouts[0]?.waves.length ?? 0;
  const waveRows = Array.from({ length: waveCount }, (_, i) => {
    const ws = rollouts.map((r) => r.waves[i]).filter((w): w is WaveFigures => w !== undefined);
    const w = ws[0];
    if (w === undefined) return '';
    const next = ws.map((x) => x.toNextOpen).filter((x): x is number => x !== undefined);
    return `| ${w.name} (${String(w.real)} real + ${String(w.emulated)} emulated): open → node applied, real / emulated; open → all applied | ${dist(ws.flatMap((x) => x.realLatencies))}; ${dist(ws.flatMap((x) => x.emulatedLatencies))}; ${list(ws.map((x) => x.allApplied))}${next.length > 0 ? `; last applied → next open ${list(next)}` : ''} |`;
  });
  return [
    `| **apply → complete** (state complete and every Lease on the new hash) | ${list(rollouts.map((r) => r.applyToComplete))} |`,
    `| apply → every Lease on the new hash | ${list(rollouts.map((r) => r.applyToAllLeases))} |`,
    `| apply → canary opened (controller) | ${list(rollouts.map((r) => r.applyToCanaryOpen))} |`,
    ...waveRows,
    `| last wave all applied → complete (controller's updatedAt) | ${list(rollouts.map((r) => r.lastAppliedToComplete))} |`,
    ...bytesRows(rollouts),
    ...rollouts.map((r, k) => `| rollout ${String(k + 1)}: CPU | ${cpuLine(r.cost)} |`),
    `| controller per rollout: CPU s; passes; RSS after | ${rollouts.map((r) => `${s1(r.cost.cpu.controller)} s, ${String(r.cost.passes)} passes, ${mib(r.controllerRss)}`).join('; ')} |`,
    `| apiserver CPU s per rollout | ${rollouts.map((r) => s1(r.cost.cpu.apiserver)).join(', ')} |`,
    ...rollouts.map(
      (r, k) =>
        `| rollout ${String(k + 1)}: requests: controller; emulator; real agents | ${byKind(r.cost.controller)}; ${byKind(r.cost.emulator)}; ${byKind(r.cost.agents)} |`,
    ),
    `| real agents' workers' event-loop delay per rollout, p99 / max (worst worker) | ${rollouts.map((r) => `${r.cost.lag.p99.toFixed(0)} / ${r.cost.lag.max.toFixed(0)} ms`).join(', ')} |`,
  ];
}

function idleRows(idle: Interval & { readonly load: string }): string[] {
  const perMinute = (n: number): string => (n / (idle.seconds / 60)).toFixed(1);
  return [
    `| idle window (no rollout; ${s1(idle.seconds)} s, load ${idle.load}): CPU | ${cpuLine(idle)} |`,
    `| idle: controller CPU ms per minute; passes; requests per minute | ${perMinute(idle.cpu.controller * 1000)}; ${String(idle.passes)}; ${perMinute(sum(idle.controller.map(([, n]) => n)))}: ${byKind(idle.controller)} |`,
    `| idle: apiserver CPU ms per minute; emulated heartbeats written | ${perMinute(idle.cpu.apiserver * 1000)}; ${String(idle.emulated['heartbeats'] ?? 0)} |`,
  ];
}

// ---- main ---------------------------------------------------------------------------------------

async function measure(fleet: Fleet, started: { ms: number; emulator: number; workers: number[] }): Promise<void> {
  const plan = planWaves(
    policyOf('0s'),
    namesOf(0, NODES).map((name) => ({ name })),
  );
  if (!plan.ok) throw new Error(plan.reason);
  const rssStarted = rssLine(fleet);
  const rollouts: RolloutFigures[] = [];
  for (let k = 1; k <= APPLIES; k++) {
    rollouts.push(await rollout(fleet, k, plan.members));
    progress(`rollout ${String(k)}: apply → complete ${String(rollouts.at(-1)?.applyToComplete)} ms; load ${load()}`);
    await delay(1000);
  }
  progress(`idle window, ${String(IDLE_SECONDS)} s`);
  const loadBefore = load();
  const before = await sample(fleet);
  await delay(IDLE_SECONDS * 1000);
  const idle = { ...interval(before, await sample(fleet)), load: `${loadBefore} → ${load()}` };
  const rows = [
    `| nodes | ${String(NODES)}: ${String(AGENTS)} real agents in ${String(WORKERS)} workers, ${String(EMULATED)} emulated (one process, qps ${String(EMULATOR_QPS)}, heartbeat ${String(HEARTBEAT_S)} s, stale after ${String(HEARTBEAT_S * 3)} s) |`,
    `| started | ${s1(started.ms / 1000)} s after the Nodes (emulator ${s1(started.emulator / 1000)} s, workers ${list(
      started.workers.map((ms) => ms / 1000),
      ' s',
    )}) |`,
    `| RSS once started; after the rollouts | ${rssStarted}; ${rssLine(fleet)} |`,
    `| policy | ${describePolicy(policyOf('0s'))}: ${plan.waves.map((w) => `${w.name} ${String(w.size)}`).join(', ')} |`,
    // What format 1 stored besides: every node of every wave by name (the same plan, as JSON).
    `| format 1's node lists for this plan (the waves' names as JSON), bytes, for comparison | ${String(JSON.stringify(plan.members.map((nodes, i) => ({ name: plan.waves[i]?.name, nodes }))).length)} |`,
    ...rolloutRows(rollouts),
    ...idleRows(idle),
  ];
  console.log(`node ${process.version}, ${apiserverVersion(kubeBinDir())}, load ${load()} (1/5/15 min) at the end`);
  console.log('| measure | figure |\n|---|---|');
  for (const r of rows) console.log(r);
}

async function main(): Promise<void> {
  progress(`${String(NODES)} nodes (${String(AGENTS)} real, ${String(EMULATED)} emulated); load ${load()}`);
  const plane = await startControlPlane({ binDir: kubeBinDir() });
  const stop = new AbortController();
  const roles: { controller?: RoleHandle; emulator?: RoleHandle; workers: RoleHandle[] } = { workers: [] };
  try {
    const admin = new RestCluster({ connection: await loadKubeconfig(plane.kubeconfigPath) });
    await createObjects(admin);
    progress(`${String(NODES)} Nodes created`);
    const controller = (roles.controller = await startController(admin, plane.kubeconfigPath));
    const observer = new FleetObserver();
    const watching = observer.run(admin, stop.signal);
    const t0 = Date.now();
    const started = await startNodes(plane.kubeconfigPath, roles);
    const fleet: Fleet = { plane, admin, observer, controller, emulator: roles.emulator, workers: roles.workers };
    await until('every node publishing the first config', () =>
      observer.leasesWith(configHash(configData(0))).size >= NODES ? true : undefined,
    );
    const startedMs = Date.now() - t0;
    progress(`${String(NODES)} nodes started in ${s1(startedMs / 1000)} s; load ${load()}`);
    await delay(3000); // watches open
    await measure(fleet, { ms: startedMs, ...started });
    admin.close();
    stop.abort();
    await watching;
  } finally {
    stop.abort();
    await Promise.all(
      [...roles.workers, ...(roles.emulator === undefined ? [] : [roles.emulator])].map((r) => r.stop()),
    );
    await roles.controller?.stop();
    await plane.stop();
  }
}

const ROLES: Readonly<Record<string, () => Promise<RunningRole>>> = {
  agents: agentsRole,
  emulator: emulatorRole,
  controller: controllerRole,
};
const role = flag('--role');
const start = ROLES[role];
if (start !== undefined) await serveRole(`fleet-scale ${role}`, start);
else await main();
