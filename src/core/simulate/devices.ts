// The block devices of a simulated node (disks by rule, docs/disk-rules.md): the `devices:` list of
// node-facts fixtures and scenarios, read with positions, and put on the in-memory node twice — as
// DeviceFacts in a MemoryBlockDevices (what the rules read) and as block devices at /dev/<name>
// with their /dev/disk/by-id links in the MemoryVolumes (so a link a rule makes resolves, discovery
// publishes it and its disk identity reads). The defaults are a blank whole NVMe disk.
//
//   devices:
//     - name: nvme0n1                         # the root disk: partitions, one mounted at /
//       size: 100Gi
//       model: Amazon Elastic Block Store
//       serial: vol0a1b2c3d4e5f60718
//       signatures: [gpt, gpt-backup]
//       partitions:
//         - { name: nvme0n1p1, size: 99Gi, mountPoints: [/], signatures: [ext4] }
//     - { name: nvme1n1, size: 1769Gi, model: Amazon EC2 NVMe Instance Storage, serial: AWS1A2B3C4D }
import type { Node, YAMLMap } from 'yaml';
import { RULE_DEVICE_TYPES } from '../config/device-rules.js';
import { layOut } from '../devices/gpt.js';
import type { DeviceFacts, DeviceType, Signature, Transport } from '../devices/model.js';
import { blankOnFreshRead } from '../disk-rules/service.js';
import type { DeviceCarver } from '../devices/ports.js';
import { MemoryBlockDevices, blankDeviceFacts } from '../node/memory-block-devices.js';
import type { MemoryVolumes } from '../node/memory-volumes.js';
import { errorMessage } from '../unknown-values.js';
import type { Input } from './input.js';

export const DEVICE_KEYS = [
  'name',
  'type',
  'size',
  'model',
  'vendor',
  'serial',
  'wwid',
  'transport',
  'byIdNames',
  'rotational',
  'removable',
  'readOnly',
  'mountPoints',
  'swap',
  'holders',
  'signatures',
  'partitions',
] as const;

/** A partition has its disk's model, vendor, serial, transport and rotational flag, and no partitions. */
export const PARTITION_KEYS = [
  'name',
  'size',
  'byIdNames',
  'readOnly',
  'mountPoints',
  'swap',
  'holders',
  'signatures',
  'madeByAgent',
] as const;

export const DEVICE_TRANSPORTS: readonly Transport[] = ['nvme', 'sata', 'sas', 'scsi', 'virtio', 'usb', 'unknown'];

/** Where the probe finds each signature (block-devices.ts); `gpt-backup` is in the last sector. */
const SIGNATURE_OFFSETS: Readonly<Record<string, number>> = {
  ext4: 1080,
  xfs: 0,
  btrfs: 65_600,
  swap: 4086,
  LVM2_member: 536,
  crypto_LUKS: 0,
  linux_raid_member: 4096,
  gpt: 512,
  'gpt-backup': -512,
  dos: 510,
  iso9660: 32_769,
  vfat: 82,
  ntfs: 3,
  zfs_member: 131_072,
  data: 0,
  unreadable: 0,
};
export const SIGNATURE_TYPES = Object.keys(SIGNATURE_OFFSETS);

/** The facts of a partition as written; the rest comes from its disk. */
export interface PartitionSpec {
  readonly name: string;
  readonly sizeBytes: number;
  readonly byIdNames?: readonly string[];
  readonly readOnly: boolean;
  readonly mountPoints: readonly string[];
  readonly swap: boolean;
  readonly holders: readonly string[];
  readonly signatures: readonly string[];
  readonly madeByAgent: boolean;
}

/** A device as written (`devices[i]`), defaults filled in. */
export interface DeviceSpec extends Omit<PartitionSpec, 'madeByAgent'> {
  readonly type: DeviceType;
  readonly model: string;
  readonly vendor: string;
  /** Default `SIM-<name>`: every simulated device has a serial, its disk identity without a wwid. */
  readonly serial: string;
  readonly wwid?: string;
  readonly transport: Transport;
  readonly rotational: boolean;
  readonly removable: boolean;
  readonly partitions: readonly PartitionSpec[];
}

/** A kernel block device name: what /dev/<name> and sysfs take. */
const KERNEL_NAME = /^[A-Za-z0-9][A-Za-z0-9_.:+-]{0,63}$/u;

function stringList(
  input: Input,
  node: Node | null,
  path: string,
  check?: (s: string) => string | undefined,
): string[] {
  if (node === null) return [];
  const out: string[] = [];
  (input.list(node, path) ?? []).forEach((item, i) => {
    const at = `${path}[${String(i)}]`;
    const text = input.string(item, at, { required: true });
    if (text === undefined) return;
    const problem = check?.(text);
    if (problem !== undefined) input.error(at, problem, item);
    else out.push(text);
  });
  return out;
}

