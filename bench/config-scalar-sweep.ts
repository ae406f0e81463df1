// The scalar sweep of bench/config-fuzz.ts: every scalar of the oracle (bench/upstream-scalars.ts) in
// every string field of a valid config (and in its boolean, int64 and duration fields), written
// directly, through an anchor and alias, and through a merge key, in the three layouts (a directory
// of key files, one YAML file, a ConfigMap manifest with block-scalar data values). Each config is
// decoded from the bytes the directory reader would return for it (snapshotFromSourceBytes +
// parseConfigSnapshot: what loadConfig does after reading), and every tenth one is also written to
// disk and read with loadConfig itself, which must give the same result. Then:
//   - the config loads and holds, at every probed field, the oracle's value for that field kind, and
//     everywhere else the baseline's values; or
//   - it is refused with an error naming the field, where the oracle says upstream refuses the value
//     (go-yaml's message is checked too), or where this project's own validation refuses a value
//     upstream decodes (a relative hostDir, "+Inf" as a label value, a null list item, …;
//     docs/configuration.md "Stricter than upstream", "Value limits"); each such case is classified
//     by its rule (stringExpectation), which the bench states independently of parse.ts;
//   - or, for the two documented leniencies (a quoted "yes" in a boolean field, a null
//     minResyncPeriod), the project's value, classified as a deviation.
// Anything else is a mismatch: a different value, a refusal the oracle and those rules do not
// explain, an error at another field, or a config loaded that should have been refused.
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import type { ConfigIssue } from '../src/core/errors.js';
import { InvalidConfigError } from '../src/core/errors.js';
import { snapshotFromSourceBytes } from '../src/core/config/decode/layout.js';
import { parseConfigSnapshot } from '../src/core/config/decode/parse.js';
import type { SourceBytes } from '../src/core/config/source/directory-read.js';
import { loadConfig } from '../src/core/config/source/load.js';
import { UPSTREAM_SCALARS } from './upstream-scalars.js';
import type { Outcome, Refused, Unchanged, UpstreamScalar } from './upstream-scalars.js';

// ---- a small YAML writer ------------------------------------------------------------------------

interface YScalar {
  readonly t: 'scalar';
  /** As written; a block scalar is its header, `\n`, then its unindented content lines. */
  readonly text: string;
  readonly anchor?: string;
}
interface YAlias {
  readonly t: 'alias';
  readonly name: string;
}
interface YMap {
  readonly t: 'map';
  anchor?: string;
  entries: YEntry[];
}
interface YSeq {
  readonly t: 'seq';
  items: YNode[];
}
type YNode = YScalar | YAlias | YMap | YSeq;
interface YEntry {
  /** A plain key as is, or a scalar or alias written as the key. */
  readonly key: string | YScalar | YAlias;
  value: YNode;
}

const sc = (text: string, anchor?: string): YScalar =>
  anchor === undefined ? { t: 'scalar', text } : { t: 'scalar', text, anchor };
const alias = (name: string): YAlias => ({ t: 'alias', name });
const map = (entries: readonly (readonly [string, YNode | string])[], anchor?: string): YMap => {
  const m: YMap = { t: 'map', entries: entries.map(([key, v]) => ({ key, value: typeof v === 'string' ? sc(v) : v })) };
  if (anchor !== undefined) m.anchor = anchor;
  return m;
};
const seq = (items: readonly (YNode | string)[]): YSeq => ({
  t: 'seq',
  items: items.map((v) => (typeof v === 'string' ? sc(v) : v)),
});

const pad = (n: number): string => ' '.repeat(n);

/** A node after `key:` or `-` on a line at column col: the rest of that line, and the lines below. */
function renderValue(node: YNode, col: number): { inline: string; lines: string[] } {
  switch (node.t) {
    case 'alias':
      return { inline: ` *${node.name}`, lines: [] };
    case 'scalar': {
      const [head = '', ...body] = node.text.split('\n');
      const h = [node.anchor === undefined ? '' : `&${node.anchor}`, head].filter((x) => x !== '').join(' ');
      return { inline: h === '' ? '' : ` ${h}`, lines: body.map((l) => pad(col + 2) + l) };
    }
    case 'map':
      return {
        inline: node.anchor === undefined ? '' : ` &${node.anchor}`,
        lines: renderEntries(node.entries, col + 2),
      };
    case 'seq':
      return { inline: '', lines: node.items.flatMap((item) => renderItem(item, col + 2)) };
  }
}

function renderItem(item: YNode, col: number): string[] {
  const v = renderValue(item, col);
  // A mapping without an anchor starts on the dash's line (`- key: value`), as configs are written.
  const [first, ...rest] = v.lines;
  if (item.t === 'map' && item.anchor === undefined && first !== undefined) {
    return [`${pad(col)}- ${first.slice(col + 2)}`, ...rest];
  }
  return [`${pad(col)}-${v.inline}`, ...v.lines];
}

/** Whether a scalar can be written as an implicit key (`text: value`): one line with content. */
const implicitKey = (s: YScalar): boolean => !s.text.includes('\n') && s.text !== '' && !/^!\S*$/u.test(s.text);

function renderEntries(entries: readonly YEntry[], col: number): string[] {
  const out: string[] = [];
  for (const { key, value } of entries) {
    const v = renderValue(value, col);
    if (typeof key === 'string' || key.t === 'alias' || implicitKey(key)) {
      const k =
        typeof key === 'string'
          ? key
          : key.t === 'alias'
            ? `*${key.name} `
            : `${key.anchor === undefined ? '' : `&${key.anchor} `}${key.text}`;
      out.push(`${pad(col)}${k}:${v.inline}`, ...v.lines);
    } else {
      // `? key` on its own line(s), then `: value`.
      const k = renderValue(key, col);
      out.push(`${pad(col)}?${k.inline}`, ...k.lines, `${pad(col)}:${v.inline}`, ...v.lines);
    }
  }
  return out;
}

/** One key's value as a YAML document of its own (a key file, a ConfigMap data value). */
function renderDocument(node: YNode): string {
  if (node.t === 'scalar') {
    const v = renderValue(node, 0);
    return [v.inline.trimStart(), ...v.lines].join('\n') + '\n';
  }
  if (node.t === 'alias') throw new Error('an alias cannot stand alone in a document');
  const v = renderValue(node, -2);
  return [...(v.inline === '' ? [] : [v.inline.trimStart()]), ...v.lines].join('\n') + '\n';
}

