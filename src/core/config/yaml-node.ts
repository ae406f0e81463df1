// YAML 1.1 parsing with positions mapped back to the file the text came from.
// Upstream reads its config with go-yaml v2 (YAML 1.1): `yes`, `on`, `y` are booleans there.
import { Composer, isAlias, isMap, isScalar, isSeq, Lexer, LineCounter, Parser, Scalar } from 'yaml';
import type { Alias, CST, Document, Node, Pair, YAMLMap, YAMLSeq } from 'yaml';
import type { ConfigIssue, SourcePosition } from '../errors.js';

/** Where a piece of YAML text sits inside its file, so positions point at the real line and column. */
export interface TextOrigin {
  readonly file: string;
  /** Lines to add to a 1-based line inside the text. */
  readonly lineOffset: number;
  /** Columns to add to a 1-based column inside the text. */
  readonly columnOffset: number;
}

/** Key paths are built from keys as written; a key of a megabyte must not make a message of one. */
const PATH_SHOWN_MAX = 256;

function shownPath(path: string): string {
  return path.length <= PATH_SHOWN_MAX ? path : `${path.slice(0, PATH_SHOWN_MAX)}…`;
}

export class IssueSink {
  readonly issues: ConfigIssue[] = [];

  error(path: string, message: string, position?: SourcePosition): void {
    this.add('error', path, message, position);
  }

  warn(path: string, message: string, position?: SourcePosition): void {
    this.add('warning', path, message, position);
  }

  private add(severity: ConfigIssue['severity'], path: string, message: string, position?: SourcePosition): void {
    const issue = { severity, path: shownPath(path), message };
    this.issues.push(position ? { ...issue, position } : issue);
  }

  get hasErrors(): boolean {
    return this.issues.some((i) => i.severity === 'error');
  }
}

/**
 * Lists and mappings nested deeper than this are refused before the yaml package composes them (its
 * composer recurses and would overflow the stack at some depth that depends on the machine). The
 * deepest real config (a node selector's values inside a class) has 6 levels.
 */
export const MAX_YAML_DEPTH = 100;

/**
 * What the aliases of one document may stand for in all, counted as the text length of every value
 * they repeat plus one per value. Reusing any real anchor stays far below it; an alias bomb (aliases
 * of aliases, each level multiplying the last) does not.
 */
export const MAX_ALIAS_EXPANSION = 1_048_576;

const NESTING_TOO_DEEP = `nesting deeper than ${MAX_YAML_DEPTH} levels of lists and mappings`;

const YAML_OPTIONS = { version: '1.1', uniqueKeys: false, prettyErrors: false } as const;

/** Thrown inside the token stream to stop the parse as soon as nesting gets too deep. */
class NestingTooDeep extends Error {
  constructor(readonly offset: number) {
    super('nesting too deep');
  }
}

/**
 * The CST tokens of text, stopping at the first point nested deeper than MAX_YAML_DEPTH. The parser's
 * stack holds the document, every open collection and at most one scalar.
 */
function* guardedTokens(text: string, lines: LineCounter): Generator<CST.Token> {
  const parser = new Parser(lines.addNewLine);
  lines.addNewLine(0);
  for (const lexeme of new Lexer().lex(text)) {
    yield* parser.next(lexeme);
    if (parser.stack.length > MAX_YAML_DEPTH + 2) throw new NestingTooDeep(parser.offset);
  }
  yield* parser.end();
}

/** Problems of a composed document that are not YAML syntax errors but make it unusable as config. */
interface DocumentProblem {
  readonly offset: number | undefined;
  /** Key path inside the document ('' for its root). */
  readonly path: string;
  readonly message: string;
}

interface Analysis {
  /** Every alias of the document and the node it stands for; absent when it stands for nothing. */
  readonly targets: ReadonlyMap<Alias, Node>;
  readonly problems: readonly DocumentProblem[];
}

/** A key path under path: `a` + `b` = `a.b`, `a` + `[0]` = `a[0]`. */
function joinPath(path: string, key: string): string {
  if (path === '' || key === '') return path + key;
  return key.startsWith('[') ? `${path}${key}` : `${path}.${key}`;
}

function offsetOf(node: Node): number | undefined {
  return node.range?.[0];
}

/** What a scalar or collection counts towards MAX_ALIAS_EXPANSION by itself. */
function ownWeight(node: Node): number {
  if (!isScalar(node)) return 1;
  const v: unknown = node.value;
  return 1 + (typeof v === 'string' ? v.length : (node.source?.length ?? 0));
}

