// The process lifecycle helpers the long-running commands share: the stop signal and the bounded stop.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { stopWithin, untilStopSignal } from '../../../src/cli/lifecycle.js';
import { MemoryLogger } from '../../../src/core/log.js';

describe('process lifecycle', () => {
  it('untilStopSignal resolves with the first SIGTERM, passes SIGHUP to reload, and uninstalls its handlers', async () => {
    const before = process.listenerCount('SIGTERM');
    const hupBefore = process.listenerCount('SIGHUP');
    let reloads = 0;
    const { stopped, uninstall } = untilStopSignal(() => {
      reloads += 1;
    });
    try {
      assert.equal(process.listenerCount('SIGTERM'), before + 1);
      // emit() runs the listeners without a real signal, so a mistake cannot kill the test runner.
      process.emit('SIGHUP', 'SIGHUP');
      assert.equal(reloads, 1);
      process.emit('SIGTERM', 'SIGTERM');
      assert.equal(await stopped, 'SIGTERM');
    } finally {
      uninstall();
    }
    assert.equal(process.listenerCount('SIGTERM'), before);
    assert.equal(process.listenerCount('SIGHUP'), hupBefore);
  });

  it('stopWithin logs a stop that outlasts its deadline and returns; a prompt stop logs nothing', async () => {
    const logger = new MemoryLogger();
    await stopWithin(Promise.resolve(), 1000, logger);
    assert.deepEqual(logger.records, []);
    const started = Date.now();
    await stopWithin(new Promise<void>(() => undefined), 20, logger);
    assert.ok(Date.now() - started < 1000, 'returned at the deadline, not when the stop ends');
    assert.deepEqual(logger.records, [
      { level: 'warn', message: 'graceful stop timed out', fields: { timeoutMs: 20 } },
    ]);
  });
});
