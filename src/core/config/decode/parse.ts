// Decode + validate + normalize: raw ConfigMap keys → one immutable ProvisionerConfig.
// Pure: no IO. Every problem is collected; nothing stops at the first one.
import { isAlias, isScalar } from 'yaml';
import type { Node, Scalar, YAMLMap } from 'yaml';
import { InvalidConfigError } from '../../errors.js';
import type { ConfigIssue, SourcePosition } from '../../errors.js';
import { configHash } from '../canonical.js';
import { formatGoDuration, parseGoDuration } from '../duration.js';
import { CARVABLE_TYPES, type DeviceRule, type DeviceType, type RuleMode } from '../../devices/model.js';
import {
  DEFAULT_RULE_DEVICE_TYPES,
  DEFAULT_RULE_MODE,
  DEFAULT_SETTLE_MS,
  DEVICE_RULE_KEYS,
  MAX_RULE_PARTITIONS,
  RULE_DEVICE_TYPES,
  RULE_MODES,
  RULE_TRANSPORTS,
  writtenDeviceRule,
} from '../device-rules.js';
import { BadPatternError, splitNamePattern, validateGlob } from '../glob.js';
import { formatByteQuantity, parseByteQuantity } from '../quantity.js';
import {
  CLASS_FIELDS,
  DEFAULT_ACCESS_MODE,
  DEFAULT_BLOCK_CLEANER_COMMAND,
  DEFAULT_MIN_RESYNC_PERIOD,
  DEFAULT_NAME_PATTERN,
  DEFAULT_VOLUME_MODE,
  TOP_LEVEL_FIELDS,
} from '../model.js';
import type {
  ClassConfig,
  FieldType,
  NodeSelectorOperator,
  NodeSelectorRequirement,
  NodeSelectorTerm,
  ProvisionerConfig,
  Toleration,
  VolumeMode,
} from '../model.js';
import { suggest } from '../suggest.js';
import { describeValue, goInt64Value, goKey, goStringValue, isGoNull, resolveGoScalar, scalarText } from './go-yaml.js';
import type { GoScalar } from './go-yaml.js';
import {
  asMap,
  asSeq,
  badKeyReason,
  IssueSink,
  isMergeKey,
  MAX_YAML_DEPTH,
  yaml11Bool,
  YamlBudget,
  YamlText,
} from './yaml-node.js';
import type { ConfigSnapshot, LoadedConfig, RawEntry } from '../source/port.js';

export interface ParseResult {
  /** Undefined when there is at least one error. */
  readonly config: ProvisionerConfig | undefined;
  readonly issues: readonly ConfigIssue[];
  /** Where each class's discovery directories are written, by key path (`storageClassMap.NAME.mountDir`). */
  readonly positions: Readonly<Record<string, SourcePosition>>;
}

/** What an unknown key of a mapping is: ignored with a warning (upstream's structs), or an error saying why. */
type UnknownKeys = 'warn' | { readonly error: string };

/** A node together with the document it belongs to (for positions). */
interface Located {
  readonly node: Node | null;
  readonly yaml: YamlText;
}

const STRUCTURED: ReadonlySet<FieldType> = new Set([
  'class-map',
  'string-list',
  'string-map',
  'tolerations',
  'node-selector-terms',
  'device-rules',
]);

const ACCESS_MODES = ['ReadWriteOnce', 'ReadOnlyMany', 'ReadWriteMany', 'ReadWriteOncePod'] as const;
const VOLUME_MODES: readonly VolumeMode[] = ['Filesystem', 'Block'];
const SELECTOR_OPERATORS: ReadonlySet<string> = new Set(['In', 'NotIn', 'Exists', 'DoesNotExist', 'Gt', 'Lt']);
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/u;
const LABEL_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/u;

// Bounds on values, each what the kernel or the Kubernetes API accepts (docs/configuration.md, "Value
// limits"); a value beyond them could never work, so it is refused when the config is loaded.
/** Linux PATH_MAX is 4096 bytes including the terminating NUL. */
const PATH_MAX_BYTES = 4095;
/** Linux NAME_MAX: one component of a path. */
const NAME_MAX_BYTES = 255;
/** Filesystem type names are short words (ext4, xfs, fuse.sshfs); mount(8) takes them as one argument. */
const FS_TYPE_MAX_BYTES = 255;
/** A comma-separated list of globs, each matched against a directory entry name. */
const NAME_PATTERN_MAX_BYTES = 65_536;
/** Linux MAX_ARG_STRLEN: the longest single argument execve accepts. */
const ARG_MAX_BYTES = 131_072;
/** Kubernetes label values and the name part of label and taint keys. */
const LABEL_NAME_MAX = 63;
/** Echoed values are cut to this many characters in messages. */
const SHOWN_MAX = 64;

/** A value in a message: quoted and escaped (control characters, NUL), long ones cut. */
function shown(value: string): string {
  if (value.length <= SHOWN_MAX) return JSON.stringify(value);
  return `${JSON.stringify(value.slice(0, SHOWN_MAX))}… (${Buffer.byteLength(value, 'utf8')} bytes)`;
}

function codePoint(ch: string): string {
  return `U+${(ch.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, '0')}`;
}

/**
 * Why a text value cannot be used as a path, argument or name: not UTF-8 (an unpaired surrogate,
 * from an escape such as "\ud800"), longer than maxBytes of UTF-8, or holding NUL ('nul') or any
 * control character ('controls').
 */
function textProblem(value: string, maxBytes: number, reject: 'nul' | 'controls'): string | undefined {
  const surrogate = /\p{Cs}/u.exec(value);
  if (surrogate) {
    return `contains ${codePoint(surrogate[0])} at character ${surrogate.index + 1}, half of a UTF-16 pair, which is no character and cannot be written as UTF-8`;
  }
  const bytes = Buffer.byteLength(value, 'utf8');
  if (bytes > maxBytes) return `is ${bytes} bytes long; at most ${maxBytes} bytes are allowed`;
  const control = (reject === 'nul' ? /\0/u : /\p{Cc}/u).exec(value);
  if (control) return `contains the control character ${codePoint(control[0])} at character ${control.index + 1}`;
  return undefined;
}

/** Why key is not a Kubernetes qualified name (label key, taint key): [prefix/]name. */
function labelKeyProblem(key: string): string | undefined {
  const slash = key.lastIndexOf('/');
  const prefix = slash >= 0 ? key.slice(0, slash) : undefined;
  const name = slash >= 0 ? key.slice(slash + 1) : key;
  if (name.length > LABEL_NAME_MAX || !LABEL_NAME.test(name)) {
    return `${shown(key)} is not a valid label key: the name${prefix === undefined ? '' : ' after the /'} must be 1-63 characters of [A-Za-z0-9-_.], starting and ending with a letter or digit`;
  }
  if (prefix !== undefined && (prefix.length > 253 || !DNS1123_SUBDOMAIN.test(prefix))) {
    return `${shown(key)} is not a valid label key: the prefix before the / must be a DNS subdomain (lowercase, at most 253 characters)`;
  }
  return undefined;
}

function labelValueProblem(value: string): string | undefined {
  if (value === '' || (value.length <= LABEL_NAME_MAX && LABEL_NAME.test(value))) return undefined;
  return `${shown(value)} is not a valid label value (at most 63 characters of [A-Za-z0-9-_.], starting and ending with a letter or digit)`;
}

