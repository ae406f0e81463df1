import { Flags } from '@oclif/core';
import { ProvisionerCommand } from '../cli/base-command.js';
import { UsageError } from '../core/errors.js';
import { DEFAULT_STATUS_NAME, STATUS_NAME_ENV, electedServiceFlags } from './flags.js';

export default class RolloutController extends ProvisionerCommand {
  static override summary =
    'Roll a ConfigMap change out in stages: canary nodes, then waves, halting (and reverting) on a failure (leader-elected).';

  static override description = `The staged rollout controller. A change of the operator's ConfigMap (--config-map, still changed with kubectl apply) becomes a candidate: it goes to the canary nodes first, then to each wave of --waves in turn, once every node of the open waves reports the candidate applied and healthy through its status Lease and --bake-time has passed. A node that rejects, refuses, rolls back or fails the candidate, whose heartbeat goes stale, that reports new discovery or cleanup errors, or that has not applied it --progress-deadline after its wave opened halts the rollout; --on-halt revert sends the open waves back to the stable config. A new change mid-rollout starts again from the canary. Wave membership is a hash of the node name: a node never moves between waves.

It writes <config-map>-stable (the last config rolled out everywhere) and <config-map>-candidate (the candidate's data and the rollout state); the agents (\`run --config-source staged:NAMESPACE/NAME\`) read both. \`provisioner rollout status\` shows the waves; \`rollout pause|resume|abort|promote\` steer it. The first start adopts the ConfigMap as stable.

Run two replicas: they elect a leader on a Lease (--leader-elect-lease-name in --leader-elect-lease-namespace) and only the leader writes. Serves /metrics (local_volume_rollout_*), /healthz and /readyz on --listen-address (empty: off).

Environment: POD_NAMESPACE (the namespace of the ConfigMap and of the lease), POD_NAME (this replica's identity), KUBECONFIG.
Exit codes: 0 stopped by SIGTERM/SIGINT, 2 usage error, 5 start-up failed (cluster unreachable, ConfigMaps or Nodes cannot be listed, listen address taken). See docs/operations.md#staged-rollout.`;

  static override examples = [
    '<%= config.bin %> <%= command.id %> --config-map local-static-provisioner-config --status-name local-static-provisioner',
    '<%= config.bin %> <%= command.id %> --config-map provisioner-config --canary-selector rollout=canary --waves 25%,100% --bake-time 10m --on-halt halt',
  ];

  static override flags = {
    'config-map': Flags.string({
      description: "The operator's ConfigMap (in --namespace): its changes are rolled out in stages.",
      required: true,
    }),
    namespace: Flags.string({
      char: 'n',
      description:
        "Namespace of the ConfigMap, its copies and the status Leases (default: POD_NAMESPACE, else the kubeconfig context's, else default).",
    }),
    'status-name': Flags.string({
      description: 'The provisioner instance whose status Leases report each node (`run --status-name`).',
      default: DEFAULT_STATUS_NAME,
      env: STATUS_NAME_ENV,
    }),
    'canary-selector': Flags.string({
      description: 'Label selector of the canary Nodes (default: one Node, chosen by a hash of the node names).',
      exclusive: ['canary-count'],
    }),
    'canary-count': Flags.integer({
      description: 'How many Nodes are the canary, chosen by a hash of their names (default 1).',
      exclusive: ['canary-selector'],
    }),
    waves: Flags.string({
      description:
        "The waves after the canary: each one's cumulative reach of the other nodes, a percentage or a node count (a last 100% is added when missing).",
      default: '10%,50%,100%',
    }),
    'bake-time': Flags.string({
      description:
        'How long every node of the open waves must run the candidate healthily before the next wave opens (Go duration).',
      default: '5m',
    }),
    'progress-deadline': Flags.string({
      description:
        'A wave whose nodes have not all applied the candidate this long after it opened halts the rollout (Go duration).',
      default: '10m',
    }),
    'on-halt': Flags.string({
      description:
        'What a halt does to the nodes that took the candidate: revert them to stable, or halt only (they keep it).',
      options: ['revert', 'halt'],
      default: 'revert',
    }),
    resync: Flags.string({
      description: 'Full relist of the caches, a safety net under the watches; 0: none (Go duration).',
      default: '10m',
    }),
    ...electedServiceFlags({
      listenAddress: ':8081',
      leaseName: 'local-volume-rollout-controller',
      namespaceDefault: 'the namespace of --namespace',
      acts: 'writes',
    }),
  };

  async run(): Promise<void> {
    const { flags } = await this.parse(RolloutController);
    const ms = (await import('../cli/duration-flag.js')).durationReader(flags);
    await checkNames(flags['config-map'], flags['status-name']);
    const { policyFromFlags } = await import('../core/staged-rollout/policy.js');
    const policy = policyFromFlags({
      canarySelector: flags['canary-selector'],
      canaryCount: flags['canary-count'],
      waves: flags.waves,
      bakeTime: flags['bake-time'],
      progressDeadline: flags['progress-deadline'],
      onHalt: flags['on-halt'],
    });
    const { electedOptions, nonEmpty } = await import('../cli/elected-flags.js');
    const namespace = flags.namespace ?? nonEmpty(process.env['POD_NAMESPACE']);
    const common = await electedOptions(flags, { name: this.config.name, version: this.config.version }, process.env, {
      namespace,
      names: [['namespace', namespace]],
    });
    const { runRolloutControllerProcess } = await import('../cli/run-rollout-controller.js');
    await runRolloutControllerProcess({
      ...common,
      service: {
        ...common.service,
        settings: {
          // '' is resolved once connected: the kubeconfig context's namespace, else default.
          namespace: namespace ?? '',
          name: flags['config-map'],
          instance: flags['status-name'],
          policy,
          resyncMs: ms('resync', 'zero-or-positive'),
        },
      },
    });
    this.exit(0);
  }
}

/** The ConfigMap's name and its copies' (<name>-stable, <name>-candidate), and the status Leases' instance name. */
async function checkNames(configMap: string, statusName: string): Promise<void> {
  const { dns1123SubdomainErrors } = await import('../core/kube/validation.js');
  const { statusNameProblem } = await import('../core/fleet/applied-state.js');
  const { stagedConfigMapName } = await import('../core/rollout-state/annotations.js');
  const nameProblems = dns1123SubdomainErrors(configMap);
  if (nameProblems.length === 0)
    nameProblems.push(...dns1123SubdomainErrors(stagedConfigMapName(configMap, 'candidate')));
  if (nameProblems.length > 0) throw new UsageError(`--config-map: ${nameProblems.join('; ')}`);
  const statusProblem = statusNameProblem(statusName);
  if (statusProblem !== undefined) throw new UsageError(`--status-name: ${statusProblem}`);
}
