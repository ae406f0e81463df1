// The chaos soak on the real node: the chart and the image on a kubelet node of a control plane,
// driven by a seeded schedule (plan.ts) of chores and faults for a given time, with the data-safety
// checker (data-safety-invariants.ts) and the soak's own monitors (world.ts) running throughout.
// Halfway the chart is upgraded to staged rollout: edits then reach the agent through the
// rollout controller and the API instead of the kubelet's projection. The report carries the seed,
// what ran, every violation, recovery times by fault kind and the agent's memory curve.
// Lint: client-node's models are plain data classes; object literals are what its API takes.
/* eslint-disable @typescript-eslint/no-unsafe-class-instance-assignment */
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import { ChartNode, CHART_FULLNAME, CHART_NS, STATE } from '../chart-node.js';
import { describeReport, startInvariantChecker, type Violation } from '../data-safety-invariants.js';
import type { Cleanup } from '../real-node.js';
import { isReady } from '../node-pods.js';
import { AgentLogKeeper, livenessKills, violationExcerpt, type KeptLogs } from './agent-logs.js';
import { CHORES } from './chores.js';
import { blockCleaner, configHash, INITIAL_MODEL, type SoakDirs } from './config-model.js';
import {
  addDisk,
  expectApplied,
  SLOW_RECOVERY_MS,
  writeModel,
  type SlowRecovery,
  type SoakContext,
} from './context.js';
import { ControllerReplicas } from './controllers.js';
import { FAULTS } from './faults.js';
import { FAULT_KINDS, isFault, seededRandom, soakSchedule, type FaultKind, type StepKind } from './plan.js';
import { SoakWorld, type MemorySample, type SoakViolation } from './world.js';

export interface SoakOptions {
  readonly seed: number;
  /** How long the schedule runs, from the install on; the switch to staged rollout comes halfway. */
  readonly durationMs: number;
  /** Chores between two faults, on average (default 3). */
  readonly choresPerFault?: number;
  /** Keep going after the time is up until every fault kind ran once (the CI soak). */
  readonly coverEveryFault?: boolean;
  readonly cleanup: Cleanup;
  readonly log?: (line: string) => void;
  /**
   * Where the agent's (and its cleanup Jobs') container logs are kept for the whole run; default: in
   * the soak's own directory, removed with it (the violations' excerpts stay in the report).
   */
  readonly logsDir?: string;
}

export interface SoakReport {
  readonly seed: number;
  readonly durationMs: number;
  readonly steps: number;
  readonly faults: Readonly<Partial<Record<FaultKind, number>>>;
  readonly chores: Readonly<Record<string, number>>;
  readonly counts: SoakWorld['counts'];
  readonly recoveries: Readonly<Partial<Record<FaultKind, readonly number[]>>>;
  /** Recoveries over SLOW_RECOVERY_MS: the time to Ready and to the PV, and the agent's log. */
  readonly slowRecoveries: readonly SlowRecovery[];
  readonly republishMs: readonly number[];
  readonly violations: readonly SoakViolation[];
  /** Steps that failed for another reason than a violation (the soak's own expectations). */
  readonly stepErrors: readonly string[];
  readonly memory: readonly MemorySample[];
  readonly checker: string;
  readonly controllerExits: number;
  /** The kept container logs: where, how many files and bytes. */
  readonly agentLogs: KeptLogs;
  /** The kubelet's restarts of the agent for a failed liveness probe (`HH:MM:SS ns/pod`): none expected. */
  readonly livenessKills: readonly string[];
}

function chartValues(dirs: SoakDirs): Record<string, unknown> {
  return {
    discoveryPeriod: '2s',
    logFormat: 'text',
    labelsForPV: { 'soak-revision': '0' },
    classes: [
      { name: 'fs-disks', hostDir: dirs.fs, volumeMode: 'Filesystem', fsType: 'ext4', storageClass: true },
      {
        name: 'blk-disks',
        hostDir: dirs.blk,
        volumeMode: 'Block',
        namePattern: 'blk*',
        blockCleanerCommand: blockCleaner(dirs),
        storageClass: true,
      },
      { name: 'extra-disks', hostDir: dirs.extra, volumeMode: 'Filesystem', storageClass: true },
    ],
  };
}