class Decoder {
  /** The entries of each mapping read so far, merges applied (see mappingEntries). */
  private readonly merged = new WeakMap<YAMLMap, ReadonlyMap<string, [string, Located, SourcePosition]>>();

  constructor(readonly sink: IssueSink) {}

  private pos(at: Located): SourcePosition {
    return at.yaml.position(at.node);
  }

  private typeError(at: Located, path: string, expected: string): void {
    this.sink.error(path, `expected ${expected}, found ${describeValue(at.node)}`, this.pos(at));
  }

  /** The scalar of a field, as upstream's decoder resolves it; reports what upstream's decoder refuses. */
  private scalar(at: Located, path: string): { readonly node: Scalar; readonly value: GoScalar } | undefined {
    const node = at.node;
    if (node === null || !isScalar(node)) return undefined;
    const value = resolveGoScalar(node);
    if (value.kind === 'error') {
      this.sink.error(path, `${value.message}: upstream's YAML decoder (go-yaml v2) refuses this value`, this.pos(at));
      return undefined;
    }
    return { node, value };
  }

  /**
   * A Go string field: exactly what upstream's sigs.k8s.io/yaml gives it (a number or boolean
   * converted from its resolved value: `0755` → "493", `yes` → "true", `1e6` → "1e+06"; a
   * date-like text kept as written). Where that differs from the text as written, a warning says so.
   */
  string(at: Located, path: string): string | undefined {
    if (isGoNull(at.node)) return undefined;
    if (at.node === null || !isScalar(at.node)) {
      this.typeError(at, path, 'a string');
      return undefined;
    }
    const scalar = this.scalar(at, path);
    if (scalar === undefined) return undefined;
    const text = goStringValue(scalar.value);
    if (text === undefined) return undefined;
    const written = scalarText(scalar.node);
    if (written !== text && scalar.node.tag === undefined) {
      const what = scalar.value.kind === 'bool' ? 'a boolean' : 'a number';
      this.sink.warn(
        path,
        `YAML 1.1 reads ${JSON.stringify(written)} as ${what}, so the value is ${JSON.stringify(text)} (as upstream reads it); quote it to keep ${JSON.stringify(written)}`,
        this.pos(at),
      );
    }
    return text;
  }

  bool(at: Located, path: string): boolean | undefined {
    if (isGoNull(at.node)) return undefined;
    const scalar = this.scalar(at, path);
    if (scalar?.value.kind === 'bool') return scalar.value.value;
    // A quoted "yes" still means true (upstream's encoding/json refuses a string here; no reason to).
    if (scalar?.value.kind === 'string') {
      const b = yaml11Bool(scalar.value.value);
      if (b !== undefined) return b;
    }
    if (scalar !== undefined || !isScalar(at.node)) this.typeError(at, path, 'a boolean (true/false, yes/no, on/off)');
    return undefined;
  }

