// Leader election on a coordination.k8s.io Lease, as client-go's leaderelection does it, so that
// of several replicas only one acts at a time:
// - a lease is expired when its record has not changed for leaseDuration, measured on the
//   candidate's own clock from when it last saw the record change (never the remote renewTime:
//   clocks of two machines disagree);
// - every write carries the resourceVersion it was read at: a 409 Conflict means another replica
//   wrote first, and this one did not get (or lost) the lease;
// - a leader that has not renewed within renewDeadline of sending its last successful renew stops
//   acting (its term's AbortSignal aborts). renewDeadline < leaseDuration, so it stops before any
//   other replica can consider the lease expired;
// - release() clears holderIdentity, so a successor takes over at its next retry instead of
//   waiting out the lease. A stop abandons the acquire or renew in flight, whose write may still
//   land: the release waits for it, then decides from a fresh read (never from the last write's
//   resourceVersion, which that write made stale: a 409), clears the holder only while it is this
//   replica (a successor's lease is left alone), and on a 409 reads again and retries, within the
//   renew deadline. client-go's ReleaseOnCancel also re-reads and retries on a conflict, but
//   checks the holder it observed last, not the one it just read.
import type { Clock } from '../clock.js';
import { isAborted, within } from '../clock.js';
import { microTime } from './micro-time.js';
import type { Logger } from '../log.js';
import { isAlreadyExists, isConflict, isNotFound } from './cluster.js';
import type { ResourceClient } from './cluster.js';
import type { Lease } from './objects.js';
import { errorMessage } from '../unknown-values.js';

export interface LeaderElectionTiming {
  /** How long a lease record that stops changing keeps others away (client-go default 15 s). */
  readonly leaseDurationMs: number;
  /** A leader that cannot renew for this long stops acting (default 10 s; < leaseDuration). */
  readonly renewDeadlineMs: number;
  /** Time between two attempts to acquire or renew (default 2 s; < renewDeadline). */
  readonly retryPeriodMs: number;
}

export const DEFAULT_LEADER_ELECTION_TIMING: LeaderElectionTiming = {
  leaseDurationMs: 15_000,
  renewDeadlineMs: 10_000,
  retryPeriodMs: 2_000,
};

/** Why a timing cannot guarantee a single leader, or undefined (client-go's NewLeaderElector checks). */
export function leaderElectionTimingProblem(timing: LeaderElectionTiming): string | undefined {
  const { leaseDurationMs, renewDeadlineMs, retryPeriodMs } = timing;
  if (!(retryPeriodMs > 0)) return 'the retry period must be positive';
  if (!(leaseDurationMs > renewDeadlineMs))
    return 'the lease duration must be greater than the renew deadline (a leader must stop before others take over)';
  // client-go: renewDeadline > JitterFactor(1.2) * retryPeriod, so a deadline holds several attempts.
  if (!(renewDeadlineMs > 1.2 * retryPeriodMs)) return 'the renew deadline must be greater than 1.2 × the retry period';
  if (leaseDurationMs < 1000) return 'the lease duration must be at least 1s (the Lease counts whole seconds)';
  return undefined;
}

/** The holder part of a Lease (client-go's LeaderElectionRecord). */
export interface LeaseRecord {
  readonly holderIdentity: string;
  readonly leaseDurationSeconds: number;
  readonly acquireTime: string | undefined;
  readonly renewTime: string | undefined;
  readonly leaseTransitions: number;
}

export function recordOf(lease: Lease): LeaseRecord {
  const spec = lease.spec ?? {};
  return {
    holderIdentity: spec.holderIdentity ?? '',
    leaseDurationSeconds: spec.leaseDurationSeconds ?? 0,
    acquireTime: spec.acquireTime,
    renewTime: spec.renewTime,
    leaseTransitions: spec.leaseTransitions ?? 0,
  };
}

function sameRecord(a: LeaseRecord, b: LeaseRecord): boolean {
  return (
    a.holderIdentity === b.holderIdentity &&
    a.leaseDurationSeconds === b.leaseDurationSeconds &&
    a.acquireTime === b.acquireTime &&
    a.renewTime === b.renewTime &&
    a.leaseTransitions === b.leaseTransitions
  );
}

/** The lease as this candidate last read or wrote it, and when (its clock) the record last changed. */
export interface Observation {
  readonly lease: Lease;
  readonly record: LeaseRecord;
  readonly changedAt: number;
}

