// The Dockerfile without a Docker engine: its shape (stages, base image, entrypoint, what the
// runtime stage receives). The image it builds is run by test/integration/image/image.test.ts
// (built with podman) and on a real kubelet by test/integration/node-real/chart-on-node.test.ts.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, posix } from 'node:path';
import { describe, it } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { REPO_ROOT } from '../../support/cli.js';

interface Instruction {
  readonly keyword: string;
  readonly args: string;
  readonly line: number;
}

interface Stage {
  readonly image: string;
  readonly name: string | undefined;
  readonly instructions: Instruction[];
}

/** Splits a Dockerfile into instructions: continuation lines joined, comment lines dropped. */
function parseDockerfile(text: string): Instruction[] {
  const result: Instruction[] = [];
  let current: { text: string; line: number } | undefined;
  text.split('\n').forEach((raw, index) => {
    const trimmed = raw.trim();
    if (trimmed.startsWith('#') || (trimmed === '' && current === undefined)) return;
    const continued = trimmed.endsWith('\\');
    const part = continued ? trimmed.slice(0, -1).trim() : trimmed;
    if (current === undefined) current = { text: part, line: index + 1 };
    else current.text = `${current.text} ${part}`.trim();
    if (!continued) {
      const match = /^(\S+)\s*(.*)$/su.exec(current.text);
      if (match !== null) {
        result.push({ keyword: (match[1] ?? '').toUpperCase(), args: match[2] ?? '', line: current.line });
      }
      current = undefined;
    }
  });
  assert.equal(current, undefined, 'the Dockerfile ends in a continuation line');
  return result;
}

function stagesOf(instructions: readonly Instruction[]): Stage[] {
  const stages: Stage[] = [];
  for (const instruction of instructions) {
    if (instruction.keyword === 'FROM') {
      const [image = '', as, name] = instruction.args.split(/\s+/u);
      assert.ok(as === undefined || as.toUpperCase() === 'AS', `FROM syntax at line ${instruction.line}`);
      stages.push({ image, name, instructions: [] });
    } else {
      const stage = stages.at(-1);
      assert.ok(stage !== undefined || instruction.keyword === 'ARG', `${instruction.keyword} before FROM`);
      stage?.instructions.push(instruction);
    }
  }
  return stages;
}

interface Copy {
  readonly from: string | undefined;
  readonly chmod: string | undefined;
  readonly sources: readonly string[];
  readonly dest: string;
}

function copiesOf(stage: Stage): Copy[] {
  return stage.instructions
    .filter((i) => i.keyword === 'COPY' || i.keyword === 'ADD')
    .map((i) => {
      assert.equal(i.keyword, 'COPY', `line ${i.line}: use COPY, not ADD`);
      const words = i.args.split(/\s+/u);
      const flags = new Map<string, string>();
      while (words[0]?.startsWith('--') === true) {
        const [flag = '', value = ''] = (words.shift() ?? '').slice(2).split('=');
        flags.set(flag, value);
      }
      const dest = words.pop();
      assert.ok(dest !== undefined && words.length > 0, `line ${i.line}: COPY needs sources and a destination`);
      return { from: flags.get('from'), chmod: flags.get('chmod'), sources: words, dest };
    });
}

const runs = (stage: Stage): string[] => stage.instructions.filter((i) => i.keyword === 'RUN').map((i) => i.args);
const lastArg = (stage: Stage, keyword: string): string | undefined =>
  stage.instructions.findLast((i) => i.keyword === keyword)?.args;

interface PackageJson {
  readonly name: string;
  readonly version: string;
  readonly bin: Record<string, string>;
}

