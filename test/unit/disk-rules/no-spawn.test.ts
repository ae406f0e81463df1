// The rules pass spawns no process (an idle node with many disks pays only sysfs reads): neither
// the step nor the inventory, nor anything they import from src/, imports node:child_process.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { describe, it } from 'node:test';

import { REPO_ROOT } from '../../support/cli.js';

/** The src/ modules a module imports, transitively (relative imports only). */
function importGraph(entry: string): Set<string> {
  const seen = new Set<string>();
  const visit = (file: string): void => {
    if (seen.has(file)) return;
    seen.add(file);
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(/^import (?!type\b)[^'"]*['"](\.[^'"]+)['"]/gmu)) {
      const target = resolve(dirname(file), (m[1] ?? '').replace(/\.js$/u, '.ts'));
      visit(target);
    }
  };
  visit(entry);
  return seen;
}

describe('disks by rule spawn no process', () => {
  it('the pass step and the Linux inventory import nothing that spawns', () => {
    for (const entry of ['src/core/disk-rules/service.ts', 'src/core/node/block-devices.ts']) {
      const graph = importGraph(join(REPO_ROOT, entry));
      assert.ok(graph.size > 1, `${entry} imports modules`);
      for (const file of graph) {
        const text = readFileSync(file, 'utf8');
        assert.doesNotMatch(text, /from ['"]node:child_process['"]/u, `${file} (imported by ${entry})`);
      }
    }
  });
});
