// The scenario format: a starting world (config, disks, cluster objects) and a list of steps, each
// one thing that happens on the node or in the cluster, optionally followed by expectations.
// Parsing is strict and positional: every problem names the file, the step number and the field.
// docs/simulate.md is the user-facing reference of this vocabulary.
import { dirname, isAbsolute, resolve } from 'node:path';
import { isMap, isScalar, isSeq } from 'yaml';
import type { Node, YAMLMap } from 'yaml';
import { ALLOW_NAMES, DEFAULT_RELOAD_GUARD_POLICY, RELOAD_GUARD_POLICIES } from '../config/reload-guard.js';
import type { GuardedImpact, ReloadGuardPolicy } from '../config/reload-guard.js';
import type { SourcePosition } from '../errors.js';
import { nodeNameProblem } from '../kube/validation.js';
import { DEFAULT_MIN_PASS_INTERVAL_MS, DEFAULT_MOUNT_GRACE_MS } from '../agent/generation.js';
import { attributeValue, normalizeUuid } from '../node/identity.js';
import { Input, readInputText } from './input.js';
import { readEntry } from './node-facts.js';
import type { EntryType } from './node-facts.js';
import { readDevice, readDevices } from './devices.js';
import type { DeviceSpec } from './devices.js';
import { parseExpectations } from './expect.js';
import type { Expectations } from './expect.js';
import { NODE_FAILURES, readFleet, readStagedRollout } from './staged-scenario.js';
import type { NodeFailure, StagedRolloutSpec } from './staged-scenario.js';

export const STEP_TYPES = [
  'disk added',
  'disk removed',
  'disk pulled',
  'disk swapped',
  // Block devices of the node (disks by rule): docs/simulate.md "Node facts fixtures".
  'device added',
  'device removed',
  'claim bound',
  'claim released',
  'config changed',
  'reload requested',
  'cleanup succeeds',
  'cleanup fails',
  'cleanup is slow',
  'job succeeds',
  'job fails',
  'identity accepted',
  'agent restarted',
  'node rebuilt',
  'time passes',
  'check',
  // A staged rollout (a `stagedRollout:` block): docs/simulate.md "Staged rollouts".
  'apply config',
  'rollout pause',
  'rollout resume',
  'rollout abort',
  'rollout promote',
  'node fails candidate',
  'node fixed',
] as const;
export type StepType = (typeof STEP_TYPES)[number];

/** The steps only a staged scenario has. */
export const STAGED_STEP_TYPES: readonly StepType[] = [
  'apply config',
  'rollout pause',
  'rollout resume',
  'rollout abort',
  'rollout promote',
  'node fails candidate',
  'node fixed',
];
/** `rollout pause` … : the operator's requests, as `provisioner rollout pause|resume|abort|promote`. */
export type RolloutStepType = 'rollout pause' | 'rollout resume' | 'rollout abort' | 'rollout promote';

/** A config given inline (ConfigMap keys) or as a path (file, manifest or ConfigMap directory). */
export type ConfigInput =
  | { readonly kind: 'inline'; readonly keys: Readonly<Record<string, unknown>> }
  | { readonly kind: 'file'; readonly path: string; readonly display: string };

export interface DiskSpec {
  readonly name: string;
  /** The class whose mountDir holds it (resolved when the step runs), or an explicit directory. */
  readonly className?: string;
  readonly dir?: string;
  readonly type: EntryType;
  readonly capacity?: number;
  readonly mounted: boolean;
  readonly fsType?: string;
  readonly target?: string;
  /** The disk's identity; default one derived from its path (docs/disk-identity.md). */
  readonly identity?: DiskIdentity;
}

/**
 * Which disk a volume is: a mounted filesystem's UUID, or a block device's WWID. Scenario disks
 * get a distinct one by default, derived from their path, so a swapped disk differs.
 */
export type DiskIdentity = { readonly uuid: string } | { readonly wwid: string };

/** The disk put behind a volume by `disk swapped`: another one (derived), the one given, or the original. */
export type SwapTarget =
  { readonly kind: 'another' } | { readonly kind: 'original' } | (DiskIdentity & { kind: 'given' });

/** A volume named by entry (`disk1`), class and entry (`fast/disk1`), PV name or container path. */
export type VolumeRef = string;

interface StepBase {
  /** 1-based. */
  readonly index: number;
  readonly position: SourcePosition;
  readonly note?: string;
  readonly expect?: Expectations;
}

