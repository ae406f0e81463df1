// Assembles `provisioner node-cleanup`: the real cluster, the service, signals; keeps the process
// alive until SIGTERM/SIGINT, then stops it (releasing the leader lease) within a deadline.
import { systemClock } from '../core/clock.js';
import type { NodeCleanupServiceOptions } from '../core/node-cleanup/service.js';
import { startNodeCleanup } from '../core/node-cleanup/service.js';
import { connectCluster } from './cluster-connection.js';
import type { Product } from './cluster-connection.js';
import { stopWithin, untilStopSignal } from './lifecycle.js';
import { StderrLogger } from './logger.js';

export interface RunNodeCleanupOptions {
  readonly service: NodeCleanupServiceOptions;
  readonly product: Product;
  readonly kubeconfig: string | undefined;
  readonly inCluster: { readonly host: string | undefined; readonly port: string | undefined };
  readonly qps: number;
  readonly burst: number;
  readonly shutdownTimeoutMs: number;
  readonly logLevel: 'debug' | 'info' | 'warn' | 'error';
  readonly logFormat: 'text' | 'json';
}

export async function runNodeCleanupProcess(options: RunNodeCleanupOptions): Promise<void> {
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
    const election = options.service.leaderElection;
    const service = await startNodeCleanup(
      election === undefined || election.namespace !== ''
        ? options.service
        : {
            ...options.service,
            leaderElection: { ...election, namespace: rest.contextNamespace ?? 'default' },
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
