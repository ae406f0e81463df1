import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { InvalidConfigError } from '../../../src/core/errors.js';
import type { ConfigIssue } from '../../../src/core/errors.js';
import { canonicalYaml } from '../../../src/core/config/canonical.js';
import type { ClassConfig, ProvisionerConfig } from '../../../src/core/config/model.js';
import { loadConfig } from '../../../src/core/config/source/load.js';
import { parseConfigSnapshot } from '../../../src/core/config/decode/parse.js';
import { snapshotFromDirectoryFiles, snapshotFromFileText } from '../../../src/core/config/decode/layout.js';
import type { LoadedConfig } from '../../../src/core/config/source/port.js';
import { writeConfigMapVolume } from '../../support/configmap-volume.js';

const FIXTURES = join(import.meta.dirname, '../../../../test/fixtures');

function first<T>(list: readonly T[]): T {
  const item = list[0];
  assert.ok(item !== undefined, 'expected at least one item');
  return item;
}

function classOf(config: ProvisionerConfig, name: string): ClassConfig {
  const c = config.storageClassMap[name];
  assert.ok(c, `no storage class ${name}`);
  return c;
}

function parse(text: string, file = 'config.yaml'): LoadedConfig {
  return parseConfigSnapshot(snapshotFromFileText(file, text));
}

function issuesOf(text: string, file = 'config.yaml'): readonly ConfigIssue[] {
  try {
    parse(text, file);
  } catch (err) {
    if (err instanceof InvalidConfigError) return err.issues;
    throw err;
  }
  assert.fail('expected the config to be rejected');
}

function errorsOf(text: string): readonly ConfigIssue[] {
  return issuesOf(text).filter((i) => i.severity === 'error');
}

const ONE_CLASS = 'storageClassMap:\n  local:\n    hostDir: /mnt/disks\n    mountDir: /mnt/disks\n';

describe('config defaults', () => {
  it("fills in upstream's defaults for every field", () => {
    const { config } = parse(ONE_CLASS);
    const expected: ProvisionerConfig = {
      storageClassMap: {
        local: {
          hostDir: '/mnt/disks',
          mountDir: '/mnt/disks',
          blockCleanerCommand: ['/scripts/quick_reset.sh'],
          volumeMode: 'Filesystem',
          accessMode: 'ReadWriteOnce',
          fsType: '',
          namePattern: '*',
          selector: [],
        },
      },
      nodeLabelsForPV: [],
      labelsForPV: {},
      useAlphaAPI: false,
      useJobForCleaning: false,
      jobTolerations: [],
      minResyncPeriod: '5m0s',
      useNodeNameOnly: false,
      setPVOwnerRef: false,
      removeNodeNotReadyTaint: false,
      provisionerNotReadyNodeTaintKey: '',
    };
    assert.deepEqual(config, expected);
  });

  it('an empty config is valid, with a warning that nothing is discovered', () => {
    const loaded = parse('');
    assert.deepEqual(loaded.config.storageClassMap, {});
    assert.ok(
      loaded.warnings.some((w) => w.path === 'storageClassMap' && w.message.includes('nothing will be discovered')),
    );
  });

  it('is deeply immutable', () => {
    const { config } = parse(ONE_CLASS);
    assert.ok(Object.isFrozen(config));
    assert.ok(Object.isFrozen(config.storageClassMap));
    assert.ok(Object.isFrozen(classOf(config, 'local').blockCleanerCommand));
    assert.throws(() => {
      (config as { useJobForCleaning: boolean }).useJobForCleaning = true;
    }, TypeError);
  });
});

