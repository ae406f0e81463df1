// The CLI as a laptop gets it (README "Install the CLI"): `npm pack` of the built project, the
// tarball installed with `npm install --omit=dev` into an empty directory; what that installs
// (packages, bytes on disk), and the start-up of `--help`, `diff-config` (20 classes, as
// bench/cli-startup.mjs) and `rollout status` (one node in sync, on a real apiserver) from the
// installed package against the same commands from the repository. Paired: every round runs each
// command from both (order alternating) and a bare `node -e 0`, so the ratio installed / repository
// is measured in the same conditions. Each command is `node <dir>/bin/run.js ARGS`, a fresh process.
//
// Usage: npm run build && node dist/bench/cli-install.js [--rounds 20]
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { stateFromLease, statusLeaseName } from '../src/core/fleet/applied-state.js';
import { loadKubeconfig } from '../src/core/kube/kubeconfig.js';
import { RestCluster } from '../src/core/kube/rest-cluster.js';
import { startControlPlane } from '../test/support/control-plane.js';
import { writeConfigMapVolume } from '../test/support/configmap-volume.js';
import { apiserverVersion, configHash, kubeBinDir, median, numberFlag, quantile, REPO_ROOT } from './support.js';

const ROUNDS = numberFlag('--rounds', 20);
const work = mkdtempSync(join(tmpdir(), 'lvp-cli-install-'));
const env = {
  ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('npm_'))),
  npm_config_update_notifier: 'false',
  npm_config_fund: 'false',
  npm_config_audit: 'false',
};

