// Shared by the benchmarks: the real kube-apiserver/etcd binaries (built or cached), the image's
// NODE_OPTIONS, a process's RSS and CPU from /proc, bare node's start, bind-mounted volumes, the
// agent's command line and a watch of a node's PVs.
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import type { RestCluster } from '../src/core/kube/rest-cluster.js';
import { NODE_LABEL } from '../src/core/pv/naming.js';
import { bindMount, mountTmpfs, type Cleanup } from '../test/support/real-node.js';

export const REPO_ROOT = join(import.meta.dirname, '../..');

export function kubeBinDir(): string {
  const r = spawnSync('bash', [join(REPO_ROOT, 'scripts/build-kube-binaries.sh')], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const dir = r.stdout.trim().split('\n').pop();
  if (r.status !== 0 || dir === undefined) throw new Error('cannot build the kube binaries');
  return dir;
}

/** A process's resident set size in bytes, from /proc (NaN when it cannot be read). */
export function rssBytesOf(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/u.exec(readFileSync(`/proc/${String(pid)}/status`, 'utf8'));
  return m ? Number(m[1]) * 1024 : NaN;
}

/** The image's NODE_OPTIONS (its Dockerfile's `ENV NODE_OPTIONS=`), so every agent runs as the image runs it. */
export const IMAGE_NODE_OPTIONS =
  /^ENV NODE_OPTIONS=(.*)$/mu.exec(readFileSync(join(REPO_ROOT, 'Dockerfile'), 'utf8'))?.[1] ?? '';

export const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? (s[(s.length - 1) / 2] ?? NaN) : ((s[s.length / 2 - 1] ?? 0) + (s[s.length / 2] ?? 0)) / 2;
};

const TICK_S = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;

/** utime + stime of a live process, in seconds (its children not counted). */
export function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${String(pid)}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / TICK_S;
}

/** When each PV of the node first showed up (performance.now()), from a list and then a watch. */
export function watchPvs(cluster: RestCluster, node: string, signal: AbortSignal): Map<string, number> {
  const seen = new Map<string, number>();
  void (async () => {
    while (!signal.aborted) {
      try {
        const list = await cluster.persistentVolumes.list({ labelSelector: `${NODE_LABEL}=${node}` });
        for (const pv of list.items) if (!seen.has(pv.metadata.name)) seen.set(pv.metadata.name, performance.now());
        for await (const e of cluster.persistentVolumes.watch({
          resourceVersion: list.metadata.resourceVersion ?? '0',
          labelSelector: `${NODE_LABEL}=${node}`,
          signal,
        })) {
          if (e.type === 'ADDED' && !seen.has(e.object.metadata.name))
            seen.set(e.object.metadata.name, performance.now());
        }
      } catch {
        await delay(50);
      }
    }
  })();
  return seen;
}

/** Bare node's spawn → first line of output, in ms: the start-up every agent start is set against. */
export async function bareNodeStartMs(): Promise<number> {
  const t0 = performance.now();
  const bare = spawn(process.execPath, ['-e', 'console.log(1); setInterval(() => {}, 1e9)'], {
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  await new Promise((r) => bare.stdout.once('data', r));
  const ms = performance.now() - t0;
  bare.kill();
  return ms;
}

/** `n` bind mounts of one tmpfs under a fresh discovery directory `<work>/<name>`; returns it. */
export function bindMountedVolumes(cleanup: Cleanup, work: string, name: string, n: number): string {
  const store = join(work, `${name}-store`);
  const disc = join(work, name);
  mkdirSync(disc);
  mountTmpfs(cleanup, store, 64 * 2 ** 20);
  for (let i = 0; i < n; i++) {
    mkdirSync(join(store, `v${String(i)}`));
    mkdirSync(join(disc, `v${String(i)}`));
    bindMount(cleanup, join(store, `v${String(i)}`), join(disc, `v${String(i)}`));
  }
  return disc;
}

/** `provisioner run`'s arguments to node, as the benches start it: a config, any port, JSON logs. */
export function agentCommandLine(configFile: string, adminSocket: string): string[] {
  return [
    join(REPO_ROOT, 'bin/run.js'),
    'run',
    '--config-dir',
    configFile,
    '--listen-address',
    '127.0.0.1:0',
    '--admin-socket',
    adminSocket,
    '--log-format',
    'json',
  ];
}
