// Scalars read exactly as upstream reads them. Upstream decodes its config with sigs.k8s.io/yaml
// v1.4.0: go-yaml v2 (its fork goyaml.v2) decodes the YAML into interface{}, convertToJSONableObject
// turns each value into what the Go field's JSON wants, and encoding/json fills the struct. The yaml
// package here resolves YAML 1.1 differently in places (timestamps become Dates, `1:20` is a
// sexagesimal 80, `0o17` stays text, `1e6` becomes "1000000" where upstream writes "1e+06"), so
// scalars are never taken from its `value`: resolveGoScalar re-resolves the text as written, and the
// conversions below give each field kind what upstream's would. docs/configuration.md, "How values are
// read", has the table; the test cites the Go sources line by line.
import { isMap, isScalar, isSeq, Scalar } from 'yaml';
import type { Node } from 'yaml';

/** A scalar as go-yaml v2 decodes it into interface{}, or why it refuses it. */
export type GoScalar =
  | { readonly kind: 'null' }
  | { readonly kind: 'bool'; readonly value: boolean }
  /** int, int64 or uint64 in Go: -2^63 … 2^64-1. */
  | { readonly kind: 'int'; readonly value: bigint }
  | { readonly kind: 'float'; readonly value: number }
  /** `timestamp`: the text looked like a YAML timestamp; go-yaml keeps the text as written for interface{}. */
  | { readonly kind: 'string'; readonly value: string; readonly timestamp?: true }
  | { readonly kind: 'error'; readonly message: string };

const TAG_PREFIX = 'tag:yaml.org,2002:';
const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const UINT64_MAX = 2n ** 64n - 1n;

// goyaml.v2 resolve.go, resolveMap: exact spellings only (`tRUE` is text).
const TRUE_WORDS = new Set(['y', 'Y', 'yes', 'Yes', 'YES', 'true', 'True', 'TRUE', 'on', 'On', 'ON']);
const FALSE_WORDS = new Set(['n', 'N', 'no', 'No', 'NO', 'false', 'False', 'FALSE', 'off', 'Off', 'OFF']);
const NULL_WORDS = new Set(['', '~', 'null', 'Null', 'NULL']);
const NAN_WORDS = new Set(['.nan', '.NaN', '.NAN']);
const INF_WORDS = new Set(['.inf', '.Inf', '.INF', '+.inf', '+.Inf', '+.INF']);
const NEG_INF_WORDS = new Set(['-.inf', '-.Inf', '-.INF']);

/** resolve.go yamlStyleFloat. */
const YAML_STYLE_FLOAT = /^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$/u;

/** resolve.go resolveTable: the first byte's hint. */
function hint(text: string): 'N' | 'M' | 'S' | 'D' | '.' | undefined {
  const c = text[0];
  if (c === undefined) return 'N';
  if (c === '+' || c === '-') return 'S';
  if (c >= '0' && c <= '9') return 'D';
  if ('yYnNtTfFoO~'.includes(c)) return 'M';
  if (c === '.') return '.';
  return undefined;
}

/** Go's strconv.ParseInt(s, 0, 64) / ParseUint(s, 0, 64) syntax: sign (int only), 0x 0o 0b 0 prefixes. */
function parseGoInteger(s: string, signed: boolean): bigint | undefined {
  const m = /^([-+]?)(0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)$/u.exec(s);
  if (!m) return undefined;
  const sign = m[1] ?? '';
  if (!signed && sign !== '') return undefined;
  const body = m[2] ?? '';
  let magnitude: bigint;
  if (/^0[xXoObB]/u.test(body)) magnitude = BigInt(`0${(body[1] ?? '').toLowerCase()}${body.slice(2)}`);
  else if (body.length > 1 && body.startsWith('0')) magnitude = BigInt(`0o${body.slice(1)}`);
  else magnitude = BigInt(body);
  const value = sign === '-' ? -magnitude : magnitude;
  if (signed ? value < INT64_MIN || value > INT64_MAX : value > UINT64_MAX) return undefined;
  return value;
}

/** Go's strconv.ParseFloat(s, 64) for decimal text: undefined on a syntax error or overflow (ErrRange). */
function parseGoFloat(s: string): number | undefined {
  if (!/^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$/u.test(s)) return undefined;
  const v = Number(s);
  return Number.isFinite(v) ? v : undefined;
}

