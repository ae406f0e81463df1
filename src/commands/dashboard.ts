import { Flags } from '@oclif/core';
import { ProvisionerCommand, useColor } from '../cli/base-command.js';
import { adminSocketFlag, DEFAULT_STATUS_NAME, kubeconfigFlag, STATUS_NAME_ENV } from './flags.js';
import type { RolloutStatus } from '../core/staged-rollout/status.js';

/** A reload's answer may take a drain and a cache sync: its client waits at least this long. */
const MIN_RELOAD_TIMEOUT_MS = 120_000;

export default class Dashboard extends ProvisionerCommand {
  static override summary =
    'Watch the running agent live: config sync, volumes, cleanups and events; reload and diff with a key.';

  static override description = `Attaches to the agent on this node (\`provisioner run\`) through its admin socket and shows, live: the node, agent version and uptime; the config generation, the applied hash against the on-disk hash (in sync, propagating or rejected) and the last reload; per storage class the discovered volumes and their PVs; cleanups in flight; recent events. When the agent restarts the view says "reconnecting…" and reattaches by itself.

Keys: r reload (R forced), d diff of the on-disk config against the applied one, f the fleet pane (every node's published state against the desired ConfigMap, as \`provisioner rollout status\`: needs --kubeconfig or a service account that may list leases and nodes), / filter, Tab switch pane, Up/Down/PgUp/PgDn/Home/End scroll, ? help, Esc close or clear, q or Ctrl-C quit.

Without a terminal (kubectl exec without -it, a pipe), or with --once, prints one plain-text snapshot and exits; with --fleet the snapshot ends with the fleet pane's summary and a staged rollout's waves.

With a staged rollout of the desired ConfigMap (its copies <name>-config-candidate and -stable exist), the fleet pane starts with its waves: the phase, one line per wave (open or not, applied of its nodes, failed), the halted node and why.

Exit codes: 0 quit or snapshot printed, 1 the agent answered with an error, 2 no agent reachable (or a usage error), 3 the agent did not answer within --timeout.`;

  static override examples = [
    'kubectl -n kube-system exec -it ds/local-volume-provisioner -- provisioner <%= command.id %>',
    '<%= config.bin %> <%= command.id %> --admin-socket ./sandbox/admin.sock',
    '<%= config.bin %> <%= command.id %> --once',
  ];

  static override flags = {
    'admin-socket': adminSocketFlag(),
    once: Flags.boolean({
      description: 'Print one plain-text snapshot and exit (the default when stdout is not a terminal).',
      default: false,
    }),
    color: Flags.boolean({
      description: 'Colour the view (default: on a terminal, unless NO_COLOR is set or TERM=dumb).',
      allowNo: true,
    }),
    timeout: Flags.string({
      description: "Longest wait for each of the agent's answers (Go duration); reloads wait at least 2m.",
      default: '5s',
    }),
    'fleet-namespace': Flags.string({
      description: "Fleet pane: the agents' namespace (default: MY_NAMESPACE, else default).",
    }),
    'fleet-name': Flags.string({
      description:
        'Fleet pane: the provisioner instance (`run --status-name`); desired config <namespace>/<name>-config.',
      default: DEFAULT_STATUS_NAME,
      env: STATUS_NAME_ENV,
    }),
    fleet: Flags.boolean({
      description:
        "Snapshot only: also read the fleet pane's rollout from the cluster and print its summary and a staged rollout's waves.",
      default: false,
    }),
    kubeconfig: kubeconfigFlag(
      'Fleet pane: kubeconfig (default: ~/.kube/config, else the in-cluster service account).',
    ),
  };

  async run(): Promise<void> {
    const { flags } = await this.parse(Dashboard);
    const interactive = !flags.once && process.stdout.isTTY;
    let ui: Promise<typeof import('../ui/dashboard/run.js')> | undefined;
    if (interactive) {
      // React's development build renders several times slower and checks things only React
      // developers need: this process is a shipped app. Set before React's modules first load.
      process.env['NODE_ENV'] ??= 'production';
      // Ink and React load while the rest starts and the agent answers (the first frame waits for both).
      ui = import('../ui/dashboard/load.js').then((m) => m.loadDashboard());
      ui.catch(() => undefined);
    }
    const { durationFlagMs } = await import('../cli/duration-flag.js');
    const timeoutMs = durationFlagMs('timeout', flags.timeout, '1ms');
    const { AdminClient } = await import('../core/agent/admin-client.js');
    const socket = flags['admin-socket'];
    const client = new AdminClient(socket, { timeoutMs });

    /** The fleet pane's data: the rollout of the desired ConfigMap, with its staged rollout if any. */
    const fleetRollout = async (): Promise<RolloutStatus> => {
      const { connectCommandCluster } = await import('../cli/cluster-connection.js');
      const { systemClock } = await import('../core/clock.js');
      const { readDesiredConfig, readRollout } = await import('../core/staged-rollout/status.js');
      const rest = await connectCommandCluster(flags.kubeconfig, {
        name: this.config.name,
        version: this.config.version,
      });
      try {
        const namespace = flags['fleet-namespace'] ?? process.env['MY_NAMESPACE'] ?? 'default';
        const name = flags['fleet-name'];
        const configMap = { namespace, name: `${name}-config` };
        const desired = await readDesiredConfig(rest, { kind: 'configmap', ...configMap });
        // As `rollout status` asks: the staged copies of that ConfigMap, if any.
        const query = { namespace, instance: name, stagedOf: configMap };
        return await readRollout(rest, query, desired, () => systemClock.now());
      } finally {
        rest.close();
      }
    };

    if (ui === undefined) {
      // The agent first: without one there is no snapshot, and no cluster read is left running.
      const status = await client.status();
      const { renderDashboardText } = await import('../ui/dashboard/text.js');
      const { readFleet } = await import('../ui/dashboard/fleet.js');
      const fleet = flags.fleet ? await readFleet(fleetRollout) : undefined;
      this.writeOut(renderDashboardText(status, { now: Date.now(), ...(fleet !== undefined ? { fleet } : {}) }));
      return;
    }

    // Unreachable at start: the typed error (exit 2), before any screen is drawn.
    const [status, { runDashboard }] = await Promise.all([client.status(), ui]);
    await runDashboard({
      client,
      reloadClient: new AdminClient(socket, { timeoutMs: Math.max(timeoutMs, MIN_RELOAD_TIMEOUT_MS) }),
      status,
      color: useColor(flags.color),
      stdin: process.stdin,
      stdout: process.stdout,
      stderr: process.stderr,
      fleet: fleetRollout,
    });
    // The view is closed and the feed stopped: exit now rather than wait on a paused stdin.
    this.exit(0);
  }
}
