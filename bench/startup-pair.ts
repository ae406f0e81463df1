// Start-up of `provisioner run` under variants of node flags, paired: every round starts each
// variant once (order alternating) beside bare node's start → first line, each start with a new
// Node and the same discovery directory of --volumes bind mounts, on one real apiserver. Prints
// per variant the median spawn → first PV (and → all PVs with --volumes > 1) and the CPU the
// agent used by the last; with --marks, one more start of the first variant under
// bench/startup-marks.mjs, and its timeline (requests, TLS, fs.watch, spawns, log lines).
//
// Usage (as root, after `npm run build`): node dist/bench/startup-pair.js [--rounds 15]
//   [--volumes 1] [--variant "[NAME=value ...] [<node flags>] [path/to/bin/run.js]" ...] [--marks]
// No --variant: the image's command line alone (its NODE_OPTIONS and the ENTRYPOINT's node
// flags). `--variant ""` is that command line too. In a variant, `NAME=value` words are set in
// the agent's environment (NODE_COMPILE_CACHE=DIR, NODE_DISABLE_COMPILE_CACHE=1 …) and a word
// ending in `run.js` replaces this repository's bin/run.js (another build of the agent beside
// this one); words after `--` are added to the agent's command line (`-- --no-publish-status`);
// the word `no-image-flags` starts it without the image's node flags and NODE_OPTIONS.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { loadKubeconfig } from '../src/core/kube/kubeconfig.js';
import { RestCluster } from '../src/core/kube/rest-cluster.js';
import { NODE_LABEL } from '../src/core/pv/naming.js';
import { startControlPlane } from '../test/support/control-plane.js';
import { Cleanup } from '../test/support/real-node.js';
import {
  agentCommandLine,
  bareNodeStartMs,
  bindMountedVolumes,
  IMAGE_NODE_ARGS,
  IMAGE_NODE_OPTIONS,
  cpuSeconds,
  kubeBinDir,
  median,
  REPO_ROOT as root,
  watchPvs,
} from './support.js';

const isEnv = (word: string): boolean => /^[A-Z_][A-Z0-9_]*=/u.test(word);
const NO_IMAGE_FLAGS = 'no-image-flags';

function option(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : undefined;
}
const ROUNDS = Number(option('rounds') ?? 15);
const VOLUMES = Number(option('volumes') ?? 1);
const variants = process.argv.flatMap((a, i) => (a === '--variant' ? [process.argv[i + 1] ?? ''] : []));
if (variants.length === 0) variants.push('');

const cleanup = new Cleanup();
const work = mkdtempSync(join(tmpdir(), 'lvp-startup-pair-'));
cleanup.defer(`remove ${work}`, () => {
  rmSync(work, { recursive: true, force: true });
});
const plane = await startControlPlane({ binDir: kubeBinDir(), etcdCompactionIntervalSeconds: 300 });

