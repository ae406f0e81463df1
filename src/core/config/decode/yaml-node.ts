// YAML 1.1 parsing with positions mapped back to the file the text came from.
// Upstream reads its config with go-yaml v2 (YAML 1.1): `yes`, `on`, `y` are booleans there.
import { Composer, CST, isAlias, isMap, isScalar, isSeq, Lexer, LineCounter, Parser, Scalar, visit } from 'yaml';
import type { Alias, Document, Node, Pair, YAMLMap, YAMLSeq } from 'yaml';
import type { ConfigIssue, SourcePosition } from '../../errors.js';

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

/**
 * The most characters of quoted ('…' or "…") scalars one config source may hold in all, counted
 * between the quotes: as many as a ConfigMap may hold (1 MiB of data), so no ConfigMap upstream
 * loads is refused for them. The yaml package builds a quoted value character by character; 1 MiB of
 * them cost about 100 ms and 30 MB (docs/benchmarks.md, "Config size").
 */
export const MAX_QUOTED_CHARS = 1024 * 1024;

/**
 * The most YAML values (see VALUE_TOKENS) one config source may hold in all its keys. Reading one
 * costs about 1 KB at the peak of a read with the image's NODE_OPTIONS (measured: 56,000 values
 * +53 MB RSS, 58,000 in a flow list +40 MB; docs/benchmarks.md, "Config size"), so this bounds a
 * reload at about +60 MB: an agent with a 256 MiB limit survives any config. It holds about 7,500
 * simple classes (400 KiB) or 200 classes with node selectors 12 times over; a ConfigMap of 1 MiB can
 * hold more values than this (up to about 500,000 in a flow list), and those are refused with a
 * message that says how to shrink the config.
 */
export const MAX_CONFIG_YAML_VALUES = 60_000;

/**
 * The same bounds for one simulate input file (a fixture or scenario, at most 16 MiB): a cluster
 * fixture of 5,000 PersistentVolumes as `kubectl get pv -o yaml` prints them holds about 470,000
 * values.
 */
export const MAX_INPUT_YAML_VALUES = 1_000_000;
export const MAX_INPUT_QUOTED_CHARS = 4 * 1024 * 1024;

/**
 * The lexemes that each become a node or an entry when composed: scalars, aliases, flow collections,
 * and the indicators of a list item, an explicit key, a mapping value and a flow entry (a block
 * collection starts with one of them, and each may add an empty value).
 */
const VALUE_TOKENS: ReadonlySet<CST.TokenType> = new Set<CST.TokenType>([
  'scalar',
  'single-quoted-scalar',
  'double-quoted-scalar',
  'alias',
  'flow-map-start',
  'flow-seq-start',
  'seq-item-ind',
  'explicit-key-ind',
  'map-value-ind',
  'comma',
]);

/**
 * What the parses of one source may still build: YAML values and characters of quoted scalars. Each
 * parse of the source takes from the same budget, so a source of many keys costs no more than one
 * of one key.
 */
export class YamlBudget {
  private values: number;
  private quoted = 0;
  /** Whether a parse already ran out; later parses of the source then fail without saying it again. */
  private exhausted = false;

  /**
   * @param scale what a real input holds, for the message ("a config of … holds about …")
   * @param values values already taken by an enclosing parse (a manifest around its data values)
   */
  private constructor(
    readonly maxValues: number,
    readonly maxQuoted: number,
    private readonly scale: string,
    values: number,
  ) {
    this.values = values;
  }

  /** A config source's budget; `values` counts what splitting it into keys parsed already. */
  static forConfig(values = 0): YamlBudget {
    return new YamlBudget(
      MAX_CONFIG_YAML_VALUES,
      MAX_QUOTED_CHARS,
      'a config of 200 storage classes with node selectors holds about 12000, and this limit keeps a reload within about 60 MB of memory. To fit: share repeated settings with an anchor and aliases (selector: *zones, or <<: *defaults), which count once; or split the storage classes over several provisioner DaemonSets, each with its own ConfigMap',
      values,
    );
  }

