// The `expect:` vocabulary of scenarios: small, checkable facts about the world after a step.
//
//   expect:
//     pvs: 3                                   # this node's PVs (not being deleted); or
//     pvs: { count: 3, Available: 2, Bound: 1 }  #   with counts per phase
//     pv: { volume: disk1, exists: true, fsType: ext4, phase: Available }   # one PV (or a list)
//     cleanups: { running: 0, failed: 1 }      # the agent's cleanup table now, by state
//     cleaned: { disk1: 1 }                    # cleanups started for a volume since the start (in-process + Jobs)
//     jobs: { count: 0, created: 1 }           # cleanup Jobs existing now / created since the start
//     reload: applied                          # outcome of the last reload
//     generation: 2                            # generation of the running agent
//     skipped: { disk3: not-a-mount-point }    # why the last pass skipped an entry (none: not skipped)
//     events: { VolumeFailedDelete: 1 }        # Kubernetes Events recorded since the start, by reason
//     quarantined: { disk1: identity-changed } # why the last pass held a Released PV back (none: it did not)
//     devices: { nvme1n1: linked, nvme3n1: signature }  # a device's verdict at the last pass (none: no rule selects it)
//   with a staged rollout (stagedRollout:):
//     rollout: halted                          # the rollout's phase; or
//     rollout: { phase: halted, opened: canary, haltedAt: canary, haltedNode: node-c, reverted: true }
//     nodesOnCandidate: [node-c]               # nodes whose status Lease reports the candidate applied (or a count)
//     nodesOnStable: 5                         # … the stable config
import type { Node } from 'yaml';
import { isScalar, isSeq } from 'yaml';
import { RELOAD_OUTCOMES } from '../agent/reload-types.js';
import type { ReloadOutcome } from '../agent/reload-types.js';
import type { CleanupState } from '../cleanup/table.js';
import { ROLLOUT_PHASES } from '../rollout-state/state.js';
import type { RolloutPhase } from '../rollout-state/state.js';
import { DEVICE_STATES } from './device-plan.js';
import type { Input } from './input.js';

export const EXPECT_KEYS = [
  'pvs',
  'pv',
  'cleanups',
  'cleaned',
  'jobs',
  'reload',
  'generation',
  'skipped',
  'events',
  'quarantined',
  'devices',
  'rollout',
  'nodesOnCandidate',
  'nodesOnStable',
] as const;
type ExpectKey = (typeof EXPECT_KEYS)[number];

/** The expectations only a staged scenario can check. */
const STAGED_EXPECT_KEYS: readonly string[] = ['rollout', 'nodesOnCandidate', 'nodesOnStable'];

/** A rollout's phase, or `none` (no rollout state written yet). */
export const ROLLOUT_PHASE_EXPECTATIONS = [...ROLLOUT_PHASES, 'none'] as const;
export type RolloutPhaseExpectation = RolloutPhase | 'none';
export const ROLLOUT_FIELDS = ['phase', 'opened', 'haltedAt', 'haltedNode', 'reverted'] as const;

export interface RolloutExpectation {
  readonly phase?: RolloutPhaseExpectation;
  /** The last wave opened (`canary`, `wave-1`, …), or `none`. */
  readonly opened?: string;
  /** The wave of the halt, or `none`. */
  readonly haltedAt?: string;
  /** The node that halted it, or `none`. */
  readonly haltedNode?: string;
  readonly reverted?: boolean;
}

/** Nodes by name (compared as a set), or how many. */
export type NodesExpectation = { readonly count: number } | { readonly nodes: readonly string[] };

/** Why the agent's last pass quarantined a volume's PV (docs/disk-identity.md), or `none`. */
export const QUARANTINE_EXPECTATIONS = ['identity-changed', 'node-rebuilt', 'none'] as const;
export type QuarantineExpectation = (typeof QUARANTINE_EXPECTATIONS)[number];

/** A device's verdict at the agent's last pass (disks by rule), or `none`: no rule selects it. */
export const DEVICE_EXPECTATIONS = [...DEVICE_STATES, 'none'] as const;

