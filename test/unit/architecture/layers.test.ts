// The layering of docs/architecture.md, checked on the sources: the command map
// (src/commands/index.ts) is the top, the commands use cli, render, ui and core, and nothing
// imports back up. src/ui (the dashboard) uses render and core; src/cli (the base command, flags,
// process wiring) and src/render (pure text and JSON rendering) are below the commands and beside
// each other; core is the library and imports nothing of the layers above it.
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { REPO_ROOT } from '../../support/cli.js';

const SRC = join(REPO_ROOT, 'src');

/** The layers each top-level folder of src/ may not import. */
const FORBIDDEN: Readonly<Record<string, readonly string[]>> = {
  core: ['cli', 'commands', 'render', 'ui'],
  cli: ['commands', 'render', 'ui'],
  render: ['cli', 'commands', 'ui'],
  ui: ['cli', 'commands'],
};

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sources(path);
    return /\.tsx?$/u.test(name) ? [path] : [];
  });
}

/** The relative module specifiers of a file: static imports and exports, and `import()`. */
function specifiers(text: string): string[] {
  const found: string[] = [];
  for (const match of text.matchAll(/(?:\bfrom\s*|\bimport\s*\(\s*|^\s*import\s+)'(\.{1,2}\/[^']+)'/gmu)) {
    if (match[1] !== undefined) found.push(match[1]);
  }
  return found;
}

/** The top-level folder of src/ a path lies in (`core`, `cli`, …). */
function layerOf(path: string): string {
  return relative(SRC, path).split('/')[0] ?? '';
}

/** Every import of `file` (with `text`) that runs into a layer its own layer may not import. */
function upwardImports(file: string, text: string): string[] {
  const forbidden = FORBIDDEN[layerOf(file)] ?? [];
  return specifiers(text)
    .filter((specifier) => forbidden.includes(layerOf(resolve(dirname(file), specifier))))
    .map((specifier) => `${relative(REPO_ROOT, file)} imports ${specifier}`);
}

describe('layers', () => {
  it('no module of src/core, src/cli, src/render or src/ui imports a layer it may not', () => {
    const found = sources(SRC).flatMap((file) => upwardImports(file, readFileSync(file, 'utf8')));
    assert.deepEqual(found, []);
  });

  it('catches what it bans: the command map in src/cli, core or render reaching the CLI, the dashboard model below ui, a dynamic import', () => {
    // How src/cli/commands.ts imported the commands before the map moved to src/commands/index.ts.
    assert.deepEqual(upwardImports(join(SRC, 'cli/commands.ts'), "import Run from '../commands/run.js';\n"), [
      'src/cli/commands.ts imports ../commands/run.js',
    ]);
    assert.deepEqual(
      upwardImports(
        join(SRC, 'core/agent/x.ts'),
        "import { issueToJson } from '../../cli/base-command.js';\nconst m = await import('../../render/simulate.js');\n",
      ),
      ['src/core/agent/x.ts imports ../../cli/base-command.js', 'src/core/agent/x.ts imports ../../render/simulate.js'],
    );
    // How src/render/diff-config.ts took issueToJson from the base command before it moved to core.
    assert.deepEqual(
      upwardImports(join(SRC, 'render/diff-config.ts'), "import { issueToJson } from '../cli/base-command.js';\n"),
      ['src/render/diff-config.ts imports ../cli/base-command.js'],
    );
    // The dashboard's view model is ui: render and core may not reach it, ui may not reach cli.
    assert.deepEqual(
      upwardImports(
        join(SRC, 'render/x.ts'),
        "import type { DashboardState } from '../ui/dashboard/model.js';\nimport Run from '../commands/run.js';\n",
      ),
      ['src/render/x.ts imports ../ui/dashboard/model.js', 'src/render/x.ts imports ../commands/run.js'],
    );
    assert.deepEqual(upwardImports(join(SRC, 'core/x.ts'), "import { update } from '../ui/dashboard/model.js';\n"), [
      'src/core/x.ts imports ../ui/dashboard/model.js',
    ]);
    assert.deepEqual(
      upwardImports(join(SRC, 'ui/dashboard/x.ts'), "const m = await import('../../cli/base-command.js');\n"),
      ['src/ui/dashboard/x.ts imports ../../cli/base-command.js'],
    );
    // Downward and sideways imports are fine.
    assert.deepEqual(
      upwardImports(
        join(SRC, 'ui/dashboard/services.ts'),
        "import { renderRolloutText } from '../../render/rollout-status.js';\nimport { formatIssue } from '../../core/errors.js';\n",
      ),
      [],
    );
    assert.deepEqual(
      upwardImports(join(SRC, 'render/simulate.ts'), "import { issueToJson } from '../core/errors.js';\n"),
      [],
    );
    assert.deepEqual(
      upwardImports(join(SRC, 'commands/run.ts'), "import { RUN_FLAGS } from '../cli/run-flags.js';\n"),
      [],
    );
    assert.deepEqual(
      upwardImports(join(SRC, 'cli/run-agent.ts'), "import { Agent } from '../core/agent/agent.js';\n"),
      [],
    );
  });
});