// ---- the layouts ------------------------------------------------------------------------------

export type Layout = 'directory' | 'file' | 'configmap';
export type Mode = 'direct' | 'alias' | 'merge';
export const LAYOUTS: readonly Layout[] = ['directory', 'file', 'configmap'];
export const MODES: readonly Mode[] = ['direct', 'alias', 'merge'];

const keyName = (e: YEntry): string => {
  if (typeof e.key !== 'string') throw new Error('a top-level key must be plain');
  return e.key;
};

/** A config rendered in a layout: its key files, or the text of its one file. */
type Rendered =
  | { readonly kind: 'directory'; readonly files: readonly { readonly name: string; readonly text: string }[] }
  | { readonly kind: 'file'; readonly name: string; readonly text: string };

function renderLayout(root: YMap, layout: Layout): Rendered {
  switch (layout) {
    case 'directory':
      return {
        kind: 'directory',
        files: root.entries
          .map((e) => ({ name: keyName(e), text: renderDocument(e.value) }))
          .sort((a, b) => (a.name < b.name ? -1 : 1)),
      };
    case 'file':
      return { kind: 'file', name: 'config.yaml', text: renderEntries(root.entries, 0).join('\n') + '\n' };
    case 'configmap': {
      const data = root.entries.flatMap((e) => {
        const doc = renderDocument(e.value).replace(/\n$/u, '');
        return [`  ${keyName(e)}: |`, ...(doc === '' ? [] : doc.split('\n').map((l) => `    ${l}`))];
      });
      const manifest = ['apiVersion: v1', 'kind: ConfigMap', 'metadata:', '  name: lvp-config', 'data:', ...data];
      return { kind: 'file', name: 'configmap.yaml', text: manifest.join('\n') + '\n' };
    }
  }
}

/** The path a rendered config is (or would be) written at under dir. */
const pathOf = (r: Rendered, dir: string): string => join(dir, r.kind === 'directory' ? 'keys' : r.name);

/** Writes a rendered config under dir; returns the path to load. */
async function writeRendered(r: Rendered, dir: string): Promise<string> {
  const path = pathOf(r, dir);
  if (r.kind === 'file') {
    await writeFile(path, r.text);
    return path;
  }
  await mkdir(path, { recursive: true });
  for (const f of r.files) await writeFile(join(path, f.name), f.text);
  return path;
}

/** The bytes the directory reader would return for a rendered config (snapshotFromSourceBytes' input). */
function sourceBytes(r: Rendered, path: string): SourceBytes {
  return r.kind === 'file'
    ? { kind: 'file', path, bytes: Buffer.from(r.text, 'utf8') }
    : { kind: 'directory', path, files: r.files.map((f) => ({ name: f.name, bytes: Buffer.from(f.text, 'utf8') })) };
}

// ---- the baseline config and where probes go --------------------------------------------------

const CLASS_FIELDS = ['hostDir', 'mountDir', 'fsType', 'namePattern', 'volumeMode', 'accessMode'] as const;
type ClassField = (typeof CLASS_FIELDS)[number];
const TOLERATION_FIELDS = ['key', 'value', 'operator', 'effect', 'tolerationSeconds'] as const;
type TolerationField = (typeof TOLERATION_FIELDS)[number];
const BOOL_KEYS = ['useAlphaAPI', 'useJobForCleaning', 'useNodeNameOnly', 'setPVOwnerRef', 'removeNodeNotReadyTaint'];

const classBody = (name: string): YMap =>
  map([
    ['hostDir', `/mnt/fuzz/${name}/host`],
    ['mountDir', `/mnt/fuzz/${name}/mount`],
    ['blockCleanerCommand', seq(['/scripts/shred.sh', '"2"'])],
    ['volumeMode', 'Filesystem'],
    ['accessMode', 'ReadWriteOnce'],
    ['fsType', 'ext4'],
    ['namePattern', '"vol*"'],
    [
      'selector',
      seq([
        map([
          [
            'matchExpressions',
            seq([
              map([
                ['key', 'zone'],
                ['operator', 'In'],
                ['values', seq(['a', 'b'])],
              ]),
            ]),
          ],
        ]),
      ]),
    ],
  ]);

/** The valid config every probe goes into. Key order matters in the file layout: anchors come first. */
function baselineTree(): YMap {
  return map([
    ['provisionerNotReadyNodeTaintKey', 'example.com/not-ready'],
    ['minResyncPeriod', '10m'],
    ['useAlphaAPI', 'false'],
    ['useJobForCleaning', 'true'],
    ['useNodeNameOnly', 'false'],
    ['setPVOwnerRef', 'true'],
    ['removeNodeNotReadyTaint', 'true'],
    [
      'storageClassMap',
      map([
        ['fast', classBody('fast')],
        ['slow', classBody('slow')],
      ]),
    ],
    ['nodeLabelsForPV', seq(['topology.kubernetes.io/zone', 'kubernetes.io/hostname'])],
    [
      'labelsForPV',
      map([
        ['team', 'storage'],
        ['tier', 'gold'],
      ]),
    ],
    [
      'jobTolerations',
      seq([
        map([
          ['key', 'dedicated'],
          ['operator', 'Equal'],
          ['value', 'storage'],
          ['effect', 'NoSchedule'],
          ['tolerationSeconds', '60'],
        ]),
        map([
          ['key', 'example.com/disk'],
          ['operator', 'Equal'],
          ['value', 'ssd'],
          ['effect', 'NoExecute'],
          ['tolerationSeconds', '300'],
        ]),
      ]),
    ],
  ]);
}

type Json = string | number | boolean | null | Json[] | { [key: string]: Json };

const expectedClass = (name: string): Json => ({
  hostDir: `/mnt/fuzz/${name}/host`,
  mountDir: `/mnt/fuzz/${name}/mount`,
  blockCleanerCommand: ['/scripts/shred.sh', '2'],
  volumeMode: 'Filesystem',
  accessMode: 'ReadWriteOnce',
  fsType: 'ext4',
  namePattern: 'vol*',
  selector: [{ matchExpressions: [{ key: 'zone', operator: 'In', values: ['a', 'b'] }] }],
});

