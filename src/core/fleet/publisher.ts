// Publishes one agent's applied state as its status Lease: at once when the state changes, and a
// jittered heartbeat (default every 60 s) otherwise. One write in flight at a time; a failed write
// is retried with the shared Backoff a bounded number of times, then left to the next heartbeat or
// change. It never stops or slows the agent: every failure is logged and forgotten.
import { Backoff } from '../backoff.js';
import type { Clock } from '../clock.js';
import { isAborted } from '../clock.js';
import { isConflict, isNotFound } from '../kube/cluster.js';
import type { ResourceClient } from '../kube/cluster.js';
import type { Lease } from '../kube/objects.js';
import type { Logger } from '../log.js';
import { sameState, statusLease } from './applied-state.js';
import type { AppliedState, StatusLeaseTarget } from './applied-state.js';
import { errorMessage } from '../unknown-values.js';

export interface StatePublisherOptions {
  readonly leases: ResourceClient<Lease>;
  readonly target: StatusLeaseTarget;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Heartbeat period (default 60 s), jittered by ±10 %. */
  readonly heartbeatMs?: number;
  /** Attempts of one write before waiting for the next heartbeat (default 5). */
  readonly maxAttempts?: number;
  readonly random?: () => number;
}

export const DEFAULT_HEARTBEAT_MS = 60_000;
/** A reader calls the state stale after this many heartbeat periods without one. */
export const STALE_HEARTBEATS = 3;
const DEFAULT_MAX_ATTEMPTS = 5;

export class StatePublisher {
  private readonly heartbeatMs: number;
  private readonly maxAttempts: number;
  private readonly random: () => number;
  private readonly backoff: Backoff;
  private readonly stopped = new AbortController();
  private wake = new AbortController();
  private desired: AppliedState | undefined;
  private published: AppliedState | undefined;
  /** The Lease as last written or read: its resourceVersion makes the next write an update. */
  private lease: Lease | undefined;
  private loop: Promise<void> | undefined;
  /** Writes sent (tests and the benchmark count them). */
  writes = 0;

  constructor(private readonly options: StatePublisherOptions) {
    this.heartbeatMs = options.heartbeatMs ?? DEFAULT_HEARTBEAT_MS;
    this.maxAttempts = Math.max(1, options.maxAttempts ?? DEFAULT_MAX_ATTEMPTS);
    this.random = options.random ?? Math.random;
    this.backoff = new Backoff({ clock: options.clock, initialMs: 500, maxMs: 15_000, random: this.random });
  }

  /** Starts publishing `state` (first write at once). */
  start(state: AppliedState): void {
    this.desired = state;
    this.loop ??= this.run();
  }

  /** The agent's state now: written at once when it differs from the last one written. */
  update(state: AppliedState): void {
    this.desired = state;
    if (this.published === undefined || !sameState(this.published, state)) this.wake.abort();
  }

  /** Stops the loop; a write in flight is abandoned. */
  async stop(): Promise<void> {
    this.stopped.abort();
    this.wake.abort();
    await this.loop;
  }

  private jittered(): number {
    return Math.round(this.heartbeatMs * (0.9 + 0.2 * this.random()));
  }

  private async run(): Promise<void> {
    const { clock } = this.options;
    while (!isAborted(this.stopped.signal)) {
      const state = this.desired;
      if (state !== undefined) await this.publish(state);
      if (isAborted(this.stopped.signal)) return;
      // A change that arrived during the write is written at once.
      if (this.desired !== undefined && this.published !== undefined && !sameState(this.published, this.desired))
        continue;
      this.wake = new AbortController();
      await clock.sleep(this.jittered(), this.wake.signal).catch(() => undefined);
    }
  }

  /** Writes `state` with bounded retries; false when every attempt failed. */
  private async publish(state: AppliedState): Promise<boolean> {
    const { clock, logger, target } = this.options;
    for (let attempt = 1; attempt <= this.maxAttempts; attempt++) {
      if (isAborted(this.stopped.signal)) return false;
      try {
        await this.write(state);
        this.published = state;
        return true;
      } catch (err) {
        if (isConflict(err)) this.lease = undefined; // someone else wrote it: read it again
        const last = attempt === this.maxAttempts;
        logger.log(last ? 'warn' : 'debug', 'could not publish the applied state', {
          lease: `${target.namespace}/${target.name}`,
          attempt,
          error: errorMessage(err),
        });
        if (last) return false;
        await clock.sleep(this.backoff.next(), this.stopped.signal).catch(() => undefined);
      }
    }
    return false;
  }

  private async write(state: AppliedState): Promise<void> {
    const { leases, target, clock } = this.options;
    const staleAfterMs = this.heartbeatMs * STALE_HEARTBEATS;
    const ns = { namespace: target.namespace };
    if (this.lease === undefined) {
      try {
        this.lease = await leases.get(target.name, ns);
      } catch (err) {
        if (!isNotFound(err)) throw err;
        this.writes += 1;
        this.lease = await leases.create(statusLease(target, state, clock.now(), staleAfterMs), ns);
        return;
      }
    }
    this.writes += 1;
    try {
      this.lease = await leases.update(statusLease(target, state, clock.now(), staleAfterMs, this.lease), ns);
    } catch (err) {
      // Deleted under us (kubectl delete lease): create it again next attempt.
      if (isNotFound(err)) this.lease = undefined;
      throw err;
    }
  }
}
