// Connection to the real cluster: a kubeconfig when one is given (KUBECONFIG / --kubeconfig, a
// path list like kubectl's), else the pod's service account. The commands a person runs (from a
// laptop or in a pod) also look for ~/.kube/config first, as kubectl does.
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { systemClock } from '../core/clock.js';
import type { Clock } from '../core/clock.js';
import { StartupError } from '../core/errors.js';
import { inClusterSettings, KubeconfigError, loadKubeconfig } from '../core/kube/kubeconfig.js';
import { RestCluster } from '../core/kube/rest-cluster.js';
import { nodeProcessHost } from '../core/process-host.js';

/** The product as package.json names it (oclif's config.name and config.version). */
/** What a process that talks to the cluster is told: where it is, the client's rate, the stop and the logs. */
export interface ClusterProcessOptions {
  readonly kubeconfig: string | undefined;
  readonly inCluster: { readonly host: string | undefined; readonly port: string | undefined };
  readonly qps: number;
  readonly burst: number;
  readonly shutdownTimeoutMs: number;
  readonly logLevel: 'debug' | 'info' | 'warn' | 'error';
  readonly logFormat: 'text' | 'json';
}

export interface Product {
  readonly name: string;
  readonly version: string;
}

/**
 * How every request names the product, as Kubernetes clients do: the User-Agent
 * `<name>/<version> (<os>/<arch>) node/<version>` and the field manager `<name>/<version>` (the
 * managedFields of the objects it writes say which release wrote them).
 */
export function clientIdentity(product: Product): { readonly userAgent: string; readonly fieldManager: string } {
  const id = `${product.name}/${product.version}`;
  return { userAgent: `${id} (${process.platform}/${process.arch}) node/${process.version}`, fieldManager: id };
}

/** Where the in-cluster apiserver is, from the variables kubelet sets in every pod. */
export function inClusterAddress(env: Readonly<Record<string, string | undefined>> = process.env): {
  readonly host: string | undefined;
  readonly port: string | undefined;
} {
  return { host: env['KUBERNETES_SERVICE_HOST'], port: env['KUBERNETES_SERVICE_PORT'] };
}

export interface ConnectOptions {
  readonly product: Product;
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
        ? await loadKubeconfig(options.kubeconfig.split(':'), {
            environment: options.environment ?? process.env,
            host: nodeProcessHost,
          })
        : await inClusterSettings({ host: options.inCluster.host, port: options.inCluster.port });
    // Run an exec plugin (or OIDC) now, so a failing one is a start-up error naming the kubeconfig.
    await connection.credentials?.get();
    return new RestCluster({
      connection,
      clock: options.clock,
      qps: options.qps,
      burst: options.burst,
      ...clientIdentity(options.product),
    });
  } catch (err) {
    if (err instanceof KubeconfigError) throw new StartupError(`cannot connect to the cluster: ${err.message}`);
    throw err;
  }
}

/**
 * The kubeconfig of a command a person runs, chosen as kubectl chooses it: --kubeconfig or
 * KUBECONFIG, else ~/.kube/config when that file exists, else none (the pod's service account).
 * In the image there is no ~/.kube/config, so a command run in the pod keeps its service account.
 */
export function commandKubeconfig(
  kubeconfig: string | undefined,
  env: Readonly<Record<string, string | undefined>> = process.env,
  exists: (path: string) => boolean = existsSync,
): string | undefined {
  if (kubeconfig !== undefined && kubeconfig !== '') return kubeconfig;
  const home = env['HOME'] !== undefined && env['HOME'] !== '' ? env['HOME'] : homedir();
  const path = join(home, '.kube', 'config');
  return exists(path) ? path : undefined;
}

/**
 * The connection of a command that reads a little and exits (simulate, rollout status and the
 * rollout requests, the dashboard's fleet pane): --kubeconfig (KUBECONFIG), else ~/.kube/config,
 * else the pod's service account, at a modest rate limit.
 */
export async function connectCommandCluster(kubeconfig: string | undefined, product: Product): Promise<RestCluster> {
  const chosen = commandKubeconfig(kubeconfig);
  try {
    return await connectCluster({
      kubeconfig: chosen,
      inCluster: inClusterAddress(),
      qps: 50,
      burst: 100,
      clock: systemClock,
      product,
    });
  } catch (err) {
    if (chosen === undefined && err instanceof StartupError) {
      throw new StartupError(
        `${err.message} (no kubeconfig: --kubeconfig and KUBECONFIG are unset and there is no ~/.kube/config, so the pod's service account was tried)`,
      );
    }
    throw err;
  }
}
