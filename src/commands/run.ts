import { Flags } from '@oclif/core';
import { ProvisionerCommand } from '../cli/base-command.js';
import { RUN_FLAGS } from '../cli/run-flags.js';
import { runAgentOptions } from '../cli/run-options.js';

export default class Run extends ProvisionerCommand {
  static override summary =
    'Run the node agent: publish local volumes as PersistentVolumes, reload the config on change.';

  static override description = `The container entrypoint. Reads the config (a mounted ConfigMap directory), connects to the cluster (in-cluster service account, or KUBECONFIG), labels PVs of this node that upstream created, then discovers volumes every --discovery-period and whenever the mount table or a discovery directory changes, and cleans released volumes.

The config is watched: a ConfigMap update (kubelet's ..data swap; with --config-source configmap:NAME, the API's watch of the ConfigMap, within about a second; with --config-source staged:NAME, the staged rollout's copies of it, the candidate only once the rollout controller opens this node's wave), a SIGHUP or \`provisioner reload\` restarts the sync loop on the new config without restarting the process. An invalid config is rejected and the running one stays. A change that would orphan existing PVs or change their ownership is refused by default (--reload-guard); \`provisioner reload --allow\` or a restart applies it.

Serves /metrics, /healthz and /ready on --listen-address, and the admin endpoint (status, events, reload) on --admin-socket.

Publishes its applied config (hash, generation, last reload result and reason) as the Lease <status-name>-<node> in MY_NAMESPACE, on change and every --status-heartbeat, for \`provisioner rollout status\` (--no-publish-status turns it off).

Try it without a cluster: \`provisioner run --sandbox ./sandbox\` runs the real agent against an in-memory cluster; every directory under sandbox/disks/<class>/ counts as a volume. Its config is sandbox/config/ (created on first use), or --config-dir when given; every class's mountDir must lie below sandbox/disks/. The node is MY_NODE_NAME, else "sandbox-node".

Environment: MY_NODE_NAME (required, except with --sandbox), MY_NAMESPACE (default "default"; also the namespace of --config-source configmap:NAME and staged:NAME, else the service account's namespace), KUBECONFIG, JOB_CONTAINER_IMAGE, PROVISIONER_CONFIG_DIR (--config-dir), PROVISIONER_CONFIG_SOURCE (--config-source), PROVISIONER_ADMIN_SOCKET (--admin-socket), PROVISIONER_STATUS_NAME (--status-name).
Exit codes: 0 stopped by SIGTERM/SIGINT, 2 usage error, 3 invalid config at start-up, 4 config unreadable, 5 start-up failed.`;

  static override examples = [
    '<%= config.bin %> <%= command.id %>',
    '<%= config.bin %> <%= command.id %> --sandbox ./sandbox --listen-address 127.0.0.1:8080',
  ];

  // Declared from the table the lean `run` entry (src/cli/run-lean.ts) parses too.
  static override flags = {
    'config-dir': Flags.string(RUN_FLAGS['config-dir']),
    'config-source': Flags.string(RUN_FLAGS['config-source']),
    'listen-address': Flags.string(RUN_FLAGS['listen-address']),
    'metrics-path': Flags.string(RUN_FLAGS['metrics-path']),
    'admin-socket': Flags.string(RUN_FLAGS['admin-socket']),
    'discovery-period': Flags.string(RUN_FLAGS['discovery-period']),
    'config-sync-period': Flags.string(RUN_FLAGS['config-sync-period']),
    'config-debounce': Flags.string(RUN_FLAGS['config-debounce']),
    'reload-guard': Flags.string(RUN_FLAGS['reload-guard']),
    'drain-timeout': Flags.string(RUN_FLAGS['drain-timeout']),
    'start-timeout': Flags.string(RUN_FLAGS['start-timeout']),
    'change-poll-interval': Flags.string(RUN_FLAGS['change-poll-interval']),
    'mount-grace-period': Flags.string(RUN_FLAGS['mount-grace-period']),
    'min-pass-interval': Flags.string(RUN_FLAGS['min-pass-interval']),
    'create-concurrency': Flags.integer(RUN_FLAGS['create-concurrency']),
    'cleanup-concurrency': Flags.integer(RUN_FLAGS['cleanup-concurrency']),
    'volume-stats-max-series': Flags.integer(RUN_FLAGS['volume-stats-max-series']),
    'kube-api-qps': Flags.integer(RUN_FLAGS['kube-api-qps']),
    'kube-api-burst': Flags.integer(RUN_FLAGS['kube-api-burst']),
    kubeconfig: Flags.string(RUN_FLAGS['kubeconfig']),
    sandbox: Flags.string(RUN_FLAGS['sandbox']),
    'shutdown-timeout': Flags.string(RUN_FLAGS['shutdown-timeout']),
    'publish-status': Flags.boolean(RUN_FLAGS['publish-status']),
    'status-name': Flags.string(RUN_FLAGS['status-name']),
    'status-heartbeat': Flags.string(RUN_FLAGS['status-heartbeat']),
    'log-level': Flags.string(RUN_FLAGS['log-level']),
    'log-format': Flags.string(RUN_FLAGS['log-format']),
  };

  async run(): Promise<void> {
    const { flags } = await this.parse(Run);
    const options = await runAgentOptions(flags, {
      argv: this.argv,
      env: process.env,
      product: { name: this.config.name, version: this.config.version },
    });
    const { runAgentProcess } = await import('../cli/run-agent.js');
    await runAgentProcess(options);
    // A daemon that stopped gracefully: exit now rather than wait for stray handles.
    this.exit(0);
  }
}
