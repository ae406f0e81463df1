// `provisioner rollout pause|resume|abort|promote`: the operator's request to the staged rollout
// controller. The CLI checks it against the state on NAME-candidate, writes it there as an
// annotation (a merge patch conditional on the resourceVersion it checked, so the state cannot
// change in between), and the controller carries it out and clears it (decide.ts applyRequest,
// whose phase rules requestProblem mirrors). requestProblem and requestOutcome are pure;
// submitRequest and waitForRequest do the reads and the write.
import type { Clock } from '../clock.js';
import { isAborted } from '../clock.js';
import { RolloutRequestError, StartupError } from '../errors.js';
import { isConflict, isNotFound, KubeApiError } from '../kube/cluster.js';
import type { ResourceClient } from '../kube/cluster.js';
import type { ConfigMap } from '../kube/objects.js';
import { errorMessage } from '../unknown-values.js';
import { ROLLOUT_REQUEST_ANNOTATION, stagedConfigMapName, stateOf } from '../rollout-state/annotations.js';
import type { RolloutAction, RolloutPhase, RolloutRequest, RolloutState } from '../rollout-state/state.js';
import { ACTIVE_PHASES, encodeRolloutRequest } from '../rollout-state/state.js';

export interface RequestCluster {
  readonly configMaps: ResourceClient<ConfigMap>;
}

/** The operator's ConfigMap whose staged rollout the request is about. */
export interface RequestTarget {
  readonly namespace: string;
  readonly name: string;
}

/** The phase each action leads to once the controller has carried it out. */
export const EXPECTED_PHASE: Readonly<Record<RolloutAction, RolloutPhase>> = {
  pause: 'paused',
  resume: 'progressing',
  abort: 'aborted',
  promote: 'complete',
};

/** Why `action` does not fit `state` (the controller would drop it), or undefined. */
export function requestProblem(action: RolloutAction, state: RolloutState): string | undefined {
  const phase = state.phase;
  switch (action) {
    case 'pause':
      return phase === 'progressing' ? undefined : `the rollout is ${phase}; only a progressing rollout can be paused`;
    case 'resume':
      return phase === 'paused' || phase === 'halted'
        ? undefined
        : `the rollout is ${phase}; only a paused or halted rollout can be resumed`;
    case 'abort':
      return ACTIVE_PHASES.includes(phase)
        ? undefined
        : `the rollout is ${phase}; only a progressing, paused or halted rollout can be aborted`;
    case 'promote':
      if (phase === 'complete') return 'the rollout is complete; its candidate is the stable config already';
      if (phase === 'invalid' || state.candidate.hash === undefined)
        return 'the candidate does not parse; it cannot be promoted (fix the ConfigMap: a new apply starts a new rollout)';
      return undefined;
  }
}

/** A request written, and the state it was checked against. */
export interface SubmittedRequest {
  readonly target: RequestTarget;
  readonly request: RolloutRequest;
  /** The annotation's text as written: the controller clears it (or someone replaces it). */
  readonly raw: string;
  readonly before: RolloutState;
}

export type RequestOutcome = 'requested' | 'done' | 'dropped' | 'replaced' | 'timed-out';

export interface RequestResult extends SubmittedRequest {
  readonly outcome: RequestOutcome;
  /** The state last read (with --wait), else the one the request was checked against. */
  readonly after: RolloutState | undefined;
  /** Why it was dropped or replaced. */
  readonly detail?: string;
  readonly waitedMs?: number;
}

function apiError(what: string, err: unknown): StartupError {
  const hint =
    err instanceof KubeApiError && err.status === 403 ? ' (see docs/rollout-status.md for the permissions needed)' : '';
  return new StartupError(`cannot ${what}: ${errorMessage(err)}${hint}`);
}

function where(target: RequestTarget): string {
  return `${target.namespace}/${stagedConfigMapName(target.name, 'candidate')}`;
}

/** NAME-candidate, or undefined when it does not exist. */
async function readCandidate(cluster: RequestCluster, target: RequestTarget): Promise<ConfigMap | undefined> {
  try {
    return await cluster.configMaps.get(stagedConfigMapName(target.name, 'candidate'), {
      namespace: target.namespace,
    });
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw apiError(`read configmap ${where(target)}`, err);
  }
}

function notStaged(target: RequestTarget, why: string): RolloutRequestError {
  return new RolloutRequestError(
    'not-staged',
    `no staged rollout of configmap ${target.namespace}/${target.name}: ${why}`,
  );
}

/** The state on NAME-candidate, or the refusal: no staged rollout. */
function stateOrRefuse(target: RequestTarget, candidate: ConfigMap | undefined): RolloutState {
  if (candidate === undefined)
    throw notStaged(
      target,
      `${where(target)} does not exist (staged rollout is off, or its controller has not started)`,
    );
  const decoded = stateOf(candidate);
  if (decoded === undefined) throw notStaged(target, `${where(target)} has no rollout state`);
  if (!decoded.ok) throw notStaged(target, `the rollout state on ${where(target)} is unreadable (${decoded.reason})`);
  return decoded.state;
}

/** Writes conflict-retried this often: the controller writing the state in between each time. */
const MAX_ATTEMPTS = 5;

/**
 * Checks `action` against the current state and writes the request for its candidate. Refuses
 * (RolloutRequestError, exit 1) without a staged rollout or when the phase does not fit; a request
 * not yet taken up is replaced (the last one wins).
 */
