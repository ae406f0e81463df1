// Disks by rule on real loop devices, with `provisioner run` as a process against the real
// apiserver: blank devices a rule selects are linked and published in the class; a device with
// each kind of signature (ext4, xfs, swap, a GPT, a backup GPT only, an MBR, an LVM PV, data), a
// mounted one, a read-only one, a too-small one and one a PV records stay byte-for-byte unchanged
// and are reported with their reason; plan mode writes nothing; a restart changes nothing; a
// reload removing the rule leaves the links and PVs; a carving rule turns a blank disk into N PVs.
//
// The rule selects loop devices of one exact size chosen at random for this run, so it never
// takes a loop device of another test; other loop devices of the machine are only reported.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, readlinkSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';

import { isNotFound } from '../../../src/core/kube/cluster.js';
import { loadKubeconfig } from '../../../src/core/kube/kubeconfig.js';
import type { PersistentVolume } from '../../../src/core/kube/objects.js';
import { parseQuantity } from '../../../src/core/kube/quantity.js';
import { RestCluster } from '../../../src/core/kube/rest-cluster.js';
import { LinuxVolumes } from '../../../src/core/node/linux-volumes.js';
import { IDENTITY_ANNOTATION } from '../../../src/core/pv/identity.js';
import { NODE_LABEL, nodeLabelValue } from '../../../src/core/pv/naming.js';
import { startAgentProcess, type AgentProcess } from '../../support/agent-process.js';
import { eventually } from '../../support/eventually.js';
import {
  attachLoopDevice,
  Cleanup,
  detachLoopDevice,
  dropLoopPartitions,
  makeTempDir,
  readAt,
  run,
  skipUnlessRoot,
  unmount,
  writeAt,
  type LoopDevice,
} from '../../support/real-node.js';
import { requireTestControlPlane } from '../../support/test-cluster.js';

const MiB = 2 ** 20;
const suffix = Math.random().toString(36).slice(2, 8);
const NODE = `rules-${suffix}`;
const BLOCK = `rules-${suffix}-block`;
/** 8 MiB and a random number of 4 KiB pages: no other test's loop device has this size. */
const SIZE = 8 * MiB + 4096 * (1 + Math.floor(Math.random() * 250));
/** The disk the carving rule takes: 64 MiB and a random number of pages (3 partitions of 21 MiB). */
const CARVE_SIZE = 64 * MiB + 4096 * (1 + Math.floor(Math.random() * 250));

const digest = (loop: LoopDevice, bytes = SIZE): string =>
  createHash('sha256')
    .update(readAt(loop.path, 0, bytes))
    .digest('hex');

