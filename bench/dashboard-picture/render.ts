// The dashboard as one SVG, drawn by this project (not by Grafana): rows and panels where their
// gridPos puts them, in colours close to Grafana's dark theme. Time series as lines with their
// legends, stats as big numbers (the last value, Grafana's default reducer), tables as rows,
// pie charts as slices; a panel whose queries returned nothing says "No data", as Grafana does.
import type { Evaluated, EvaluatedSeries } from './evaluate.js';
import { byteScale, clock, escapeXml, fit, formatValue, gridHeight, gridToPx, niceTicks, type Box } from './layout.js';
import { legendName, type Dashboard, type Panel } from './queries.js';

export const THEME = {
  background: '#111217',
  panel: '#181b1f',
  border: '#2d3035',
  text: '#ccccdc',
  muted: '#8e8e9e',
  grid: '#2a2d33',
} as const;
/** Grafana's classic palette, in its order. */
export const PALETTE = ['#73BF69', '#F2CC0C', '#8AB8FF', '#FF780A', '#F2495C', '#5794F2', '#B877D9', '#37872D'];

export interface RenderInput {
  readonly dashboard: Dashboard;
  readonly results: ReadonlyMap<string, Evaluated>;
  readonly width: number;
  readonly start: number;
  readonly end: number;
  /** Lines under the title: how the picture was made. */
  readonly caption: readonly string[];
}

/** One named series of a panel, from one of its targets. */
interface Named {
  readonly name: string;
  readonly refId: string;
  readonly series: EvaluatedSeries;
}

const HEADER = 88;
const TITLE_BAR = 28;

function text(x: number, y: number, s: string, attrs = ''): string {
  return `<text x="${x.toFixed(1)}" y="${y.toFixed(1)}" ${attrs}>${escapeXml(s)}</text>`;
}

/** Every series of a panel named by its target's legend format, and the errors of its queries. */
export function panelSeries(
  panel: Panel,
  results: ReadonlyMap<string, Evaluated>,
): { named: Named[]; errors: string[] } {
  const named: Named[] = [];
  const errors: string[] = [];
  for (const target of panel.targets ?? []) {
    const refId = target.refId ?? 'A';
    const result = results.get(`${String(panel.id)}/${refId}`);
    if (result?.error !== undefined) errors.push(`${refId}: ${result.error}`);
    for (const series of result?.series ?? [])
      named.push({ name: legendName(target.legendFormat, series.metric), refId, series });
  }
  return { named, errors };
}

/** Grafana's `lastNotNull`: the last value that is not null, or null. */
export function lastNotNull(series: EvaluatedSeries): number | null {
  for (let i = series.points.length - 1; i >= 0; i--) {
    const v = series.points[i]?.[1];
    if (v !== null && v !== undefined) return v;
  }
  return null;
}

export function renderDashboard(input: RenderInput): string {
  const positions = input.dashboard.panels.flatMap((p) => (p.gridPos ? [p.gridPos] : []));
  const height = HEADER + gridHeight(positions) + 8;
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${String(input.width)}" height="${String(height)}" viewBox="0 0 ${String(input.width)} ${String(height)}" font-family="Inter, Helvetica, Arial, sans-serif">`,
    `<rect width="100%" height="100%" fill="${THEME.background}"/>`,
    text(12, 26, input.dashboard.title ?? 'dashboard', `fill="${THEME.text}" font-size="19" font-weight="600"`),
    ...input.caption.map((line, i) => text(12, 46 + i * 15, line, `fill="${THEME.muted}" font-size="11.5"`)),
  ];
  for (const panel of input.dashboard.panels) {
    if (panel.gridPos === undefined) continue;
    const box = gridToPx(panel.gridPos, input.width, HEADER);
    parts.push(renderPanel(panel, box, input));
  }
  parts.push('</svg>');
  return `${parts.join('\n')}\n`;
}

