#!/usr/bin/env node
// Production entry: loads compiled commands from dist/ through the generated oclif manifest.
import { execute } from '@oclif/core';

await execute({ dir: import.meta.url });
