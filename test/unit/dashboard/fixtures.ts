// Agent statuses, events and a scriptable feed for the dashboard's tests.
import type {
  AgentEvent,
  AgentStatusJson,
  CleanupStatus,
  ReloadOutcome,
  ReloadResult,
} from '../../../src/core/agent/reload-types.js';
import type { DeviceVerdict } from '../../../src/core/disk-rules/decide.js';
import type { DashboardFeed, FeedMessage } from '../../../src/ui/dashboard/feed.js';
import { summarizeRollout } from '../../../src/core/staged-rollout/status.js';
import type { RolloutStatus } from '../../../src/core/staged-rollout/status.js';
import type { PublishedState } from '../../../src/core/fleet/applied-state.js';
import type { RolloutState } from '../../../src/core/rollout-state/state.js';

export const T0 = Date.UTC(2026, 10, 30, 12, 0, 0);
export const HASH_A = `sha256:${'a1'.repeat(32)}`;
export const HASH_B = `sha256:${'b2'.repeat(32)}`;
export const HASH_C = `sha256:${'c3'.repeat(32)}`;

export function cleanup(overrides: Partial<CleanupStatus> = {}): CleanupStatus {
  return {
    pv: 'local-pv-44444444',
    method: 'process',
    state: 'running',
    startedAt: T0 - 42_000,
    attempts: 1,
    ...overrides,
  };
}

export function status(overrides: Partial<AgentStatusJson> = {}): AgentStatusJson {
  return {
    formatVersion: 1,
    node: 'worker-7',
    version: '1.2.3',
    pid: 4242,
    startedAt: T0 - 3_723_000,
    now: T0,
    generation: 7,
    ready: true,
    config: { source: '/etc/provisioner/config', appliedHash: HASH_A, onDiskHash: HASH_A, subPath: false },
    source: {
      configured: { kind: 'directory', path: '/etc/provisioner/config' },
      inUse: { kind: 'directory', path: '/etc/provisioner/config' },
    },
    reloadPending: false,
    classes: [
      {
        name: 'fast-disks',
        hostDir: '/mnt/fast-disks',
        mountDir: '/mnt/fast-disks',
        persistentVolumes: [
          {
            name: 'local-pv-11111111',
            path: '/mnt/fast-disks/nvme0',
            capacity: '100Gi',
            phase: 'Bound',
            claim: 'db/data-0',
          },
          { name: 'local-pv-22222222', path: '/mnt/fast-disks/nvme1', capacity: '100Gi', phase: 'Available' },
        ],
        skipped: [{ entry: 'lost+found', reason: 'not-a-mount-point', message: 'not mounted' }],
      },
      {
        name: 'slow-disks',
        hostDir: '/mnt/slow-disks',
        mountDir: '/mnt/slow-disks',
        persistentVolumes: [
          {
            name: 'local-pv-33333333',
            path: '/mnt/slow-disks/sda',
            capacity: '2Ti',
            phase: 'Released',
            claim: 'web/cache',
          },
        ],
        skipped: [],
      },
    ],
    cleanups: [cleanup()],
    lastPass: { at: T0 - 3000, durationMs: 12, created: 0, deleted: 0, abnormal: 0, quarantined: 0 },
    ...overrides,
  };
}

const BY_ID = 'nvme-Amazon_EC2_NVMe_Instance_Storage_AWS';

/**
 * A pass of disks-by-rule rules over eight devices, in the agent's order (by name): every kind of
 * verdict, plan and apply mode, and a device still settling.
 */
export const DEVICE_VERDICTS: readonly DeviceVerdict[] = [
  { kind: 'linked', device: 'nvme0n1', className: 'fast-disks', entry: `${BY_ID}0A` },
  {
    kind: 'link',
    device: 'nvme10n1',
    className: 'fast-disks',
    rule: 0,
    apply: false,
    entry: `${BY_ID}10A`,
    target: `/dev/disk/by-id/${BY_ID}10A`,
  },
  {
    kind: 'link',
    device: 'nvme2n1',
    className: 'fast-disks',
    rule: 0,
    apply: true,
    entry: `${BY_ID}2A`,
    target: `/dev/disk/by-id/${BY_ID}2A`,
  },
  {
    kind: 'skip',
    device: 'nvme3n1',
    className: 'fast-disks',
    rule: 0,
    reason: 'signature',
    detail: 'xfs signature at offset 0',
  },
  {
    kind: 'skip',
    device: 'nvme4n1',
    className: 'fast-disks',
    rule: 0,
    reason: 'settling',
    detail: 'size stable for 4000 ms of 10000',
  },
  {
    kind: 'skip',
    device: 'sdb',
    className: 'slow-disks',
    rule: 0,
    reason: 'mounted',
    detail: 'mounted at /var/lib/containerd',
  },
  { kind: 'carved', device: 'sdc', className: 'slow-disks', partitions: 4 },
  { kind: 'carve', device: 'sdd', className: 'slow-disks', rule: 1, apply: false, partitions: 2 },
];

