// The written form of a class's `deviceRules` (keys, allowed values, defaults) and the way back
// from a decoded DeviceRule to it: diff-config and the canonical YAML show rules as they are written.
import type { DeviceRule, DeviceType, RuleMode, Transport } from '../devices/model.js';
import { formatGoDuration } from './duration.js';
import type { ClassConfig } from './model.js';
import { formatByteQuantity } from './quantity.js';

export const RULE_MODES: readonly RuleMode[] = ['plan', 'apply'];
export const DEFAULT_RULE_MODE: RuleMode = 'plan';
/** In this order in a normalized rule. */
export const RULE_DEVICE_TYPES: readonly DeviceType[] = ['disk', 'part', 'loop', 'dm', 'md', 'mpath'];
export const DEFAULT_RULE_DEVICE_TYPES: readonly DeviceType[] = Object.freeze(['disk']);
/** `unknown` is what a device's transport is when nothing says; a rule cannot ask for it. */
export const RULE_TRANSPORTS: readonly Exclude<Transport, 'unknown'>[] = [
  'nvme',
  'sata',
  'sas',
  'scsi',
  'virtio',
  'usb',
];
export const DEFAULT_SETTLE_MS = 10_000;
/** GPT holds 128 entries by default. */
export const MAX_RULE_PARTITIONS = 128;

/** A rule as written in YAML: every key, defaults filled in, sizes as quantities, settle as a Go duration. */
export interface WrittenDeviceRule {
  readonly mode: RuleMode;
  readonly byIdNames?: readonly string[];
  readonly types: readonly DeviceType[];
  readonly rotational?: boolean;
  readonly minSize?: string;
  readonly maxSize?: string;
  readonly models?: readonly string[];
  readonly vendors?: readonly string[];
  readonly serials?: readonly string[];
  readonly transports?: readonly Transport[];
  readonly maxDevices?: number;
  readonly nodeLabels?: Readonly<Record<string, string>>;
  readonly allowRemovable: boolean;
  readonly partitions?: number;
  readonly settle: string;
}

export type DeviceRuleKey = keyof WrittenDeviceRule;

export interface DeviceRuleKeyDescriptor {
  readonly name: DeviceRuleKey;
  readonly type: string;
  readonly defaultText: string;
  readonly description: string;
}

/** Every key of a rule, for the decoder (unknown keys are errors) and the generated docs table. */
export const DEVICE_RULE_KEYS = [
  {
    name: 'mode',
    type: 'rule-mode',
    defaultText: 'plan',
    description: 'plan reports the devices the rule would take; apply links them (and carves partitions).',
  },
  {
    name: 'byIdNames',
    type: 'glob-list',
    defaultText: 'any',
    description:
      'Go filepath.Match globs on the names in /dev/disk/by-id (the name only, no /); any name matching any glob.',
  },
  {
    name: 'types',
    type: 'enum-list',
    defaultText: '[disk]',
    description: `Device types: ${RULE_DEVICE_TYPES.join(', ')}.`,
  },
  {
    name: 'rotational',
    type: 'bool',
    defaultText: 'any',
    description: 'true: spinning disks only; false: solid state only.',
  },
  {
    name: 'minSize',
    type: 'quantity',
    defaultText: 'any',
    description: 'Smallest device size, a Kubernetes quantity of whole bytes (100Gi, 500G); at most maxSize.',
  },
  { name: 'maxSize', type: 'quantity', defaultText: 'any', description: 'Largest device size, inclusive.' },
  { name: 'models', type: 'glob-list', defaultText: 'any', description: 'Globs on the sysfs model (trimmed).' },
  { name: 'vendors', type: 'glob-list', defaultText: 'any', description: 'Globs on the sysfs vendor (trimmed).' },
  { name: 'serials', type: 'glob-list', defaultText: 'any', description: 'Globs on the serial number (trimmed).' },
  {
    name: 'transports',
    type: 'enum-list',
    defaultText: 'any',
    description: `How the device is attached: ${RULE_TRANSPORTS.join(', ')}.`,
  },
  {
    name: 'maxDevices',
    type: 'integer',
    defaultText: 'no limit',
    description:
      'At most this many devices of the node for this rule, those already linked included; a positive integer.',
  },
  {
    name: 'nodeLabels',
    type: 'string-map',
    defaultText: '{}',
    description: 'The rule applies only on nodes carrying all these labels with these values.',
  },
  {
    name: 'allowRemovable',
    type: 'bool',
    defaultText: 'false',
    description: 'Also take removable devices (USB sticks, card readers).',
  },
  {
    name: 'partitions',
    type: 'integer',
    defaultText: 'none',
    description: `Carve each blank whole disk into this many equal GPT partitions (1-${MAX_RULE_PARTITIONS}) and link each; only when types name whole devices (disk, loop).`,
  },
  {
    name: 'settle',
    type: 'duration',
    defaultText: formatGoDuration(BigInt(DEFAULT_SETTLE_MS) * 1_000_000n),
    description: 'How long a device size must have been stable before the device is taken.',
  },
] as const satisfies readonly DeviceRuleKeyDescriptor[];

// Compile-time proof that every written key is described.
type MissingKey = Exclude<DeviceRuleKey, (typeof DEVICE_RULE_KEYS)[number]['name']>;
export const ruleKeysAreComplete: [MissingKey] extends [never] ? true : false = true;

/** The written form of a decoded rule; decoding it gives the same rule back. */
export function writtenDeviceRule(rule: DeviceRule): WrittenDeviceRule {
  const { minBytes, maxBytes, settleMs, ...same } = rule;
  return {
    ...same,
    ...(minBytes !== undefined ? { minSize: formatByteQuantity(minBytes) } : {}),
    ...(maxBytes !== undefined ? { maxSize: formatByteQuantity(maxBytes) } : {}),
    settle: formatGoDuration(BigInt(settleMs) * 1_000_000n),
  };
}

/** A class as written: its rules in their written form, every other field as decoded. */
export type WrittenClass = Omit<ClassConfig, 'deviceRules'> & { readonly deviceRules?: readonly WrittenDeviceRule[] };

export function writtenClass(c: ClassConfig): WrittenClass {
  const { deviceRules, ...rest } = c;
  return deviceRules === undefined ? rest : { ...rest, deviceRules: deviceRules.map(writtenDeviceRule) };
}
