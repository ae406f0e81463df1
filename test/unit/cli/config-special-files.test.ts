// Special files, oversized files and unreadable layouts as config, through the real CLI: diff-config,
// simulate (plan and scenario) and `run --sandbox` start-up give the same verdict for the same
// layout, name the path, print no stack trace and do not hang (timeoutMs kills a hung process; it is
// a hang detector, not a timing assertion).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { REPO_ROOT, runCli, type CliResult } from '../../support/cli.js';

const HANG_MS = 10_000;
const BASIC = join(REPO_ROOT, 'test/fixtures/simulate/basic');
const CLASS = 'fast:\n  hostDir: /mnt/fast\n  mountDir: /mnt/fast\n';
const env = { MY_NODE_NAME: '', JOB_CONTAINER_IMAGE: '', KUBECONFIG: '' };

interface Layout {
  readonly name: string;
  /** Creates the layout as the config directory `dir`. */
  readonly make: (dir: string) => Promise<void>;
  readonly exitCode: 3 | 4;
  /** What the message says; `at` is a pattern for the config directory it names. */
  readonly reason: (at: string) => RegExp;
}

const quote = (text: string): string => text.replace(/[.*+?^${}()|[\]\\/]/gu, '\\$&');

const LAYOUTS: readonly Layout[] = [
  {
    name: 'a FIFO key',
    make: async (dir) => {
      await mkdir(dir);
      execFileSync('mkfifo', [join(dir, 'storageClassMap')]);
    },
    exitCode: 4,
    reason: (at) => new RegExp(`${at}/storageClassMap: is a FIFO \\(named pipe\\), not a regular file`, 'u'),
  },
  {
    name: 'a key linked to /dev/zero',
    make: async (dir) => {
      await mkdir(dir);
      await symlink('/dev/zero', join(dir, 'storageClassMap'));
    },
    exitCode: 4,
    reason: (at) => new RegExp(`${at}/storageClassMap -> /dev/zero: is a character device`, 'u'),
  },
  {
    name: 'a directory key',
    make: async (dir) => {
      await mkdir(join(dir, 'storageClassMap'), { recursive: true });
    },
    exitCode: 4,
    reason: (at) => new RegExp(`${at}/storageClassMap: is a directory`, 'u'),
  },
  {
    name: 'a dangling ..data',
    make: async (dir) => {
      await mkdir(dir);
      await symlink('..2026_12_01_gone', join(dir, '..data'));
      await symlink('..data/storageClassMap', join(dir, 'storageClassMap'));
    },
    exitCode: 4,
    reason: (at) => new RegExp(`${at}/\\.\\.data: a dangling symlink \\(to \\.\\.2026_12_01_gone\\)`, 'u'),
  },
  {
    name: 'a key over 1 MiB',
    make: async (dir) => {
      await mkdir(dir);
      await writeFile(join(dir, 'storageClassMap'), `${CLASS}#${'x'.repeat(1024 * 1024)}\n`);
    },
    exitCode: 3,
    reason: (at) => new RegExp(`${at}/storageClassMap: storageClassMap: is larger than 1 MiB`, 'u'),
  },
  {
    name: 'a key that is not UTF-8',
    make: async (dir) => {
      await mkdir(dir);
      await writeFile(
        join(dir, 'storageClassMap'),
        Buffer.concat([Buffer.from(CLASS), Buffer.from('  fsType: \xff\n', 'latin1')]),
      );
    },
    exitCode: 3,
    reason: (at) => new RegExp(`${at}/storageClassMap:4:11: storageClassMap: is not valid UTF-8: byte 0xff`, 'u'),
  },
];

function assertVerdict(r: CliResult, layout: Layout, at: string, what: string): void {
  const context = `${what}: ${JSON.stringify(r)}`;
  assert.notEqual(r.code, null, `${what}: killed after ${String(HANG_MS)} ms (hung)`);
  assert.equal(r.code, layout.exitCode, context);
  assert.match(r.stderr, layout.reason(at), context);
  assert.doesNotMatch(r.stderr, /^\s+at /mu, `${what}: no stack trace`);
  assert.doesNotMatch(r.stderr, /Invalid string length|ENOENT|EISDIR/u, `${what}: no internals`);
}

