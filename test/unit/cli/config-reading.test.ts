// Values read exactly as upstream reads them, through the real CLI process: date-like and tagged
// scalars, numbers and booleans in string fields (upstream's value, with a warning), errors that
// quote the text as written, ".." in discovery paths, and configs of realistic size.
// The table of upstream's decoding these follow is test/unit/config/go-yaml.test.ts.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { appendFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { AdminClient } from '../../../src/core/agent/admin-client.js';
import { CLI, runCli } from '../../support/cli.js';
import { eventually } from '../../support/eventually.js';

const BASIC = 'test/fixtures/simulate/basic';

interface DiffJson {
  readonly identical: boolean;
  readonly changes: readonly { readonly path: string; readonly before: unknown; readonly after: unknown }[];
  readonly warnings: readonly { readonly path: string; readonly message: string; readonly line?: number }[];
}

describe('config values as upstream reads them (process)', () => {
  let root = '';
  /** A directory config (one file per key, as a mounted ConfigMap) with a class `fast` whose extra lines are `extra`. */
  const config = (name: string, extra = '', keys: Readonly<Record<string, string>> = {}): string => {
    const dir = join(root, name);
    mkdirSync(dir);
    writeFileSync(join(dir, 'storageClassMap'), `fast:\n  hostDir: /mnt/fast\n  mountDir: /mnt/fast\n${extra}`);
    for (const [key, text] of Object.entries(keys)) writeFileSync(join(dir, key), text);
    return dir;
  };
  const diff = async (from: string, to: string): Promise<DiffJson> => {
    const r = await runCli(['diff-config', '--from', from, '--to', to, '-o', 'json']);
    assert.ok(r.code === 0 || r.code === 1, r.stderr + r.stdout);
    return JSON.parse(r.stdout) as DiffJson;
  };
  let plain = '';

  before(() => {
    root = mkdtempSync(join(tmpdir(), 'lvp-config-reading-'));
    plain = config('plain');
  });
  after(() => {
    rmSync(root, { recursive: true, force: true });
  });

  it('keeps date-like plain scalars as written in every string field (they were dropped)', async () => {
    const dated = config('dated', '  namePattern: 2001-12-14\n  fsType: 2001-12-14T21:59:43.10-05:00\n', {
      nodeLabelsForPV: '- 2001-12-14\n',
      labelsForPV: 'release: 2001-12-14\n',
      jobTolerations: '- key: day\n  operator: Equal\n  value: 2001-12-14\n',
    });
    const d = await diff(plain, dated);
    const changed = new Map(d.changes.map((c) => [c.path, c.after]));
    assert.equal(changed.get('storageClassMap.fast.namePattern'), '2001-12-14');
    assert.equal(changed.get('storageClassMap.fast.fsType'), '2001-12-14T21:59:43.10-05:00');
    assert.deepEqual(changed.get('nodeLabelsForPV'), ['2001-12-14']);
    assert.deepEqual(changed.get('labelsForPV'), { release: '2001-12-14' });
    assert.deepEqual(changed.get('jobTolerations'), [{ key: 'day', operator: 'Equal', value: '2001-12-14' }]);
    assert.deepEqual(d.warnings, [], 'the text as written is upstream value too: nothing to warn about');
  });

  it("gives a string field upstream's value for a number or boolean, and warns naming the field and the quotes", async () => {
    const numbers = config('numbers', '  fsType: 0755\n  blockCleanerCommand: [/scripts/x.sh, 1e6, 1:20, yes, 0o17]\n');
    const d = await diff(plain, numbers);
    const changed = new Map(d.changes.map((c) => [c.path, c.after]));
    assert.equal(changed.get('storageClassMap.fast.fsType'), '493');
    assert.deepEqual(changed.get('storageClassMap.fast.blockCleanerCommand'), [
      '/scripts/x.sh',
      '1e+06',
      '1:20',
      'true',
      '15',
    ]);
    const warned = new Map(d.warnings.map((w) => [w.path, w.message]));
    assert.match(
      warned.get('storageClassMap.fast.fsType') ?? '',
      /reads "0755" as a number, so the value is "493" .*quote it to keep "0755"/u,
    );
    assert.match(warned.get('storageClassMap.fast.blockCleanerCommand[1]') ?? '', /"1e6" .* "1e\+06"/u);
    assert.match(warned.get('storageClassMap.fast.blockCleanerCommand[3]') ?? '', /"yes" as a boolean/u);
    assert.equal(warned.has('storageClassMap.fast.blockCleanerCommand[2]'), false, '1:20 stays text, as upstream');
    // The text output says it too, on stderr.
    const text = await runCli(['diff-config', '--from', plain, '--to', numbers]);
    assert.match(text.stderr, /^warning: .*storageClassMap:4:11: storageClassMap\.fast\.fsType: .*quote it/mu);
  });

  it('decodes explicit tags as upstream does: !!binary, !!str, !!int; a tag upstream refuses is an error', async () => {
    const tagged = config('tagged', '  fsType: !!binary ZXh0NA==\n  namePattern: !!str 0755\n', {
      jobTolerations: '- key: t\n  operator: Exists\n  tolerationSeconds: !!int 0x10\n',
    });
    const d = await diff(plain, tagged);
    const changed = new Map(d.changes.map((c) => [c.path, c.after]));
    assert.equal(changed.get('storageClassMap.fast.fsType'), 'ext4');
    assert.equal(changed.get('storageClassMap.fast.namePattern'), '0755');
    assert.deepEqual(changed.get('jobTolerations'), [{ key: 't', operator: 'Exists', tolerationSeconds: 16 }]);
    // !!binary hostDir reads as the decoded path (it used to say "missing hostDir").
    const binaryDir = join(root, 'binary-dir');
    mkdirSync(binaryDir);
    writeFileSync(
      join(binaryDir, 'storageClassMap'),
      `fast:\n  hostDir: !!binary ${Buffer.from('/mnt/fast').toString('base64')}\n  mountDir: /mnt/fast\n`,
    );
    assert.equal((await diff(plain, binaryDir)).identical, true);

    const refused = config('refused', '  fsType: !!int abc\n  namePattern: !!binary not-base64!\n');
    const r = await runCli(['diff-config', '--from', plain, '--to', refused]);
    assert.equal(r.code, 3, r.stderr);
    assert.match(
      r.stderr,
      /storageClassMap:4:17: storageClassMap\.fast\.fsType: cannot decode !!str `abc` as a !!int/u,
    );
    assert.match(
      r.stderr,
      /storageClassMap:5:25: storageClassMap\.fast\.namePattern: !!binary value contains invalid base64/u,
    );
    assert.doesNotMatch(r.stderr, /\n\s+at /u, 'no stack trace');
  });

  it('a field that needs a boolean, number or duration quotes the text as written', async () => {
    const wrong = config('wrong', '', {
      useJobForCleaning: '2001-12-14\n',
      minResyncPeriod: '0755\n',
      jobTolerations: '- key: t\n  operator: Exists\n  tolerationSeconds: 1e999999\n',
    });
    const r = await runCli(['diff-config', '--from', plain, '--to', wrong]);
    assert.equal(r.code, 3, r.stderr);
    assert.match(
      r.stderr,
      /useJobForCleaning: expected a boolean \(true\/false, yes\/no, on\/off\), found the text "2001-12-14"/u,
    );
    assert.match(r.stderr, /minResyncPeriod: expected a Go duration string such as 5m0s, found the number 0755/u);
    assert.match(r.stderr, /tolerationSeconds: expected an integer, found the text "1e999999"/u);
    assert.doesNotMatch(r.stderr, /undefined|Infinity/u);
  });

  it('refuses ".." in hostDir and mountDir with the path it would become, at file:line:column', async () => {
    const dotdot = join(root, 'dotdot');
    mkdirSync(dotdot);
    writeFileSync(join(dotdot, 'storageClassMap'), 'fast:\n  hostDir: /mnt/../etc\n  mountDir: /mnt/fast\n');
    const r = await runCli(['diff-config', '--from', plain, '--to', dotdot]);
    assert.equal(r.code, 3, r.stderr);
    assert.match(
      r.stderr,
      /storageClassMap:2:12: storageClassMap\.fast\.hostDir: "\/mnt\/\.\.\/etc" has a "\.\." segment, which would make it "\/etc"/u,
    );
  });

  it('simulate reads the same values and shows the same warnings', async () => {
    const file = join(root, 'simulate.yaml');
    writeFileSync(
      file,
      'storageClassMap:\n  fast:\n    hostDir: /mnt/fast\n    mountDir: /mnt/fast\n    namePattern: 2001-12-14\n    fsType: 0755\n',
    );
    const r = await runCli(
      ['simulate', '--config', file, '--node-facts', `${BASIC}/node.yaml`, '--cluster', `${BASIC}/cluster.yaml`],
      { timeoutMs: 60_000 },
    );
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr + r.stdout, /fsType: YAML 1\.1 reads "0755" as a number, so the value is "493"/u);
    const json = await runCli(
      [
        'simulate',
        '--config',
        file,
        '--node-facts',
        `${BASIC}/node.yaml`,
        '--cluster',
        `${BASIC}/cluster.yaml`,
        '-o',
        'json',
      ],
      { timeoutMs: 60_000 },
    );
    assert.equal(json.code, 0, json.stderr);
    assert.match(json.stdout, /"namePattern": "2001-12-14"|2001-12-14/u);
  });

  it('loads a realistic large ConfigMap: 900 KiB with quoted strings, and 7,000 classes', async () => {
    const quoted = join(root, 'quoted');
    mkdirSync(quoted);
    let text = '';
    for (let i = 0; text.length < 900 * 1024; i++) {
      text += `c${String(i)}:\n  hostDir: "/mnt/c${String(i)}"\n  mountDir: "/mnt/c${String(i)}"\n  blockCleanerCommand: ["/scripts/shred.sh", "${'x'.repeat(200)}"]\n`;
    }
    writeFileSync(join(quoted, 'storageClassMap'), text);
    const q = await runCli(['diff-config', '--from', quoted, '--to', quoted], { timeoutMs: 120_000 });
    assert.equal(q.code, 0, q.stderr);
    assert.match(q.stdout, /^No differences/u);

    const many = join(root, 'many');
    mkdirSync(many);
    writeFileSync(
      join(many, 'storageClassMap'),
      Array.from(
        { length: 7000 },
        (_, i) => `c${String(i)}:\n  hostDir: /mnt/c${String(i)}\n  mountDir: /mnt/c${String(i)}\n`,
      ).join(''),
    );
    const m = await runCli(['diff-config', '--from', plain, '--to', many, '-o', 'json'], { timeoutMs: 120_000 });
    assert.equal(m.code, 1, m.stderr);
    // 8 MB of JSON through a pipe, whole (an exit with differences used to cut it at 64 KiB).
    assert.ok(m.stdout.length > 1_000_000, String(m.stdout.length));
    assert.equal((JSON.parse(m.stdout) as DiffJson).changes.length, 7001, '7,000 classes added, fast removed');
  });

  it('a live agent applies the values upstream reads and reports the warnings in the reload result', async () => {
    const dir = join(root, 'sandbox');
    const child = spawn(
      process.execPath,
      [CLI, 'run', '--sandbox', dir, '--listen-address', '127.0.0.1:0', '--config-debounce', '50ms'],
      {
        stdio: ['ignore', 'ignore', 'pipe'],
        env: { ...process.env, MY_NODE_NAME: '', PROVISIONER_CONFIG_DIR: undefined },
      },
    );
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
    try {
      const client = new AdminClient(join(dir, 'admin.sock'), { timeoutMs: 5000 });
      await eventually(
        async () => ((await client.status().catch(() => undefined))?.generation === 1 ? true : undefined),
        'generation 1',
      );
      const key = join(dir, 'config/storageClassMap');
      const before = readFileSync(key, 'utf8');
      appendFileSync(key, '  fsType: 0755\n  namePattern: 2001-12-14\n');
      const applied = await eventually(async () => {
        const st = await client.status();
        return st.generation === 2 ? st : undefined;
      }, 'the edit applied');
      const result = applied.lastReload;
      assert.equal(result?.outcome, 'applied');
      const warning = result.issues.find((i) => i.path === 'storageClassMap.local-storage.fsType');
      assert.match(warning?.message ?? '', /reads "0755" as a number, so the value is "493".*quote it/u);
      const { config } = await client.config();
      const local = config.storageClassMap['local-storage'];
      assert.ok(local);
      assert.equal(local.fsType, '493');
      assert.equal(local.namePattern, '2001-12-14');

      // A broken tag is rejected; the agent keeps serving generation 2.
      writeFileSync(key, `${before}  fsType: !!int ext4\n`);
      const rejected = await eventually(async () => {
        const st = await client.status();
        return st.lastReload?.outcome === 'rejected' ? st : undefined;
      }, 'the broken edit rejected');
      assert.equal(rejected.generation, 2);
      assert.match(JSON.stringify(rejected.lastReload?.issues), /cannot decode !!str `ext4` as a !!int/u);
      const r = await runCli(['reload', '--admin-socket', join(dir, 'admin.sock')]);
      assert.equal(r.code, 1, r.stderr);
      assert.match(r.stdout, /^Rejected: .*storageClassMap:\d+:\d+: .*cannot decode !!str `ext4` as a !!int/su);
    } finally {
      child.kill('SIGTERM');
      assert.equal(await exited, 0, stderr);
    }
  });
});