  /** An int64 field (encoding/json): an integer, or a whole number written as a float (1e3). */
  int64(at: Located, path: string): number | undefined {
    if (isGoNull(at.node)) return undefined;
    const scalar = this.scalar(at, path);
    const v = scalar === undefined ? undefined : goInt64Value(scalar.value);
    if (v !== undefined && v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER))
      return Number(v);
    if (scalar !== undefined || !isScalar(at.node)) {
      this.typeError(
        at,
        path,
        v === undefined ? 'an integer' : `an integer between ${Number.MIN_SAFE_INTEGER} and ${Number.MAX_SAFE_INTEGER}`,
      );
    }
    return undefined;
  }

  /** A Go duration string (metav1.Duration); zeroWarning, when given, is said of a zero value. */
  duration(at: Located, path: string, zeroWarning?: string): string | undefined {
    if (isGoNull(at.node)) return undefined;
    const scalar = this.scalar(at, path);
    if (scalar?.value.kind !== 'string') {
      if (scalar !== undefined || !isScalar(at.node)) this.typeError(at, path, 'a Go duration string such as 5m0s');
      return undefined;
    }
    const v = scalar.value.value;
    const parsed = parseGoDuration(v);
    if (!parsed.ok) {
      this.sink.error(path, parsed.message, this.pos(at));
      return undefined;
    }
    if (parsed.nanos < 0n) {
      this.sink.error(path, `must not be negative, found ${v}`, this.pos(at));
      return undefined;
    }
    if (parsed.nanos === 0n && zeroWarning !== undefined) this.sink.warn(path, zeroWarning, this.pos(at));
    return formatGoDuration(parsed.nanos);
  }

  /** A list of strings; check (when given) says why an element cannot be used. */
  stringList(
    at: Located,
    path: string,
    check?: (value: string, index: number) => string | undefined,
  ): string[] | undefined {
    if (isGoNull(at.node)) return undefined;
    const seq = asSeq(at.node);
    if (!seq) {
      this.typeError(at, path, 'a list of strings');
      return undefined;
    }
    const out: string[] = [];
    seq.items.forEach((item, i) => {
      const itemAt = { node: at.yaml.resolve(item), yaml: at.yaml };
      const s = this.string(itemAt, `${path}[${i}]`);
      if (s === undefined) {
        if (isGoNull(itemAt.node)) this.sink.error(`${path}[${i}]`, 'must not be null', this.pos(at));
        return;
      }
      const problem = check?.(s, i);
      if (problem !== undefined) this.sink.error(`${path}[${i}]`, problem, this.pos(itemAt));
      out.push(s);
    });
    return out;
  }

  /**
   * Mapping with string keys; returns [key, value node, key position] triples, reporting duplicates.
   * YAML 1.1 merge keys (`<<: *defaults`) are applied as upstream's go-yaml v2 applies them.
   */
  entries(at: Located, path: string, expected: string): [string, Located, SourcePosition][] | undefined {
    if (isGoNull(at.node)) return undefined;
    const map = asMap(at.node);
    if (!map) {
      this.typeError(at, path, expected);
      return undefined;
    }
    return [...this.mappingEntries(map, at.yaml, path, 0).values()];
  }

  /**
   * The entries of one mapping in order, merges applied: go-yaml v2 sets each entry in turn, so a key
   * after `<<` replaces the merged one, and of a list of merged mappings the earlier ones win. Each
   * mapping is read once (a merged anchor reports its problems once, at the first path that reaches it).
   */
  private mappingEntries(
    map: YAMLMap,
    yaml: YamlText,
    path: string,
    depth: number,
  ): ReadonlyMap<string, [string, Located, SourcePosition]> {
    const known = this.merged.get(map);
    if (known !== undefined) return known;
    const out = new Map<string, [string, Located, SourcePosition]>();
    this.merged.set(map, out);
    const written = new Set<string>();
    for (const pair of map.items) {
      const keyNode = yaml.resolve(pair.key);
      const keyPos = yaml.position(keyNode);
      if (isMergeKey(keyNode)) {
        for (const [key, entry] of this.mergedEntries(pair.value, yaml, path, depth, keyPos)) {
          if (written.has(key)) {
            // go-yaml v2 lets the merged value replace the one written before `<<`; YAML 1.1 and most
            // other tools keep the written one. Neither reading is safe to pick silently.
            this.sink.error(
              `${path}.${key}`,
              `is written before the merge key (<<) that also sets it: upstream (go-yaml v2) takes the merged value, YAML 1.1 the written one; put "<<" first in the mapping so the written value wins`,
              out.get(key)?.[2] ?? keyPos,
            );
            continue;
          }
          out.set(key, entry);
        }
        continue;
      }
      const k = goKey(keyNode);
      if ('problem' in k) {
        this.sink.error(path, isMergeKey(keyNode) ? badKeyReason(keyNode) : k.problem, keyPos);
        continue;
      }
      const key = k.key;
      if (written.has(key)) {
        this.sink.error(`${path}.${key}`, 'duplicate key', keyPos);
        continue;
      }
      written.add(key);
      // Replaces a merged entry of the same key: a key after `<<` overrides the merge.
      out.delete(key);
      out.set(key, [key, { node: yaml.resolve(pair.value), yaml }, keyPos]);
    }
    return out;
  }

  /** What one `<<: value` merges: a mapping, or a list of mappings of which the earlier ones win. */
  private mergedEntries(
    written: unknown,
    yaml: YamlText,
    path: string,
    depth: number,
    keyPos: SourcePosition,
  ): ReadonlyMap<string, [string, Located, SourcePosition]> {
    if (depth >= MAX_YAML_DEPTH) {
      this.sink.error(path, `merge keys (<<) nested deeper than ${MAX_YAML_DEPTH} levels`, keyPos);
      return new Map();
    }
    // As in go-yaml v2, an alias must stand for a mapping; only a list written in place lists mappings.
    const seq = isAlias(written) ? undefined : asSeq(yaml.resolve(written));
    const sources = seq ? seq.items.map((item) => yaml.resolve(item)) : [yaml.resolve(written)];
    const out = new Map<string, [string, Located, SourcePosition]>();
    for (const source of sources.reverse()) {
      const map = asMap(source);
      if (map === undefined) {
        this.sink.error(
          path,
          `a merge key (<<) takes a mapping or a list of mappings (usually an alias such as <<: *defaults), found ${describeValue(source)}`,
          source !== null ? yaml.position(source) : keyPos,
        );
        continue;
      }
      for (const [key, entry] of this.mappingEntries(map, yaml, path, depth + 1)) {
        out.delete(key);
        out.set(key, entry);
      }
    }
    return out;
  }

  /** The items of a list, each resolved; undefined (reported) when the value is no list. */
  items(at: Located, path: string, expected: string): Located[] | undefined {
    if (isGoNull(at.node)) return undefined;
    const seq = asSeq(at.node);
    if (!seq) {
      this.typeError(at, path, expected);
      return undefined;
    }
    return seq.items.map((item) => ({ node: at.yaml.resolve(item), yaml: at.yaml }));
  }

  /** A size in bytes: a Kubernetes quantity (`100Gi`) or a plain number, whole and positive. */
  byteSize(at: Located, path: string): number | undefined {
    if (isGoNull(at.node)) return undefined;
    const scalar = this.scalar(at, path);
    const v = scalar?.value;
    // A number as written (`1e12`) is a quantity too; an int that YAML 1.1 reads from `0x10` is not.
    const text =
      v?.kind === 'string'
        ? v.value
        : v?.kind === 'int'
          ? v.value.toString()
          : v?.kind === 'float' && scalar
            ? scalarText(scalar.node)
            : undefined;
    if (text === undefined) {
      if (scalar !== undefined || !isScalar(at.node)) this.typeError(at, path, 'a size such as 100Gi or 500G');
      return undefined;
    }
    const parsed = parseByteQuantity(text);
    if (!parsed.ok) this.sink.error(path, parsed.message, this.pos(at));
    return parsed.ok ? parsed.bytes : undefined;
  }

  /** A whole number from 1 to max. */
  count(at: Located, path: string, max = Number.MAX_SAFE_INTEGER): number | undefined {
    const v = this.int64(at, path);
    if (v === undefined) return undefined;
    if (v >= 1 && v <= max) return v;
    const range = max === Number.MAX_SAFE_INTEGER ? 'a positive integer' : `an integer from 1 to ${max}`;
    this.sink.error(path, `must be ${range}, found ${v}`, this.pos(at));
    return undefined;
  }

  /** A mapping of Kubernetes labels, each key and value checked where it is written. */
  labels(at: Located, path: string): Record<string, string> | undefined {
    const entries = this.entries(at, path, 'a mapping of label keys to values');
    if (!entries) return undefined;
    const out: Record<string, string> = {};
    for (const [key, value, keyPosition] of entries) {
      const where = `${path}.${key}`;
      const keyProblem = labelKeyProblem(key);
      if (keyProblem !== undefined) this.sink.error(where, keyProblem, keyPosition);
      // A null value is the empty label, as encoding/json stores a map element's zero value.
      const s = isGoNull(value.node) ? '' : this.string(value, where);
      if (s === undefined) continue;
      const valueProblem = labelValueProblem(s);
      if (valueProblem !== undefined) this.sink.error(where, valueProblem, this.pos(value));
      out[key] = s;
    }
    return out;
  }

  /** A Kubernetes qualified name (label or taint key) or nothing. */
  labelKey(at: Located, path: string): string | undefined {
    const key = this.string(at, path);
    const problem = key === undefined || key === '' ? undefined : labelKeyProblem(key);
    if (problem !== undefined) this.sink.error(path, problem, this.pos(at));
    return key;
  }

  /**
   * Fields of a Go struct decoded through encoding/json: names match case-insensitively;
   * unknown names are warnings with a suggestion (upstream silently ignores them), or errors
   * (`unknown: { error: why }`) where this agent's own keys are read and a misspelt one would widen what is done.
   */
  struct<F extends string>(
    at: Located,
    path: string,
    fields: readonly F[],
    what: string,
    unknown: UnknownKeys = 'warn',
  ): Map<F, { value: Located; position: SourcePosition }> | undefined {
    const entries = this.entries(at, path, what);
    if (!entries) return undefined;
    return this.matchFields(
      entries.map(([key, value, position]) => ({ key, value, position })),
      path,
      fields,
      unknown,
    );
  }

  matchFields<F extends string, V>(
    entries: readonly { key: string; value: V; position: SourcePosition }[],
    path: string,
    fields: readonly F[],
    unknown: UnknownKeys = 'warn',
  ): Map<F, { value: V; position: SourcePosition }> {
    const byLower = new Map(fields.map((f) => [f.toLowerCase(), f]));
    const found = new Map<F, { value: V; position: SourcePosition; key: string }>();
    for (const { key, value, position } of entries) {
      const field = byLower.get(key.toLowerCase());
      const where = path === '' ? key : `${path}.${key}`;
      if (field === undefined) {
        const hint = suggest(key, fields);
        if (unknown === 'warn') {
          this.sink.warn(where, `unknown key ignored${hint ? `; did you mean "${hint}"?` : ''}`, position);
        } else {
          const known = hint ? `did you mean "${hint}"?` : `the keys are ${fields.join(', ')}`;
          this.sink.error(where, `unknown key (${unknown.error}); ${known}`, position);
        }
        continue;
      }
      const previous = found.get(field);
      if (previous) {
        this.sink.error(
          where,
          `duplicate key: ${shown(previous.key)} and ${shown(key)} both set ${field} (keys match case-insensitively)`,
          position,
        );
        continue;
      }
      found.set(field, { value, position, key });
    }
    return found;
  }

  tolerations(at: Located, path: string): Toleration[] | undefined {
    if (isGoNull(at.node)) return undefined;
    const seq = asSeq(at.node);
    if (!seq) {
      this.typeError(at, path, 'a list of tolerations');
      return undefined;
    }
    const out: Toleration[] = [];
    seq.items.forEach((item, i) => {
      const p = `${path}[${i}]`;
      const fields = this.struct({ node: at.yaml.resolve(item), yaml: at.yaml }, p, TOLERATION_FIELDS, 'a toleration');
      if (!fields) return;
      const t: { -readonly [K in keyof Toleration]: Toleration[K] } = {};
      const str = (f: (typeof TOLERATION_FIELDS)[number]): string | undefined => {
        const e = fields.get(f);
        return e ? this.string(e.value, `${p}.${f}`) : undefined;
      };
      const keyEntry = fields.get('key');
      // The API server checks a toleration as it does a taint: a qualified key, a label value.
      const key = keyEntry ? this.labelKey(keyEntry.value, `${p}.key`) : undefined;
      const value = str('value');
      const valueProblem = value === undefined ? undefined : labelValueProblem(value);
      const valueAt = fields.get('value')?.value;
      if (valueProblem !== undefined) this.sink.error(`${p}.value`, valueProblem, valueAt && this.pos(valueAt));
      const operator = str('operator');
      const effect = str('effect');
      if (key !== undefined && key !== '') t.key = key;
      if (operator !== undefined && operator !== '') {
        if (operator === 'Exists' || operator === 'Equal') t.operator = operator;
        else
          this.sink.error(
            `${p}.operator`,
            `must be Exists or Equal, found ${shown(operator)}`,
            fields.get('operator')?.position,
          );
      }
      if (value !== undefined && value !== '') t.value = value;
      if (effect !== undefined && effect !== '') {
        if (effect === 'NoSchedule' || effect === 'PreferNoSchedule' || effect === 'NoExecute') t.effect = effect;
        else
          this.sink.error(
            `${p}.effect`,
            `must be NoSchedule, PreferNoSchedule or NoExecute, found ${shown(effect)}`,
            fields.get('effect')?.position,
          );
      }
      const seconds = fields.get('tolerationSeconds');
      if (seconds && !isGoNull(seconds.value.node)) {
        const v = this.int64(seconds.value, `${p}.tolerationSeconds`);
        if (v !== undefined) t.tolerationSeconds = v;
      }
      if (t.operator === 'Exists' && t.value !== undefined) {
        this.sink.error(`${p}.value`, 'must be empty when operator is Exists', fields.get('value')?.position);
      }
      out.push(t);
    });
    return out;
  }

  requirements(at: Located, path: string): NodeSelectorRequirement[] | undefined {
    if (isGoNull(at.node)) return undefined;
    const seq = asSeq(at.node);
    if (!seq) {
      this.typeError(at, path, 'a list of node selector requirements');
      return undefined;
    }
    const out: NodeSelectorRequirement[] = [];
    seq.items.forEach((item, i) => {
      const p = `${path}[${i}]`;
      const itemAt = { node: at.yaml.resolve(item), yaml: at.yaml };
      const fields = this.struct(itemAt, p, REQUIREMENT_FIELDS, 'a node selector requirement');
      if (!fields) return;
      const keyEntry = fields.get('key');
      const key = keyEntry ? this.string(keyEntry.value, `${p}.key`) : undefined;
      const opEntry = fields.get('operator');
      const operator = opEntry ? this.string(opEntry.value, `${p}.operator`) : undefined;
      const valuesEntry = fields.get('values');
      const values = valuesEntry ? this.stringList(valuesEntry.value, `${p}.values`) : undefined;
      if (key === undefined || key === '') {
        this.sink.error(`${p}.key`, 'is required', at.yaml.position(itemAt.node));
        return;
      }
      if (operator === undefined || !SELECTOR_OPERATORS.has(operator)) {
        this.sink.error(
          `${p}.operator`,
          `must be one of In, NotIn, Exists, DoesNotExist, Gt, Lt; found ${operator === undefined ? 'nothing' : shown(operator)}`,
          opEntry?.position ?? at.yaml.position(itemAt.node),
        );
        return;
      }
      const op = operator as NodeSelectorOperator;
      const n = values?.length ?? 0;
      const valuesPos = valuesEntry?.position ?? at.yaml.position(itemAt.node);
      if ((op === 'In' || op === 'NotIn') && n === 0)
        this.sink.error(`${p}.values`, `must not be empty for ${op}`, valuesPos);
      if ((op === 'Exists' || op === 'DoesNotExist') && n > 0)
        this.sink.error(`${p}.values`, `must be empty for ${op}`, valuesPos);
      if ((op === 'Gt' || op === 'Lt') && n !== 1)
        this.sink.error(`${p}.values`, `must have exactly one value for ${op}`, valuesPos);
      out.push(values && values.length > 0 ? { key, operator: op, values } : { key, operator: op });
    });
    return out;
  }

  selector(at: Located, path: string): NodeSelectorTerm[] | undefined {
    if (isGoNull(at.node)) return undefined;
    const seq = asSeq(at.node);
    if (!seq) {
      this.typeError(at, path, 'a list of node selector terms');
      return undefined;
    }
    const out: NodeSelectorTerm[] = [];
    seq.items.forEach((item, i) => {
      const p = `${path}[${i}]`;
      const errorsBefore = this.sink.issues.length;
      const termAt = { node: at.yaml.resolve(item), yaml: at.yaml };
      const fields = this.struct(termAt, p, TERM_FIELDS, 'a node selector term');
      if (!fields) return;
      const expr = fields.get('matchExpressions');
      const byField = fields.get('matchFields');
      const matchExpressions = expr ? this.requirements(expr.value, `${p}.matchExpressions`) : undefined;
      const matchFields = byField ? this.requirements(byField.value, `${p}.matchFields`) : undefined;
      const term: { matchExpressions?: NodeSelectorRequirement[]; matchFields?: NodeSelectorRequirement[] } = {};
      if (matchExpressions && matchExpressions.length > 0) term.matchExpressions = matchExpressions;
      if (matchFields && matchFields.length > 0) term.matchFields = matchFields;
      const failedInside = this.sink.issues.slice(errorsBefore).some((x) => x.severity === 'error');
      if (term.matchExpressions === undefined && term.matchFields === undefined) {
        if (!failedInside)
          this.sink.error(p, 'a node selector term needs matchExpressions or matchFields', this.pos(termAt));
        return;
      }
      out.push(term);
    });
    return out;
  }
}

