// Stand-ins for what Kubernetes' own controllers do to the objects this agent reads, for
// `provisioner simulate` on the in-memory cluster (which, like a bare apiserver, runs none).
// test/contract/controller-contract.ts holds them to the real kube-controller-manager.
import type { Cluster } from '../kube/cluster.js';
import type { PersistentVolume } from '../kube/objects.js';

/**
 * Until `signal` aborts: the PV controller's first step (a new PV becomes Available), the
 * pv-protection controller (a deleted PV that is not Bound loses its finalizers) and the garbage
 * collector's part for Jobs (a deleted Job's `orphan`/`foregroundDeletion` finalizers go; a
 * cleanup Job has no dependents this world knows of). Resolves when the signal aborts.
 */
export function runControllerStandIns(cluster: Cluster, signal: AbortSignal): Promise<void>[] {
  const pvs = async (): Promise<void> => {
    for await (const ev of cluster.persistentVolumes.watch({ resourceVersion: '', signal })) {
      if (ev.type === 'BOOKMARK' || ev.type === 'DELETED') continue;
      const pv = ev.object;
      if (pv.metadata.deletionTimestamp !== undefined) {
        // The real controller keeps the finalizer while the PV is Bound (still in use).
        if ((pv.metadata.finalizers ?? []).length > 0 && pv.status?.phase !== 'Bound')
          await cluster.persistentVolumes
            .update({ ...pv, metadata: { ...pv.metadata, finalizers: [] } })
            .catch(() => undefined);
      } else if ((pv.status?.phase ?? 'Pending') === 'Pending') {
        await cluster.persistentVolumes
          .updateStatus({ ...pv, status: { ...pv.status, phase: 'Available' } })
          .catch(() => undefined);
      }
    }
  };
  const jobs = async (): Promise<void> => {
    for await (const ev of cluster.jobs.watch({ resourceVersion: '', signal })) {
      if (ev.type === 'BOOKMARK' || ev.type === 'DELETED') continue;
      const job = ev.object;
      if (job.metadata.deletionTimestamp !== undefined && (job.metadata.finalizers ?? []).length > 0)
        await cluster.jobs
          .update(
            { ...job, metadata: { ...job.metadata, finalizers: [] } },
            { namespace: job.metadata.namespace ?? '' },
          )
          .catch(() => undefined);
    }
  };
  return [pvs().catch(() => undefined), jobs().catch(() => undefined)];
}

/** What the PV controller writes when it binds `pv` to the claim `namespace/name`. */
export async function bindClaim(
  cluster: Cluster,
  pv: PersistentVolume,
  namespace: string,
  name: string,
): Promise<PersistentVolume> {
  const bound = await cluster.persistentVolumes.update({
    ...pv,
    spec: { ...pv.spec, claimRef: { apiVersion: 'v1', kind: 'PersistentVolumeClaim', namespace, name } },
  });
  return cluster.persistentVolumes.updateStatus({ ...bound, status: { ...bound.status, phase: 'Bound' } });
}

/** What the PV controller writes when the bound claim is deleted: Released, claimRef kept. */
export async function releaseClaim(cluster: Cluster, pv: PersistentVolume): Promise<PersistentVolume> {
  return cluster.persistentVolumes.updateStatus({ ...pv, status: { ...pv.status, phase: 'Released' } });
}