/** The baseline as the loader must return it (a ProvisionerConfig). */
function baselineConfig(): Json {
  return {
    storageClassMap: { fast: expectedClass('fast'), slow: expectedClass('slow') },
    nodeLabelsForPV: ['topology.kubernetes.io/zone', 'kubernetes.io/hostname'],
    labelsForPV: { team: 'storage', tier: 'gold' },
    useAlphaAPI: false,
    useJobForCleaning: true,
    jobTolerations: [
      { key: 'dedicated', operator: 'Equal', value: 'storage', effect: 'NoSchedule', tolerationSeconds: 60 },
      { key: 'example.com/disk', operator: 'Equal', value: 'ssd', effect: 'NoExecute', tolerationSeconds: 300 },
    ],
    minResyncPeriod: '10m0s',
    useNodeNameOnly: false,
    setPVOwnerRef: true,
    removeNodeNotReadyTaint: true,
    provisionerNotReadyNodeTaintKey: 'example.com/not-ready',
  };
}

type Seg = string | number;

function nodeAt(root: YNode, path: readonly Seg[]): YNode {
  let node = root;
  for (const seg of path) {
    if (typeof seg === 'number') {
      if (node.t !== 'seq') throw new Error(`not a list at ${path.join('.')}`);
      const item = node.items[seg];
      if (item === undefined) throw new Error(`no item ${String(seg)} at ${path.join('.')}`);
      node = item;
    } else {
      if (node.t !== 'map') throw new Error(`not a mapping at ${path.join('.')}`);
      const entry = node.entries.find((e) => e.key === seg);
      if (entry === undefined) throw new Error(`no key ${seg} at ${path.join('.')}`);
      node = entry.value;
    }
  }
  return node;
}
const mapAt = (root: YNode, path: readonly Seg[]): YMap => {
  const n = nodeAt(root, path);
  if (n.t !== 'map') throw new Error(`not a mapping at ${path.join('.')}`);
  return n;
};
const seqAt = (root: YNode, path: readonly Seg[]): YSeq => {
  const n = nodeAt(root, path);
  if (n.t !== 'seq') throw new Error(`not a list at ${path.join('.')}`);
  return n;
};
function setNode(root: YNode, path: readonly Seg[], value: YNode): void {
  const last = path[path.length - 1];
  const parentPath = path.slice(0, -1);
  if (typeof last === 'number') seqAt(root, parentPath).items[last] = value;
  else if (last !== undefined) {
    const entry = mapAt(root, parentPath).entries.find((e) => e.key === last);
    if (entry === undefined) throw new Error(`no key ${last}`);
    entry.value = value;
  }
}
/** Takes the named entries out of a mapping. */
function takeEntries(m: YMap, keys: readonly string[]): YEntry[] {
  const taken = m.entries.filter((e) => typeof e.key === 'string' && keys.includes(e.key));
  m.entries = m.entries.filter((e) => !taken.includes(e));
  return taken;
}

// ---- field kinds and what the loader must make of an oracle value in each --------------------

type Kind =
  | 'path'
  | 'fsType'
  | 'namePattern'
  | 'volumeMode'
  | 'accessMode'
  | 'cleanerCommand'
  | 'cleanerArgument'
  | 'selectorKey'
  | 'selectorOperator'
  | 'selectorValue'
  | 'className'
  | 'nodeLabel'
  | 'labelKey'
  | 'labelValue'
  | 'tolerationKey'
  | 'tolerationValue'
  | 'tolerationOperator'
  | 'tolerationEffect'
  | 'taintKey'
  | 'int64'
  | 'duration'
  | 'bool';

const KIND_OF_CLASS_FIELD: Record<ClassField, Kind> = {
  hostDir: 'path',
  mountDir: 'path',
  fsType: 'fsType',
  namePattern: 'namePattern',
  volumeMode: 'volumeMode',
  accessMode: 'accessMode',
};
const KIND_OF_TOLERATION_FIELD: Record<TolerationField, Kind> = {
  key: 'tolerationKey',
  value: 'tolerationValue',
  operator: 'tolerationOperator',
  effect: 'tolerationEffect',
  tolerationSeconds: 'int64',
};
/** Kinds whose probe is a list item: a null item is refused here (upstream reads it as ""). */
const LIST_ITEM_KINDS: ReadonlySet<Kind> = new Set(['cleanerCommand', 'cleanerArgument', 'selectorValue', 'nodeLabel']);

/** One probed value: where it is in the config, what kind of field it is. */
interface Check {
  /** The key path the loader's issues use. */
  readonly path: string;
  readonly kind: Kind;
  /** Where the value lands in the loaded config; a `key` check is a mapping key (renamed or added). */
  readonly target:
    | { readonly op: 'set'; readonly at: readonly Seg[] }
    | { readonly op: 'key'; readonly at: readonly Seg[]; readonly from?: string; readonly value?: Json };
  /** Where a refusal of the key by upstream's decoder is reported (the mapping's path). */
  readonly keyRefusalPath?: string;
}

type Expectation =
  /** value undefined: the field is omitted (an empty toleration field, a null tolerationSeconds). */
  | { readonly outcome: 'holds'; readonly value: Json | undefined; readonly label: string }
  | {
      readonly outcome: 'refused';
      readonly label: string;
      /** An error issue's path must be this or below it. */
      readonly errorPath: string;
      /** go-yaml's message, which the issue must carry. */
      readonly message?: string;
    };

const isRefused = (o: unknown): o is Refused => typeof o === 'object' && o !== null && 'refused' in o;
const isUnchanged = (o: unknown): o is Unchanged => typeof o === 'object' && o !== null && 'unchanged' in o;

// Kubernetes' qualified names and label values (apimachinery validation IsQualifiedName, IsValidLabelValue).
const LABEL_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/u;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/u;
const validLabelKey = (k: string): boolean => {
  const slash = k.lastIndexOf('/');
  const name = slash >= 0 ? k.slice(slash + 1) : k;
  const prefix = slash >= 0 ? k.slice(0, slash) : undefined;
  return (
    name.length <= 63 &&
    LABEL_NAME.test(name) &&
    (prefix === undefined || (prefix.length <= 253 && DNS1123_SUBDOMAIN.test(prefix)))
  );
};
const validLabelValue = (v: string): boolean => v === '' || (v.length <= 63 && LABEL_NAME.test(v));
const YAML11_BOOLEANS: Readonly<Record<string, boolean>> = Object.fromEntries([
  ...['y', 'Y', 'yes', 'Yes', 'YES', 'true', 'True', 'TRUE', 'on', 'On', 'ON'].map((w) => [w, true] as const),
  ...['n', 'N', 'no', 'No', 'NO', 'false', 'False', 'FALSE', 'off', 'Off', 'OFF'].map((w) => [w, false] as const),
]);
const CONTROL = /\p{Cc}/u;
const bytes = (s: string): number => Buffer.byteLength(s, 'utf8');

