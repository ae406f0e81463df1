// Reading simulate's own inputs (node-facts and cluster fixtures, scenarios) with positions: every
// problem names the file, line, column and the key path, and all problems are collected before
// failing with InvalidInputError (exit 3, like an invalid config).
import { isMap, isScalar, isSeq } from 'yaml';
import type { Node, YAMLMap } from 'yaml';
import { parseGoDuration } from '../config/duration.js';
import { decodeConfigText } from '../config/decode/layout.js';
import { readRegularFile } from '../bounded-file.js';
import { suggest } from '../config/suggest.js';
import { describeNode, IssueSink, isNullNode, scalarValue, YamlBudget, YamlText } from '../config/decode/yaml-node.js';
import { InvalidConfigError } from '../errors.js';
import type { ConfigIssue, SourcePosition } from '../errors.js';
import { parseQuantity } from '../kube/quantity.js';

export type InputKind = 'node-facts fixture' | 'cluster fixture' | 'scenario';

/** A fixture or scenario that was read but is malformed. Exit code 3, like an invalid config. */
export class InvalidInputError extends InvalidConfigError {
  constructor(
    readonly input: InputKind,
    source: string,
    issues: readonly ConfigIssue[],
  ) {
    super(source, issues);
    const n = issues.filter((i) => i.severity === 'error').length;
    this.message = `invalid ${input} ${source} (${n} ${n === 1 ? 'problem' : 'problems'})`;
  }
}

/** The most a fixture or scenario file may hold (a cluster fixture lists PVs; a few thousand fit easily). */
export const MAX_INPUT_FILE_BYTES = 16 * 1024 * 1024;

/**
 * A fixture or scenario's text, read as config is (bounded-file.ts): regular files only, without blocking,
 * at most MAX_INPUT_FILE_BYTES, UTF-8. Not readable: ConfigSourceError (exit 4); too large or not
 * UTF-8: InvalidInputError (exit 3).
 */
export async function readInputText(path: string, kind: InputKind): Promise<string> {
  const bytes = await readRegularFile(path, MAX_INPUT_FILE_BYTES);
  if (bytes === undefined) {
    throw new InvalidInputError(kind, path, [
      {
        severity: 'error',
        path: '',
        message: `is larger than ${String(MAX_INPUT_FILE_BYTES / (1024 * 1024))} MiB, the most a ${kind} file may hold`,
        position: { file: path },
      },
    ]);
  }
  const decoded = decodeConfigText(bytes, path, '');
  if ('issue' in decoded) throw new InvalidInputError(kind, path, [decoded.issue]);
  return decoded.text;
}

/** One YAML input: its documents, an issue sink and typed accessors that report where things are. */
export class Input {
  readonly sink = new IssueSink();
  readonly docs: readonly YamlText[];

  constructor(
    readonly kind: InputKind,
    readonly file: string,
    text: string,
  ) {
    // YAML 1.1, as the config itself and go-yaml v2 read it.
    const origin = { file, lineOffset: 0, columnOffset: 0 };
    this.docs = YamlText.parseAll(text, origin, this.sink, '', {
      uniqueKeys: true,
      budget: YamlBudget.forInput(),
    }).docs;
  }

  /** The document a node belongs to (for positions and alias resolution); the first by default. */
  private docOf(node: Node | null | undefined): YamlText | undefined {
    if (node && 'range' in node && node.range) {
      const start = node.range[0];
      for (const d of this.docs) {
        const r = d.doc.range;
        if (start >= r[0] && start <= r[2]) return d;
      }
    }
    return this.docs[0];
  }

  position(node: Node | null | undefined): SourcePosition {
    return this.docOf(node)?.position(node) ?? { file: this.file };
  }

  resolve(node: unknown): Node | null {
    if (node === null || node === undefined) return null;
    const doc = this.docOf(node as Node);
    if (!doc) return null;
    return doc.resolve(node);
  }

  error(path: string, message: string, node?: Node | null): void {
    this.sink.error(path, message, node ? this.position(node) : { file: this.file });
  }

  warn(path: string, message: string, node?: Node | null): void {
    this.sink.warn(path, message, node ? this.position(node) : { file: this.file });
  }

  get failed(): boolean {
    return this.sink.hasErrors;
  }

  /** Throws InvalidInputError when any error was reported. */
  check(): void {
    if (this.sink.hasErrors) throw new InvalidInputError(this.kind, this.file, this.sink.issues);
  }

  warnings(): ConfigIssue[] {
    return this.sink.issues.filter((i) => i.severity === 'warning');
  }

  // ---- typed accessors: report a problem and return undefined when the value is wrong ----------

  map(node: Node | null, path: string): YAMLMap | undefined {
    const n = this.resolve(node);
    if (n !== null && isMap(n)) return n;
    this.error(path, `expected a mapping, found ${describeNode(n)}`, n ?? node);
    return undefined;
  }

