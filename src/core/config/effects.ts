// The field effect table: what a runtime change of each config field does to existing PVs, to PVs
// not created yet and to cleanups in flight. Data, not prose: diff-config, reload and docs/reload.md
// all read it. Starts from upstream's documented matrix (docs/provisioner.md) and the derived gaps.
import type { RuleMode } from '../devices/model.js';
import type { ClassField, TopLevelField } from './model.js';

/** Ordered from harmless to most dangerous; a change's impact decides CI gates (`--fail-on`). */
export const IMPACT_CLASSES = [
  'none',
  'new-pvs-only',
  'next-cleanup',
  'needs-pod-change',
  'orphans-pvs',
  'ownership-change',
  // Last: the only class that writes to the node's disks (partition tables) outside any PV.
  'claims-devices',
] as const;
export type ImpactClass = (typeof IMPACT_CLASSES)[number];

export const IMPACT_DESCRIPTIONS: Readonly<Record<ImpactClass, string>> = {
  none: 'No effect on any PV: runtime parameters of the agent only.',
  'new-pvs-only': 'PVs created from now on follow the new value; existing PVs are never rewritten.',
  'next-cleanup': 'Cleanups started after the reload use the new value; running ones finish as they started.',
  'needs-pod-change': 'Also needs a change outside the ConfigMap (a DaemonSet volume mount, RBAC, an env var) to work.',
  'orphans-pvs': 'Existing PVs stop being managed: they are not cleaned or deleted after release.',
  'ownership-change': 'Changes which PVs the agent recognises as its own (the provisioned-by annotation).',
  'claims-devices':
    'Takes raw block devices of the node that no rule took before: links them into a discovery directory, and writes GPT partition tables on blank disks when the rule carves partitions.',
};

export type ChangeAction = 'added' | 'removed' | 'renamed' | 'modified' | 'enabled' | 'disabled';

/** `storageClassMap.*` is a whole class; `storageClassMap.*.<field>` a field of every class. */
export type EffectField =
  Exclude<TopLevelField, 'storageClassMap'> | 'storageClassMap.*' | `storageClassMap.*.${ClassField}`;

export interface EffectRow {
  readonly field: EffectField;
  readonly action: ChangeAction;
  readonly impact: ImpactClass;
  /** One sentence for the diff-config change line. */
  readonly summary: string;
  readonly existingPVs: string;
  readonly newPVs: string;
  readonly cleanupsInFlight: string;
  /** Where upstream behaves differently (usually a bug this agent fixes). */
  readonly upstream?: string;
  /**
   * deviceRules only: the row holds for a rule in this mode after the change (an `apply` rule can
   * take devices, a `plan` rule writes nothing); absent when the row holds for both.
   */
  readonly ruleMode?: RuleMode;
}

const NO_CLEANUP_EFFECT = 'No effect.';
const UPSTREAM_IGNORES_RULES = 'Upstream ignores the key.';

