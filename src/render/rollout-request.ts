// Text and JSON renderings of `rollout pause|resume|abort|promote`. The JSON is a documented
// contract (docs/rollout-status.md, docs/schemas/rollout-request.v1.schema.json).
import type { RequestOutcome, RequestResult } from '../core/staged-rollout/requests.js';
import type { ContentRef, RolloutAction, RolloutPhase } from '../core/rollout-state/state.js';
import { RolloutExit } from './rollout-status.js';
import { shortHash } from './text.js';

export const REQUEST_FORMAT_VERSION = 1;

/** The exit codes (docs/exit-codes.md): 0 written (or carried out), 1 not carried out, 6 not taken up in time. */
export function requestExitCode(outcome: RequestOutcome): 0 | 1 | 6 {
  if (outcome === 'requested' || outcome === 'done') return RolloutExit.Complete;
  if (outcome === 'timed-out') return RolloutExit.NotDone;
  return RolloutExit.Rejected;
}

export interface RequestJson {
  readonly formatVersion: typeof REQUEST_FORMAT_VERSION;
  readonly action: RolloutAction;
  /** The operator's ConfigMap, NAMESPACE/NAME (the request is on NAME-candidate). */
  readonly configMap: string;
  readonly outcome: RequestOutcome;
  /** The annotation written. */
  readonly request: {
    readonly action: RolloutAction;
    readonly candidate: string;
    readonly by?: string;
    readonly at: string;
  };
  /** The candidate the request is for. */
  readonly candidate: ContentRef;
  /** The phase the request was checked against. */
  readonly phaseBefore: RolloutPhase;
  /** The phase last read (absent: the state could not be read). */
  readonly phase?: RolloutPhase;
  readonly message?: string;
  /** Why it was not carried out, or not taken up. */
  readonly detail?: string;
  /** --wait only. */
  readonly waitedSeconds?: number;
}

export function toRequestJson(result: RequestResult): RequestJson {
  const { request, before, after } = result;
  const candidate = before.candidate;
  return {
    formatVersion: REQUEST_FORMAT_VERSION,
    action: request.action,
    configMap: `${result.target.namespace}/${result.target.name}`,
    outcome: result.outcome,
    request: {
      action: request.action,
      candidate: request.candidate,
      ...(request.by !== undefined ? { by: request.by } : {}),
      at: new Date(request.at).toISOString(),
    },
    candidate: candidate.hash === undefined ? { fingerprint: candidate.fingerprint } : { ...candidate },
    phaseBefore: before.phase,
    ...(after !== undefined ? { phase: after.phase } : {}),
    ...(after?.message !== undefined ? { message: after.message } : {}),
    ...(result.detail !== undefined ? { detail: result.detail } : {}),
    ...(result.waitedMs !== undefined ? { waitedSeconds: Math.round(result.waitedMs / 100) / 10 } : {}),
  };
}

const DONE: Readonly<Record<RolloutAction, string>> = {
  pause: 'paused',
  resume: 'resumed',
  abort: 'aborted',
  promote: 'promoted',
};

export function renderRequestText(result: RequestResult): string {
  const { request, before, after } = result;
  const of = `the staged rollout of configmap ${result.target.namespace}/${result.target.name}`;
  const candidate = `candidate ${shortHash(before.candidate.hash)}`;
  const lines: string[] = [];
  switch (result.outcome) {
    case 'requested':
      lines.push(
        `${request.action} requested for ${of} (${candidate}, ${before.phase}); the controller carries it out (\`rollout status\` shows it, \`--wait\` waits for it)`,
      );
      break;
    case 'done': {
      const now = after !== undefined && after.phase !== before.phase ? `; now ${after.phase}` : '';
      lines.push(`${DONE[request.action]} ${of} (${candidate})${now}`);
      break;
    }
    case 'dropped':
    case 'replaced':
      lines.push(`${request.action} not carried out on ${of}: ${result.detail ?? result.outcome}`);
      break;
    case 'timed-out':
      lines.push(
        `${request.action} requested for ${of}, not taken up within ${String(Math.round((result.waitedMs ?? 0) / 1000))}s: ${result.detail ?? ''}`,
      );
      break;
  }
  if (result.outcome !== 'requested' && after?.message !== undefined) lines.push(`message: ${after.message}`);
  return `${lines.join('\n')}\n`;
}
