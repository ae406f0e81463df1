// Assembles `provisioner node-cleanup` (run-elected-service.ts: the cluster, the service, signals).
import type { NodeCleanupServiceOptions } from '../core/node-cleanup/service.js';
import { startNodeCleanup } from '../core/node-cleanup/service.js';
import { leaseIn, runElectedProcess } from './run-elected-service.js';
import type { RunElectedProcessOptions } from './run-elected-service.js';

export type RunNodeCleanupOptions = RunElectedProcessOptions<NodeCleanupServiceOptions>;

export async function runNodeCleanupProcess(options: RunNodeCleanupOptions): Promise<void> {
  await runElectedProcess(options, (service, deps, contextNamespace) =>
    startNodeCleanup({ ...service, leaderElection: leaseIn(service.leaderElection, contextNamespace) }, deps),
  );
}
