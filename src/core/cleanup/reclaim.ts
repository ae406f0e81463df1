// The reclaim half of a sync-loop pass (upstream's DeletePVs, pkg/deleter): Released PVs with
// reclaim policy Delete are cleaned — in-process or by a Job — and deleted only after their cleanup
// completed. A cleanup in flight is always finished by the method it started with, whatever the
// config says now, so a reload never cleans a volume twice (the four cases in docs/cleanup.md).
import type { Clock } from '../clock.js';
import type { ClassConfig, ProvisionerConfig, VolumeMode } from '../config/model.js';
import { isAlreadyExists, isNotFound } from '../kube/cluster.js';
import type { Cluster } from '../kube/cluster.js';
import type { EventSink } from '../kube/events.js';
import type { Job, ObjectReference, PersistentVolume } from '../kube/objects.js';
import { parseQuantity } from '../kube/quantity.js';
import type { Logger } from '../log.js';
import type { AgentMetrics } from '../metrics/agent-metrics.js';
import type { NodeVolumes } from '../node/volumes.js';
import { containerPath } from '../pv/container-path.js';
import type { NodeIdentity } from '../pv/naming.js';
import {
  acceptRequested,
  checkIdentity,
  hasRecordedIdentity,
  IDENTITY_ACTION_ANNOTATION,
  NO_IDENTITY,
  recordIdentityPatch,
} from '../pv/identity.js';
import type { QuarantineReason } from '../pv/identity.js';
import { buildCleanupJob, cleanupJobName, jobFailureMessage, jobOutcome } from './jobs.js';
import type { CleanupEntry, CleanupMethod, CleanupSpec, CleanupTable } from './table.js';
import { errorMessage } from '../unknown-values.js';

export interface JobLookup {
  /** The cleanup Job of this name in the agent's namespace, if any. */
  get(name: string): Promise<Job | undefined>;
}

export interface ReclaimDeps {
  readonly cluster: Cluster;
  readonly volumes: NodeVolumes;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly metrics: AgentMetrics;
  readonly events: EventSink;
  readonly table: CleanupTable;
  readonly jobs: JobLookup;
}

export interface ReclaimSettings {
  readonly config: ProvisionerConfig;
  readonly node: NodeIdentity;
  readonly namespace: string;
  readonly jobImage: string | undefined;
}

export interface QuarantinedVolume {
  readonly pv: string;
  readonly reason: QuarantineReason;
  readonly message: string;
}

export interface ReclaimSummary {
  readonly deleted: readonly string[];
  readonly started: readonly string[];
  readonly orphaned: readonly { readonly pv: string; readonly reason: string }[];
  /** Released PVs held back: the disk at the path is not the one they were published for. */
  readonly quarantined: readonly QuarantinedVolume[];
  /** PVs whose identity this pass recorded (first seen without one, or accepted by an operator). */
  readonly identitiesRecorded: readonly string[];
}

/** At most this many PVs get their identity recorded per pass (adopted PVs: a patch each). */
const IDENTITY_RECORDS_PER_PASS = 100;

type ReclaimOutcome = 'deleted' | 'started' | 'waiting' | { readonly orphan: string } | QuarantinedVolume;

const GiB = 2 ** 30;

/** Upstream's CapacityBreakDown label: 500G buckets. */
function capacityBucket(bytes: number): string {
  return `${Math.floor(bytes / (500 * GiB)) * 500}G`;
}

function pvRef(pv: PersistentVolume): ObjectReference {
  return {
    apiVersion: 'v1',
    kind: 'PersistentVolume',
    name: pv.metadata.name,
    ...(pv.metadata.uid !== undefined ? { uid: pv.metadata.uid } : {}),
  };
}

/**
 * The cleanup table's change hook: every failed cleanup — in-process, Job, or one that could not
 * start — is counted once and reported once as a VolumeFailedDelete event on its PV.
 */
