// The flags every leader-elected controller command shares (`node-cleanup`, `rollout controller`),
// checked and read into the service's common options and the process' options: a bad value is a
// UsageError naming its flag, before anything connects.
import { UsageError } from '../core/errors.js';
import type { LeaderElectedServiceOptions } from '../core/leader-elected/service.js';
import { errorMessage } from '../core/unknown-values.js';
import type { Product } from './cluster-connection.js';
import { durationFlagMs } from './duration-flag.js';
import type { RunElectedProcessOptions } from './run-elected-service.js';

/** The shared flags as oclif parsed them. */
export interface ElectedFlags {
  readonly 'listen-address': string;
  readonly 'metrics-path': string;
  readonly 'leader-elect': boolean;
  readonly 'leader-elect-lease-name': string;
  readonly 'leader-elect-lease-namespace'?: string | undefined;
  readonly 'leader-elect-identity'?: string | undefined;
  readonly 'leader-elect-lease-duration': string;
  readonly 'leader-elect-renew-deadline': string;
  readonly 'leader-elect-retry-period': string;
  readonly kubeconfig?: string | undefined;
  readonly 'kube-api-qps': number;
  readonly 'kube-api-burst': number;
  readonly 'shutdown-timeout': string;
  readonly 'log-level': string;
  readonly 'log-format': string;
}

export function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === '' ? undefined : value;
}

async function checkServer(flags: ElectedFlags): Promise<void> {
  if (!flags['metrics-path'].startsWith('/'))
    throw new UsageError(`--metrics-path: must start with "/", found ${JSON.stringify(flags['metrics-path'])}`);
  if (flags['listen-address'] === '') return;
  const { parseListenAddress } = await import('../core/agent/http.js');
  try {
    parseListenAddress(flags['listen-address']);
  } catch (err) {
    throw new UsageError(`--listen-address: ${errorMessage(err)}`);
  }
}

/**
 * The service's common options and the process' options from the shared flags. `namespace`: the
 * lease's namespace when its flag is not given (else POD_NAMESPACE; '' is resolved once connected);
 * `names`: more flags whose values must be DNS-1123 subdomains.
 */
export async function electedOptions(
  flags: ElectedFlags,
  product: Product,
  environment: Readonly<Record<string, string | undefined>>,
  more: {
    readonly namespace?: string | undefined;
    readonly names?: readonly (readonly [string, string | undefined])[];
  },
): Promise<
  Omit<RunElectedProcessOptions<LeaderElectedServiceOptions>, 'service'> & { service: LeaderElectedServiceOptions }
> {
  await checkServer(flags);
  const ms = (flag: keyof ElectedFlags): number => durationFlagMs(flag, String(flags[flag]));
  const timing = {
    leaseDurationMs: ms('leader-elect-lease-duration'),
    renewDeadlineMs: ms('leader-elect-renew-deadline'),
    retryPeriodMs: ms('leader-elect-retry-period'),
  };
  const { leaderElectionTimingProblem } = await import('../core/kube/leader-election.js');
  const timingProblem = leaderElectionTimingProblem(timing);
  if (timingProblem !== undefined) throw new UsageError(`--leader-elect-*: ${timingProblem}`);
  const leaseName = flags['leader-elect-lease-name'];
  const leaseNamespace =
    flags['leader-elect-lease-namespace'] ?? more.namespace ?? nonEmpty(environment['POD_NAMESPACE']);
  const { dns1123SubdomainErrors } = await import('../core/kube/validation.js');
  for (const [flag, value] of [
    ...(more.names ?? []),
    ['leader-elect-lease-name', leaseName],
    ['leader-elect-lease-namespace', leaseNamespace],
  ] as const) {
    const problems = value === undefined ? [] : dns1123SubdomainErrors(value);
    if (problems.length > 0) throw new UsageError(`--${flag}: ${problems.join('; ')}`);
  }
  const { hostname } = await import('node:os');
  const { randomUUID } = await import('node:crypto');
  const identity =
    flags['leader-elect-identity'] ?? nonEmpty(environment['POD_NAME']) ?? `${hostname()}_${randomUUID()}`;
  const { inClusterAddress } = await import('./cluster-connection.js');
  return {
    service: {
      listenAddress: flags['listen-address'],
      metricsPath: flags['metrics-path'],
      identity,
      // '' is resolved once connected: the kubeconfig context's namespace, else default.
      leaderElection: flags['leader-elect'] ? { name: leaseName, namespace: leaseNamespace ?? '', timing } : undefined,
    },
    product,
    kubeconfig: flags.kubeconfig,
    inCluster: inClusterAddress(),
    qps: flags['kube-api-qps'],
    burst: flags['kube-api-burst'],
    shutdownTimeoutMs: ms('shutdown-timeout'),
    logLevel: flags['log-level'] as 'debug' | 'info' | 'warn' | 'error',
    logFormat: flags['log-format'] as 'text' | 'json',
  };
}
