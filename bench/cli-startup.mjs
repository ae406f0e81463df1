// Cold-start benchmark of the CLI: `provisioner --help` and `diff-config` on a 20-class config,
// each a fresh process, interleaved with a bare `node -e 0` so ratios stay meaningful on a noisy
// shared machine. Usage: node bench/cli-startup.mjs [--runs 40]
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir, cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const runsFlag = process.argv.indexOf('--runs');
const runs = runsFlag > 0 ? Number(process.argv[runsFlag + 1]) : 40;
const dir = mkdtempSync(join(tmpdir(), 'lvp-bench-'));

function config(variant) {
  const classes = Array.from({ length: 20 }, (_, i) => {
    const fs = variant === 'b' && i % 5 === 0 ? '\n      fsType: xfs' : '';
    return `    class-${i}:\n      hostDir: /mnt/disks-${i}\n      mountDir: /mnt/disks-${i}\n      blockCleanerCommand: ["/scripts/shred.sh", "2"]\n      namePattern: "nvme-*,scsi-*"${fs}`;
  }).join('\n');
  return `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: provisioner-config\ndata:\n  useJobForCleaning: "yes"\n  storageClassMap: |\n${classes}\n`;
}
writeFileSync(join(dir, 'a.yaml'), config('a'));
writeFileSync(join(dir, 'b.yaml'), config('b'));

const cli = join(root, 'bin/run.js');
const cases = {
  'node -e 0 (baseline)': ['-e', '0'],
  'provisioner --help': [cli, '--help'],
  'provisioner diff-config (20 classes)': [
    cli,
    'diff-config',
    '--from',
    join(dir, 'a.yaml'),
    '--to',
    join(dir, 'b.yaml'),
  ],
};

function once(args) {
  const start = process.hrtime.bigint();
  const r = spawnSync(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  if (r.status !== 0 && r.status !== 1) throw new Error(`${args.join(' ')} exited ${r.status}: ${r.stderr}`);
  return ms;
}

const samples = Object.fromEntries(Object.keys(cases).map((k) => [k, []]));
for (const args of Object.values(cases)) for (let i = 0; i < 3; i++) once(args); // warm the page and compile caches
for (let i = 0; i < runs; i++) for (const [name, args] of Object.entries(cases)) samples[name].push(once(args));
rmSync(dir, { recursive: true, force: true });

const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};
const base = pct(samples['node -e 0 (baseline)'], 50);
console.log(
  `node ${process.version}, ${cpus().length} CPUs, load ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}, ${runs} runs each`,
);
console.log('| command | median ms | p90 ms | median / bare node |');
console.log('|---|---|---|---|');
for (const [name, xs] of Object.entries(samples)) {
  const med = pct(xs, 50);
  console.log(`| ${name} | ${med.toFixed(0)} | ${pct(xs, 90).toFixed(0)} | ${(med / base).toFixed(2)} |`);
}
