// The pure parts of the dashboard picture (bench/dashboard-picture): the queries as Grafana would
// send them (variables, intervals, instant or range), Grafana's grid in pixels for the chart's real
// dashboard, values in a panel's unit, and the SVG drawn from given query results.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import type { Evaluated } from '../../../bench/dashboard-picture/evaluate.js';
import { byteScale, formatValue, gridToPx, niceTicks, type Box } from '../../../bench/dashboard-picture/layout.js';
import {
  interpolate,
  intervals,
  legendName,
  panelQueries,
  type Dashboard,
} from '../../../bench/dashboard-picture/queries.js';
import { lastNotNull, renderDashboard } from '../../../bench/dashboard-picture/render.js';
import { REPO_ROOT } from '../../support/cli.js';

const dashboard = JSON.parse(
  readFileSync(join(REPO_ROOT, 'helm/provisioner/dashboards/local-static-provisioner.json'), 'utf8'),
) as Dashboard;
const MIN = 60_000;

const overlap = (a: Box, b: Box): boolean => a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;

describe('dashboard picture: layout', () => {
  it("puts gridPos on Grafana's grid: 24 columns, 30 px rows, 8 px between panels", () => {
    const left = gridToPx({ x: 0, y: 1, w: 8, h: 8 }, 1600);
    const right = gridToPx({ x: 8, y: 1, w: 8, h: 8 }, 1600);
    const full = gridToPx({ x: 0, y: 0, w: 24, h: 1 }, 1600);
    assert.deepEqual([left.x, left.y, left.h], [8, 38, 8 * 30 + 7 * 8]);
    assert.equal(right.x - (left.x + left.w), 8, 'the gap between neighbours');
    assert.equal(full.x + full.w, 1600 - 8, 'a full-width panel ends one margin from the edge');
    assert.equal(gridToPx({ x: 0, y: 2, w: 1, h: 1 }, 1600, 100).y, 100 + 2 * 38);
  });

  it("lays out every panel of the chart's dashboard inside the width, none overlapping another", () => {
    const boxes = dashboard.panels.map((p) => ({
      title: p.title,
      box: gridToPx(p.gridPos ?? { x: 0, y: 0, w: 0, h: 0 }, 1600),
    }));
    assert.ok(boxes.length >= 20);
    for (const [i, a] of boxes.entries()) {
      assert.ok(a.box.x >= 0 && a.box.x + a.box.w <= 1600, `${a.title ?? ''} within the width`);
      for (const b of boxes.slice(i + 1)) assert.ok(!overlap(a.box, b.box), `${a.title ?? ''} / ${b.title ?? ''}`);
    }
  });

  it('picks round ticks that cover the values, in MiB on a byte axis', () => {
    assert.deepEqual(niceTicks(0, 0.13), [0, 0.05, 0.1, 0.15]);
    assert.deepEqual(niceTicks(0, 1), [0, 0.25, 0.5, 0.75, 1]);
    const mib = 2 ** 20;
    assert.deepEqual(
      niceTicks(0, 500 * mib, 4, byteScale(500 * mib)),
      [0, 200, 400, 600].map((v) => v * mib),
    );
  });

  it("formats values in the panels' units", () => {
    assert.equal(formatValue(1536, 'bytes'), '1.5 KiB');
    assert.equal(formatValue(256 * 2 ** 20, 'bytes'), '256 MiB');
    assert.equal(formatValue(0.0123, 's'), '12.3 ms');
    assert.equal(formatValue(2.5, 's'), '2.5 s');
    assert.equal(formatValue(0.578, 'percentunit'), '57.8%');
    assert.equal(formatValue(1234), '1.23 K');
    assert.equal(formatValue(0), '0');
    assert.equal(formatValue(null), 'No data');
  });
});

