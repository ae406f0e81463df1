// Splitting what a source read into the config's keys (pure): a directory's key files, one YAML
// file of keys, or one ConfigMap manifest file; and the UTF-8 check every config byte passes.
import { join } from 'node:path';
import { isMap, isScalar } from 'yaml';
import { InvalidConfigError } from '../../errors.js';
import type { ConfigIssue } from '../../errors.js';
import type { SourceBytes } from '../source/directory-read.js';
import type { ConfigSnapshot, FileLayout, RawEntry, SnapshotOrigin } from '../source/port.js';
import { goKey, resolveGoScalar, scalarText } from './go-yaml.js';
import { asMap, badKeyReason, IssueSink, isMergeKey, isNullNode, YamlBudget, YamlText } from './yaml-node.js';

export interface ConfigFile {
  readonly name: string;
  readonly text: string;
}

/** A directory of one file per key. Names starting with `..` are kubelet's, never keys. */
export function snapshotFromDirectoryFiles(
  dir: string,
  files: readonly ConfigFile[],
  dataDir?: string,
): ConfigSnapshot {
  const entries = files
    .filter((f) => !f.name.startsWith('..'))
    .map((f): RawEntry => {
      const file = join(dir, f.name);
      return {
        key: f.name,
        keyPosition: { file },
        value: { kind: 'text', text: f.text, origin: { file, lineOffset: 0, columnOffset: 0 } },
      };
    });
  const source: SnapshotOrigin =
    dataDir === undefined ? { path: dir, kind: 'directory' } : { path: dir, kind: 'directory', dataDir };
  return { source, entries, issues: [], yamlValues: 0 };
}

function kindOf(yaml: YamlText): string | undefined {
  const kind = asMap(yaml.root)?.get('kind');
  return typeof kind === 'string' ? kind : undefined;
}

/** A single YAML file: either the keys themselves, or a manifest holding one ConfigMap. */
export function snapshotFromFileText(path: string, text: string): ConfigSnapshot {
  const sink = new IssueSink();
  const budget = YamlBudget.forConfig();
  const { docs, failed } = YamlText.parseAll(text, { file: path, lineOffset: 0, columnOffset: 0 }, sink, '', {
    budget,
  });
  const nonEmpty = docs.filter((y) => y.root !== null);
  const configMaps = nonEmpty.filter((y) => kindOf(y) === 'ConfigMap');
  const kinds = [...new Set(nonEmpty.map(kindOf).filter((k): k is string => k !== undefined))];
  const fail = (kind: FileLayout, message?: string): ConfigSnapshot => {
    if (message !== undefined) sink.error('', message, { file: path });
    return { source: { path, kind }, entries: [], issues: sink.issues, yamlValues: budget.used };
  };

  if (failed) return fail('yaml-file');
  const configMap = configMaps[0];
  if (configMaps.length > 1)
    return fail('configmap', `${configMaps.length} ConfigMaps in one file; keep only the one to read`);
  if (configMap) return snapshotFromConfigMap(path, configMap, sink, budget.used);
  if (kinds.length > 0) return fail('configmap', `no ConfigMap in this manifest (found ${kinds.join(', ')})`);
  if (nonEmpty.length > 1) {
    return fail(
      'yaml-file',
      `${nonEmpty.length} YAML documents and none is a ConfigMap; expected one mapping of config keys`,
    );
  }
  const yaml = nonEmpty[0];
  const root = yaml?.root ?? null;
  if (!yaml || root === null || isNullNode(root)) return fail('yaml-file');
  if (!isMap(root)) {
    sink.error(
      '',
      'expected a mapping of config keys (storageClassMap, useJobForCleaning, …) or a ConfigMap manifest',
      yaml.position(root),
    );
    return fail('yaml-file');
  }
  const entries: RawEntry[] = [];
  for (const pair of root.items) {
    const keyNode = yaml.resolve(pair.key);
    const key = isMergeKey(keyNode) ? { problem: badKeyReason(keyNode) } : goKey(keyNode);
    if ('problem' in key) {
      sink.error('', key.problem, yaml.position(keyNode));
      continue;
    }
    entries.push({
      key: key.key,
      keyPosition: yaml.position(keyNode),
      value: { kind: 'node', node: yaml.resolve(pair.value), yaml },
    });
  }
  return { source: { path, kind: 'yaml-file' }, entries, issues: sink.issues, yamlValues: budget.used };
}

