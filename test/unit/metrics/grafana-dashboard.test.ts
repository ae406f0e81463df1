// The chart's Grafana dashboard, tested against what the product serves: the JSON is a valid
// dashboard (panels with ids, grid positions and targets on the datasource variable), and every
// metric and label its PromQL names exists in a Prometheus-format scrape of a running agent (over
// HTTP, after it published, bound, cleaned, quarantined and found an abnormal volume) or of the
// staged rollout controller.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { systemClock } from '../../../src/core/clock.js';
import type { PersistentVolume } from '../../../src/core/kube/objects.js';
import { MemoryCluster } from '../../../src/core/kube/memory/memory-cluster.js';
import { silentLogger } from '../../../src/core/log.js';
import { persistentVolumeName } from '../../../src/core/pv/naming.js';
import { policyFromFlags } from '../../../src/core/staged-rollout/policy.js';
import { startRolloutController } from '../../../src/core/staged-rollout/service.js';
import { REPO_ROOT } from '../../support/cli.js';
import { eventually, waitFor } from '../../support/eventually.js';
import { memoryAgentFixture, startMemoryAgent } from '../../support/memory-agent.js';
import { parsePrometheusText } from '../../support/prom-text.js';
import { promqlNames } from '../../support/promql-names.js';

const DASHBOARD = join(REPO_ROOT, 'helm/provisioner/dashboards/local-static-provisioner.json');
/** Labels Prometheus adds to every series of a target (not in a scrape). */
const TARGET_LABELS = new Set(['instance', 'job', 'pod', 'namespace']);
const GiB = 2 ** 30;
type Phase = NonNullable<NonNullable<PersistentVolume['status']>['phase']>;

interface Target {
  readonly refId?: string;
  readonly expr?: string;
  readonly legendFormat?: string;
  readonly datasource?: { readonly uid?: string };
}
interface Panel {
  readonly id?: number;
  readonly type?: string;
  readonly title?: string;
  readonly gridPos?: { h: number; w: number; x: number; y: number };
  readonly datasource?: { readonly uid?: string };
  readonly targets?: readonly Target[];
}
interface Variable {
  readonly name: string;
  readonly type: string;
  readonly query?: string | { readonly query?: string };
}
interface Dashboard {
  readonly uid?: string;
  readonly title?: string;
  readonly schemaVersion?: number;
  readonly panels: readonly Panel[];
  readonly templating: { readonly list: readonly Variable[] };
}

function dashboard(): Dashboard {
  return JSON.parse(readFileSync(DASHBOARD, 'utf8')) as Dashboard;
}

/** Every series name of a scrape (histograms' _bucket/_sum/_count included) → the label names its samples carry. */
function seriesLabels(text: string, into: Map<string, Set<string>>): void {
  for (const family of parsePrometheusText(text).values()) {
    if (!into.has(family.name)) into.set(family.name, new Set());
    for (const sample of family.samples) {
      const labels = into.get(sample.name) ?? new Set<string>();
      for (const label of Object.keys(sample.labels)) labels.add(label);
      into.set(sample.name, labels);
    }
  }
}

/** An agent that has published, bound, cleaned up, quarantined and seen an abnormal volume; its /metrics. */
async function agentScrape(): Promise<string> {
  const t = await memoryAgentFixture('lvp-dashboard-');
  const { cluster, volumes } = t;
  for (const d of ['clean', 'sick', 'swap', 'bound', 'free'])
    volumes.addMount(`/mnt/fast/${d}`, { capacity: 10 * GiB });
  volumes.setUsed('/mnt/fast/bound', GiB);
  const agent = await startMemoryAgent(t, { discoveryPeriodMs: 50 });
  try {
    await agent.generation.whenReady;
    const name = (d: string): string => persistentVolumeName(d, 'node-a', 'fast');
    await waitFor(async () => (await cluster.persistentVolumes.list()).items.length === 5, 'five PVs');
    const set = async (d: string, phase: Phase, claim = false): Promise<void> => {
      let pv = await cluster.persistentVolumes.get(name(d));
      if (claim) {
        pv = await cluster.persistentVolumes.update({
          ...pv,
          spec: { ...pv.spec, claimRef: { namespace: 'default', name: `claim-${d}`, uid: `c-${d}` } },
        });
      }
      await cluster.persistentVolumes.updateStatus({ ...pv, status: { phase } });
    };
    for (const d of ['sick', 'free']) await set(d, 'Available');
    for (const d of ['clean', 'swap', 'bound']) await set(d, 'Bound', true);
    // Another disk under `swap` before it is released: quarantined. `sick` unmounted: abnormal.
    volumes.removeMount('/mnt/fast/swap').addMount('/mnt/fast/swap', { capacity: 10 * GiB });
    volumes.removeMount('/mnt/fast/sick');
    await set('clean', 'Released');
    await set('swap', 'Released');
    const reload = await agent.reload({ trigger: 'admin' });
    assert.equal(reload.outcome, 'noop');
    const port = (agent['http'] as { port: number } | undefined)?.port;
    return await eventually(async () => {
      const text = await (await fetch(`http://127.0.0.1:${String(port)}/metrics`)).text();
      const ready = [
        'local_volume_provisioner_persistentvolume_quarantined{',
        'local_volume_provisioner_volume_health_abnormal{',
        'local_volume_provisioner_persistentvolume_delete_duration_seconds_bucket{',
        'local_volume_provisioner_volume_used_bytes{persistentvolume="local-pv',
      ].every((s) => text.includes(s));
      return ready && text.includes('claim_name="claim-bound"') ? text : undefined;
    }, 'a scrape with a cleanup, a quarantine, an abnormal volume and a Bound PV with usage');
  } finally {
    await agent.stop();
    await rm(t.dir, { recursive: true, force: true });
  }
}