export type Step = StepBase &
  (
    | { readonly type: 'disk added'; readonly disk: DiskSpec }
    | { readonly type: 'disk removed'; readonly volume: VolumeRef }
    /** The disk goes away: a filesystem's mount point directory stays behind, unmounted. */
    | { readonly type: 'disk pulled'; readonly volume: VolumeRef }
    /** Block devices arrive on the node (one, or a list arriving together). */
    | { readonly type: 'device added'; readonly devices: readonly DeviceSpec[] }
    /** Block devices go away (kernel names of whole disks; their partitions go with them). */
    | { readonly type: 'device removed'; readonly devices: readonly string[] }
    | { readonly type: 'claim bound'; readonly volume: VolumeRef; readonly claim?: string }
    | { readonly type: 'claim released'; readonly volume: VolumeRef }
    | { readonly type: 'config changed'; readonly config: ConfigInput }
    /** `provisioner reload [--allow …] [--force]`: the operator asks for a reload. */
    | {
        readonly type: 'reload requested';
        readonly allow: readonly GuardedImpact[];
        readonly force: boolean;
      }
    | { readonly type: 'cleanup succeeds'; readonly volume: VolumeRef }
    | { readonly type: 'cleanup fails'; readonly volume: VolumeRef; readonly message: string }
    | {
        readonly type: 'cleanup is slow';
        readonly volume: VolumeRef;
        /** Infinity: until a `cleanup succeeds`/`cleanup fails` step. */
        readonly durationMs: number;
        readonly then: 'succeed' | 'fail';
        readonly message?: string;
      }
    | { readonly type: 'job succeeds'; readonly volume: VolumeRef }
    | { readonly type: 'job fails'; readonly volume: VolumeRef; readonly message?: string }
    | { readonly type: 'agent restarted' }
    /** Another disk behind the volume: same path, name and capacity. */
    | { readonly type: 'disk swapped'; readonly volume: VolumeRef; readonly to: SwapTarget }
    /** The Node object deleted and registered again (a new UID), and its agent started anew. */
    | { readonly type: 'node rebuilt' }
    /** The operator's `local-static-provisioner/identity-action: accept` on the volume's PV. */
    | { readonly type: 'identity accepted'; readonly volume: VolumeRef }
    | { readonly type: 'time passes'; readonly durationMs: number }
    | { readonly type: 'check' }
    /** `kubectl apply` of the operator's ConfigMap: with a staged rollout, a new candidate. */
    | { readonly type: 'apply config'; readonly config: ConfigInput }
    | { readonly type: RolloutStepType; readonly by?: string }
    /** From now on, the node's stand-in agent does this with a candidate it is told to apply. */
    | {
        readonly type: 'node fails candidate';
        readonly node: string;
        readonly how: NodeFailure;
        readonly reason?: string;
        /** `errors`: how many discovery or cleanup errors it reports after applying. */
        readonly errors: number;
      }
    /** The node's stand-in agent applies candidates again (a silent one comes back). */
    | { readonly type: 'node fixed'; readonly node: string }
  );

export interface ScenarioSettings {
  readonly discoveryPeriodMs: number;
  readonly changePollMs: number;
  /** The agent's --mount-grace-period. */
  readonly mountGraceMs: number;
  /** The agent's --min-pass-interval. */
  readonly minPassIntervalMs: number;
  /** Virtual time each step gives the agent to react before its expectations are checked. */
  readonly reactionMs: number;
  readonly jobImage: string;
  readonly namespace: string;
  readonly cleanupConcurrency: number;
  readonly cleanupBackoffMs: number;
  /** Create a StorageClass for every configured class (as a chart would). */
  readonly createStorageClasses: boolean;
  /** Create the discovery directory (mountDir) of every configured class (the DaemonSet's mounts). */
  readonly createDiscoveryDirectories: boolean;
  /** The agent's --reload-guard. */
  readonly reloadGuard: ReloadGuardPolicy;
  /** The agents' --status-heartbeat (a staged rollout reads their status Leases). */
  readonly statusHeartbeatMs: number;
}

export const DEFAULT_SETTINGS: ScenarioSettings = {
  discoveryPeriodMs: 10_000,
  changePollMs: 500,
  mountGraceMs: DEFAULT_MOUNT_GRACE_MS,
  minPassIntervalMs: DEFAULT_MIN_PASS_INTERVAL_MS,
  reactionMs: 1_000,
  jobImage: 'local-volume-provisioner:simulate',
  namespace: 'default',
  cleanupConcurrency: 8,
  cleanupBackoffMs: 5_000,
  createStorageClasses: true,
  createDiscoveryDirectories: true,
  reloadGuard: DEFAULT_RELOAD_GUARD_POLICY,
  statusHeartbeatMs: 60_000,
};

export interface Scenario {
  /** The file as given (or `<demo>`). */
  readonly file: string;
  readonly name: string;
  readonly description?: string;
  readonly node?: string;
  readonly config: ConfigInput;
  readonly disks: readonly (DiskSpec & { readonly position: SourcePosition })[];
  /** The node's block devices at the start (disks by rule). */
  readonly devices: readonly DeviceSpec[];
  /** A cluster fixture (absolute path). */
  readonly cluster?: { readonly path: string; readonly display: string };
  /** A node-facts fixture (absolute path). */
  readonly nodeFacts?: { readonly path: string; readonly display: string };
  readonly settings: ScenarioSettings;
  readonly steps: readonly Step[];
  /** A staged rollout: the controller's policy and the fleet (absent: the one agent, no rollout). */
  readonly stagedRollout?: StagedRolloutSpec;
}

