// Config fuzzing: generated config sources (random bytes, random YAML, mutated valid configs,
// aliases, oversized and special files, broken layouts) through
//   0. the scalar sweep (bench/config-scalar-sweep.ts): every scalar of a table of upstream's
//      decoding (bench/upstream-scalars.ts: date-like, numeric, boolean, null, quoted, block, tagged,
//      !!binary) in every string field of a valid config and in its boolean, int64 and duration
//      fields, written directly, through an anchor and alias and through a merge key, in the three
//      layouts, decoded as loadConfig does (every tenth read from disk by loadConfig itself) and
//      compared with the table: a value that differs, or a refusal neither the table nor the
//      project's own validation rules explain, is a mismatch;
//   1. the loader (readConfigSnapshot + parseConfigSnapshot, in-process),
//   2. diff-config: its core (compareConfigs, in-process) for every source and the real CLI as a
//      process for a sample,
//   3. a live reload of a running `provisioner run --sandbox` process (the real CLI) over its
//      admin socket, sampling the agent's RSS.
// Verdicts: a scalar mismatch, a crash (an error that is not a typed ProvisionerError, a stack
// trace, a dead agent), a hang (no answer within 5 s), exit 70, or RSS above the agent's idle
// value + 50 MB. Not a timed test: it reports counts, never fails on speed.
// Usage (after `npm run build`):
//   node dist/bench/config-fuzz.js [--sources 10000] [--cli 1000] [--seed 42] [--max-failures 25]
//     [--agent-node-options "--max-semi-space-size=2"] [--scalars 0 | --only-scalars]
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { constants } from 'node:fs';
import { mkdir, mkdtemp, open, readdir, rename, rm, symlink, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { stringify } from 'yaml';
import { AdminClient } from '../src/core/agent/admin-client.js';
import { compareConfigs } from '../src/core/config/compare.js';
import { parseConfigSnapshot } from '../src/core/config/decode/parse.js';
import { readConfigSnapshot } from '../src/core/config/source/load.js';
import { ProvisionerError } from '../src/core/errors.js';
import { CLI, runCli } from '../test/support/cli.js';
import { quote, runScalarSweep } from './config-scalar-sweep.js';
import type { SweepResult } from './config-scalar-sweep.js';
import { rssBytesOf } from './support.js';

function argument(name: string, fallback: number): number {
  const at = process.argv.indexOf(`--${name}`);
  const value = at > 0 ? Number(process.argv[at + 1]) : fallback;
  if (!Number.isInteger(value) || value < 0) throw new Error(`--${name}: expected a whole number`);
  return value;
}

const SOURCES = argument('sources', 10_000);
const CLI_SAMPLE = argument('cli', 1_000);
const SEED = argument('seed', 42);
const MAX_FAILURES = argument('max-failures', 25);
/** `--scalars 0` skips the scalar sweep; `--only-scalars` runs nothing else. */
const ONLY_SCALARS = process.argv.includes('--only-scalars');
const SCALARS = ONLY_SCALARS || argument('scalars', 1) > 0;
const HANG_MS = 5_000;
/** Node flags for the agent process, e.g. `--agent-node-options "--max-semi-space-size=2"` to run it as the image does. */
const AGENT_NODE_OPTIONS = ((): string[] => {
  const at = process.argv.indexOf('--agent-node-options');
  return at > 0 ? (process.argv[at + 1] ?? '').split(' ').filter((f) => f !== '') : [];
})();
const RSS_BUDGET_BYTES = 50 * 2 ** 20;

// ---- what a source is ------------------------------------------------------------------------

type Content =
  | { readonly kind: 'text'; readonly bytes: Uint8Array }
  | { readonly kind: 'fifo' }
  | { readonly kind: 'device'; readonly target: '/dev/zero' | '/dev/urandom' | '/dev/null' }
  | { readonly kind: 'directory' }
  | { readonly kind: 'dangling-link' };

interface Key {
  readonly name: string;
  readonly content: Content;
}

type Source =
  | { readonly layout: 'directory'; readonly kubelet: boolean; readonly danglingData: boolean; readonly keys: Key[] }
  | { readonly layout: 'file'; readonly content: Content };

const KEYS = [
  'storageClassMap',
  'useJobForCleaning',
  'nodeLabelsForPV',
  'labelsForPV',
  'minResyncPeriod',
  'useNodeNameOnly',
  'setPVOwnerRef',
  'jobTolerations',
  'removeNodeNotReadyTaint',
  'provisionerNotReadyNodeTaintKey',
  'useAlphaAPI',
];

/** Valid values per key; `@DIR@` is the sandbox's discovery directory. */
const VALID: Readonly<Record<string, readonly string[]>> = {
  storageClassMap: [
    'local-storage:\n  hostDir: @DIR@\n  mountDir: @DIR@\n',
    'local-storage:\n  hostDir: @DIR@\n  mountDir: @DIR@\n  blockCleanerCommand:\n    - "/scripts/shred.sh"\n    - "2"\n  volumeMode: Filesystem\n  fsType: ext4\n  namePattern: "vol*"\n',
    'local-storage:\n  hostDir: @DIR@\n  mountDir: @DIR@\n  selector:\n    - matchExpressions:\n        - key: zone\n          operator: In\n          values: [a, b]\n',
  ],
  useJobForCleaning: ['"yes"', 'false', 'on'],
  nodeLabelsForPV: ['- topology.kubernetes.io/zone\n- kubernetes.io/hostname\n'],
  labelsForPV: ['team: storage\ntier: "1.10"\n'],
  minResyncPeriod: ['5m0s', '"1h"', '30s'],
  useNodeNameOnly: ['"true"'],
  setPVOwnerRef: ['false'],
  jobTolerations: ['- key: dedicated\n  operator: Equal\n  value: storage\n  effect: NoSchedule\n'],
  removeNodeNotReadyTaint: ['false'],
  provisionerNotReadyNodeTaintKey: ['example.com/not-ready'],
  useAlphaAPI: ['false'],
};

const YAML_TOKENS = [
  '*',
  '*a',
  '&a',
  '*undefined',
  '&x [1, 2]',
  '!!str',
  '!!binary',
  '!custom',
  '|',
  '>-',
  '- ',
  ': ',
  '? ',
  '[',
  ']',
  '{',
  '}',
  ',',
  '#',
  "'",
  '"',
  '\\',
  '\n',
  '\n  ',
  '\t',
  '---\n',
  '...\n',
  '%YAML 1.1\n',
  '<<: *a\n',
  'yes',
  'no',
  '~',
  'null',
  '0x1F',
  '1e400',
  '\0',
  '\u00ff',
  '\ufeff',
  'hostDir',
  'mountDir',
  'storageClassMap',
  '/mnt/disks',
];

const text = (value: string): Content => ({ kind: 'text', bytes: new TextEncoder().encode(value) });

const aliasBomb = (levels: number): string => {
  const lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]'];
  for (let i = 1; i <= levels; i++) {
    lines.push(`a${String(i)}: &a${String(i)} [${Array.from({ length: 9 }, () => `*a${String(i - 1)}`).join(', ')}]`);
  }
  return `${lines.join('\n')}\n`;
};

