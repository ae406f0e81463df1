// `provisioner rollout controller` as one running service: the metrics server, leader election and
// the staged rollout controller, started in order and stopped in the order that keeps two replicas
// from writing at once (stop campaigning, let the last pass finish, then release the lease).
// The shape is the one both controllers share (src/core/leader-elected-service.ts).
import { StartupError } from '../errors.js';
import { startLeaderElectedService } from '../leader-elected/service.js';
import type {
  LeaderElectedServiceDeps,
  LeaderElectedServiceOptions,
  RunningElectedService,
} from '../leader-elected/service.js';
import { createRolloutMetrics } from '../metrics/rollout-metrics.js';
import type { RolloutMetrics } from '../metrics/rollout-metrics.js';
import { errorMessage } from '../unknown-values.js';
import { ROLLOUT_CONTROLLER_COMPONENT, RolloutController } from './controller.js';
import type { RolloutControllerSettings } from './controller.js';
import { describePolicy } from './policy.js';

export interface RolloutControllerServiceOptions extends LeaderElectedServiceOptions {
  readonly settings: RolloutControllerSettings;
}

export interface RolloutControllerServiceDeps extends LeaderElectedServiceDeps {
  readonly random?: () => number;
}

export interface RunningRolloutController extends RunningElectedService<RolloutController> {
  readonly metrics: RolloutMetrics;
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
  const service = await startLeaderElectedService(options, deps, {
    component: ROLLOUT_CONTROLLER_COMPONENT,
    metrics,
    controller: (events, leading) =>
      new RolloutController(options.settings, {
        cluster,
        events,
        clock,
        logger,
        metrics,
        leading,
        ...(deps.random !== undefined ? { random: deps.random } : {}),
      }),
    ready: (controller) =>
      controller.synced
        ? { ok: true, reason: '' }
        : { ok: false, reason: 'the ConfigMap, Lease and Node caches have not synced yet' },
    started: (lease) => {
      logger.log('info', 'staged rollout controller started', {
        identity: options.identity,
        configMap: `${namespace}/${name}`,
        instance: options.settings.instance,
        policy: describePolicy(options.settings.policy),
        lease,
      });
    },
  });
  return { ...service, metrics };
}
