// kubelet ConfigMap swaps into a live agent (soak): a real `provisioner run --sandbox` process with
// `--reload-guard apply` (a config that drops classes or keys is applied, not refused, so a partial
// read would show) watches a kubelet-style ConfigMap volume while this script updates it N times
// the way kubelet's AtomicWriter does (test/support/configmap-volume.ts: new `..<ts>` directory,
// key symlinks, `..data_tmp`, rename over `..data`, then the old directory emptied file by file).
// The updates come in bursts; each burst empties old directories at one speed (no pause, pauses
// about as long as a read, longer pauses, or a mix), and its last update writes a config never
// written before, whose application the script waits for (the last swap wins).
//
// Every config the agent applied is taken from its JSON log ("config applied", with the config's
// hash) and checked against the configs written whole; a hash that is none of them is a partial
// read, named when it is a subset of a written config's keys (an empty one included). Counts by
// outcome come from its /metrics at the end; its RSS from /proc. The agent's own reader retries
// cannot be seen from outside its process, so a second reader in this process (the same
// readSourceBytes, counting its listings) reads the volume in a loop during the soak: its retries,
// partial reads and failed reads are the reader-level figures.
//
// Usage (after `npm run build`): node dist/bench/kubelet-swap-soak.js [--swaps 10000] [--burst 50]
//   [--seed 1] [--debounce 2ms] [--sync-period 50ms] [--no-side-reader]
// Exits 1 when a partial or empty config was applied or a burst's last config did not win.
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as delay } from 'node:timers/promises';
import { AdminClient } from '../src/core/agent/admin-client.js';
import { parseConfigSnapshot } from '../src/core/config/decode/parse.js';
import { snapshotFromDirectoryFiles } from '../src/core/config/decode/layout.js';
import { nodeDirectoryFs, readSourceBytes } from '../src/core/config/source/directory-read.js';
import type { DirectoryFs } from '../src/core/config/source/directory-read.js';
import { ConfigSourceError } from '../src/core/errors.js';
import { kubeletUpdate, writeConfigMapVolume } from '../test/support/configmap-volume.js';
import { seededRandom } from '../test/support/soak/plan.js';
import { IMAGE_NODE_OPTIONS, REPO_ROOT, rssBytesOf } from './support.js';

function argument(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? (process.argv[i + 1] ?? fallback) : fallback;
}
const SWAPS = Number(argument('swaps', '10000'));
const BURST = Number(argument('burst', '50'));
const SEED = Number(argument('seed', '1'));
const DEBOUNCE = argument('debounce', '2ms');
const SYNC_PERIOD = argument('sync-period', '50ms');
const SIDE_READER = !process.argv.includes('--no-side-reader');
/** The longest wait for a burst's last config to be applied. */
const LAST_WINS_TIMEOUT_MS = 30_000;

type Data = Readonly<Record<string, string>>;

// the same swaps and pauses for the same seed
const random = seededRandom(SEED);
const between = (least: number, most: number): number => least + Math.floor(random() * (most - least + 1));

const work = await mkdtemp(join(tmpdir(), 'lvp-swap-soak-'));
const sandbox = join(work, 'sandbox');
const disks = join(sandbox, 'disks');
const configDir = join(work, 'config');
const CLASSES = ['nvme', 'ssd', 'hdd', 'bulk', 'scratch'] as const;

/** Config `i` of four: 3 to 6 key files, 2 to 5 classes. */
function baseConfig(i: number): Record<string, string> {
  const classes = CLASSES.slice(0, i + 2)
    .map(
      (c) =>
        `${c}:\n  hostDir: ${join(disks, c)}\n  mountDir: ${join(disks, c)}\n  fsType: ${i % 2 ? 'xfs' : 'ext4'}\n`,
    )
    .join('');
  const optional: [string, string][] = [
    ['labelsForPV', `config: "${String(i)}"\n`],
    ['nodeLabelsForPV', i % 2 ? '- topology.kubernetes.io/zone\n' : '- topology.kubernetes.io/region\n'],
    ['minResyncPeriod', `${String(5 + i)}m0s`],
    ['setPVOwnerRef', 'true'],
    ['provisionerNotReadyNodeTaintKey', 'example.com/lvp-not-ready'],
  ];
  return { storageClassMap: classes, ...Object.fromEntries(optional.slice(0, i + 2)) };
}
const BASES = [0, 1, 2, 3].map(baseConfig);
/** The last config of burst `b`: a base config with a label of its own, never written before. */
const finalOf = (b: number): Data => ({ ...BASES[b % BASES.length], labelsForPV: `burst: "${String(b)}"\n` });

