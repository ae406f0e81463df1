// The node cleanup controller (`provisioner node-cleanup`): watches Nodes and PersistentVolumes,
// and when a local PV of an opted-in StorageClass has had no Node for the grace period, deletes its
// claim (so a StatefulSet recreates it and its pod schedules elsewhere) and then, once the PV
// controller has released it, the PV. Upstream's node-cleanup-controller, built in.
//
// Safety, in order: only the elected leader acts, and it checks its term right before each delete;
// a decision made from the caches is re-checked against the API (a fresh Node list, the PV and the
// claim by UID, the pods that mount the claim); every delete carries a UID precondition; a claim a
// scheduled, unfinished pod uses is never deleted; dry run deletes nothing. Every deletion (or,
// in dry run, every deletion it would make) is a Kubernetes Event with the reason.
import type { ElectedControllerDeps } from '../leader-elected/service.js';
import { Backoff } from '../backoff.js';
import { isAborted } from '../clock.js';
import { formatGoDuration } from '../config/duration.js';
import { isConflict, isNotFound } from '../kube/cluster.js';
import type { Cluster, NodeCleanupCluster } from '../kube/cluster.js';
import { metadataClient } from '../kube/metadata-client.js';
import type { ObjectMeta, ObjectReference, PersistentVolume, Pod } from '../kube/objects.js';
import { Reflector } from '../kube/reflector.js';
import type { NodeCleanupMetrics } from '../metrics/node-cleanup-metrics.js';
import { volumeAffinity, volumeHasNode } from './affinity.js';
import type { NodeFacts } from './affinity.js';
import { decideVolume, inScope, planStranded } from './plan.js';
import type { ClaimFacts, ClaimRef, PodFacts, StrandedSince, StrandStep, VolumeRef } from './plan.js';
import { errorMessage } from '../unknown-values.js';

export interface NodeCleanupSettings {
  /** Only local PVs of these classes are looked at; empty: nothing is (as upstream). */
  readonly storageClassNames: ReadonlySet<string>;
  /** How long a PV must have had no Node before anything is deleted (`--pvc-deletion-delay`). */
  readonly gracePeriodMs: number;
  /** Time between two passes (`--stale-pv-discovery-interval`); a Node delete starts one at once. */
  readonly discoveryIntervalMs: number;
  /** Full relist of the Node and PV caches (`--resync`); 0: watch only. */
  readonly resyncMs: number;
  /** Log and emit Normal events of what would be deleted; delete nothing. */
  readonly dryRun: boolean;
  /** Volumes past their grace period handled in one pass, at most (the rest wait for the next). */
  readonly maxDuePerPass?: number;
}

export interface NodeCleanupDeps extends ElectedControllerDeps {
  readonly cluster: Pick<Cluster, 'persistentVolumes' | 'nodes'> & NodeCleanupCluster;
  readonly metrics?: NodeCleanupMetrics;
}

export const EVENT_REASONS = {
  /** Upstream's: on the claim, when its PV is first seen without a Node. */
  referencedNodeDeleted: 'ReferencedNodeDeleted',
  deletedClaim: 'DeletedClaimOfDeletedNode',
  deletedVolume: 'DeletedVolumeOfDeletedNode',
  wouldDeleteClaim: 'WouldDeleteClaim',
  wouldDeleteVolume: 'WouldDeleteVolume',
  deleteFailed: 'NodeCleanupDeleteFailed',
} as const;

const DEFAULT_MAX_DUE_PER_PASS = 25;
const LIST_PAGE = 500;
/** Pages of one list at most (a Node list, the pods of a namespace): 100,000 objects. */
const MAX_PAGES = 200;

/** Go's Duration.String() of milliseconds, as upstream's messages print durations. */
function goDuration(ms: number): string {
  return formatGoDuration(BigInt(Math.round(ms)) * 1_000_000n);
}

function nodeFacts(meta: ObjectMeta): NodeFacts {
  return { name: meta.name, labels: meta.labels ?? {} };
}

