// Pure structural diff of two normalized configs, each change tied to its row of the effect table.
import type { DeviceRule, RuleMode } from '../devices/model.js';
import { canonicalJson } from './canonical.js';
import { writtenClass, writtenDeviceRule } from './device-rules.js';
import { findEffect } from './effects.js';
import type { ChangeAction, EffectField, EffectRow } from './effects.js';
import { CLASS_FIELDS, TOP_LEVEL_FIELDS } from './model.js';
import type { ClassConfig, ProvisionerConfig } from './model.js';

export interface ConfigChange {
  /** Dotted path of what changed, e.g. `storageClassMap.fast-disks.fsType`. */
  readonly path: string;
  readonly field: EffectField;
  readonly action: ChangeAction;
  /** The old value (a class name for a rename); undefined when added. */
  readonly before: unknown;
  /** The new value; undefined when removed. */
  readonly after: unknown;
  readonly effect: EffectRow;
}

function effectFor(field: EffectField, action: ChangeAction, ruleMode?: RuleMode): EffectRow {
  const row = findEffect(field, action, ruleMode);
  // The effect-table test proves every field/action pair the diff can produce has a row.
  if (!row) throw new Error(`effect table has no row for ${field} ${action}`);
  return row;
}

function same(a: unknown, b: unknown): boolean {
  // An optional field (deleteMissingAfter) is undefined when off.
  if (a === undefined || b === undefined) return a === b;
  return canonicalJson(a) === canonicalJson(b);
}

/**
 * A class's duration fields are policies that are off when absent (`0s`): turning one on or off is
 * `enabled`/`disabled` (shown as `0s`), changing its time `modified`.
 */
function classFieldAction(type: string, before: unknown, after: unknown): ChangeAction {
  if (type !== 'duration') return 'modified';
  if (before === undefined) return 'enabled';
  return after === undefined ? 'disabled' : 'modified';
}

/**
 * What happened to one rule position: a rule that takes devices it did not before (added in apply
 * mode, switched to apply, an apply rule changed) is told apart from one that writes nothing.
 */
function ruleAction(before: DeviceRule | undefined, after: DeviceRule | undefined): ChangeAction {
  if (before === undefined) return 'added';
  if (after === undefined) return 'removed';
  if (before.mode !== after.mode) return after.mode === 'apply' ? 'enabled' : 'disabled';
  return 'modified';
}

/**
 * The rules of a class compared position by position (`deviceRules[i]`): a rule inserted before
 * others shows as each later one changed, which over-reports (never under-reports) what may take devices.
 */
function ruleChanges(
  name: string,
  before: readonly DeviceRule[] | undefined,
  after: readonly DeviceRule[] | undefined,
): ConfigChange[] {
  const changes: ConfigChange[] = [];
  for (let i = 0; i < Math.max(before?.length ?? 0, after?.length ?? 0); i++) {
    const b = before?.[i];
    const a = after?.[i];
    if (same(b, a)) continue;
    const action = ruleAction(b, a);
    const field = 'storageClassMap.*.deviceRules' as const;
    changes.push({
      path: `storageClassMap.${name}.deviceRules[${i}]`,
      field,
      action,
      before: b && writtenDeviceRule(b),
      after: a && writtenDeviceRule(a),
      effect: effectFor(field, action, (a ?? b)?.mode),
    });
  }
  return changes;
}

function classFieldChanges(name: string, before: ClassConfig, after: ClassConfig): ConfigChange[] {
  const fields = CLASS_FIELDS.filter((f) => f.type !== 'device-rules');
  const changes = fields
    .filter((f) => !same(before[f.name], after[f.name]))
    .map((f) => {
      const action = classFieldAction(f.type, before[f.name], after[f.name]);
      const off = f.type === 'duration' ? '0s' : undefined;
      return {
        path: `storageClassMap.${name}.${f.name}`,
        field: `storageClassMap.*.${f.name}` as const,
        action,
        before: before[f.name] ?? off,
        after: after[f.name] ?? off,
        effect: effectFor(`storageClassMap.*.${f.name}`, action),
      };
    });
  return [...changes, ...ruleChanges(name, before.deviceRules, after.deviceRules)];
}

