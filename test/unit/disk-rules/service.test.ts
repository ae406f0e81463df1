// Disks by rule, the pass step (src/core/disk-rules/service.ts) on an in-memory node: an apply
// rule links a blank device into the discovery directory once and says so once; a plan rule
// writes nothing; an entry already there is never replaced; a device waits for its settle time;
// and a device a PV of this node records is never taken. Then the sync loop: the device linked
// by a pass is published by that same pass.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { ManualClock } from '../../../src/core/clock.js';
import type { DeviceVerdict } from '../../../src/core/disk-rules/decide.js';
import type { DeviceFacts, DeviceRule } from '../../../src/core/devices/model.js';
import { DeviceRules, DeviceRulesState, EVENT_REASONS } from '../../../src/core/disk-rules/service.js';
import { parseConfigSnapshot } from '../../../src/core/config/decode/parse.js';
import { snapshotFromFileText } from '../../../src/core/config/decode/layout.js';
import type { ProvisionerConfig } from '../../../src/core/config/model.js';
import type { EventSink } from '../../../src/core/kube/events.js';
import type { PersistentVolume } from '../../../src/core/kube/objects.js';
import { MemoryLogger } from '../../../src/core/log.js';
import { memoryDiscoveryLinks } from '../../../src/core/node/discovery-links.js';
import { MemoryBlockDevices } from '../../../src/core/node/memory-block-devices.js';
import { MemoryVolumes } from '../../../src/core/node/memory-volumes.js';
import { IDENTITY_ANNOTATION } from '../../../src/core/pv/identity.js';
import type { NodeIdentity } from '../../../src/core/pv/naming.js';

const GiB = 2 ** 30;
const NODE: NodeIdentity = { name: 'node-a', uid: 'uid-a', hostname: 'node-a', labels: {} };

function facts(name: string, over: Partial<DeviceFacts> = {}): DeviceFacts {
  return {
    name,
    devicePath: `/dev/${name}`,
    majorMinor: '259:1',
    type: 'disk',
    sizeBytes: 10 * GiB,
    readOnly: false,
    removable: false,
    rotational: false,
    model: 'NVMe',
    vendor: '',
    serial: `S-${name}`,
    transport: 'nvme',
    byIdNames: [`nvme-NVMe_S-${name}`],
    partitions: [],
    holders: [],
    mountPoints: [],
    swapActive: false,
    signatures: [],
    madeByAgent: false,
    ...over,
  };
}

function config(rule: Partial<DeviceRule>): ProvisionerConfig {
  const base = parseConfigSnapshot(
    snapshotFromFileText(
      'c.yaml',
      'storageClassMap:\n  fast:\n    hostDir: /mnt/fast\n    mountDir: /mnt/fast\n    volumeMode: Block\n',
    ),
  ).config;
  const fast = base.storageClassMap['fast'];
  assert.ok(fast !== undefined);
  const full: DeviceRule = { mode: 'apply', types: ['disk'], allowRemovable: false, settleMs: 0, ...rule };
  return { ...base, storageClassMap: { fast: { ...fast, deviceRules: [full] } } };
}

function node(devices: DeviceFacts[]) {
  const volumes = new MemoryVolumes();
  volumes.addDirectory('/mnt/fast').addDirectory('/dev/disk/by-id');
  for (const d of devices) {
    volumes.addBlockDevice(d.devicePath, d.sizeBytes, { serial: d.serial });
    for (const id of d.byIdNames) volumes.addSymlink(`/dev/disk/by-id/${id}`, d.devicePath);
  }
  const events: { reason: string; message: string }[] = [];
  const sink: EventSink = { record: (_o, _t, reason, message) => events.push({ reason, message }) };
  const clock = new ManualClock(1_000_000);
  const logger = new MemoryLogger();
  const state = new DeviceRulesState();
  const rules = (c: ProvisionerConfig): DeviceRules =>
    new DeviceRules(c, NODE, {
      inventory: { devices: () => Promise.resolve(devices) },
      volumes,
      links: memoryDiscoveryLinks(volumes),
      clock,
      logger,
      events: sink,
      state,
    });
  return { volumes, events, clock, rules };
}

const kinds = (verdicts: readonly DeviceVerdict[] | undefined): string[] =>
  (verdicts ?? []).map((v) => `${v.device}:${v.kind === 'skip' ? v.reason : v.kind}`);

