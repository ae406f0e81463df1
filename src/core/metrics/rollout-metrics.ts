// The staged rollout controller's metrics (docs/observability.md): the stored rollout's phase and
// waves, its open waves' nodes against the candidate, and counters of halts and completions.
import type { Counter, Gauge } from './registry.js';
import { MetricsRegistry } from './registry.js';

const P = 'local_volume_rollout';

export interface RolloutMetrics {
  readonly registry: MetricsRegistry;
  /** `phase`: 1 for the stored rollout's phase, 0 for the others (all 0 before any state). */
  readonly phase: Gauge;
  readonly wavesOpened: Gauge;
  readonly waves: Gauge;
  /** `state`: applied, pending or failed: the nodes of the open waves against the candidate. */
  readonly nodes: Gauge;
  readonly halts: Counter;
  readonly completed: Counter;
  /** 1 while this replica holds the leader Lease. */
  readonly leader: Gauge;
  /** Writes of the stable or candidate copy that failed (a conflict excepted), by copy. */
  readonly writeFailures: Counter;
  readonly eventsDropped: Counter;
}

export function createRolloutMetrics(registry = new MetricsRegistry()): RolloutMetrics {
  return {
    registry,
    phase: registry.gauge(`${P}_phase`, "1 for the staged rollout's current phase, 0 for the others.", ['phase']),
    wavesOpened: registry.gauge(`${P}_waves_opened`, 'Waves of the current rollout that are open.'),
    waves: registry.gauge(`${P}_waves`, 'Waves of the current rollout.'),
    nodes: registry.gauge(
      `${P}_nodes`,
      'Nodes of the open waves by state against the candidate: applied, pending or failed.',
      ['state'],
    ),
    halts: registry.counter(`${P}_halts_total`, 'Rollouts halted by the controller (a node failed, or a deadline).'),
    completed: registry.counter(
      `${P}_completed_total`,
      'Rollouts completed (every wave applied and baked, or promoted): the candidate became stable.',
    ),
    leader: registry.gauge(`${P}_leader`, '1 while this replica is the elected leader and acts, else 0.'),
    writeFailures: registry.counter(
      `${P}_write_failures_total`,
      'Writes of the stable or candidate ConfigMap that failed (conflicts excepted), by copy.',
      ['copy'],
    ),
    eventsDropped: registry.counter(`${P}_events_dropped_total`, 'Kubernetes Events dropped (queue full or shutdown).'),
  };
}
