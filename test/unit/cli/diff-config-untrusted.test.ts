// diff-config as a process on input that used to be misread or to crash it (issue 12, items 1 and 10):
// exit 3 with `file:line:col: key.path: reason`, never a stack trace or exit 70; an empty flag is exit 2.
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { runCli } from '../../support/cli.js';
import type { CliResult } from '../../support/cli.js';

const CLASS = 'storageClassMap:\n  fast:\n    hostDir: /mnt/fast\n    mountDir: /mnt/fast\n';

describe('provisioner diff-config on untrusted input (process)', () => {
  let dir = '';
  const file = (name: string): string => join(dir, name);
  const diff = (to: string): Promise<CliResult> => runCli(['diff-config', '--from', file('a.yaml'), '--to', to]);
  const assertInvalid = (r: CliResult, to: string, line: string): void => {
    assert.equal(r.code, 3, r.stderr);
    const lines = r.stderr.split('\n');
    assert.match(lines[0] ?? '', new RegExp(`^error: invalid configuration in ${to} \\(1 problem\\)$`, 'u'));
    assert.ok(lines.includes(`  ${line}`), r.stderr);
    assert.doesNotMatch(r.stderr, /\n\s+at |Maximum call stack|Invalid string length|parseAllDocuments/u);
    assert.equal(r.stdout, '');
  };

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'lvp-diff-untrusted-'));
    await writeFile(file('a.yaml'), CLASS);
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('namePattern: *disk (an alias to no anchor) is exit 3 naming the line, field and fix, not "No differences"', async () => {
    await writeFile(file('alias.yaml'), `${CLASS}    namePattern: *disk\n`);
    const r = await diff(file('alias.yaml'));
    assertInvalid(
      r,
      file('alias.yaml'),
      `${file('alias.yaml')}:5:18: storageClassMap.fast.namePattern: *disk is a YAML alias, and no anchor &disk comes before it: YAML reads it as nothing, not as text; to mean the text "*disk", quote it: namePattern: "*disk"`,
    );
  });

  it('a key file with two YAML documents says so', async () => {
    const volume = file('two-docs');
    await mkdir(volume);
    await writeFile(join(volume, 'storageClassMap'), CLASS.replace('storageClassMap:\n', '').replace(/^ {2}/gmu, ''));
    await writeFile(join(volume, 'labelsForPV'), 'a: "1"\n---\nb: "2"\n');
    const r = await diff(volume);
    assertInvalid(
      r,
      volume,
      `${join(volume, 'labelsForPV')}:2:1: labelsForPV: more than one YAML document: a second one starts here (a "---" line separates documents); a config key holds one document`,
    );
  });

  it('100,000 levels of nesting are refused by name, not as a stack overflow', async () => {
    await writeFile(file('deep.yaml'), `${CLASS}labelsForPV: ${'['.repeat(100_000)}${']'.repeat(100_000)}\n`);
    const r = await diff(file('deep.yaml'));
    assertInvalid(
      r,
      file('deep.yaml'),
      `${file('deep.yaml')}:5:115: nesting deeper than 100 levels of lists and mappings`,
    );
  });

  it('an alias bomb is exit 3, not exit 70 "Invalid string length"', async () => {
    // Plain: 500 kB of quoted text would be refused before any alias (more than 256 KiB of quoted strings).
    const long = 'x'.repeat(500_000);
    await writeFile(
      file('bomb.yaml'),
      `x: &a ${long}\n${CLASS}    blockCleanerCommand: [${Array(1200).fill('*a').join(', ')}]\n`,
    );
    const r = await diff(file('bomb.yaml'));
    assertInvalid(
      r,
      file('bomb.yaml'),
      `${file('bomb.yaml')}:6:35: storageClassMap.fast.blockCleanerCommand[2]: the aliases up to here repeat more than 1048576 characters of YAML in all; write the values out instead of aliasing them so many times`,
    );
  });

  it('a NUL byte or 1 MB in hostDir, 900 kB of fsType: exit 3 with the reason', async () => {
    await writeFile(file('nul.yaml'), CLASS.replace('hostDir: /mnt/fast', 'hostDir: "/mnt/fa\\0st"'));
    assertInvalid(
      await diff(file('nul.yaml')),
      file('nul.yaml'),
      `${file('nul.yaml')}:3:14: storageClassMap.fast.hostDir: contains the control character U+0000 at character 8`,
    );
    await writeFile(file('long.yaml'), CLASS.replace('hostDir: /mnt/fast', `hostDir: /${'a/'.repeat(500_000)}`));
    assertInvalid(
      await diff(file('long.yaml')),
      file('long.yaml'),
      `${file('long.yaml')}:3:14: storageClassMap.fast.hostDir: is 1000001 bytes long; at most 4095 bytes are allowed`,
    );
    await writeFile(file('fstype.yaml'), `${CLASS}    fsType: ${'x'.repeat(900_000)}\n`);
    assertInvalid(
      await diff(file('fstype.yaml')),
      file('fstype.yaml'),
      `${file('fstype.yaml')}:5:13: storageClassMap.fast.fsType: is 900000 bytes long; at most 255 bytes are allowed`,
    );
  });

  it('a key of 30,000 entries (300 kB, under the byte limits) is exit 3: more YAML values than a config holds', async () => {
    const volume = file('many-values');
    await mkdir(volume);
    await writeFile(join(volume, 'storageClassMap'), Array.from({ length: 30_000 }, (_, i) => `k${i}: v`).join('\n'));
    const r = await diff(volume);
    // Three values a line (key, `:`, value): the 60,001st is the key of line 20001.
    assertInvalid(
      r,
      volume,
      `${join(volume, 'storageClassMap')}:20001:1: storageClassMap: more than 60000 YAML values (scalars, aliases, list items and mapping entries) in this source, the most one may hold: a config of 200 storage classes with node selectors holds about 12000, and this limit keeps a reload within about 60 MB of memory. To fit: share repeated settings with an anchor and aliases (selector: *zones, or <<: *defaults), which count once; or split the storage classes over several provisioner DaemonSets, each with its own ConfigMap`,
    );
  });

  it('--to "" is a usage error naming the flag', async () => {
    const r = await runCli(['diff-config', '--from', file('a.yaml'), '--to', '']);
    assert.equal(r.code, 2, r.stderr);
    assert.equal(
      r.stderr,
      'error: --to: must not be empty; give a config directory, YAML file or ConfigMap manifest\n',
    );
    const from = await runCli(['diff-config', '--from', '', '--to', file('a.yaml')]);
    assert.equal(from.code, 2, from.stderr);
    assert.match(from.stderr, /^error: --from: must not be empty/u);
  });
});
