import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MetricsRegistry } from '../../../src/core/metrics/registry.js';
import { createAgentMetrics } from '../../../src/core/metrics/agent-metrics.js';

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
    assert.throws(() => r.counter('a_total', 'A.'), /registered twice/u);
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