/** Records a lease just read: the change time moves only when the record differs from the last one seen. */
export function observe(previous: Observation | undefined, lease: Lease, nowMs: number): Observation {
  const record = recordOf(lease);
  const changed = previous === undefined || !sameRecord(previous.record, record);
  return { lease, record, changedAt: changed ? nowMs : previous.changedAt };
}

export type ElectionStep =
  /** Write this lease (create when none exists, else update at the read resourceVersion). */
  | { readonly kind: 'create' | 'update'; readonly lease: Lease; readonly acquiring: boolean }
  /** Another candidate holds an unexpired lease. */
  | { readonly kind: 'wait'; readonly holder: string; readonly expiresAt: number };

export interface ElectionTarget {
  readonly name: string;
  readonly namespace: string;
  readonly identity: string;
  readonly leaseDurationMs: number;
}

/**
 * One try to acquire or renew, as a pure decision from what was read: client-go's
 * tryAcquireOrRenew. `observation` is undefined when the lease does not exist.
 */
export function electionStep(
  target: ElectionTarget,
  observation: Observation | undefined,
  nowMs: number,
): ElectionStep {
  const now = microTime(nowMs);
  const leaseDurationSeconds = Math.max(1, Math.ceil(target.leaseDurationMs / 1000));
  if (observation === undefined) {
    return {
      kind: 'create',
      acquiring: true,
      lease: {
        apiVersion: 'coordination.k8s.io/v1',
        kind: 'Lease',
        metadata: { name: target.name, namespace: target.namespace },
        spec: {
          holderIdentity: target.identity,
          leaseDurationSeconds,
          acquireTime: now,
          renewTime: now,
          leaseTransitions: 0,
        },
      },
    };
  }
  const { record, lease } = observation;
  const mine = record.holderIdentity === target.identity;
  // The duration the holder wrote, not ours: a replica with a longer one is not cut short.
  const heldForMs = Math.max(record.leaseDurationSeconds * 1000, 0);
  const expiresAt = observation.changedAt + heldForMs;
  if (!mine && record.holderIdentity !== '' && nowMs < expiresAt) {
    return { kind: 'wait', holder: record.holderIdentity, expiresAt };
  }
  return {
    kind: 'update',
    acquiring: !mine,
    lease: {
      ...lease,
      spec: {
        ...lease.spec,
        holderIdentity: target.identity,
        leaseDurationSeconds,
        acquireTime: mine ? (record.acquireTime ?? now) : now,
        renewTime: now,
        leaseTransitions: mine ? record.leaseTransitions : record.leaseTransitions + 1,
      },
    },
  };
}

/** The lease as a release writes it: no holder, so the next candidate takes it at once. */
export function releasedLease(observation: Observation, nowMs: number): Lease {
  const now = microTime(nowMs);
  return {
    ...observation.lease,
    spec: {
      ...observation.lease.spec,
      holderIdentity: '',
      leaseDurationSeconds: 1,
      acquireTime: now,
      renewTime: now,
      leaseTransitions: observation.record.leaseTransitions,
    },
  };
}

export interface LeaderElectorOptions {
  readonly leases: ResourceClient<Lease>;
  readonly name: string;
  readonly namespace: string;
  /** Unique per replica (the pod name). */
  readonly identity: string;
  readonly timing?: LeaderElectionTiming;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly random?: () => number;
  /** Called when this replica starts (with the term's signal) and stops leading. */
  readonly onLeading?: (term: AbortSignal) => void;
  readonly onStoppedLeading?: (reason: string) => void;
}

type TryResult =
  | { readonly kind: 'held'; readonly acquiring: boolean }
  | { readonly kind: 'other'; readonly holder: string }
  /** A 409: someone else wrote the lease since it was read. */
  | { readonly kind: 'conflict' }
  | { readonly kind: 'error'; readonly error: string };

/** One read-and-clear of a release. */
type ReleaseTry =
  | { readonly kind: 'released' }
  /** Another replica holds it, or nobody (holder empty, or no lease). */
  | { readonly kind: 'not-held'; readonly holder: string }
  | { readonly kind: 'conflict' }
  | { readonly kind: 'error'; readonly error: string };

/** Writes a release tries before it leaves the lease to expire (each 409 is a write someone else made). */
const RELEASE_ATTEMPTS = 5;

export class LeaderElector {
  private readonly timing: LeaderElectionTiming;
  private readonly random: () => number;
  private observation: Observation | undefined;
  private term: AbortController | undefined;
  /** The last holder logged, so a long wait is logged once. */
  private lastHolder: string | undefined;
  /** The last acquire or renew started: a stop abandons it in flight, the release waits for it. */
  private attempt: Promise<TryResult> | undefined;
  /** Whether this replica ever sent a write: one that never did holds nothing to release. */
  private wrote = false;
  /** Terms started (tests, diagnostics). */
  terms = 0;