const hashOf = (data: Data): string =>
  parseConfigSnapshot(
    snapshotFromDirectoryFiles(
      configDir,
      Object.entries(data).map(([name, text]) => ({ name, text })),
    ),
  ).hash;

/** Every config written whole, by hash. */
const whole = new Map<string, string>();
/** Every proper subset of a written config's keys (what a partial read would load), by hash: what it is. */
const parts = new Map<string, string>();
function noteWritten(name: string, data: Data): string {
  const hash = hashOf(data);
  if (whole.has(hash)) return hash;
  whole.set(hash, name);
  const keys = Object.keys(data);
  for (let mask = 0; mask < 2 ** keys.length - 1; mask++) {
    const kept = keys.filter((_, i) => (mask >> i) & 1);
    const h = hashOf(Object.fromEntries(kept.map((k) => [k, data[k] ?? ''])));
    if (!whole.has(h) && !parts.has(h))
      parts.set(h, kept.length === 0 ? 'empty' : `${String(kept.length)} of ${String(keys.length)} keys of ${name}`);
  }
  return hash;
}
for (const [i, data] of BASES.entries()) noteWritten(`config ${String(i)}`, data);

// How fast kubelet empties an old data directory, per burst.
const SPEEDS = {
  'no pause': () => 0,
  'read-like (0-2 ms)': () => (random() < 0.4 ? 0 : between(0, 2)),
  'slow (2-10 ms)': () => between(2, 10),
  mixed: () => [0, between(0, 2), between(2, 10)][between(0, 2)] ?? 0,
} as const satisfies Record<string, () => number>;
const SPEED_NAMES = Object.keys(SPEEDS) as (keyof typeof SPEEDS)[];

// ---- the agent --------------------------------------------------------------------------------

for (const c of CLASSES) for (const v of ['vol1', 'vol2']) await mkdir(join(disks, c, v), { recursive: true });
await writeConfigMapVolume(configDir, BASES[0] ?? {});
const agent = spawn(
  process.execPath,
  [
    join(REPO_ROOT, 'bin/run.js'),
    'run',
    '--sandbox',
    sandbox,
    '--config-dir',
    configDir,
    '--admin-socket',
    join(work, 'admin.sock'),
    '--listen-address',
    '127.0.0.1:0',
    '--log-format',
    'json',
    '--reload-guard',
    'apply',
    '--config-debounce',
    DEBOUNCE,
    '--config-sync-period',
    SYNC_PERIOD,
  ],
  { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, NODE_OPTIONS: IMAGE_NODE_OPTIONS } },
);
const pid = agent.pid ?? 0;
const agentState = { exited: false };
agent.on('exit', () => {
  agentState.exited = true;
});
/** A call, not the field: the compiler would keep a test of the field narrowed across awaits. */
const hasExited = (): boolean => agentState.exited;

/** What the agent logged. */
const seen = {
  listen: '',
  initial: '',
  applied: [] as string[],
  failed: new Map<string, number>(),
  rejected: 0,
  otherErrors: [] as string[],
};
const appliedSet = new Set<string>();
const waiting = new Map<string, () => void>();
createInterface({ input: agent.stderr }).on('line', (line) => {
  let record: Record<string, unknown>;
  try {
    record = JSON.parse(line) as Record<string, unknown>;
  } catch {
    seen.otherErrors.push(line.slice(0, 200));
    return;
  }
  const text = (v: unknown): string => (typeof v === 'string' ? v : JSON.stringify(v));
  switch (record['msg']) {
    case 'agent started':
      seen.listen = text(record['listen']);
      seen.initial = text(record['config']);
      break;
    case 'config applied': {
      const hash = text(record['config']);
      seen.applied.push(hash);
      appliedSet.add(hash);
      waiting.get(hash)?.();
      break;
    }
    case 'config reload failed: the running config stays': {
      // The reader gave up (or another read failure): counted by its message without the paths.
      const reason = text(record['error']).replaceAll(work, '…');
      seen.failed.set(reason, (seen.failed.get(reason) ?? 0) + 1);
      break;
    }
    case 'config rejected: the running config stays':
      seen.rejected++;
      break;
    default:
      if (record['level'] === 'error') seen.otherErrors.push(line.slice(0, 300));
  }
});