function snapshotFromConfigMap(path: string, manifest: YamlText, sink: IssueSink, yamlValues: number): ConfigSnapshot {
  const root = asMap(manifest.root);
  const metadata = asMap(manifest.resolve(root?.get('metadata', true)));
  const name = metadata?.get('name');
  const namespace = metadata?.get('namespace');
  const configMap = `${typeof namespace === 'string' ? namespace : 'default'}/${typeof name === 'string' ? name : '?'}`;
  const source: SnapshotOrigin = { path, kind: 'configmap', configMap };
  if (root?.has('binaryData')) sink.warn('binaryData', 'binaryData keys are not read as configuration', { file: path });
  const dataNode = manifest.resolve(root?.get('data', true));
  if (isNullNode(dataNode)) return { source, entries: [], issues: sink.issues, yamlValues };
  const data = asMap(dataNode);
  if (!data) {
    sink.error('data', 'expected a mapping of keys to strings', manifest.position(dataNode));
    return { source, entries: [], issues: sink.issues, yamlValues };
  }
  const entries: RawEntry[] = [];
  for (const pair of data.items) {
    const keyNode = manifest.resolve(pair.key);
    const key = isMergeKey(keyNode) ? { problem: badKeyReason(keyNode) } : goKey(keyNode);
    const value = manifest.resolve(pair.value);
    if ('problem' in key) {
      sink.error('data', key.problem, manifest.position(keyNode));
      continue;
    }
    const keyText = key.key;
    if (value === null || !isScalar(value)) {
      sink.error(`data.${keyText}`, 'ConfigMap data values must be strings', manifest.position(value));
      continue;
    }
    // kubectl reads the manifest with go-yaml v2 too: only what it reads as text is a string.
    const v = resolveGoScalar(value);
    const written = scalarText(value);
    if (v.kind !== 'string') {
      sink.warn(
        `data.${keyText}`,
        `ConfigMap data values must be strings: quote it ("${written}"); the API server would reject this manifest`,
        manifest.position(value),
      );
    }
    entries.push({
      key: keyText,
      keyPosition: manifest.position(keyNode),
      value: {
        kind: 'text',
        text: v.kind === 'string' ? v.value : written,
        origin: manifest.originOfScalarContent(value),
      },
    });
  }
  return { source, entries, issues: sink.issues, yamlValues };
}

/** Pure: the bytes readSourceBytes read → a snapshot. Throws InvalidConfigError when they are not UTF-8. */
export function snapshotFromSourceBytes(path: string, read: SourceBytes): ConfigSnapshot {
  if (read.kind === 'file') {
    const decoded = decodeConfigText(read.bytes, path, '');
    if ('issue' in decoded) throw new InvalidConfigError(path, [decoded.issue]);
    return snapshotFromFileText(path, decoded.text);
  }
  const files: ConfigFile[] = [];
  const issues: ConfigIssue[] = [];
  for (const f of read.files) {
    const decoded = decodeConfigText(f.bytes, join(path, f.name), f.name);
    if ('issue' in decoded) issues.push(decoded.issue);
    else files.push({ name: f.name, text: decoded.text });
  }
  if (issues.length > 0) throw new InvalidConfigError(path, issues);
  return snapshotFromDirectoryFiles(path, files, read.dataDir);
}

// ---------------------------------------------------------------------------------------------
// Text

const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** The offset of the first byte that does not start or continue a UTF-8 character; -1 when all do. */
function firstInvalidUtf8(bytes: Uint8Array): number {
  let i = 0;
  while (i < bytes.length) {
    const lead = bytes[i] ?? 0;
    if (lead < 0x80) {
      i++;
      continue;
    }
    const trailing =
      lead >= 0xc2 && lead <= 0xdf ? 1 : lead >= 0xe0 && lead <= 0xef ? 2 : lead >= 0xf0 && lead <= 0xf4 ? 3 : 0;
    if (trailing === 0) return i;
    // Overlong forms, UTF-16 surrogates and code points above U+10FFFF are ruled out by the second byte.
    const low = lead === 0xe0 ? 0xa0 : lead === 0xf0 ? 0x90 : 0x80;
    const high = lead === 0xed ? 0x9f : lead === 0xf4 ? 0x8f : 0xbf;
    const second = bytes[i + 1];
    if (second === undefined || second < low || second > high) return i;
    for (let k = 2; k <= trailing; k++) {
      const next = bytes[i + k];
      if (next === undefined || (next & 0xc0) !== 0x80) return i;
    }
    i += trailing + 1;
  }
  return -1;
}

/**
 * Pure: the text of a config file's bytes, or the problem when they are not UTF-8 (rather than
 * replacing bytes, which would silently change e.g. a path). `path` is the key path for the issue.
 */
export function decodeConfigText(
  bytes: Uint8Array,
  file: string,
  path: string,
): { readonly text: string } | { readonly issue: ConfigIssue } {
  try {
    return { text: UTF8.decode(bytes) };
  } catch {
    const offset = Math.max(0, firstInvalidUtf8(bytes));
    const before = bytes.subarray(0, offset);
    const lineStart = before.lastIndexOf(0x0a) + 1;
    let line = 1;
    for (const b of before) if (b === 0x0a) line++;
    let column = 1;
    for (const b of before.subarray(lineStart)) if ((b & 0xc0) !== 0x80) column++;
    const byte = (bytes[offset] ?? 0).toString(16).padStart(2, '0');
    return {
      issue: {
        severity: 'error',
        path,
        message: `is not valid UTF-8: byte 0x${byte} at offset ${String(offset)} is not part of a character; save the file as UTF-8`,
        position: { file, line, column },
      },
    };
  }
}
