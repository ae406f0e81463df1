// The CLI as an operator installs it on a laptop (README "Install the CLI", docs/install.md#the-cli-on-a-laptop):
// `npm pack` of the built project, the tarball installed with `npm install --omit=dev` into an empty
// directory, and the installed `provisioner` run as a process from another empty directory: --help,
// diff-config on two files, simulate --demo, and `rollout status` against the real apiserver with a kubeconfig (the
// agent it reads is started from the installed package too). Nothing here can reach the
// repository's node_modules: the install lives under the temp dir, and so does every cwd.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { delimiter, dirname, join, relative } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { parseConfigSnapshot } from '../../../src/core/config/decode/parse.js';
import { snapshotFromDirectoryFiles } from '../../../src/core/config/decode/layout.js';
import { stateFromLease, statusLeaseName, statusSelector } from '../../../src/core/fleet/applied-state.js';
import { loadKubeconfig } from '../../../src/core/kube/kubeconfig.js';
import { RestCluster } from '../../../src/core/kube/rest-cluster.js';
import type { RolloutJson } from '../../../src/render/rollout-status.js';
import { REPO_ROOT, stopChildren } from '../../support/cli.js';
import { writeConfigMapVolume } from '../../support/configmap-volume.js';
import { eventually } from '../../support/eventually.js';
import { Cleanup, makeTempDir } from '../../support/real-node.js';
import { requireTestControlPlane } from '../../support/test-cluster.js';

interface Result {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

interface PackageJson {
  readonly name: string;
  readonly version: string;
  readonly dependencies?: Record<string, string>;
  readonly oclif: { readonly bin: string };
}

const pkg = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as PackageJson;
const manifest = JSON.parse(readFileSync(join(REPO_ROOT, 'oclif.manifest.json'), 'utf8')) as {
  commands: Record<string, unknown>;
};
const suffix = Math.random().toString(36).slice(2, 8);
const NAMESPACE = 'default';
const INSTANCE = `lvp-inst-${suffix}`;
const NODE = `inst-${suffix}`;
const POOL_LABEL = 'lvp-cli-install-test';

/**
 * What a laptop's shell gives a process: the node running this test first on PATH (the `#!/usr/bin/env
 * node` of the installed bin finds it), no npm lifecycle variables from `npm test`, no NODE_PATH,
 * and npm told not to phone home.
 */
function userEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (k.startsWith('npm_') || k === 'NODE_PATH' || k === 'INIT_CWD' || k === 'NODE_OPTIONS') continue;
    env[k] = v;
  }
  return {
    ...env,
    PATH: [dirname(process.execPath), process.env['PATH'] ?? ''].join(delimiter),
    NO_COLOR: '1',
    npm_config_update_notifier: 'false',
    npm_config_fund: 'false',
    npm_config_audit: 'false',
    ...extra,
  };
}

