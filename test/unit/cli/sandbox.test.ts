// The README's "try it without a cluster" story, as a user runs it: `provisioner run --sandbox`.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { appendFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { AdminClient } from '../../../src/core/agent/admin-client.js';
import type { AgentStatusJson } from '../../../src/core/agent/reload-types.js';
import { CLI, runCli } from '../../support/cli.js';
import { eventuallyQuietly as eventually } from '../../support/eventually.js';

interface Sandbox {
  readonly client: AdminClient;
  readonly stderr: () => string;
  /** SIGTERM, then asserts a clean exit. */
  stop(): Promise<void>;
}

function startSandbox(args: readonly string[], env: NodeJS.ProcessEnv = {}): Sandbox {
  const sandbox = args[args.indexOf('--sandbox') + 1] ?? '';
  const child = spawn(process.execPath, [CLI, 'run', '--listen-address', '127.0.0.1:0', ...args], {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, MY_NODE_NAME: '', PROVISIONER_CONFIG_DIR: undefined, ...env },
  });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const exited = new Promise<number | null>((resolve) => {
    child.on('exit', (code) => {
      resolve(code);
    });
  });
  return {
    client: new AdminClient(join(sandbox, 'admin.sock'), { timeoutMs: 5000 }),
    stderr: () => stderr,
    stop: async () => {
      child.kill('SIGTERM');
      assert.equal(await exited, 0, stderr);
    },
  };
}