/** Every item of a paginated list, at most MAX_PAGES pages. */
async function listAll<T>(
  list: (options: { limit: number; continue?: string }) => Promise<{
    metadata: { continue?: string };
    items: T[];
  }>,
): Promise<T[]> {
  const items: T[] = [];
  let token: string | undefined;
  for (let page = 0; page < MAX_PAGES; page++) {
    const result = await list({ limit: LIST_PAGE, ...(token !== undefined ? { continue: token } : {}) });
    items.push(...result.items);
    token =
      result.metadata.continue !== undefined && result.metadata.continue !== '' ? result.metadata.continue : undefined;
    if (token === undefined) return items;
  }
  throw new Error(`list longer than ${String(MAX_PAGES * LIST_PAGE)} items`);
}

function podUsesClaim(pod: Pod, claimName: string): boolean {
  return (pod.spec.volumes ?? []).some((v) => v.persistentVolumeClaim?.claimName === claimName);
}

/** What one pass did (tests and logs). */
export interface PassReport {
  readonly stranded: number;
  readonly claimsDeleted: number;
  readonly volumesDeleted: number;
  readonly held: number;
}

interface Retry {
  readonly backoff: Backoff;
  at: number;
}

export class NodeCleanupController {
  readonly nodes: Reflector<{ metadata: ObjectMeta }>;
  readonly volumes: Reflector<PersistentVolume>;
  private since: StrandedSince = new Map();
  /** The reason last logged per volume UID, so a hold is said once per reason. */
  private readonly heldReasons = new Map<string, string>();
  /** Volumes whose re-check or delete failed: not before `at` (bounded by the stranded set). */
  private readonly retries = new Map<string, Retry>();
  private term: AbortSignal | undefined;
  private wake = new AbortController();
  /** Passes run while leading (tests, diagnostics). */
  passes = 0;

  constructor(
    private readonly settings: NodeCleanupSettings,
    private readonly deps: NodeCleanupDeps,
  ) {
    const { clock, logger } = deps;
    this.nodes = new Reflector({
      client: metadataClient(deps.cluster.nodes),
      clock,
      logger,
      resource: 'nodes',
      relistPeriodMs: settings.resyncMs,
      ...(deps.random ? { random: deps.random } : {}),
      // A Node delete may strand volumes: look now rather than at the next interval.
      onChange: (type) => {
        if (type === 'DELETED') this.poke();
      },
    });
    this.volumes = new Reflector({
      client: deps.cluster.persistentVolumes,
      clock,
      logger,
      resource: 'persistentvolumes',
      relistPeriodMs: settings.resyncMs,
      ...(deps.random ? { random: deps.random } : {}),
    });
  }

  /** Starts a pass now (a Node was deleted, or this replica just became the leader). */
  poke(): void {
    this.wake.abort();
  }

  /** Runs the caches and a pass every interval (while leading) until the signal aborts. */
  async run(signal: AbortSignal): Promise<void> {
    const { clock, logger } = this.deps;
    const caches = Promise.all([this.nodes.run(signal), this.volumes.run(signal)]);
    try {
      await Promise.race([Promise.all([this.nodes.synced, this.volumes.synced]), caches]);
      while (!isAborted(signal)) {
        try {
          await this.pass();
        } catch (err) {
          // A bug in a pass must not end the controller; the next pass starts from the caches again.
          logger.log('error', 'node cleanup pass failed', { error: errorMessage(err) });
        }
        const woken = this.wake.signal;
        const stop = (): void => {
          this.wake.abort();
        };
        signal.addEventListener('abort', stop, { once: true });
        try {
          await clock.sleep(this.settings.discoveryIntervalMs, woken);
        } catch {
          // woken early: a Node was deleted, leadership started, or stopping
        } finally {
          signal.removeEventListener('abort', stop);
        }
        if (woken.aborted) this.wake = new AbortController();
      }
    } finally {
      await caches;
    }
  }

