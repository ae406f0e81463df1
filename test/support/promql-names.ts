// The metric names and label names a PromQL expression (as a Grafana dashboard writes it) uses,
// for tests that check a dashboard against a real scrape. A small lexer, not a PromQL parser: it
// knows selectors with matchers, `by`/`without`/`on`/`ignoring`/`group_left`/`group_right` label
// lists, functions and aggregations (an identifier before `(`), keywords, numbers, strings, range
// and subquery brackets, and Grafana's `$variables`; `label_values(expr, label)` as a variable query.

export interface SelectorUse {
  readonly metric: string;
  /** Label names of its matchers (`{a="x", b=~"y"}`). */
  readonly labels: readonly string[];
}

export interface PromqlNames {
  readonly selectors: readonly SelectorUse[];
  /** Labels named by `by (…)`, `without (…)`, `on (…)`, `ignoring (…)`, `group_left/right (…)`, or label_values. */
  readonly grouping: readonly string[];
}

const GROUPING = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right']);
const KEYWORDS = new Set(['and', 'or', 'unless', 'bool', 'offset', 'inf', 'nan']);
/** Aggregations: `sum by (l) (…)` puts the grouping between the name and its parenthesis. */
const AGGREGATIONS = new Set([
  'sum',
  'min',
  'max',
  'avg',
  'group',
  'stddev',
  'stdvar',
  'count',
  'count_values',
  'bottomk',
  'topk',
  'quantile',
  'limitk',
  'limit_ratio',
]);
const TOKEN =
  /"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|\{[^}]*\}|\[[^\]]*\]|\$\{?\w+\}?|[a-zA-Z_:][a-zA-Z0-9_:]*|\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|\S/gu;

function matcherLabels(braces: string): string[] {
  const inner = braces.slice(1, -1).replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'/gu, '""');
  return [...inner.matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)/gu)].map((m) => m[1] ?? '');
}

/** The names an expression uses. Throws on what it cannot read (a selector without a metric name). */
export function promqlNames(expr: string): PromqlNames {
  const labelValues = /^\s*label_values\((.*),\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)\s*$/su.exec(expr);
  if (labelValues !== null) {
    const inner = promqlNames(labelValues[1] ?? '');
    return { selectors: inner.selectors, grouping: [...inner.grouping, labelValues[2] ?? ''] };
  }
  const tokens = [...expr.matchAll(TOKEN)].map((m) => m[0]);
  const selectors: SelectorUse[] = [];
  const grouping: string[] = [];
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i] ?? '';
    const next = tokens[i + 1];
    if (token.startsWith('{')) throw new Error(`a selector without a metric name in ${expr}`);
    if (!/^[a-zA-Z_:]/u.test(token)) continue;
    if (GROUPING.has(token) && next === '(') {
      for (i += 2; i < tokens.length && tokens[i] !== ')'; i++) {
        const label = tokens[i] ?? '';
        if (label !== ',') grouping.push(label);
      }
      continue;
    }
    if (next === '(' || GROUPING.has(token) || KEYWORDS.has(token.toLowerCase()) || AGGREGATIONS.has(token)) continue;
    if (next?.startsWith('{') === true) {
      selectors.push({ metric: token, labels: matcherLabels(next) });
      i += 1;
    } else selectors.push({ metric: token, labels: [] });
  }
  return { selectors, grouping };
}