/**
 * One pass over a document in document order: resolves every alias to the last anchor of its name
 * before it (as the yaml package and go-yaml do), and finds aliases that stand for nothing or for
 * their own enclosing value, nesting deeper than MAX_YAML_DEPTH and aliases that expand to more than
 * MAX_ALIAS_EXPANSION. Iterative, so no input can overflow the stack; linear, where the yaml
 * package's Alias.resolve walks the whole document for every alias.
 */
function analyze(doc: Document.Parsed): Analysis {
  const targets = new Map<Alias, Node>();
  const problems: DocumentProblem[] = [];
  const anchors = new Map<string, Node>();
  const allAnchors = new Set<string>();
  const open = new Set<Node>();
  const weights = new Map<Node, number>();
  const unresolved: { alias: Alias; path: string; field: string | undefined }[] = [];
  let expansion = 0;
  type Step =
    | {
        readonly enter: true;
        readonly node: Node;
        readonly path: string;
        readonly field: string | undefined;
        readonly depth: number;
      }
    | { readonly enter: false; readonly node: Node; readonly children: readonly Node[] };
  const root = doc.contents;
  const stack: Step[] = root ? [{ enter: true, node: root, path: '', field: undefined, depth: 0 }] : [];
  while (stack.length > 0) {
    const step = stack.pop();
    if (step === undefined) break;
    const node = step.node;
    if (!step.enter) {
      open.delete(node);
      weights.set(
        node,
        step.children.reduce((sum, child) => sum + (weights.get(child) ?? 0), ownWeight(node)),
      );
      continue;
    }
    if (isAlias(node)) {
      const target = anchors.get(node.source);
      if (target === undefined) {
        unresolved.push({ alias: node, path: step.path, field: step.field });
        continue;
      }
      if (open.has(target)) {
        problems.push({
          offset: offsetOf(node),
          path: step.path,
          message: `the alias *${node.source} is inside the value anchored &${node.source}, so it would contain itself`,
        });
        continue;
      }
      targets.set(node, target);
      const weight = weights.get(target) ?? 0;
      weights.set(node, weight);
      expansion += weight;
      if (expansion > MAX_ALIAS_EXPANSION) {
        problems.push({
          offset: offsetOf(node),
          path: step.path,
          message: `the aliases up to here repeat more than ${MAX_ALIAS_EXPANSION} characters of YAML in all; write the values out instead of aliasing them so many times`,
        });
        break;
      }
      continue;
    }
    if (node.anchor !== undefined) {
      anchors.set(node.anchor, node);
      allAnchors.add(node.anchor);
    }
    const depth = isMap(node) || isSeq(node) ? step.depth + 1 : step.depth;
    if (depth > MAX_YAML_DEPTH) {
      problems.push({ offset: offsetOf(node), path: step.path, message: NESTING_TOO_DEEP });
      break;
    }
    const children: { node: Node; path: string; field: string | undefined }[] = [];
    if (isMap(node)) {
      for (const pair of node.items) {
        const key: unknown = pair.key;
        const value: unknown = pair.value;
        const name = isScalar(key) ? String(key.value) : '?';
        if (isNodeValue(key)) children.push({ node: key, path: step.path, field: undefined });
        if (isNodeValue(value)) children.push({ node: value, path: joinPath(step.path, name), field: name });
      }
    } else if (isSeq(node)) {
      node.items.forEach((item: unknown, i) => {
        if (isNodeValue(item)) children.push({ node: item, path: `${step.path}[${i}]`, field: undefined });
      });
    }
    open.add(node);
    stack.push({ enter: false, node, children: children.map((c) => c.node) });
    for (const child of children.reverse()) stack.push({ enter: true, depth, ...child });
  }
  for (const { alias, path, field } of unresolved) {
    const name = alias.source;
    const later = allAnchors.has(name) ? ` (&${name} comes after it; an anchor must come before its aliases)` : '';
    const quoted = JSON.stringify(`*${name}`);
    problems.push({
      offset: offsetOf(alias),
      path,
      message: `*${name} is a YAML alias, and no anchor &${name} comes before it${later}: YAML reads it as nothing, not as text; to mean the text ${quoted}, quote it: ${field === undefined ? quoted : `${field}: ${quoted}`}`,
    });
  }
  return { targets, problems: problems.sort((a, b) => (a.offset ?? 0) - (b.offset ?? 0)) };
}

function isNodeValue(value: unknown): value is Node {
  return isAlias(value) || isScalar(value) || isMap(value) || isSeq(value);
}

/** A parsed YAML document plus what is needed to report positions in it. */
export class YamlText {
  private readonly analysis: Analysis;

