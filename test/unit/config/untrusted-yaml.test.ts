// Issue 12, items 1 and 10: YAML that would be misread (an alias to no anchor), that would exhaust
// the stack, memory or time (deep nesting, alias bombs, many aliases), and values that cannot work.
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { InvalidConfigError, MAX_REPORTED_ISSUES } from '../../../src/core/errors.js';
import type { ConfigIssue } from '../../../src/core/errors.js';
import { parseConfigSnapshot } from '../../../src/core/config/decode/parse.js';
import { snapshotFromDirectoryFiles, snapshotFromFileText } from '../../../src/core/config/decode/layout.js';
import type { ConfigSnapshot, LoadedConfig } from '../../../src/core/config/source/port.js';
import {
  MAX_ALIAS_EXPANSION,
  MAX_CONFIG_YAML_VALUES,
  MAX_QUOTED_CHARS,
  MAX_YAML_DEPTH,
} from '../../../src/core/config/decode/yaml-node.js';

const FILE = 'config.yaml';
const DIR = '/etc/provisioner/config';

type Outcome =
  | { readonly ok: true; readonly loaded: LoadedConfig }
  | { readonly ok: false; readonly errors: readonly ConfigIssue[] };

function outcome(snapshot: ConfigSnapshot): Outcome {
  try {
    return { ok: true, loaded: parseConfigSnapshot(snapshot) };
  } catch (err) {
    if (err instanceof InvalidConfigError)
      return { ok: false, errors: err.issues.filter((i) => i.severity === 'error') };
    throw err;
  }
}

function accepted(text: string): LoadedConfig {
  const result = outcome(snapshotFromFileText(FILE, text));
  if (!result.ok) assert.fail(`expected the config to be accepted: ${JSON.stringify(result.errors)}`);
  return result.loaded;
}

function errorsOfSnapshot(snapshot: ConfigSnapshot): readonly ConfigIssue[] {
  const result = outcome(snapshot);
  if (result.ok) assert.fail('expected the config to be rejected');
  return result.errors;
}

const errorsOf = (text: string): readonly ConfigIssue[] => errorsOfSnapshot(snapshotFromFileText(FILE, text));
const keyErrors = (key: string, text: string): readonly ConfigIssue[] =>
  errorsOfSnapshot(snapshotFromDirectoryFiles(DIR, [{ name: key, text }]));

function only(errors: readonly ConfigIssue[]): ConfigIssue {
  assert.equal(errors.length, 1, JSON.stringify(errors));
  const [e] = errors;
  assert.ok(e);
  return e;
}

const CLASS = 'storageClassMap:\n  fast:\n    hostDir: /mnt/fast\n    mountDir: /mnt/fast\n';

