// Disks by rule: which raw block devices of the node belong to a storage class, and the facts
// about a device the safety checks read. Pure data; the rules are decoded from the class's
// `deviceRules` (src/core/config/decode), the facts read by a BlockDeviceInventory
// (src/core/node/block-devices.ts) or given by a fixture.

/** What the kernel says a block device is (sysfs `uevent` DEVTYPE, and the driver of its name). */
export type DeviceType = 'disk' | 'part' | 'loop' | 'dm' | 'md' | 'mpath';

/** The types a rule may carve: whole devices that take a partition table the kernel reads (a loop only when named). */
export const CARVABLE_TYPES: readonly DeviceType[] = ['disk', 'loop'];

/** How the device is attached (udev ID_BUS / the sysfs device path). */
export type Transport = 'nvme' | 'sata' | 'sas' | 'scsi' | 'virtio' | 'usb' | 'unknown';

/** What a rule does with a device it matches: `plan` reports only; `apply` links (and carves). */
export type RuleMode = 'plan' | 'apply';

/** One rule of a class (`deviceRules[i]`): every field given must match; absent fields match all. */
export interface DeviceRule {
  readonly mode: RuleMode;
  /** Go filepath.Match globs on the device's /dev/disk/by-id names (any name, any glob). */
  readonly byIdNames?: readonly string[];
  /** Default `['disk']`: whole disks only. `loop`, `dm` and `md` must be named to be allowed. */
  readonly types: readonly DeviceType[];
  readonly rotational?: boolean;
  /** Size range in bytes, inclusive. */
  readonly minBytes?: number;
  readonly maxBytes?: number;
  /** Globs on the sysfs model, vendor and serial (trimmed). */
  readonly models?: readonly string[];
  readonly vendors?: readonly string[];
  readonly serials?: readonly string[];
  readonly transports?: readonly Transport[];
  /** At most this many devices of this node for this rule (those already linked count). */
  readonly maxDevices?: number;
  /** Node labels that must all be present with these values. */
  readonly nodeLabels?: Readonly<Record<string, string>>;
  readonly allowRemovable: boolean;
  /** Carve a blank whole disk into this many equal GPT partitions, then link each one. */
  readonly partitions?: number;
  /** How long (ms) a device's size must have been stable before it is taken. Default 10 s. */
  readonly settleMs: number;
}

/** A filesystem, RAID, LVM, swap, crypt or partition-table signature found on a device, and where. */
export interface Signature {
  /** `ext4`, `xfs`, `btrfs`, `swap`, `LVM2_member`, `crypto_LUKS`, `linux_raid_member`, `gpt`, `gpt-backup`, `dos` (MBR), `iso9660`, `vfat`, `ntfs`, `zfs_member`, `data` (non-zero bytes where no known signature is). */
  readonly type: string;
  readonly offset: number;
  /**
   * A `gpt` whose header and entries check out: its used entries' start and name, which tell the
   * agent's partitions where the kernel did not read the names (no PARTNAME without its GPT parser).
   */
  readonly partitions?: readonly { readonly startBytes: number; readonly name: string }[];
}

/** Everything the checks need to know about one block device, read without writing to it. */
export interface DeviceFacts {
  /** Kernel name: `nvme0n1`, `sdb`, `loop3`, `nvme0n1p2`. */
  readonly name: string;
  /** `/dev/<name>`. */
  readonly devicePath: string;
  readonly majorMinor: string;
  readonly type: DeviceType;
  readonly sizeBytes: number;
  readonly readOnly: boolean;
  readonly removable: boolean;
  readonly rotational: boolean;
  readonly model: string;
  readonly vendor: string;
  readonly serial: string;
  /** WWID (sysfs `wwid`/`device/wwid`) when the device has one: the disk identity recorded on PVs. */
  readonly wwid?: string;
  readonly transport: Transport;
  /** Names in /dev/disk/by-id pointing at this device, sorted. */
  readonly byIdNames: readonly string[];
  /** Kernel names of its partitions (sysfs children), sorted. */
  readonly partitions: readonly string[];
  /** For a partition: its whole disk's kernel name. */
  readonly parent?: string;
  /** Kernel names of the devices built on it (sysfs `holders/`: dm, md, bcache...). */
  readonly holders: readonly string[];
  /** Mount points of this device (from the mount table), and whether it is an active swap device. */
  readonly mountPoints: readonly string[];
  readonly swapActive: boolean;
  /** Signatures found at the offsets wipefs/blkid probe (both ends of the device). */
  readonly signatures: readonly Signature[];
  /** A partition this agent made (its GPT partition name says so). */
  readonly madeByAgent: boolean;
}
