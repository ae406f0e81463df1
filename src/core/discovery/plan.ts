// One discovery pass, as a plan: read the node (through the NodeVolumes port) and the cached
// cluster state, decide which PVs to create and why every other entry is skipped. Writes nothing;
// `publish.ts` carries the plan out and `simulate` prints it. Rules follow upstream's
// discoverVolumesAtPath (pkg/discovery/discovery.go) step by step.
import type { ProvisionerConfig, ClassConfig, VolumeMode } from '../config/model.js';
import { goFilepathMatch, splitNamePattern } from '../config/glob.js';
import type { PersistentVolume, StorageClass } from '../kube/objects.js';
import type { PersistentVolumeView } from '../pv/cached.js';
import { roundDownCapacityPretty } from '../node/capacity.js';
import type { MountPoint, NodeVolumes } from '../node/volumes.js';
import { buildPersistentVolume, joinHostPath } from '../pv/build.js';
import { isLegacyLoopId } from '../node/identity.js';
import { identityMatches, recordedIdentity, withIdentity } from '../pv/identity.js';
import { persistentVolumeName } from '../pv/naming.js';
import type { NodeIdentity } from '../pv/naming.js';
import { errorMessage } from '../unknown-values.js';

export type SkipReason =
  | 'name-pattern'
  | 'already-published'
  | 'path-in-use'
  | 'cleanup-in-progress'
  | 'not-a-volume'
  | 'vanished'
  | 'symlink-to-directory'
  | 'not-a-mount-point'
  | 'mode-mismatch'
  | 'zero-capacity'
  | 'unsafe-name'
  | 'identity-conflict'
  | 'error';

/** Reasons that are routine and never reported as problems. */
export const ROUTINE_SKIPS: ReadonlySet<SkipReason> = new Set(['name-pattern', 'already-published']);

export interface SkippedEntry {
  readonly className: string;
  readonly entry: string;
  /** Path inside the agent's container (mountDir/entry). */
  readonly path: string;
  readonly reason: SkipReason;
  readonly message: string;
  /** The PV concerned, when there is one (already published, path in use, cleanup, the disk's PV). */
  readonly persistentVolume?: string;
  /** identity-conflict: the other entry the same disk is at, when the conflict is between two entries. */
  readonly otherEntry?: string;
}

export interface PlannedVolume {
  readonly className: string;
  readonly entry: string;
  readonly path: string;
  readonly detectedMode: VolumeMode;
  readonly capacityBytes: number;
  readonly persistentVolume: PersistentVolume;
}

export interface ClassProblem {
  readonly className: string;
  readonly message: string;
}

export interface DiscoveryPlan {
  readonly create: readonly PlannedVolume[];
  readonly skipped: readonly SkippedEntry[];
  /** Problems that stopped a whole class this pass (missing StorageClass, unreadable mountDir). */
  readonly classProblems: readonly ClassProblem[];
  /** Entries examined, all classes. */
  readonly entries: number;
}

export interface DiscoveryInput {
  readonly config: ProvisionerConfig;
  readonly node: NodeIdentity;
  readonly volumes: NodeVolumes;
  /** This node's PVs, from the cache. */
  readonly persistentVolumes: readonly PersistentVolumeView[];
  readonly storageClass: (name: string) => StorageClass | undefined;
  /** True while a cleanup of this PV name runs or waits (cleanup issue); false for now. */
  readonly cleanupInProgress?: (pvName: string) => boolean;
  /** What earlier passes decided from entry names alone (a generation's passes); the plan is the same without it. */
  readonly nameVerdicts?: NameVerdicts;
}

/** What an entry's name alone decides, with one config and node: the same on every pass. */
type NameVerdict =
  | { readonly kind: 'name-pattern'; readonly path: string }
  | { readonly kind: 'unsafe-name'; readonly path: string }
  | { readonly kind: 'candidate'; readonly path: string; readonly hostPath: string; readonly pvName: string };

