import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';

import {
  LabelSelectorError,
  parseLabelSelector,
  requirementMatches,
  type Requirement,
} from '../../../src/core/kube/label-selector.js';

function matches(selector: string, labels: Record<string, string>): boolean {
  return parseLabelSelector(selector).matches(labels);
}

function errorOf(selector: string): string {
  try {
    parseLabelSelector(selector);
  } catch (error) {
    assert.ok(error instanceof LabelSelectorError, String(error));
    return error.message;
  }
  assert.fail(`${JSON.stringify(selector)} parsed`);
}

const KEY_ERR =
  "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const VALUE_ERR =
  "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

void describe('parseLabelSelector', () => {
  void it('matches equality, set-based, existence and numeric requirements', () => {
    const labels = { tier: 'fast', zone: 'a', n: '5', empty: '' };
    const table: [string, boolean][] = [
      ['', true],
      ['tier=fast', true],
      ['tier==fast', true],
      ['tier = fast', true],
      ['tier=slow', false],
      ['tier!=slow', true],
      ['missing!=x', true],
      ['tier!=fast', false],
      ['tier in (fast,slow)', true],
      ['tier in (slow)', false],
      ['missing in (x)', false],
      ['tier notin (slow)', true],
      ['missing notin (x)', true],
      ['tier notin (fast)', false],
      ['tier', true],
      ['missing', false],
      ['!missing', true],
      ['!tier', false],
      ['tier=fast,zone=a', true],
      ['tier=fast,zone=b', false],
      ['n>4', true],
      ['n>5', false],
      ['n<6', true],
      ['tier>1', false],
      ['missing<9', false],
      ['empty=', true],
      ['empty in ()', true],
      ['tier in ()', false],
      ['tier in (,fast)', true],
      ['in=1', false],
      ['tier in (in,notin,fast)', true],
      ['example.com/key=x', false],
      ['  tier\tin\t( fast )  ', true],
      ['tier notin ()', true],
    ];
    for (const [selector, expected] of table) {
      assert.equal(matches(selector, labels), expected, JSON.stringify(selector));
    }
    assert.equal(matches('a', {}), false);
    assert.equal(parseLabelSelector('a=b').matches(undefined), false);
  });

  void it("rejects bad selectors with the apiserver's messages", () => {
    const table: [string, string][] = [
      ['a in (x', "unable to parse requirement: found '', expected: ',' or ')'"],
      ['a=b=c', "found '=', expected: ',' or 'end of string'"],
      ['Bad Key=x', "unable to parse requirement: found 'Key', expected: in, notin, =, ==, !=, gt, lt"],
      ['a=b!', "found '!', expected: ',' or 'end of string'"],
      [',', "found ',', expected: !, identifier, or 'end of string'"],
      ['a in x', "unable to parse requirement: found 'x' expected: '('"],
      ['!a=b', "found '=', expected: ',' or 'end of string'"],
      ['!', "unable to parse requirement: found '', expected: identifier"],
      ['a,', "found '', expected: identifier after ','"],
      ['a in (b c)', "unable to parse requirement: found 'c', expected: ',' or ')'"],
      ['a=(', "unable to parse requirement: found '(', expected: identifier"],
      ['=a', "found '=', expected: !, identifier, or 'end of string'"],
      ['a=b,,c', "found ',', expected: identifier after ','"],
      ['a=b c', "found 'c', expected: ',' or 'end of string'"],
      ['a===b', "unable to parse requirement: found '=', expected: identifier"],
      ['a!b', "unable to parse requirement: found '!', expected: in, notin, =, ==, !=, gt, lt"],
      ['a=!b', "unable to parse requirement: found '!', expected: identifier"],
      ['a in (', "unable to parse requirement: found '', expected: ',', ')' or identifier"],
      [
        'a>x',
        `unable to parse requirement: values[0]: Invalid value: "x": for 'Gt', 'Lt' operators, the value must be an integer`,
      ],
      [
        'a>',
        `unable to parse requirement: values[0]: Invalid value: "": for 'Gt', 'Lt' operators, the value must be an integer`,
      ],
      ['Bad_=x', `unable to parse requirement: <nil>: Invalid value: "Bad_": ${KEY_ERR}`],
      ['a=-x', `unable to parse requirement: values[0][a]: Invalid value: "-x": ${VALUE_ERR}`],
      [
        'x/y/z',
        `unable to parse requirement: <nil>: Invalid value: "x/y/z": a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')`,
      ],
    ];
    for (const [selector, message] of table) assert.equal(errorOf(selector), message, JSON.stringify(selector));
  });

  void it('prints a canonical form that parses back to the same selector', () => {
    const selector = parseLabelSelector('z=1, a in (y,x,y), !b, c, d!=, e notin (), f>3, g<2');
    assert.equal(selector.toString(), 'a in (x,y),!b,c,d!=,e notin (),f>3,g<2,z=1');
    assert.equal(parseLabelSelector(selector.toString()).toString(), selector.toString());
  });

  // --- property tests -----------------------------------------------------------------------

  const nameChars = fc.constantFrom(...'abcxyz019-_.'.split(''));
  const alnum = fc.constantFrom(...'abcxyz019'.split(''));
  const namePart = fc
    .tuple(alnum, fc.array(nameChars, { maxLength: 4 }), alnum)
    .map(([first, middle, last]) => `${first}${middle.join('')}${last}`);
  const key = fc.oneof(
    namePart,
    fc.tuple(fc.constantFrom('example.com', 'k8s.io', 'a.b-c'), namePart).map(([p, n]) => `${p}/${n}`),
    fc.constantFrom('in', 'notin'),
  );
  const value = fc.oneof(fc.constant(''), namePart, fc.constantFrom('in', 'notin', '7', 'a-3'));
  const keys = ['a', 'b', 'example.com/c', 'in'];
  const smallKey = fc.constantFrom(...keys);
  const smallValue = fc.constantFrom('', 'x', 'y', '1', '5');
  const requirement: fc.Arbitrary<Requirement> = fc.oneof(
    fc.record({
      key: smallKey,
      operator: fc.constantFrom('=', '==', '!=' as const),
      values: smallValue.map((v) => [v]),
    }),
    fc.record({
      key: smallKey,
      operator: fc.constantFrom('in', 'notin' as const),
      values: fc.uniqueArray(smallValue, { minLength: 1, maxLength: 3 }).map((v) => [...v].sort()),
    }),
    fc.record({ key: smallKey, operator: fc.constantFrom('exists', '!' as const), values: fc.constant([]) }),
    fc.record({
      key: smallKey,
      operator: fc.constantFrom('gt', 'lt' as const),
      values: fc.constantFrom(['0'], ['3'], ['10']),
    }),
  );
  const labelSet = fc.dictionary(smallKey, smallValue, { maxKeys: 4 });

  function render(r: Requirement, spaced: boolean): string {
    const sp = spaced ? ' ' : '';
    switch (r.operator) {
      case 'exists':
        return r.key;
      case '!':
        return `!${r.key}`;
      case 'in':
      case 'notin':
        return `${r.key} ${r.operator} (${r.values.join(`,${sp}`)})`;
      case 'gt':
        return `${r.key}${sp}>${sp}${r.values[0] ?? ''}`;
      case 'lt':
        return `${r.key}${sp}<${sp}${r.values[0] ?? ''}`;
      default:
        return `${r.key}${sp}${r.operator}${sp}${r.values[0] ?? ''}`;
    }
  }

  /** The reference semantics, written independently of the parser. */
  function reference(r: Requirement, labels: Record<string, string>): boolean {
    const has = Object.hasOwn(labels, r.key);
    const v = labels[r.key];
    switch (r.operator) {
      case '=':
      case '==':
      case 'in':
        return has && r.values.includes(v ?? '');
      case '!=':
      case 'notin':
        return !has || !r.values.includes(v ?? '');
      case 'exists':
        return has;
      case '!':
        return !has;
      case 'gt':
        return has && /^-?\d+$/.test(v ?? '') && Number(v) > Number(r.values[0]);
      case 'lt':
        return has && /^-?\d+$/.test(v ?? '') && Number(v) < Number(r.values[0]);
    }
  }

  void it('property: a rendered selector parses and matches like the AND of its requirements', () => {
    fc.assert(
      fc.property(fc.array(requirement, { maxLength: 5 }), labelSet, fc.boolean(), (requirements, labels, spaced) => {
        const text = requirements.map((r) => render(r, spaced)).join(spaced ? ' , ' : ',');
        const selector = parseLabelSelector(text);
        assert.equal(selector.requirements.length, requirements.length);
        const expected = requirements.every((r) => reference(r, labels));
        assert.equal(selector.matches(labels), expected, text);
        for (const r of selector.requirements) assert.equal(requirementMatches(r, labels), reference(r, labels));
        // toString is canonical and round-trips.
        const again = parseLabelSelector(selector.toString());
        assert.equal(again.toString(), selector.toString());
        assert.equal(again.matches(labels), expected);
      }),
      { numRuns: 500 },
    );
  });

  void it('property: valid keys and values are accepted in every operator position', () => {
    fc.assert(
      fc.property(key, value, (k, v) => {
        for (const text of [`${k}=${v}`, `${k}!=${v}`, `${k} in (${v})`, `${k} notin (${v},x)`, k, `!${k}`]) {
          const selector = parseLabelSelector(text);
          assert.equal(selector.requirements[0]?.key, k, text);
        }
        assert.equal(parseLabelSelector(`${k}=${v}`).matches({ [k]: v }), true);
      }),
      { numRuns: 300 },
    );
  });

  void it('property: any string either parses or fails with a LabelSelectorError', () => {
    fc.assert(
      fc.property(fc.string({ unit: fc.constantFrom(...'ab =!,()<>in tx-_./1'.split('')), maxLength: 20 }), (text) => {
        try {
          const selector = parseLabelSelector(text);
          assert.equal(parseLabelSelector(selector.toString()).toString(), selector.toString());
        } catch (error) {
          assert.ok(error instanceof LabelSelectorError, `${JSON.stringify(text)}: ${String(error)}`);
        }
      }),
      { numRuns: 1000 },
    );
  });
});