async function setUp(options: SoakOptions, started: number): Promise<SoakContext> {
  const log = options.log ?? (() => undefined);
  const env = await ChartNode.start({
    cleanup: options.cleanup,
    prefix: 'lvp-soak-',
    // a killed agent is started again within 2 s, not after the default doubling back-off: the
    // recovery figures are the agent's, the back-off is the kubelet's (docs/operations.md)
    kubelet: {
      kubeletConfig: {
        featureGates: { KubeletCrashLoopBackOffMax: true },
        crashLoopBackOff: { maxContainerRestartPeriod: '2s' },
      },
    },
  });
  const dirs: SoakDirs = {
    fs: join(env.base, 'fs'),
    blk: join(env.base, 'blk'),
    extra: join(env.base, 'extra'),
    spare: join(env.base, 'spare'),
  };
  const allDirs = [dirs.fs, dirs.blk, dirs.extra, dirs.spare];
  for (const dir of allDirs) mkdirSync(dir, { recursive: true });
  const checkerSeen = new Map<Violation, number>();
  const checker = startInvariantChecker({
    listPersistentVolumes: async () => (await env.core.listPersistentVolume()).items,
    node: env.node.name,
    discoveryDirs: () => allDirs,
    onViolation: (v) => {
      checkerSeen.set(v, Date.now());
      log(`data-safety invariant violated: ${v.message}`);
    },
  });
  const agentLogs = new AgentLogKeeper({
    podLogsDir: env.node.podLogsDir,
    namespace: CHART_NS,
    keepPod: (name) => name.startsWith(`${CHART_FULLNAME}-`) || name.startsWith('cleanup-'),
    outDir: options.logsDir ?? join(env.base, 'agent-logs'),
  });
  const world = new SoakWorld(env, dirs, checker, started, INITIAL_MODEL);
  const controllerArgs = {
    namespace: CHART_NS,
    kubeconfig: env.plane.kubeconfigPath,
    logDir: env.base,
    leases: env.leases,
  };
  const rollout = new ControllerReplicas({
    ...controllerArgs,
    leaseName: `${CHART_FULLNAME}-rollout-controller`,
    args: [
      'rollout',
      'controller',
      `--config-map=${CHART_FULLNAME}-config`,
      `--namespace=${CHART_NS}`,
      `--status-name=${CHART_FULLNAME}`,
      '--canary-count=1',
      '--waves=100%',
      '--bake-time=0s',
      '--progress-deadline=2m',
      '--on-halt=revert',
      '--listen-address=',
    ],
  });
  const nodeCleanup = new ControllerReplicas({
    ...controllerArgs,
    leaseName: `${CHART_FULLNAME}-node-cleanup`,
    args: [
      'node-cleanup',
      '--storageclass-names=fs-disks,blk-disks,extra-disks',
      '--pvc-deletion-delay=60s',
      '--stale-pv-discovery-interval=10s',
      '--listen-address=',
    ],
  });
  const ctx: SoakContext = {
    world,
    cleanup: options.cleanup,
    random: seededRandom(options.seed ^ 0x5eed),
    seed: options.seed,
    rollout,
    nodeCleanup,
    baseData: {},
    recoveries: new Map(),
    slowRecoveries: [],
    log,
    agentLogs,
    checkerSeen,
  };
  return ctx;
}

/** Installs the chart, adds the first disks, starts the controllers; the config's base data. */
async function install(ctx: SoakContext): Promise<SoakContext> {
  const { world } = ctx;
  const { env } = world;
  addDisk(ctx, 'fs', 'ext4');
  addDisk(ctx, 'fs', 'ext4');
  addDisk(ctx, 'blk', 'block');
  addDisk(ctx, 'extra', 'tmpfs');
  const values = env.valuesWith(chartValues(world.dirs));
  // The directory of the class the soak's edits add (not in the chart's classes): mounted as the
  // chart mounts a class's, through additionalVolumes.
  const list = (key: string): unknown[] => (Array.isArray(values[key]) ? (values[key] as unknown[]) : []);
  values['additionalVolumes'] = [
    ...list('additionalVolumes'),
    { name: 'spare-disks', hostPath: { path: world.dirs.spare } },
  ];
  values['additionalVolumeMounts'] = [
    ...list('additionalVolumeMounts'),
    { name: 'spare-disks', mountPath: world.dirs.spare, mountPropagation: 'HostToContainer' },
  ];
  env.helm('install', values);
  // the added class's StorageClass, as an operator creates it with the class
  await env.storage.createStorageClass({
    body: {
      metadata: { name: 'spare-disks' },
      provisioner: 'kubernetes.io/no-provisioner',
      volumeBindingMode: 'WaitForFirstConsumer',
    },
  });
  const data = await env.configData();
  const hash = configHash(data);
  if (hash !== undefined) world.written.set(hash, 'the chart install');
  await env.agentPod('the agent Ready after the install', isReady);
  ctx.rollout.start();
  ctx.nodeCleanup.start();
  const withBase: SoakContext = { ...ctx, baseData: data };
  const first = await writeModel(withBase, world.model);
  if (first !== undefined) await expectApplied(withBase, first, 'the soak config');
  return withBase;
}

