// Writes oclif.manifest.json so `--help` and each command load only what they need:
// without it oclif imports every command module to read its static metadata.
import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Plugin } from '@oclif/core';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const plugin = new Plugin({ root, type: 'core', ignoreManifest: true, errorOnManifestCreate: true, isRoot: true });
await plugin.load();
const manifest = plugin.manifest;
if (Object.keys(manifest.commands).length === 0) {
  console.error('oclif-manifest: no commands found under dist/src/commands; did tsc run?');
  process.exit(1);
}
writeFileSync(join(root, 'oclif.manifest.json'), JSON.stringify(manifest, null, 2) + '\n');
console.error(`oclif-manifest: ${Object.keys(manifest.commands).length} commands`);