const validValue = (key: string): fc.Arbitrary<string> => fc.constantFrom(...(VALID[key] ?? ['""']));

/** A valid value, then a few byte-level or token-level edits. */
const mutated = (key: string): fc.Arbitrary<Content> =>
  fc
    .tuple(
      validValue(key),
      fc.array(
        fc.oneof(
          fc.record({ op: fc.constant('insert' as const), at: fc.nat(), token: fc.constantFrom(...YAML_TOKENS) }),
          fc.record({ op: fc.constant('delete' as const), at: fc.nat(), length: fc.integer({ min: 1, max: 12 }) }),
          fc.record({ op: fc.constant('alias' as const), at: fc.nat(), word: fc.constantFrom('disk', 'xfs', 'a', '') }),
          fc.record({ op: fc.constant('byte' as const), at: fc.nat(), byte: fc.integer({ min: 0, max: 255 }) }),
        ),
        { minLength: 1, maxLength: 4 },
      ),
    )
    .map(([base, edits]) => {
      let bytes = Buffer.from(base, 'utf8');
      for (const edit of edits) {
        const at = bytes.length === 0 ? 0 : edit.at % (bytes.length + 1);
        const before = bytes.subarray(0, at);
        switch (edit.op) {
          case 'insert':
            bytes = Buffer.concat([before, Buffer.from(edit.token), bytes.subarray(at)]);
            break;
          case 'delete':
            bytes = Buffer.concat([before, bytes.subarray(at + edit.length)]);
            break;
          case 'alias': {
            // Replace the scalar after the next `: ` with an unquoted alias.
            const s = bytes.toString('utf8');
            const colon = s.indexOf(': ', at);
            const end = colon < 0 ? -1 : s.indexOf('\n', colon);
            if (colon >= 0 && end > colon) bytes = Buffer.from(`${s.slice(0, colon + 2)}*${edit.word}${s.slice(end)}`);
            break;
          }
          case 'byte':
            bytes = Buffer.concat([before, Buffer.from([edit.byte]), bytes.subarray(at)]);
            break;
        }
      }
      return { kind: 'text', bytes: new Uint8Array(bytes) } satisfies Content;
    });

