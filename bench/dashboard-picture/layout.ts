// Pure parts of the picture: Grafana's grid in pixels, axis ticks, values in a panel's unit.

/** Grafana's grid: 24 columns, rows of 30 px, 8 px between panels both ways. */
export const GRID_COLUMNS = 24;
export const CELL_HEIGHT = 30;
export const MARGIN = 8;

export interface Box {
  readonly x: number;
  readonly y: number;
  readonly w: number;
  readonly h: number;
}

/** A panel's gridPos as a pixel box in a dashboard `width` px wide, `top` px from the top. */
export function gridToPx(pos: { x: number; y: number; w: number; h: number }, width: number, top = 0): Box {
  const column = (width - MARGIN) / GRID_COLUMNS;
  return {
    x: MARGIN + pos.x * column,
    y: top + pos.y * (CELL_HEIGHT + MARGIN),
    w: pos.w * column - MARGIN,
    h: pos.h * CELL_HEIGHT + (pos.h - 1) * MARGIN,
  };
}

/** Height in px of the grid rows up to the lowest panel's bottom. */
export function gridHeight(positions: readonly { y: number; h: number }[]): number {
  const rows = Math.max(0, ...positions.map((p) => p.y + p.h));
  return rows * (CELL_HEIGHT + MARGIN);
}

/**
 * About `count` round tick values covering [min, max]: steps of 1, 2, 2.5 or 5 × 10^n of `scale` (a
 * byte axis passes 1024^k, so that its ticks are round in KiB, MiB or GiB).
 */
export function niceTicks(min: number, max: number, count = 4, scale = 1): number[] {
  if (!Number.isFinite(min) || !Number.isFinite(max)) return [];
  const lo = Math.min(min, max) / scale;
  const hi = max === min ? lo + (lo === 0 ? 1 : Math.abs(lo)) : Math.max(min, max) / scale;
  const raw = (hi - lo) / count;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * magnitude).find((s) => s >= raw) ?? 10 * magnitude;
  const ticks: number[] = [];
  for (let v = Math.floor(lo / step) * step; v < hi + step; v += step) {
    ticks.push(Number(v.toPrecision(12)));
    if (v >= hi - step * 1e-9) break;
  }
  return ticks.map((t) => t * scale);
}

/** The scale of a byte axis whose largest value is `max`: 1024^k, so its ticks read in B, KiB, MiB… */
export function byteScale(max: number): number {
  return max >= 1024 ? 1024 ** Math.min(5, Math.floor(Math.log(max) / Math.log(1024))) : 1;
}

const IEC = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
const SHORT = ['', ' K', ' Mil', ' Bil', ' Tri'];

/** Up to three significant digits, no trailing zeros (Grafana's default decimals, roughly). */
function digits(v: number): string {
  if (v === 0) return '0';
  const a = Math.abs(v);
  const decimals = a >= 100 ? 0 : a >= 10 ? 1 : a >= 1 ? 2 : Math.min(6, 2 - Math.floor(Math.log10(a)));
  return String(Number(v.toFixed(decimals)));
}

/** A value in a Grafana unit: `bytes` (IEC), `s`, `percentunit`; anything else as Grafana's `short`. */
export function formatValue(v: number | null | undefined, unit?: string): string {
  if (v === null || v === undefined || Number.isNaN(v)) return 'No data';
  if (unit === 'percentunit') return `${digits(v * 100)}%`;
  if (unit === 'bytes') {
    let i = 0;
    while (Math.abs(v) >= 1024 ** (i + 1) && i < IEC.length - 1) i++;
    return `${digits(v / 1024 ** i)} ${IEC[i] ?? 'B'}`;
  }
  if (unit === 's') {
    const a = Math.abs(v);
    if (a !== 0 && a < 1e-3) return `${digits(v * 1e6)} µs`;
    if (a !== 0 && a < 1) return `${digits(v * 1e3)} ms`;
    return `${digits(v)} s`;
  }
  let i = 0;
  while (Math.abs(v) >= 1000 ** (i + 1) && i < SHORT.length - 1) i++;
  return `${digits(v / 1000 ** i)}${SHORT[i] ?? ''}`;
}

/** hh:mm:ss of a time in UTC. */
export function clock(ms: number): string {
  return new Date(ms).toISOString().slice(11, 19);
}

/** Text cut to about `px` pixels at `fontPx` (an average glyph of DejaVu Sans or Helvetica is ~0.6 em wide), with an ellipsis. */
export function fit(text: string, px: number, fontPx: number): string {
  const max = Math.max(1, Math.floor(px / (fontPx * 0.6)));
  return text.length <= max ? text : `${text.slice(0, Math.max(0, max - 1))}…`;
}

export function escapeXml(s: string): string {
  return s.replace(/[<>&"']/gu, (c) => `&#${String(c.charCodeAt(0))};`);
}
