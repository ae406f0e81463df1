// An in-memory block device inventory for fast tests and `simulate`: it answers the DeviceFacts
// tests set, as LinuxBlockDevices answers (sorted by name, fresh copies, checked by the shared
// contract in test/contract/block-devices-contract.ts). It keeps no relations: a test that adds a
// partition sets its disk's `partitions` too, as the kernel would.

import type { DeviceFacts } from '../devices/model.js';
import type { BlockDeviceChangeStamp, BlockDeviceInventory } from './block-devices.js';

/** A blank, unused, non-rotational whole disk of 1 GiB named name, with overrides. */
export function blankDeviceFacts(
  name: string,
  majorMinor: string,
  overrides: Partial<Omit<DeviceFacts, 'name' | 'majorMinor'>> = {},
): DeviceFacts {
  return {
    name,
    devicePath: `/dev/${name}`,
    majorMinor,
    type: 'disk',
    sizeBytes: 1024 ** 3,
    readOnly: false,
    removable: false,
    rotational: false,
    model: '',
    vendor: '',
    serial: '',
    transport: 'unknown',
    byIdNames: [],
    partitions: [],
    holders: [],
    mountPoints: [],
    swapActive: false,
    signatures: [],
    madeByAgent: false,
    ...overrides,
  };
}

function copy(facts: DeviceFacts): DeviceFacts {
  return {
    ...facts,
    byIdNames: [...facts.byIdNames],
    partitions: [...facts.partitions],
    holders: [...facts.holders],
    mountPoints: [...facts.mountPoints],
    signatures: facts.signatures.map((s) => ({ ...s })),
  };
}

export class MemoryBlockDevices implements BlockDeviceInventory, BlockDeviceChangeStamp {
  private readonly byName = new Map<string, DeviceFacts>();
  /** How many times devices() answered: a caller's idle passes should not add to it. */
  devicesCalls = 0;

  constructor(initial: readonly DeviceFacts[] = []) {
    for (const facts of initial) this.add(facts);
  }

  /** Adds a device; throws when one of that name is there (the kernel has one per name). */
  add(facts: DeviceFacts): void {
    if (this.byName.has(facts.name)) throw new Error(`block device ${facts.name} already exists`);
    this.byName.set(facts.name, copy(facts));
  }

  /** Removes a device (unplugged, a loop detached and freed); throws when there is none. */
  remove(name: string): void {
    if (!this.byName.delete(name)) throw new Error(`no block device ${name}`);
  }

  /** Changes some facts of a device (its name stays); returns the new facts. */
  update(name: string, change: Partial<Omit<DeviceFacts, 'name'>>): DeviceFacts {
    const current = this.byName.get(name);
    if (current === undefined) throw new Error(`no block device ${name}`);
    const next = copy({ ...current, ...change, name });
    this.byName.set(name, next);
    return copy(next);
  }

  /** One device's facts (a copy), or undefined. */
  get(name: string): DeviceFacts | undefined {
    const facts = this.byName.get(name);
    return facts === undefined ? undefined : copy(facts);
  }

  /** Every device, sorted by name; `previous` changes nothing (the facts set are always current). */
  devices(): Promise<readonly DeviceFacts[]> {
    this.devicesCalls++;
    const names = [...this.byName.keys()].sort();
    return Promise.resolve(names.flatMap((name) => this.get(name) ?? []));
  }

  /**
   * The set of devices, their numbers, sizes, read-only flags, holders and partitions: more than
   * LinuxBlockDevices' stamp sees (the set, numbers and sizes), never less.
   */
  changeStamp(): Promise<string> {
    const names = [...this.byName.keys()].sort();
    const parts = names.flatMap((name) => {
      const d = this.byName.get(name);
      return d === undefined ? [] : [[name, d.majorMinor, d.sizeBytes, d.readOnly, d.holders, d.partitions]];
    });
    return Promise.resolve(JSON.stringify(parts));
  }
}