/** What the loader must do with a string the oracle says upstream gives a field of this kind. */
function stringExpectation(check: Check, v: string): Expectation {
  const holds = (value: Json | undefined, label = 'holds the oracle value'): Expectation => ({
    outcome: 'holds',
    value,
    label,
  });
  const refused = (rule: string, errorPath = check.path): Expectation => ({
    outcome: 'refused',
    label: `refused by this project: ${rule}`,
    errorPath,
  });
  switch (check.kind) {
    case 'path': {
      if (v === '') return refused('hostDir/mountDir required');
      if (!v.startsWith('/')) return refused('relative path');
      if (CONTROL.test(v)) return refused('control character in a path');
      if (v.split('/').includes('..')) return refused('".." in a path');
      if (bytes(v) > 4095 || v.split('/').some((p) => bytes(p) > 255)) return refused('path too long');
      // filepath.Clean: empty and `.` segments go.
      return holds(
        `/${v
          .split('/')
          .filter((p) => p !== '' && p !== '.')
          .join('/')}`,
      );
    }
    case 'fsType':
      if (CONTROL.test(v) || /\s/u.test(v) || bytes(v) > 255) return refused('fsType is one word');
      return holds(v);
    case 'namePattern':
      if (v.includes('\u0000')) return refused('NUL in namePattern');
      if (/[[\]\\]/u.test(v) || (v !== '' && v.split(',').every((p) => p === '')))
        throw new Error(`unmodelled glob ${v}`);
      return holds(v === '' ? '*' : v, v === '' ? 'empty: the default' : undefined);
    case 'volumeMode':
      if (v === '') return holds('Filesystem', 'empty: the default');
      return v === 'Filesystem' || v === 'Block' ? holds(v) : refused('volumeMode not Filesystem or Block');
    case 'accessMode':
      if (v === '') return holds('ReadWriteOnce', 'empty: the default');
      return ['ReadWriteOnce', 'ReadOnlyMany', 'ReadWriteMany', 'ReadWriteOncePod'].includes(v)
        ? holds(v)
        : refused('not an access mode');
    case 'cleanerCommand':
      if (v === '') return refused('empty cleaner command');
      if (v.includes('\u0000') || bytes(v) > 4095) return refused('NUL in a command');
      return holds(v);
    case 'cleanerArgument':
      if (v.includes('\u0000') || bytes(v) > 131072) return refused('NUL in an argument');
      return holds(v);
    case 'selectorKey':
      return v === '' ? refused('selector key required') : holds(v);
    case 'selectorOperator': {
      if (!['In', 'NotIn', 'Exists', 'DoesNotExist', 'Gt', 'Lt'].includes(v)) return refused('not a selector operator');
      // The probed requirement has two values.
      const values = check.path.replace(/operator$/u, 'values');
      if (v === 'Exists' || v === 'DoesNotExist') return refused(`${v} with values`, values);
      if (v === 'Gt' || v === 'Lt') return refused(`${v} with two values`, values);
      return holds(v);
    }
    case 'selectorValue':
      return holds(v);
    case 'className':
      return DNS1123_SUBDOMAIN.test(v) && v.length <= 253
        ? holds(v)
        : refused('not a StorageClass name', `storageClassMap.${v}`);
    case 'nodeLabel':
      return validLabelKey(v) ? holds(v) : refused('not a label key');
    case 'labelKey':
      return validLabelKey(v) ? holds(v) : refused('not a label key', `labelsForPV.${v}`);
    case 'labelValue':
      return validLabelValue(v) ? holds(v) : refused('not a label value');
    case 'taintKey':
      return v === '' || validLabelKey(v) ? holds(v) : refused('not a label key');
    case 'tolerationKey':
      if (v === '') return holds(undefined, 'empty: omitted');
      return validLabelKey(v) ? holds(v) : refused('not a label key');
    case 'tolerationValue':
      if (v === '') return holds(undefined, 'empty: omitted');
      return validLabelValue(v) ? holds(v) : refused('not a label value');
    case 'tolerationOperator':
      if (v === '') return holds(undefined, 'empty: omitted');
      // The probed toleration has a value.
      if (v === 'Exists') return refused('Exists with a value', check.path.replace(/operator$/u, 'value'));
      return v === 'Equal' ? holds(v) : refused('not Exists or Equal');
    case 'tolerationEffect':
      if (v === '') return holds(undefined, 'empty: omitted');
      return ['NoSchedule', 'PreferNoSchedule', 'NoExecute'].includes(v) ? holds(v) : refused('not a taint effect');
    case 'int64':
    case 'duration':
    case 'bool':
      throw new Error(`${check.kind} is no string kind`);
  }
}

/** The oracle's column for a field kind. */
function column(kind: Kind, c: UpstreamScalar): Outcome<string | boolean | number> | undefined {
  switch (kind) {
    case 'className':
    case 'labelKey':
      return c.mapKey;
    case 'bool':
      return c.boolField;
    case 'int64':
      return c.int64Field;
    case 'duration':
      return c.durationField;
    default:
      return c.stringField;
  }
}

const NULL_LABEL = 'null: the field keeps its value (its default, unset, or "" for a map element)';

