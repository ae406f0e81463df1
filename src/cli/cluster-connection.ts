// Connection to the real cluster: a kubeconfig when one is given (KUBECONFIG / --kubeconfig, a
// path list like kubectl's), else the pod's service account.
import type { Clock } from '../core/clock.js';
import { StartupError } from '../core/errors.js';
import { inClusterSettings, KubeconfigError, loadKubeconfig } from '../core/kube/kubeconfig.js';
import { RestCluster } from '../core/kube/rest-cluster.js';

export interface ConnectOptions {
  readonly kubeconfig: string | undefined;
  readonly inCluster: { readonly host: string | undefined; readonly port: string | undefined };
  readonly qps: number;
  readonly burst: number;
  readonly clock: Clock;
  /** The environment an exec credential plugin inherits (default: this process's). */
  readonly environment?: Readonly<Record<string, string | undefined>>;
}

export async function connectCluster(options: ConnectOptions): Promise<RestCluster> {
  try {
    const connection =
      options.kubeconfig !== undefined && options.kubeconfig !== ''
        ? await loadKubeconfig(options.kubeconfig.split(':'), { environment: options.environment ?? process.env })
        : await inClusterSettings({ host: options.inCluster.host, port: options.inCluster.port });
    // Run an exec plugin (or OIDC) now, so a failing one is a start-up error naming the kubeconfig.
    await connection.credentials?.get();
    return new RestCluster({ connection, clock: options.clock, qps: options.qps, burst: options.burst });
  } catch (err) {
    if (err instanceof KubeconfigError) throw new StartupError(`cannot connect to the cluster: ${err.message}`);
    throw err;
  }
}
