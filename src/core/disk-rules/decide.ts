// Disks by rule, the decision, pure: from what the agent sees on the node (its block devices, the
// entries already in the discovery directories, the disk identities recorded on its PVs, its
// labels) to what it would do with each device a rule selects: link it into the class's
// discovery directory, carve it first, leave it (already linked), or skip it with the reason.
// Every safety check runs here, before anything is written; the service (service.ts) reads,
// calls decide, and in `apply` mode writes only what a verdict says.
import { goFilepathMatch, matchesNamePattern } from '../config/glob.js';
import { formatByteQuantity } from '../config/quantity.js';
import { identityMatches } from '../pv/identity.js';
import { CARVABLE_TYPES, type DeviceFacts, type DeviceRule } from '../devices/model.js';

/** A class with rules, as decide needs it. */
export interface RuleClass {
  readonly name: string;
  readonly namePattern: string;
  readonly rules: readonly DeviceRule[];
}

/** An entry already in a class's discovery directory, and the device it resolves to. */
export interface DiscoveryLink {
  readonly className: string;
  readonly entry: string;
  /** Kernel name of the device it resolves to; undefined: dangling or not a device. */
  readonly device: string | undefined;
}

export interface DeviceRulesView {
  readonly now: number;
  readonly classes: readonly RuleClass[];
  readonly nodeLabels: Readonly<Record<string, string>>;
  readonly devices: readonly DeviceFacts[];
  /** Since when each device (kernel name) has had its current size. */
  readonly sizeSince: ReadonlyMap<string, number>;
  /** The disk identity of each device (kernel name → id), where the node offers one. */
  readonly identities: ReadonlyMap<string, string>;
  /** Identities recorded on this node's PVs. */
  readonly recorded: readonly string[];
  readonly links: readonly DiscoveryLink[];
  /** Kernel names of the devices holding /, /boot, the kubelet and container runtime dirs. */
  readonly systemDevices: ReadonlySet<string>;
}

export type SkipReason =
  | 'ambiguous'
  | 'system-disk'
  | 'read-only'
  | 'removable'
  | 'too-small'
  | 'too-large'
  | 'mounted'
  | 'swap'
  | 'holders'
  | 'partition-table'
  | 'signature'
  | 'recorded-on-pv'
  | 'settling'
  | 'max-devices'
  | 'name-pattern';

export type DeviceVerdict =
  | { readonly kind: 'linked'; readonly device: string; readonly className: string; readonly entry: string }
  /** A whole disk the agent carved: its partitions have their own verdicts. */
  | { readonly kind: 'carved'; readonly device: string; readonly className: string; readonly partitions: number }
  | {
      readonly kind: 'link';
      readonly device: string;
      readonly className: string;
      readonly rule: number;
      readonly apply: boolean;
      readonly entry: string;
      /** What the link points at: the stable /dev/disk/by-id name when there is one. */
      readonly target: string;
    }
  | {
      readonly kind: 'carve';
      readonly device: string;
      readonly className: string;
      readonly rule: number;
      readonly apply: boolean;
      readonly partitions: number;
    }
  | {
      readonly kind: 'skip';
      readonly device: string;
      readonly className: string;
      readonly rule: number;
      readonly reason: SkipReason;
      readonly detail: string;
    };

/** The rules a device is selected by: (class, rule index), in class name order. */
interface Selection {
  readonly cls: RuleClass;
  readonly index: number;
  readonly rule: DeviceRule;
}

const anyGlob = (globs: readonly string[] | undefined, value: string): boolean =>
  globs === undefined || globs.some((g) => goFilepathMatch(g, value));