/**
 * The folders of src/core from the bottom up: each imports only folders below it (and core's own
 * root modules: errors, clock, log, …, the bottom). docs/architecture.md "Layers of core".
 */
const CORE_ORDER = [
  '(root)',
  'kube',
  'rollout-state',
  'devices',
  'node',
  'config',
  'pv',
  'disk-rules',
  'metrics',
  'health',
  'discovery',
  'cleanup',
  'agent',
  'leader-elected',
  'fleet',
  'staged-rollout',
  'node-cleanup',
  'sandbox',
  'simulate',
] as const;

/**
 * Imports up the order allowed, each with why (none now); the test fails on any other, and on
 * one of these once it is gone (remove it from here then).
 */
const KNOWN_UPWARD: Readonly<Record<string, string>> = {};

/** The folder of src/core a path lies in, `(root)` for core's own files, undefined outside core. */
function coreFolderOf(path: string): string | undefined {
  const parts = relative(join(SRC, 'core'), path).split('/');
  if (parts[0] === '..' || parts[0] === undefined) return undefined;
  return parts.length === 1 ? '(root)' : parts[0];
}

/** The `from -> to` edges of one core file that point up CORE_ORDER (or into a folder not in it). */
function upwardCoreEdges(file: string, text: string): string[] {
  const from = coreFolderOf(file);
  if (from === undefined) return [];
  const rank = (folder: string): number => (CORE_ORDER as readonly string[]).indexOf(folder);
  return specifiers(text)
    .map((specifier) => coreFolderOf(resolve(dirname(file), specifier)))
    .filter(
      (to): to is string =>
        to !== undefined && to !== from && (rank(to) < 0 || rank(from) < 0 || rank(to) > rank(from)),
    )
    .map((to) => `${from} -> ${to}`);
}

describe('core layers', () => {
  it('each folder of src/core imports only folders below it, but for the known upward imports (each with its reason)', () => {
    const found = new Set(
      sources(join(SRC, 'core')).flatMap((file) => upwardCoreEdges(file, readFileSync(file, 'utf8'))),
    );
    assert.deepEqual([...found].filter((edge) => KNOWN_UPWARD[edge] === undefined).sort(), [], 'new upward imports');
    assert.deepEqual(
      Object.keys(KNOWN_UPWARD).filter((edge) => !found.has(edge)),
      [],
      'known upward imports that are gone: remove them from KNOWN_UPWARD',
    );
    const folders = readdirSync(join(SRC, 'core')).filter((n) => statSync(join(SRC, 'core', n)).isDirectory());
    assert.deepEqual(
      folders.filter((f) => !(CORE_ORDER as readonly string[]).includes(f)),
      [],
      'every folder of core has its place in CORE_ORDER',
    );
    const moduleMap = readFileSync(join(REPO_ROOT, 'docs/architecture.md'), 'utf8');
    assert.deepEqual(
      folders.filter((f) => !moduleMap.includes(`\n  ${f}/ `)),
      [],
      "every folder of core is in docs/architecture.md's module map",
    );
  });

  it('catches a wrong import: kube reaching the agent, metrics reaching fleet; lets a downward one through', () => {
    assert.deepEqual(upwardCoreEdges(join(SRC, 'core/kube/x.ts'), "import { Agent } from '../agent/agent.js';\n"), [
      'kube -> agent',
    ]);
    assert.deepEqual(
      upwardCoreEdges(join(SRC, 'core/metrics/x.ts'), "import type { Lease } from '../fleet/applied-state.js';\n"),
      ['metrics -> fleet'],
    );
    assert.deepEqual(upwardCoreEdges(join(SRC, 'core/errors.ts'), "import { x } from './kube/objects.js';\n"), [
      '(root) -> kube',
    ]);
    assert.deepEqual(upwardCoreEdges(join(SRC, 'core/agent/x.ts'), "import { x } from '../kube/objects.js';\n"), []);
  });
});