const NO_VERDICTS: ReadonlyMap<string, NameVerdict> = new Map();

/**
 * The name verdicts of the last pass, per class, kept by a caller that plans again and again (a
 * generation): an idle pass over 1,000 published entries then matches no pattern and hashes no
 * PV name. Only the last listing's names are kept; another config or node starts afresh.
 */
export class NameVerdicts {
  private config: ProvisionerConfig | undefined;
  private nodeName: string | undefined;
  private readonly classes = new Map<string, ReadonlyMap<string, NameVerdict>>();

  previous(config: ProvisionerConfig, nodeName: string, className: string): ReadonlyMap<string, NameVerdict> {
    if (config !== this.config || nodeName !== this.nodeName) {
      this.config = config;
      this.nodeName = nodeName;
      this.classes.clear();
    }
    return this.classes.get(className) ?? NO_VERDICTS;
  }

  keep(className: string, verdicts: ReadonlyMap<string, NameVerdict>): void {
    this.classes.set(className, verdicts);
  }
}

/** Control characters would make paths ambiguous in logs, mount tables and kubelet; U+FFFD marks a name that was not valid UTF-8. */
function isUnsafeName(name: string): boolean {
  for (const ch of name) {
    const c = ch.codePointAt(0) ?? 0;
    if (c < 0x20 || c === 0x7f || c === 0xfffd) return true;
  }
  return false;
}

/** The mount points of a mount table, built once per table (LinuxVolumes returns an unchanged one as is). */
const mountPointSets = new WeakMap<readonly MountPoint[], ReadonlySet<string>>();
function mountPointSet(table: readonly MountPoint[]): ReadonlySet<string> {
  let set = mountPointSets.get(table);
  if (set === undefined) {
    set = new Set(table.map((m) => m.mountPoint));
    mountPointSets.set(table, set);
  }
  return set;
}

/** This node's PVs by name and by host path (the cache's view, extended as the pass plans). */
interface PublishedIndex {
  readonly byName: ReadonlyMap<string, PersistentVolumeView>;
  readonly byPath: Map<string, string>;
  /** The PVs by recorded disk identity, built when the pass first examines an entry (an idle pass examines none). */
  readonly byIdentity: () => IdentityIndex;
}

/** I2: a disk recorded on a PV, whatever its phase, is that PV's alone. */
interface IdentityIndex {
  readonly exact: ReadonlyMap<string, PersistentVolumeView>;
  /** PVs whose record is a legacy loop identity (no birth): matched by identityMatches. */
  readonly legacy: readonly PersistentVolumeView[];
}

/** The PV a disk's identity is recorded on, if any. */
function holderOf(published: PublishedIndex, id: string): PersistentVolumeView | undefined {
  const { exact, legacy } = published.byIdentity();
  return exact.get(id) ?? legacy.find((pv) => identityMatches(recordedIdentity(pv) ?? '', id));
}

function indexIdentities(persistentVolumes: readonly PersistentVolumeView[]): IdentityIndex {
  const exact = new Map<string, PersistentVolumeView>();
  const legacy: PersistentVolumeView[] = [];
  for (const pv of persistentVolumes) {
    const identity = recordedIdentity(pv);
    if (identity === undefined) continue;
    exact.set(identity, pv);
    if (isLegacyLoopId(identity)) legacy.push(pv);
  }
  return { exact, legacy };
}

function indexPublished(persistentVolumes: readonly PersistentVolumeView[]): PublishedIndex {
  const byName = new Map<string, PersistentVolumeView>();
  const byPath = new Map<string, string>();
  // forEach: no iteration result (nor name/PV pair) per PV under --jitless, on every pass.
  persistentVolumes.forEach((pv) => {
    byName.set(pv.metadata.name, pv);
    const path = pv.spec.local?.path;
    if (path !== undefined) byPath.set(path, pv.metadata.name);
  });
  let identities: IdentityIndex | undefined;
  return { byName, byPath, byIdentity: () => (identities ??= indexIdentities(persistentVolumes)) };
}

