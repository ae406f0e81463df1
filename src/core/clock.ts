// The clock port: wall time and abortable sleeps. Tests and `simulate` use ManualClock.

export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** Resolves after ms, or rejects with the signal's reason when it aborts first. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

function abortReason(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new DOMException('The operation was aborted', 'AbortError');
}

/** Reads signal.aborted through a call, so the compiler does not assume it keeps a narrowed value across awaits. */
export function isAborted(signal: AbortSignal): boolean {
  return signal.aborted;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  sleep: (ms, signal) =>
    new Promise((resolve, reject) => {
      if (signal?.aborted) {
        reject(abortReason(signal));
        return;
      }
      const onAbort = (): void => {
        clearTimeout(timer);
        reject(abortReason(signal as AbortSignal));
      };
      const timer = setTimeout(() => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      }, ms);
      signal?.addEventListener('abort', onAbort, { once: true });
    }),
};

interface Sleeper {
  readonly until: number;
  readonly resolve: () => void;
}

/** A clock that only moves when told to. Sleepers wake in deadline order as time advances. */
export class ManualClock implements Clock {
  private current: number;
  private sleepers: Sleeper[] = [];

  constructor(start = 0) {
    this.current = start;
  }

  now(): number {
    return this.current;
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) {
        reject(abortReason(signal));
        return;
      }
      const sleeper: Sleeper = {
        until: this.current + Math.max(0, ms),
        resolve: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
      };
      const onAbort = (): void => {
        this.sleepers = this.sleepers.filter((s) => s !== sleeper);
        reject(abortReason(signal as AbortSignal));
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.sleepers.push(sleeper);
    });
  }

  /** Moves time forward, waking every sleeper whose deadline has passed (in order). */
  async advance(ms: number): Promise<void> {
    const target = this.current + ms;
    for (;;) {
      this.sleepers.sort((a, b) => a.until - b.until);
      const next = this.sleepers[0];
      if (!next || next.until > target) break;
      this.sleepers.shift();
      this.current = next.until;
      next.resolve();
      // Let woken tasks run (and maybe sleep again) before waking the next one.
      await new Promise((r) => setImmediate(r));
    }
    this.current = target;
  }

  get pendingSleepers(): number {
    return this.sleepers.length;
  }

  /** When each pending sleeper wakes. */
  get wakeTimes(): readonly number[] {
    return this.sleepers.map((s) => s.until);
  }
}

/**
 * The reason to abort a timer that nobody waits for any more. `abort()` without a reason builds a
 * DOMException with its stack every time: on an idle agent, every pass and config check did.
 */
export const TIMER_NOT_NEEDED: Error = new Error('the timer is no longer needed');

/** Waits for `promise` at most `ms` on `clock` (or until `abandon` aborts): its value, or `{ ok: false }` when time ran out first. */
export async function within<T>(
  clock: Clock,
  promise: Promise<T>,
  ms: number,
  abandon?: AbortSignal,
): Promise<{ ok: true; value: T } | { ok: false }> {
  const timer = new AbortController();
  const onAbandon = (): void => {
    timer.abort(TIMER_NOT_NEEDED);
  };
  if (abandon?.aborted) timer.abort(TIMER_NOT_NEEDED);
  abandon?.addEventListener('abort', onAbandon, { once: true });
  try {
    return await Promise.race([
      promise.then((value) => ({ ok: true as const, value })),
      clock.sleep(ms, timer.signal).then(
        () => ({ ok: false as const }),
        () => ({ ok: false as const }),
      ),
    ]);
  } finally {
    abandon?.removeEventListener('abort', onAbandon);
    timer.abort(TIMER_NOT_NEEDED);
  }
}