try {
  const cluster = new RestCluster({ connection: await loadKubeconfig(plane.kubeconfigPath), qps: 0 });
  await cluster.storageClasses.create({
    metadata: { name: 'sp-fs' },
    provisioner: 'kubernetes.io/no-provisioner',
    reclaimPolicy: 'Delete',
  });
  const disc = bindMountedVolumes(cleanup, work, 'disc', VOLUMES);
  const config = join(work, 'config.yaml');
  writeFileSync(config, `storageClassMap:\n  sp-fs:\n    hostDir: ${disc}\n    mountDir: ${disc}\n`);
  let starts = 0;

  /** One start of the agent under a variant's words: spawn → the first and the last of VOLUMES PVs, and CPU by then. */
  async function start(
    variant: readonly string[],
    extraEnv: Record<string, string> = {},
  ): Promise<[first: number, last: number, cpu: number]> {
    const split = variant.indexOf('--');
    const words = split < 0 ? variant : variant.slice(0, split);
    const agentArgs = split < 0 ? [] : variant.slice(split + 1);
    const env: Record<string, string> = { ...extraEnv };
    for (const word of words.filter(isEnv)) {
      const eq = word.indexOf('=');
      env[word.slice(0, eq)] = word.slice(eq + 1);
    }
    const entry = words.find((w) => w.endsWith('run.js'));
    // The image's node flags (its ENTRYPOINT's --jitless) and NODE_OPTIONS, then the variant's;
    // `no-image-flags` drops the image's (node's defaults, V8's built-in code cache usable).
    const imageFlags = !words.includes(NO_IMAGE_FLAGS);
    const flags = [
      ...(imageFlags ? IMAGE_NODE_ARGS : []),
      ...words.filter((w) => !isEnv(w) && w !== entry && w !== NO_IMAGE_FLAGS),
    ];
    const name = `start-${String(starts++)}`;
    const [script = '', ...args] = agentCommandLine(config, join(work, `${name}.sock`));
    await cluster.nodes.create({ metadata: { name, labels: { 'kubernetes.io/hostname': name } } });
    const stop = new AbortController();
    const seen = watchPvs(cluster, name, stop.signal);
    await delay(300); // the watch is established
    const t0 = performance.now();
    const child = spawn(process.execPath, [...flags, entry ?? script, ...args, ...agentArgs], {
      env: {
        ...process.env,
        ...env,
        MY_NODE_NAME: name,
        KUBECONFIG: plane.kubeconfigPath,
        NODE_OPTIONS: imageFlags ? IMAGE_NODE_OPTIONS : '',
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      stderr = (stderr + d).slice(-20_000);
    });
    while (seen.size < VOLUMES) {
      if (child.exitCode !== null || performance.now() - t0 > 60_000) {
        stop.abort();
        child.kill('SIGKILL'); // nothing of a failed start outlives the bench
        throw new Error(`agent ${name} published ${String(seen.size)} of ${String(VOLUMES)} PVs: ${stderr}`);
      }
      await delay(VOLUMES === 1 ? 1 : 20);
    }
    const cpu = cpuSeconds(child.pid ?? 0) * 1000;
    stop.abort();
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
    for (const pv of (await cluster.persistentVolumes.list({ labelSelector: `${NODE_LABEL}=${name}` })).items)
      await cluster.persistentVolumes.delete(pv.metadata.name);
    return [Math.min(...seen.values()) - t0, Math.max(...seen.values()) - t0, cpu];
  }

  const bare: number[] = [];
  const times = variants.map((): number[] => []);
  const firsts = variants.map((): number[] => []);
  const cpus = variants.map((): number[] => []);
  for (let r = 0; r < ROUNDS; r++) {
    bare.push(await bareNodeStartMs());
    const order = variants.map((_, i) => i);
    if (r % 2 === 1) order.reverse();
    for (const i of order) {
      const [first, ms, cpu] = await start((variants[i] ?? '').split(' ').filter((f) => f !== ''));
      firsts[i]?.push(first);
      times[i]?.push(ms);
      cpus[i]?.push(cpu);
    }
  }
  const what = VOLUMES === 1 ? 'first PV' : `all ${String(VOLUMES)} PVs`;
  console.log(
    `node ${process.version}, ${String(ROUNDS)} rounds; bare node start → first line: median ${median(bare).toFixed(0)} ms\n`,
  );
  const firstColumn = VOLUMES === 1 ? '' : ' spawn → first PV, median |';
  console.log(
    `| node flags |${firstColumn} spawn → ${what}, median | CPU by then, median | every start (ms) |\n|---|${VOLUMES === 1 ? '' : '---|'}---|---|---|`,
  );
  variants.forEach((v, i) => {
    const first = VOLUMES === 1 ? '' : ` ${median(firsts[i] ?? []).toFixed(0)} ms |`;
    console.log(
      `| ${v === '' ? '(the image’s)' : `\`${v}\``} |${first} ${median(times[i] ?? []).toFixed(0)} ms | ${median(cpus[i] ?? []).toFixed(0)} ms | ${(times[i] ?? []).map((t) => t.toFixed(0)).join(' ')} |`,
    );
  });
  if (process.argv.includes('--marks')) {
    const file = join(work, 'marks.json');
    const flags = (variants[0] ?? '').split(' ').filter((f) => f !== '');
    const [, ms] = await start(['--import', join(root, 'bench/startup-marks.mjs'), ...flags], {
      LVP_STARTUP_MARKS: file,
    });
    console.log(
      `\nOne start under bench/startup-marks.mjs (${ms.toFixed(0)} ms to the ${what}; ms since process start):\n`,
    );
    const marks = JSON.parse(readFileSync(file, 'utf8')) as [number, string][];
    for (const [t, m] of marks) console.log(`${t.toFixed(1).padStart(7)}  ${m}`);
  }
  cluster.close();
} finally {
  cleanup.run();
  await plane.stop();
}
