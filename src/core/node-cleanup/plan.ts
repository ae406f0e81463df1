// The node cleanup's decisions as pure functions: which local PersistentVolumes are stranded (no
// Node of the cluster can use them), since when, and what to do with one whose grace period is over.
// The controller (controller.ts) feeds them its caches, then re-checks every decision against the API
// before it deletes anything.
import type { PersistentVolume } from '../kube/objects.js';
import { namedHostnames, volumeAffinity, volumeHasNode } from './affinity.js';
import type { NodeFacts } from './affinity.js';

export interface VolumeRef {
  readonly name: string;
  readonly uid: string;
}

export interface ClaimRef {
  readonly namespace: string;
  readonly name: string;
  readonly uid: string;
}

/** Since when (ms on the controller's clock) each stranded volume, by UID, has had no node. */
export type StrandedSince = ReadonlyMap<string, number>;

export type StrandStep =
  /** First seen with no node: the deadline is when its claim or the volume goes. */
  | {
      readonly kind: 'stranded';
      readonly volume: VolumeRef;
      readonly nodes: readonly string[];
      readonly claim: ClaimRef | undefined;
      readonly deadlineMs: number;
    }
  /** A node that can use it is back before the deadline: nothing happens to it. */
  | { readonly kind: 'returned'; readonly volume: VolumeRef; readonly nodes: readonly string[] }
  /** The grace period is over: decide with fresh objects (decideVolume). */
  | { readonly kind: 'due'; readonly volume: VolumeRef; readonly nodes: readonly string[] };

export interface StrandPlan {
  readonly since: StrandedSince;
  readonly steps: readonly StrandStep[];
}

/** Whether the cleanup looks at a PV at all: a local PV of an opted-in class, not being deleted. */
export function inScope(pv: PersistentVolume, storageClassNames: ReadonlySet<string>): boolean {
  return (
    pv.spec.local !== undefined &&
    pv.spec.storageClassName !== undefined &&
    storageClassNames.has(pv.spec.storageClassName) &&
    pv.metadata.deletionTimestamp === undefined &&
    pv.metadata.uid !== undefined
  );
}

function refOf(pv: PersistentVolume): VolumeRef {
  return { name: pv.metadata.name, uid: pv.metadata.uid ?? '' };
}

function boundClaim(pv: PersistentVolume): ClaimRef | undefined {
  const ref = pv.spec.claimRef;
  if (pv.status?.phase !== 'Bound' || ref?.name === undefined || ref.namespace === undefined) return undefined;
  return { namespace: ref.namespace, name: ref.name, uid: ref.uid ?? '' };
}

/**
 * One pass over the cached volumes and nodes: which volumes became stranded, which got a node back
 * and which are past their grace period. A volume's clock starts when the cleanup first sees it
 * without a node (after a restart it starts again: the safe side).
 */
export function planStranded(
  volumes: readonly PersistentVolume[],
  nodes: readonly NodeFacts[],
  previous: StrandedSince,
  settings: { readonly storageClassNames: ReadonlySet<string>; readonly gracePeriodMs: number },
  nowMs: number,
): StrandPlan {
  const since = new Map<string, number>();
  const steps: StrandStep[] = [];
  for (const pv of volumes) {
    if (!inScope(pv, settings.storageClassNames)) continue;
    const affinity = volumeAffinity(pv);
    const volume = refOf(pv);
    const names = namedHostnames(affinity);
    const was = previous.get(volume.uid);
    if (volumeHasNode(affinity, nodes)) {
      if (was !== undefined) steps.push({ kind: 'returned', volume, nodes: names });
      continue;
    }
    const start = was ?? nowMs;
    since.set(volume.uid, start);
    if (was === undefined) {
      steps.push({
        kind: 'stranded',
        volume,
        nodes: names,
        claim: boundClaim(pv),
        deadlineMs: start + settings.gracePeriodMs,
      });
    }
    if (nowMs - start >= settings.gracePeriodMs) steps.push({ kind: 'due', volume, nodes: names });
  }
  return { since, steps };
}

/** What the cleanup knows of a claim, read from the API when a decision is due. */
export interface ClaimFacts {
  readonly namespace: string;
  readonly name: string;
  readonly uid: string;
  readonly volumeName: string | undefined;
  readonly deleting: boolean;
}

/** A pod that mounts a claim (spec.volumes[].persistentVolumeClaim.claimName). */
export interface PodFacts {
  readonly name: string;
  readonly nodeName: string | undefined;
  readonly phase: string | undefined;
}

export type VolumeDecision =
  | { readonly kind: 'delete-claim'; readonly claim: ClaimRef }
  | { readonly kind: 'delete-volume'; readonly phase: 'Available' | 'Released' }
  /** Nothing to do now; said once per reason. */
  | { readonly kind: 'hold'; readonly reason: string };

/** A pod that holds its claim: scheduled to a node and not finished. A Pending, unscheduled pod does not. */
export function podHoldsClaim(pod: PodFacts): boolean {
  return pod.nodeName !== undefined && pod.nodeName !== '' && pod.phase !== 'Succeeded' && pod.phase !== 'Failed';
}

/**
 * What to do with a stranded volume past its grace period, from the PV, its claim and the pods using
 * the claim as the API returned them just now. As upstream: a bound claim is deleted only when it
 * still points back at this volume (name and UID); the volume itself only when Available, or
 * Released with reclaim policy Delete. Never while a scheduled pod uses the claim.
 */
export function decideVolume(
  pv: PersistentVolume,
  claim: ClaimFacts | undefined,
  podsUsingClaim: readonly PodFacts[],
): VolumeDecision {
  const phase = pv.status?.phase;
  if (phase === 'Available') return { kind: 'delete-volume', phase };
  if (phase === 'Released') {
    const policy = pv.spec.persistentVolumeReclaimPolicy ?? 'Delete';
    return policy === 'Delete'
      ? { kind: 'delete-volume', phase }
      : { kind: 'hold', reason: `Released with reclaim policy ${policy}: left for the operator` };
  }
  if (phase !== 'Bound')
    return {
      kind: 'hold',
      reason: `phase ${phase ?? 'unknown'}: only Bound, Available and Released volumes are cleaned up`,
    };
  const ref = boundClaim(pv);
  if (ref === undefined) return { kind: 'hold', reason: 'Bound without a claim reference' };
  const where = `${ref.namespace}/${ref.name}`;
  if (claim === undefined)
    return { kind: 'hold', reason: `its claim ${where} is gone; waiting for the volume to be released` };
  if (claim.uid !== ref.uid || claim.volumeName !== pv.metadata.name) {
    return { kind: 'hold', reason: `the claim ${where} no longer points at this volume` };
  }
  if (claim.deleting) return { kind: 'hold', reason: `the claim ${where} is being deleted` };
  const holder = podsUsingClaim.find(podHoldsClaim);
  if (holder !== undefined) {
    return {
      kind: 'hold',
      reason: `the claim ${where} is used by pod ${holder.name} on node ${holder.nodeName ?? '?'} (${holder.phase ?? 'no phase'}); waiting for it to go`,
    };
  }
  return { kind: 'delete-claim', claim: ref };
}
