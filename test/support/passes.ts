// Waiting for an agent to have looked again, instead of sleeping: a test that asserts something did
// not happen (a PV kept, no second cleanup, no Job) waits for discovery passes that started after
// the moment it asserts about. Each pass reclaims, checks health and plans, so a wrong delete, wipe
// or Job would have come from one of them.
import type { AgentStatusJson } from '../../src/core/agent/reload-types.js';
import { eventually } from './eventually.js';

/**
 * Resolves once `n` discovery passes that started after this call have ended (passes of a newer
 * generation count), as the agent's status tells them (`lastPass.at` is a pass's start, on the
 * agent's clock, as `now` is). Fails the test when they do not come within `ms`.
 */
export async function passesFromNow(
  status: () => AgentStatusJson | Promise<AgentStatusJson>,
  n = 3,
  ms = 20_000,
): Promise<void> {
  let since = (await status()).now;
  for (let i = 1; i <= n; i++) {
    const after = since;
    since = await eventually(
      async () => {
        const at = (await status()).lastPass?.at;
        return at !== undefined && at > after ? at : undefined;
      },
      `discovery pass ${String(i)} of ${String(n)} started after ${new Date(after).toISOString()}`,
      ms,
      20,
    );
  }
}
