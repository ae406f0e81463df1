import { Flags } from '@oclif/core';
import { CONFIG_DIR_ENV, DEFAULT_CONFIG_DIR, ProvisionerCommand } from '../cli/base-command.js';
import {
  DEFAULT_RELOAD_GUARD_POLICY,
  isReloadGuardPolicy,
  RELOAD_GUARD_POLICIES,
} from '../core/config/reload-guard.js';
import { UsageError } from '../core/errors.js';

type ParseDuration = (t: string) => { ok: true; nanos: bigint } | { ok: false; message: string };

function duration(flag: string, text: string, parse: ParseDuration): number {
  const r = parse(text);
  if (!r.ok) throw new UsageError(`--${flag}: ${r.message}`);
  if (r.nanos <= 0n) throw new UsageError(`--${flag}: must be positive, found ${text}`);
  return Number(r.nanos / 1_000_000n);
}

export default class Run extends ProvisionerCommand {
  static override summary =
    'Run the node agent: publish local volumes as PersistentVolumes, reload the config on change.';

  static override description = `The container entrypoint. Reads the config (a mounted ConfigMap directory), connects to the cluster (in-cluster service account, or KUBECONFIG), labels PVs of this node that upstream created, then discovers volumes every --discovery-period and whenever the mount table or a discovery directory changes, and cleans released volumes.

The config is watched: a ConfigMap update (kubelet's ..data swap), a SIGHUP or \`provisioner reload\` restarts the sync loop on the new config without restarting the process. An invalid config is rejected and the running one stays. A change that would orphan existing PVs or change their ownership is refused by default (--reload-guard); \`provisioner reload --allow\` or a restart applies it.

Serves /metrics, /healthz and /ready on --listen-address, and the admin endpoint (status, events, reload) on --admin-socket.

Try it without a cluster: \`provisioner run --sandbox ./sandbox\` runs the real agent against an in-memory cluster; every directory under sandbox/disks/<class>/ counts as a volume.

Environment: MY_NODE_NAME (required, except with --sandbox), MY_NAMESPACE (default "default"), KUBECONFIG, JOB_CONTAINER_IMAGE, PROVISIONER_CONFIG_DIR (--config-dir), PROVISIONER_ADMIN_SOCKET (--admin-socket).
Exit codes: 0 stopped by SIGTERM/SIGINT, 2 usage error, 3 invalid config at start-up, 4 config unreadable, 5 start-up failed.`;

  static override examples = [
    '<%= config.bin %> <%= command.id %>',
    '<%= config.bin %> <%= command.id %> --sandbox ./sandbox --listen-address 127.0.0.1:8080',
  ];

