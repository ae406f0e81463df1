// YAML 1.1 parsing with positions mapped back to the file the text came from.
// Upstream reads its config with go-yaml v2 (YAML 1.1): `yes`, `on`, `y` are booleans there.
import { isAlias, isMap, isScalar, isSeq, LineCounter, parseDocument, Scalar } from 'yaml';
import type { Document, Node, Pair, YAMLMap, YAMLSeq } from 'yaml';
import type { ConfigIssue, SourcePosition } from '../errors.js';

/** Where a piece of YAML text sits inside its file, so positions point at the real line and column. */
export interface TextOrigin {
  readonly file: string;
  /** Lines to add to a 1-based line inside the text. */
  readonly lineOffset: number;
  /** Columns to add to a 1-based column inside the text. */
  readonly columnOffset: number;
}

export class IssueSink {
  readonly issues: ConfigIssue[] = [];

  error(path: string, message: string, position?: SourcePosition): void {
    this.issues.push(position ? { severity: 'error', path, message, position } : { severity: 'error', path, message });
  }

  warn(path: string, message: string, position?: SourcePosition): void {
    this.issues.push(
      position ? { severity: 'warning', path, message, position } : { severity: 'warning', path, message },
    );
  }

  get hasErrors(): boolean {
    return this.issues.some((i) => i.severity === 'error');
  }
}

/** A parsed YAML document plus what is needed to report positions in it. */
export class YamlText {
  private constructor(
    readonly doc: Document.Parsed,
    private readonly lines: LineCounter,
    readonly origin: TextOrigin,
    readonly text: string,
  ) {}

  /** Parses text as YAML 1.1; reports syntax errors to the sink and returns undefined on failure. */
  static parse(text: string, origin: TextOrigin, sink: IssueSink, path: string): YamlText | undefined {
    const lines = new LineCounter();
    const doc = parseDocument(text, { version: '1.1', lineCounter: lines, uniqueKeys: false, prettyErrors: false });
    const parsed = new YamlText(doc, lines, origin, text);
    return parsed.reportErrors(sink, path) ? undefined : parsed;
  }

  /** One document of a multi-document text parsed with a shared LineCounter (offsets are file offsets). */
  static of(doc: Document.Parsed, lines: LineCounter, origin: TextOrigin, text: string): YamlText {
    return new YamlText(doc, lines, origin, text);
  }

  /** Reports this document's syntax errors; true when there were any. */
  reportErrors(sink: IssueSink, path: string): boolean {
    for (const err of this.doc.errors) {
      const at = this.lines.linePos(err.pos[0]);
      const hint =
        err.code === 'BAD_ALIAS' || err.code === 'ALIAS_PROPS'
          ? '; a value starting with * is a YAML alias: quote it, e.g. namePattern: "*"'
          : '';
      const message = `YAML syntax error: ${firstLine(err.message)}${hint}`;
      sink.error(path, message, this.mapLinePos(at.line, at.col));
    }
    return this.doc.errors.length > 0;
  }

  private mapLinePos(line: number, col: number): SourcePosition {
    return { file: this.origin.file, line: line + this.origin.lineOffset, column: col + this.origin.columnOffset };
  }

  startPosition(): SourcePosition {
    return { file: this.origin.file, line: 1 + this.origin.lineOffset, column: 1 + this.origin.columnOffset };
  }

  position(node: Node | Pair | null | undefined): SourcePosition {
    const offset = node && 'range' in node ? node.range?.[0] : undefined;
    if (offset === undefined) return { file: this.origin.file };
    const { line, col } = this.lines.linePos(offset);
    return this.mapLinePos(line, col);
  }

  /** The root node, with aliases resolved; null for an empty document. */
  get root(): Node | null {
    return this.resolve(this.doc.contents);
  }

  resolve(node: unknown): Node | null {
    if (node === null || node === undefined) return null;
    if (isAlias(node)) return this.resolve(node.resolve(this.doc));
    return node as Node;
  }

  /**
   * Where the content of a block scalar (`key: |`) of this document sits, so YAML nested inside a
   * string (a ConfigMap data value) reports positions in the outer file.
   */
  originOfScalarContent(scalar: Scalar): TextOrigin {
    const start = scalar.range?.[0] ?? 0;
    const { line, col } = this.lines.linePos(start);
    if (scalar.type === Scalar.BLOCK_LITERAL || scalar.type === Scalar.BLOCK_FOLDED) {
      const following = this.text.slice(start).split('\n').slice(1);
      const firstContent = following.find((l) => l.trim() !== '') ?? '';
      const indent = firstContent.length - firstContent.trimStart().length;
      return { file: this.origin.file, lineOffset: line + this.origin.lineOffset, columnOffset: indent };
    }
    return { file: this.origin.file, lineOffset: line - 1 + this.origin.lineOffset, columnOffset: col };
  }
}

function firstLine(message: string): string {
  return (message.split('\n')[0] ?? message).trim();
}

export type ScalarValue = string | number | boolean | bigint | null;

export function scalarValue(node: Node): ScalarValue | undefined {
  if (!isScalar(node)) return undefined;
  const v: unknown = node.value;
  if (v === null || v === undefined) return null;
  // The yaml package's 1.1 float pattern also takes words such as `e0`; go-yaml v2 only reads a
  // plain scalar as a number when it starts with a sign, a dot or a digit.
  if (
    typeof v === 'number' &&
    node.type === Scalar.PLAIN &&
    node.source !== undefined &&
    !/^[-+.0-9]/u.test(node.source)
  ) {
    return node.source;
  }
  if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean' || typeof v === 'bigint') return v;
  return undefined;
}

export function asMap(node: Node | null): YAMLMap | undefined {
  return node !== null && isMap(node) ? node : undefined;
}

export function asSeq(node: Node | null): YAMLSeq | undefined {
  return node !== null && isSeq(node) ? node : undefined;
}

export function isNullNode(node: Node | null): boolean {
  return node === null || (isScalar(node) && (node.value === null || node.value === undefined));
}

export function describeNode(node: Node | null): string {
  if (node === null) return 'nothing';
  if (isMap(node)) return 'a mapping';
  if (isSeq(node)) return 'a list';
  const v = scalarValue(node);
  if (v === null) return 'null';
  if (typeof v === 'string') return `the string ${JSON.stringify(v)}`;
  if (typeof v === 'boolean') return `the boolean ${v}`;
  return `the number ${String(v)}`;
}

/** YAML 1.1 boolean spellings, as go-yaml v2 resolves them. */
const YAML11_TRUE = new Set(['y', 'Y', 'yes', 'Yes', 'YES', 'true', 'True', 'TRUE', 'on', 'On', 'ON']);
const YAML11_FALSE = new Set(['n', 'N', 'no', 'No', 'NO', 'false', 'False', 'FALSE', 'off', 'Off', 'OFF']);

export function yaml11Bool(text: string): boolean | undefined {
  if (YAML11_TRUE.has(text)) return true;
  if (YAML11_FALSE.has(text)) return false;
  return undefined;
}
