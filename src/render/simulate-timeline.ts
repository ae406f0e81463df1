// The words of a scenario's timeline: one sentence for what each step did and for each thing the
// agent did in response (and the lines under a reload). The text and the JSON report both use
// them; the JSON keeps each action's keys in the order the report has always had.
import { formatGoDuration } from '../core/config/duration.js';
import { formatIssue } from '../core/errors.js';
import { formatBinaryQuantity } from '../core/node/capacity.js';
import { IDENTITY_ACTION_ANNOTATION } from '../core/pv/identity.js';
import { isRolloutAction } from '../core/simulate/report.js';
import type {
  ActionType,
  FleetNodeEvent,
  RolloutEvent,
  StepOutcome,
  TimelineAction,
  TimelineEvent,
} from '../core/simulate/report.js';
import type { RolloutStepType } from '../core/simulate/scenario.js';
import type { NodeFailure } from '../core/simulate/staged-scenario.js';
import { plural, shortHash } from './text.js';

export interface ActionJson {
  readonly at: number;
  readonly time: string;
  readonly type: string;
  readonly summary: string;
  readonly pv?: string;
  readonly volume?: string;
  /** A staged rollout's action: the node it is about, the wave. */
  readonly node?: string;
  readonly wave?: string;
  /** Disks by rule: the kernel name of the device a `device` line is about. */
  readonly device?: string;
  readonly details?: readonly string[];
}

/** `+1m30s`: virtual time since the scenario started. */
export function virtualTime(ms: number): string {
  return `+${formatGoDuration(BigInt(Math.round(ms)) * 1_000_000n)}`;
}

function duration(ms: number): string {
  return Number.isFinite(ms) ? formatGoDuration(BigInt(Math.round(ms)) * 1_000_000n) : 'forever';
}

/** A step outcome of one type (intersected, so the outcomes of two types, like `job succeeds | job fails`, narrow too). */
type OutcomeOf<K extends StepOutcome['type']> = StepOutcome & { readonly type: K };
type StepWords<K extends StepOutcome['type']> = (step: OutcomeOf<K>) => string;

function startText(step: OutcomeOf<'start'>): string {
  const devices = step.devices !== undefined ? `, ${plural(step.devices, 'block device')}` : '';
  const fleet = step.fleet !== undefined ? `; a fleet of ${plural(step.fleet, 'node')} under staged rollout` : '';
  return `node ${step.node}: ${plural(step.disks, 'disk')}${devices}, ${plural(step.classes, 'class', 'classes')} configured${fleet}`;
}

function diskAddedText(step: OutcomeOf<'disk added'>): string {
  const kind =
    step.entryType === 'directory' ? (step.mounted ? 'mounted filesystem' : 'directory, not mounted') : step.entryType;
  const capacity = step.capacity !== undefined ? `, ${formatBinaryQuantity(step.capacity)}` : '';
  return `${step.volume} (${kind}${capacity}) at ${step.path}`;
}

function diskPulledText(step: OutcomeOf<'disk pulled'>): string {
  return step.left === 'mount-point'
    ? `the disk of ${step.volume} is gone: nothing is mounted at ${step.path} any more, the empty directory stays`
    : `the disk of ${step.volume} is gone: nothing is at ${step.path} any more`;
}

/** What the ConfigMap holds now: a file's name, or the keys given inline. */
function configText(config: OutcomeOf<'config changed' | 'apply config'>['config']): string {
  return config.kind === 'file'
    ? `the ConfigMap now holds ${config.display}`
    : `the ConfigMap's keys ${config.keys.join(', ')} changed`;
}

function reloadRequestedText(step: OutcomeOf<'reload requested'>): string {
  const flags = [
    ...(step.allow.length > 0 ? [`--allow ${step.allow.join(',')}`] : []),
    ...(step.force ? ['--force'] : []),
  ];
  return `the operator runs provisioner reload${flags.length > 0 ? ` ${flags.join(' ')}` : ''}`;
}

