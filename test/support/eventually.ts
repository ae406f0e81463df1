// Polling helpers for tests that wait on another process or an asynchronous loop.
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';

/** Polls until probe returns a value (not undefined), then returns it; fails the test after ms. */
export async function eventually<T>(
  probe: () => T | undefined | Promise<T | undefined>,
  what: string,
  ms = 15_000,
  intervalMs = 25,
): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > until) assert.fail(`timed out waiting for ${what}`);
    await delay(intervalMs);
  }
}

/** As eventually, a probe that throws counting as not yet (a process still starting, a socket not yet there). */
export async function eventuallyQuietly<T>(
  probe: () => Promise<T | undefined>,
  what: string,
  ms = 15_000,
  intervalMs = 50,
): Promise<T> {
  return eventually(() => probe().catch(() => undefined), what, ms, intervalMs);
}

/** Polls until check is true; fails the test after ms. */
export async function waitFor(check: () => boolean | Promise<boolean>, what: string, ms = 3000): Promise<void> {
  await eventually(async () => ((await check()) ? true : undefined), what, ms, 5);
}
