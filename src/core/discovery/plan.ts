// One discovery pass, as a plan: read the node (through the NodeVolumes port) and the cached
// cluster state, decide which PVs to create and why every other entry is skipped. Writes nothing;
// `publish.ts` carries the plan out and `simulate` prints it. Rules follow upstream's
// discoverVolumesAtPath (pkg/discovery/discovery.go) step by step.
import type { ProvisionerConfig, VolumeMode } from '../config/model.js';
import { goFilepathMatch, splitNamePattern } from '../config/glob.js';
import type { PersistentVolume, StorageClass } from '../kube/objects.js';
import { roundDownCapacityPretty } from '../node/capacity.js';
import type { MountPoint, NodeVolumes } from '../node/volumes.js';
import { buildPersistentVolume, joinHostPath } from '../pv/build.js';
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
  /** The PV concerned, when there is one (already published, path in use, cleanup). */
  readonly persistentVolume?: string;
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
  readonly persistentVolumes: readonly PersistentVolume[];
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

export async function planDiscovery(input: DiscoveryInput): Promise<DiscoveryPlan> {
  const { config, node, volumes } = input;
  const create: PlannedVolume[] = [];
  const skipped: SkippedEntry[] = [];
  const classProblems: ClassProblem[] = [];
  let entries = 0;

  const byName = new Map(input.persistentVolumes.map((pv) => [pv.metadata.name, pv]));
  const byPath = new Map<string, string>();
  for (const pv of input.persistentVolumes) {
    const path = pv.spec.local?.path;
    if (path !== undefined) byPath.set(path, pv.metadata.name);
  }
  const mountPoints = mountPointSet(await volumes.mountPoints());

  for (const [className, classConfig] of Object.entries(config.storageClassMap)) {
    const storageClass = input.storageClass(className);
    if (!storageClass) {
      classProblems.push({
        className,
        message: `StorageClass ${className} not found: create it (provisioner kubernetes.io/no-provisioner)`,
      });
      continue;
    }
    const reclaimPolicy = storageClass.reclaimPolicy ?? 'Delete';
    if (reclaimPolicy !== 'Delete' && reclaimPolicy !== 'Retain') {
      classProblems.push({
        className,
        message: `StorageClass ${className} has reclaimPolicy ${reclaimPolicy}; only Delete and Retain are supported`,
      });
      continue;
    }
    let names: readonly string[];
    try {
      names = [...(await volumes.listDirectory(classConfig.mountDir))].sort();
    } catch (err) {
      classProblems.push({
        className,
        message: `cannot read discovery directory ${classConfig.mountDir}: ${errorMessage(err)} (is hostDir ${classConfig.hostDir} mounted into the pod?)`,
      });
      continue;
    }
    const patterns = splitNamePattern(classConfig.namePattern);
    const previous = input.nameVerdicts?.previous(config, node.name, className) ?? NO_VERDICTS;
    const verdicts = new Map<string, NameVerdict>();
    const verdictOf = (entry: string): NameVerdict => {
      const path = joinHostPath(classConfig.mountDir, entry);
      if (!patterns.some((p) => goFilepathMatch(p, entry))) return { kind: 'name-pattern', path };
      if (isUnsafeName(entry)) return { kind: 'unsafe-name', path };
      const hostPath = joinHostPath(classConfig.hostDir, entry);
      return { kind: 'candidate', path, hostPath, pvName: persistentVolumeName(entry, node.name, className) };
    };
    for (const entry of names) {
      entries += 1;
      const verdict = previous.get(entry) ?? verdictOf(entry);
      verdicts.set(entry, verdict);
      const { path } = verdict;
      const skip = (reason: SkipReason, text: string, persistentVolume?: string): void => {
        skipped.push({
          className,
          entry,
          path,
          reason,
          message: text,
          ...(persistentVolume !== undefined ? { persistentVolume } : {}),
        });
      };
      if (verdict.kind === 'name-pattern') {
        skip('name-pattern', `does not match namePattern "${classConfig.namePattern}"`);
        continue;
      }
      if (verdict.kind === 'unsafe-name') {
        skip('unsafe-name', `name ${JSON.stringify(entry)} contains control characters or invalid UTF-8; rename it`);
        continue;
      }
      const { pvName, hostPath } = verdict;
      if (byName.has(pvName)) {
        skip('already-published', 'already published', pvName);
        continue;
      }
      const holder = byPath.get(hostPath);
      if (holder !== undefined) {
        skip('path-in-use', `path ${hostPath} is already used by PersistentVolume ${holder}`, holder);
        continue;
      }
      if (input.cleanupInProgress?.(pvName) === true) {
        skip('cleanup-in-progress', 'a cleanup of its previous PersistentVolume is in progress', pvName);
        continue;
      }
      try {
        const info = await volumes.entryInfo(path);
        let detectedMode: VolumeMode;
        let capacity: number;
        if (info.kind === 'missing') {
          skip('vanished', info.isSymlink ? 'symlink target does not exist' : 'entry disappeared during discovery');
          continue;
        } else if (info.kind === 'other') {
          skip('not-a-volume', 'not a directory nor block device');
          continue;
        } else if (info.kind === 'block-device') {
          detectedMode = 'Block';
          capacity = await volumes.blockDeviceCapacity(path);
        } else {
          if (info.isSymlink) {
            skip(
              'symlink-to-directory',
              `symlink to directory ${info.realPath ?? '?'} is not published: bind-mount the directory at ${path} instead`,
            );
            continue;
          }
          if (classConfig.volumeMode === 'Block') {
            skip('mode-mismatch', `path "${path}" of filesystem mode cannot be used to create block volume`);
            continue;
          }
          if (!mountPoints.has(path)) {
            skip('not-a-mount-point', `path "${path}" is not a valid mount point`);
            continue;
          }
          detectedMode = 'Filesystem';
          capacity = await volumes.filesystemCapacity(path);
        }
        const capacityBytes = roundDownCapacityPretty(capacity);
        if (capacityBytes <= 0) {
          skip('zero-capacity', 'capacity is 0 bytes');
          continue;
        }
        create.push({
          className,
          entry,
          path,
          detectedMode,
          capacityBytes,
          persistentVolume: buildPersistentVolume({
            config,
            className,
            classConfig,
            entryName: entry,
            node,
            capacityBytes,
            reclaimPolicy,
            mountOptions: storageClass.mountOptions ?? [],
          }),
        });
        // Two entries can never claim one path in the same pass.
        byPath.set(hostPath, pvName);
      } catch (err) {
        skip('error', errorMessage(err));
      }
    }
    input.nameVerdicts?.keep(className, verdicts);
  }
  return { create, skipped, classProblems, entries };
}
