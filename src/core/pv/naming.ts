// Names and identities exactly as upstream computes them (pkg/common, pkg/discovery).

const utf8 = new TextEncoder();

/** FNV-1a 32-bit over the UTF-8 bytes, as Go's hash/fnv New32a. */
export function fnv1a32(text: string): number {
  let hash = 0x811c9dc5;
  // ASCII (nearly every path) is its own UTF-8: no encoding, no copy.
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code >= 0x80) return fnv1a32Bytes(utf8.encode(text));
    hash = Math.imul(hash ^ code, 0x01000193) >>> 0;
  }
  return hash >>> 0;
}

function fnv1a32Bytes(bytes: Uint8Array): number {
  let hash = 0x811c9dc5;
  for (const byte of bytes) hash = Math.imul(hash ^ byte, 0x01000193) >>> 0;
  return hash >>> 0;
}

/** `local-pv-` + lowercase hex of FNV-1a-32(entry + node + class), no zero padding. */
export function persistentVolumeName(entryName: string, nodeName: string, className: string): string {
  return `local-pv-${fnv1a32(entryName + nodeName + className).toString(16)}`;
}

export const PROVISIONED_BY_ANNOTATION = 'pv.kubernetes.io/provisioned-by';
export const ALPHA_NODE_AFFINITY_ANNOTATION = 'volume.alpha.kubernetes.io/node-affinity';
export const HOSTNAME_LABEL = 'kubernetes.io/hostname';

/**
 * Label this agent puts on the PVs of its node so it can watch only those (upstream watches every
 * PV of the cluster). Upstream ignores it; adopted upstream PVs get it added.
 */
export const NODE_LABEL = 'local-static-provisioner/node';

export interface NodeIdentity {
  readonly name: string;
  readonly uid: string;
  /** Value of the Node's kubernetes.io/hostname label (PV node affinity uses it, not the name). */
  readonly hostname: string;
  readonly labels: Readonly<Record<string, string>>;
}

export function provisionerName(node: Pick<NodeIdentity, 'name' | 'uid'>, useNodeNameOnly: boolean): string {
  return useNodeNameOnly
    ? `local-volume-provisioner-${node.name}`
    : `local-volume-provisioner-${node.name}-${node.uid}`;
}

/** Both annotation forms this node's PVs may carry, whatever useNodeNameOnly says now. */
export function isProvisionedByNode(
  annotations: Readonly<Record<string, string>> | undefined,
  node: Pick<NodeIdentity, 'name' | 'uid'>,
): boolean {
  const value = annotations?.[PROVISIONED_BY_ANNOTATION];
  return value === provisionerName(node, true) || value === provisionerName(node, false);
}

const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/u;

/** The node label's value: the node name when it is a valid label value, else a stable hash. */
export function nodeLabelValue(nodeName: string): string {
  return nodeName.length <= 63 && LABEL_VALUE.test(nodeName) ? nodeName : `fnv-${fnv1a32(nodeName).toString(16)}`;
}
