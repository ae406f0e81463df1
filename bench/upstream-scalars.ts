// The oracle of bench/config-fuzz.ts's scalar sweep: how upstream (sig-storage-local-static-provisioner
// 6cbe253c, which vendors sigs.k8s.io/yaml v1.4.0 = commit c3772b51 with its goyaml.v2 fork) decodes
// one YAML scalar into each kind of Go field of its ProvisionerConfiguration. Every expected value
// is a literal taken from the tables of upstream's behaviour (Table A: into a Go string field;
// Table B: into bool, int64 / *int64 and metav1.Duration), which were read off the Go sources cited
// below and checked with a Go program built on those sources; none is computed by the code under test.
// The rows beyond those tables (more spellings of a rule, paths and enum words through each form, so
// that fields such as hostDir or volumeMode receive valid values too) apply the same cited rules,
// and every row, each column, was checked with the same Go program (sigs.k8s.io/yaml v1.4.0's
// yaml.Unmarshal into a string, a bool, a *int64 and a metav1.Duration field, and as a map key).
//
// Abbreviations (all line numbers are of those exact versions):
//   res  = [Y] goyaml.v2/resolve.go     dec  = [Y] goyaml.v2/decode.go
//   yaml.go = [Y] yaml.go (convertToJSONableObject :181-358, map keys :212-249, scalars :329-356)
//   json = Go encoding/json/decode.go (go1.26)  ftoa = Go internal/strconv/ftoa.go
//   [K]  = k8s.io/apimachinery/pkg/apis/meta/v1/duration.go (v0.32.10) Duration.UnmarshalJSON :32-45
//
// The pipeline: goyaml.v2 decodes the YAML into interface{} (yaml.go:158-159), convertToJSONableObject
// turns numbers and booleans into text where the Go field is a string kind (yaml.go:329-356) and every
// mapping key into text (yaml.go:212-249), json.Marshal (yaml.go:174), then encoding/json fills the
// struct (yaml.go:89-98). A go-yaml error fails whatever the field ("error converting YAML to JSON:
// yaml: …"); a JSON-stage error names the field.

/** Why upstream refuses the value. `message` is upstream's error text (after its fixed prefixes). */
export interface Refused {
  readonly refused: 'go-yaml' | 'json' | 'json-inf' | 'duration' | 'map-key';
  readonly message: string;
}

/** null (`~`, `null`, nothing, `!!null`): JSON null is ignored for a string, bool or int64 field (json:897-907). */
export const UNCHANGED = { unchanged: true } as const;
export type Unchanged = typeof UNCHANGED;

export type Outcome<T> = T | Unchanged | Refused;

export interface UpstreamScalar {
  /**
   * The scalar as written after `key: ` (or `- `). A block scalar is its header (`|-`, `>-`, with
   * properties before it), then `\n` and its content lines, unindented; the sweep indents them.
   */
  readonly written: string;
  /** What a Go `string` field receives (Table A). */
  readonly stringField: Outcome<string>;
  /** What the scalar becomes as a mapping key (labelsForPV keys, storage class names): yaml.go:212-249. */
  readonly mapKey: string | Refused;
  /** A Go `bool` field (Table B). */
  readonly boolField: Outcome<boolean>;
  /** A Go `int64` / `*int64` field, jobTolerations[].tolerationSeconds (Table B). */
  readonly int64Field: Outcome<number>;
  /** metav1.Duration (minResyncPeriod): its String(), or why it is refused (Table B). */
  readonly durationField?: string | Refused;
}

// ---- the refusals, as Table B's legend names them ------------------------------------------------