export const PV_PHASES = ['Pending', 'Available', 'Bound', 'Released', 'Failed'] as const;
export const PV_FIELDS = [
  'exists',
  'phase',
  'fsType',
  'capacity',
  'class',
  'volumeMode',
  'reclaimPolicy',
  'path',
] as const;
export type PvField = (typeof PV_FIELDS)[number];
const CLEANUP_STATES: readonly CleanupState[] = ['queued', 'running', 'succeeded', 'failed'];

export interface PvExpectation {
  readonly volume: string;
  readonly fields: Readonly<Partial<Record<PvField, string | boolean>>>;
}

export interface Expectations {
  readonly pvs?: { readonly count?: number; readonly phases: Readonly<Record<string, number>> };
  readonly pv: readonly PvExpectation[];
  readonly cleanups: Readonly<Partial<Record<CleanupState, number>>>;
  readonly cleaned: Readonly<Record<string, number>>;
  readonly jobs?: { readonly count?: number; readonly created?: number };
  readonly reload?: ReloadOutcome;
  readonly generation?: number;
  readonly skipped: Readonly<Record<string, string>>;
  readonly events: Readonly<Record<string, number>>;
  readonly quarantined: Readonly<Record<string, QuarantineExpectation>>;
  /** Kernel name → the state of its verdict (device-plan.ts DeviceState), or `none`. */
  readonly devices: Readonly<Record<string, string>>;
  readonly rollout?: RolloutExpectation;
  readonly nodesOnCandidate?: NodesExpectation;
  readonly nodesOnStable?: NodesExpectation;
}

export interface ExpectationResult {
  /** What was checked, e.g. `pv[disk1].fsType`. */
  readonly key: string;
  readonly expected: unknown;
  readonly actual: unknown;
  readonly ok: boolean;
}

function counts(input: Input, node: Node | null, path: string, keys?: readonly string[]): Record<string, number> {
  const out: Record<string, number> = {};
  const map = input.map(node, path);
  if (!map) return out;
  for (const p of input.pairs(map, path, keys)) {
    const n = input.integer(p.value, `${path}.${p.key}`, { min: 0 });
    if (n !== undefined) out[p.key] = n;
  }
  return out;
}

function readPv(input: Input, node: Node, path: string): PvExpectation | undefined {
  const map = input.map(node, path);
  if (!map) return undefined;
  const pairs = input.pairs(map, path, ['volume', ...PV_FIELDS]);
  const volume = input.string(input.get(map, 'volume'), `${path}.volume`, { required: true });
  const fields: Partial<Record<PvField, string | boolean>> = {};
  for (const p of pairs) {
    if (p.key === 'volume') continue;
    const key = p.key as PvField;
    if (key === 'exists') {
      const b = input.boolean(p.value, `${path}.exists`, true);
      if (b !== undefined) fields.exists = b;
    } else {
      const s =
        key === 'phase' ? input.oneOf(p.value, `${path}.phase`, PV_PHASES) : input.string(p.value, `${path}.${key}`);
      if (s !== undefined) fields[key] = s;
      else if (key === 'fsType' && p.value !== null && isScalar(p.value) && p.value.value === null) fields.fsType = '';
    }
  }
  if (volume === undefined) return undefined;
  return { volume, fields };
}

function readRollout(input: Input, node: Node | null, path: string): RolloutExpectation | undefined {
  if (node !== null && isScalar(node)) {
    const phase = input.oneOf(node, path, ROLLOUT_PHASE_EXPECTATIONS);
    return phase === undefined ? undefined : { phase };
  }
  const map = input.map(node, path);
  if (!map) return undefined;
  const out: { -readonly [K in keyof RolloutExpectation]: RolloutExpectation[K] } = {};
  for (const p of input.pairs(map, path, ROLLOUT_FIELDS)) {
    const at = `${path}.${p.key}`;
    switch (p.key) {
      case 'phase': {
        const phase = input.oneOf(p.value, at, ROLLOUT_PHASE_EXPECTATIONS);
        if (phase !== undefined) out.phase = phase;
        break;
      }
      case 'reverted': {
        const reverted = input.boolean(p.value, at, false);
        if (reverted !== undefined) out.reverted = reverted;
        break;
      }
      case 'opened':
      case 'haltedAt':
      case 'haltedNode': {
        const text = input.string(p.value, at, { required: true });
        if (text !== undefined) out[p.key] = text;
        break;
      }
    }
  }
  return out;
}

