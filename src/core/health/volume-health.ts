// Volume health: each pass, every Available or Bound PV of this node whose class is configured is
// checked against the node — its filesystem still mounted and readable, its device node still
// there, its disk still the one it was published for. A change of condition is said once: a Warning
// `VolumeConditionAbnormal` Event (KEP-1432's reason) on the PV and on its claim, a Normal
// `VolumeConditionNormal` when it recovers, and a gauge per abnormal PV. Idle cost: the mount table
// the pass already has, one statfs or stat per PV; the disk identity is read again only when the
// mount (or the device a symlink leads to) changed since it was last verified.
import type { ProvisionerConfig } from '../config/model.js';
import type { EventSink } from '../kube/events.js';
import type { ObjectReference, PersistentVolume } from '../kube/objects.js';
import type { Logger } from '../log.js';
import type { AgentMetrics } from '../metrics/agent-metrics.js';
import type { MountPoint, NodeVolumes } from '../node/volumes.js';
import { containerPath } from '../pv/container-path.js';
import { checkIdentity } from '../pv/identity.js';
import type { NodeIdentity } from '../pv/naming.js';
import { errorMessage } from '../unknown-values.js';

export type HealthReason = 'not-mounted' | 'path-missing' | 'device-missing' | 'unreadable' | 'identity-changed';

export interface AbnormalVolume {
  readonly pv: string;
  readonly reason: HealthReason;
  readonly message: string;
}

export interface HealthSummary {
  /** PVs checked this pass. */
  readonly checked: number;
  readonly abnormal: readonly AbnormalVolume[];
}

export interface VolumeHealthDeps {
  readonly volumes: NodeVolumes;
  readonly events: EventSink;
  readonly metrics: AgentMetrics;
  readonly logger: Logger;
}

type Condition =
  { readonly abnormal: false } | { readonly abnormal: true; readonly reason: HealthReason; readonly message: string };

const NORMAL: Condition = { abnormal: false };

/** The topmost mount at each mount point of a table (the last one mounted there). */
const topMounts = new WeakMap<readonly MountPoint[], ReadonlyMap<string, MountPoint>>();
function topMountAt(table: readonly MountPoint[], path: string): MountPoint | undefined {
  let map = topMounts.get(table);
  if (map === undefined) {
    const built = new Map<string, MountPoint>();
    for (const m of table) built.set(m.mountPoint, m);
    topMounts.set(table, built);
    map = built;
  }
  return map.get(path);
}

export class VolumeHealth {
  /** The last condition said of each PV (by name and UID). */
  private readonly conditions = new Map<string, Condition>();
  /** What the disk identity of each PV was last verified against (its mount, or its device's real path). */
  private readonly verifiedAt = new Map<string, string>();

  constructor(
    private readonly settings: { readonly config: ProvisionerConfig; readonly node: NodeIdentity },
    private readonly deps: VolumeHealthDeps,
  ) {}

  async check(
    persistentVolumes: readonly PersistentVolume[],
    mountTable: readonly MountPoint[],
  ): Promise<HealthSummary> {
    const abnormal: AbnormalVolume[] = [];
    const seen = new Set<string>();
    let checked = 0;
    for (const pv of persistentVolumes) {
      const phase = pv.status?.phase;
      if ((phase !== 'Available' && phase !== 'Bound') || pv.metadata.deletionTimestamp !== undefined) continue;
      const classConfig = this.settings.config.storageClassMap[pv.spec.storageClassName ?? ''];
      const path = classConfig && containerPath(pv, classConfig.hostDir, classConfig.mountDir);
      if (path === undefined) continue;
      const key = `${pv.metadata.name}/${pv.metadata.uid ?? ''}`;
      seen.add(key);
      checked += 1;
      let condition: Condition;
      try {
        condition = await this.conditionOf(pv, key, path, mountTable);
      } catch (err) {
        condition = { abnormal: true, reason: 'unreadable', message: `${path}: ${errorMessage(err)}` };
      }
      if (condition.abnormal)
        abnormal.push({ pv: pv.metadata.name, reason: condition.reason, message: condition.message });
      this.say(pv, key, condition);
    }
    for (const key of this.conditions.keys()) if (!seen.has(key)) this.conditions.delete(key);
    for (const key of this.verifiedAt.keys()) if (!seen.has(key)) this.verifiedAt.delete(key);
    const gauge = this.deps.metrics.abnormalVolumes;
    gauge.reset();
    for (const a of abnormal) gauge.set({ persistentvolume: a.pv, reason: a.reason }, 1);
    return { checked, abnormal };
  }