/**
 * A class that disappears while another with the same hostDir appears is a rename: its PV names
 * change (they hash the class name) while the disks stay the same.
 */
function pairRenames(
  removed: string[],
  added: string[],
  from: ProvisionerConfig,
  to: ProvisionerConfig,
): [string, string][] {
  const pairs: [string, string][] = [];
  const free = new Set(added);
  for (const old of removed) {
    const oldClass = from.storageClassMap[old];
    const match = [...free].find((n) => to.storageClassMap[n]?.hostDir === oldClass?.hostDir);
    if (match !== undefined) {
      pairs.push([old, match]);
      free.delete(match);
    }
  }
  return pairs;
}

/** A class added or removed as a whole, and its rules with it. */
function wholeClassChanges(name: string, action: 'added' | 'removed', value: ClassConfig | undefined): ConfigChange[] {
  const added = action === 'added';
  return [
    {
      path: `storageClassMap.${name}`,
      field: 'storageClassMap.*',
      action,
      before: added || !value ? undefined : writtenClass(value),
      after: added && value ? writtenClass(value) : undefined,
      effect: effectFor('storageClassMap.*', action),
    },
    // A new class's apply rules take devices: a --fail-on claims-devices gate must see them.
    ...(added ? ruleChanges(name, undefined, value?.deviceRules) : ruleChanges(name, value?.deviceRules, undefined)),
  ];
}

export function diffConfigs(from: ProvisionerConfig, to: ProvisionerConfig): ConfigChange[] {
  const changes: ConfigChange[] = [];
  const fromNames = Object.keys(from.storageClassMap);
  const toNames = Object.keys(to.storageClassMap);
  const removed = fromNames.filter((n) => !(n in to.storageClassMap));
  const added = toNames.filter((n) => !(n in from.storageClassMap));
  const renames = pairRenames(removed, added, from, to);
  const renamedFrom = new Set(renames.map(([o]) => o));
  const renamedTo = new Set(renames.map(([, n]) => n));

  const classChanges: [string, ConfigChange[]][] = [];
  for (const name of removed.filter((n) => !renamedFrom.has(n))) {
    classChanges.push([name, wholeClassChanges(name, 'removed', from.storageClassMap[name])]);
  }
  for (const name of added.filter((n) => !renamedTo.has(n))) {
    classChanges.push([name, wholeClassChanges(name, 'added', to.storageClassMap[name])]);
  }
  for (const [old, renamed] of renames) {
    const before = from.storageClassMap[old];
    const after = to.storageClassMap[renamed];
    if (!before || !after) continue;
    classChanges.push([
      renamed,
      [
        {
          path: `storageClassMap.${renamed}`,
          field: 'storageClassMap.*',
          action: 'renamed',
          before: old,
          after: renamed,
          effect: effectFor('storageClassMap.*', 'renamed'),
        },
        ...classFieldChanges(renamed, before, after),
      ],
    ]);
  }
  for (const name of fromNames.filter((n) => n in to.storageClassMap)) {
    const before = from.storageClassMap[name];
    const after = to.storageClassMap[name];
    if (before && after) classChanges.push([name, classFieldChanges(name, before, after)]);
  }
  classChanges.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  for (const [, list] of classChanges) changes.push(...list);

  for (const { name, type } of TOP_LEVEL_FIELDS) {
    if (name === 'storageClassMap') continue;
    const before = from[name];
    const after = to[name];
    if (same(before, after)) continue;
    const action: ChangeAction = type === 'bool' ? (after === true ? 'enabled' : 'disabled') : 'modified';
    changes.push({ path: name, field: name, action, before, after, effect: effectFor(name, action) });
  }
  return changes;
}