describe("upstream's own configs", () => {
  it('reads the Helm chart\'s rendered ConfigMap, including useJobForCleaning: "yes"', async () => {
    const loaded = await loadConfig(join(FIXTURES, 'upstream/helm-configmap.yaml'));
    assert.equal(loaded.source.kind, 'configmap');
    assert.equal(loaded.source.configMap, 'kube-system/local-static-provisioner-config');
    const expected: ProvisionerConfig = {
      storageClassMap: {
        'fast-disks': {
          hostDir: '/mnt/fast-disks',
          mountDir: '/mnt/fast-disks',
          blockCleanerCommand: ['/scripts/shred.sh', '2'],
          volumeMode: 'Filesystem',
          accessMode: 'ReadWriteOnce',
          fsType: 'ext4',
          namePattern: '*',
          selector: [],
        },
        'local-block': {
          hostDir: '/dev/disk/by-id',
          mountDir: '/mnt/block',
          blockCleanerCommand: ['/scripts/quick_reset.sh'],
          volumeMode: 'Block',
          accessMode: 'ReadWriteOnce',
          fsType: '',
          namePattern: 'nvme-*,scsi-*',
          selector: [{ matchExpressions: [{ key: 'storage.example.com/shelf', operator: 'In', values: ['shelf-a'] }] }],
        },
      },
      nodeLabelsForPV: ['topology.kubernetes.io/zone', 'kubernetes.io/hostname'],
      labelsForPV: { team: 'storage' },
      useAlphaAPI: false,
      useJobForCleaning: true,
      jobTolerations: [{ key: 'dedicated', operator: 'Equal', value: 'storage', effect: 'NoSchedule' }],
      minResyncPeriod: '1h30m0s',
      useNodeNameOnly: true,
      setPVOwnerRef: true,
      removeNodeNotReadyTaint: false,
      provisionerNotReadyNodeTaintKey: '',
    };
    assert.deepEqual(loaded.config, expected);
    assert.deepEqual(
      loaded.warnings.filter((w) => w.severity === 'error'),
      [],
    );
  });

  it("reads upstream's generated example (multi-document manifest, trailing spaces)", async () => {
    const loaded = await loadConfig(join(FIXTURES, 'upstream/default_example_provisioner_generated.yaml'));
    assert.equal(loaded.source.configMap, 'default/local-provisioner-config');
    assert.deepEqual(loaded.config.storageClassMap, {
      'fast-disks': {
        hostDir: '/mnt/fast-disks',
        mountDir: '/mnt/fast-disks',
        blockCleanerCommand: ['/scripts/shred.sh', '2'],
        volumeMode: 'Filesystem',
        accessMode: 'ReadWriteOnce',
        fsType: 'ext4',
        namePattern: '*',
        selector: [],
      },
    });
  });
});

