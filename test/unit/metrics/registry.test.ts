import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MetricsRegistry, MetricUsageError } from '../../../src/core/metrics/registry.js';
import { createAgentMetrics } from '../../../src/core/metrics/agent-metrics.js';
import { parsePrometheusText } from '../../support/prom-text.js';

function usageError(pattern: RegExp): (error: unknown) => boolean {
  return (error) => error instanceof MetricUsageError && pattern.test(error.message);
}

describe('metrics registry', () => {
  it('renders counters, gauges and histograms in the Prometheus text format', () => {
    const r = new MetricsRegistry();
    const c = r.counter('x_total', 'Things.', ['mode']);
    c.inc({ mode: 'Block' });
    c.inc({ mode: 'Block' }, 2);
    const g = r.gauge('y', 'Level.', ['a']);
    g.set({ a: 'q"\\\n' }, 1.5);
    const h = r.histogram('z_seconds', 'Latency.', [], [0.1, 1]);
    h.observe({}, 0.05);
    h.observe({}, 0.5);
    assert.equal(
      r.render(),
      [
        '# HELP x_total Things.',
        '# TYPE x_total counter',
        'x_total{mode="Block"} 3',
        '# HELP y Level.',
        '# TYPE y gauge',
        'y{a="q\\"\\\\\\n"} 1.5',
        '# HELP z_seconds Latency.',
        '# TYPE z_seconds histogram',
        'z_seconds_bucket{le="0.1"} 1',
        'z_seconds_bucket{le="1"} 2',
        'z_seconds_bucket{le="+Inf"} 2',
        'z_seconds_sum 0.55',
        'z_seconds_count 2',
        '',
      ].join('\n'),
    );
  });

  it('refuses to register a metric twice', () => {
    const r = new MetricsRegistry();
    r.counter('a_total', 'A.');
    assert.throws(() => r.counter('a_total', 'A.'), usageError(/registered twice/u));
  });

  it('escapes backslashes and newlines in HELP text (quotes stay), and a parser reads it back', () => {
    const r = new MetricsRegistry();
    r.gauge('paths', 'Paths like C:\\disks and "quoted"\nsecond line.').set({}, 1);
    const text = r.render();
    assert.match(text, /^# HELP paths Paths like C:\\\\disks and "quoted"\\nsecond line\.$/mu);
    assert.equal(parsePrometheusText(text).get('paths')?.help, 'Paths like C:\\disks and "quoted"\nsecond line.');
  });

  it('a counter refuses to go down (negative, NaN or infinite increments): a typed error', () => {
    const c = new MetricsRegistry().counter('x_total', 'X.');
    for (const by of [-1, NaN, Infinity]) {
      assert.throws(
        () => {
          c.inc({}, by);
        },
        usageError(/counter x_total: cannot increase by/u),
      );
    }
    c.inc({}, 0);
    assert.equal(c.get(), 0);
  });

  it('an unknown label is refused loudly on counters, gauges and histograms, not dropped', () => {
    const r = new MetricsRegistry();
    const c = r.counter('req_total', 'R.', ['method']);
    const g = r.gauge('level', 'L.', ['storageclass']);
    const h = r.histogram('lat_seconds', 'L.', ['method']);
    assert.throws(
      () => {
        c.inc({ method: 'create', verb: 'x' });
      },
      usageError(/metric req_total: unknown label "verb" \(its labels: method\)/u),
    );
    assert.throws(
      () => {
        g.set({ class: 'fast' }, 1);
      },
      usageError(/unknown label "class"/u),
    );
    assert.throws(
      () => {
        h.observe({ mode: 'Block' }, 1);
      },
      usageError(/unknown label "mode"/u),
    );
    assert.equal(r.render().includes('req_total{'), false, 'nothing was recorded');
    assert.throws(() => r.gauge('bad-name', 'B.'), usageError(/invalid metric name/u));
    assert.throws(() => r.gauge('ok', 'B.', ['__reserved']), usageError(/invalid label name/u));
  });

  it('renders the agent registry as valid text format 0.0.4, process and runtime series with their types', () => {
    const families = parsePrometheusText(createAgentMetrics().registry.render());
    const types: Record<string, string> = {
      process_cpu_seconds_total: 'counter',
      process_cpu_user_seconds_total: 'counter',
      process_cpu_system_seconds_total: 'counter',
      process_start_time_seconds: 'gauge',
      process_resident_memory_bytes: 'gauge',
      process_virtual_memory_bytes: 'gauge',
      process_heap_bytes: 'gauge',
      process_open_fds: 'gauge',
      process_max_fds: 'gauge',
      nodejs_eventloop_lag_seconds: 'gauge',
      nodejs_eventloop_lag_p99_seconds: 'gauge',
      nodejs_gc_duration_seconds: 'histogram',
      nodejs_heap_size_total_bytes: 'gauge',
      nodejs_heap_size_used_bytes: 'gauge',
      nodejs_external_memory_bytes: 'gauge',
      nodejs_active_resources_total: 'gauge',
      nodejs_version_info: 'gauge',
    };
    for (const [name, type] of Object.entries(types)) assert.equal(families.get(name)?.type, type, name);
    const value = (name: string): number | undefined => families.get(name)?.samples[0]?.value;
    assert.ok((value('process_open_fds') ?? 0) > 0);
    assert.ok((value('process_resident_memory_bytes') ?? 0) > 1e6);
    assert.ok((value('process_cpu_seconds_total') ?? 0) > 0);
  });

  it('exports the counters and histograms of known label values at 0 before their first event (rate() misses a first sample)', () => {
    const registry = new MetricsRegistry();
    const counter = registry
      .counter('c_total', 'c', ['result'])
      .declare([{ result: 'applied' }, { result: 'rejected' }]);
    registry.histogram('h_seconds', 'h', ['mode'], [1]).declare([{ mode: 'Block' }]);
    counter.inc({ result: 'rejected' });
    counter.declare([{ result: 'rejected' }]);
    const families = parsePrometheusText(registry.render());
    const sample = (name: string, labels: Record<string, string>): number | undefined =>
      families
        .get(name)
        ?.samples.find((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))?.value;
    assert.equal(sample('c_total', { result: 'applied' }), 0);
    assert.equal(sample('c_total', { result: 'rejected' }), 1, 'declaring again keeps the count');
    assert.equal(families.get('h_seconds')?.samples.length, 4, 'two buckets, sum and count');
    assert.ok(families.get('h_seconds')?.samples.every((s) => s.value === 0 && s.labels['mode'] === 'Block'));

    const agent = parsePrometheusText(createAgentMetrics().registry.render());
    const zero = (name: string): string[] =>
      (agent.get(name)?.samples ?? []).filter((s) => s.value === 0).map((s) => Object.values(s.labels).join('/'));
    assert.deepEqual(zero('local_volume_provisioner_persistentvolume_delete_total'), [
      'Filesystem/process',
      'Filesystem/job',
      'Block/process',
      'Block/job',
    ]);
    assert.deepEqual(zero('local_volume_provisioner_persistentvolume_discovery_total'), ['Filesystem', 'Block']);
    assert.deepEqual(zero('local_volume_provisioner_discovery_passes_total'), ['ok', 'problems', 'error']);
  });

  it("keeps upstream's metric names", () => {
    const text = createAgentMetrics().registry.render();
    for (const name of [
      'local_volume_provisioner_persistentvolume_discovery_total',
      'local_volume_provisioner_persistentvolume_discovery_duration_seconds',
      'local_volume_provisioner_persistentvolume_capacity_bytes',
      'local_volume_provisioner_apiserver_requests_total',
      'local_volume_provisioner_apiserver_requests_failed_total',
      'local_volume_provisioner_apiserver_requests_duration_seconds',
    ]) {
      assert.match(text, new RegExp(`^# TYPE ${name} `, 'mu'), name);
    }
  });
});