const TOLERATION_FIELDS = ['key', 'operator', 'value', 'effect', 'tolerationSeconds'] as const;
const REQUIREMENT_FIELDS = ['key', 'operator', 'values'] as const;
const TERM_FIELDS = ['matchExpressions', 'matchFields'] as const;
const TOP_NAMES = TOP_LEVEL_FIELDS.map((f) => f.name);
const CLASS_NAMES = CLASS_FIELDS.map((f) => f.name);
const TYPE_OF: ReadonlyMap<string, FieldType> = new Map(
  [...TOP_LEVEL_FIELDS, ...CLASS_FIELDS].map((f) => [f.name, f.type] as const),
);

/** Resolve a raw ConfigMap value to a YAML node: text is parsed; a string for a structured field is parsed too. */
function locate(
  entry: RawEntry,
  type: FieldType,
  path: string,
  sink: IssueSink,
  budget: YamlBudget,
): Located | undefined {
  const v = entry.value;
  if (v.kind === 'text') {
    const yaml = YamlText.parse(v.text, v.origin, sink, path, budget);
    return yaml ? { node: yaml.root, yaml } : undefined;
  }
  const node = v.node;
  if (STRUCTURED.has(type) && node !== null && isScalar(node) && typeof node.value === 'string') {
    // The single-file layout may hold a key exactly as a ConfigMap does: a YAML document in a string.
    const yaml = YamlText.parse(node.value, v.yaml.originOfScalarContent(node), sink, path, budget);
    return yaml ? { node: yaml.root, yaml } : undefined;
  }
  return { node, yaml: v.yaml };
}

