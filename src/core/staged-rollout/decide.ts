// The staged rollout controller's decision, pure: from what it sees (the desired ConfigMap, the
// stable copy, the stored state, the operator's request, the Nodes and the agents' status Leases)
// to what it writes (the stable copy, the state with the candidate's content) and the Events it
// records. The service (controller.ts) reads, calls decide, writes, and calls it again until there
// is nothing to do; every fact the next call needs is in the stored state, so a controller killed
// at any point resumes from there.
import type { PublishedState } from '../fleet/applied-state.js';
import type { StagedRolloutPolicy } from './policy.js';
import { describePolicy } from './policy.js';
import type { ContentRef, Halt, RolloutRequest, RolloutState } from '../rollout-state/state.js';
import { ACTIVE_PHASES } from '../rollout-state/state.js';
import { isStale, walkOpenWaves } from './open-waves.js';
import type { OpenWaveNode, OpenWaveProgress, OpenWaveSource } from './open-waves.js';
import { planWaves } from './waves.js';
import type { FleetNode, WavePlan } from './waves.js';

export { nodeProgress } from './open-waves.js';
export type { NodeProgress } from './open-waves.js';

/** The operator's ConfigMap as the controller read it. */
export interface DesiredContent extends ContentRef {
  /** Why it does not parse (then `hash` is absent). */
  readonly invalidReason?: string;
}

export interface RolloutView {
  readonly now: number;
  readonly policy: StagedRolloutPolicy;
  /** The operator's ConfigMap; undefined: it does not exist (nothing changes). */
  readonly desired: DesiredContent | undefined;
  /** The stable copy; undefined: never written (the first start adopts the desired content). */
  readonly stable: ContentRef | undefined;
  readonly state: RolloutState | undefined;
  readonly request: RolloutRequest | undefined;
  readonly nodes: readonly FleetNode[];
  /** The agents' published states by node. */
  readonly reports: ReadonlyMap<string, PublishedState>;
  /** The open waves' progress kept up to date (the controller's FleetIndex); absent: a walk of nodes and reports. */
  readonly openWaves?: OpenWaveSource;
}

export interface RolloutEvent {
  readonly type: 'Normal' | 'Warning';
  readonly reason: string;
  readonly message: string;
}

export interface RolloutDecision {
  /** Write the stable copy from the desired ConfigMap's data or the candidate's. */
  readonly stable?: 'desired' | 'candidate';
  /** Write the candidate ConfigMap with this state; `content`: copy the desired data into it, or keep its data. */
  readonly state?: { readonly state: RolloutState; readonly content: 'desired' | 'keep' };
  /** The request annotation is cleared with the state write (or alone). */
  readonly clearRequest: boolean;
  readonly events: readonly RolloutEvent[];
  /** When to decide again without a change (a bake or a progress deadline ends); undefined: on a change only. */
  readonly wakeAt?: number;
}

export const EVENT_REASONS = {
  started: 'RolloutStarted',
  waveOpened: 'RolloutWaveOpened',
  halted: 'RolloutHalted',
  completed: 'RolloutCompleted',
  superseded: 'RolloutSuperseded',
  invalid: 'RolloutCandidateInvalid',
  paused: 'RolloutPaused',
  resumed: 'RolloutResumed',
  aborted: 'RolloutAborted',
  promoted: 'RolloutPromoted',
  adopted: 'RolloutStableAdopted',
} as const;

/** `1 node`, `3 nodes`. */
function nodeCount(n: number): string {
  return `${String(n)} ${n === 1 ? 'node' : 'nodes'}`;
}

function short(hash: string | undefined): string {
  return hash === undefined ? '(invalid)' : hash.slice(0, 15);
}

function sameContent(a: ContentRef | undefined, b: ContentRef | undefined): boolean {
  return a !== undefined && b !== undefined && a.fingerprint === b.fingerprint;
}

/**
 * The nodes a rollout stages: those that run an agent now (a fresh status Lease). A Node the
 * DaemonSet does not cover would never report and halt the rollout; such nodes run stable, and
 * the candidate once it is stable everywhere.
 */
function runningNodes(view: RolloutView): FleetNode[] {
  return view.nodes.filter((n) => {
    const r = view.reports.get(n.name);
    return r !== undefined && !isStale(r, view.now);
  });
}

/**
 * The waves over the nodes running an agent. None running while the cluster has Nodes (every
 * status Lease stale: an outage, or the agents not started yet) is no fleet to stage on: a plan
 * error, so the candidate never becomes stable without a node having run it.
 */
