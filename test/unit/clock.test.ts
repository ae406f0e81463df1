import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ManualClock, within } from '../../src/core/clock.js';

describe('within: a promise against a deadline on a clock', () => {
  it('is the value when the promise settles first, and nothing waits on the clock afterwards', async () => {
    const clock = new ManualClock(0);
    assert.deepEqual(await within(clock, Promise.resolve(7), 1000), { ok: true, value: 7 });
    assert.equal(clock.pendingSleepers, 0);
  });

  it('is { ok: false } once the clock passes the deadline, not before', async () => {
    const clock = new ManualClock(0);
    let settled: unknown;
    const racing = within(clock, new Promise<number>(() => undefined), 100).then((r) => (settled = r));
    await clock.advance(99);
    assert.equal(settled, undefined);
    await clock.advance(1);
    await racing;
    assert.deepEqual(settled, { ok: false });
  });

  it('gives up when abandoned, and a rejection comes through as thrown', async () => {
    const clock = new ManualClock(0);
    const abandon = new AbortController();
    const racing = within(clock, new Promise<number>(() => undefined), 60_000, abandon.signal);
    abandon.abort();
    assert.deepEqual(await racing, { ok: false });
    await assert.rejects(within(clock, Promise.reject(new Error('stop failed')), 1000), /stop failed/u);
  });
});