  constructor(private readonly options: LeaderElectorOptions) {
    this.timing = options.timing ?? DEFAULT_LEADER_ELECTION_TIMING;
    const problem = leaderElectionTimingProblem(this.timing);
    if (problem !== undefined) throw new RangeError(`leader election: ${problem}`);
    this.random = options.random ?? Math.random;
  }

  /** The current term's signal while this replica leads; undefined otherwise. Check it right before acting. */
  get leading(): AbortSignal | undefined {
    const term = this.term;
    return term !== undefined && !term.signal.aborted ? term.signal : undefined;
  }

  get identity(): string {
    return this.options.identity;
  }

  /** Campaigns until the signal aborts: acquire, renew every retry period, step down when renewal fails. */
  async run(signal: AbortSignal): Promise<void> {
    const { clock, logger } = this.options;
    const pause = async (ms: number): Promise<boolean> => {
      try {
        await clock.sleep(ms, signal);
        return true;
      } catch {
        return false;
      }
    };
    while (!isAborted(signal)) {
      // Bounded like a renewal: a hung request must not keep a stopping candidate alive.
      const result = await within(clock, this.startAttempt(), this.timing.renewDeadlineMs, signal);
      if (isAborted(signal)) break;
      const tried: TryResult = result.ok ? result.value : { kind: 'error', error: 'the request timed out' };
      if (tried.kind !== 'held') {
        if (tried.kind === 'other' && tried.holder !== this.lastHolder) {
          logger.log('info', 'leader election: another replica leads; waiting', {
            lease: `${this.options.namespace}/${this.options.name}`,
            holder: tried.holder,
          });
          this.lastHolder = tried.holder;
        } else if (tried.kind === 'error') {
          logger.log('warn', 'leader election: cannot read or write the lease', { error: tried.error });
        }
        // client-go's JitterUntil(retryPeriod, 1.2): candidates do not retry in lockstep.
        if (!(await pause(this.timing.retryPeriodMs * (1 + 1.2 * this.random())))) break;
        continue;
      }
      await this.lead(signal);
    }
    this.stepDown('stopping');
  }

  /** Holds the lease until renewal fails or the signal aborts. */
  private async lead(signal: AbortSignal): Promise<void> {
    const { clock, logger } = this.options;
    // The acquire's write was sent no later than now: the deadline counts from before it.
    let renewedAt = this.lastSentAt;
    const term = new AbortController();
    this.term = term;
    this.terms += 1;
    this.lastHolder = this.options.identity;
    logger.log('info', 'leader election: this replica leads', {
      lease: `${this.options.namespace}/${this.options.name}`,
      identity: this.options.identity,
    });
    this.options.onLeading?.(term.signal);
    const deadline = (): number => renewedAt + this.timing.renewDeadlineMs;
    while (!isAborted(signal)) {
      const sleepMs = Math.min(this.timing.retryPeriodMs, Math.max(0, deadline() - clock.now()));
      try {
        await clock.sleep(sleepMs, signal);
      } catch {
        return;
      }
      if (clock.now() >= deadline()) {
        this.stepDown(`not renewed within the renew deadline (${String(this.timing.renewDeadlineMs)} ms)`);
        return;
      }
      const sentAt = clock.now();
      const result = await within(clock, this.startAttempt(), Math.max(0, deadline() - sentAt), signal);
      if (isAborted(signal)) return;
      if (!result.ok) {
        this.stepDown(`not renewed within the renew deadline (${String(this.timing.renewDeadlineMs)} ms)`);
        return;
      }
      const tried = result.value;
      if (tried.kind === 'held') {
        renewedAt = sentAt;
        continue;
      }
      if (tried.kind === 'other' || tried.kind === 'conflict') {
        this.stepDown(
          tried.kind === 'other' ? `the lease is held by ${tried.holder}` : 'the lease was written by another replica',
        );
        return;
      }
      logger.log('warn', 'leader election: renewing the lease failed; retrying until the renew deadline', {
        error: tried.error,
        deadlineInMs: deadline() - clock.now(),
      });
    }
  }

  private stepDown(reason: string): void {
    const term = this.term;
    if (term === undefined || term.signal.aborted) return;
    term.abort(new Error(`leadership lost: ${reason}`));
    this.options.logger.log(reason === 'stopping' ? 'info' : 'warn', 'leader election: this replica stopped leading', {
      reason,
    });
    this.options.onStoppedLeading?.(reason);
  }

