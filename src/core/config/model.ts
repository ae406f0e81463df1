// The normalized, immutable provisioner configuration and its field catalogue.
// Field names and defaults follow upstream's ProvisionerConfiguration / MountConfig
// (sig-storage-local-static-provisioner pkg/common/common.go).
import type { DeviceRule } from '../devices/model.js';

export type VolumeMode = 'Filesystem' | 'Block';

export type NodeSelectorOperator = 'In' | 'NotIn' | 'Exists' | 'DoesNotExist' | 'Gt' | 'Lt';

export interface NodeSelectorRequirement {
  readonly key: string;
  readonly operator: NodeSelectorOperator;
  readonly values?: readonly string[];
}

export interface NodeSelectorTerm {
  readonly matchExpressions?: readonly NodeSelectorRequirement[];
  readonly matchFields?: readonly NodeSelectorRequirement[];
}

export interface Toleration {
  readonly key?: string;
  readonly operator?: 'Exists' | 'Equal';
  readonly value?: string;
  readonly effect?: 'NoSchedule' | 'PreferNoSchedule' | 'NoExecute';
  readonly tolerationSeconds?: number;
}

/** One entry of `storageClassMap` (upstream's MountConfig). */
export interface ClassConfig {
  readonly hostDir: string;
  readonly mountDir: string;
  readonly blockCleanerCommand: readonly string[];
  readonly volumeMode: VolumeMode;
  readonly accessMode: string;
  readonly fsType: string;
  readonly namePattern: string;
  readonly selector: readonly NodeSelectorTerm[];
  /**
   * Missing-disk policy: an Available PV whose disk has been missing this long (Go duration in
   * canonical form, `30m0s`) is deleted, and published again when the disk returns. Absent when off
   * (`0s` or not written), so configs without it keep their hash.
   */
  readonly deleteMissingAfter?: string;
  /**
   * Disks by rule: which raw block devices of the node the agent links into mountDir
   * (docs/disk-rules.md). Absent when not written or empty, so configs without it keep their hash.
   */
  readonly deviceRules?: readonly DeviceRule[];
}

export interface ProvisionerConfig {
  /** Storage class name → discovery settings, keys sorted. */
  readonly storageClassMap: Readonly<Record<string, ClassConfig>>;
  readonly nodeLabelsForPV: readonly string[];
  readonly labelsForPV: Readonly<Record<string, string>>;
  readonly useAlphaAPI: boolean;
  readonly useJobForCleaning: boolean;
  readonly jobTolerations: readonly Toleration[];
  /** Go duration string in canonical form (`5m0s`). */
  readonly minResyncPeriod: string;
  readonly useNodeNameOnly: boolean;
  readonly setPVOwnerRef: boolean;
  readonly removeNodeNotReadyTaint: boolean;
  readonly provisionerNotReadyNodeTaintKey: string;
}

export type TopLevelField = keyof ProvisionerConfig;
export type ClassField = keyof ClassConfig;

export type FieldType =
  | 'bool'
  | 'string'
  | 'duration'
  | 'string-list'
  | 'string-map'
  | 'class-map'
  | 'tolerations'
  | 'volume-mode'
  | 'node-selector-terms'
  | 'device-rules';

export interface FieldDescriptor<Name extends string> {
  readonly name: Name;
  readonly type: FieldType;
  /** Default as written in docs; `undefined` when the field is required. */
  readonly defaultText: string | undefined;
  readonly description: string;
}

export const DEFAULT_BLOCK_CLEANER_COMMAND: readonly string[] = Object.freeze(['/scripts/quick_reset.sh']);
export const DEFAULT_MIN_RESYNC_PERIOD = '5m0s';
export const DEFAULT_NAME_PATTERN = '*';
export const DEFAULT_ACCESS_MODE = 'ReadWriteOnce';
export const DEFAULT_VOLUME_MODE: VolumeMode = 'Filesystem';