function cleanupEndsText(step: OutcomeOf<'cleanup succeeds' | 'cleanup fails'>): string {
  const verb = step.type === 'cleanup succeeds' ? 'succeed' : `fail ("${step.message ?? ''}")`;
  return step.finishedRunning
    ? `the running cleanup of ${step.volume} finishes now; cleanups of it ${verb}`
    : `cleanups of ${step.volume} ${verb}`;
}

function diskSwappedText(step: OutcomeOf<'disk swapped'>): string {
  const what = step.original ? 'the original disk is back' : `another ${step.kind === 'block' ? 'disk' : 'filesystem'}`;
  return `${what} at ${step.path} (${step.volume}): ${step.before ?? 'no identity'} -> ${step.after ?? 'no identity'}`;
}

function rolloutRequestText(step: OutcomeOf<RolloutStepType>): string {
  return `the operator runs provisioner ${step.type}${step.by !== undefined ? ` (as ${step.by})` : ''}: rollout of ${shortHash(step.candidate)}, ${step.phase}`;
}

/** Each step type's sentence. */
const STEP_WORDS: { readonly [K in StepOutcome['type']]: StepWords<K> } = {
  start: startText,
  'disk added': diskAddedText,
  'disk removed': (step) => `${step.volume} removed from ${step.path}`,
  'disk pulled': diskPulledText,
  'device added': deviceStepText,
  'device removed': deviceStepText,
  'claim bound': (step) => `claim ${step.claim} bound to ${step.pv} (${step.volume})`,
  'claim released': (step) => `${step.claim ?? 'the claim'} deleted: ${step.pv} (${step.volume}) is Released`,
  'config changed': (step) => configText(step.config),
  'reload requested': reloadRequestedText,
  'cleanup is slow': (step) =>
    `cleanups of ${step.volume} take ${duration(step.durationMs)}${step.then === 'fail' ? ', then fail' : ''}`,
  'cleanup succeeds': cleanupEndsText,
  'cleanup fails': cleanupEndsText,
  'job succeeds': (step) => `Job ${step.job} succeeded`,
  'job fails': (step) => `Job ${step.job} failed`,
  'agent restarted': () => 'a new agent process (empty cleanup table), same cluster and disks',
  'disk swapped': diskSwappedText,
  'node rebuilt': (step) =>
    `Node ${step.node} deleted and registered again (UID ${step.previousUid} -> ${step.uid}); a new agent starts, same disks`,
  'identity accepted': (step) =>
    `the operator annotates PV ${step.pv} (${step.volume}) ${IDENTITY_ACTION_ANNOTATION}=accept`,
  'time passes': (step) => `${duration(step.durationMs)} of virtual time go by`,
  check: () => 'expectations only',
  'apply config': (step) => `kubectl apply: ${configText(step.config)}`,
  'rollout pause': rolloutRequestText,
  'rollout resume': rolloutRequestText,
  'rollout abort': rolloutRequestText,
  'rollout promote': rolloutRequestText,
  'node fails candidate': (step) => `from now on, ${nodeFailureText(step.node, step.how, step.errors, step.reason)}`,
  'node fixed': (step) => `${step.node} applies candidates again`,
};

/** One type's words for a step of that type (the type passed apart so the two stay correlated). */
function wordsOf<K extends StepOutcome['type']>(type: K, step: OutcomeOf<K>): string {
  const words: StepWords<K> = STEP_WORDS[type];
  return words(step);
}

/** What a step did, in one sentence. */
export function stepSummary(step: StepOutcome): string {
  return wordsOf(step.type, step);
}

/** Block devices arriving, or going away. */
function deviceStepText(step: Extract<StepOutcome, { type: 'device added' | 'device removed' }>): string {
  const one = step.devices.length === 1;
  if (step.type === 'device added')
    return `${one ? 'a block device arrives' : `${plural(step.devices.length, 'block device')} arrive`}: ${step.devices.map(deviceText).join('; ')}`;
  const devices = step.devices.map((d) => `/dev/${d}`).join(', ');
  return `${devices} ${one ? 'is' : 'are'} gone (unplugged), with ${one ? 'its' : 'their'} partitions and by-id names; links to ${one ? 'it' : 'them'} stay`;
}