function normalizeDir(
  value: string | undefined,
  path: string,
  sink: IssueSink,
  position: SourcePosition | undefined,
): string | undefined {
  if (value === undefined || value === '') return undefined;
  const problem = textProblem(value, PATH_MAX_BYTES, 'controls');
  if (problem !== undefined) {
    sink.error(path, problem, position);
    return undefined;
  }
  if (!value.startsWith('/')) {
    sink.error(path, `must be an absolute path, found ${shown(value)}`, position);
    return undefined;
  }
  const long = value.split('/').find((part) => Buffer.byteLength(part, 'utf8') > NAME_MAX_BYTES);
  if (long !== undefined) {
    sink.error(path, `the path component ${shown(long)} is longer than ${NAME_MAX_BYTES} bytes (NAME_MAX)`, position);
    return undefined;
  }
  // filepath.Join/Clean semantics: upstream joins entries onto this path.
  const parts: string[] = [];
  for (const part of value.split('/')) {
    if (part === '' || part === '.') continue;
    if (part === '..') parts.pop();
    else parts.push(part);
  }
  const cleaned = `/${parts.join('/')}`;
  // Upstream would silently use the cleaned path (`/mnt/../etc` is /etc); no operator means that.
  if (value.split('/').includes('..')) {
    sink.error(
      path,
      `${shown(value)} has a ".." segment, which would make it ${shown(cleaned)}; write the directory itself, without ".."`,
      position,
    );
    return undefined;
  }
  return cleaned;
}

type ClassField = (typeof CLASS_NAMES)[number];

/** One class's fields being read: where each is, and the sink and decoder they are read with. */
interface ClassFields {
  readonly name: string;
  /** `storageClassMap.NAME` */
  readonly path: string;
  readonly sink: IssueSink;
  readonly d: Decoder;
  readonly get: (f: ClassField) => Located | undefined;
  /** Where the field's value is written, else where the class is. */
  readonly posOf: (f: ClassField) => SourcePosition;
  /** The field as a Go string field reads it. */
  readonly str: (f: ClassField) => string | undefined;
}

function classFields(name: string, at: Located, sink: IssueSink, d: Decoder): ClassFields | undefined {
  const path = `storageClassMap.${name}`;
  const fields = d.struct(at, path, CLASS_NAMES, 'a storage class mapping (hostDir, mountDir, …)');
  if (!fields) {
    if (isGoNull(at.node))
      sink.error(path, 'storage class has no settings; hostDir and mountDir are required', at.yaml.position(at.node));
    return undefined;
  }
  const classPos = at.yaml.position(at.node);
  const get = (f: ClassField): Located | undefined => fields.get(f)?.value;
  return {
    name,
    path,
    sink,
    d,
    get,
    posOf: (f) => {
      const v = get(f);
      return v ? v.yaml.position(v.node) : classPos;
    },
    str: (f) => {
      const v = get(f);
      return v ? d.string(v, `${path}.${f}`) : undefined;
    },
  };
}

/** hostDir and mountDir: required absolute paths, cleaned like filepath.Clean. */
function classDirectories(c: ClassFields, classPos: SourcePosition): Partial<Record<DirField, string>> {
  const out: Partial<Record<DirField, string>> = {};
  for (const f of ['hostDir', 'mountDir'] as const) {
    const value = normalizeDir(c.str(f), `${c.path}.${f}`, c.sink, c.posOf(f));
    if (value !== undefined) out[f] = value;
    else if (!c.sink.issues.some((i) => i.path === `${c.path}.${f}` && i.severity === 'error')) {
      c.sink.error(`${c.path}.${f}`, `is required: storage class ${c.name} is misconfigured, missing ${f}`, classPos);
    }
  }
  return out;
}

/** blockCleanerCommand: a non-empty argv, each argument something execve takes. */
function classCleanerCommand(c: ClassFields): readonly string[] {
  const cleaner = c.get('blockCleanerCommand');
  if (!cleaner || isGoNull(cleaner.node)) return DEFAULT_BLOCK_CLEANER_COMMAND;
  const where = `${c.path}.blockCleanerCommand`;
  const list = c.d.stringList(cleaner, where, (arg, i) =>
    // execve takes NUL-terminated strings, each at most MAX_ARG_STRLEN; the command is a path.
    textProblem(arg, i === 0 ? PATH_MAX_BYTES : ARG_MAX_BYTES, 'nul'),
  );
  if (list === undefined) return DEFAULT_BLOCK_CLEANER_COMMAND;
  if (list.length === 0) {
    c.sink.error(where, 'must not be an empty list (omit it for the default)', c.posOf('blockCleanerCommand'));
  } else if (list[0] === '') {
    c.sink.error(`${where}[0]`, 'the command must not be empty', c.posOf('blockCleanerCommand'));
  } else {
    return list;
  }
  return DEFAULT_BLOCK_CLEANER_COMMAND;
}

/** A field with a fixed set of values (volumeMode, accessMode): the default when empty, a suggestion when misspelt. */
function classEnum<T extends string>(
  c: ClassFields,
  field: ClassField,
  allowed: readonly T[],
  fallback: T,
  what: string,
): T {
  const value = c.str(field);
  if (value === undefined || value === '') return fallback;
  const found = allowed.find((a) => a === value);
  if (found !== undefined) return found;
  const hint = suggest(value, allowed, { caseInsensitive: true });
  const expected =
    allowed.length === 2 ? `"${allowed[0] ?? ''}" or "${allowed[1] ?? ''}"` : `one of ${allowed.join(', ')}`;
  c.sink.error(
    `${c.path}.${field}`,
    `unsupported ${what} ${shown(value)}: expected ${expected}${hint ? `; did you mean "${hint}"?` : ''}`,
    c.posOf(field),
  );
  return fallback;
}

/** fsType: one word a mount(8) takes, meaningless for Block volumes. */
function classFsType(c: ClassFields, volumeMode: VolumeMode): string {
  const fsType = c.str('fsType') ?? '';
  const problem =
    textProblem(fsType, FS_TYPE_MAX_BYTES, 'controls') ??
    (/\s/u.test(fsType)
      ? `${shown(fsType)} contains a space; a filesystem type is one word such as ext4 or xfs`
      : undefined);
  if (problem !== undefined) {
    c.sink.error(`${c.path}.fsType`, problem, c.posOf('fsType'));
    return '';
  }
  if (fsType !== '' && volumeMode === 'Block') {
    c.sink.warn(`${c.path}.fsType`, 'has no effect when volumeMode is Block', c.posOf('fsType'));
  }
  return fsType;
}