const kernelName = (s: string): string | undefined =>
  KERNEL_NAME.test(s) ? undefined : `"${s}" is not a kernel device name (letters, digits, no slash)`;
const absolute = (s: string): string | undefined => (s.startsWith('/') ? undefined : 'must be an absolute path');
const byIdName = (s: string): string | undefined =>
  s !== '' && !s.includes('/') && s !== '.' && s !== '..'
    ? undefined
    : `"${s}" is not a /dev/disk/by-id name (the name only, no slash)`;

/** The keys devices and partitions share. */
function readCommon(input: Input, map: YAMLMap, path: string): Omit<PartitionSpec, 'madeByAgent'> | undefined {
  const nameNode = input.get(map, 'name');
  const name = input.string(nameNode, `${path}.name`, { required: true });
  if (name !== undefined && kernelName(name) !== undefined)
    input.error(`${path}.name`, kernelName(name) ?? '', nameNode);
  const sizeNode = input.get(map, 'size');
  if (sizeNode === null) input.error(`${path}.size`, 'is required: the size of the device (e.g. 1769Gi)', map);
  const sizeBytes = sizeNode === null ? undefined : input.bytes(sizeNode, `${path}.size`);
  const byIdNode = input.get(map, 'byIdNames');
  const byIdNames = byIdNode === null ? undefined : stringList(input, byIdNode, `${path}.byIdNames`, byIdName);
  const flag = (key: string): boolean => input.boolean(input.get(map, key), `${path}.${key}`, false) ?? false;
  const signatures: string[] = [];
  (input.toJS(input.get(map, 'signatures')) === null
    ? []
    : (input.list(input.get(map, 'signatures'), `${path}.signatures`) ?? [])
  ).forEach((item, i) => {
    const type = input.oneOf(item, `${path}.signatures[${String(i)}]`, SIGNATURE_TYPES);
    if (type !== undefined) signatures.push(type);
  });
  if (name === undefined || sizeBytes === undefined) return undefined;
  return {
    name,
    sizeBytes,
    ...(byIdNames !== undefined ? { byIdNames } : {}),
    readOnly: flag('readOnly'),
    mountPoints: stringList(input, input.get(map, 'mountPoints'), `${path}.mountPoints`, absolute),
    swap: flag('swap'),
    holders: stringList(input, input.get(map, 'holders'), `${path}.holders`, kernelName),
    signatures,
  };
}

function readPartition(input: Input, node: Node, path: string): PartitionSpec | undefined {
  const map = input.map(node, path);
  if (!map) return undefined;
  input.pairs(map, path, PARTITION_KEYS);
  const common = readCommon(input, map, path);
  const madeByAgent = input.boolean(input.get(map, 'madeByAgent'), `${path}.madeByAgent`, false) ?? false;
  return common === undefined ? undefined : { ...common, madeByAgent };
}

/** One entry of a `devices:` list; undefined (problems reported) when it is wrong. */
export function readDevice(input: Input, node: Node | null, path: string): DeviceSpec | undefined {
  const map = input.map(node, path);
  if (!map) return undefined;
  const errorsBefore = input.sink.issues.filter((i) => i.severity === 'error').length;
  input.pairs(map, path, DEVICE_KEYS);
  const common = readCommon(input, map, path);
  const type = input.oneOf(input.get(map, 'type'), `${path}.type`, RULE_DEVICE_TYPES, 'disk');
  const text = (key: string): string | undefined => input.string(input.get(map, key), `${path}.${key}`);
  const transport = input.oneOf(input.get(map, 'transport'), `${path}.transport`, DEVICE_TRANSPORTS, 'nvme');
  const serial = text('serial');
  const wwid = text('wwid');
  for (const [key, value] of [
    ['serial', serial],
    ['wwid', wwid],
  ] as const)
    if (value?.trim() === '')
      input.error(`${path}.${key}`, 'must not be empty (leave it out for the default)', input.get(map, key));
  if (type === 'part')
    input.error(`${path}.type`, "a partition is listed under its disk's partitions", input.get(map, 'type'));
  const partsNode = input.get(map, 'partitions');
  const partitions: PartitionSpec[] = [];
  if (partsNode !== null && input.toJS(partsNode) !== null) {
    if (type !== 'disk' && type !== 'loop' && type !== 'md' && type !== 'mpath')
      input.error(`${path}.partitions`, `a ${type ?? 'device'} has no partitions`, partsNode);
    (input.list(partsNode, `${path}.partitions`) ?? []).forEach((item, i) => {
      const part = readPartition(input, item, `${path}.partitions[${String(i)}]`);
      if (part) partitions.push(part);
    });
  }
  const flag = (key: string): boolean => input.boolean(input.get(map, key), `${path}.${key}`, false) ?? false;
  const errorsAfter = input.sink.issues.filter((i) => i.severity === 'error').length;
  if (common === undefined || type === undefined || transport === undefined || errorsAfter > errorsBefore)
    return undefined;
  return {
    ...common,
    type,
    model: text('model') ?? '',
    vendor: text('vendor') ?? '',
    serial: serial ?? `SIM-${common.name}`,
    ...(wwid !== undefined ? { wwid } : {}),
    transport,
    rotational: flag('rotational'),
    removable: flag('removable'),
    partitions,
  };
}