export function reportCleanupFailures(deps: {
  readonly events: EventSink;
  readonly metrics: AgentMetrics;
}): (entry: CleanupEntry) => void {
  return (entry) => {
    if (entry.state !== 'failed') return;
    deps.metrics.deleteFailed.inc({ mode: entry.mode, type: entry.method });
    deps.events.record(
      { apiVersion: 'v1', kind: 'PersistentVolume', name: entry.pvName, uid: entry.pvUid },
      'Warning',
      'VolumeFailedDelete',
      `Error cleaning PV "${entry.pvName}": ${entry.lastError ?? 'unknown error'}`,
    );
  };
}

export class Reclaimer {
  /** Problems already logged in this generation (events are rate-limited by the recorder). */
  private readonly reported = new Set<string>();
  /**
   * PVs this reclaimer deleted after their cleanup (name → UID), kept while the list passed in still
   * shows them: a cache that has not seen the delete yet (a watch that lags or broke) must not start
   * the same volume's cleanup again, which would wipe it once more and race its republication.
   */
  private readonly deletedHere = new Map<string, string>();
  /** PVs (name/UID) whose identity could not be recorded, already logged. */
  private readonly identityWarned = new Set<string>();

  constructor(
    private readonly settings: ReclaimSettings,
    private readonly deps: ReclaimDeps,
  ) {}

  private reportOnce(key: string, pv: PersistentVolume, reason: string, text: string): void {
    if (this.reported.has(key)) return;
    this.reported.add(key);
    this.deps.logger.log('warn', text, { pv: pv.metadata.name, reason });
    this.deps.events.record(pvRef(pv), 'Warning', reason, text);
  }

  private failure(pv: PersistentVolume, spec: CleanupSpec, method: CleanupMethod, error: string): void {
    // The table's change hook (reportCleanupFailures) emits the event and the metric.
    this.deps.table.recordFailure(spec, method, error);
    this.deps.logger.log('error', 'cleanup could not start', { pv: pv.metadata.name, error });
  }

  async pass(listed: readonly PersistentVolume[]): Promise<ReclaimSummary> {
    const deleted: string[] = [];
    const started: string[] = [];
    const orphaned: { pv: string; reason: string }[] = [];
    const quarantined: QuarantinedVolume[] = [];
    this.forgetGone(listed);
    const { persistentVolumes, recorded } = await this.recordIdentities(listed);
    for (const pv of persistentVolumes) {
      if (!this.isToReclaim(pv)) continue;
      try {
        const outcome = await this.reclaim(pv);
        if (outcome === 'deleted') deleted.push(pv.metadata.name);
        else if (outcome === 'started') started.push(pv.metadata.name);
        else if (outcome === 'waiting') continue;
        else if ('orphan' in outcome) orphaned.push({ pv: pv.metadata.name, reason: outcome.orphan });
        else quarantined.push(outcome);
      } catch (err) {
        this.deps.logger.log('error', 'reclaiming a PV failed', { pv: pv.metadata.name, error: errorMessage(err) });
      }
    }
    this.deps.metrics.quarantinedVolumes.reset();
    for (const q of quarantined)
      this.deps.metrics.quarantinedVolumes.set({ persistentvolume: q.pv, reason: q.reason }, 1);
    return { deleted, started, orphaned, quarantined, identitiesRecorded: recorded };
  }

