// The Dockerfile without a Docker engine: its shape (stages, base image, entrypoint, what the
// runtime stage receives), then the runtime layout it produces, rebuilt in a temp dir from its COPY
// lines (the build output of `npm run build`, the cleaner scripts), and every command started from
// that layout, with no node_modules anywhere up the tree: the bundle must carry what it needs.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import {
  accessSync,
  chmodSync,
  constants,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, isAbsolute, join, posix, relative } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { REPO_ROOT } from '../../support/cli.js';
import { Tmux } from '../../support/tmux.js';

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

function exec(
  command: string,
  args: readonly string[],
  options: { cwd: string; env?: NodeJS.ProcessEnv },
): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(command, args, {
    cwd: options.cwd,
    env: options.env ?? process.env,
    encoding: 'utf8',
    timeout: 60_000,
  });
  if (r.error) throw r.error;
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

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

  it('runtime stage: ENTRYPOINT ["tini", "--", "provisioner"] on PATH (a symlink to bin/run.js) and CMD ["run"]', () => {
    assert.ok(runtime);
    assert.deepEqual(JSON.parse(lastArg(runtime, 'ENTRYPOINT') ?? 'null'), ['tini', '--', 'provisioner']);
    assert.deepEqual(JSON.parse(lastArg(runtime, 'CMD') ?? 'null'), ['run']);
    assert.equal(pkg.bin['provisioner'], './bin/run.js');
    // The memory bound under reload churn (docs/benchmarks.md, config fuzzing) is measured with it.
    assert.ok(
      runtime.instructions.some((i) => i.keyword === 'ENV' && i.args.trim() === 'NODE_OPTIONS=--max-semi-space-size=2'),
      'the runtime stage sets NODE_OPTIONS=--max-semi-space-size=2',
    );
    const workdir = lastArg(runtime, 'WORKDIR') ?? '/';
    assert.ok(
      runs(runtime).some((r) => r.includes(`ln -s ${posix.join(workdir, 'bin/run.js')} /usr/local/bin/provisioner`)),
      'provisioner is linked onto PATH',
    );
    assert.match(readFileSync(join(REPO_ROOT, 'bin/run.js'), 'utf8'), /^#!\/usr\/bin\/env node\n/u);
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
    assert.equal(entrypoint[2], 'provisioner');
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

  describe('the runtime layout, rebuilt from the same paths', () => {
    let root = '';
    let workdir = '';

    before(() => {
      assert.ok(runtime);
      root = realpathSync(mkdtempSync(join(tmpdir(), 'lvp-image-')));
      const imageWorkdir = lastArg(runtime, 'WORKDIR') ?? '/';
      workdir = join(root, imageWorkdir);
      mkdirSync(workdir, { recursive: true });
      for (const c of copiesOf(runtime)) {
        const dest = isAbsolute(c.dest) ? join(root, c.dest) : join(workdir, c.dest);
        for (const source of c.sources) {
          // From the build stage: /app/<path> is <repo>/<path> after `npm run build`.
          const rel = c.from === 'build' ? posix.relative('/app', source) : source.replace(/\/$/u, '');
          const from = join(REPO_ROOT, rel);
          assert.ok(existsSync(from), `${rel} (COPY to ${c.dest}) exists: did the build run?`);
          const into = c.dest.endsWith('/') && statSync(from).isFile() ? join(dest, posix.basename(rel)) : dest;
          cpSync(from, into, { recursive: true });
        }
      }
      for (const script of readdirSync(join(root, 'scripts'))) chmodSync(join(root, 'scripts', script), 0o755);
      mkdirSync(join(root, 'usr/local/bin'), { recursive: true });
      symlinkSync(join(workdir, 'bin/run.js'), join(root, 'usr/local/bin/provisioner'));
    });

    after(() => {
      if (root !== '') rmSync(root, { recursive: true, force: true });
    });

    const env = (): NodeJS.ProcessEnv => ({
      // `#!/usr/bin/env node` finds this test's Node 24 first, and `provisioner` in the layout.
      PATH: [join(root, 'usr/local/bin'), dirname(process.execPath), '/usr/bin', '/bin'].join(':'),
      HOME: root,
      NODE_ENV: 'production',
    });

    it('holds every copied path, the cleaners executable at /scripts', () => {
      for (const path of ['package.json', 'oclif.manifest.json', 'bin/run.js', 'dist/src/cli/commands.js']) {
        assert.ok(existsSync(join(workdir, path)), path);
      }
      const scripts = readdirSync(join(REPO_ROOT, 'cleaners')).sort();
      assert.deepEqual(readdirSync(join(root, 'scripts')).sort(), scripts);
      for (const script of scripts) accessSync(join(root, 'scripts', script), constants.X_OK);
      for (const script of scripts) {
        assert.ok(
          statSync(join(REPO_ROOT, 'cleaners', script)).mode & 0o111,
          `cleaners/${script} is executable in git`,
        );
      }
    });

    it('has no node_modules, in the layout or up the tree from the bundle, and weighs what docs/install.md says', (t) => {
      const found: string[] = [];
      const walk = (dir: string): void => {
        for (const entry of readdirSync(dir, { withFileTypes: true })) {
          if (!entry.isDirectory()) continue;
          if (entry.name === 'node_modules') found.push(join(dir, entry.name));
          else walk(join(dir, entry.name));
        }
      };
      walk(root);
      assert.deepEqual(found, [], 'no node_modules in the layout');
      // Where require() and import would look for a package, from the bundle's directory up.
      for (let dir = join(workdir, 'dist/src/cli'); ; dir = dirname(dir)) {
        assert.equal(existsSync(join(dir, 'node_modules')), false, `${dir}/node_modules exists`);
        if (dirname(dir) === dir) break;
      }
      for (const key of Object.keys(env())) assert.notEqual(key, 'NODE_PATH');
      const du = exec('du', ['-sk', workdir], { cwd: root });
      assert.equal(du.status, 0, du.stderr);
      const kib = Number(du.stdout.split(/\s/u)[0]);
      t.diagnostic(`image layout ${workdir}: ${(kib / 1024).toFixed(1)} MiB`);
      assert.ok(kib > 0 && kib < 16 * 1024, `the layout is ${String(kib)} KiB; docs/install.md says about 9 MiB`);
    });

    it('starts every command of the manifest: `<command> --help`', () => {
      const manifest = JSON.parse(readFileSync(join(workdir, 'oclif.manifest.json'), 'utf8')) as {
        commands: Record<string, unknown>;
      };
      const commands = Object.keys(manifest.commands);
      assert.deepEqual(commands.sort(), [
        'dashboard',
        'diff-config',
        'node-cleanup',
        'reload',
        'rollout:status',
        'run',
        'simulate',
      ]);
      for (const id of commands) {
        // Topics are separated by spaces on the command line: `rollout status`.
        const command = id.split(':');
        const shown = command.join(' ');
        const r = exec('provisioner', [...command, '--help'], { cwd: root, env: env() });
        assert.equal(r.status, 0, `${shown} --help: ${r.stderr}`);
        assert.match(r.stdout, new RegExp(`\\$ provisioner ${shown}\\b`, 'u'), `${shown} --help prints its usage`);
        assert.equal(r.stderr, '', `${shown} --help writes nothing to stderr`);
      }
    });

    it('runs `simulate --demo` from the layout', () => {
      const r = exec('provisioner', ['simulate', '--demo'], { cwd: root, env: env() });
      assert.equal(r.status, 0, r.stderr);
      assert.match(r.stdout, /^Scenario: demo/u);
    });

    it('loads a kubeconfig from the layout: `simulate` and `run` reach the connection (exit 5 on a closed port, no missing module)', () => {
      // Whatever reads a kubeconfig (and the client it loads, lazily) must be in the bundle too.
      const kubeconfig = join(root, 'kubeconfig.yaml');
      writeFileSync(
        kubeconfig,
        [
          'apiVersion: v1',
          'kind: Config',
          'clusters: [{name: c, cluster: {server: "https://127.0.0.1:9", insecure-skip-tls-verify: true}}]',
          'users: [{name: u, user: {token: t}}]',
          'contexts: [{name: x, context: {cluster: c, user: u}}]',
          'current-context: x',
        ].join('\n'),
      );
      const config = join(REPO_ROOT, 'test/fixtures/upstream/helm-configmap.yaml');
      const node = join(REPO_ROOT, 'test/fixtures/simulate/basic/node.yaml');
      for (const args of [
        ['simulate', '--kubeconfig', kubeconfig, '--config', config, '--node', 'n1', '--node-facts', node],
        [
          'run',
          '--kubeconfig',
          kubeconfig,
          '--config-dir',
          config,
          '--listen-address',
          '127.0.0.1:0',
          '--admin-socket',
          join(root, 'kc.sock'),
        ],
      ]) {
        const r = exec('provisioner', args, {
          cwd: root,
          env: { ...env(), MY_NODE_NAME: 'n1' },
        });
        assert.doesNotMatch(r.stderr, /ERR_MODULE_NOT_FOUND|Cannot find (module|package)/u, args[0]);
        assert.equal(r.status, 5, `${args.join(' ')}: ${r.stderr}`);
        assert.match(r.stderr, /^error: cannot .*ECONNREFUSED 127\.0\.0\.1:9/mu, args[0]);
      }
    });

    it('runs `run --sandbox` from the layout; `dashboard --once`, the live `dashboard` (tmux) and `reload` reach it; SIGTERM stops it', async () => {
      const sandbox = join(root, 'sandbox');
      const child = spawn(
        'provisioner',
        ['run', '--sandbox', sandbox, '--listen-address', '127.0.0.1:0', '--log-format', 'json'],
        { cwd: root, env: env(), stdio: ['ignore', 'ignore', 'pipe'] },
      );
      let stderr = '';
      child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
      const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
      try {
        const deadline = Date.now() + 20_000;
        while (!/"msg":"agent started"/u.test(stderr)) {
          assert.ok(Date.now() < deadline, `the sandbox agent did not start:\n${stderr}`);
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
        const socket = join(sandbox, 'admin.sock');
        const dashboard = exec('provisioner', ['dashboard', '--once', '--admin-socket', socket], {
          cwd: root,
          env: env(),
        });
        assert.equal(dashboard.status, 0, dashboard.stderr);
        assert.match(dashboard.stdout, /sandbox-node/u);
        const reload = exec('provisioner', ['reload', '--admin-socket', socket], { cwd: root, env: env() });
        assert.equal(reload.status, 0, reload.stderr);
        // The live view (Ink, its own chunks) in a real terminal, with the layout's environment only.
        Tmux.require();
        const tmux = new Tmux(join(root, 'tmux.sock'));
        try {
          const vars = Object.entries({ ...env(), TERM: 'screen' }).map(([k, v]) => `${k}='${v}'`);
          const command = `cd '${root}' && env -i ${vars.join(' ')} provisioner dashboard --admin-socket '${socket}'; echo "dashboard exited with $?"; sleep 60`;
          tmux.run('new-session', '-d', '-s', 'dash', '-x', '100', '-y', '30', command);
          await tmux.waitFor(/^provisioner dashboard {2}connected {2}node sandbox-node/mu, 'the live dashboard');
          tmux.keys('q');
          await tmux.waitFor(/^dashboard exited with 0$/mu, 'the dashboard to quit on q');
        } finally {
          tmux.kill();
        }
      } finally {
        child.kill('SIGTERM');
      }
      assert.equal(await exited, 0, stderr);
    });

    it('runs the entrypoint: `provisioner --help` and `--version` through the PATH symlink', () => {
      const help = exec('provisioner', ['--help'], { cwd: root, env: env() });
      assert.equal(help.status, 0, help.stderr);
      for (const command of ['run', 'diff-config', 'reload', 'simulate', 'dashboard', 'rollout', 'node-cleanup'])
        assert.match(help.stdout, new RegExp(`\\b${command}\\b`, 'u'));
      const version = exec('provisioner', ['--version'], { cwd: root, env: env() });
      assert.equal(version.status, 0, version.stderr);
      assert.match(version.stdout, new RegExp(`^${pkg.name}/${pkg.version.replaceAll('.', '\\.')} `, 'u'));
      const runHelp = exec(process.execPath, [join(workdir, 'bin/run.js'), 'run', '--help'], { cwd: root, env: env() });
      assert.equal(runHelp.status, 0, runHelp.stderr);
      assert.match(runHelp.stdout, /--admin-socket/u);
    });

    it('runs `diff-config` on a fixture from the layout', () => {
      const fixture = join(REPO_ROOT, 'test/fixtures/upstream/helm-configmap.yaml');
      const changed = join(root, 'changed.yaml');
      writeFileSync(changed, readFileSync(fixture, 'utf8').replace('fsType: ext4', 'fsType: xfs'));
      const same = exec('provisioner', ['diff-config', '--from', fixture, '--to', fixture], { cwd: root, env: env() });
      assert.equal(same.status, 0, same.stderr);
      assert.match(same.stdout, /^No differences/u);
      const diff = exec('provisioner', ['diff-config', '--from', fixture, '--to', changed, '-o', 'json'], {
        cwd: root,
        env: env(),
      });
      assert.equal(diff.status, 1, diff.stderr);
      const json = JSON.parse(diff.stdout) as { changes: { path: string }[] };
      assert.deepEqual(
        json.changes.map((c) => c.path),
        ['storageClassMap.fast-disks.fsType'],
      );
    });

    it('runs a cleaner script from /scripts (it finds common.sh next to it)', () => {
      const r = exec(join(root, 'scripts/quick_reset.sh'), [], { cwd: root, env: env() });
      assert.equal(r.status, 1);
      assert.match(r.stderr, /LOCAL_PV_BLKDEVICE is not set/u);
    });

    it('reads nothing from the repository (the layout stands alone)', () => {
      const within = relative(REPO_ROOT, root);
      assert.ok(within.startsWith('..'), 'the layout is outside the repository');
    });
  });
});