async function controllerScrape(): Promise<string> {
  const cluster = new MemoryCluster();
  await cluster.configMaps.create({
    metadata: { name: 'lvp-config', namespace: 'default' },
    data: { storageClassMap: 'local:\n  hostDir: /mnt/disks\n  mountDir: /mnt/disks\n' },
  });
  const service = await startRolloutController(
    {
      settings: { namespace: 'default', name: 'lvp-config', instance: 'lvp', policy: policyFromFlags({}), resyncMs: 0 },
      listenAddress: '127.0.0.1:0',
      metricsPath: '/metrics',
      identity: 'replica-a',
      leaderElection: {
        name: 'rollout-controller',
        namespace: 'default',
        timing: { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 },
      },
    },
    { cluster, clock: systemClock, logger: silentLogger },
  );
  try {
    return await eventually(async () => {
      const body = await (await fetch(`http://127.0.0.1:${String(service.port)}/metrics`)).text();
      return /^local_volume_rollout_phase\{phase="complete"\} 1$/mu.test(body) ? body : undefined;
    }, 'the controller serving its rollout');
  } finally {
    await service.stop();
  }
}

/** Every PromQL expression of the dashboard: panel targets and variable queries, with where it is. */
function expressions(d: Dashboard): { where: string; expr: string; legend?: string }[] {
  const out: { where: string; expr: string; legend?: string }[] = [];
  for (const panel of d.panels)
    for (const target of panel.targets ?? [])
      if (target.expr !== undefined)
        out.push({
          where: `panel ${String(panel.id)} "${panel.title ?? ''}"`,
          expr: target.expr,
          ...(target.legendFormat !== undefined ? { legend: target.legendFormat } : {}),
        });
  for (const v of d.templating.list) {
    const query = typeof v.query === 'string' ? v.query : v.query?.query;
    if (v.type === 'query' && query !== undefined) out.push({ where: `variable ${v.name}`, expr: query });
  }
  return out;
}

/** What an expression names that the scrapes do not have (metrics, matcher labels, grouping and legend labels). */
function problemsOf(
  all: readonly { where: string; expr: string; legend?: string }[],
  series: ReadonlyMap<string, ReadonlySet<string>>,
): string[] {
  const problems: string[] = [];
  for (const { where, expr, legend } of all) {
    const names = promqlNames(expr);
    if (names.selectors.length === 0) problems.push(`${where}: no metric in ${expr}`);
    const known = new Set<string>(TARGET_LABELS);
    for (const { metric, labels } of names.selectors) {
      const carried = series.get(metric);
      if (carried === undefined) {
        problems.push(`${where}: no metric ${metric} in the scrapes`);
        continue;
      }
      for (const label of carried) known.add(label);
      for (const label of labels)
        if (!carried.has(label)) problems.push(`${where}: ${metric} has no label ${label} in the scrapes`);
    }
    for (const label of names.grouping)
      if (!known.has(label)) problems.push(`${where}: no metric of ${expr} carries ${label}`);
    for (const m of (legend ?? '').matchAll(/\{\{\s*(\w+)\s*\}\}/gu)) {
      const label = m[1] ?? '';
      if (!names.grouping.includes(label) && !known.has(label))
        problems.push(`${where}: legend {{${label}}} is not a label of ${expr}`);
    }
  }
  return problems;
}