/** The chart upgraded to staged rollout (a new agent pod); edits go through the controller from now on. */
async function switchToStaged(ctx: SoakContext): Promise<void> {
  // The chart's controller Deployment stays without pods (no deployment controller here): the
  // soak's host replicas play it.
  const { env } = ctx.world;
  const before = (await env.agentPods())[0]?.metadata?.uid;
  env.helm('upgrade', {}, ['stagedRollout.enabled=true', 'stagedRollout.bakeTime=0s', 'stagedRollout.waves=100%']);
  // Helm's three-way merge puts the chart's keys back in the ConfigMap and keeps the keys only
  // the soak wrote (labelsForPV): a config of its own, which the old pod may apply.
  const merged = configHash(await env.configData());
  if (merged !== undefined) ctx.world.written.set(merged, 'the chart upgrade merged with the soak edits');
  await env.agentPod('the agent on staged rollout', (p) => isReady(p) && p.metadata?.uid !== before);
  await env.leaseWhen('the staged source', (a) => (a[`${STATE}source`] ?? '').endsWith('(staged)'), 120_000);
  ctx.world.source = 'staged';
  // the soak's own config again, now as a rollout
  const hash = await writeModel(ctx, ctx.world.model);
  if (hash !== undefined) await expectApplied(ctx, hash, 'the soak config after the switch');
}

async function runStep(ctx: SoakContext, kind: StepKind, errors: string[]): Promise<void> {
  const t0 = Date.now();
  ctx.world.step = kind;
  try {
    const note = isFault(kind) ? await FAULTS[kind](ctx) : await CHORES[kind](ctx);
    ctx.log(
      `[${String(Math.round((Date.now() - ctx.world.started) / 1000))}s] ${kind} (${String(Date.now() - t0)} ms): ${note}`,
    );
  } catch (error) {
    const message = `${kind}: ${error instanceof Error ? error.message : String(error)}`;
    errors.push(message);
    ctx.log(`[${String(Math.round((Date.now() - ctx.world.started) / 1000))}s] step failed: ${message}`);
    ctx.world.env.proxy.setMode({ kind: 'pass' });
  }
}

/** Runs the soak; always stops what it started (the caller's Cleanup undoes the mounts and loops). */
export async function runSoak(options: SoakOptions): Promise<SoakReport> {
  const started = Date.now();
  let ctx = await setUp(options, started);
  const monitors = new AbortController();
  const errors: string[] = [];
  const faults: Partial<Record<FaultKind, number>> = {};
  const chores: Record<string, number> = {};
  let steps = 0;
  let monitoring: Promise<void> = Promise.resolve();
  // from the install on: its agent's first lines too
  const keeping = ctx.agentLogs.run(monitors.signal);
  try {
    ctx = await install(ctx);
    monitoring = ctx.world.monitor(monitors.signal);
    const schedule = soakSchedule({ seed: options.seed, choresPerFault: options.choresPerFault ?? 3 });
    const covered = (): boolean => FAULT_KINDS.every((k) => (faults[k] ?? 0) > 0);
    // the time runs from the install on (the node and the plane take a minute to start)
    const soakStart = Date.now();
    const deadline = soakStart + options.durationMs;
    let staged = false;
    while (Date.now() < deadline || (options.coverEveryFault === true && !covered())) {
      if (!staged && Date.now() > soakStart + options.durationMs / 2) {
        staged = true;
        await runStep(ctx, 'claim', errors);
        await switchToStaged(ctx).catch((e: unknown) => errors.push(`switch to staged rollout: ${String(e)}`));
      }
      const kind = schedule.next().value;
      await runStep(ctx, kind, errors);
      steps += 1;
      if (isFault(kind)) faults[kind] = (faults[kind] ?? 0) + 1;
      else chores[kind] = (chores[kind] ?? 0) + 1;
    }
    return await finish(ctx, { started, steps, faults, chores, errors, monitors, monitoring });
  } finally {
    monitors.abort();
    await monitoring;
    await keeping;
    await ctx.rollout.stop();
    await ctx.nodeCleanup.stop();
    await ctx.world.checker.stop();
    await ctx.world.env.stop();
  }
}

interface Tally {
  readonly started: number;
  readonly steps: number;
  readonly faults: Partial<Record<FaultKind, number>>;
  readonly chores: Record<string, number>;
  readonly errors: string[];
  readonly monitors: AbortController;
  readonly monitoring: Promise<void>;
}

