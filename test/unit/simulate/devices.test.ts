// Disks by rule in simulate: the `devices:` vocabulary of node facts and scenarios (defaults, the
// in-memory node it builds, errors with positions), the plan's devices section (golden, schema,
// what a reload changes, the live wiring that never writes), and the device steps of scenarios.
import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { before, describe, it } from 'node:test';
import { Ajv } from 'ajv';
import type { ValidateFunction } from 'ajv';
import { nodeIdentity } from '../../../src/core/agent/generation.js';
import { ManualClock } from '../../../src/core/clock.js';
import { loadConfig } from '../../../src/core/config/source/load.js';
import { ReadOnlyCluster } from '../../../src/core/kube/read-only-cluster.js';
import { MemoryBlockDevices, blankDeviceFacts } from '../../../src/core/node/memory-block-devices.js';
import { MemoryVolumes } from '../../../src/core/node/memory-volumes.js';
import { buildClusterFixture } from '../../../src/core/simulate/cluster-fixture.js';
import { PlannedLinks } from '../../../src/core/simulate/device-plan.js';
import { SimulatedDevices } from '../../../src/core/simulate/devices.js';
import type { DeviceSpec } from '../../../src/core/simulate/devices.js';
import { InvalidInputError } from '../../../src/core/simulate/input.js';
import { nodeFactsNode, parseNodeFacts } from '../../../src/core/simulate/node-facts.js';
import { planPass, simulatePlan } from '../../../src/core/simulate/plan.js';
import type { SimulationPlan } from '../../../src/core/simulate/plan.js';
import { runScenario } from '../../../src/core/simulate/run.js';
import { parseScenario } from '../../../src/core/simulate/scenario.js';
import { renderPlanText, renderScenarioText, toPlanJson, toScenarioJson } from '../../../src/render/simulate.js';
import { REPO_ROOT } from '../../support/cli.js';

const DEVICES = 'test/fixtures/simulate/devices';

/** A blank whole NVMe disk as the fixture reader gives it. */
function blankSpec(name: string, sizeBytes = 1024 ** 4): DeviceSpec {
  return {
    name,
    sizeBytes,
    readOnly: false,
    mountPoints: [],
    swap: false,
    holders: [],
    signatures: [],
    type: 'disk',
    model: '',
    vendor: '',
    serial: `SIM-${name}`,
    transport: 'nvme',
    rotational: false,
    removable: false,
    partitions: [],
  };
}
const NOW = Date.UTC(2030, 0, 1, 12, 0, 0);
const UPDATE = process.env['UPDATE_GOLDEN'] === '1';
const INSTANCE = 'model: Amazon EC2 NVMe Instance Storage';

async function golden(name: string, actual: string): Promise<void> {
  const path = join(REPO_ROOT, DEVICES, name);
  if (UPDATE) await writeFile(path, actual);
  const expected = await readFile(path, 'utf8').catch(() => '');
  assert.equal(actual, expected, `${name} differs from the golden file (UPDATE_GOLDEN=1 rewrites it)`);
}

function plan(from?: string): Promise<SimulationPlan> {
  return simulatePlan({
    config: `${DEVICES}/config.yaml`,
    ...(from !== undefined ? { from } : {}),
    nodeFacts: { kind: 'fixture', path: `${DEVICES}/node.yaml` },
    cluster: { kind: 'fixture', path: `${DEVICES}/cluster.yaml` },
    namespace: 'default',
    jobImage: 'img',
    clock: new ManualClock(NOW),
  });
}

/** Every problem of a fixture or scenario as `line path: message`. */
function problems(fn: () => unknown): string[] {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof InvalidInputError, String(err));
    return err.issues.map((i) => `${String(i.position?.line ?? '?')} ${i.path}: ${i.message}`);
  }
  assert.fail('expected the input to be rejected');
}

let validate: ValidateFunction;
before(async () => {
  process.chdir(REPO_ROOT);
  const schema: unknown = JSON.parse(await readFile(join(REPO_ROOT, 'docs/schemas/simulate.v1.schema.json'), 'utf8'));
  validate = new Ajv({ allErrors: true, strict: false }).compile(schema as object);
});

