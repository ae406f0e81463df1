// Text, JSON and YAML renderings of simulate's plans and scenario reports. JSON (and YAML, the same
// document) is a documented contract: docs/simulate.md, docs/schemas/simulate.v1.schema.json.
import { stringify } from 'yaml';
import { issueToJson } from '../core/errors.js';
import type { IssueJson } from '../core/errors.js';
import { ROUTINE_SKIPS } from '../core/discovery/plan.js';
import type { SkippedEntry } from '../core/discovery/plan.js';
import type { PassPlan, PlannedCleanup, PlannedCreate, SimulationPlan } from '../core/simulate/plan.js';
import type { FinalRollout, ScenarioReport, StepReport } from '../core/simulate/report.js';
import { describePolicy } from '../core/staged-rollout/policy.js';
import { changeToJson } from './diff-config.js';
import type { ChangeJson } from './diff-config.js';
import { deviceDeltaJson, deviceDeltaLines, deviceRows, devicesJson, deviceSummaryLine } from './simulate-devices.js';
import type { PlanDevicesJson } from './simulate-devices.js';
import { actionJson, describeAction, stepSummary, virtualTime } from './simulate-timeline.js';
import type { ActionJson } from './simulate-timeline.js';
import { painter, plural, shortHash } from './text.js';
import type { Painter } from './text.js';

export const SIMULATE_FORMAT_VERSION = 1;

// ---- JSON: plan -------------------------------------------------------------------------------

/** A PV the plan creates: the plan's fields, with the class as `storageClass`. */
export type PlanCreateJson = Omit<PlannedCreate, 'className' | 'detectedMode'> & { readonly storageClass: string };

/** A cleanup the plan runs (or a PV it keeps): the plan's fields, with the class as `storageClass`. */
export type PlanCleanupJson = Omit<PlannedCleanup, 'className'> & { readonly storageClass: string };

export interface PlanSkipJson {
  readonly storageClass: string;
  readonly entry: string;
  readonly path: string;
  readonly reason: string;
  readonly message: string;
  readonly routine: boolean;
  readonly pv?: string;
}

export interface PassPlanJson {
  readonly config: PassPlan['config'];
  readonly entries: number;
  readonly create: readonly PlanCreateJson[];
  readonly cleanups: readonly PlanCleanupJson[];
  readonly skipped: readonly PlanSkipJson[];
  readonly classProblems: readonly { readonly storageClass: string; readonly message: string }[];
  readonly orphaned: readonly {
    readonly pv: string;
    readonly storageClass: string;
    readonly hostPath: string;
    readonly phase: string;
    readonly reason: string;
    readonly message: string;
  }[];
  readonly existing: readonly {
    readonly pv: string;
    readonly storageClass: string;
    readonly hostPath: string;
    readonly phase: string;
    readonly capacity: string;
  }[];
  readonly adopt: readonly string[];
  readonly writes: readonly {
    readonly verb: string;
    readonly resource: string;
    readonly name: string;
    readonly namespace?: string;
  }[];
  readonly events: readonly {
    readonly type: string;
    readonly reason: string;
    readonly message: string;
    readonly object: string;
  }[];
  readonly summary: {
    readonly create: number;
    readonly createBytes: number;
    readonly clean: number;
    readonly delete: number;
    readonly kept: number;
    readonly failing: number;
    readonly orphaned: number;
    readonly skipped: number;
    readonly classProblems: number;
  };
  /** Disks by rule: absent when the config has no device rules. */
  readonly devices?: PlanDevicesJson;
}

