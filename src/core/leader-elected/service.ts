// One leader-elected service, the shape both controllers run in (`provisioner rollout controller`,
// `provisioner node-cleanup`): the metrics server, leader election and the controller, started in
// order and stopped in the order that keeps two replicas from acting at once: stop campaigning,
// let the last pass finish, then release the lease to a successor.
import { startHttpServer } from '../agent/http.js';
import type { RunningHttpServer } from '../agent/http.js';
import type { Clock } from '../clock.js';
import { StartupError } from '../errors.js';
import type { Cluster, LeaseCluster } from '../kube/cluster.js';
import { EventRecorder, type EventSink } from '../kube/events.js';
import { LeaderElector } from '../kube/leader-election.js';
import type { LeaderElectionTiming } from '../kube/leader-election.js';
import type { Logger } from '../log.js';
import type { Counter, Gauge, MetricsRegistry } from '../metrics/registry.js';
import { errorMessage } from '../unknown-values.js';

/** What a controller the service runs gets besides its cluster and metrics. */
export interface ElectedControllerDeps {
  readonly events: EventSink;
  readonly clock: Clock;
  readonly logger: Logger;
  /** The leader's current term, undefined while this replica does not lead. */
  readonly leading: () => AbortSignal | undefined;
  readonly random?: () => number;
}

export interface LeaderElectedServiceOptions {
  /** `[host]:port` of /metrics, /healthz and /readyz; empty: no server. */
  readonly listenAddress: string;
  readonly metricsPath: string;
  /** This replica, in leader election and as the events' source host. */
  readonly identity: string;
  /** The Lease to elect a leader on; undefined: this replica always acts (one replica only). */
  readonly leaderElection:
    { readonly name: string; readonly namespace: string; readonly timing: LeaderElectionTiming } | undefined;
}

export interface LeaderElectedServiceDeps {
  readonly cluster: Cluster & LeaseCluster;
  readonly clock: Clock;
  readonly logger: Logger;
}

/** What a controller must offer to run in the service. */
export interface ElectedController {
  /** Acts now (this replica just became the leader). */
  poke(): void;
  /** Runs until the signal aborts. */
  run(signal: AbortSignal): Promise<void>;
}

/** The series every such service has (the rest are the controller's own). */
export interface ElectedServiceMetrics {
  readonly registry: MetricsRegistry;
  /** 1 while this replica holds the leader Lease. */
  readonly leader: Gauge;
  readonly eventsDropped: Counter;
}

/** What the service is made of: its name, metrics, controller and readiness. */
export interface ElectedServiceParts<C extends ElectedController> {
  /** The events' source component. */
  readonly component: string;
  readonly metrics: ElectedServiceMetrics;
  /** The controller, given the events recorder and whether (and until when) this replica leads. */
  controller(events: EventRecorder, leading: () => AbortSignal | undefined): C;
  /** Ready once its caches have listed: a follower is ready too (it is waiting to lead). */
  ready(controller: C): { readonly ok: boolean; readonly reason: string };
  /** Said once everything is built, before it campaigns and runs (the start-up log line). */
  started(lease: string): void;
}

export interface RunningElectedService<C extends ElectedController> {
  readonly controller: C;
  /** The metrics server's port (0 when disabled). */
  readonly port: number;
  /** Stops acting, then releases the lease; resolves when everything has stopped. */
  stop(): Promise<void>;
}

function electorFor(
  options: LeaderElectedServiceOptions,
  deps: LeaderElectedServiceDeps,
  leader: Gauge,
  onLeading: () => void,
): LeaderElector | undefined {
  const election = options.leaderElection;
  if (election === undefined) return undefined;
  return new LeaderElector({
    leases: deps.cluster.leases,
    name: election.name,
    namespace: election.namespace,
    identity: options.identity,
    timing: election.timing,
    clock: deps.clock,
    logger: deps.logger,
    onLeading: () => {
      leader.set({}, 1);
      onLeading();
    },
    onStoppedLeading: () => {
      leader.set({}, 0);
    },
  });
}

async function metricsServer<C extends ElectedController>(
  options: LeaderElectedServiceOptions,
  parts: ElectedServiceParts<C>,
  controller: C,
): Promise<RunningHttpServer | undefined> {
  if (options.listenAddress === '') return undefined;
  try {
    return await startHttpServer({
      listenAddress: options.listenAddress,
      metricsPath: options.metricsPath,
      metrics: () => parts.metrics.registry.render(),
      live: () => ({ ok: true, reason: '' }),
      ready: () => parts.ready(controller),
    });
  } catch (err) {
    throw new StartupError(`cannot listen on ${options.listenAddress}: ${errorMessage(err)}`);
  }
}

/** Builds and starts the service; a listen address it cannot bind is a StartupError. */
export async function startLeaderElectedService<C extends ElectedController>(
  options: LeaderElectedServiceOptions,
  deps: LeaderElectedServiceDeps,
  parts: ElectedServiceParts<C>,
): Promise<RunningElectedService<C>> {
  const { metrics } = parts;
  const events = new EventRecorder({
    cluster: deps.cluster,
    clock: deps.clock,
    logger: deps.logger,
    component: parts.component,
    host: options.identity,
    dropped: metrics.eventsDropped,
  });
  const campaign = new AbortController();
  const acting = new AbortController();
  const holder: { controller?: C } = {};
  const elector = electorFor(options, deps, metrics.leader, () => holder.controller?.poke());
  // Without election the process' own lifetime is the term.
  const leading =
    elector === undefined ? () => (campaign.signal.aborted ? undefined : campaign.signal) : () => elector.leading;
  const controller = parts.controller(events, leading);
  holder.controller = controller;
  metrics.leader.set({}, elector === undefined ? 1 : 0);
  const http = await metricsServer(options, parts, controller);
  const election = options.leaderElection;
  parts.started(election === undefined ? 'none (leader election off)' : `${election.namespace}/${election.name}`);
  const campaigning = elector?.run(campaign.signal) ?? Promise.resolve();
  const running = controller.run(acting.signal);
  let stopping: Promise<void> | undefined;
  return {
    controller,
    port: http?.port ?? 0,
    stop: () =>
      (stopping ??= (async () => {
        // The term ends first: a write checks it right before it is sent.
        campaign.abort();
        await campaigning;
        acting.abort();
        await running;
        await elector?.release();
        metrics.leader.set({}, 0);
        await events.flush();
        await http?.close();
      })()),
  };
}