const contentFor = (key: string): fc.Arbitrary<Content> =>
  fc.oneof(
    { weight: 6, arbitrary: validValue(key).map(text) },
    { weight: 10, arbitrary: mutated(key) },
    {
      weight: 3,
      arbitrary: fc.array(fc.constantFrom(...YAML_TOKENS), { maxLength: 40 }).map((t) => text(t.join(''))),
    },
    { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 4 }).map((v) => text(stringify(v))) },
    { weight: 2, arbitrary: fc.uint8Array({ maxLength: 512 }).map((bytes): Content => ({ kind: 'text', bytes })) },
    { weight: 1, arbitrary: fc.integer({ min: 5, max: 10 }).map((n) => text(aliasBomb(n))) },
    {
      weight: 1,
      arbitrary: fc.integer({ min: 1_000, max: 200_000 }).map((n) => text(`${'['.repeat(n)}${']'.repeat(n)}`)),
    },
    {
      weight: 1,
      arbitrary: fc.constantFrom(2 ** 20 - 64, 2 ** 20 + 1, 3 * 2 ** 20).map((n) => text(`x: "${'a'.repeat(n)}"\n`)),
    },
    { weight: 1, arbitrary: fc.constant<Content>({ kind: 'fifo' }) },
    {
      weight: 1,
      arbitrary: fc
        .constantFrom('/dev/zero' as const, '/dev/urandom' as const, '/dev/null' as const)
        .map((target): Content => ({ kind: 'device', target })),
    },
    { weight: 1, arbitrary: fc.constant<Content>({ kind: 'directory' }) },
    { weight: 1, arbitrary: fc.constant<Content>({ kind: 'dangling-link' }) },
  );

const keyName = fc.oneof(
  { weight: 12, arbitrary: fc.constantFrom(...KEYS) },
  { weight: 1, arbitrary: fc.constantFrom('storageclassmap', 'unknownKey', 'StorageClassMap', 'a b', '\u00e9') },
);

const keysArbitrary = fc
  .uniqueArray(keyName, { minLength: 0, maxLength: 6, selector: (k) => k.toLowerCase() })
  .chain((names) => fc.tuple(...names.map((name) => contentFor(name).map((content): Key => ({ name, content })))));

const manifest = (keys: readonly Key[]): Content => {
  const data: Record<string, string> = {};
  for (const k of keys) if (k.content.kind === 'text') data[k.name] = Buffer.from(k.content.bytes).toString('utf8');
  return text(stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'lvp-config' }, data }));
};

const sourceArbitrary: fc.Arbitrary<Source> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      layout: fc.constant('directory' as const),
      kubelet: fc.boolean(),
      danglingData: fc.integer({ min: 0, max: 9 }).map((n) => n === 0),
      keys: keysArbitrary,
    }),
  },
  {
    weight: 2,
    arbitrary: keysArbitrary.map((keys): Source => ({ layout: 'file', content: manifest(keys) })),
  },
  {
    weight: 2,
    arbitrary: fc
      .oneof(contentFor('storageClassMap'), keysArbitrary.map(manifest))
      .map((content): Source => ({ layout: 'file', content })),
  },
);

// ---- writing a source to disk ----------------------------------------------------------------

async function writeContent(path: string, content: Content, discoveryDir: string): Promise<void> {
  switch (content.kind) {
    case 'text': {
      const s = Buffer.from(content.bytes);
      const replaced = s.includes('@DIR@')
        ? Buffer.from(s.toString('latin1').replaceAll('@DIR@', discoveryDir), 'latin1')
        : s;
      await writeFile(path, replaced);
      return;
    }
    case 'fifo':
      await run('mkfifo', [path]);
      return;
    case 'device':
      await symlink(content.target, path);
      return;
    case 'directory':
      await mkdir(path);
      return;
    case 'dangling-link':
      await symlink(join(path, '..', 'no-such-target'), path);
      return;
  }
}