function stagePlan(view: RolloutView, running: readonly FleetNode[]): WavePlan {
  if (running.length === 0 && view.nodes.length > 0)
    return { ok: false, reason: 'no node has a fresh status Lease: no agent to stage the candidate on' };
  return planWaves(view.policy, running);
}

/** `state` without its bake (and halt): a wave opened anew, a rollout resumed. */
function withoutBake(state: RolloutState, alsoHalt = false): RolloutState {
  const copy: { -readonly [K in keyof RolloutState]?: RolloutState[K] } = { ...state };
  delete copy.bakeStartedAt;
  if (alsoHalt) delete copy.halt;
  return copy as RolloutState;
}

/** The open waves' progress of `state` now, from the view's index or a walk of its nodes. */
function openWavesOf(view: RolloutView, state: RolloutState): OpenWaveProgress {
  return view.openWaves !== undefined
    ? view.openWaves(state, view.now)
    : walkOpenWaves(view.nodes, view.reports, state, view.now);
}

/** The nodes of the open waves by their progress on the candidate (the controller's gauge). */
export function openWaveCounts(
  view: RolloutView,
  state: RolloutState,
): { readonly applied: number; readonly pending: number; readonly failed: number } {
  const { applied, pending, failed } = openWavesOf(view, state);
  return { applied, pending, failed };
}

function earliest(a: number, b: number | undefined): number {
  return b === undefined ? a : Math.min(a, b);
}

const NONE: RolloutDecision = { clearRequest: false, events: [] };

/** What every new rollout state starts from. */
type RolloutBase = Pick<RolloutState, 'candidate' | 'stable' | 'startedAt' | 'updatedAt' | 'waveOpenedAt' | 'reverted'>;

/** A rollout that ends as it starts: the candidate does not parse, or is the stable config. */
function startSettled(
  base: RolloutBase,
  desired: DesiredContent,
  stable: ContentRef,
  events: RolloutEvent[],
): RolloutDecision | undefined {
  if (desired.hash === undefined) {
    events.push({
      type: 'Warning',
      reason: EVENT_REASONS.invalid,
      message: `the new config does not parse; no node applies it: ${desired.invalidReason ?? 'invalid'}`,
    });
    return {
      state: {
        state: { ...base, phase: 'invalid', waves: [], opened: 0, message: desired.invalidReason ?? 'invalid' },
        content: 'desired',
      },
      clearRequest: true,
      events,
    };
  }
  if (desired.hash !== stable.hash) return undefined;
  // The same config in other bytes (a comment, key order): nothing for the agents to do.
  return {
    stable: 'desired',
    state: {
      state: { ...base, phase: 'complete', waves: [], opened: 0, message: 'same config as stable' },
      content: 'desired',
    },
    clearRequest: true,
    events,
  };
}

/** No fleet to stage on (or a canary selector that matches none): halted before the canary. */
function haltedBeforeCanary(
  base: RolloutBase,
  hash: string | undefined,
  reason: string,
  now: number,
  events: RolloutEvent[],
): RolloutDecision {
  const halt: Halt = { wave: 0, node: '', reason, at: now };
  events.push({
    type: 'Warning',
    reason: EVENT_REASONS.halted,
    message: `rollout of ${short(hash)} halted before the canary: ${reason}`,
  });
  return {
    state: { state: { ...base, phase: 'halted', waves: [], opened: 0, halt }, content: 'desired' },
    clearRequest: true,
    events,
  };
}