describe('an alias to no anchor', () => {
  it('namePattern: *disk and fsType: *xfs are errors naming file, line, field and the fix', () => {
    const errors = errorsOf(`${CLASS}    namePattern: *disk\n    fsType: *xfs\n`);
    assert.deepEqual(
      errors.map((e) => [e.path, e.position]),
      [
        ['storageClassMap.fast.namePattern', { file: FILE, line: 5, column: 18 }],
        ['storageClassMap.fast.fsType', { file: FILE, line: 6, column: 13 }],
      ],
    );
    assert.match(errors[0]?.message ?? '', /^\*disk is a YAML alias, and no anchor &disk comes before it/u);
    assert.match(errors[0]?.message ?? '', /quote it: namePattern: "\*disk"$/u);
    assert.match(errors[1]?.message ?? '', /quote it: fsType: "\*xfs"$/u);
  });

  it('says when the anchor comes after the alias', () => {
    const e = only(errorsOf(`${CLASS}    fsType: *fs\nx: &fs ext4\n`));
    assert.match(e.message, /&fs comes after it; an anchor must come before its aliases/u);
  });

  it('is an error in a mounted key file and inside a ConfigMap data string, with the outer position', () => {
    const inKey = only(keyErrors('storageClassMap', 'fast:\n  hostDir: /a\n  mountDir: /a\n  namePattern: *disk\n'));
    assert.equal(inKey.path, 'storageClassMap.fast.namePattern');
    assert.deepEqual(inKey.position, { file: `${DIR}/storageClassMap`, line: 4, column: 16 });
    const manifest =
      'kind: ConfigMap\nmetadata: {name: c}\ndata:\n  storageClassMap: |\n    fast:\n      hostDir: /a\n      mountDir: /a\n      namePattern: *disk\n';
    const inData = only(errorsOf(manifest));
    assert.equal(inData.path, 'storageClassMap.fast.namePattern');
    assert.equal(inData.position?.line, 8);
  });

  it('a defined alias still works, and an alias inside its own anchor is an error', () => {
    const ok = accepted(`x: &p "nvme*"\n${CLASS}    namePattern: *p\n`);
    assert.equal(ok.config.storageClassMap['fast']?.namePattern, 'nvme*');
    const e = only(errorsOf(`nodeLabelsForPV: &l [a, *l]\n${CLASS}`));
    assert.equal(e.path, 'nodeLabelsForPV[1]');
    assert.match(e.message, /inside the value anchored &l, so it would contain itself/u);
  });

  it('any alias to an undefined anchor anywhere in any key is an error with its path and line (property)', () => {
    // Where the alias goes: [path under the key, the key's YAML with ALIAS in it, the line of ALIAS].
    const places: readonly (readonly [string, string, string, number])[] = [
      ['storageClassMap', 'fast.namePattern', 'fast:\n  hostDir: /a\n  mountDir: /a\n  namePattern: ALIAS\n', 4],
      ['storageClassMap', 'fast.hostDir', 'fast:\n  hostDir: ALIAS\n  mountDir: /a\n', 2],
      [
        'storageClassMap',
        'fast.blockCleanerCommand[1]',
        'fast:\n  hostDir: /a\n  mountDir: /a\n  blockCleanerCommand: [/x,\n    ALIAS]\n',
        5,
      ],
      [
        'storageClassMap',
        'fast.selector[0].matchExpressions[0].values[0]',
        'fast:\n  hostDir: /a\n  mountDir: /a\n  selector:\n  - matchExpressions:\n    - key: zone\n      operator: In\n      values:\n      - ALIAS\n',
        9,
      ],
      ['storageClassMap', 'fast.unknownKey', 'fast:\n  hostDir: /a\n  mountDir: /a\n  unknownKey: ALIAS\n', 4],
      ['storageClassMap', 'fast', 'fast: ALIAS\n', 1],
      ['labelsForPV', 'team', 'team: ALIAS\n', 1],
      ['nodeLabelsForPV', '[0]', '- ALIAS\n', 1],
      ['jobTolerations', '[0].value', '- key: a\n  operator: Equal\n  value: ALIAS\n', 3],
      ['minResyncPeriod', '', 'ALIAS\n', 1],
      ['useJobForCleaning', '', 'ALIAS\n', 1],
      ['provisionerNotReadyNodeTaintKey', '', 'ALIAS\n', 1],
    ];
    fc.assert(
      fc.property(
        fc.constantFrom(...places),
        fc.stringMatching(/^[A-Za-z][A-Za-z0-9_-]{0,12}$/u),
        fc.constantFrom('directory', 'manifest'),
        ([key, under, yaml, line], name, layout) => {
          const text = yaml.replace('ALIAS', `*${name}`);
          const expectedPath = under === '' ? key : under.startsWith('[') ? `${key}${under}` : `${key}.${under}`;
          let errors: readonly ConfigIssue[];
          let expectedLine = line;
          if (layout === 'directory') {
            errors = keyErrors(key, text);
          } else {
            const body = text
              .split('\n')
              .map((l) => (l === '' ? l : `    ${l}`))
              .join('\n');
            errors = errorsOf(`kind: ConfigMap\nmetadata: {name: c}\ndata:\n  ${key}: |\n${body}`);
            expectedLine += 4;
          }
          const e = errors.find((i) => i.message.startsWith(`*${name} is a YAML alias`));
          assert.ok(e, JSON.stringify(errors));
          assert.equal(e.path, expectedPath);
          assert.equal(e.position?.line, expectedLine);
          assert.match(e.message, /quote it/u);
        },
      ),
      { numRuns: 200 },
    );
  });
});