const DAYS_IN_MONTH = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/** resolve.go parseTimestamp: 4 digits and `-`, then one of allowedTimestampFormats (Go's time.Parse). */
function isGoTimestamp(s: string): boolean {
  const m =
    /^([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})(?:(?:[Tt]([0-9]{1,2}):([0-9]{1,2}):([0-9]{1,2})(?:\.[0-9]+)?(?:Z|[-+][0-9]{2}:[0-9]{2}))|(?: ([0-9]{1,2}):([0-9]{1,2}):([0-9]{1,2})(?:\.[0-9]+)?))?$/u.exec(
      s,
    );
  if (!m) return false;
  const year = Number(m[1]);
  const month = Number(m[2]);
  const day = Number(m[3]);
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  const maxDay = month === 2 && !leap ? 28 : (DAYS_IN_MONTH[month - 1] ?? 0);
  if (month < 1 || month > 12 || day < 1 || day > maxDay) return false;
  const [h, min, sec] = [m[4] ?? m[7], m[5] ?? m[8], m[6] ?? m[9]].map((x) => Number(x ?? 0));
  return (h ?? 0) < 24 && (min ?? 0) < 60 && (sec ?? 0) < 60;
}

type Resolved =
  | { readonly tag: 'null' }
  | { readonly tag: 'bool'; readonly value: boolean }
  | { readonly tag: 'int'; readonly value: bigint }
  | { readonly tag: 'float'; readonly value: number }
  | { readonly tag: 'timestamp' }
  | { readonly tag: 'str' };

/** resolve.go resolve(tag, in) for a resolvable tag: what the text reads as. */
function resolveText(text: string, tag: string): Resolved {
  const h = hint(text);
  if (h === undefined || tag === 'str') return { tag: 'str' };
  if (TRUE_WORDS.has(text)) return { tag: 'bool', value: true };
  if (FALSE_WORDS.has(text)) return { tag: 'bool', value: false };
  if (NULL_WORDS.has(text)) return { tag: 'null' };
  if (NAN_WORDS.has(text)) return { tag: 'float', value: Number.NaN };
  if (INF_WORDS.has(text)) return { tag: 'float', value: Number.POSITIVE_INFINITY };
  if (NEG_INF_WORDS.has(text)) return { tag: 'float', value: Number.NEGATIVE_INFINITY };
  if (h === '.') {
    const v = parseGoFloat(text);
    return v === undefined ? { tag: 'str' } : { tag: 'float', value: v };
  }
  if (h === 'S' || h === 'D') {
    if ((tag === '' || tag === 'timestamp') && isGoTimestamp(text)) return { tag: 'timestamp' };
    const plain = text.replaceAll('_', '');
    const int = parseGoInteger(plain, true) ?? parseGoInteger(plain, false);
    if (int !== undefined) return { tag: 'int', value: int };
    if (YAML_STYLE_FLOAT.test(plain)) {
      const v = parseGoFloat(plain);
      if (v !== undefined) return { tag: 'float', value: v };
    }
  }
  return { tag: 'str' };
}

/** Go's base64.StdEncoding.DecodeString: padded standard alphabet; \r and \n are skipped. */
function decodeBase64(text: string): string | undefined {
  const s = text.replace(/[\r\n]/gu, '');
  if (s.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/u.test(s)) return undefined;
  return goUtf8(Buffer.from(s, 'base64'));
}

/** The length of the valid UTF-8 sequence at `i`, or 0 (Go's utf8.DecodeRune rules). */
function utf8SequenceAt(bytes: Uint8Array, i: number): number {
  const lead = bytes[i] ?? 0;
  if (lead < 0x80) return 1;
  const trailing =
    lead >= 0xc2 && lead <= 0xdf ? 1 : lead >= 0xe0 && lead <= 0xef ? 2 : lead >= 0xf0 && lead <= 0xf4 ? 3 : 0;
  if (trailing === 0) return 0;
  const low = lead === 0xe0 ? 0xa0 : lead === 0xf0 ? 0x90 : 0x80;
  const high = lead === 0xed ? 0x9f : lead === 0xf4 ? 0x8f : 0xbf;
  const second = bytes[i + 1];
  if (second === undefined || second < low || second > high) return 0;
  for (let k = 2; k <= trailing; k++) {
    const next = bytes[i + k];
    if (next === undefined || (next & 0xc0) !== 0x80) return 0;
  }
  return trailing + 1;
}

/**
 * Bytes as the text Go's encoding/json writes for them: every byte that does not start a valid UTF-8
 * sequence becomes one U+FFFD (the WHATWG decoder of Buffer would merge a broken sequence into one).
 */
