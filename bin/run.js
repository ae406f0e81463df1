#!/usr/bin/env node
// Production entry: the bundled CLI (dist/src/cli/commands.js, built by `npm run build`).
import module from 'node:module';

// Reuse V8's compiled code across invocations of this short-lived CLI.
module.enableCompileCache?.();

const { execute } = await import('../dist/src/cli/commands.js');
await execute({ dir: import.meta.url });