describe('simulate: block devices in node facts', () => {
  it('defaults to a blank whole NVMe disk; partitions take their disk’s facts and by-id names', async () => {
    const facts = parseNodeFacts(
      'n.yaml',
      [
        'devices:',
        `  - { name: nvme1n1, size: 1769Gi, ${INSTANCE}, serial: AWS1 }`,
        '  - name: nvme0n1',
        '    size: 100Gi',
        '    signatures: [gpt, gpt-backup]',
        '    partitions:',
        '      - { name: nvme0n1p1, size: 99Gi, mountPoints: [/], signatures: [ext4] }',
        '  - { name: sdb, size: 8Ti, transport: sata, rotational: true, model: Bulk HDD, serial: Z1, wwid: naa.5000c500a1b2c3d4 }',
        '',
      ].join('\n'),
    );
    const { devices, volumes } = nodeFactsNode(facts);
    const nvme1 = devices.inventory.get('nvme1n1');
    assert.deepEqual(nvme1, {
      ...blankDeviceFacts('nvme1n1', nvme1?.majorMinor ?? '', {
        sizeBytes: 1769 * 1024 ** 3,
        model: 'Amazon EC2 NVMe Instance Storage',
        serial: 'AWS1',
        transport: 'nvme',
        byIdNames: ['nvme-Amazon_EC2_NVMe_Instance_Storage_AWS1'],
      }),
    });
    const root = devices.inventory.get('nvme0n1');
    assert.ok(root);
    assert.equal(root.serial, 'SIM-nvme0n1', 'a serial by default: every device has an identity');
    assert.deepEqual(root.partitions, ['nvme0n1p1']);
    assert.deepEqual(root.signatures, [
      { type: 'gpt', offset: 512 },
      { type: 'gpt-backup', offset: 100 * 1024 ** 3 - 512 },
    ]);
    const p1 = devices.inventory.get('nvme0n1p1');
    assert.ok(p1);
    assert.equal(p1.type, 'part');
    assert.equal(p1.parent, 'nvme0n1');
    assert.deepEqual(p1.byIdNames, ['nvme-SIM-nvme0n1-part1']);
    assert.deepEqual(p1.mountPoints, ['/']);
    assert.deepEqual(p1.signatures, [{ type: 'ext4', offset: 1080 }]);
    assert.deepEqual(devices.inventory.get('sdb')?.byIdNames, ['ata-Bulk_HDD_Z1']);
    assert.equal(devices.disks, 3);
    assert.deepEqual(await volumes.entryInfo('/dev/disk/by-id/nvme-Amazon_EC2_NVMe_Instance_Storage_AWS1'), {
      kind: 'block-device',
      isSymlink: true,
      realPath: '/dev/nvme1n1',
    });
    const identity = await volumes.volumeIdentity('/dev/nvme1n1');
    assert.ok(identity);
    assert.equal(identity.id, 'serial:AWS1');
    assert.equal(identity.byId, 'nvme-Amazon_EC2_NVMe_Instance_Storage_AWS1');
    assert.equal((await volumes.volumeIdentity('/dev/nvme0n1p1'))?.id, 'serial:SIM-nvme0n1-part1');
    assert.equal((await volumes.volumeIdentity('/dev/sdb'))?.id, 'wwid:naa.5000c500a1b2c3d4');
    assert.equal(await volumes.blockDeviceCapacity('/dev/nvme0n1p1'), 99 * 1024 ** 3);
  });

  it('a fixture of devices alone is a node; an entry of paths may link to a device', async () => {
    const facts = parseNodeFacts(
      'n.yaml',
      'paths:\n  /mnt/nvme:\n    - { name: d1, type: symlink, target: /dev/disk/by-id/nvme-X_S1 }\ndevices:\n  - { name: nvme1n1, size: 1Ti, model: X, serial: S1 }\n',
    );
    const { volumes } = nodeFactsNode(facts);
    assert.equal((await volumes.entryInfo('/mnt/nvme/d1')).realPath, '/dev/nvme1n1');
    assert.equal(parseNodeFacts('n.yaml', 'devices:\n  - { name: sda, size: 1Ti }\n').devices.length, 1);
  });

  it('bad devices are reported with line, key path and a suggestion, all at once', () => {
    const found = problems(() =>
      parseNodeFacts(
        'n.yaml',
        [
          'paths: {}',
          'devices:',
          '  - { name: nvme1n1, size: 1Ti, transport: nvm, modle: X }',
          '  - { name: nvme2n1 }',
          '  - { name: a/b, size: 1Ti, signatures: [ext5], mountPoints: [var] }',
          '  - { name: nvme3n1, size: 1Ti, partitions: [{ name: nvme1n1, size: 1Gi, type: part }] }',
          '  - { name: nvme4n1, size: 1Ti, type: part, serial: "" }',
          '',
        ].join('\n'),
      ),
    );
    const expected = [
      /^3 devices\[0\]\.transport: "nvm" is not one of .*; did you mean "nvme"\?$/u,
      /^3 devices\[0\]\.modle: unknown key "modle"; did you mean "model"\?/u,
      /^4 devices\[1\]\.size: is required: the size of the device/u,
      /^5 devices\[2\]\.name: "a\/b" is not a kernel device name/u,
      /^5 devices\[2\]\.signatures\[0\]: "ext5" is not one of .*; did you mean "ext4"\?$/u,
      /^5 devices\[2\]\.mountPoints\[0\]: must be an absolute path$/u,
      /^6 devices\[3\]\.partitions\[0\]\.type: unknown key "type"/u,
      /^7 devices\[4\]\.type: a partition is listed under its disk's partitions$/u,
      /^7 devices\[4\]\.serial: must not be empty/u,
    ];
    for (const re of expected)
      assert.ok(
        found.some((l) => re.test(l)),
        `${re.source} in\n${found.join('\n')}`,
      );
    const duplicate = problems(() =>
      parseNodeFacts(
        'n.yaml',
        'devices:\n  - { name: sda, size: 1Ti, partitions: [{ name: sda1, size: 1Gi }] }\n  - { name: sda1, size: 1Ti }\n',
      ),
    );
    assert.deepEqual(duplicate, ['3 devices[1].name: duplicate device "sda1"']);
  });

  it('a device that clashes with an entry of paths is reported as the fixture’s error', () => {
    const facts = parseNodeFacts(
      'n.yaml',
      'paths:\n  /dev:\n    - { name: nvme1n1, type: file }\ndevices:\n  - { name: nvme1n1, size: 1Ti }\n',
    );
    const found = problems(() => nodeFactsNode(facts));
    assert.match(found.join('\n'), /nvme1n1: .*EEXIST: file already exists/u);
  });
});

