// The reclaim half of a sync-loop pass (upstream's DeletePVs, pkg/deleter): Released PVs with
// reclaim policy Delete are cleaned — in-process or by a Job — and deleted only after their cleanup
// completed. A cleanup in flight is always finished by the method it started with, whatever the
// config says now, so a reload never cleans a volume twice (the four cases in docs/cleanup.md).
import type { Clock } from '../clock.js';
import type { ClassConfig, ProvisionerConfig, VolumeMode } from '../config/model.js';
import { isAlreadyExists, isNotFound } from '../kube/cluster.js';
import type { Cluster } from '../kube/cluster.js';
import type { EventSink } from '../kube/events.js';
import type { Job, ObjectReference } from '../kube/objects.js';
import type { PersistentVolumeView } from '../pv/cached.js';
import { capacityBytesOf } from '../pv/cached.js';
import type { Logger } from '../log.js';
import type { AgentMetrics } from '../metrics/agent-metrics.js';
import type { NodeVolumes, VolumeIdentity } from '../node/volumes.js';
import { containerPath } from '../pv/container-path.js';
import type { NodeIdentity } from '../pv/naming.js';
import {
  ACCEPT_ACTION,
  checkIdentity,
  hasRecordedIdentity,
  IDENTITY_ACTION_ANNOTATION,
  hasLegacyIdentity,
  identityAction,
  identityMatches,
  legacyIdentityUpgrade,
  NO_IDENTITY,
  recordedIdentity,
  recordIdentityPatch,
  REPORTED_ANNOTATIONS,
} from '../pv/identity.js';
import type { QuarantineReason } from '../pv/identity.js';
import {
  buildCleanupJob,
  cleanerCommandOfJob,
  cleanupJobName,
  guardedJobIdentity,
  identityOfJob,
  jobFailureMessage,
  jobOutcome,
} from './jobs.js';
import type { CleanupEntry, CleanupMethod, CleanupSpec, CleanupTable } from './table.js';
import { errorMessage } from '../unknown-values.js';

