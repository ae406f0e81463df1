// The dashboard's queries as Grafana would send them to Prometheus for one time range: its
// variables replaced ($storageclass as All, Grafana's built-in intervals computed as Grafana does),
// instant targets at the end of the range, the others as range queries on a step grid.

export interface Target {
  readonly refId?: string;
  readonly expr?: string;
  readonly legendFormat?: string;
  readonly instant?: boolean;
  readonly format?: string;
}

export interface GridPos {
  readonly h: number;
  readonly w: number;
  readonly x: number;
  readonly y: number;
}

export interface Panel {
  readonly id?: number;
  readonly type?: string;
  readonly title?: string;
  readonly gridPos?: GridPos;
  readonly targets?: readonly Target[];
  readonly fieldConfig?: { readonly defaults?: { readonly unit?: string } };
  /** A stat's `textMode: name` shows each series' name instead of its value. */
  readonly options?: { readonly textMode?: string };
}

export interface Dashboard {
  readonly title?: string;
  readonly uid?: string;
  readonly panels: readonly Panel[];
}

/** The time range and intervals of one rendering, in ms. */
export interface QueryWindow {
  readonly start: number;
  readonly end: number;
  /** The datasource's scrape interval: Grafana's minimum $__interval. */
  readonly scrapeIntervalMs: number;
}

export interface Query {
  /** `<panel id>/<refId>`. */
  readonly id: string;
  readonly expr: string;
  readonly range: boolean;
  readonly start: number;
  readonly end: number;
  readonly step: number;
}

/** Grafana's variables for a window: $__interval, $__rate_interval and $__range (as Prometheus durations). */
export interface Intervals {
  readonly intervalMs: number;
  readonly rateIntervalMs: number;
  readonly rangeMs: number;
}

/**
 * Grafana's Prometheus datasource: $__interval is the range over the panel's points, never below
 * the scrape interval (here it is the scrape interval: a few minutes over hundreds of pixels);
 * $__rate_interval is max($__interval + scrape interval, 4 × scrape interval), so a rate always
 * spans at least four scrapes; $__range is the whole range in seconds.
 */
export function intervals(window: QueryWindow, maxDataPoints = 400): Intervals {
  const rangeMs = Math.round((window.end - window.start) / 1000) * 1000;
  const intervalMs = Math.max(window.scrapeIntervalMs, Math.ceil(rangeMs / maxDataPoints / 1000) * 1000);
  return {
    intervalMs,
    rateIntervalMs: Math.max(intervalMs + window.scrapeIntervalMs, 4 * window.scrapeIntervalMs),
    rangeMs,
  };
}

/** A duration as Grafana writes it into a query: whole seconds, `20s`. */
export function promDuration(ms: number): string {
  return `${String(Math.max(1, Math.round(ms / 1000)))}s`;
}

/** Replaces the dashboard's variables in a PromQL expression; throws on one it does not know. */
export function interpolate(expr: string, vars: Intervals, storageClass = '.*'): string {
  const values: Record<string, string> = {
    __interval: promDuration(vars.intervalMs),
    __rate_interval: promDuration(vars.rateIntervalMs),
    __range: promDuration(vars.rangeMs),
    storageclass: storageClass,
  };
  return expr.replace(/\$\{(\w+)\}|\$(\w+)/gu, (whole, braced: string | undefined, bare: string | undefined) => {
    const name = braced ?? bare ?? '';
    const value = values[name];
    if (value === undefined) throw new Error(`unknown variable ${whole} in ${expr}`);
    return value;
  });
}

/** Every target of every panel as a query: instant ones at the end, the others on the step grid. */
export function panelQueries(dashboard: Dashboard, window: QueryWindow): Query[] {
  const vars = intervals(window);
  const step = vars.intervalMs;
  // Grafana aligns a range query's start and end to its step.
  const start = Math.ceil(window.start / step) * step;
  const end = Math.floor(window.end / step) * step;
  const out: Query[] = [];
  for (const panel of dashboard.panels) {
    for (const target of panel.targets ?? []) {
      if (target.expr === undefined || panel.id === undefined) continue;
      out.push({
        id: `${String(panel.id)}/${target.refId ?? 'A'}`,
        expr: interpolate(target.expr, vars),
        range: target.instant !== true,
        start,
        end,
        step,
      });
    }
  }
  return out;
}

/** A series' name from a legend format (`{{label}}` replaced), or its labels as Grafana shows them without one. */
export function legendName(format: string | undefined, metric: Readonly<Record<string, string>>): string {
  if (format !== undefined && format !== '') {
    return format.replace(/\{\{\s*(\w+)\s*\}\}/gu, (_, label: string) => metric[label] ?? '').trim();
  }
  const { __name__: name = '', ...rest } = metric;
  const labels = Object.entries(rest)
    .map(([k, v]) => `${k}="${v}"`)
    .join(', ');
  return labels === '' ? name || 'Value' : `${name}{${labels}}`;
}
