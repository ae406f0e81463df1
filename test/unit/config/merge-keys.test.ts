// YAML 1.1 merge keys (`<<: *defaults`), read as upstream's go-yaml v2 reads them: a ConfigMap that
// repeats one storage class's settings through a merge loads the same here as upstream.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { InvalidConfigError } from '../../../src/core/errors.js';
import type { ConfigIssue } from '../../../src/core/errors.js';
import type { ClassConfig, ProvisionerConfig } from '../../../src/core/config/model.js';
import { parseConfigSnapshot } from '../../../src/core/config/decode/parse.js';
import { snapshotFromDirectoryFiles, snapshotFromFileText } from '../../../src/core/config/decode/layout.js';

const DIR = '/etc/provisioner/config';

/** A mounted ConfigMap with one key, storageClassMap. */
function classMap(text: string): ProvisionerConfig {
  return parseConfigSnapshot(snapshotFromDirectoryFiles(DIR, [{ name: 'storageClassMap', text }])).config;
}

function issuesOf(text: string): readonly ConfigIssue[] {
  try {
    parseConfigSnapshot(snapshotFromDirectoryFiles(DIR, [{ name: 'storageClassMap', text }]));
  } catch (err) {
    if (err instanceof InvalidConfigError) return err.issues.filter((i) => i.severity === 'error');
    throw err;
  }
  assert.fail('expected the config to be rejected');
}

function classOf(config: ProvisionerConfig, name: string): ClassConfig {
  const c = config.storageClassMap[name];
  assert.ok(c, `no storage class ${name}`);
  return c;
}

const DEFAULTS = `fast-disks: &defaults
  hostDir: /mnt/fast-disks
  mountDir: /mnt/fast-disks
  blockCleanerCommand: ["/scripts/shred.sh", "2"]
  fsType: ext4
  namePattern: "nvme*"
`;

