// A class's deviceRules: decoding of every key, every refusal with its path and position, the hash
// of configs without rules, and the written form reading back as the same rules.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { stringify } from 'yaml';
import { InvalidConfigError } from '../../../src/core/errors.js';
import type { ConfigIssue } from '../../../src/core/errors.js';
import { canonicalYaml } from '../../../src/core/config/canonical.js';
import {
  DEVICE_RULE_KEYS,
  RULE_DEVICE_TYPES,
  RULE_TRANSPORTS,
  writtenDeviceRule,
} from '../../../src/core/config/device-rules.js';
import { formatGoDuration } from '../../../src/core/config/duration.js';
import { CLASS_FIELDS } from '../../../src/core/config/model.js';
import { formatByteQuantity, parseByteQuantity } from '../../../src/core/config/quantity.js';
import { parseConfigSnapshot } from '../../../src/core/config/decode/parse.js';
import { snapshotFromFileText } from '../../../src/core/config/decode/layout.js';
import { loadConfig } from '../../../src/core/config/source/load.js';
import type { LoadedConfig } from '../../../src/core/config/source/port.js';
import type { DeviceRule } from '../../../src/core/devices/model.js';
import { join } from 'node:path';

const FIXTURES = join(import.meta.dirname, '../../../../test/fixtures');
const CLASS = 'storageClassMap:\n  fast:\n    hostDir: /mnt/fast\n    mountDir: /mnt/fast\n';
/** A class whose deviceRules (line 5) hold one rule, its lines starting at line 6. */
const withRule = (...lines: string[]): string =>
  `${CLASS}    deviceRules:\n${lines.map((l, i) => `${i === 0 ? '      - ' : '        '}${l}\n`).join('')}`;

function parse(text: string): LoadedConfig {
  return parseConfigSnapshot(snapshotFromFileText('config.yaml', text));
}

function issuesOf(text: string): readonly ConfigIssue[] {
  try {
    parse(text);
  } catch (err) {
    if (err instanceof InvalidConfigError) return err.issues;
    throw err;
  }
  assert.fail('expected the config to be rejected');
}

function first<T>(list: readonly T[] | undefined): T {
  const item = list?.[0];
  assert.ok(item !== undefined, 'expected at least one item');
  return item;
}

function rulesOf(loaded: LoadedConfig): readonly DeviceRule[] | undefined {
  return loaded.config.storageClassMap['fast']?.deviceRules;
}

