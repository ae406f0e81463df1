// `provisioner rollout controller` as one running service: the metrics server, leader election and
// the staged rollout controller, started in order and stopped in the order that keeps two replicas
// from writing at once (stop campaigning, let the last pass finish, then release the lease).
// Modelled on the node cleanup's service (src/core/node-cleanup/service.ts).
import { startHttpServer } from '../agent/http.js';
import type { RunningHttpServer } from '../agent/http.js';
import type { Clock } from '../clock.js';
import { StartupError } from '../errors.js';
import type { Cluster, LeaseCluster } from '../kube/cluster.js';
import { EventRecorder } from '../kube/events.js';
import { LeaderElector } from '../kube/leader-election.js';
import type { LeaderElectionTiming } from '../kube/leader-election.js';
import type { Logger } from '../log.js';
import { createRolloutMetrics } from '../metrics/rollout-metrics.js';
import type { RolloutMetrics } from '../metrics/rollout-metrics.js';
import { errorMessage } from '../unknown-values.js';
import { ROLLOUT_CONTROLLER_COMPONENT, RolloutController } from './controller.js';
import type { RolloutControllerSettings } from './controller.js';
import { describePolicy } from './policy.js';

export interface RolloutControllerServiceOptions {
  readonly settings: RolloutControllerSettings;
  /** `[host]:port` of /metrics, /healthz and /readyz; empty: no server. */
  readonly listenAddress: string;
  readonly metricsPath: string;
  /** This replica, in leader election and as the events' source host. */
  readonly identity: string;
  /** The Lease to elect a leader on; undefined: this replica always acts (one replica only). */
  readonly leaderElection:
    { readonly name: string; readonly namespace: string; readonly timing: LeaderElectionTiming } | undefined;
}

export interface RolloutControllerServiceDeps {
  readonly cluster: Cluster & LeaseCluster;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly random?: () => number;
}

export interface RunningRolloutController {
  readonly metrics: RolloutMetrics;
  readonly controller: RolloutController;
  /** The metrics server's port (0 when disabled). */
  readonly port: number;
  /** Stops writing, then releases the lease; resolves when everything has stopped. */
  stop(): Promise<void>;
}

export async function startRolloutController(
  options: RolloutControllerServiceOptions,
  deps: RolloutControllerServiceDeps,
): Promise<RunningRolloutController> {
  const { cluster, clock, logger } = deps;
  const { namespace, name } = options.settings;
  // What it cannot do without: fail the start (exit 5) rather than retry forever unseen.
  try {
    await cluster.configMaps.list({ namespace, fieldSelector: `metadata.name=${name}`, limit: 1 });
  } catch (err) {
    throw new StartupError(`cannot list ConfigMaps in ${namespace}: ${errorMessage(err)}`);
  }
  try {
    await cluster.nodes.listMetadata({ limit: 1 });
  } catch (err) {
    throw new StartupError(`cannot list Nodes: ${errorMessage(err)}`);
  }
  const metrics = createRolloutMetrics();
  const events = new EventRecorder({
    cluster,
    clock,
    logger,
    component: ROLLOUT_CONTROLLER_COMPONENT,
    host: options.identity,
    dropped: metrics.eventsDropped,
  });
  const campaign = new AbortController();
  const acting = new AbortController();
  const holder: { controller?: RolloutController } = {};
  const election = options.leaderElection;
  const elector =
    election === undefined
      ? undefined
      : new LeaderElector({
          leases: cluster.leases,
          name: election.name,
          namespace: election.namespace,
          identity: options.identity,
          timing: election.timing,
          clock,
          logger,
          onLeading: () => {
            metrics.leader.set({}, 1);
            holder.controller?.poke();
          },
          onStoppedLeading: () => {
            metrics.leader.set({}, 0);
          },
        });
  const controller = new RolloutController(options.settings, {
    cluster,
    events,
    clock,
    logger,
    metrics,
    // Without election the process' own lifetime is the term.
    leading:
      elector === undefined ? () => (campaign.signal.aborted ? undefined : campaign.signal) : () => elector.leading,
    ...(deps.random !== undefined ? { random: deps.random } : {}),
  });
  holder.controller = controller;
  metrics.leader.set({}, elector === undefined ? 1 : 0);

  let http: RunningHttpServer | undefined;
  if (options.listenAddress !== '') {
    try {
      http = await startHttpServer({
        listenAddress: options.listenAddress,
        metricsPath: options.metricsPath,
        metrics: () => metrics.registry.render(),
        live: () => ({ ok: true, reason: '' }),
        // Ready once every cache has listed: a follower is ready too (it is waiting to lead).
        ready: () =>
          controller.synced
            ? { ok: true, reason: '' }
            : { ok: false, reason: 'the ConfigMap, Lease and Node caches have not synced yet' },
      });
    } catch (err) {
      throw new StartupError(`cannot listen on ${options.listenAddress}: ${errorMessage(err)}`);
    }
  }
  logger.log('info', 'staged rollout controller started', {
    identity: options.identity,
    configMap: `${namespace}/${name}`,
    instance: options.settings.instance,
    policy: describePolicy(options.settings.policy),
    lease: election === undefined ? 'none (leader election off)' : `${election.namespace}/${election.name}`,
  });
  const campaigning = elector?.run(campaign.signal) ?? Promise.resolve();
  const running = controller.run(acting.signal);
  let stopping: Promise<void> | undefined;
  return {
    metrics,
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