describe('YAML merge keys (<<)', () => {
  it('a class merges another class anchored &defaults, and keys after << replace the merged ones', () => {
    const config = classMap(`${DEFAULTS}slow-disks:\n  <<: *defaults\n  hostDir: /mnt/slow\n  mountDir: /mnt/slow\n`);
    const slow = classOf(config, 'slow-disks');
    assert.equal(slow.hostDir, '/mnt/slow');
    assert.equal(slow.mountDir, '/mnt/slow');
    assert.deepEqual(slow.blockCleanerCommand, ['/scripts/shred.sh', '2']);
    assert.equal(slow.fsType, 'ext4');
    assert.equal(slow.namePattern, 'nvme*');
    assert.equal(classOf(config, 'fast-disks').hostDir, '/mnt/fast-disks');
  });

  it('of a list of merged mappings the earlier ones win, as in go-yaml v2', () => {
    const text = `a: &a {hostDir: /mnt/a, mountDir: /mnt/a, fsType: xfs}
b: &b {hostDir: /mnt/b, mountDir: /mnt/b, fsType: ext4, namePattern: "sd*"}
c:
  <<: [*a, *b]
  hostDir: /mnt/c
  mountDir: /mnt/c
`;
    const c = classOf(classMap(text), 'c');
    assert.equal(c.fsType, 'xfs');
    assert.equal(c.namePattern, 'sd*');
    assert.equal(c.hostDir, '/mnt/c');
  });

  it('merges nest: an anchored mapping that merges another passes both on', () => {
    const text = `${DEFAULTS}xfs: &xfs\n  <<: *defaults\n  fsType: xfs\n  hostDir: /mnt/xfs\n  mountDir: /mnt/xfs\nlast:\n  <<: *xfs\n  hostDir: /mnt/last\n  mountDir: /mnt/last\n`;
    const last = classOf(classMap(text), 'last');
    assert.equal(last.fsType, 'xfs');
    assert.equal(last.namePattern, 'nvme*');
    assert.equal(last.hostDir, '/mnt/last');
  });

  it('an inline mapping can be merged, and merged label maps work too', () => {
    const config = parseConfigSnapshot(
      snapshotFromFileText(
        'config.yaml',
        `labelsForPV:\n  <<: {tier: gold, zone: a}\n  zone: b\nstorageClassMap:\n  local: {hostDir: /mnt/d, mountDir: /mnt/d}\n`,
      ),
    ).config;
    assert.deepEqual(config.labelsForPV, { tier: 'gold', zone: 'b' });
  });

  it('a key written before a << that also sets it is an error naming it (upstream and YAML 1.1 disagree)', () => {
    const errors = issuesOf(
      `${DEFAULTS}slow:\n  fsType: xfs\n  <<: *defaults\n  hostDir: /mnt/slow\n  mountDir: /mnt/slow\n`,
    );
    assert.equal(errors.length, 1, JSON.stringify(errors));
    const [e] = errors;
    assert.equal(e?.path, 'storageClassMap.slow.fsType');
    assert.match(e.message, /before the merge key \(<<\).*put "<<" first/u);
    assert.equal(e.position?.line, 8);
  });

  it('a << of anything but a mapping or a list of mappings is an error, also an alias of a list', () => {
    for (const value of ['/mnt/x', '*list', '[*defaults, /mnt/x]', '']) {
      const errors = issuesOf(`${DEFAULTS}l: &list [1, 2]\nslow:\n  <<: ${value}\n`);
      assert.ok(
        errors.some(
          (e) => e.path === 'storageClassMap.slow' && /takes a mapping or a list of mappings/u.test(e.message),
        ),
        `${value}: ${JSON.stringify(errors)}`,
      );
    }
  });

  it('a bad value that is merged is reported at the line where it is written', () => {
    const errors = issuesOf(`base: &b\n  hostDir: relative/dir\n  mountDir: /mnt/b\nother:\n  <<: *b\n`);
    assert.ok(errors.length >= 1);
    assert.ok(
      errors.every((e) => e.position?.line === 2),
      JSON.stringify(errors),
    );
  });

  it('a quoted "<<" is an ordinary key, as in go-yaml v2 (ignored with a warning, nothing merged)', () => {
    const { config, warnings } = parseConfigSnapshot(
      snapshotFromDirectoryFiles(DIR, [
        { name: 'storageClassMap', text: `${DEFAULTS}slow:\n  "<<": *defaults\n  hostDir: /s\n  mountDir: /s\n` },
      ]),
    );
    assert.equal(classOf(config, 'slow').fsType, '');
    assert.ok(
      warnings.some((i) => i.path === 'storageClassMap.slow.<<'),
      JSON.stringify(warnings),
    );
  });

  it('at the top of a single-file config, where the keys are ConfigMap keys, << is an error saying so', () => {
    const issues = (() => {
      try {
        parseConfigSnapshot(snapshotFromFileText('config.yaml', `d: &d {useJobForCleaning: true}\n<<: *d\n`));
      } catch (err) {
        if (err instanceof InvalidConfigError) return err.issues;
        throw err;
      }
      return [];
    })();
    assert.ok(issues.some((i) => /merge key \(<<\) is read inside the mappings/u.test(i.message)));
  });

  it('property: a class written through a merge loads the same as the class written out', () => {
    const fields = fc.record(
      {
        fsType: fc.constantFrom('ext4', 'xfs', '""'),
        namePattern: fc.constantFrom('"*"', '"sd*"', '"nvme*,sd*"'),
        accessMode: fc.constantFrom('ReadWriteOnce', 'ReadWriteOncePod'),
        blockCleanerCommand: fc.constantFrom('["/scripts/quick_reset.sh"]', '["/scripts/shred.sh", "2"]'),
      },
      { requiredKeys: [] },
    );
    const yamlOf = (record: Record<string, string>): string =>
      Object.entries(record)
        .map(([k, v]) => `  ${k}: ${v}\n`)
        .join('');
    const base = (defaults: Record<string, string>): string =>
      `base: &base\n  hostDir: /mnt/base\n  mountDir: /mnt/base\n${yamlOf(defaults)}`;
    fc.assert(
      fc.property(fields, fields, (defaults, own) => {
        const dirs = { hostDir: '/mnt/c', mountDir: '/mnt/c' };
        const merged = `${base(defaults)}c:\n  <<: *base\n${yamlOf({ ...dirs, ...own })}`;
        const writtenOut = `${base(defaults)}c:\n${yamlOf({ ...defaults, ...dirs, ...own })}`;
        assert.deepEqual(classOf(classMap(merged), 'c'), classOf(classMap(writtenOut), 'c'));
      }),
      { numRuns: 200 },
    );
  });
});
