// Reload metrics (docs/reload.md; names follow Prometheus/Alertmanager's config_* series).
import type { Counter, Gauge, Histogram } from './registry.js';
import type { MetricsRegistry } from './registry.js';

const P = 'local_volume_provisioner';

export interface ReloadMetrics {
  readonly lastReloadSuccessful: Gauge;
  readonly lastReloadSuccessTimestamp: Gauge;
  readonly configHash: Gauge;
  readonly configInfo: Gauge;
  readonly reloads: Counter;
  readonly watchEvents: Counter;
  readonly generation: Gauge;
  readonly restartDuration: Histogram;
  readonly reloadPending: Gauge;
  readonly reloadRefused: Gauge;
  readonly configSourceState: Gauge;
}

/** `outcomes`: every result a reload can have, each series exported at 0 until its first reload. */
export function createReloadMetrics(registry: MetricsRegistry, outcomes: readonly string[]): ReloadMetrics {
  return {
    lastReloadSuccessful: registry.gauge(
      `${P}_config_last_reload_successful`,
      'Whether the last config reload attempt succeeded (1) or not (0).',
    ),
    lastReloadSuccessTimestamp: registry.gauge(
      `${P}_config_last_reload_success_timestamp_seconds`,
      'Time of the last successful config reload.',
    ),
    configHash: registry.gauge(
      `${P}_config_hash`,
      'Hash of the applied config, truncated to 48 bits to fit a float64 exactly.',
    ),
    configInfo: registry.gauge(`${P}_config_info`, 'The applied config: full hash and generation.', [
      'hash',
      'generation',
    ]),
    reloads: registry
      .counter(`${P}_config_reloads_total`, 'Config reloads, by result.', ['result'])
      .declare(outcomes.map((result) => ({ result }))),
    watchEvents: registry.counter(`${P}_config_watch_events_total`, 'Reload triggers, by source.', ['source']),
    generation: registry.gauge(`${P}_config_generation`, 'Number of the sync-loop generation serving.'),
    restartDuration: registry.histogram(
      `${P}_sync_loop_restart_duration_seconds`,
      'Stopping the old generation and starting the new one until its caches synced.',
      [],
      [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    ),
    reloadPending: registry.gauge(`${P}_config_reload_pending`, 'Whether a reload waits behind the one running.'),
    reloadRefused: registry.gauge(
      `${P}_config_reload_refused`,
      'Whether the last reload was refused by the reload guard (the config read waits for `reload --allow` or a restart).',
    ),
    configSourceState: registry.gauge(
      `${P}_config_source_state`,
      'State of the config source (1 for the current state): ok; unreachable (API source: the last good config stays); deleted (the ConfigMap was deleted, ignored); fallback (the mounted directory serves until the ConfigMap can be read).',
      ['kind', 'state'],
    ),
  };
}

/** First 48 bits of a `sha256:<hex>` hash as a number (Alertmanager's trick). */
export function hash48(hash: string): number {
  const hex = hash.replace(/^sha256:/u, '').slice(0, 12);
  return hex === '' ? 0 : Number.parseInt(hex, 16);
}