function renderPanel(panel: Panel, box: Box, input: RenderInput): string {
  if (panel.type === 'row') {
    return [
      text(box.x, box.y + 20, panel.title ?? '', `fill="${THEME.text}" font-size="15" font-weight="600"`),
      `<line x1="${box.x.toFixed(1)}" y1="${(box.y + 28).toFixed(1)}" x2="${(box.x + box.w).toFixed(1)}" y2="${(box.y + 28).toFixed(1)}" stroke="${THEME.border}"/>`,
    ].join('\n');
  }
  const frame = [
    `<g>`,
    `<rect x="${box.x.toFixed(1)}" y="${box.y.toFixed(1)}" width="${box.w.toFixed(1)}" height="${box.h.toFixed(1)}" rx="3" fill="${THEME.panel}" stroke="${THEME.border}"/>`,
    text(
      box.x + 8,
      box.y + 19,
      fit(panel.title ?? '', box.w - 16, 13),
      `fill="${THEME.text}" font-size="13" font-weight="500"`,
    ),
  ];
  const body: Box = { x: box.x + 8, y: box.y + TITLE_BAR, w: box.w - 16, h: box.h - TITLE_BAR - 6 };
  const { named, errors } = panelSeries(panel, input.results);
  const unit = panel.fieldConfig?.defaults?.unit;
  let content: string;
  if (errors.length > 0) content = centred(body, `Query error: ${errors.join('; ')}`, THEME.muted, 12);
  else if (named.length === 0) content = centred(body, 'No data', THEME.muted, 16);
  else if (panel.type === 'timeseries') content = timeseries(body, named, unit, input);
  else if (panel.type === 'stat') content = stat(body, named, unit, panel.options?.textMode === 'name');
  else if (panel.type === 'table') content = table(body, named, unit, panel);
  else if (panel.type === 'piechart') content = pie(body, named, unit);
  else content = centred(body, `(${panel.type ?? 'unknown'} panels are not drawn here)`, THEME.muted, 12);
  return [...frame, content, '</g>'].join('\n');
}

function centred(box: Box, s: string, colour: string, size: number): string {
  return text(
    box.x + box.w / 2,
    box.y + box.h / 2,
    fit(s, box.w - 8, size),
    `fill="${colour}" font-size="${String(size)}" text-anchor="middle" dominant-baseline="middle"`,
  );
}

/** The legend's entries laid out left to right, wrapping; returns the SVG and the rows it took. */
function legend(box: Box, names: readonly string[], maxRows: number): { svg: string; rows: number } {
  const parts: string[] = [];
  let x = box.x;
  let row = 0;
  for (const [i, raw] of names.entries()) {
    const name = fit(raw, box.w - 20, 11);
    const w = 20 + name.length * 6.2;
    if (x + w > box.x + box.w && x > box.x) {
      row++;
      x = box.x;
    }
    if (row >= maxRows) break;
    const y = box.y + row * 15;
    parts.push(
      `<rect x="${x.toFixed(1)}" y="${(y - 4).toFixed(1)}" width="12" height="3" fill="${PALETTE[i % PALETTE.length] ?? THEME.text}"/>`,
    );
    parts.push(text(x + 16, y, name, `fill="${THEME.text}" font-size="11" dominant-baseline="middle"`));
    x += w + 10;
  }
  return { svg: parts.join('\n'), rows: Math.min(maxRows, row + 1) };
}

function timeseries(box: Box, named: readonly Named[], unit: string | undefined, input: RenderInput): string {
  const probe = legend(
    { ...box, y: 0 },
    named.map((n) => n.name),
    3,
  );
  const legendTop = box.y + box.h - probe.rows * 15 + 6;
  const plot: Box = { x: box.x + 58, y: box.y + 6, w: box.w - 62, h: legendTop - box.y - 34 };
  const values = named.flatMap((n) => n.series.points.flatMap(([, v]) => (v === null ? [] : [v])));
  const max = Math.max(0, ...values);
  const min = Math.min(0, ...values);
  const ticks = niceTicks(min, max, 4, unit === 'bytes' ? byteScale(max) : 1);
  const top = ticks.at(-1) ?? 1;
  const bottom = ticks[0] ?? 0;
  const yOf = (v: number): number => plot.y + plot.h - ((v - bottom) / (top - bottom || 1)) * plot.h;
  const xOf = (t: number): number => plot.x + ((t - input.start) / (input.end - input.start || 1)) * plot.w;
  const parts: string[] = [];
  for (const t of ticks) {
    parts.push(
      `<line x1="${plot.x.toFixed(1)}" y1="${yOf(t).toFixed(1)}" x2="${(plot.x + plot.w).toFixed(1)}" y2="${yOf(t).toFixed(1)}" stroke="${THEME.grid}"/>`,
    );
    parts.push(
      text(
        plot.x - 6,
        yOf(t),
        formatValue(t, unit),
        `fill="${THEME.muted}" font-size="10" text-anchor="end" dominant-baseline="middle"`,
      ),
    );
  }
  // Not under the y axis' labels.
  for (const t of timeTicks(input.start, input.end).filter((t) => xOf(t) > plot.x + 16)) {
    parts.push(
      text(
        xOf(t),
        plot.y + plot.h + 14,
        clock(t).slice(0, 5 + (t % 60_000 === 0 ? 0 : 3)),
        `fill="${THEME.muted}" font-size="10" text-anchor="middle"`,
      ),
    );
  }
  for (const [i, n] of named.entries())
    parts.push(polyline(n.series, xOf, yOf, PALETTE[i % PALETTE.length] ?? THEME.text));
  parts.push(
    legend(
      { x: box.x + 4, y: legendTop, w: box.w - 8, h: 45 },
      named.map((n) => n.name),
      3,
    ).svg,
  );
  return parts.join('\n');
}