  /**
   * Step 0b: identities to record. A PV an operator marked `identity-action: accept` gets the
   * identity of the disk now at its path; an Available or Bound PV without one (adopted from
   * upstream, or published by an older agent) gets it on first sight (trust on first use). Released
   * PVs are never recorded here: that is the moment the check exists for. Returns the list with the
   * patched PVs in place.
   */
  private async recordIdentities(
    listed: readonly PersistentVolume[],
  ): Promise<{ persistentVolumes: readonly PersistentVolume[]; recorded: string[] }> {
    const recorded: string[] = [];
    let result: PersistentVolume[] | undefined;
    let attempts = 0;
    if (this.identityWarned.size > 0) {
      const keys = new Set(listed.map((pv) => `${pv.metadata.name}/${pv.metadata.uid ?? ''}`));
      for (const key of this.identityWarned) if (!keys.has(key)) this.identityWarned.delete(key);
    }
    for (const [index, pv] of listed.entries()) {
      if (attempts >= IDENTITY_RECORDS_PER_PASS) break;
      const accept = acceptRequested(pv);
      const phase = pv.status?.phase;
      const firstSight = !hasRecordedIdentity(pv) && (phase === 'Available' || phase === 'Bound');
      if ((!accept && !firstSight) || pv.metadata.deletionTimestamp !== undefined) continue;
      const classConfig = this.settings.config.storageClassMap[pv.spec.storageClassName ?? ''];
      const path = classConfig && containerPath(pv, classConfig.hostDir, classConfig.mountDir);
      if (path === undefined) continue;
      attempts += 1;
      try {
        const identity = await this.deps.volumes.volumeIdentity(path);
        const patched = await this.deps.cluster.persistentVolumes.patch(
          pv.metadata.name,
          recordIdentityPatch(identity, this.settings.node),
        );
        recorded.push(pv.metadata.name);
        (result ??= [...listed])[index] = patched;
        this.deps.logger.log('info', accept ? 'disk identity accepted' : 'disk identity recorded', {
          pv: pv.metadata.name,
          identity: identity?.id ?? NO_IDENTITY,
        });
        if (accept) {
          const text = `Disk ${identity?.id ?? NO_IDENTITY} at ${path} accepted by the operator as this PV's disk`;
          this.deps.events.record(pvRef(pv), 'Normal', 'VolumeIdentityAccepted', text);
        }
      } catch (err) {
        // Retried every pass (a disk missing now, a patch refused): said once per PV.
        const key = `${pv.metadata.name}/${pv.metadata.uid ?? ''}`;
        if (isNotFound(err) || this.identityWarned.has(key)) continue;
        this.identityWarned.add(key);
        this.deps.logger.log('warn', 'could not record a disk identity', {
          pv: pv.metadata.name,
          path,
          error: errorMessage(err),
        });
      }
    }
    return { persistentVolumes: result ?? listed, recorded };
  }

  /**
   * The identity check before a destructive step: the disk at the path must be the one the PV was
   * published for. A mismatch is reported once (log, Warning Event on the PV) and held back.
   */
  private async verifyIdentity(
    pv: PersistentVolume,
    spec: CleanupSpec,
    step: 'cleanup' | 'deletion',
  ): Promise<QuarantinedVolume | 'verified' | 'unreadable'> {
    let current;
    try {
      current = await this.deps.volumes.volumeIdentity(spec.path);
    } catch (err) {
      const error = `cannot read the disk identity at ${spec.path}: ${errorMessage(err)}`;
      if (step === 'cleanup') this.failure(pv, spec, 'process', `${error}; the volume is not cleaned`);
      else
        this.reportOnce(
          `identity-unreadable:${pv.metadata.name}`,
          pv,
          'VolumeFailedDelete',
          `${error}; the PV is kept`,
        );
      return 'unreadable';
    }
    const verdict = checkIdentity(pv, current, this.settings.node);
    if (verdict.kind !== 'mismatch') return 'verified';
    const name = pv.metadata.name;
    const message = `${verdict.message}; not ${step === 'cleanup' ? 'cleaned' : 'deleted'}, the PV is kept (quarantined). To wipe and reuse the disk now at the path: kubectl annotate pv ${name} ${IDENTITY_ACTION_ANNOTATION}=accept; to retire the PV: kubectl delete pv ${name}`;
    this.reportOnce(`quarantine:${name}:${verdict.found}`, pv, 'VolumeIdentityMismatch', message);
    return { pv: name, reason: verdict.reason, message };
  }

  /** Step 0: forget what the list no longer shows (PVs deleted here and seen gone; idle entries of deleted PVs). */
  private forgetGone(persistentVolumes: readonly PersistentVolume[]): void {
    const present = new Set(persistentVolumes.map((pv) => pv.metadata.name));
    const listed = new Set(persistentVolumes.map((pv) => `${pv.metadata.name}/${pv.metadata.uid ?? ''}`));
    for (const [name, uid] of this.deletedHere) if (!listed.has(`${name}/${uid}`)) this.deletedHere.delete(name);
    for (const entry of this.deps.table.list()) {
      if (!present.has(entry.pvName) && entry.state !== 'running' && entry.state !== 'queued')
        this.deps.table.remove(entry.pvName);
    }
  }