describe('deviceRules: decoding', () => {
  it('decodes every key of a rule (the documented example)', () => {
    const loaded = parse(
      withRule(
        'mode: apply',
        'byIdNames: ["nvme-Amazon_EC2_NVMe_Instance_Storage_*"]',
        'types: [disk]',
        'rotational: false',
        'minSize: 100Gi',
        'maxSize: 4Ti',
        'models: ["*"]',
        'vendors: ["NVMe*"]',
        'serials: ["AWS*"]',
        'transports: [nvme]',
        'maxDevices: 8',
        'nodeLabels: {node.kubernetes.io/instance-type: i4i.xlarge}',
        'allowRemovable: false',
        'partitions: 4',
        'settle: 10s',
      ),
    );
    assert.deepEqual(rulesOf(loaded), [
      {
        mode: 'apply',
        byIdNames: ['nvme-Amazon_EC2_NVMe_Instance_Storage_*'],
        types: ['disk'],
        rotational: false,
        minBytes: 100 * 1024 ** 3,
        maxBytes: 4 * 1024 ** 4,
        models: ['*'],
        vendors: ['NVMe*'],
        serials: ['AWS*'],
        transports: ['nvme'],
        maxDevices: 8,
        nodeLabels: { 'node.kubernetes.io/instance-type': 'i4i.xlarge' },
        allowRemovable: false,
        partitions: 4,
        settleMs: 10_000,
      },
    ]);
    assert.deepEqual(loaded.warnings, []);
    assert.ok(Object.isFrozen(rulesOf(loaded)?.[0]?.types), 'rules are frozen with the config');
  });

  it('fills in the defaults: plan mode, whole disks only, no removable devices, 10 s settle', () => {
    assert.deepEqual(rulesOf(parse(withRule('{}'))), [
      { mode: 'plan', types: ['disk'], allowRemovable: false, settleMs: 10_000 },
    ]);
    // Empty strings and nulls are the defaults too, as for every other field.
    assert.deepEqual(rulesOf(parse(withRule('mode: ""', 'types: ~', 'settle: ~', 'nodeLabels: {}'))), [
      { mode: 'plan', types: ['disk'], allowRemovable: false, settleMs: 10_000 },
    ]);
  });

  it('reads sizes as Kubernetes quantities or plain numbers of bytes', () => {
    for (const [written, bytes] of [
      ['100Gi', 107_374_182_400],
      ['500G', 500_000_000_000],
      ['1.5Ti', 1.5 * 1024 ** 4],
      ['"1000"', 1000],
      ['1000', 1000],
      ['1e12', 1e12],
      ['2E3', 2000],
      ['0.5k', 500],
    ] as const) {
      assert.equal(rulesOf(parse(withRule(`minSize: ${written}`)))?.[0]?.minBytes, bytes, written);
    }
  });

  it('normalizes: keys match case-insensitively, enum lists deduplicated in a fixed order, settle in ms', () => {
    const rule = first(
      rulesOf(
        parse(
          withRule(
            'Mode: apply',
            'TYPES: [part, disk, part]',
            'transports: [usb, nvme]',
            'settle: 1m30s',
            'minsize: 1Gi',
          ),
        ),
      ),
    );
    assert.deepEqual(rule.types, ['disk', 'part']);
    assert.deepEqual(rule.transports, ['nvme', 'usb']);
    assert.equal(rule.settleMs, 90_000);
    assert.equal(rule.mode, 'apply');
    assert.equal(rule.minBytes, 1024 ** 3);
  });

  it('keeps several rules in order, merges applied', () => {
    const text = `${CLASS}    deviceRules:\n      - &nvme {mode: apply, transports: [nvme]}\n      - <<: *nvme\n        mode: plan\n`;
    assert.deepEqual(
      rulesOf(parse(text))?.map((r) => [r.mode, r.transports]),
      [
        ['apply', ['nvme']],
        ['plan', ['nvme']],
      ],
    );
  });

  it('is a device-rules field of the catalogue, and every rule key is described', () => {
    const field = CLASS_FIELDS.find((f) => f.name === 'deviceRules');
    assert.equal(field?.type, 'device-rules');
    assert.deepEqual(
      DEVICE_RULE_KEYS.map((k) => k.name),
      [
        'mode',
        'byIdNames',
        'types',
        'rotational',
        'minSize',
        'maxSize',
        'models',
        'vendors',
        'serials',
        'transports',
        'maxDevices',
        'nodeLabels',
        'allowRemovable',
        'partitions',
        'settle',
      ],
    );
  });
});

describe('deviceRules: configs without rules keep their hash', () => {
  it('is absent from the class when not written, empty or null', () => {
    const plain = parse(CLASS);
    assert.equal('deviceRules' in (plain.config.storageClassMap['fast'] ?? {}), false);
    for (const empty of ['[]', '~', '']) {
      const loaded = parse(`${CLASS}    deviceRules: ${empty}\n`);
      assert.equal(rulesOf(loaded), undefined, empty);
      assert.equal(loaded.hash, plain.hash, empty);
    }
    assert.notEqual(parse(withRule('{}')).hash, plain.hash);
  });

  it("upstream's golden configs hash as before the field existed", async () => {
    // Recorded before deviceRules was added (commit 23b3772): any change of the canonical form shows here.
    const golden: [string, string][] = [
      [
        'upstream/default_example_provisioner_generated.yaml',
        'sha256:caf521d04d95ada0e2e875a3f8e83bc79177b80d6fec1b80decce1223d66bdc1',
      ],
      ['upstream/helm-configmap.yaml', 'sha256:7935dbe49aa7ccf99ef7ca8f25f3bc3d901c1de73cfe133593360a898bb5c484'],
    ];
    for (const [file, hash] of golden) assert.equal((await loadConfig(join(FIXTURES, file))).hash, hash, file);
  });
});

/** One error case: the rule's lines, the error's key path under the rule, its message, and where it points. */
interface Refusal {
  readonly lines: readonly string[];
  readonly path: string;
  readonly message: RegExp;
  /** Text on the rule line the error points at; its first character is the column. */
  readonly at: string;
}

