// Disks by rule, the step a sync-loop pass runs before discovery: read the node's block devices
// and the discovery directories, decide (decide.ts), and in `apply` mode create the links the
// verdicts name — nothing else is ever written, an existing entry is never replaced, and a link
// whose device is gone is left for volume health to report. Each verdict is reported once per
// device and reason (log, Event on the Node); the gauge shows them all every pass.
import type { Clock } from '../clock.js';
import type { ClassConfig, ProvisionerConfig } from '../config/model.js';
import type { EventSink } from '../kube/events.js';
import type { PersistentVolumeView } from '../pv/cached.js';
import type { Logger } from '../log.js';
import type { NodeVolumes } from '../node/volumes.js';
import type { NodeIdentity } from '../pv/naming.js';
import { recordedIdentity } from '../pv/identity.js';
import { errorMessage } from '../unknown-values.js';
import { decideDevices, selects, type DeviceVerdict, type DiscoveryLink, type RuleClass } from './decide.js';
import type { DeviceFacts } from '../devices/model.js';
import type { DeviceCarver, DeviceInventory, DiscoveryLinkWriter } from '../devices/ports.js';

/** What the step keeps across passes and generations (the agent owns one). */
export class DeviceRulesState {
  /** Kernel name → size seen, and since when. */
  readonly sizes = new Map<string, { readonly bytes: number; readonly since: number }>();
  /** `device/verdict key` already reported. */
  readonly reported = new Set<string>();
  previous: readonly DeviceFacts[] = [];
  last: readonly DeviceVerdict[] = [];
  /** What the last pass decided from (change stamp, config, PVs, directory listings); see DeviceRules.pass. */
  lastInputs: string | undefined;
}

export interface DeviceRulesDeps {
  readonly inventory: DeviceInventory;
  readonly volumes: Pick<NodeVolumes, 'listDirectory' | 'entryInfo' | 'volumeIdentity'>;
  readonly links: DiscoveryLinkWriter;
  /** Absent where the node cannot be carved (then a carve verdict fails, said once). */
  readonly carver?: DeviceCarver;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly events: EventSink;
  readonly state: DeviceRulesState;
  /** Called with every pass's verdicts (the gauge). */
  readonly onVerdicts?: (verdicts: readonly DeviceVerdict[]) => void;
}

export interface DeviceRulesResult {
  readonly verdicts: readonly DeviceVerdict[];
  /** Entries created this pass (class, path). */
  readonly linked: readonly { readonly className: string; readonly path: string }[];
  /** Disks carved this pass: their partitions are linked by the next pass. */
  readonly carved: readonly string[];
  readonly failed: readonly { readonly device: string; readonly error: string }[];
  /** When a settling device is due (the pass to run then); undefined: none waits. */
  readonly wakeAt?: number;
}

/** Mount points that make a disk a system disk: never taken, reported as such. */
const SYSTEM_PATHS = [
  '/',
  '/boot',
  '/var/lib/kubelet',
  '/var/lib/containerd',
  '/var/lib/docker',
  '/var/lib/containers',
];

export const EVENT_REASONS = { claimed: 'DeviceClaimed', planned: 'DeviceClaimPlanned', skipped: 'DeviceSkipped' };

/** The classes with rules, as decide reads them. */
export function ruleClasses(config: ProvisionerConfig): RuleClass[] {
  return Object.entries(config.storageClassMap)
    .filter((entry): entry is [string, ClassConfig & { deviceRules: NonNullable<ClassConfig['deviceRules']> }] =>
      Boolean(entry[1].deviceRules?.length),
    )
    .map(([name, c]) => ({ name, namePattern: c.namePattern, rules: c.deviceRules }));
}

function systemDevices(devices: readonly DeviceFacts[]): Set<string> {
  const system = new Set<string>();
  for (const d of devices)
    if (d.mountPoints.some((m) => SYSTEM_PATHS.some((p) => m === p || (p !== '/' && m.startsWith(`${p}/`))))) {
      system.add(d.name);
      if (d.parent !== undefined) system.add(d.parent);
    }
  return system;
}