/** What every entry of one class is planned with: its config, its StorageClass's policy, the pass's facts. */
interface ClassPass {
  readonly input: DiscoveryInput;
  readonly className: string;
  readonly classConfig: ClassConfig;
  readonly reclaimPolicy: 'Delete' | 'Retain';
  readonly mountOptions: readonly string[];
  readonly published: PublishedIndex;
  readonly mountPoints: ReadonlySet<string>;
  /** The disks of the entries planned for creation this pass (all classes), to find one disk at two entries. */
  readonly disksPlanned: Map<string, string>;
}

/** Step 1 of a class: its StorageClass exists and has a policy this agent supports. */
function classStorage(
  input: DiscoveryInput,
  className: string,
): { readonly reclaimPolicy: 'Delete' | 'Retain'; readonly mountOptions: readonly string[] } | ClassProblem {
  const storageClass = input.storageClass(className);
  if (!storageClass) {
    return {
      className,
      message: `StorageClass ${className} not found: create it (provisioner kubernetes.io/no-provisioner)`,
    };
  }
  const reclaimPolicy = storageClass.reclaimPolicy ?? 'Delete';
  if (reclaimPolicy !== 'Delete' && reclaimPolicy !== 'Retain') {
    return {
      className,
      message: `StorageClass ${className} has reclaimPolicy ${reclaimPolicy}; only Delete and Retain are supported`,
    };
  }
  return { reclaimPolicy, mountOptions: storageClass.mountOptions ?? [] };
}

/** Step 2 of an entry: what its name alone decides (kept across passes by NameVerdicts). */
function nameVerdict(pass: ClassPass, entry: string, patterns: readonly string[]): NameVerdict {
  const { classConfig, className } = pass;
  const path = joinHostPath(classConfig.mountDir, entry);
  if (!patterns.some((p) => goFilepathMatch(p, entry))) return { kind: 'name-pattern', path };
  if (isUnsafeName(entry)) return { kind: 'unsafe-name', path };
  const hostPath = joinHostPath(classConfig.hostDir, entry);
  return { kind: 'candidate', path, hostPath, pvName: persistentVolumeName(entry, pass.input.node.name, className) };
}

type EntryOutcome =
  | { readonly kind: 'create'; readonly volume: PlannedVolume; readonly disk: string }
  | {
      readonly kind: 'skip';
      readonly reason: SkipReason;
      readonly message: string;
      readonly persistentVolume?: string;
      readonly otherEntry?: string;
    };

const skipFor = (reason: SkipReason, message: string, persistentVolume?: string): EntryOutcome => ({
  kind: 'skip',
  reason,
  message,
  ...(persistentVolume !== undefined ? { persistentVolume } : {}),
});

type ClusterOutcome = EntryOutcome | { readonly kind: 'examine'; readonly pvName: string; readonly hostPath: string };

/**
 * The skips a name verdict gives on every pass while it holds (its name, or its PV published), and
 * their SkippedEntry: made once per verdict, so an idle pass over published entries allocates none.
 */
const steadySkips = new WeakMap<NameVerdict, { readonly outcome: EntryOutcome; skipped?: SkippedEntry }>();

function keepSkip(verdict: NameVerdict, outcome: EntryOutcome): EntryOutcome {
  steadySkips.set(verdict, { outcome });
  return outcome;
}

/** A skip no later entry of the pass can change: the paths claimed only grow, the PVs and names stay. */
function settledForPass(outcome: ClusterOutcome): boolean {
  return outcome.kind === 'skip' && outcome.reason !== 'cleanup-in-progress';
}

