// @ts-check
import eslint from '@eslint/js';
import prettier from 'eslint-config-prettier';
import tseslint from 'typescript-eslint';

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