/** Every entry of the classes' discovery directories (all classes: one disk backs one PV), and its device. */
async function discoveryLinks(
  deps: DeviceRulesDeps,
  config: ProvisionerConfig,
  devices: readonly DeviceFacts[],
): Promise<DiscoveryLink[]> {
  const byPath = new Map(devices.map((d) => [d.devicePath, d.name]));
  const links: DiscoveryLink[] = [];
  for (const [className, c] of Object.entries(config.storageClassMap)) {
    const entries = await deps.volumes.listDirectory(c.mountDir).catch(() => []);
    for (const entry of entries) {
      const info = await deps.volumes.entryInfo(`${c.mountDir}/${entry}`).catch(() => undefined);
      const real = info?.kind === 'block-device' ? info.realPath : undefined;
      links.push({ className, entry, device: real === undefined ? undefined : byPath.get(real) });
    }
  }
  return links;
}

/** The devices some rule selects (and the partitions of those disks): the only ones whose identity is read. */
function selectedDevices(
  classes: readonly RuleClass[],
  devices: readonly DeviceFacts[],
  labels: Readonly<Record<string, string>>,
): DeviceFacts[] {
  const chosen = new Set(
    devices.filter((d) => classes.some((c) => c.rules.some((r) => selects(r, d, labels)))).map((d) => d.name),
  );
  return devices.filter((d) => chosen.has(d.name) || (d.parent !== undefined && chosen.has(d.parent)));
}

/** Sizes seen: a device whose size changed starts its settle time again. */
function trackSizes(state: DeviceRulesState, devices: readonly DeviceFacts[], now: number): void {
  const names = new Set(devices.map((d) => d.name));
  for (const name of state.sizes.keys()) if (!names.has(name)) state.sizes.delete(name);
  for (const d of devices) {
    const seen = state.sizes.get(d.name);
    if (seen?.bytes !== d.sizeBytes) state.sizes.set(d.name, { bytes: d.sizeBytes, since: now });
  }
}

/** Identities of the devices rules may take, and those recorded on this node's PVs. */
async function identities(deps: DeviceRulesDeps, devices: readonly DeviceFacts[]): Promise<Map<string, string>> {
  const found = new Map<string, string>();
  for (const d of devices) {
    const identity = await deps.volumes.volumeIdentity(d.devicePath).catch(() => undefined);
    if (identity !== undefined) found.set(d.name, identity.id);
  }
  return found;
}

export class DeviceRules {
  constructor(
    private readonly config: ProvisionerConfig,
    private readonly node: NodeIdentity,
    private readonly deps: DeviceRulesDeps,
  ) {}

  /** One pass: read, decide, link what `apply` rules took, report. */
  async pass(persistentVolumes: readonly PersistentVolumeView[]): Promise<DeviceRulesResult | undefined> {
    const classes = ruleClasses(this.config);
    if (classes.length === 0) return undefined;
    const { deps } = this;
    const { state } = deps;
    const now = deps.clock.now();
    // An idle pass: nothing it decides from has changed and nothing waits to settle, so the last
    // verdicts stand (a write to a device's contents shows on neither; one is read afresh before a write).
    const inputs = await this.inputsKey(classes, persistentVolumes);
    if (inputs !== undefined && inputs === state.lastInputs && !state.last.some(settling)) {
      deps.onVerdicts?.(state.last);
      return { verdicts: state.last, linked: [], carved: [], failed: [] };
    }
    let verdicts = await this.decide(classes, persistentVolumes, now, state.previous);
    // Signatures reused from the last pass miss a write since (an admin's mkfs): anything about to
    // be written is decided again on devices read afresh, and only what that decision says is done.
    if (verdicts.some(writes)) {
      const fresh = await this.decide(classes, persistentVolumes, now, []);
      verdicts = fresh;
    }
    const { linked, carved, failed } = await this.write(verdicts);
    state.last = verdicts;
    // After a write the directories differ: the next pass decides again. A failed write (an
    // operator's entry of that name) is not retried on every pass, each a fresh read of every
    // device: only once something it decides from changes.
    state.lastInputs = linked.length > 0 || carved.length > 0 ? undefined : inputs;
    this.report(verdicts, failed);
    deps.onVerdicts?.(verdicts);
    return { verdicts, linked, carved, failed, ...wakeFor(verdicts, classes, state, now) };
  }