describe('special files and unreadable layouts as config (process)', () => {
  let root = '';
  let n = 0;
  const fresh = (name: string): string => join(root, `${name.replace(/\W+/gu, '-')}-${String(n++)}`);

  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'lvp-special-cli-'));
    await writeFile(join(root, 'from.yaml'), `storageClassMap: |\n${CLASS.replace(/^/gmu, '  ')}`);
  });
  after(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it('simulate: a FIFO or a device as a scenario or fixture file exits 4 naming it, without hanging', async () => {
    const fifo = fresh('fifo.yaml');
    execFileSync('mkfifo', [fifo]);
    const scenario = await runCli(['simulate', '--scenario', fifo], { env, timeoutMs: HANG_MS });
    assert.notEqual(scenario.code, null, 'hung');
    assert.equal(scenario.code, 4, JSON.stringify(scenario));
    assert.match(
      scenario.stderr,
      new RegExp(`^error: ${quote(fifo)}: is a FIFO \\(named pipe\\), not a regular file`, 'mu'),
    );
    const fixture = await runCli(
      [
        'simulate',
        '--config',
        join(BASIC, 'config.yaml'),
        '--node-facts',
        '/dev/zero',
        '--cluster',
        join(BASIC, 'cluster.yaml'),
      ],
      { env, timeoutMs: HANG_MS },
    );
    assert.equal(fixture.code, 4, JSON.stringify(fixture));
    assert.match(fixture.stderr, /^error: \/dev\/zero: is a character device, not a regular file/mu);
  });

  for (const layout of LAYOUTS) {
    it(`diff-config: ${layout.name} exits ${String(layout.exitCode)} naming the path`, async () => {
      const dir = fresh(layout.name);
      await layout.make(dir);
      const r = await runCli(['diff-config', '--from', join(root, 'from.yaml'), '--to', dir], { timeoutMs: HANG_MS });
      assertVerdict(r, layout, quote(dir), 'diff-config');
      assert.equal(r.stdout, '', 'no diff printed');
    });

    it(`simulate: ${layout.name} exits ${String(layout.exitCode)} as a plan's config, 3 in a scenario`, async () => {
      const dir = fresh(layout.name);
      await layout.make(dir);
      const plan = await runCli(
        [
          'simulate',
          '--config',
          dir,
          '--node-facts',
          join(BASIC, 'node.yaml'),
          '--cluster',
          join(BASIC, 'cluster.yaml'),
          '--job-image',
          'x',
        ],
        { env, timeoutMs: HANG_MS },
      );
      assertVerdict(plan, layout, quote(dir), 'simulate plan');
      // A scenario whose config cannot be read is an invalid scenario (exit 3). It names the config's
      // problems as its timeline does (`config/<key>` for a problem of a key, as for any invalid key).
      const scenario = join(root, `${String(n++)}.scenario.yaml`);
      await writeFile(scenario, `name: t\nconfig: ${dir}\nsteps:\n  - claim bound: disk1\n`);
      const replay = await runCli(['simulate', '--scenario', scenario], { env, timeoutMs: HANG_MS });
      assertVerdict(replay, { ...layout, exitCode: 3 }, `(?:${quote(dir)}|config)`, 'simulate scenario');
    });

    it(`run --sandbox: ${layout.name} fails start-up with exit ${String(layout.exitCode)}`, async () => {
      const sandbox = fresh(layout.name);
      await mkdir(sandbox);
      await layout.make(join(sandbox, 'config'));
      const r = await runCli(['run', '--sandbox', sandbox, '--listen-address', '127.0.0.1:0'], {
        env,
        timeoutMs: HANG_MS,
      });
      assertVerdict(r, layout, quote(join(sandbox, 'config')), 'run --sandbox');
    });
  }
});