  private lastSentAt = 0;

  private startAttempt(): Promise<TryResult> {
    const attempt = this.tryAcquireOrRenew();
    this.attempt = attempt;
    return attempt;
  }

  private async tryAcquireOrRenew(): Promise<TryResult> {
    const { leases, clock, namespace, name } = this.options;
    let current: Observation | undefined;
    try {
      const lease = await leases.get(name, { namespace });
      current = observe(this.observation, lease, clock.now());
      this.observation = current;
    } catch (err) {
      if (!isNotFound(err)) return { kind: 'error', error: errorMessage(err) };
      current = undefined;
    }
    const step = electionStep(
      { name, namespace, identity: this.options.identity, leaseDurationMs: this.timing.leaseDurationMs },
      current,
      clock.now(),
    );
    if (step.kind === 'wait') return { kind: 'other', holder: step.holder };
    this.lastSentAt = clock.now();
    this.wrote = true;
    try {
      const written =
        step.kind === 'create'
          ? await leases.create(step.lease, { namespace })
          : await leases.update(step.lease, { namespace });
      this.observation = observe(this.observation, written, clock.now());
      return { kind: 'held', acquiring: step.acquiring };
    } catch (err) {
      // AlreadyExists (a create raced) and Conflict (an update raced): another replica wrote first.
      if (isConflict(err) || isAlreadyExists(err)) return { kind: 'conflict' };
      return { kind: 'error', error: errorMessage(err) };
    }
  }

  /**
   * Gives the lease up (holder cleared) if this replica holds it: call after run() has returned
   * and nothing acts any more. Waits for the attempt the stop abandoned, then reads the lease and
   * clears it while it is this replica's, retrying on a 409, all within the renew deadline. Best
   * effort: a failure leaves the lease to expire.
   */
  async release(): Promise<boolean> {
    const { clock, logger, namespace, name } = this.options;
    this.stepDown('stopping');
    if (!this.wrote) return false;
    const deadline = clock.now() + this.timing.renewDeadlineMs;
    // Its write may land after the stop: released before it, the lease would be taken again.
    if (this.attempt !== undefined) await within(clock, this.attempt, deadline - clock.now());
    const lease = `${namespace}/${name}`;
    let last = 'the renew deadline passed';
    for (let attempt = 1; attempt <= RELEASE_ATTEMPTS; attempt++) {
      const remaining = deadline - clock.now();
      if (remaining <= 0) break;
      const result = await within(clock, this.tryRelease(), remaining);
      const tried: ReleaseTry = result.ok ? result.value : { kind: 'error', error: 'the request timed out' };
      if (tried.kind === 'released') {
        logger.log('info', 'leader election: released the lease', { lease, attempts: attempt });
        return true;
      }
      if (tried.kind === 'not-held') {
        logger.log('info', 'leader election: nothing to release; the lease is not held by this replica', {
          lease,
          holder: tried.holder,
        });
        return false;
      }
      last = tried.kind === 'conflict' ? 'a 409: the lease was written by another replica' : tried.error;
      // A 409 is news (a write since the read): read again at once. An error gets a pause.
      if (tried.kind === 'error' && !(await this.pauseBeforeRetry(deadline))) break;
    }
    logger.log('warn', 'leader election: could not release the lease; it expires on its own', { lease, error: last });
    return false;
  }

  /** Sleeps a retry period (at most until the deadline); false when no time is left. */
  private async pauseBeforeRetry(deadline: number): Promise<boolean> {
    const { clock } = this.options;
    const ms = Math.min(this.timing.retryPeriodMs, deadline - clock.now());
    if (ms <= 0) return false;
    await clock.sleep(ms);
    return true;
  }

  /** Reads the lease, and clears the holder at the read resourceVersion if it is this replica. */
  private async tryRelease(): Promise<ReleaseTry> {
    const { leases, clock, namespace, name, identity } = this.options;
    let current: Observation;
    try {
      current = observe(this.observation, await leases.get(name, { namespace }), clock.now());
    } catch (err) {
      return isNotFound(err) ? { kind: 'not-held', holder: '' } : { kind: 'error', error: errorMessage(err) };
    }
    this.observation = current;
    if (current.record.holderIdentity !== identity) return { kind: 'not-held', holder: current.record.holderIdentity };
    try {
      const written = await leases.update(releasedLease(current, clock.now()), { namespace });
      this.observation = observe(current, written, clock.now());
      return { kind: 'released' };
    } catch (err) {
      return isConflict(err) ? { kind: 'conflict' } : { kind: 'error', error: errorMessage(err) };
    }
  }
}
