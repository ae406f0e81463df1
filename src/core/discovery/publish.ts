// Carries out a discovery plan: creates the planned PVs with bounded concurrency (the client's
// rate limiter caps the request rate), records metrics and events, and puts each created PV in
// the cache at once so the next pass never tries to create it again.
import type { Clock } from '../clock.js';
import { isAlreadyExists } from '../kube/cluster.js';
import type { Cluster } from '../kube/cluster.js';
import type { PersistentVolume } from '../kube/objects.js';
import type { Logger } from '../log.js';
import type { AgentMetrics } from '../metrics/agent-metrics.js';
import type { PlannedVolume } from './plan.js';
import { errorMessage } from '../unknown-values.js';

export interface PublishDeps {
  readonly cluster: Cluster;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly metrics: AgentMetrics;
  /** Called with each PV the apiserver accepted. */
  readonly onCreated: (pv: PersistentVolume) => void;
  /**
   * A PV of that name exists but is not in this agent's cache (e.g. created by upstream after the
   * start-up adoption scan): adopt it when it is this node's; returns whether it did.
   */
  readonly onExisting?: (name: string) => Promise<boolean>;
}

export interface PublishResult {
  readonly created: readonly string[];
  readonly failed: readonly { readonly name: string; readonly path: string; readonly error: string }[];
}

export async function publishVolumes(
  planned: readonly PlannedVolume[],
  deps: PublishDeps,
  options: { readonly concurrency: number; readonly signal: AbortSignal; readonly passStartedAt: number },
): Promise<PublishResult> {
  const created: string[] = [];
  const failed: { name: string; path: string; error: string }[] = [];
  let next = 0;
  const worker = async (): Promise<void> => {
    while (!options.signal.aborted) {
      const item = planned[next++];
      if (!item) return;
      const pv = item.persistentVolume;
      const started = deps.clock.now();
      deps.metrics.apiRequests.inc({ method: 'create' });
      try {
        const result = await deps.cluster.persistentVolumes.create(pv);
        const finished = deps.clock.now();
        deps.metrics.apiRequestDuration.observe({ method: 'create' }, (finished - started) / 1000);
        deps.metrics.discoveryTotal.inc({ mode: item.persistentVolume.spec.volumeMode ?? 'Filesystem' });
        deps.metrics.discoveryDuration.observe(
          { mode: item.persistentVolume.spec.volumeMode ?? 'Filesystem' },
          (finished - options.passStartedAt) / 1000,
        );
        deps.onCreated(result);
        created.push(pv.metadata.name);
        deps.logger.log('info', 'created PersistentVolume', {
          pv: pv.metadata.name,
          path: pv.spec.local?.path,
          storageClass: item.className,
          capacity: pv.spec.capacity?.['storage'],
        });
      } catch (err) {
        deps.metrics.apiRequestsFailed.inc({ method: 'create' });
        if (isAlreadyExists(err) && (await deps.onExisting?.(pv.metadata.name).catch(() => false)) === true) continue;
        const error = errorMessage(err);
        failed.push({ name: pv.metadata.name, path: item.path, error });
        deps.logger.log(isAlreadyExists(err) ? 'warn' : 'error', 'could not create PersistentVolume', {
          pv: pv.metadata.name,
          error,
        });
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(options.concurrency, planned.length)) }, worker));
  return { created, failed };
}
