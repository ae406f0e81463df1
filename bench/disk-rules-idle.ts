// Disks by rule, what a node with many disks pays while nothing changes: the change check the
// sync loop runs every 5 s while rules exist (LinuxBlockDevices.changeStamp: the class/block
// listing and /proc/partitions, no device opened), the inventory alone on an unchanged node
// (devices({ previous }): a few sysfs attributes per device, hardware facts and signatures
// reused), and a full rules pass over an unchanged node (that inventory, the decision, the
// discovery directory read; nothing to write). On a fake node of N disks in a temp dir
// (test/support/fake-block-node.ts: a sysfs tree, sparse files as devices), N = 64 by default,
// each with a diskseq as on kernels 5.15+ and P partitions (--partitions, default 0; a carved
// disk has several). CPU per call from process.cpuUsage over many calls (this process does
// nothing else meanwhile). An idle pass of the step reads the change stamp and the discovery
// directories and reuses the last verdicts; `idleInventoryCpuMs` is what a pass pays when the
// stamp moved (devices({ previous })). No process is spawned (test/unit/disk-rules/no-spawn.test.ts
// counts every child_process call over such passes).
//
// Usage: node dist/bench/disk-rules-idle.js [--disks 64] [--partitions 0] [--rounds 500]
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

import { systemClock } from '../src/core/clock.js';
import type { ProvisionerConfig } from '../src/core/config/model.js';
import { DeviceRules, DeviceRulesState } from '../src/core/disk-rules/service.js';
import { MemoryLogger } from '../src/core/log.js';
import { LinuxVolumes } from '../src/core/node/linux-volumes.js';
import { Cleanup, makeTempDir } from '../test/support/real-node.js';
import { FakeNode } from '../test/support/fake-block-node.js';
import { numberFlag } from './support.js';

const disks = numberFlag('--disks', 64);
const partitions = numberFlag('--partitions', 0);
const rounds = numberFlag('--rounds', 500);
const MiB = 2 ** 20;

async function cpuMsPerCall(rounds_: number, call: () => Promise<unknown>): Promise<number> {
  for (let i = 0; i < 20; i += 1) await call(); // warm-up
  const start = process.cpuUsage();
  for (let i = 0; i < rounds_; i += 1) await call();
  const used = process.cpuUsage(start);
  return (used.user + used.system) / 1000 / rounds_;
}

const cleanup = new Cleanup();
try {
  const node = new FakeNode(makeTempDir(cleanup, 'lvp-rules-bench-'));
  for (let i = 0; i < disks; i += 1) {
    const disk = `nvme${String(i)}n1`;
    node.addDisk(disk, {
      majorMinor: `259:${String(i * (partitions + 1))}`,
      sizeBytes: 64 * MiB,
      device: { model: 'Bench NVMe\n', serial: `B${String(i)}\n` },
      attributes: { diskseq: `${String(i + 1)}\n` },
    });
    for (let p = 1; p <= partitions; p += 1) {
      const majorMinor = `259:${String(i * (partitions + 1) + p)}`;
      node.addPartition(disk, `${disk}p${String(p)}`, { majorMinor, sizeBytes: 4 * MiB, number: p });
    }
  }
  const inventory = node.inventory();
  const mountDir = join(node.root, 'discovery');
  mkdirSync(mountDir);
  const config = {
    storageClassMap: {
      fast: {
        hostDir: mountDir,
        mountDir,
        blockCleanerCommand: [],
        volumeMode: 'Block',
        accessMode: 'ReadWriteOnce',
        fsType: '',
        namePattern: '*',
        selector: [],
        // plan mode: the bench node's "devices" are files, nothing may be linked
        deviceRules: [{ mode: 'plan', types: ['disk'], allowRemovable: false, settleMs: 0 }],
      },
    },
  } as unknown as ProvisionerConfig;
  const rules = new DeviceRules(
    config,
    { name: 'bench', uid: 'u', hostname: 'bench', labels: {} },
    {
      inventory,
      volumes: new LinuxVolumes(),
      links: { createLink: () => Promise.reject(new Error('the bench writes nothing')) },
      clock: systemClock,
      logger: new MemoryLogger(),
      events: { record: () => undefined },
      state: new DeviceRulesState(),
    },
  );
  await rules.pass([]);
  const stampMs = await cpuMsPerCall(rounds, () => inventory.changeStamp());
  let previous = await inventory.devices();
  const idleInventoryMs = await cpuMsPerCall(Math.max(20, Math.floor(rounds / 5)), async () => {
    previous = await inventory.devices({ previous });
  });
  const passMs = await cpuMsPerCall(Math.max(20, Math.floor(rounds / 5)), () => rules.pass([]));
  const freshMs = await cpuMsPerCall(20, () => inventory.devices());
  process.stdout.write(
    `${JSON.stringify({
      disks,
      partitions,
      changeStampCpuMs: Number(stampMs.toFixed(3)),
      idleInventoryCpuMs: Number(idleInventoryMs.toFixed(3)),
      idlePassCpuMs: Number(passMs.toFixed(3)),
      freshInventoryCpuMs: Number(freshMs.toFixed(3)),
      node: process.version,
    })}\n`,
  );
} finally {
  cleanup.run();
}