export interface SimulatePlanJson extends PassPlanJson {
  readonly formatVersion: typeof SIMULATE_FORMAT_VERSION;
  readonly kind: 'plan';
  readonly readOnly: true;
  readonly node: SimulationPlan['node'];
  readonly cluster: SimulationPlan['cluster'];
  readonly namespace: string;
  readonly jobImage?: string;
  readonly reload?: {
    readonly from: PassPlan['config'];
    readonly changes: readonly ChangeJson[];
    readonly delta: {
      readonly create: {
        readonly added: readonly string[];
        readonly removed: readonly string[];
        readonly changed: readonly {
          readonly pv: string;
          readonly fields: readonly { readonly path: string; readonly before?: unknown; readonly after?: unknown }[];
        }[];
      };
      readonly cleanups: readonly {
        readonly pv: string;
        readonly before: string | null;
        readonly after: string | null;
      }[];
      readonly orphaned: { readonly added: readonly string[]; readonly removed: readonly string[] };
      readonly skipped: { readonly added: readonly PlanSkipJson[]; readonly removed: readonly PlanSkipJson[] };
      readonly classProblems: {
        readonly added: readonly { readonly storageClass: string; readonly message: string }[];
        readonly removed: readonly { readonly storageClass: string; readonly message: string }[];
      };
      /** Devices whose verdict differs: `state (class)`, null when no rule selects it (absent without rules). */
      readonly devices?: readonly {
        readonly device: string;
        readonly before: string | null;
        readonly after: string | null;
      }[];
    };
    /** The plan under the `from` config, for comparison. */
    readonly before: PassPlanJson;
  };
  readonly warnings: readonly IssueJson[];
  readonly exitCode: 0;
}

function skipJson(s: SkippedEntry): PlanSkipJson {
  return {
    storageClass: s.className,
    entry: s.entry,
    path: s.path,
    reason: s.reason,
    message: s.message,
    routine: ROUTINE_SKIPS.has(s.reason),
    ...(s.persistentVolume !== undefined ? { pv: s.persistentVolume } : {}),
  };
}

function cleanupLabel(c: PlannedCleanup | undefined): string | null {
  if (!c) return null;
  return c.method !== undefined ? `${c.action} (${c.method === 'job' ? 'Job' : 'in-process'})` : c.action;
}

export function toPassPlanJson(p: PassPlan): PassPlanJson {
  const skipped = p.skipped.map(skipJson);
  return {
    config: p.config,
    entries: p.entries,
    create: p.create.map((c) => ({
      pv: c.pv,
      storageClass: c.className,
      entry: c.entry,
      path: c.path,
      hostPath: c.hostPath,
      capacity: c.capacity,
      capacityBytes: c.capacityBytes,
      volumeMode: c.volumeMode,
      manifest: c.manifest,
    })),
    cleanups: p.cleanups.map((c) => ({
      pv: c.pv,
      storageClass: c.className,
      hostPath: c.hostPath,
      action: c.action,
      ...(c.method !== undefined ? { method: c.method } : {}),
      ...(c.mode !== undefined ? { mode: c.mode } : {}),
      ...(c.path !== undefined ? { path: c.path } : {}),
      ...(c.command !== undefined ? { command: c.command } : {}),
      ...(c.job !== undefined ? { job: c.job } : {}),
      deleteAfter: c.deleteAfter,
      message: c.message,
    })),
    skipped,
    classProblems: p.classProblems.map((c) => ({ storageClass: c.className, message: c.message })),
    orphaned: p.orphaned.map((o) => ({
      pv: o.pv,
      storageClass: o.className,
      hostPath: o.hostPath,
      phase: o.phase,
      reason: o.reason,
      message: o.message,
    })),
    existing: p.existing.map((e) => ({
      pv: e.pv,
      storageClass: e.className,
      hostPath: e.hostPath,
      phase: e.phase,
      capacity: e.capacity,
    })),
    adopt: p.adopt,
    writes: p.writes.map((w) => ({
      verb: w.verb,
      resource: w.resource,
      name: w.name,
      ...(w.namespace !== undefined ? { namespace: w.namespace } : {}),
    })),
    events: p.events.map((e) => ({
      type: e.type,
      reason: e.reason,
      message: e.message,
      object: `${e.object.kind ?? '?'}/${e.object.name ?? '?'}`,
    })),
    summary: {
      create: p.create.length,
      createBytes: p.create.reduce((n, c) => n + c.capacityBytes, 0),
      clean: p.cleanups.filter((c) => c.action === 'clean' || c.action === 'follow-job').length,
      delete: p.cleanups.filter((c) => c.deleteAfter).length,
      kept: p.cleanups.filter((c) => c.action === 'retain' || c.action === 'unsupported-policy').length,
      failing: p.cleanups.filter((c) => c.action === 'fail').length,
      orphaned: p.orphaned.length,
      skipped: skipped.filter((s) => !s.routine).length,
      classProblems: p.classProblems.length,
    },
    ...(p.devices !== undefined ? { devices: devicesJson(p.devices) } : {}),
  };
}

