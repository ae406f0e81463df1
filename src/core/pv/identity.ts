// Which disk a PV was published for, and whether the disk at its path now is that one. Upstream
// trusts the path alone, so a Released PV whose path holds another disk is wiped; this agent
// records the disk's identity on the PV (annotations of its own prefix, which upstream ignores) and
// never wipes, deletes or republishes through a mismatch (docs/disk-identity.md).
import type { PersistentVolume } from '../kube/objects.js';
import type { PersistentVolumeView } from './cached.js';
import { isLegacyLoopId, legacyLoopIdExtension, UNKNOWN_BIRTH } from '../node/identity.js';
import type { VolumeIdentity } from '../node/volumes.js';
import type { NodeIdentity } from './naming.js';

const PREFIX = 'local-static-provisioner/';
/** The volume's identity at publish (`wwid:…`, `fs-uuid:…`, …), or `none` when the node offered none. */
export const IDENTITY_ANNOTATION = `${PREFIX}volume-identity`;
/** The UID of the Node object the PV was published on: a node rebuilt under the same name has another. */
export const NODE_UID_ANNOTATION = `${PREFIX}node-uid`;
/** A /dev/disk/by-id name of the device, for people reading the PV. */
export const BY_ID_ANNOTATION = `${PREFIX}device-by-id`;
/**
 * Set by an operator on a quarantined PV: `accept` records the disk now at its path as the PV's
 * disk (the agent removes the annotation once done).
 */
export const IDENTITY_ACTION_ANNOTATION = `${PREFIX}identity-action`;
export const NO_IDENTITY = 'none';
/**
 * The last finding of each kind about the PV's disk that was reported as a Warning Event (the
 * identity found at its path; the entry its disk was found at): kept on the PV so a restarted agent
 * does not say it again. One annotation per kind: a PV can have both findings at once.
 */
export const REPORTED_ANNOTATIONS = {
  mismatch: `${PREFIX}reported-mismatch`,
  conflict: `${PREFIX}reported-conflict`,
} as const;
/** The one value of IDENTITY_ACTION_ANNOTATION. */
export const ACCEPT_ACTION = 'accept';

/** The annotations recording `identity` (undefined: the node offered none) on a PV of `node`. */
export function identityAnnotations(
  identity: VolumeIdentity | undefined,
  node: Pick<NodeIdentity, 'uid'>,
): Record<string, string> {
  return {
    [IDENTITY_ANNOTATION]: identity?.id ?? NO_IDENTITY,
    [NODE_UID_ANNOTATION]: node.uid,
    ...(identity?.byId !== undefined ? { [BY_ID_ANNOTATION]: identity.byId } : {}),
  };
}

/** The PV with its identity recorded (a new object; the input is not changed). */
export function withIdentity(
  pv: PersistentVolume,
  identity: VolumeIdentity | undefined,
  node: Pick<NodeIdentity, 'uid'>,
): PersistentVolume {
  return {
    ...pv,
    metadata: {
      ...pv.metadata,
      annotations: { ...pv.metadata.annotations, ...identityAnnotations(identity, node) },
    },
  };
}

/** The identity recorded on the PV, when one other than `none` is. */
export function recordedIdentity(pv: PersistentVolumeView): string | undefined {
  const recorded = pv.metadata.annotations?.[IDENTITY_ANNOTATION];
  return recorded === NO_IDENTITY ? undefined : recorded;
}

export function hasRecordedIdentity(pv: PersistentVolumeView): boolean {
  return pv.metadata.annotations?.[IDENTITY_ANNOTATION] !== undefined;
}

export type QuarantineReason = 'identity-changed' | 'node-rebuilt';

export type IdentityVerdict =
  /** The disk at the path is the recorded one (or the PV predates identities: nothing to compare). */
  | { readonly kind: 'match' }
  | { readonly kind: 'unrecorded' }
  | {
      readonly kind: 'mismatch';
      readonly reason: QuarantineReason;
      readonly recorded: string;
      readonly found: string;
      readonly message: string;
    };

/**
 * Whether a recorded identity names the disk with identity `found`: equal ids, or a legacy loop
 * record (no birth) and a current loop id with its device and inode (see checkIdentity).
 */
export function identityMatches(recorded: string, found: string): boolean {
  return recorded === found || legacyLoopIdExtension(recorded, found) !== undefined;
}