function appliedSoon(hash: string, ms: number): Promise<boolean> {
  if (appliedSet.has(hash)) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      waiting.delete(hash);
      resolve(false);
    }, ms);
    waiting.set(hash, () => {
      clearTimeout(timer);
      waiting.delete(hash);
      resolve(true);
    });
  });
}

async function metric(name: string): Promise<Map<string, number>> {
  const text = await (await fetch(`http://${seen.listen}/metrics`)).text();
  const out = new Map<string, number>();
  for (const m of text.matchAll(new RegExp(`^${name}\\{result="([^"]+)"\\} (\\S+)$`, 'gmu')))
    out.set(m[1] ?? '', Number(m[2]));
  return out;
}

// ---- the side reader --------------------------------------------------------------------------

const side = { started: 0, reads: 0, listings: 0, partial: 0, failed: new Map<string, number>() };
let soaking = true;
const sideFs: DirectoryFs = {
  ...nodeDirectoryFs,
  list: (path, max) => {
    if (path !== configDir) side.listings++;
    return nodeDirectoryFs.list(path, max);
  },
};
async function sideReader(): Promise<void> {
  while (soaking) {
    side.started++;
    try {
      const read = await readSourceBytes(configDir, sideFs);
      side.reads++;
      const files = read.kind === 'directory' ? read.files : [];
      const hash = hashOf(Object.fromEntries(files.map((f) => [f.name, f.bytes.toString('utf8')])));
      if (!whole.has(hash)) side.partial++;
    } catch (error) {
      const reason = (error instanceof ConfigSourceError ? error.message : String(error)).replaceAll(work, '…');
      side.failed.set(reason, (side.failed.get(reason) ?? 0) + 1);
    }
    await new Promise((r) => setImmediate(r));
  }
}

// ---- the soak ---------------------------------------------------------------------------------