/** Waits for the releases still pending (bounded by the monitors' own bound), then reports. */
async function finish(ctx: SoakContext, tally: Tally): Promise<SoakReport> {
  const { world } = ctx;
  const until = Date.now() + 200_000;
  while (world.releases.length > 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 500));
  tally.monitors.abort();
  await tally.monitoring;
  const checker = await world.checker.stop();
  ctx.agentLogs.sweep();
  const found: SoakViolation[] = [
    ...world.violations,
    ...checker.violations.map((v) => ({
      rule: `checker:${v.rule}`,
      message: v.message,
      at: (ctx.checkerSeen.get(v) ?? Date.now()) - tally.started,
      step: 'checker',
    })),
  ];
  const violations = found.map((v) => ({
    ...v,
    agentLog: violationExcerpt(ctx.agentLogs, tally.started + v.at, v.message),
  }));
  return {
    seed: ctx.seed,
    durationMs: Date.now() - tally.started,
    steps: tally.steps,
    faults: tally.faults,
    chores: tally.chores,
    counts: world.counts,
    recoveries: Object.fromEntries(ctx.recoveries),
    slowRecoveries: ctx.slowRecoveries,
    republishMs: world.republishMs,
    violations,
    stepErrors: tally.errors,
    memory: world.memory,
    checker: describeReport(checker),
    controllerExits: ctx.rollout.exits + ctx.nodeCleanup.exits,
    agentLogs: ctx.agentLogs.kept,
    livenessKills: livenessKills(readFileSync(world.env.node.logs.kubelet, 'utf8'), CHART_NS, `${CHART_FULLNAME}-`),
  };
}

/** A violation and the kept agent log lines of its moment. */
function describeViolation(v: SoakViolation): string {
  const head = `\n- [${String(Math.round(v.at / 1000))}s, ${v.step}] ${v.rule}: ${v.message}`;
  const lines = v.agentLog ?? [];
  if (lines.length === 0) return `${head}\n  agent log: no kept line of its moment`;
  return `${head}\n  agent log of its moment:\n${lines.map((l) => `    ${l}`).join('\n')}`;
}

const median = (values: readonly number[]): number =>
  [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? NaN;

/** The report as text: the seed first (it replays the run), then what ran and what was found. */
export function describeSoak(report: SoakReport): string {
  const mib = (b: number): string => `${(b / 1024 / 1024).toFixed(1)} MiB`;
  const rss = report.memory.map((m) => m.rssBytes);
  const lines = [
    `seed ${String(report.seed)}, ${String(Math.round(report.durationMs / 1000))} s, ${String(report.steps)} steps`,
    `faults: ${JSON.stringify(report.faults)}`,
    `chores: ${JSON.stringify(report.chores)}`,
    `counts: ${JSON.stringify(report.counts)}; controller replicas restarted ${String(report.controllerExits)}`,
    `recovery ms by fault (median/max): ${Object.entries(report.recoveries)
      .map(([k, v]) => `${k} ${String(median(v))}/${String(Math.max(...v))}`)
      .join(', ')}`,
    `slow recoveries (over ${String(SLOW_RECOVERY_MS)} ms): ${String(report.slowRecoveries.length)}${report.slowRecoveries
      .map(
        (r) =>
          `\n- ${r.kind}: Ready after ${String(r.readyMs)} ms, then the PV after ${String(r.publishMs)} ms; pod ${r.pod}\n  agent log:\n${r.agentLog
            .trimEnd()
            .split('\n')
            .map((l) => `    ${l}`)
            .join('\n')}`,
      )
      .join('')}`,
    `claim deleted → republished ms (median/max): ${String(median(report.republishMs))}/${String(Math.max(...report.republishMs))}`,
    `agent RSS: ${rss.length > 0 ? `first ${mib(rss[0] ?? 0)}, max ${mib(Math.max(...rss))}, last ${mib(rss.at(-1) ?? 0)} (${String(rss.length)} samples)` : 'no sample'}`,
    `checker: ${report.checker}`,
    `agent logs kept: ${report.agentLogs.dir} (${String(report.agentLogs.files)} files, ${mib(report.agentLogs.bytes)}${report.agentLogs.droppedBytes > 0 ? `, ${mib(report.agentLogs.droppedBytes)} over the bound not kept` : ''}${report.agentLogs.errors > 0 ? `, ${String(report.agentLogs.errors)} sweeps failed: ${report.agentLogs.lastError ?? ''}` : ''})`,
    `liveness restarts by the kubelet (${String(report.livenessKills.length)}): ${report.livenessKills.join(', ')}`,
    `violations (${String(report.violations.length)}): ${report.violations.map(describeViolation).join('')}`,
    `step errors (${String(report.stepErrors.length)}): ${report.stepErrors.map((e) => `\n- ${e}`).join('')}`,
  ];
  return lines.join('\n');
}