/**
 * A `devices:` list: every device, and no kernel name twice (a partition's included). Problems
 * are reported on `input`; the devices read are returned.
 */
export function readDevices(input: Input, node: Node | null, path: string): DeviceSpec[] {
  if (node === null || input.toJS(node) === null) return [];
  const devices: DeviceSpec[] = [];
  const seen = new Set<string>();
  (input.list(node, path) ?? []).forEach((item, i) => {
    const at = `${path}[${String(i)}]`;
    const device = readDevice(input, item, at);
    if (!device) return;
    for (const name of [device.name, ...device.partitions.map((p) => p.name)]) {
      if (seen.has(name)) input.error(`${at}.name`, `duplicate device "${name}"`, item);
      seen.add(name);
    }
    devices.push(device);
  });
  return devices;
}

// ---- the facts ----------------------------------------------------------------------------------

/** What udev names a disk in /dev/disk/by-id: `nvme-<model>_<serial>`, `ata-…`, blanks as `_`; none for others. */
function defaultByIdNames(d: DeviceSpec): string[] {
  const prefix: Partial<Record<Transport, string>> = {
    nvme: 'nvme',
    sata: 'ata',
    scsi: 'scsi',
    sas: 'scsi',
    usb: 'usb',
    virtio: 'virtio',
  };
  const bus = prefix[d.transport];
  if (bus === undefined || d.type !== 'disk') return [];
  const id = [d.model, d.serial]
    .map((s) => s.trim().replace(/\s+/gu, '_'))
    .filter((s) => s !== '')
    .join('_');
  return [`${bus}-${id}`];
}

/** The partition number in a kernel name: `nvme0n1p2` → 2, `sdb1` → 1. */
function partitionNumber(name: string, index: number): number {
  const match = /(\d+)$/u.exec(name);
  return match?.[1] !== undefined ? Number(match[1]) : index + 1;
}

function signaturesOf(types: readonly string[], sizeBytes: number): Signature[] {
  return types.map((type) => {
    const offset = SIGNATURE_OFFSETS[type] ?? 0;
    return { type, offset: offset < 0 ? Math.max(0, sizeBytes + offset) : offset };
  });
}

/** A device and its partitions as the inventory reports them; `number(i)` gives the i-th `major:minor`. */
export function deviceFacts(d: DeviceSpec, number: (i: number) => string): DeviceFacts[] {
  const byIdNames = [...(d.byIdNames ?? defaultByIdNames(d))].sort();
  const disk = blankDeviceFacts(d.name, number(0), {
    type: d.type,
    sizeBytes: d.sizeBytes,
    readOnly: d.readOnly,
    removable: d.removable,
    rotational: d.rotational,
    model: d.model,
    vendor: d.vendor,
    serial: d.serial,
    ...(d.wwid !== undefined ? { wwid: d.wwid } : {}),
    transport: d.transport,
    byIdNames,
    partitions: d.partitions.map((p) => p.name).sort(),
    holders: [...d.holders].sort(),
    mountPoints: [...d.mountPoints],
    swapActive: d.swap,
    signatures: signaturesOf(d.signatures, d.sizeBytes),
  });
  const parts = d.partitions.map((p, i) => {
    const n = partitionNumber(p.name, i);
    return blankDeviceFacts(p.name, number(i + 1), {
      type: 'part',
      sizeBytes: p.sizeBytes,
      readOnly: p.readOnly || d.readOnly,
      removable: d.removable,
      rotational: d.rotational,
      model: d.model,
      vendor: d.vendor,
      serial: d.serial,
      transport: d.transport,
      byIdNames: [...(p.byIdNames ?? byIdNames.map((name) => `${name}-part${String(n)}`))].sort(),
      parent: d.name,
      holders: [...p.holders].sort(),
      mountPoints: [...p.mountPoints],
      swapActive: p.swap,
      signatures: signaturesOf(p.signatures, p.sizeBytes),
      madeByAgent: p.madeByAgent,
    });
  });
  return [disk, ...parts];
}

// ---- the node -----------------------------------------------------------------------------------

const BY_ID = '/dev/disk/by-id';

type CarveOutcome = { readonly ok: true } | { readonly ok: false; readonly reason: string };

