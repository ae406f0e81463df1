// The CLI's entry module. Built into one esbuild bundle (scripts/bundle.mjs) that bin/run.js
// imports; oclif finds the commands here through its "explicit" discovery strategy. Heavy
// modules stay behind `await import()` inside each command and become separate chunks.
import Dashboard from '../commands/dashboard.js';
import DiffConfig from '../commands/diff-config.js';
import NodeCleanup from '../commands/node-cleanup.js';
import Reload from '../commands/reload.js';
import RolloutStatus from '../commands/rollout-status.js';
import Run from '../commands/run.js';
import Simulate from '../commands/simulate.js';

export { execute } from '@oclif/core';

export const COMMANDS = {
  dashboard: Dashboard,
  'diff-config': DiffConfig,
  'node-cleanup': NodeCleanup,
  reload: Reload,
  'rollout:status': RolloutStatus,
  run: Run,
  simulate: Simulate,
};