describe('disks by rule: the pass step', () => {
  it('links a blank device once (apply), says so once, and then sees it linked', async () => {
    const n = node([facts('nvme1n1')]);
    const step = n.rules(config({}));
    const first = await step.pass([]);
    assert.deepEqual(first?.linked, [{ className: 'fast', path: '/mnt/fast/nvme-NVMe_S-nvme1n1' }]);
    const info = await n.volumes.entryInfo('/mnt/fast/nvme-NVMe_S-nvme1n1');
    assert.deepEqual([info.kind, info.realPath, info.isSymlink], ['block-device', '/dev/nvme1n1', true]);
    assert.deepEqual(kinds((await step.pass([]))?.verdicts), ['nvme1n1:linked']);
    await step.pass([]);
    assert.deepEqual(
      n.events.map((e) => e.reason),
      [EVENT_REASONS.claimed],
    );
  });

  it('in plan mode writes nothing and says once what it would do', async () => {
    const n = node([facts('nvme1n1')]);
    const step = n.rules(config({ mode: 'plan' }));
    for (let i = 0; i < 3; i += 1) assert.deepEqual((await step.pass([]))?.linked, []);
    assert.deepEqual(await n.volumes.listDirectory('/mnt/fast'), []);
    assert.deepEqual(
      n.events.map((e) => e.reason),
      [EVENT_REASONS.planned],
    );
    assert.match(n.events[0]?.message ?? '', /would be linked as nvme-NVMe_S-nvme1n1 .*nothing written/u);
  });

  it('never replaces an entry already there (an operator made it): the link fails and says why', async () => {
    const n = node([facts('nvme1n1')]);
    n.volumes.addDirectory('/mnt/fast/nvme-NVMe_S-nvme1n1');
    const result = await n.rules(config({})).pass([]);
    assert.equal(result?.linked.length, 0);
    assert.equal(result.failed.length, 1);
    assert.equal((await n.volumes.entryInfo('/mnt/fast/nvme-NVMe_S-nvme1n1')).kind, 'directory');
    assert.match(n.events[0]?.message ?? '', /could not be linked/u);
  });

  it('waits for the settle time of a new device, and says when to look again', async () => {
    const n = node([facts('nvme1n1')]);
    const step = n.rules(config({ settleMs: 10_000 }));
    const first = await step.pass([]);
    assert.deepEqual(kinds(first?.verdicts), ['nvme1n1:settling']);
    assert.equal(first?.wakeAt, 1_010_000);
    await n.clock.advance(10_000);
    assert.equal((await step.pass([]))?.linked.length, 1);
  });

  it('an idle pass (no device, directory, PV or config change) reads no device; a new device is read and linked', async () => {
    const n = node([facts('nvme1n1'), facts('nvme2n1')]);
    const inventory = new MemoryBlockDevices([facts('nvme1n1')]);
    const step = new DeviceRules(config({}), NODE, {
      inventory,
      volumes: n.volumes,
      links: memoryDiscoveryLinks(n.volumes),
      clock: n.clock,
      logger: new MemoryLogger(),
      events: { record: () => undefined },
      state: new DeviceRulesState(),
    });
    assert.equal((await step.pass([]))?.linked.length, 1);
    await step.pass([]); // the directory changed with the link: decided again
    const reads = inventory.devicesCalls;
    for (let i = 0; i < 3; i += 1) assert.deepEqual(kinds((await step.pass([]))?.verdicts), ['nvme1n1:linked']);
    assert.equal(inventory.devicesCalls, reads, 'idle passes read no device');
    inventory.add(facts('nvme2n1'));
    assert.deepEqual((await step.pass([]))?.linked, [{ className: 'fast', path: '/mnt/fast/nvme-NVMe_S-nvme2n1' }]);
    assert.ok(inventory.devicesCalls > reads);
  });

  it('does not take a device whose disk a PV of this node records, nor one with a filesystem', async () => {
    const n = node([facts('nvme1n1'), facts('nvme2n1', { signatures: [{ type: 'ext4', offset: 1080 }] })]);
    const pv = {
      metadata: { name: 'p', annotations: { [IDENTITY_ANNOTATION]: 'serial:S-nvme1n1' } },
      spec: {},
    } as PersistentVolume;
    const result = await n.rules(config({})).pass([pv]);
    assert.deepEqual(kinds(result?.verdicts), ['nvme1n1:recorded-on-pv', 'nvme2n1:signature']);
    assert.deepEqual(await n.volumes.listDirectory('/mnt/fast'), []);
    assert.equal(n.events.length, 2);
  });
});