/** What the loader must do with the scalar c at check. undefined: the oracle has no column for it. */
export function expectation(check: Check, c: UpstreamScalar): Expectation | undefined {
  const o = column(check.kind, c);
  if (o === undefined) return undefined;
  if (isRefused(o)) {
    // Deliberately more lenient than upstream (docs/configuration.md, "How values are read"): a quoted
    // YAML 1.1 boolean in a boolean field is that boolean (upstream's encoding/json refuses a string),
    // and a null minResyncPeriod is the default (upstream: `time: invalid duration ""`).
    if (check.kind === 'bool' && o.refused === 'json' && typeof c.stringField === 'string') {
      const b = YAML11_BOOLEANS[c.stringField];
      if (b !== undefined)
        return { outcome: 'holds', value: b, label: 'deviation (documented): a quoted YAML 1.1 boolean' };
    }
    if (check.kind === 'duration' && o.refused === 'duration' && isUnchanged(c.stringField)) {
      return {
        outcome: 'holds',
        value: '5m0s',
        label: 'deviation (documented): a null minResyncPeriod is the default',
      };
    }
    const keyRefused = o.refused === 'go-yaml' || o.refused === 'map-key';
    return {
      outcome: 'refused',
      label: `refused by upstream (${o.refused})`,
      errorPath: keyRefused && check.keyRefusalPath !== undefined ? check.keyRefusalPath : check.path,
      ...(o.refused === 'go-yaml' ? { message: o.message } : {}),
    };
  }
  if (isUnchanged(o)) {
    switch (check.kind) {
      case 'bool':
        return { outcome: 'holds', value: false, label: NULL_LABEL };
      case 'int64':
        return { outcome: 'holds', value: undefined, label: NULL_LABEL };
      default: {
        if (LIST_ITEM_KINDS.has(check.kind)) {
          return { outcome: 'refused', label: 'refused by this project: null list item', errorPath: check.path };
        }
        // A string field keeps its zero value ""; a map element is stored as "" (encoding/json object()).
        const e = stringExpectation(check, '');
        return e.outcome === 'holds' ? { ...e, label: NULL_LABEL } : e;
      }
    }
  }
  if (typeof o === 'boolean' || typeof o === 'number')
    return { outcome: 'holds', value: o, label: 'holds the oracle value' };
  if (check.kind === 'duration') return { outcome: 'holds', value: o, label: 'holds the oracle value' };
  return stringExpectation(check, o);
}

// ---- the sites: each probed field, and how a probe is written there in each mode --------------

interface Built {
  readonly tree: YMap;
  readonly checks: readonly Check[];
}
interface Site {
  readonly name: string;
  /** undefined: the mode does not apply to this field in this layout. */
  readonly build: (mode: Mode, layout: Layout, written: string) => Built | undefined;
}

const classCheck = (cls: string, field: ClassField): Check => ({
  path: `storageClassMap.${cls}.${field}`,
  kind: KIND_OF_CLASS_FIELD[field],
  target: { op: 'set', at: ['storageClassMap', cls, field] },
});

function classFieldSite(field: ClassField): Site {
  return {
    name: `storageClassMap.*.${field}`,
    build(mode, _layout, written) {
      const tree = baselineTree();
      const fast = mapAt(tree, ['storageClassMap', 'fast']);
      const slow = mapAt(tree, ['storageClassMap', 'slow']);
      switch (mode) {
        case 'direct':
          setNode(fast, [field], sc(written));
          return { tree, checks: [classCheck('fast', field)] };
        case 'alias': {
          setNode(fast, [field], sc(written, 'a'));
          // A discovery directory belongs to one class: alias a hostDir into the same class's mountDir.
          const [cls, other]: [string, ClassField] =
            field === 'hostDir' ? ['fast', 'mountDir'] : field === 'mountDir' ? ['slow', 'hostDir'] : ['slow', field];
          setNode(cls === 'fast' ? fast : slow, [other], alias('a'));
          return { tree, checks: [classCheck('fast', field), classCheck(cls, other)] };
        }
        case 'merge': {
          takeEntries(fast, [field]);
          fast.entries.unshift({ key: '<<', value: map([[field, sc(written)]], 'defaults') });
          // A directory written after `<<` replaces the merged one (two classes cannot share it).
          const dir = field === 'hostDir' || field === 'mountDir';
          if (!dir) takeEntries(slow, [field]);
          slow.entries.unshift({ key: '<<', value: alias('defaults') });
          return {
            tree,
            checks: dir ? [classCheck('fast', field)] : [classCheck('fast', field), classCheck('slow', field)],
          };
        }
      }
    },
  };
}

function cleanerSite(index: 0 | 1): Site {
  const check = (cls: string): Check => ({
    path: `storageClassMap.${cls}.blockCleanerCommand[${String(index)}]`,
    kind: index === 0 ? 'cleanerCommand' : 'cleanerArgument',
    target: { op: 'set', at: ['storageClassMap', cls, 'blockCleanerCommand', index] },
  });
  return {
    name: `storageClassMap.*.blockCleanerCommand[${String(index)}]`,
    build(mode, _layout, written) {
      const tree = baselineTree();
      const at = (cls: string): Seg[] => ['storageClassMap', cls, 'blockCleanerCommand', index];
      switch (mode) {
        case 'direct':
          setNode(tree, at('fast'), sc(written));
          return { tree, checks: [check('fast')] };
        case 'alias':
          setNode(tree, at('fast'), sc(written, 'a'));
          setNode(tree, at('slow'), alias('a'));
          return { tree, checks: [check('fast'), check('slow')] };
        case 'merge': {
          setNode(tree, at('fast'), sc(written));
          const fast = mapAt(tree, ['storageClassMap', 'fast']);
          const slow = mapAt(tree, ['storageClassMap', 'slow']);
          // Taken out first: `fast.entries.unshift(…takeEntries(fast…))` would add to the replaced array.
          const cleaner = takeEntries(fast, ['blockCleanerCommand']);
          fast.entries.unshift({ key: '<<', value: { t: 'map', anchor: 'defaults', entries: cleaner } });
          takeEntries(slow, ['blockCleanerCommand']);
          slow.entries.unshift({ key: '<<', value: alias('defaults') });
          return { tree, checks: [check('fast'), check('slow')] };
        }
      }
    },
  };
}

function selectorSite(field: 'key' | 'operator' | 'values[0]'): Site {
  const requirement = (cls: string): Seg[] => ['storageClassMap', cls, 'selector', 0, 'matchExpressions', 0];
  const sub: Seg[] = field === 'values[0]' ? ['values', 0] : [field];
  const check = (cls: string): Check => ({
    path: `storageClassMap.${cls}.selector[0].matchExpressions[0].${field}`,
    kind: field === 'key' ? 'selectorKey' : field === 'operator' ? 'selectorOperator' : 'selectorValue',
    target: { op: 'set', at: [...requirement(cls), ...sub] },
  });
  return {
    name: `storageClassMap.*.selector[].matchExpressions[].${field}`,
    build(mode, _layout, written) {
      const tree = baselineTree();
      switch (mode) {
        case 'direct':
          setNode(tree, [...requirement('fast'), ...sub], sc(written));
          return { tree, checks: [check('fast')] };
        case 'alias':
          setNode(tree, [...requirement('fast'), ...sub], sc(written, 'a'));
          setNode(tree, [...requirement('slow'), ...sub], alias('a'));
          return { tree, checks: [check('fast'), check('slow')] };
        case 'merge': {
          // The whole requirement comes from an anchored mapping; the other class's is only `<<: *req`.
          setNode(tree, [...requirement('fast'), ...sub], sc(written));
          const fast = mapAt(tree, requirement('fast'));
          const slow = mapAt(tree, requirement('slow'));
          fast.entries = [{ key: '<<', value: { t: 'map', anchor: 'req', entries: fast.entries } }];
          slow.entries = [{ key: '<<', value: alias('req') }];
          return { tree, checks: [check('fast'), check('slow')] };
        }
      }
    },
  };
}

