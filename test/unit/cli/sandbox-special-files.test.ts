// A running agent (`provisioner run --sandbox`, the real process) whose config directory gets a FIFO,
// a /dev/zero symlink, a directory and a dangling ..data swapped in: each live reload fails at once
// naming the path, the running config and its PVs stay, memory does not grow, a later valid edit
// applies, and SIGTERM stops the process promptly. Timeouts are hang detectors, not timing assertions.
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import {
  appendFileSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  rmdirSync,
  symlinkSync,
} from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { AdminClient } from '../../../src/core/agent/admin-client.js';
import type { AgentStatusJson } from '../../../src/core/agent/reload-types.js';
import { CLI, runCli } from '../../support/cli.js';
import { eventuallyQuietly } from '../../support/eventually.js';

function rssKiB(pid: number): number {
  const line = /^VmRSS:\s+(\d+) kB$/mu.exec(readFileSync(`/proc/${String(pid)}/status`, 'utf8'));
  return Number(line?.[1] ?? Number.NaN);
}

describe('provisioner run --sandbox with special files swapped into its config', () => {
  it('fails each live reload without hanging or growing, keeps its config, applies a later edit, stops on SIGTERM', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'lvp-sandbox-special-'));
    const config = join(dir, 'config');
    const key = join(config, 'storageClassMap');
    const child = spawn(
      process.execPath,
      [CLI, 'run', '--sandbox', dir, '--listen-address', '127.0.0.1:0', '--config-debounce', '50ms'],
      { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, MY_NODE_NAME: '' } },
    );
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    let exitedAt = 0;
    const exited = new Promise<number | null>((resolve) => {
      child.on('exit', (code) => {
        exitedAt = Date.now();
        resolve(code);
      });
    });
    const pid = child.pid ?? assert.fail('no pid');
    const client = new AdminClient(join(dir, 'admin.sock'), { timeoutMs: 5000 });
    const pvs = (s: AgentStatusJson): number => s.classes.reduce((n, c) => n + c.persistentVolumes.length, 0);
    let seen: number | undefined;
    /** Waits for a reload after the last one seen and returns the status after it. */
    const nextReload = async (what: string): Promise<AgentStatusJson> => {
      const status = await eventuallyQuietly(
        async () => {
          const s = await client.status();
          return s.lastReload !== undefined && s.lastReload.startedAt !== seen ? s : undefined;
        },
        what,
        10_000,
      );
      seen = status.lastReload?.startedAt;
      return status;
    };
    try {
      const first = await eventuallyQuietly(
        async () => {
          const s = await client.status();
          return pvs(s) === 2 ? s : undefined;
        },
        'the two sample volumes',
        10_000,
      );
      assert.equal(first.generation, 1);
      seen = first.lastReload?.startedAt;
      const idle = rssKiB(pid);
      const sample = readFileSync(key, 'utf8');

      const swaps: readonly { readonly what: string; readonly swap: () => void; readonly error: RegExp }[] = [
        {
          what: 'a FIFO',
          swap: () => {
            execFileSync('mkfifo', [join(dir, 'fifo')]);
            renameSync(join(dir, 'fifo'), key);
          },
          error: /storageClassMap: is a FIFO \(named pipe\), not a regular file/u,
        },
        {
          what: 'a /dev/zero symlink',
          swap: () => {
            symlinkSync('/dev/zero', join(dir, 'zero'));
            renameSync(join(dir, 'zero'), key);
          },
          error: /storageClassMap -> \/dev\/zero: is a character device, not a regular file/u,
        },
        {
          what: 'a directory',
          swap: () => {
            rmSync(key);
            mkdirSync(key);
          },
          error: /storageClassMap: is a directory/u,
        },
        {
          what: 'a dangling ..data',
          swap: () => {
            rmdirSync(key);
            symlinkSync('..2026_12_01_gone', join(config, '..data'));
            symlinkSync('..data/storageClassMap', key);
          },
          error: /\.\.data: a dangling symlink \(to \.\.2026_12_01_gone\)/u,
        },
      ];
      for (const { what, swap, error } of swaps) {
        swap();
        const s = await nextReload(`the reload after ${what} was swapped in`);
        assert.equal(s.lastReload?.outcome, 'failed', `${what}: ${JSON.stringify(s.lastReload)}`);
        assert.match(s.lastReload.error ?? '', error, what);
        assert.equal(s.generation, 1, `${what}: the running config stays`);
        assert.equal(pvs(s), 2, `${what}: no PV orphaned`);
        // An explicit reload answers at once with the same verdict (it used to time out behind a FIFO).
        const r = await runCli(['reload', '--admin-socket', join(dir, 'admin.sock'), '--timeout', '5s'], {
          timeoutMs: 10_000,
        });
        assert.equal(r.code, 1, `${what}: reload exits 1 (not applied): ${JSON.stringify(r)}`);
        assert.match(`${r.stdout}${r.stderr}`, error, what);
        seen = (await client.status()).lastReload?.startedAt;
        const grown = rssKiB(pid) - idle;
        assert.ok(grown < 50 * 1024, `${what}: RSS grew by ${String(grown)} KiB`);
      }

      // Back to a valid config: the edit applies.
      rmSync(key);
      rmSync(join(config, '..data'));
      await writeFile(key, sample);
      appendFileSync(key, '  fsType: ext4\n');
      const applied = await eventuallyQuietly(
        async () => {
          const s = await client.status();
          return s.generation === 2 ? s : undefined;
        },
        'the valid edit applied',
        10_000,
      );
      assert.equal(applied.lastReload?.outcome, 'applied');
      assert.equal(pvs(applied), 2);
    } finally {
      const killedAt = Date.now();
      child.kill('SIGTERM');
      const hung = setTimeout(() => child.kill('SIGKILL'), 10_000);
      const code = await exited;
      clearTimeout(hung);
      assert.equal(code, 0, `SIGTERM stops it cleanly: ${stderr}`);
      assert.ok(exitedAt - killedAt < 10_000, 'stopped before the hang detector');
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