  /** The budget of one simulate fixture or scenario file, which may list thousands of PVs. */
  static forInput(): YamlBudget {
    return new YamlBudget(
      MAX_INPUT_YAML_VALUES,
      MAX_INPUT_QUOTED_CHARS,
      'a cluster fixture of 5000 PersistentVolumes as kubectl prints them holds about 470000',
      0,
    );
  }

  /** Values taken so far. */
  get used(): number {
    return this.values;
  }

  get spent(): boolean {
    return this.exhausted;
  }

  /** Takes one value, of `quotedChars` characters when it is a quoted scalar; why not, when it is one too many. */
  take(quotedChars: number): string | undefined {
    this.values += 1;
    this.quoted += quotedChars;
    if (this.values > this.maxValues) {
      this.exhausted = true;
      return `more than ${this.maxValues} YAML values (scalars, aliases, list items and mapping entries) in this source, the most one may hold: ${this.scale}`;
    }
    if (this.quoted > this.maxQuoted) {
      this.exhausted = true;
      return `more than ${this.maxQuoted} characters of quoted strings ('…' or "…") in this source, more than a ConfigMap can hold: write a whole key's YAML in a ConfigMap data value as a block scalar (|), not quoted`;
    }
    return undefined;
  }
}

const NESTING_TOO_DEEP = `nesting deeper than ${MAX_YAML_DEPTH} levels of lists and mappings`;

const YAML_OPTIONS = { version: '1.1', uniqueKeys: false, prettyErrors: false } as const;

/** Thrown inside the token stream to stop the parse before the yaml package builds too much. */
class YamlTooCostly extends Error {
  constructor(
    readonly offset: number,
    readonly reason: string,
  ) {
    super(reason);
  }
}

/**
 * The CST tokens of text, stopping before a lexeme that makes the text too costly to compose (one
 * value or quoted character more than the budget), or at nesting deeper than MAX_YAML_DEPTH (the
 * parser's stack holds the document, every open collection and at most one scalar).
 */
