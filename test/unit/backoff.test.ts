// The one exponential delay (backoffDelay) and the Backoff that jitters it and forgets failures after
// a healthy period. The delays of each caller are pinned here: the Backoff's client-go defaults, the
// cleanup table's 5 s to 5 min, the config watcher's 100 ms to 30 s (attempt counts as they pass them).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Backoff, backoffDelay } from '../../src/core/backoff.js';
import { ManualClock } from '../../src/core/clock.js';

describe('backoffDelay', () => {
  it('starts at initialMs, doubles per failure and stops at maxMs', () => {
    const table = { initialMs: 5_000, maxMs: 300_000 };
    assert.deepEqual(
      [0, 1, 2, 3, 4, 5, 6, 7, 40].map((f) => backoffDelay(f, table)),
      [5_000, 10_000, 20_000, 40_000, 80_000, 160_000, 300_000, 300_000, 300_000],
    );
    const watcher = { initialMs: 100, maxMs: 30_000 };
    assert.deepEqual(
      [0, 1, 8, 9, 2000].map((f) => backoffDelay(f, watcher)),
      [100, 200, 25_600, 30_000, 30_000],
    );
  });

  it('takes a negative count as none, grows by another factor, and keeps a zero initial delay at zero', () => {
    assert.equal(backoffDelay(-3, { initialMs: 250, maxMs: 2000 }), 250);
    assert.deepEqual(
      [0, 1, 2].map((f) => backoffDelay(f, { initialMs: 100, maxMs: 1000, factor: 3 })),
      [100, 300, 900],
    );
    assert.equal(backoffDelay(5000, { initialMs: 0, maxMs: 1000 }), 0);
  });

  it('jitters into [base, base·(1 + jitter)), rounded, only when asked', () => {
    const options = { initialMs: 800, maxMs: 30_000, random: () => 0.5 };
    assert.equal(backoffDelay(1, options), 1600);
    assert.equal(backoffDelay(1, { ...options, jitter: 1 }), 2400);
    assert.equal(backoffDelay(0, { ...options, jitter: 0.25, random: () => 0.999 }), Math.round(800 * 1.24975));
  });
});

describe('Backoff', () => {
  it('doubles from 800 ms to 30 s with a jitter of 1.0, and starts again after 2 min of health', async () => {
    const clock = new ManualClock(0);
    const backoff = new Backoff({ clock, random: () => 0 });
    assert.deepEqual(
      Array.from({ length: 8 }, () => backoff.next()),
      [800, 1600, 3200, 6400, 12_800, 25_600, 30_000, 30_000],
    );
    const jittered = new Backoff({ clock, initialMs: 500, maxMs: 15_000, random: () => 0.5 });
    assert.deepEqual([jittered.next(), jittered.next()], [750, 1500]);
    // The last delay ended at 1.5 s; healthy 2 min after that, the next delay is the first again.
    await clock.advance(1500 + 119_999);
    assert.equal(jittered.fresh, false);
    await clock.advance(1);
    assert.equal(jittered.fresh, true);
    assert.equal(jittered.next(), 750);
  });
});
