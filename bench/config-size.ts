// What a large config costs to read: time and peak memory of one loadConfig (the agent's read path,
// the same for start-up, every reload, diff-config and simulate) in a fresh process per input, run
// with the image's NODE_OPTIONS, against a tiny config read the same way. Inputs under and over the
// bounds of docs/configuration.md "Value limits" (60,000 YAML values, 1 MiB of quoted strings).
//
//   npm run build && node dist/bench/config-size.js [--runs 3]
//
// Peak memory is the process's VmHWM (high-water RSS), so transient garbage counts: that is what a
// container limit sees. Results: docs/benchmarks.md, "Config size".
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { IMAGE_NODE_OPTIONS, median } from './support.js';

interface Measure {
  readonly ms: number;
  readonly peakKiB: number;
  readonly result: string;
}

async function child(dir: string): Promise<void> {
  const { loadConfig } = await import('../src/core/config/source/load.js');
  const started = performance.now();
  let result: string;
  try {
    const loaded = await loadConfig(dir);
    result = `accepted (${String(Object.keys(loaded.config.storageClassMap).length)} classes)`;
  } catch (err) {
    const issues = (err as { issues?: readonly { message: string }[] }).issues;
    result = `refused: ${(issues?.[0]?.message ?? String(err)).slice(0, 60)}…`;
  }
  const ms = performance.now() - started;
  const peak = /VmHWM:\s+(\d+) kB/u.exec(readFileSync('/proc/self/status', 'utf8'));
  process.stdout.write(JSON.stringify({ ms, peakKiB: Number(peak?.[1] ?? NaN), result } satisfies Measure));
}

function measure(dir: string): Measure {
  const r = spawnSync(process.execPath, [import.meta.filename, '--child', dir], {
    encoding: 'utf8',
    env: { ...process.env, NODE_OPTIONS: IMAGE_NODE_OPTIONS },
    maxBuffer: 16 * 1024 * 1024,
  });
  if (r.status !== 0) throw new Error(`child failed for ${dir}: ${r.stderr}`);
  return JSON.parse(r.stdout) as Measure;
}

const classes = (n: number, extra = ''): string =>
  Array.from(
    { length: n },
    (_, i) => `c${String(i)}:\n  hostDir: /mnt/c${String(i)}\n  mountDir: /mnt/c${String(i)}\n${extra}`,
  ).join('');

const SELECTOR = '  selector:\n  - matchExpressions:\n    - key: zone\n      operator: In\n      values: [a, b]\n';

/** name → the key files of a directory source. */
function inputs(): Record<string, Record<string, string>> {
  const quotedClasses: string[] = [];
  for (let i = 0, size = 0; size < 900 * 1024; i++) {
    const c = `c${String(i)}:\n  hostDir: "/mnt/c${String(i)}"\n  mountDir: "/mnt/c${String(i)}"\n  blockCleanerCommand: ["/scripts/shred.sh", "${'x'.repeat(200)}"]\n`;
    quotedClasses.push(c);
    size += c.length;
  }
  return {
    'tiny (1 class, the baseline)': { storageClassMap: classes(1) },
    '200 classes with node selectors': { storageClassMap: classes(200, SELECTOR) },
    '2,000 simple classes': { storageClassMap: classes(2000) },
    '7,000 simple classes (56,000 values)': { storageClassMap: classes(7000) },
    '3,000 classes with quoted paths and arguments (900 KiB)': { storageClassMap: quotedClasses.join('') },
    'a flow list of 29,000 items (58,000 values)': {
      storageClassMap: classes(1),
      nodeLabelsForPV: `[${Array(29_000).fill('a').join(',')}]`,
    },
    '1 MiB of simple classes (19,000, over the bound)': { storageClassMap: classes(19_000) },
    'a flow list of 500,000 items (1 MiB, over the bound)': {
      storageClassMap: classes(1),
      nodeLabelsForPV: `[${Array(500_000).fill('a').join(',')}]`,
    },
  };
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  if (args[0] === '--child') return child(args[1] ?? '');
  const runsAt = args.indexOf('--runs');
  const runs = runsAt >= 0 ? Number(args[runsAt + 1]) : 3;
  const root = mkdtempSync(join(tmpdir(), 'lvp-config-size-'));
  try {
    const rows: string[] = [];
    let baseline = NaN;
    for (const [name, files] of Object.entries(inputs())) {
      const dir = join(root, String(rows.length));
      mkdirSync(dir);
      let bytes = 0;
      for (const [key, text] of Object.entries(files)) {
        writeFileSync(join(dir, key), text);
        bytes += Buffer.byteLength(text);
      }
      const ms: number[] = [];
      const peak: number[] = [];
      let result = '';
      for (let i = 0; i < runs; i++) {
        const m = measure(dir);
        ms.push(m.ms);
        peak.push(m.peakKiB);
        result = m.result;
      }
      const peakMiB = median(peak) / 1024;
      if (Number.isNaN(baseline)) baseline = peakMiB;
      rows.push(
        `| ${name} | ${(bytes / 1024).toFixed(0)} KiB | ${median(ms).toFixed(0)} | ${peakMiB.toFixed(0)} MiB (+${(peakMiB - baseline).toFixed(0)}) | ${result} |`,
      );
      process.stderr.write(`${rows.at(-1) ?? ''}\n`);
    }
    process.stdout.write(
      `| input | size | ms (median of ${String(runs)}) | peak RSS (over the baseline) | result |\n|---|---|---|---|---|\n${rows.join('\n')}\n`,
    );
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

await main();