  static override flags = {
    'config-dir': Flags.string({
      description: 'Config source (ConfigMap directory, YAML file or manifest).',
      default: DEFAULT_CONFIG_DIR,
      env: CONFIG_DIR_ENV,
    }),
    'listen-address': Flags.string({ description: 'Address of the metrics and health server.', default: ':8080' }),
    'metrics-path': Flags.string({ description: 'Path of the Prometheus metrics.', default: '/metrics' }),
    'admin-socket': Flags.string({
      description: 'Unix socket of the admin endpoint (mode 0600).',
      default: '/run/provisioner/admin.sock',
      env: 'PROVISIONER_ADMIN_SOCKET',
    }),
    'discovery-period': Flags.string({
      description: 'Time between full discovery passes (Go duration).',
      default: '10s',
    }),
    'config-sync-period': Flags.string({
      description: 'Content-hash poll of the config, the safety net of the file watcher (Go duration).',
      default: '5s',
    }),
    'config-debounce': Flags.string({
      description: 'Quiet time that ends a burst of config file events (Go duration).',
      default: '100ms',
    }),
    'reload-guard': Flags.string({
      description:
        'A live reload (file change, SIGHUP, `reload` without --allow) that would orphan PVs or change their ownership: refuse it (the running config stays), warn and apply it, or apply it.',
      options: [...RELOAD_GUARD_POLICIES],
      default: DEFAULT_RELOAD_GUARD_POLICY,
      env: 'PROVISIONER_RELOAD_GUARD',
    }),
    'drain-timeout': Flags.string({
      description: 'Longest wait for the old sync loop to stop on a reload (Go duration).',
      default: '10s',
    }),
    'start-timeout': Flags.string({
      description: "Longest wait for a new sync loop's caches to sync before rolling back (Go duration).",
      default: '30s',
    }),
    'change-poll-interval': Flags.string({
      description:
        'Poll interval for mount-table and discovery-directory changes when findmnt cannot report them as events; 0 turns change detection off (Go duration).',
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
    sandbox: Flags.string({
      description: 'Run against an in-memory cluster with config and disks under this directory (no cluster, no root).',
    }),
    'shutdown-timeout': Flags.string({
      description: 'Longest graceful stop before exiting anyway (Go duration).',
      default: '20s',
    }),
    'publish-status': Flags.boolean({
      description:
        'Publish the applied config state (hash, generation, last reload result) as the Lease <status-name>-<node> in MY_NAMESPACE, read by `provisioner rollout status`.',
      default: true,
      allowNo: true,
    }),
    'status-name': Flags.string({
      description: 'Name of this provisioner instance: prefix and label of its status Leases.',
      default: 'local-static-provisioner',
      env: 'PROVISIONER_STATUS_NAME',
    }),
    'status-heartbeat': Flags.string({
      description:
        'Heartbeat of the status Lease when nothing changes (Go duration); readers call it stale after 3 heartbeats.',
      default: '60s',
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
    const ms = (flag: keyof typeof flags & string): number => duration(flag, String(flags[flag]), parseGoDuration);
    const sandbox = flags.sandbox;
    // Checked here so that a mistyped flag is a usage error (exit 2), not a failed start-up.
    if (sandbox === '') throw new UsageError('--sandbox: needs a directory');
    if (flags['admin-socket'] === '') throw new UsageError('--admin-socket: needs a socket path');
    if (flags['publish-status']) {
      const { statusNameProblem } = await import('../core/fleet/applied-state.js');
      const problem = statusNameProblem(flags['status-name']);
      if (problem !== undefined) throw new UsageError(`--status-name: ${problem}`);
    }
    if (!flags['metrics-path'].startsWith('/'))
      throw new UsageError(`--metrics-path: must start with "/", found ${JSON.stringify(flags['metrics-path'])}`);
    const { parseListenAddress } = await import('../core/agent/http.js');
    try {
      parseListenAddress(flags['listen-address']);
    } catch (err) {
      throw new UsageError(`--listen-address: ${err instanceof Error ? err.message : String(err)}`);
    }
    const nodeName = process.env['MY_NODE_NAME'] ?? '';
    if (nodeName === '' && sandbox === undefined)
      throw new UsageError('MY_NODE_NAME is not set: the DaemonSet sets it from spec.nodeName');
    if (sandbox === undefined) {
      const { nodeNameProblem } = await import('../core/kube/validation.js');
      const problem = nodeNameProblem(nodeName);
      if (problem !== undefined) throw new UsageError(`MY_NODE_NAME: ${problem}`);
    }
    const { runAgentProcess } = await import('../cli/run-agent.js');
    await runAgentProcess({
      agent: {
        configPath: flags['config-dir'],
        nodeName,
        namespace: process.env['MY_NAMESPACE'] ?? 'default',
        listenAddress: flags['listen-address'],
        metricsPath: flags['metrics-path'],
        discoveryPeriodMs: ms('discovery-period'),
        changePollMs: ms('change-poll-interval'),
        createConcurrency: flags['create-concurrency'],
        cleanupConcurrency: flags['cleanup-concurrency'],
        jobImage: process.env['JOB_CONTAINER_IMAGE'],
        drainTimeoutMs: ms('drain-timeout'),
        reloadGuard: isReloadGuardPolicy(flags['reload-guard']) ? flags['reload-guard'] : DEFAULT_RELOAD_GUARD_POLICY,
        startTimeoutMs: ms('start-timeout'),
        adminSocket: flags['admin-socket'],
        watch: { pollIntervalMs: ms('config-sync-period'), debounceMs: ms('config-debounce') },
        version: this.config.version,
      },
      sandbox,
      adminSocketExplicit:
        this.argv.some((a) => a.startsWith('--admin-socket')) || process.env['PROVISIONER_ADMIN_SOCKET'] !== undefined,
      environment: process.env,
      kubeconfig: flags.kubeconfig,
      inCluster: { host: process.env['KUBERNETES_SERVICE_HOST'], port: process.env['KUBERNETES_SERVICE_PORT'] },
      qps: flags['kube-api-qps'],
      burst: flags['kube-api-burst'],
      shutdownTimeoutMs: ms('shutdown-timeout'),
      logLevel: flags['log-level'] as 'debug' | 'info' | 'warn' | 'error',
      logFormat: flags['log-format'] as 'text' | 'json',
      statusLease: flags['publish-status']
        ? { name: flags['status-name'], heartbeatMs: ms('status-heartbeat') }
        : undefined,
    });
    // A daemon that stopped gracefully: exit now rather than wait for stray handles.
    this.exit(0);
  }
}