export function toPlanJson(s: SimulationPlan): SimulatePlanJson {
  const r = s.reload;
  return {
    formatVersion: SIMULATE_FORMAT_VERSION,
    kind: 'plan',
    readOnly: true,
    node: s.node,
    cluster: s.cluster,
    namespace: s.namespace,
    ...(s.jobImage !== undefined ? { jobImage: s.jobImage } : {}),
    ...toPassPlanJson(s.plan),
    ...(r
      ? {
          reload: {
            from: r.from,
            changes: r.changes.map(changeToJson),
            delta: {
              create: {
                added: r.delta.create.added.map((c) => c.pv),
                removed: r.delta.create.removed.map((c) => c.pv),
                changed: r.delta.create.changed.map((c) => ({
                  pv: c.pv,
                  fields: c.fields.map((f) => ({
                    path: f.path,
                    ...(f.before !== undefined ? { before: f.before } : {}),
                    ...(f.after !== undefined ? { after: f.after } : {}),
                  })),
                })),
              },
              cleanups: r.delta.cleanups.map((c) => ({
                pv: c.pv,
                before: cleanupLabel(c.before),
                after: cleanupLabel(c.after),
              })),
              orphaned: {
                added: r.delta.orphaned.added.map((o) => o.pv),
                removed: r.delta.orphaned.removed.map((o) => o.pv),
              },
              skipped: {
                added: r.delta.skipped.added.map(skipJson),
                removed: r.delta.skipped.removed.map(skipJson),
              },
              classProblems: {
                added: r.delta.classProblems.added.map((c) => ({ storageClass: c.className, message: c.message })),
                removed: r.delta.classProblems.removed.map((c) => ({ storageClass: c.className, message: c.message })),
              },
              ...(r.delta.devices !== undefined ? { devices: deviceDeltaJson(r.delta.devices) } : {}),
            },
            before: toPassPlanJson(r.before),
          },
        }
      : {}),
    warnings: s.warnings.map(issueToJson),
    exitCode: 0,
  };
}

// ---- JSON: scenario ---------------------------------------------------------------------------

export interface ScenarioJson {
  readonly formatVersion: typeof SIMULATE_FORMAT_VERSION;
  readonly kind: 'scenario';
  readonly scenario: { readonly name: string; readonly file: string; readonly description?: string };
  readonly node: string;
  readonly settings: Readonly<Record<string, number | string | boolean>>;
  /** A staged scenario: the controller's policy, the operator's ConfigMap and the fleet. */
  readonly stagedRollout?: StagedRolloutJson;
  readonly steps: readonly {
    readonly index: number;
    readonly type: string;
    readonly at: number;
    readonly time: string;
    readonly summary: string;
    readonly note?: string;
    readonly actions: readonly ActionJson[];
    readonly expectations: readonly {
      readonly key: string;
      readonly expected: unknown;
      readonly actual: unknown;
      readonly ok: boolean;
    }[];
  }[];
  readonly final: ScenarioReport['final'];
  readonly result: { readonly passed: boolean; readonly expectations: number; readonly failed: number };
  readonly exitCode: 0 | 1;
}