  /** Step 1: a Released PV, not being deleted, not deleted here already, whose policy is Delete. */
  private isToReclaim(pv: PersistentVolume): boolean {
    if (pv.status?.phase !== 'Released' || pv.metadata.deletionTimestamp !== undefined) return false;
    if (this.deletedHere.get(pv.metadata.name) === (pv.metadata.uid ?? '')) return false;
    const policy = pv.spec.persistentVolumeReclaimPolicy ?? 'Delete';
    if (policy === 'Delete') return true;
    if (policy === 'Recycle') {
      this.reportOnce(
        `recycle:${pv.metadata.name}`,
        pv,
        'VolumeUnsupportedReclaimPolicy',
        `Volume has unsupported PersistentVolumeReclaimPolicy: ${policy}`,
      );
    } else if (policy !== 'Retain') {
      this.reportOnce(
        `policy:${pv.metadata.name}`,
        pv,
        'VolumeUnknownReclaimPolicy',
        `Volume has unknown PersistentVolumeReclaimPolicy: ${policy}`,
      );
    }
    return false;
  }

  /** Steps 2–5 for one PV: follow a cleanup in flight, or adopt a Job, or start a cleanup; delete once it succeeded. */
  private async reclaim(pv: PersistentVolume): Promise<ReclaimOutcome> {
    const followed = await this.followInFlight(pv);
    if (followed === 'waiting') return 'waiting';
    if (followed?.state === 'succeeded') {
      // Deleting the PV republishes what is at the path: only the disk that was cleaned.
      // A Job of an earlier agent may not say which device it cleaned: the PV's path does.
      const target = followed.path !== '' ? undefined : this.cleanupTarget(pv);
      const spec = target === undefined || 'orphan' in target ? followed : { ...followed, path: target.spec.path };
      const verified = spec.path === '' ? 'verified' : await this.verifyIdentity(pv, spec, 'deletion');
      if (verified !== 'verified') return verified === 'unreadable' ? 'waiting' : verified;
      return (await this.deleteAfterCleanup(pv, followed)) ? 'deleted' : 'waiting';
    }
    if (followed?.state === 'failed' && (followed.retryAt ?? 0) > this.deps.clock.now()) return 'waiting';
    if (await this.adoptJob(pv, followed)) return 'waiting';
    const target = this.cleanupTarget(pv);
    if ('orphan' in target) return target;
    return this.startCleanup(pv, target.spec, target.classConfig);
  }

  /**
   * Step 2: this process's record of the PV's cleanup, brought up to date. A queued or running
   * in-process cleanup, or a Job still running, is waited for; a finished Job is recorded.
   */
  private async followInFlight(pv: PersistentVolume): Promise<CleanupEntry | undefined | 'waiting'> {
    const { table } = this.deps;
    const name = pv.metadata.name;
    const uid = pv.metadata.uid ?? '';
    const entry = table.get(name);
    if (entry && entry.pvUid !== uid) {
      // A record of an earlier PV of the same name never speaks for this one (upstream PR #174).
      table.remove(name);
      return undefined;
    }
    if (entry?.state === 'queued') return 'waiting';
    if (entry?.state !== 'running') return entry;
    if (entry.method === 'process') return 'waiting';
    const job = await this.deps.jobs.get(cleanupJobName(name));
    if (job?.metadata.labels?.['pvuuid'] !== uid) {
      table.finishJob(name, { ok: false, error: `cleanup Job ${cleanupJobName(name)} disappeared before it finished` });
      return 'waiting';
    }
    const outcome = jobOutcome(job);
    if (outcome === 'running') return 'waiting';
    table.finishJob(name, outcome === 'succeeded' ? { ok: true } : { ok: false, error: jobFailureMessage(job) });
    return table.get(name);
  }