/** The status of an agent whose rules select `verdicts`, and the counts the agent gives for them (DEVICE_VERDICTS' by default). */
export function withDevices(
  verdicts: readonly DeviceVerdict[] = DEVICE_VERDICTS,
  counts = { linked: 3, skipped: 2, planned: 2 },
): AgentStatusJson {
  const base = status({ devices: verdicts });
  const lastPass = base.lastPass ?? { at: T0, durationMs: 0, created: 0, deleted: 0, abnormal: 0, quarantined: 0 };
  return { ...base, lastPass: { ...lastPass, devices: counts } };
}

export function reloadResult(outcome: ReloadOutcome, overrides: Partial<ReloadResult> = {}): ReloadResult {
  return {
    outcome,
    trigger: 'admin',
    forced: false,
    generation: 7,
    appliedHash: HASH_A,
    changes: [],
    issues: [],
    startedAt: T0 - 1000,
    durationMs: 14,
    ...overrides,
  };
}

export const APPLIED = reloadResult('applied', {
  trigger: 'fs',
  generation: 8,
  appliedHash: HASH_B,
  candidateHash: HASH_B,
  changes: [
    {
      path: 'storageClassMap.fast-disks.fsType',
      action: 'modified',
      impact: 'new-pvs-only',
      summary: 'New PVs get the new spec.local.fsType.',
    },
  ],
});

export const REJECTED = reloadResult('rejected', {
  trigger: 'fs',
  candidateHash: HASH_C,
  issues: [
    {
      severity: 'error',
      path: 'storageClassMap.fast-disks.volumeMode',
      message: 'unsupported volume mode "Blok"',
      position: { file: '/etc/provisioner/config/storageClassMap', line: 4, column: 15 },
    },
    { severity: 'error', path: 'useJobForCleaning', message: 'not a boolean' },
    { severity: 'warning', path: 'fsType2', message: 'unknown key ignored' },
  ],
});

export function logEvent(message: string, level = 'info', at = T0): AgentEvent {
  return { type: 'log', at, level, message, fields: {} };
}

/** A feed the test drives by hand. */
export class FakeFeed implements DashboardFeed {
  listener: ((message: FeedMessage) => void) | undefined;
  started = 0;
  stopped = 0;

  start(listener: (message: FeedMessage) => void): () => Promise<void> {
    this.listener = listener;
    this.started += 1;
    return () => {
      this.stopped += 1;
      this.listener = undefined;
      return Promise.resolve();
    };
  }

  send(message: FeedMessage): void {
    if (this.listener === undefined) throw new Error('the feed is not started');
    this.listener(message);
  }

  event(event: AgentEvent, at = T0): void {
    this.send({ type: 'event', event, at });
  }
}

/** A node's status Lease as `rollout status` reads it: HASH_A applied, fresh. */
export function published(node: string, overrides: Partial<PublishedState> = {}): PublishedState {
  return {
    node,
    appliedHash: HASH_A,
    generation: 2,
    result: 'applied',
    source: 'staged',
    agentVersion: '1.2.3',
    heartbeatAt: T0 - 1000,
    staleAfterMs: 180_000,
    ...overrides,
  };
}

/**
 * The fleet pane's data: nodes worker-1..5 against the desired HASH_B. With `state`, a staged
 * rollout of kube-system/lvp-config (stable HASH_A, candidate HASH_B): canary [worker-1],
 * wave-1 [worker-2, worker-3], wave-2 [worker-4, worker-5].
 */
export function fleetStatus(reports: readonly PublishedState[], state?: Partial<RolloutState>): RolloutStatus {
  const nodes = ['worker-1', 'worker-2', 'worker-3', 'worker-4', 'worker-5'];
  const staged =
    state === undefined
      ? undefined
      : {
          namespace: 'kube-system',
          name: 'lvp-config',
          stable: { fingerprint: HASH_C, hash: HASH_A },
          state: {
            phase: 'progressing' as const,
            candidate: { fingerprint: `sha256:${'d4'.repeat(32)}`, hash: HASH_B },
            stable: { fingerprint: HASH_C, hash: HASH_A },
            waves: [
              { name: 'canary', nodes: ['worker-1'], size: 1 },
              { name: 'wave-1', nodes: ['worker-2', 'worker-3'], size: 2 },
              { name: 'wave-2', nodes: ['worker-4', 'worker-5'], size: 2 },
            ],
            opened: 1,
            waveOpenedAt: T0 - 60_000,
            reverted: false,
            startedAt: T0 - 600_000,
            updatedAt: T0 - 60_000,
            ...state,
          },
        };
  return summarizeRollout(
    { hash: HASH_B, source: 'configmap kube-system/lvp-config' },
    { namespace: 'kube-system', instance: 'lvp' },
    nodes,
    reports,
    T0,
    staged,
  );
}
