// Volume health: each pass, every Available or Bound PV of this node whose class is configured is
// checked against the node — its filesystem still mounted and readable, its device node still
// there, its disk still the one it was published for. A change of condition is said once: a Warning
// `VolumeConditionAbnormal` Event (KEP-1432's reason) on the PV and on its claim, a Normal
// `VolumeConditionNormal` when it recovers, and a gauge per abnormal PV. Idle cost: a PV whose mount
// is the one last verified costs nothing (the mount table is the one the pass already has); its
// disk identity is read again only when the mount (or the device a symlink leads to) moved; statfs
// and device stats go PROBES_PER_PASS a pass in turn; and while the PV list and the mount table are
// unchanged and all was healthy, a pass looks at its probe turn only.
//
// The missing-disk policy (opt-in per class, `deleteMissingAfter`): an Available PV whose disk has
// been missing (not mounted, path or device gone) for the class's time, as this agent process saw
// it, is deleted with a UID precondition; discovery publishes it again when the disk returns. A
// Bound or Released PV is never deleted for it.
import { systemClock } from '../clock.js';
import type { Clock } from '../clock.js';
import { durationToMilliseconds, formatGoDuration } from '../config/duration.js';
import type { ClassConfig, ProvisionerConfig } from '../config/model.js';
import { isConflict, isNotFound } from '../kube/cluster.js';
import type { ResourceClients } from '../kube/cluster.js';
import type { EventSink } from '../kube/events.js';
import type { ObjectReference } from '../kube/objects.js';
import type { PersistentVolumeView } from '../pv/cached.js';
import type { Logger } from '../log.js';
import type { AgentMetrics } from '../metrics/agent-metrics.js';
import type { MountPoint, NodeVolumes } from '../node/volumes.js';
import { containerPath } from '../pv/container-path.js';
import { checkIdentity } from '../pv/identity.js';
import type { NodeIdentity } from '../pv/naming.js';
import { errorMessage } from '../unknown-values.js';

export type HealthReason =
  | 'not-mounted'
  | 'path-missing'
  | 'device-missing'
  | 'unreadable'
  | 'identity-changed'
  /** The disk is gone from the PV's path and discovery found it at another entry. */
  | 'moved';

export interface AbnormalVolume {
  readonly pv: string;
  readonly reason: HealthReason;
  readonly message: string;
}

export interface HealthSummary {
  /** PVs checked this pass. */
  readonly checked: number;
  readonly abnormal: readonly AbnormalVolume[];
  /** PVs deleted this pass by the missing-disk policy (absent when none). */
  readonly deleted?: readonly string[];
}

export interface VolumeHealthDeps {
  readonly volumes: NodeVolumes;
  readonly events: EventSink;
  readonly metrics: AgentMetrics;
  readonly logger: Logger;
  /** When each disk went missing is read from it; default the system clock. */
  readonly clock?: Clock;
  /** Deletes PVs for the missing-disk policy: required when a class of the config has one. */
  readonly cluster?: ResourceClients<'persistentVolumes'>;
  /**
   * Since when each PV's disk has been missing (by PV name and UID): the agent keeps one for its
   * lifetime, so a reload (a new generation, a new checker) does not restart the clock and a
   * restart does. Default: this checker's own.
   */
  readonly missingSince?: Map<string, number>;
}

/** The reasons that mean the disk is gone from its path: the missing-disk policy's clock runs only for these. */
const MISSING_REASONS: ReadonlySet<HealthReason> = new Set(['not-mounted', 'path-missing', 'device-missing', 'moved']);

/** The class's policy in milliseconds, or undefined when off. */
function policyMs(classConfig: ClassConfig): number | undefined {
  const text = classConfig.deleteMissingAfter;
  if (text === undefined) return undefined;
  const ms = durationToMilliseconds(text);
  return ms > 0 ? ms : undefined;
}

/** A duration for people, whole seconds (`1h2m3s`). */
function shownDuration(ms: number): string {
  return formatGoDuration(BigInt(Math.floor(ms / 1000)) * 1_000_000_000n);
}

/** What a PV's disk identity was last verified against: its mount (device, root, mount ID) or its device's real path. */
type Verified =
  | { readonly kind: 'mount'; readonly device: string; readonly root: string; readonly mountId: number | undefined }
  | { readonly kind: 'device'; readonly at: string };

function mountIdOf(mount: MountPoint): number | undefined {
  return 'mountId' in mount && typeof mount.mountId === 'number' ? mount.mountId : undefined;
}