/** The kernel name of a disk's partition N: `nvme1n1p2`, `sdb2`. */
function partitionName(disk: string, n: number): string {
  return /\d$/u.test(disk) ? `${disk}p${String(n)}` : `${disk}${String(n)}`;
}

/**
 * The block devices of an in-memory node: the inventory disks by rule reads, kept in step with the
 * /dev nodes and by-id links of the node's MemoryVolumes. Device numbers are `259:N` (blkext, as
 * NVMe namespaces and their partitions have), given in order. It carves as the agent's carver
 * does (src/core/node/carve.ts): a blank disk only, N equal partitions laid out as its GPT.
 */
export class SimulatedDevices implements DeviceCarver {
  readonly inventory = new MemoryBlockDevices();
  private nextMinor = 0;
  /** Each disk as written, to put it back with its partitions after a carve. */
  private readonly specs = new Map<string, DeviceSpec>();

  constructor(private readonly volumes: MemoryVolumes) {}

  /** How many devices the node has, partitions not counted. */
  get disks(): number {
    return this.count;
  }
  private count = 0;

  /** Puts a device and its partitions on the node; throws (naming what clashes) when it cannot. */
  add(d: DeviceSpec): DeviceFacts[] {
    const base = this.nextMinor;
    const facts = deviceFacts(d, (i) => `259:${String(base + i)}`);
    for (const f of facts)
      if (this.inventory.get(f.name) !== undefined) throw new Error(`block device ${f.name} already exists`);
    this.nextMinor += facts.length;
    const disk = facts[0];
    for (const f of facts) {
      const number = f === disk ? '' : `-part${String(partitionNumber(f.name, facts.indexOf(f) - 1))}`;
      // A partition's identity is its disk's with `-part<N>`, as LinuxVolumes reads it.
      const identity = d.wwid !== undefined ? { wwid: `${d.wwid}${number}` } : { serial: `${d.serial}${number}` };
      this.volumes.addBlockDevice(f.devicePath, f.sizeBytes, { device: f.majorMinor, ...identity });
      for (const name of f.byIdNames) this.volumes.addSymlink(`${BY_ID}/${name}`, `../../${f.name}`);
      this.inventory.add(f);
    }
    this.count += 1;
    this.specs.set(d.name, d);
    return facts;
  }

  /** Takes a device and its partitions off the node (unplugged); links made to it stay, dangling. */
  remove(name: string): DeviceFacts[] {
    const disk = this.inventory.get(name);
    if (disk === undefined) throw new Error(`no block device ${name}`);
    if (disk.parent !== undefined) throw new Error(`${name} is a partition of ${disk.parent}: remove the disk`);
    const facts = [disk, ...disk.partitions.flatMap((p) => this.inventory.get(p) ?? [])];
    for (const f of facts) {
      for (const link of f.byIdNames) this.volumes.remove(`${BY_ID}/${link}`);
      this.volumes.remove(f.devicePath);
      this.inventory.remove(f.name);
    }
    this.count -= 1;
    this.specs.delete(name);
    return facts;
  }

  /**
   * Writes a GPT of N equal partitions (`lvp-carved`, made by the agent) on a blank whole disk:
   * the disk gets the tables' signatures and its partitions appear, with their /dev nodes and
   * by-id links, as once the kernel has read the new table. Refuses a disk that is not blank.
   */
  async carve(devicePath: string, partitions: number): Promise<CarveOutcome> {
    const name = devicePath.replace(/^\/dev\//u, '');
    const spec = this.specs.get(name);
    if (spec === undefined) return { ok: false, reason: `${devicePath} is not a whole disk of this node` };
    if (!(await blankOnFreshRead(this.inventory)(devicePath)))
      return { ok: false, reason: `${devicePath} is not blank: left as it is` };
    let layout: ReturnType<typeof layOut>;
    try {
      layout = layOut(spec.sizeBytes, 512, partitions);
    } catch (err) {
      return { ok: false, reason: errorMessage(err) };
    }
    const parts = layout.partitions.map((p, i) => ({
      name: partitionName(name, i + 1),
      sizeBytes: p.blocks * layout.block,
      readOnly: false,
      mountPoints: [],
      swap: false,
      holders: [],
      signatures: [],
      madeByAgent: true,
    }));
    this.remove(name);
    this.add({ ...spec, signatures: ['gpt', 'gpt-backup'], partitions: parts });
    return { ok: true };
  }

  /** Adds every device; a problem is reported through `fail` with the device's name. */
  addAll(devices: readonly DeviceSpec[], fail: (text: string) => void): void {
    for (const d of devices) {
      try {
        this.add(d);
      } catch (err) {
        fail(`${d.name}: ${errorMessage(err)}`);
      }
    }
  }
}
