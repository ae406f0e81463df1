import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { AgentStatusJson } from '../../../src/core/agent/reload-types.js';
import { passesFromNow } from '../../support/passes.js';

/** An agent's status as passesFromNow reads it: its clock and the start of its last pass. */
function statusAt(now: number, lastPassAt: number | undefined): AgentStatusJson {
  const lastPass =
    lastPassAt === undefined
      ? {}
      : { lastPass: { at: lastPassAt, durationMs: 1, created: 0, deleted: 0, abnormal: 0, quarantined: 0 } };
  return { now, ...lastPass } as unknown as AgentStatusJson;
}

describe('passesFromNow (the tests’ wait for an agent to have looked again)', () => {
  it('resolves only after n passes that started after the call, each a different pass', async () => {
    // A pass starts every 10 ms of the agent's clock; each read of the status moves the clock 4 ms.
    let clock = 1000;
    const seen: number[] = [];
    const status = (): AgentStatusJson => {
      clock += 4;
      const at = Math.floor((clock - 1) / 10) * 10 - 10; // the last pass that has ended
      seen.push(at);
      return statusAt(clock, at);
    };
    const startedAt = clock + 4; // the first read's `now`
    await passesFromNow(status, 3, 2000);
    const after = [...new Set(seen)].filter((at) => at > startedAt);
    assert.equal(after.length, 3, `passes seen after ${String(startedAt)}: ${after.join(', ')}`);
    assert.equal(seen.at(-1), after.at(-1), 'it returned at the third such pass, not later');
  });

  it('waits through a generation with no pass yet, and fails the test when no pass comes', async () => {
    let reads = 0;
    const noPass = (): AgentStatusJson => statusAt(5000 + reads++, reads < 5 ? 4000 : undefined);
    await assert.rejects(passesFromNow(noPass, 1, 100), /timed out waiting for discovery pass 1 of 1/u);
    assert.ok(reads > 5, 'it kept reading after the generation lost its last pass');
  });
});
