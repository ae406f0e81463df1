// Disks by rule, the pure decision (src/core/disk-rules/decide.ts): which devices a rule selects,
// every safety check with its reason, settle time, maxDevices, carving, and the properties that
// make it safe whatever the node shows: nothing with data, a table, a mount, holders, a system
// filesystem or a PV's identity is ever linked or carved; a rule never takes more than maxDevices;
// the verdicts do not depend on the order the devices are listed in.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';

import { decideDevices, type DeviceRulesView, type DeviceVerdict } from '../../../src/core/disk-rules/decide.js';
import type { DeviceFacts, DeviceRule, Signature } from '../../../src/core/devices/model.js';

const GiB = 2 ** 30;

function device(name: string, over: Partial<DeviceFacts> = {}): DeviceFacts {
  return {
    name,
    devicePath: `/dev/${name}`,
    majorMinor: '259:0',
    type: 'disk',
    sizeBytes: 100 * GiB,
    readOnly: false,
    removable: false,
    rotational: false,
    model: 'Amazon EC2 NVMe Instance Storage',
    vendor: '',
    serial: `AWS${name}`,
    transport: 'nvme',
    byIdNames: [`nvme-Amazon_EC2_NVMe_Instance_Storage_AWS${name}`],
    partitions: [],
    holders: [],
    mountPoints: [],
    swapActive: false,
    signatures: [],
    madeByAgent: false,
    ...over,
  };
}

const RULE: DeviceRule = {
  mode: 'apply',
  byIdNames: ['nvme-Amazon_EC2_NVMe_Instance_Storage_*'],
  types: ['disk'],
  allowRemovable: false,
  settleMs: 10_000,
};

function view(devices: readonly DeviceFacts[], over: Partial<DeviceRulesView> = {}): DeviceRulesView {
  return {
    now: 100_000,
    classes: [{ name: 'fast', namePattern: '*', rules: [RULE] }],
    nodeLabels: {},
    devices,
    sizeSince: new Map(devices.map((d) => [d.name, 0])),
    identities: new Map(),
    recorded: [],
    links: [],
    systemDevices: new Set(),
    ...over,
  };
}

const only = (verdicts: readonly DeviceVerdict[]): DeviceVerdict => {
  assert.equal(verdicts.length, 1, JSON.stringify(verdicts));
  return verdicts[0] as DeviceVerdict;
};

