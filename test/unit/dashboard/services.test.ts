// What `d` shows, against a real admin endpoint and a config directory on disk.
import assert from 'node:assert/strict';
import { appendFile, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { AdminClient } from '../../../src/core/agent/admin-client.js';
import { startAdminServer } from '../../../src/core/agent/admin-server.js';
import type { RunningAdminServer } from '../../../src/core/agent/admin-server.js';
import { loadConfig } from '../../../src/core/config/source/load.js';
import { silentLogger } from '../../../src/core/log.js';
import { agentServices, onDiskDiff } from '../../../src/ui/dashboard/services.js';
import { FakeAdminTarget, reloadResult } from '../../support/fake-admin.js';

describe('dashboard services', () => {
  let dir: string;
  let configDir: string;
  let server: RunningAdminServer;
  let target: FakeAdminTarget;
  let client: AdminClient;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'lvp-dashboard-services-'));
    configDir = join(dir, 'config');
    await mkdir(configDir);
    await writeFile(join(configDir, 'storageClassMap'), 'fast:\n  hostDir: /mnt/fast\n  mountDir: /mnt/fast\n');
    const loaded = await loadConfig(configDir);
    target = new FakeAdminTarget();
    target.applied = { formatVersion: 1, hash: loaded.hash, source: configDir, generation: 3, config: loaded.config };
    server = await startAdminServer({ socketPath: join(dir, 'admin.sock'), target, logger: silentLogger });
    client = new AdminClient(join(dir, 'admin.sock'), { timeoutMs: 5000 });
  });

  after(async () => {
    await server.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('says so when the config on disk is the applied one', async () => {
    const d = await onDiskDiff(client);
    assert.deepEqual(d, {
      ok: true,
      title: 'Diff: on disk = applied (generation 3)',
      lines: [`No differences: the agent applies what is on disk in ${configDir}.`],
    });
  });

  it('shows the diff and the changes of a pending edit', async () => {
    await appendFile(join(configDir, 'storageClassMap'), '  fsType: ext4\n');
    const d = await onDiskDiff(client);
    assert.equal(d.ok, true);
    assert.equal(d.title, 'Diff: applied (generation 3) -> on disk');
    assert.ok(d.lines.includes('+    fsType: ext4'), d.lines.join('\n'));
    assert.ok(d.lines.includes('-    fsType: ""'));
    assert.ok(d.lines.some((l) => /^ {2}~ storageClassMap\.fast\.fsType: "" -> "ext4" {2}\[new-pvs-only\]/u.test(l)));
    assert.ok(
      d.lines.every((l) => !l.includes('\u001b')),
      'no colour codes: the view colours the lines',
    );
  });

  it('lists the problems of an invalid config on disk', async () => {
    await appendFile(join(configDir, 'storageClassMap'), '  volumeMode: Blok\n');
    const d = await onDiskDiff(client);
    assert.equal(d.ok, false);
    assert.equal(d.title, `Diff: the config on disk is invalid (${configDir})`);
    assert.match(d.lines[0] ?? '', /^The agent keeps serving generation 3 \(sha256:[0-9a-f]{12}\)\.$/u);
    assert.ok(d.lines.some((l) => /^error: .*storageClassMap:\d+:\d+: storageClassMap\.fast\.volumeMode: /u.test(l)));
  });

  it('says when the source cannot be read', async () => {
    target.applied = { ...target.applied, source: join(dir, 'missing') };
    const d = await onDiskDiff(client);
    assert.equal(d.ok, false);
    assert.equal(d.title, 'Diff: cannot read the config on disk');
    assert.match(d.lines[0] ?? '', /missing/u);
  });

  it('the fleet pane says why it cannot read the rollout (a typed error), without failing the view', async () => {
    const { StartupError } = await import('../../../src/core/errors.js');
    const { fleetPane } = await import('../../../src/ui/dashboard/services.js');
    const d = await fleetPane(() => Promise.reject(new StartupError('cannot list the status Leases: forbidden')));
    assert.equal(d.ok, false);
    assert.equal(d.title, 'Fleet: cannot read the rollout');
    assert.deepEqual(d.lines, ['cannot list the status Leases: forbidden']);
  });

  it('reloads through the reload client, with force when asked', async () => {
    target.onReload = (request) => Promise.resolve(reloadResult('applied', { force: request.force ?? false }));
    const services = agentServices(client, client, () => Promise.reject(new Error('no fleet in this test')));
    assert.equal((await services.reload(true)).forced, true);
    assert.equal((await services.reload(false)).forced, false);
    assert.deepEqual(
      target.reloadRequests.map((r) => r.force),
      [true, false],
    );
  });
});