function startRollout(
  view: RolloutView,
  desired: DesiredContent,
  stable: ContentRef,
  previous: RolloutState | undefined,
): RolloutDecision {
  const { now } = view;
  const events: RolloutEvent[] = [];
  if (previous !== undefined && ACTIVE_PHASES.includes(previous.phase))
    events.push({
      type: 'Normal',
      reason: EVENT_REASONS.superseded,
      message: `candidate ${short(previous.candidate.hash)} superseded by ${short(desired.hash)} before it completed; starting again from the canary`,
    });
  const base: RolloutBase = {
    candidate: { fingerprint: desired.fingerprint, ...(desired.hash !== undefined ? { hash: desired.hash } : {}) },
    stable,
    startedAt: now,
    updatedAt: now,
    waveOpenedAt: now,
    reverted: false,
  };
  const settledNow = startSettled(base, desired, stable, events);
  if (settledNow !== undefined) return settledNow;
  const running = runningNodes(view);
  const plan = stagePlan(view, running);
  if (!plan.ok) return haltedBeforeCanary(base, desired.hash, plan.reason, now, events);
  const first = plan.waves[0];
  // An operator's pause holds across a new apply: the new rollout waits, no wave open, for `resume`.
  const paused = previous?.phase === 'paused';
  const opening = paused
    ? 'paused, as the rollout it supersedes was: no wave opens until `rollout resume`'
    : `${first?.name ?? 'no wave'} opened (${nodeCount(first?.size ?? 0)})`;
  events.push({
    type: 'Normal',
    reason: EVENT_REASONS.started,
    message: `rollout of ${short(desired.hash)} started (${describePolicy(view.policy)}): ${String(plan.waves.length)} waves over ${String(running.length)} nodes running an agent; ${opening}`,
  });
  const progress = paused
    ? { phase: 'paused' as const, opened: 0, message: 'paused (carried over from the superseded rollout)' }
    : { phase: 'progressing' as const, opened: Math.min(1, plan.waves.length) };
  return {
    state: { state: { ...base, ...progress, waves: plan.waves }, content: 'desired' },
    clearRequest: true,
    events,
    wakeAt: now,
  };
}

function complete(state: RolloutState, now: number, reason: string, message: string): RolloutDecision {
  return {
    stable: 'candidate',
    state: {
      state: { ...state, phase: 'complete', stable: state.candidate, updatedAt: now, message, reverted: false },
      content: 'keep',
    },
    clearRequest: true,
    events: [{ type: 'Normal', reason, message }],
  };
}

/** A request the state does not allow (or no longer concerns it): cleared, nothing else. */
const CLEARED: RolloutDecision = { clearRequest: true, events: [] };

function pauseRequest(state: RolloutState, now: number, by: string): RolloutDecision {
  if (state.phase !== 'progressing') return CLEARED;
  return {
    state: { state: { ...state, phase: 'paused', updatedAt: now, message: `paused${by}` }, content: 'keep' },
    clearRequest: true,
    events: [
      {
        type: 'Normal',
        reason: EVENT_REASONS.paused,
        message: `rollout of ${short(state.candidate.hash)} paused${by} at ${state.waves[state.opened - 1]?.name ?? 'start'}`,
      },
    ],
  };
}

/** Resumed but still no fleet to plan the waves on: it stays halted, saying why. */
function notResumed(state: RolloutState, reason: string, now: number, by: string): RolloutDecision {
  return {
    state: {
      state: {
        ...state,
        phase: 'halted',
        halt: { wave: 0, node: '', reason, at: now },
        updatedAt: now,
        message: `not resumed${by}: ${reason}`,
      },
      content: 'keep',
    },
    clearRequest: true,
    events: [
      {
        type: 'Warning',
        reason: EVENT_REASONS.halted,
        message: `rollout of ${short(state.candidate.hash)} cannot resume${by}: ${reason}`,
      },
    ],
  };
}

function resumeRequest(view: RolloutView, state: RolloutState, by: string): RolloutDecision {
  const { now } = view;
  if (state.phase !== 'paused' && state.phase !== 'halted') return CLEARED;
  const rest = withoutBake(state, true);
  // Halted before its canary (the plan failed: no wave): plan now. Resumed with no wave, it
  // would complete at once and make the candidate stable without a node having run it.
  let waves = rest.waves;
  if (waves.length === 0) {
    const plan = stagePlan(view, runningNodes(view));
    if (!plan.ok) return notResumed(state, plan.reason, now, by);
    waves = plan.waves;
  }
  const opened = Math.max(rest.opened, Math.min(1, waves.length));
  return {
    state: {
      state: {
        ...rest,
        waves,
        opened,
        phase: 'progressing',
        reverted: false,
        waveOpenedAt: now,
        updatedAt: now,
        message: `resumed${by}`,
      },
      content: 'keep',
    },
    clearRequest: true,
    events: [
      {
        type: 'Normal',
        reason: EVENT_REASONS.resumed,
        message: `rollout of ${short(state.candidate.hash)} resumed${by}`,
      },
    ],
    wakeAt: now,
  };
}

function abortRequest(state: RolloutState, now: number, by: string): RolloutDecision {
  if (!ACTIVE_PHASES.includes(state.phase)) return CLEARED;
  return {
    state: {
      state: { ...state, phase: 'aborted', updatedAt: now, message: `aborted${by}: every node runs stable` },
      content: 'keep',
    },
    clearRequest: true,
    events: [
      {
        type: 'Normal',
        reason: EVENT_REASONS.aborted,
        message: `rollout of ${short(state.candidate.hash)} aborted${by}; every node returns to stable ${short(state.stable.hash)}`,
      },
    ],
  };
}

