// `provisioner run` starts without oclif (src/cli/run-lean.ts) when its command line is plain, and
// hands every other command line to oclif: help, flag errors, usage errors and exit codes are the
// same as oclif's own, byte for byte, and the agent that runs loads none of oclif's code.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseRunArgs } from '../../../src/cli/run-lean.js';
import { CLI, REPO_ROOT, runCli, type CliResult } from '../../support/cli.js';
import { waitFor } from '../../support/eventually.js';

/** The same command line through oclif alone (what bin/run.js did before the lean entry). */
function runOclif(args: readonly string[], env: NodeJS.ProcessEnv): Promise<CliResult> {
  const commands = pathToFileURL(join(REPO_ROOT, 'dist/src/cli/commands.js')).href;
  // bin/run.js before the lean entry: oclif reads process.argv (its help on an error does too).
  const script = `process.argv = [process.argv[0], ${JSON.stringify(CLI)}, ...${JSON.stringify(args)}]; const { execute } = await import(${JSON.stringify(commands)}); await execute({ dir: ${JSON.stringify(pathToFileURL(CLI).href)} });`;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
      cwd: REPO_ROOT,
      env: { ...process.env, NO_COLOR: undefined, FORCE_COLOR: undefined, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => {
      resolve({ code, stdout, stderr });
    });
  });
}