/** Runs a command to its end; SIGKILL and reject after `timeoutMs` (a hang detector, not a timing assertion). */
function run(command: string, args: readonly string[], cwd: string, env: NodeJS.ProcessEnv, timeoutMs: number) {
  return new Promise<Result>((resolve, reject) => {
    const child = spawn(command, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${command} ${args.join(' ')} still running after ${String(timeoutMs)} ms\n${stderr}`));
    }, timeoutMs);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

function duBytes(path: string): number {
  const st = statSync(path, { throwIfNoEntry: false });
  if (st === undefined) return 0;
  if (!st.isDirectory()) return st.size;
  return readdirSync(path).reduce((n, name) => n + duBytes(join(path, name)), 0);
}

function configMap(name: string, classes: Readonly<Record<string, string>>, fsType?: string): string {
  const body = Object.entries(classes)
    .map(
      ([cls, dir]) =>
        `    ${cls}:\n      hostDir: ${dir}\n      mountDir: ${dir}${fsType === undefined ? '' : `\n      fsType: ${fsType}`}\n`,
    )
    .join('');
  return `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ${name}\ndata:\n  storageClassMap: |\n${body}`;
}

void describe('the CLI packed, installed into an empty directory and run as a user runs it', () => {
  const cleanup = new Cleanup();
  const children: ChildProcess[] = [];
  let root = '';
  let prefix = '';
  let work = '';
  let bin = '';
  let tarball = '';
  let packedFiles: string[] = [];
  let kubeconfig = '';
  let cluster: RestCluster | undefined;
  let agentLog = '';

  const provisioner = (args: readonly string[], extra: NodeJS.ProcessEnv = {}): Promise<Result> =>
    run(bin, args, work, userEnv(extra), 60_000);

  before(async () => {
    const plane = requireTestControlPlane();
    kubeconfig = plane.kubeconfigPath;
    for (const built of ['bin/run.js', 'dist/src/cli/commands.js', 'dist/src/cli/run-lean.js', 'oclif.manifest.json']) {
      assert.ok(existsSync(join(REPO_ROOT, built)), `${built} is missing: run \`npm run build\` first`);
    }
    root = makeTempDir(cleanup, 'lvp-cli-install-');
    const packDir = join(root, 'pack');
    prefix = join(root, 'laptop');
    work = join(root, 'cwd');
    for (const dir of [packDir, prefix, work]) mkdirSync(dir);

    // The built dist, as it is: --ignore-scripts skips `prepack` (a full build) here.
    const pack = await run(
      'npm',
      ['pack', '--ignore-scripts', '--json', '--pack-destination', packDir],
      REPO_ROOT,
      userEnv(),
      120_000,
    );
    assert.equal(pack.code, 0, pack.stderr);
    const [packed] = JSON.parse(pack.stdout) as [{ filename: string; files: { path: string }[] }];
    tarball = join(packDir, packed.filename);
    packedFiles = packed.files.map((f) => f.path).sort();

    // As README says: the tarball installed into a directory of its own (--omit=dev: only what runs).
    // --prefer-offline: from npm's cache when it has what is needed, else the registry.
    const install = await run(
      'npm',
      ['install', '--omit=dev', '--prefer-offline', '--prefix', prefix, tarball],
      work,
      userEnv(),
      180_000,
    );
    assert.equal(install.code, 0, install.stdout + install.stderr);
    bin = join(prefix, 'node_modules/.bin', pkg.oclif.bin);
  });

  after(async () => {
    await stopChildren(children);
    if (cluster !== undefined) {
      const leases = await cluster.leases
        .list({ namespace: NAMESPACE, labelSelector: statusSelector(INSTANCE) })
        .catch(() => ({ items: [] }));
      for (const lease of leases.items) {
        await cluster.leases.delete(lease.metadata.name, { namespace: NAMESPACE }).catch(() => undefined);
      }
      await cluster.nodes.delete(NODE).catch(() => undefined);
      cluster.close();
    }
    cleanup.run();
  });

  void it('the tarball holds what the CLI runs (the bundle, its manifest, bin/run.js) and installs no dependency', () => {
    for (const path of packedFiles) {
      assert.match(
        path,
        /^(package\.json|README\.md|LICEN[CS]E(\.\w+)?|oclif\.manifest\.json|bin\/run\.js|dist\/src\/cli\/(commands|run-lean)\.js|dist\/src\/cli\/chunks\/[\w-]+\.js)$/u,
        `packed: ${path}`,
      );
    }
    assert.ok(
      packedFiles.includes('dist/src/cli/commands.js') && packedFiles.includes('bin/run.js'),
      'the entry is packed',
    );
    assert.ok(
      packedFiles.some((p) => p.startsWith('dist/src/cli/chunks/')),
      'the lazily loaded chunks are packed',
    );

    // The bundle contains every dependency: the install adds the package and nothing else.
    const modules = join(prefix, 'node_modules');
    assert.deepEqual(
      readdirSync(modules).filter((n) => !n.startsWith('.')),
      [pkg.name],
      'node_modules holds the provisioner only',
    );
    const installed = JSON.parse(readFileSync(join(modules, pkg.name, 'package.json'), 'utf8')) as PackageJson;
    assert.equal(installed.version, pkg.version);
    assert.deepEqual(Object.keys(installed.dependencies ?? {}), [], 'no runtime dependency to install again');
    // The budget catches dependencies installed again (132 MB before) or source maps (11 MiB), not the bundle's growth.
    const bytes = duBytes(modules);
    assert.ok(bytes < 12 * 1024 * 1024, `installed: ${(bytes / 1024 / 1024).toFixed(1)} MiB`);
  });

  void it('--help and --version from the installed bin, and through `npm exec --prefix` (no registry)', async () => {
    const help = await provisioner(['--help']);
    assert.equal(help.code, 0, help.stderr);
    assert.match(help.stdout, /^USAGE\n {2}\$ provisioner \[COMMAND\]$/mu);
    const topLevel = Object.keys(manifest.commands).filter((id) => !id.includes(':'));
    assert.ok(topLevel.length >= 7, topLevel.join(' '));
    for (const id of topLevel) assert.match(help.stdout, new RegExp(`^ {2}${id} `, 'mu'), `--help lists ${id}`);
    assert.match(help.stdout, /^ {2}rollout +See and steer config rollouts/mu, 'the rollout topic');
    const status = await provisioner(['rollout', 'status', '--help']);
    assert.equal(status.code, 0, status.stderr);
    assert.match(status.stdout, /\$ provisioner rollout status/u);

    // The documented way to run it without a global install or PATH entry, from any directory.
    // --offline: were `provisioner` not found in the prefix, npm would fail instead of fetching the
    // registry's unrelated package of that name.
    const exec = await run(
      'npm',
      ['exec', '--offline', '--prefix', prefix, '--', 'provisioner', '--version'],
      work,
      userEnv(),
      60_000,
    );
    assert.equal(exec.code, 0, exec.stderr);
    assert.match(exec.stdout, new RegExp(`^${pkg.name}/${pkg.version.replaceAll('.', '\\.')} `, 'u'));
  });

  void it('diff-config on two ConfigMap files: the diff, the impact, exit 1; no change: exit 0', async () => {
    const from = join(work, 'old.yaml');
    const to = join(work, 'new.yaml');
    writeFileSync(from, configMap('provisioner-config', { fast: '/mnt/fast-disks' }));
    writeFileSync(to, configMap('provisioner-config', { fast: '/mnt/fast-disks' }, 'xfs'));
    const diff = await provisioner(['diff-config', '--from', from, '--to', to]);
    assert.equal(diff.code, 1, diff.stdout + diff.stderr);
    assert.match(diff.stdout, /^--- from: .*old\.yaml\tsha256:[0-9a-f]{12}$/mu);
    assert.match(diff.stdout, /^\+ {4}fsType: xfs$/mu);
    assert.match(diff.stdout, /storageClassMap\.fast\.fsType: .* -> "xfs" +\[new-pvs-only\]/u);
    assert.match(diff.stdout, /^Summary: 1 change \(1 new-pvs-only\)\.$/mu);
    const json = await provisioner(['diff-config', '--from', from, '--to', to, '-o', 'json']);
    assert.equal(json.code, 1, json.stderr);
    assert.equal((JSON.parse(json.stdout) as { changes: unknown[] }).changes.length, 1);
    const same = await provisioner(['diff-config', '--from', from, '--to', from]);
    assert.equal(same.code, 0, same.stdout + same.stderr);
  });

  void it('simulate --demo: the agent code from the installed bundle, no cluster', async () => {
    const demo = await provisioner(['simulate', '--demo']);
    assert.equal(demo.code, 0, demo.stdout + demo.stderr);
    assert.match(demo.stdout, /^Result: all \d+ expectations passed\.$/mu);
  });

  void it('rollout status with a kubeconfig against the real apiserver: an agent started from the install, in sync (exit 0)', async () => {
    cluster = new RestCluster({ connection: await loadKubeconfig(kubeconfig) });
    await cluster.nodes.create({
      metadata: { name: NODE, labels: { 'kubernetes.io/hostname': NODE, [POOL_LABEL]: suffix } },
    });
    const disks = join(root, 'disks-fast');
    mkdirSync(disks);
    const data = { storageClassMap: `fast:\n  hostDir: ${disks}\n  mountDir: ${disks}\n` };
    const configDir = join(root, 'config');
    await writeConfigMapVolume(configDir, data);
    const hash = parseConfigSnapshot(
      snapshotFromDirectoryFiles(
        '/x',
        Object.entries(data).map(([name, text]) => ({ name, text })),
      ),
    ).hash;

    const agent = spawn(
      bin,
      [
        'run',
        '--config-dir',
        configDir,
        '--listen-address',
        '127.0.0.1:0',
        '--admin-socket',
        join(root, 'agent.sock'),
        '--status-name',
        INSTANCE,
      ],
      {
        cwd: work,
        env: userEnv({ MY_NODE_NAME: NODE, MY_NAMESPACE: NAMESPACE, KUBECONFIG: kubeconfig }),
        stdio: ['ignore', 'ignore', 'pipe'],
      },
    );
    children.push(agent);
    agent.stderr.setEncoding('utf8').on('data', (d: string) => (agentLog += d));
    await eventually(
      async () => {
        const lease = await cluster?.leases
          .get(statusLeaseName(INSTANCE, NODE), { namespace: NAMESPACE })
          .catch(() => undefined);
        return lease !== undefined && stateFromLease(lease)?.appliedHash === hash ? true : undefined;
      },
      `the installed agent publishes ${hash}`,
      30_000,
    ).catch((error: unknown) => {
      throw new Error(`${String(error)}; the agent's log: ${agentLog.slice(-2000)}`, { cause: error });
    });

    const args = ['rollout', 'status', '-n', NAMESPACE, '--name', INSTANCE, '-l', `${POOL_LABEL}=${suffix}`];
    const text = await provisioner([...args, '--config', configDir, '--wait', '--timeout', '30s'], {
      KUBECONFIG: kubeconfig,
    });
    assert.equal(text.code, 0, text.stdout + text.stderr);
    assert.match(text.stdout, new RegExp(`^rollout complete: 1 of 1 nodes apply ${hash.slice(0, 19)}`, 'u'));
    assert.match(text.stdout, new RegExp(`^${NODE} +sha256:[0-9a-f]{12} +in sync`, 'mu'));
    const json = await provisioner([...args, '--config', configDir, '-o', 'json'], { KUBECONFIG: kubeconfig });
    assert.equal(json.code, 0, json.stderr);
    const parsed = JSON.parse(json.stdout) as RolloutJson;
    assert.equal(parsed.verdict, 'complete');
    assert.equal(parsed.desired.hash, hash);
    assert.deepEqual(
      parsed.nodes.map((n) => [n.node, n.state]),
      [[NODE, 'in-sync']],
    );
    // No KUBECONFIG: ~/.kube/config, as kubectl (a laptop's usual setup).
    const home = join(root, 'home');
    mkdirSync(join(home, '.kube'), { recursive: true });
    copyFileSync(kubeconfig, join(home, '.kube/config'));
    const fromHome = await provisioner([...args, '--config', configDir], { HOME: home, KUBECONFIG: undefined });
    assert.equal(fromHome.code, 0, fromHome.stdout + fromHome.stderr);
    assert.match(fromHome.stdout, /^rollout complete: 1 of 1 nodes apply/u);
    // Neither, outside a pod: exit 5, one line saying what was looked for.
    const none = await provisioner([...args, '--config', configDir], {
      HOME: work,
      KUBECONFIG: undefined,
      KUBERNETES_SERVICE_HOST: undefined,
    });
    assert.equal(none.code, 5, none.stdout + none.stderr);
    assert.match(none.stderr, /^error: cannot connect to the cluster: .*no kubeconfig: .*~\/\.kube\/config/u);
    assert.ok(relative(prefix, bin).startsWith('node_modules'), 'ran the installed bin');
  });
});
