// Regenerates the tables in docs/ that are derived from code (the effect table, the config reference).
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const docs = await import(join(root, 'dist/src/core/config/effect-docs.js'));

function replaceBetween(file, begin, end, content) {
  const path = join(root, file);
  const text = readFileSync(path, 'utf8');
  const a = text.indexOf(begin);
  const b = text.indexOf(end);
  if (a < 0 || b < a) throw new Error(`${file}: generated-section markers not found`);
  writeFileSync(path, text.slice(0, a) + content + text.slice(b + end.length));
  console.error(`generate-docs: updated ${file}`);
}

replaceBetween('docs/reload.md', docs.RELOAD_TABLE_BEGIN, docs.RELOAD_TABLE_END, docs.renderReloadDoc());
replaceBetween(
  'docs/configuration.md',
  docs.CONFIG_TABLE_BEGIN,
  docs.CONFIG_TABLE_END,
  docs.renderConfigurationReference(),
);