describe('YAML that would exhaust the stack, memory or time', () => {
  it(`nesting deeper than ${MAX_YAML_DEPTH} levels is refused by name, never as a stack overflow`, () => {
    for (const text of [
      `${'['.repeat(100_000)}${']'.repeat(100_000)}`,
      `${'{a: '.repeat(50_000)}1${'}'.repeat(50_000)}`,
      '- '.repeat(100_000),
    ]) {
      const e = only(keyErrors('labelsForPV', text));
      assert.equal(e.path, 'labelsForPV');
      assert.equal(e.message, `nesting deeper than ${MAX_YAML_DEPTH} levels of lists and mappings`);
      assert.equal(e.position?.line, 1);
    }
  });

  it(`${MAX_YAML_DEPTH} levels are fine, one more is not`, () => {
    const nested = (levels: number): string => `${CLASS}x: ${'['.repeat(levels - 1)}${']'.repeat(levels - 1)}\n`;
    accepted(nested(MAX_YAML_DEPTH));
    assert.match(only(errorsOf(nested(MAX_YAML_DEPTH + 1))).message, /nesting deeper than/u);
  });

  it('an alias bomb (billion laughs) is refused, whichever field it is in', () => {
    const levels = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]'];
    for (let i = 1; i < 9; i++) {
      const prev = String.fromCharCode(96 + i);
      const cur = String.fromCharCode(97 + i);
      levels.push(`${cur}: &${cur} [${Array(10).fill(`*${prev}`).join(',')}]`);
    }
    const e = only(errorsOf(`${levels.join('\n')}\n${CLASS}`));
    assert.match(e.message, new RegExp(`repeat more than ${MAX_ALIAS_EXPANSION} characters of YAML in all`, 'u'));
    assert.equal(typeof e.position?.line, 'number');
    // One long string repeated: each alias is cheap to parse, the expansion is not. (Plain, as written
    // in the file.)
    const long = 'x'.repeat(500_000);
    const big = only(
      errorsOf(`x: &a ${long}\n${CLASS}    blockCleanerCommand: [${Array(1200).fill('*a').join(', ')}]\n`),
    );
    assert.equal(big.path, 'storageClassMap.fast.blockCleanerCommand[2]');
  });

  it('many aliases resolve in linear time (the yaml package walks the whole document per alias)', () => {
    // As many aliases as MAX_CONFIG_YAML_VALUES allows (each `- *z` is two values; 15 more are around
    // them): well under a second when linear, about 10 s when quadratic (20,000 took 40 s).
    const aliases = Math.floor((MAX_CONFIG_YAML_VALUES - 15) / 2);
    const text = `x: &z zone\nnodeLabelsForPV:\n${'- *z\n'.repeat(aliases)}${CLASS}`;
    const started = performance.now();
    const loaded = accepted(text);
    const seconds = (performance.now() - started) / 1000;
    assert.equal(loaded.config.nodeLabelsForPV.length, aliases);
    assert.ok(seconds < 10, `took ${seconds.toFixed(1)} s`);
  });

  it('a YAML merge key (<<) merges the anchored mapping, as upstream reads it (test/unit/config/merge-keys)', () => {
    assert.equal(accepted(`d: &d {fsType: xfs}\n${CLASS}    <<: *d\n`).config.storageClassMap['fast']?.fsType, 'xfs');
  });

  it('two documents in one key say so', () => {
    const e = only(keyErrors('labelsForPV', 'a: "1"\n---\nb: "2"\n'));
    assert.equal(e.path, 'labelsForPV');
    assert.match(e.message, /^more than one YAML document: a second one starts here/u);
    assert.doesNotMatch(e.message, /parseAllDocuments/u);
    assert.equal(e.position?.line, 2);
  });

  const valuesMessage = `more than ${MAX_CONFIG_YAML_VALUES} YAML values (scalars, aliases, list items and mapping entries) in this source, the most one may hold: a config of 200 storage classes with node selectors holds about 12000, and this limit keeps a reload within about 60 MB of memory. To fit: share repeated settings with an anchor and aliases (selector: *zones, or <<: *defaults), which count once; or split the storage classes over several provisioner DaemonSets, each with its own ConfigMap`;

  it(`${MAX_CONFIG_YAML_VALUES} YAML values in a source are fine, one more is refused where it is`, () => {
    // CLASS is 10 values, `nodeLabelsForPV:` 2, each `- a` 2 (the indicator and the scalar).
    const labels = (n: number): string => `${CLASS}nodeLabelsForPV:\n${'- a\n'.repeat(n)}`;
    const fits = (MAX_CONFIG_YAML_VALUES - 12) / 2;
    assert.equal(accepted(labels(fits)).config.nodeLabelsForPV.length, fits);
    const e = only(errorsOf(labels(fits + 1)));
    assert.equal(e.message, valuesMessage);
    // The value one too many is the `-` of the last item.
    assert.deepEqual(e.position, { file: FILE, line: 5 + fits + 1, column: 1 });
  });

  it('the values of all keys of a mounted ConfigMap count together', () => {
    const storageClassMap = { name: 'storageClassMap', text: 'fast:\n  hostDir: /mnt/fast\n  mountDir: /mnt/fast\n' };
    // 40,000 and 45,000 values: each key is under the bound alone, not with the other.
    const nodeLabels = { name: 'nodeLabelsForPV', text: '- a\n'.repeat(20_000) };
    const labels = { name: 'labelsForPV', text: Array.from({ length: 15_000 }, (_, i) => `k${i}: v\n`).join('') };
    assert.ok(outcome(snapshotFromDirectoryFiles(DIR, [storageClassMap, nodeLabels])).ok);
    assert.ok(outcome(snapshotFromDirectoryFiles(DIR, [storageClassMap, labels])).ok);
    const e = only(errorsOfSnapshot(snapshotFromDirectoryFiles(DIR, [storageClassMap, nodeLabels, labels])));
    assert.equal(e.message, valuesMessage);
    assert.ok(e.path === 'nodeLabelsForPV' || e.path === 'labelsForPV', e.path);
    assert.equal(e.position?.file, `${DIR}/${e.path}`);
  });

  const quotedMessage = `more than ${MAX_QUOTED_CHARS} characters of quoted strings ('…' or "…") in this source, more than a ConfigMap can hold: write a whole key's YAML in a ConfigMap data value as a block scalar (|), not quoted`;

  it(`${MAX_QUOTED_CHARS} characters of quoted strings (a whole ConfigMap's worth) are fine, one more is refused where it is`, () => {
    // The command (7 characters), seven arguments of the longest allowed (128 KiB) and a last one fill the bound.
    const command = (last: number): string =>
      `${CLASS}    blockCleanerCommand: ["/bin/sh", ${Array(7)
        .fill(`"${'a'.repeat(131_072)}"`)
        .join(', ')}, '${'b'.repeat(last)}']\n`;
    const fits = MAX_QUOTED_CHARS - 7 - 7 * 131_072;
    assert.equal(accepted(command(fits)).config.storageClassMap['fast']?.blockCleanerCommand[8]?.length, fits);
    const text = command(fits + 1);
    const e = only(errorsOf(text));
    assert.equal(e.message, quotedMessage);
    const line = text.split('\n')[4] ?? '';
    assert.deepEqual(e.position, { file: FILE, line: 5, column: line.indexOf("'") + 1 });
  });

  it('a ConfigMap data value of more than 1 MiB is fine as a block scalar and refused, with the fix, when quoted', () => {
    const yaml = `fast:\n  hostDir: /mnt/fast\n  mountDir: /mnt/fast\n#${'x'.repeat(1_100_000)}\n`;
    const block = yaml
      .split('\n')
      .map((l) => (l === '' ? l : `    ${l}`))
      .join('\n');
    const manifest = (value: string): string =>
      `kind: ConfigMap\nmetadata: {name: c}\ndata:\n  storageClassMap: ${value}\n`;
    const ok = accepted(manifest(`|\n${block}`));
    assert.deepEqual(Object.keys(ok.config.storageClassMap), ['fast']);
    const e = only(errorsOf(manifest(JSON.stringify(yaml))));
    assert.equal(e.message, quotedMessage);
    assert.match(e.message, /block scalar \(\|\)/u);
    assert.deepEqual(e.position, { file: FILE, line: 4, column: 20 });
  });
});