const TOP_KEYS = [
  'name',
  'description',
  'node',
  'config',
  'disks',
  'devices',
  'cluster',
  'nodeFacts',
  'settings',
  'stagedRollout',
  'fleet',
  'steps',
];
const SETTING_KEYS = [
  'discoveryPeriod',
  'changePollInterval',
  'mountGracePeriod',
  'minPassInterval',
  'reactionTime',
  'jobImage',
  'namespace',
  'cleanupConcurrency',
  'cleanupBackoff',
  'createStorageClasses',
  'createDiscoveryDirectories',
  'reloadGuard',
  'statusHeartbeat',
];
const STEP_EXTRA_KEYS = ['expect', 'note'];

function relativePath(baseDir: string, path: string): string {
  return isAbsolute(path) ? path : resolve(baseDir, path);
}

function readConfigInput(input: Input, node: Node | null, path: string, baseDir: string): ConfigInput | undefined {
  if (node !== null && isScalar(node)) {
    const file = input.string(node, path, { required: true });
    return file === undefined ? undefined : { kind: 'file', path: relativePath(baseDir, file), display: file };
  }
  const map = input.map(node, path);
  if (!map) return undefined;
  const pairs = input.pairs(map, path);
  if (pairs.some((p) => p.key === 'file')) {
    if (pairs.length > 1)
      input.error(path, '"file" replaces the whole config: give either file or config keys, not both', map);
    const file = input.string(input.get(map, 'file'), `${path}.file`, { required: true });
    return file === undefined ? undefined : { kind: 'file', path: relativePath(baseDir, file), display: file };
  }
  const keys: Record<string, unknown> = {};
  for (const p of pairs) keys[p.key] = input.toJS(p.value);
  return { kind: 'inline', keys };
}

function readDisk(input: Input, node: Node | null, path: string): DiskSpec | undefined {
  const map = input.map(node, path);
  if (!map) return undefined;
  const className = input.string(input.get(map, 'class'), `${path}.class`);
  const dir = input.string(input.get(map, 'dir'), `${path}.dir`);
  if ((className === undefined) === (dir === undefined))
    input.error(path, 'give either class (its mountDir holds the disk) or dir (an absolute directory)', map);
  if (dir !== undefined && !dir.startsWith('/'))
    input.error(`${path}.dir`, 'must be an absolute path', input.get(map, 'dir'));
  const entry = readEntry(input, map, path, dir ?? '/', { extraKeys: ['class', 'dir', ...IDENTITY_KEYS] });
  const identity = readIdentity(input, map, path);
  if (identity !== undefined && entry) {
    const fits = 'uuid' in identity ? entry.type === 'directory' && entry.mounted : entry.type === 'block';
    if (!fits) {
      const key = 'uuid' in identity ? 'uuid' : 'wwid';
      input.error(
        `${path}.${key}`,
        'uuid' in identity
          ? 'only a mounted filesystem (type directory) has a filesystem UUID'
          : 'only a block device (type block) has a WWID',
        input.get(map, key),
      );
    }
  }
  if (!entry) return undefined;
  return {
    name: entry.name,
    ...(className !== undefined ? { className } : {}),
    ...(dir !== undefined ? { dir } : {}),
    type: entry.type,
    mounted: entry.mounted,
    ...(entry.capacity !== undefined ? { capacity: entry.capacity } : {}),
    ...(entry.fsType !== undefined ? { fsType: entry.fsType } : {}),
    ...(entry.target !== undefined ? { target: entry.target } : {}),
    ...(identity !== undefined ? { identity } : {}),
  };
}

const IDENTITY_KEYS = ['uuid', 'wwid'] as const;

/**
 * A disk's identity given in a mapping: `uuid` (a filesystem's, 8-4-4-4-12 hex) or `wwid` (a block
 * device's), not both; undefined when neither is given (or one is invalid: reported).
 */
function readIdentity(input: Input, map: YAMLMap, path: string): DiskIdentity | undefined {
  const uuidNode = input.get(map, 'uuid');
  const wwidNode = input.get(map, 'wwid');
  const uuidText = input.string(uuidNode, `${path}.uuid`);
  const wwidText = input.string(wwidNode, `${path}.wwid`);
  if (uuidText !== undefined && wwidText !== undefined) {
    input.error(path, 'give uuid (a filesystem) or wwid (a block device), not both', map);
    return undefined;
  }
  if (uuidText !== undefined) {
    const uuid = normalizeUuid(uuidText);
    if (uuid === undefined) {
      input.error(`${path}.uuid`, `"${uuidText}" is not a UUID (8-4-4-4-12 hex digits)`, uuidNode);
      return undefined;
    }
    return { uuid };
  }
  if (wwidText !== undefined) {
    const wwid = attributeValue(wwidText);
    if (wwid === undefined) {
      input.error(`${path}.wwid`, 'must not be empty nor hold control characters', wwidNode);
      return undefined;
    }
    return { wwid };
  }
  return undefined;
}