function sameVerified(a: Verified | undefined, b: Verified): boolean {
  if (a === undefined || a.kind !== b.kind) return false;
  if (a.kind === 'device' || b.kind === 'device') return a.kind === 'device' && b.kind === 'device' && a.at === b.at;
  return a.device === b.device && a.root === b.root && a.mountId === b.mountId;
}

/**
 * Healthy PVs whose mount did not move get their statfs (or device stat) this many per pass, in
 * turn: 1,000 PVs are each probed every 40 passes, and an idle pass stays a small share of the
 * discovery pass (docs/benchmarks.md).
 */
export const PROBES_PER_PASS = 25;

/** What one pass carries from PV to PV. */
interface PassState {
  readonly now: number;
  readonly mountTable: readonly MountPoint[];
  readonly turns: number;
  readonly seen: Set<string>;
  readonly abnormal: AbnormalVolume[];
  readonly deleted: string[];
  /** PV name → the entry discovery found its disk at this pass. */
  readonly movedTo: ReadonlyMap<string, string>;
  checked: number;
}

/** The same PV objects in the same order (an informer hands out the same object while a PV is unchanged). */
function sameList(a: readonly PersistentVolumeView[], b: readonly PersistentVolumeView[] | undefined): boolean {
  if (b === undefined || a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
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
  private readonly verifiedAt = new Map<string, Verified>();
  /** Passes run, for the probe turns. */
  private passes = 0;
  /** Whether the last pass found every volume healthy, and what it looked at. */
  private allHealthy = false;
  private lastTable: readonly MountPoint[] | undefined;
  private lastList: readonly PersistentVolumeView[] | undefined;
  private readonly places = new WeakMap<
    PersistentVolumeView,
    { readonly key: string; readonly path: string } | 'none'
  >();
  /** Since when each PV's disk has been missing (by PV name and UID). */
  private readonly missingSince: Map<string, number>;
  /** PVs (by name and UID) this pass or an earlier one deleted, so a lagging cache does not delete twice. */
  private readonly deletedKeys = new Set<string>();

  constructor(
    private readonly settings: { readonly config: ProvisionerConfig; readonly node: NodeIdentity },
    private readonly deps: VolumeHealthDeps,
  ) {
    this.missingSince = deps.missingSince ?? new Map<string, number>();
    const withPolicy = Object.keys(settings.config.storageClassMap).filter(
      (name) => settings.config.storageClassMap[name]?.deleteMissingAfter !== undefined,
    );
    if (withPolicy.length > 0 && deps.cluster === undefined)
      throw new Error(
        `volume health: classes ${withPolicy.join(', ')} have deleteMissingAfter, but no cluster client was given`,
      );
  }

  async check(
    persistentVolumes: readonly PersistentVolumeView[],
    mountTable: readonly MountPoint[],
    movedTo: ReadonlyMap<string, string> = new Map(),
  ): Promise<HealthSummary> {
    this.passes += 1;
    const turns = Math.max(1, Math.ceil(persistentVolumes.length / PROBES_PER_PASS));
    // Nothing changed since a pass that found every volume healthy: only this pass's probe turn.
    const quiet = this.allHealthy && mountTable === this.lastTable && sameList(persistentVolumes, this.lastList);
    this.lastTable = mountTable;
    this.lastList = persistentVolumes;
    const pass: PassState = {
      now: (this.deps.clock ?? systemClock).now(),
      mountTable,
      turns,
      seen: new Set<string>(),
      abnormal: [],
      deleted: [],
      movedTo,
      checked: 0,
    };
    if (quiet) {
      for (let index = this.passes % turns; index < persistentVolumes.length; index += turns) {
        const pv = persistentVolumes[index];
        if (pv !== undefined) await this.visit(pv, index, pass);
      }
    } else {
      // Index loops and forEach: under --jitless a for-of allocates a result per step, per PV per pass.
      for (let index = 0; index < persistentVolumes.length; index++) {
        const pv = persistentVolumes[index];
        if (pv !== undefined) await this.visit(pv, index, pass);
      }
      const { seen } = pass;
      const unseen = (keys: { delete(key: string): boolean }) => (_: unknown, key: string) => {
        if (!seen.has(key)) keys.delete(key);
      };
      this.conditions.forEach(unseen(this.conditions));
      this.verifiedAt.forEach(unseen(this.verifiedAt));
      this.missingSince.forEach(unseen(this.missingSince));
      this.deletedKeys.forEach(unseen(this.deletedKeys));
      const usage = this.deps.metrics.volumeUsage;
      usage.forEach(unseen(usage));
    }
    const { abnormal, deleted, checked } = pass;
    this.allHealthy = abnormal.length === 0 && deleted.length === 0;
    const gauge = this.deps.metrics.abnormalVolumes;
    if (!quiet || abnormal.length > 0) {
      gauge.reset();
      for (const a of abnormal) gauge.set({ persistentvolume: a.pv, reason: a.reason }, 1);
    }
    return deleted.length > 0 ? { checked, abnormal, deleted } : { checked, abnormal };
  }

  /** One PV: its condition (said when it changed), and the missing-disk policy. */
  private async visit(pv: PersistentVolumeView, index: number, pass: PassState): Promise<void> {
    const phase = pv.status?.phase;
    if ((phase !== 'Available' && phase !== 'Bound') || pv.metadata.deletionTimestamp !== undefined) return;
    const where = this.whereOf(pv);
    if (where === undefined) return;
    const { key, path } = where;
    pass.seen.add(key);
    if (this.deletedKeys.has(key)) return;
    pass.checked += 1;
    // Each PV's probe turn comes every `turns` passes.
    const probe = index % pass.turns === this.passes % pass.turns;
    if (!probe && this.unmoved(pv, key, path, pass.mountTable)) {
      this.missingSince.delete(key);
      return;
    }
    let condition: Condition;
    try {
      condition = await this.conditionOf(pv, key, path, pass.mountTable, probe);
    } catch (err) {
      condition = { abnormal: true, reason: 'unreadable', message: `${path}: ${errorMessage(err)}` };
    }
    const movedTo = pass.movedTo.get(pv.metadata.name);
    if (condition.abnormal && movedTo !== undefined)
      condition = { abnormal: true, reason: 'moved', message: `its disk is now at ${movedTo} (${condition.message})` };
    this.say(pv, key, condition);
    if (condition.abnormal) this.deps.metrics.volumeUsage.delete(key);
    if (!condition.abnormal || !MISSING_REASONS.has(condition.reason)) {
      this.missingSince.delete(key);
    } else {
      const since = this.missingSince.get(key) ?? pass.now;
      this.missingSince.set(key, since);
      const classConfig = this.settings.config.storageClassMap[pv.spec.storageClassName ?? ''];
      const after = phase === 'Available' && classConfig !== undefined ? policyMs(classConfig) : undefined;
      if (after !== undefined && pass.now - since >= after) {
        const outcome = await this.deleteMissing(pv, key, condition, pass.now - since);
        if (outcome === 'deleted') pass.deleted.push(pv.metadata.name);
        if (outcome !== 'failed') return;
      }
    }
    if (condition.abnormal)
      pass.abnormal.push({ pv: pv.metadata.name, reason: condition.reason, message: condition.message });
  }

  /**
   * The missing-disk policy: deletes an Available PV whose disk has been missing for its class's
   * time, with a UID precondition (a PV recreated meanwhile is not touched). `gone`: deleted or
   * replaced by someone else meanwhile; `failed`: retried at the next pass.
   */
  private async deleteMissing(
    pv: PersistentVolumeView,
    key: string,
    condition: Extract<Condition, { abnormal: true }>,
    missingMs: number,
  ): Promise<'deleted' | 'gone' | 'failed'> {
    const { cluster, events, logger, metrics } = this.deps;
    const name = pv.metadata.name;
    const className = pv.spec.storageClassName ?? '';
    const policy = this.settings.config.storageClassMap[className]?.deleteMissingAfter ?? '';
    const missingFor = shownDuration(missingMs);
    if (cluster === undefined) return 'failed'; // refused at construction
    metrics.apiRequests.inc({ method: 'delete' });
    try {
      await cluster.persistentVolumes.delete(name, pv.metadata.uid !== undefined ? { uid: pv.metadata.uid } : {});
    } catch (err) {
      if (isNotFound(err) || isConflict(err)) {
        // Deleted or replaced meanwhile: nothing of this PV is left to delete.
        this.deletedKeys.add(key);
        this.missingSince.delete(key);
        return 'gone';
      }
      metrics.apiRequestsFailed.inc({ method: 'delete' });
      logger.log('warn', 'could not delete a PV whose disk is missing; retrying next pass', {
        pv: name,
        detail: errorMessage(err),
      });
      return 'failed';
    }
    this.deletedKeys.add(key);
    this.missingSince.delete(key);
    this.conditions.delete(key);
    this.verifiedAt.delete(key);
    metrics.missingVolumesDeleted.inc({ storageclass: className, reason: condition.reason });
    logger.log('info', 'deleted an Available PV whose disk is missing', {
      pv: name,
      storageClass: className,
      reason: condition.reason,
      missingFor,
      deleteMissingAfter: policy,
    });
    events.record(
      {
        apiVersion: 'v1',
        kind: 'PersistentVolume',
        name,
        ...(pv.metadata.uid !== undefined ? { uid: pv.metadata.uid } : {}),
      },
      'Warning',
      'VolumeMissingDeleted',
      `Deleted PV "${name}": its disk has been missing for ${missingFor} (${condition.message}; ${condition.reason}), and storage class ${className} has deleteMissingAfter: ${policy}; it is published again when the disk returns`,
    );
    return 'deleted';
  }

  /** The PV's key (name and UID) and container path, kept per PV object: an informer's unchanged PV is the same object. */
  private whereOf(pv: PersistentVolumeView): { readonly key: string; readonly path: string } | undefined {
    const cached = this.places.get(pv);
    if (cached !== undefined) return cached === 'none' ? undefined : cached;
    const classConfig = this.settings.config.storageClassMap[pv.spec.storageClassName ?? ''];
    const path = classConfig && containerPath(pv, classConfig.hostDir, classConfig.mountDir);
    const place = path === undefined ? undefined : { key: `${pv.metadata.name}/${pv.metadata.uid ?? ''}`, path };
    this.places.set(pv, place ?? 'none');
    return place;
  }

  /**
   * Healthy when last seen, and its mount (a Filesystem PV) is the one last verified: nothing to
   * read this pass. Synchronous: an idle pass over 1,000 PVs awaits nothing.
   */
  private unmoved(pv: PersistentVolumeView, key: string, path: string, mountTable: readonly MountPoint[]): boolean {
    const before = this.conditions.get(key);
    const last = this.verifiedAt.get(key);
    if (before === undefined || before.abnormal || last === undefined) return false;
    if (pv.spec.volumeMode === 'Block') return last.kind === 'device';
    const mount = topMountAt(mountTable, path);
    if (mount === undefined) return last.kind === 'device';
    return sameVerified(last, { kind: 'mount', device: mount.device, root: mount.root, mountId: mountIdOf(mount) });
  }

  /**
   * The PV's condition. Without `probe`, a PV that was healthy and whose mount (or device) is the
   * one last verified is taken as healthy without a syscall: statfs, the device's stat and the
   * identity are read when the mount moved, when the PV was not healthy, or on its probe turn.
   */
  private async conditionOf(
    pv: PersistentVolumeView,
    key: string,
    path: string,
    mountTable: readonly MountPoint[],
    probe: boolean,
  ): Promise<Condition> {
    const { volumes } = this.deps;
    const before = this.conditions.get(key);
    const full = probe || before === undefined || before.abnormal;
    const last = this.verifiedAt.get(key);
    let verified: Verified;
    const mount = pv.spec.volumeMode === 'Block' ? undefined : topMountAt(mountTable, path);
    if (mount !== undefined) {
      verified = { kind: 'mount', device: mount.device, root: mount.root, mountId: mountIdOf(mount) };
      if (!full && sameVerified(last, verified)) return NORMAL;
      // The one statfs of this probe turn, kept for the usage gauges (docs/observability.md#volume-usage).
      if (volumes.filesystemUsage === undefined) await volumes.filesystemCapacity(path);
      else this.deps.metrics.volumeUsage.set(key, await volumes.filesystemUsage(path));
    } else {
      // A Filesystem PV that was mounted and is not: found from the mount table alone, every pass.
      if (!full && last?.kind === 'device') return NORMAL;
      // A Block PV, or a block device in a Filesystem class (kubelet formats and mounts it itself).
      const info = await volumes.entryInfo(path);
      if (info.kind === 'block-device') verified = { kind: 'device', at: info.realPath ?? path };
      else if (pv.spec.volumeMode === 'Block')
        return { abnormal: true, reason: 'device-missing', message: `no block device at ${path}` };
      else if (info.kind === 'missing')
        return { abnormal: true, reason: 'path-missing', message: `${path} does not exist` };
      else return { abnormal: true, reason: 'not-mounted', message: `nothing is mounted at ${path}` };
    }
    if (sameVerified(last, verified)) return NORMAL;
    const verdict = checkIdentity(pv, await volumes.volumeIdentity(path), this.settings.node);
    if (verdict.kind === 'mismatch')
      return { abnormal: true, reason: 'identity-changed', message: `${path}: ${verdict.message}` };
    this.verifiedAt.set(key, verified);
    return NORMAL;
  }

  /** One Event on the PV (and its claim) when the condition changed; nothing when it did not. */
  private say(pv: PersistentVolumeView, key: string, condition: Condition): void {
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