  /** What a decision depends on, as one string; undefined when the inventory has no change stamp. */
  private async inputsKey(
    classes: readonly RuleClass[],
    persistentVolumes: readonly PersistentVolumeView[],
  ): Promise<string | undefined> {
    const stamp = await this.deps.inventory.changeStamp?.();
    if (stamp === undefined) return undefined;
    const listings: string[] = [];
    for (const c of Object.values(this.config.storageClassMap))
      listings.push(
        [...(await this.deps.volumes.listDirectory(c.mountDir).catch(() => ['\0missing']))].sort().join('/'),
      );
    const recorded = persistentVolumes.flatMap((pv) => recordedIdentity(pv) ?? []).sort();
    return JSON.stringify([stamp, classes, this.node.labels, recorded, listings]);
  }

  private async decide(
    classes: readonly RuleClass[],
    persistentVolumes: readonly PersistentVolumeView[],
    now: number,
    previous: readonly DeviceFacts[],
  ): Promise<readonly DeviceVerdict[]> {
    const { deps } = this;
    const devices = await deps.inventory.devices({ previous });
    deps.state.previous = devices;
    trackSizes(deps.state, devices, now);
    return decideDevices({
      now,
      classes,
      nodeLabels: this.node.labels,
      devices,
      sizeSince: new Map([...deps.state.sizes].map(([name, s]) => [name, s.since])),
      identities: await identities(deps, selectedDevices(classes, devices, this.node.labels)),
      recorded: persistentVolumes.flatMap((pv) => recordedIdentity(pv) ?? []),
      links: await discoveryLinks(deps, this.config, devices),
      systemDevices: systemDevices(devices),
    });
  }

  /** Creates the links and carves the disks of the `apply` verdicts; a failure is the device's, not the pass's. */
  private async write(
    verdicts: readonly DeviceVerdict[],
  ): Promise<Pick<DeviceRulesResult, 'linked' | 'carved' | 'failed'>> {
    const linked: { className: string; path: string }[] = [];
    const carved: string[] = [];
    const failed: { device: string; error: string }[] = [];
    for (const v of verdicts) {
      if (v.kind === 'carve' && v.apply) {
        const outcome = await this.carve(v.device, v.partitions);
        if (outcome === undefined) carved.push(v.device);
        else failed.push({ device: v.device, error: outcome });
      }
      if (v.kind !== 'link' || !v.apply) continue;
      const mountDir = this.config.storageClassMap[v.className]?.mountDir;
      if (mountDir === undefined) continue;
      const path = `${mountDir}/${v.entry}`;
      try {
        await this.deps.links.createLink(path, v.target);
        linked.push({ className: v.className, path });
      } catch (err) {
        failed.push({ device: v.device, error: errorMessage(err) });
      }
    }
    return { linked, carved, failed };
  }

  /** undefined: carved; else why not. */
  private async carve(device: string, partitions: number): Promise<string | undefined> {
    const { carver } = this.deps;
    if (carver === undefined) return 'carving is not available on this node';
    try {
      const outcome = await carver.carve(`/dev/${device}`, partitions);
      return outcome.ok ? undefined : outcome.reason;
    } catch (err) {
      return errorMessage(err);
    }
  }

  /** Each device's verdict said once (log and Node Event) while it stays the same. */
  private report(verdicts: readonly DeviceVerdict[], failed: DeviceRulesResult['failed']): void {
    const { state, logger, events } = this.deps;
    const nodeRef = { apiVersion: 'v1', kind: 'Node', name: this.node.name, uid: this.node.uid };
    const current = new Set<string>();
    for (const v of verdicts) {
      const said = describeVerdict(v, failed.find((f) => f.device === v.device)?.error);
      if (said === undefined) continue;
      const key = `${v.device}/${said.key}`;
      current.add(key);
      if (state.reported.has(key)) continue;
      state.reported.add(key);
      logger.log(said.type === 'Warning' ? 'warn' : 'info', said.message, {
        device: v.device,
        storageClass: v.className,
      });
      events.record(nodeRef, said.type, said.reason, said.message);
    }
    for (const key of state.reported) if (!current.has(key)) state.reported.delete(key);
  }
}