describe('YAML 1.1 and Go decoding semantics', () => {
  for (const [text, value] of [
    ['yes', true],
    ['Yes', true],
    ['on', true],
    ['ON', true],
    ['y', true],
    ['true', true],
    ['"yes"', true],
    ['no', false],
    ['off', false],
    ['n', false],
    ['False', false],
  ] as const) {
    it(`useJobForCleaning: ${text} means ${String(value)}`, () => {
      assert.equal(parse(`useJobForCleaning: ${text}\n${ONE_CLASS}`).config.useJobForCleaning, value);
    });
  }

  it('matches keys case-insensitively, as encoding/json does', () => {
    const { config } = parse(
      'StorageClassMap:\n  local:\n    HOSTDIR: /mnt/disks\n    mountdir: /mnt/disks\n    VolumeMode: Block\nUSEJOBFORCLEANING: yes\n',
    );
    assert.equal(classOf(config, 'local').volumeMode, 'Block');
    assert.equal(classOf(config, 'local').hostDir, '/mnt/disks');
    assert.equal(config.useJobForCleaning, true);
  });

  it('reads a null label value as the empty label, as upstream', () => {
    const loaded = parse(`${ONE_CLASS}labelsForPV:\n  a: ~\n  b:\n  c: x\n`);
    assert.deepEqual(loaded.config.labelsForPV, { a: '', b: '', c: 'x' });
  });

  it('coerces scalars to strings for string fields, warning when YAML changed the text', () => {
    const loaded = parse(`${ONE_CLASS}labelsForPV:\n  tier: 1.10\n  fast: yes\n`);
    assert.deepEqual(loaded.config.labelsForPV, { fast: 'true', tier: '1.1' });
    const warning = loaded.warnings.find((w) => w.path === 'labelsForPV.tier');
    assert.ok(warning?.message.includes('quote it to keep "1.10"'), JSON.stringify(warning));
  });

  it('reads words the yaml package would take for floats (e0) as strings, like go-yaml', () => {
    const { config } = parse('storageClassMap:\n  e0:\n    hostDir: /mnt/e0\n    mountDir: /mnt/e0\n    fsType: e5\n');
    assert.deepEqual(Object.keys(config.storageClassMap), ['e0']);
    assert.equal(classOf(config, 'e0').fsType, 'e5');
  });

  it('normalizes Go durations', () => {
    assert.equal(parse(`minResyncPeriod: 90m\n${ONE_CLASS}`).config.minResyncPeriod, '1h30m0s');
    assert.equal(parse(`minResyncPeriod: "300s"\n${ONE_CLASS}`).config.minResyncPeriod, '5m0s');
  });

  it('warns about unknown keys with a suggestion, at every level', () => {
    const loaded = parse(
      'storageClassMap:\n  local:\n    hostDir: /mnt/disks\n    mountDir: /mnt/disks\n    fstype2: ext4\nuseJobForCleanup: true\n',
    );
    const top = loaded.warnings.find((w) => w.path === 'useJobForCleanup');
    assert.ok(top?.message.includes('did you mean "useJobForCleaning"?'), JSON.stringify(top));
    assert.deepEqual(top?.position, { file: 'config.yaml', line: 6, column: 1 });
    const nested = loaded.warnings.find((w) => w.path === 'storageClassMap.local.fstype2');
    assert.ok(nested?.message.includes('did you mean "fsType"?'), JSON.stringify(nested));
    assert.equal(loaded.config.useJobForCleaning, false);
  });

  it('normalizes discovery paths like filepath.Clean', () => {
    const { config } = parse('storageClassMap:\n  local:\n    hostDir: /mnt//disks/\n    mountDir: /mnt/./disks\n');
    assert.equal(classOf(config, 'local').hostDir, '/mnt/disks');
    assert.equal(classOf(config, 'local').mountDir, '/mnt/disks');
  });

  it('refuses a ".." segment in a discovery path, naming the path it would become', () => {
    const errors = errorsOf('storageClassMap:\n  local:\n    hostDir: /mnt/../etc\n    mountDir: /mnt/disks/x/..\n');
    assert.deepEqual(
      errors.map((e) => [e.path, e.message, e.position?.line]),
      [
        [
          'storageClassMap.local.hostDir',
          '"/mnt/../etc" has a ".." segment, which would make it "/etc"; write the directory itself, without ".."',
          3,
        ],
        [
          'storageClassMap.local.mountDir',
          '"/mnt/disks/x/.." has a ".." segment, which would make it "/mnt/disks"; write the directory itself, without ".."',
          4,
        ],
      ],
    );
  });
});

