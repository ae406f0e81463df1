// The one adapter behind `rollout pause|resume|abort|promote` (not a command itself): flags →
// submitRequest (and waitForRequest with --wait) → render. Each command is a subclass that names
// its action and its help text.
import { Flags } from '@oclif/core';
import { ProvisionerCommand } from '../cli/base-command.js';
import { UsageError } from '../core/errors.js';
import type { RolloutAction } from '../core/rollout-state/state.js';
import { configMapFlag, configMapRef, DEFAULT_STATUS_NAME, kubeconfigFlag, outputFlag } from './flags.js';

/** The help text every request command ends with. */
export function requestDescription(what: string): string {
  return `${what}

The request is written on the staged copy <name>-candidate of the operator's ConfigMap (the annotation local-static-provisioner/rollout-request, for the candidate seen now) and carried out by the staged rollout controller (\`provisioner rollout controller\`), which clears it. With --wait the command reads it back every second until the controller took it up.

Exit codes: 0 requested (with --wait: carried out), 1 refused (no staged rollout of the ConfigMap, or its phase does not allow it; with --wait: the controller dropped it, the phase having changed or a new config superseded the candidate), 6 with --wait: not taken up by --timeout, 2 usage error, 5 the cluster cannot be read or written. See docs/rollout-status.md.`;
}

export const REQUEST_EXAMPLES = [
  '<%= config.bin %> <%= command.id %> -n kube-system --name lvp-local-static-provisioner',
  '<%= config.bin %> <%= command.id %> --configmap kube-system/lvp-local-static-provisioner-config --wait -o json',
];

export abstract class RolloutRequestCommand extends ProvisionerCommand {
  static override flags = {
    configmap: configMapFlag(
      "The operator's ConfigMap NAMESPACE/NAME whose staged rollout to act on (default: the chart's, <namespace>/<name>-config).",
    ),
    namespace: Flags.string({
      char: 'n',
      description: "Namespace of the chart's ConfigMap (default: the kubeconfig context's, else default).",
    }),
    name: Flags.string({
      description: 'The provisioner instance (the chart sets its full name); the default ConfigMap is <name>-config.',
      default: DEFAULT_STATUS_NAME,
    }),
    wait: Flags.boolean({ description: 'Wait until the controller has carried the request out (or dropped it).' }),
    timeout: Flags.string({
      description: 'With --wait: give up after this long, exit 6 (Go duration; default 1m).',
      dependsOn: ['wait'],
    }),
    output: outputFlag(),
    kubeconfig: kubeconfigFlag(
      'Kubeconfig (default: ~/.kube/config, else the in-cluster service account). Needs get and patch on the ConfigMap <name>-candidate.',
    ),
  };

  /** What the command asks of the controller. */
  protected abstract readonly action: RolloutAction;

  async run(): Promise<void> {
    const { flags } = await this.parse(this.ctor as typeof RolloutRequestCommand);
    this.machineOutput = flags.output === 'json';
    const { durationFlagMs } = await import('../cli/duration-flag.js');
    const timeoutMs = durationFlagMs('timeout', flags.timeout ?? '1m');
    const { statusNameProblem } = await import('../core/fleet/applied-state.js');
    const nameProblem = statusNameProblem(flags.name);
    if (nameProblem !== undefined) throw new UsageError(`--name: ${nameProblem}`);
    const configMap = flags.configmap === undefined ? undefined : configMapRef(flags.configmap);
    const { connectCommandCluster } = await import('../cli/cluster-connection.js');
    const { systemClock } = await import('../core/clock.js');
    const rest = await connectCommandCluster(flags.kubeconfig, {
      name: this.config.name,
      version: this.config.version,
    });
    try {
      const target = configMap ?? {
        namespace: flags.namespace ?? rest.contextNamespace ?? 'default',
        name: `${flags.name}-config`,
      };
      const requests = await import('../core/staged-rollout/requests.js');
      const render = await import('../render/rollout-request.js');
      const by = rest.contextUser;
      const submitted = await requests.submitRequest(rest, target, this.action, {
        now: () => systemClock.now(),
        ...(by !== undefined ? { by } : {}),
      });
      const result = flags.wait
        ? await requests.waitForRequest(rest, submitted, { clock: systemClock, timeoutMs })
        : requests.requestedResult(submitted);
      this.writeOut(
        this.machineOutput ? JSON.stringify(render.toRequestJson(result), null, 2) : render.renderRequestText(result),
      );
      const code = render.requestExitCode(result.outcome);
      if (code !== 0) await this.exitDrained(code);
    } finally {
      rest.close();
    }
  }
}
