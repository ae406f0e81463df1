// Scalars read as upstream reads them. Every expected value below is what upstream's decoder gives,
// taken from its sources (sigs.k8s.io/yaml v1.4.0, commit c3772b51; vendored unchanged by
// sig-storage-local-static-provisioner 6cbe253c) and checked there with a Go program:
//   goyaml.v2/resolve.go resolve() (:86-197): resolveTable hints, resolveMap words, timestamps
//     (:143-148, parseTimestamp :238-258), ints via strconv.ParseInt(plain, 0, 64) after removing
//     `_` (:150-158), ParseUint (:159-162), yamlStyleFloat (:84) + ParseFloat (:163-168), else text;
//     the deferred tag check (:91-110): "cannot decode !!X `text` as a !!Y";
//   goyaml.v2/decode.go decoder.scalar (:411-482): quoted and block scalars are not resolved
//     (:414-416), !!binary is base64-decoded (:419-425), a timestamp into interface{} keeps the text
//     "for backward compatibility" (:474-480);
//   yaml.go convertToJSONableObject (:329-356): into a string field int → FormatInt, float →
//     strconv.FormatFloat(v, 'g', -1, 32), bool → "true"/"false"; map keys (:212-249);
//   encoding/json: a whole float into int64 is fine (1e3), a fraction is not.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isMap, isScalar } from 'yaml';
import {
  formatGoFloat32,
  goInt64Value,
  goKey,
  goStringValue,
  resolveGoScalar,
} from '../../../src/core/config/decode/go-yaml.js';
import type { GoScalar } from '../../../src/core/config/decode/go-yaml.js';
import { IssueSink, YamlText } from '../../../src/core/config/decode/yaml-node.js';

function scalarOf(text: string): GoScalar {
  const sink = new IssueSink();
  const yaml = YamlText.parse(`v: ${text}\n`, { file: 't', lineOffset: 0, columnOffset: 0 }, sink, '');
  assert.ok(yaml, `parses: ${text} ${JSON.stringify(sink.issues)}`);
  const root = yaml.root;
  assert.ok(root !== null && isMap(root));
  const node = yaml.resolve(root.get('v', true));
  assert.ok(node !== null && isScalar(node));
  return resolveGoScalar(node);
}

/** What a Go string field receives, or `ERR: <go-yaml message>`, or undefined (null: the field keeps its value). */
function stringField(text: string): string | undefined {
  const s = scalarOf(text);
  return s.kind === 'error' ? `ERR: ${s.message}` : goStringValue(s);
}

// Table A of docs/configuration.md "How values are read": YAML as written → Go string field.
const STRING_FIELD: readonly (readonly [string, string | undefined])[] = [
  ['2001-12-14', '2001-12-14'],
  ['2001-12-14T21:59:43.10-05:00', '2001-12-14T21:59:43.10-05:00'],
  ['2001-12-14 21:59:43.10 -5', '2001-12-14 21:59:43.10 -5'],
  ['2002-02-30', '2002-02-30'],
  ['0755', '493'],
  ['0x1F', '31'],
  ['0o17', '15'],
  ['0b101', '5'],
  ['1_000', '1000'],
  ['+12', '12'],
  ['-0x1F', '-31'],
  ['1e3', '1000'],
  ['1.5', '1.5'],
  ['0.1', '0.1'],
  ['.5', '0.5'],
  ['1.', '1'],
  ['-.5e-3', '-0.0005'],
  ['1e6', '1e+06'],
  ['1000000.0', '1e+06'],
  ['123456', '123456'],
  ['123456.0', '123456'],
  ['123456789.0', '1.2345679e+08'],
  ['3.14159265358979', '3.1415927'],
  ['1e-7', '1e-07'],
  ['0.0001', '0.0001'],
  ['09', '9'],
  ['1e39', '+Inf'],
  ['.inf', '+Inf'],
  ['-.Inf', '-Inf'],
  ['.NaN', 'NaN'],
  ['1e999999', '1e999999'],
  ['99999999999999999999', '1e+20'],
  ['18446744073709551615', '18446744073709551615'],
  ['0xFFFFFFFFFFFFFFFFFF', '0xFFFFFFFFFFFFFFFFFF'],
  ['1:20', '1:20'],
  ['190:20:30', '190:20:30'],
  ['e0', 'e0'],
  ['tRUE', 'tRUE'],
  ['yes', 'true'],
  ['on', 'true'],
  ['y', 'true'],
  ['Off', 'false'],
  ['~', undefined],
  ['null', undefined],
  ['', undefined],
  ['"0755"', '0755'],
  ["'yes'", 'yes'],
  ['!!str 0755', '0755'],
  ['! 0755', '0755'],
  ['!!binary ZXh0NA==', 'ext4'],
  ['!!binary not-base64!', 'ERR: !!binary value contains invalid base64 data'],
  // Bytes E2 82 (a cut sequence): encoding/json writes one U+FFFD per invalid byte (encode.go:1038-1045).
  ['!!binary 4oI=', '\ufffd\ufffd'],
  ['!!binary /w==', '\ufffd'],
  ['!!binary 4oKs', '€'],
  ['!!timestamp 2001-12-14', '2001-12-14'],
  ['!!timestamp foo', 'ERR: cannot decode !!str `foo` as a !!timestamp'],
  ['!!int 0755', '493'],
  ['!!int "12"', '12'],
  ['!!int abc', 'ERR: cannot decode !!str `abc` as a !!int'],
  ['!!int 1.5', 'ERR: cannot decode !!float `1.5` as a !!int'],
  ['!!bool yes', 'true'],
  ['!!bool 1', 'ERR: cannot decode !!int `1` as a !!bool'],
  ['!!float 1', '1'],
  ['!!null', undefined],
  ['!!null foo', 'ERR: cannot decode !!str `foo` as a !!null'],
  ['!foo bar', 'bar'],
  ['!!foo bar', 'bar'],
  ['!!map foo', 'foo'],
];

