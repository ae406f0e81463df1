// Capped, jittered exponential backoff that forgets its failures only after a period of health,
// like client-go's ExponentialBackoffManager (800 ms, ×2, cap 30 s, jitter 1.0, reset after 2 min).
// A success alone does not reset it: a loop whose every cycle "succeeds" a little (a LIST that is
// allowed) and then fails at once (a WATCH that is forbidden) must still slow down.
// backoffDelay is the one computation of an exponential delay: the Backoff class and every loop
// that counts its own failures (the cleanup table, the config watcher, the dashboard's feed) use it.
import type { Clock } from './clock.js';

export interface BackoffDelayOptions {
  /** The first delay (no failure before it). */
  readonly initialMs: number;
  /** Cap of the base delay (jitter comes on top). */
  readonly maxMs: number;
  /** Growth per failure; default 2. */
  readonly factor?: number;
  /** Jittered delay in [base, base·(1 + jitter)), rounded to whole ms; default 0: the base delay as it is. */
  readonly jitter?: number;
  readonly random?: () => number;
}

/**
 * The delay after `failures` earlier failures: initialMs·factor^failures (initialMs for 0), capped
 * at maxMs, then jittered. Pure; the caller counts the failures.
 */
export function backoffDelay(failures: number, options: BackoffDelayOptions): number {
  const { initialMs, maxMs, factor = 2, jitter = 0 } = options;
  // initialMs 0 stays 0 however many failures (0 × Infinity would be NaN); a growth past the
  // largest number is Infinity, which the cap turns into maxMs.
  const base = Math.min(maxMs, initialMs <= 0 ? 0 : initialMs * factor ** Math.max(0, failures));
  if (jitter <= 0) return base;
  return Math.round(base * (1 + jitter * (options.random ?? Math.random)()));
}

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
    const now = this.options.clock.now();
    if (this.fresh) this.steps = 0;
    const delay = backoffDelay(this.steps, {
      initialMs: this.options.initialMs ?? 800,
      maxMs: this.options.maxMs ?? 30_000,
      jitter: 1,
      ...(this.options.random !== undefined ? { random: this.options.random } : {}),
    });
    this.steps += 1;
    this.lastEnd = now + delay;
    return delay;
  }
}
