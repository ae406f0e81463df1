// Runs tools/promql-eval (Prometheus's PromQL engine over the saved scrapes). The binary is built
// with the local Go toolchain, modules from the Go module proxy as go.sum pins them, and cached
// under ~/.cache/lvp-promql-eval/<hash of its sources>, so a second picture needs no build.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { REPO_ROOT } from '../support.js';
import type { Query } from './queries.js';
import type { SavedScrape } from './scrapes.js';

export interface EvaluatedSeries {
  readonly metric: Record<string, string>;
  /** [ms, value]; null where the value is NaN or infinite. */
  readonly points: [number, number | null][];
}

export interface Evaluated {
  readonly id: string;
  readonly error?: string;
  readonly series: EvaluatedSeries[];
}

export interface Evaluation {
  /** `github.com/prometheus/prometheus v0.316.0`: the module that evaluated the queries. */
  readonly engine: string;
  readonly samples: number;
  readonly results: Evaluated[];
}

const SOURCE = join(REPO_ROOT, 'tools/promql-eval');

/** Builds the evaluator if its cached binary is missing; returns its path. */
export function promqlEvalBinary(): string {
  const hash = createHash('sha256');
  for (const name of readdirSync(SOURCE).sort()) hash.update(name).update(readFileSync(join(SOURCE, name)));
  const cacheRoot = join(process.env['XDG_CACHE_HOME'] ?? join(homedir(), '.cache'), 'lvp-promql-eval');
  const bin = join(cacheRoot, hash.digest('hex').slice(0, 16), 'promql-eval');
  if (existsSync(bin)) return bin;
  mkdirSync(join(bin, '..'), { recursive: true });
  console.error(`[dashboard-picture] building ${SOURCE} (first time: downloads Prometheus's modules)`);
  // Never a newer toolchain behind our back: the go line of go.mod must suit the local one.
  const r = spawnSync('go', ['build', '-o', bin, '.'], {
    cwd: SOURCE,
    env: { ...process.env, GOTOOLCHAIN: 'local', CGO_ENABLED: '0' },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  if (r.status !== 0) throw new Error(`go build of ${SOURCE} failed (exit ${String(r.status)})`);
  return bin;
}

export function evaluate(scrapes: readonly SavedScrape[], queries: readonly Query[]): Evaluation {
  const r = spawnSync(promqlEvalBinary(), [], {
    input: JSON.stringify({ scrapes, queries }),
    encoding: 'utf8',
    maxBuffer: 256 * 2 ** 20,
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  if (r.status !== 0) throw new Error(`promql-eval failed (exit ${String(r.status)})`);
  return JSON.parse(r.stdout) as Evaluation;
}
