// `provisioner run`'s flags and environment → the agent process's options, with the checks that
// make a mistyped flag a usage error (exit 2) rather than a failed start-up. Shared by the oclif
// command (src/commands/run.ts) and the lean entry (run-lean.ts).
import { readFile } from 'node:fs/promises';
import { DEFAULT_RELOAD_GUARD_POLICY, isReloadGuardPolicy } from '../core/config/reload-guard.js';
import { UsageError } from '../core/errors.js';
import { inClusterAddress, type Product } from './cluster-connection.js';
import { CONFIG_DIR_ENV } from './config-dir.js';
import type { AgentOptions } from '../core/agent/agent.js';
import type { RunAgentProcessOptions } from './run-agent.js';
import { errorMessage } from '../core/unknown-values.js';
import type { DurationFloor } from './duration-flag.js';

/** Where a pod finds its namespace when no MY_NAMESPACE is set (the service account's projected volume). */
const SERVICE_ACCOUNT_NAMESPACE_FILE = '/var/run/secrets/kubernetes.io/serviceaccount/namespace';

/** The parsed flags, as oclif types them from RUN_FLAGS (run-flags.ts). */
export interface RunFlagValues {
  readonly 'config-dir': string;
  readonly 'config-source': string;
  readonly 'listen-address': string;
  readonly 'metrics-path': string;
  readonly 'admin-socket': string;
  readonly 'discovery-period': string;
  readonly 'config-sync-period': string;
  readonly 'config-debounce': string;
  readonly 'reload-guard': string;
  readonly 'drain-timeout': string;
  readonly 'start-timeout': string;
  readonly 'change-poll-interval': string;
  readonly 'mount-grace-period': string;
  readonly 'min-pass-interval': string;
  readonly 'create-concurrency': number;
  readonly 'cleanup-concurrency': number;
  readonly 'volume-stats-max-series': number;
  readonly 'kube-api-qps': number;
  readonly 'kube-api-burst': number;
  readonly kubeconfig: string | undefined;
  readonly sandbox: string | undefined;
  readonly 'shutdown-timeout': string;
  readonly 'publish-status': boolean;
  readonly 'status-name': string;
  readonly 'status-heartbeat': string;
  readonly 'log-level': string;
  readonly 'log-format': string;
}

type DurationFlag = {
  [K in keyof RunFlagValues]: RunFlagValues[K] extends string ? K : never;
}[keyof RunFlagValues];

export interface RunContext {
  /** The command's own arguments (after `run`). */
  readonly argv: readonly string[];
  readonly env: Readonly<Record<string, string | undefined>>;
  /** The package's name and version (oclif's config.name and config.version). */
  readonly product: Product;
}

function isLogLevel(v: string): v is RunAgentProcessOptions['logLevel'] {
  return v === 'debug' || v === 'info' || v === 'warn' || v === 'error';
}

/** The options of `run`, after the checks that make a mistyped flag or variable a usage error. */
export async function runAgentOptions(flags: RunFlagValues, context: RunContext): Promise<RunAgentProcessOptions> {
  const { durationFlagMs } = await import('./duration-flag.js');
  const ms = (flag: DurationFlag, floor?: DurationFloor): number => durationFlagMs(flag, flags[flag], floor);
  const env = context.env;
  const sandbox = flags.sandbox;
  await checkServingFlags(flags);
  const nodeName = await checkedNodeName(env, sandbox);
  const configMap = await configMapSource(flags, env, sandbox);
  // The agent's options first: a bad duration among them is reported before the process's.
  const agent = agentOptions(flags, context, { nodeName, configMap, ms });
  return {
    agent,
    product: context.product,
    sandbox,
    configPathExplicit: context.argv.some((a) => a.startsWith('--config-dir')) || env[CONFIG_DIR_ENV] !== undefined,
    adminSocketExplicit:
      context.argv.some((a) => a.startsWith('--admin-socket')) || env['PROVISIONER_ADMIN_SOCKET'] !== undefined,
    environment: env,
    kubeconfig: flags.kubeconfig,
    inCluster: inClusterAddress(env),
    qps: flags['kube-api-qps'],
    burst: flags['kube-api-burst'],
    shutdownTimeoutMs: ms('shutdown-timeout'),
    logLevel: isLogLevel(flags['log-level']) ? flags['log-level'] : 'info',
    logFormat: flags['log-format'] === 'json' ? 'json' : 'text',
    statusLease: flags['publish-status']
      ? { name: flags['status-name'], heartbeatMs: ms('status-heartbeat') }
      : undefined,
  };
}

