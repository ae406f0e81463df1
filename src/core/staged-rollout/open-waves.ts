// The open waves' progress on the candidate: which nodes a rollout waits for, and how each does.
// Two sources give the same answers: a walk over the whole fleet (pure, for decide's tests,
// `simulate` and the reference), and the controller's FleetIndex (fleet-index.ts), which keeps the
// answers up to date one Lease or Node event at a time so that a pass over 10,000 nodes does not
// walk them all. A property test holds them equal.
import type { AppliedResult, PublishedState } from '../fleet/applied-state.js';
import { passPendingUnder } from '../fleet/applied-state.js';
import type { RolloutState } from '../rollout-state/state.js';
import { waveIndexOf } from '../rollout-state/membership.js';
import type { FleetNode } from './waves.js';

const NOT_APPLIED: readonly AppliedResult[] = ['rejected', 'refused', 'rolled-back', 'failed'];

/** One node of an open wave against the candidate. */
export type NodeProgress =
  | { readonly kind: 'applied' }
  | { readonly kind: 'pending'; readonly why: string }
  | { readonly kind: 'failed'; readonly why: string }
  | { readonly kind: 'gone' };

export function isStale(report: PublishedState, now: number): boolean {
  return report.heartbeatAt !== undefined && report.staleAfterMs > 0 && now - report.heartbeatAt > report.staleAfterMs;
}

/** Whether the report had gone stale before `at`. */
export function staleBefore(report: PublishedState, at: number): boolean {
  return report.heartbeatAt !== undefined && report.staleAfterMs > 0 && report.heartbeatAt + report.staleAfterMs < at;
}

/** When the report turns stale (it is stale once `now` is past this); undefined: never. */
export function staleAt(report: PublishedState): number | undefined {
  return report.heartbeatAt !== undefined && report.staleAfterMs > 0
    ? report.heartbeatAt + report.staleAfterMs
    : undefined;
}

/** A fresh report's progress on the candidate (what it says, whatever the time). */
export function reportedProgress(candidateHash: string, report: PublishedState): NodeProgress {
  if (report.appliedHash === candidateHash) {
    const errors = report.errorsSinceApply ?? 0;
    if (errors > 0)
      return {
        kind: 'failed',
        why: `${String(errors)} discovery or cleanup error${errors === 1 ? '' : 's'} since it applied the candidate`,
      };
    // Healthy only once a discovery pass under it finished: its errors are counted by then.
    if (passPendingUnder(report, candidateHash))
      return { kind: 'pending', why: 'applied the candidate; no discovery pass under it has finished yet' };
    return { kind: 'applied' };
  }
  if (NOT_APPLIED.includes(report.result) && report.candidateHash === candidateHash)
    return {
      kind: 'failed',
      why: `${report.result} the candidate${report.reason !== undefined ? `: ${report.reason}` : ''}`,
    };
  return { kind: 'pending', why: `runs ${report.appliedHash.slice(0, 15)}` };
}

/** Whether a node of an open wave runs the candidate healthily, waits, or halts the rollout. */
export function nodeProgress(
  node: string,
  candidateHash: string,
  report: PublishedState | undefined,
  exists: boolean,
  now: number,
): NodeProgress {
  if (!exists) return { kind: 'gone' };
  if (report === undefined) return { kind: 'pending', why: 'no status Lease yet' };
  if (isStale(report, now))
    return { kind: 'failed', why: `its heartbeat is stale (last ${new Date(report.heartbeatAt ?? 0).toISOString()})` };
  return reportedProgress(candidateHash, report);
}

/** A node of an open wave, with why it fails or waits. */
export interface OpenWaveNode {
  readonly node: string;
  readonly wave: number;
  readonly why: string;
}

/** What a decision needs of the open waves. */
export interface OpenWaveProgress {
  readonly applied: number;
  readonly pending: number;
  /** Failing nodes: a stale heartbeat, the candidate refused, errors since applying it. */
  readonly failed: number;
  /** The first failing node in wave order, then by name (the same whatever the order events came in). */
  readonly firstFailure: OpenWaveNode | undefined;
  /** The first pending node in wave order, then by name; may look at every pending node (ask at a deadline). */
  firstPending(): OpenWaveNode | undefined;
  /** When the first node of the open waves whose heartbeat is fresh now turns stale (a halt to notice). */
  readonly nextStaleAt: number | undefined;
}

/** The open waves' progress of `state` at `now`. */
export type OpenWaveSource = (state: RolloutState, now: number) => OpenWaveProgress;

/** Wave order, then name order. */
export function beforeInWaveOrder(a: { node: string; wave: number }, b: { node: string; wave: number }): boolean {
  return a.wave < b.wave || (a.wave === b.wave && a.node < b.node);
}

/**
 * Whether `node` is one the rollout waits for, and in which wave: its wave is open and its agent
 * runs or ran since the rollout started (a status Lease not already stale when it started). A
 * Node without an agent runs stable, as at the start; one that joins later is in its wave by rank
 * and counts once its agent publishes.
 */
export function openWaveOf(state: RolloutState, node: string, report: PublishedState | undefined): number | undefined {
  const wave = rolloutWaveOf(state, node, report);
  return wave !== undefined && wave < state.opened ? wave : undefined;
}

/** The wave, open or not, of a node whose agent runs or ran since the rollout started. */
export function rolloutWaveOf(
  state: RolloutState,
  node: string,
  report: PublishedState | undefined,
): number | undefined {
  if (report === undefined || staleBefore(report, state.startedAt)) return undefined;
  return waveIndexOf(state.waves, node);
}

/** The open waves' progress by a walk over every node (the reference the FleetIndex must equal). */
export function walkOpenWaves(
  nodes: readonly FleetNode[],
  reports: ReadonlyMap<string, PublishedState>,
  state: RolloutState,
  now: number,
): OpenWaveProgress {
  const hash = state.candidate.hash ?? '';
  const counts = { applied: 0, pending: 0, failed: 0 };
  let firstFailure: OpenWaveNode | undefined;
  let firstPending: OpenWaveNode | undefined;
  let nextStaleAt: number | undefined;
  for (const { name } of nodes) {
    const report = reports.get(name);
    const wave = openWaveOf(state, name, report);
    if (wave === undefined || report === undefined) continue;
    const p = nodeProgress(name, hash, report, true, now);
    if (p.kind === 'gone') continue;
    counts[p.kind] += 1;
    const here = { node: name, wave, why: p.kind === 'applied' ? '' : p.why };
    if (p.kind === 'failed' && (firstFailure === undefined || beforeInWaveOrder(here, firstFailure)))
      firstFailure = here;
    if (p.kind === 'pending' && (firstPending === undefined || beforeInWaveOrder(here, firstPending)))
      firstPending = here;
    const at = staleAt(report);
    if (at !== undefined && !isStale(report, now)) nextStaleAt = Math.min(nextStaleAt ?? Infinity, at + 1);
  }
  return { ...counts, firstFailure, firstPending: () => firstPending, nextStaleAt };
}
