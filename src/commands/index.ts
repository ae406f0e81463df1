// The CLI's entry module: the command map, at the top of the layers (it imports every command;
// nothing imports it). Built into one esbuild bundle, dist/src/cli/commands.js (scripts/bundle.mjs),
// that bin/run.js imports; oclif finds the commands here through its "explicit" discovery strategy
// (package.json names the bundle; bin/dev.js points oclif at this source). Heavy modules stay behind
// `await import()` inside each command and become separate chunks.
import CleanBlock from './clean-block.js';
import Dashboard from './dashboard.js';
import DiffConfig from './diff-config.js';
import NodeCleanup from './node-cleanup.js';
import Reload from './reload.js';
import RolloutController from './rollout-controller.js';
import RolloutAbort from './rollout-abort.js';
import RolloutPause from './rollout-pause.js';
import RolloutPromote from './rollout-promote.js';
import RolloutResume from './rollout-resume.js';
import RolloutStatus from './rollout-status.js';
import Run from './run.js';
import Simulate from './simulate.js';

export { execute } from '@oclif/core';

export const COMMANDS = {
  'clean-block': CleanBlock,
  dashboard: Dashboard,
  'diff-config': DiffConfig,
  'node-cleanup': NodeCleanup,
  reload: Reload,
  'rollout:controller': RolloutController,
  'rollout:abort': RolloutAbort,
  'rollout:pause': RolloutPause,
  'rollout:promote': RolloutPromote,
  'rollout:resume': RolloutResume,
  'rollout:status': RolloutStatus,
  run: Run,
  simulate: Simulate,
};
