// The architecture's rule "core does not touch the process" is eslint's (eslint.config.js): shown
// here on code that reads the process, linted as if it were a core file and as a command-layer file.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ESLint } from 'eslint';
import { REPO_ROOT } from '../../support/cli.js';

const READS_THE_PROCESS = [
  "import { cwd } from 'node:process';",
  'export const pid = (): number => process.pid;',
  'export const rss = (): number => process.memoryUsage().rss;',
  'export const mask = (): number => globalThis.process.umask(0o22);',
  'export const where = cwd;',
  '',
].join('\n');

describe('lint: core reads nothing from the process', () => {
  const eslint = new ESLint({ cwd: REPO_ROOT });
  const ruleHits = async (filePath: string): Promise<string[]> => {
    const [result] = await eslint.lintText(READS_THE_PROCESS, { filePath });
    return (result?.messages ?? []).map((m) => `${String(m.line)} ${m.ruleId ?? m.message}`);
  };

  it('in src/core every use of the process is an error', async () => {
    assert.deepEqual(await ruleHits('src/core/clock.ts'), [
      '1 no-restricted-imports',
      '2 no-restricted-globals',
      '3 no-restricted-globals',
      '4 no-restricted-properties',
    ]);
  });

  it('the command layer may read it', async () => {
    assert.deepEqual(await ruleHits('src/cli/lifecycle.ts'), []);
  });
});
