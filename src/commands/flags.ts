// Flags that several commands declare alike, built here so their names, defaults and environment
// variables cannot drift apart (the shared-flags module of oclif plugins). Each command keeps its
// own description where what the flag means to it differs.
import { Flags } from '@oclif/core';
import { CONFIG_DIR_ENV, DEFAULT_CONFIG_DIR } from '../cli/config-dir.js';
import { RUN_FLAGS } from '../cli/run-flags.js';
import { UsageError } from '../core/errors.js';

/** How help texts name the config a command reads when given none (defaultConfigDir). */
export const NODE_CONFIG_HELP = `${DEFAULT_CONFIG_DIR} (or $${CONFIG_DIR_ENV})`;

/** Where `run` serves its admin endpoint by default, and so where its clients look for it. */
export const DEFAULT_ADMIN_SOCKET = RUN_FLAGS['admin-socket'].default;

/** --admin-socket of a command that talks to the agent on this node. */
export function adminSocketFlag(description = "The agent's admin socket.") {
  return Flags.string({ description, default: DEFAULT_ADMIN_SOCKET, env: RUN_FLAGS['admin-socket'].env });
}

/** -o/--output: text for people, the others for programs. */
export function outputFlag(formats: readonly string[] = ['text', 'json']) {
  return Flags.string({ char: 'o', description: 'Output format.', options: [...formats], default: 'text' });
}

/** --color/--no-color; unset, the command decides from the terminal (useColor). */
export function colorFlag(description = 'Colour the output (default: only on a terminal, and not with NO_COLOR).') {
  return Flags.boolean({ description, allowNo: true });
}

/** --kubeconfig, also read from KUBECONFIG. */
export function kubeconfigFlag(description: string = RUN_FLAGS.kubeconfig.description) {
  return Flags.string({ description, env: RUN_FLAGS.kubeconfig.env });
}

/** The instance name `run --status-name` publishes under, by default; its readers look for the same. */
export const DEFAULT_STATUS_NAME = RUN_FLAGS['status-name'].default;
export const STATUS_NAME_ENV = RUN_FLAGS['status-name'].env;

/** --metrics-path, as `run` has it. */
export function metricsPathFlag() {
  return Flags.string(RUN_FLAGS['metrics-path']);
}

/** --kube-api-qps and --kube-api-burst: the client-side rate limit, with this command's defaults. */
export function rateLimitFlags(defaults: { readonly qps: number; readonly burst: number }) {
  return {
    'kube-api-qps': Flags.integer({ ...RUN_FLAGS['kube-api-qps'], default: defaults.qps }),
    'kube-api-burst': Flags.integer({ ...RUN_FLAGS['kube-api-burst'], default: defaults.burst }),
  };
}

/** --log-level and --log-format, as `run` has them (logs go to stderr). */
export function logFlags() {
  return { 'log-level': Flags.string(RUN_FLAGS['log-level']), 'log-format': Flags.string(RUN_FLAGS['log-format']) };
}

/** --configmap NAMESPACE/NAME: a ConfigMap read (and, for the rollout requests, written) through the API. */
export function configMapFlag(description: string, exclusive?: readonly string[]) {
  return Flags.string({ description, ...(exclusive !== undefined ? { exclusive: [...exclusive] } : {}) });
}

/** A --configmap value → its namespace and name, or a usage error. */
export function configMapRef(value: string): { readonly namespace: string; readonly name: string } {
  const [namespace, name, ...rest] = value.split('/');
  if (namespace === undefined || namespace === '' || name === undefined || name === '' || rest.length > 0)
    throw new UsageError(`--configmap: expected NAMESPACE/NAME, found ${JSON.stringify(value)}`);
  return { namespace, name };
}

/** Leader election on a Lease, as client-go's flags (node-cleanup and the rollout controller). */
export function leaderElectFlags(options: {
  readonly leaseName: string;
  readonly namespaceDefault: string;
  readonly acts: string;
}) {
  return {
    'leader-elect': Flags.boolean({
      description: `Elect a leader on a Lease so that only one replica ${options.acts} (--no-leader-elect: a single replica).`,
      default: true,
      allowNo: true,
    }),
    'leader-elect-lease-name': Flags.string({
      description: 'Name of the leader Lease.',
      default: options.leaseName,
    }),
    'leader-elect-lease-namespace': Flags.string({
      description: `Namespace of the leader Lease (default: ${options.namespaceDefault}).`,
    }),
    'leader-elect-identity': Flags.string({
      description: 'This replica in the Lease (default: POD_NAME, else the host name and a random suffix).',
    }),
    'leader-elect-lease-duration': Flags.string({
      description: 'How long followers wait after the last renewal they saw before taking over (Go duration).',
      default: '15s',
    }),
    'leader-elect-renew-deadline': Flags.string({
      description: 'A leader that cannot renew for this long stops acting (Go duration; < lease duration).',
      default: '10s',
    }),
    'leader-elect-retry-period': Flags.string({
      description: 'Time between two attempts to acquire or renew the Lease (Go duration).',
      default: '2s',
    }),
  };
}

/**
 * The flags both leader-elected controllers share, in the order their help lists them (read by
 * src/cli/elected-flags.ts): the metrics server, leader election, the API client, the stop, logs.
 */
export function electedServiceFlags(options: {
  readonly listenAddress: string;
  readonly leaseName: string;
  readonly namespaceDefault: string;
  readonly acts: string;
}) {
  return {
    'listen-address': Flags.string({
      description: 'Address of the metrics and health server; empty disables it.',
      default: options.listenAddress,
    }),
    'metrics-path': metricsPathFlag(),
    ...leaderElectFlags(options),
    ...rateLimitFlags({ qps: 20, burst: 40 }),
    kubeconfig: kubeconfigFlag(),
    'shutdown-timeout': Flags.string({
      description: 'Longest graceful stop (the lease is released at its end) before exiting anyway (Go duration).',
      default: '15s',
    }),
    ...logFlags(),
  };
}