  /**
   * Step 3: no cleanup in flight in this process, but a Job may exist — started by an earlier agent
   * process or before a reload turned Job cleaning off. This PV's Job is followed to the end (true);
   * a finished Job of an earlier PV of this name, or a failed one whose backoff is over, is deleted.
   */
  private async adoptJob(pv: PersistentVolume, entry: CleanupEntry | undefined): Promise<boolean> {
    const name = pv.metadata.name;
    const uid = pv.metadata.uid ?? '';
    const existing = await this.deps.jobs.get(cleanupJobName(name));
    if (existing === undefined) return false;
    if (existing.metadata.labels?.['pvuuid'] === uid && entry?.state !== 'failed') {
      const spec: CleanupSpec = {
        pvName: name,
        pvUid: uid,
        className: pv.spec.storageClassName ?? '',
        mode: 'Block',
        path: existing.metadata.annotations?.['device'] ?? '',
        command: existing.spec?.template.spec.containers[0]?.command ?? [],
        capacityBytes: parseQuantity(pv.spec.capacity?.['storage'] ?? '0'),
      };
      const startTime = Date.parse(existing.metadata.annotations?.['start-time'] ?? '');
      this.deps.table.trackJob(spec, Number.isNaN(startTime) ? this.deps.clock.now() : startTime);
      return true;
    }
    await this.deps.cluster.jobs
      .delete(existing.metadata.name, { namespace: this.settings.namespace, propagationPolicy: 'Background' })
      .catch((err: unknown) => {
        if (!isNotFound(err)) throw err;
      });
    return false;
  }

  /** Step 4: the class and the path inside the container the volume is cleaned at; else why it cannot be. */
  private cleanupTarget(
    pv: PersistentVolume,
  ): { readonly spec: CleanupSpec; readonly classConfig: ClassConfig } | { readonly orphan: string } {
    const name = pv.metadata.name;
    const classConfig = this.settings.config.storageClassMap[pv.spec.storageClassName ?? ''];
    if (!classConfig) {
      const reason = `storage class ${pv.spec.storageClassName ?? '(none)'} is not configured: the volume is not cleaned and the PV is kept`;
      this.reportOnce(`orphan:${name}`, pv, 'VolumeFailedDelete', reason);
      return { orphan: reason };
    }
    const path = containerPath(pv, classConfig.hostDir, classConfig.mountDir);
    if (path === undefined) {
      const reason = `PV path ${pv.spec.local?.path ?? '(none)'} is not under hostDir ${classConfig.hostDir}: the volume is not cleaned and the PV is kept`;
      this.reportOnce(`orphan:${name}`, pv, 'VolumeFailedDelete', reason);
      return { orphan: reason };
    }
    const spec: CleanupSpec = {
      pvName: name,
      pvUid: pv.metadata.uid ?? '',
      className: pv.spec.storageClassName ?? '',
      mode: 'Filesystem',
      path,
      command: classConfig.blockCleanerCommand,
      capacityBytes: parseQuantity(pv.spec.capacity?.['storage'] ?? '0'),
    };
    return { spec, classConfig };
  }