export interface JobLookup {
  /** The cleanup Job of this name in the agent's namespace, if any (a watch's cache: it may lag). */
  get(name: string): Promise<Job | undefined>;
  /**
   * The same, read from the apiserver: undefined only when it answers 404 Not Found; throws when it
   * cannot say (unreachable, or answering 403 while it starts and its authorizer is not ready).
   */
  read(name: string): Promise<Job | undefined>;
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

/**
 * A Job of this PV that succeeded on another disk than the one the PV records now (accepted since):
 * its success does not count for the PV, so the Job is removed and the disk cleaned again.
 */
function cleanedAnotherDisk(pv: PersistentVolumeView, job: Job): boolean {
  const cleaned = guardedJobIdentity(job);
  const recorded = recordedIdentity(pv);
  return (
    cleaned !== undefined &&
    recorded !== undefined &&
    jobOutcome(job) === 'succeeded' &&
    !identityMatches(recorded, cleaned)
  );
}

function pvRef(pv: PersistentVolumeView): ObjectReference {
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

/** Why a PV's identity is recorded this pass, and the path of its disk. */
interface IdentityRecord {
  readonly path: string;
  /** The operator's `identity-action: accept`. */
  readonly accept: boolean;
  /** A legacy loop record re-recorded in the current form (I5). */
  readonly upgrade: boolean;
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
  /** PVs (name/UID) with a legacy loop record whose upgrade was tried. */
  private readonly legacyTried = new Set<string>();

  constructor(
    private readonly settings: ReclaimSettings,
    private readonly deps: ReclaimDeps,
  ) {}

  private reportOnce(key: string, pv: PersistentVolumeView, reason: string, text: string): void {
    if (this.reported.has(key)) return;
    this.reported.add(key);
    this.deps.logger.log('warn', text, { pv: pv.metadata.name, reason });
    this.deps.events.record(pvRef(pv), 'Warning', reason, text);
  }

  private failure(pv: PersistentVolumeView, spec: CleanupSpec, method: CleanupMethod, error: string): void {
    // The table's change hook (reportCleanupFailures) emits the event and the metric.
    this.deps.table.recordFailure(spec, method, error);
    this.deps.logger.log('error', 'cleanup could not start', { pv: pv.metadata.name, error });
  }

  async pass(listed: readonly PersistentVolumeView[]): Promise<ReclaimSummary> {
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
    listed: readonly PersistentVolumeView[],
  ): Promise<{ persistentVolumes: readonly PersistentVolumeView[]; recorded: string[] }> {
    const recorded: string[] = [];
    let result: PersistentVolumeView[] | undefined;
    let attempts = 0;
    this.forgetWarnedGone(listed);
    // An index loop: a for-of over entries() allocates a pair and a result per PV under --jitless.
    for (let index = 0; index < listed.length; index++) {
      const pv = listed[index];
      if (pv === undefined) continue;
      if (attempts >= IDENTITY_RECORDS_PER_PASS) break;
      const record = this.identityToRecord(pv);
      if (record === undefined) continue;
      attempts += 1;
      const patched = await this.recordIdentity(pv, record, listed);
      if (patched === undefined) continue;
      recorded.push(pv.metadata.name);
      (result ??= [...listed])[index] = patched;
    }
    return { persistentVolumes: result ?? listed, recorded };
  }

  /** The warnings said once per PV are forgotten for PVs no longer listed. */
  private forgetWarnedGone(listed: readonly PersistentVolumeView[]): void {
    if (this.identityWarned.size === 0) return;
    const keys = new Set(listed.map((pv) => `${pv.metadata.name}/${pv.metadata.uid ?? ''}`));
    for (const key of this.identityWarned) if (!keys.has(key)) this.identityWarned.delete(key);
  }

  /** Why and where the PV's identity is to be recorded this pass; undefined: it is not. */
  private identityToRecord(pv: PersistentVolumeView): IdentityRecord | undefined {
    const action = identityAction(pv);
    if (action !== undefined && action !== 'accept') this.reportInvalidAction(pv, action.invalid);
    const accept = action === 'accept';
    const phase = pv.status?.phase;
    const inUse = phase === 'Available' || phase === 'Bound';
    const firstSight = inUse && !hasRecordedIdentity(pv);
    const upgrade = inUse && !accept && !firstSight && this.legacyToUpgrade(pv);
    if ((!accept && !firstSight && !upgrade) || pv.metadata.deletionTimestamp !== undefined) return undefined;
    const classConfig = this.settings.config.storageClassMap[pv.spec.storageClassName ?? ''];
    const path = classConfig && containerPath(pv, classConfig.hostDir, classConfig.mountDir);
    return path === undefined ? undefined : { path, accept, upgrade };
  }

  /** Records the identity of the disk at the path on the PV; the patched PV, or undefined when not recorded. */
  private async recordIdentity(
    pv: PersistentVolumeView,
    { path, accept, upgrade }: IdentityRecord,
    listed: readonly PersistentVolumeView[],
  ): Promise<PersistentVolumeView | undefined> {
    try {
      const identity = await this.deps.volumes.volumeIdentity(path);
      if (accept && !(await this.acceptable(pv, path, identity, listed))) return undefined;
      if (upgrade && !legacyIdentityUpgrade(pv, identity)) return undefined;
      const patched = await this.deps.cluster.persistentVolumes.patch(
        pv.metadata.name,
        recordIdentityPatch(identity, this.settings.node),
      );
      this.deps.logger.log('info', accept ? 'disk identity accepted' : 'disk identity recorded', {
        pv: pv.metadata.name,
        identity: identity?.id ?? NO_IDENTITY,
      });
      if (accept) {
        const text = `Disk ${identity?.id ?? NO_IDENTITY} at ${path} accepted by the operator as this PV's disk`;
        this.deps.events.record(pvRef(pv), 'Normal', 'VolumeIdentityAccepted', text);
      }
      return patched;
    } catch (err) {
      this.warnRecordFailed(pv, path, err);
      return undefined;
    }
  }

  /** Retried every pass (a disk missing now, a patch refused): said once per PV. */
  private warnRecordFailed(pv: PersistentVolumeView, path: string, err: unknown): void {
    const key = `${pv.metadata.name}/${pv.metadata.uid ?? ''}`;
    if (isNotFound(err) || this.identityWarned.has(key)) return;
    this.identityWarned.add(key);
    this.deps.logger.log('warn', 'could not record a disk identity', {
      pv: pv.metadata.name,
      path,
      error: errorMessage(err),
    });
  }

  /**
   * A legacy loop record (no birth, I5) on a PV in use is re-recorded in the current form, once per
   * PV and agent process: from then on a file recreated under the same numbers no longer matches it.
   */
  private legacyToUpgrade(pv: PersistentVolumeView): boolean {
    if (!hasLegacyIdentity(pv)) return false;
    const key = `${pv.metadata.name}/${pv.metadata.uid ?? ''}`;
    if (this.legacyTried.has(key)) return false;
    this.legacyTried.add(key);
    return true;
  }

  /** An action value other than `accept` is never acted on: said once, the annotation left for the operator. */
  private reportInvalidAction(pv: PersistentVolumeView, value: string): void {
    this.reportOnce(
      `action:${pv.metadata.name}:${value}`,
      pv,
      'VolumeIdentityActionInvalid',
      `${IDENTITY_ACTION_ANNOTATION}=${JSON.stringify(value)} is not an action: the only value is "${ACCEPT_ACTION}"; nothing was done, fix or remove the annotation`,
    );
  }

  /**
   * Whether the disk now at the path may become the PV's: a Filesystem volume must be a mount point
   * (I4: accepting a bare directory would empty the root filesystem's), a Block one a device, and
   * the disk must not be recorded on another PV of this node (I2). A refusal is said once per
   * finding and leaves the annotation.
   */
  private async acceptable(
    pv: PersistentVolumeView,
    path: string,
    identity: VolumeIdentity | undefined,
    listed: readonly PersistentVolumeView[],
  ): Promise<boolean> {
    const info = await this.deps.volumes.entryInfo(path);
    let refusal: string | undefined;
    if (info.kind === 'directory' && pv.spec.volumeMode !== 'Block') {
      const mounted = (await this.deps.volumes.mountPoints()).some((m) => m.mountPoint === info.realPath);
      if (!mounted) refusal = `nothing is mounted at ${path}: mount the disk there first`;
    } else if (info.kind !== 'block-device') {
      refusal = `${path} is not ${pv.spec.volumeMode === 'Block' ? 'a block device' : 'a mount point nor a block device'}`;
    }
    const holder =
      identity === undefined
        ? undefined
        : listed.find((other) => other !== pv && identityMatches(recordedIdentity(other) ?? '', identity.id));
    if (refusal === undefined && holder !== undefined)
      refusal = `the disk at ${path} (${identity?.id ?? NO_IDENTITY}) is PersistentVolume ${holder.metadata.name}'s: one disk backs one PV`;
    if (refusal === undefined) return true;
    this.reportOnce(
      `accept-refused:${pv.metadata.name}:${refusal}`,
      pv,
      'VolumeIdentityAcceptRefused',
      `${IDENTITY_ACTION_ANNOTATION}=${ACCEPT_ACTION} refused: ${refusal}; nothing was recorded or cleaned`,
    );
    return false;
  }

  /**
   * The identity check before a destructive step: the disk at `path` must be the one the PV was
   * published for. A mismatch is reported once per disk found (log, Warning Event on the PV, said
   * once across restarts through an annotation on the PV) and held back. Verified: the identity
   * found (`none` when the node offers none), which the cleanup is then bound to.
   */
  private async verifyIdentity(
    pv: PersistentVolumeView,
    spec: CleanupSpec,
    step: 'cleanup' | 'deletion',
    path: string = spec.path,
  ): Promise<QuarantinedVolume | { readonly verified: string } | 'unreadable'> {
    let current;
    try {
      current = await this.deps.volumes.volumeIdentity(path);
    } catch (err) {
      const error = `cannot read the disk identity at ${path}: ${errorMessage(err)}`;
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
    if (verdict.kind !== 'mismatch') return { verified: current?.id ?? NO_IDENTITY };
    const name = pv.metadata.name;
    const message = `${verdict.message}; not ${step === 'cleanup' ? 'cleaned' : 'deleted'}, the PV is kept (quarantined). To wipe and reuse the disk now at the path: kubectl annotate pv ${name} ${IDENTITY_ACTION_ANNOTATION}=accept; to retire the PV: kubectl delete pv ${name}`;
    await this.reportMismatchOnce(pv, verdict.found, message);
    return { pv: name, reason: verdict.reason, message };
  }

  /**
   * A mismatch said once per disk found, across restarts too: the identity last reported is kept on
   * the PV (REPORTED_ANNOTATIONS.mismatch); the same disk found again is not said again.
   */
  private async reportMismatchOnce(pv: PersistentVolumeView, finding: string, text: string): Promise<void> {
    const name = pv.metadata.name;
    const reason = 'VolumeIdentityMismatch';
    const annotation = REPORTED_ANNOTATIONS.mismatch;
    if (this.reported.has(`${name}:${finding}`) || pv.metadata.annotations?.[annotation] === finding) return;
    this.reported.add(`${name}:${finding}`);
    this.deps.logger.log('warn', text, { pv: name, reason });
    this.deps.events.record(pvRef(pv), 'Warning', reason, text);
    await this.deps.cluster.persistentVolumes
      .patch(name, { metadata: { annotations: { [annotation]: finding } } })
      .catch((err: unknown) => {
        this.deps.logger.log('debug', 'could not record a reported finding on the PV', {
          pv: name,
          error: errorMessage(err),
        });
      });
  }

  /** Step 0: forget what the list no longer shows (PVs deleted here and seen gone; idle entries of deleted PVs). */
  private forgetGone(persistentVolumes: readonly PersistentVolumeView[]): void {
    const entries = this.deps.table.list();
    // Nothing to forget on most passes: then no set of every PV is built.
    if (this.deletedHere.size === 0 && entries.length === 0) return;
    const present = new Set(persistentVolumes.map((pv) => pv.metadata.name));
    const listed = new Set(persistentVolumes.map((pv) => `${pv.metadata.name}/${pv.metadata.uid ?? ''}`));
    for (const [name, uid] of this.deletedHere) if (!listed.has(`${name}/${uid}`)) this.deletedHere.delete(name);
    for (const entry of entries) {
      if (!present.has(entry.pvName) && entry.state !== 'running' && entry.state !== 'queued')
        this.deps.table.remove(entry.pvName);
    }
  }

  /** Step 1: a Released PV, not being deleted, not deleted here already, whose policy is Delete. */
  private isToReclaim(pv: PersistentVolumeView): boolean {
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
  private async reclaim(pv: PersistentVolumeView): Promise<ReclaimOutcome> {
    let followed = await this.followInFlight(pv);
    if (followed === 'waiting') return 'waiting';
    if (followed?.state === 'succeeded') {
      const deletion = await this.deleteIfCleaned(pv, followed);
      if (deletion !== 'clean-again') return deletion;
      this.deps.table.remove(pv.metadata.name);
      followed = undefined;
    }
    if (followed?.state === 'failed' && (followed.retryAt ?? 0) > this.deps.clock.now()) return 'waiting';
    if (await this.adoptJob(pv, followed)) return 'waiting';
    const target = this.cleanupTarget(pv);
    if ('orphan' in target) return target;
    return this.startCleanup(pv, target.spec, target.classConfig);
  }

  /**
   * Step 5b (I3): deleting the PV republishes what is at its path, so it is deleted only when the
   * disk there is the PV's and is the disk the cleanup held and checked. A cleanup of another disk
   * (the PV's disk accepted anew since) is done again; a Job of an earlier agent that does not say
   * which disk it cleaned is taken at the path's word.
   */
  private async deleteIfCleaned(
    pv: PersistentVolumeView,
    cleanup: CleanupEntry,
  ): Promise<ReclaimOutcome | 'clean-again'> {
    const target = cleanup.path !== '' ? undefined : this.cleanupTarget(pv);
    const spec = target === undefined || 'orphan' in target ? cleanup : { ...cleanup, path: target.spec.path };
    if (spec.path === '') return (await this.deleteAfterCleanup(pv, cleanup)) ? 'deleted' : 'waiting';
    const verified = await this.verifyIdentity(pv, spec, 'deletion');
    if (verified === 'unreadable') return 'waiting';
    if (!('verified' in verified)) return verified;
    if (cleanup.cleaned !== undefined && cleanup.cleaned !== verified.verified) {
      this.deps.logger.log('warn', 'the disk at the path is not the one its cleanup wiped; cleaning it again', {
        pv: pv.metadata.name,
        cleaned: cleanup.cleaned,
        found: verified.verified,
      });
      return 'clean-again';
    }
    return (await this.deleteAfterCleanup(pv, cleanup)) ? 'deleted' : 'waiting';
  }

  /**
   * Step 2: this process's record of the PV's cleanup, brought up to date. A queued or running
   * in-process cleanup, or a Job still running, is waited for; a finished Job is recorded.
   */
  private async followInFlight(pv: PersistentVolumeView): Promise<CleanupEntry | undefined | 'waiting'> {
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
    let job = await this.deps.jobs.get(cleanupJobName(name));
    // A cache that has not seen the Job yet, or an answer that says nothing (a 403 from an apiserver
    // starting up), must not end a running Job: ended, it is deleted and the volume cleaned twice.
    if (job?.metadata.labels?.['pvuuid'] !== uid) job = await this.deps.jobs.read(cleanupJobName(name));
    if (job?.metadata.labels?.['pvuuid'] !== uid) {
      table.finishJob(name, { ok: false, error: `cleanup Job ${cleanupJobName(name)} disappeared before it finished` });
      return 'waiting';
    }
    const outcome = jobOutcome(job);
    if (outcome === 'running') return 'waiting';
    // A Job of this agent's runs behind the guard, which held and checked the disk it names.
    const cleaned = guardedJobIdentity(job);
    table.finishJob(
      name,
      outcome === 'succeeded'
        ? { ok: true, ...(cleaned !== undefined ? { cleaned } : {}) }
        : { ok: false, error: jobFailureMessage(job) },
    );
    return table.get(name);
  }

  /**
   * Step 3: no cleanup in flight in this process, but a Job may exist — started by an earlier agent
   * process or before a reload turned Job cleaning off. This PV's Job is followed to the end (true);
   * a finished Job of an earlier PV of this name, or a failed one whose backoff is over, is deleted.
   */
  private async adoptJob(pv: PersistentVolumeView, entry: CleanupEntry | undefined): Promise<boolean> {
    const name = pv.metadata.name;
    const uid = pv.metadata.uid ?? '';
    const existing = await this.deps.jobs.get(cleanupJobName(name));
    if (existing === undefined) return false;
    if (
      existing.metadata.labels?.['pvuuid'] === uid &&
      entry?.state !== 'failed' &&
      !cleanedAnotherDisk(pv, existing)
    ) {
      // Deleting the PV is checked at its path (what the deletion republishes), not at the Job's device.
      const target = this.cleanupTarget(pv);
      const spec: CleanupSpec = {
        pvName: name,
        pvUid: uid,
        className: pv.spec.storageClassName ?? '',
        mode: 'Block',
        path: 'orphan' in target ? (existing.metadata.annotations?.['device'] ?? '') : target.spec.path,
        command: cleanerCommandOfJob(existing),
        capacityBytes: capacityBytesOf(pv),
        ...identityOfJob(existing),
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
    pv: PersistentVolumeView,
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
      capacityBytes: capacityBytesOf(pv),
    };
    return { spec, classConfig };
  }

  /**
   * Step 5: what is at the path decides the mode; a Block volume by Job when configured, else
   * in-process. The cleanup is bound to what was checked: the identity found, and for a Block
   * volume the device node the entry resolved to (the cleaner never gets the entry's link).
   */
  private async startCleanup(
    pv: PersistentVolumeView,
    spec: CleanupSpec,
    classConfig: ClassConfig,
  ): Promise<'started' | 'waiting' | QuarantinedVolume> {
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
    const device = mode === 'Block' ? (info.realPath ?? path) : undefined;
    const withMode = { ...spec, mode, ...(device !== undefined ? { device } : {}) };
    const verified = await this.verifyIdentity(pv, withMode, 'cleanup', device ?? path);
    if (verified === 'unreadable') return 'waiting';
    if (!('verified' in verified)) return verified;
    const bound: CleanupSpec = { ...withMode, identity: verified.verified };
    if (mode === 'Block' && this.settings.config.useJobForCleaning) return this.startJob(pv, bound, classConfig);
    if (mode === 'Block') {
      this.deps.events.record(
        pvRef(pv),
        'Normal',
        'VolumeDelete',
        `Starting cleanup of Block PV "${pv.metadata.name}", this may take a while`,
      );
    }
    this.deps.table.startProcess(bound);
    return 'started';
  }

  /** Step 5, by Job: the Job gets the checked device and identity, and its guard refuses any other disk. */
  private async startJob(
    pv: PersistentVolumeView,
    spec: CleanupSpec,
    classConfig: ClassConfig,
  ): Promise<'started' | 'waiting'> {
    const { clock } = this.deps;
    if (this.settings.jobImage === undefined || this.settings.jobImage === '') {
      this.failure(
        pv,
        spec,
        'job',
        'cannot run cleanup job without specifying job image name in the environment variable JOB_CONTAINER_IMAGE',
      );
      return 'waiting';
    }
    const job = buildCleanupJob({
      pvName: spec.pvName,
      pvUid: spec.pvUid,
      nodeName: this.settings.node.name,
      namespace: this.settings.namespace,
      image: this.settings.jobImage,
      classConfig,
      config: this.settings.config,
      devicePath: spec.device ?? spec.path,
      ...(spec.identity !== undefined ? { identity: spec.identity } : {}),
      startTime: new Date(clock.now()).toISOString(),
    });
    try {
      await this.deps.cluster.jobs.create(job, { namespace: this.settings.namespace });
    } catch (err) {
      // The Job name is a mutex between duplicate agents: someone else is cleaning it.
      if (isAlreadyExists(err)) return 'waiting';
      this.failure(pv, spec, 'job', `could not create cleanup Job: ${errorMessage(err)}`);
      return 'waiting';
    }
    this.deps.table.trackJob(spec, clock.now());
    this.deps.logger.log('info', 'cleanup Job created', { pv: spec.pvName, job: job.metadata.name });
    return 'started';
  }

  private async deleteAfterCleanup(pv: PersistentVolumeView, entry: CleanupEntry): Promise<boolean> {
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