const REFUSALS: readonly Refusal[] = [
  {
    lines: ['mode: Apply'],
    path: 'mode',
    message: /^unknown mode "Apply": expected one of plan, apply; did you mean "apply"\?$/u,
    at: 'Apply',
  },
  {
    lines: ['mode: dry-run'],
    path: 'mode',
    message: /^unknown mode "dry-run": expected one of plan, apply$/u,
    at: 'dry-run',
  },
  {
    lines: ['allowRemoveable: true'],
    path: 'allowRemoveable',
    message: /^unknown key \(a misspelt selector would widen the rule\); did you mean "allowRemovable"\?$/u,
    at: 'allowRemoveable',
  },
  {
    lines: ['color: red'],
    path: 'color',
    message: /^unknown key \(a misspelt selector would widen the rule\); the keys are mode, byIdNames, types/u,
    at: 'color',
  },
  { lines: ['byIdNames: ["["]'], path: 'byIdNames[0]', message: /^malformed glob "\[": bad range$/u, at: '"["' },
  {
    lines: ['byIdNames: ["/dev/disk/by-id/nvme-*"]'],
    path: 'byIdNames[0]',
    message: /contains "\/": globs match the names in \/dev\/disk\/by-id, without the directory$/u,
    at: '"/dev',
  },
  { lines: ['byIdNames: [""]'], path: 'byIdNames[0]', message: /^an empty pattern matches nothing$/u, at: '""' },
  {
    lines: ['byIdNames: []'],
    path: 'byIdNames',
    message: /^must not be an empty list, which matches no device \(omit it for any\)$/u,
    at: '[]',
  },
  { lines: ['models: "*"'], path: 'models', message: /^expected a list of strings, found the text "\*"$/u, at: '"*"' },
  { lines: ['serials: ["a\\u0000b"]'], path: 'serials[0]', message: /control character U\+0000/u, at: '"a' },
  {
    lines: ['types: [disk, partition]'],
    path: 'types[1]',
    message: /^unknown type "partition": expected one of disk, part, loop, dm, md, mpath$/u,
    at: 'partition',
  },
  {
    lines: ['types: []'],
    path: 'types',
    message: /^must not be an empty list, which matches no device \(omit it for \[disk\]\)$/u,
    at: '[]',
  },
  {
    lines: ['transports: [nvm]'],
    path: 'transports[0]',
    message: /^unknown transport "nvm": expected one of nvme, sata, sas, scsi, virtio, usb; did you mean "nvme"\?$/u,
    at: 'nvm]',
  },
  {
    lines: ['rotational: maybe'],
    path: 'rotational',
    message: /^expected a boolean \(true\/false, yes\/no, on\/off\), found the text "maybe"$/u,
    at: 'maybe',
  },
  {
    lines: ['minSize: 4Ti', 'maxSize: 100Gi'],
    path: 'minSize',
    message: /^4Ti is larger than maxSize 100Gi: no device can match$/u,
    at: '4Ti',
  },
  {
    lines: ['minSize: 100m'],
    path: 'minSize',
    message: /^"100m" is not a whole number of bytes; "m" is milli, write M \(10\^6\) or Mi \(2\^20\) for megabytes$/u,
    at: '100m',
  },
  { lines: ['maxSize: 0'], path: 'maxSize', message: /^must be a positive size, found "0"$/u, at: '0' },
  { lines: ['maxSize: -1Gi'], path: 'maxSize', message: /^must be a positive size, found "-1Gi"$/u, at: '-1Gi' },
  {
    lines: ['minSize: lots'],
    path: 'minSize',
    message: /^"lots" is not a Kubernetes quantity such as 100Gi, 500G or 1e12$/u,
    at: 'lots',
  },
  { lines: ['minSize: 100 Gi'], path: 'minSize', message: /^"100 Gi" is not a Kubernetes quantity/u, at: '100 Gi' },
  {
    lines: ['minSize: true'],
    path: 'minSize',
    message: /^expected a size such as 100Gi or 500G, found the boolean true$/u,
    at: 'true',
  },
  { lines: ['maxSize: 16Ei'], path: 'maxSize', message: /^"16Ei" is more than 2\^53 - 1 bytes$/u, at: '16Ei' },
  { lines: ['maxSize: 1e99'], path: 'maxSize', message: /^"1e99" is out of range$/u, at: '1e99' },
  { lines: ['maxDevices: 0'], path: 'maxDevices', message: /^must be a positive integer, found 0$/u, at: '0' },
  { lines: ['maxDevices: -2'], path: 'maxDevices', message: /^must be a positive integer, found -2$/u, at: '-2' },
  {
    lines: ['maxDevices: 1.5'],
    path: 'maxDevices',
    message: /^expected an integer, found the number 1.5$/u,
    at: '1.5',
  },
  { lines: ['partitions: 0'], path: 'partitions', message: /^must be an integer from 1 to 128, found 0$/u, at: '0' },
  {
    lines: ['partitions: 129'],
    path: 'partitions',
    message: /^must be an integer from 1 to 128, found 129$/u,
    at: '129',
  },
  {
    lines: ['types: [disk, part]', 'partitions: 4'],
    path: 'partitions',
    message: /^carves whole devices only: types may be disk and loop, found \[disk, part\]$/u,
    at: '4',
  },
  {
    lines: ['types: [loop, md]', 'partitions: 2'],
    path: 'partitions',
    message: /^carves whole devices only: types may be disk and loop, found \[loop, md\]$/u,
    at: '2',
  },
  {
    lines: ['nodeLabels: {"bad key!": x}'],
    path: 'nodeLabels.bad key!',
    message: /^"bad key!" is not a valid label key/u,
    at: '"bad',
  },
  {
    lines: ['nodeLabels: [a]'],
    path: 'nodeLabels',
    message: /^expected a mapping of label keys to values, found a list$/u,
    at: '[a]',
  },
  { lines: ['settle: -5s'], path: 'settle', message: /^must not be negative, found -5s$/u, at: '-5s' },
  {
    lines: ['settle: 10'],
    path: 'settle',
    message: /^expected a Go duration string such as 5m0s, found the number 10$/u,
    at: '10',
  },
  { lines: ['settle: soon'], path: 'settle', message: /^invalid duration "soon"/u, at: 'soon' },
];