function promoteRequest(state: RolloutState, now: number, by: string): RolloutDecision {
  if (state.candidate.hash === undefined || state.phase === 'complete') return CLEARED;
  return complete(
    state,
    now,
    EVENT_REASONS.promoted,
    `candidate ${short(state.candidate.hash)} promoted${by}: it is stable on every node now`,
  );
}

/** The operator's request for this candidate (one for another candidate is cleared unread). */
function applyRequest(view: RolloutView, state: RolloutState, request: RolloutRequest): RolloutDecision {
  if (request.candidate !== state.candidate.fingerprint) return CLEARED;
  const by = request.by !== undefined ? ` by ${request.by}` : '';
  switch (request.action) {
    case 'pause':
      return pauseRequest(state, view.now, by);
    case 'resume':
      return resumeRequest(view, state, by);
    case 'abort':
      return abortRequest(state, view.now, by);
    case 'promote':
      return promoteRequest(state, view.now, by);
  }
}

function haltAt(failure: OpenWaveNode, now: number): Halt {
  return { wave: failure.wave, node: failure.node, reason: failure.why, at: now };
}

function haltWith(view: RolloutView, state: RolloutState, halt: Halt): RolloutDecision {
  const revert = view.policy.onHalt === 'revert';
  const wave = state.waves[halt.wave]?.name ?? 'the rollout';
  const who = halt.node === '' ? '' : `node ${halt.node}: `;
  return {
    state: {
      state: {
        ...state,
        phase: 'halted',
        halt,
        reverted: revert,
        updatedAt: view.now,
        message: revert ? 'halted; the open waves run stable again' : 'halted; the open waves keep the candidate',
      },
      content: 'keep',
    },
    clearRequest: false,
    events: [
      {
        type: 'Warning',
        reason: EVENT_REASONS.halted,
        message: `rollout of ${short(state.candidate.hash)} halted at ${wave}: ${who}${halt.reason}; ${revert ? `its nodes revert to stable ${short(state.stable.hash)}` : 'its nodes keep the candidate (on halt: halt)'}`,
      },
    ],
  };
}

function advance(view: RolloutView, state: RolloutState): RolloutDecision {
  const { now, policy } = view;
  const progress = openWavesOf(view, state);
  if (progress.firstFailure !== undefined) return haltWith(view, state, haltAt(progress.firstFailure, now));
  if (state.phase === 'paused') return NONE;
  if (progress.pending > 0) {
    const deadline = state.waveOpenedAt + policy.progressDeadlineMs;
    // Only a deadline passed needs the first pending node (finding it may look at every one).
    const pending: OpenWaveNode | undefined = now >= deadline ? progress.firstPending() : undefined;
    if (pending !== undefined)
      return haltWith(view, state, {
        wave: pending.wave,
        node: pending.node,
        reason: `did not apply the candidate within ${String(policy.progressDeadlineMs / 1000)}s of its wave opening (${pending.why})`,
        at: now,
      });
    return { ...NONE, wakeAt: earliest(deadline, progress.nextStaleAt) };
  }
  // Without a bake, the next wave opens at once (no write of a bake that ends when it starts).
  if (state.bakeStartedAt === undefined && policy.bakeMs > 0)
    return {
      state: { state: { ...state, bakeStartedAt: now, updatedAt: now }, content: 'keep' },
      clearRequest: false,
      events: [],
      wakeAt: now + policy.bakeMs,
    };
  const bakeEnds = (state.bakeStartedAt ?? now) + policy.bakeMs;
  if (now < bakeEnds) return { ...NONE, wakeAt: earliest(bakeEnds, progress.nextStaleAt) };
  if (state.opened >= state.waves.length)
    return complete(
      state,
      now,
      EVENT_REASONS.completed,
      `rollout of ${short(state.candidate.hash)} complete: ${String(state.waves.length)} waves, ${String(state.waves.reduce((n, w) => n + w.size, 0))} nodes; it is stable now`,
    );
  const next = state.waves[state.opened];
  const rest = withoutBake(state);
  return {
    state: { state: { ...rest, opened: state.opened + 1, waveOpenedAt: now, updatedAt: now }, content: 'keep' },
    clearRequest: false,
    events: [
      {
        type: 'Normal',
        reason: EVENT_REASONS.waveOpened,
        message: `rollout of ${short(state.candidate.hash)}: ${next?.name ?? 'next wave'} opened (${nodeCount(next?.size ?? 0)})`,
      },
    ],
    wakeAt: now,
  };
}

