import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { EFFECT_TABLE, findEffect, IMPACT_CLASSES } from '../../../src/core/config/effects.js';
import type { ChangeAction, EffectField } from '../../../src/core/config/effects.js';
import type { RuleMode } from '../../../src/core/devices/model.js';
import { CLASS_FIELDS, TOP_LEVEL_FIELDS } from '../../../src/core/config/model.js';
import { renderReloadDoc, RELOAD_TABLE_BEGIN, RELOAD_TABLE_END } from '../../../src/core/config/effect-docs.js';
import { snapshotFromFileText } from '../../../src/core/config/decode/layout.js';
import { parseConfigSnapshot } from '../../../src/core/config/decode/parse.js';

/** Every (field, action) pair the diff can produce, and for device rules the mode that decides the row. */
function expectedPairs(): [EffectField, ChangeAction, RuleMode?][] {
  const pairs: [EffectField, ChangeAction, RuleMode?][] = [
    ['storageClassMap.*', 'added'],
    ['storageClassMap.*', 'removed'],
    ['storageClassMap.*', 'renamed'],
  ];
  for (const f of CLASS_FIELDS) {
    // Device rules: each rule added, removed, changed, or switched between plan and apply.
    if (f.type === 'device-rules') {
      const rules = `storageClassMap.*.${f.name}` as const;
      pairs.push(
        [rules, 'added', 'apply'],
        [rules, 'added', 'plan'],
        [rules, 'modified', 'apply'],
        [rules, 'modified', 'plan'],
        [rules, 'enabled'],
        [rules, 'disabled'],
        [rules, 'removed'],
      );
      continue;
    }
    // A class's duration fields are policies, off when 0s: turned on, off, or changed.
    if (f.type === 'duration')
      pairs.push([`storageClassMap.*.${f.name}`, 'enabled'], [`storageClassMap.*.${f.name}`, 'disabled']);
    pairs.push([`storageClassMap.*.${f.name}`, 'modified']);
  }
  for (const f of TOP_LEVEL_FIELDS) {
    if (f.name === 'storageClassMap') continue;
    if (f.type === 'bool') pairs.push([f.name, 'enabled'], [f.name, 'disabled']);
    else pairs.push([f.name, 'modified']);
  }
  return pairs;
}

describe('the field effect table', () => {
  it('has a row for every field of the config model, and nothing else', () => {
    const expected = expectedPairs()
      .map(([f, a, m]) => `${f} ${a}${m === undefined ? '' : ` ${m}`}`)
      .sort();
    const actual = EFFECT_TABLE.map(
      (r) => `${r.field} ${r.action}${r.ruleMode === undefined ? '' : ` ${r.ruleMode}`}`,
    ).sort();
    assert.deepEqual(actual, expected);
  });

  it('covers every key a parsed config actually has (a new field without a row fails here)', () => {
    const { config } = parseConfigSnapshot(
      snapshotFromFileText('c.yaml', 'storageClassMap:\n  x:\n    hostDir: /x\n    mountDir: /x\n'),
    );
    for (const key of Object.keys(config)) {
      if (key === 'storageClassMap') continue;
      assert.ok(
        EFFECT_TABLE.some((r) => r.field === key),
        `no effect row for top-level ${key}`,
      );
    }
    for (const key of Object.keys(config.storageClassMap['x'] ?? {})) {
      assert.ok(
        findEffect(`storageClassMap.*.${key}` as EffectField, 'modified'),
        `no effect row for class field ${key}`,
      );
    }
  });

  it('states every effect in full and uses only known impact classes', () => {
    for (const row of EFFECT_TABLE) {
      assert.ok(IMPACT_CLASSES.includes(row.impact));
      for (const text of [row.summary, row.existingPVs, row.newPVs, row.cleanupsInFlight]) {
        assert.ok(text.trim().length > 0 && text.trim().endsWith('.'), `${row.field} ${row.action}: "${text}"`);
      }
    }
  });

  it("classifies the review thread's hazards as dangerous", () => {
    assert.equal(findEffect('storageClassMap.*', 'removed')?.impact, 'orphans-pvs');
    assert.equal(findEffect('storageClassMap.*', 'renamed')?.impact, 'orphans-pvs');
    assert.equal(findEffect('storageClassMap.*.hostDir', 'modified')?.impact, 'orphans-pvs');
    assert.equal(findEffect('useNodeNameOnly', 'enabled')?.impact, 'ownership-change');
    assert.equal(findEffect('useJobForCleaning', 'enabled')?.impact, 'needs-pod-change');
    assert.equal(findEffect('storageClassMap.*.fsType', 'modified')?.impact, 'new-pvs-only');
    // The missing-disk policy can delete (Available) PVs when turned on or shortened: never shown as harmless.
    assert.equal(findEffect('storageClassMap.*.deleteMissingAfter', 'enabled')?.impact, 'next-cleanup');
    assert.equal(findEffect('storageClassMap.*.deleteMissingAfter', 'modified')?.impact, 'next-cleanup');
    assert.equal(findEffect('storageClassMap.*.deleteMissingAfter', 'disabled')?.impact, 'none');
  });

  it('claims-devices: a rule that can take devices it did not before; plan rules and removals write nothing', () => {
    const rules = 'storageClassMap.*.deviceRules' as const;
    assert.equal(IMPACT_CLASSES.at(-1), 'claims-devices');
    assert.equal(findEffect(rules, 'added', 'apply')?.impact, 'claims-devices');
    assert.equal(findEffect(rules, 'enabled', 'apply')?.impact, 'claims-devices');
    assert.equal(findEffect(rules, 'modified', 'apply')?.impact, 'claims-devices');
    assert.equal(findEffect(rules, 'added', 'plan')?.impact, 'none');
    assert.equal(findEffect(rules, 'modified', 'plan')?.impact, 'none');
    assert.equal(findEffect(rules, 'disabled', 'plan')?.impact, 'none');
    assert.equal(findEffect(rules, 'removed', 'apply')?.impact, 'none');
    assert.equal(findEffect(rules, 'removed', 'plan')?.impact, 'none');
    // The links a rule made outlive it: said wherever a rule stops taking devices.
    for (const action of ['removed', 'disabled'] as const) {
      assert.match(findEffect(rules, action, 'plan')?.existingPVs ?? '', /links made stay/u);
    }
    assert.ok(EFFECT_TABLE.filter((r) => r.field === rules).every((r) => r.upstream?.startsWith('Upstream ignores')));
  });

  it('docs/reload.md shows exactly the table generated from this data', async () => {
    const doc = await readFile(join(import.meta.dirname, '../../../../docs/reload.md'), 'utf8');
    const begin = doc.indexOf(RELOAD_TABLE_BEGIN);
    const end = doc.indexOf(RELOAD_TABLE_END);
    assert.ok(begin >= 0 && end > begin, 'docs/reload.md lacks the generated-table markers');
    assert.equal(
      doc.slice(begin, end + RELOAD_TABLE_END.length),
      renderReloadDoc(),
      'docs/reload.md is stale: run `npm run docs:generate`',
    );
  });
});