describe('deviceRules: refusals name the file, the key path, the reason and the position', () => {
  for (const refusal of REFUSALS) {
    it(`${refusal.lines.join(', ')} → ${refusal.path}`, () => {
      const text = withRule(...refusal.lines);
      const errors = issuesOf(text).filter((i) => i.severity === 'error');
      assert.equal(errors.length, 1, JSON.stringify(errors));
      const error = first(errors);
      assert.equal(error.path, `storageClassMap.fast.deviceRules[0].${refusal.path}`);
      assert.match(error.message, refusal.message);
      const lines = text.split('\n');
      const line = lines.findIndex((l, i) => i >= 5 && l.includes(refusal.at));
      assert.deepEqual(error.position, {
        file: 'config.yaml',
        line: line + 1,
        column: (lines[line] ?? '').indexOf(refusal.at) + 1,
      });
    });
  }

  it('refuses a list that is no list of rules, and null or scalar rules', () => {
    const notList = issuesOf(`${CLASS}    deviceRules: {mode: apply}\n`);
    assert.deepEqual(
      notList.map((i) => [i.path, i.message, i.position?.line, i.position?.column]),
      [['storageClassMap.fast.deviceRules', 'expected a list of device rules, found a mapping', 5, 18]],
    );
    const items = issuesOf(`${CLASS}    deviceRules:\n      - ~\n      - 5\n`);
    assert.deepEqual(
      items.map((i) => [i.path, i.message, i.position?.line]),
      [
        ['storageClassMap.fast.deviceRules[0]', 'must not be null (a rule of defaults is written {})', 6],
        [
          'storageClassMap.fast.deviceRules[1]',
          'expected a device rule (mode, byIdNames, types, …), found the number 5',
          7,
        ],
      ],
    );
  });

  it('reports every problem of every rule at once', () => {
    const text = `${CLASS}    deviceRules:\n      - {mode: Apply, maxDevices: 0}\n      - {types: [dsk]}\n`;
    assert.deepEqual(
      issuesOf(text).map((i) => i.path),
      [
        'storageClassMap.fast.deviceRules[0].mode',
        'storageClassMap.fast.deviceRules[0].maxDevices',
        'storageClassMap.fast.deviceRules[1].types[0]',
      ],
    );
  });

  it('warns about an apply rule that selects nothing narrower than every blank disk', () => {
    const loaded = parse(withRule('mode: apply', 'maxDevices: 2'));
    assert.deepEqual(
      loaded.warnings.map((w) => [w.path, w.position?.line]),
      [['storageClassMap.fast.deviceRules[0]', 6]],
    );
    assert.match(
      loaded.warnings[0]?.message ?? '',
      /^selects every blank device of type disk of the node: narrow it with byIdNames/u,
    );
    assert.deepEqual(parse(withRule('mode: plan')).warnings, [], 'a plan rule only reports');
    assert.deepEqual(parse(withRule('mode: apply', 'transports: [nvme]')).warnings, []);
  });
});

