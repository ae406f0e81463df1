// Config sources: a mounted ConfigMap directory, a single YAML file, or a ConfigMap manifest.
// Reading (bounded, regular files only: read.ts) is the only IO; turning what was read into a config
// is pure (snapshot → parse).
import { join } from 'node:path';
import { isMap, isScalar } from 'yaml';
import { InvalidConfigError } from '../errors.js';
import type { ConfigIssue } from '../errors.js';
import { configHash } from './canonical.js';
import { decodeConfigText, readSourceBytes } from './read.js';
import type { SourceBytes } from './read.js';
import type { ProvisionerConfig } from './model.js';
import { parseConfigEntries } from './parse.js';
import type { RawEntry } from './parse.js';
import { asMap, badKeyReason, IssueSink, isNullNode, scalarValue, YamlBudget, YamlText } from './yaml-node.js';

export type ConfigSourceKind = 'directory' | 'yaml-file' | 'configmap';

export interface ConfigSourceInfo {
  /** The path the user gave. */
  readonly path: string;
  readonly kind: ConfigSourceKind;
  /** For a kubelet-style directory: the timestamped directory `..data` pointed to when read. */
  readonly dataDir?: string;
  /** For a manifest: `namespace/name` of the ConfigMap. */
  readonly configMap?: string;
}

/** Everything read from a source at one instant, not yet interpreted. */
export interface ConfigSnapshot {
  readonly source: ConfigSourceInfo;
  readonly entries: readonly RawEntry[];
  /** Problems found while splitting the source into keys (e.g. YAML errors of a whole file). */
  readonly issues: readonly ConfigIssue[];
  /** YAML values parsed while splitting the source into keys: its keys' YAML counts on from here (YamlBudget). */
  readonly yamlValues: number;
}

export interface LoadedConfig {
  readonly config: ProvisionerConfig;
  readonly hash: string;
  readonly source: ConfigSourceInfo;
  readonly warnings: readonly ConfigIssue[];
}

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
  const source: ConfigSourceInfo =
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
  const fail = (kind: ConfigSourceKind, message?: string): ConfigSnapshot => {
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
    const key = keyNode !== null ? scalarValue(keyNode) : undefined;
    if (key === null || key === undefined) {
      sink.error('', badKeyReason(keyNode), yaml.position(keyNode));
      continue;
    }
    entries.push({
      key: String(key),
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
  const source: ConfigSourceInfo = { path, kind: 'configmap', configMap };
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
    const key = keyNode !== null ? scalarValue(keyNode) : undefined;
    const value = manifest.resolve(pair.value);
    if (key === null || key === undefined) {
      sink.error('data', badKeyReason(keyNode), manifest.position(keyNode));
      continue;
    }
    const keyText = String(key);
    if (value === null || !isScalar(value)) {
      sink.error(`data.${keyText}`, 'ConfigMap data values must be strings', manifest.position(value));
      continue;
    }
    const v = scalarValue(value);
    const written = value.source ?? String(v);
    if (typeof v !== 'string') {
      sink.warn(
        `data.${keyText}`,
        `ConfigMap data values must be strings: quote it ("${written}"); the API server would reject this manifest`,
        manifest.position(value),
      );
    }
    entries.push({
      key: keyText,
      keyPosition: manifest.position(keyNode),
      value: { kind: 'text', text: typeof v === 'string' ? v : written, origin: manifest.originOfScalarContent(value) },
    });
  }
  return { source, entries, issues: sink.issues, yamlValues };
}

/**
 * Reads a config source of any of the three layouts, within the limits of read.ts. Throws
 * ConfigSourceError when it cannot be read, InvalidConfigError when it is too large or not UTF-8.
 */
export async function readConfigSnapshot(path: string): Promise<ConfigSnapshot> {
  return snapshotFromSourceBytes(path, await readSourceBytes(path));
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
  };
}

export async function loadConfig(path: string): Promise<LoadedConfig> {
  return parseConfigSnapshot(await readConfigSnapshot(path));
}
