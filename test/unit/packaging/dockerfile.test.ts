// The Dockerfile without a Docker engine: its shape (stages, base image, entrypoint, what the
// runtime stage receives), then the runtime layout it produces, rebuilt in a temp dir from the same
// paths (the build output of `npm run build`, the cleaner scripts, the production dependencies),
// and the entrypoint run from that layout.
//
// node_modules of the layout: `npm ci --omit=dev` needs the registry (or a complete npm cache),
// which tests must not depend on. The layout gets instead exactly the packages that
// `npm prune --omit=dev` keeps: every package-lock.json entry not flagged `dev`, copied from the
// repository's installed node_modules (nested node_modules handled entry by entry). `npm ls
// --omit=dev` then checks that this tree satisfies every production dependency.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
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

interface LockEntry {
  readonly dev?: boolean;
  readonly optional?: boolean;
  readonly link?: boolean;
}

interface PackageJson {
  readonly name: string;
  readonly version: string;
  readonly bin: Record<string, string>;
  readonly dependencies: Record<string, string>;
  readonly devDependencies: Record<string, string>;
}

/**
 * Copies into `target` the packages `npm prune --omit=dev` keeps: the package-lock.json entries
 * without `dev`, each without its nested node_modules (those are entries of their own).
 */
function copyProductionDependencies(target: string): string[] {
  const lock = JSON.parse(readFileSync(join(REPO_ROOT, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, LockEntry>;
  };
  const copied: string[] = [];
  for (const [path, entry] of Object.entries(lock.packages)) {
    if (!path.startsWith('node_modules/') || entry.dev === true) continue;
    const source = join(REPO_ROOT, path);
    if (!existsSync(source)) {
      if (entry.optional === true) continue; // another platform's optional package
      assert.fail(`${path} is a production dependency in package-lock.json but not installed: run npm ci`);
    }
    const nested = join(source, 'node_modules');
    cpSync(source, join(target, path), {
      recursive: true,
      dereference: entry.link === true,
      filter: (src) => src !== nested,
    });
    copied.push(path);
  }
  return copied;
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

  it('builds with npm ci, npm run build, then prunes the dev dependencies', () => {
    assert.ok(build);
    const commands = runs(build).join(' && ');
    const ci = commands.indexOf('npm ci');
    const buildAt = commands.indexOf('npm run build');
    const prune = commands.indexOf('npm prune --omit=dev');
    assert.ok(ci >= 0 && buildAt > ci && prune > buildAt, `npm ci → npm run build → npm prune --omit=dev: ${commands}`);
    assert.equal(commands.lastIndexOf('npm ci'), ci, 'no npm ci after the prune');
    assert.equal(commands.slice(prune).includes('npm install'), false, 'nothing installed after the prune');
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

  it('runtime stage: production files only, node_modules from the pruned build stage', () => {
    assert.ok(runtime && build);
    const commands = runs(runtime).join('\n');
    assert.doesNotMatch(
      commands,
      /npm (ci|install|i)\b(?![^\n]*--omit=dev)/u,
      'no dependency install in the runtime stage',
    );
    const fromBuild = copiesOf(runtime).filter((c) => c.from === 'build');
    const sources = fromBuild.flatMap((c) => c.sources.map((s) => posix.relative('/app', s)));
    assert.deepEqual(
      [...sources].sort(),
      ['bin/run.js', 'dist/src', 'node_modules', 'oclif.manifest.json', 'package.json'],
      'exactly the runtime files',
    );
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
          if (rel === 'node_modules') {
            copyProductionDependencies(dirname(dest));
            continue;
          }
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

    it('has the production dependencies and none of the dev dependencies', () => {
      const modules = join(workdir, 'node_modules');
      for (const name of Object.keys(pkg.dependencies))
        assert.ok(existsSync(join(modules, name)), `dependency ${name}`);
      // A devDependency that a production package also depends on (@types/node, through
      // @kubernetes/client-node) is not flagged `dev` in the lock and stays, as with npm prune.
      const lock = JSON.parse(readFileSync(join(REPO_ROOT, 'package-lock.json'), 'utf8')) as {
        packages: Record<string, LockEntry>;
      };
      const devOnly = Object.keys(pkg.devDependencies).filter((n) => lock.packages[`node_modules/${n}`]?.dev === true);
      for (const tool of ['typescript', 'esbuild', 'eslint', 'prettier', 'tsx'])
        assert.ok(devOnly.includes(tool), tool);
      for (const name of devOnly) {
        assert.equal(existsSync(join(modules, name)), false, `dev dependency ${name} is not in the image`);
      }
      const ls = exec('npm', ['ls', '--omit=dev', '--all', '--parseable'], { cwd: workdir });
      assert.equal(ls.status, 0, `npm ls --omit=dev: every production dependency is satisfied\n${ls.stderr}`);
    });

    it('runs the entrypoint: `provisioner --help` and `--version` through the PATH symlink', () => {
      const help = exec('provisioner', ['--help'], { cwd: root, env: env() });
      assert.equal(help.status, 0, help.stderr);
      for (const command of ['run', 'diff-config', 'reload'])
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
