import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { BadPatternError, goFilepathMatch, matchesNamePattern, validateGlob } from '../../../src/core/config/glob.js';

// Cases from Go's path/filepath match_test.go (pattern, name, match, bad pattern).
const GO_CASES: [string, string, boolean, boolean][] = [
  ['abc', 'abc', true, false],
  ['*', 'abc', true, false],
  ['*c', 'abc', true, false],
  ['a*', 'a', true, false],
  ['a*', 'abc', true, false],
  ['a*', 'ab/c', false, false],
  ['a*/b', 'abc/b', true, false],
  ['a*/b', 'a/c/b', false, false],
  ['a*b*c*d*e*/f', 'axbxcxdxe/f', true, false],
  ['a*b*c*d*e*/f', 'axbxcxdxexxx/f', true, false],
  ['a*b*c*d*e*/f', 'axbxcxdxe/xxx/f', false, false],
  ['a*b*c*d*e*/f', 'axbxcxdxexxx/fff', false, false],
  ['a*b?c*x', 'abxbbxdbxebxczzx', true, false],
  ['a*b?c*x', 'abxbbxdbxebxczzy', false, false],
  ['ab[c]', 'abc', true, false],
  ['ab[b-d]', 'abc', true, false],
  ['ab[e-g]', 'abc', false, false],
  ['ab[^c]', 'abc', false, false],
  ['ab[^b-d]', 'abc', false, false],
  ['ab[^e-g]', 'abc', true, false],
  ['a\\*b', 'a*b', true, false],
  ['a\\*b', 'ab', false, false],
  ['a?b', 'a☺b', true, false],
  ['a[^a]b', 'a☺b', true, false],
  ['a???b', 'a☺b', false, false],
  ['a[^a][^a][^a]b', 'a☺b', false, false],
  ['[a-ζ]*', 'α', true, false],
  ['*[a-ζ]', 'A', false, false],
  ['a?b', 'a/b', false, false],
  ['a*b', 'a/b', false, false],
  ['[\\]a]', ']', true, false],
  ['[\\-]', '-', true, false],
  ['[x\\-]', 'x', true, false],
  ['[x\\-]', '-', true, false],
  ['[x\\-]', 'z', false, false],
  ['[\\-x]', 'x', true, false],
  ['[\\-x]', '-', true, false],
  ['[\\-x]', 'a', false, false],
  ['[]a]', ']', false, true],
  ['[-]', '-', false, true],
  ['[x-]', 'x', false, true],
  ['[x-]', '-', false, true],
  ['[x-]', 'z', false, true],
  ['[-x]', 'x', false, true],
  ['[-x]', '-', false, true],
  ['[-x]', 'a', false, true],
  ['\\', 'a', false, true],
  ['[a-b-c]', 'a', false, true],
  ['[', 'a', false, true],
  ['[^', 'a', false, true],
  ['[^bc', 'a', false, true],
  ['a[', 'a', false, true],
  ['a[', 'ab', false, true],
  ['a[', 'x', false, true],
  ['a/b[', 'x', false, true],
  ['*x', 'xxx', true, false],
];

describe('Go filepath.Match', () => {
  for (const [pattern, name, match, bad] of GO_CASES) {
    it(`${JSON.stringify(pattern)} vs ${JSON.stringify(name)}`, () => {
      if (bad) {
        assert.throws(() => goFilepathMatch(pattern, name), BadPatternError);
        assert.throws(() => {
          validateGlob(pattern);
        }, BadPatternError);
      } else {
        assert.equal(goFilepathMatch(pattern, name), match);
      }
    });
  }

  it('a pattern without metacharacters matches exactly itself', () => {
    fc.assert(
      fc.property(
        fc.stringMatching(/^[a-zA-Z0-9._-]{1,20}$/u),
        fc.stringMatching(/^[a-zA-Z0-9._-]{0,20}$/u),
        (p, n) => {
          assert.equal(goFilepathMatch(p, n), p === n);
        },
      ),
    );
  });

  it('* matches any name without a slash', () => {
    fc.assert(
      fc.property(
        fc.string().filter((s) => !s.includes('/')),
        (n) => {
          assert.ok(goFilepathMatch('*', n));
        },
      ),
    );
  });

  it("applies upstream's namePattern list: comma-separated, empty parts skipped, no trimming", () => {
    assert.ok(matchesNamePattern('nvme-*,scsi-*', 'scsi-0'));
    assert.ok(!matchesNamePattern('nvme-*,scsi-*', 'sda'));
    assert.ok(matchesNamePattern(',disk*,', 'disk1'));
    assert.ok(!matchesNamePattern('a*, b*', 'b1'), 'the second pattern is " b*"');
    assert.ok(matchesNamePattern('a*, b*', ' b1'));
  });
});