/** Y: go-yaml's own error, for every field kind (res:109 via failf, yaml.go:262-264 adds "yaml: "). */
const Y = (message: string): Refused => ({ refused: 'go-yaml', message });
/** Es: `json: cannot unmarshal string into Go struct field … of type bool|int64` (json:934-947). */
const ES = (type: 'bool' | 'int64'): Refused => ({
  refused: 'json',
  message: `cannot unmarshal string into … of type ${type}`,
});
/** Enb: a number into bool (json:971-989). */
const ENB: Refused = { refused: 'json', message: 'cannot unmarshal number into … of type bool' };
/** En(X): a number that is no int64 (json:1002-1008: strconv.ParseInt(item, 10, 64) fails). */
const EN = (item: string): Refused => ({
  refused: 'json',
  message: `cannot unmarshal number ${item} into … of type int64`,
});
/** Eb: a bool into int64 (json:909-925). */
const EB: Refused = { refused: 'json', message: 'cannot unmarshal bool into … of type int64' };
/** Dn / Db: a number or bool into Duration, refused inside its UnmarshalJSON ([K]:32-45, json:185). */
const DN: Refused = { refused: 'duration', message: 'cannot unmarshal number into … of type string' };
const DB: Refused = { refused: 'duration', message: 'cannot unmarshal bool into … of type string' };
/** Dp(msg): time.ParseDuration refuses the text ([K]:40). */
const DP = (message: string): Refused => ({ refused: 'duration', message: `time: ${message}` });
/** INF: ±Inf/NaN into a non-string field: json.Marshal fails first (encode.go:573-574). */
const INF = (v: '+Inf' | '-Inf' | 'NaN'): Refused => ({
  refused: 'json-inf',
  message: `json: unsupported value: ${v}`,
});
/** A mapping key convertToJSONableObject cannot turn into text (yaml.go:246-248). */
const KEY = (type: string, key: string): Refused => ({
  refused: 'map-key',
  message: `unsupported map key of type: ${type}, key: ${key}`,
});

/** The four fields of an unresolved or string scalar (Table B rows "0755" quoted, "!foo bar", "e0"). */
const text = (value: string, duration: string | Refused): Omit<UpstreamScalar, 'written'> => ({
  stringField: value,
  mapKey: value,
  boolField: ES('bool'),
  int64Field: ES('int64'),
  durationField: duration,
});
/** A go-yaml error: every field kind refuses it. */
const goYamlError = (message: string): Omit<UpstreamScalar, 'written'> => ({
  stringField: Y(message),
  mapKey: Y(message),
  boolField: Y(message),
  int64Field: Y(message),
  durationField: Y(message),
});
/** An int (res:151-158): FormatInt into a string field (yaml.go:338), the number into int64. */
const int = (value: number): Omit<UpstreamScalar, 'written'> => ({
  stringField: String(value),
  mapKey: String(value),
  boolField: ENB,
  int64Field: value,
  durationField: DN,
});
/** A float64 (res:132-137, :163-168): FormatFloat(v, 'g', -1, 32) into a string field (yaml.go:342). */
const float = (asString: string, int64: number | Refused): Omit<UpstreamScalar, 'written'> => ({
  stringField: asString,
  mapKey: asString,
  boolField: ENB,
  int64Field: int64,
  durationField: DN,
});
const bool = (value: boolean): Omit<UpstreamScalar, 'written'> => ({
  stringField: String(value),
  mapKey: String(value),
  boolField: value,
  int64Field: EB,
  durationField: DB,
});
const NULL: Omit<UpstreamScalar, 'written'> = {
  stringField: UNCHANGED,
  mapKey: KEY('%!s(<nil>)', '<nil>'),
  boolField: UNCHANGED,
  int64Field: UNCHANGED,
  // Duration.UnmarshalJSON gets `null`: str stays "" ([K]:34-40).
  durationField: DP('invalid duration ""'),
};

const cases = (written: readonly string[], outcome: Omit<UpstreamScalar, 'written'>): UpstreamScalar[] =>
  written.map((w) => ({ written: w, ...outcome }));