export async function submitRequest(
  cluster: RequestCluster,
  target: RequestTarget,
  action: RolloutAction,
  options: { readonly now: () => number; readonly by?: string },
): Promise<SubmittedRequest> {
  for (let attempt = 1; ; attempt++) {
    const candidate = await readCandidate(cluster, target);
    const state = stateOrRefuse(target, candidate);
    const problem = requestProblem(action, state);
    if (problem !== undefined)
      throw new RolloutRequestError('phase', `cannot ${action} the staged rollout of ${target.name}: ${problem}`);
    const request: RolloutRequest = {
      action,
      candidate: state.candidate.fingerprint,
      ...(options.by !== undefined && options.by !== '' ? { by: options.by.slice(0, 253) } : {}),
      at: options.now(),
    };
    const raw = encodeRolloutRequest(request);
    const resourceVersion = candidate?.metadata.resourceVersion;
    try {
      await cluster.configMaps.patch(
        stagedConfigMapName(target.name, 'candidate'),
        {
          // The precondition: the state checked above is the one the request meets.
          metadata: {
            ...(resourceVersion !== undefined ? { resourceVersion } : {}),
            annotations: { [ROLLOUT_REQUEST_ANNOTATION]: raw },
          },
        },
        { namespace: target.namespace },
      );
      return { target, request, raw, before: state };
    } catch (err) {
      if (isConflict(err) && attempt < MAX_ATTEMPTS) continue;
      if (isNotFound(err)) throw notStaged(target, `${where(target)} was deleted`);
      throw apiError(`write the request on configmap ${where(target)}`, err);
    }
  }
}

/** The result of a request written and not waited for. */
export function requestedResult(submitted: SubmittedRequest): RequestResult {
  return { ...submitted, outcome: 'requested', after: submitted.before };
}

function sameHalt(a: RolloutState, b: RolloutState): boolean {
  return a.halt?.at === b.halt?.at && a.halt?.node === b.halt?.node;
}

/** Whether `after` shows the request carried out on its candidate. */
function carriedOut(submitted: SubmittedRequest, after: RolloutState): boolean {
  if (after.candidate.fingerprint !== submitted.request.candidate) return false;
  switch (submitted.request.action) {
    case 'pause':
    case 'abort':
    case 'promote':
      return after.phase === EXPECTED_PHASE[submitted.request.action];
    case 'resume':
      // Resumed, and maybe on already: complete, or halted again (on another halt than before).
      return (
        after.phase === 'progressing' ||
        after.phase === 'complete' ||
        (after.phase === 'halted' && !sameHalt(after, submitted.before))
      );
  }
}

/**
 * Where a written request stands, from NAME-candidate as read now (undefined: deleted): pending
 * while the annotation is still ours; done when the controller cleared it and the state shows
 * it carried out; replaced when another request took its place first; otherwise dropped (the
 * phase changed meanwhile, or a new apply superseded the candidate).
 */
export function requestOutcome(
  submitted: SubmittedRequest,
  candidate: ConfigMap | undefined,
): {
  readonly outcome: 'pending' | 'done' | 'dropped' | 'replaced';
  readonly after?: RolloutState;
  readonly detail?: string;
} {
  if (candidate === undefined) return { outcome: 'dropped', detail: `${where(submitted.target)} was deleted` };
  const decoded = stateOf(candidate);
  const after = decoded?.ok === true ? decoded.state : undefined;
  const withState = after !== undefined ? { after } : {};
  const raw = candidate.metadata.annotations?.[ROLLOUT_REQUEST_ANNOTATION];
  if (raw === submitted.raw) return { outcome: 'pending', ...withState };
  if (after !== undefined && carriedOut(submitted, after)) return { outcome: 'done', after };
  if (raw !== undefined)
    return { outcome: 'replaced', ...withState, detail: 'another request took its place before the controller acted' };
  if (after === undefined)
    return { outcome: 'dropped', detail: `the state on ${where(submitted.target)} is unreadable` };
  if (after.candidate.fingerprint !== submitted.request.candidate)
    return { outcome: 'dropped', after, detail: 'a new config superseded the candidate' };
  return {
    outcome: 'dropped',
    after,
    detail: `the rollout is ${after.phase}: ${submitted.request.action} no longer applied when the controller took it up`,
  };
}

export interface RequestWaitOptions {
  readonly clock: Clock;
  readonly timeoutMs: number;
  /** Between two reads (default 1 s). */
  readonly intervalMs?: number;
  readonly signal?: AbortSignal;
}

/** Reads NAME-candidate until the controller took the request up (or another replaced it), or the timeout. */
export async function waitForRequest(
  cluster: RequestCluster,
  submitted: SubmittedRequest,
  options: RequestWaitOptions,
): Promise<RequestResult> {
  const { clock } = options;
  const started = clock.now();
  const deadline = started + options.timeoutMs;
  const interval = options.intervalMs ?? 1000;
  for (;;) {
    const seen = requestOutcome(submitted, await readCandidate(cluster, submitted.target));
    const waitedMs = clock.now() - started;
    const common = {
      ...submitted,
      after: seen.after,
      waitedMs,
      ...(seen.detail !== undefined ? { detail: seen.detail } : {}),
    };
    if (seen.outcome !== 'pending') return { ...common, outcome: seen.outcome };
    const left = deadline - clock.now();
    if (left <= 0 || (options.signal !== undefined && isAborted(options.signal)))
      return {
        ...common,
        outcome: 'timed-out',
        detail:
          'the staged rollout controller has not taken the request up (is `provisioner rollout controller` running?)',
      };
    await clock.sleep(Math.min(interval, left), options.signal).catch(() => undefined);
  }
}