/** `disk1`, or `{volume: disk1, …}` with more fields. */
function volumeArg(
  input: Input,
  value: Node | null,
  path: string,
  extra: readonly string[] = [],
): { volume?: string; map?: YAMLMap } {
  if (value !== null && isMap(value)) {
    input.pairs(value, path, ['volume', ...extra]);
    const volumeNode = input.get(value, 'volume');
    if (volumeNode === null) {
      // Positioned at the mapping: the key is missing.
      input.error(`${path}.volume`, 'is required', value);
      return { map: value };
    }
    const volume = input.string(volumeNode, `${path}.volume`, { required: true });
    return { ...(volume !== undefined ? { volume } : {}), map: value };
  }
  const volume = input.string(value, path, { required: true });
  return volume !== undefined ? { volume } : {};
}

/** What a step's checks need to know of the rest of the scenario. */
interface StepContext {
  /** The scenario has a `stagedRollout:` block. */
  readonly staged: boolean;
  /** The names of the fleet's nodes. */
  readonly fleet: ReadonlySet<string>;
}

/** What a step's reader gets: its argument (the value under its type key), where it is, and the common fields. */
interface StepArgs {
  readonly input: Input;
  readonly value: Node | null;
  /** `steps[N].TYPE`: where the step's argument is (for messages). */
  readonly at: string;
  readonly base: StepBase;
  readonly baseDir: string;
  readonly ctx: StepContext;
}

type StepReader = (a: StepArgs) => Step | undefined;

function isEmptyArg(value: Node | null): boolean {
  return value === null || (isScalar(value) && (value.value === null || value.value === ''));
}

function volumeStep(
  a: StepArgs,
  type: 'disk removed' | 'disk pulled' | 'claim released' | 'cleanup succeeds' | 'job succeeds' | 'identity accepted',
): Step | undefined {
  const { volume } = volumeArg(a.input, a.value, a.at);
  return volume !== undefined ? { ...a.base, type, volume } : undefined;
}

function noArgsStep(a: StepArgs, type: 'agent restarted' | 'node rebuilt' | 'check'): Step {
  if (!isEmptyArg(a.value)) a.input.error(a.at, `"${type}" takes no arguments`, a.value);
  return { ...a.base, type };
}

function configStep(a: StepArgs, type: 'config changed' | 'apply config'): Step | undefined {
  const config = readConfigInput(a.input, a.value, a.at, a.baseDir);
  return config ? { ...a.base, type, config } : undefined;
}

function claimBound(a: StepArgs): Step | undefined {
  const { input, at } = a;
  const { volume, map: m } = volumeArg(input, a.value, at, ['claim']);
  const claim = m ? input.string(input.get(m, 'claim'), `${at}.claim`) : undefined;
  if (claim !== undefined && !/^[a-z0-9-.]+\/[a-z0-9-.]+$/u.test(claim))
    input.error(`${at}.claim`, 'expected namespace/name', m ? input.get(m, 'claim') : null);
  return volume !== undefined
    ? { ...a.base, type: 'claim bound', volume, ...(claim !== undefined ? { claim } : {}) }
    : undefined;
}

function failureStep(a: StepArgs, type: 'cleanup fails' | 'job fails'): Step | undefined {
  const { volume, map: m } = volumeArg(a.input, a.value, a.at, ['message']);
  const msg = m ? a.input.string(a.input.get(m, 'message'), `${a.at}.message`) : undefined;
  if (volume === undefined) return undefined;
  return type === 'cleanup fails'
    ? { ...a.base, type, volume, message: msg ?? 'the cleaner failed (simulated)' }
    : { ...a.base, type, volume, ...(msg !== undefined ? { message: msg } : {}) };
}

function slowCleanup(a: StepArgs): Step | undefined {
  const { input, at, value } = a;
  const { volume, map: m } = volumeArg(input, value, at, ['duration', 'then', 'message']);
  if (!m && volume !== undefined) input.error(at, 'needs a duration: {volume: disk1, duration: 5m}', value);
  const durationNode = m ? input.get(m, 'duration') : null;
  const forever = durationNode !== null && isScalar(durationNode) && durationNode.value === 'forever';
  const durationMs = forever ? Infinity : m ? input.duration(durationNode, `${at}.duration`) : undefined;
  const then = m ? input.oneOf(input.get(m, 'then'), `${at}.then`, ['succeed', 'fail'] as const, 'succeed') : 'succeed';
  const msg = m ? input.string(input.get(m, 'message'), `${at}.message`) : undefined;
  if (volume === undefined || durationMs === undefined || then === undefined) return undefined;
  return {
    ...a.base,
    type: 'cleanup is slow',
    volume,
    durationMs,
    then,
    ...(msg !== undefined ? { message: msg } : {}),
  };
}

