import { Flags } from '@oclif/core';
import { ProvisionerCommand } from '../cli/base-command.js';
import { UsageError } from '../core/errors.js';
import { electedServiceFlags } from './flags.js';

export default class NodeCleanup extends ProvisionerCommand {
  static override summary =
    'Delete the claims and PVs of deleted Nodes, so StatefulSet pods schedule elsewhere (upstream node-cleanup-controller).';

  static override description = `Watches Nodes and the local PersistentVolumes of --storageclass-names. When no Node can use a PV (matched the way its node affinity names nodes: the kubernetes.io/hostname label, else the Node name) for --pvc-deletion-delay, and the API still says so, it deletes the claim bound to the PV (a StatefulSet then recreates it and its pod schedules on another node) and, once the PV is Released (reclaim policy Delete) or if it is Available, the PV. Only API objects are deleted, never data. A claim that a scheduled, running pod uses is left alone. Every deletion is an Event.

Run two replicas: they elect a leader on a Lease (--leader-elect-lease-name in --leader-elect-lease-namespace) and only the leader acts. --dry-run logs and records Normal events of what would be deleted and deletes nothing.

Serves /metrics (upstream's local_volume_node_cleanup_* series), /healthz and /readyz on --listen-address (empty: off).

Environment: POD_NAMESPACE (the lease namespace), POD_NAME (this replica's identity), KUBECONFIG.
Exit codes: 0 stopped by SIGTERM/SIGINT, 2 usage error, 5 start-up failed (cluster unreachable, Nodes cannot be listed, listen address taken). See docs/operations.md#node-cleanup.`;

  static override examples = [
    '<%= config.bin %> <%= command.id %> --storageclass-names local-storage --pvc-deletion-delay 5m',
    '<%= config.bin %> <%= command.id %> --storageclass-names fast-disks,slow-disks --dry-run',
  ];

  static override flags = {
    'storageclass-names': Flags.string({
      description: 'Comma-separated StorageClasses whose local PVs are cleaned up; empty: nothing is (as upstream).',
      default: '',
    }),
    'pvc-deletion-delay': Flags.string({
      description:
        'Grace period: how long no Node may have existed for a PV before its claim (or the PV) is deleted (Go duration).',
      default: '60s',
    }),
    'stale-pv-discovery-interval': Flags.string({
      description: 'Time between two passes over the PVs; a Node delete starts one at once (Go duration).',
      default: '10s',
    }),
    resync: Flags.string({
      description: 'Full relist of the Node and PV caches, a safety net under the watches; 0: none (Go duration).',
      default: '10m',
    }),
    'worker-threads': Flags.integer({
      description: 'Accepted for upstream compatibility; deletions run one at a time (it has no effect).',
      min: 1,
    }),
    'dry-run': Flags.boolean({ description: 'Log and record Normal events of what would be deleted; delete nothing.' }),
    ...electedServiceFlags({
      listenAddress: ':8080',
      leaseName: 'local-volume-node-cleanup',
      namespaceDefault: "POD_NAMESPACE, else the kubeconfig context's, else default",
      acts: 'acts',
    }),
  };

  async run(): Promise<void> {
    const { flags } = await this.parse(NodeCleanup);
    const ms = (await import('../cli/duration-flag.js')).durationReader(flags);
    const { dns1123SubdomainErrors } = await import('../core/kube/validation.js');
    const classes = flags['storageclass-names']
      .split(',')
      .map((c) => c.trim())
      .filter((c) => c !== '');
    for (const name of classes) {
      const problems = dns1123SubdomainErrors(name);
      if (problems.length > 0)
        throw new UsageError(
          `--storageclass-names: ${JSON.stringify(name)} is not a StorageClass name: ${problems.join('; ')}`,
        );
    }
    const { electedOptions } = await import('../cli/elected-flags.js');
    const common = await electedOptions(
      flags,
      { name: this.config.name, version: this.config.version },
      process.env,
      {},
    );
    const { runNodeCleanupProcess } = await import('../cli/run-node-cleanup.js');
    await runNodeCleanupProcess({
      ...common,
      service: {
        ...common.service,
        settings: {
          storageClassNames: new Set(classes),
          gracePeriodMs: ms('pvc-deletion-delay', 'zero-or-positive'),
          discoveryIntervalMs: ms('stale-pv-discovery-interval'),
          resyncMs: ms('resync', 'zero-or-positive'),
          dryRun: flags['dry-run'],
        },
      },
    });
    this.exit(0);
  }
}