/** Step 3 of an entry: the cluster's side — a PV of its name or path, or a cleanup of it, keeps it. */
function clusterVerdict(pass: ClassPass, verdict: NameVerdict, entry: string): ClusterOutcome {
  // No closure, no template on the kept path: this runs for every entry of every pass.
  if (verdict.kind === 'name-pattern')
    return (
      steadySkips.get(verdict)?.outcome ??
      keepSkip(verdict, skipFor('name-pattern', `does not match namePattern "${pass.classConfig.namePattern}"`))
    );
  if (verdict.kind === 'unsafe-name')
    return (
      steadySkips.get(verdict)?.outcome ??
      keepSkip(
        verdict,
        skipFor('unsafe-name', `name ${JSON.stringify(entry)} contains control characters or invalid UTF-8; rename it`),
      )
    );
  const { pvName, hostPath } = verdict;
  if (pass.published.byName.has(pvName))
    return (
      steadySkips.get(verdict)?.outcome ?? keepSkip(verdict, skipFor('already-published', 'already published', pvName))
    );
  const holder = pass.published.byPath.get(hostPath);
  if (holder !== undefined)
    return skipFor('path-in-use', `path ${hostPath} is already used by PersistentVolume ${holder}`, holder);
  if (pass.input.cleanupInProgress?.(pvName) === true)
    return skipFor('cleanup-in-progress', 'a cleanup of its previous PersistentVolume is in progress', pvName);
  return { kind: 'examine', pvName, hostPath };
}

/** Step 4 of an entry: the node's side — what the entry is, its mode and capacity, and the PV for it. */
async function examineEntry(pass: ClassPass, entry: string, path: string): Promise<EntryOutcome> {
  const { volumes, config, node } = pass.input;
  const { classConfig, className } = pass;
  const info = await volumes.entryInfo(path);
  let detectedMode: VolumeMode;
  let capacity: number;
  if (info.kind === 'missing') {
    return skipFor('vanished', info.isSymlink ? 'symlink target does not exist' : 'entry disappeared during discovery');
  } else if (info.kind === 'other') {
    return skipFor('not-a-volume', 'not a directory nor block device');
  } else if (info.kind === 'block-device') {
    detectedMode = 'Block';
    capacity = await volumes.blockDeviceCapacity(path);
  } else {
    if (info.isSymlink) {
      return skipFor(
        'symlink-to-directory',
        `symlink to directory ${info.realPath ?? '?'} is not published: bind-mount the directory at ${path} instead`,
      );
    }
    if (classConfig.volumeMode === 'Block')
      return skipFor('mode-mismatch', `path "${path}" of filesystem mode cannot be used to create block volume`);
    if (!pass.mountPoints.has(path)) return skipFor('not-a-mount-point', `path "${path}" is not a valid mount point`);
    detectedMode = 'Filesystem';
    capacity = await volumes.filesystemCapacity(path);
  }
  const capacityBytes = roundDownCapacityPretty(capacity);
  if (capacityBytes <= 0) return skipFor('zero-capacity', 'capacity is 0 bytes');
  const built = buildPersistentVolume({
    config,
    className,
    classConfig,
    entryName: entry,
    node,
    capacityBytes,
    reclaimPolicy: pass.reclaimPolicy,
    mountOptions: pass.mountOptions,
  });
  // The disk's identity goes on the PV (docs/disk-identity.md); unreadable: recorded on first sight later.
  const identity = await volumes.volumeIdentity(path).then(
    (found) => ({ found }),
    () => undefined,
  );
  const holder = identity?.found === undefined ? undefined : holderOf(pass.published, identity.found.id);
  if (holder !== undefined) {
    const at = holder.spec.local?.path ?? '?';
    return skipFor(
      'identity-conflict',
      `the disk at ${path} (${identity?.found?.id ?? '?'}) is PersistentVolume ${holder.metadata.name}'s (published at ${at}): one disk backs one PV; not published`,
      holder.metadata.name,
    );
  }
  const persistentVolume = identity === undefined ? built : withIdentity(built, identity.found, node);
  // Two entries of one disk in a pass are told apart by identity, or by device node when it has none.
  const disk =
    identity?.found?.id ?? (info.kind === 'block-device' ? `device:${info.realPath ?? path}` : `entry:${path}`);
  return { kind: 'create', volume: { className, entry, path, detectedMode, capacityBytes, persistentVolume }, disk };
}

