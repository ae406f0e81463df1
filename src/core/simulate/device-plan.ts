// Disks by rule in a plan: the agent's own step (DeviceRules, src/core/disk-rules/service.ts) run
// once before the discovery plan, as a pass of `run` does, against the node's block devices — a
// fixture's in-memory ones (its links written into the in-memory node) or this machine's, read
// only, with links recorded in an overlay of the node that discovery reads and nothing written.
// Carving is recorded, never done. Every device a rule selects gets its verdict in the plan.
import { posix } from 'node:path';
import type { Clock } from '../clock.js';
import type { ProvisionerConfig } from '../config/model.js';
import type { DeviceVerdict, SkipReason } from '../disk-rules/decide.js';
import type { DeviceFacts, RuleMode } from '../devices/model.js';
import { DeviceRules, DeviceRulesState, ruleClasses } from '../disk-rules/service.js';
import type { DeviceCarver, DeviceInventory, DiscoveryLinkWriter } from '../devices/ports.js';
import type { EventSink } from '../kube/events.js';
import type { PersistentVolume } from '../kube/objects.js';
import type { Logger } from '../log.js';
import { formatByteQuantity } from '../config/quantity.js';
import type {
  ChangeWatch,
  ChangeWatchOptions,
  EntryInfo,
  FilesystemUsage,
  MountPoint,
  NodeVolumes,
  VolumeIdentity,
} from '../node/volumes.js';
import { usageThrough } from '../node/volumes.js';
import type { NodeIdentity } from '../pv/naming.js';
import { errorMessage } from '../unknown-values.js';

/**
 * A verdict's state, as the agent's gauge names it (countVerdicts): `link`/`carve` (apply mode,
 * this pass), `planned`/`carve-planned` (plan mode), `linked`, `carved`, or the skip reason.
 */
export type DeviceState = 'link' | 'carve' | 'planned' | 'carve-planned' | 'linked' | 'carved' | SkipReason;

const STATES: Readonly<Record<DeviceState, true>> = {
  link: true,
  carve: true,
  planned: true,
  'carve-planned': true,
  linked: true,
  carved: true,
  ambiguous: true,
  'system-disk': true,
  'read-only': true,
  removable: true,
  'too-small': true,
  'too-large': true,
  mounted: true,
  swap: true,
  holders: true,
  'partition-table': true,
  signature: true,
  'recorded-on-pv': true,
  settling: true,
  'max-devices': true,
  'name-pattern': true,
};
/** Every state a device's verdict can have. */
export const DEVICE_STATES = Object.keys(STATES) as readonly DeviceState[];

export function verdictState(v: DeviceVerdict): DeviceState {
  if (v.kind === 'skip') return v.reason;
  if (v.kind === 'link') return v.apply ? 'link' : 'planned';
  if (v.kind === 'carve') return v.apply ? 'carve' : 'carve-planned';
  return v.kind;
}

/** One device a rule selects, and what the pass does with it. */
export interface PlannedDevice {
  /** Kernel name (`nvme1n1`). */
  readonly device: string;
  readonly className: string;
  readonly verdict: DeviceVerdict['kind'];
  readonly state: DeviceState;
  /** The mode of the rule that selected it (absent for a device already linked or carved). */
  readonly mode?: RuleMode;
  /** Index of that rule in the class's deviceRules. */
  readonly rule?: number;
  readonly sizeBytes?: number;
  readonly size?: string;
  readonly model?: string;
  /** link, linked: the entry in the class's discovery directory; link: what it points at. */
  readonly entry?: string;
  readonly target?: string;
  /** carve: into how many partitions; carved: how many it has. */
  readonly partitions?: number;
  /** skip: why, and the detail the agent reports. */
  readonly reason?: SkipReason;
  readonly detail?: string;
  /** Creating the link (or carving) failed: why. */
  readonly error?: string;
  /** The PV this pass's discovery publishes from the link. */
  readonly pv?: string;
}

export interface DevicePlan {
  readonly devices: readonly PlannedDevice[];
  /** The block devices could not be read (the step failed; discovery went on, as in the agent). */
  readonly problem?: string;
}

export interface DevicePlanDeps {
  readonly inventory: DeviceInventory;
  readonly links: DiscoveryLinkWriter;
  readonly volumes: NodeVolumes;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly events: EventSink;
}

/** The carver of a plan: says yes and writes nothing (the pass after it would link the partitions). */
const PLANNED_CARVER: DeviceCarver = { carve: () => Promise.resolve({ ok: true }) };

function plannedDevice(v: DeviceVerdict, config: ProvisionerConfig, facts: DeviceFacts | undefined): PlannedDevice {
  const rule = 'rule' in v ? config.storageClassMap[v.className]?.deviceRules?.[v.rule] : undefined;
  return {
    device: v.device,
    className: v.className,
    verdict: v.kind,
    state: verdictState(v),
    ...(rule !== undefined && 'rule' in v ? { mode: rule.mode, rule: v.rule } : {}),
    ...(facts !== undefined
      ? { sizeBytes: facts.sizeBytes, size: formatByteQuantity(facts.sizeBytes), model: facts.model }
      : {}),
    ...(v.kind === 'link' || v.kind === 'linked' ? { entry: v.entry } : {}),
    ...(v.kind === 'link' ? { target: v.target } : {}),
    ...(v.kind === 'carve' || v.kind === 'carved' ? { partitions: v.partitions } : {}),
    ...(v.kind === 'skip' ? { reason: v.reason, detail: v.detail } : {}),
  };
}