/** A state with nothing in flight: `ref` is candidate and stable alike. */
function settled(ref: ContentRef, now: number, message?: string): RolloutState {
  return {
    phase: 'complete',
    candidate: ref,
    stable: ref,
    waves: [],
    opened: 0,
    waveOpenedAt: now,
    reverted: false,
    startedAt: now,
    updatedAt: now,
    ...(message !== undefined ? { message } : {}),
  };
}

/** No stable copy: restore it (it was deleted), or adopt the operator's ConfigMap (the first start). */
function withoutStable(view: RolloutView): RolloutDecision {
  const { desired, state, now } = view;
  if (state !== undefined) {
    // The stable copy was deleted: restore it from the candidate copy when that holds the same
    // content (a finished rollout); never adopt the operator's ConfigMap, which may be untested.
    if (!ACTIVE_PHASES.includes(state.phase) && state.candidate.fingerprint === state.stable.fingerprint)
      return { stable: 'candidate', clearRequest: false, events: [] };
    return NONE;
  }
  // First start: the fleet runs the operator's ConfigMap already (or nothing): it becomes stable.
  if (desired === undefined || desired.hash === undefined) return NONE;
  const ref: ContentRef = { fingerprint: desired.fingerprint, hash: desired.hash };
  return {
    stable: 'desired',
    state: { state: settled(ref, now, 'adopted the ConfigMap as stable'), content: 'desired' },
    clearRequest: true,
    events: [
      {
        type: 'Normal',
        reason: EVENT_REASONS.adopted,
        message: `config ${short(desired.hash)} adopted as stable (staged rollout starts with the next change)`,
      },
    ],
  };
}

/**
 * The ConfigMap set back to the stable content: a rollout in flight ends `aborted` (an invalid
 * candidate's too: it never started), one already ended is `complete` on stable.
 */
function backToStable(state: RolloutState, stable: ContentRef, now: number): RolloutDecision {
  const ended = !ACTIVE_PHASES.includes(state.phase) && state.phase !== 'invalid';
  const message = ended
    ? 'the ConfigMap is the stable config'
    : state.phase === 'invalid'
      ? 'the invalid ConfigMap was set back to the stable config'
      : 'the ConfigMap was set back to the stable config';
  const event =
    state.phase === 'invalid'
      ? `the ConfigMap that did not parse is back to the stable config ${short(stable.hash)}; no node applied it`
      : `rollout of ${short(state.candidate.hash)} ended: the ConfigMap is back to the stable config ${short(stable.hash)}`;
  return {
    state: {
      state: { ...state, candidate: stable, phase: ended ? 'complete' : 'aborted', updatedAt: now, message },
      content: 'desired',
    },
    clearRequest: true,
    events: ended ? [] : [{ type: 'Normal', reason: EVENT_REASONS.aborted, message: event }],
  };
}

/** The operator's ConfigMap differs from the candidate: the same config in other bytes, stable again, or a new rollout. */
function desiredChanged(
  view: RolloutView,
  desired: DesiredContent,
  stable: ContentRef,
  state: RolloutState,
): RolloutDecision {
  if (desired.hash !== undefined && desired.hash === state.candidate.hash && ACTIVE_PHASES.includes(state.phase))
    // The same config in other bytes (a comment, key order): the rollout goes on with the new copy.
    return {
      state: {
        state: { ...state, candidate: { fingerprint: desired.fingerprint, hash: desired.hash }, updatedAt: view.now },
        content: 'desired',
      },
      clearRequest: false,
      events: [],
    };
  if (sameContent(desired, stable)) return backToStable(state, stable, view.now);
  return startRollout(view, desired, stable, state);
}

/** One step of the controller: what to write and record now. */
export function decide(view: RolloutView): RolloutDecision {
  const { desired, state, now } = view;
  const stable = view.stable;
  if (stable === undefined) return withoutStable(view);
  if (state === undefined) {
    if (desired === undefined || sameContent(desired, stable))
      return { state: { state: settled(stable, now), content: 'keep' }, clearRequest: true, events: [] };
    return startRollout(view, desired, stable, undefined);
  }
  if (view.request !== undefined) return applyRequest(view, state, view.request);
  if (desired !== undefined && desired.fingerprint !== state.candidate.fingerprint)
    return desiredChanged(view, desired, stable, state);
  if (state.phase === 'progressing' || state.phase === 'paused') return advance(view, state);
  return NONE;
}