/** Whether the rule names this device (its identity selectors); size and removable are checks, reported. */
export function selects(rule: DeviceRule, device: DeviceFacts, nodeLabels: Readonly<Record<string, string>>): boolean {
  if (!rule.types.includes(device.type)) return false;
  if (rule.rotational !== undefined && rule.rotational !== device.rotational) return false;
  if (rule.transports !== undefined && !rule.transports.includes(device.transport)) return false;
  if (rule.byIdNames !== undefined && !device.byIdNames.some((n) => anyGlob(rule.byIdNames, n))) return false;
  if (!anyGlob(rule.models, device.model) || !anyGlob(rule.vendors, device.vendor)) return false;
  if (!anyGlob(rule.serials, device.serial)) return false;
  return Object.entries(rule.nodeLabels ?? {}).every(([k, v]) => nodeLabels[k] === v);
}

/** A partition the agent carved is selected by the rule that carved its disk. */
function selections(view: DeviceRulesView, device: DeviceFacts): Selection[] {
  const parent =
    device.type === 'part' && device.madeByAgent ? view.devices.find((d) => d.name === device.parent) : undefined;
  const subject = parent ?? device;
  const found: Selection[] = [];
  for (const cls of view.classes)
    cls.rules.forEach((rule, index) => {
      if (parent !== undefined && rule.partitions === undefined) return;
      if (selects(rule, subject, view.nodeLabels)) found.push({ cls, index, rule });
    });
  return found;
}

/** The link's name in the discovery directory, and its target. */
export function linkFor(device: DeviceFacts): { readonly entry: string; readonly target: string } {
  const byId = device.byIdNames[0];
  return byId === undefined
    ? { entry: device.name, target: device.devicePath }
    : { entry: byId, target: `/dev/disk/by-id/${byId}` };
}

/** A size as a quantity, exact (`100Gi`, `9178624`): two sizes a check compares never read alike. */
const size = (bytes: number): string => formatByteQuantity(bytes);

/** The first safety check the device fails, in the order an operator would fix them; undefined: none. */
export function safetyFinding(
  view: DeviceRulesView,
  device: DeviceFacts,
  rule: DeviceRule,
  carved = false,
): { readonly reason: SkipReason; readonly detail: string } | undefined {
  const family = view.devices.filter((d) => d.name === device.name || d.parent === device.name);
  const system = [device.name, device.parent ?? '', ...device.partitions].find((n) => view.systemDevices.has(n));
  if (system !== undefined) return { reason: 'system-disk', detail: `holds a system filesystem (${system})` };
  if (device.readOnly) return { reason: 'read-only', detail: 'the device is read-only' };
  if (device.removable && !rule.allowRemovable)
    return { reason: 'removable', detail: 'removable device (allowRemovable is false)' };
  if (!carved && rule.minBytes !== undefined && device.sizeBytes < rule.minBytes)
    return { reason: 'too-small', detail: `${size(device.sizeBytes)} is under minSize ${size(rule.minBytes)}` };
  if (!carved && rule.maxBytes !== undefined && device.sizeBytes > rule.maxBytes)
    return { reason: 'too-large', detail: `${size(device.sizeBytes)} is over maxSize ${size(rule.maxBytes)}` };
  const mounted = family.flatMap((d) => d.mountPoints);
  if (mounted.length > 0) return { reason: 'mounted', detail: `mounted at ${mounted.join(', ')}` };
  if (family.some((d) => d.swapActive)) return { reason: 'swap', detail: 'in use as swap' };
  const holders = family.flatMap((d) => d.holders);
  if (holders.length > 0) return { reason: 'holders', detail: `in use by ${holders.join(', ')}` };
  return contentFinding(view, device);
}