/** The value imports (not `import type`) of a file: `from '…'` of a non-type import, and `import()`. */
function valueImports(text: string): string[] {
  const found: string[] = [];
  for (const match of text.matchAll(/^import\s+(?!type\s)[^;]*?from\s*'([^']+)'|import\s*\(\s*'([^']+)'/gmu)) {
    const specifier = match[1] ?? match[2];
    if (specifier !== undefined) found.push(specifier);
  }
  return found;
}

/** Why a module of src/core/config/decode breaks its rule: pure (no IO), and nothing of source/ but types. */
function impureImports(file: string, text: string): string[] {
  return valueImports(text)
    .filter((s) => /^node:(fs|child_process|net|http|https)(\/|$)/u.test(s) || /(^|\/)source\//u.test(s))
    .map((s) => `${relative(REPO_ROOT, file)} imports ${s}`);
}

describe('config layers', () => {
  it('src/core/config/decode is pure: no file, process or network IO, and only types from source/', () => {
    const decode = join(SRC, 'core/config/decode');
    const found = sources(decode).flatMap((file) => impureImports(file, readFileSync(file, 'utf8')));
    assert.deepEqual(found, []);
  });

  it('catches what it bans, and lets types through', () => {
    const file = join(SRC, 'core/config/decode/x.ts');
    assert.deepEqual(
      impureImports(
        file,
        "import { readFile } from 'node:fs/promises';\nimport { loadConfig } from '../source/load.js';\n",
      ),
      ['src/core/config/decode/x.ts imports node:fs/promises', 'src/core/config/decode/x.ts imports ../source/load.js'],
    );
    assert.deepEqual(impureImports(file, "import type { ConfigSnapshot } from '../source/port.js';\n"), []);
  });
});

/** The files of src that `file` imports (type imports too: a cycle of types still ties two modules). */
function importedFiles(file: string, text: string): string[] {
  return specifiers(text).flatMap((specifier) => {
    const base = resolve(dirname(file), specifier).replace(/\.js$/u, '');
    return ['.ts', '.tsx'].map((ext) => base + ext).filter((path) => path.startsWith(SRC) && existsSync(path));
  });
}

/** One import cycle among `graph`'s files (each file's imports), as the files in order; undefined: none. */
function importCycle(graph: ReadonlyMap<string, readonly string[]>): string[] | undefined {
  const done = new Set<string>();
  const path: string[] = [];
  const onPath = new Set<string>();
  const visit = (file: string): string[] | undefined => {
    if (onPath.has(file)) return [...path.slice(path.indexOf(file)), file];
    if (done.has(file)) return undefined;
    path.push(file);
    onPath.add(file);
    for (const next of graph.get(file) ?? []) {
      const cycle = visit(next);
      if (cycle !== undefined) return cycle;
    }
    path.pop();
    onPath.delete(file);
    done.add(file);
    return undefined;
  };
  for (const file of graph.keys()) {
    const cycle = visit(file);
    if (cycle !== undefined) return cycle;
  }
  return undefined;
}

describe('import cycles', () => {
  it('no file of src imports itself through others (the dashboard layout and model did)', () => {
    const graph = new Map(sources(SRC).map((file) => [file, importedFiles(file, readFileSync(file, 'utf8'))]));
    assert.deepEqual(
      importCycle(graph)?.map((file) => relative(SRC, file)),
      undefined,
    );
  });

  it('finds a cycle through three files, and none in a chain', () => {
    const [a, b, c] = ['a.ts', 'b.ts', 'c.ts'].map((name) => join(SRC, name)) as [string, string, string];
    assert.deepEqual(
      importCycle(
        new Map([
          [a, [b]],
          [b, [c]],
          [c, [a]],
        ]),
      ),
      [a, b, c, a],
    );
    assert.equal(
      importCycle(
        new Map([
          [a, [b]],
          [b, [c]],
          [c, []],
        ]),
      ),
      undefined,
    );
  });
});
