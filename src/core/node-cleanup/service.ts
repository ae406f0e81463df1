// `provisioner node-cleanup` as one running service: the metrics server, leader election and the
// controller, started in order and stopped in the order that keeps two replicas from acting at
// once (stop campaigning, let the last pass finish, then release the lease to a successor).
import { startHttpServer } from '../agent/http.js';
import type { RunningHttpServer } from '../agent/http.js';
import type { Clock } from '../clock.js';
import { StartupError } from '../errors.js';
import type { Cluster, LeaseCluster, NodeCleanupCluster } from '../kube/cluster.js';
import { EventRecorder } from '../kube/events.js';
import { LeaderElector } from '../kube/leader-election.js';
import type { LeaderElectionTiming } from '../kube/leader-election.js';
import type { Logger } from '../log.js';
import { createNodeCleanupMetrics } from '../metrics/node-cleanup-metrics.js';
import type { NodeCleanupMetrics } from '../metrics/node-cleanup-metrics.js';
import { NodeCleanupController } from './controller.js';
import type { NodeCleanupSettings } from './controller.js';
import { errorMessage } from '../unknown-values.js';

export const NODE_CLEANUP_COMPONENT = 'local-volume-node-cleanup';

export interface NodeCleanupServiceOptions {
  readonly settings: NodeCleanupSettings;
  /** `[host]:port` of /metrics, /healthz and /readyz; empty: no server (as upstream). */
  readonly listenAddress: string;
  readonly metricsPath: string;
  /** This replica, in leader election and as the events' source host. */
  readonly identity: string;
  /** The Lease to elect a leader on; undefined: this replica always acts (one replica only). */
  readonly leaderElection:
    { readonly name: string; readonly namespace: string; readonly timing: LeaderElectionTiming } | undefined;
}

export interface NodeCleanupServiceDeps {
  readonly cluster: Cluster & LeaseCluster & NodeCleanupCluster;
  readonly clock: Clock;
  readonly logger: Logger;
}

export interface RunningNodeCleanup {
  readonly metrics: NodeCleanupMetrics;
  readonly controller: NodeCleanupController;
  /** The metrics server's port (0 when disabled). */
  readonly port: number;
  /** Stops acting, then releases the lease; resolves when everything has stopped. */
  stop(): Promise<void>;
}

export async function startNodeCleanup(
  options: NodeCleanupServiceOptions,
  deps: NodeCleanupServiceDeps,
): Promise<RunningNodeCleanup> {
  const { cluster, clock, logger } = deps;
  try {
    await cluster.nodes.listMetadata({ limit: 1 });
  } catch (err) {
    throw new StartupError(`cannot list Nodes: ${errorMessage(err)}`);
  }
  const metrics = createNodeCleanupMetrics();
  const events = new EventRecorder({
    cluster,
    clock,
    logger,
    component: NODE_CLEANUP_COMPONENT,
    host: options.identity,
    dropped: metrics.eventsDropped,
  });
  const campaign = new AbortController();
  const acting = new AbortController();
  const holder: { controller?: NodeCleanupController } = {};
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
  const controller = new NodeCleanupController(options.settings, {
    cluster,
    events,
    clock,
    logger,
    metrics,
    // Without election the process' own lifetime is the term.
    leading:
      elector === undefined ? () => (campaign.signal.aborted ? undefined : campaign.signal) : () => elector.leading,
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
        // Ready once both caches have listed: a follower is ready too (it is waiting to lead).
        ready: () =>
          controller.nodes.lastSync > 0 && controller.volumes.lastSync > 0
            ? { ok: true, reason: '' }
            : { ok: false, reason: 'the Node and PersistentVolume caches have not synced yet' },
      });
    } catch (err) {
      throw new StartupError(`cannot listen on ${options.listenAddress}: ${errorMessage(err)}`);
    }
  }
  logger.log('info', 'node cleanup started', {
    identity: options.identity,
    storageClasses: [...options.settings.storageClassNames],
    gracePeriod: `${String(options.settings.gracePeriodMs)}ms`,
    dryRun: options.settings.dryRun,
    lease: election === undefined ? 'none (leader election off)' : `${election.namespace}/${election.name}`,
  });
  if (options.settings.storageClassNames.size === 0) {
    logger.log('warn', 'no --storageclass-names: nothing is cleaned up (as upstream)');
  }
  const campaigning = elector?.run(campaign.signal) ?? Promise.resolve();
  const running = controller.run(acting.signal);
  let stopping: Promise<void> | undefined;
  return {
    metrics,
    controller,
    port: http?.port ?? 0,
    stop: () =>
      (stopping ??= (async () => {
        // The term ends first: a delete checks it right before it is sent.
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
