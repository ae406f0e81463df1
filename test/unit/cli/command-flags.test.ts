// The flags several commands share (src/commands/flags.ts) take their defaults and environment
// variables from `run`'s table, so a client finds the agent where `run` put it.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RUN_FLAGS } from '../../../src/cli/run-flags.js';
import Dashboard from '../../../src/commands/dashboard.js';
import DiffConfig from '../../../src/commands/diff-config.js';
import NodeCleanup from '../../../src/commands/node-cleanup.js';
import Reload from '../../../src/commands/reload.js';
import RolloutAbort from '../../../src/commands/rollout-abort.js';
import RolloutPause from '../../../src/commands/rollout-pause.js';
import RolloutPromote from '../../../src/commands/rollout-promote.js';
import RolloutResume from '../../../src/commands/rollout-resume.js';
import RolloutStatus from '../../../src/commands/rollout-status.js';
import Simulate from '../../../src/commands/simulate.js';
import {
  adminSocketFlag,
  DEFAULT_ADMIN_SOCKET,
  logFlags,
  outputFlag,
  rateLimitFlags,
} from '../../../src/commands/flags.js';

describe('shared command flags', () => {
  it('--admin-socket of every client is where run listens, under the same variable', () => {
    assert.equal(DEFAULT_ADMIN_SOCKET, '/run/provisioner/admin.sock');
    for (const command of [Dashboard, DiffConfig, Reload]) {
      const flag = command.flags['admin-socket'];
      assert.equal(flag.default, RUN_FLAGS['admin-socket'].default, command.name);
      assert.equal(flag.env, 'PROVISIONER_ADMIN_SOCKET', command.name);
    }
    assert.equal(adminSocketFlag('Somewhere else.').description, 'Somewhere else.');
  });

  it('-o/--output defaults to text and lists the formats given', () => {
    assert.deepEqual(outputFlag().options, ['text', 'json']);
    assert.equal(outputFlag().char, 'o');
    assert.deepEqual(Simulate.flags.output.options, ['text', 'json', 'yaml']);
    for (const command of [DiffConfig, Reload, RolloutStatus]) assert.equal(command.flags.output.default, 'text');
  });

  it('rollout pause|resume|abort|promote share one set of flags, naming the ConfigMap as rollout status does', () => {
    for (const command of [RolloutPause, RolloutResume, RolloutAbort, RolloutPromote]) {
      assert.equal(command.flags, RolloutPause.flags, command.name);
      assert.equal(command.flags.name.default, RolloutStatus.flags.name.default);
      assert.equal(command.flags.namespace.char, RolloutStatus.flags.namespace.char);
      assert.match(command.flags.configmap.description ?? '', /NAMESPACE\/NAME/u);
      assert.equal(command.flags.kubeconfig.env, 'KUBECONFIG');
      assert.equal(command.flags.output.default, 'text');
    }
  });

  it('node-cleanup logs and rate-limits like run, with its own rate-limit defaults', () => {
    const rate = rateLimitFlags({ qps: 20, burst: 40 });
    assert.equal(rate['kube-api-qps'].default, 20);
    assert.equal(rate['kube-api-qps'].description, RUN_FLAGS['kube-api-qps'].description);
    assert.deepEqual(logFlags()['log-level'].options, RUN_FLAGS['log-level'].options);
    assert.equal(NodeCleanup.flags['log-format'].default, 'text');
    assert.equal(NodeCleanup.flags.kubeconfig.env, 'KUBECONFIG');
  });
});