export interface StagedRolloutJson {
  readonly configMap: string;
  readonly canary: { readonly selector: string } | { readonly count: number };
  /** Cumulative reach of each wave after the canary: `10%` or a node count. */
  readonly waves: readonly string[];
  readonly bakeMs: number;
  readonly progressDeadlineMs: number;
  readonly onHalt: string;
  readonly fleet: readonly { readonly node: string; readonly agent: 'real' | 'stand-in' }[];
}

function stagedRolloutJson(staged: NonNullable<ScenarioReport['stagedRollout']>): StagedRolloutJson {
  const p = staged.policy;
  return {
    configMap: staged.configMap,
    canary: p.canary.kind === 'selector' ? { selector: p.canary.selector } : { count: p.canary.count },
    waves: p.waves.map((w) => (w.kind === 'percent' ? `${String(w.value)}%` : String(w.value))),
    bakeMs: p.bakeMs,
    progressDeadlineMs: p.progressDeadlineMs,
    onHalt: p.onHalt,
    fleet: staged.fleet,
  };
}

export function scenarioExitCode(r: ScenarioReport): 0 | 1 {
  return r.passed ? 0 : 1;
}

export function toScenarioJson(r: ScenarioReport): ScenarioJson {
  const s = r.settings;
  return {
    formatVersion: SIMULATE_FORMAT_VERSION,
    kind: 'scenario',
    scenario: { name: r.name, file: r.file, ...(r.description !== undefined ? { description: r.description } : {}) },
    node: r.node,
    settings: {
      discoveryPeriodMs: s.discoveryPeriodMs,
      changePollMs: s.changePollMs,
      mountGraceMs: s.mountGraceMs,
      minPassIntervalMs: s.minPassIntervalMs,
      reactionMs: s.reactionMs,
      jobImage: s.jobImage,
      namespace: s.namespace,
      cleanupConcurrency: s.cleanupConcurrency,
      cleanupBackoffMs: s.cleanupBackoffMs,
      createStorageClasses: s.createStorageClasses,
      createDiscoveryDirectories: s.createDiscoveryDirectories,
      ...(r.stagedRollout !== undefined ? { statusHeartbeatMs: s.statusHeartbeatMs } : {}),
    },
    ...(r.stagedRollout !== undefined ? { stagedRollout: stagedRolloutJson(r.stagedRollout) } : {}),
    steps: r.steps.map((step) => ({
      index: step.index,
      type: step.type,
      at: step.at,
      time: virtualTime(step.at),
      summary: stepSummary(step),
      ...(step.note !== undefined ? { note: step.note } : {}),
      actions: step.actions.map(actionJson),
      expectations: step.expectations.map((e) => ({ ...e })),
    })),
    final: r.final,
    result: { passed: r.passed, expectations: r.expectations.total, failed: r.expectations.failed },
    exitCode: scenarioExitCode(r),
  };
}

/** `-o yaml`: the JSON document as YAML (block style, full manifests). */
export function toYaml(value: unknown): string {
  return stringify(value, { lineWidth: 0, aliasDuplicateObjects: false });
}

// ---- text ---------------------------------------------------------------------------------------

function table(rows: readonly (readonly string[])[], indent = '  '): string[] {
  const widths: number[] = [];
  for (const row of rows) row.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, cell.length)));
  return rows.map((row) =>
    `${indent}${row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i] ?? 0))).join('  ')}`.trimEnd(),
  );
}

