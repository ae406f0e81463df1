// Assembles a leader-elected controller process (`provisioner node-cleanup`, `provisioner rollout
// controller`): the real cluster, the service, signals; keeps the process alive until
// SIGTERM/SIGINT, then stops it (releasing the leader lease) within a deadline.
import { systemClock } from '../core/clock.js';
import type { Clock } from '../core/clock.js';
import type { RestCluster } from '../core/kube/rest-cluster.js';
import type { LeaderElectedServiceOptions } from '../core/leader-elected/service.js';
import type { Logger } from '../core/log.js';
import { connectCluster } from './cluster-connection.js';
import type { ClusterProcessOptions, Product } from './cluster-connection.js';
import { stopWithin, untilStopSignal } from './lifecycle.js';
import { StderrLogger } from './logger.js';

export interface RunElectedProcessOptions<O extends LeaderElectedServiceOptions> extends ClusterProcessOptions {
  /** An empty lease namespace: the kubeconfig context's, else default. */
  readonly service: O;
  readonly product: Product;
}

export interface ElectedProcessDeps {
  readonly cluster: RestCluster;
  readonly clock: Clock;
  readonly logger: Logger;
}

/** `election` with its namespace filled in from `fallback` when it was left empty. */
export function leaseIn(
  election: LeaderElectedServiceOptions['leaderElection'],
  fallback: string,
): LeaderElectedServiceOptions['leaderElection'] {
  return election === undefined || election.namespace !== '' ? election : { ...election, namespace: fallback };
}

/**
 * Connects, starts the service (given the kubeconfig context's namespace, else `default`, for
 * what was left empty), and runs it until a stop signal.
 */
export async function runElectedProcess<O extends LeaderElectedServiceOptions>(
  options: RunElectedProcessOptions<O>,
  start: (service: O, deps: ElectedProcessDeps, contextNamespace: string) => Promise<{ stop(): Promise<void> }>,
): Promise<void> {
  const logger = new StderrLogger(options.logLevel, options.logFormat);
  const rest = await connectCluster({
    kubeconfig: options.kubeconfig,
    inCluster: options.inCluster,
    qps: options.qps,
    burst: options.burst,
    clock: systemClock,
    product: options.product,
  });
  const { stopped, uninstall } = untilStopSignal();
  try {
    const deps = { cluster: rest, clock: systemClock, logger };
    const service = await start(options.service, deps, rest.contextNamespace ?? 'default');
    const signal = await stopped;
    logger.log('info', 'stopping', { signal });
    await stopWithin(service.stop(), options.shutdownTimeoutMs, logger);
  } finally {
    uninstall();
    rest.close();
  }
}
