// How a replay moves its virtual clock: only when the runner moves it, or when a promise that does
// real IO is stuck waiting on it. Between moves, whatever is runnable at the current instant runs
// to completion first (the world's fingerprint stops changing).
import type { ManualClock } from '../clock.js';

export class VirtualTime {
  /** `fingerprint`: a summary of the world that changes whenever anything in it happened. */
  constructor(
    private readonly clock: ManualClock,
    private readonly fingerprint: () => string,
  ) {}

  /** Lets everything runnable at the current virtual time run to completion. */
  async settle(): Promise<void> {
    let stable = 0;
    let last = '';
    for (let i = 0; i < 100_000; i++) {
      await new Promise((resolve) => setImmediate(resolve));
      const fp = this.fingerprint();
      if (fp === last) {
        if (++stable >= 3) return;
      } else {
        stable = 0;
        last = fp;
      }
    }
    throw new Error('the simulation did not settle (the agent keeps working at one instant)');
  }

  /**
   * Awaits a promise that does real IO (config files, the HTTP listener) and may also wait on the
   * virtual clock (drain and start deadlines): virtual time moves only when it is stuck there.
   */
  async drive<T>(promise: Promise<T>): Promise<T> {
    let settled = false;
    const isSettled = (): boolean => settled;
    const tracked = promise.finally(() => {
      settled = true;
    });
    tracked.catch(() => undefined);
    for (let i = 0; i < 600 && !isSettled(); i++) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        tracked.catch(() => undefined),
        new Promise((r) => {
          timer = setTimeout(r, 500);
        }),
      ]);
      clearTimeout(timer);
      if (isSettled()) break;
      if (this.clock.pendingSleepers > 0) await this.clock.advance(1000);
    }
    return tracked;
  }

  /** Moves the clock by ms, then settles. */
  async advance(ms: number): Promise<void> {
    if (ms > 0) await this.clock.advance(ms);
    await this.settle();
  }
}