describe('simulate: the plan runs the device rules before discovery', () => {
  it('links, plans and skips devices, and discovery publishes the links (golden, schema)', async () => {
    const p = await plan();
    await golden('plan.txt', renderPlanText(p, { color: false }));
    const json = toPlanJson(p);
    await golden('plan.json', `${JSON.stringify(json, null, 2)}\n`);
    assert.ok(validate(json), JSON.stringify(validate.errors));
    assert.deepEqual(
      p.plan.devices?.devices.map((d) => [d.device, d.className, d.state, d.pv ?? '-']),
      [
        ['nvme1n1', 'local-nvme', 'link', 'local-pv-5c8bee9d'],
        ['nvme2n1', 'local-nvme', 'link', 'local-pv-87094e48'],
        ['nvme3n1', 'local-nvme', 'signature', '-'],
        ['nvme4n1', 'local-nvme', 'linked', '-'],
        ['sdb', 'bulk', 'planned', '-'],
      ],
    );
    assert.deepEqual(
      p.plan.create.map((c) => c.pv),
      ['local-pv-5c8bee9d', 'local-pv-87094e48'],
    );
    assert.deepEqual(
      p.plan.events.map((e) => e.reason),
      ['DeviceClaimed', 'DeviceClaimed', 'DeviceSkipped', 'DeviceClaimPlanned'],
    );
  });

  it('with --from: the rule switched to apply is claims-devices, and the planned devices become links', async () => {
    const p = await plan(`${DEVICES}/from.yaml`);
    await golden('reload.txt', renderPlanText(p, { color: false }));
    assert.ok(validate(toPlanJson(p)), JSON.stringify(validate.errors));
    const r = p.reload;
    assert.ok(r);
    assert.deepEqual(
      r.changes.map((c) => [c.path, c.effect.impact]),
      [['storageClassMap.local-nvme.deviceRules[0]', 'claims-devices']],
    );
    // Each plan had a node of its own: the `from` plan did not see the other's links.
    assert.deepEqual(
      r.before.devices?.devices.map((d) => [d.device, d.state]),
      [
        ['nvme1n1', 'planned'],
        ['nvme2n1', 'planned'],
        ['nvme3n1', 'signature'],
        ['nvme4n1', 'linked'],
        ['sdb', 'planned'],
      ],
    );
    assert.deepEqual(
      r.delta.devices?.map((d) => [d.device, d.before?.state, d.after?.state]),
      [
        ['nvme1n1', 'planned', 'link'],
        ['nvme2n1', 'planned', 'link'],
      ],
    );
    assert.deepEqual(toPlanJson(p).reload?.delta.devices, [
      { device: 'nvme1n1', before: 'planned (local-nvme)', after: 'link (local-nvme)' },
      { device: 'nvme2n1', before: 'planned (local-nvme)', after: 'link (local-nvme)' },
    ]);
    assert.deepEqual(
      r.delta.create.added.map((c) => c.pv),
      ['local-pv-5c8bee9d', 'local-pv-87094e48'],
    );
  });

  it('a carving rule is planned: the carve is recorded, nothing is written, the next pass would link', async () => {
    const loaded = await loadConfig(join(REPO_ROOT, DEVICES, 'config.yaml'));
    const nvme = loaded.config.storageClassMap['local-nvme'];
    const rule = nvme?.deviceRules?.[0];
    assert.ok(nvme && rule);
    const config = {
      ...loaded.config,
      storageClassMap: { 'local-nvme': { ...nvme, deviceRules: [{ ...rule, partitions: 4 }] } },
    };
    const { devices, volumes } = nodeFactsNode(
      parseNodeFacts('n.yaml', `devices:\n  - { name: nvme1n1, size: 1Ti, ${INSTANCE}, serial: AWS1 }\n`),
    );
    const fixture = await buildClusterFixture(
      'c.yaml',
      await readFile(join(REPO_ROOT, DEVICES, 'cluster.yaml'), 'utf8'),
    );
    const p = await planPass(
      { ...loaded, config },
      {
        cluster: new ReadOnlyCluster(fixture.cluster),
        uids: fixture.uids,
        volumes,
        devices: { inventory: devices.inventory, links: new PlannedLinks(volumes) },
        node: nodeIdentity(await fixture.cluster.nodes.get('node-a')),
        namespace: 'default',
        jobImage: 'img',
        clock: new ManualClock(NOW),
      },
    );
    assert.deepEqual(
      p.devices?.devices.map((d) => [d.device, d.state, d.partitions]),
      [['nvme1n1', 'carve', 4]],
    );
    assert.deepEqual(devices.inventory.get('nvme1n1')?.partitions, [], 'nothing was carved');
    assert.match(
      renderPlanText({ ...(await plan()), plan: p }, { color: false }),
      /carves it into 4 partitions; the next pass links them$/mu,
    );
  });

  it('a config without rules has no devices section (and the node is not read for devices)', async () => {
    const p = await simulatePlan({
      config: 'test/fixtures/simulate/basic/config.yaml',
      nodeFacts: { kind: 'fixture', path: `${DEVICES}/node.yaml` },
      cluster: { kind: 'fixture', path: `${DEVICES}/cluster.yaml` },
      namespace: 'default',
      jobImage: 'img',
      clock: new ManualClock(NOW),
    });
    assert.equal(p.plan.devices, undefined);
    assert.equal(toPlanJson(p).devices, undefined);
    assert.doesNotMatch(renderPlanText(p, { color: false }), /Devices/u);
  });

  it('on a live node: links are recorded over the node, discovery sees them, nothing is written', async () => {
    const volumes = new MemoryVolumes();
    volumes.addDirectory('/mnt/disks/nvme');
    volumes.addBlockDevice('/dev/nvme1n1', 1024 ** 4, { device: '259:1', serial: 'AWS1' });
    volumes.addSymlink('/dev/disk/by-id/nvme-Amazon_EC2_NVMe_Instance_Storage_AWS1', '../../nvme1n1');
    const inventory = new MemoryBlockDevices([
      blankDeviceFacts('nvme1n1', '259:1', {
        sizeBytes: 1024 ** 4,
        transport: 'nvme',
        serial: 'AWS1',
        byIdNames: ['nvme-Amazon_EC2_NVMe_Instance_Storage_AWS1'],
      }),
    ]);
    const overlay = new PlannedLinks(volumes);
    const fixture = await buildClusterFixture(
      'c.yaml',
      await readFile(join(REPO_ROOT, DEVICES, 'cluster.yaml'), 'utf8'),
    );
    const loaded = await loadConfig(join(REPO_ROOT, DEVICES, 'config.yaml'));
    const p = await planPass(loaded, {
      cluster: new ReadOnlyCluster(fixture.cluster),
      uids: fixture.uids,
      volumes: overlay,
      devices: { inventory, links: overlay },
      node: nodeIdentity(await fixture.cluster.nodes.get('node-a')),
      namespace: 'default',
      jobImage: 'img',
      clock: new ManualClock(NOW),
    });
    assert.deepEqual(
      p.devices?.devices.map((d) => [d.device, d.state, d.pv]),
      [['nvme1n1', 'link', 'local-pv-5c8bee9d']],
    );
    assert.deepEqual(await volumes.listDirectory('/mnt/disks/nvme'), [], 'the node was not written');
    assert.deepEqual(
      [...overlay.recorded],
      [
        [
          '/mnt/disks/nvme/nvme-Amazon_EC2_NVMe_Instance_Storage_AWS1',
          '/dev/disk/by-id/nvme-Amazon_EC2_NVMe_Instance_Storage_AWS1',
        ],
      ],
    );
  });

  it('the overlay refuses an existing entry (EEXIST) and answers reads through the link', async () => {
    const volumes = new MemoryVolumes();
    volumes.addDirectory('/mnt/d').addFile('/mnt/d/taken').addBlockDevice('/dev/sdb', 4096, { serial: 'S' });
    const overlay = new PlannedLinks(volumes);
    await assert.rejects(overlay.createLink('/mnt/d/taken', '/dev/sdb'), { code: 'EEXIST' });
    await overlay.createLink('/mnt/d/sdb', '/dev/sdb');
    await assert.rejects(overlay.createLink('/mnt/d/sdb', '/dev/sdb'), /EEXIST: file already exists/u);
    assert.deepEqual([...(await overlay.listDirectory('/mnt/d'))].sort(), ['sdb', 'taken']);
    assert.deepEqual(await overlay.entryInfo('/mnt/d/sdb'), {
      kind: 'block-device',
      isSymlink: true,
      realPath: '/dev/sdb',
    });
    assert.equal(await overlay.blockDeviceCapacity('/mnt/d/sdb'), 4096);
    assert.equal((await overlay.volumeIdentity('/mnt/d/sdb'))?.id, 'serial:S');
    assert.deepEqual(await volumes.listDirectory('/mnt/d'), ['taken']);
  });
});

