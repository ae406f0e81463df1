// Which disk a PV was published for, and whether the disk at its path now is that one. Upstream
// trusts the path alone, so a Released PV whose path holds another disk is wiped; this agent
// records the disk's identity on the PV (annotations of its own prefix, which upstream ignores) and
// never wipes, deletes or republishes through a mismatch (docs/disk-identity.md).
import type { PersistentVolume } from '../kube/objects.js';
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

export function hasRecordedIdentity(pv: PersistentVolume): boolean {
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
 * Compares the identity recorded on a PV with the one at its path now. A PV published on another
 * Node object (same name, other UID: the node was rebuilt) matches only through an identity that
 * is recorded and equal; with none recorded it cannot be verified and is treated as a mismatch.
 */
export function checkIdentity(
  pv: PersistentVolume,
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
  if (recorded !== NO_IDENTITY && recorded === found) return { kind: 'match' };
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

/** Whether an operator asked to accept the disk now at the path (IDENTITY_ACTION_ANNOTATION). */
export function acceptRequested(pv: PersistentVolume): boolean {
  return pv.metadata.annotations?.[IDENTITY_ACTION_ANNOTATION]?.trim().toLowerCase() === 'accept';
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
