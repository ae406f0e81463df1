// Time to the dashboard's first frame, as a user sees it: `provisioner dashboard` started in a
// tmux pane (100x30) against a sandbox agent (`provisioner run --sandbox`), timed from the moment
// the pane's shell execs node to the moment the pane's output carries the agent's node name (the
// first frame shows the status fetched before ink starts), and to "connected" (the event stream is
// open). The pane's output is streamed to a file with `tmux pipe-pane` and read in-process, so the
// observer takes no CPU from the process measured (polling `tmux capture-pane` every few ms did,
// on a 2-core machine). Two baselines run interleaved in the same harness: bare `node` printing a
// line, and `provisioner --help`.
// Usage: npm run build && node bench/dashboard-first-frame.mjs [--runs 20]   (needs tmux)
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const runsFlag = process.argv.indexOf('--runs');
const runs = runsFlag > 0 ? Number(process.argv[runsFlag + 1]) : 20;
const WARMUP = 2;
const cli = join(root, 'bin/run.js');
// eslint-disable-next-line no-control-regex
const ANSI = /\u001b(?:\[[0-9;?>=]*[ -/]*[@-~]|\][^\u0007\u001b]*(?:\u0007|\u001b\\)|[()][0-9A-Za-z]|[=>78])/gu;

if (spawnSync('tmux', ['-V']).status !== 0) {
  console.error('dashboard-first-frame: tmux is required (scripts/setup.sh installs it)');
  process.exit(1);
}
const { AdminClient } = await import(pathToFileURL(join(root, 'dist/src/core/agent/admin-client.js')).href);

const dir = mkdtempSync(join(tmpdir(), 'lvp-bench-dashboard-'));
const socket = join(dir, 'admin.sock');
const tmuxSocket = join(dir, 'tmux.sock');
const tmux = (...args) => spawnSync('tmux', ['-S', tmuxSocket, '-f', '/dev/null', ...args], { encoding: 'utf8' });
const wallMs = () => performance.timeOrigin + performance.now();
const quote = (s) => `'${s.replaceAll("'", "'\\''")}'`;

const agent = spawn(process.execPath, [cli, 'run', '--sandbox', dir, '--listen-address', '127.0.0.1:0'], {
  stdio: ['ignore', 'ignore', 'ignore'],
  env: { ...process.env, MY_NODE_NAME: '' },
});
const agentExited = new Promise((resolve) => agent.on('exit', resolve));

async function waitForAgent() {
  const client = new AdminClient(socket, { timeoutMs: 2000 });
  const until = Date.now() + 20_000;
  for (;;) {
    const status = await client.status().catch(() => undefined);
    if (status?.ready === true) return;
    if (Date.now() > until) throw new Error('the sandbox agent did not get ready');
    await delay(50);
  }
}

let session = 0;
/**
 * Runs `argv` in a fresh 100x30 pane; returns ms from exec to each marker's first appearance in
 * the pane's output, in order. `quit` is sent once the last marker appeared.
 */
async function once(argv, markers, quit) {
  const name = `s${session++}`;
  const startFile = join(dir, `${name}.start`);
  const outFile = join(dir, `${name}.out`);
  // The pause lets pipe-pane attach before the command starts writing.
  const command = `sleep 0.3; date +%s%N > ${quote(startFile)}; exec ${argv.map(quote).join(' ')}; sleep 30`;
  if (tmux('new-session', '-d', '-s', name, '-x', '100', '-y', '30', command).status !== 0)
    throw new Error('tmux failed');
  tmux('pipe-pane', '-t', name, '-o', `cat >> ${quote(outFile)}`);
  const seen = [];
  const until = Date.now() + 15_000;
  while (seen.length < markers.length) {
    const out = existsSync(outFile) ? readFileSync(outFile, 'utf8').replace(ANSI, '') : '';
    const now = wallMs();
    while (seen.length < markers.length && markers[seen.length].test(out)) seen.push(now);
    if (Date.now() > until) throw new Error(`${argv.join(' ')}: no ${markers[seen.length]} within 15 s:\n${out}`);
    await delay(3);
  }
  const start = Number(BigInt(readFileSync(startFile, 'utf8').trim()) / 1000n) / 1000;
  if (quit !== undefined) tmux('send-keys', '-t', name, quit);
  tmux('kill-session', '-t', name);
  return seen.map((t) => t - start);
}

const samples = {
  'bare `node` printing a line': [],
  '`provisioner --help`': [],
  '`provisioner dashboard`: first frame (status on screen)': [],
  '`provisioner dashboard`: live (event stream connected)': [],
};
const names = Object.keys(samples);
try {
  await waitForAgent();
  // A session that outlives the runs keeps one tmux server for all of them.
  tmux('new-session', '-d', '-s', 'keep', 'sleep 3600');
  for (let i = 0; i < WARMUP + runs; i++) {
    const [bare] = await once([process.execPath, '-e', "console.log('READY')"], [/READY/u]);
    const [help] = await once([process.execPath, cli, '--help'], [/COMMANDS/u]);
    const [first, live] = await once(
      [process.execPath, cli, 'dashboard', '--admin-socket', socket],
      [/node sandbox-node/u, /dashboard {2}connected/u],
      'q',
    );
    if (i < WARMUP) continue;
    [bare, help, first, live].forEach((ms, k) => samples[names[k]].push(ms));
  }
} finally {
  tmux('kill-server');
  agent.kill('SIGTERM');
  await agentExited;
  rmSync(dir, { recursive: true, force: true });
}

const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};
const base = pct(samples[names[0]], 50);
console.log(
  `node ${process.version}, ${cpus().length} CPUs, load ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}, ${runs} runs each (+${WARMUP} warm-up), tmux 100x30, sandbox agent`,
);
console.log('| in a tmux pane, from exec to | median ms | p90 ms | median / bare node | target |');
console.log('|---|---|---|---|---|');
for (const [name, xs] of Object.entries(samples)) {
  const med = pct(xs, 50);
  const target = name.includes('first frame') ? '≤ 600 ms' : '—';
  console.log(`| ${name} | ${med.toFixed(0)} | ${pct(xs, 90).toFixed(0)} | ${(med / base).toFixed(2)} | ${target} |`);
}