describe('disks by rule: the decision', () => {
  it('links a blank NVMe disk the rule names, by its stable by-id name', () => {
    assert.deepEqual(only(decideDevices(view([device('nvme1n1')]))), {
      kind: 'link',
      device: 'nvme1n1',
      className: 'fast',
      rule: 0,
      apply: true,
      entry: 'nvme-Amazon_EC2_NVMe_Instance_Storage_AWSnvme1n1',
      target: '/dev/disk/by-id/nvme-Amazon_EC2_NVMe_Instance_Storage_AWSnvme1n1',
    });
  });

  it('in plan mode says the same, marked not to apply', () => {
    const planned = only(
      decideDevices(
        view([device('nvme1n1')], {
          classes: [{ name: 'fast', namePattern: '*', rules: [{ ...RULE, mode: 'plan' }] }],
        }),
      ),
    );
    assert.equal(planned.kind === 'link' && planned.apply, false);
  });

  it('ignores devices no rule names (the root disk, a SATA disk), and reports none of them', () => {
    const devices = [device('sda', { transport: 'sata', byIdNames: ['ata-Samsung_SSD'], model: 'Samsung' })];
    assert.deepEqual(decideDevices(view(devices)), []);
  });

  const reasons: [string, Partial<DeviceFacts>, Partial<DeviceRulesView>, string][] = [
    ['read-only', { readOnly: true }, {}, 'read-only'],
    ['removable', { removable: true }, {}, 'removable'],
    ['too-small', { sizeBytes: GiB }, {}, 'too-small'],
    ['mounted', { mountPoints: ['/var/lib/x'] }, {}, 'mounted'],
    ['swap', { swapActive: true }, {}, 'swap'],
    ['holders', { holders: ['dm-0'] }, {}, 'holders'],
    ['a GPT', { signatures: [{ type: 'gpt', offset: 512 }] }, {}, 'partition-table'],
    ['a backup GPT only', { signatures: [{ type: 'gpt-backup', offset: 100 * GiB - 512 }] }, {}, 'partition-table'],
    ['an MBR', { signatures: [{ type: 'dos', offset: 510 }] }, {}, 'partition-table'],
    ['partitions', { partitions: ['nvme1n1p1'] }, {}, 'partition-table'],
    ['ext4', { signatures: [{ type: 'ext4', offset: 1080 }] }, {}, 'signature'],
    ['LVM', { signatures: [{ type: 'LVM2_member', offset: 536 }] }, {}, 'signature'],
    ['data', { signatures: [{ type: 'data', offset: 4096 }] }, {}, 'signature'],
    ['a system disk', {}, { systemDevices: new Set(['nvme1n1']) }, 'system-disk'],
    [
      'a disk recorded on a PV',
      {},
      { identities: new Map([['nvme1n1', 'serial:AWSnvme1n1']]), recorded: ['serial:AWSnvme1n1'] },
      'recorded-on-pv',
    ],
    ['a size not settled', {}, { sizeSince: new Map([['nvme1n1', 95_000]]) }, 'settling'],
  ];
  for (const [what, facts, over, reason] of reasons)
    it(`skips ${what}: ${reason}`, () => {
      const rule = { ...RULE, minBytes: 10 * GiB };
      const verdict = only(
        decideDevices(
          view([device('nvme1n1', facts)], { classes: [{ name: 'fast', namePattern: '*', rules: [rule] }], ...over }),
        ),
      );
      assert.equal(verdict.kind === 'skip' ? verdict.reason : verdict.kind, reason);
    });

  it('counts linked devices toward maxDevices, and takes the rest in name order', () => {
    const devices = ['nvme1n1', 'nvme2n1', 'nvme3n1', 'nvme4n1'].map((n) => device(n));
    const verdicts = decideDevices(
      view(devices, {
        classes: [{ name: 'fast', namePattern: '*', rules: [{ ...RULE, maxDevices: 2 }] }],
        links: [{ className: 'fast', entry: 'x', device: 'nvme3n1' }],
      }),
    );
    assert.deepEqual(
      verdicts.map((v) => `${v.device}:${v.kind === 'skip' ? v.reason : v.kind}`),
      ['nvme1n1:link', 'nvme2n1:max-devices', 'nvme3n1:linked', 'nvme4n1:max-devices'],
    );
  });

  it('carves a blank disk when the rule has partitions, then links the partitions it made', () => {
    const rule = { ...RULE, partitions: 2 };
    const classes = [{ name: 'fast', namePattern: '*', rules: [rule] }];
    assert.deepEqual(only(decideDevices(view([device('nvme1n1')], { classes }))), {
      kind: 'carve',
      device: 'nvme1n1',
      className: 'fast',
      rule: 0,
      apply: true,
      partitions: 2,
    });
    const part = (n: number): DeviceFacts =>
      device(`nvme1n1p${String(n)}`, {
        type: 'part',
        parent: 'nvme1n1',
        madeByAgent: true,
        sizeBytes: 50 * GiB,
        byIdNames: [`nvme-X-part${String(n)}`],
      });
    const carved = device('nvme1n1', {
      partitions: ['nvme1n1p1', 'nvme1n1p2'],
      signatures: [{ type: 'gpt', offset: 512 }],
    });
    const verdicts = decideDevices(view([carved, part(1), part(2)], { classes }));
    assert.deepEqual(
      verdicts.map((v) => `${v.device}:${v.kind}`),
      ['nvme1n1:carved', 'nvme1n1p1:link', 'nvme1n1p2:link'],
    );
  });

  it('does not take a partition someone else made, even on a disk the rule names', () => {
    const foreign = device('nvme1n1p1', { type: 'part', parent: 'nvme1n1' });
    const disk = device('nvme1n1', { partitions: ['nvme1n1p1'] });
    const verdicts = decideDevices(
      view([disk, foreign], { classes: [{ name: 'fast', namePattern: '*', rules: [{ ...RULE, partitions: 2 }] }] }),
    );
    assert.deepEqual(
      verdicts.map((v) => `${v.device}:${v.kind === 'skip' ? v.reason : v.kind}`),
      ['nvme1n1:partition-table'],
    );
  });

  it('skips a device two classes select (ambiguous), and one whose link name the class would not discover', () => {
    const two = [
      { name: 'a', namePattern: '*', rules: [RULE] },
      { name: 'b', namePattern: '*', rules: [RULE] },
    ];
    assert.equal(
      (only(decideDevices(view([device('nvme1n1')], { classes: two }))) as { reason?: string }).reason,
      'ambiguous',
    );
    const narrow = [{ name: 'fast', namePattern: 'ssd-*', rules: [RULE] }];
    assert.equal(
      (only(decideDevices(view([device('nvme1n1')], { classes: narrow }))) as { reason?: string }).reason,
      'name-pattern',
    );
  });

  it('selects by node labels, rotational, transport, model and vendor', () => {
    const rule: DeviceRule = {
      mode: 'apply',
      types: ['disk'],
      allowRemovable: false,
      settleMs: 10_000,
      nodeLabels: { pool: 'nvme' },
      rotational: false,
      transports: ['nvme'],
      models: ['Amazon*'],
    };
    const classes = [{ name: 'fast', namePattern: '*', rules: [rule] }];
    assert.equal(decideDevices(view([device('nvme1n1')], { classes })).length, 0, 'node without the label');
    assert.equal(decideDevices(view([device('nvme1n1')], { classes, nodeLabels: { pool: 'nvme' } })).length, 1);
    assert.equal(
      decideDevices(view([device('sdb', { rotational: true })], { classes, nodeLabels: { pool: 'nvme' } })).length,
      0,
    );
  });
});