function readNodes(input: Input, node: Node | null, path: string): NodesExpectation | undefined {
  if (node !== null && isScalar(node) && typeof node.value === 'number') {
    const count = input.integer(node, path, { min: 0 });
    return count === undefined ? undefined : { count };
  }
  const items = input.list(node, path);
  if (!items) return undefined;
  const nodes: string[] = [];
  items.forEach((item, i) => {
    const name = input.string(item, `${path}[${String(i)}]`, { required: true });
    if (name !== undefined) nodes.push(name);
  });
  return { nodes: [...new Set(nodes)].sort() };
}

/** `{ nvme1n1: linked, nvme3n1: signature }`: a state per kernel name. */
function readDeviceStates(input: Input, node: Node | null, path: string): Record<string, string> {
  const out: Record<string, string> = {};
  const m = input.map(node, path);
  for (const p of m ? input.pairs(m, path) : []) {
    const state = input.oneOf(p.value, `${path}.${p.key}`, DEVICE_EXPECTATIONS);
    if (state !== undefined) out[p.key] = state;
  }
  return out;
}

/** The expectations as their keys are read: each key's reader sets its own field. */
interface ExpectationsDraft {
  pvs: Expectations['pvs'];
  readonly pv: PvExpectation[];
  cleanups: Expectations['cleanups'];
  cleaned: Record<string, number>;
  jobs: Expectations['jobs'];
  reload: ReloadOutcome | undefined;
  generation: number | undefined;
  readonly skipped: Record<string, string>;
  events: Record<string, number>;
  readonly quarantined: Record<string, QuarantineExpectation>;
  readonly devices: Record<string, string>;
  rollout: RolloutExpectation | undefined;
  nodesOnCandidate: NodesExpectation | undefined;
  nodesOnStable: NodesExpectation | undefined;
}

/** What a key's reader gets: the value under the key, and its path for problems. */
interface ExpectArgs {
  readonly input: Input;
  readonly value: Node | null;
  readonly at: string;
}

type ExpectReader = (a: ExpectArgs, draft: ExpectationsDraft) => void;

/** `pvs: 3`, or `pvs: { count: 3, Available: 2, Bound: 1 }`. */
function readPvCounts({ input, value, at }: ExpectArgs, draft: ExpectationsDraft): void {
  if (value !== null && isScalar(value)) {
    const count = input.integer(value, at, { min: 0 });
    if (count !== undefined) draft.pvs = { count, phases: {} };
    return;
  }
  const { count, ...phases } = counts(input, value, at, ['count', ...PV_PHASES, 'Terminating']);
  draft.pvs = { ...(count !== undefined ? { count } : {}), phases };
}

/** `pv: { volume: disk1, … }`, or a list of them. */
function readPvs({ input, value, at }: ExpectArgs, draft: ExpectationsDraft): void {
  const many = value !== null && isSeq(value);
  const items = many ? (input.list(value, at) ?? []) : value !== null ? [value] : [];
  items.forEach((item, i) => {
    const one = readPv(input, item, many ? `${at}[${i}]` : at);
    if (one) draft.pv.push(one);
  });
}

/** `jobs: 0`, or `jobs: { count: 0, created: 1 }`. */
function readJobs({ input, value, at }: ExpectArgs, draft: ExpectationsDraft): void {
  if (value !== null && isScalar(value)) {
    const count = input.integer(value, at, { min: 0 });
    if (count !== undefined) draft.jobs = { count };
    return;
  }
  const c = counts(input, value, at, ['count', 'created']);
  draft.jobs = {
    ...(c['count'] !== undefined ? { count: c['count'] } : {}),
    ...(c['created'] !== undefined ? { created: c['created'] } : {}),
  };
}

/** `skipped: { disk3: not-a-mount-point }`: a reason per volume. */
function readSkipped({ input, value, at }: ExpectArgs, draft: ExpectationsDraft): void {
  const m = input.map(value, at);
  for (const p of m ? input.pairs(m, at) : []) {
    const reason = input.string(p.value, `${at}.${p.key}`, { required: true });
    if (reason !== undefined) draft.skipped[p.key] = reason;
  }
}