  /** One pass over the caches; deletes only while leading. */
  async pass(): Promise<PassReport> {
    const { clock, logger, leading } = this.deps;
    const term = leading();
    const empty = { stranded: 0, claimsDeleted: 0, volumesDeleted: 0, held: 0 };
    if (term === undefined) {
      // A follower keeps no clocks: a new leader starts every grace period afresh (the safe side).
      this.forgetAll();
      this.deps.metrics?.strandedVolumes.set({}, 0);
      return empty;
    }
    if (term !== this.term) {
      this.forgetAll();
      this.term = term;
    }
    this.passes += 1;
    const now = clock.now();
    const nodes = this.nodes.list().map((n) => nodeFacts(n.metadata));
    const plan = planStranded(
      this.volumes.list(),
      nodes,
      this.since,
      { storageClassNames: this.settings.storageClassNames, gracePeriodMs: this.settings.gracePeriodMs },
      now,
    );
    this.since = plan.since;
    for (const uid of [...this.heldReasons.keys()]) if (!plan.since.has(uid)) this.heldReasons.delete(uid);
    for (const uid of [...this.retries.keys()]) if (!plan.since.has(uid)) this.retries.delete(uid);
    this.deps.metrics?.strandedVolumes.set({}, plan.since.size);

    const due: StrandStep[] = [];
    for (const step of plan.steps) {
      if (step.kind === 'stranded') this.reportStranded(step);
      else if (step.kind === 'returned') {
        logger.log('info', 'a Node of the volume is back: nothing of it is deleted', {
          pv: step.volume.name,
          nodes: step.nodes,
        });
      } else due.push(step);
    }
    const report = { ...empty, stranded: plan.since.size };
    let fresh: NodeFacts[] | undefined;
    // One pod list per namespace and pass, however many claims of the namespace are due.
    const podsByNamespace = new Map<string, Promise<Pod[]>>();
    let handled = 0;
    for (const step of due) {
      if (handled >= (this.settings.maxDuePerPass ?? DEFAULT_MAX_DUE_PER_PASS)) {
        this.poke(); // the rest in the next pass, without waiting a whole interval
        break;
      }
      const retry = this.retries.get(step.volume.uid);
      if (retry !== undefined && clock.now() < retry.at) continue;
      handled += 1;
      try {
        // The caches said "no node"; the API must agree before anything goes.
        fresh ??= (await listAll((o) => this.deps.cluster.nodes.listMetadata(o))).map((n) => nodeFacts(n.metadata));
        const outcome = await this.handleDue(step.volume, step.nodes, fresh, podsByNamespace);
        if (outcome === 'claim') report.claimsDeleted += 1;
        else if (outcome === 'volume') report.volumesDeleted += 1;
        else if (outcome === 'held') report.held += 1;
        this.retries.delete(step.volume.uid);
      } catch (err) {
        const entry = retry ?? { backoff: new Backoff({ clock, initialMs: 1_000, maxMs: 60_000 }), at: 0 };
        const delay = entry.backoff.next();
        entry.at = clock.now() + delay;
        this.retries.set(step.volume.uid, entry);
        logger.log('warn', 'node cleanup: could not check or delete a volume of a deleted node; retrying', {
          pv: step.volume.name,
          error: errorMessage(err),
          retryInMs: delay,
        });
      }
    }
    return report;
  }

  private forgetAll(): void {
    this.since = new Map();
    this.heldReasons.clear();
    this.retries.clear();
    this.term = undefined;
  }

  private reportStranded(step: Extract<StrandStep, { kind: 'stranded' }>): void {
    const { logger, events, clock } = this.deps;
    const delay = goDuration(this.settings.gracePeriodMs);
    logger.log('warn', 'no Node can use the volume: its Node was deleted', {
      pv: step.volume.name,
      nodes: step.nodes,
      claim: step.claim === undefined ? undefined : `${step.claim.namespace}/${step.claim.name}`,
      cleanupIn: goDuration(Math.max(0, step.deadlineMs - clock.now())),
      dryRun: this.settings.dryRun || undefined,
    });
    if (step.claim !== undefined) {
      events.record(
        claimObject(step.claim),
        'Warning',
        EVENT_REASONS.referencedNodeDeleted,
        `PVC is tied to a deleted Node. PVC will be cleaned up in ${delay} if the Node doesn't come back`,
      );
    }
  }

