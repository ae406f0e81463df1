// A small Prometheus registry (counters, gauges, histograms with labels) rendered in the text
// exposition format. Process-level: it outlives sync-loop generations, so series are never
// registered twice.

type Labels = Readonly<Record<string, string>>;

/** A metric used against its definition: a bad name, an unknown label, a counter decremented. A bug. */
export class MetricUsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MetricUsageError';
  }
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/u;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/u;

function labelKey(metric: string, names: readonly string[], labels: Labels): string {
  for (const name of Object.keys(labels)) {
    if (!names.includes(name)) {
      throw new MetricUsageError(
        `metric ${metric}: unknown label "${name}" (its labels: ${names.length === 0 ? 'none' : names.join(', ')})`,
      );
    }
  }
  return JSON.stringify(names.map((n) => labels[n] ?? ''));
}

function escapeLabel(value: string): string {
  return value.replace(/\\/gu, '\\\\').replace(/\n/gu, '\\n').replace(/"/gu, '\\"');
}

/** HELP text escapes backslash and newline (text format 0.0.4); quotes stay as they are. */
function escapeHelp(value: string): string {
  return value.replace(/\\/gu, '\\\\').replace(/\n/gu, '\\n');
}

function renderLabels(names: readonly string[], values: readonly string[], extra = ''): string {
  const parts = names.map((n, i) => `${n}="${escapeLabel(values[i] ?? '')}"`);
  if (extra !== '') parts.push(extra);
  return parts.length === 0 ? '' : `{${parts.join(',')}}`;
}

function num(v: number): string {
  if (Number.isNaN(v)) return 'NaN';
  if (v === Infinity) return '+Inf';
  if (v === -Infinity) return '-Inf';
  return String(v);
}

abstract class Metric {
  constructor(
    readonly name: string,
    readonly help: string,
    readonly labelNames: readonly string[],
  ) {
    if (!METRIC_NAME.test(name)) throw new MetricUsageError(`invalid metric name ${JSON.stringify(name)}`);
    for (const label of labelNames) {
      if (!LABEL_NAME.test(label) || label.startsWith('__')) {
        throw new MetricUsageError(`metric ${name}: invalid label name ${JSON.stringify(label)}`);
      }
    }
  }
  abstract readonly type: 'counter' | 'gauge' | 'histogram';
  abstract samples(): string[];
  protected key(labels: Labels): string {
    return labelKey(this.name, this.labelNames, labels);
  }
  /** One `name{labels} value` line per series of a counter's or gauge's values (keyed by key()). */
  protected valueLines(values: ReadonlyMap<string, number>): string[] {
    return [...values].map(
      ([k, v]) => `${this.name}${renderLabels(this.labelNames, JSON.parse(k) as string[])} ${num(v)}`,
    );
  }
  render(): string {
    return [`# HELP ${this.name} ${escapeHelp(this.help)}`, `# TYPE ${this.name} ${this.type}`, ...this.samples()].join(
      '\n',
    );
  }
}

export class Counter extends Metric {
  readonly type = 'counter';
  private readonly values = new Map<string, number>();
  constructor(
    name: string,
    help: string,
    labelNames: readonly string[],
    /** A counter kept elsewhere (CPU seconds): read at each scrape; `inc` is then not used. */
    private readonly collect?: () => number,
  ) {
    super(name, help, labelNames);
  }
  inc(labels: Labels = {}, by = 1): void {
    if (!(by >= 0) || by === Infinity) {
      throw new MetricUsageError(`counter ${this.name}: cannot increase by ${String(by)} (counters only go up)`);
    }
    const k = this.key(labels);
    this.values.set(k, (this.values.get(k) ?? 0) + by);
  }
  get(labels: Labels = {}): number {
    return this.values.get(this.key(labels)) ?? 0;
  }
  /**
   * Exports these series at 0 before their first event: rate() and increase() count only the
   * increases after a series' first sample, so a series born with its first event hides that event.
   */
  declare(labelSets: readonly Labels[]): this {
    for (const labels of labelSets) this.inc(labels, 0);
    return this;
  }
  samples(): string[] {
    if (this.collect !== undefined) return [`${this.name} ${num(this.collect())}`];
    return this.valueLines(this.values);
  }
}

export class Gauge extends Metric {
  readonly type = 'gauge';
  private readonly values = new Map<string, number>();
  constructor(
    name: string,
    help: string,
    labelNames: readonly string[],
    private readonly collect?: (gauge: Gauge) => void,
  ) {
    super(name, help, labelNames);
  }
  set(labels: Labels, value: number): void {
    this.values.set(this.key(labels), value);
  }
  get(labels: Labels = {}): number | undefined {
    return this.values.get(this.key(labels));
  }
  /** Drops every series (used before re-setting a whole family, e.g. per-class gauges). */
  reset(): void {
    this.values.clear();
  }
  samples(): string[] {
    this.collect?.(this);
    return this.valueLines(this.values);
  }
}

export const DEFAULT_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export class Histogram extends Metric {
  readonly type = 'histogram';
  private readonly series = new Map<string, { counts: number[]; sum: number; count: number }>();
  constructor(
    name: string,
    help: string,
    labelNames: readonly string[],
    readonly buckets: readonly number[] = DEFAULT_BUCKETS,
  ) {
    super(name, help, labelNames);
  }
  observe(labels: Labels, value: number): void {
    if (Number.isNaN(value)) throw new MetricUsageError(`histogram ${this.name}: cannot observe NaN`);
    const k = this.key(labels);
    const s = this.series.get(k) ?? { counts: this.buckets.map(() => 0), sum: 0, count: 0 };
    this.series.set(k, s);
    this.buckets.forEach((b, i) => {
      if (value <= b) s.counts[i] = (s.counts[i] ?? 0) + 1;
    });
    s.sum += value;
    s.count += 1;
  }
  count(labels: Labels = {}): number {
    return this.series.get(this.key(labels))?.count ?? 0;
  }
  /** Exports these series empty before their first observation (see Counter.declare). */
  declare(labelSets: readonly Labels[]): this {
    for (const labels of labelSets) {
      const k = this.key(labels);
      if (!this.series.has(k)) this.series.set(k, { counts: this.buckets.map(() => 0), sum: 0, count: 0 });
    }
    return this;
  }
  samples(): string[] {
    const out: string[] = [];
    for (const [k, s] of this.series) {
      const values = JSON.parse(k) as string[];
      this.buckets.forEach((b, i) => {
        out.push(
          `${this.name}_bucket${renderLabels(this.labelNames, values, `le="${num(b)}"`)} ${num(s.counts[i] ?? 0)}`,
        );
      });
      out.push(`${this.name}_bucket${renderLabels(this.labelNames, values, 'le="+Inf"')} ${num(s.count)}`);
      out.push(`${this.name}_sum${renderLabels(this.labelNames, values)} ${num(s.sum)}`);
      out.push(`${this.name}_count${renderLabels(this.labelNames, values)} ${num(s.count)}`);
    }
    return out;
  }
}

export class MetricsRegistry {
  private readonly metrics = new Map<string, Metric>();

  private add<M extends Metric>(metric: M): M {
    if (this.metrics.has(metric.name)) throw new MetricUsageError(`metric ${metric.name} registered twice`);
    this.metrics.set(metric.name, metric);
    return metric;
  }
  counter(name: string, help: string, labelNames: readonly string[] = []): Counter {
    return this.add(new Counter(name, help, labelNames));
  }
  /** A counter whose total is kept elsewhere and read at each scrape (client_golang's CounterFunc). */
  counterFunc(name: string, help: string, read: () => number): Counter {
    return this.add(new Counter(name, help, [], read));
  }
  gauge(name: string, help: string, labelNames: readonly string[] = [], collect?: (g: Gauge) => void): Gauge {
    return this.add(new Gauge(name, help, labelNames, collect));
  }
  histogram(name: string, help: string, labelNames: readonly string[] = [], buckets?: readonly number[]): Histogram {
    return this.add(new Histogram(name, help, labelNames, buckets));
  }
  render(): string {
    return `${[...this.metrics.values()].map((m) => m.render()).join('\n')}\n`;
  }
}