/** Minute marks, or half or quarter minutes over a short range. */
function timeTicks(start: number, end: number): number[] {
  const step = [15_000, 30_000, 60_000, 120_000, 300_000].find((s) => (end - start) / s <= 6) ?? 600_000;
  const out: number[] = [];
  for (let t = Math.ceil(start / step) * step; t <= end; t += step) out.push(t);
  return out;
}

/** A series as lines, broken where it has no value (a gap, as Grafana draws it). */
function polyline(
  series: EvaluatedSeries,
  xOf: (t: number) => number,
  yOf: (v: number) => number,
  colour: string,
): string {
  const runs: string[][] = [[]];
  for (const [t, v] of series.points) {
    if (v === null) runs.push([]);
    else runs.at(-1)?.push(`${xOf(t).toFixed(1)},${yOf(v).toFixed(1)}`);
  }
  return runs
    .filter((r) => r.length > 0)
    .map((r) =>
      r.length === 1
        ? `<circle cx="${r[0]?.split(',')[0] ?? 0}" cy="${r[0]?.split(',')[1] ?? 0}" r="1.8" fill="${colour}"/>`
        : `<polyline points="${r.join(' ')}" fill="none" stroke="${colour}" stroke-width="1.5"/>`,
    )
    .join('\n');
}

/**
 * Grafana's stat defaults: the last value, green, red from 80; names shown when there are several.
 * `byName` (textMode name): each series' name, in the text colour, instead of its value.
 */
function stat(box: Box, named: readonly Named[], unit: string | undefined, byName = false): string {
  const parts: string[] = [];
  const w = box.w / named.length;
  for (const [i, n] of named.entries()) {
    const v = lastNotNull(n.series);
    const shown = byName ? n.name : formatValue(v, unit);
    const colour = byName ? THEME.text : v !== null && v >= 80 ? '#F2495C' : '#73BF69';
    const cx = box.x + w * i + w / 2;
    const size = Math.min(48, box.h / 2.2, (w / Math.max(3, shown.length)) * 1.6);
    if (named.length > 1 && !byName)
      parts.push(
        text(
          cx,
          box.y + box.h / 2 - size * 0.75,
          fit(n.name, w - 8, 12),
          `fill="${THEME.text}" font-size="12" text-anchor="middle"`,
        ),
      );
    parts.push(
      text(
        cx,
        box.y + box.h / 2 + size * 0.35,
        shown,
        `fill="${colour}" font-size="${size.toFixed(1)}" font-weight="600" text-anchor="middle"`,
      ),
    );
  }
  return parts.join('\n');
}

/** Table columns as Grafana names them for instant queries: the labels, then `Value` (`Value #A` with several queries). */
export function tableColumns(panel: Panel, named: readonly Named[]): { labels: string[]; values: string[] } {
  const labels = [...new Set(named.flatMap((n) => Object.keys(n.series.metric)))]
    .filter((l) => l !== '__name__')
    .sort();
  const refs = (panel.targets ?? []).map((t) => t.refId ?? 'A');
  return { labels, values: refs.length > 1 ? refs.map((r) => `Value #${r}`) : ['Value'] };
}