  /** Logs a hold the first time its reason is seen for the volume. */
  private hold(volume: VolumeRef, reason: string): 'held' {
    if (this.heldReasons.get(volume.uid) !== reason) {
      this.heldReasons.set(volume.uid, reason);
      this.deps.logger.log('info', 'volume of a deleted node left as it is', { pv: volume.name, reason });
    }
    return 'held';
  }

  /** One due volume: read afresh, then held, its claim deleted, or itself deleted. */
  private async handleDue(
    ref: VolumeRef,
    cachedNodes: readonly string[],
    freshNodes: readonly NodeFacts[],
    podsByNamespace: Map<string, Promise<Pod[]>>,
  ): Promise<'claim' | 'volume' | 'held' | 'gone'> {
    const pv = await this.currentVolume(ref);
    if (pv === undefined) return 'gone';
    if (volumeHasNode(volumeAffinity(pv), freshNodes)) {
      return this.hold(ref, 'a Node that can use it exists (the API says so; the cache is behind)');
    }
    const { claim, pods } = await this.claimInUse(pv, podsByNamespace);
    const decision = decideVolume(pv, claim, pods);
    if (decision.kind === 'hold') return this.hold(ref, decision.reason);
    const nodes = cachedNodes.length > 0 ? cachedNodes.join(', ') : 'its Node';
    const why = `no Node (${nodes}) has existed for ${goDuration(this.settings.gracePeriodMs)}`;
    if (decision.kind === 'delete-claim') {
      return (await this.deleteClaim(ref, pv, decision.claim, why)) ? 'claim' : 'held';
    }
    const target: ObjectReference = {
      apiVersion: 'v1',
      kind: 'PersistentVolume',
      name: pv.metadata.name,
      uid: ref.uid,
    };
    const { cluster } = this.deps;
    return (await this.delete(
      ref,
      target,
      `PV ${pv.metadata.name} (${decision.phase})`,
      why,
      'volume',
      () => cluster.persistentVolumes.delete(ref.name, { uid: ref.uid }),
      decision.phase,
    ))
      ? 'volume'
      : 'held';
  }