function sh(command: string, args: readonly string[], cwd: string): string {
  const r = spawnSync(command, args, { cwd, env, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${command} ${args.join(' ')} exited ${String(r.status)}: ${r.stderr}`);
  return r.stdout;
}

function tree(path: string): { bytes: number; files: number } {
  const st = statSync(path);
  if (!st.isDirectory()) return { bytes: st.size, files: 1 };
  return readdirSync(path)
    .map((n) => tree(join(path, n)))
    .reduce((a, b) => ({ bytes: a.bytes + b.bytes, files: a.files + b.files }), { bytes: 0, files: 0 });
}

// ---- pack and install -------------------------------------------------------------------------
const packDir = join(work, 'pack');
const prefix = join(work, 'laptop');
mkdirSync(packDir);
mkdirSync(prefix);
const [packed] = JSON.parse(
  sh('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', packDir], REPO_ROOT),
) as [{ filename: string; size: number; unpackedSize: number; entryCount: number }];
const tarball = join(packDir, packed.filename);
const t0 = performance.now();
const installOut = sh('npm', ['install', '--omit=dev', '--prefer-offline', '--prefix', prefix, tarball], work);
const installMs = performance.now() - t0;
const modules = join(prefix, 'node_modules');
const packages = readdirSync(modules).filter((n) => !n.startsWith('.'));
const duKiB = Number(sh('du', ['-sk', modules], work).split(/\s/u)[0]);
const installed = tree(modules);
const installedRoot = join(modules, packages.find((p) => p.startsWith('local-volume-provisioner')) ?? '');

// ---- a cluster for rollout status: one Node, its agent in sync ----------------------------------
const binDir = kubeBinDir();
const plane = await startControlPlane({ binDir });
let agent: ChildProcess | undefined;
try {
  const cluster = new RestCluster({ connection: await loadKubeconfig(plane.kubeconfigPath) });
  const node = 'bench-laptop-node';
  const instance = 'lvp-bench';
  await cluster.nodes.create({ metadata: { name: node, labels: { 'kubernetes.io/hostname': node } } });
  const disks = join(work, 'disks');
  mkdirSync(disks);
  const data = { storageClassMap: `fast:\n  hostDir: ${disks}\n  mountDir: ${disks}\n` };
  const configDir = join(work, 'config');
  await writeConfigMapVolume(configDir, data);
  agent = spawn(
    process.execPath,
    [
      join(REPO_ROOT, 'bin/run.js'),
      'run',
      '--config-dir',
      configDir,
      '--listen-address',
      '127.0.0.1:0',
      '--admin-socket',
      join(work, 'agent.sock'),
      '--status-name',
      instance,
    ],
    {
      env: { ...env, MY_NODE_NAME: node, MY_NAMESPACE: 'default', KUBECONFIG: plane.kubeconfigPath },
      stdio: 'ignore',
    },
  );
  const hash = configHash(data);
  for (let i = 0; ; i++) {
    const lease = await cluster.leases
      .get(statusLeaseName(instance, node), { namespace: 'default' })
      .catch(() => undefined);
    if (lease !== undefined && stateFromLease(lease)?.appliedHash === hash) break;
    if (i > 300) throw new Error('the agent did not publish its status Lease in 30 s');
    await delay(100);
  }
  cluster.close();

  // ---- the commands -----------------------------------------------------------------------------
  const config = (variant: 'a' | 'b'): string => {
    const classes = Array.from({ length: 20 }, (_, i) => {
      const fs = variant === 'b' && i % 5 === 0 ? '\n      fsType: xfs' : '';
      return `    class-${String(i)}:\n      hostDir: /mnt/disks-${String(i)}\n      mountDir: /mnt/disks-${String(i)}\n      blockCleanerCommand: ["/scripts/shred.sh", "2"]\n      namePattern: "nvme-*,scsi-*"${fs}`;
    }).join('\n');
    return `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: provisioner-config\ndata:\n  useJobForCleaning: "yes"\n  storageClassMap: |\n${classes}\n`;
  };
  writeFileSync(join(work, 'a.yaml'), config('a'));
  writeFileSync(join(work, 'b.yaml'), config('b'));
  const commands: Record<string, { args: string[]; codes: number[] }> = {
    '`provisioner --help`': { args: ['--help'], codes: [0] },
    '`provisioner diff-config` (20 classes)': {
      args: ['diff-config', '--from', join(work, 'a.yaml'), '--to', join(work, 'b.yaml')],
      codes: [1],
    },
    '`provisioner rollout status` (1 node, in sync)': {
      args: ['rollout', 'status', '-n', 'default', '--name', instance, '--config', configDir],
      codes: [0],
    },
  };
  const from = { repository: join(REPO_ROOT, 'bin/run.js'), installed: join(installedRoot, 'bin/run.js') };

  function once(args: readonly string[], codes: readonly number[]): Promise<number> {
    return new Promise((resolve, reject) => {
      const start = performance.now();
      // cwd: the temp dir, outside the repository, for both.
      const child = spawn(process.execPath, args, {
        cwd: work,
        env: { ...env, KUBECONFIG: plane.kubeconfigPath },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      let stderr = '';
      child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
      child.on('error', reject);
      child.on('close', (code) => {
        const ms = performance.now() - start;
        if (code === null || !codes.includes(code))
          reject(new Error(`${args.join(' ')} exited ${String(code)}: ${stderr}`));
        else resolve(ms);
      });
    });
  }

  const bare: number[] = [];
  const samples = new Map<string, { repository: number[]; installed: number[]; ratio: number[] }>();
  for (const name of Object.keys(commands)) samples.set(name, { repository: [], installed: [], ratio: [] });
  // Warm the page cache and V8's compile cache for both copies, as any second invocation finds them.
  for (const { args, codes } of Object.values(commands)) {
    for (let i = 0; i < 2; i++) {
      await once([from.repository, ...args], codes);
      await once([from.installed, ...args], codes);
    }
  }
  for (let round = 0; round < ROUNDS; round++) {
    bare.push(await once(['-e', '0'], [0]));
    for (const [name, { args, codes }] of Object.entries(commands)) {
      const s = samples.get(name);
      if (s === undefined) continue;
      const order = round % 2 === 0 ? (['repository', 'installed'] as const) : (['installed', 'repository'] as const);
      const ms: Record<string, number> = {};
      for (const which of order) ms[which] = await once([from[which], ...args], codes);
      s.repository.push(ms['repository'] ?? NaN);
      s.installed.push(ms['installed'] ?? NaN);
      s.ratio.push((ms['installed'] ?? NaN) / (ms['repository'] ?? NaN));
    }
  }

  const p90 = (xs: readonly number[]): number =>
    quantile(
      [...xs].sort((a, b) => a - b),
      0.9,
    );
  console.log(
    `node ${process.version}, ${String(cpus().length)} CPUs, load ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}, ${apiserverVersion(binDir)}, ${String(ROUNDS)} rounds`,
  );
  console.log('');
  console.log('| installed with `npm install --omit=dev` | figure |');
  console.log('|---|---|');
  console.log(`| tarball | ${(packed.size / 1024 / 1024).toFixed(2)} MiB, ${String(packed.entryCount)} files |`);
  console.log(`| packages installed | ${String(packages.length)} (${packages.join(', ')}) |`);
  console.log(
    `| node_modules on disk | ${(duKiB / 1024).toFixed(1)} MiB (\`du -sk\`), ${(installed.bytes / 1024 / 1024).toFixed(1)} MiB in ${String(installed.files)} files |`,
  );
  console.log(`| \`npm install\` of the tarball | ${(installMs / 1000).toFixed(1)} s |`);
  console.log(`| npm said | ${installOut.trim().split('\n').join(' ')} |`);
  console.log('');
  console.log(
    '| command | repository median ms | installed median ms | installed p90 ms | median of installed / repository (paired) |',
  );
  console.log('|---|---|---|---|---|');
  console.log(`| \`node -e 0\` (baseline) | ${median(bare).toFixed(0)} | | ${p90(bare).toFixed(0)} | |`);
  for (const [name, s] of samples) {
    console.log(
      `| ${name} | ${median(s.repository).toFixed(0)} | ${median(s.installed).toFixed(0)} | ${p90(s.installed).toFixed(0)} | ${median(s.ratio).toFixed(2)} |`,
    );
  }
} finally {
  agent?.kill('SIGTERM');
  await delay(500);
  await plane.stop();
  rmSync(work, { recursive: true, force: true });
}
