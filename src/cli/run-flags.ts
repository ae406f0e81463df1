// The flags of `provisioner run`, as plain data: the oclif command (src/commands/run.ts) declares
// them from this table, and the lean entry (run-lean.ts) parses the same table without loading
// oclif. Whatever the lean parser does not accept exactly as oclif would goes to oclif.
import { DEFAULT_RELOAD_GUARD_POLICY, RELOAD_GUARD_POLICIES } from '../core/config/reload-guard.js';
import { CONFIG_DIR_ENV, DEFAULT_CONFIG_DIR } from './config-dir.js';

interface StringFlagSpec {
  readonly kind: 'string';
  readonly description: string;
  readonly default?: string;
  readonly env?: string;
  readonly options?: readonly string[];
}

interface IntegerFlagSpec {
  readonly kind: 'integer';
  readonly description: string;
  readonly default: number;
  readonly min: number;
}

/** A switch with a `--no-` form; the lean entry leaves every command line that names one to oclif. */
interface BooleanFlagSpec {
  readonly kind: 'boolean';
  readonly description: string;
  readonly default: boolean;
  readonly allowNo: true;
}

export type RunFlagSpec = StringFlagSpec | IntegerFlagSpec | BooleanFlagSpec;

export const RUN_FLAGS = {
  'config-dir': {
    kind: 'string',
    description: 'Config source (ConfigMap directory, YAML file or manifest).',
    default: DEFAULT_CONFIG_DIR,
    env: CONFIG_DIR_ENV,
  },
  'config-source': {
    kind: 'string',
    description:
      "Where the config comes from: `directory` (the --config-dir mount), `configmap:[NAMESPACE/]NAME` (that ConfigMap through the API, watched; the namespace defaults to the pod's) or `staged:[NAMESPACE/]NAME` (a staged rollout of that ConfigMap: its copies NAME-stable and NAME-candidate, the candidate only while the rollout controller has opened this node's wave). With a ConfigMap, --config-dir, when it exists, serves until the ConfigMap can first be read.",
    default: 'directory',
    env: 'PROVISIONER_CONFIG_SOURCE',
  },
  'listen-address': { kind: 'string', description: 'Address of the metrics and health server.', default: ':8080' },
  'metrics-path': { kind: 'string', description: 'Path of the Prometheus metrics.', default: '/metrics' },
  'admin-socket': {
    kind: 'string',
    description: 'Unix socket of the admin endpoint (mode 0600).',
    default: '/run/provisioner/admin.sock',
    env: 'PROVISIONER_ADMIN_SOCKET',
  },
  'discovery-period': {
    kind: 'string',
    description: 'Time between full discovery passes (Go duration).',
    default: '10s',
  },
  'config-sync-period': {
    kind: 'string',
    description:
      'Period of the config check behind the file watcher (a stat of the config files; their content is read only when that changed) (Go duration).',
    default: '5s',
  },
  'config-debounce': {
    kind: 'string',
    description: 'Quiet time that ends a burst of config file events (Go duration).',
    default: '100ms',
  },
  'reload-guard': {
    kind: 'string',
    description:
      'A live reload (file change, SIGHUP, `reload` without --allow) that would orphan PVs or change their ownership: refuse it (the running config stays), warn and apply it, or apply it.',
    options: RELOAD_GUARD_POLICIES,
    default: DEFAULT_RELOAD_GUARD_POLICY,
    env: 'PROVISIONER_RELOAD_GUARD',
  },
  'drain-timeout': {
    kind: 'string',
    description: 'Longest wait for the old sync loop to stop on a reload (Go duration).',
    default: '10s',
  },
  'start-timeout': {
    kind: 'string',
    description: "Longest wait for a new sync loop's caches to sync before rolling back (Go duration).",
    default: '30s',
  },
  'change-poll-interval': {
    kind: 'string',
    description:
      'Poll interval for mount-table and discovery-directory changes when findmnt cannot report them as events; 0 turns change detection off (Go duration).',
    default: '500ms',
  },
  'mount-grace-period': {
    kind: 'string',
    description:
      'How long a discovery-directory entry that is not (yet) a mount point waits before it is reported as skipped (log, Node Event): an operator mounts right after mkdir. 0 reports at once (Go duration).',
    default: '10s',
  },
  'min-pass-interval': {
    kind: 'string',
    description:
      'Least time between discovery passes while mount-table or directory changes keep arriving (a burst of mounts is taken in a few passes, not one per mount); a change after a quiet spell is taken at once. 0: a pass per change (Go duration).',
    default: '500ms',
  },
  'create-concurrency': {
    kind: 'integer',
    description: 'PersistentVolume creations in flight at once.',
    default: 16,
    min: 1,
  },
  'volume-stats-max-series': {
    kind: 'integer',
    description:
      'Cap on per-volume usage series (local_volume_provisioner_volume_*) this node exports; PVs past it (in name order) get none and are counted in local_volume_provisioner_volume_stats_omitted. 0 exports none.',
    default: 10000,
    min: 0,
  },
  'cleanup-concurrency': {
    kind: 'integer',
    description: 'In-process volume cleanups running at once (more wait their turn).',
    default: 8,
    min: 1,
  },
  'kube-api-qps': {
    kind: 'integer',
    description: 'Client-side rate limit of API requests per second.',
    default: 200,
    min: 1,
  },
  'kube-api-burst': { kind: 'integer', description: 'Burst of the client-side rate limit.', default: 400, min: 1 },
  kubeconfig: {
    kind: 'string',
    description: 'Kubeconfig file (default: in-cluster service account).',
    env: 'KUBECONFIG',
  },
  sandbox: {
    kind: 'string',
    description: 'Run against an in-memory cluster with config and disks under this directory (no cluster, no root).',
  },
  'shutdown-timeout': {
    kind: 'string',
    description: 'Longest graceful stop before exiting anyway (Go duration).',
    default: '20s',
  },
  'publish-status': {
    kind: 'boolean',
    description:
      'Publish the applied config state (hash, generation, last reload result) as the Lease <status-name>-<node> in MY_NAMESPACE, read by `provisioner rollout status`.',
    default: true,
    allowNo: true,
  },
  'status-name': {
    kind: 'string',
    description: 'Name of this provisioner instance: prefix and label of its status Leases.',
    default: 'local-static-provisioner',
    env: 'PROVISIONER_STATUS_NAME',
  },
  'status-heartbeat': {
    kind: 'string',
    description:
      'Heartbeat of the status Lease when nothing changes (Go duration); readers call it stale after 3 heartbeats.',
    default: '60s',
  },
  'log-level': {
    kind: 'string',
    description: 'Least severe level logged.',
    options: ['debug', 'info', 'warn', 'error'],
    default: 'info',
  },
  'log-format': {
    kind: 'string',
    description: 'Log line format on stderr.',
    options: ['text', 'json'],
    default: 'text',
  },
} as const satisfies Record<string, RunFlagSpec>;

export type RunFlagName = keyof typeof RUN_FLAGS;