function table(box: Box, named: readonly Named[], unit: string | undefined, panel: Panel): string {
  const { labels, values } = tableColumns(panel, named);
  const valueWidth = Math.min(90, box.w / (labels.length + values.length));
  const labelWidth = (box.w - valueWidth * values.length) / Math.max(1, labels.length);
  const xs = [
    ...labels.map((_, i) => box.x + i * labelWidth),
    ...values.map((_, i) => box.x + labels.length * labelWidth + i * valueWidth),
  ];
  const widths = [...labels.map(() => labelWidth), ...values.map(() => valueWidth)];
  const header = [...labels, ...values];
  const parts = header.map((h, i) =>
    text(
      (xs[i] ?? 0) + 4,
      box.y + 12,
      fit(h, (widths[i] ?? 0) - 8, 11),
      `fill="${THEME.muted}" font-size="11" font-weight="600"`,
    ),
  );
  parts.push(
    `<line x1="${box.x.toFixed(1)}" y1="${(box.y + 20).toFixed(1)}" x2="${(box.x + box.w).toFixed(1)}" y2="${(box.y + 20).toFixed(1)}" stroke="${THEME.border}"/>`,
  );
  const fits = Math.max(1, Math.floor((box.h - 24) / 20));
  const shown = named.length > fits ? fits - 1 : named.length;
  for (const [r, n] of named.slice(0, shown).entries()) {
    const y = box.y + 36 + r * 20;
    const cells = [
      ...labels.map((l) => n.series.metric[l] ?? ''),
      ...values.map((v) =>
        v === 'Value' || v === `Value #${n.refId}` ? formatValue(lastNotNull(n.series), unit) : '',
      ),
    ];
    for (const [i, c] of cells.entries())
      parts.push(text((xs[i] ?? 0) + 4, y, fit(c, (widths[i] ?? 0) - 8, 11), `fill="${THEME.text}" font-size="11"`));
  }
  if (shown < named.length)
    parts.push(
      text(
        box.x + 4,
        box.y + 36 + shown * 20,
        `… ${String(named.length - shown)} more rows`,
        `fill="${THEME.muted}" font-size="11"`,
      ),
    );
  return parts.join('\n');
}

function pie(box: Box, named: readonly Named[], unit: string | undefined): string {
  const values = named.map((n) => Math.max(0, lastNotNull(n.series) ?? 0));
  const total = values.reduce((a, b) => a + b, 0);
  const names = named.map((n, i) => `${n.name} (${formatValue(values[i], unit)})`);
  const rows = legend({ ...box, y: 0 }, names, 3).rows;
  const lg = legend({ x: box.x + 4, y: box.y + box.h - 8 - (rows - 1) * 15, w: box.w - 8, h: 45 }, names, 3);
  const r = Math.min(box.w, box.h - 15 - rows * 15) / 2 - 4;
  const cx = box.x + box.w / 2;
  const cy = box.y + (box.h - rows * 15) / 2;
  const parts: string[] = [];
  let angle = -Math.PI / 2;
  for (const [i, v] of values.entries()) {
    const colour = PALETTE[i % PALETTE.length] ?? THEME.text;
    if (total === 0) break;
    if (v === total) {
      parts.push(`<circle cx="${cx.toFixed(1)}" cy="${cy.toFixed(1)}" r="${r.toFixed(1)}" fill="${colour}"/>`);
      break;
    }
    const next = angle + (v / total) * 2 * Math.PI;
    const [x1, y1, x2, y2] = [
      cx + r * Math.cos(angle),
      cy + r * Math.sin(angle),
      cx + r * Math.cos(next),
      cy + r * Math.sin(next),
    ];
    parts.push(
      `<path d="M${cx.toFixed(1)},${cy.toFixed(1)} L${x1.toFixed(1)},${y1.toFixed(1)} A${r.toFixed(1)},${r.toFixed(1)} 0 ${next - angle > Math.PI ? 1 : 0} 1 ${x2.toFixed(1)},${y2.toFixed(1)} Z" fill="${colour}" stroke="${THEME.panel}"/>`,
    );
    angle = next;
  }
  return [...parts, lg.svg].join('\n');
}