/** `nvme1n1 (1769Gi, Amazon EC2 NVMe Instance Storage, blank) as /dev/disk/by-id/nvme-…` */
function deviceText(d: Extract<StepOutcome, { type: 'device added' }>['devices'][number]): string {
  const content =
    d.partitions > 0
      ? plural(d.partitions, 'partition')
      : d.signatures.length > 0
        ? `${d.signatures.join(', ')} ${d.signatures.length === 1 ? 'signature' : 'signatures'}`
        : 'blank';
  const facts = [formatBinaryQuantity(d.sizeBytes), ...(d.model !== '' ? [d.model] : []), content];
  return `${d.name} (${facts.join(', ')})${d.byId !== undefined ? ` as /dev/disk/by-id/${d.byId}` : ''}`;
}

function nodeFailureText(node: string, how: NodeFailure, errors: number, reason: string | undefined): string {
  const why = reason !== undefined ? ` (${reason})` : '';
  switch (how) {
    case 'rejected':
      return `${node} rejects a candidate it is told to apply${why}`;
    case 'refused':
      return `the reload guard on ${node} refuses a candidate${why}`;
    case 'rolled-back':
      return `${node} rolls a candidate back: its new generation does not start${why}`;
    case 'failed':
      return `${node} fails to read a candidate${why}`;
    case 'errors':
      return `${node} reports ${plural(errors, 'discovery or cleanup error')} once it runs a candidate${why}`;
    case 'silent':
      return `${node}'s agent stops answering (no heartbeat) when it is told to apply a candidate${why}`;
    case 'stuck':
      return `${node} never applies a candidate: it keeps what it runs${why}`;
  }
}

/** `node-a, node-b, node-c` (at most 8, then how many more). */
function nodeList(nodes: readonly string[]): string {
  if (nodes.length === 0) return 'no node';
  const shown = nodes.slice(0, 8).join(', ');
  return nodes.length > 8 ? `${shown} and ${nodes.length - 8} more` : shown;
}

const NOT_APPLIED_VERBS: Readonly<Record<string, string>> = {
  rejected: 'rejected',
  refused: 'refused',
  'rolled-back': 'rolled back',
  failed: 'failed to apply',
};

/** An action's sentence, and the lines under it (a reload's changes or problems). */
interface ActionText {
  readonly summary: string;
  readonly details?: readonly string[];
}

/** An action of one type (`at` aside: the words do not depend on when). */
type ActionOf<K extends ActionType> = TimelineEvent & { readonly type: K };
type ActionWords<K extends ActionType> = (a: ActionOf<K>) => ActionText;

/** ` by alice`: who asked for it, when the request said. */
function requester(a: RolloutEvent | FleetNodeEvent): string {
  return 'by' in a ? ` by ${a.by}` : '';
}

function rolloutStartedText(a: ActionOf<'rollout-started'>): ActionText {
  const nodes = a.waves.reduce((n, w) => n + w.nodes.length, 0);
  return {
    summary: `rollout of ${shortHash(a.candidate)} started (stable ${shortHash(a.stable)}): ${plural(a.waves.length, 'wave')} over ${plural(nodes, 'node')}`,
    details: a.waves.map((w) => `${w.name}: ${nodeList(w.nodes)}`),
  };
}

function rolloutHaltedText(a: ActionOf<'rollout-halted'>): ActionText {
  const where = a.wave !== undefined ? `at ${a.wave}` : 'before its first wave';
  const who = a.node !== '' ? `${a.node}: ` : '';
  const then = a.reverted
    ? `its nodes revert to stable ${shortHash(a.stable)}`
    : 'its nodes keep the candidate (on halt: halt)';
  return { summary: `rollout HALTED ${where} (${who}${a.reason}); ${then}` };
}