  /** Step 5: what is at the path decides the mode; a Block volume by Job when configured, else in-process. */
  private async startCleanup(
    pv: PersistentVolume,
    spec: CleanupSpec,
    classConfig: ClassConfig,
  ): Promise<'started' | 'waiting' | QuarantinedVolume> {
    const { clock } = this.deps;
    const name = pv.metadata.name;
    const { path } = spec;
    const info = await this.deps.volumes.entryInfo(path);
    if (info.kind === 'missing' || info.kind === 'other') {
      // Never delete a PV whose volume cannot be cleaned (upstream FAQ; issue #6 stays a manual decision).
      this.failure(
        pv,
        spec,
        'process',
        info.kind === 'missing'
          ? `volume path ${path} does not exist; the PV is kept`
          : `volume path ${path} is neither a directory nor a block device`,
      );
      return 'waiting';
    }
    const mode: VolumeMode = info.kind === 'block-device' ? 'Block' : 'Filesystem';
    const withMode = { ...spec, mode };
    const verified = await this.verifyIdentity(pv, withMode, 'cleanup');
    if (verified === 'unreadable') return 'waiting';
    if (verified !== 'verified') return verified;
    if (mode === 'Block' && this.settings.config.useJobForCleaning) {
      if (this.settings.jobImage === undefined || this.settings.jobImage === '') {
        this.failure(
          pv,
          withMode,
          'job',
          'cannot run cleanup job without specifying job image name in the environment variable JOB_CONTAINER_IMAGE',
        );
        return 'waiting';
      }
      const job = buildCleanupJob({
        pvName: name,
        pvUid: spec.pvUid,
        nodeName: this.settings.node.name,
        namespace: this.settings.namespace,
        image: this.settings.jobImage,
        classConfig,
        config: this.settings.config,
        devicePath: path,
        startTime: new Date(clock.now()).toISOString(),
      });
      try {
        await this.deps.cluster.jobs.create(job, { namespace: this.settings.namespace });
      } catch (err) {
        // The Job name is a mutex between duplicate agents: someone else is cleaning it.
        if (isAlreadyExists(err)) return 'waiting';
        this.failure(pv, withMode, 'job', `could not create cleanup Job: ${errorMessage(err)}`);
        return 'waiting';
      }
      this.deps.table.trackJob(withMode, clock.now());
      this.deps.logger.log('info', 'cleanup Job created', { pv: name, job: job.metadata.name });
      return 'started';
    }
    if (mode === 'Block') {
      this.deps.events.record(
        pvRef(pv),
        'Normal',
        'VolumeDelete',
        `Starting cleanup of Block PV "${name}", this may take a while`,
      );
    }
    this.deps.table.startProcess(withMode);
    return 'started';
  }

  private async deleteAfterCleanup(pv: PersistentVolume, entry: CleanupEntry): Promise<boolean> {
    const { cluster, metrics, clock, logger, table } = this.deps;
    const name = pv.metadata.name;
    if (entry.method === 'process') {
      const info = await this.deps.volumes.entryInfo(entry.path);
      if (info.kind === 'missing') {
        logger.log('error', 'volume path vanished after its cleanup; the PV is kept', { pv: name, path: entry.path });
        return false;
      }
    }
    const started = clock.now();
    metrics.apiRequests.inc({ method: 'delete' });
    try {
      await cluster.persistentVolumes.delete(name, { uid: entry.pvUid });
    } catch (err) {
      if (!isNotFound(err)) {
        metrics.apiRequestsFailed.inc({ method: 'delete' });
        metrics.deleteFailed.inc({ mode: entry.mode, type: entry.method });
        this.deps.events.record(
          pvRef(pv),
          'Warning',
          'VolumeFailedDelete',
          `Error deleting PV "${name}": ${errorMessage(err)}`,
        );
        return false;
      }
    }
    metrics.apiRequestDuration.observe({ method: 'delete' }, (clock.now() - started) / 1000);
    metrics.deleteTotal.inc({ mode: entry.mode, type: entry.method });
    metrics.deleteDuration.observe(
      {
        mode: entry.mode,
        type: entry.method,
        capacity: capacityBucket(entry.capacityBytes),
        cleanup_command: entry.command[0] ?? '',
      },
      (clock.now() - entry.startedAt) / 1000,
    );
    table.remove(name);
    this.deletedHere.set(name, entry.pvUid);
    logger.log('info', 'deleted PV after successful cleanup', { pv: name, method: entry.method });
    if (entry.method === 'job') {
      await cluster.jobs
        .delete(cleanupJobName(name), { namespace: this.settings.namespace, propagationPolicy: 'Background' })
        .catch((err: unknown) => {
          if (!isNotFound(err))
            logger.log('warn', 'could not delete finished cleanup Job', {
              job: cleanupJobName(name),
              error: errorMessage(err),
            });
        });
    }
    return true;
  }
}