describe('upstream scalar reading (go-yaml v2 through sigs.k8s.io/yaml)', () => {
  for (const [text, expected] of STRING_FIELD) {
    it(`a string field given ${JSON.stringify(text)} receives ${JSON.stringify(expected)}`, () => {
      assert.equal(stringField(text), expected);
    });
  }

  it('formats floats as strconv.FormatFloat(v, "g", -1, 32)', () => {
    const cases: readonly (readonly [number, string])[] = [
      [0, '0'],
      [-0, '-0'],
      [100, '100'],
      [999999, '999999'],
      [1e6, '1e+06'],
      [1.5e-5, '1.5e-05'],
      [0.00012, '0.00012'],
      [16777217, '1.6777216e+07'],
      [3.4028235e38, '3.4028235e+38'],
      [3.5e38, '+Inf'],
      [1e-46, '0'],
      [-2.5, '-2.5'],
    ];
    for (const [v, text] of cases) assert.equal(formatGoFloat32(v), text, String(v));
  });

  it('gives an int64 field an integer, or a whole float below 1e21, and nothing else', () => {
    assert.equal(goInt64Value(scalarOf('300')), 300n);
    assert.equal(goInt64Value(scalarOf('1e3')), 1000n);
    assert.equal(goInt64Value(scalarOf('0x10')), 16n);
    assert.equal(goInt64Value(scalarOf('1.5')), undefined);
    assert.equal(goInt64Value(scalarOf('99999999999999999999')), undefined);
    assert.equal(goInt64Value(scalarOf('18446744073709551615')), undefined);
    assert.equal(goInt64Value(scalarOf('"300"')), undefined);
    assert.equal(goInt64Value(scalarOf('yes')), undefined);
    assert.equal(goInt64Value(scalarOf('.inf')), undefined);
  });

  it('turns mapping keys into text as upstream does, and refuses the keys it refuses', () => {
    const key = (text: string): string => {
      const k = goKey(yamlScalar(text));
      return 'key' in k ? k.key : `refused: ${k.problem}`;
    };
    assert.equal(key('yes'), 'true');
    assert.equal(key('0755'), '493');
    assert.equal(key('1e6'), '1e+06');
    assert.equal(key('1e39'), '.inf');
    assert.equal(key('2001-12-14'), '2001-12-14');
    assert.match(key('18446744073709551615'), /^refused: .*unsigned 64-bit/u);
    assert.match(key('~'), /^refused: a null key/u);
  });
});

function yamlScalar(text: string): ReturnType<YamlText['resolve']> {
  const sink = new IssueSink();
  const yaml = YamlText.parse(`${text}: v\n`, { file: 't', lineOffset: 0, columnOffset: 0 }, sink, '');
  assert.ok(yaml);
  const root = yaml.root;
  assert.ok(root !== null && isMap(root));
  const pair = root.items[0];
  assert.ok(pair);
  return yaml.resolve(pair.key);
}