const mib = (bytes: number): string => (bytes / 2 ** 20).toFixed(1);
try {
  for (let i = 0; seen.listen === ''; i++) {
    if (hasExited() || i > 600) throw new Error(`the agent did not start: ${seen.otherErrors.join('\n')}`);
    await delay(50);
  }
  if (seen.initial !== hashOf(BASES[0] ?? {})) throw new Error(`the agent started on ${seen.initial}, not config 0`);
  await delay(1000);
  const admin = new AdminClient(join(work, 'admin.sock'), { timeoutMs: 10_000 });
  const heapUsed = async (): Promise<number> => (await admin.status()).diagnostics?.heapUsedBytes ?? NaN;
  const rssStart = rssBytesOf(pid);
  const heapStart = await heapUsed();
  let rssMax = rssStart;
  const sideLoop = SIDE_READER ? sideReader() : Promise.resolve();
  const started = performance.now();
  let swaps = 0;
  let current = 0;
  let lastWinsFailures = 0;
  const lastWinMs: number[] = [];
  const bySpeed = new Map<string, number>();
  for (let burst = 1; swaps < SWAPS && !hasExited(); burst++) {
    const speed = SPEED_NAMES[burst % SPEED_NAMES.length] ?? 'mixed';
    const removalDelayMs = SPEEDS[speed];
    const size = Math.min(BURST, SWAPS - swaps);
    let finalHash = '';
    for (let i = 1; i <= size; i++) {
      let data: Data;
      if (i < size) {
        current = (current + between(1, BASES.length - 1)) % BASES.length;
        data = BASES[current] ?? {};
      } else {
        data = finalOf(burst);
        finalHash = noteWritten(`the last config of burst ${String(burst)}`, data);
      }
      await kubeletUpdate(configDir, data, { removalDelayMs });
      swaps++;
      bySpeed.set(speed, (bySpeed.get(speed) ?? 0) + 1);
      if (random() < 0.2) await delay(between(0, 5));
    }
    const waitStarted = performance.now();
    if (await appliedSoon(finalHash, LAST_WINS_TIMEOUT_MS)) lastWinMs.push(performance.now() - waitStarted);
    else lastWinsFailures++;
    rssMax = Math.max(rssMax, rssBytesOf(pid));
    if (burst % 20 === 0)
      console.error(
        `… ${String(swaps)} swaps, ${String(seen.applied.length)} applied, ${((performance.now() - started) / 1000).toFixed(0)} s`,
      );
  }
  const seconds = (performance.now() - started) / 1000;
  soaking = false;
  await sideLoop;
  const rssEnd = rssBytesOf(pid);
  const heapEnd = await heapUsed();
  if (hasExited()) throw new Error(`the agent exited: ${seen.otherErrors.join('\n')}`);
  const reloads = await metric('local_volume_provisioner_config_reloads_total');

  const notWhole = seen.applied.filter((h) => !whole.has(h));
  const described = new Map<string, number>();
  for (const h of notWhole) {
    const what = parts.get(h) ?? 'unknown (not a subset of a written config)';
    const kind = what === 'empty' ? 'empty' : what.replace(/ of (config \d|the last config of burst \d+)$/u, '');
    described.set(kind, (described.get(kind) ?? 0) + 1);
  }
  const applied = reloads.get('applied') ?? 0;
  const sorted = [...lastWinMs].sort((a, b) => a - b);
  const pct = (p: number): number => sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)] ?? NaN;
  const row = (what: string, value: string): void => {
    console.log(`| ${what} | ${value} |`);
  };
  console.log(
    `node ${process.version}, seed ${String(SEED)}, bursts of ${String(BURST)}, agent: run --sandbox --reload-guard apply ` +
      `--config-debounce ${DEBOUNCE} --config-sync-period ${SYNC_PERIOD}, NODE_OPTIONS=${IMAGE_NODE_OPTIONS}`,
  );
  console.log('| what | figure |\n|---|---|');
  row(
    'kubelet swaps',
    `${String(swaps)} (${[...bySpeed].map(([s, n]) => `${s}: ${String(n)}`).join(', ')}) in ${seconds.toFixed(0)} s`,
  );
  row(
    'reloads (agent metrics)',
    [...reloads]
      .sort()
      .map(([o, n]) => `${o} ${String(n)}`)
      .join(', '),
  );
  row('configs applied (agent log)', String(seen.applied.length));
  row('swaps coalesced (never applied on their own)', String(swaps - applied));
  row(
    'reads that failed (agent log)',
    seen.failed.size === 0
      ? '0'
      : [...seen.failed].map(([reason, n]) => `${String(n)} × "${reason.slice(0, 120)}"`).join('; '),
  );
  row(
    '**partial or empty configs applied**',
    `**${String(notWhole.length)}**${notWhole.length > 0 ? ` (${[...described].map(([k, n]) => `${k}: ${String(n)}`).join(', ')})` : ''}`,
  );
  row(
    'last swap of each burst applied',
    `${String(lastWinMs.length)} of ${String(lastWinMs.length + lastWinsFailures)} bursts; after the burst's last swap: median ${pct(0.5).toFixed(0)} ms, p99 ${pct(0.99).toFixed(0)} ms, max ${(sorted.at(-1) ?? NaN).toFixed(0)} ms`,
  );
  if (SIDE_READER)
    row(
      'side reader (readSourceBytes in the soak process)',
      `${String(side.reads)} reads, ${String(side.listings - side.started)} retries (listings of a data directory beyond one a read), ` +
        `${String(side.partial)} partial or empty; failed: ${
          side.failed.size === 0
            ? '0'
            : [...side.failed].map(([reason, n]) => `${String(n)} × "${reason.slice(0, 120)}"`).join('; ')
        }`,
    );
  row(
    'agent RSS',
    `${mib(rssStart)} MiB at the start, ${mib(rssEnd)} MiB at the end, highest sampled ${mib(rssMax)} MiB ` +
      `(heap in use ${mib(heapStart)} → ${mib(heapEnd)} MiB)`,
  );
  if (seen.rejected > 0) row('rejected (unexpected)', String(seen.rejected));
  for (const line of seen.otherErrors.slice(0, 5)) console.log(`  agent error: ${line}`);
  process.exitCode = notWhole.length > 0 || lastWinsFailures > 0 ? 1 : 0;
} finally {
  soaking = false;
  agent.kill('SIGTERM');
  await Promise.race([new Promise((r) => agent.once('exit', r)), delay(10_000)]);
  if (!hasExited()) agent.kill('SIGKILL');
  await rm(work, { recursive: true, force: true });
}