function rolloutAbortedText(a: ActionOf<'rollout-aborted'>): ActionText {
  return {
    summary:
      a.cause === 'request'
        ? `rollout aborted${requester(a)}: every node returns to stable ${shortHash(a.stable)}`
        : `rollout ended: the ConfigMap is back to the stable config ${shortHash(a.stable)}`,
  };
}

function rolloutSupersededText(a: ActionOf<'rollout-superseded'>): ActionText {
  return {
    summary:
      a.candidate !== undefined
        ? `rollout of ${shortHash(a.previous)} superseded by ${shortHash(a.candidate)}: it starts again from the canary`
        : `rollout of ${shortHash(a.previous)} superseded by a config that does not parse`,
  };
}

function nodeAppliedText(a: ActionOf<'node-applied'>): ActionText {
  const what =
    a.config === 'candidate'
      ? `the candidate ${shortHash(a.hash)}`
      : a.config === 'stable'
        ? `stable ${shortHash(a.hash)}`
        : shortHash(a.hash);
  return { summary: `${a.node} applied ${what} (generation ${a.generation})` };
}

function nodeNotAppliedText(a: ActionOf<'node-not-applied'>): ActionText {
  return {
    summary: `${a.node} ${NOT_APPLIED_VERBS[a.result] ?? a.result} ${a.hash !== undefined ? shortHash(a.hash) : 'the config'}${a.reason !== undefined ? `: ${a.reason}` : ''}`,
  };
}

/** A staged rollout's lines: the controller's, and a node's. */
const ROLLOUT_WORDS: { readonly [K in (RolloutEvent | FleetNodeEvent)['type']]: ActionWords<K> } = {
  'rollout-adopted': (a) => ({
    summary: `rollout controller: ${shortHash(a.configHash)} adopted as stable (a staged rollout starts with the next change)`,
  }),
  'rollout-started': rolloutStartedText,
  'rollout-wave-opened': (a) => ({
    summary: `${a.wave} opened: ${nodeList(a.nodes)} ${a.nodes.length === 1 ? 'takes' : 'take'} the candidate`,
  }),
  'rollout-baking': (a) => ({
    summary: `every node of the open waves runs the candidate: ${a.wave} bakes for ${duration(a.bakeMs)}`,
  }),
  'rollout-halted': rolloutHaltedText,
  'rollout-paused': (a) => ({
    summary: `rollout paused${a.wave !== undefined ? ` at ${a.wave}` : ''}${requester(a)}`,
  }),
  'rollout-resumed': (a) => ({ summary: `rollout resumed${requester(a)}` }),
  'rollout-aborted': rolloutAbortedText,
  'rollout-promoted': (a) => ({
    summary: `candidate ${shortHash(a.candidate)} promoted${requester(a)}: it is stable on every node now`,
  }),
  'rollout-completed': (a) => ({
    summary: `rollout of ${shortHash(a.candidate)} complete: ${plural(a.waves, 'wave')}, ${plural(a.nodes, 'node')}; it is stable now`,
  }),
  'rollout-unchanged': (a) => ({
    summary: `nothing to roll out: the ConfigMap holds the stable config ${shortHash(a.stable)} in other bytes`,
  }),
  'rollout-superseded': rolloutSupersededText,
  'rollout-invalid': (a) => ({ summary: `the new config does not parse; no node applies it: ${a.reason}` }),
  'node-applied': nodeAppliedText,
  'node-reverted': (a) => ({
    summary: `${a.node} is back on stable ${shortHash(a.hash)} (generation ${a.generation})`,
  }),
  'node-not-applied': nodeNotAppliedText,
  'node-errors': (a) => ({
    summary: `${a.node} reports ${plural(a.errors, 'discovery or cleanup error')} since it applied ${shortHash(a.hash)}`,
  }),
  'node-silent': (a) => ({ summary: `${a.node}'s agent stops answering: no status heartbeat from now on` }),
};

function fieldText(value: unknown): string {
  return typeof value === 'string' ? value : JSON.stringify(value);
}