describe('dashboard picture: queries', () => {
  it("computes Grafana's intervals: $__rate_interval spans at least four scrapes", () => {
    assert.deepEqual(intervals({ start: 0, end: 3 * MIN, scrapeIntervalMs: 5000 }), {
      intervalMs: 5000,
      rateIntervalMs: 20_000,
      rangeMs: 3 * MIN,
    });
    assert.equal(intervals({ start: 0, end: 3 * MIN, scrapeIntervalMs: 15_000 }).rateIntervalMs, 60_000);
    // A day over 400 points: $__interval 216 s, so the rate spans it and one scrape more.
    assert.deepEqual(intervals({ start: 0, end: 1440 * MIN, scrapeIntervalMs: 15_000 }), {
      intervalMs: 216_000,
      rateIntervalMs: 231_000,
      rangeMs: 1440 * MIN,
    });
  });

  it('replaces the variables, braced or not, and refuses one it does not know', () => {
    const vars = { intervalMs: 5000, rateIntervalMs: 20_000, rangeMs: 190_000 };
    assert.equal(
      interpolate('sum(increase(x{storageclass=~"$storageclass"}[$__rate_interval])) / ${__range}', vars),
      'sum(increase(x{storageclass=~".*"}[20s])) / 190s',
    );
    assert.equal(interpolate('x{c=~"${storageclass}"}', vars, 'fast'), 'x{c=~"fast"}');
    assert.throws(() => interpolate('x[$__nope]', vars), /unknown variable \$__nope/u);
  });

  it("turns every target of the chart's dashboard into a query: no variable left, tables instant, the rest on the step grid", () => {
    const window = { start: 1_000_001_234, end: 1_000_191_234, scrapeIntervalMs: 5000 };
    const queries = panelQueries(dashboard, window);
    const targets = dashboard.panels.flatMap((p) => p.targets ?? []);
    assert.equal(queries.length, targets.length);
    assert.equal(new Set(queries.map((q) => q.id)).size, queries.length, 'ids unique');
    for (const q of queries) {
      assert.ok(!q.expr.includes('$'), q.expr);
      assert.equal(q.start % 5000, 0);
      assert.equal(q.end % 5000, 0);
      assert.ok(q.start >= window.start && q.end <= window.end);
    }
    const table = dashboard.panels.find((p) => p.type === 'table');
    const tableQuery = queries.find((q) => q.id === `${String(table?.id)}/A`);
    assert.equal(tableQuery?.range, false);
    assert.ok(queries.some((q) => q.expr.includes('[20s]') && q.range));
  });

  it('names series from the legend format, or by their labels without one', () => {
    assert.equal(legendName('deleted ({{type}})', { type: 'process' }), 'deleted (process)');
    assert.equal(legendName('{{storageclass}} {{phase}}', { storageclass: 'fast', phase: 'Bound' }), 'fast Bound');
    assert.equal(legendName('', { __name__: 'up', job: 'j' }), 'up{job="j"}');
    assert.equal(legendName(undefined, {}), 'Value');
  });
});

describe('dashboard picture: the SVG', () => {
  const reloads = dashboard.panels.find((p) => p.title === 'Reloads by result');
  const largest = dashboard.panels.find((p) => p.type === 'table' && p.title?.startsWith('Largest') === true);
  const results = new Map<string, Evaluated>([
    [
      `${String(reloads?.id)}/A`,
      {
        id: '',
        series: [
          {
            metric: { result: 'applied' },
            points: [
              [0, 0],
              [5000, 1],
              [10_000, null],
              [15_000, 1],
            ],
          },
        ],
      },
    ],
    [
      `${String(largest?.id)}/A`,
      { id: '', series: [{ metric: { node: 'node-<a>', storageclass: 'fast' }, points: [[15_000, 64 * 2 ** 20]] }] },
    ],
  ]);
  const svg = renderDashboard({ dashboard, results, width: 1600, start: 0, end: 15_000, caption: ['made by a test'] });

  it('draws every panel title, a line broken at the gap, the table row, and No data elsewhere', () => {
    for (const p of dashboard.panels)
      assert.ok(svg.includes(p.title?.slice(0, 20).replace(/&/gu, '&#38;') ?? ''), p.title);
    assert.equal((svg.match(/<polyline /gu) ?? []).length, 1, 'the run of two points; the lone last point a dot');
    assert.equal((svg.match(/<circle /gu) ?? []).length, 1);
    assert.ok(svg.includes('>applied</text>'), 'the legend');
    assert.ok(svg.includes('>node-&#60;a&#62;</text>') && svg.includes('>64 MiB</text>'), 'the row, escaped');
    const withData = 2;
    const rows = dashboard.panels.filter((p) => p.type === 'row').length;
    assert.equal((svg.match(/>No data</gu) ?? []).length, dashboard.panels.length - rows - withData);
    assert.ok(svg.includes('made by a test'));
  });

  it("draws a stat of textMode name (the rollout's phase) as the series' name, not its value", () => {
    const phase = dashboard.panels.find((p) => p.title === 'Rollout phase');
    assert.ok(phase);
    assert.equal(phase.options?.textMode, 'name');
    const drawn = renderDashboard({
      dashboard: { ...dashboard, panels: [phase] },
      results: new Map([
        [`${String(phase.id)}/A`, { id: '', series: [{ metric: { phase: 'progressing' }, points: [[15_000, 1]] }] }],
      ]),
      width: 1600,
      start: 0,
      end: 15_000,
      caption: [],
    });
    assert.match(drawn, />progressing<\/text>/u);
    assert.doesNotMatch(drawn, />1<\/text>/u);
  });

  it('reduces a series to its last value that is not null, as a stat shows it', () => {
    assert.equal(
      lastNotNull({
        metric: {},
        points: [
          [0, 3],
          [1, 4],
          [2, null],
        ],
      }),
      4,
    );
    assert.equal(lastNotNull({ metric: {}, points: [[0, null]] }), null);
  });
});
