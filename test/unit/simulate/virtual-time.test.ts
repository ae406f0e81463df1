// The replay's clock, driven alone: settling runs what is runnable now and moves no time; a
// promise stuck on the virtual clock gets it moved; work that never rests is reported.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ManualClock } from '../../../src/core/clock.js';
import { VirtualTime } from '../../../src/core/simulate/virtual-time.js';

describe('simulate: virtual time', () => {
  it('settle lets a chain of work finish at one instant, and moves no time', async () => {
    const clock = new ManualClock(0);
    let done = 0;
    const time = new VirtualTime(clock, () => String(done));
    const chain = async (): Promise<void> => {
      for (let i = 0; i < 5; i++) {
        await new Promise((resolve) => setImmediate(resolve));
        done += 1;
      }
    };
    void chain();
    await time.settle();
    assert.equal(done, 5);
    assert.equal(clock.now(), 0);
  });

  it('drive moves the clock only while the promise waits on it; advance moves it as asked', async () => {
    const clock = new ManualClock(0);
    const time = new VirtualTime(clock, () => String(clock.pendingSleepers));
    assert.equal(await time.drive(Promise.resolve('now')), 'now');
    assert.equal(clock.now(), 0, 'nothing waited: no time passed');
    await time.drive(clock.sleep(1_500));
    assert.equal(clock.now(), 2_000, 'moved in 1 s steps until the sleep ended');
    await time.advance(60_000);
    assert.equal(clock.now(), 62_000);
  });

  it('work that keeps changing the world at one instant is an error, not a hang', async () => {
    let n = 0;
    const time = new VirtualTime(new ManualClock(0), () => String(n++));
    await assert.rejects(time.settle(), /did not settle/u);
  });
});