/**
 * The device rules step of one pass of an agent whose devices have settled: every device's size
 * is taken as stable for as long as the longest `settle` asks (a fresh agent's first pass would
 * report them settling, and take them once due). Undefined when the config has no rules.
 */
export async function planDevices(
  config: ProvisionerConfig,
  node: NodeIdentity,
  deps: DevicePlanDeps,
  persistentVolumes: readonly PersistentVolume[],
): Promise<DevicePlan | undefined> {
  const classes = ruleClasses(config);
  if (classes.length === 0) return undefined;
  const state = new DeviceRulesState();
  const now = deps.clock.now();
  const settle = Math.max(0, ...classes.flatMap((c) => c.rules.map((r) => r.settleMs)));
  try {
    const seen = await deps.inventory.devices();
    for (const d of seen) state.sizes.set(d.name, { bytes: d.sizeBytes, since: now - settle });
    state.previous = seen;
    const rules = new DeviceRules(config, node, { ...deps, carver: PLANNED_CARVER, state });
    const result = await rules.pass(persistentVolumes);
    const facts = new Map(state.previous.map((d) => [d.name, d]));
    const devices = (result?.verdicts ?? []).map((v) => {
      const planned = plannedDevice(v, config, facts.get(v.device));
      const error = result?.failed.find((f) => f.device === v.device)?.error;
      return error !== undefined ? { ...planned, error } : planned;
    });
    return { devices };
  } catch (err) {
    return { devices: [], problem: `cannot read the block devices: ${errorMessage(err)}` };
  }
}

/** The plan's devices with the PVs discovery publishes from their links. */
export function withPublished(
  plan: DevicePlan,
  created: readonly {
    readonly className: string;
    readonly entry: string;
    readonly persistentVolume: PersistentVolume;
  }[],
): DevicePlan {
  return {
    ...plan,
    devices: plan.devices.map((d) => {
      const pv =
        d.verdict === 'link' && d.error === undefined
          ? created.find((c) => c.className === d.className && c.entry === d.entry)?.persistentVolume.metadata.name
          : undefined;
      return pv !== undefined ? { ...d, pv } : d;
    }),
  };
}

// ---- the live node: links recorded, never written ------------------------------------------------

/**
 * This machine's volumes with the links a plan makes laid over them: createLink records a link
 * (refusing an existing entry, as symlink(2) does), and every read sees it as a symlink to its
 * target, so discovery plans the PV it would publish. Nothing reaches the node.
 */
export class PlannedLinks implements NodeVolumes, DiscoveryLinkWriter {
  private readonly links = new Map<string, string>();

  constructor(private readonly node: NodeVolumes) {}

  /** The links recorded: path → target. */
  get recorded(): ReadonlyMap<string, string> {
    return this.links;
  }

  async createLink(path: string, target: string): Promise<void> {
    const at = posix.resolve(path);
    const exists = (): Error =>
      Object.assign(new Error(`EEXIST: file already exists, symlink '${target}' -> '${path}'`), { code: 'EEXIST' });
    if (this.links.has(at)) throw exists();
    // A directory that cannot be read fails the link with its error, as symlink(2) would.
    const info = await this.node.entryInfo(at);
    if (info.kind !== 'missing' || info.isSymlink) throw exists();
    this.links.set(at, posix.resolve(posix.dirname(at), target));
  }

  /** Where a path leads when it is a recorded link; the path itself otherwise. */
  private through(path: string): string {
    return this.links.get(posix.resolve(path)) ?? path;
  }

  mountPoints(): Promise<readonly MountPoint[]> {
    return this.node.mountPoints();
  }

  async listDirectory(path: string): Promise<readonly string[]> {
    const names = await this.node.listDirectory(path);
    const dir = posix.resolve(path);
    const added = [...this.links.keys()].filter((p) => posix.dirname(p) === dir).map((p) => posix.basename(p));
    return [...names, ...added.filter((n) => !names.includes(n))];
  }

  async entryInfo(path: string): Promise<EntryInfo> {
    const target = this.links.get(posix.resolve(path));
    if (target === undefined) return this.node.entryInfo(path);
    return { ...(await this.node.entryInfo(target)), isSymlink: true };
  }

  filesystemUsage(path: string): Promise<FilesystemUsage> {
    return usageThrough(this.node, this.through(path));
  }

  filesystemCapacity(path: string): Promise<number> {
    return this.node.filesystemCapacity(this.through(path));
  }

  blockDeviceCapacity(path: string): Promise<number> {
    return this.node.blockDeviceCapacity(this.through(path));
  }

  volumeIdentity(path: string): Promise<VolumeIdentity | undefined> {
    return this.node.volumeIdentity(this.through(path));
  }

  watchChanges(options: ChangeWatchOptions): ChangeWatch {
    return this.node.watchChanges(options);
  }
}
