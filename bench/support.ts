// Shared by the benchmarks: the real kube-apiserver/etcd binaries (built or cached).
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

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