/** namePattern: comma-separated globs, `*` when empty. */
function classNamePattern(c: ClassFields): string {
  const where = `${c.path}.namePattern`;
  let namePattern = c.str('namePattern') ?? '';
  // A file name never holds NUL; the bound keeps glob matching cheap.
  const problem = textProblem(namePattern, NAME_PATTERN_MAX_BYTES, 'nul');
  if (problem !== undefined) c.sink.error(where, problem, c.posOf('namePattern'));
  if (namePattern === '' || problem !== undefined) namePattern = DEFAULT_NAME_PATTERN;
  const patterns = splitNamePattern(namePattern);
  if (patterns.length === 0) c.sink.error(where, 'contains no pattern (only commas)', c.posOf('namePattern'));
  for (const p of patterns) {
    try {
      validateGlob(p);
    } catch (err) {
      if (!(err instanceof BadPatternError)) throw err;
      c.sink.error(where, `malformed glob ${shown(p)}: ${err.message}`, c.posOf('namePattern'));
    }
    if (p !== p.trim()) {
      c.sink.warn(
        where,
        `pattern ${shown(p)} has surrounding spaces, which must match literally (patterns are split on "," without trimming)`,
        c.posOf('namePattern'),
      );
    }
  }
  return namePattern;
}

/** Below this, a disk unmounted for a moment (a remount, a node reboot) could lose its PV. */
const DELETE_MISSING_AFTER_WARN_BELOW_NANOS = 60_000_000_000n;

/** deleteMissingAfter: a Go duration; 0s (or absent) is off, and then absent from the config. */
function classDeleteMissingAfter(c: ClassFields): string | undefined {
  const at = c.get('deleteMissingAfter');
  const where = `${c.path}.deleteMissingAfter`;
  const value = at ? c.d.duration(at, where) : undefined;
  if (value === undefined || value === '0s') return undefined;
  const parsed = parseGoDuration(value);
  if (parsed.ok && parsed.nanos < DELETE_MISSING_AFTER_WARN_BELOW_NANOS) {
    c.sink.warn(
      where,
      `${value} is shorter than a minute: an Available PV whose disk is unmounted for a moment (a remount, a reboot) would be deleted and published again`,
      c.posOf('deleteMissingAfter'),
    );
  }
  return value;
}

const RULE_KEYS = DEVICE_RULE_KEYS.map((k) => k.name);
type RuleKey = (typeof RULE_KEYS)[number];
/** A misspelt selector would select more devices than meant, so a rule refuses keys it does not know. */
const RULE_UNKNOWN_KEYS = { error: 'a misspelt selector would widen the rule' } as const;
/** The keys that narrow which devices a rule takes (nodeLabels and maxDevices narrow where and how many). */
const RULE_SELECTORS: readonly RuleKey[] = [
  'byIdNames',
  'rotational',
  'minSize',
  'maxSize',
  'models',
  'vendors',
  'serials',
  'transports',
];

/** One device rule's fields being read. */
interface RuleFields {
  /** `storageClassMap.NAME.deviceRules[i]` */
  readonly path: string;
  readonly d: Decoder;
  readonly get: (k: RuleKey) => Located | undefined;
  /** Where the key's value is written, else where the rule is. */
  readonly posOf: (k: RuleKey) => SourcePosition;
}

/** A value with a fixed set of spellings; a suggestion when misspelt. */
function enumProblem(value: string, allowed: readonly string[], what: string): string | undefined {
  if (allowed.includes(value)) return undefined;
  const hint = suggest(value, allowed, { caseInsensitive: true });
  return `unknown ${what} ${shown(value)}: expected one of ${allowed.join(', ')}${hint ? `; did you mean "${hint}"?` : ''}`;
}

/** mode: plan (the default) or apply. */
function ruleMode(r: RuleFields): RuleMode {
  const at = r.get('mode');
  const value = at ? r.d.string(at, `${r.path}.mode`) : undefined;
  if (value === undefined || value === '') return DEFAULT_RULE_MODE;
  const problem = enumProblem(value, RULE_MODES, 'mode');
  if (problem !== undefined) r.d.sink.error(`${r.path}.mode`, problem, r.posOf('mode'));
  return RULE_MODES.find((m) => m === value) ?? DEFAULT_RULE_MODE;
}

/** A list naming values of a fixed set (types, transports): deduplicated, in the set's order. */
function ruleEnumList<T extends string>(
  r: RuleFields,
  key: RuleKey,
  allowed: readonly T[],
  what: string,
): T[] | undefined {
  const at = r.get(key);
  const where = `${r.path}.${key}`;
  const list = at ? r.d.stringList(at, where, (v) => enumProblem(v, allowed, what)) : undefined;
  if (list === undefined) return undefined;
  if (list.length === 0)
    r.d.sink.error(
      where,
      `must not be an empty list, which matches no device (omit it for ${what === 'type' ? '[disk]' : 'any'})`,
      r.posOf(key),
    );
  return allowed.filter((a) => list.includes(a));
}

/** A list of Go filepath.Match globs; byId: matched against one /dev/disk/by-id name, which has no '/'. */
function ruleGlobs(r: RuleFields, key: RuleKey, byId: boolean): string[] | undefined {
  const at = r.get(key);
  const where = `${r.path}.${key}`;
  const globProblem = (glob: string): string | undefined => {
    try {
      validateGlob(glob);
      return undefined;
    } catch (err) {
      if (!(err instanceof BadPatternError)) throw err;
      return `malformed glob ${shown(glob)}: ${err.message}`;
    }
  };
  const list = at
    ? r.d.stringList(
        at,
        where,
        (glob) =>
          textProblem(glob, PATH_MAX_BYTES, 'nul') ??
          (glob === '' ? 'an empty pattern matches nothing' : undefined) ??
          globProblem(glob) ??
          (byId && glob.includes('/')
            ? `${shown(glob)} contains "/": globs match the names in /dev/disk/by-id, without the directory`
            : undefined),
      )
    : undefined;
  if (list?.length === 0)
    r.d.sink.error(where, 'must not be an empty list, which matches no device (omit it for any)', r.posOf(key));
  return list;
}

/** minSize and maxSize, in bytes; a range no device fits is refused. */
function ruleSizes(r: RuleFields): { minBytes?: number; maxBytes?: number } {
  const size = (key: 'minSize' | 'maxSize'): number | undefined => {
    const at = r.get(key);
    return at ? r.d.byteSize(at, `${r.path}.${key}`) : undefined;
  };
  const minBytes = size('minSize');
  const maxBytes = size('maxSize');
  if (minBytes !== undefined && maxBytes !== undefined && minBytes > maxBytes) {
    r.d.sink.error(
      `${r.path}.minSize`,
      `${formatByteQuantity(minBytes)} is larger than maxSize ${formatByteQuantity(maxBytes)}: no device can match`,
      r.posOf('minSize'),
    );
  }
  return { ...(minBytes !== undefined ? { minBytes } : {}), ...(maxBytes !== undefined ? { maxBytes } : {}) };
}

/** partitions: 1-128, and only for whole devices (a partition, dm, md or multipath device is not carved). */
function rulePartitions(r: RuleFields, types: readonly DeviceType[]): number | undefined {
  const at = r.get('partitions');
  const where = `${r.path}.partitions`;
  const partitions = at ? r.d.count(at, where, MAX_RULE_PARTITIONS) : undefined;
  if (partitions !== undefined && !types.every((t) => CARVABLE_TYPES.includes(t))) {
    r.d.sink.error(
      where,
      `carves whole devices only: types may be disk and loop, found [${types.join(', ')}]`,
      r.posOf('partitions'),
    );
  }
  return partitions;
}

/** settle: a Go duration, in whole milliseconds. */
function ruleSettleMs(r: RuleFields): number {
  const at = r.get('settle');
  const value = at ? r.d.duration(at, `${r.path}.settle`) : undefined;
  const parsed = value === undefined ? undefined : parseGoDuration(value);
  return parsed?.ok === true ? Number(parsed.nanos / 1_000_000n) : DEFAULT_SETTLE_MS;
}

