// @ts-check
import eslint from '@eslint/js';
import prettier from 'eslint-config-prettier';
import tseslint from 'typescript-eslint';

// The function budget of src/ (docs/architecture.md "Code shape"): bodies of at most 80 lines
// (blank lines and comments not counted) and a cyclomatic complexity of at most 30.
const FUNCTION_LINES = 80;
const COMPLEXITY = 30;

/**
 * The functions over the budget today, each named with its reason, held at its size (a ratchet:
 * it may shrink, not grow; a new function of the file over its limit fails too). Remove a line
 * when its function is split.
 */
const OVER_BUDGET = [
  { file: 'src/cli/run-lean.ts', lines: 85, why: 'parseRunArgs: one case per flag of `run`, to become a flag table' },
  {
    file: 'src/cli/run-options.ts',
    lines: 88,
    why: 'runAgentOptions: the agent options from flags and environment, not split yet',
  },
  {
    file: 'src/commands/rollout-controller.ts',
    lines: 85,
    why: 'run: the controller adapter, to share one leader-elected service runner with node-cleanup',
  },
  {
    file: 'src/commands/simulate.ts',
    lines: 81,
    complexity: 34,
    why: 'run: one branch per mode (demo, plan, scenario), not split yet',
  },
  {
    file: 'src/core/cleanup/reclaim.ts',
    complexity: 37,
    why: 'recordIdentities: the identity cases of a released PV, not split yet',
  },
  {
    file: 'src/core/config/decode/parse.ts',
    lines: 90,
    why: 'parseConfigEntries: one branch per top-level key, to become a key table',
  },
  {
    file: 'src/core/config/decode/yaml-node.ts',
    lines: 99,
    why: 'analyze: one pass over the YAML tree counting every bound (aliases, depth, size) together',
  },
  {
    file: 'src/core/node-cleanup/controller.ts',
    lines: 90,
    why: 'handleDue: the steps of one node cleanup, not split yet',
  },
  {
    file: 'src/core/node/linux-change-watch.ts',
    lines: 86,
    why: 'watchLinuxChanges: the findmnt and udev watches with their restarts, not split yet',
  },
  {
    file: 'src/core/simulate/expect.ts',
    lines: 123,
    complexity: 46,
    why: 'parseExpectations: one branch per expectation key, to become a table as the step reader did',
  },
  {
    file: 'src/core/simulate/fleet.ts',
    complexity: 34,
    why: 'view: the simulated fleet as the controller sees it, not split yet',
  },
  {
    file: 'src/core/simulate/plan.ts',
    lines: 98,
    why: 'planPass and simulatePlan: the plan steps in order, not split yet',
  },
  {
    file: 'src/core/simulate/run.ts',
    lines: 109,
    why: 'setup: the replay world assembled in one place (the dependency bag)',
  },
  {
    file: 'src/render/simulate-timeline.ts',
    lines: 88,
    complexity: 51,
    why: 'stepSummary, rolloutText, describeAction: one case per step or action kind, to become tables',
  },
  {
    file: 'src/ui/dashboard/app.tsx',
    lines: 87,
    why: 'DashboardApp: one component whose hooks share the screen state',
  },
  {
    file: 'src/ui/dashboard/feed.ts',
    lines: 87,
    why: 'agentFeed: the agent connection and its reconnects, not split yet',
  },
  { file: 'src/ui/dashboard/model.ts', complexity: 33, why: 'keyUpdate: one case per key binding' },
];

/** @param {number} max */
const functionLines = (max) => ['error', { max, skipBlankLines: true, skipComments: true, IIFEs: true }];

export default tseslint.config(
  {
    ignores: ['dist/**', 'node_modules/**', '.tools/**', 'test/kube-bin/**', 'coverage/**'],
  },
  eslint.configs.recommended,
  ...tseslint.configs.strictTypeChecked,
  {
    languageOptions: {
      parserOptions: {
        projectService: {
          allowDefaultProject: ['*.js', 'bin/*.js', 'scripts/*.mjs', 'bench/*.mjs'],
        },
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/restrict-template-expressions': ['error', { allowNumber: true, allowBoolean: true }],
      '@typescript-eslint/no-floating-promises': 'error',
      'no-console': 'error',
    },
  },
  {
    // Core never prints, exits or reads the process: commands do, and pass in what core needs
    // (options, the Clock, the ProcessHost port of src/core/process-host.ts).
    files: ['src/core/**/*.ts'],
    rules: {
      'no-restricted-globals': [
        'error',
        { name: 'process', message: 'core gets what it needs from the process through options or a ProcessHost' },
      ],
      'no-restricted-imports': [
        'error',
        {
          paths: [
            {
              name: 'node:process',
              message: 'core gets what it needs from the process through options or a ProcessHost',
            },
            { name: 'process', message: 'core gets what it needs from the process through options or a ProcessHost' },
          ],
        },
      ],
      'no-restricted-properties': [
        'error',
        {
          object: 'globalThis',
          property: 'process',
          message: 'core gets what it needs through options or a ProcessHost',
        },
        { object: 'process', property: 'exit', message: 'core returns or throws typed errors' },
        { object: 'process', property: 'env', message: 'pass settings in through options' },
        { object: 'process', property: 'argv', message: 'pass settings in through options' },
        { object: 'process', property: 'stdout', message: 'core never prints' },
        { object: 'process', property: 'stderr', message: 'core never prints' },
      ],
    },
  },
  {
    files: ['src/**/*.ts', 'src/**/*.tsx'],
    rules: {
      'max-lines-per-function': functionLines(FUNCTION_LINES),
      complexity: ['error', COMPLEXITY],
    },
  },
  ...OVER_BUDGET.map(({ file, lines, complexity }) => ({
    files: [file],
    rules: {
      ...(lines !== undefined ? { 'max-lines-per-function': functionLines(lines) } : {}),
      ...(complexity !== undefined ? { complexity: ['error', complexity] } : {}),
    },
  })),
  {
    files: ['test/**/*.ts'],
    rules: {
      '@typescript-eslint/no-floating-promises': [
        'error',
        {
          allowForKnownSafeCalls: [
            { from: 'package', name: ['describe', 'it', 'suite', 'test'], package: 'node:test' },
          ],
        },
      ],
    },
  },
  {
    files: ['**/*.js', '**/*.mjs'],
    ...tseslint.configs.disableTypeChecked,
  },
  {
    files: ['scripts/**', 'bench/**', 'bin/**'],
    rules: { 'no-console': 'off' },
    languageOptions: { globals: { process: 'readonly', console: 'readonly', URL: 'readonly' } },
  },
  prettier,
);
