// Markdown generated from the effect table and the field catalogue, for docs/reload.md and
// docs/configuration.md (kept in sync by a test and `npm run docs:generate`).
import { DEVICE_RULE_KEYS } from './device-rules.js';
import { EFFECT_TABLE, IMPACT_CLASSES, IMPACT_DESCRIPTIONS } from './effects.js';
import type { ChangeAction, EffectRow } from './effects.js';
import { CLASS_FIELDS, TOP_LEVEL_FIELDS } from './model.js';
import { GUARDED_IMPACTS } from './reload-guard.js';

export const RELOAD_TABLE_BEGIN = '<!-- BEGIN GENERATED: effect table -->';
export const RELOAD_TABLE_END = '<!-- END GENERATED: effect table -->';
export const CONFIG_TABLE_BEGIN = '<!-- BEGIN GENERATED: config reference -->';
export const CONFIG_TABLE_END = '<!-- END GENERATED: config reference -->';

function cell(text: string): string {
  return text.replace(/\|/gu, '\\|').replace(/\n/gu, ' ');
}

/** How a device rule's change reads: its mode switched is what `enabled`/`disabled` mean. */
const RULE_CHANGE: Partial<Record<ChangeAction, string>> = {
  modified: 'changed',
  enabled: 'switched from plan to apply',
  disabled: 'switched from apply to plan',
};

function change(row: EffectRow): string {
  const field =
    row.field === 'storageClassMap.*' ? 'storage class' : `\`${row.field.replace('storageClassMap.*.', '')}\``;
  // deviceRules: one rule's change, for a rule in this mode after it.
  if (row.field === 'storageClassMap.*.deviceRules') {
    const what = RULE_CHANGE[row.action] ?? row.action;
    return `${field}: a rule ${what}${row.ruleMode === undefined ? '' : ` (${row.ruleMode} mode)`}`;
  }
  return `${field} ${row.action}`;
}

export function renderReloadDoc(): string {
  const lines = [
    RELOAD_TABLE_BEGIN,
    '',
    '| impact class | meaning | live reload (default `--reload-guard=refuse`) |',
    '|---|---|---|',
    ...IMPACT_CLASSES.map(
      (c) =>
        `| \`${c}\` | ${cell(IMPACT_DESCRIPTIONS[c])} | ${
          (GUARDED_IMPACTS as readonly string[]).includes(c)
            ? `refused until \`provisioner reload --allow ${c}\` or a restart`
            : 'applied'
        } |`,
    ),
    '',
    '| change | impact | existing PVs | PVs not created yet | cleanups in flight | upstream |',
    '|---|---|---|---|---|---|',
    ...EFFECT_TABLE.map(
      (r) =>
        `| ${change(r)} | \`${r.impact}\` | ${cell(r.existingPVs)} | ${cell(r.newPVs)} | ${cell(r.cleanupsInFlight)} | ${cell(r.upstream ?? 'Same.')} |`,
    ),
    '',
    RELOAD_TABLE_END,
  ];
  return lines.join('\n');
}

export function renderConfigurationReference(): string {
  const row = (name: string, type: string, def: string | undefined, description: string): string =>
    `| \`${name}\` | ${type} | ${def === undefined ? '**required**' : `\`${cell(def)}\``} | ${cell(description)} |`;
  return [
    CONFIG_TABLE_BEGIN,
    '',
    '### Top-level keys (one ConfigMap key each)',
    '',
    '| key | type | default | meaning |',
    '|---|---|---|---|',
    ...TOP_LEVEL_FIELDS.map((f) => row(f.name, f.type, f.defaultText, f.description)),
    '',
    '### Per storage class (`storageClassMap.<class>`)',
    '',
    '| key | type | default | meaning |',
    '|---|---|---|---|',
    ...CLASS_FIELDS.map((f) => row(f.name, f.type, f.defaultText, f.description)),
    '',
    '### Per device rule (`storageClassMap.<class>.deviceRules[]`)',
    '',
    '| key | type | default | meaning |',
    '|---|---|---|---|',
    ...DEVICE_RULE_KEYS.map((k) => row(k.name, k.type, k.defaultText, k.description)),
    '',
    CONFIG_TABLE_END,
  ].join('\n');
}
