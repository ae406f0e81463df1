// A small Prometheus registry (counters, gauges, histograms with labels) rendered in the text
// exposition format. Process-level: it outlives sync-loop generations, so series are never
// registered twice.

type Labels = Readonly<Record<string, string>>;

function labelKey(names: readonly string[], labels: Labels): string {
  return JSON.stringify(names.map((n) => labels[n] ?? ''));
}

function escapeLabel(value: string): string {
  return value.replace(/\\/gu, '\\\\').replace(/\n/gu, '\\n').replace(/"/gu, '\\"');
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
  ) {}
  abstract readonly type: 'counter' | 'gauge' | 'histogram';
  abstract samples(): string[];
  render(): string {
    return [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} ${this.type}`, ...this.samples()].join('\n');
  }
}

export class Counter extends Metric {
  readonly type = 'counter';
  private readonly values = new Map<string, number>();
  inc(labels: Labels = {}, by = 1): void {
    const k = labelKey(this.labelNames, labels);
    this.values.set(k, (this.values.get(k) ?? 0) + by);
  }
  get(labels: Labels = {}): number {
    return this.values.get(labelKey(this.labelNames, labels)) ?? 0;
  }
  samples(): string[] {
    return [...this.values].map(
      ([k, v]) => `${this.name}${renderLabels(this.labelNames, JSON.parse(k) as string[])} ${num(v)}`,
    );
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
    this.values.set(labelKey(this.labelNames, labels), value);
  }
  get(labels: Labels = {}): number | undefined {
    return this.values.get(labelKey(this.labelNames, labels));
  }
  /** Drops every series (used before re-setting a whole family, e.g. per-class gauges). */
  reset(): void {
    this.values.clear();
  }
  samples(): string[] {
    this.collect?.(this);
    return [...this.values].map(
      ([k, v]) => `${this.name}${renderLabels(this.labelNames, JSON.parse(k) as string[])} ${num(v)}`,
    );
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
    const k = labelKey(this.labelNames, labels);
    const s = this.series.get(k) ?? { counts: this.buckets.map(() => 0), sum: 0, count: 0 };
    this.series.set(k, s);
    this.buckets.forEach((b, i) => {
      if (value <= b) s.counts[i] = (s.counts[i] ?? 0) + 1;
    });
    s.sum += value;
    s.count += 1;
  }
  count(labels: Labels = {}): number {
    return this.series.get(labelKey(this.labelNames, labels))?.count ?? 0;
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
    if (this.metrics.has(metric.name)) throw new Error(`metric ${metric.name} registered twice`);
    this.metrics.set(metric.name, metric);
    return metric;
  }
  counter(name: string, help: string, labelNames: readonly string[] = []): Counter {
    return this.add(new Counter(name, help, labelNames));
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