/** The fields of o that are set: an optional field of the config is absent, never undefined. */
function setFields<T extends object>(o: T): { [K in keyof T]?: Exclude<T[K], undefined> } {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as {
    [K in keyof T]?: Exclude<T[K], undefined>;
  };
}

function decodeDeviceRule(r: RuleFields): DeviceRule {
  const mode = ruleMode(r);
  const types = ruleEnumList(r, 'types', RULE_DEVICE_TYPES, 'type') ?? DEFAULT_RULE_DEVICE_TYPES;
  const bool = (key: 'rotational' | 'allowRemovable'): boolean | undefined => {
    const at = r.get(key);
    return at ? r.d.bool(at, `${r.path}.${key}`) : undefined;
  };
  const byIdNames = ruleGlobs(r, 'byIdNames', true);
  const rotational = bool('rotational');
  const sizes = ruleSizes(r);
  const globs = {
    models: ruleGlobs(r, 'models', false),
    vendors: ruleGlobs(r, 'vendors', false),
    serials: ruleGlobs(r, 'serials', false),
  };
  const transports = ruleEnumList(r, 'transports', RULE_TRANSPORTS, 'transport');
  const maxDevicesAt = r.get('maxDevices');
  const maxDevices = maxDevicesAt ? r.d.count(maxDevicesAt, `${r.path}.maxDevices`) : undefined;
  const labelsAt = r.get('nodeLabels');
  const labels = labelsAt ? r.d.labels(labelsAt, `${r.path}.nodeLabels`) : undefined;
  // No labels asks nothing of the node: the same rule as without the key.
  const nodeLabels = labels && Object.keys(labels).length > 0 ? sortedRecord(Object.entries(labels)) : undefined;
  const allowRemovable = bool('allowRemovable') ?? false;
  const partitions = rulePartitions(r, types);
  return {
    mode,
    types,
    ...setFields({ byIdNames, rotational, ...sizes, ...globs, transports, maxDevices, nodeLabels, partitions }),
    allowRemovable,
    settleMs: ruleSettleMs(r),
  };
}

/** deviceRules: each rule read in full; empty (or absent) is no rules, and then absent from the config. */
function classDeviceRules(c: ClassFields): DeviceRule[] | undefined {
  const at = c.get('deviceRules');
  const where = `${c.path}.deviceRules`;
  const items = at ? c.d.items(at, where, 'a list of device rules') : undefined;
  const rules: DeviceRule[] = [];
  items?.forEach((item, i) => {
    const path = `${where}[${i}]`;
    if (isGoNull(item.node)) {
      c.sink.error(path, 'must not be null (a rule of defaults is written {})', item.yaml.position(item.node));
      return;
    }
    const fields = c.d.struct(item, path, RULE_KEYS, 'a device rule (mode, byIdNames, types, …)', RULE_UNKNOWN_KEYS);
    if (!fields) return;
    const rulePos = item.yaml.position(item.node);
    const get = (k: RuleKey): Located | undefined => fields.get(k)?.value;
    const posOf = (k: RuleKey): SourcePosition => {
      const v = get(k);
      return v ? v.yaml.position(v.node) : rulePos;
    };
    const rule = decodeDeviceRule({ path, d: c.d, get, posOf });
    const written = writtenDeviceRule(rule);
    if (rule.mode === 'apply' && !RULE_SELECTORS.some((k) => written[k] !== undefined)) {
      c.sink.warn(
        path,
        `selects every blank device of type ${rule.types.join(', ')} of the node: narrow it with ${RULE_SELECTORS.join(', ')}`,
        rulePos,
      );
    }
    rules.push(rule);
  });
  return rules.length > 0 ? rules : undefined;
}

function decodeClass(name: string, at: Located, sink: IssueSink, d: Decoder): DecodedClass | undefined {
  const c = classFields(name, at, sink, d);
  if (c === undefined) return undefined;
  const errorsBefore = sink.issues.filter((i) => i.severity === 'error').length;
  const classPos = at.yaml.position(at.node);
  if (!DNS1123_SUBDOMAIN.test(name) || name.length > 253) {
    sink.error(
      c.path,
      `${shown(name)} is not a valid StorageClass name (lowercase RFC 1123 subdomain, at most 253 characters)`,
      classPos,
    );
  }
  const { hostDir, mountDir } = classDirectories(c, classPos);
  const blockCleanerCommand = classCleanerCommand(c);
  const volumeMode = classEnum(c, 'volumeMode', VOLUME_MODES, DEFAULT_VOLUME_MODE, 'volume mode');
  const accessMode = classEnum(c, 'accessMode', ACCESS_MODES, DEFAULT_ACCESS_MODE, 'access mode');
  const fsType = classFsType(c, volumeMode);
  const namePattern = classNamePattern(c);
  const sel = c.get('selector');
  const selector = sel ? (d.selector(sel, `${c.path}.selector`) ?? []) : [];
  const deleteMissingAfter = classDeleteMissingAfter(c);
  const deviceRules = classDeviceRules(c);

  const errorsNow = sink.issues.filter((i) => i.severity === 'error').length;
  if (errorsNow > errorsBefore || hostDir === undefined || mountDir === undefined) return undefined;
  return {
    config: {
      hostDir,
      mountDir,
      blockCleanerCommand,
      volumeMode,
      accessMode,
      fsType,
      namePattern,
      selector,
      ...(deleteMissingAfter !== undefined ? { deleteMissingAfter } : {}),
      ...(deviceRules !== undefined ? { deviceRules } : {}),
    },
    positions: { hostDir: c.posOf('hostDir'), mountDir: c.posOf('mountDir') },
  };
}

type DirField = 'hostDir' | 'mountDir';

/** A decoded class and where its discovery directories are written. */
interface DecodedClass {
  readonly config: ClassConfig;
  readonly positions: Readonly<Record<DirField, SourcePosition>>;
}