function passPlanLines(p: PassPlan, paint: Painter): string[] {
  const out: string[] = [];
  const section = (title: string, n: number): void => {
    out.push('', paint.bold(`${title} (${n}):`));
  };
  if (p.devices !== undefined) {
    // The pass's first step: the links it makes are what discovery publishes below.
    section('Devices selected by device rules', p.devices.devices.length);
    if (p.devices.problem !== undefined) out.push(`  ${paint.red('!')} ${p.devices.problem}`);
    else if (p.devices.devices.length === 0) out.push('  none');
    out.push(...table(deviceRows(p.devices, paint)));
  }
  section('PersistentVolumes to create', p.create.length);
  if (p.create.length === 0) out.push('  none');
  out.push(...table(p.create.map((c) => [paint.green('+'), c.pv, c.className, c.capacity, c.volumeMode, c.hostPath])));
  section('Released PVs: cleanup and deletion', p.cleanups.length);
  if (p.cleanups.length === 0) out.push('  none');
  const mark: Record<PlannedCleanup['action'], string> = {
    clean: paint.yellow('~'),
    'follow-job': paint.yellow('~'),
    delete: paint.red('-'),
    retain: '=',
    'unsupported-policy': '=',
    orphan: paint.red('!'),
    fail: paint.red('!'),
  };
  out.push(...table(p.cleanups.map((c) => [mark[c.action], c.pv, c.className, c.action, c.message])));
  const visible = p.skipped.filter((s) => !ROUTINE_SKIPS.has(s.reason));
  section('Entries skipped', visible.length);
  if (visible.length === 0) out.push('  none');
  out.push(...table(visible.map((s) => ['-', `${s.className}/${s.entry}`, s.reason, s.message])));
  const routine = p.skipped.length - visible.length;
  const published = p.skipped.filter((s) => s.reason === 'already-published').length;
  if (routine > 0)
    out.push(
      paint.dim(
        `  (and ${plural(routine, 'routine skip')}: ${published} already published, ${routine - published} not matching namePattern)`,
      ),
    );
  if (p.classProblems.length > 0) {
    section('Storage classes that cannot be discovered', p.classProblems.length);
    out.push(...table(p.classProblems.map((c) => [paint.red('!'), c.className, c.message])));
  }
  section('Orphaned PVs (class or path no longer configured, or volume gone)', p.orphaned.length);
  if (p.orphaned.length === 0) out.push('  none');
  out.push(...table(p.orphaned.map((o) => [paint.red('!'), o.pv, o.className || '-', o.phase, o.reason, o.message])));
  if (p.adopt.length > 0) {
    section("PVs of this node to label as the agent's (adoption)", p.adopt.length);
    out.push(...p.adopt.map((n) => `  ${n}`));
  }
  section('API writes the agent would make (none was sent)', p.writes.length);
  if (p.writes.length === 0) out.push('  none');
  out.push(
    ...table(
      p.writes.map((w) => [
        w.verb,
        `${w.resource}/${w.name}`,
        w.namespace !== undefined ? `(namespace ${w.namespace})` : '',
      ]),
    ),
  );
  return out;
}

function summaryLine(p: PassPlan): string {
  const j = toPassPlanJson(p).summary;
  return `Summary: ${j.create} to create, ${j.clean} to clean, ${j.delete} to delete after cleanup, ${j.kept} kept, ${j.failing} failing, ${j.orphaned} orphaned, ${j.skipped} skipped${j.classProblems > 0 ? `, ${plural(j.classProblems, 'class problem')}` : ''}.`;
}