/** Writes a source at `path` (a directory in kubelet's ..data layout or plain, or one file). */
async function writeSource(path: string, source: Source, discoveryDir: string, stamp: string): Promise<void> {
  if (source.layout === 'file') {
    await writeContent(path, source.content, discoveryDir);
    return;
  }
  await mkdir(path, { recursive: true });
  if (!source.kubelet) {
    for (const key of source.keys) await writeContent(join(path, key.name), key.content, discoveryDir);
    return;
  }
  await swapConfigMapVolume(path, source, discoveryDir, stamp);
}

/** kubelet's AtomicWriter: a new timestamped dir, `..data` renamed onto it, key links updated. */
async function swapConfigMapVolume(
  dir: string,
  source: Source & { layout: 'directory' },
  discoveryDir: string,
  stamp: string,
): Promise<void> {
  const dataDir = `..${stamp}`;
  await mkdir(join(dir, dataDir), { recursive: true });
  for (const key of source.keys) await writeContent(join(dir, dataDir, key.name), key.content, discoveryDir);
  const tmp = join(dir, `..data_tmp_${stamp}`);
  await symlink(source.danglingData ? `..gone-${stamp}` : dataDir, tmp);
  await rename(tmp, join(dir, '..data'));
  const wanted = new Set(source.keys.map((k) => k.name));
  for (const name of await readdir(dir)) {
    if (name.startsWith('..')) continue;
    if (!wanted.has(name)) await unlink(join(dir, name));
  }
  for (const name of wanted) {
    await symlink(join('..data', name), join(dir, name)).catch((error: unknown) => {
      if (!(error instanceof Error && 'code' in error && error.code === 'EEXIST')) throw error;
    });
  }
}

/** Releases anything blocked opening FIFOs under `dir` (a hang of the code under test). */
async function releaseFifos(paths: readonly string[]): Promise<void> {
  for (const path of paths) {
    try {
      const handle = await open(path, constants.O_WRONLY | constants.O_NONBLOCK);
      await handle.close();
    } catch {
      // No reader waiting, or not a FIFO.
    }
  }
}

function fifosOf(path: string, source: Source): string[] {
  if (source.layout === 'file') return source.content.kind === 'fifo' ? [path] : [];
  return source.keys.filter((k) => k.content.kind === 'fifo').map((k) => join(path, k.name));
}

// ---- processes -------------------------------------------------------------------------------

function run(command: string, args: readonly string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: 'ignore' });
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code === 0) resolve();
      else reject(new Error(`${command} exited ${String(code)}`));
    });
  });
}

type Verdict<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly hang: true };

async function withinHangLimit<T>(work: Promise<T>): Promise<Verdict<T>> {
  let timer: NodeJS.Timeout | undefined;
  const hang = new Promise<Verdict<T>>((resolve) => {
    timer = setTimeout(() => {
      resolve({ ok: false, hang: true });
    }, HANG_MS);
  });
  try {
    return await Promise.race([work.then((value): Verdict<T> => ({ ok: true, value })), hang]);
  } finally {
    clearTimeout(timer);
  }
}

// ---- the run ---------------------------------------------------------------------------------

interface Tally {
  readonly counts: Map<string, number>;
  readonly failures: string[];
}

const tally = (): Tally => ({ counts: new Map(), failures: [] });
const count = (t: Tally, what: string): void => {
  t.counts.set(what, (t.counts.get(what) ?? 0) + 1);
};
const fail = (t: Tally, what: string, detail: string): void => {
  count(t, what);
  if (t.failures.length < 20) t.failures.push(`${what}: ${detail}`);
};
const failuresOf = (t: Tally): number =>
  [...t.counts]
    .filter(([k]) => k.startsWith('CRASH') || k.startsWith('HANG') || k.startsWith('EXIT70') || k.startsWith('RSS'))
    .reduce((n, [, v]) => n + v, 0);

function classify(t: Tally, error: unknown): void {
  if (error instanceof ProvisionerError) count(t, `exit ${String(error.exitCode)} (${error.code})`);
  else fail(t, 'CRASH', error instanceof Error ? `${error.name}: ${error.message}` : String(error));
}

