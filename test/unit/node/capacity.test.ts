import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';

import {
  GiB,
  KiB,
  MiB,
  PiB,
  TiB,
  formatBinaryQuantity,
  roundDownCapacityPretty,
} from '../../../src/core/node/capacity.js';

// Upstream's TestRoundDownCapacityPretty table (pkg/common/common_test.go), with the quantity
// string client-go prints for the result (resource.NewQuantity(n, resource.BinarySI).String()).
const UPSTREAM: [input: number, expected: number, quantity: string][] = [
  [100 * KiB, 100 * KiB, '100Ki'],
  [10 * MiB, 10 * MiB, '10Mi'],
  [100 * MiB, 100 * MiB, '100Mi'],
  [10 * GiB, 10 * GiB, '10Gi'],
  [10 * TiB, 10 * TiB, '10Ti'],
  [9 * GiB + 999 * MiB, 9 * GiB + 999 * MiB, '10215Mi'],
  [10 * GiB + 5, 10 * GiB, '10Gi'],
  [10 * MiB + 5, 10 * MiB, '10Mi'],
  [10000 * MiB - 1, 9999 * MiB, '9999Mi'],
  [13 * GiB - 1, 12 * GiB, '12Gi'],
  [63 * MiB - 10, 62 * MiB, '62Mi'],
  [12345, 12345, '12345'],
  [10000 * GiB - 1, 9999 * GiB, '9999Gi'],
  [3 * TiB + 2 * GiB + 1 * MiB, 3 * TiB + 2 * GiB, '3074Gi'],
];

describe('roundDownCapacityPretty', () => {
  for (const [input, expected, quantity] of UPSTREAM) {
    it(`${input} → ${expected} (${quantity})`, () => {
      assert.equal(roundDownCapacityPretty(input), expected);
      assert.equal(formatBinaryQuantity(roundDownCapacityPretty(input)), quantity);
    });
  }

  it('rejects negative, fractional and unsafe byte counts', () => {
    assert.throws(() => roundDownCapacityPretty(-1), RangeError);
    assert.throws(() => roundDownCapacityPretty(1.5), RangeError);
    assert.throws(() => roundDownCapacityPretty(2 ** 53), RangeError);
    assert.throws(() => roundDownCapacityPretty(Number.NaN), RangeError);
  });

  const bytes = fc.oneof(
    fc.nat({ max: 64 * MiB }),
    fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }),
    fc
      .integer({ min: 1, max: 20 })
      .chain((n) => fc.constantFrom(n * MiB - 1, n * MiB, n * GiB - 1, n * GiB, n * GiB + 1)),
  );

  it('property: never rounds up, and loses less than the unit it rounds to', () => {
    fc.assert(
      fc.property(bytes, (n) => {
        const r = roundDownCapacityPretty(n);
        assert.ok(r <= n);
        const unit = n >= 10 * GiB ? GiB : n >= 10 * MiB ? MiB : 1;
        assert.ok(n - r < unit);
        assert.equal(r % unit, 0);
      }),
    );
  });

  it('property: is idempotent', () => {
    fc.assert(
      fc.property(bytes, (n) => {
        const r = roundDownCapacityPretty(n);
        assert.equal(roundDownCapacityPretty(r), r);
      }),
    );
  });
});

describe('formatBinaryQuantity', () => {
  const CASES: [number, string][] = [
    [0, '0'],
    [1, '1'],
    [512, '512'],
    // Below 1024, client-go prints BinarySI quantities in DecimalSI form: 1000 is "1k".
    [1000, '1k'],
    [1023, '1023'],
    [1024, '1Ki'],
    [1536, '1536'],
    [10 * 1024 ** 3, '10Gi'],
    [10485760, '10Mi'],
    [12345, '12345'],
    [3 * TiB + 2 * GiB, '3074Gi'],
    [5 * PiB, '5Pi'],
    [7 * PiB, '7Pi'],
    [1024 * 1024 + 1024, '1025Ki'],
  ];
  for (const [n, expected] of CASES) {
    it(`${n} → ${expected}`, () => {
      assert.equal(formatBinaryQuantity(n), expected);
    });
  }

  it('property: parses back to the same number of bytes', () => {
    const factor: Record<string, number> = { '': 1, k: 1000, Ki: KiB, Mi: MiB, Gi: GiB, Ti: TiB, Pi: PiB };
    fc.assert(
      fc.property(
        fc.oneof(
          fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }),
          fc
            .tuple(fc.integer({ min: 0, max: 2 ** 20 }), fc.constantFrom(KiB, MiB, GiB, TiB))
            .map(([a, b]) => a * b)
            .filter((n) => Number.isSafeInteger(n)),
        ),
        (n) => {
          const text = formatBinaryQuantity(n);
          const match = /^(\d+)(k|Ki|Mi|Gi|Ti|Pi)?$/.exec(text);
          assert.ok(match !== null, text);
          assert.equal(Number(match[1]) * (factor[match[2] ?? ''] ?? Number.NaN), n);
          // The mantissa is not divisible by 1024 again (the largest suffix was used).
          if (n >= 1024 && match[2] !== 'Pi') assert.notEqual(Number(match[1]) % 1024, 0);
        },
      ),
    );
  });
});
