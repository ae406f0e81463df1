// Assembles `provisioner rollout controller` (run-elected-service.ts: the cluster, the service,
// signals).
import type { RolloutControllerServiceOptions } from '../core/staged-rollout/service.js';
import { startRolloutController } from '../core/staged-rollout/service.js';
import { leaseIn, runElectedProcess } from './run-elected-service.js';
import type { RunElectedProcessOptions } from './run-elected-service.js';

/** An empty settings.namespace or lease namespace: the kubeconfig context's, else default. */
export type RunRolloutControllerOptions = RunElectedProcessOptions<RolloutControllerServiceOptions>;

export async function runRolloutControllerProcess(options: RunRolloutControllerOptions): Promise<void> {
  await runElectedProcess(options, (service, deps, fallback) => {
    const { settings } = service;
    return startRolloutController(
      {
        ...service,
        settings: settings.namespace !== '' ? settings : { ...settings, namespace: fallback },
        leaderElection: leaseIn(service.leaderElection, fallback),
      },
      deps,
    );
  });
}