const classNameSite: Site = {
  name: 'storageClassMap (class names)',
  build(mode, _layout, written) {
    const tree = baselineTree();
    const classes = mapAt(tree, ['storageClassMap']);
    const fast = takeEntries(classes, ['fast'])[0];
    if (fast === undefined) throw new Error('no class fast');
    const check: Check = {
      path: 'storageClassMap',
      kind: 'className',
      target: { op: 'key', at: ['storageClassMap'], from: 'fast' },
      keyRefusalPath: 'storageClassMap',
    };
    switch (mode) {
      case 'direct':
        classes.entries.unshift({ key: sc(written), value: fast.value });
        return { tree, checks: [check] };
      case 'alias':
        // The anchored key, aliased as the other class's fsType.
        classes.entries.unshift({ key: sc(written, 'a'), value: fast.value });
        setNode(classes, ['slow', 'fsType'], alias('a'));
        return { tree, checks: [check, classCheck('slow', 'fsType')] };
      case 'merge':
        classes.entries.unshift({
          key: '<<',
          value: { t: 'map', anchor: 'classes', entries: [{ key: sc(written), value: fast.value }] },
        });
        return { tree, checks: [check] };
    }
  },
};

const nodeLabelCheck = (index: number): Check => ({
  path: `nodeLabelsForPV[${String(index)}]`,
  kind: 'nodeLabel',
  target: { op: 'set', at: ['nodeLabelsForPV', index] },
});

const nodeLabelSite: Site = {
  name: 'nodeLabelsForPV[]',
  build(mode, _layout, written) {
    const tree = baselineTree();
    const labels = seqAt(tree, ['nodeLabelsForPV']);
    switch (mode) {
      case 'direct':
        labels.items[1] = sc(written);
        return { tree, checks: [nodeLabelCheck(1)] };
      case 'alias':
        labels.items[1] = sc(written, 'a');
        labels.items.push(alias('a'));
        return { tree, checks: [nodeLabelCheck(1), nodeLabelCheck(2)] };
      case 'merge':
        return undefined;
    }
  },
};

const labelValueCheck = (key: string): Check => ({
  path: `labelsForPV.${key}`,
  kind: 'labelValue',
  target: { op: 'set', at: ['labelsForPV', key] },
});

const labelKeySite: Site = {
  name: 'labelsForPV (keys)',
  build(mode, _layout, written) {
    const tree = baselineTree();
    const labels = mapAt(tree, ['labelsForPV']);
    const check: Check = {
      path: 'labelsForPV',
      kind: 'labelKey',
      target: { op: 'key', at: ['labelsForPV'], value: 'probe' },
      keyRefusalPath: 'labelsForPV',
    };
    switch (mode) {
      case 'direct':
        labels.entries.push({ key: sc(written), value: sc('probe') });
        return { tree, checks: [check] };
      case 'alias':
        labels.entries.push({ key: sc(written, 'a'), value: sc('probe') }, { key: 'other', value: alias('a') });
        return { tree, checks: [check, labelValueCheck('other')] };
      case 'merge':
        labels.entries.unshift({
          key: '<<',
          value: { t: 'map', anchor: 'labels', entries: [{ key: sc(written), value: sc('probe') }] },
        });
        return { tree, checks: [check] };
    }
  },
};

const labelValueSite: Site = {
  name: 'labelsForPV (values)',
  build(mode, _layout, written) {
    const tree = baselineTree();
    const labels = mapAt(tree, ['labelsForPV']);
    switch (mode) {
      case 'direct':
        labels.entries.push({ key: 'probe', value: sc(written) });
        return { tree, checks: [labelValueCheck('probe')] };
      case 'alias':
        labels.entries.push({ key: 'probe', value: sc(written, 'a') }, { key: 'other', value: alias('a') });
        return { tree, checks: [labelValueCheck('probe'), labelValueCheck('other')] };
      case 'merge':
        labels.entries.unshift({ key: '<<', value: map([['probe', sc(written)]], 'labels') });
        return { tree, checks: [labelValueCheck('probe')] };
    }
  },
};

function tolerationSite(field: TolerationField): Site {
  const check = (i: number): Check => ({
    path: `jobTolerations[${String(i)}].${field}`,
    kind: KIND_OF_TOLERATION_FIELD[field],
    target: { op: 'set', at: ['jobTolerations', i, field] },
  });
  return {
    name: `jobTolerations[].${field}`,
    build(mode, _layout, written) {
      const tree = baselineTree();
      const first = mapAt(tree, ['jobTolerations', 0]);
      const second = mapAt(tree, ['jobTolerations', 1]);
      switch (mode) {
        case 'direct':
          setNode(first, [field], sc(written));
          return { tree, checks: [check(0)] };
        case 'alias':
          setNode(first, [field], sc(written, 'a'));
          setNode(second, [field], alias('a'));
          return { tree, checks: [check(0), check(1)] };
        case 'merge':
          takeEntries(first, [field]);
          first.entries.unshift({ key: '<<', value: map([[field, sc(written)]], 'toleration') });
          takeEntries(second, [field]);
          second.entries.unshift({ key: '<<', value: alias('toleration') });
          return { tree, checks: [check(0), check(1)] };
      }
    },
  };
}

/** A top-level scalar key: an alias only in the single-file layout (each key file is a document of its own). */
function topLevelSite(key: string, kind: Kind, aliasInto: 'nodeLabel' | 'labelValue'): Site {
  const check: Check = { path: key, kind, target: { op: 'set', at: [key] } };
  return {
    name: key,
    build(mode, layout, written) {
      const tree = baselineTree();
      switch (mode) {
        case 'direct':
          setNode(tree, [key], sc(written));
          return { tree, checks: [check] };
        case 'alias': {
          if (layout !== 'file') return undefined;
          setNode(tree, [key], sc(written, 'a'));
          if (aliasInto === 'nodeLabel') {
            seqAt(tree, ['nodeLabelsForPV']).items.push(alias('a'));
            return { tree, checks: [check, nodeLabelCheck(2)] };
          }
          mapAt(tree, ['labelsForPV']).entries.push({ key: 'other', value: alias('a') });
          return { tree, checks: [check, labelValueCheck('other')] };
        }
        case 'merge':
          return undefined;
      }
    },
  };
}