describe('bad input', () => {
  it('invalid YAML names file, line and column', () => {
    const errors = errorsOf('storageClassMap:\n  local: [unclosed\n');
    assert.equal(errors.length, 1);
    assert.match(first(errors).message, /YAML syntax error/u);
    assert.equal(first(errors).position?.file, 'config.yaml');
    assert.equal(typeof first(errors).position?.line, 'number');
  });

  it('the unquoted namePattern: * (upstream crash-loops) explains the fix', () => {
    const errors = errorsOf('storageClassMap:\n  local:\n    hostDir: /a\n    mountDir: /a\n    namePattern: *\n');
    assert.equal(errors.length, 1);
    assert.match(first(errors).message, /alias: quote it, e\.g\. namePattern: "\*"/u);
    assert.equal(first(errors).position?.line, 5);
  });

  it('wrong types name the key path and what was found', () => {
    const errors = errorsOf(`useJobForCleaning: maybe\nminResyncPeriod: 300\nnodeLabelsForPV: zone\n${ONE_CLASS}`);
    const byPath = new Map(errors.map((e) => [e.path, e.message]));
    assert.match(byPath.get('useJobForCleaning') ?? '', /expected a boolean .* found the text "maybe"/u);
    assert.match(byPath.get('minResyncPeriod') ?? '', /expected a Go duration string .* found the number 300/u);
    assert.match(byPath.get('nodeLabelsForPV') ?? '', /expected a list of strings, found the text "zone"/u);
  });

  it('missing hostDir or mountDir', () => {
    const errors = errorsOf('storageClassMap:\n  local:\n    hostDir: /mnt/disks\n');
    assert.deepEqual(
      errors.map((e) => [e.path, e.position?.line]),
      [['storageClassMap.local.mountDir', 3]],
    );
    assert.match(first(errors).message, /missing mountDir/u);
  });

  it('an empty blockCleanerCommand', () => {
    const errors = errorsOf(
      'storageClassMap:\n  local:\n    hostDir: /a\n    mountDir: /a\n    blockCleanerCommand: []\n',
    );
    assert.equal(first(errors).path, 'storageClassMap.local.blockCleanerCommand');
    assert.match(first(errors).message, /must not be an empty list/u);
  });

  it('an unknown volumeMode suggests the right spelling', () => {
    const errors = errorsOf('storageClassMap:\n  local:\n    hostDir: /a\n    mountDir: /a\n    volumeMode: block\n');
    assert.equal(first(errors).path, 'storageClassMap.local.volumeMode');
    assert.match(first(errors).message, /unsupported volume mode "block".*did you mean "Block"\?/u);
    assert.deepEqual(first(errors).position, { file: 'config.yaml', line: 5, column: 17 });
  });

  it('malformed namePattern globs and selector operators', () => {
    const errors = errorsOf(
      'storageClassMap:\n  local:\n    hostDir: /a\n    mountDir: /a\n    namePattern: "disk[,nvme*"\n    selector:\n    - matchExpressions:\n      - key: zone\n        operator: Inside\n',
    );
    assert.deepEqual(
      errors.map((e) => e.path),
      ['storageClassMap.local.namePattern', 'storageClassMap.local.selector[0].matchExpressions[0].operator'],
    );
  });

  it('reports every problem of a config together', () => {
    const errors = errorsOf(
      'storageClassMap:\n  a:\n    hostDir: relative/path\n    mountDir: /a\n  b:\n    mountDir: /b\n    volumeMode: Raw\n  c:\n    hostDir: /c\n    mountDir: /a\nuseNodeNameOnly: perhaps\n',
    );
    assert.deepEqual(errors.map((e) => e.path).sort(), [
      'storageClassMap.a.hostDir',
      'storageClassMap.b.hostDir',
      'storageClassMap.b.volumeMode',
      'useNodeNameOnly',
    ]);
  });

  it('the same discovery directory in two classes', () => {
    const errors = errorsOf(
      'storageClassMap:\n  a:\n    hostDir: /mnt/x\n    mountDir: /mnt/x\n  b:\n    hostDir: /mnt/x\n    mountDir: /mnt/y\n',
    );
    assert.deepEqual(
      errors.map((e) => e.path),
      ['storageClassMap.b.hostDir'],
    );
  });

  it('keys that differ only in case are a duplicate (upstream picks one at random)', () => {
    const errors = errorsOf(`useJobForCleaning: true\nusejobforcleaning: false\n${ONE_CLASS}`);
    assert.equal(first(errors).path, 'usejobforcleaning');
    assert.match(first(errors).message, /duplicate key/u);
  });

  it('positions inside a ConfigMap data string point at the manifest line', () => {
    const manifest =
      'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  storageClassMap: |\n    local:\n      hostDir: /a\n      mountDir: /a\n      volumeMode: Blok\n';
    const errors = errorsOf(manifest);
    assert.deepEqual(first(errors).position, { file: 'config.yaml', line: 10, column: 19 });
  });

  it('positions in a mounted directory point at the key file', () => {
    const snapshot = snapshotFromDirectoryFiles('/etc/provisioner/config', [
      { name: 'storageClassMap', text: 'local:\n  hostDir: /a\n  mountDir: /a\n  accessMode: ReadWriteOnse\n' },
    ]);
    try {
      parseConfigSnapshot(snapshot);
      assert.fail('expected rejection');
    } catch (err) {
      assert.ok(err instanceof InvalidConfigError);
      assert.deepEqual(first(err.issues).position, {
        file: '/etc/provisioner/config/storageClassMap',
        line: 4,
        column: 15,
      });
      assert.match(first(err.issues).message, /did you mean "ReadWriteOnce"\?/u);
    }
  });
});