/** What is on the device: a partition table, any signature, or a disk a PV of this node records. */
function contentFinding(
  view: DeviceRulesView,
  device: DeviceFacts,
): { readonly reason: SkipReason; readonly detail: string } | undefined {
  const table = device.signatures.find((s) => s.type === 'gpt' || s.type === 'gpt-backup' || s.type === 'dos');
  if (device.partitions.length > 0 || table !== undefined)
    return {
      reason: 'partition-table',
      detail:
        device.partitions.length > 0
          ? `has partitions (${device.partitions.join(', ')})`
          : `${table?.type ?? ''} partition table at offset ${String(table?.offset ?? 0)}`,
    };
  const signature = device.signatures[0];
  if (signature !== undefined)
    return { reason: 'signature', detail: `${signature.type} signature at offset ${String(signature.offset)}` };
  const identity = view.identities.get(device.name);
  if (identity !== undefined && view.recorded.some((r) => identityMatches(r, identity)))
    return { reason: 'recorded-on-pv', detail: `its disk ${identity} is recorded on a PersistentVolume of this node` };
  return undefined;
}

/** One device's verdict; undefined when no rule selects it. */
function decideDevice(
  view: DeviceRulesView,
  device: DeviceFacts,
  taken: Map<string, number>,
): DeviceVerdict | undefined {
  const found = selections(view, device);
  const first = found[0];
  if (first === undefined) return undefined;
  const base = { device: device.name, className: first.cls.name, rule: first.index };
  const linked = view.links.find((l) => l.device === device.name);
  if (linked !== undefined)
    return { kind: 'linked', device: device.name, className: linked.className, entry: linked.entry };
  const ours = view.devices.filter((d) => d.parent === device.name && d.madeByAgent);
  if (ours.length > 0 && ours.length === device.partitions.length)
    return { kind: 'carved', device: device.name, className: first.cls.name, partitions: ours.length };
  if (found.some((s) => s.cls.name !== first.cls.name))
    return {
      kind: 'skip',
      ...base,
      reason: 'ambiguous',
      detail: `selected by classes ${found.map((s) => s.cls.name).join(', ')}`,
    };
  const finding = safetyFinding(view, device, first.rule, device.madeByAgent);
  if (finding !== undefined) return { kind: 'skip', ...base, ...finding };
  const since = view.sizeSince.get(device.name) ?? view.now;
  if (view.now - since < first.rule.settleMs)
    return {
      kind: 'skip',
      ...base,
      reason: 'settling',
      detail: `size stable for ${String(view.now - since)} ms of ${String(first.rule.settleMs)}`,
    };
  const key = `${first.cls.name}/${String(first.index)}`;
  const count = taken.get(key) ?? 0;
  if (first.rule.maxDevices !== undefined && count >= first.rule.maxDevices)
    return {
      kind: 'skip',
      ...base,
      reason: 'max-devices',
      detail: `maxDevices ${String(first.rule.maxDevices)} reached`,
    };
  taken.set(key, count + 1);
  const apply = first.rule.mode === 'apply';
  if (first.rule.partitions !== undefined && CARVABLE_TYPES.includes(device.type))
    return { kind: 'carve', ...base, apply, partitions: first.rule.partitions };
  const { entry, target } = linkFor(device);
  if (!matchesNamePattern(first.cls.namePattern, entry))
    return {
      kind: 'skip',
      ...base,
      reason: 'name-pattern',
      detail: `${entry} does not match namePattern ${first.cls.namePattern}`,
    };
  return { kind: 'link', ...base, apply, entry, target };
}

/**
 * Every device a rule selects, with its verdict, in device name order. Devices already linked
 * count toward their rule's maxDevices before any new one is taken.
 */
export function decideDevices(view: DeviceRulesView): readonly DeviceVerdict[] {
  const taken = new Map<string, number>();
  const devices = [...view.devices].sort((a, b) => a.name.localeCompare(b.name));
  for (const device of devices) {
    if (!view.links.some((l) => l.device === device.name)) continue;
    const first = selections(view, device)[0];
    if (first === undefined) continue;
    const key = `${first.cls.name}/${String(first.index)}`;
    taken.set(key, (taken.get(key) ?? 0) + 1);
  }
  const verdicts: DeviceVerdict[] = [];
  for (const device of devices) {
    const verdict = decideDevice(view, device, taken);
    if (verdict !== undefined) verdicts.push(verdict);
  }
  return verdicts;
}