function describe(source: Source): string {
  if (source.layout === 'file') return `file(${source.content.kind})`;
  return `dir(${source.kubelet ? 'kubelet' : 'plain'}${source.danglingData ? ', dangling ..data' : ''}: ${source.keys.map((k) => `${k.name}=${k.content.kind}`).join(' ')})`;
}

function reportSweep(sweep: SweepResult): void {
  const by = (layout: string, mode: string): string => String(sweep.configsBy.get(`${layout} ${mode}`) ?? 0);
  const checked = [...sweep.outcomes.values()].reduce((a, b) => a + b, 0);
  console.log(
    `scalar sweep: ${String(sweep.cases)} scalars × ${String(sweep.sites)} fields × 3 ways × 3 layouts: ${String(sweep.configs)} configs loaded (${String(sweep.diskLoads)} of them also from disk with loadConfig; ${String(sweep.notApplicable)} combinations not applicable), ${String(checked)} values checked, ${String(sweep.mismatches.length)} mismatches, ${(sweep.ms / 1000).toFixed(0)} s`,
  );
  console.log('| layout | direct | alias | merge |\n|---|---|---|---|');
  for (const layout of ['directory', 'file', 'configmap']) {
    console.log(`| ${layout} | ${by(layout, 'direct')} | ${by(layout, 'alias')} | ${by(layout, 'merge')} |`);
  }
  console.log('| outcome of a probed value | count |\n|---|---|');
  for (const [label, n] of [...sweep.outcomes].sort(([a], [b]) => (a < b ? -1 : 1))) {
    console.log(`| ${label} | ${String(n)} |`);
  }
  for (const m of sweep.mismatches) {
    console.log(
      `  MISMATCH ${m.layout}/${m.mode} ${quote(m.field).slice(1, -1)} written ${quote(m.written)}: expected ${m.expected}; got ${m.got}`,
    );
  }
}

const work = await mkdtemp(join(tmpdir(), 'lvp-config-fuzz-'));
// 0: the scalar sweep, in-process, before anything else.
const sweep = SCALARS
  ? await runScalarSweep(join(work, 'scalars')).catch(async (error: unknown) => {
      await rm(work, { recursive: true, force: true });
      throw error;
    })
  : undefined;