describe('how many problems are reported', () => {
  it(`at most ${String(MAX_REPORTED_ISSUES)} errors are carried, and the message says how many there were`, () => {
    const classes = Array.from({ length: 300 }, (_, i) => `  c${String(i)}:\n    hostDir: relative${String(i)}\n`).join(
      '',
    );
    assert.throws(
      () => parseConfigSnapshot(snapshotFromDirectoryFiles(DIR, [{ name: 'storageClassMap', text: classes }])),
      (err: unknown) => {
        assert.ok(err instanceof InvalidConfigError);
        assert.equal(err.issues.filter((i) => i.severity === 'error').length, MAX_REPORTED_ISSUES);
        assert.match(err.message, /\((\d{3,}) problems; the first 100 are shown\)$/u);
        return true;
      },
    );
  });
});

describe('values that cannot work', () => {
  const classWith = (field: string, value: string): string => `${CLASS}    ${field}: ${JSON.stringify(value)}\n`;
  const classError = (field: string, value: string): ConfigIssue => {
    const e = only(errorsOf(classWith(field, value)));
    assert.equal(e.path, `storageClassMap.fast.${field}`);
    assert.deepEqual(e.position, { file: FILE, line: 5, column: 5 + field.length + 2 });
    return e;
  };

  it('hostDir and mountDir: no NUL or control characters, no unpaired surrogate, PATH_MAX and NAME_MAX', () => {
    const dirError = (value: string): string => {
      const e = only(
        errorsOf(`storageClassMap:\n  fast:\n    hostDir: ${JSON.stringify(value)}\n    mountDir: /mnt/fast\n`),
      );
      assert.equal(e.path, 'storageClassMap.fast.hostDir');
      assert.equal(e.position?.line, 3);
      return e.message;
    };
    assert.equal(dirError('/mnt/fa\0st'), 'contains the control character U+0000 at character 8');
    assert.equal(dirError('/mnt/a\nb'), 'contains the control character U+000A at character 7');
    assert.match(dirError('/mnt/\ud800'), /U\+D800 at character 6, half of a UTF-16 pair/u);
    const huge = only(errorsOf(`storageClassMap:\n  fast:\n    hostDir: /${'a/'.repeat(500_000)}\n    mountDir: /m\n`));
    assert.equal(huge.message, 'is 1000001 bytes long; at most 4095 bytes are allowed');
    assert.equal(huge.position?.line, 3);
    assert.match(
      dirError(`/mnt/${'a'.repeat(256)}`),
      /^the path component "a{64}"… \(256 bytes\) is longer than 255 bytes/u,
    );
    const longest = `/${'d'.repeat(255)}/${'e'.repeat(255)}`;
    const ok = accepted(`storageClassMap:\n  fast:\n    hostDir: ${longest}\n    mountDir: /m\n`);
    assert.equal(ok.config.storageClassMap['fast']?.hostDir, longest);
  });

  it('fsType: one word of at most 255 bytes; namePattern: no NUL, at most 64 KiB', () => {
    const long = only(errorsOf(`${CLASS}    fsType: ${'x'.repeat(900_000)}\n`));
    assert.deepEqual(
      [long.path, long.message],
      ['storageClassMap.fast.fsType', 'is 900000 bytes long; at most 255 bytes are allowed'],
    );
    assert.match(classError('fsType', 'ext 4').message, /contains a space/u);
    assert.match(classError('fsType', 'ext4\u0007').message, /U\+0007/u);
    assert.match(classError('namePattern', 'nvme*\0').message, /U\+0000 at character 6/u);
    assert.match(classError('namePattern', 'a'.repeat(65_537)).message, /at most 65536 bytes/u);
    assert.equal(accepted(classWith('fsType', 'fuse.sshfs')).config.storageClassMap['fast']?.fsType, 'fuse.sshfs');
  });

  it('blockCleanerCommand: no NUL, the command at most PATH_MAX, each argument at most MAX_ARG_STRLEN', () => {
    const errors = errorsOf(`${CLASS}    blockCleanerCommand: ["/bin/sh", "a\\0b", "${'x'.repeat(131_073)}"]\n`);
    assert.deepEqual(
      errors.map((e) => e.path),
      ['storageClassMap.fast.blockCleanerCommand[1]', 'storageClassMap.fast.blockCleanerCommand[2]'],
    );
    assert.match(errors[1]?.message ?? '', /at most 131072 bytes/u);
  });

  it('labelsForPV problems carry file and line; label, taint and toleration keys must be valid', () => {
    const errors = errorsOf(
      `${CLASS}labelsForPV:\n  "bad key": v\n  tier: "a b"\nnodeLabelsForPV: [zone, "no good"]\nprovisionerNotReadyNodeTaintKey: "x y"\njobTolerations:\n- key: "a b"\n  operator: Equal\n  value: "!!"\n`,
    );
    assert.deepEqual(
      errors.map((e) => [e.path, e.position?.line, e.position?.column]),
      [
        ['nodeLabelsForPV[1]', 8, 25],
        ['labelsForPV.bad key', 6, 3],
        ['labelsForPV.tier', 7, 9],
        ['jobTolerations[0].key', 11, 8],
        ['jobTolerations[0].value', 13, 10],
        ['provisionerNotReadyNodeTaintKey', 9, 34],
      ],
    );
  });

  it('every problem of a bad config carries its file and line', () => {
    const bad = [
      `${CLASS}labelsForPV: {"a b": "c d"}\n`,
      `${CLASS}    selector:\n    - matchExpressions:\n      - {key: zone, operator: In}\n      - {key: zone, operator: Exists, values: [a]}\n      - {key: n, operator: Gt, values: [1, 2]}\n    - {}\n`,
      `${CLASS}  b:\n    hostDir: /mnt/fast\n    mountDir: /mnt/fast/inner\n`,
      `${CLASS}useAlphaAPI: true\nremoveNodeNotReadyTaint: true\nuseJobForCleaning: maybe\n`,
    ];
    for (const text of bad) {
      let issues: readonly ConfigIssue[];
      try {
        issues = parseConfigSnapshot(snapshotFromFileText(FILE, text)).warnings;
      } catch (err) {
        if (!(err instanceof InvalidConfigError)) throw err;
        issues = err.issues;
      }
      assert.ok(issues.length > 0, text);
      for (const i of issues) assert.equal(typeof i.position?.line, 'number', `${i.path}: ${i.message}`);
    }
  });

  it('a key of half a megabyte makes no message of half a megabyte', () => {
    const loaded = accepted(`${CLASS}    ? ${'k'.repeat(500_000)}\n    : 1\n`);
    const warning = loaded.warnings.find((w) => w.message.startsWith('unknown key ignored'));
    assert.ok(warning, JSON.stringify(loaded.warnings.map((w) => w.message)));
    assert.ok(warning.path.length <= 257, `path of ${warning.path.length} characters`);
  });

  it('a source that failed to parse is not also said to configure no storage class', () => {
    try {
      parseConfigSnapshot(snapshotFromFileText(FILE, `labelsForPV: ${'['.repeat(200)}\n`));
      assert.fail('expected the config to be rejected');
    } catch (err) {
      if (!(err instanceof InvalidConfigError)) throw err;
      assert.deepEqual(
        err.issues.map((i) => i.message),
        [`nesting deeper than ${MAX_YAML_DEPTH} levels of lists and mappings`],
      );
    }
  });

  it('a discovery directory in two classes names the line of the second', () => {
    const e = only(
      errorsOf(
        'storageClassMap:\n  a:\n    hostDir: /mnt/x\n    mountDir: /mnt/x\n  b:\n    hostDir: /mnt/x/\n    mountDir: /mnt/y\n',
      ),
    );
    assert.equal(e.path, 'storageClassMap.b.hostDir');
    assert.deepEqual(e.position, { file: FILE, line: 6, column: 14 });
    assert.match(e.message, /also used by storage class a/u);
  });

  it('no value is accepted that could not work, and no message echoes a long value (property)', () => {
    const field = fc.constantFrom('hostDir', 'mountDir', 'fsType', 'namePattern', 'volumeMode', 'accessMode');
    const value = fc.oneof(
      fc.string({ unit: 'binary', maxLength: 40 }),
      fc.string({ unit: 'binary', minLength: 300, maxLength: 5000 }),
      fc.string({ unit: fc.constantFrom('a', '/', '\0', '\u0001', ' ', '\ud800'), maxLength: 300 }),
    );
    fc.assert(
      fc.property(field, value, (name, v) => {
        const text = `storageClassMap:\n  fast:\n    hostDir: /mnt/h\n    mountDir: /mnt/m\n    ${name}: ${JSON.stringify(v)}\n`;
        const result = outcome(snapshotFromFileText(FILE, text));
        if (!result.ok) {
          for (const e of result.errors) {
            assert.ok(e.message.length < 400, e.message);
            assert.equal(e.position?.file, FILE);
          }
          return;
        }
        const c = result.loaded.config.storageClassMap['fast'];
        assert.ok(c);
        for (const s of [c.hostDir, c.mountDir, c.fsType, c.namePattern]) {
          assert.ok(!s.includes('\0'), 'no NUL is accepted');
          assert.doesNotMatch(s, /\p{Cs}/u, 'no unpaired surrogate is accepted');
        }
        for (const dir of [c.hostDir, c.mountDir]) {
          assert.doesNotMatch(dir, /\p{Cc}/u);
          assert.ok(Buffer.byteLength(dir) <= 4095);
        }
        assert.ok(Buffer.byteLength(c.fsType) <= 255);
      }),
      { numRuns: 300 },
    );
  });
});