/** The sandbox, the admin socket, the metrics and health server and the status Lease's name. */
async function checkServingFlags(flags: RunFlagValues): Promise<void> {
  if (flags.sandbox === '') throw new UsageError('--sandbox: needs a directory');
  if (flags['admin-socket'] === '') throw new UsageError('--admin-socket: needs a socket path');
  if (!flags['metrics-path'].startsWith('/'))
    throw new UsageError(`--metrics-path: must start with "/", found ${JSON.stringify(flags['metrics-path'])}`);
  const { parseListenAddress } = await import('../core/agent/http.js');
  try {
    parseListenAddress(flags['listen-address']);
  } catch (err) {
    throw new UsageError(`--listen-address: ${errorMessage(err)}`);
  }
  if (flags['publish-status']) {
    const { statusNameProblem } = await import('../core/fleet/applied-state.js');
    const problem = statusNameProblem(flags['status-name']);
    if (problem !== undefined) throw new UsageError(`--status-name: ${problem}`);
  }
}

/** MY_NODE_NAME, required but in a sandbox, and a valid Node name when set. */
async function checkedNodeName(env: RunContext['env'], sandbox: string | undefined): Promise<string> {
  const nodeName = env['MY_NODE_NAME'] ?? '';
  if (nodeName === '' && sandbox === undefined)
    throw new UsageError('MY_NODE_NAME is not set: the DaemonSet sets it from spec.nodeName');
  if (nodeName !== '') {
    const { nodeNameProblem } = await import('../core/kube/validation.js');
    const problem = nodeNameProblem(nodeName);
    if (problem !== undefined) throw new UsageError(`MY_NODE_NAME: ${problem}`);
  }
  return nodeName;
}

type ConfigMapSource = AgentOptions['configMap'];

/** The ConfigMap of --config-source with its namespace resolved; undefined: the config directory. */
async function configMapSource(
  flags: RunFlagValues,
  env: RunContext['env'],
  sandbox: string | undefined,
): Promise<ConfigMapSource> {
  const { parseRequestedConfigSource } = await import('../core/config/source/port.js');
  const source = parseRequestedConfigSource(flags['config-source']);
  if (!source.ok) throw new UsageError(`--config-source: ${source.message}`);
  if (source.spec.kind === 'directory') return undefined;
  const { kind } = source.spec;
  if (sandbox !== undefined) throw new UsageError('--config-source: a ConfigMap cannot be read with --sandbox');
  const namespace =
    source.spec.namespace ??
    (env['MY_NAMESPACE'] || undefined) ??
    (await readFile(SERVICE_ACCOUNT_NAMESPACE_FILE, 'utf8').then(
      (text) => text.trim() || undefined,
      () => undefined,
    ));
  if (namespace === undefined)
    throw new UsageError(
      `--config-source: no namespace: give ${kind}:NAMESPACE/${source.spec.name}, or set MY_NAMESPACE`,
    );
  return { namespace, name: source.spec.name, ...(kind === 'staged' ? { staged: true } : {}) };
}

/** The agent's own options, from the flags already checked. */
function agentOptions(
  flags: RunFlagValues,
  context: RunContext,
  resolved: {
    readonly nodeName: string;
    readonly configMap: ConfigMapSource;
    readonly ms: (flag: DurationFlag, floor?: DurationFloor) => number;
  },
): AgentOptions {
  const { nodeName, configMap, ms } = resolved;
  const env = context.env;
  return {
    configPath: flags['config-dir'],
    ...(configMap !== undefined ? { configMap } : {}),
    nodeName,
    namespace: env['MY_NAMESPACE'] ?? 'default',
    listenAddress: flags['listen-address'],
    metricsPath: flags['metrics-path'],
    discoveryPeriodMs: ms('discovery-period'),
    changePollMs: ms('change-poll-interval', 'zero-or-positive'),
    mountGraceMs: ms('mount-grace-period', 'zero-or-positive'),
    minPassIntervalMs: ms('min-pass-interval', 'zero-or-positive'),
    createConcurrency: flags['create-concurrency'],
    cleanupConcurrency: flags['cleanup-concurrency'],
    volumeStatsMaxSeries: flags['volume-stats-max-series'],
    jobImage: env['JOB_CONTAINER_IMAGE'],
    drainTimeoutMs: ms('drain-timeout'),
    reloadGuard: isReloadGuardPolicy(flags['reload-guard']) ? flags['reload-guard'] : DEFAULT_RELOAD_GUARD_POLICY,
    startTimeoutMs: ms('start-timeout'),
    adminSocket: flags['admin-socket'],
    watch: { pollIntervalMs: ms('config-sync-period'), debounceMs: ms('config-debounce') },
    version: context.product.version,
  };
}
