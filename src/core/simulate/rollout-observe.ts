// How a staged replay reads what the rollout did, without asking the controller or the agents:
// the rollout state the controller writes on the candidate ConfigMap (each write compared with the
// object it replaced: a wave opened, a halt, a promotion…) and the status Leases the agents publish
// (each compared with the node's previous one: applied, back on stable, not applied, errors). Pure.
import type { PublishedState } from '../fleet/applied-state.js';
import type { ConfigMap } from '../kube/objects.js';
import { requestOf, stateOf } from '../rollout-state/annotations.js';
import { ACTIVE_PHASES } from '../rollout-state/state.js';
import type { RolloutState } from '../rollout-state/state.js';
import { waveMembers } from '../rollout-state/membership.js';
import type { FleetNodeEvent, RolloutEvent } from './report.js';

function stateIn(object: ConfigMap | undefined): RolloutState | undefined {
  const decoded = stateOf(object);
  return decoded?.ok === true ? decoded.state : undefined;
}

function waveName(state: RolloutState, index: number): string | undefined {
  return state.waves[index]?.name;
}

/** The events of a rollout that starts over with a new candidate (or the first state ever). */
function fresh(prev: RolloutState | undefined, next: RolloutState, fleet: readonly string[]): RolloutEvent[] {
  const out: RolloutEvent[] = [];
  if (prev === undefined && next.phase === 'complete' && next.waves.length === 0)
    return [{ type: 'rollout-adopted', ...hash('configHash', next.stable.hash) }];
  if (prev !== undefined && ACTIVE_PHASES.includes(prev.phase) && next.phase !== 'aborted')
    out.push({
      type: 'rollout-superseded',
      ...hash('previous', prev.candidate.hash),
      ...hash('candidate', next.candidate.hash),
    });
  const members = waveMembers(next.waves, fleet);
  switch (next.phase) {
    case 'progressing':
    case 'paused':
      out.push({
        type: 'rollout-started',
        ...hash('candidate', next.candidate.hash),
        ...hash('stable', next.stable.hash),
        waves: next.waves.map((w, i) => ({ name: w.name, nodes: members[i] ?? [] })),
      });
      for (let i = 0; i < next.opened; i++) {
        const wave = next.waves[i];
        if (wave) out.push({ type: 'rollout-wave-opened', wave: wave.name, nodes: members[i] ?? [] });
      }
      return out;
    case 'invalid':
      return [...out, { type: 'rollout-invalid', reason: next.message ?? 'invalid' }];
    case 'halted':
      return [...out, halted(next)];
    case 'complete':
      return [...out, { type: 'rollout-unchanged', ...hash('stable', next.stable.hash) }];
    case 'aborted':
      return [...out, { type: 'rollout-aborted', cause: 'configmap', ...hash('stable', next.stable.hash) }];
  }
}

function hash<K extends string>(key: K, value: string | undefined): Partial<Record<K, string>> {
  return value === undefined ? {} : ({ [key]: value } as Partial<Record<K, string>>);
}

function halted(state: RolloutState): RolloutEvent {
  const halt = state.halt;
  const wave = halt !== undefined ? waveName(state, halt.wave) : undefined;
  return {
    type: 'rollout-halted',
    ...(wave !== undefined ? { wave } : {}),
    node: halt?.node ?? '',
    reason: halt?.reason ?? state.message ?? 'halted',
    reverted: state.reverted,
    ...hash('stable', state.stable.hash),
  };
}

/**
 * What a write of the candidate ConfigMap says the controller did: `before` is the object it
 * replaced (with the operator's request, if any), `after` the one written; `bakeMs` the policy's;
 * `fleet` the node names, whose waves the state's rank bounds give.
 */
