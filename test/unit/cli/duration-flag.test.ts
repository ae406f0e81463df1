// Duration flags: one reading (src/cli/duration-flag.ts) for every command, and through the real
// CLI the messages each command gave before they shared it.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { durationFlagMs } from '../../../src/cli/duration-flag.js';
import { parseRunArgs } from '../../../src/cli/run-lean.js';
import { runAgentOptions } from '../../../src/cli/run-options.js';
import { UsageError } from '../../../src/core/errors.js';
import { runCli } from '../../support/cli.js';

const HANG_MS = 30_000;

function usageError(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof UsageError, `a UsageError, got ${String(err)}`);
    assert.equal(err.exitCode, 2);
    return err.message;
  }
  assert.fail('no error');
}

describe('duration flags', () => {
  it('reads Go durations in whole milliseconds, rounded down', () => {
    assert.equal(durationFlagMs('timeout', '1m30s'), 90_000);
    assert.equal(durationFlagMs('timeout', '1500us'), 1);
    assert.equal(durationFlagMs('resync', '0', 'zero-or-positive'), 0);
    assert.equal(durationFlagMs('timeout', '1ms', '1ms'), 1);
  });

  it('names the flag and the value it refuses, by floor', () => {
    assert.match(
      usageError(() => durationFlagMs('timeout', '5 minutes')),
      /^--timeout: invalid duration "5 minutes"/u,
    );
    assert.equal(
      usageError(() => durationFlagMs('poll-interval', '0s')),
      '--poll-interval: must be positive, found 0s',
    );
    assert.equal(
      usageError(() => durationFlagMs('resync', '-1s', 'zero-or-positive')),
      '--resync: must be zero or positive, found -1s',
    );
    assert.equal(
      usageError(() => durationFlagMs('timeout', '999us', '1ms')),
      '--timeout: must be at least 1ms, found 999us',
    );
  });

  for (const [args, message] of [
    [['reload', '--timeout', '500us'], '--timeout: must be at least 1ms, found 500us'],
    [['dashboard', '--once', '--timeout', '0s'], '--timeout: must be at least 1ms, found 0s'],
    [['rollout', 'status', '--wait', '--timeout', '-1m'], '--timeout: must be positive, found -1m'],
    [['rollout', 'status', '--poll-interval', 'soon'], '--poll-interval: invalid duration "soon"'],
    [['node-cleanup', '--resync', '-1s'], '--resync: must be zero or positive, found -1s'],
    [['node-cleanup', '--shutdown-timeout', '0'], '--shutdown-timeout: must be positive, found 0'],
    [['run', '--drain-timeout', '0s'], '--drain-timeout: must be positive, found 0s'],
  ] as const) {
    it(`${args.join(' ')}: a usage error saying "${message}"`, async () => {
      const r = await runCli(args, { timeoutMs: HANG_MS, env: { KUBECONFIG: '/nonexistent', MY_NODE_NAME: 'node-a' } });
      assert.equal(r.code, 2, r.stderr);
      assert.ok(r.stderr.includes(message), r.stderr);
      assert.doesNotMatch(r.stderr, /\n\s+at /u, 'no stack trace');
    });
  }
});

describe('run --change-poll-interval', () => {
  const product = { name: 'local-volume-provisioner-ts', version: '0.0.0-test' };
  const options = async (value: string): Promise<number> => {
    const flags = parseRunArgs([`--change-poll-interval=${value}`], {});
    assert.ok(flags !== undefined);
    return (await runAgentOptions(flags, { argv: [], env: { MY_NODE_NAME: 'node-a' }, product })).agent.changePollMs;
  };

  it('takes 0, which turns change detection off as its help says', async () => {
    assert.equal(await options('0'), 0);
    assert.equal(await options('250ms'), 250);
    await assert.rejects(options('-1s'), /--change-poll-interval: must be zero or positive, found -1s/u);
  });
});
