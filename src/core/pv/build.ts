// The PersistentVolume object, field for field as upstream's CreateLocalPVSpec + createPV build it.
import type { ClassConfig, ProvisionerConfig, VolumeMode } from '../config/model.js';
import type { NodeSelectorTerm, PersistentVolume } from '../kube/objects.js';
import { formatBinaryQuantity } from '../node/capacity.js';
import {
  ALPHA_NODE_AFFINITY_ANNOTATION,
  HOSTNAME_LABEL,
  NODE_LABEL,
  nodeLabelValue,
  persistentVolumeName,
  PROVISIONED_BY_ANNOTATION,
  provisionerName,
} from './naming.js';
import type { NodeIdentity } from './naming.js';

export interface PersistentVolumeInput {
  readonly config: ProvisionerConfig;
  readonly className: string;
  readonly classConfig: ClassConfig;
  readonly entryName: string;
  readonly node: NodeIdentity;
  /** Already rounded with roundDownCapacityPretty. */
  readonly capacityBytes: number;
  readonly reclaimPolicy: string;
  readonly mountOptions: readonly string[];
}

/** Labels for a new PV: nodeLabelsForPV copied from the Node, then labelsForPV (wins), then ours. */
export function persistentVolumeLabels(config: ProvisionerConfig, node: NodeIdentity): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const key of config.nodeLabelsForPV) {
    const value = node.labels[key];
    if (value !== undefined) labels[key] = value;
  }
  Object.assign(labels, config.labelsForPV);
  labels[NODE_LABEL] = nodeLabelValue(node.name);
  return labels;
}

function nodeSelectorTerms(classConfig: ClassConfig, node: NodeIdentity): NodeSelectorTerm[] {
  return [
    { matchExpressions: [{ key: HOSTNAME_LABEL, operator: 'In', values: [node.hostname] }] },
    // Extra terms are ORed with the hostname term (upstream PR #446, shared disks).
    ...classConfig.selector.map((t) => JSON.parse(JSON.stringify(t)) as NodeSelectorTerm),
  ];
}

export function buildPersistentVolume(input: PersistentVolumeInput): PersistentVolume {
  const { config, classConfig, node } = input;
  const volumeMode: VolumeMode = classConfig.volumeMode;
  const terms = nodeSelectorTerms(classConfig, node);
  const annotations: Record<string, string> = {
    [PROVISIONED_BY_ANNOTATION]: provisionerName(node, config.useNodeNameOnly),
  };
  if (config.useAlphaAPI) {
    annotations[ALPHA_NODE_AFFINITY_ANNOTATION] = JSON.stringify({
      requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: terms },
    });
  }
  const pv: PersistentVolume = {
    apiVersion: 'v1',
    kind: 'PersistentVolume',
    metadata: {
      name: persistentVolumeName(input.entryName, node.name, input.className),
      labels: persistentVolumeLabels(config, node),
      annotations,
      ...(config.setPVOwnerRef
        ? { ownerReferences: [{ apiVersion: 'v1', kind: 'Node', name: node.name, uid: node.uid }] }
        : {}),
    },
    spec: {
      capacity: { storage: formatBinaryQuantity(input.capacityBytes) },
      accessModes: [classConfig.accessMode],
      persistentVolumeReclaimPolicy: input.reclaimPolicy,
      storageClassName: input.className,
      volumeMode,
      ...(input.mountOptions.length > 0 ? { mountOptions: [...input.mountOptions] } : {}),
      local: {
        path: joinHostPath(classConfig.hostDir, input.entryName),
        ...(classConfig.fsType !== '' ? { fsType: classConfig.fsType } : {}),
      },
      ...(config.useAlphaAPI ? {} : { nodeAffinity: { required: { nodeSelectorTerms: terms } } }),
    },
  };
  return pv;
}

/** filepath.Join(hostDir, entry): hostDir is already clean and entry is one path element. */
export function joinHostPath(dir: string, entry: string): string {
  return dir === '/' ? `/${entry}` : `${dir}/${entry}`;
}