describe('content hash', () => {
  let dir = '';
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'lvp-hash-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('is the same for a ConfigMap manifest, its mounted directory and a single YAML file', async () => {
    const manifest = await loadConfig(join(FIXTURES, 'upstream/helm-configmap.yaml'));
    const text = await readFile(join(FIXTURES, 'upstream/helm-configmap.yaml'), 'utf8');
    const data: Record<string, string> = {};
    const body = `${text.split('\n---\n')[1] ?? ''}\n`;
    for (const key of ['nodeLabelsForPV', 'labelsForPV', 'jobTolerations', 'storageClassMap']) {
      const match = new RegExp(`\\n  ${key}: \\| ?\\n((?:    .*\\n)+)`, 'u').exec(body);
      data[key] = (match?.[1] ?? '').replace(/^ {4}/gmu, '');
    }
    Object.assign(data, {
      setPVOwnerRef: 'true',
      useJobForCleaning: 'yes',
      useNodeNameOnly: 'true',
      minResyncPeriod: '1h30m',
    });
    const volume = join(dir, 'volume');
    await writeConfigMapVolume(volume, data);
    const fromDir = await loadConfig(volume);
    assert.equal(fromDir.source.kind, 'directory');
    assert.deepEqual(fromDir.config, manifest.config);
    assert.equal(fromDir.hash, manifest.hash);

    const single = parse(
      `storageClassMap:\n${Object.entries(manifest.config.storageClassMap)
        .map(([n, c]) => `  ${n}: ${JSON.stringify(c)}`)
        .join(
          '\n',
        )}\nuseJobForCleaning: on\nsetPVOwnerRef: yes\nuseNodeNameOnly: true\nminResyncPeriod: 90m\nlabelsForPV: {team: storage}\nnodeLabelsForPV: [topology.kubernetes.io/zone, kubernetes.io/hostname]\njobTolerations: [{key: dedicated, operator: Equal, value: storage, effect: NoSchedule}]\n`,
    );
    assert.equal(single.hash, manifest.hash);
  });

  it('differs when the meaning differs and not when only the layout does', () => {
    const a = parse(ONE_CLASS);
    const b = parse(
      'storageClassMap: {local: {mountDir: "/mnt/disks/", hostDir: /mnt/disks, namePattern: "*", volumeMode: Filesystem}}\n',
    );
    assert.equal(a.hash, b.hash);
    assert.notEqual(a.hash, parse(`${ONE_CLASS}    fsType: xfs\n`).hash);
    assert.match(a.hash, /^sha256:[0-9a-f]{64}$/u);
  });

  it('does not depend on key order or formatting (property)', () => {
    const classArb = fc.record({
      hostDir: fc.constantFrom('/mnt/a', '/mnt/b', '/dev/disk/by-id'),
      fsType: fc.constantFrom('', 'ext4', 'xfs'),
      volumeMode: fc.constantFrom('Filesystem', 'Block'),
      namePattern: fc.constantFrom('*', 'nvme-*', 'a*,b*'),
    });
    fc.assert(
      fc.property(
        fc.dictionary(fc.stringMatching(/^[a-z][a-z0-9-]{0,8}[a-z0-9]$/u), classArb, { minKeys: 1, maxKeys: 4 }),
        fc.boolean(),
        fc.boolean(),
        (classes, job, flow) => {
          const used = new Set<string>();
          const entries = Object.entries(classes).filter(([, c]) => !used.has(c.hostDir) && used.add(c.hostDir));
          const block = (order: 'forward' | 'reverse'): string => {
            const list = order === 'forward' ? entries : [...entries].reverse();
            const cls = list
              .map(([n, c]) => {
                const fields = [
                  `hostDir: ${c.hostDir}`,
                  `mountDir: ${c.hostDir}`,
                  `volumeMode: ${c.volumeMode}`,
                  `namePattern: "${c.namePattern}"`,
                  ...(c.fsType === '' ? [] : [`fsType: ${c.fsType}`]),
                ];
                if (order === 'reverse') fields.reverse();
                return flow ? `  ${n}: {${fields.join(', ')}}` : `  ${n}:\n${fields.map((f) => `    ${f}`).join('\n')}`;
              })
              .join('\n');
            const top = [`storageClassMap:\n${cls}`, `useJobForCleaning: ${job ? 'yes' : 'off'}`];
            if (order === 'reverse') top.reverse();
            return `${top.join('\n')}\n`;
          };
          const x = parse(block('forward'));
          const y = parse(block('reverse'));
          assert.equal(x.hash, y.hash);
          assert.equal(canonicalYaml(x.config), canonicalYaml(y.config));
        },
      ),
      { numRuns: 50 },
    );
  });
});

