import { Flags } from '@oclif/core';
import { ProvisionerCommand } from '../cli/base-command.js';
import { UsageError } from '../core/errors.js';
import { configMapFlag, configMapRef, DEFAULT_STATUS_NAME, kubeconfigFlag, outputFlag } from './flags.js';

export default class RolloutStatus extends ProvisionerCommand {
  static override summary = "Show which nodes apply the desired config: every agent's published state against it.";

  static override description = `Reads the desired config (the ConfigMap through the API, or a file or directory with --config; its hash is computed by the agent's own loader) and the status Lease every agent publishes (\`run --publish-status\`), and shows one line per Node: in sync, pending, rejected (with the reason), stale heartbeat, or missing agent (a Node, within --selector, that has no status Lease).

Without --configmap or --config the desired config is the chart's ConfigMap, <namespace>/<name>-config.

With a staged rollout of that ConfigMap (its copies <name>-candidate and <name>-stable exist) it also shows the rollout's phase and waves, the halted node and why, and holds each node to the config its wave gives it: the candidate in an open wave, the stable config elsewhere.

Exit codes: 0 every node applies the desired config (staged: the rollout of it is complete), 1 a node rejected it (staged: the rollout halted or was aborted), 6 not done (a node pending, stale or missing, a staged rollout still progressing or paused; with --wait: still so at --timeout), 2 usage error, 3 the desired config is invalid, 4 it cannot be read (no such ConfigMap or file), 5 the cluster cannot be read. See docs/rollout-status.md.`;

  static override examples = [
    '<%= config.bin %> <%= command.id %> -n kube-system',
    '<%= config.bin %> <%= command.id %> -n kube-system --configmap kube-system/local-static-provisioner-config --wait --timeout 5m',
    '<%= config.bin %> <%= command.id %> -n storage --config ./provisioner-config.yaml -l node-role.kubernetes.io/storage -o json',
  ];

  static override flags = {
    configmap: configMapFlag('The desired config: a ConfigMap NAMESPACE/NAME read through the API.', ['config']),
    config: Flags.string({
      description: 'The desired config: a ConfigMap directory, YAML file or manifest.',
      exclusive: ['configmap'],
    }),
    namespace: Flags.string({
      char: 'n',
      description: "Namespace of the agents' status Leases (default: the kubeconfig context's, else default).",
    }),
    name: Flags.string({
      description: 'The provisioner instance (`run --status-name`; the chart sets its full name).',
      default: DEFAULT_STATUS_NAME,
    }),
    selector: Flags.string({
      char: 'l',
      description: 'Label selector of the Nodes that must run an agent (the DaemonSet nodeSelector); default: all.',
    }),
    wait: Flags.boolean({
      description:
        'Wait until every node applies the desired config (staged: the rollout completes), or one rejects it (staged: the rollout halts or is aborted).',
    }),
    timeout: Flags.string({
      description: 'With --wait: give up after this long, exit 6 (Go duration; default 5m).',
      dependsOn: ['wait'],
    }),
    'poll-interval': Flags.string({ description: 'With --wait: time between two reads (Go duration).', default: '1s' }),
    output: outputFlag(),
    kubeconfig: kubeconfigFlag(
      'Kubeconfig (default: ~/.kube/config, else the in-cluster service account). Needs list on leases and nodes, get on the ConfigMap (and its -candidate and -stable copies).',
    ),
  };

  async run(): Promise<void> {
    const { flags } = await this.parse(RolloutStatus);
    this.machineOutput = flags.output === 'json';
    const { durationFlagMs } = await import('../cli/duration-flag.js');
    const timeoutMs = durationFlagMs('timeout', flags.timeout ?? '5m');
    const intervalMs = durationFlagMs('poll-interval', flags['poll-interval']);
    const { statusNameProblem } = await import('../core/fleet/applied-state.js');
    const nameProblem = statusNameProblem(flags.name);
    if (nameProblem !== undefined) throw new UsageError(`--name: ${nameProblem}`);
    const configMap = flags.configmap === undefined ? undefined : configMapRef(flags.configmap);
    if (flags.selector !== undefined) {
      const { LabelSelectorError, parseLabelSelector } = await import('../core/kube/label-selector.js');
      try {
        parseLabelSelector(flags.selector);
      } catch (err) {
        if (err instanceof LabelSelectorError) throw new UsageError(`--selector: ${err.message}`);
        throw err;
      }
    }
    const { connectCommandCluster } = await import('../cli/cluster-connection.js');
    const { systemClock } = await import('../core/clock.js');
    const rest = await connectCommandCluster(flags.kubeconfig, {
      name: this.config.name,
      version: this.config.version,
    });
    try {
      const namespace = flags.namespace ?? rest.contextNamespace ?? 'default';
      const fleet = await import('../core/staged-rollout/status.js');
      const render = await import('../render/rollout-status.js');
      const operatorConfigMap = configMap ?? { namespace, name: `${flags.name}-config` };
      const desired = await fleet.readDesiredConfig(
        rest,
        flags.config !== undefined ? { kind: 'path', path: flags.config } : { kind: 'configmap', ...operatorConfigMap },
      );
      const query = {
        namespace,
        instance: flags.name,
        ...(flags.selector !== undefined ? { nodeSelector: flags.selector } : {}),
        // A staged rollout of that ConfigMap (its NAME-candidate and NAME-stable copies), if any.
        stagedOf: operatorConfigMap,
      };
      let status;
      let timedOut: boolean | undefined;
      if (flags.wait) {
        let lastLine = '';
        const waited = await fleet.waitForRollout(rest, query, desired, {
          clock: systemClock,
          timeoutMs,
          intervalMs,
          // Progress on stderr, one line per change: stdout stays the final table (or JSON).
          onProgress: (s) => {
            const line = render.rolloutProgressLine(s);
            if (line !== lastLine && s.verdict === 'in-progress') this.writeErr(line);
            lastLine = line;
          },
        });
        status = waited.status;
        timedOut = waited.timedOut;
      } else {
        status = await fleet.readRollout(rest, query, desired, () => systemClock.now());
      }
      this.writeOut(
        flags.output === 'json'
          ? JSON.stringify(render.toRolloutJson(status, timedOut), null, 2)
          : render.renderRolloutText(status, timedOut),
      );
      const code = render.rolloutExitCode(status.verdict);
      if (code !== 0) await this.exitDrained(code);
    } finally {
      rest.close();
    }
  }
}