  /** The pairs of a mapping with plain string keys; unknown keys are reported with a suggestion. */
  pairs(map: YAMLMap, path: string, known?: readonly string[]): { key: string; keyNode: Node; value: Node | null }[] {
    const out: { key: string; keyNode: Node; value: Node | null }[] = [];
    for (const pair of map.items) {
      const keyNode = this.resolve(pair.key);
      const key = keyNode !== null ? scalarValue(keyNode) : undefined;
      if (keyNode === null || key === null || key === undefined) {
        this.error(path, 'keys must be plain strings', keyNode);
        continue;
      }
      const name = String(key);
      const at = path === '' ? name : `${path}.${name}`;
      if (known && !known.includes(name)) {
        const hint = suggest(name, known);
        this.error(
          at,
          `unknown key "${name}"${hint !== undefined ? `; did you mean "${hint}"?` : ''} (expected one of: ${known.join(', ')})`,
          keyNode,
        );
        continue;
      }
      out.push({ key: name, keyNode, value: this.resolve(pair.value) });
    }
    return out;
  }

  /** A mapping's value by key (resolved), or null when absent. */
  get(map: YAMLMap | undefined, key: string): Node | null {
    if (!map) return null;
    return this.resolve(map.get(key, true));
  }

  list(node: Node | null, path: string): Node[] | undefined {
    const n = this.resolve(node);
    if (n !== null && isSeq(n)) return n.items.map((i) => this.resolve(i)).filter((i): i is Node => i !== null);
    this.error(path, `expected a list, found ${describeNode(n)}`, n ?? node);
    return undefined;
  }

  string(node: Node | null, path: string, options: { required?: boolean } = {}): string | undefined {
    const n = this.resolve(node);
    if (isNullNode(n)) {
      if (options.required === true) this.error(path, 'is required', n);
      return undefined;
    }
    const v = n !== null ? scalarValue(n) : undefined;
    if (typeof v === 'string') return v;
    if (typeof v === 'number' || typeof v === 'boolean' || typeof v === 'bigint') return String(v);
    this.error(path, `expected a string, found ${describeNode(n)}`, n);
    return undefined;
  }

  oneOf<T extends string>(node: Node | null, path: string, values: readonly T[], fallback?: T): T | undefined {
    const text = this.string(node, path, { required: fallback === undefined });
    if (text === undefined) return fallback;
    if ((values as readonly string[]).includes(text)) return text as T;
    const hint = suggest(text, values);
    this.error(
      path,
      `"${text}" is not one of ${values.join(', ')}${hint !== undefined ? `; did you mean "${hint}"?` : ''}`,
      node,
    );
    return undefined;
  }

  boolean(node: Node | null, path: string, fallback: boolean): boolean | undefined {
    const n = this.resolve(node);
    if (isNullNode(n)) return fallback;
    const v = n !== null ? scalarValue(n) : undefined;
    if (typeof v === 'boolean') return v;
    this.error(path, `expected true or false, found ${describeNode(n)}`, n);
    return undefined;
  }

  integer(node: Node | null, path: string, options: { min?: number } = {}): number | undefined {
    const n = this.resolve(node);
    const v = n !== null ? scalarValue(n) : undefined;
    if (typeof v === 'number' && Number.isSafeInteger(v) && v >= (options.min ?? -Infinity)) return v;
    this.error(
      path,
      `expected an integer${options.min !== undefined ? ` >= ${options.min}` : ''}, found ${describeNode(n)}`,
      n ?? node,
    );
    return undefined;
  }

  /** Bytes from a Kubernetes quantity (`10Gi`, `500G`) or a plain integer. */
  bytes(node: Node | null, path: string): number | undefined {
    const n = this.resolve(node);
    const v = n !== null ? scalarValue(n) : undefined;
    const bytes = typeof v === 'number' ? v : typeof v === 'string' ? parseQuantity(v) : Number.NaN;
    if (Number.isSafeInteger(bytes) && bytes >= 0) return bytes;
    this.error(path, `expected a capacity such as 10Gi, 500G or a byte count, found ${describeNode(n)}`, n ?? node);
    return undefined;
  }

  /** Milliseconds from a Go duration (`30s`, `5m`, `1h30m`). */
  duration(node: Node | null, path: string): number | undefined {
    const text = this.string(node, path, { required: true });
    if (text === undefined) return undefined;
    const parsed = parseGoDuration(text);
    if (!parsed.ok || parsed.nanos < 0n) {
      this.error(path, parsed.ok ? 'must not be negative' : parsed.message, node);
      return undefined;
    }
    return Number(parsed.nanos / 1_000_000n);
  }

  /** A node as plain JavaScript data (aliases resolved). */
  toJS(node: Node | null): unknown {
    if (node === null) return null;
    const doc = this.docOf(node);
    if (isScalar(node)) return scalarValue(node) ?? null;
    return doc ? (node.toJS(doc.doc) as unknown) : null;
  }
}
