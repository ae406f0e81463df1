#!/usr/bin/env node
// Production entry: the bundled CLI (dist/src/cli/commands.js, built by `npm run build`).
import module from 'node:module';

// The image runs the agent without V8's compilers (`node --jitless`, its ENTRYPOINT: 11 MiB less
// resident on every node). Every other command gets them back, at the cost of one exec: the
// dashboard lays out with WebAssembly, which --jitless removes. The entrypoint's other flags for the
// agent alone (--optimize-for-size: a heap that grows less between collections;
// --initial-old-space-size: the first full collection only at that size) go with them.
if (process.argv[2] !== 'run' && process.execArgv.includes('--jitless') && process.execve !== undefined) {
  const agentOnly = new Set(['--jitless', '--optimize-for-size']);
  const execArgv = process.execArgv.filter(
    (flag) => !agentOnly.has(flag) && !flag.startsWith('--initial-old-space-size='),
  );
  process.execve(process.execPath, [process.execPath, ...execArgv, ...process.argv.slice(1)]);
}

// Reuse V8's compiled code across invocations of this short-lived CLI.
module.enableCompileCache?.();

// `run`, the long-lived node agent, starts without oclif when its command line is plain (see
// src/cli/run-lean.ts); any other command line, and every other command, goes to oclif.
if (process.argv[2] === 'run') {
  const { runLean } = await import('../dist/src/cli/run-lean.js');
  const code = await runLean(process.argv.slice(3), new URL('../package.json', import.meta.url));
  if (code !== undefined) process.exit(code);
}
const { execute } = await import('../dist/src/cli/commands.js');
await execute({ dir: import.meta.url });
