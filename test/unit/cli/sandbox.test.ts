// The README's "try it without a cluster" story, as a user runs it: `provisioner run --sandbox`.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { appendFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { describe, it } from 'node:test';
import { AdminClient } from '../../../src/core/agent/admin-client.js';
import type { AgentStatusJson } from '../../../src/core/agent/reload-types.js';
import { CLI, runCli } from '../../support/cli.js';

async function eventually<T>(probe: () => Promise<T | undefined>, what: string, ms = 15_000): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > until) assert.fail(`timed out waiting for ${what}`);
    await delay(50);
  }
}

describe('provisioner run --sandbox', () => {
  it('publishes directories as volumes, reloads an edited config and answers `provisioner reload`', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'lvp-sandbox-'));
    const child = spawn(
      process.execPath,
      [CLI, 'run', '--sandbox', dir, '--listen-address', '127.0.0.1:0', '--config-debounce', '50ms'],
      {
        stdio: ['ignore', 'ignore', 'pipe'],
        env: { ...process.env, MY_NODE_NAME: '' },
      },
    );
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const exited = new Promise<number | null>((resolve) => {
      child.on('exit', (code) => {
        resolve(code);
      });
    });
    const client = new AdminClient(join(dir, 'admin.sock'), { timeoutMs: 5000 });
    const pvs = (s: AgentStatusJson): string[] =>
      s.classes.flatMap((c) => c.persistentVolumes.map((p) => p.path)).sort();
    try {
      const first = await eventually(async () => {
        const s = await client.status();
        return pvs(s).length === 2 ? s : undefined;
      }, 'the two sample volumes');
      assert.deepEqual(pvs(first), [join(dir, 'disks/local-storage/vol1'), join(dir, 'disks/local-storage/vol2')]);
      mkdirSync(join(dir, 'disks/local-storage/vol3'));
      await eventually(async () => (pvs(await client.status()).length === 3 ? true : undefined), 'vol3 published');
      appendFileSync(join(dir, 'config/storageClassMap'), '  fsType: ext4\n');
      const reloaded = await eventually(async () => {
        const s = await client.status();
        return s.generation === 2 ? s : undefined;
      }, 'the edited config applied');
      assert.equal(reloaded.lastReload?.outcome, 'applied');
      assert.deepEqual(
        reloaded.lastReload.changes.map((c) => c.path),
        ['storageClassMap.local-storage.fsType'],
      );
      const r = await runCli(['reload', '--admin-socket', join(dir, 'admin.sock')]);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /^No change: generation 2 already serves sha256:/u);
    } finally {
      child.kill('SIGTERM');
      assert.equal(await exited, 0, stderr);
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses a watched edit that orphans PVs; `provisioner reload --allow orphans-pvs` applies it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'lvp-sandbox-guard-'));
    const cls = (name: string): string => {
      const at = join(dir, 'disks', name);
      mkdirSync(join(at, 'vol1'), { recursive: true });
      return `${name}:\n  hostDir: ${at}\n  mountDir: ${at}\n`;
    };
    mkdirSync(join(dir, 'config'), { recursive: true });
    writeFileSync(join(dir, 'config/storageClassMap'), cls('fast') + cls('slow'));
    const socket = join(dir, 'admin.sock');
    const child = spawn(
      process.execPath,
      [CLI, 'run', '--sandbox', dir, '--listen-address', '127.0.0.1:0', '--config-debounce', '50ms'],
      { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, MY_NODE_NAME: '' } },
    );
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const exited = new Promise<number | null>((resolve) => {
      child.on('exit', (code) => {
        resolve(code);
      });
    });
    const client = new AdminClient(socket, { timeoutMs: 5000 });
    try {
      await eventually(async () => {
        const s = await client.status();
        return s.classes.every((c) => c.persistentVolumes.length === 1) && s.classes.length === 2 ? true : undefined;
      }, 'both classes published');
      writeFileSync(join(dir, 'config/storageClassMap'), cls('fast'));
      const refused = await eventually(async () => {
        const s = await client.status();
        return s.lastReload?.outcome === 'refused' ? s : undefined;
      }, 'the watched edit refused');
      assert.equal(refused.generation, 1);
      assert.deepEqual(refused.rejected?.needsAllow, ['orphans-pvs']);
      assert.equal(refused.classes.length, 2, 'the running config keeps both classes');
      assert.match(stderr, /config refused by the reload guard/u);

      const plain = await runCli(['reload', '--admin-socket', socket]);
      assert.equal(plain.code, 1, plain.stderr);
      assert.match(plain.stdout, /^Refused: a live reload that would orphan existing PVs \(storageClassMap\.slow\)/u);
      assert.match(plain.stdout, /provisioner reload --allow orphans-pvs/u);

      const bad = await runCli(['reload', '--admin-socket', socket, '--allow', 'orphans-pv']);
      assert.equal(bad.code, 2, bad.stderr);

      const allowed = await runCli(['reload', '--admin-socket', socket, '--allow', 'orphans-pvs']);
      assert.equal(allowed.code, 0, allowed.stderr);
      assert.match(allowed.stdout, /^Applied: generation 2 serves sha256:/u);
      const after = await client.status();
      assert.deepEqual(
        after.classes.map((c) => c.name),
        ['fast'],
      );
      assert.equal(after.rejected, undefined);
    } finally {
      child.kill('SIGTERM');
      assert.equal(await exited, 0, stderr);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