  private constructor(
    readonly doc: Document.Parsed,
    private readonly lines: LineCounter,
    readonly origin: TextOrigin,
    readonly text: string,
  ) {
    this.analysis = analyze(doc);
  }

  /**
   * Parses text holding any number of YAML 1.1 documents (a manifest may hold several). Reports every
   * problem to the sink; failed when there was any (docs are then only good for more error reports).
   */
  static parseAll(
    text: string,
    origin: TextOrigin,
    sink: IssueSink,
    path: string,
    options: { readonly uniqueKeys?: boolean; readonly forceDoc?: boolean } = {},
  ): { readonly docs: readonly YamlText[]; readonly failed: boolean } {
    const lines = new LineCounter();
    const composer = new Composer({ ...YAML_OPTIONS, uniqueKeys: options.uniqueKeys ?? false });
    const docs: YamlText[] = [];
    try {
      for (const doc of composer.compose(guardedTokens(text, lines), options.forceDoc ?? false, text.length)) {
        docs.push(new YamlText(doc, lines, origin, text));
      }
    } catch (err) {
      if (!(err instanceof NestingTooDeep)) throw err;
      const at = lines.linePos(err.offset);
      sink.error(path, NESTING_TOO_DEEP, mapLinePos(origin, at.line, at.col));
      return { docs: [], failed: true };
    }
    const failed = docs.map((y) => y.reportErrors(sink, path)).some(Boolean);
    return { docs, failed };
  }

  /** Parses text holding one YAML 1.1 document (one config key); undefined after reporting problems. */
  static parse(text: string, origin: TextOrigin, sink: IssueSink, path: string): YamlText | undefined {
    // forceDoc: an empty text is one empty document.
    const { docs, failed } = YamlText.parseAll(text, origin, sink, path, { forceDoc: true });
    if (failed) return undefined;
    const [first, second] = docs;
    if (second !== undefined) {
      sink.error(
        path,
        'more than one YAML document: a second one starts here (a "---" line separates documents); a config key holds one document',
        second.position(second.doc),
      );
      return undefined;
    }
    return first;
  }

  /** Reports this document's syntax errors, undefined aliases and too deep nesting; true when there were any. */
  private reportErrors(sink: IssueSink, path: string): boolean {
    for (const err of this.doc.errors) {
      const at = this.lines.linePos(err.pos[0]);
      const hint =
        err.code === 'BAD_ALIAS' || err.code === 'ALIAS_PROPS'
          ? '; a value starting with * is a YAML alias: quote it, e.g. namePattern: "*"'
          : '';
      const message = `YAML syntax error: ${firstLine(err.message)}${hint}`;
      sink.error(path, message, this.mapLinePos(at.line, at.col));
    }
    if (this.doc.errors.length > 0) return true;
    for (const problem of this.analysis.problems) {
      sink.error(joinPath(path, problem.path), problem.message, this.offsetPosition(problem.offset));
    }
    return this.analysis.problems.length > 0;
  }

  private mapLinePos(line: number, col: number): SourcePosition {
    return mapLinePos(this.origin, line, col);
  }

  private offsetPosition(offset: number | undefined): SourcePosition {
    if (offset === undefined) return { file: this.origin.file };
    const { line, col } = this.lines.linePos(offset);
    return this.mapLinePos(line, col);
  }

  startPosition(): SourcePosition {
    return { file: this.origin.file, line: 1 + this.origin.lineOffset, column: 1 + this.origin.columnOffset };
  }

  position(node: Node | Pair | Document.Parsed | null | undefined): SourcePosition {
    return this.offsetPosition(node && 'range' in node ? node.range?.[0] : undefined);
  }

  /** The root node, with aliases resolved; null for an empty document. */
  get root(): Node | null {
    return this.resolve(this.doc.contents);
  }

  /** The node an alias stands for (null when it stands for nothing, which reportErrors reported). */
  resolve(node: unknown): Node | null {
    if (node === null || node === undefined) return null;
    if (isAlias(node)) return this.analysis.targets.get(node) ?? null;
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

function mapLinePos(origin: TextOrigin, line: number, col: number): SourcePosition {
  return { file: origin.file, line: line + origin.lineOffset, column: col + origin.columnOffset };
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

/** Why a mapping key that is no scalar string, number or boolean cannot be a key. */
export function badKeyReason(node: Node | null): string {
  // YAML 1.1 merge keys (`<<: *defaults`) are composed as a symbol-valued scalar.
  if (node !== null && isScalar(node) && typeof node.value === 'symbol') {
    return 'YAML merge keys (<<) are not supported: write the keys out';
  }
  return 'mapping keys must be plain strings';
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
