import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { durationToMilliseconds, formatGoDuration, parseGoDuration } from '../../../src/core/config/duration.js';

function nanos(text: string): bigint {
  const r = parseGoDuration(text);
  assert.ok(r.ok, `expected ${text} to parse`);
  return r.nanos;
}

describe('Go durations', () => {
  it('parses what time.ParseDuration accepts', () => {
    const cases: [string, bigint][] = [
      ['0', 0n],
      ['5m', 300_000_000_000n],
      ['5m0s', 300_000_000_000n],
      ['1h30m', 5_400_000_000_000n],
      ['1.5h', 5_400_000_000_000n],
      ['90s', 90_000_000_000n],
      ['300ms', 300_000_000n],
      ['2us', 2_000n],
      ['2µs', 2_000n],
      ['7ns', 7n],
      ['-1.5s', -1_500_000_000n],
      ['.5s', 500_000_000n],
      ['1h2m3s4ms5us6ns', 3_723_004_005_006n],
    ];
    for (const [text, expected] of cases) assert.equal(nanos(text), expected, text);
  });

  it('rejects what time.ParseDuration rejects, naming the problem', () => {
    for (const text of ['', '5', '5 m', 'm', '1d', '1.s.', '--1s', '1h-30m']) {
      const r = parseGoDuration(text);
      assert.equal(r.ok, false, text);
    }
    const unit = parseGoDuration('1d');
    assert.ok(!unit.ok && unit.message.includes('unknown unit "d"'));
  });

  it("formats like Go's Duration.String", () => {
    const cases: [bigint, string][] = [
      [0n, '0s'],
      [300_000_000_000n, '5m0s'],
      [5_400_000_000_000n, '1h30m0s'],
      [1_500_000_000n, '1.5s'],
      [500_000_000n, '500ms'],
      [1_500n, '1.5µs'],
      [7n, '7ns'],
      [-90_000_000_000n, '-1m30s'],
    ];
    for (const [n, text] of cases) assert.equal(formatGoDuration(n), text);
  });

  it('round-trips any duration through its canonical text', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: -(2n ** 62n), max: 2n ** 62n }), (n) => {
        assert.equal(nanos(formatGoDuration(n)), n);
      }),
    );
  });

  it('converts to milliseconds', () => {
    assert.equal(durationToMilliseconds('5m0s'), 300_000);
    assert.throws(() => durationToMilliseconds('soon'), RangeError);
  });
});