/** `- reload requested` or `- reload requested: { allow: [orphans-pvs], force: true }`. */
function reloadRequested(a: StepArgs): Step | undefined {
  const { input, at, value } = a;
  const empty = isEmptyArg(value);
  const m = empty ? undefined : input.map(value, at);
  if (m) input.pairs(m, at, ['allow', 'force']);
  const allowNode = m ? input.get(m, 'allow') : null;
  const names =
    allowNode === null ? [] : isScalar(allowNode) ? [allowNode] : (input.list(allowNode, `${at}.allow`) ?? []);
  const allow: GuardedImpact[] = [];
  names.forEach((n, i) => {
    const name = input.oneOf(n, `${at}.allow[${String(i)}]`, Object.keys(ALLOW_NAMES));
    const impact = name !== undefined ? ALLOW_NAMES[name] : undefined;
    if (impact !== undefined && !allow.includes(impact)) allow.push(impact);
  });
  const force = m ? input.boolean(input.get(m, 'force'), `${at}.force`, false) : false;
  return empty || m ? { ...a.base, type: 'reload requested', allow, force: force === true } : undefined;
}

/** `disk swapped: disk1`, or `{ volume: disk1, uuid | wwid | original: true }`. */
function diskSwapped(a: StepArgs): Step | undefined {
  const { input, at } = a;
  const { volume, map: m } = volumeArg(input, a.value, at, [...IDENTITY_KEYS, 'original']);
  const given = m ? readIdentity(input, m, at) : undefined;
  const original = m ? input.boolean(input.get(m, 'original'), `${at}.original`, false) : false;
  if (original === true && given !== undefined)
    input.error(`${at}.original`, 'the original disk has its own identity: give original or uuid/wwid, not both', m);
  const to: SwapTarget =
    given !== undefined ? { kind: 'given', ...given } : original === true ? { kind: 'original' } : { kind: 'another' };
  return volume !== undefined ? { ...a.base, type: 'disk swapped', volume, to } : undefined;
}

function deviceStep(a: StepArgs, type: 'device added' | 'device removed'): Step | undefined {
  const devices = readDeviceStep(a.input, type, a.value, a.at);
  return devices !== undefined ? { ...a.base, ...devices } : undefined;
}

/** `- rollout pause`, or `- rollout pause: { by: alice }`. */
function rolloutRequest(
  a: StepArgs,
  type: 'rollout pause' | 'rollout resume' | 'rollout abort' | 'rollout promote',
): Step | undefined {
  const { input, at, value } = a;
  const empty = isEmptyArg(value);
  const m = empty ? undefined : input.map(value, at);
  if (m) input.pairs(m, at, ['by']);
  const by = m ? input.string(input.get(m, 'by'), `${at}.by`) : undefined;
  return empty || m ? { ...a.base, type, ...(by !== undefined ? { by } : {}) } : undefined;
}

/** `node fails candidate: node-c`, or `{ node, how, reason, errors }`. */
function nodeFailsCandidate(a: StepArgs): Step | undefined {
  const { input, at, value } = a;
  const m = value !== null && isMap(value) ? value : undefined;
  if (m) input.pairs(m, at, ['node', 'how', 'reason', 'errors']);
  const nodeArg = m ? input.get(m, 'node') : value;
  if (m && nodeArg === null) input.error(`${at}.node`, 'is required', m);
  const name = nodeArg === null ? undefined : fleetNode(input, nodeArg, m ? `${at}.node` : at, a.ctx);
  const how = m ? input.oneOf(input.get(m, 'how'), `${at}.how`, NODE_FAILURES, 'rejected') : 'rejected';
  const reason = m ? input.string(input.get(m, 'reason'), `${at}.reason`) : undefined;
  const errorsNode = m ? input.get(m, 'errors') : null;
  const errors = errorsNode === null ? 1 : input.integer(errorsNode, `${at}.errors`, { min: 1 });
  if (errorsNode !== null && how !== 'errors')
    input.error(`${at}.errors`, 'only with how: errors (the discovery or cleanup errors it reports)', errorsNode);
  if (name === undefined || how === undefined || errors === undefined) return undefined;
  return {
    ...a.base,
    type: 'node fails candidate',
    node: name,
    how,
    errors,
    ...(reason !== undefined ? { reason } : {}),
  };
}