  private async conditionOf(
    pv: PersistentVolume,
    key: string,
    path: string,
    mountTable: readonly MountPoint[],
  ): Promise<Condition> {
    const { volumes } = this.deps;
    let where: string;
    const mount = pv.spec.volumeMode === 'Block' ? undefined : topMountAt(mountTable, path);
    if (mount !== undefined) {
      await volumes.filesystemCapacity(path);
      where = `${mount.device}|${mount.root}|${'mountId' in mount ? String(mount.mountId) : ''}`;
    } else {
      // A Block PV, or a block device in a Filesystem class (kubelet formats and mounts it itself).
      const info = await volumes.entryInfo(path);
      if (info.kind === 'block-device') where = info.realPath ?? path;
      else if (pv.spec.volumeMode === 'Block')
        return { abnormal: true, reason: 'device-missing', message: `no block device at ${path}` };
      else if (info.kind === 'missing')
        return { abnormal: true, reason: 'path-missing', message: `${path} does not exist` };
      else return { abnormal: true, reason: 'not-mounted', message: `nothing is mounted at ${path}` };
    }
    if (this.verifiedAt.get(key) === where) return NORMAL;
    const verdict = checkIdentity(pv, await volumes.volumeIdentity(path), this.settings.node);
    if (verdict.kind === 'mismatch')
      return { abnormal: true, reason: 'identity-changed', message: `${path}: ${verdict.message}` };
    this.verifiedAt.set(key, where);
    return NORMAL;
  }

  /** One Event on the PV (and its claim) when the condition changed; nothing when it did not. */
  private say(pv: PersistentVolume, key: string, condition: Condition): void {
    const before = this.conditions.get(key);
    this.conditions.set(key, condition);
    if (before === undefined && !condition.abnormal) return;
    if (
      before !== undefined &&
      before.abnormal === condition.abnormal &&
      (!before.abnormal || (condition.abnormal && before.reason === condition.reason))
    )
      return;
    const name = pv.metadata.name;
    const refs: ObjectReference[] = [
      {
        apiVersion: 'v1',
        kind: 'PersistentVolume',
        name,
        ...(pv.metadata.uid !== undefined ? { uid: pv.metadata.uid } : {}),
      },
    ];
    const claim = pv.spec.claimRef;
    if (pv.status?.phase === 'Bound' && claim?.name !== undefined) {
      refs.push({
        apiVersion: 'v1',
        kind: 'PersistentVolumeClaim',
        name: claim.name,
        namespace: claim.namespace ?? 'default',
        ...(claim.uid !== undefined ? { uid: claim.uid } : {}),
      });
    }
    if (condition.abnormal) {
      this.deps.logger.log('warn', 'volume condition abnormal', {
        pv: name,
        reason: condition.reason,
        detail: condition.message,
      });
      for (const ref of refs)
        this.deps.events.record(
          ref,
          'Warning',
          'VolumeConditionAbnormal',
          `${name}: ${condition.message} (${condition.reason})`,
        );
    } else {
      this.deps.logger.log('info', 'volume condition normal again', { pv: name });
      for (const ref of refs)
        this.deps.events.record(ref, 'Normal', 'VolumeConditionNormal', `${name}: the volume is healthy again`);
    }
  }
}