/** `quarantined: { disk1: identity-changed }`: a quarantine reason per volume. */
function readQuarantined({ input, value, at }: ExpectArgs, draft: ExpectationsDraft): void {
  const m = input.map(value, at);
  for (const p of m ? input.pairs(m, at) : []) {
    const reason = input.oneOf(p.value, `${at}.${p.key}`, QUARANTINE_EXPECTATIONS);
    if (reason !== undefined) draft.quarantined[p.key] = reason;
  }
}

/** Each expectation key's reader: the value under it into the expectations. */
const EXPECT_READERS: Readonly<Record<ExpectKey, ExpectReader>> = {
  pvs: readPvCounts,
  pv: readPvs,
  cleanups: ({ input, value, at }, draft) => {
    draft.cleanups = counts(input, value, at, CLEANUP_STATES);
  },
  cleaned: ({ input, value, at }, draft) => {
    draft.cleaned = counts(input, value, at);
  },
  jobs: readJobs,
  reload: ({ input, value, at }, draft) => {
    draft.reload = input.oneOf(value, at, RELOAD_OUTCOMES);
  },
  generation: ({ input, value, at }, draft) => {
    draft.generation = input.integer(value, at, { min: 1 });
  },
  skipped: readSkipped,
  events: ({ input, value, at }, draft) => {
    draft.events = counts(input, value, at);
  },
  quarantined: readQuarantined,
  devices: ({ input, value, at }, draft) => {
    Object.assign(draft.devices, readDeviceStates(input, value, at));
  },
  rollout: ({ input, value, at }, draft) => {
    draft.rollout = readRollout(input, value, at);
  },
  nodesOnCandidate: ({ input, value, at }, draft) => {
    draft.nodesOnCandidate = readNodes(input, value, at);
  },
  nodesOnStable: ({ input, value, at }, draft) => {
    draft.nodesOnStable = readNodes(input, value, at);
  },
};

function emptyDraft(): ExpectationsDraft {
  return {
    pvs: undefined,
    pv: [],
    cleanups: {},
    cleaned: {},
    jobs: undefined,
    reload: undefined,
    generation: undefined,
    skipped: {},
    events: {},
    quarantined: {},
    devices: {},
    rollout: undefined,
    nodesOnCandidate: undefined,
    nodesOnStable: undefined,
  };
}

/** The expectations read, the keys not given left out. */
function expectationsOf(d: ExpectationsDraft): Expectations {
  return {
    ...(d.pvs !== undefined ? { pvs: d.pvs } : {}),
    pv: d.pv,
    cleanups: d.cleanups,
    cleaned: d.cleaned,
    ...(d.jobs !== undefined ? { jobs: d.jobs } : {}),
    ...(d.reload !== undefined ? { reload: d.reload } : {}),
    ...(d.generation !== undefined ? { generation: d.generation } : {}),
    skipped: d.skipped,
    events: d.events,
    quarantined: d.quarantined,
    devices: d.devices,
    ...(d.rollout !== undefined ? { rollout: d.rollout } : {}),
    ...(d.nodesOnCandidate !== undefined ? { nodesOnCandidate: d.nodesOnCandidate } : {}),
    ...(d.nodesOnStable !== undefined ? { nodesOnStable: d.nodesOnStable } : {}),
  };
}

export function parseExpectations(
  input: Input,
  node: Node,
  path: string,
  options: { readonly staged?: boolean } = {},
): Expectations | undefined {
  const map = input.map(node, path);
  if (!map) return undefined;
  const draft = emptyDraft();
  // pairs() keeps only the keys of EXPECT_KEYS (it reports the others).
  for (const { key, keyNode, value } of input.pairs(map, path, EXPECT_KEYS)) {
    const at = `${path}.${key}`;
    if (options.staged !== true && STAGED_EXPECT_KEYS.includes(key)) {
      input.error(at, 'needs a stagedRollout: block (a scenario without one has no rollout)', keyNode);
      continue;
    }
    EXPECT_READERS[key as ExpectKey]({ input, value, at }, draft);
  }
  return expectationsOf(draft);
}

/** What a staged replay tells the expectations about its rollout. */
export interface RolloutWorldView {
  readonly phase: RolloutPhaseExpectation;
  readonly opened: string;
  readonly haltedAt: string;
  readonly haltedNode: string;
  readonly reverted: boolean;
  /** Sorted node names whose status Lease reports the candidate's / the stable config's hash applied. */
  readonly onCandidate: readonly string[];
  readonly onStable: readonly string[];
}