/** The skip of an entry whose disk is also at another entry of this pass (neither is published). */
function duplicateSkip(path: string, disk: string, otherEntry: string): EntryOutcome {
  return {
    kind: 'skip',
    reason: 'identity-conflict',
    message: `the disk at ${path} (${disk}) is also at ${otherEntry}: one disk backs one PV; neither is published until one of them is removed`,
    otherEntry,
  };
}

/** An entry examined; an error reading it skips it (the pass goes on). */
function examineSafely(pass: ClassPass, entry: string, path: string): Promise<EntryOutcome> {
  return examineEntry(pass, entry, path).catch((err: unknown) => skipFor('error', errorMessage(err)));
}

/**
 * Entries whose node-side reads run at once. Each examination is a handful of fs calls (lstat,
 * stat, realpath, statfs, the identity) that wait on libuv's pool: one after the other they made
 * the first pass of 50 volumes ~1 ms an entry before its first PV (docs/benchmarks.md).
 */
const EXAMINE_CONCURRENCY = 8;

/**
 * Starts examining the entries the cluster leaves to the node, a few at once. Only reads of the
 * node: taken in entry order by planClass, whose decisions stay sequential and as before.
 */
function examineAhead(
  pass: ClassPass,
  wanted: readonly (readonly [entry: string, path: string])[],
): ReadonlyMap<string, Promise<EntryOutcome>> {
  const outcomes = new Map<string, Promise<EntryOutcome>>();
  const settle = new Map<string, (outcome: EntryOutcome) => void>();
  for (const [entry] of wanted) outcomes.set(entry, new Promise((resolve) => settle.set(entry, resolve)));
  const queue = [...wanted];
  const lane = async (): Promise<void> => {
    for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
      const [entry, path] = next;
      settle.get(entry)?.(await examineSafely(pass, entry, path));
    }
  };
  for (let i = 0; i < Math.min(EXAMINE_CONCURRENCY, wanted.length); i++) void lane();
  return outcomes;
}

/** One class: its directory listed, each entry through the steps above. */
async function planClass(pass: ClassPass, names: readonly string[], plan: MutablePlan): Promise<void> {
  const { input, className, classConfig } = pass;
  const patterns = splitNamePattern(classConfig.namePattern);
  const previous = input.nameVerdicts?.previous(input.config, input.node.name, className) ?? NO_VERDICTS;
  // Index loops over arrays: under --jitless a for-of allocates a result (and a Map's an entry
  // pair) per step, and these loops run for every entry of every pass.
  const verdicts = new Map<string, NameVerdict>();
  const first: ClusterOutcome[] = new Array<ClusterOutcome>(names.length);
  const toExamine: (readonly [entry: string, path: string])[] = [];
  for (let i = 0; i < names.length; i++) {
    const entry = names[i] ?? '';
    const verdict = previous.get(entry) ?? nameVerdict(pass, entry, patterns);
    verdicts.set(entry, verdict);
    // The cluster's verdict: the entries to examine are read ahead.
    const onCluster = clusterVerdict(pass, verdict, entry);
    first[i] = onCluster;
    if (onCluster.kind === 'examine') toExamine.push([entry, verdict.path]);
  }
  const ahead = examineAhead(pass, toExamine);
  for (let i = 0; i < names.length; i++) {
    const entry = names[i] ?? '';
    const verdict = verdicts.get(entry) ?? nameVerdict(pass, entry, patterns);
    plan.entries += 1;
    const { path } = verdict;
    let outcome: EntryOutcome;
    // Again here: an earlier entry of this pass may have claimed the path since, or a cleanup
    // started or ended. A published PV or a name decides the same all pass long.
    const earlier = first[i];
    const onCluster = earlier !== undefined && settledForPass(earlier) ? earlier : clusterVerdict(pass, verdict, entry);
    if (onCluster.kind !== 'examine') {
      outcome = onCluster;
    } else {
      outcome = await (ahead.get(entry) ?? examineSafely(pass, entry, path));
      if (outcome.kind === 'create') outcome = claimDisk(pass, plan, outcome);
      // Two entries can never claim one path in the same pass.
      if (outcome.kind === 'create') pass.published.byPath.set(onCluster.hostPath, onCluster.pvName);
    }
    if (outcome.kind === 'create') plan.create.push(outcome.volume);
    else plan.skipped.push(skippedOf(className, entry, verdict, outcome));
  }
  input.nameVerdicts?.keep(className, verdicts);
}

