import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { diffConfigs } from '../../../src/core/config/diff.js';
import type { ProvisionerConfig } from '../../../src/core/config/model.js';
import { parseConfigSnapshot } from '../../../src/core/config/decode/parse.js';
import { snapshotFromFileText } from '../../../src/core/config/decode/layout.js';
import type { LoadedConfig } from '../../../src/core/config/source/port.js';

function load(text: string): LoadedConfig {
  return parseConfigSnapshot(snapshotFromFileText('c.yaml', text));
}
function config(text: string): ProvisionerConfig {
  return load(text).config;
}

const BASE = `storageClassMap:
  fast:
    hostDir: /mnt/fast
    mountDir: /mnt/fast
  slow:
    hostDir: /mnt/slow
    mountDir: /mnt/slow
`;

describe('diffConfigs', () => {
  it('finds nothing between a config and itself', () => {
    assert.deepEqual(diffConfigs(config(BASE), config(BASE)), []);
  });

  it('reports a field change with its effect row (the seed story: forgotten fsType)', () => {
    const changes = diffConfigs(
      config(BASE),
      config(BASE.replace('mountDir: /mnt/fast', 'mountDir: /mnt/fast\n    fsType: ext4')),
    );
    assert.deepEqual(
      changes.map((c) => [c.path, c.before, c.after, c.effect.impact]),
      [['storageClassMap.fast.fsType', '', 'ext4', 'new-pvs-only']],
    );
  });

  it('reports added and removed classes', () => {
    const changes = diffConfigs(
      config(BASE),
      config(BASE.replace(/ {2}slow:[^]*$/u, '  nvme:\n    hostDir: /mnt/nvme\n    mountDir: /mnt/nvme\n')),
    );
    assert.deepEqual(
      changes.map((c) => [c.path, c.action, c.effect.impact]),
      [
        ['storageClassMap.nvme', 'added', 'needs-pod-change'],
        ['storageClassMap.slow', 'removed', 'orphans-pvs'],
      ],
    );
  });

  it('recognises a rename by its hostDir, with the field changes that came with it', () => {
    const changes = diffConfigs(
      config(BASE),
      config(BASE.replace('slow:', 'cold:').replace('mountDir: /mnt/slow', 'mountDir: /data/slow')),
    );
    assert.deepEqual(
      changes.map((c) => [c.path, c.action, c.before, c.after]),
      [
        ['storageClassMap.cold', 'renamed', 'slow', 'cold'],
        ['storageClassMap.cold.mountDir', 'modified', '/mnt/slow', '/data/slow'],
      ],
    );
    assert.equal(changes[0]?.effect.impact, 'orphans-pvs');
  });

  it('uses enabled/disabled for booleans', () => {
    const changes = diffConfigs(config(BASE), config(`${BASE}useJobForCleaning: yes\nuseNodeNameOnly: true\n`));
    assert.deepEqual(
      changes.map((c) => [c.path, c.action, c.effect.impact]),
      [
        ['useJobForCleaning', 'enabled', 'needs-pod-change'],
        ['useNodeNameOnly', 'enabled', 'ownership-change'],
      ],
    );
    const back = diffConfigs(config(`${BASE}useJobForCleaning: yes\n`), config(BASE));
    assert.deepEqual(
      back.map((c) => [c.action, c.effect.impact]),
      [['disabled', 'next-cleanup']],
    );
  });

  it('classifies deleteMissingAfter as a policy: enabled, modified, disabled, each shown as able to delete PVs or not', () => {
    const off = config(BASE);
    const on = (value: string) =>
      config(BASE.replace('mountDir: /mnt/fast', `mountDir: /mnt/fast\n    deleteMissingAfter: ${value}`));
    const row = (from: ProvisionerConfig, to: ProvisionerConfig) =>
      diffConfigs(from, to).map((c) => [c.path, c.action, c.before, c.after, c.effect.impact]);
    assert.deepEqual(row(off, on('30m')), [
      ['storageClassMap.fast.deleteMissingAfter', 'enabled', '0s', '30m0s', 'next-cleanup'],
    ]);
    assert.deepEqual(row(on('30m'), on('10m')), [
      ['storageClassMap.fast.deleteMissingAfter', 'modified', '30m0s', '10m0s', 'next-cleanup'],
    ]);
    assert.deepEqual(row(on('30m'), on('0s')), [
      ['storageClassMap.fast.deleteMissingAfter', 'disabled', '30m0s', '0s', 'none'],
    ]);
    assert.deepEqual(row(on('0s'), off), []);
    const [enabled] = diffConfigs(off, on('30m'));
    assert.match(enabled?.effect.summary ?? '', /^Can delete PVs: Available PVs/u);
    assert.match(enabled?.effect.existingPVs ?? '', /Bound and Released PVs are never deleted/u);
  });

  describe('deviceRules', () => {
    /** BASE with rules on class fast, each a flow mapping. */
    const rules = (...list: string[]): ProvisionerConfig =>
      config(
        list.length === 0
          ? BASE
          : BASE.replace(
              'mountDir: /mnt/fast',
              `mountDir: /mnt/fast\n    deviceRules:\n${list.map((r) => `      - ${r}\n`).join('')}`,
            ),
      );
    const rows = (from: ProvisionerConfig, to: ProvisionerConfig) =>
      diffConfigs(from, to).map((c) => [c.path, c.action, c.effect.impact]);
    const APPLY = '{mode: apply, transports: [nvme], minSize: 100Gi}';
    const PLAN = '{mode: plan, transports: [nvme], minSize: 100Gi}';

    it('an apply rule added claims devices; a plan rule added writes nothing', () => {
      assert.deepEqual(rows(rules(), rules(APPLY)), [
        ['storageClassMap.fast.deviceRules[0]', 'added', 'claims-devices'],
      ]);
      assert.deepEqual(rows(rules(), rules(PLAN)), [['storageClassMap.fast.deviceRules[0]', 'added', 'none']]);
      assert.deepEqual(rows(rules(PLAN), rules(PLAN, APPLY)), [
        ['storageClassMap.fast.deviceRules[1]', 'added', 'claims-devices'],
      ]);
    });

    it('shows rules as written: sizes as quantities, settle as a Go duration, defaults filled in', () => {
      const [added] = diffConfigs(rules(), rules(APPLY));
      assert.equal(added?.before, undefined);
      assert.deepEqual(added?.after, {
        mode: 'apply',
        types: ['disk'],
        transports: ['nvme'],
        minSize: '100Gi',
        allowRemovable: false,
        settle: '10s',
      });
    });

    it('plan → apply is enabled (claims devices); apply → plan is disabled (writes nothing)', () => {
      assert.deepEqual(rows(rules(PLAN), rules(APPLY)), [
        ['storageClassMap.fast.deviceRules[0]', 'enabled', 'claims-devices'],
      ]);
      assert.deepEqual(rows(rules(APPLY), rules(PLAN)), [['storageClassMap.fast.deviceRules[0]', 'disabled', 'none']]);
    });

    it('any change of an apply rule claims devices; a plan rule changed writes nothing', () => {
      const widened = '{mode: apply, transports: [nvme], minSize: 10Gi}';
      const narrowed = '{mode: apply, transports: [nvme], minSize: 100Gi, maxDevices: 1}';
      const settled = '{mode: apply, transports: [nvme], minSize: 100Gi, settle: 1m}';
      for (const changed of [widened, narrowed, settled]) {
        assert.deepEqual(rows(rules(APPLY), rules(changed)), [
          ['storageClassMap.fast.deviceRules[0]', 'modified', 'claims-devices'],
        ]);
      }
      assert.deepEqual(rows(rules(PLAN), rules('{transports: [sata]}')), [
        ['storageClassMap.fast.deviceRules[0]', 'modified', 'none'],
      ]);
    });

    it('a rule removed writes nothing, and the links it made stay', () => {
      const changes = diffConfigs(rules(PLAN, APPLY), rules(PLAN));
      assert.deepEqual(
        changes.map((c) => [c.path, c.action, c.effect.impact]),
        [['storageClassMap.fast.deviceRules[1]', 'removed', 'none']],
      );
      assert.match(changes[0]?.effect.existingPVs ?? '', /links made stay/u);
      assert.deepEqual(rows(rules(APPLY), rules()), [['storageClassMap.fast.deviceRules[0]', 'removed', 'none']]);
    });

    it('compares rules by position: a rule inserted first shows every later one changed (over-reports, never under)', () => {
      assert.deepEqual(rows(rules(APPLY), rules(PLAN, APPLY)), [
        ['storageClassMap.fast.deviceRules[0]', 'disabled', 'none'],
        ['storageClassMap.fast.deviceRules[1]', 'added', 'claims-devices'],
      ]);
    });

    it("a class added with apply rules shows them, so a claims-devices gate sees a new class's rules", () => {
      const withClass = config(
        `${BASE}  nvme:\n    hostDir: /mnt/nvme\n    mountDir: /mnt/nvme\n    deviceRules: [${APPLY}, ${PLAN}]\n`,
      );
      assert.deepEqual(rows(config(BASE), withClass), [
        ['storageClassMap.nvme', 'added', 'needs-pod-change'],
        ['storageClassMap.nvme.deviceRules[0]', 'added', 'claims-devices'],
        ['storageClassMap.nvme.deviceRules[1]', 'added', 'none'],
      ]);
      assert.deepEqual(rows(withClass, config(BASE)), [
        ['storageClassMap.nvme', 'removed', 'orphans-pvs'],
        ['storageClassMap.nvme.deviceRules[0]', 'removed', 'none'],
        ['storageClassMap.nvme.deviceRules[1]', 'removed', 'none'],
      ]);
      const [classAdded] = diffConfigs(config(BASE), withClass);
      assert.equal((classAdded?.after as { deviceRules: { minSize: string }[] }).deviceRules[0]?.minSize, '100Gi');
    });

    it('property: empty exactly when the hashes are equal; claims devices exactly when a position now holds an apply rule it did not', () => {
      const pool = [APPLY, PLAN, '{mode: apply, byIdNames: ["nvme-*"]}', '{byIdNames: ["nvme-*"]}', '{}'];
      const list = fc.array(fc.constantFrom(...pool.keys()), { maxLength: 3 });
      fc.assert(
        fc.property(list, list, (x, y) => {
          const a = load(
            BASE.replace(
              'mountDir: /mnt/fast',
              `mountDir: /mnt/fast\n    deviceRules: [${x.map((i) => pool[i]).join(', ')}]`,
            ),
          );
          const b = load(
            BASE.replace(
              'mountDir: /mnt/fast',
              `mountDir: /mnt/fast\n    deviceRules: [${y.map((i) => pool[i]).join(', ')}]`,
            ),
          );
          const changes = diffConfigs(a.config, b.config);
          assert.equal(changes.length === 0, a.hash === b.hash);
          const apply = (i: number | undefined): boolean => i !== undefined && (pool[i] ?? '').includes('apply');
          const claims = y.some((i, at) => apply(i) && i !== x[at]);
          assert.equal(
            changes.some((c) => c.effect.impact === 'claims-devices'),
            claims,
          );
        }),
      );
    });
  });

  it('is empty exactly when the hashes are equal (property)', () => {
    const field = fc.record({
      fsType: fc.constantFrom('', 'ext4'),
      mode: fc.constantFrom('Filesystem', 'Block'),
      job: fc.boolean(),
      resync: fc.constantFrom('5m', '300s', '10m'),
      policy: fc.constantFrom('', '0s', '30m', '1800s', '10m'),
      labels: fc.constantFrom('', 'labelsForPV: {a: b}\n'),
      cleaner: fc.constantFrom(
        '',
        '    blockCleanerCommand: ["/scripts/quick_reset.sh"]\n',
        '    blockCleanerCommand: ["/scripts/shred.sh", "2"]\n',
      ),
    });
    const render = (f: {
      fsType: string;
      mode: string;
      job: boolean;
      resync: string;
      policy: string;
      labels: string;
      cleaner: string;
    }): string =>
      `storageClassMap:\n  a:\n    hostDir: /a\n    mountDir: /a\n    volumeMode: ${f.mode}\n${f.fsType === '' ? '' : `    fsType: ${f.fsType}\n`}${f.cleaner}${f.policy === '' ? '' : `    deleteMissingAfter: ${f.policy}\n`}useJobForCleaning: ${f.job ? 'on' : 'no'}\nminResyncPeriod: ${f.resync}\n${f.labels}`;
    fc.assert(
      fc.property(field, field, (x, y) => {
        const a = load(render(x));
        const b = load(render(y));
        const changes = diffConfigs(a.config, b.config);
        assert.equal(changes.length === 0, a.hash === b.hash);
        assert.deepEqual(
          diffConfigs(b.config, a.config).map((c) => c.path),
          changes.map((c) => c.path),
          'symmetric paths',
        );
      }),
    );
  });
});