const NVME = [
  'config:',
  '  storageClassMap:',
  '    nvme:',
  '      hostDir: /mnt/nvme',
  '      mountDir: /mnt/nvme',
  '      volumeMode: Block',
  '      deviceRules: [{ mode: apply, transports: [nvme], settle: 0s }]',
  '',
].join('\n');

describe('simulate: scenarios with block devices', () => {
  it('devices arrive and go: linked and published; a removed disk leaves its link and PV', async () => {
    const s = parseScenario(
      's.yaml',
      [
        'name: t',
        NVME,
        'devices: [{ name: nvme1n1, size: 1Ti, serial: A1 }]',
        'steps:',
        // The pass that sees the link made comes --min-pass-interval after the first one.
        '  - time passes: 1s',
        '    expect: { devices: { nvme1n1: linked }, pvs: 1 }',
        '  - device added: { name: nvme2n1, size: 2Ti, serial: A2, signatures: [xfs] }',
        '  - time passes: 10s',
        '    expect: { devices: { nvme2n1: signature }, pvs: 1, events: { DeviceSkipped: 1 } }',
        '  - device removed: [nvme1n1, nvme2n1]',
        '  - time passes: 10s',
        '    expect: { devices: { nvme1n1: none, nvme2n1: none }, pvs: { Available: 1 }, pv: { volume: nvme-A1, exists: true } }',
        '',
      ].join('\n'),
      { baseDir: '/' },
    );
    const r = await runScenario(s);
    const text = renderScenarioText(r, { color: false });
    assert.ok(r.passed, text);
    assert.match(text, /^\+0s {5}start: node node-a: 0 disks, 1 block device, 1 class configured$/mu);
    assert.match(
      text,
      /device \/dev\/nvme1n1 linked as nvme-A1 → \/dev\/disk\/by-id\/nvme-A1 for storage class nvme$/mu,
    );
    assert.match(
      text,
      /2\. device added: a block device arrives: nvme2n1 \(2Ti, xfs signature\) as \/dev\/disk\/by-id\/nvme-A2$/mu,
    );
    assert.match(text, /4\. device removed: \/dev\/nvme1n1, \/dev\/nvme2n1 are gone \(unplugged\)/mu);
    const json = toScenarioJson(r);
    assert.ok(validate(json), JSON.stringify(validate.errors));
    const device = json.steps[0]?.actions.find((a) => a.type === 'device');
    assert.equal(device?.device, 'nvme1n1');
  });

  it('a rule with partitions carves a blank disk in memory; the next pass links each partition', async () => {
    const carving = NVME.replace('settle: 0s', 'settle: 0s, partitions: 2');
    const r = await runScenario(
      parseScenario(
        's.yaml',
        [
          'name: t',
          carving,
          'devices: [{ name: nvme1n1, size: 1Ti, model: M, serial: S1 }]',
          'steps:',
          '  - time passes: 10s',
          '    expect: { devices: { nvme1n1: carved, nvme1n1p1: linked, nvme1n1p2: linked }, pvs: 2 }',
          '',
        ].join('\n'),
        { baseDir: '/' },
      ),
    );
    const text = renderScenarioText(r, { color: false });
    assert.ok(r.passed, text);
    assert.match(text, /device \/dev\/nvme1n1 is carved into 2 partitions for storage class nvme$/mu);
    assert.match(text, /created PV local-pv-[0-9a-f]{8} for nvme\/nvme-M_S1-part2 \(511Gi, Block\)$/mu);
  });

  it('the in-memory carver refuses what the agent’s carver refuses', async () => {
    const devices = new SimulatedDevices(new MemoryVolumes());
    devices.add({ ...blankSpec('sdb'), signatures: ['xfs'] });
    devices.add(blankSpec('sdc', 1024 * 1024));
    assert.deepEqual(await devices.carve('/dev/sdb', 2), { ok: false, reason: '/dev/sdb is not blank: left as it is' });
    assert.equal((await devices.carve('/dev/sdc', 2)).ok, false, 'too small for a GPT and two MiB partitions');
    assert.deepEqual(await devices.carve('/dev/sdz', 2), {
      ok: false,
      reason: '/dev/sdz is not a whole disk of this node',
    });
  });

  it('a device step that cannot be done fails the scenario, naming the step', async () => {
    const s = parseScenario(
      's.yaml',
      `name: t\n${NVME}devices: [{ name: nvme1n1, size: 1Ti }]\nsteps:\n  - device removed: nvme9n1\n`,
      { baseDir: '/' },
    );
    await assert.rejects(runScenario(s), (err: unknown) => {
      assert.ok(err instanceof InvalidInputError);
      const [issue] = err.issues;
      assert.ok(issue);
      assert.equal(issue.path, 'steps[1].device removed');
      assert.equal(issue.message, 'no block device nvme9n1');
      return true;
    });
    const again = parseScenario(
      's.yaml',
      `name: t\n${NVME}devices: [{ name: nvme1n1, size: 1Ti }]\nsteps:\n  - device added: { name: nvme1n1, size: 1Ti }\n`,
      { baseDir: '/' },
    );
    await assert.rejects(runScenario(again), (err: unknown) => {
      assert.ok(err instanceof InvalidInputError);
      assert.equal(err.issues[0]?.message, 'cannot add nvme1n1: block device nvme1n1 already exists');
      return true;
    });
  });

  it('bad device steps and expectations are reported with positions', () => {
    const found = problems(() =>
      parseScenario(
        's.yaml',
        [
          'name: t',
          NVME,
          'devices: [{ name: nvme1n1, size: big }]',
          'steps:',
          '  - device added: { name: nvme2n1, size: 1Ti, rotationl: true }',
          '  - device removed: []',
          '  - check:',
          '    expect: { devices: { nvme1n1: linkd } }',
          '',
        ].join('\n'),
        { baseDir: '/' },
      ),
    );
    const expected = [
      /^10 devices\[0\]\.size: expected a capacity/u,
      /^12 steps\[1\]\.device added\.rotationl: unknown key "rotationl"; did you mean "rotational"\?/u,
      /^13 steps\[2\]\.device removed: name at least one device$/u,
      /^15 steps\[3\]\.expect\.devices\.nvme1n1: "linkd" is not one of .*; did you mean "link"\?$/u,
    ];
    for (const re of expected)
      assert.ok(
        found.some((l) => re.test(l)),
        `${re.source} in\n${found.join('\n')}`,
      );
  });
});