/**
 * Compares the identity recorded on a PV with the one at its path now. A PV published on another
 * Node object (same name, other UID: the node was rebuilt) matches only through an identity that
 * is recorded and equal; with none recorded it cannot be verified and is treated as a mismatch.
 * A legacy loop record (`loop:<M:m>:<inode>`, before births were recorded) equals a current loop
 * id with that device and inode whatever its birth: a file recreated with the same numbers still
 * matches it (I5 stays open for such a PV until legacyIdentityUpgrade's re-record).
 */
export function checkIdentity(
  pv: PersistentVolumeView,
  current: VolumeIdentity | undefined,
  node: Pick<NodeIdentity, 'uid'>,
): IdentityVerdict {
  const annotations = pv.metadata.annotations ?? {};
  const recorded = annotations[IDENTITY_ANNOTATION];
  const recordedNode = annotations[NODE_UID_ANNOTATION];
  const found = current?.id ?? NO_IDENTITY;
  const otherNode = recordedNode !== undefined && recordedNode !== '' && node.uid !== '' && recordedNode !== node.uid;
  if (recorded === undefined) {
    if (!otherNode) return { kind: 'unrecorded' };
    return {
      kind: 'mismatch',
      reason: 'node-rebuilt',
      recorded: NO_IDENTITY,
      found,
      message: `published on Node UID ${recordedNode}, this Node is ${node.uid}, and no disk identity was recorded: the disk cannot be verified`,
    };
  }
  if (recorded !== NO_IDENTITY && identityMatches(recorded, found)) return { kind: 'match' };
  if (otherNode) {
    return {
      kind: 'mismatch',
      reason: 'node-rebuilt',
      recorded,
      found,
      message:
        recorded === NO_IDENTITY
          ? `published on Node UID ${recordedNode}, this Node is ${node.uid}, and the disk had no identity to verify`
          : `published on Node UID ${recordedNode} for disk ${recorded}; this Node is ${node.uid} and the disk at the path is ${found}`,
    };
  }
  if (recorded === NO_IDENTITY) return { kind: 'match' };
  return {
    kind: 'mismatch',
    reason: 'identity-changed',
    recorded,
    found,
    message: `published for disk ${recorded}, but the disk at the path is ${found}`,
  };
}

/**
 * The operator's action on the PV (IDENTITY_ACTION_ANNOTATION): `accept`, exactly; any other value
 * is invalid (reported, never acted on: `yes` or `Accept` may mean something else); none when unset.
 */
export function identityAction(pv: PersistentVolumeView): 'accept' | { readonly invalid: string } | undefined {
  const value = pv.metadata.annotations?.[IDENTITY_ACTION_ANNOTATION];
  if (value === undefined) return undefined;
  return value === ACCEPT_ACTION ? 'accept' : { invalid: value };
}

/** Whether the PV's recorded identity is a legacy loop id (no birth): one legacyIdentityUpgrade may upgrade. */
export function hasLegacyIdentity(pv: PersistentVolumeView): boolean {
  const recorded = pv.metadata.annotations?.[IDENTITY_ANNOTATION];
  return recorded !== undefined && isLegacyLoopId(recorded);
}

/**
 * Whether the PV's recorded identity is a legacy loop id (`loop:<M:m>:<inode>`) that `current`
 * extends with a birth time: then re-record `current` (on Available or Bound PVs, trusting the
 * disk there as at first sight) so that a file recreated with the same numbers stops matching.
 * Not with birth `unknown`: it tells no file apart, and would refuse the same file once readable.
 */
export function legacyIdentityUpgrade(pv: PersistentVolumeView, current: VolumeIdentity | undefined): boolean {
  const recorded = pv.metadata.annotations?.[IDENTITY_ANNOTATION];
  if (recorded === undefined || current === undefined) return false;
  const birth = legacyLoopIdExtension(recorded, current.id);
  return birth !== undefined && birth !== UNKNOWN_BIRTH;
}

/** The merge patch that records `identity` and clears the operator's action. */
export function recordIdentityPatch(
  identity: VolumeIdentity | undefined,
  node: Pick<NodeIdentity, 'uid'>,
): { metadata: { annotations: Record<string, string | null> } } {
  return {
    metadata: {
      annotations: {
        ...identityAnnotations(identity, node),
        ...(identity?.byId === undefined ? { [BY_ID_ANNOTATION]: null } : {}),
        [IDENTITY_ACTION_ANNOTATION]: null,
      },
    },
  };
}