describe('disks by rule on real loop devices, the agent as a process', { skip: skipUnlessRoot() }, () => {
  const cleanup = new Cleanup();
  let cluster: RestCluster;
  let root = '';
  let configDir = '';
  let kubeconfig = '';
  let agent: AgentProcess | undefined;
  const blockDir = (): string => join(root, 'blk');
  const loops = new Map<string, LoopDevice>();
  const before_ = new Map<string, string>();

  function writeConfig(rules: string): void {
    writeFileSync(
      join(configDir, 'storageClassMap'),
      `${BLOCK}:\n  hostDir: ${blockDir()}\n  mountDir: ${blockDir()}\n  volumeMode: Block\n${rules}`,
    );
  }
  const rule = (mode: 'apply' | 'plan'): string =>
    `  deviceRules:\n    - mode: ${mode}\n      types: [loop]\n      minSize: "${String(SIZE)}"\n      maxSize: "${String(SIZE)}"\n      settle: 1s\n`;

  function device(name: string, size = SIZE, readOnly = false): LoopDevice {
    const file = join(root, `${name}.img`);
    const loop = readOnly ? attachReadOnly(file, size) : attachLoopDevice(cleanup, file, size);
    loops.set(name, loop);
    return loop;
  }

  function attachReadOnly(file: string, size: number): LoopDevice {
    writeFileSync(file, '', { flag: 'wx' });
    run('truncate', ['-s', String(size), file]);
    const path = run('losetup', ['--find', '--show', '--read-only', file]).trim();
    const name = path.replace(/^\/dev\//u, '');
    dropLoopPartitions(name);
    const [major = 0, minor = 0] = readFileSync(`/sys/block/${name}/dev`, 'utf8').trim().split(':').map(Number);
    const loop: LoopDevice = { path, name, major, minor, backingFile: file, sizeBytes: size };
    cleanup.defer(`detach ${path} (${file})`, () => {
      detachLoopDevice(loop);
    });
    return loop;
  }

  async function pvs(): Promise<PersistentVolume[]> {
    const list = await cluster.persistentVolumes.list({ labelSelector: `${NODE_LABEL}=${nodeLabelValue(NODE)}` });
    return list.items.filter((pv) => pv.spec.storageClassName === BLOCK);
  }

  async function nodeEvents(): Promise<{ reason: string; message: string }[]> {
    const events = await cluster.events.list({ namespace: 'default' });
    return events.items
      .filter((e) => e.involvedObject.name === NODE && e.involvedObject.kind === 'Node')
      .map((e) => ({ reason: e.reason, message: e.message }));
  }

  const links = (): Record<string, string> =>
    Object.fromEntries(readdirSync(blockDir()).map((entry) => [entry, readlinkSync(join(blockDir(), entry))]));

  before(async () => {
    const plane = requireTestControlPlane();
    kubeconfig = plane.kubeconfigPath;
    cluster = new RestCluster({ connection: await loadKubeconfig(kubeconfig) });
    await cluster.nodes.create({ metadata: { name: NODE, labels: { 'kubernetes.io/hostname': NODE } } });
    await cluster.storageClasses.create({
      metadata: { name: BLOCK },
      provisioner: 'kubernetes.io/no-provisioner',
      volumeBindingMode: 'WaitForFirstConsumer',
    });
    root = makeTempDir(cleanup, 'lvp-rules-');
    configDir = join(root, 'config');
    mkdirSync(configDir);
    mkdirSync(blockDir());
    // two blank devices, and one of each thing that must never be taken
    device('blank1');
    device('blank2');
    run('mkfs.ext4', ['-q', '-F', device('ext4').path]);
    run('mkswap', ['-q', device('swap').path]);
    writeAt(device('gpt').path, 512, Buffer.from('EFI PART'));
    writeAt(device('gpt-backup').path, SIZE - 512, Buffer.from('EFI PART'));
    writeAt(device('mbr').path, 510, Buffer.from([0x55, 0xaa]));
    writeAt(device('lvm').path, 512, Buffer.from('LABELONE\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0LVM2 001'));
    writeAt(device('xfs').path, 0, Buffer.from('XFSB'));
    writeAt(device('data').path, SIZE - 4096, Buffer.from('a tenant wrote here'));
    const mounted = device('mounted');
    // read-only, and initialised in full: the kernel itself writes nothing to it while mounted
    run('mkfs.ext4', ['-q', '-F', '-E', 'lazy_itable_init=0,lazy_journal_init=0', mounted.path]);
    mkdirSync(join(root, 'mnt'));
    run('mount', ['-o', 'ro', mounted.path, join(root, 'mnt')]);
    cleanup.defer('unmount the mounted device', () => {
      unmount(join(root, 'mnt'));
    });
    device('read-only', SIZE, true);
    device('small', SIZE - MiB);
    // a blank device whose disk a PV of this node records (it was published once, elsewhere)
    const recorded = device('recorded');
    const identity = await new LinuxVolumes().volumeIdentity(recorded.path);
    assert.ok(identity !== undefined, 'a loop device has an identity');
    await cluster.persistentVolumes.create({
      metadata: {
        name: `rules-${suffix}-recorded`,
        labels: { [NODE_LABEL]: nodeLabelValue(NODE) },
        annotations: { [IDENTITY_ANNOTATION]: identity.id },
      },
      spec: {
        capacity: { storage: '8Mi' },
        accessModes: ['ReadWriteOnce'],
        storageClassName: `rules-${suffix}-other`,
        local: { path: '/elsewhere' },
        nodeAffinity: {
          required: {
            nodeSelectorTerms: [
              { matchExpressions: [{ key: 'kubernetes.io/hostname', operator: 'In', values: [NODE] }] },
            ],
          },
        },
      },
    });
    for (const [name, loop] of loops) before_.set(name, digest(loop, loop.sizeBytes));
    writeConfig(rule('apply'));
  });

  after(async () => {
    try {
      await agent?.stop();
      const all = await cluster.persistentVolumes.list({ labelSelector: `${NODE_LABEL}=${nodeLabelValue(NODE)}` });
      for (const pv of all.items) {
        await cluster.persistentVolumes
          .patch(pv.metadata.name, { metadata: { finalizers: null } })
          .catch(() => undefined);
        await cluster.persistentVolumes.delete(pv.metadata.name).catch((err: unknown) => {
          if (!isNotFound(err)) throw err;
        });
      }
      await cluster.nodes.delete(NODE).catch(() => undefined);
      await cluster.storageClasses.delete(BLOCK).catch(() => undefined);
    } finally {
      cluster.close();
      cleanup.run();
    }
  });

  const NEVER: Record<string, string> = {
    ext4: 'signature',
    swap: 'signature',
    gpt: 'partition-table',
    'gpt-backup': 'partition-table',
    mbr: 'partition-table',
    lvm: 'signature',
    xfs: 'signature',
    data: 'signature',
    mounted: 'mounted',
    'read-only': 'read-only',
    small: 'too-small',
    recorded: 'recorded-on-pv',
  };

  it('links and publishes the blank devices; every other device is reported with its reason and left byte-for-byte as it was', async () => {
    agent = await startAgentProcess({ configDir, node: NODE, kubeconfig });
    const blanks = ['blank1', 'blank2'].map((n) => loops.get(n) as LoopDevice);
    const published = await eventually(
      async () => {
        const found = await pvs();
        return found.length === 2 ? found : undefined;
      },
      'the two blank devices published',
      60_000,
      200,
    ).catch((error: unknown) => {
      throw new Error(`${String(error)}\nagent log:\n${agent?.stderr().slice(-6000) ?? ''}`);
    });
    assert.deepEqual(
      published.map((pv) => pv.spec.local?.path).sort(),
      blanks.map((l) => join(blockDir(), l.name)).sort(),
    );
    for (const pv of published) {
      assert.equal(pv.spec.volumeMode, 'Block');
      assert.equal(
        parseQuantity(pv.spec.capacity?.['storage'] ?? ''),
        SIZE,
        'the device size (upstream rounds down to KiB here)',
      );
    }
    assert.deepEqual(links(), Object.fromEntries(blanks.map((l) => [l.name, l.path])));
    const events = await eventually(
      async () => {
        const all = await nodeEvents();
        return Object.keys(NEVER).every((n) =>
          all.some((e) => e.message.includes(`/dev/${(loops.get(n) as LoopDevice).name} `)),
        )
          ? all
          : undefined;
      },
      'a DeviceSkipped event for every device not taken',
      30_000,
      200,
    );
    for (const [name, reason] of Object.entries(NEVER)) {
      const loop = loops.get(name) as LoopDevice;
      const said = events.find((e) => e.message.includes(`/dev/${loop.name} `));
      assert.equal(said?.reason, 'DeviceSkipped', name);
      assert.match(said.message, new RegExp(`not taken: ${reason}:`, 'u'), name);
      assert.equal(digest(loop, loop.sizeBytes), before_.get(name), `${name} unchanged`);
    }
    assert.equal(events.filter((e) => e.reason === 'DeviceClaimed').length, 2);
  });

  it('a restart changes nothing: the same links, the same PVs, no device claimed again', async () => {
    const uids = (await pvs()).map((pv) => pv.metadata.uid).sort();
    const linked = links();
    await agent?.stop();
    agent = await startAgentProcess({ configDir, node: NODE, kubeconfig });
    // the pass after the restart has run when the gauge shows the devices linked
    await eventually(
      async () => {
        const text = await (await fetch(`http://127.0.0.1:${agent?.port ?? ''}/metrics`)).text();
        return /local_volume_provisioner_rule_devices\{storageclass="[^"]+",state="linked"\} 2/u.test(text)
          ? true
          : undefined;
      },
      'the restarted agent sees both devices linked',
      30_000,
      200,
    );
    assert.deepEqual((await pvs()).map((pv) => pv.metadata.uid).sort(), uids);
    assert.deepEqual(links(), linked);
    assert.equal((await nodeEvents()).filter((e) => e.reason === 'DeviceClaimed').length, 2);
  });

  it('in plan mode a new blank device is reported, not linked; a reload removing the rule leaves links and PVs', async () => {
    writeConfig(rule('plan'));
    const late = device('late');
    const untouched = digest(late);
    await eventually(
      async () =>
        (await nodeEvents()).some((e) => e.reason === 'DeviceClaimPlanned' && e.message.includes(`/dev/${late.name} `))
          ? true
          : undefined,
      'the plan for the new device',
      60_000,
      200,
    );
    assert.equal(links()[late.name], undefined, 'plan mode wrote nothing');
    assert.equal(digest(late), untouched, 'the device unchanged');
    writeConfig('');
    await eventually(
      async () => {
        const text = await (await fetch(`http://127.0.0.1:${agent?.port ?? ''}/metrics`)).text();
        return /local_volume_provisioner_rule_devices\{/u.test(text) ? undefined : true;
      },
      'the reload without rules applied (no device gauge left)',
      30_000,
      200,
    );
    assert.equal((await pvs()).length, 2);
    assert.equal(Object.keys(links()).length, 2);
  });

  it('a rule with partitions: 3 carves a blank disk into 3 equal partitions, links each and publishes 3 PVs', async () => {
    const disk = device('carve', CARVE_SIZE);
    writeConfig(
      `  deviceRules:\n    - mode: apply\n      types: [loop]\n      minSize: "${String(CARVE_SIZE)}"\n` +
        `      maxSize: "${String(CARVE_SIZE)}"\n      settle: 1s\n      partitions: 3\n`,
    );
    const parts = [1, 2, 3].map((n) => `${disk.name}p${String(n)}`);
    const carved = await eventually(
      async () => {
        const found = (await pvs()).filter((pv) => parts.some((p) => pv.spec.local?.path === join(blockDir(), p)));
        return found.length === 3 ? found : undefined;
      },
      'the three partitions published',
      60_000,
      200,
    ).catch((error: unknown) => {
      throw new Error(`${String(error)}\nagent log:\n${agent?.stderr().slice(-6000) ?? ''}`);
    });
    const sizes = carved.map((pv) => parseQuantity(pv.spec.capacity?.['storage'] ?? ''));
    assert.deepEqual(
      sizes,
      [21 * MiB, 21 * MiB, 21 * MiB],
      'equal whole MiB: 64 MiB and under one more, less the first MiB and the backup table, in 3',
    );
    assert.deepEqual(
      Object.fromEntries(Object.entries(links()).filter(([entry]) => entry.startsWith(disk.name))),
      Object.fromEntries(parts.map((p) => [p, `/dev/${p}`])),
      'each partition linked; the disk itself is not',
    );
    // the table the agent wrote, as util-linux reads it back
    const listed = run('partx', ['--show', '--noheadings', '--output', 'NR,START,SECTORS,NAME', disk.path])
      .trim()
      .split('\n')
      .map((line) => line.trim().split(/\s+/u));
    assert.deepEqual(
      listed.map(([nr, , sectors, name]) => [nr, Number(sectors) * 512, name]),
      [1, 2, 3].map((n) => [String(n), 21 * MiB, 'lvp-carved']),
    );
    const events = await nodeEvents();
    assert.ok(
      events.some((e) => e.reason === 'DeviceClaimed' && e.message.includes(`/dev/${disk.name} `)),
      `a DeviceClaimed event for the carve: ${JSON.stringify(events.filter((e) => e.message.includes(disk.name)))}`,
    );
    assert.equal((await pvs()).length, 5, 'the two earlier PVs stay');
  });
});