if (sweep !== undefined) reportSweep(sweep);
const scalarMismatches = sweep?.mismatches.length ?? 0;
if (ONLY_SCALARS) {
  await rm(work, { recursive: true, force: true });
  process.exit(scalarMismatches === 0 ? 0 : 1);
}
const sources = fc.sample(sourceArbitrary, { numRuns: SOURCES, seed: SEED });
const loader = tally();
const diffCore = tally();
const diffCli = tally();
const reload = tally();
let agent: ChildProcess | undefined;
const startedAt = performance.now();
try {
  const discoveryDir = join(work, 'sandbox', 'disks', 'local-storage');
  const baseline = join(work, 'baseline.yaml');
  await writeFile(
    baseline,
    `storageClassMap: |\n  local-storage:\n    hostDir: ${discoveryDir}\n    mountDir: ${discoveryDir}\n`,
  );

  // 1 + 2a: the loader and diff-config's core, in-process, on every source.
  const cliEvery = CLI_SAMPLE === 0 ? Infinity : Math.max(1, Math.floor(SOURCES / CLI_SAMPLE));
  const cliJobs: { path: string; source: Source }[] = [];
  for (const [i, source] of sources.entries()) {
    const path = join(work, 'sources', `s${String(i)}`);
    await mkdir(join(work, 'sources'), { recursive: true });
    await writeSource(path, source, discoveryDir, `s${String(i)}`);
    const loaded = await withinHangLimit(
      readConfigSnapshot(path)
        .then(parseConfigSnapshot)
        .then(
          () => 'loaded',
          (error: unknown) => error,
        ),
    );
    if (!loaded.ok) {
      fail(loader, 'HANG', describe(source));
      await releaseFifos(fifosOf(path, source));
    } else if (loaded.value === 'loaded') count(loader, 'loaded');
    else classify(loader, loaded.value);
    const compared = await withinHangLimit(
      compareConfigs({ from: baseline, to: path, failOn: [], context: 3 }).then(
        () => 'compared',
        (error: unknown) => error,
      ),
    );
    if (!compared.ok) {
      fail(diffCore, 'HANG', describe(source));
      await releaseFifos(fifosOf(path, source));
    } else if (compared.value === 'compared') count(diffCore, 'compared');
    else classify(diffCore, compared.value);
    if (i % cliEvery === 0 && cliJobs.length < CLI_SAMPLE) cliJobs.push({ path, source });
    if (failuresOf(loader) + failuresOf(diffCore) >= MAX_FAILURES) break;
  }
  // 2b: the real diff-config process on a sample, two at a time.
  let next = 0;
  const worker = async (): Promise<void> => {
    for (;;) {
      const job = cliJobs[next++];
      if (job === undefined || failuresOf(diffCli) >= MAX_FAILURES) return;
      const r = await runCli(['diff-config', '--from', baseline, '--to', job.path], {
        timeoutMs: HANG_MS,
        env: { PROVISIONER_ADMIN_SOCKET: '/nonexistent/admin.sock' },
      }).catch((error: unknown) => {
        if (error instanceof Error && error.message.includes('still running after')) return undefined;
        throw error;
      });
      if (r === undefined) {
        fail(diffCli, 'HANG', describe(job.source));
        await releaseFifos(fifosOf(job.path, job.source));
      } else if (r.code === 70) fail(diffCli, 'EXIT70', `${describe(job.source)}: ${r.stderr.slice(0, 300)}`);
      else if (/^\s+at .+:\d+:\d+\)?$/mu.test(r.stderr)) fail(diffCli, 'CRASH (stack trace)', describe(job.source));
      else if ((r.code === 3 || r.code === 4) && !r.stderr.startsWith('error: '))
        fail(diffCli, 'CRASH (no error line)', `${describe(job.source)}: ${r.stderr.slice(0, 200)}`);
      else count(diffCli, `exit ${String(r.code)}`);
    }
  };
  await Promise.all([worker(), worker()]);

  // 3: live reloads of a running agent.
  const sandbox = join(work, 'sandbox');
  const configDir = join(sandbox, 'config');
  await mkdir(join(discoveryDir, 'vol1'), { recursive: true });
  await mkdir(join(discoveryDir, 'vol2'), { recursive: true });
  const valid: Source & { layout: 'directory' } = {
    layout: 'directory',
    kubelet: true,
    danglingData: false,
    keys: [{ name: 'storageClassMap', content: text(VALID['storageClassMap']?.[0] ?? '') }],
  };
  await swapConfigMapVolume(configDir, valid, discoveryDir, 'initial');
  const agentProcess = spawn(
    process.execPath,
    [
      ...AGENT_NODE_OPTIONS,
      CLI,
      'run',
      '--sandbox',
      sandbox,
      '--listen-address',
      '127.0.0.1:0',
      '--log-level',
      'error',
    ],
    {
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  );
  agent = agentProcess;
  let agentLog = '';
  agentProcess.stderr.setEncoding('utf8').on('data', (d: string) => {
    agentLog = (agentLog + d).slice(-4096);
  });
  const client = new AdminClient(join(sandbox, 'admin.sock'), { timeoutMs: HANG_MS });
  for (let attempt = 0; ; attempt++) {
    try {
      await client.status();
      break;
    } catch (error) {
      if (attempt > 200) throw new Error(`the agent did not start\n${agentLog}`, { cause: error });
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  await new Promise((r) => setTimeout(r, 2_000));
  const pid = agentProcess.pid ?? 0;
  const idleRss = rssBytesOf(pid);
  let maxRss = idleRss;
  const reloadSources = sources.filter((s): s is Source & { layout: 'directory' } => s.layout === 'directory');
  for (const [i, source] of reloadSources.entries()) {
    // The agent's config directory is always a kubelet volume; a plain layout becomes one too.
    const asVolume = { ...source, kubelet: true };
    await swapConfigMapVolume(configDir, asVolume, discoveryDir, `r${String(i)}`);
    // Every other reload allows the guarded impact classes, so applied generations are fuzzed too.
    const allow = i % 2 === 1 ? { allow: ['orphans-pvs', 'ownership-change'] as const } : {};
    const answer = await withinHangLimit(
      client.reload(allow).then(
        (r) => r.outcome,
        (error: unknown) => error,
      ),
    );
    if (!answer.ok) {
      fail(reload, 'HANG', describe(source));
      await releaseFifos(fifosOf(configDir, source));
    } else if (typeof answer.value === 'string') count(reload, answer.value);
    else if (answer.value instanceof ProvisionerError)
      fail(reload, `CRASH (admin: ${answer.value.code})`, `${describe(source)}: ${answer.value.message}`);
    else fail(reload, 'CRASH', String(answer.value));
    if (agentProcess.exitCode !== null) {
      fail(reload, 'CRASH (agent exited)', `${String(agentProcess.exitCode)}: ${agentLog}`);
      break;
    }
    const rss = rssBytesOf(pid);
    maxRss = Math.max(maxRss, rss);
    if (rss > idleRss + RSS_BUDGET_BYTES)
      fail(reload, 'RSS over budget', `${String(Math.round(rss / 2 ** 20))} MiB after ${describe(source)}`);
    // Old timestamped dirs go, as kubelet deletes them.
    if (i > 0) await rm(join(configDir, `..r${String(i - 1)}`), { recursive: true, force: true });
    if (failuresOf(reload) >= MAX_FAILURES) break;
  }
  const heapAtEnd = (await client.status()).diagnostics?.heapUsedBytes ?? 0;
  // Still healthy: a valid config applies, and SIGTERM stops it promptly.
  await swapConfigMapVolume(configDir, valid, discoveryDir, 'final');
  const last = await withinHangLimit(
    client.reload({ force: true }).then(
      (r) => r.outcome,
      (error: unknown) => String(error),
    ),
  );
  const finalOutcome = last.ok ? last.value : 'HANG';
  if (finalOutcome !== 'applied') fail(reload, 'CRASH (final valid config not applied)', finalOutcome);
  const stopStarted = performance.now();
  agentProcess.kill('SIGTERM');
  const exited = await withinHangLimit(
    new Promise<number | null>((r) => {
      agentProcess.on('exit', (code) => {
        r(code);
      });
    }),
  );
  const stopMs = performance.now() - stopStarted;
  if (!exited.ok) fail(reload, 'HANG (SIGTERM)', 'still running 5 s after SIGTERM');
  agent = undefined;

  const mib = (b: number): string => (b / 2 ** 20).toFixed(1);
  const show = (t: Tally): string =>
    [...t.counts]
      .sort()
      .map(([k, v]) => `${k}: ${String(v)}`)
      .join(', ');
  const failures = failuresOf(loader) + failuresOf(diffCore) + failuresOf(diffCli) + failuresOf(reload);
  console.log(
    `node ${process.version}, seed ${String(SEED)}, ${String(sources.length)} sources generated, ${((performance.now() - startedAt) / 1000).toFixed(0)} s`,
  );
  console.log('| stage | sources | outcomes | crashes + hangs + exit 70 |\n|---|---|---|---|');
  console.log(`| loader (in-process) | ${String(sources.length)} | ${show(loader)} | ${String(failuresOf(loader))} |`);
  console.log(
    `| diff-config core (in-process) | ${String(sources.length)} | ${show(diffCore)} | ${String(failuresOf(diffCore))} |`,
  );
  console.log(
    `| diff-config CLI process | ${String(cliJobs.length)} | ${show(diffCli)} | ${String(failuresOf(diffCli))} |`,
  );
  console.log(
    `| live reload, run --sandbox process | ${String(reloadSources.length)} | ${show(reload)} | ${String(failuresOf(reload))} |`,
  );
  console.log(
    `agent RSS: idle ${mib(idleRss)} MiB, max ${mib(maxRss)} MiB (budget idle + 50 MiB), heap used at the end ${mib(heapAtEnd)} MiB; agent node flags: ${AGENT_NODE_OPTIONS.join(' ') || 'none'}; final valid config: ${finalOutcome}; SIGTERM → exit in ${stopMs.toFixed(0)} ms`,
  );
  for (const t of [loader, diffCore, diffCli, reload]) for (const f of t.failures) console.log(`  ${f}`);
  if (sweep !== undefined) {
    console.log(`scalar sweep (above): ${String(sweep.configs)} configs, ${String(scalarMismatches)} mismatches`);
  }
  process.exitCode = failures === 0 && scalarMismatches === 0 ? 0 : 1;
} finally {
  agent?.kill('SIGKILL');
  await rm(work, { recursive: true, force: true });
}