export const EFFECT_TABLE: readonly EffectRow[] = [
  {
    field: 'storageClassMap.*',
    action: 'added',
    impact: 'needs-pod-change',
    summary: 'A new discovery directory is scanned; the DaemonSet must mount its hostDir at mountDir.',
    existingPVs: 'Unaffected.',
    newPVs:
      'Entries of the new mountDir are published from the next discovery pass. The pod needs a hostPath volume for hostDir mounted at mountDir (HostToContainer propagation) and the StorageClass must exist; until then the class is reported, not fatal.',
    cleanupsInFlight: NO_CLEANUP_EFFECT,
  },
  {
    field: 'storageClassMap.*',
    action: 'removed',
    impact: 'orphans-pvs',
    summary: 'PVs of the removed class are left alone: bound ones keep working, released ones are no longer cleaned.',
    existingPVs:
      'Never deleted or modified. Bound PVs keep working (kubelet uses spec.local.path). Released PVs are not cleaned or deleted and are reported once as orphaned; clean them by hand or restore the class.',
    newPVs: 'No new PVs for the class.',
    cleanupsInFlight:
      'A cleanup already running finishes; after it succeeds its PV is deleted, and the volume is not published again.',
    upstream:
      'Upstream emits a VolumeFailedDelete event ("Unknown storage class name") for every released PV on every loop, forever.',
  },
  {
    field: 'storageClassMap.*',
    action: 'renamed',
    impact: 'orphans-pvs',
    summary: 'PV names include the class name: old PVs are orphaned and their volumes held back while they exist.',
    existingPVs:
      'Keep the old storageClassName and become orphans as for a removed class. While an old PV exists, its path is not published again under the new class (duplicate-path guard).',
    newPVs:
      'Entries not covered by an old PV are published under the new class with new PV names (local-pv-<fnv(entry, node, class)>).',
    cleanupsInFlight:
      'A cleanup already running finishes and its PV is deleted; the volume is then published under the new class.',
  },
  {
    field: 'storageClassMap.*.hostDir',
    action: 'modified',
    impact: 'orphans-pvs',
    summary: 'Existing PVs point at the old hostDir: they are orphaned; new PVs use the new path.',
    existingPVs:
      'spec.local.path still points under the old hostDir. Such PVs are not cleaned on release (the cleanup path would fall outside mountDir, which this agent refuses) and are reported as orphaned.',
    newPVs: 'spec.local.path = <new hostDir>/<entry>. Usually also needs the DaemonSet volume changed.',
    cleanupsInFlight: 'A cleanup already running keeps the path it resolved when it started and finishes.',
    upstream:
      'Upstream maps mountDir + rel(hostDir, pv path), which for an old PV yields a wrong or escaping path and a failing cleanup every loop.',
  },
  {
    field: 'storageClassMap.*.mountDir',
    action: 'modified',
    impact: 'needs-pod-change',
    summary: 'Scanning, capacity, mount checks and cleanup use the new container path at once, for existing PVs too.',
    existingPVs: 'Cleaned at the new mountDir on their next release; their spec is unchanged.',
    newPVs: 'Discovered from the new mountDir; the DaemonSet must mount hostDir there.',
    cleanupsInFlight: 'A cleanup already running keeps the path it resolved when it started and finishes.',
  },
  {
    field: 'storageClassMap.*.blockCleanerCommand',
    action: 'modified',
    impact: 'next-cleanup',
    summary: 'Block cleanups started after the reload run the new command.',
    existingPVs: 'Cleaned with the new command on their next release.',
    newPVs: 'Same.',
    cleanupsInFlight: 'A cleanup already running finishes with the command it started with; it is not restarted.',
  },
  {
    field: 'storageClassMap.*.volumeMode',
    action: 'modified',
    impact: 'new-pvs-only',
    summary: 'New PVs get the new spec.volumeMode; existing PVs keep theirs.',
    existingPVs: 'Unchanged. Entries whose type does not fit the new mode are skipped with a reason.',
    newPVs: 'spec.volumeMode = the new mode.',
    cleanupsInFlight: NO_CLEANUP_EFFECT,
  },
  {
    field: 'storageClassMap.*.accessMode',
    action: 'modified',
    impact: 'new-pvs-only',
    summary: 'New PVs get the new spec.accessModes; existing PVs keep theirs.',
    existingPVs: 'Unchanged.',
    newPVs: 'spec.accessModes = [the new mode].',
    cleanupsInFlight: NO_CLEANUP_EFFECT,
  },
  {
    field: 'storageClassMap.*.fsType',
    action: 'modified',
    impact: 'new-pvs-only',
    summary: 'New PVs get the new spec.local.fsType; existing PVs keep theirs until released and republished.',
    existingPVs:
      'Unchanged. A released PV is cleaned, deleted and published again with the new fsType; an unbound Available PV can be deleted by hand to be republished at once.',
    newPVs: 'spec.local.fsType = the new value (omitted when empty).',
    cleanupsInFlight: NO_CLEANUP_EFFECT,
  },
  {
    field: 'storageClassMap.*.namePattern',
    action: 'modified',
    impact: 'new-pvs-only',
    summary: 'Only entries matching the new patterns get new PVs; existing PVs stay managed.',
    existingPVs:
      'Still managed and cleaned on release even if their entry no longer matches; after cleanup the PV is deleted and, if it no longer matches, not published again.',
    newPVs: 'Published only for entries matching one of the new patterns.',
    cleanupsInFlight: NO_CLEANUP_EFFECT,
  },
  {
    field: 'storageClassMap.*.selector',
    action: 'modified',
    impact: 'new-pvs-only',
    summary: 'New PVs get the new extra node-affinity terms; existing PVs keep theirs (affinity is immutable).',
    existingPVs: 'Unchanged (spec.nodeAffinity of a PV cannot be updated).',
    newPVs: 'Node affinity = the hostname term ORed with the new selector terms.',
    cleanupsInFlight: NO_CLEANUP_EFFECT,
  },
  {
    field: 'storageClassMap.*.deleteMissingAfter',
    action: 'enabled',
    impact: 'next-cleanup',
    summary:
      'Can delete PVs: Available PVs of the class whose disk has been missing for the set time are deleted from the next pass on, and published again when the disk returns.',
    existingPVs:
      'An Available PV whose disk this agent process has already seen missing (not-mounted, path-missing, device-missing) for at least the set time is deleted at the next pass, with a VolumeMissingDeleted Event; others when their time is up. Bound and Released PVs are never deleted for it (Events only).',
    newPVs: 'Same; a deleted PV is published again (same name, new UID) when its disk returns.',
    cleanupsInFlight: NO_CLEANUP_EFFECT,
    upstream: 'Upstream has no such policy and ignores the key: a PV whose disk is gone stays until deleted by hand.',
  },
  {
    field: 'storageClassMap.*.deleteMissingAfter',
    action: 'disabled',
    impact: 'none',
    summary: 'No PV of the class is deleted for a missing disk any more.',
    existingPVs: 'Unaffected: an Available PV whose disk is missing stays (Events and the health gauge only).',
    newPVs: 'Same.',
    cleanupsInFlight: NO_CLEANUP_EFFECT,
  },
  {
    field: 'storageClassMap.*.deleteMissingAfter',
    action: 'modified',
    impact: 'next-cleanup',
    summary:
      'Can delete PVs: a shorter time deletes Available PVs whose disk is missing sooner (at the next pass if already missing that long); a longer one later.',
    existingPVs:
      'An Available PV whose disk has been missing (as this agent process saw it) for at least the new time is deleted at the next pass. Bound and Released PVs are never deleted for it.',
    newPVs: 'Same.',
    cleanupsInFlight: NO_CLEANUP_EFFECT,
  },
  {
    field: 'storageClassMap.*.deviceRules',
    action: 'added',
    ruleMode: 'apply',
    impact: 'claims-devices',
    summary:
      'Takes devices: blank devices of the node that the new apply rule matches are linked into the class directory (and carved into partitions when the rule says so).',
    existingPVs: 'Unaffected: a device already linked, mounted, in use or holding any signature is never taken.',
    newPVs:
      'Each device taken becomes an entry of mountDir once its size has been stable for the settle time, and is published as a PV at the next discovery pass.',
    cleanupsInFlight: NO_CLEANUP_EFFECT,
    upstream: 'Upstream ignores the key: it links nothing, and publishes only what is already in the directory.',
  },
  {
    field: 'storageClassMap.*.deviceRules',
    action: 'added',
    ruleMode: 'plan',
    impact: 'none',
    summary: 'Reports the devices the new plan rule would take; nothing is linked or written.',
    existingPVs: 'Unaffected.',
    newPVs: 'Unaffected: a plan rule only reports (status, Events, metrics).',
    cleanupsInFlight: NO_CLEANUP_EFFECT,
    upstream: UPSTREAM_IGNORES_RULES,
  },
  {
    field: 'storageClassMap.*.deviceRules',
    action: 'enabled',
    impact: 'claims-devices',
    summary:
      'Takes devices: a rule switched from plan to apply links (and carves) the blank devices it matches from the next pass on.',
    existingPVs: 'Unaffected: a device already linked, mounted, in use or holding any signature is never taken.',
    newPVs: 'The devices the plan rule reported become entries of mountDir, then PVs, as for a new apply rule.',
    cleanupsInFlight: NO_CLEANUP_EFFECT,
    upstream: UPSTREAM_IGNORES_RULES,
  },
  {
    field: 'storageClassMap.*.deviceRules',
    action: 'modified',
    ruleMode: 'apply',
    impact: 'claims-devices',
    summary:
      'May take more devices: a changed apply rule links (and carves) the blank devices its new selectors match; links it made stay.',
    existingPVs:
      'Unaffected: links made before stay even when the rule no longer matches their device, and their PVs stay managed.',
    newPVs: 'Devices matching the changed rule become entries of mountDir, then PVs.',
    cleanupsInFlight: NO_CLEANUP_EFFECT,
    upstream: UPSTREAM_IGNORES_RULES,
  },
  {
    field: 'storageClassMap.*.deviceRules',
    action: 'modified',
    ruleMode: 'plan',
    impact: 'none',
    summary: 'The plan rule reports what its new selectors would take; nothing is linked or written.',
    existingPVs: 'Unaffected.',
    newPVs: 'Unaffected.',
    cleanupsInFlight: NO_CLEANUP_EFFECT,
    upstream: UPSTREAM_IGNORES_RULES,
  },
  {
    field: 'storageClassMap.*.deviceRules',
    action: 'disabled',
    impact: 'none',
    summary:
      'A rule switched from apply to plan takes no more devices; the links it made stay, so their PVs are unaffected.',
    existingPVs:
      'Unaffected: links made stay in mountDir and their PVs stay managed; remove a link by hand to retire it.',
    newPVs: 'No new device is linked for the rule; it reports what it would take.',
    cleanupsInFlight: NO_CLEANUP_EFFECT,
    upstream: UPSTREAM_IGNORES_RULES,
  },
  {
    field: 'storageClassMap.*.deviceRules',
    action: 'removed',
    impact: 'none',
    summary: 'The rule takes no more devices; the links it made stay, so their PVs are unaffected.',
    existingPVs:
      'Unaffected: links made stay in mountDir and their PVs stay managed; remove a link by hand to retire it.',
    newPVs: 'No new device is linked for the rule.',
    cleanupsInFlight: NO_CLEANUP_EFFECT,
    upstream: UPSTREAM_IGNORES_RULES,
  },
  {
    field: 'nodeLabelsForPV',
    action: 'modified',
    impact: 'new-pvs-only',
    summary: 'New PVs copy the newly listed Node labels; labels of existing PVs are never rewritten.',
    existingPVs: 'Unchanged.',
    newPVs: 'Labels copied from the Node object as read when the new generation starts.',
    cleanupsInFlight: NO_CLEANUP_EFFECT,
    upstream: 'Upstream reads the Node only at process start, so Node label changes need a restart.',
  },
  {
    field: 'labelsForPV',
    action: 'modified',
    impact: 'new-pvs-only',
    summary: 'New PVs get the new static labels; labels of existing PVs are never rewritten.',
    existingPVs: 'Unchanged.',
    newPVs: 'The new labels (they win over nodeLabelsForPV on conflict).',
    cleanupsInFlight: NO_CLEANUP_EFFECT,
  },
  {
    field: 'useAlphaAPI',
    action: 'enabled',
    impact: 'new-pvs-only',
    summary: 'New PVs carry node affinity only in the alpha annotation, which Kubernetes 1.10+ ignores.',
    existingPVs: 'Unchanged.',
    newPVs: 'Node affinity in the volume.alpha.kubernetes.io/node-affinity annotation instead of spec.nodeAffinity.',
    cleanupsInFlight: NO_CLEANUP_EFFECT,
  },
  {
    field: 'useAlphaAPI',
    action: 'disabled',
    impact: 'new-pvs-only',
    summary: 'New PVs carry node affinity in spec.nodeAffinity again.',
    existingPVs: 'Unchanged.',
    newPVs: 'spec.nodeAffinity.',
    cleanupsInFlight: NO_CLEANUP_EFFECT,
  },
  {
    field: 'useJobForCleaning',
    action: 'enabled',
    impact: 'needs-pod-change',
    summary:
      'Block volumes released from now on are cleaned by Jobs; the agent needs batch/jobs RBAC and JOB_CONTAINER_IMAGE.',
    existingPVs:
      'Block PVs released after the reload are cleaned by a Job; Filesystem PVs are still cleaned in-process.',
    newPVs: 'Same.',
    cleanupsInFlight:
      'In-process cleanups already running finish in-process and are not restarted as Jobs: each volume is cleaned exactly once.',
    upstream: 'Upstream lost track of in-process cleanups across the switch and could start a Job for the same volume.',
  },
  {
    field: 'useJobForCleaning',
    action: 'disabled',
    impact: 'next-cleanup',
    summary: 'Block volumes released from now on are cleaned in-process.',
    existingPVs: 'Cleaned in-process on their next release.',
    newPVs: 'Same.',
    cleanupsInFlight:
      'Cleanup Jobs already running are still followed to completion; the PV is deleted when its Job succeeds and no in-process cleanup is started for it.',
    upstream: 'Upstream cleaned such volumes a second time in-process (Job → ProcTable in the PR #265 review table).',
  },
  {
    field: 'jobTolerations',
    action: 'modified',
    impact: 'next-cleanup',
    summary: 'Cleanup Jobs created after the reload get the new tolerations.',
    existingPVs: 'Their next cleanup Job gets the new tolerations.',
    newPVs: 'Same.',
    cleanupsInFlight: 'Running Jobs keep the tolerations they were created with.',
  },
  {
    field: 'minResyncPeriod',
    action: 'modified',
    impact: 'none',
    summary: 'The new generation resyncs its informers at the new period.',
    existingPVs: 'Unaffected.',
    newPVs: 'Unaffected.',
    cleanupsInFlight: NO_CLEANUP_EFFECT,
  },
  {
    field: 'useNodeNameOnly',
    action: 'enabled',
    impact: 'ownership-change',
    summary: 'New PVs are annotated local-volume-provisioner-<node>; existing <node>-<uid> PVs stay managed.',
    existingPVs:
      'Not rewritten. This agent keeps managing PVs of this node under both annotation forms, so none is orphaned.',
    newPVs: 'pv.kubernetes.io/provisioned-by = local-volume-provisioner-<node>.',
    cleanupsInFlight: NO_CLEANUP_EFFECT,
    upstream:
      'Upstream adopts old <node>-<uid> PVs only when they carry the kubernetes.io/hostname label; going back to upstream later may strand PVs.',
  },
  {
    field: 'useNodeNameOnly',
    action: 'disabled',
    impact: 'ownership-change',
    summary: 'New PVs are annotated local-volume-provisioner-<node>-<uid>; existing name-only PVs stay managed.',
    existingPVs:
      'Not rewritten. This agent keeps managing PVs of this node under both annotation forms, so none is orphaned.',
    newPVs: 'pv.kubernetes.io/provisioned-by = local-volume-provisioner-<node>-<nodeUID>.',
    cleanupsInFlight: NO_CLEANUP_EFFECT,
    upstream: 'Upstream drops name-only PVs from its cache: they are never cleaned again.',
  },
  {
    field: 'setPVOwnerRef',
    action: 'enabled',
    impact: 'new-pvs-only',
    summary: 'New PVs get an ownerReference to the Node; existing PVs do not.',
    existingPVs: 'Unchanged: deleting the Node garbage-collects only PVs that carry the reference.',
    newPVs: 'ownerReferences: [Node].',
    cleanupsInFlight: NO_CLEANUP_EFFECT,
  },
  {
    field: 'setPVOwnerRef',
    action: 'disabled',
    impact: 'new-pvs-only',
    summary: 'New PVs get no ownerReference; existing PVs keep theirs.',
    existingPVs: 'Unchanged: PVs created earlier are still garbage-collected with the Node.',
    newPVs: 'No ownerReferences.',
    cleanupsInFlight: NO_CLEANUP_EFFECT,
  },
  {
    field: 'removeNodeNotReadyTaint',
    action: 'enabled',
    impact: 'none',
    summary: 'The startup taint is removed from the Node after the next complete discovery pass.',
    existingPVs: 'Unaffected.',
    newPVs: 'Unaffected.',
    cleanupsInFlight: NO_CLEANUP_EFFECT,
    upstream: 'Upstream never removes the taint: its call site is inverted.',
  },
  {
    field: 'removeNodeNotReadyTaint',
    action: 'disabled',
    impact: 'none',
    summary: 'The startup taint is left on the Node.',
    existingPVs: 'Unaffected.',
    newPVs: 'Unaffected.',
    cleanupsInFlight: NO_CLEANUP_EFFECT,
  },
  {
    field: 'provisionerNotReadyNodeTaintKey',
    action: 'modified',
    impact: 'none',
    summary: 'The taint removed once discovery is ready is the one with the new key.',
    existingPVs: 'Unaffected.',
    newPVs: 'Unaffected.',
    cleanupsInFlight: NO_CLEANUP_EFFECT,
  },
];

/** The row of a change; ruleMode (deviceRules only) picks the apply or plan row where they differ. */
export function findEffect(field: EffectField, action: ChangeAction, ruleMode?: RuleMode): EffectRow | undefined {
  return EFFECT_TABLE.find(
    (r) => r.field === field && r.action === action && (r.ruleMode === undefined || r.ruleMode === ruleMode),
  );
}