/** Each discovery directory belongs to one class; nested ones are a warning. Linear in the paths' length. */
function checkDiscoveryDirectories(classes: readonly (readonly [string, DecodedClass])[], sink: IssueSink): void {
  for (const dir of ['hostDir', 'mountDir'] as const) {
    const owner = new Map<string, string>();
    for (const [name, c] of classes) {
      const value = c.config[dir];
      const other = owner.get(value);
      if (other !== undefined) {
        sink.error(
          `storageClassMap.${name}.${dir}`,
          `${dir} ${value} is also used by storage class ${other}; a discovery directory belongs to exactly one class`,
          c.positions[dir],
        );
      } else owner.set(value, name);
    }
    for (const [name, c] of classes) {
      const value = c.config[dir];
      for (let cut = value.lastIndexOf('/'); cut >= 0 && value !== '/'; cut = value.lastIndexOf('/', cut - 1)) {
        const parent = cut === 0 ? '/' : value.slice(0, cut);
        const outer = owner.get(parent);
        if (outer !== undefined && outer !== name) {
          sink.warn(
            `storageClassMap.${name}.${dir}`,
            `${dir} ${value} is inside ${parent} (class ${outer}); each class scans only its first level`,
            c.positions[dir],
          );
        }
        if (cut === 0) break;
      }
    }
  }
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

function sortedRecord<V>(entries: Iterable<readonly [string, V]>): Record<string, V> {
  const out: Record<string, V> = {};
  for (const [k, v] of [...entries].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) out[k] = v;
  return out;
}

type TopName = (typeof TOP_NAMES)[number];

/**
 * Decodes and validates the raw keys of one config source into the normalized config. sourceFailed:
 * the source already had errors, so keys may be missing and "nothing configured" is no news.
 */
export function parseConfigEntries(
  entries: readonly RawEntry[],
  sourceFailed = false,
  budget = YamlBudget.forConfig(),
): ParseResult {
  const sink = new IssueSink();
  const d = new Decoder(sink);
  const located = locateTopKeys(entries, d, sink, budget);
  const classes = decodeClasses(located.get('storageClassMap'), d, sink, sourceFailed);
  const config = topLevelConfig(classes, located, d);
  warnIneffective(config, located, sink);
  const positions: Record<string, SourcePosition> = {};
  for (const [name, c] of classes) {
    for (const dir of ['hostDir', 'mountDir'] as const) positions[`storageClassMap.${name}.${dir}`] = c.positions[dir];
  }
  return { config: sink.hasErrors ? undefined : deepFreeze(config), issues: sink.issues, positions };
}

/** The known top-level keys, each resolved to a YAML node. */
function locateTopKeys(
  entries: readonly RawEntry[],
  d: Decoder,
  sink: IssueSink,
  budget: YamlBudget,
): ReadonlyMap<TopName, Located> {
  const fields = d.matchFields(
    entries.map((e) => ({ key: e.key, value: e, position: e.keyPosition })),
    '',
    TOP_NAMES,
  );
  const located = new Map<TopName, Located>();
  for (const [name, { value }] of fields) {
    const type = TYPE_OF.get(name) ?? 'string';
    const at = locate(value, type, name, sink, budget);
    if (at) located.set(name, at);
  }
  return located;
}

/** storageClassMap's classes, sorted by name, their discovery directories checked against each other. */
function decodeClasses(
  classMap: Located | undefined,
  d: Decoder,
  sink: IssueSink,
  sourceFailed: boolean,
): [string, DecodedClass][] {
  const classes: [string, DecodedClass][] = [];
  if (classMap) {
    for (const [name, at] of d.entries(classMap, 'storageClassMap', 'a mapping of storage class names') ?? []) {
      const c = decodeClass(name, at, sink, d);
      if (c) classes.push([name, c]);
    }
  }
  if (classes.length === 0 && !sink.hasErrors && !sourceFailed) {
    sink.warn('storageClassMap', 'no storage class is configured: nothing will be discovered');
  }
  checkDiscoveryDirectories(
    classes.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
    sink,
  );
  return classes;
}

type OtherTopKey = Exclude<keyof ProvisionerConfig, 'storageClassMap'>;

function present<T>(at: Located | undefined, decode: (at: Located) => T | undefined): T | undefined {
  return at ? decode(at) : undefined;
}

const flag = (d: Decoder, at: Located | undefined, name: TopName): boolean =>
  present(at, (a) => d.bool(a, name)) ?? false;

/** Each top-level key beside storageClassMap: its value, its default when absent or invalid. In the order of their issues. */
const TOP_KEY_DECODERS: {
  readonly [K in OtherTopKey]: (d: Decoder, at: Located | undefined, name: K) => ProvisionerConfig[K];
} = {
  // A key that is no valid label key can match no Node label.
  nodeLabelsForPV: (d, at, name) => present(at, (a) => d.stringList(a, name, labelKeyProblem)) ?? [],
  labelsForPV: (d, at, name) => sortedRecord(Object.entries(present(at, (a) => d.labels(a, name)) ?? {})),
  jobTolerations: (d, at, name) => present(at, (a) => d.tolerations(a, name)) ?? [],
  minResyncPeriod: (d, at, name) =>
    present(at, (a) => d.duration(a, name, '0s turns periodic informer resync off')) ?? DEFAULT_MIN_RESYNC_PERIOD,
  provisionerNotReadyNodeTaintKey: (d, at, name) => present(at, (a) => d.labelKey(a, name)) ?? '',
  useAlphaAPI: flag,
  useJobForCleaning: flag,
  useNodeNameOnly: flag,
  setPVOwnerRef: flag,
  removeNodeNotReadyTaint: flag,
};

/** The config's fields, decoded in TOP_KEY_DECODERS' order and laid out in ProvisionerConfig's. */
function topLevelConfig(
  classes: readonly (readonly [string, DecodedClass])[],
  located: ReadonlyMap<TopName, Located>,
  d: Decoder,
): ProvisionerConfig {
  const decode = <K extends OtherTopKey>(name: K): ProvisionerConfig[K] =>
    TOP_KEY_DECODERS[name](d, located.get(name), name);
  const names = Object.keys(TOP_KEY_DECODERS) as OtherTopKey[];
  // The cast restates the table's type: one entry per key.
  const v = Object.fromEntries(names.map((name) => [name, decode(name)])) as unknown as Omit<
    ProvisionerConfig,
    'storageClassMap'
  >;
  return {
    storageClassMap: sortedRecord(classes.map(([name, c]) => [name, c.config] as const)),
    nodeLabelsForPV: v.nodeLabelsForPV,
    labelsForPV: v.labelsForPV,
    useAlphaAPI: v.useAlphaAPI,
    useJobForCleaning: v.useJobForCleaning,
    jobTolerations: v.jobTolerations,
    minResyncPeriod: v.minResyncPeriod,
    useNodeNameOnly: v.useNodeNameOnly,
    setPVOwnerRef: v.setPVOwnerRef,
    removeNodeNotReadyTaint: v.removeNodeNotReadyTaint,
    provisionerNotReadyNodeTaintKey: v.provisionerNotReadyNodeTaintKey,
  };
}

/** Warnings for settings that parse but do nothing. */
function warnIneffective(config: ProvisionerConfig, located: ReadonlyMap<TopName, Located>, sink: IssueSink): void {
  const positionOf = (name: TopName): SourcePosition | undefined => {
    const at = located.get(name);
    return at ? at.yaml.position(at.node) : undefined;
  };
  if (config.useAlphaAPI) {
    sink.warn(
      'useAlphaAPI',
      'is deprecated: Kubernetes 1.10+ ignores the alpha node-affinity annotation, so new PVs would have no usable node affinity',
      positionOf('useAlphaAPI'),
    );
  }
  if (config.removeNodeNotReadyTaint && config.provisionerNotReadyNodeTaintKey === '') {
    sink.warn(
      'removeNodeNotReadyTaint',
      'is on but provisionerNotReadyNodeTaintKey is empty: no taint will be removed',
      positionOf('removeNodeNotReadyTaint'),
    );
  }
}

/** Pure: a snapshot → the normalized config. Throws InvalidConfigError with every problem found. */
export function parseConfigSnapshot(snapshot: ConfigSnapshot): LoadedConfig {
  const parsed = parseConfigEntries(
    snapshot.entries,
    snapshot.issues.some((i) => i.severity === 'error'),
    YamlBudget.forConfig(snapshot.yamlValues),
  );
  const issues = [...snapshot.issues, ...parsed.issues];
  if (parsed.config === undefined || issues.some((i) => i.severity === 'error')) {
    throw new InvalidConfigError(snapshot.source.path, issues);
  }
  return {
    config: parsed.config,
    hash: configHash(parsed.config),
    source: snapshot.source,
    warnings: issues,
    positions: parsed.positions,
  };
}