const pvPaths = (s: AgentStatusJson): string[] =>
  s.classes.flatMap((c) => c.persistentVolumes.map((p) => p.path)).sort();

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
  it('confines its disks to DIR/disks: a mountDir outside is invalid at start (exit 3) and rejected on a reload', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'lvp-sandbox-confine-'));
    try {
      mkdirSync(join(dir, 'config'));
      writeFileSync(join(dir, 'config/storageClassMap'), 'evil:\n  hostDir: /etc\n  mountDir: /etc\n');
      const start = await runCli(['run', '--sandbox', dir, '--listen-address', '127.0.0.1:0'], {
        env: { MY_NODE_NAME: '' },
        timeoutMs: 20_000,
      });
      assert.equal(start.code, 3, start.stderr);
      assert.match(
        start.stderr,
        new RegExp(
          `config/storageClassMap:3:13: storageClassMap\\.evil\\.mountDir: /etc is outside the sandbox's disks directory ${join(dir, 'disks')}`,
          'u',
        ),
      );
      assert.doesNotMatch(start.stderr, /\n\s+at /u, 'no stack trace');
      assert.doesNotMatch(start.stderr, /created PersistentVolume/u);

      // A valid start, then edits that point out of DIR/disks: lexically, and through a symlink.
      rmSync(join(dir, 'config/storageClassMap'));
      const sandbox = startSandbox(['--sandbox', dir, '--config-debounce', '50ms', '--discovery-period', '200ms']);
      try {
        await eventually(
          async () => (pvPaths(await sandbox.client.status()).length === 2 ? true : undefined),
          'vol1, vol2',
        );
        const local = join(dir, 'disks/local-storage');
        writeFileSync(
          join(dir, 'config/storageClassMap'),
          `local-storage:\n  hostDir: ${local}\n  mountDir: ${local}\nevil:\n  hostDir: /etc\n  mountDir: /etc\n`,
        );
        const rejected = await eventually(async () => {
          const s = await sandbox.client.status();
          return s.lastReload?.outcome === 'rejected' ? s : undefined;
        }, 'the edit rejected');
        assert.equal(rejected.generation, 1);
        assert.deepEqual(
          rejected.lastReload?.issues.filter((i) => i.severity === 'error').map((i) => i.path),
          ['storageClassMap.evil.mountDir'],
        );
        // A symlink below DIR/disks that leads out is a discovery directory without disks.
        symlinkSync('/etc', join(dir, 'disks/linked'));
        writeFileSync(
          join(dir, 'config/storageClassMap'),
          `local-storage:\n  hostDir: ${local}\n  mountDir: ${local}\nlinked:\n  hostDir: /etc\n  mountDir: ${join(dir, 'disks/linked')}\n`,
        );
        await eventually(async () => ((await sandbox.client.status()).generation === 2 ? true : undefined), 'applied');
        mkdirSync(join(local, 'vol3'));
        const after = await eventually(async () => {
          const s = await sandbox.client.status();
          return pvPaths(s).length === 3 ? s : undefined;
        }, 'vol3 published (passes ran over both classes)');
        assert.deepEqual(pvPaths(after), [join(local, 'vol1'), join(local, 'vol2'), join(local, 'vol3')]);
      } finally {
        await sandbox.stop();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('says once a config that its device rules are not run (a sandbox reads no block devices), and serves the rest', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'lvp-sandbox-rules-'));
    const sandbox = startSandbox(['--sandbox', dir, '--config-debounce', '50ms']);
    try {
      await eventually(async () => ((await sandbox.client.status()).generation === 1 ? true : undefined), 'started');
      assert.doesNotMatch(sandbox.stderr(), /device rules are not run/u, 'no rules, no warning');
      appendFileSync(
        join(dir, 'config/storageClassMap'),
        '  deviceRules:\n    - mode: plan\n      transports: [nvme]\n',
      );
      const applied = await eventually(async () => {
        const s = await sandbox.client.status();
        return s.generation === 2 ? s : undefined;
      }, 'the config with rules applied');
      assert.equal(applied.lastReload?.outcome, 'applied');
      assert.equal(applied.devices, undefined, 'no device verdicts');
      const warnings = sandbox
        .stderr()
        .split('\n')
        .filter((l) => l.includes('device rules are not run'));
      assert.equal(warnings.length, 1, sandbox.stderr());
      assert.match(warnings[0] ?? '', / WARN {2}device rules are not run: .* storageClasses=local-storage$/u);
    } finally {
      await sandbox.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('honours MY_NODE_NAME and --config-dir (a config outside DIR, disks still below DIR/disks)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'lvp-sandbox-flags-'));
    try {
      const fast = join(dir, 'sb/disks/fast');
      mkdirSync(join(fast, 'd1'), { recursive: true });
      const config = join(dir, 'my-config.yaml');
      writeFileSync(config, `storageClassMap: |\n  fast:\n    hostDir: /mnt/fast\n    mountDir: ${fast}\n`);
      const sandbox = startSandbox(['--sandbox', join(dir, 'sb'), '--config-dir', config], { MY_NODE_NAME: 'node-7' });
      try {
        const s = await eventually(async () => {
          const status = await sandbox.client.status();
          return pvPaths(status).length === 1 ? status : undefined;
        }, 'd1 published');
        assert.equal(s.node, 'node-7');
        assert.equal(s.config.source, config);
        assert.deepEqual(pvPaths(s), ['/mnt/fast/d1']);
        assert.equal(existsSync(join(dir, 'sb/config')), false, 'no DIR/config when --config-dir is given');
      } finally {
        await sandbox.stop();
      }
      const env = await runCli(['run', '--sandbox', join(dir, 'sb2'), '--listen-address', '127.0.0.1:0'], {
        env: { MY_NODE_NAME: '', PROVISIONER_CONFIG_DIR: config },
        timeoutMs: 20_000,
      });
      assert.equal(env.code, 3, 'PROVISIONER_CONFIG_DIR is honoured too: its mountDir is outside sb2/disks');
      assert.match(env.stderr, /storageClassMap\.fast\.mountDir: .* is outside the sandbox's disks directory/u);
      const bad = await runCli(['run', '--sandbox', join(dir, 'sb'), '--listen-address', '127.0.0.1:0'], {
        env: { MY_NODE_NAME: 'Not_A_Node' },
        timeoutMs: 20_000,
      });
      assert.equal(bad.code, 2, bad.stderr);
      assert.match(bad.stderr, /^error: MY_NODE_NAME: "Not_A_Node" is not a valid Node name/mu);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