export const TOP_LEVEL_FIELDS = [
  {
    name: 'storageClassMap',
    type: 'class-map',
    defaultText: '{} (nothing is discovered)',
    description: 'Storage class name → discovery directory settings.',
  },
  {
    name: 'nodeLabelsForPV',
    type: 'string-list',
    defaultText: '[]',
    description: 'Node label keys copied from the Node object to every new PV.',
  },
  {
    name: 'labelsForPV',
    type: 'string-map',
    defaultText: '{}',
    description: 'Static labels added to every new PV (win over nodeLabelsForPV).',
  },
  {
    name: 'useAlphaAPI',
    type: 'bool',
    defaultText: 'false',
    description: 'Write node affinity as the pre-1.10 alpha annotation instead of spec.nodeAffinity (deprecated).',
  },
  {
    name: 'useJobForCleaning',
    type: 'bool',
    defaultText: 'false',
    description: 'Clean Block volumes with a Kubernetes Job instead of an in-process command.',
  },
  {
    name: 'jobTolerations',
    type: 'tolerations',
    defaultText: '[]',
    description: 'Tolerations of cleanup Job pods.',
  },
  {
    name: 'minResyncPeriod',
    type: 'duration',
    defaultText: DEFAULT_MIN_RESYNC_PERIOD,
    description: 'Informer resync period; each generation picks a random value in [min, 2×min).',
  },
  {
    name: 'useNodeNameOnly',
    type: 'bool',
    defaultText: 'false',
    description: 'Provisioner name `local-volume-provisioner-<node>` instead of `…-<node>-<nodeUID>`.',
  },
  {
    name: 'setPVOwnerRef',
    type: 'bool',
    defaultText: 'false',
    description: 'New PVs get an ownerReference to the Node, so deleting the Node garbage-collects them.',
  },
  {
    name: 'removeNodeNotReadyTaint',
    type: 'bool',
    defaultText: 'false',
    description: 'Remove the startup taint `provisionerNotReadyNodeTaintKey` from the Node once discovery is ready.',
  },
  {
    name: 'provisionerNotReadyNodeTaintKey',
    type: 'string',
    defaultText: '""',
    description: 'Key of the startup taint removed when removeNodeNotReadyTaint is on.',
  },
] as const satisfies readonly FieldDescriptor<TopLevelField>[];

export const CLASS_FIELDS = [
  {
    name: 'hostDir',
    type: 'string',
    defaultText: undefined,
    description: 'Discovery directory as the host sees it; PV path = hostDir/<entry>.',
  },
  {
    name: 'mountDir',
    type: 'string',
    defaultText: undefined,
    description: 'Where hostDir is mounted in the agent container; scanned, measured and cleaned there.',
  },
  {
    name: 'blockCleanerCommand',
    type: 'string-list',
    defaultText: DEFAULT_BLOCK_CLEANER_COMMAND[0],
    description: 'Argv of the Block volume cleaner; the device is passed in LOCAL_PV_BLKDEVICE.',
  },
  {
    name: 'volumeMode',
    type: 'volume-mode',
    defaultText: DEFAULT_VOLUME_MODE,
    description: 'spec.volumeMode of new PVs: Filesystem or Block.',
  },
  {
    name: 'accessMode',
    type: 'string',
    defaultText: DEFAULT_ACCESS_MODE,
    description: 'spec.accessModes of new PVs.',
  },
  {
    name: 'fsType',
    type: 'string',
    defaultText: '"" (omitted)',
    description: 'spec.local.fsType of new PVs; kubelet formats a Block entry used in Filesystem mode.',
  },
  {
    name: 'namePattern',
    type: 'string',
    defaultText: DEFAULT_NAME_PATTERN,
    description: 'Comma-separated Go filepath.Match globs; an entry is discovered if any matches.',
  },
  {
    name: 'selector',
    type: 'node-selector-terms',
    defaultText: '[]',
    description: 'Extra NodeSelectorTerms ORed into the PV node affinity (shared disks).',
  },
  {
    name: 'deleteMissingAfter',
    type: 'duration',
    defaultText: '0s (never)',
    description:
      'Missing-disk policy (not in upstream, which ignores the key): an Available PV whose disk this agent has seen missing (not mounted, path or device gone) for this long is deleted, and published again when the disk returns; Bound and Released PVs are never deleted for it (docs/disk-identity.md).',
  },
  {
    name: 'deviceRules',
    type: 'device-rules',
    defaultText: '[] (no devices linked)',
    description:
      'Disks by rule (not in upstream, which ignores the key): rules selecting raw block devices of the node that the agent links into mountDir (mode apply) or only reports (mode plan); keys below.',
  },
] as const satisfies readonly FieldDescriptor<ClassField>[];

// Compile-time proof that the catalogues cover every field of the model.
type MissingTop = Exclude<TopLevelField, (typeof TOP_LEVEL_FIELDS)[number]['name']>;
type MissingClass = Exclude<ClassField, (typeof CLASS_FIELDS)[number]['name']>;
export const catalogueIsComplete: [MissingTop, MissingClass] extends [never, never] ? true : false = true;