function goUtf8(bytes: Uint8Array): string {
  let out = '';
  let start = 0;
  for (let i = 0; i < bytes.length;) {
    const n = utf8SequenceAt(bytes, i);
    if (n > 0) {
      i += n;
      continue;
    }
    out += `${Buffer.from(bytes.subarray(start, i)).toString('utf8')}\ufffd`;
    i += 1;
    start = i;
  }
  return out + Buffer.from(bytes.subarray(start)).toString('utf8');
}

/** The text of a scalar as written (after YAML's own unescaping and folding), as go-yaml's n.value. */
export function scalarText(node: Scalar): string {
  if (node.source !== undefined) return node.source;
  const v: unknown = node.value;
  return typeof v === 'string' ? v : String(v);
}

/** The scalar's explicit tag in go-yaml's short form (`str`, `binary`, `!foo`), or undefined. */
function shortTag(node: Scalar): string | undefined {
  const tag = node.tag;
  if (tag === undefined) return undefined;
  return tag.startsWith(TAG_PREFIX) ? tag.slice(TAG_PREFIX.length) : tag;
}

const RESOLVABLE = new Set(['str', 'bool', 'int', 'float', 'null', 'timestamp']);

function fromResolved(r: Resolved, text: string): GoScalar {
  switch (r.tag) {
    case 'null':
      return { kind: 'null' };
    case 'bool':
      return { kind: 'bool', value: r.value };
    case 'int':
      return { kind: 'int', value: r.value };
    case 'float':
      return { kind: 'float', value: r.value };
    case 'timestamp':
      return { kind: 'string', value: text, timestamp: true };
    case 'str':
      return { kind: 'string', value: text };
  }
}

/**
 * What go-yaml v2 decodes a scalar into (decode.go decoder.scalar with an interface{} target):
 * quoted and block scalars are text; a plain one is resolved (resolve.go); an explicit tag is
 * checked against what the text resolves to.
 */
export function resolveGoScalar(node: Scalar): GoScalar {
  const text = scalarText(node);
  const tag = shortTag(node);
  const plain = node.type === Scalar.PLAIN || node.type === undefined;
  if (tag === undefined) return plain ? fromResolved(resolveText(text, ''), text) : { kind: 'string', value: text };
  if (tag === 'binary') {
    const decoded = decodeBase64(text);
    return decoded === undefined
      ? { kind: 'error', message: '!!binary value contains invalid base64 data' }
      : { kind: 'string', value: decoded };
  }
  // `!foo`, `!!foo`, `!!map` on a scalar, `!`: not resolvable, the text stays.
  if (!RESOLVABLE.has(tag)) return { kind: 'string', value: text };
  const r = resolveText(text, tag);
  if (tag === 'str' || r.tag === tag) return fromResolved(r, text);
  if (tag === 'float' && r.tag === 'int') return { kind: 'float', value: Number(r.value) };
  return { kind: 'error', message: `cannot decode !!${r.tag} \`${text}\` as a !!${tag}` };
}

// ---------------------------------------------------------------------------------------------
// sigs.k8s.io/yaml: the value each Go field kind receives

/** Go's strconv.FormatFloat(v, 'g', -1, 32): the float rounded to float32, shortest digits, %e below 1e-4 or from 1e6. */
export function formatGoFloat32(v: number): string {
  const f = Math.fround(v);
  if (Number.isNaN(f)) return 'NaN';
  if (f === Number.POSITIVE_INFINITY) return '+Inf';
  if (f === Number.NEGATIVE_INFINITY) return '-Inf';
  if (f === 0) return Object.is(f, -0) ? '-0' : '0';
  const { digits, exp } = shortestFloat32Digits(Math.abs(f));
  const sign = f < 0 ? '-' : '';
  if (exp < -4 || exp >= 6) {
    const mantissa = digits.length > 1 ? `${digits[0] ?? ''}.${digits.slice(1)}` : digits;
    const e = Math.abs(exp);
    return `${sign}${mantissa}e${exp < 0 ? '-' : '+'}${e < 10 ? `0${String(e)}` : String(e)}`;
  }
  if (exp < 0) return `${sign}0.${'0'.repeat(-exp - 1)}${digits}`;
  if (digits.length <= exp + 1) return `${sign}${digits}${'0'.repeat(exp + 1 - digits.length)}`;
  return `${sign}${digits.slice(0, exp + 1)}.${digits.slice(exp + 1)}`;
}