describe('byte quantities', () => {
  it('formats a byte count as the shortest exact quantity', () => {
    assert.equal(formatByteQuantity(100 * 1024 ** 3), '100Gi');
    assert.equal(formatByteQuantity(1536 * 1024 ** 3), '1536Gi');
    assert.equal(formatByteQuantity(500e9), '500G');
    assert.equal(formatByteQuantity(1023), '1023');
  });

  it('property: every positive byte count reads back from its formatted quantity', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }), (bytes) => {
        assert.deepEqual(parseByteQuantity(formatByteQuantity(bytes)), { ok: true, bytes });
      }),
    );
  });
});

const GLOBS = ['*', 'nvme-*', 'nvme-Amazon_EC2_NVMe_Instance_Storage_AWS[0-9]*', 'wwn-0x5000c500?*', 'ata-*_S3Z[A-F]*'];
const LABEL_KEYS = ['node.kubernetes.io/instance-type', 'topology.kubernetes.io/zone', 'disks'];

/** A rule as written in YAML, each key present or not, sizes in any spelling of the same bytes. */
const writtenRule = fc
  .record(
    {
      mode: fc.constantFrom('plan', 'apply', ''),
      byIdNames: fc.subarray(GLOBS, { minLength: 1 }),
      types: fc.subarray([...RULE_DEVICE_TYPES], { minLength: 1 }),
      rotational: fc.boolean(),
      sizes: fc.tuple(fc.integer({ min: 1, max: 2 ** 44 }), fc.integer({ min: 1, max: 2 ** 44 }), fc.boolean()),
      models: fc.subarray(GLOBS, { minLength: 1 }),
      vendors: fc.array(fc.stringMatching(/^[A-Za-z0-9 _-]{1,12}\*?$/u), { minLength: 1, maxLength: 3 }),
      serials: fc.array(fc.stringMatching(/^[A-Z0-9]{1,10}\*?$/u), { minLength: 1, maxLength: 3 }),
      transports: fc.subarray([...RULE_TRANSPORTS], { minLength: 1 }),
      maxDevices: fc.integer({ min: 1, max: 64 }),
      nodeLabels: fc.dictionary(
        fc.constantFrom(...LABEL_KEYS),
        fc.stringMatching(/^[a-z0-9]([a-z0-9.-]{0,8}[a-z0-9])?$/u),
      ),
      allowRemovable: fc.boolean(),
      partitions: fc.integer({ min: 1, max: 128 }),
      settleMs: fc.integer({ min: 0, max: 3_600_000 }),
    },
    { requiredKeys: [] },
  )
  .map((r) => {
    const { sizes, settleMs, partitions, types, ...rest } = r;
    const out: Record<string, unknown> = { ...rest };
    if (sizes !== undefined) {
      const [a, b, asText] = sizes;
      const spell = (n: number): string | number => (asText ? formatByteQuantity(n) : n);
      out['minSize'] = spell(Math.min(a, b));
      out['maxSize'] = spell(Math.max(a, b));
    }
    if (settleMs !== undefined) out['settle'] = formatGoDuration(BigInt(settleMs) * 1_000_000n);
    // Partitions are for whole disks only.
    if (partitions !== undefined) out['partitions'] = partitions;
    if (types !== undefined) out['types'] = partitions === undefined ? types : ['disk'];
    return out;
  });

describe('deviceRules: written form (property)', () => {
  it('decode → canonical YAML → decode gives the same config, and each rule reads back from its written form', () => {
    fc.assert(
      fc.property(fc.array(writtenRule, { minLength: 1, maxLength: 4 }), (rules) => {
        const text = stringify(
          { storageClassMap: { fast: { hostDir: '/mnt/fast', mountDir: '/mnt/fast', deviceRules: rules } } },
          { version: '1.1' },
        );
        const first = parse(text);
        const again = parse(canonicalYaml(first.config));
        assert.equal(again.hash, first.hash);
        assert.deepEqual(again.config, first.config);
        assert.equal(canonicalYaml(again.config), canonicalYaml(first.config));
        const decoded = rulesOf(first) ?? [];
        assert.equal(decoded.length, rules.length);
        const fromWritten = parse(
          stringify(
            {
              storageClassMap: {
                fast: { hostDir: '/mnt/fast', mountDir: '/mnt/fast', deviceRules: decoded.map(writtenDeviceRule) },
              },
            },
            { version: '1.1' },
          ),
        );
        assert.deepEqual(rulesOf(fromWritten), decoded);
      }),
      { numRuns: 200 },
    );
  });
});