  /** The PV as the API has it now; undefined: deleted, or another PV of the name, or out of scope. */
  private async currentVolume(ref: VolumeRef): Promise<PersistentVolume | undefined> {
    let pv: PersistentVolume;
    try {
      pv = await this.deps.cluster.persistentVolumes.get(ref.name);
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
    // Another PV of the same name is a different volume: planned afresh from the caches.
    if (pv.metadata.uid !== ref.uid || !inScope(pv, this.settings.storageClassNames)) return undefined;
    return pv;
  }

  /** A Bound PV's claim, as the API has it now, and the pods that mount it. */
  private async claimInUse(
    pv: PersistentVolume,
    podsByNamespace: Map<string, Promise<Pod[]>>,
  ): Promise<{ claim: ClaimFacts | undefined; pods: PodFacts[] }> {
    const bound = pv.spec.claimRef;
    if (pv.status?.phase !== 'Bound' || bound?.name === undefined || bound.namespace === undefined) {
      return { claim: undefined, pods: [] };
    }
    const { name, namespace } = bound;
    let claim: ClaimFacts | undefined;
    try {
      const found = await this.deps.cluster.persistentVolumeClaims.get(name, { namespace });
      claim = {
        namespace,
        name,
        uid: found.metadata.uid ?? '',
        volumeName: found.spec.volumeName,
        deleting: found.metadata.deletionTimestamp !== undefined,
      };
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
    if (claim === undefined) return { claim, pods: [] };
    const all = await this.podsIn(namespace, podsByNamespace);
    const pods = all
      .filter((p) => podUsesClaim(p, name))
      .map((p) => ({ name: p.metadata.name, nodeName: p.spec.nodeName, phase: p.status?.phase }));
    return { claim, pods };
  }

  /** The namespace's pods, listed once per pass. */
  private podsIn(namespace: string, podsByNamespace: Map<string, Promise<Pod[]>>): Promise<Pod[]> {
    let listed = podsByNamespace.get(namespace);
    if (listed === undefined) {
      const { cluster } = this.deps;
      listed = listAll((o) => cluster.pods.list({ ...o, namespace }));
      // A failed list is not kept: the next volume (or pass) asks again.
      listed.catch(() => podsByNamespace.delete(namespace));
      podsByNamespace.set(namespace, listed);
    }
    return listed;
  }

  /** Deletes the claim bound to `pv`: true when deleted (false: held, or only said in a dry run). */
  private deleteClaim(ref: VolumeRef, pv: PersistentVolume, claim: ClaimRef, why: string): Promise<boolean> {
    const { cluster } = this.deps;
    return this.delete(
      ref,
      claimObject(claim),
      `PVC ${claim.namespace}/${claim.name} bound to PV ${pv.metadata.name}`,
      why,
      'claim',
      () => cluster.persistentVolumeClaims.delete(claim.name, { namespace: claim.namespace, uid: claim.uid }),
      undefined,
    );
  }

  /** Deletes (or in dry run, says it would) while leading; an Event either way. False: not deleted. */
  private async delete(
    volume: VolumeRef,
    target: ObjectReference,
    what: string,
    why: string,
    kind: 'claim' | 'volume',
    remove: () => Promise<void>,
    phase: 'Available' | 'Released' | undefined,
  ): Promise<boolean> {
    const { events, logger, metrics, leading } = this.deps;
    if (this.settings.dryRun) {
      const reason = kind === 'claim' ? EVENT_REASONS.wouldDeleteClaim : EVENT_REASONS.wouldDeleteVolume;
      const text = `Dry run: would delete ${what}: ${why}`;
      // Said once per volume and step, like a hold: the next pass would say the same.
      if (this.heldReasons.get(volume.uid) !== text) {
        logger.log('info', 'dry run: would delete', { object: what, reason: why });
        events.record(target, 'Normal', reason, text);
      }
      this.heldReasons.set(volume.uid, text);
      return false;
    }
    // The term is checked right before the request: a replica that lost the lease deletes nothing.
    const term = leading();
    if (term === undefined || term !== this.term) {
      logger.log('info', 'not leading any more: delete skipped', { object: what });
      return false;
    }
    const counters =
      kind === 'claim'
        ? { done: metrics?.claimDeletes, failed: metrics?.claimDeleteFailures, labels: {} }
        : { done: metrics?.volumeDeletes, failed: metrics?.volumeDeleteFailures, labels: { phase: phase ?? '' } };
    counters.done?.inc(counters.labels);
    try {
      await remove();
    } catch (err) {
      if (isNotFound(err) || isConflict(err)) {
        // Gone, or replaced by an object of the same name (the UID precondition): nothing to do.
        logger.log('info', 'already deleted or replaced: nothing deleted', { object: what, error: errorMessage(err) });
        return false;
      }
      counters.failed?.inc(counters.labels);
      events.record(target, 'Warning', EVENT_REASONS.deleteFailed, `Could not delete ${what}: ${errorMessage(err)}`);
      throw err;
    }
    const reason = kind === 'claim' ? EVENT_REASONS.deletedClaim : EVENT_REASONS.deletedVolume;
    const follow =
      kind === 'claim'
        ? '; its StatefulSet can now recreate it and the pod schedule on another Node (the PV is deleted once released)'
        : '';
    logger.log('warn', `deleted ${kind === 'claim' ? 'the claim' : 'the volume'} of a deleted node`, {
      object: what,
      reason: why,
    });
    events.record(target, 'Normal', reason, `Deleted ${what}: ${why}${follow}`);
    return true;
  }
}

function claimObject(claim: { namespace: string; name: string; uid: string }): ObjectReference {
  return {
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    namespace: claim.namespace,
    name: claim.name,
    uid: claim.uid,
  };
}
