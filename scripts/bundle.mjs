// Bundles the CLI entry (src/commands/index.ts) and the lean `run` entry (src/cli/run-lean.ts) with their
// dependencies into dist/src/cli/commands.js and run-lean.js
// plus lazily loaded chunks. Loading one bundle instead of hundreds of node_modules files is what
// keeps `provisioner --help` and `diff-config` near bare-node start-up (docs/benchmarks.md).
//
// Two builds: `run` on its own. Built together, the two entries and the commands' many lazy imports
// split the agent's code into 57 files; alone it loads 23, ~9 % less CPU to its first request
// (docs/benchmarks.md, "Start → first PV, once more"), for ~3.4 MB more on disk.
import { build } from 'esbuild';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const outdir = join(root, 'dist/src/cli');
rmSync(join(outdir, 'chunks'), { recursive: true, force: true });

/** @param {Record<string, string>} entryPoints @param {string} chunkNames */
function bundle(entryPoints, chunkNames) {
  return build({
    absWorkingDir: root,
    entryPoints,
    outdir,
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node22',
    chunkNames,
    // oclif loads TypeScript tooling only in development mode; never bundle it. Ink imports
    // react-devtools-core only when DEV=true and it is installed (it is not a dependency).
    external: ['typescript', 'tsx', 'ts-node', 'react-devtools-core'],
    banner: {
      js: "import { createRequire as __lvpCreateRequire } from 'node:module'; const require = __lvpCreateRequire(import.meta.url);",
    },
    sourcemap: 'linked',
    legalComments: 'none',
    logLevel: 'warning',
    metafile: true,
  });
}

const results = await Promise.all([
  bundle({ commands: 'src/commands/index.ts' }, 'chunks/[name]-[hash]'),
  bundle({ 'run-lean': 'src/cli/run-lean.ts' }, 'chunks/run-[name]-[hash]'),
]);
const outputs = results.flatMap((r) => Object.entries(r.metafile.outputs));
for (const [file] of outputs) if (file.endsWith('.js')) asciiOnly(join(root, file));
const bytes = outputs.reduce((n, [, o]) => n + o.bytes, 0);
console.error(`bundle: ${outputs.filter(([f]) => f.endsWith('.js')).length} files, ${(bytes / 1024).toFixed(0)} KiB`);

/**
 * esbuild escapes non-ASCII characters in strings but keeps comments (and a regular expression's
 * characters) as written, and one `→` in a comment makes V8 hold the whole file's source as UTF-16,
 * twice its size, decoded on the slow path at every start. A `\uXXXX` escape of each UTF-16 unit
 * means the same in a comment, a string, a regular expression (with or without the `u` flag) and
 * an identifier, so every file stays one byte a character (docs/benchmarks.md, "Start → first PV,
 * a third time").
 * @param {string} path
 */
function asciiOnly(path) {
  const text = readFileSync(path, 'utf8');
  const ascii = text.replace(/[^\t\n\r\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  if (ascii !== text) writeFileSync(path, ascii);
}