describe('deleteMissingAfter (the missing-disk policy)', () => {
  const withPolicy = (value: string) => `${ONE_CLASS}    deleteMissingAfter: ${value}\n`;

  it('is off by default and absent from the normalized class, so existing configs keep their hash', () => {
    const plain = parse(ONE_CLASS);
    assert.equal('deleteMissingAfter' in classOf(plain.config, 'local'), false);
    const zero = parse(withPolicy('0s'));
    assert.equal('deleteMissingAfter' in classOf(zero.config, 'local'), false);
    assert.equal(zero.hash, plain.hash);
    assert.deepEqual(zero.warnings, []);
    assert.equal(parse(withPolicy('"0"')).hash, plain.hash);
  });

  it('normalizes a Go duration, case-insensitively named like every field', () => {
    assert.equal(classOf(parse(withPolicy('90m')).config, 'local').deleteMissingAfter, '1h30m0s');
    assert.equal(classOf(parse(withPolicy('"1800s"')).config, 'local').deleteMissingAfter, '30m0s');
    const other = parse(`${ONE_CLASS}    deletemissingafter: 2h\n`);
    assert.equal(classOf(other.config, 'local').deleteMissingAfter, '2h0m0s');
    assert.notEqual(parse(withPolicy('30m')).hash, parse(ONE_CLASS).hash);
  });

  it('refuses what is no duration, naming file, line, column and field', () => {
    for (const [value, message] of [
      ['30', /expected a Go duration string such as 5m0s, found the number 30/u],
      ['30 minutes', /invalid duration "30 minutes"/u],
      ['-5m', /must not be negative, found -5m/u],
      ['[5m]', /expected a Go duration string such as 5m0s, found a list/u],
    ] as const) {
      const errors = errorsOf(withPolicy(value));
      assert.equal(errors.length, 1, `${value}: ${JSON.stringify(errors)}`);
      assert.equal(first(errors).path, 'storageClassMap.local.deleteMissingAfter');
      assert.match(first(errors).message, message);
      assert.deepEqual(first(errors).position, { file: 'config.yaml', line: 5, column: 25 });
    }
  });

  it('warns below a minute: a disk unmounted for a moment would lose its PV', () => {
    const loaded = parse(withPolicy('30s'));
    assert.equal(classOf(loaded.config, 'local').deleteMissingAfter, '30s');
    assert.deepEqual(
      loaded.warnings.map((w) => [w.path, w.position?.line]),
      [['storageClassMap.local.deleteMissingAfter', 5]],
    );
    assert.match(first(loaded.warnings).message, /shorter than a minute/u);
    assert.deepEqual(parse(withPolicy('1m')).warnings, []);
  });

  it('is a duration field of the catalogue, default 0s (never)', async () => {
    const { CLASS_FIELDS } = await import('../../../src/core/config/model.js');
    const field = CLASS_FIELDS.find((f) => f.name === 'deleteMissingAfter');
    assert.equal(field?.type, 'duration');
    assert.equal(field.defaultText, '0s (never)');
  });
});