export function rolloutEvents(
  before: ConfigMap | undefined,
  after: ConfigMap,
  bakeMs: number,
  fleet: readonly string[],
): RolloutEvent[] {
  const prev = stateIn(before);
  const next = stateIn(after);
  if (next === undefined) return [];
  if (prev === undefined || prev.candidate.fingerprint !== next.candidate.fingerprint) return fresh(prev, next, fleet);
  const members = waveMembers(next.waves, fleet);
  const request = requestOf(before);
  const by = request?.by !== undefined ? { by: request.by } : {};
  const out: RolloutEvent[] = [];
  const resumed = (prev.phase === 'paused' || prev.phase === 'halted') && next.phase === 'progressing';
  if (resumed) out.push({ type: 'rollout-resumed', ...by });
  for (let i = prev.opened; i < next.opened; i++) {
    const wave = next.waves[i];
    if (wave) out.push({ type: 'rollout-wave-opened', wave: wave.name, nodes: members[i] ?? [] });
  }
  // With no bake time the next wave opens at the same instant: nothing to say about the bake.
  if (prev.bakeStartedAt === undefined && next.bakeStartedAt !== undefined && bakeMs > 0) {
    const wave = waveName(next, next.opened - 1);
    if (wave !== undefined) out.push({ type: 'rollout-baking', wave, bakeMs });
  }
  if (prev.phase !== next.phase) {
    switch (next.phase) {
      case 'halted':
        out.push(halted(next));
        break;
      case 'paused': {
        const wave = waveName(next, next.opened - 1);
        out.push({ type: 'rollout-paused', ...(wave !== undefined ? { wave } : {}), ...by });
        break;
      }
      case 'aborted':
        out.push({
          type: 'rollout-aborted',
          cause: request?.action === 'abort' ? 'request' : 'configmap',
          ...hash('stable', next.stable.hash),
          ...by,
        });
        break;
      case 'complete':
        out.push(
          request?.action === 'promote'
            ? { type: 'rollout-promoted', ...hash('candidate', next.candidate.hash), ...by }
            : {
                type: 'rollout-completed',
                ...hash('candidate', next.candidate.hash),
                waves: next.waves.length,
                nodes: next.waves.reduce((n, w) => n + w.size, 0),
              },
        );
        break;
      case 'progressing':
      case 'invalid':
        break;
    }
  }
  return out;
}

const NOT_APPLIED = new Set(['rejected', 'refused', 'rolled-back', 'failed']);

/** What the rollout knows of the configs a node may run: the current candidate and stable, and earlier candidates. */
export interface RolloutConfigs {
  readonly candidate?: string;
  readonly stable?: string;
  /** Hashes that were candidates and are not stable now: a node leaving one for stable reverted. */
  readonly pastCandidates: ReadonlySet<string>;
}

/** What a node's new status Lease says it did, against its previous one (none: its first, nothing to say). */
export function leaseEvents(
  prev: PublishedState | undefined,
  next: PublishedState,
  configs: RolloutConfigs,
): FleetNodeEvent[] {
  if (prev === undefined) return [];
  const node = next.node;
  const out: FleetNodeEvent[] = [];
  const changed = prev.appliedHash !== next.appliedHash;
  if (changed) {
    if (
      next.appliedHash === configs.stable &&
      prev.appliedHash !== configs.stable &&
      (configs.pastCandidates.has(prev.appliedHash) || prev.appliedHash === configs.candidate)
    )
      out.push({ type: 'node-reverted', node, hash: next.appliedHash, generation: next.generation });
    else
      out.push({
        type: 'node-applied',
        node,
        hash: next.appliedHash,
        config:
          next.appliedHash === configs.stable
            ? 'stable'
            : next.appliedHash === configs.candidate
              ? 'candidate'
              : 'other',
        generation: next.generation,
      });
  } else if (
    NOT_APPLIED.has(next.result) &&
    (prev.result !== next.result || prev.candidateHash !== next.candidateHash || prev.reason !== next.reason)
  ) {
    out.push({
      type: 'node-not-applied',
      node,
      result: next.result,
      ...(next.candidateHash !== undefined ? { hash: next.candidateHash } : {}),
      ...(next.reason !== undefined ? { reason: next.reason } : {}),
    });
  }
  const errors = next.errorsSinceApply ?? 0;
  if (errors > 0 && (changed || errors > (prev.errorsSinceApply ?? 0)))
    out.push({ type: 'node-errors', node, errors, hash: next.appliedHash });
  return out;
}