function agentStartedText(a: ActionOf<'agent-started'>): ActionText {
  return {
    summary: `agent started: generation ${a.generation} serves ${shortHash(a.configHash)}${a.adopted > 0 ? `, adopted ${a.adopted} PVs` : ''}`,
  };
}

function agentStoppedText(a: ActionOf<'agent-stopped'>): ActionText {
  return {
    summary: `agent stopped${a.cleanupsInFlight > 0 ? ` (${plural(a.cleanupsInFlight, 'cleanup')} in flight)` : ''}; its cleanup table is gone with it`,
  };
}

function cleanupStartedText(a: ActionOf<'cleanup-started'>): ActionText {
  return {
    summary: a.command
      ? `cleanup started: in-process, LOCAL_PV_BLKDEVICE=${a.path} ${a.command.join(' ')}`
      : `cleanup started: in-process, deleting the contents of ${a.path}`,
  };
}

function cleanupFailedText(a: ActionOf<'cleanup-failed'>): ActionText {
  return {
    summary:
      a.volume !== undefined
        ? `cleanup of ${a.volume} failed: ${a.error}`
        : `cleanup of PV ${a.pv ?? ''} could not start: ${a.error}`,
  };
}

/** A reload's outcome, and under it its problems (rejected) or its changes. */
function reloadText(a: ActionOf<'reload'>): ActionText {
  const serving = `generation ${a.generation} keeps serving ${shortHash(a.appliedHash)}`;
  const summaries: Record<typeof a.outcome, string> = {
    applied: `reload applied: generation ${a.generation} serves ${shortHash(a.appliedHash)} (${plural(a.changes.length, 'change')})`,
    noop: `reload: no change (${shortHash(a.appliedHash)} already applied)`,
    rejected: `reload rejected: ${plural(a.problems.length, 'problem')}; ${serving}`,
    refused: `reload refused by the reload guard (needs --allow ${(a.needsAllow ?? []).join(',')}); ${serving}`,
    'rolled-back': `reload rolled back: ${a.error ?? '?'}; generation ${a.generation} serves ${shortHash(a.appliedHash)}`,
    failed: `reload failed: ${a.error ?? '?'}; generation ${a.generation} keeps serving`,
  };
  const details =
    a.outcome === 'rejected'
      ? a.problems.map(formatIssue)
      : [
          ...(a.outcome === 'refused' && a.error !== undefined ? [a.error] : []),
          ...a.changes.map((c) => `${c.path} [${c.impact}] ${c.summary}`),
        ];
  return { summary: summaries[a.outcome], ...(details.length > 0 ? { details } : {}) };
}

function logText(a: ActionOf<'log'>): ActionText {
  const extra = Object.entries(a.fields).map(([k, v]) => `${k}=${fieldText(v)}`);
  return {
    summary: `${a.level}: ${a.pv !== undefined ? `PV ${a.pv}: ` : ''}${a.message}${extra.length > 0 ? ` (${extra.join(', ')})` : ''}`,
  };
}

