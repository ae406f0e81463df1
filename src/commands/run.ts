import { Flags } from '@oclif/core';
import { ProvisionerCommand } from '../cli/base-command.js';
import { UsageError } from '../core/errors.js';

function duration(
  flag: string,
  text: string,
  parse: (t: string) => { ok: true; nanos: bigint } | { ok: false; message: string },
): number {
  const r = parse(text);
  if (!r.ok) throw new UsageError(`--${flag}: ${r.message}`);
  if (r.nanos <= 0n) throw new UsageError(`--${flag}: must be positive, found ${text}`);
  return Number(r.nanos / 1_000_000n);
}

export default class Run extends ProvisionerCommand {
  static override summary = 'Run the node agent: discover local volumes and publish them as PersistentVolumes.';

  static override description = `The container entrypoint. Reads the config (a mounted ConfigMap directory), connects to the cluster (in-cluster service account, or KUBECONFIG), labels PVs of this node that upstream created, then discovers volumes every --discovery-period and whenever the mount table or a discovery directory changes. Serves /metrics, /healthz and /ready on --listen-address.

Environment: MY_NODE_NAME (required), MY_NAMESPACE (default "default"), KUBECONFIG, JOB_CONTAINER_IMAGE.
Exit codes: 0 stopped by SIGTERM/SIGINT, 2 usage error, 3 invalid config at start-up, 4 config unreadable, 5 start-up failed.`;

  static override flags = {
    'config-dir': Flags.string({
      description: 'Config source (ConfigMap directory, YAML file or manifest).',
      default: '/etc/provisioner/config',
    }),
    'listen-address': Flags.string({ description: 'Address of the metrics and health server.', default: ':8080' }),
    'metrics-path': Flags.string({ description: 'Path of the Prometheus metrics.', default: '/metrics' }),
    'discovery-period': Flags.string({
      description: 'Time between full discovery passes (Go duration).',
      default: '10s',
    }),
    'change-poll-interval': Flags.string({
      description: 'How often the mount table and discovery directories are checked for changes (Go duration).',
      default: '500ms',
    }),
    'create-concurrency': Flags.integer({
      description: 'PersistentVolume creations in flight at once.',
      default: 16,
      min: 1,
    }),
    'cleanup-concurrency': Flags.integer({
      description: 'In-process volume cleanups running at once (more wait their turn).',
      default: 8,
      min: 1,
    }),
    'kube-api-qps': Flags.integer({
      description: 'Client-side rate limit of API requests per second.',
      default: 200,
      min: 1,
    }),
    'kube-api-burst': Flags.integer({ description: 'Burst of the client-side rate limit.', default: 400, min: 1 }),
    kubeconfig: Flags.string({
      description: 'Kubeconfig file (default: in-cluster service account).',
      env: 'KUBECONFIG',
    }),
    'shutdown-timeout': Flags.string({
      description: 'Longest graceful stop before exiting anyway (Go duration).',
      default: '20s',
    }),
    'log-level': Flags.string({
      description: 'Least severe level logged.',
      options: ['debug', 'info', 'warn', 'error'],
      default: 'info',
    }),
    'log-format': Flags.string({
      description: 'Log line format on stderr.',
      options: ['text', 'json'],
      default: 'text',
    }),
  };

  async run(): Promise<void> {
    const { flags } = await this.parse(Run);
    const { parseGoDuration } = await import('../core/config/duration.js');
    const nodeName = process.env['MY_NODE_NAME'] ?? '';
    if (nodeName === '') throw new UsageError('MY_NODE_NAME is not set: the DaemonSet sets it from spec.nodeName');
    const { runAgentProcess } = await import('../cli/run-agent.js');
    await runAgentProcess({
      agent: {
        configPath: flags['config-dir'],
        nodeName,
        namespace: process.env['MY_NAMESPACE'] ?? 'default',
        listenAddress: flags['listen-address'],
        metricsPath: flags['metrics-path'],
        discoveryPeriodMs: duration('discovery-period', flags['discovery-period'], parseGoDuration),
        changePollMs: duration('change-poll-interval', flags['change-poll-interval'], parseGoDuration),
        createConcurrency: flags['create-concurrency'],
        cleanupConcurrency: flags['cleanup-concurrency'],
        jobImage: process.env['JOB_CONTAINER_IMAGE'],
      },
      environment: process.env,
      kubeconfig: flags.kubeconfig,
      inCluster: {
        host: process.env['KUBERNETES_SERVICE_HOST'],
        port: process.env['KUBERNETES_SERVICE_PORT'],
      },
      qps: flags['kube-api-qps'],
      burst: flags['kube-api-burst'],
      shutdownTimeoutMs: duration('shutdown-timeout', flags['shutdown-timeout'], parseGoDuration),
      logLevel: flags['log-level'] as 'debug' | 'info' | 'warn' | 'error',
      logFormat: flags['log-format'] as 'text' | 'json',
    });
    // A daemon that stopped gracefully: exit now rather than wait for stray handles.
    this.exit(0);
  }
}