/** What is said about a verdict: undefined for a device already linked, or one still settling. */
export function describeVerdict(
  v: DeviceVerdict,
  linkError?: string,
): { key: string; type: 'Normal' | 'Warning'; reason: string; message: string } | undefined {
  const cls = `storage class ${v.className}`;
  switch (v.kind) {
    case 'linked':
    case 'carved':
      return undefined;
    case 'skip':
      if (v.reason === 'settling') return undefined;
      return {
        key: `skip:${v.reason}`,
        type: 'Normal',
        reason: EVENT_REASONS.skipped,
        message: `Device /dev/${v.device} matches a device rule of ${cls} but is not taken: ${v.reason}: ${v.detail}; it is left untouched`,
      };
    case 'link':
      if (linkError !== undefined)
        return {
          key: 'link-failed',
          type: 'Warning',
          reason: EVENT_REASONS.skipped,
          message: `Device /dev/${v.device} could not be linked for ${cls}: ${linkError}`,
        };
      return v.apply
        ? {
            key: 'claimed',
            type: 'Normal',
            reason: EVENT_REASONS.claimed,
            message: `Device /dev/${v.device} linked as ${v.entry} → ${v.target} for ${cls}`,
          }
        : {
            key: 'planned',
            type: 'Normal',
            reason: EVENT_REASONS.planned,
            message: `Device /dev/${v.device} would be linked as ${v.entry} → ${v.target} for ${cls} (rule in plan mode: nothing written)`,
          };
    case 'carve':
      if (linkError !== undefined)
        return {
          key: 'carve-failed',
          type: 'Warning',
          reason: EVENT_REASONS.skipped,
          message: `Device /dev/${v.device} could not be carved for ${cls}: ${linkError}; it is left as it was`,
        };
      return {
        key: v.apply ? 'carve' : 'carve-planned',
        type: 'Normal',
        reason: v.apply ? EVENT_REASONS.claimed : EVENT_REASONS.planned,
        message: `Device /dev/${v.device} ${v.apply ? 'is carved' : 'would be carved'} into ${String(v.partitions)} partitions for ${cls}`,
      };
  }
}

/**
 * The carver's last check, while it holds the disk exclusively: the device read afresh is still
 * blank and unused (no signature, partition, holder, mount or swap, not read-only).
 */
export function blankOnFreshRead(inventory: DeviceInventory): (devicePath: string) => Promise<boolean> {
  return async (devicePath) => {
    const d = (await inventory.devices()).find((x) => x.devicePath === devicePath);
    return (
      d !== undefined &&
      d.signatures.length === 0 &&
      d.partitions.length === 0 &&
      d.holders.length === 0 &&
      d.mountPoints.length === 0 &&
      !d.swapActive &&
      !d.readOnly
    );
  };
}

const settling = (v: DeviceVerdict): boolean => v.kind === 'skip' && v.reason === 'settling';

/** A verdict that writes (a link or a carve in apply mode). */
const writes = (v: DeviceVerdict): boolean => (v.kind === 'link' || v.kind === 'carve') && v.apply;

/** Verdicts by `class\0state`: linked, carved, link, carve, planned, carve-planned, or the skip reason. */
export function countVerdicts(verdicts: readonly DeviceVerdict[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const v of verdicts) {
    const state =
      v.kind === 'skip'
        ? v.reason
        : (v.kind === 'link' || v.kind === 'carve') && !v.apply
          ? v.kind === 'link'
            ? 'planned'
            : 'carve-planned'
          : v.kind;
    const key = `${v.className}\0${state}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return counts;
}

/** The next time a settling device is due. */
function wakeFor(
  verdicts: readonly DeviceVerdict[],
  classes: readonly RuleClass[],
  state: DeviceRulesState,
  now: number,
): { wakeAt?: number } {
  let wakeAt: number | undefined;
  for (const v of verdicts) {
    if (v.kind !== 'skip' || v.reason !== 'settling') continue;
    const rule = classes.find((c) => c.name === v.className)?.rules[v.rule];
    const since = state.sizes.get(v.device)?.since ?? now;
    const due = since + (rule?.settleMs ?? 0);
    wakeAt = wakeAt === undefined ? due : Math.min(wakeAt, due);
  }
  return wakeAt === undefined ? {} : { wakeAt };
}