/** The fewest significant digits that read back as the same float32, the closest of them to it. */
function shortestFloat32Digits(f: number): { digits: string; exp: number } {
  for (let precision = 1; precision <= 9; precision++) {
    const rounded = f.toExponential(precision - 1);
    const [mantissa = '', exponent = '0'] = rounded.split('e');
    const digits = mantissa.replace('.', '');
    const exp = Number(exponent);
    // The correctly rounded candidate and its neighbours (the float32's interval may be lopsided).
    const base = BigInt(digits);
    const found = [base, base - 1n, base + 1n]
      .filter((d) => d > 0n)
      .map((d) => ({ d, value: Number(`${String(d)}e${String(exp - precision + 1)}`) }))
      .filter((c) => Math.fround(c.value) === f)
      .sort((a, b) => Math.abs(a.value - f) - Math.abs(b.value - f))[0];
    if (found !== undefined) {
      const text = String(found.d);
      // 9.99 + 1 in the last digit carries into a new leading digit: 10.0 → 1.00e+1.
      if (text.length > precision) return { digits: text.slice(0, precision).replace(/0+$/u, '') || '1', exp: exp + 1 };
      return { digits: text.replace(/0+$/u, '') || '0', exp };
    }
  }
  const [mantissa = '', exponent = '0'] = f.toExponential(8).split('e');
  return { digits: mantissa.replace('.', '').replace(/0+$/u, ''), exp: Number(exponent) };
}

/** What a Go string field receives (convertToJSONableObject); undefined for null (the field keeps its value). */
export function goStringValue(s: GoScalar): string | undefined {
  switch (s.kind) {
    case 'null':
    case 'error':
      return undefined;
    case 'bool':
      return s.value ? 'true' : 'false';
    case 'int':
      return String(s.value);
    case 'float':
      return formatGoFloat32(s.value);
    case 'string':
      return s.value;
  }
}

/** What a mapping key becomes (convertToJSONableObject's map keys), or why upstream refuses it. */
export function goMapKey(s: GoScalar): { readonly key: string } | { readonly problem: string } {
  switch (s.kind) {
    case 'error':
      return { problem: s.message };
    case 'null':
      return { problem: 'a null key (~, null or nothing) is not a valid key' };
    case 'int':
      return s.value > INT64_MAX
        ? { problem: `the key ${String(s.value)} is an unsigned 64-bit number, which upstream cannot use as a key` }
        : { key: String(s.value) };
    case 'float': {
      const text = formatGoFloat32(s.value);
      return { key: text === '+Inf' ? '.inf' : text === '-Inf' ? '-.inf' : text === 'NaN' ? '.nan' : text };
    }
    case 'bool':
      return { key: s.value ? 'true' : 'false' };
    case 'string':
      return { key: s.value };
  }
}

/** An int64 field (encoding/json): an integer, or a whole float written without a fraction below 1e21. */
export function goInt64Value(s: GoScalar): bigint | undefined {
  if (s.kind === 'int') return s.value <= INT64_MAX ? s.value : undefined;
  if (s.kind === 'float' && Number.isInteger(s.value) && Math.abs(s.value) < 1e21) {
    const v = BigInt(s.value);
    return v >= INT64_MIN && v <= INT64_MAX ? v : undefined;
  }
  return undefined;
}

/** Whether go-yaml v2 reads the node as null (`~`, `null`, nothing; `!!null`), which leaves a Go field as it was. */
export function isGoNull(node: Node | null): boolean {
  return node === null || (isScalar(node) && resolveGoScalar(node).kind === 'null');
}

/** A mapping key as upstream reads it: a scalar converted to text (`yes` → "true", `0755` → "493"), or why not. */
export function goKey(node: Node | null): { readonly key: string } | { readonly problem: string } {
  if (node === null) return { problem: 'a null key (~, null or nothing) is not a valid key' };
  if (!isScalar(node)) return { problem: 'mapping keys must be plain strings, not lists or mappings' };
  return goMapKey(resolveGoScalar(node));
}

/** How a value that does not fit a field is named in a message: a scalar's text as written, and what YAML made of it. */
export function describeValue(node: Node | null): string {
  if (node === null) return 'nothing';
  if (isMap(node)) return 'a mapping';
  if (isSeq(node)) return 'a list';
  if (!isScalar(node)) return 'nothing';
  const written = scalarText(node);
  const s = resolveGoScalar(node);
  switch (s.kind) {
    case 'null':
      return 'null';
    case 'bool':
      return `the boolean ${written}`;
    case 'int':
    case 'float':
      return `the number ${written}`;
    case 'string':
      return `the text ${JSON.stringify(written)}`;
    case 'error':
      return JSON.stringify(written);
  }
}