/** Each step type's reader: the argument under its key into the step. */
const STEP_READERS: Readonly<Record<StepType, StepReader>> = {
  'disk added': (a) => {
    const disk = readDisk(a.input, a.value, a.at);
    return disk ? { ...a.base, type: 'disk added', disk } : undefined;
  },
  'disk removed': (a) => volumeStep(a, 'disk removed'),
  'disk pulled': (a) => volumeStep(a, 'disk pulled'),
  'disk swapped': diskSwapped,
  'device added': (a) => deviceStep(a, 'device added'),
  'device removed': (a) => deviceStep(a, 'device removed'),
  'claim bound': claimBound,
  'claim released': (a) => volumeStep(a, 'claim released'),
  'config changed': (a) => configStep(a, 'config changed'),
  'reload requested': reloadRequested,
  'cleanup succeeds': (a) => volumeStep(a, 'cleanup succeeds'),
  'cleanup fails': (a) => failureStep(a, 'cleanup fails'),
  'cleanup is slow': slowCleanup,
  'job succeeds': (a) => volumeStep(a, 'job succeeds'),
  'job fails': (a) => failureStep(a, 'job fails'),
  'identity accepted': (a) => volumeStep(a, 'identity accepted'),
  'agent restarted': (a) => noArgsStep(a, 'agent restarted'),
  'node rebuilt': (a) => noArgsStep(a, 'node rebuilt'),
  'time passes': (a) => {
    const durationMs = a.input.duration(a.value, a.at);
    return durationMs !== undefined ? { ...a.base, type: 'time passes', durationMs } : undefined;
  },
  check: (a) => noArgsStep(a, 'check'),
  'apply config': (a) => configStep(a, 'apply config'),
  'rollout pause': (a) => rolloutRequest(a, 'rollout pause'),
  'rollout resume': (a) => rolloutRequest(a, 'rollout resume'),
  'rollout abort': (a) => rolloutRequest(a, 'rollout abort'),
  'rollout promote': (a) => rolloutRequest(a, 'rollout promote'),
  'node fails candidate': nodeFailsCandidate,
  'node fixed': (a) => {
    const name = fleetNode(a.input, a.value, a.at, a.ctx);
    return name !== undefined ? { ...a.base, type: 'node fixed', node: name } : undefined;
  },
};

/** A step's type and argument: `- check` (a scalar), or a map with one type key beside note/expect. */
function stepHead(
  input: Input,
  node: Node,
  where: string,
): { readonly typeText: string; readonly value: Node | null; readonly map?: YAMLMap } | undefined {
  // `- agent restarted` / `- check`: a step without arguments.
  if (isScalar(node)) {
    const typeText = input.string(node, where, { required: true });
    return typeText === undefined ? undefined : { typeText, value: null };
  }
  const map = input.map(node, where);
  if (!map) return undefined;
  const pairs = input.pairs(map, where);
  const types = pairs.filter((p) => !STEP_EXTRA_KEYS.includes(p.key));
  if (types.length === 0 && pairs.some((p) => p.key === 'expect')) return { typeText: 'check', value: null, map };
  const only = types.length === 1 ? types[0] : undefined;
  if (only !== undefined) return { typeText: only.key, value: only.value ?? null, map };
  input.error(
    where,
    types.length === 0
      ? `a step needs a type; valid step types: ${STEP_TYPES.join(', ')}`
      : `one step type per step, found ${types.map((t) => `"${t.key}"`).join(', ')}`,
    map,
  );
  return undefined;
}

/** The step type, if known and allowed here (staged steps need a stagedRollout block, and the reverse). */
function stepType(
  input: Input,
  node: Node,
  where: string,
  head: NonNullable<ReturnType<typeof stepHead>>,
  ctx: StepContext,
): StepType | undefined {
  const { typeText, map } = head;
  const keyNode =
    (map?.items.find((p) => isScalar(p.key) && p.key.value === typeText)?.key as Node | undefined) ?? node;
  if (!(STEP_TYPES as readonly string[]).includes(typeText)) {
    input.error(where, `unknown step type "${typeText}"; valid step types: ${STEP_TYPES.join(', ')}`, keyNode);
    return undefined;
  }
  const type = typeText as StepType;
  if (!ctx.staged && STAGED_STEP_TYPES.includes(type))
    input.error(where, `"${type}" needs a stagedRollout: block (the staged rollout controller and its fleet)`, keyNode);
  if (ctx.staged && type === 'config changed')
    input.error(
      where,
      'with stagedRollout, the operator\'s change is "apply config" (it becomes the candidate); "config changed" would reach the agent past the rollout',
      keyNode,
    );
  return type;
}