export function renderPlanText(s: SimulationPlan, options: { color: boolean }): string {
  const paint = painter(options.color);
  const out: string[] = [];
  out.push(
    paint.bold(`Simulated pass of a freshly started agent on node ${s.node.name}: nothing was written.`),
    `  config:  ${s.plan.config.path} (${shortHash(s.plan.config.hash)})`,
    `  node:    ${s.node.source === 'fixture' ? `fixture ${s.node.file ?? ''}` : 'live (this machine, read-only)'}`,
    `  cluster: ${s.cluster.source === 'fixture' ? `fixture ${s.cluster.description}` : `live ${s.cluster.description} (read-only)`}`,
    `  entries examined: ${s.plan.entries}; PVs of this node: ${s.plan.existing.length}`,
  );
  out.push(...passPlanLines(s.plan, paint));
  const r = s.reload;
  if (r) {
    out.push('', paint.bold(`Reload from ${r.from.path} (${shortHash(r.from.hash)}) to ${s.plan.config.path}:`));
    if (r.changes.length === 0) out.push('  no config changes');
    for (const ch of r.changes) out.push(`  ${ch.path}  [${ch.effect.impact}] ${ch.effect.summary}`);
    const d = r.delta;
    const lines: string[] = [];
    for (const c of d.create.added)
      lines.push(
        `  ${paint.green('+')} creates ${c.pv} (${c.className}/${c.entry}, ${c.capacity}) only with the new config`,
      );
    for (const c of d.create.removed)
      lines.push(`  ${paint.red('-')} no longer creates ${c.pv} (${c.className}/${c.entry})`);
    for (const c of d.create.changed)
      lines.push(
        `  ${paint.yellow('~')} ${c.pv} is created differently: ${c.fields.map((f) => `${f.path}: ${JSON.stringify(f.before ?? null)} -> ${JSON.stringify(f.after ?? null)}`).join('; ')}`,
      );
    for (const c of d.cleanups)
      lines.push(
        `  ${paint.yellow('~')} cleanup of ${c.pv}: ${cleanupLabel(c.before) ?? 'none'} -> ${cleanupLabel(c.after) ?? 'none'}`,
      );
    for (const o of d.orphaned.added) lines.push(`  ${paint.red('!')} orphans ${o.pv}: ${o.message}`);
    for (const o of d.orphaned.removed) lines.push(`  ${paint.green('+')} manages ${o.pv} again`);
    for (const x of d.skipped.added) lines.push(`  - now skips ${x.className}/${x.entry}: ${x.reason}`);
    for (const x of d.skipped.removed) lines.push(`  + no longer skips ${x.className}/${x.entry} (${x.reason})`);
    for (const c of d.classProblems.added) lines.push(`  ${paint.red('!')} class ${c.className}: ${c.message}`);
    for (const c of d.classProblems.removed) lines.push(`  + class ${c.className} no longer fails: ${c.message}`);
    lines.push(...deviceDeltaLines(d.devices, paint));
    out.push(
      '',
      'What changes on this node:',
      ...(lines.length > 0 ? lines : ['  nothing: both configs do the same here']),
    );
  }
  out.push('', summaryLine(s.plan));
  if (s.plan.devices !== undefined) out.push(deviceSummaryLine(s.plan.devices));
  return `${out.join('\n')}\n`;
}

function valueText(v: unknown): string {
  return typeof v === 'string' ? JSON.stringify(v) : JSON.stringify(v ?? null);
}

function stepTitle(step: StepReport): string {
  return step.index === 0 ? 'start' : `${step.index}. ${step.type}`;
}

/** The rollout at the end: its phase, each wave and who runs what. */
function rolloutLines(r: FinalRollout, paint: Painter): string[] {
  const out: string[] = [];
  const phase =
    r.phase === 'halted'
      ? paint.red('halted')
      : r.phase === 'complete'
        ? paint.green('complete')
        : r.phase === 'none'
          ? 'none yet'
          : r.phase;
  const halt =
    r.halt !== undefined
      ? `${r.phase === 'halted' ? '' : '; it had halted'} at ${r.halt.wave ?? 'its start'} (${r.halt.node !== '' ? `${r.halt.node}: ` : ''}${r.halt.reason})${r.reverted ? ', its nodes reverted to stable' : ''}`
      : '';
  const candidate = r.candidate !== undefined ? shortHash(r.candidate) : 'a config that does not parse';
  out.push(`Rollout of ${candidate} (stable ${shortHash(r.stable)}): ${phase}${halt}.`);
  const width = Math.max(0, ...r.waves.map((w) => w.name.length));
  const configOf = new Map(r.nodes.map((n) => [n.node, n]));
  for (const w of r.waves) {
    const nodes = w.nodes.map((n) => {
      const node = configOf.get(n);
      const config = node === undefined ? 'unknown' : node.config;
      return `${n} ${config}${node?.stale === true ? ' (stale)' : ''}`;
    });
    out.push(`  ${w.name.padEnd(width)}  ${w.open ? 'opened    ' : 'not opened'}  ${nodes.join(', ')}`);
  }
  const on = (config: string): string => {
    const names = r.nodes.filter((n) => n.config === config).map((n) => n.node);
    return names.length > 0 ? names.join(', ') : 'none';
  };
  out.push(
    r.candidate !== undefined && r.candidate !== r.stable
      ? `  on the candidate: ${on('candidate')}; on stable: ${on('stable')}`
      : `  on stable: ${on('stable')}`,
  );
  return out;
}

