// Capped, jittered exponential backoff that forgets its failures only after a period of health,
// like client-go's ExponentialBackoffManager (800 ms, ×2, cap 30 s, jitter 1.0, reset after 2 min).
// A success alone does not reset it: a loop whose every cycle "succeeds" a little (a LIST that is
// allowed) and then fails at once (a WATCH that is forbidden) must still slow down.
import type { Clock } from './clock.js';

export interface BackoffOptions {
  readonly clock: Clock;
  readonly initialMs?: number;
  /** Cap of the base delay; the jittered delay is in [base, 2·base), so never above 2·maxMs. */
  readonly maxMs?: number;
  /** Healthy this long since the end of the last delay: the next delay starts from initialMs again. */
  readonly resetAfterMs?: number;
  readonly random?: () => number;
}

export class Backoff {
  private steps = 0;
  /** When the last delay ended (ms since epoch), undefined before the first one. */
  private lastEnd: number | undefined;

  constructor(private readonly options: BackoffOptions) {}

  /** No failure counted, or healthy long enough since the last one: the next delay is the initial one. */
  get fresh(): boolean {
    return (
      this.steps === 0 ||
      (this.lastEnd !== undefined && this.options.clock.now() - this.lastEnd >= (this.options.resetAfterMs ?? 120_000))
    );
  }

  /** The next delay (ms); counts one more failure. */
  next(): number {
    const initial = this.options.initialMs ?? 800;
    const max = this.options.maxMs ?? 30_000;
    const now = this.options.clock.now();
    if (this.fresh) this.steps = 0;
    const base = Math.min(max, initial * 2 ** Math.min(this.steps, 30));
    this.steps += 1;
    const delay = Math.round(base * (1 + (this.options.random ?? Math.random)()));
    this.lastEnd = now + delay;
    return delay;
  }
}
