// `provisioner node-cleanup` as one running service: the metrics server, leader election and the
// controller, started in order and stopped in the order that keeps two replicas from acting at
// once (stop campaigning, let the last pass finish, then release the lease to a successor): the
// shape both controllers share (src/core/leader-elected-service.ts).
import { StartupError } from '../errors.js';
import type { Cluster, LeaseCluster, NodeCleanupCluster } from '../kube/cluster.js';
import { startLeaderElectedService } from '../leader-elected/service.js';
import type {
  LeaderElectedServiceDeps,
  LeaderElectedServiceOptions,
  RunningElectedService,
} from '../leader-elected/service.js';
import { createNodeCleanupMetrics } from '../metrics/node-cleanup-metrics.js';
import type { NodeCleanupMetrics } from '../metrics/node-cleanup-metrics.js';
import { NodeCleanupController } from './controller.js';
import type { NodeCleanupSettings } from './controller.js';
import { errorMessage } from '../unknown-values.js';

export const NODE_CLEANUP_COMPONENT = 'local-volume-node-cleanup';

export interface NodeCleanupServiceOptions extends LeaderElectedServiceOptions {
  readonly settings: NodeCleanupSettings;
}

export interface NodeCleanupServiceDeps extends LeaderElectedServiceDeps {
  readonly cluster: Cluster & LeaseCluster & NodeCleanupCluster;
}

export interface RunningNodeCleanup extends RunningElectedService<NodeCleanupController> {
  readonly metrics: NodeCleanupMetrics;
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
  const { settings } = options;
  const service = await startLeaderElectedService(options, deps, {
    component: NODE_CLEANUP_COMPONENT,
    metrics,
    controller: (events, leading) =>
      new NodeCleanupController(settings, { cluster, events, clock, logger, metrics, leading }),
    ready: (controller) =>
      controller.nodes.lastSync > 0 && controller.volumes.lastSync > 0
        ? { ok: true, reason: '' }
        : { ok: false, reason: 'the Node and PersistentVolume caches have not synced yet' },
    started: (lease) => {
      logger.log('info', 'node cleanup started', {
        identity: options.identity,
        storageClasses: [...settings.storageClassNames],
        gracePeriod: `${String(settings.gracePeriodMs)}ms`,
        dryRun: settings.dryRun,
        lease,
      });
      if (settings.storageClassNames.size === 0)
        logger.log('warn', 'no --storageclass-names: nothing is cleaned up (as upstream)');
    },
  });
  return { ...service, metrics };
}