export const SITES: readonly Site[] = [
  ...CLASS_FIELDS.map(classFieldSite),
  cleanerSite(0),
  cleanerSite(1),
  selectorSite('key'),
  selectorSite('operator'),
  selectorSite('values[0]'),
  classNameSite,
  nodeLabelSite,
  labelKeySite,
  labelValueSite,
  ...TOLERATION_FIELDS.map(tolerationSite),
  topLevelSite('provisionerNotReadyNodeTaintKey', 'taintKey', 'nodeLabel'),
  topLevelSite('minResyncPeriod', 'duration', 'labelValue'),
  ...BOOL_KEYS.map((k) => topLevelSite(k, 'bool', 'labelValue')),
];

// ---- comparing -------------------------------------------------------------------------------

function getPath(root: Json, at: readonly Seg[]): Json | undefined {
  let node: Json | undefined = root;
  for (const seg of at) {
    if (node === null || typeof node !== 'object') return undefined;
    node = Array.isArray(node) ? (typeof seg === 'number' ? node[seg] : undefined) : node[String(seg)];
  }
  return node;
}

function setPath(root: Json, at: readonly Seg[], value: Json | undefined): void {
  const parent = getPath(root, at.slice(0, -1));
  const last = at[at.length - 1];
  if (parent === null || typeof parent !== 'object' || last === undefined)
    throw new Error(`no parent at ${at.join('.')}`);
  if (Array.isArray(parent)) {
    if (typeof last !== 'number' || value === undefined) throw new Error(`bad list target ${at.join('.')}`);
    parent[last] = value;
  } else if (value === undefined) Reflect.deleteProperty(parent, String(last));
  else parent[String(last)] = value;
}

function apply(expected: Json, check: Check, value: Json | undefined): void {
  const t = check.target;
  if (t.op === 'set') {
    setPath(expected, t.at, value);
    return;
  }
  const m = getPath(expected, t.at);
  if (m === null || typeof m !== 'object' || Array.isArray(m) || typeof value !== 'string')
    throw new Error('bad key target');
  if (t.from !== undefined) {
    const moved = m[t.from];
    Reflect.deleteProperty(m, t.from);
    if (moved !== undefined) m[value] = moved;
  } else if (t.value !== undefined) m[value] = t.value;
}

/** What the loaded config holds where a check looks. */
function actual(config: Json, check: Check): string {
  const t = check.target;
  if (t.op === 'set') {
    const v = getPath(config, t.at);
    return v === undefined ? '(unset)' : quote(v);
  }
  const m = getPath(config, t.at);
  const base = getPath(baselineConfig(), t.at);
  if (m === null || typeof m !== 'object' || Array.isArray(m)) return '(no mapping)';
  const known = base !== null && typeof base === 'object' && !Array.isArray(base) ? Object.keys(base) : [];
  return `keys ${quote(Object.keys(m).filter((k) => !known.includes(k) || k === t.from))}`;
}

/** The first path where two JSON values differ. */
function firstDifference(a: Json | undefined, b: Json | undefined, path = ''): string | undefined {
  if (isDeepStrictEqual(a, b)) return undefined;
  if (a !== null && b !== null && typeof a === 'object' && typeof b === 'object') {
    const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
    for (const k of keys) {
      const d = firstDifference(
        (a as Record<string, Json>)[k],
        (b as Record<string, Json>)[k],
        Array.isArray(a) ? `${path}[${k}]` : path === '' ? k : `${path}.${k}`,
      );
      if (d !== undefined) return d;
    }
  }
  return `${plain(path)}: expected ${quote(a)}, got ${quote(b)}`;
}

const under = (issuePath: string, errorPath: string): boolean =>
  issuePath === errorPath || issuePath.startsWith(`${errorPath}.`) || issuePath.startsWith(`${errorPath}[`);

export interface Mismatch {
  readonly layout: Layout;
  readonly mode: Mode;
  readonly written: string;
  readonly field: string;
  readonly expected: string;
  readonly got: string;
}

export interface SweepResult {
  readonly cases: number;
  readonly sites: number;
  /** Configs loaded (parseConfigSnapshot of what the directory reader returns for them). */
  readonly configs: number;
  /** Of them, written to disk and loaded again with loadConfig (every diskEvery-th). */
  readonly diskLoads: number;
  /** Combinations a mode does not apply to (merge for a list of label keys, …). */
  readonly notApplicable: number;
  /** Probed values checked, by classification. */
  readonly outcomes: ReadonlyMap<string, number>;
  /** Configs by layout × mode. */
  readonly configsBy: ReadonlyMap<string, number>;
  readonly mismatches: readonly Mismatch[];
  readonly ms: number;
}

/** JSON with everything outside printable ASCII escaped, so that U+FFFD, NUL or a newline shows as what it is. */
export const quote = (v: unknown): string =>
  ((JSON.stringify(v) as string | undefined) ?? 'undefined').replace(
    /[^\x20-\x7e]/gu,
    (ch) => `\\u${(ch.codePointAt(0) ?? 0).toString(16).padStart(4, '0')}`,
  );
/** A path or message as text, escaped as quote() does but without the quotes. */
const plain = (s: string): string => quote(s).slice(1, -1);

const show = (e: Expectation): string =>
  e.outcome === 'holds'
    ? `holds ${e.value === undefined ? '(unset)' : quote(e.value)} [${e.label}]`
    : `refused at ${plain(e.errorPath)}${e.message === undefined ? '' : ` with ${quote(e.message)}`} [${e.label}]`;

const showIssues = (issues: readonly ConfigIssue[]): string =>
  issues
    .filter((i) => i.severity === 'error')
    .map((i) => plain(`${i.path}: ${i.message}`))
    .join(' | ');

/** Loads every probe config in dir and compares it with the oracle. */
/** One probe config: a scalar at one field, written one way, in one layout, and what each probed value must be. */
export interface ProbeConfig {
  readonly layout: Layout;
  readonly mode: Mode;
  readonly site: string;
  readonly scalar: UpstreamScalar;
  readonly rendered: Rendered;
  readonly checks: readonly { readonly check: Check; readonly expect: Expectation }[];
}