describe('Dockerfile', () => {
  const dockerfile = readFileSync(join(REPO_ROOT, 'Dockerfile'), 'utf8');
  const pkg = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as PackageJson;
  const stages = stagesOf(parseDockerfile(dockerfile));
  const build = stages[0];
  const runtime = stages.at(-1);

  it('is a multi-stage build on the Node 24 slim base pinned by tag (a digest may follow)', () => {
    assert.ok(stages.length >= 2, 'at least a build and a runtime stage');
    for (const stage of stages) {
      assert.match(stage.image, /^node:24-bookworm-slim(@sha256:[0-9a-f]{64})?$/u, `base image ${stage.image}`);
    }
    assert.equal(build?.name, 'build');
    assert.match(dockerfile, /@sha256:<digest>/u, 'a comment shows where the digest pin goes');
  });

  it('builds with npm ci, then npm run build', () => {
    assert.ok(build);
    const commands = runs(build).join(' && ');
    const ci = commands.indexOf('npm ci');
    const buildAt = commands.indexOf('npm run build');
    assert.ok(ci >= 0 && buildAt > ci, `npm ci → npm run build: ${commands}`);
    assert.equal(commands.lastIndexOf('npm ci'), ci, 'one npm ci');
  });

  it('the build stage copies every input of `npm run build` (tsconfig, the scripts it runs, src)', () => {
    assert.ok(build);
    const copied = copiesOf(build)
      .filter((c) => c.from === undefined)
      .flatMap((c) => c.sources.map((s) => s.replace(/\/$/u, '')));
    const scripts = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as {
      scripts: Record<string, string>;
    };
    const buildScript = scripts.scripts['build'] ?? '';
    const inputs = [
      'package.json',
      'package-lock.json',
      'src',
      ...[...buildScript.matchAll(/-p (\S+)/gu)].map((m) => m[1] ?? ''),
      ...[...buildScript.matchAll(/node (scripts\/\S+)/gu)].map((m) => m[1] ?? ''),
    ];
    assert.ok(inputs.includes('tsconfig.json') && inputs.some((i) => i.startsWith('scripts/')), buildScript);
    for (const input of inputs) assert.ok(copied.includes(input), `the build stage copies ${input}`);
  });

  it('runtime stage: ENTRYPOINT ["tini", "--", "node", "--jitless", "--optimize-for-size", "--initial-old-space-size=16", bin/run.js], CMD ["run"], and provisioner on PATH (a symlink to bin/run.js)', () => {
    assert.ok(runtime);
    const workdir = lastArg(runtime, 'WORKDIR') ?? '/';
    assert.deepEqual(JSON.parse(lastArg(runtime, 'ENTRYPOINT') ?? 'null'), [
      'tini',
      '--',
      'node',
      '--jitless',
      '--optimize-for-size',
      '--initial-old-space-size=16',
      posix.join(workdir, 'bin/run.js'),
    ]);
    assert.deepEqual(JSON.parse(lastArg(runtime, 'CMD') ?? 'null'), ['run']);
    assert.equal(pkg.bin['provisioner'], './bin/run.js');
    // The memory bound under reload churn (docs/benchmarks.md, config fuzzing and reload churn) is
    // measured with it, and the chart's memory request and limit are set from that.
    const nodeOptions = '"--max-semi-space-size=2 --max-old-space-size=256"';
    assert.ok(
      runtime.instructions.some((i) => i.keyword === 'ENV' && i.args.trim() === `NODE_OPTIONS=${nodeOptions}`),
      `the runtime stage sets NODE_OPTIONS=${nodeOptions}`,
    );
    assert.ok(
      runs(runtime).some((r) => r.includes(`ln -s ${posix.join(workdir, 'bin/run.js')} /usr/local/bin/provisioner`)),
      'provisioner is linked onto PATH',
    );
    assert.match(readFileSync(join(REPO_ROOT, 'bin/run.js'), 'utf8'), /^#!\/usr\/bin\/env node\n/u);
  });

  it("the entrypoint's node flags stay with `run`: any other command is executed again without them (the dashboard needs WebAssembly)", () => {
    // A preload that says, in each process it starts in, whether WebAssembly (gone under --jitless)
    // exists and whether --optimize-for-size and --initial-old-space-size are on.
    const probe = `data:text/javascript,process.stderr.write('wasm:'+typeof WebAssembly+(process.execArgv.includes('--optimize-for-size')?' sized':'')+(process.execArgv.includes('--initial-old-space-size=16')?' initial':'')+'\\n')`;
    const entry = (args: readonly string[]): { status: number | null; stdout: string; wasm: string[] } => {
      const flags = ['--jitless', '--optimize-for-size', '--initial-old-space-size=16', '--import', probe];
      const r = spawnSync(process.execPath, [...flags, join(REPO_ROOT, 'bin/run.js'), ...args], {
        encoding: 'utf8',
        env: { ...process.env, NODE_OPTIONS: '' },
        timeout: 60_000,
      });
      return { status: r.status, stdout: r.stdout, wasm: r.stderr.split('\n').filter((l) => l.startsWith('wasm:')) };
    };
    const version = entry(['--version']);
    assert.equal(version.status, 0);
    assert.match(version.stdout, /^local-volume-provisioner-ts\/\d/u);
    assert.deepEqual(
      version.wasm,
      ['wasm:undefined sized initial', 'wasm:object'],
      "started jitless, then executed again with the JIT and V8's default heap sizing",
    );
    const run = entry(['run', '--help']);
    assert.equal(run.status, 0);
    assert.match(run.stdout, /--min-pass-interval/u);
    assert.deepEqual(run.wasm, ['wasm:undefined sized initial'], 'run keeps every flag, in one process');
  });

  it('runtime stage: the cleaners at /scripts (executable) and the tools they need, without recommends or apt lists', () => {
    assert.ok(runtime);
    const toScripts = copiesOf(runtime).filter((c) => c.dest === '/scripts/' || c.dest === '/scripts');
    assert.deepEqual(
      toScripts.map((c) => [c.from, c.sources]),
      [[undefined, ['cleaners/']]],
    );
    assert.ok(
      runs(runtime).some((r) => /chmod (0?755|\+x) \/scripts\/\*\.sh/u.test(r)) || toScripts[0]?.chmod === '0755',
      'the scripts are made executable',
    );
    const install = runs(runtime).find((r) => r.includes('apt-get install'));
    assert.ok(install !== undefined, 'apt-get install in the runtime stage');
    assert.match(install, /apt-get update/u);
    assert.match(install, /apt-get install -y --no-install-recommends /u);
    for (const tool of ['util-linux', 'e2fsprogs', 'coreutils', 'tini']) {
      assert.match(install, new RegExp(`\\s${tool}(\\s|$)`, 'u'), tool);
    }
    assert.match(install, /rm -rf \/var\/lib\/apt\/lists\/\*/u, 'apt lists removed in the same layer');
  });

  it('PID 1 is an init that reaps zombies (tini, installed from Debian), and nothing replaces it', () => {
    assert.ok(runtime);
    // The exec form: a shell form would make /bin/sh PID 1, which neither reaps nor forwards SIGTERM.
    const entrypoint = JSON.parse(lastArg(runtime, 'ENTRYPOINT') ?? 'null') as unknown;
    assert.ok(Array.isArray(entrypoint), 'ENTRYPOINT in exec (JSON) form');
    assert.equal(entrypoint[0], 'tini', "PID 1's program is tini");
    assert.equal(entrypoint[1], '--', 'tini stops parsing options before the agent command');
    assert.equal(entrypoint[2], 'node');
    const install = runs(runtime).find((r) => r.includes('apt-get install')) ?? '';
    assert.match(install, /\stini(\s|$)/u, 'tini comes from the Debian package, in the runtime stage');
    assert.ok(
      runs(runtime).some((r) => /\btini --version\b/u.test(r)),
      'the image build runs tini once, so a missing binary fails the build',
    );
    // The pod may set args (they replace CMD), never command (it would replace the ENTRYPOINT).
    const manifests = parseAllDocuments(readFileSync(join(REPO_ROOT, 'deploy/provisioner.yaml'), 'utf8')).map(
      (d) => d.toJS() as unknown,
    );
    const daemonSets = manifests.filter(
      (
        m,
      ): m is { spec: { template: { spec: { containers: { name: string; command?: unknown; args?: unknown }[] } } } } =>
        typeof m === 'object' && m !== null && 'kind' in m && m.kind === 'DaemonSet',
    );
    assert.equal(daemonSets.length, 1, 'deploy/provisioner.yaml has the DaemonSet');
    for (const c of daemonSets[0]?.spec.template.spec.containers ?? []) {
      assert.equal(c.command, undefined, `deploy/provisioner.yaml container ${c.name} sets no command`);
      assert.ok(Array.isArray(c.args) && c.args[0] === 'run', `container ${c.name} passes args`);
    }
    const templates = join(REPO_ROOT, 'helm/provisioner/templates');
    for (const file of readdirSync(templates)) {
      const text = readFileSync(join(templates, file), 'utf8');
      assert.doesNotMatch(text, /^\s*command:/mu, `helm/provisioner/templates/${file} sets no container command`);
    }
  });

  it('runtime stage: the bundle, its manifest and entry only; no node_modules', () => {
    assert.ok(runtime && build);
    const commands = runs(runtime).join('\n');
    assert.doesNotMatch(commands, /\bnpm\b/u, 'no npm in the runtime stage');
    const fromBuild = copiesOf(runtime).filter((c) => c.from === 'build');
    const sources = fromBuild.flatMap((c) => c.sources.map((s) => posix.relative('/app', s)));
    assert.deepEqual(
      [...sources].sort(),
      ['bin/run.js', 'dist/src/cli', 'oclif.manifest.json', 'package.json'],
      'exactly the runtime files',
    );
    for (const c of copiesOf(runtime)) {
      for (const s of c.sources) assert.doesNotMatch(s, /node_modules/u, `COPY ${s}: the bundle needs no node_modules`);
      assert.doesNotMatch(c.dest, /node_modules/u);
    }
    for (const c of copiesOf(runtime).filter((x) => x.from === undefined)) {
      for (const s of c.sources)
        assert.doesNotMatch(s, /^(src|test|bench|tsconfig|node_modules)/u, `context COPY ${s}`);
    }
    assert.equal(lastArg(build, 'WORKDIR'), '/app');
    assert.match(runtime.instructions.map((i) => `${i.keyword} ${i.args}`).join('\n'), /ENV NODE_ENV=production/u);
  });

  it("runtime stage: V8's compile cache made at build time, for the image's own files, after they are copied", () => {
    assert.ok(runtime);
    // bin/run.js enables the cache; Node takes its directory from NODE_COMPILE_CACHE.
    assert.match(readFileSync(join(REPO_ROOT, 'bin/run.js'), 'utf8'), /module\.enableCompileCache\?\.\(\)/u);
    const env = runtime.instructions.find((i) => i.keyword === 'ENV' && i.args.startsWith('NODE_COMPILE_CACHE='));
    assert.ok(env !== undefined, 'the runtime stage sets NODE_COMPILE_CACHE');
    const dir = env.args.slice('NODE_COMPILE_CACHE='.length).trim();
    const workdir = lastArg(runtime, 'WORKDIR') ?? '/';
    assert.ok(
      dir.startsWith('/') && !dir.startsWith(`${workdir}/`),
      `${dir}: absolute, outside the bundle's ${workdir}`,
    );
    const nodeOptions = runtime.instructions.find((i) => i.keyword === 'ENV' && i.args.startsWith('NODE_OPTIONS='));
    // The cache is made under the NODE_OPTIONS the agent runs with (V8's flags are part of its key).
    assert.ok(nodeOptions !== undefined && nodeOptions.line < env.line);
    // With the ENTRYPOINT's node flags too (--jitless): entries made under other flags are not used.
    const agent = (JSON.parse(lastArg(runtime, 'ENTRYPOINT') ?? '[]') as string[]).slice(2).join(' ');
    const warm = runtime.instructions.find((i) => i.keyword === 'RUN' && i.args.includes(`${agent} run`));
    assert.ok(warm !== undefined && warm.line > env.line, `a RUN after the ENV starts \`${agent} run\` once`);
    const lastCopy = Math.max(...runtime.instructions.filter((i) => i.keyword === 'COPY').map((i) => i.line));
    assert.ok(warm.line > lastCopy, 'the cache is made after every file is in place');
    assert.match(warm.args, new RegExp(`find ${dir} -type f`, 'u'), 'the build fails if no cache was written');
  });

  it('.dockerignore lets through every path the COPY lines take from the build context', () => {
    const ignore = readFileSync(join(REPO_ROOT, '.dockerignore'), 'utf8')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '' && !l.startsWith('#'));
    assert.equal(ignore[0], '*', 'everything is excluded first');
    const allowed = ignore.filter((l) => l.startsWith('!')).map((l) => l.slice(1).replace(/\/$/u, ''));
    for (const stage of stages) {
      for (const c of copiesOf(stage).filter((x) => x.from === undefined)) {
        for (const s of c.sources) {
          const path = s.replace(/\/$/u, '');
          assert.ok(
            allowed.some((a) => path === a || path.startsWith(`${a}/`)),
            `${path} is excluded by .dockerignore`,
          );
          assert.ok(existsSync(join(REPO_ROOT, path)), `${path} exists in the repository`);
        }
      }
    }
  });
});
