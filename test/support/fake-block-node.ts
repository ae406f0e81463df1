// A fake node for the block device inventory (src/core/node/block-devices.ts) in a temp dir: a
// sysfs tree laid out as the kernel lays it out (class/block links into devices/…, partitions
// inside their disk), regular sparse files standing in for the device nodes, a udev database, a
// by-id directory, a mountinfo, a swaps file and a /proc/partitions. Used by its unit tests and bench/disk-rules-idle.ts.
import assert from 'node:assert/strict';
import { closeSync, mkdirSync, openSync, rmSync, symlinkSync, truncateSync, writeFileSync, writeSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';

import { LinuxBlockDevices, type LinuxBlockDevicesOptions } from '../../src/core/node/block-devices.js';

export interface FakeDiskOptions {
  readonly majorMinor: string;
  readonly sizeBytes: number;
  /** Where the disk sits under `sys/devices` (its block/ directory's parent); default `virtual`. */
  readonly bus?: string;
  readonly ro?: boolean;
  readonly removable?: boolean;
  readonly rotational?: boolean;
  /** Files of the `device/` directory (model, vendor, serial, wwid), written as given. */
  readonly device?: Readonly<Record<string, string>>;
  /** Other sysfs attributes of the disk (`wwid`, `serial`, `dm/uuid`, `diskseq`…), written as given. */
  readonly attributes?: Readonly<Record<string, string>>;
  /** No device node in the fake /dev. */
  readonly noNode?: boolean;
}

export interface FakePartitionOptions {
  readonly majorMinor: string;
  readonly sizeBytes: number;
  readonly number: number;
  readonly partName?: string;
  /** sysfs `start`: the first byte on the disk (written in 512-byte sectors); none when not given. */
  readonly startBytes?: number;
}

/** A fake node under root: sys/, dev/ (and dev/disk/by-id), udev/, mountinfo, swaps and partitions. */
export class FakeNode {
  readonly sys: string;
  readonly dev: string;
  readonly udev: string;
  readonly mountInfo: string;
  readonly swaps: string;
  /** /proc/partitions, kept as the kernel keeps it (see writePartitions). */
  readonly partitions: string;
  private readonly dirs = new Map<string, string>();
  /** Number and size of each device, in the order added: what /proc/partitions lists. */
  private readonly table = new Map<string, { readonly majorMinor: string; sizeBytes: number }>();

  constructor(readonly root: string) {
    this.sys = join(root, 'sys');
    this.dev = join(root, 'dev');
    this.udev = join(root, 'udev');
    this.mountInfo = join(root, 'mountinfo');
    this.swaps = join(root, 'swaps');
    this.partitions = join(root, 'partitions');
    for (const dir of [join(this.sys, 'class', 'block'), join(this.dev, 'disk', 'by-id'), this.udev]) {
      mkdirSync(dir, { recursive: true });
    }
    writeFileSync(this.mountInfo, '1 0 254:0 / / rw - ext4 /dev/root rw\n');
    writeFileSync(this.swaps, 'Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n');
    this.writePartitions();
  }

  inventory(options: LinuxBlockDevicesOptions = {}): LinuxBlockDevices {
    return new LinuxBlockDevices({
      sysRoot: this.sys,
      devRoot: this.dev,
      udevDataDir: this.udev,
      mountInfoPath: this.mountInfo,
      swapsPath: this.swaps,
      partitionsPath: this.partitions,
      acceptRegularFiles: true,
      ...options,
    });
  }

  dirOf(name: string): string {
    const dir = this.dirs.get(name);
    assert.ok(dir !== undefined, `fake device ${name} exists`);
    return dir;
  }

  addDisk(name: string, options: FakeDiskOptions): void {
    const dir = join(this.sys, 'devices', options.bus ?? 'virtual', 'block', name);
    this.addEntry(name, dir, options.majorMinor, options.sizeBytes, 'disk', options.noNode ?? false);
    this.attribute(name, 'ro', options.ro === true ? '1\n' : '0\n');
    this.attribute(name, 'removable', options.removable === true ? '1\n' : '0\n');
    this.attribute(name, 'queue/rotational', options.rotational === true ? '1\n' : '0\n');
    for (const [file, text] of Object.entries(options.device ?? {})) this.attribute(name, `device/${file}`, text);
    for (const [file, text] of Object.entries(options.attributes ?? {})) this.attribute(name, file, text);
  }

  addPartition(disk: string, name: string, options: FakePartitionOptions): void {
    const dir = join(this.dirOf(disk), name);
    const extra = `PARTN=${options.number}\n${options.partName === undefined ? '' : `PARTNAME=${options.partName}\n`}`;
    this.addEntry(name, dir, options.majorMinor, options.sizeBytes, 'partition', false, extra);
    this.attribute(name, 'partition', `${options.number}\n`);
    if (options.startBytes !== undefined) this.attribute(name, 'start', `${options.startBytes / 512}\n`);
    this.attribute(name, 'ro', '0\n');
  }

  private addEntry(
    name: string,
    dir: string,
    majorMinor: string,
    sizeBytes: number,
    devType: string,
    noNode: boolean,
    extraUevent = '',
  ): void {
    mkdirSync(join(dir, 'holders'), { recursive: true });
    this.dirs.set(name, dir);
    this.table.set(name, { majorMinor, sizeBytes });
    this.writePartitions();
    const [major, minor] = majorMinor.split(':');
    this.attribute(name, 'dev', `${majorMinor}\n`);
    this.attribute(name, 'size', `${sizeBytes / 512}\n`);
    this.attribute(
      name,
      'uevent',
      `MAJOR=${major}\nMINOR=${minor}\nDEVNAME=${name}\nDEVTYPE=${devType}\n${extraUevent}`,
    );
    const link = join(this.sys, 'class', 'block', name);
    symlinkSync(relative(dirname(link), dir), link);
    if (!noNode) {
      writeFileSync(join(this.dev, name), '');
      truncateSync(join(this.dev, name), sizeBytes);
    }
  }

  attribute(name: string, file: string, text: string): void {
    const path = join(this.dirOf(name), file);
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, text);
  }

  /** Writes bytes into the device node's file at offset (never past its end). */
  write(name: string, offset: number, bytes: Buffer | string): void {
    const fd = openSync(join(this.dev, name), 'r+');
    try {
      const data = typeof bytes === 'string' ? Buffer.from(bytes, 'latin1') : bytes;
      writeSync(fd, data, 0, data.length, offset);
    } finally {
      closeSync(fd);
    }
  }

  resize(name: string, sizeBytes: number): void {
    this.attribute(name, 'size', `${sizeBytes / 512}\n`);
    truncateSync(join(this.dev, name), sizeBytes);
    const entry = this.table.get(name);
    if (entry !== undefined) entry.sizeBytes = sizeBytes;
    this.writePartitions();
  }

  addHolder(name: string, holder: string): void {
    mkdirSync(join(this.dirOf(name), 'holders', holder), { recursive: true });
  }

  remove(name: string): void {
    rmSync(join(this.sys, 'class', 'block', name));
    rmSync(this.dirOf(name), { recursive: true });
    rmSync(join(this.dev, name), { force: true });
    this.dirs.delete(name);
    this.table.delete(name);
    this.writePartitions();
  }

  /** /proc/partitions as the kernel writes it: size in KiB, devices of size 0 left out. */
  private writePartitions(): void {
    const lines = [...this.table]
      .filter(([, entry]) => entry.sizeBytes > 0)
      .map(([name, { majorMinor, sizeBytes }]) => {
        const [major = '', minor = ''] = majorMinor.split(':');
        return `${major.padStart(4)}  ${minor.padStart(7)} ${String(Math.floor(sizeBytes / 1024)).padStart(10)} ${name}\n`;
      });
    writeFileSync(this.partitions, `major minor  #blocks  name\n\n${lines.join('')}`);
  }

  udevRecord(majorMinor: string, properties: Readonly<Record<string, string>>): void {
    const lines = Object.entries(properties).map(([key, value]) => `E:${key}=${value}\n`);
    writeFileSync(join(this.udev, `b${majorMinor}`), `S:disk/by-id/x\n${lines.join('')}`);
  }

  byId(id: string, target: string): void {
    symlinkSync(target, join(this.dev, 'disk', 'by-id', id));
  }
}