function* guardedTokens(text: string, lines: LineCounter, budget: YamlBudget): Generator<CST.Token> {
  const parser = new Parser(lines.addNewLine);
  lines.addNewLine(0);
  // After a scalar marker comes the source of a plain or block scalar, which can start with any character.
  let scalarSource = false;
  for (const lexeme of new Lexer().lex(text)) {
    if (scalarSource) {
      scalarSource = false;
    } else {
      const type = CST.tokenType(lexeme);
      if (type !== null && VALUE_TOKENS.has(type)) {
        scalarSource = type === 'scalar';
        const quoted = type === 'single-quoted-scalar' || type === 'double-quoted-scalar';
        const refused = budget.take(quoted ? Math.max(lexeme.length - 2, 0) : 0);
        // parser.offset is where this lexeme starts (a scalar marker has no length).
        if (refused !== undefined) throw new YamlTooCostly(parser.offset, refused);
      }
    }
    yield* parser.next(lexeme);
    if (parser.stack.length > MAX_YAML_DEPTH + 2) throw new YamlTooCostly(parser.offset, NESTING_TOO_DEEP);
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
  const walk: Walk = {
    targets: new Map(),
    problems: [],
    anchors: new Map(),
    allAnchors: new Set(),
    open: new Set(),
    weights: new Map(),
    unresolved: [],
    expansion: 0,
  };
  const root = doc.contents;
  const stack: Step[] = root ? [{ enter: true, node: root, path: '', field: undefined, depth: 0 }] : [];
  while (stack.length > 0) {
    const step = stack.pop();
    if (step === undefined) break;
    const node = step.node;
    if (!step.enter) {
      walk.open.delete(node);
      walk.weights.set(
        node,
        step.children.reduce((sum, child) => sum + (walk.weights.get(child) ?? 0), ownWeight(node)),
      );
      continue;
    }
    if (isAlias(node)) {
      if (visitAlias(walk, node, step) === 'stop') break;
      continue;
    }
    if (node.anchor !== undefined) {
      walk.anchors.set(node.anchor, node);
      walk.allAnchors.add(node.anchor);
    }
    const depth = isMap(node) || isSeq(node) ? step.depth + 1 : step.depth;
    if (depth > MAX_YAML_DEPTH) {
      walk.problems.push({ offset: offsetOf(node), path: step.path, message: NESTING_TOO_DEEP });
      break;
    }
    const children = childrenOf(node, step.path);
    walk.open.add(node);
    stack.push({ enter: false, node, children: children.map((c) => c.node) });
    for (const child of children.reverse()) stack.push({ enter: true, depth, ...child });
  }
  const problems = [...walk.problems, ...walk.unresolved.map((u) => unresolvedAlias(u, walk.allAnchors))];
  return { targets: walk.targets, problems: problems.sort((a, b) => (a.offset ?? 0) - (b.offset ?? 0)) };
}

/** A node to visit (enter), or one whose children are all visited (leave: its weight is known). */
type Step =
  | {
      readonly enter: true;
      readonly node: Node;
      readonly path: string;
      readonly field: string | undefined;
      readonly depth: number;
    }
  | { readonly enter: false; readonly node: Node; readonly children: readonly Node[] };

interface UnresolvedAlias {
  readonly alias: Alias;
  readonly path: string;
  readonly field: string | undefined;
}

/** What analyze has found so far in its walk of a document. */
interface Walk {
  readonly targets: Map<Alias, Node>;
  readonly problems: DocumentProblem[];
  /** The last anchor of each name so far. */
  readonly anchors: Map<string, Node>;
  /** Every anchor of the document, to tell an alias before its anchor from one with none. */
  readonly allAnchors: Set<string>;
  /** The collections entered and not yet left: an alias to one of them would contain itself. */
  readonly open: Set<Node>;
  /** What each node left counts towards MAX_ALIAS_EXPANSION. */
  readonly weights: Map<Node, number>;
  readonly unresolved: UnresolvedAlias[];
  expansion: number;
}

/** Resolves an alias, or records why it cannot be; 'stop': the aliases expand too far to go on. */
function visitAlias(
  walk: Walk,
  node: Alias,
  step: { readonly path: string; readonly field: string | undefined },
): 'go on' | 'stop' {
  const target = walk.anchors.get(node.source);
  if (target === undefined) {
    walk.unresolved.push({ alias: node, path: step.path, field: step.field });
    return 'go on';
  }
  if (walk.open.has(target)) {
    walk.problems.push({
      offset: offsetOf(node),
      path: step.path,
      message: `the alias *${node.source} is inside the value anchored &${node.source}, so it would contain itself`,
    });
    return 'go on';
  }
  walk.targets.set(node, target);
  const weight = walk.weights.get(target) ?? 0;
  walk.weights.set(node, weight);
  walk.expansion += weight;
  if (walk.expansion > MAX_ALIAS_EXPANSION) {
    walk.problems.push({
      offset: offsetOf(node),
      path: step.path,
      message: `the aliases up to here repeat more than ${MAX_ALIAS_EXPANSION} characters of YAML in all; write the values out instead of aliasing them so many times`,
    });
    return 'stop';
  }
  return 'go on';
}

/** A collection's keys and values in document order, each with its path (and its key, for a value). */
function childrenOf(node: Node, path: string): { node: Node; path: string; field: string | undefined }[] {
  const children: { node: Node; path: string; field: string | undefined }[] = [];
  if (isMap(node)) {
    for (const pair of node.items) {
      const key: unknown = pair.key;
      const value: unknown = pair.value;
      const name = isScalar(key) ? String(key.value) : '?';
      if (isNodeValue(key)) children.push({ node: key, path, field: undefined });
      if (isNodeValue(value)) children.push({ node: value, path: joinPath(path, name), field: name });
    }
  } else if (isSeq(node)) {
    node.items.forEach((item: unknown, i) => {
      if (isNodeValue(item)) children.push({ node: item, path: `${path}[${i}]`, field: undefined });
    });
  }
  return children;
}

/** An alias with no anchor before it: YAML reads it as null, which the writer rarely meant. */
function unresolvedAlias({ alias, path, field }: UnresolvedAlias, allAnchors: ReadonlySet<string>): DocumentProblem {
  const name = alias.source;
  const later = allAnchors.has(name) ? ` (&${name} comes after it; an anchor must come before its aliases)` : '';
  const quoted = JSON.stringify(`*${name}`);
  return {
    offset: offsetOf(alias),
    path,
    message: `*${name} is a YAML alias, and no anchor &${name} comes before it${later}: YAML reads it as nothing, not as text; to mean the text ${quoted}, quote it: ${field === undefined ? quoted : `${field}: ${quoted}`}`,
  };
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
   * The parse takes its values from options.budget (by default a config source's own).
   */
  static parseAll(
    text: string,
    origin: TextOrigin,
    sink: IssueSink,
    path: string,
    options: { readonly uniqueKeys?: boolean; readonly forceDoc?: boolean; readonly budget?: YamlBudget } = {},
  ): { readonly docs: readonly YamlText[]; readonly failed: boolean } {
    const budget = options.budget ?? YamlBudget.forConfig();
    // The source ran out in an earlier parse, which said so.
    if (budget.spent) return { docs: [], failed: true };
    const lines = new LineCounter();
    // The yaml package's own uniqueKeys check compares every key with every other (quadratic: 40,000
    // keys took 14 s); duplicates are found with a Set per mapping instead (reportDuplicateKeys).
    const composer = new Composer(YAML_OPTIONS);
    const docs: YamlText[] = [];
    try {
      const tokens = guardedTokens(text, lines, budget);
      for (const doc of composer.compose(tokens, options.forceDoc ?? false, text.length)) {
        docs.push(new YamlText(doc, lines, origin, text));
      }
    } catch (err) {
      if (!(err instanceof YamlTooCostly)) throw err;
      const at = lines.linePos(err.offset);
      sink.error(path, err.reason, mapLinePos(origin, at.line, at.col));
      return { docs: [], failed: true };
    }
    const failed = docs.map((y) => y.reportErrors(sink, path)).some(Boolean);
    const duplicates = options.uniqueKeys === true && docs.map((y) => y.reportDuplicateKeys(sink, path)).some(Boolean);
    return { docs, failed: failed || duplicates };
  }

  /** Reports a scalar key that appears twice in one mapping (linear: a Set per mapping); true when any did. */
  private reportDuplicateKeys(sink: IssueSink, path: string): boolean {
    let found = false;
    const maps: YAMLMap[] = [];
    visit(this.doc, {
      Map(_, map) {
        maps.push(map);
      },
    });
    for (const map of maps) {
      const seen = new Set<unknown>();
      for (const pair of map.items) {
        if (!isScalar(pair.key)) continue;
        const key: unknown = pair.key.value;
        if (seen.has(key)) {
          found = true;
          sink.error(
            path,
            `the key ${JSON.stringify(String(key)).slice(0, 66)} appears twice in one mapping`,
            this.position(pair.key),
          );
        }
        seen.add(key);
      }
    }
    return found;
  }

  /** Parses text holding one YAML 1.1 document (one config key); undefined after reporting problems. */
  static parse(
    text: string,
    origin: TextOrigin,
    sink: IssueSink,
    path: string,
    budget = YamlBudget.forConfig(),
  ): YamlText | undefined {
    // forceDoc: an empty text is one empty document.
    const { docs, failed } = YamlText.parseAll(text, origin, sink, path, { forceDoc: true, budget });
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

/**
 * Whether a mapping key is the YAML 1.1 merge key: a plain `<<` (the yaml package composes it as a
 * symbol-valued scalar), not a quoted "<<", which is an ordinary key in go-yaml v2 too.
 */
export function isMergeKey(node: Node | null): boolean {
  return node !== null && isScalar(node) && typeof node.value === 'symbol';
}

/** Why a mapping key that is no scalar string, number or boolean cannot be a key. */
export function badKeyReason(node: Node | null): string {
  if (isMergeKey(node)) {
    return 'a YAML merge key (<<) is read inside the mappings of a config key, not among the keys themselves: write the keys out';
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
