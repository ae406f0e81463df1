#!/usr/bin/env -S node --import tsx
// Development entry: runs the TypeScript sources directly (no build step). package.json names the
// bundle of the command map (dist/src/cli/commands.js); its source is src/commands/index.ts, which
// oclif finds from the compiled path it would have (dist/src/commands/index.js) through tsconfig.
import { execute } from '@oclif/core';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const pjson = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
pjson.oclif.commands.target = './dist/src/commands/index.js';

await execute({ development: true, dir: import.meta.url, loadOptions: { root, pjson } });