const signature: fc.Arbitrary<Signature> = fc.record({
  type: fc.constantFrom('ext4', 'xfs', 'gpt', 'gpt-backup', 'dos', 'swap', 'LVM2_member', 'data', 'unreadable'),
  offset: fc.nat(),
});
const arbitraryDevice = (i: number): fc.Arbitrary<DeviceFacts> =>
  fc
    .record({
      readOnly: fc.boolean(),
      removable: fc.boolean(),
      mounted: fc.boolean(),
      swapActive: fc.boolean(),
      holders: fc.boolean(),
      partitions: fc.boolean(),
      signatures: fc.array(signature, { maxLength: 2 }),
      sizeGiB: fc.integer({ min: 1, max: 200 }),
      type: fc.constantFrom('disk' as const, 'loop' as const),
    })
    .map((r) =>
      device(`nvme${String(i)}n1`, {
        readOnly: r.readOnly,
        removable: r.removable,
        mountPoints: r.mounted ? ['/m'] : [],
        swapActive: r.swapActive,
        holders: r.holders ? ['dm-1'] : [],
        partitions: r.partitions ? [`nvme${String(i)}n1p9`] : [],
        signatures: r.signatures,
        sizeBytes: r.sizeGiB * GiB,
        type: r.type,
      }),
    );
const devices = fc
  .integer({ min: 0, max: 8 })
  .chain((n) => fc.tuple(...Array.from({ length: n }, (_, i) => arbitraryDevice(i))));

describe('disks by rule: properties of the decision', () => {
  it('never links or carves a device with data, a table, a mount, holders, swap, read-only or a recorded identity', () => {
    fc.assert(
      fc.property(
        devices,
        fc.nat({ max: 8 }),
        fc.subarray(['nvme0n1', 'nvme1n1', 'nvme2n1']),
        (list, max, recorded) => {
          const v = view(list, {
            classes: [
              { name: 'fast', namePattern: '*', rules: [{ ...RULE, types: ['disk', 'loop'], maxDevices: max + 1 }] },
            ],
            identities: new Map(list.map((d) => [d.name, `serial:${d.name}`])),
            recorded: recorded.map((n) => `serial:${n}`),
          });
          for (const verdict of decideDevices(v)) {
            if (verdict.kind !== 'link' && verdict.kind !== 'carve') continue;
            const d = list.find((x) => x.name === verdict.device);
            assert.ok(d !== undefined);
            assert.deepEqual(d.signatures, [], 'blank');
            assert.deepEqual([d.partitions, d.mountPoints, d.holders], [[], [], []]);
            assert.equal(d.readOnly || d.removable || d.swapActive || recorded.includes(d.name), false);
          }
        },
      ),
      { numRuns: 500 },
    );
  });

  it('takes at most maxDevices per rule, and the verdicts do not depend on the listing order', () => {
    fc.assert(
      fc.property(devices, fc.integer({ min: 1, max: 4 }), fc.func(fc.integer()), (list, max, key) => {
        const classes = [
          {
            name: 'fast',
            namePattern: '*',
            rules: [{ ...RULE, types: ['disk' as const, 'loop' as const], maxDevices: max }],
          },
        ];
        const verdicts = decideDevices(view(list, { classes }));
        assert.ok(verdicts.filter((v) => v.kind === 'link').length <= max);
        const shuffled = [...list].sort((a, b) => key(a.name) - key(b.name));
        assert.deepEqual(decideDevices(view(shuffled, { classes })), verdicts);
      }),
      { numRuns: 300 },
    );
  });
});
