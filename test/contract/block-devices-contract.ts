/**
 * The behaviour every BlockDeviceInventory shares. Registered by
 * test/unit/node/block-devices.test.ts for LinuxBlockDevices (on a fake sysfs and /dev tree) and
 * MemoryBlockDevices, so the in-memory inventory used by fast tests cannot drift from the real one.
 */
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';

import type { BlockDeviceChangeStamp, BlockDeviceInventory } from '../../src/core/node/block-devices.js';

export const MiB = 1024 * 1024;

/** One inventory under test plus the means to shape its devices. */
export interface BlockDevicesFixture {
  readonly inventory: BlockDeviceInventory & BlockDeviceChangeStamp;
  /** Adds a blank whole disk (no partitions, holders or users). */
  addDisk(name: string, majorMinor: string, sizeBytes: number): Promise<void>;
  /** Gives a disk an ext4 superblock magic (what `mkfs.ext4` leaves at 1080). */
  writeExt4(name: string): Promise<void>;
  resize(name: string, sizeBytes: number): Promise<void>;
  remove(name: string): Promise<void>;
  dispose(): Promise<void>;
}

/** Registers the contract under `describe(name)`; each test gets a fresh fixture. */
export function blockDevicesContract(
  name: string,
  setup: () => Promise<BlockDevicesFixture>,
  options: { skip?: string | false } = {},
): void {
  describe(name, { skip: options.skip ?? false }, () => {
    let fixture: BlockDevicesFixture | undefined;
    beforeEach(async () => {
      fixture = await setup();
    });
    afterEach(async () => {
      await fixture?.dispose();
      fixture = undefined;
    });
    const fx = (): BlockDevicesFixture => {
      assert.ok(fixture !== undefined, 'fixture set up');
      return fixture;
    };

    it('lists whole disks sorted by name with their number, size and path; a blank one has no signatures', async () => {
      await fx().addDisk('sdb', '8:16', 8 * MiB);
      await fx().addDisk('sda', '8:0', 4 * MiB);
      const devices = await fx().inventory.devices();
      assert.deepEqual(
        devices.map((d) => [d.name, d.majorMinor, d.sizeBytes, d.devicePath, d.type]),
        [
          ['sda', '8:0', 4 * MiB, '/dev/sda', 'disk'],
          ['sdb', '8:16', 8 * MiB, '/dev/sdb', 'disk'],
        ],
      );
      for (const device of devices) {
        assert.deepEqual(device.signatures, [], `${device.name} is blank`);
        assert.deepEqual([device.partitions, device.holders, device.mountPoints], [[], [], []]);
        assert.equal(device.swapActive, false);
        assert.equal(device.madeByAgent, false);
      }
    });

    it('shows an ext4 signature at 1080 once written, and leaves a removed device out', async () => {
      await fx().addDisk('sda', '8:0', 4 * MiB);
      await fx().addDisk('sdb', '8:16', 4 * MiB);
      await fx().writeExt4('sda');
      await fx().remove('sdb');
      const devices = await fx().inventory.devices();
      assert.deepEqual(
        devices.map((d) => [d.name, d.signatures]),
        [['sda', [{ type: 'ext4', offset: 1080 }]]],
      );
    });

    it('keeps its change stamp over content writes and changes it on a resize, an addition or a removal', async () => {
      await fx().addDisk('sda', '8:0', 4 * MiB);
      const first = await fx().inventory.changeStamp();
      assert.equal(await fx().inventory.changeStamp(), first, 'nothing changed');
      await fx().writeExt4('sda');
      await fx().inventory.devices();
      assert.equal(await fx().inventory.changeStamp(), first, 'contents are not in the stamp');
      await fx().resize('sda', 8 * MiB);
      const resized = await fx().inventory.changeStamp();
      assert.notEqual(resized, first, 'a resize changes it');
      await fx().addDisk('sdb', '8:16', 4 * MiB);
      const added = await fx().inventory.changeStamp();
      assert.notEqual(added, resized, 'a new device changes it');
      await fx().remove('sdb');
      assert.equal(await fx().inventory.changeStamp(), resized, 'back to the devices before');
    });
  });
}