describe('provisioner run: the lean entry', () => {
  const dir = mkdtempSync(join(tmpdir(), 'lvp-run-lean-'));
  const file = join(dir, 'a-file');
  writeFileSync(file, 'x');
  after(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  const cases: { args: string[]; env?: NodeJS.ProcessEnv }[] = [
    { args: ['run', '--help'] },
    { args: ['run', '-h'] },
    { args: ['run', '--bogus'] },
    { args: ['run', 'extra-argument'] },
    { args: ['run', '--log-level', 'nope'] },
    { args: ['run', '--log-format=xml'] },
    { args: ['run', '--create-concurrency', '0'] },
    { args: ['run', '--kube-api-qps', 'many'] },
    { args: ['run', '--discovery-period', '5x'] },
    { args: ['run', '--discovery-period', '0s'] },
    { args: ['run', '--discovery-period'] },
    { args: ['run', '--metrics-path', 'metrics'] },
    { args: ['run', '--listen-address', '127.0.0.1:99999'] },
    { args: ['run', '--log-level', 'debug', '--log-level', 'info'] },
    { args: ['run', '--sandbox', ''] },
    { args: ['run', '--sandbox', file, '--listen-address', '127.0.0.1:0'] },
    { args: ['run', '--admin-socket='] },
    { args: ['run', '--config-source', 'secret:x'] },
    { args: ['run', '--config-source', 'configmap:a/b/c'] },
    { args: ['run', '--status-name', 'Not_A_Name'] },
    { args: ['run', '--status-heartbeat', 'soon'] },
    { args: ['run', '--no-publish-status', '--status-heartbeat', '0s'] },
    { args: ['run'], env: { MY_NODE_NAME: '' } },
    { args: ['run'], env: { MY_NODE_NAME: 'Bad_Node' } },
    { args: ['run'], env: { MY_NODE_NAME: 'node-1', PROVISIONER_RELOAD_GUARD: 'sometimes' } },
    {
      args: ['run', '--kubeconfig', join(dir, 'missing.kubeconfig'), '--listen-address', '127.0.0.1:0'],
      env: { MY_NODE_NAME: 'node-1' },
    },
  ];
  for (const c of cases) {
    it(`${c.args.join(' ')} ${JSON.stringify(c.env ?? {})}: the same output and exit code as oclif`, async () => {
      const env = { MY_NODE_NAME: 'node-1', ...c.env };
      const lean = await runCli(c.args, { env, timeoutMs: 30_000 });
      const oclif = await runOclif(c.args, env);
      assert.notEqual(lean.stdout + lean.stderr, '', 'says something');
      assert.deepEqual(lean, oclif);
    });
  }

  it('parses a plain command line itself, and leaves anything oclif must judge to oclif', () => {
    const flags = parseRunArgs(['--config-dir', '/c', '--create-concurrency=4', '--log-format', 'json'], {
      PROVISIONER_ADMIN_SOCKET: '/run/a.sock',
      KUBECONFIG: '',
    });
    assert.ok(flags);
    assert.equal(flags['config-dir'], '/c');
    assert.equal(flags['create-concurrency'], 4);
    assert.equal(flags['log-format'], 'json');
    assert.equal(flags['admin-socket'], '/run/a.sock', 'the env var of an absent flag');
    assert.equal(flags.kubeconfig, undefined, 'an empty env var is ignored, as oclif does');
    assert.equal(flags['discovery-period'], '10s');
    for (const argv of [
      ['--help'],
      ['--x'],
      ['-h'],
      ['--sandbox'],
      ['--log-level', 'loud'],
      ['--kube-api-qps', '-1'],
      ['--no-publish-status'],
      ['--publish-status'],
    ])
      assert.equal(parseRunArgs(argv, {}), undefined, argv.join(' '));
  });

  it('runs the agent without loading oclif', async () => {
    const sandbox = join(dir, 'sandbox');
    const hook = join(dir, 'record-modules.mjs');
    const record = join(dir, 'modules.txt');
    // Records every module URL the process loads, written when it exits.
    writeFileSync(
      hook,
      `import { registerHooks } from 'node:module'; import { writeFileSync } from 'node:fs';
const urls = [];
registerHooks({ resolve(s, c, next) { const r = next(s, c); urls.push(r.url); return r; } });
process.on('exit', () => writeFileSync(${JSON.stringify(record)}, [...urls, ...process.moduleLoadList].join('\\n')));`,
    );
    const child = spawn(
      process.execPath,
      ['--import', pathToFileURL(hook).href, CLI, 'run', '--sandbox', sandbox, '--listen-address', '127.0.0.1:0'],
      { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, MY_NODE_NAME: '' } },
    );
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
    try {
      await waitFor(() => stderr.includes('agent started'), 'the sandbox agent started', 30_000);
      child.kill('SIGTERM');
      assert.equal(await exited, 0, stderr);
      const loaded = readFileSync(record, 'utf8').split('\n');
      const files = loaded.filter((u) => u.startsWith('file:')).map((u) => fileURLToPath(u));
      assert.ok(
        files.some((f) => f.endsWith('dist/src/cli/run-lean.js')),
        files.join('\n'),
      );
      assert.ok(!files.some((f) => f.endsWith('dist/src/cli/commands.js')), 'the oclif entry is not loaded');
      const oclif = files.filter((f) => readFileSync(f, 'utf8').includes('node_modules/@oclif/core/'));
      assert.deepEqual(oclif, [], 'no bundled oclif code');
      // `import ... from 'node:http'` would build its ESM namespace and load undici (src/core/node-http.ts).
      assert.ok(!loaded.includes('NativeModule internal/deps/undici/undici'), 'undici is not loaded');
      // Loaded on first use (findmnt's watch, after the first pass), not at start-up (src/core/on-demand-builtins.ts).
      const imports = files.filter((f) => /from "node:(child_process|zlib)"/u.test(readFileSync(f, 'utf8')));
      assert.deepEqual(imports, [], 'no file `run` loads imports child_process or zlib');
      // One non-ASCII character makes V8 keep a whole file's source as UTF-16 (scripts/bundle.mjs).
      const nonAscii = files.filter(
        (f) => f.includes('/dist/src/cli/') && /[^\t\n\r\x20-\x7e]/u.test(readFileSync(f, 'utf8')),
      );
      assert.deepEqual(nonAscii, [], 'every bundled file `run` loads is ASCII');
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  });
});