describe('the Grafana dashboard of the chart', () => {
  it('is a valid dashboard: unique panel ids, grid positions, targets on the datasource variable', () => {
    const d = dashboard();
    assert.equal(d.uid, 'local-static-provisioner');
    assert.ok(typeof d.title === 'string' && d.title !== '' && typeof d.schemaVersion === 'number');
    const datasource = d.templating.list.find((v) => v.type === 'datasource');
    assert.equal(datasource?.name, 'datasource');
    assert.equal(datasource.query, 'prometheus');
    const ids = d.panels.map((p) => p.id);
    assert.ok(
      ids.every((id) => Number.isInteger(id)),
      'every panel has an id',
    );
    assert.equal(new Set(ids).size, ids.length, 'panel ids are unique');
    for (const p of d.panels) {
      const g = p.gridPos;
      assert.ok(
        g !== undefined && g.w > 0 && g.h > 0 && g.x >= 0 && g.x + g.w <= 24 && g.y >= 0,
        `${p.title}: gridPos`,
      );
      if (p.type === 'row') continue;
      assert.equal(p.datasource?.uid, '${datasource}', `${p.title ?? ''}: the datasource variable`);
      assert.ok((p.targets ?? []).length > 0, `${p.title ?? ''}: targets`);
      const refs = (p.targets ?? []).map((t) => t.refId);
      assert.equal(new Set(refs).size, refs.length, `${p.title ?? ''}: unique refIds`);
      for (const t of p.targets ?? []) {
        assert.ok(typeof t.expr === 'string' && t.expr !== '', `${p.title ?? ''}: an expression`);
        assert.equal(t.datasource?.uid, '${datasource}');
      }
    }
    const titles = d.panels.map((p) => p.title ?? '').join('\n');
    for (const topic of [
      /reload/iu,
      /rollout/iu,
      /publish/iu,
      /cleanup/iu,
      /quarantined/iu,
      /abnormal/iu,
      /class/iu,
      /fullest/iu,
    ])
      assert.match(titles, topic);
  });

  it('names only metrics and labels a running agent or the rollout controller exports', async () => {
    const series = new Map<string, Set<string>>();
    seriesLabels(await agentScrape(), series);
    seriesLabels(await controllerScrape(), series);
    const all = expressions(dashboard());
    assert.ok(all.length >= 25, `${String(all.length)} expressions`);
    assert.deepEqual(problemsOf(all, series), []);
  });

  it('the checker itself finds a misspelt metric and an unknown label', () => {
    const names = promqlNames(
      'sum by (storageclass, nope) (rate(local_volume_provisioner_x_total{mode="a", storageclass=~"$sc"}[$__rate_interval])) / on (instance) group_left max(y)',
    );
    assert.deepEqual(names.selectors, [
      { metric: 'local_volume_provisioner_x_total', labels: ['mode', 'storageclass'] },
      { metric: 'y', labels: [] },
    ]);
    assert.deepEqual(names.grouping, ['storageclass', 'nope', 'instance']);
    const series = new Map([['local_volume_provisioner_x_total', new Set(['mode'])]]);
    assert.deepEqual(
      problemsOf(
        [
          { where: 'a', expr: 'sum by (mode) (local_volume_provisioner_x_totl)' },
          { where: 'b', expr: 'local_volume_provisioner_x_total{storageclass="x"}' },
          { where: 'c', expr: 'sum by (phase) (local_volume_provisioner_x_total)', legend: '{{mode}} {{phase}}' },
          { where: 'd', expr: 'sum by (mode, instance) (local_volume_provisioner_x_total)', legend: '{{mode}}' },
        ],
        series,
      ),
      [
        'a: no metric local_volume_provisioner_x_totl in the scrapes',
        'a: no metric of sum by (mode) (local_volume_provisioner_x_totl) carries mode',
        'b: local_volume_provisioner_x_total has no label storageclass in the scrapes',
        'c: no metric of sum by (phase) (local_volume_provisioner_x_total) carries phase',
      ],
    );
    assert.deepEqual(promqlNames('label_values(local_volume_provisioner_managed_persistentvolumes, storageclass)'), {
      selectors: [{ metric: 'local_volume_provisioner_managed_persistentvolumes', labels: [] }],
      grouping: ['storageclass'],
    });
  });
});
