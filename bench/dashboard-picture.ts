// Draws docs/images/dashboard.svg: the chart's Grafana dashboard rendered by this project's own
// SVG renderer (not Grafana) from real scrapes. Records the scenario of dashboard-picture/
// scenario.ts (the real apiserver, an agent process and the rollout controller, scraped every few
// seconds), evaluates every panel query on the scrapes with Prometheus's PromQL engine
// (tools/promql-eval, built with the local Go toolchain and cached), and renders the panels.
//
// Usage (as root, after `npm run build`; not part of `npm test` or CI):
//   node dist/bench/dashboard-picture.js [--scrapes DIR] [--interval-ms 5000] [--out docs/images/dashboard.svg]
// --scrapes DIR with a manifest.json from an earlier run renders those scrapes again, without a new recording.
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { REPO_ROOT } from './support.js';
import { evaluate } from './dashboard-picture/evaluate.js';
import { intervals, panelQueries, promDuration, type Dashboard } from './dashboard-picture/queries.js';
import { renderDashboard } from './dashboard-picture/render.js';
import { recordScenario } from './dashboard-picture/scenario.js';
import type { ScrapeManifest } from './dashboard-picture/scrapes.js';

function option(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : undefined;
}

const dir = resolve(option('scrapes') ?? mkdtempSync(join(tmpdir(), 'lvp-dashboard-scrapes-')));
const manifestFile = join(dir, 'manifest.json');
if (!existsSync(manifestFile)) {
  const manifest = await recordScenario({ dir, intervalMs: Number(option('interval-ms') ?? 5000) });
  writeFileSync(manifestFile, `${JSON.stringify(manifest, null, 2)}\n`);
  console.error(`[dashboard-picture] ${String(manifest.scrapes.length)} scrapes in ${dir}`);
}
const manifest = JSON.parse(readFileSync(manifestFile, 'utf8')) as ScrapeManifest;
const dashboard = JSON.parse(
  readFileSync(join(REPO_ROOT, 'helm/provisioner/dashboards/local-static-provisioner.json'), 'utf8'),
) as Dashboard;
const window = { start: manifest.start, end: manifest.end, scrapeIntervalMs: manifest.intervalMs };
const queries = panelQueries(dashboard, window);
const evaluation = evaluate(
  manifest.scrapes.map((s) => ({ ...s, file: resolve(dir, s.file) })),
  queries,
);
writeFileSync(join(dir, 'results.json'), `${JSON.stringify({ queries, ...evaluation })}\n`);
const vars = intervals(window);
const minutes = ((manifest.end - manifest.start) / 60_000).toFixed(1);
const day = new Date(manifest.start).toISOString().slice(0, 10);
const caption = [
  `Not a Grafana screenshot: drawn by this project's bench/dashboard-picture.ts from ${String(manifest.scrapes.length)} real Prometheus-format scrapes of one agent and the staged rollout controller (every ${String(manifest.intervalMs / 1000)} s for ${minutes} min, ${day} UTC).`,
  `Every panel query evaluated by Prometheus's own PromQL engine (${evaluation.engine}) with storageclass = All, $__interval = ${promDuration(vars.intervalMs)}, $__rate_interval = ${promDuration(vars.rateIntervalMs)}, $__range = ${promDuration(vars.rangeMs)}.`,
  'Layout from the dashboard\'s gridPos; colours, fonts and axes approximate Grafana\'s dark theme. See docs/observability.md, "Grafana dashboard".',
];
const out = resolve(option('out') ?? join(REPO_ROOT, 'docs/images/dashboard.svg'));
const results = new Map(evaluation.results.map((r) => [r.id, r]));
writeFileSync(
  out,
  renderDashboard({
    dashboard,
    results,
    width: 1600,
    start: queries[0]?.start ?? window.start,
    end: queries[0]?.end ?? window.end,
    caption,
  }),
);
const empty = evaluation.results.filter((r) => r.series.length === 0).map((r) => r.id);
console.error(
  `[dashboard-picture] ${out}: ${String(evaluation.samples)} samples, ${String(queries.length)} queries; no data: ${empty.join(' ') || 'none'}`,
);
for (const r of evaluation.results) if (r.error !== undefined) console.error(`[dashboard-picture] ${r.id}: ${r.error}`);