/** The SkippedEntry of an outcome; a steady skip's is made once and shared by every pass. */
function skippedOf(
  className: string,
  entry: string,
  verdict: NameVerdict,
  outcome: Extract<EntryOutcome, { kind: 'skip' }>,
): SkippedEntry {
  const kept = steadySkips.get(verdict);
  if (kept?.outcome !== outcome) return skippedEntry(className, entry, verdict.path, outcome);
  kept.skipped ??= skippedEntry(className, entry, verdict.path, outcome);
  return kept.skipped;
}

function skippedEntry(
  className: string,
  entry: string,
  path: string,
  outcome: Extract<EntryOutcome, { kind: 'skip' }>,
): SkippedEntry {
  return {
    className,
    entry,
    path,
    reason: outcome.reason,
    message: outcome.message,
    ...(outcome.persistentVolume !== undefined ? { persistentVolume: outcome.persistentVolume } : {}),
    ...(outcome.otherEntry !== undefined ? { otherEntry: outcome.otherEntry } : {}),
  };
}

/**
 * I2 within a pass: the first entry of a disk claims it; a second entry of the same disk takes the
 * first one's creation back, and neither is published (which one is the disk's is the operator's call).
 */
function claimDisk(
  pass: ClassPass,
  plan: MutablePlan,
  outcome: Extract<EntryOutcome, { kind: 'create' }>,
): EntryOutcome {
  const { path } = outcome.volume;
  const first = pass.disksPlanned.get(outcome.disk);
  if (first === undefined) {
    pass.disksPlanned.set(outcome.disk, path);
    return outcome;
  }
  const index = plan.create.findIndex((v) => v.path === first);
  const earlier = index >= 0 ? plan.create.splice(index, 1)[0] : undefined;
  if (earlier !== undefined) {
    const skip = duplicateSkip(earlier.path, outcome.disk, path);
    if (skip.kind === 'skip') plan.skipped.push(skippedEntry(earlier.className, earlier.entry, earlier.path, skip));
  }
  return duplicateSkip(path, outcome.disk, first);
}

interface MutablePlan {
  readonly create: PlannedVolume[];
  readonly skipped: SkippedEntry[];
  readonly classProblems: ClassProblem[];
  entries: number;
}

export async function planDiscovery(input: DiscoveryInput): Promise<DiscoveryPlan> {
  const plan: MutablePlan = { create: [], skipped: [], classProblems: [], entries: 0 };
  const published = indexPublished(input.persistentVolumes);
  const mountPoints = mountPointSet(await input.volumes.mountPoints());
  const disksPlanned = new Map<string, string>();
  for (const [className, classConfig] of Object.entries(input.config.storageClassMap)) {
    const storage = classStorage(input, className);
    if ('message' in storage) {
      plan.classProblems.push(storage);
      continue;
    }
    let names: readonly string[];
    try {
      names = (await input.volumes.listDirectory(classConfig.mountDir)).slice().sort();
    } catch (err) {
      plan.classProblems.push({
        className,
        message: `cannot read discovery directory ${classConfig.mountDir}: ${errorMessage(err)} (is hostDir ${classConfig.hostDir} mounted into the pod?)`,
      });
      continue;
    }
    await planClass({ input, className, classConfig, ...storage, published, mountPoints, disksPlanned }, names, plan);
  }
  const { create, skipped, classProblems, entries } = plan;
  return { create, skipped, classProblems, entries };
}
