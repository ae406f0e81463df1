// `provisioner dashboard` through the built CLI, without a terminal: the plain snapshot, the exit
// codes, and the promise that only the interactive path loads ink and React.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startAdminServer } from '../../../src/core/agent/admin-server.js';
import type { RunningAdminServer } from '../../../src/core/agent/admin-server.js';
import { silentLogger } from '../../../src/core/log.js';
import { REPO_ROOT, runCli } from '../../support/cli.js';
import { FakeAdminTarget, leaveStaleSocket } from '../../support/fake-admin.js';

const BUNDLE = join(REPO_ROOT, 'dist/src/cli/commands.js');
/** A string only React's code contains. */
const REACT_MARKER = 'react.transitional.element';

/** Files a bundle file loads through static imports, itself included. */
function staticClosure(file: string, seen = new Set<string>()): Set<string> {
  if (seen.has(file)) return seen;
  seen.add(file);
  const text = readFileSync(file, 'utf8');
  for (const m of text.matchAll(/^(?:import|export)\s[^;]*?from\s*"(\.[^"]+)";|^import\s*"(\.[^"]+)";/gmu)) {
    const spec = m[1] ?? m[2];
    if (spec !== undefined) staticClosure(join(dirname(file), spec), seen);
  }
  return seen;
}

function chunkExporting(name: string): string {
  const dir = join(REPO_ROOT, 'dist/src/cli/chunks');
  const found = readdirSync(dir)
    .filter((f) => f.endsWith('.js'))
    .map((f) => join(dir, f))
    .find((f) => readFileSync(f, 'utf8').includes(name));
  if (found === undefined) throw new Error(`no chunk defines ${name}`);
  return found;
}

describe('provisioner dashboard (no terminal)', () => {
  let dir: string;
  let server: RunningAdminServer;
  let target: FakeAdminTarget;
  let socket: string;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'lvp-dashboard-cli-'));
    socket = join(dir, 'admin.sock');
    target = new FakeAdminTarget();
    server = await startAdminServer({ socketPath: socket, target, logger: silentLogger });
  });

  after(async () => {
    await server.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('prints one plain-text snapshot when stdout is not a terminal, and exits 0', async () => {
    const r = await runCli(['dashboard', '--admin-socket', socket]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stderr, '');
    const lines = r.stdout.split('\n');
    assert.match(
      lines[0] ?? '',
      /^provisioner dashboard {2}node node-a {2}up \S+ {2}ready {2}agent 0\.1\.0 {2}pid \d+$/u,
    );
    assert.equal(lines[1], 'config  generation 7  [unknown]  /etc/provisioner/config');
    assert.equal(lines[2], 'hashes  applied sha256:aaaaaaaaaaaa  on disk -');
    assert.match(r.stdout, /^Volumes {2}0 classes, 0 PVs$/mu);
    assert.match(r.stdout, /^Cleanups {2}none in flight$/mu);
    assert.ok(!r.stdout.includes('\u001b'), 'no escape sequences');
  });

  it('--once prints the same snapshot', async () => {
    const r = await runCli(['dashboard', '--once', '--admin-socket', socket]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^config {2}generation 7 /mu);
  });

  it('--fleet ends the snapshot with the fleet; a fleet that cannot be read is a line there, not a failure', async () => {
    const kubeconfig = join(dir, 'no-such-kubeconfig');
    const r = await runCli(['dashboard', '--once', '--fleet', '--admin-socket', socket, '--kubeconfig', kubeconfig]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(
      r.stdout,
      /^Cleanups {2}none in flight\n\nFleet {2}cannot read the rollout: cannot connect to the cluster: .+\n\nLive events/mu,
    );
    const plain = await runCli(['dashboard', '--once', '--admin-socket', socket, '--kubeconfig', kubeconfig]);
    assert.doesNotMatch(plain.stdout, /Fleet/u, 'without --fleet the snapshot never reads the cluster');
  });

  it('reads the socket from PROVISIONER_ADMIN_SOCKET', async () => {
    const r = await runCli(['dashboard', '--once'], { env: { PROVISIONER_ADMIN_SOCKET: socket } });
    assert.equal(r.code, 0, r.stderr);
  });

  it('exits 2 with one clear line when no agent is reachable, never a stack trace', async () => {
    const missing = join(dir, 'missing.sock');
    const r = await runCli(['dashboard', '--admin-socket', missing]);
    assert.equal(r.code, 2);
    assert.equal(r.stdout, '');
    assert.equal(
      r.stderr.trim(),
      `error: no agent reachable at ${missing}: the socket does not exist; is \`provisioner run\` running on this node? ` +
        '(point --admin-socket or PROVISIONER_ADMIN_SOCKET at its admin socket)',
    );
    const stale = join(dir, 'stale.sock');
    await leaveStaleSocket(stale);
    const r2 = await runCli(['dashboard', '--once', '--admin-socket', stale]);
    assert.equal(r2.code, 2);
    assert.match(r2.stderr, /connection refused \(a stale socket/u);
    assert.doesNotMatch(r2.stderr, /^\s+at /mu);
  });

  it('rejects a bad --timeout as a usage error', async () => {
    const r = await runCli(['dashboard', '--timeout', 'soon', '--admin-socket', socket]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /^error: --timeout: /u);
  });

  it('is listed in the help', async () => {
    const r = await runCli(['--help']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /dashboard\s+Watch the running agent live/u);
  });

  it('loads ink and React only on the interactive path', () => {
    for (const file of staticClosure(BUNDLE)) {
      assert.ok(!readFileSync(file, 'utf8').includes(REACT_MARKER), `${file} (loaded at start-up) contains React`);
    }
    for (const file of staticClosure(chunkExporting('function renderDashboardText'))) {
      assert.ok(!readFileSync(file, 'utf8').includes(REACT_MARKER), `${file} (the snapshot path) contains React`);
    }
    const ui = staticClosure(chunkExporting('function runDashboard'));
    assert.ok(
      [...ui].some((f) => readFileSync(f, 'utf8').includes(REACT_MARKER)),
      'the interactive chunk does load React (else this test checks nothing)',
    );
  });
});