function readStep(input: Input, node: Node, i: number, baseDir: string, ctx: StepContext): Step | undefined {
  const index = i + 1;
  const where = `steps[${index}]`;
  const position = input.position(node);
  const errorCount = (): number => input.sink.issues.filter((x) => x.severity === 'error').length;
  const errorsBefore = errorCount();
  const head = stepHead(input, node, where);
  if (head === undefined) return undefined;
  const type = stepType(input, node, where, head, ctx);
  if (type === undefined) return undefined;
  const { map } = head;
  const note = map ? input.string(input.get(map, 'note'), `${where}.note`) : undefined;
  const expectNode = map ? input.get(map, 'expect') : null;
  const expect =
    expectNode !== null ? parseExpectations(input, expectNode, `${where}.expect`, { staged: ctx.staged }) : undefined;
  const base: StepBase = {
    index,
    position,
    ...(note !== undefined ? { note } : {}),
    ...(expect !== undefined ? { expect } : {}),
  };
  const step = STEP_READERS[type]({ input, value: head.value, at: `${where}.${type}`, base, baseDir, ctx });
  return errorCount() > errorsBefore ? undefined : step;
}

type DeviceStepArgs =
  | { readonly type: 'device added'; readonly devices: readonly DeviceSpec[] }
  | { readonly type: 'device removed'; readonly devices: readonly string[] };

/** `device added`: a device or a list of them; `device removed`: a kernel name or a list of them. */
function readDeviceStep(
  input: Input,
  type: 'device added' | 'device removed',
  value: Node | null,
  at: string,
): DeviceStepArgs | undefined {
  if (type === 'device removed') {
    const names = readDeviceNames(input, value, at);
    return names === undefined ? undefined : { type, devices: names };
  }
  const devices = value !== null && isSeq(value) ? readDevices(input, value, at) : [readDevice(input, value, at)];
  const read = devices.filter((d): d is DeviceSpec => d !== undefined);
  return read.length > 0 && read.length === devices.length ? { type, devices: read } : undefined;
}

/** `nvme1n1`, or a list of kernel names. */
function readDeviceNames(input: Input, value: Node | null, path: string): string[] | undefined {
  const items = value !== null && isSeq(value) ? (input.list(value, path) ?? []) : [value];
  const names = items.map((item, i) =>
    input.string(item, isSeq(value) ? `${path}[${String(i)}]` : path, { required: true }),
  );
  const read = names.filter((n): n is string => n !== undefined);
  if (read.length === 0 && names.length === 0) input.error(path, 'name at least one device', value);
  return read.length > 0 && read.length === names.length ? read : undefined;
}

/** A node of the fleet named by a step. */
function fleetNode(input: Input, node: Node | null, path: string, ctx: StepContext): string | undefined {
  const name = input.string(node, path, { required: true });
  if (name === undefined || !ctx.staged) return name;
  if (!ctx.fleet.has(name)) {
    const names = [...ctx.fleet];
    input.error(
      path,
      `${JSON.stringify(name)} is not a node of the fleet (${names.length > 0 ? names.slice(0, 10).join(', ') + (names.length > 10 ? ', …' : '') : 'the fleet lists no node'})`,
      node,
    );
    return undefined;
  }
  return name;
}

function readSettings(input: Input, node: Node | null): ScenarioSettings {
  if (node === null) return DEFAULT_SETTINGS;
  const map = input.map(node, 'settings');
  if (!map) return DEFAULT_SETTINGS;
  input.pairs(map, 'settings', SETTING_KEYS);
  const ms = (key: string, fallback: number): number => {
    const n = input.get(map, key);
    return n === null ? fallback : (input.duration(n, `settings.${key}`) ?? fallback);
  };
  const int = (key: string, fallback: number): number => {
    const n = input.get(map, key);
    return n === null ? fallback : (input.integer(n, `settings.${key}`, { min: 1 }) ?? fallback);
  };
  const settings: ScenarioSettings = {
    discoveryPeriodMs: ms('discoveryPeriod', DEFAULT_SETTINGS.discoveryPeriodMs),
    changePollMs: ms('changePollInterval', DEFAULT_SETTINGS.changePollMs),
    mountGraceMs: ms('mountGracePeriod', DEFAULT_SETTINGS.mountGraceMs),
    minPassIntervalMs: ms('minPassInterval', DEFAULT_SETTINGS.minPassIntervalMs),
    reactionMs: ms('reactionTime', DEFAULT_SETTINGS.reactionMs),
    jobImage: input.string(input.get(map, 'jobImage'), 'settings.jobImage') ?? DEFAULT_SETTINGS.jobImage,
    namespace: input.string(input.get(map, 'namespace'), 'settings.namespace') ?? DEFAULT_SETTINGS.namespace,
    cleanupConcurrency: int('cleanupConcurrency', DEFAULT_SETTINGS.cleanupConcurrency),
    cleanupBackoffMs: ms('cleanupBackoff', DEFAULT_SETTINGS.cleanupBackoffMs),
    createStorageClasses:
      input.boolean(input.get(map, 'createStorageClasses'), 'settings.createStorageClasses', true) ?? true,
    createDiscoveryDirectories:
      input.boolean(input.get(map, 'createDiscoveryDirectories'), 'settings.createDiscoveryDirectories', true) ?? true,
    reloadGuard:
      input.oneOf(
        input.get(map, 'reloadGuard'),
        'settings.reloadGuard',
        RELOAD_GUARD_POLICIES,
        DEFAULT_RELOAD_GUARD_POLICY,
      ) ?? DEFAULT_RELOAD_GUARD_POLICY,
    statusHeartbeatMs: ms('statusHeartbeat', DEFAULT_SETTINGS.statusHeartbeatMs),
  };
  if (settings.statusHeartbeatMs < 1000)
    input.error('settings.statusHeartbeat', 'must be at least 1s', input.get(map, 'statusHeartbeat'));
  if (settings.discoveryPeriodMs <= 0)
    input.error('settings.discoveryPeriod', 'must be positive', input.get(map, 'discoveryPeriod'));
  return settings;
}

