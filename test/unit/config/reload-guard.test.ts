// The reload guard's decision: changes + policy + allow → apply / warn / refuse.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { EFFECT_TABLE, IMPACT_CLASSES } from '../../../src/core/config/effects.js';
import {
  ALLOW_NAMES,
  allowCommand,
  GUARDED_IMPACTS,
  guardReload,
  RELOAD_GUARD_POLICIES,
} from '../../../src/core/config/reload-guard.js';
import type { GuardedImpact } from '../../../src/core/config/reload-guard.js';
import { parseReloadBody } from '../../../src/core/agent/admin-server.js';

const change = (path: string, impact: string): { path: string; impact: string } => ({ path, impact });

describe('reload guard decision', () => {
  it('refuses by default exactly the changes that orphan PVs or change their ownership', () => {
    const removed = change('storageClassMap.slow', 'orphans-pvs');
    const owner = change('useNodeNameOnly', 'ownership-change');
    const harmless = change('storageClassMap.fast.fsType', 'new-pvs-only');
    assert.deepEqual(guardReload([harmless], 'refuse', []), { verdict: 'apply' });
    assert.deepEqual(guardReload([harmless, removed, owner], 'refuse', []), {
      verdict: 'refuse',
      guarded: [removed, owner],
      needs: ['orphans-pvs', 'ownership-change'],
    });
    // Allowing one class leaves the other refused.
    assert.deepEqual(guardReload([removed, owner], 'refuse', ['orphans-pvs']), {
      verdict: 'refuse',
      guarded: [owner],
      needs: ['ownership-change'],
    });
    assert.deepEqual(guardReload([removed, owner], 'refuse', ['ownership-change', 'orphans-pvs']), {
      verdict: 'apply',
    });
    assert.equal(guardReload([removed], 'warn', []).verdict, 'warn');
    assert.equal(guardReload([removed], 'apply', []).verdict, 'apply');
    assert.equal(
      allowCommand(['orphans-pvs', 'ownership-change']),
      'provisioner reload --allow orphans-pvs,ownership-change',
    );
  });

  it('the guarded classes are the effect table rows that orphan or re-own PVs; --allow names them as --fail-on does', () => {
    const guardedRows = EFFECT_TABLE.filter((r) => (GUARDED_IMPACTS as readonly string[]).includes(r.impact));
    assert.deepEqual(
      guardedRows.map((r) => `${r.field} ${r.action}`),
      [
        'storageClassMap.* removed',
        'storageClassMap.* renamed',
        'storageClassMap.*.hostDir modified',
        'useNodeNameOnly enabled',
        'useNodeNameOnly disabled',
      ],
    );
    for (const impact of GUARDED_IMPACTS) assert.ok(IMPACT_CLASSES.includes(impact));
    // The missing-disk policy is not guarded (docs/reload.md, "The reload guard"): it deletes only
    // Available PVs missing their disk for the set time, which are published again when it returns.
    for (const row of EFFECT_TABLE.filter((r) => r.field === 'storageClassMap.*.deleteMissingAfter'))
      assert.equal(
        guardReload([change(`storageClassMap.fast.deleteMissingAfter`, row.impact)], 'refuse', []).verdict,
        'apply',
      );
    // Device rules are never refused (docs/reload.md, "The reload guard"): they orphan no PV and
    // change no ownership; `diff-config --fail-on claims-devices` gates them in CI instead.
    const ruleRows = EFFECT_TABLE.filter((r) => r.field === 'storageClassMap.*.deviceRules');
    assert.equal(ruleRows.length, 7);
    for (const row of ruleRows)
      assert.equal(
        guardReload([change('storageClassMap.fast.deviceRules[0]', row.impact)], 'refuse', []).verdict,
        'apply',
      );
    assert.deepEqual(ALLOW_NAMES, {
      'orphans-pvs': 'orphans-pvs',
      'ownership-change': 'ownership-change',
      orphans: 'orphans-pvs',
      ownership: 'ownership-change',
    });
  });

  it('property: refused iff policy refuse and a guarded change is not allowed; needs is exactly what is missing', () => {
    const impact = fc.constantFrom(...IMPACT_CLASSES);
    const changes = fc.array(fc.record({ path: fc.string({ maxLength: 8 }), impact }), { maxLength: 12 });
    const allow = fc.subarray<GuardedImpact>([...GUARDED_IMPACTS]);
    const policy = fc.constantFrom(...RELOAD_GUARD_POLICIES);
    fc.assert(
      fc.property(changes, policy, allow, (cs, p, a) => {
        const v = guardReload(cs, p, a);
        const missing = GUARDED_IMPACTS.filter((g) => !a.includes(g) && cs.some((c) => c.impact === g));
        if (missing.length === 0 || p === 'apply') return v.verdict === 'apply';
        if (v.verdict === 'apply') return false;
        assert.deepEqual(v.needs, missing);
        assert.ok(v.guarded.every((c) => (missing as readonly string[]).includes(c.impact)));
        // Allowing what it needs always turns the verdict into apply.
        assert.equal(guardReload(cs, p, [...a, ...v.needs]).verdict, 'apply');
        return v.verdict === (p === 'refuse' ? 'refuse' : 'warn');
      }),
      { numRuns: 500 },
    );
  });

  it('the admin endpoint accepts only guarded class names in "allow"', () => {
    assert.deepEqual(parseReloadBody(''), { force: false, allow: [] });
    assert.deepEqual(parseReloadBody('{"allow":["orphans-pvs","orphans-pvs","ownership-change"]}'), {
      force: false,
      allow: ['orphans-pvs', 'ownership-change'],
    });
    assert.match(
      (parseReloadBody('{"allow":["new-pvs-only"]}') as { error: string }).error,
      /"allow": "new-pvs-only" is not a guarded impact class; expected one of orphans-pvs, ownership-change/u,
    );
    assert.match((parseReloadBody('{"allow":"orphans-pvs"}') as { error: string }).error, /must be a list/u);
    assert.match((parseReloadBody('{"allow":[1]}') as { error: string }).error, /1 is not a guarded/u);
  });
});
