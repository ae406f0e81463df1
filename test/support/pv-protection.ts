// Plays the pv-protection controller, which a bare kube-apiserver does not run: the admission
// plugin adds the `kubernetes.io/pv-protection` finalizer, so a deleted PV would stay Terminating.
import { setTimeout as delay } from 'node:timers/promises';
import type { Cluster } from '../../src/core/kube/cluster.js';
import { NODE_LABEL } from '../../src/core/pv/naming.js';

/** Until the signal aborts, drops the finalizers of this agent's PVs that are being deleted. */
export async function runPvProtectionController(cluster: Cluster, signal: AbortSignal, intervalMs = 50): Promise<void> {
  while (!signal.aborted) {
    try {
      const list = await cluster.persistentVolumes.list({ labelSelector: NODE_LABEL });
      for (const pv of list.items) {
        if (pv.metadata.deletionTimestamp !== undefined) {
          await cluster.persistentVolumes
            .patch(pv.metadata.name, { metadata: { finalizers: null } })
            .catch(() => undefined);
        }
      }
    } catch {
      // The control plane may be going away at the end of the run.
    }
    await delay(intervalMs);
  }
}