/** Every probe config, in a fixed order; undefined for a combination that does not apply. */
export function* probeConfigs(cases: readonly UpstreamScalar[] = UPSTREAM_SCALARS): Generator<ProbeConfig | undefined> {
  for (const layout of LAYOUTS) {
    for (const mode of MODES) {
      for (const site of SITES) {
        for (const scalar of cases) {
          const built = site.build(mode, layout, scalar.written);
          const checks = (built?.checks ?? [])
            .map((check) => ({ check, expect: expectation(check, scalar) }))
            .filter((x): x is { check: Check; expect: Expectation } => x.expect !== undefined);
          yield built === undefined || checks.length === 0
            ? undefined
            : { layout, mode, site: site.name, scalar, rendered: renderLayout(built.tree, layout), checks };
        }
      }
    }
  }
}

type Loaded = { readonly ok: true; readonly config: Json } | { readonly ok: false; readonly error: unknown };

const loadedOf = (config: unknown): Loaded => ({ ok: true, config: config as Json });

/** The errors of a refusal, comparable across two loads. */
const errorsOf = (l: Loaded): string[] | undefined =>
  !l.ok && l.error instanceof InvalidConfigError
    ? l.error.issues
        .filter((i) => i.severity === 'error')
        .map((i) => `${i.path}: ${i.message}`)
        .sort()
    : undefined;

const describeLoad = (l: Loaded): string =>
  l.ok ? `loaded ${quote(l.config)}` : plain(errorsOf(l)?.join(' | ') ?? String(l.error));

export interface SweepOptions {
  /** Write every n-th config to disk and load it with loadConfig too (0: never). */
  readonly diskEvery?: number;
  readonly cases?: readonly UpstreamScalar[];
}

/**
 * Loads every probe config and compares it with the oracle. Each config is decoded from the bytes
 * the directory reader would return (snapshotFromSourceBytes + parseConfigSnapshot, what loadConfig
 * does after reading); every diskEvery-th one is also written under dir and read with loadConfig,
 * which must give the same config or the same errors.
 */
export async function runScalarSweep(dir: string, options: SweepOptions = {}): Promise<SweepResult> {
  const cases = options.cases ?? UPSTREAM_SCALARS;
  const diskEvery = options.diskEvery ?? 10;
  let diskLoads = 0;
  const started = performance.now();
  await mkdir(dir, { recursive: true });
  const outcomes = new Map<string, number>();
  const configsBy = new Map<string, number>();
  const mismatches: Mismatch[] = [];
  let configs = 0;
  let notApplicable = 0;
  const bump = (m: Map<string, number>, k: string): void => {
    m.set(k, (m.get(k) ?? 0) + 1);
  };
  for (const probe of probeConfigs(cases)) {
    if (probe === undefined) {
      notApplicable++;
      continue;
    }
    const { layout, mode, scalar: c, rendered, checks } = probe;
    configs++;
    bump(configsBy, `${layout} ${mode}`);
    const mismatch = (field: string, expected: string, got: string): void => {
      mismatches.push({ layout, mode, written: c.written, field, expected, got });
    };
    const path = pathOf(rendered, dir);
    let loaded: Loaded;
    try {
      loaded = loadedOf(parseConfigSnapshot(snapshotFromSourceBytes(path, sourceBytes(rendered, path))).config);
    } catch (error) {
      loaded = { ok: false, error };
    }
    if (diskEvery > 0 && configs % diskEvery === 0) {
      diskLoads++;
      await writeRendered(rendered, dir);
      const fromDisk = await loadConfig(path).then(
        (l): Loaded => loadedOf(l.config),
        (error: unknown): Loaded => ({ ok: false, error }),
      );
      const same =
        loaded.ok && fromDisk.ok
          ? isDeepStrictEqual(loaded.config, fromDisk.config)
          : isDeepStrictEqual(errorsOf(loaded), errorsOf(fromDisk)) && errorsOf(loaded) !== undefined;
      if (!same) mismatch('(loadConfig from disk)', describeLoad(loaded), describeLoad(fromDisk));
    }
    for (const { expect } of checks) bump(outcomes, expect.label);
    const refusals = checks.filter((x) => x.expect.outcome === 'refused');
    if (loaded.ok) {
      if (refusals.length > 0) {
        for (const { check, expect } of refusals)
          mismatch(check.path, show(expect), `loaded, holds ${actual(loaded.config, check)}`);
        continue;
      }
      const expected = baselineConfig();
      for (const { check, expect } of checks) if (expect.outcome === 'holds') apply(expected, check, expect.value);
      if (isDeepStrictEqual(expected, loaded.config)) continue;
      let reported = false;
      for (const { check, expect } of checks) {
        const want = baselineConfig();
        if (expect.outcome === 'holds') apply(want, check, expect.value);
        const got = actual(loaded.config, check);
        if (got !== actual(want, check)) {
          mismatch(check.path, show(expect), got);
          reported = true;
        }
      }
      if (!reported) mismatch('(elsewhere)', 'the baseline', firstDifference(expected, loaded.config) ?? '?');
      continue;
    }
    if (!(loaded.error instanceof InvalidConfigError)) {
      mismatch('(load)', 'an InvalidConfigError or a config', String(loaded.error));
      continue;
    }
    const errors = loaded.error.issues.filter((i) => i.severity === 'error');
    if (refusals.length === 0) {
      for (const { check, expect } of checks) mismatch(check.path, show(expect), `refused: ${showIssues(errors)}`);
      continue;
    }
    for (const { check, expect } of refusals) {
      if (expect.outcome !== 'refused') continue;
      const named = errors.filter((i) => under(i.path, expect.errorPath));
      const withMessage =
        expect.message === undefined ? named : named.filter((i) => i.message.includes(expect.message ?? ''));
      if (withMessage.length === 0) mismatch(check.path, show(expect), `refused: ${showIssues(errors)}`);
    }
    const unexplained = errors.filter(
      (i) => !refusals.some(({ expect }) => expect.outcome === 'refused' && under(i.path, expect.errorPath)),
    );
    if (unexplained.length > 0) {
      mismatch(
        '(other fields)',
        `errors only at ${refusals.map(({ expect }) => (expect.outcome === 'refused' ? expect.errorPath : '')).join(', ')}`,
        showIssues(unexplained),
      );
    }
  }
  return {
    cases: cases.length,
    sites: SITES.length,
    configs,
    diskLoads,
    notApplicable,
    outcomes,
    configsBy,
    mismatches,
    ms: performance.now() - started,
  };
}