/** Parses a scenario; throws InvalidInputError (exit 3) listing every problem with its position. */
export function parseScenario(file: string, text: string, options: { baseDir?: string } = {}): Scenario {
  const input = new Input('scenario', file, text);
  const baseDir = options.baseDir ?? dirname(resolve(file));
  if (input.failed) input.check();
  if (input.docs.length !== 1) {
    input.error('', `expected one YAML document, found ${input.docs.length}`);
    input.check();
  }
  const root = input.map(input.docs[0]?.root ?? null, '');
  if (!root) {
    input.check();
    throw new Error('unreachable');
  }
  input.pairs(root, '', TOP_KEYS);
  const name = input.string(input.get(root, 'name'), 'name') ?? file;
  const description = input.string(input.get(root, 'description'), 'description');
  const nodeNode = input.get(root, 'node');
  const nodeName = input.string(nodeNode, 'node');
  // Checked here, with its position: the in-memory cluster would refuse the Node later, as a bug.
  const nodeProblem = nodeName === undefined ? undefined : nodeNameProblem(nodeName);
  if (nodeProblem !== undefined) input.error('node', nodeProblem, nodeNode);
  const configNode = input.get(root, 'config');
  if (configNode === null) input.error('config', 'is required: the starting config (inline keys or a file)', root);
  const config = configNode !== null ? readConfigInput(input, configNode, 'config', baseDir) : undefined;
  const disks: (DiskSpec & { position: SourcePosition })[] = [];
  const disksNode = input.get(root, 'disks');
  if (disksNode !== null && input.toJS(disksNode) !== null) {
    (input.list(disksNode, 'disks') ?? []).forEach((d, i) => {
      const disk = readDisk(input, d, `disks[${i}]`);
      if (disk) disks.push({ ...disk, position: input.position(d) });
    });
  }
  const devices = readDevices(input, input.get(root, 'devices'), 'devices');
  const fixture = (key: string): { path: string; display: string } | undefined => {
    const value = input.string(input.get(root, key), key);
    return value === undefined ? undefined : { path: relativePath(baseDir, value), display: value };
  };
  const cluster = fixture('cluster');
  const nodeFacts = fixture('nodeFacts');
  const settings = readSettings(input, input.get(root, 'settings'));
  const stagedNode = input.get(root, 'stagedRollout');
  const policy = stagedNode === null ? undefined : readStagedRollout(input, stagedNode);
  const fleetYaml = input.get(root, 'fleet');
  if (fleetYaml !== null && stagedNode === null)
    input.error('fleet', 'needs a stagedRollout: block (the fleet takes part in a staged rollout)', fleetYaml);
  const fleet = readFleet(input, fleetYaml);
  const ctx: StepContext = { staged: stagedNode !== null, fleet: new Set(fleet.map((f) => f.name)) };
  const steps: Step[] = [];
  const stepsNode = input.get(root, 'steps');
  if (stepsNode === null) input.error('steps', 'is required: the list of things that happen', root);
  else
    (input.list(stepsNode, 'steps') ?? []).forEach((s, i) => {
      const step = readStep(input, s, i, baseDir, ctx);
      if (step) steps.push(step);
    });
  input.check();
  if (!config) throw new Error('unreachable: a scenario without config passed validation');
  return {
    file,
    name,
    ...(description !== undefined ? { description } : {}),
    ...(nodeName !== undefined ? { node: nodeName } : {}),
    config,
    disks,
    devices,
    ...(cluster ? { cluster } : {}),
    ...(nodeFacts ? { nodeFacts } : {}),
    settings,
    steps,
    ...(policy !== undefined ? { stagedRollout: { policy, fleet } } : {}),
  };
}

export async function loadScenario(path: string): Promise<Scenario> {
  return parseScenario(path, await readInputText(path, 'scenario'));
}
