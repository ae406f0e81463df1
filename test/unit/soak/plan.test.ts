// The chaos soak's schedule (test/support/soak/plan.ts): a seed replays the same run, the first
// round of faults and of chores covers every kind once, and chores come between faults.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';

import { CHORE_KINDS, FAULT_KINDS, isFault, soakSchedule, type StepKind } from '../../support/soak/plan.js';

const take = (seed: number, n: number, choresPerFault = 3): StepKind[] => {
  const schedule = soakSchedule({ seed, choresPerFault });
  return Array.from({ length: n }, () => schedule.next().value);
};

describe('the chaos soak schedule', () => {
  it('is the same for the same seed, and differs between seeds', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 31 - 1 }), (seed) => {
        assert.deepEqual(take(seed, 200), take(seed, 200));
      }),
    );
    assert.notDeepEqual(take(1, 100), take(2, 100));
  });

  it('has every fault kind once in its first round of faults, whatever the seed', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 31 - 1 }), fc.integer({ min: 1, max: 5 }), (seed, chores) => {
        const faults = take(seed, 400, chores).filter(isFault).slice(0, FAULT_KINDS.length);
        assert.deepEqual([...faults].sort(), [...FAULT_KINDS].sort());
      }),
    );
  });

  it('has every chore kind once in its first chores, whatever the seed', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 31 - 1 }), fc.integer({ min: 1, max: 5 }), (seed, chores) => {
        const first = take(seed, 400, chores)
          .filter((k) => !isFault(k))
          .slice(0, CHORE_KINDS.length);
        assert.deepEqual([...first].sort(), [...CHORE_KINDS].sort());
      }),
    );
  });

  it('puts at least one chore before each fault and at most 2 × choresPerFault − 1', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 31 - 1 }), fc.integer({ min: 1, max: 5 }), (seed, chores) => {
        let run = 0;
        for (const kind of take(seed, 300, chores)) {
          if (!isFault(kind)) {
            assert.ok((CHORE_KINDS as readonly string[]).includes(kind));
            run += 1;
            continue;
          }
          assert.ok(run >= 1 && run <= chores * 2 - 1, `${String(run)} chores before ${kind}`);
          run = 0;
        }
      }),
    );
  });
});
