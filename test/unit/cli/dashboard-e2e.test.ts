// `provisioner dashboard` end to end, as a user sees it: the real CLI in a real pseudo-terminal
// (tmux), against a real agent (`provisioner run --sandbox`), driven by keys, read off the screen.
// tmux is required: scripts/setup.sh installs it; without it this test fails, it never skips.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { appendFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { describe, it } from 'node:test';
import { AdminClient } from '../../../src/core/agent/admin-client.js';
import { CLI } from '../../support/cli.js';
import { Tmux } from '../../support/tmux.js';

const COLUMNS = 100;
const ROWS = 30;

interface Agent {
  readonly child: ChildProcess;
  readonly exited: Promise<number | null>;
  stderr: string;
}

function startAgent(dir: string): Agent {
  const child = spawn(
    process.execPath,
    [
      CLI,
      'run',
      '--sandbox',
      dir,
      '--listen-address',
      '127.0.0.1:0',
      // The edit below must still be pending when `d` is pressed: no fs-triggered reload for 30 s,
      // no content poll for an hour.
      '--config-debounce',
      '30s',
      '--config-sync-period',
      '1h',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, MY_NODE_NAME: '' } },
  );
  const agent: Agent = {
    child,
    exited: new Promise((resolve) => {
      child.on('exit', (code) => {
        resolve(code);
      });
    }),
    stderr: '',
  };
  child.stderr.setEncoding('utf8').on('data', (d: string) => (agent.stderr += d));
  return agent;
}

async function stopAgent(agent: Agent): Promise<number | null> {
  if (agent.child.exitCode === null && agent.child.signalCode === null) agent.child.kill('SIGTERM');
  return agent.exited;
}

async function serving(socket: string): Promise<void> {
  const client = new AdminClient(socket, { timeoutMs: 2000 });
  const until = Date.now() + 15_000;
  for (;;) {
    const s = await client.status().catch(() => undefined);
    if (s !== undefined && s.classes.flatMap((c) => c.persistentVolumes).length === 2) return;
    if (Date.now() > until) assert.fail('the sandbox agent did not publish its two volumes');
    await delay(50);
  }
}

describe('provisioner dashboard in a terminal (tmux)', () => {
  it('shows the agent, reloads with r, diffs a pending edit with d, survives an agent restart, quits with q', async () => {
    Tmux.require();
    const dir = mkdtempSync(join(tmpdir(), 'lvp-dashboard-e2e-'));
    const socket = join(dir, 'admin.sock');
    const tmux = new Tmux(join(dir, 'tmux.sock'));
    const agents: Agent[] = [];
    try {
      agents.push(startAgent(dir));
      await serving(socket);
      // The shell line after the dashboard tells how it ended; `sleep` keeps the pane for reading it.
      const command = `'${process.execPath}' '${CLI}' dashboard --admin-socket '${socket}'; echo "dashboard exited with $?"; sleep 60`;
      tmux.run('new-session', '-d', '-s', 'dash', '-x', String(COLUMNS), '-y', String(ROWS), command);

      await tmux.waitFor(/node sandbox-node/u, 'the node name');
      const first = await tmux.waitFor(
        /^provisioner dashboard {2}connected {2}node sandbox-node {2}up /mu,
        'the event stream',
      );
      assert.match(first, /^config {2}generation 1 {2}\[in sync\] {2}\S+\/config$/mu);
      assert.match(first, /^hashes {2}applied (sha256:[0-9a-f]{12}) {2}on disk \1$/mu);
      assert.match(first, /^local-storage {2}\S+\/disks\/local-storage {2}\(2 PVs\)$/mu);
      assert.match(first, /^ {2}local-pv-[0-9a-f]{8} +\S+ +\w+ +- +\S+\/vol1$/mu);
      const lines = first.split('\n');
      assert.ok(lines.every((l) => l.length <= COLUMNS));

      tmux.keys('r');
      await tmux.waitFor(
        /^reload: No change: generation 1 already serves sha256:[0-9a-f]{12} \(\d+ ms\)\.$/mu,
        'the reload outcome',
      );
      await tmux.waitFor(/reload +noop \(admin\): generation 1 unchanged/u, 'the reload in the event list');

      appendFileSync(join(dir, 'config/storageClassMap'), '  fsType: ext4\n');
      tmux.keys('d');
      const diff = await tmux.waitFor(/^\W*\+ +fsType: ext4/mu, 'the diff panel with the pending fsType');
      assert.match(diff, /^\W*- +fsType: ""/mu);
      assert.match(diff, /Diff: applied \(generation 1\) -> on disk {2}\(d or Esc closes/u);
      assert.match(diff, /^\W*--- from: agent \S+admin\.sock +sha256:[0-9a-f]{12}/mu);
      assert.match(diff, /^\W*\+\+\+ to: \S+\/config +sha256:[0-9a-f]{12}/mu);
      assert.match(diff, /storageClassMap\.local-storage\.fsType: "" -> "ext4" {2}\[new-pvs-only\]/u);
      tmux.keys('Escape');
      await tmux.waitFor(/^> Volumes/mu, 'the panel closed');

      // The agent restarts: the view keeps its last state, says so, and reattaches by itself.
      const first0 = agents[0];
      assert.ok(first0);
      assert.equal(await stopAgent(first0), 0, first0.stderr);
      await tmux.waitFor(/reconnecting…/u, '"reconnecting…"');
      await tmux.waitFor(/^agent unreachable for \S+ \(attempt \d+, next in \S+\): /mu, 'the reason in the footer');
      agents.push(startAgent(dir));
      await tmux.waitFor(/reconnected to the agent/u, 'the reconnection', 15_000);
      // The new agent read the edited config at start: generation 1 of the new content.
      const back = await tmux.waitFor(/^provisioner dashboard {2}connected/mu, 'connected again');
      assert.match(back, /^config {2}generation 1 {2}\[in sync\]/mu);

      tmux.keys('q');
      await tmux.waitFor(/^dashboard exited with 0$/mu, 'the dashboard process to exit 0');
    } finally {
      tmux.kill();
      for (const agent of agents) await stopAgent(agent);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
