// Assembles `provisioner rollout controller`: the real cluster, the service, signals; keeps the
// process alive until SIGTERM/SIGINT, then stops it (releasing the leader lease) within a deadline.
import { systemClock } from '../core/clock.js';
import type { RolloutControllerServiceOptions } from '../core/staged-rollout/service.js';
import { startRolloutController } from '../core/staged-rollout/service.js';
import { connectCluster } from './cluster-connection.js';
import type { Product } from './cluster-connection.js';
import { stopWithin, untilStopSignal } from './lifecycle.js';
import { StderrLogger } from './logger.js';

export interface RunRolloutControllerOptions {
  /** An empty settings.namespace or lease namespace: the kubeconfig context's, else default. */
  readonly service: RolloutControllerServiceOptions;
  readonly product: Product;
  readonly kubeconfig: string | undefined;
  readonly inCluster: { readonly host: string | undefined; readonly port: string | undefined };
  readonly qps: number;
  readonly burst: number;
  readonly shutdownTimeoutMs: number;
  readonly logLevel: 'debug' | 'info' | 'warn' | 'error';
  readonly logFormat: 'text' | 'json';
}

export async function runRolloutControllerProcess(options: RunRolloutControllerOptions): Promise<void> {
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
    const fallback = rest.contextNamespace ?? 'default';
    const { settings, leaderElection: election } = options.service;
    const service = await startRolloutController(
      {
        ...options.service,
        settings: settings.namespace !== '' ? settings : { ...settings, namespace: fallback },
        leaderElection:
          election === undefined || election.namespace !== '' ? election : { ...election, namespace: fallback },
      },
      { cluster: rest, clock: systemClock, logger },
    );
    const signal = await stopped;
    logger.log('info', 'stopping', { signal });
    await stopWithin(service.stop(), options.shutdownTimeoutMs, logger);
  } finally {
    uninstall();
    rest.close();
  }
}