export const UPSTREAM_SCALARS: readonly UpstreamScalar[] = [
  // Date-like. res:143-148 tries parseTimestamp (:238-258, formats :226-233) for plain scalars and
  // !!timestamp; decoded into interface{}, a timestamp keeps its text "for backward compatibility"
  // (dec:474-480). `2001-12-14 21:59:43.10 -5` is no timestamp (res:231) and stays text (:196).
  ...cases(
    ['2001-12-14', '!!timestamp 2001-12-14'],
    text('2001-12-14', DP('unknown unit "-" in duration "2001-12-14"')),
  ),
  ...cases(
    ['2001-12-14T21:59:43.10-05:00'],
    text('2001-12-14T21:59:43.10-05:00', DP('unknown unit "-" in duration "2001-12-14T21:59:43.10-05:00"')),
  ),
  ...cases(
    ['2001-12-14 21:59:43.10 -5'],
    text('2001-12-14 21:59:43.10 -5', DP('unknown unit "-" in duration "2001-12-14 21:59:43.10 -5"')),
  ),
  // !!timestamp on text that is none: the deferred tag check (res:91-110).
  ...cases(['!!timestamp foo'], goYamlError('cannot decode !!str `foo` as a !!timestamp')),

  // Integers: `_` removed (res:150), strconv.ParseInt(plain, 0, 64) (res:151-158; base prefixes 0, 0o,
  // 0b, 0x with a sign, Go strconv/number.go:115-120), into a string field FormatInt (yaml.go:338).
  ...cases(['0755', '!!int 0755', '+0755'], int(493)),
  ...cases(['0x1F'], int(31)),
  ...cases(['0o17', '0O17'], int(15)),
  ...cases(['0b101'], int(5)),
  ...cases(['1_000'], int(1000)),
  ...cases(['1__0'], int(10)),
  ...cases(['+12'], int(12)),
  ...cases(['-0x1F'], int(-31)),
  // 2^64-1: ParseInt overflows, ParseUint gives uint64 (res:159-162), FormatUint (yaml.go:344);
  // as a key it is refused (yaml.go:246-248).
  {
    written: '18446744073709551615',
    stringField: '18446744073709551615',
    mapKey: KEY('uint64', '0xffffffffffffffff'),
    boolField: ENB,
    int64Field: EN('18446744073709551615'),
    durationField: DN,
  },
  ...cases(['!!int abc'], goYamlError('cannot decode !!str `abc` as a !!int')),
  ...cases(['!!int 1.5'], goYamlError('cannot decode !!float `1.5` as a !!int')),

  // Floats: yamlStyleFloat (res:84) + ParseFloat (res:163-168), `.`-led ones ParseFloat only
  // (res:132-137); into a string field strconv.FormatFloat(v, 'g', -1, 32) (yaml.go:342): rounded to
  // float32 (ftoa:76-77), shortest digits, %e when the exponent is < -4 or >= 6 (ftoa:231-251), two
  // exponent digits (ftoa:438-454). Into int64 encoding/json takes whole numbers below 1e21
  // (encode.go:571-603 writes them without exponent; json:1002-1008).
  ...cases(['1e3'], float('1000', 1000)),
  ...cases(['1.5'], float('1.5', EN('1.5'))),
  ...cases(['0.1'], float('0.1', EN('0.1'))),
  ...cases(['.5'], float('0.5', EN('0.5'))),
  ...cases(['1.'], float('1', 1)),
  ...cases(['-.5e-3'], float('-0.0005', EN('-0.0005'))),
  ...cases(['1e6', '1000000.0'], float('1e+06', 1000000)),
  ...cases(['123456789.0'], float('1.2345679e+08', 123456789)),
  ...cases(['3.14159265358979'], float('3.1415927', EN('3.14159265358979'))),
  // A leading 0 that is no octal fails ParseInt and matches yamlStyleFloat: float64 9.
  ...cases(['09'], float('9', 9)),
  // 1e39 overflows float32 in FormatFloat (ftoa:92-103): "+Inf", as a key ".inf" (yaml.go:230-238);
  // it is a finite float64, so into int64 json sees the number 1e+39.
  { ...float('+Inf', EN('1e+39')), written: '1e39', mapKey: '.inf' },
  ...cases(['1e-7'], float('1e-07', EN('1e-7'))),
  // ParseInt and ParseUint overflow (ErrRange), then the float regexp matches: float64 1e20.
  ...cases(['99999999999999999999'], float('1e+20', EN('100000000000000000000'))),
  ...cases(['1e21'], float('1e+21', EN('1e+21'))),
  // .inf and friends (res:44-47): "+Inf" / "-Inf" / "NaN" in a string field, ".inf" / "-.inf" /
  // ".nan" as keys (yaml.go:230-238); any other field kind: json.Marshal refuses the float.
  ...(['.inf', '+.Inf'] as const).map((written): UpstreamScalar => ({
    written,
    stringField: '+Inf',
    mapKey: '.inf',
    boolField: INF('+Inf'),
    int64Field: INF('+Inf'),
    durationField: INF('+Inf'),
  })),
  {
    written: '-.Inf',
    stringField: '-Inf',
    mapKey: '-.inf',
    boolField: INF('-Inf'),
    int64Field: INF('-Inf'),
    durationField: INF('-Inf'),
  },
  {
    written: '.NaN',
    stringField: 'NaN',
    mapKey: '.nan',
    boolField: INF('NaN'),
    int64Field: INF('NaN'),
    durationField: INF('NaN'),
  },
  // !!float accepts an int and converts it (res:95-107).
  ...cases(['!!float 1'], float('1', 1)),
  ...cases(['!!float abc'], goYamlError('cannot decode !!str `abc` as a !!float')),
  // ParseFloat's ErrRange is an error, so 1e999999 falls through to text (res:164-165, :196).
  ...cases(['1e999999'], text('1e999999', DP('unknown unit "e" in duration "1e999999"'))),

  // Text by the first byte's hint or the fallback (res:118, :129-130, :196): no base 60, no `inf`
  // spellings outside resolveMap, no hex floats; exact spellings only (`tRUE`).
  ...cases(['1:20'], text('1:20', DP('unknown unit ":" in duration "1:20"'))),
  ...cases(['e0'], text('e0', DP('invalid duration "e0"'))),
  ...cases(['tRUE'], text('tRUE', DP('invalid duration "tRUE"'))),
  ...cases(['+inf'], text('+inf', DP('invalid duration "+inf"'))),
  ...cases(['0x1p3'], text('0x1p3', DP('unknown unit "x" in duration "0x1p3"'))),
  ...cases(
    ['0xFFFFFFFFFFFFFFFFFF'],
    text('0xFFFFFFFFFFFFFFFFFF', DP('unknown unit "xFFFFFFFFFFFFFFFFFF" in duration "0xFFFFFFFFFFFFFFFFFF"')),
  ),
  // Durations ([K]:40, time.ParseDuration): text that parses.
  ...cases(['5s', "'5s'"], text('5s', '5s')),
  ...cases(["'0'"], text('0', '0s')),
  ...cases(['1h30m'], text('1h30m', '1h30m0s')),

  // Booleans: resolveMap's exact words (res:37-42); into a string field "true"/"false"
  // (yaml.go:345-349), as keys too.
  ...cases(['yes', 'on', 'y', 'true', 'Yes', '!!bool yes'], bool(true)),
  ...cases(['off', 'n', 'NO'], bool(false)),
  ...cases(['!!bool 1'], goYamlError('cannot decode !!int `1` as a !!bool')),
  // A quoted "yes" is text (dec:414-416): encoding/json refuses a string for a bool (Es).
  ...cases(['"yes"'], text('yes', DP('invalid duration "yes"'))),

  // null (res:43, dec:427-434): a string, bool or int64 field keeps its value (json:897-907), a
  // *int64 stays nil; a null key is refused (yaml.go:246-248); Duration gets "" ([K]).
  ...cases(['~', 'null', 'NULL', '', '!!null'], NULL),
  ...cases(['!!null foo'], goYamlError('cannot decode !!str `foo` as a !!null')),

  // Not resolved: quoted and block scalars (dec:414-416), !!str (res:118), tags that are not
  // resolvable (`!`, `!foo`, `!!foo`, `!!map`, `!!seq` on a scalar: res:76-82, :87-89) keep the text.
  ...cases(
    ['"0755"', "'0755'", '!!str 0755', '! 0755', '|-\n0755', '>-\n0755'],
    text('0755', DP('missing unit in duration "0755"')),
  ),
  // `|` keeps the final line break (clip chomping).
  ...cases(['|\n0755'], text('0755\n', DP('unknown unit "\\x0a" in duration "0755\\x0a"'))),
  ...cases(['!foo bar', '!!foo bar'], text('bar', DP('invalid duration "bar"'))),
  ...cases(['!!map foo', '!!seq foo'], text('foo', DP('invalid duration "foo"'))),

  // !!binary: base64-decoded into a string (dec:419-425; Go's base64 skips \r and \n), or refused (dec:422).
  ...cases(['!!binary ZXh0NA==', '!!binary |\nZXh0\nNA=='], text('ext4', DP('invalid duration "ext4"'))),
  ...cases(['!!binary not-base64!'], goYamlError('!!binary value contains invalid base64 data')),
  ...cases(['!!binary YQBi'], text('a\u0000b', DP('invalid duration "a\\x00b"'))),
  // Bytes that are no UTF-8: goyaml keeps them (dec:425, string(data)); json.Marshal then replaces each
  // byte that starts no valid sequence with U+FFFD (Go encoding/json/encode.go:83-84, :1038-1045), so
  // E2 82 (a sequence cut short) becomes two replacement characters, FF one.
  ...cases(['!!binary 4oI='], text('\uFFFD\uFFFD', DP('invalid duration "\\xef\\xbf\\xbd\\xef\\xbf\\xbd"'))),
  ...cases(['!!binary /w=='], text('\uFFFD', DP('invalid duration "\\xef\\xbf\\xbd"'))),

  // Paths, so that hostDir and mountDir receive valid values through every form: a `/` gives hint 0
  // (text, res:118); !!binary decodes (dec:419-425); quoted and block scalars and !!str, `!`, `!foo`
  // keep the text; a resolvable tag on a path is refused by the deferred check (res:91-110).
  ...cases(['/mnt/probe/plain'], text('/mnt/probe/plain', DP('invalid duration "/mnt/probe/plain"'))),
  ...cases(
    ['!!binary L21udC9wcm9iZS9iaW5hcnktMDc1NQ=='],
    text('/mnt/probe/binary-0755', DP('invalid duration "/mnt/probe/binary-0755"')),
  ),
  ...cases(['!!str /mnt/probe/str'], text('/mnt/probe/str', DP('invalid duration "/mnt/probe/str"'))),
  ...cases(['"/mnt/probe/2001-12-14"'], text('/mnt/probe/2001-12-14', DP('invalid duration "/mnt/probe/2001-12-14"'))),
  ...cases(["'/mnt/probe/yes'"], text('/mnt/probe/yes', DP('invalid duration "/mnt/probe/yes"'))),
  ...cases(['! /mnt/probe/bang'], text('/mnt/probe/bang', DP('invalid duration "/mnt/probe/bang"'))),
  ...cases(
    ['!local /mnt/probe/local-tag'],
    text('/mnt/probe/local-tag', DP('invalid duration "/mnt/probe/local-tag"')),
  ),
  ...cases(['|-\n/mnt/probe/literal'], text('/mnt/probe/literal', DP('invalid duration "/mnt/probe/literal"'))),
  ...cases(['>-\n/mnt/probe/folded'], text('/mnt/probe/folded', DP('invalid duration "/mnt/probe/folded"'))),
  ...cases(['!!timestamp /mnt/probe/ts'], goYamlError('cannot decode !!str `/mnt/probe/ts` as a !!timestamp')),
  ...cases(['!!int /mnt/probe/int'], goYamlError('cannot decode !!str `/mnt/probe/int` as a !!int')),
  ...cases(['!!bool /mnt/probe/bool'], goYamlError('cannot decode !!str `/mnt/probe/bool` as a !!bool')),
  ...cases(['!!binary /mnt/probe'], goYamlError('!!binary value contains invalid base64 data')),

  // Words the enumerated fields accept (volumeMode, accessMode, operators, effects), through the
  // same forms.
  ...cases(['!!binary QmxvY2s='], text('Block', DP('invalid duration "Block"'))),
  ...cases(['"Filesystem"'], text('Filesystem', DP('invalid duration "Filesystem"'))),
  ...cases(['!!binary UmVhZFdyaXRlTWFueQ=='], text('ReadWriteMany', DP('invalid duration "ReadWriteMany"'))),
  ...cases(['|-\nReadOnlyMany'], text('ReadOnlyMany', DP('invalid duration "ReadOnlyMany"'))),
  ...cases(['!!str Equal'], text('Equal', DP('invalid duration "Equal"'))),
  ...cases(['Exists'], text('Exists', DP('invalid duration "Exists"'))),
  ...cases(['!!binary Tm90SW4='], text('NotIn', DP('invalid duration "NotIn"'))),
  ...cases(["'In'"], text('In', DP('invalid duration "In"'))),
  ...cases(['!foo NoExecute'], text('NoExecute', DP('invalid duration "NoExecute"'))),
  ...cases(['>-\nPreferNoSchedule'], text('PreferNoSchedule', DP('invalid duration "PreferNoSchedule"'))),
];
