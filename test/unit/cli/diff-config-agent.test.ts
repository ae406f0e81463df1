// diff-config without --from: the running agent's applied config, or the node config
// (/etc/provisioner/config, here PROVISIONER_CONFIG_DIR) when no agent answers on the admin socket. The built CLI as a process, a fake agent in this process.
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Ajv } from 'ajv';
import { startAdminServer } from '../../../src/core/agent/admin-server.js';
import type { RunningAdminServer } from '../../../src/core/agent/admin-server.js';
import { loadConfig } from '../../../src/core/config/source/load.js';
import { silentLogger } from '../../../src/core/log.js';
import { REPO_ROOT, runCli } from '../../support/cli.js';
import { FakeAdminTarget, leaveStaleSocket } from '../../support/fake-admin.js';

const CLASS = 'storageClassMap:\n  fast:\n    hostDir: /mnt/fast\n    mountDir: /mnt/fast\n';

describe('provisioner diff-config with the running agent as --from (process)', () => {
  let dir = '';
  let socket = '';
  let server: RunningAdminServer;
  let appliedHash = '';
  let validate: (data: unknown) => boolean;
  let schemaErrors: () => string;
  const file = (name: string): string => join(dir, name);

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'lvp-diff-agent-'));
    socket = join(dir, 'admin.sock');
    await writeFile(file('a.yaml'), CLASS);
    await writeFile(file('fstype.yaml'), `${CLASS}    fsType: ext4\n`);
    const applied = await loadConfig(file('a.yaml'));
    appliedHash = applied.hash;
    const target = new FakeAdminTarget();
    target.applied = {
      formatVersion: 1,
      hash: applied.hash,
      source: '/etc/provisioner/config',
      generation: 3,
      config: applied.config,
    };
    server = await startAdminServer({ socketPath: socket, target, logger: silentLogger });
    const schema: unknown = JSON.parse(
      await readFile(join(REPO_ROOT, 'docs/schemas/diff-config.v1.schema.json'), 'utf8'),
    );
    const ajv = new Ajv({ allErrors: true, strict: false });
    const compiled = ajv.compile(schema as object);
    validate = (data) => compiled(data);
    schemaErrors = () => ajv.errorsText(compiled.errors);
  });
  after(async () => {
    await server.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('compares the agent’s applied config with --to (side kind "agent", path the socket)', async () => {
    const r = await runCli(['diff-config', '--admin-socket', socket, '--to', file('fstype.yaml'), '-o', 'json']);
    assert.equal(r.code, 1, r.stderr);
    const out: unknown = JSON.parse(r.stdout);
    assert.ok(validate(out), schemaErrors());
    const json = out as { from: unknown; changes: { path: string }[] };
    assert.deepEqual(json.from, { path: socket, kind: 'agent', hash: appliedHash });
    assert.deepEqual(
      json.changes.map((c) => c.path),
      ['storageClassMap.fast.fsType'],
    );

    const text = await runCli(['diff-config', '--to', file('fstype.yaml')], {
      env: { PROVISIONER_ADMIN_SOCKET: socket },
    });
    assert.equal(text.code, 1, text.stderr);
    assert.match(text.stdout, new RegExp(`^--- from: agent ${socket}\\tsha256:`, 'mu'));

    const same = await runCli(['diff-config', '--admin-socket', socket, '--to', file('a.yaml')]);
    assert.equal(same.code, 0, same.stderr);
    assert.equal(same.stdout, `No differences (${appliedHash}).\n`);
  });

  it('--from still wins over a running agent', async () => {
    const r = await runCli([
      'diff-config',
      '--admin-socket',
      socket,
      '--from',
      file('fstype.yaml'),
      '--to',
      file('fstype.yaml'),
    ]);
    assert.equal(r.code, 0, r.stderr);
  });

  it('no agent: falls back to the node config, /etc/provisioner/config unless PROVISIONER_CONFIG_DIR says', async () => {
    // The fallback is injected, so what this machine has at /etc/provisioner/config does not matter.
    const help = await runCli(['diff-config', '--help']);
    assert.match(help.stdout, /else\s+\/etc\/provisioner\/config\s+\(or\s+\$PROVISIONER_CONFIG_DIR\)/u);
    const nodeConfig = join(dir, 'node-config');
    const env = { PROVISIONER_CONFIG_DIR: nodeConfig };
    const missing = join(dir, 'no-agent', 'admin.sock');
    const r = await runCli(['diff-config', '--admin-socket', missing, '--to', file('a.yaml')], { env });
    assert.equal(r.code, 4, r.stderr);
    assert.match(
      r.stderr,
      new RegExp(`^error: ${nodeConfig}: .*\\(and no agent answered on ${missing}\\); pass --from$`, 'mu'),
    );
    assert.ok(!r.stderr.includes('note:'), 'a missing socket is the normal case: no note');
    assert.ok(!r.stderr.includes('    at '), 'no stack trace');

    // A stale socket (the agent died): the same fallback, with a note saying why.
    const stale = join(dir, 'stale.sock');
    await leaveStaleSocket(stale);
    const s = await runCli(['diff-config', '--admin-socket', stale, '--to', file('a.yaml')], { env });
    assert.equal(s.code, 4, s.stderr);
    assert.match(
      s.stderr,
      new RegExp(
        `^note: no agent answered on .*stale\\.sock \\(connection refused.*\\); comparing ${nodeConfig}$`,
        'mu',
      ),
    );

    // When it exists, it is what the candidate is compared with.
    await writeFile(nodeConfig, CLASS);
    const same = await runCli(['diff-config', '--admin-socket', missing, '--to', file('a.yaml')], { env });
    assert.equal(same.code, 0, same.stderr);
    assert.equal(same.stdout, `No differences (${appliedHash}).\n`);
  });
});