/** Each action type's words: the agent's, then the staged rollout's. */
const ACTION_WORDS: { readonly [K in ActionType]: ActionWords<K> } = {
  'agent-started': agentStartedText,
  'agent-stopped': agentStoppedText,
  'pv-created': (a) => ({
    summary: `created PV ${a.pv} for ${a.volume} (${a.capacity ?? '?'}, ${a.volumeMode}${a.fsType !== undefined ? `, fsType ${a.fsType}` : ''})`,
  }),
  'pv-deleted': (a) => ({ summary: `deleted PV ${a.pv}` }),
  'pv-adopted': (a) => ({ summary: `labelled PV ${a.pv} as this node's (adopted)` }),
  'job-created': (a) => ({
    summary: `cleanup started: Job ${a.job} runs ${a.command.join(' ')} on ${a.device ?? '?'} (image ${a.image ?? '?'})`,
  }),
  'job-deleted': (a) => ({ summary: `deleted finished Job ${a.job}` }),
  'cleanup-started': cleanupStartedText,
  'cleanup-succeeded': (a) => ({ summary: `cleanup of ${a.volume} succeeded` }),
  'cleanup-failed': cleanupFailedText,
  'cleanup-interrupted': (a) => ({ summary: `cleanup of ${a.volume} interrupted (the agent stopped)` }),
  reload: reloadText,
  skipped: (a) => ({ summary: `skipped ${a.volume}: ${a.detail} (${a.reason})` }),
  'class-problem': (a) => ({ summary: `class ${a.storageClass}: ${a.detail}` }),
  'node-updated': (a) => ({ summary: `updated Node ${a.node} (startup taint removed)` }),
  device: (a) => ({ summary: `${a.message.charAt(0).toLowerCase()}${a.message.slice(1)}` }),
  quarantined: (a) => quarantineText(a.pv, a.volume, a.message),
  'identity-accepted': (a) => ({
    summary: `disk identity accepted: ${a.pv}${volumeText(a.volume)} now records ${a.identity} as its disk (the operator's ${IDENTITY_ACTION_ANNOTATION}=accept)`,
  }),
  'identity-recorded': (a) => ({
    summary: `disk identity recorded: ${a.pv}${volumeText(a.volume)} is the disk ${a.identity} (first seen without one)`,
  }),
  log: logText,
  ...ROLLOUT_WORDS,
};

/** One type's words for an action of that type (the type passed apart so the two stay correlated). */
function actionWordsOf<K extends ActionType>(type: K, a: ActionOf<K>): ActionText {
  const words: ActionWords<K> = ACTION_WORDS[type];
  return words(a);
}

/** What the agent did, in one sentence, and the lines under it (a reload's changes or problems). */
export function describeAction(a: TimelineAction): ActionText {
  return actionWordsOf(a.type, a);
}

function volumeText(volume: string | undefined): string {
  return volume !== undefined ? ` (${volume})` : '';
}

/**
 * A quarantine: the agent's message (`<why>; not cleaned, the PV is kept (quarantined). To …; to …`)
 * as one line with why and what was held back, and the operator's choices under it.
 */
function quarantineText(
  pv: string,
  volume: string | undefined,
  message: string,
): { readonly summary: string; readonly details?: readonly string[] } {
  const head = `quarantined ${pv}${volumeText(volume)}`;
  const m = /^(.*?); (not (?:cleaned|deleted)), the PV is kept \(quarantined\)\. (.*)$/su.exec(message);
  if (!m) return { summary: `${head}: ${message}` };
  const [, why = '', held = '', choices = ''] = m;
  const details = choices
    .split('; ')
    .filter((c) => c !== '')
    .map((c) => `${c.charAt(0).toUpperCase()}${c.slice(1)}`);
  return { summary: `${head}: ${why}; ${held}`, ...(details.length > 0 ? { details } : {}) };
}

/** An action of the JSON report. */
export function actionJson(a: TimelineAction): ActionJson {
  const { summary, details } = describeAction(a);
  const pv = 'pv' in a ? { pv: a.pv } : {};
  const volume = 'volume' in a ? { volume: a.volume } : {};
  // The cleaner's events have always named their volume first.
  const fromCleaner =
    a.type === 'cleanup-started' ||
    a.type === 'cleanup-succeeded' ||
    a.type === 'cleanup-interrupted' ||
    (a.type === 'cleanup-failed' && a.volume !== undefined);
  // A staged rollout's lines name their node and wave (node-updated has always named only itself).
  const rollout = isRolloutAction(a.type)
    ? {
        ...('node' in a && a.node !== '' ? { node: a.node } : {}),
        ...('wave' in a ? { wave: a.wave } : {}),
      }
    : {};
  const device = a.type === 'device' ? { device: a.device } : {};
  const head = fromCleaner
    ? { at: a.at, ...volume, ...pv, type: a.type }
    : { at: a.at, type: a.type, ...pv, ...volume, ...rollout, ...device };
  return { ...head, summary, ...(details !== undefined ? { details } : {}), time: virtualTime(a.at) };
}