export function renderScenarioText(r: ScenarioReport, options: { color: boolean }): string {
  const paint = painter(options.color);
  const out: string[] = [];
  const s = r.settings;
  out.push(paint.bold(`Scenario: ${r.name}`) + paint.dim(`  (${r.file})`));
  if (r.description !== undefined)
    out.push(
      ...r.description
        .trim()
        .split('\n')
        .map((l) => `  ${l}`),
    );
  out.push(
    paint.dim(
      `  node ${r.node} · discovery every ${virtualTime(s.discoveryPeriodMs).slice(1)} · ${virtualTime(s.reactionMs).slice(1)} to react after each step · virtual time, the real agent code`,
    ),
  );
  if (r.stagedRollout !== undefined) {
    const fleet = r.stagedRollout.fleet;
    out.push(
      paint.dim(
        `  staged rollout: ${describePolicy(r.stagedRollout.policy)} · ${plural(fleet.length, 'node')}: ${r.node} runs the real agent, ${plural(fleet.length - 1, 'stand-in agent')} on the others`,
      ),
    );
  }
  out.push('');
  const width = Math.max(6, ...r.steps.flatMap((st) => [st, ...st.actions].map((x) => virtualTime(x.at).length)));
  const pad = ' '.repeat(width);
  for (const step of r.steps) {
    out.push(`${paint.cyan(virtualTime(step.at).padEnd(width))}  ${paint.bold(stepTitle(step))}: ${stepSummary(step)}`);
    if (step.note !== undefined)
      out.push(
        ...step.note
          .trim()
          .split('\n')
          .map((l) => `${pad}    ${paint.dim(`# ${l}`)}`),
      );
    for (const a of step.actions) {
      const { summary, details } = describeAction(a);
      out.push(`${pad}    ${paint.dim(virtualTime(a.at).padEnd(width))}  ${summary}`);
      for (const d of details ?? []) out.push(`${pad}    ${' '.repeat(width)}    ${d}`);
    }
    for (const e of step.expectations) {
      out.push(
        e.ok
          ? `${pad}    ${paint.green('ok')}    ${e.key} = ${valueText(e.expected)}`
          : `${pad}    ${paint.red('FAIL')}  ${e.key}: expected ${valueText(e.expected)}, got ${valueText(e.actual)}`,
      );
    }
  }
  out.push('');
  const f = r.final;
  out.push(
    `At ${virtualTime(f.at)}: generation ${f.generation} serving ${shortHash(f.configHash)}; ${plural(f.persistentVolumes.length, 'PV')} (${f.persistentVolumes.map((p) => `${p.volume} ${p.phase}`).join(', ') || 'none'}).`,
  );
  if (f.rollout !== undefined) out.push(...rolloutLines(f.rollout, paint));
  const failures = r.steps.flatMap((st) => st.expectations.filter((e) => !e.ok).map((e) => ({ st, e })));
  if (r.expectations.total === 0) out.push('Result: no expectations to check.');
  else if (failures.length === 0)
    out.push(paint.green(`Result: all ${plural(r.expectations.total, 'expectation')} passed.`));
  else {
    out.push(paint.red(`Result: ${failures.length} of ${plural(r.expectations.total, 'expectation')} FAILED:`));
    for (const { st, e } of failures)
      out.push(`  step ${stepTitle(st)}: ${e.key}: expected ${valueText(e.expected)}, got ${valueText(e.actual)}`);
  }
  return `${out.join('\n')}\n`;
}