/** What the runner tells the expectations about the world after a step. */
export interface WorldView {
  /** This node's PVs that exist and are not being deleted. */
  readonly pvCount: number;
  readonly pvPhaseCounts: Readonly<Record<string, number>>;
  /** The PV of a volume reference: its fields, or undefined when it does not exist. */
  pvFields(volume: string): Readonly<Record<Exclude<PvField, 'exists'>, string>> | undefined;
  readonly cleanupCounts: Readonly<Record<CleanupState, number>>;
  cleaned(volume: string): number;
  readonly jobCount: number;
  readonly jobsCreated: number;
  readonly lastReload: ReloadOutcome | undefined;
  readonly generation: number;
  /** The reason the last pass skipped a volume's entry, or `none`. */
  skipReason(volume: string): string;
  eventCount(reason: string): number;
  /** Why the agent's last pass quarantined the volume's PV (its reclaim summary), or `none`. */
  quarantineReason(volume: string): string;
  /** The state of a device's verdict at the agent's last pass (disks by rule), or `none`. */
  deviceState(device: string): string;
  /** The staged rollout (a staged scenario only). */
  readonly rollout?: RolloutWorldView;
}

export function evaluateExpectations(e: Expectations, world: WorldView): ExpectationResult[] {
  const out: ExpectationResult[] = [];
  const check = (key: string, expected: unknown, actual: unknown): void => {
    out.push({ key, expected, actual: actual ?? null, ok: expected === actual });
  };
  if (e.pvs) {
    if (e.pvs.count !== undefined) check('pvs.count', e.pvs.count, world.pvCount);
    for (const [phase, n] of Object.entries(e.pvs.phases)) check(`pvs.${phase}`, n, world.pvPhaseCounts[phase] ?? 0);
  }
  for (const p of e.pv) {
    const fields = world.pvFields(p.volume);
    for (const [field, expected] of Object.entries(p.fields)) {
      const key = `pv[${p.volume}].${field}`;
      if (field === 'exists') check(key, expected, fields !== undefined);
      else check(key, expected, fields ? fields[field as Exclude<PvField, 'exists'>] : '(no PV)');
    }
  }
  for (const [state, n] of Object.entries(e.cleanups))
    check(`cleanups.${state}`, n, world.cleanupCounts[state as CleanupState]);
  for (const [volume, n] of Object.entries(e.cleaned)) check(`cleaned.${volume}`, n, world.cleaned(volume));
  if (e.jobs?.count !== undefined) check('jobs.count', e.jobs.count, world.jobCount);
  if (e.jobs?.created !== undefined) check('jobs.created', e.jobs.created, world.jobsCreated);
  if (e.reload !== undefined) check('reload', e.reload, world.lastReload ?? '(no reload yet)');
  if (e.generation !== undefined) check('generation', e.generation, world.generation);
  for (const [volume, reason] of Object.entries(e.skipped))
    check(`skipped.${volume}`, reason, world.skipReason(volume));
  for (const [reason, n] of Object.entries(e.events)) check(`events.${reason}`, n, world.eventCount(reason));
  for (const [volume, reason] of Object.entries(e.quarantined))
    check(`quarantined.${volume}`, reason, world.quarantineReason(volume));
  for (const [device, state] of Object.entries(e.devices)) check(`devices.${device}`, state, world.deviceState(device));
  const r = world.rollout;
  if (e.rollout && r) {
    for (const field of ROLLOUT_FIELDS) {
      const expected = e.rollout[field];
      if (expected !== undefined) check(`rollout.${field}`, expected, r[field]);
    }
  }
  const nodes = (key: string, expected: NodesExpectation | undefined, actual: readonly string[]): void => {
    if (expected === undefined) return;
    if ('count' in expected) check(`${key}.count`, expected.count, actual.length);
    else out.push({ key, expected: expected.nodes, actual, ok: expected.nodes.join(',') === actual.join(',') });
  };
  if (r) {
    nodes('nodesOnCandidate', e.nodesOnCandidate, r.onCandidate);
    nodes('nodesOnStable', e.nodesOnStable, r.onStable);
  }
  return out;
}
