/**
 * The controller contract: what `provisioner simulate`'s stand-ins (src/core/simulate/controllers.ts)
 * do to PVs and Jobs must be what the real kube-controller-manager does, for every transition they
 * model. test/integration/e2e/controller-contract.test.ts runs it against a control plane with the
 * real controllers (a claim is a real PVC there); test/unit/simulate/controller-contract.test.ts
 * against MemoryCluster and the stand-ins (a claim is the simulate step's write). Only the fields
 * the agent reads are compared: the phase, claimRef's namespace and name, finalizers, existence.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import { isNotFound, type Cluster } from '../../src/core/kube/cluster.js';
import type { PersistentVolume } from '../../src/core/kube/objects.js';
import { PROVISIONED_BY_ANNOTATION } from '../../src/core/pv/naming.js';
import { eventually as waitUntil } from '../support/eventually.js';

export interface ControllerWorld {
  readonly cluster: Cluster;
  /** Unique per run: a valid name prefix and label value. */
  readonly prefix: string;
  /** The claim `namespace/name` (of the PV's class and size) is bound to the PV, by the PV controller. */
  bindClaim(pv: PersistentVolume, namespace: string, name: string): Promise<void>;
  /** The bound claim is deleted (no pod uses it). */
  deleteClaim(pv: PersistentVolume, namespace: string, name: string): Promise<void>;
  close(): Promise<void>;
}

const WAIT_MS = 60_000;
const FINALIZER = 'kubernetes.io/pv-protection';

/** Polls until probe returns a value, every 50 ms, for at most WAIT_MS. */
function eventually<T>(probe: () => Promise<T | undefined>, what: string): Promise<T> {
  return waitUntil(probe, what, WAIT_MS, 50);
}

export function controllerContract(name: string, setup: () => Promise<ControllerWorld>): void {
  void describe(`controller contract: ${name}`, () => {
    let world: ControllerWorld;
    let count = 0;

    before(async () => {
      world = await setup();
    });
    after(async () => {
      await world.close();
    });

    const read = async (pvName: string): Promise<PersistentVolume | undefined> =>
      world.cluster.persistentVolumes.get(pvName).catch((error: unknown) => {
        if (isNotFound(error)) return undefined;
        throw error;
      });
    const until = (pvName: string, what: string, check: (pv: PersistentVolume) => boolean): Promise<PersistentVolume> =>
      eventually(async () => {
        const pv = await read(pvName);
        return pv !== undefined && check(pv) ? pv : undefined;
      }, `${pvName}: ${what}`);
    const gone = (pvName: string): Promise<true> =>
      eventually(async () => ((await read(pvName)) === undefined ? true : undefined), `${pvName} gone`);

    /**
     * A local PV as this agent writes it. The provisioned-by annotation matters: without it the real
     * PV controller looks for an in-tree deleter of a Released PV with reclaim policy Delete, finds
     * none for local volumes and marks the PV Failed; with it, the PV stays Released for its
     * (external) provisioner, this agent, to clean and delete.
     */
    async function createPv(): Promise<PersistentVolume> {
      count += 1;
      return world.cluster.persistentVolumes.create({
        metadata: {
          name: `${world.prefix}-${count}`,
          labels: { 'controller-contract': world.prefix },
          annotations: { [PROVISIONED_BY_ANNOTATION]: 'local-volume-provisioner-nowhere' },
        },
        spec: {
          capacity: { storage: '1Mi' },
          accessModes: ['ReadWriteOnce'],
          persistentVolumeReclaimPolicy: 'Delete',
          storageClassName: world.prefix,
          volumeMode: 'Filesystem',
          local: { path: `/mnt/${world.prefix}/${count}` },
          nodeAffinity: {
            required: {
              nodeSelectorTerms: [
                { matchExpressions: [{ key: 'kubernetes.io/hostname', operator: 'In', values: ['nowhere'] }] },
              ],
            },
          },
        },
      });
    }

    void it('a new PV becomes Available', async () => {
      const pv = await createPv();
      await until(pv.metadata.name, 'Available', (p) => p.status?.phase === 'Available');
    });

    void it('a bound claim: Bound, claimRef names it; the claim deleted: Released, claimRef kept, finalizer kept', async () => {
      const pv = await until((await createPv()).metadata.name, 'Available', (p) => p.status?.phase === 'Available');
      const claim = `${world.prefix}-claim-${count}`;
      await world.bindClaim(pv, 'default', claim);
      const bound = await until(pv.metadata.name, 'Bound', (p) => p.status?.phase === 'Bound');
      assert.equal(bound.spec.claimRef?.namespace, 'default');
      assert.equal(bound.spec.claimRef.name, claim);
      await world.deleteClaim(bound, 'default', claim);
      const released = await until(pv.metadata.name, 'Released', (p) => p.status?.phase === 'Released');
      assert.equal(released.spec.claimRef?.namespace, 'default');
      assert.equal(released.spec.claimRef.name, claim);
      assert.ok(released.metadata.finalizers?.includes(FINALIZER), 'pv-protection stays on a PV not deleted');
    });

    void it('a Released PV deleted: pv-protection lets it go', async () => {
      const pv = await until((await createPv()).metadata.name, 'Available', (p) => p.status?.phase === 'Available');
      const claim = `${world.prefix}-claim-${count}`;
      await world.bindClaim(pv, 'default', claim);
      const bound = await until(pv.metadata.name, 'Bound', (p) => p.status?.phase === 'Bound');
      await world.deleteClaim(bound, 'default', claim);
      await until(pv.metadata.name, 'Released', (p) => p.status?.phase === 'Released');
      await world.cluster.persistentVolumes.delete(pv.metadata.name);
      await gone(pv.metadata.name);
    });

    void it('a Bound PV deleted: kept (finalizer and all) while bound, gone once its claim is deleted', async () => {
      const pv = await until((await createPv()).metadata.name, 'Available', (p) => p.status?.phase === 'Available');
      const claim = `${world.prefix}-claim-${count}`;
      await world.bindClaim(pv, 'default', claim);
      await until(pv.metadata.name, 'Bound', (p) => p.status?.phase === 'Bound');
      await world.cluster.persistentVolumes.delete(pv.metadata.name);
      await new Promise((resolve) => setTimeout(resolve, 1500));
      const held = await read(pv.metadata.name);
      assert.ok(held?.metadata.deletionTimestamp !== undefined, 'still there, being deleted');
      assert.deepEqual(held.metadata.finalizers, [FINALIZER]);
      assert.equal(held.status?.phase, 'Bound');
      await world.deleteClaim(held, 'default', claim);
      await gone(pv.metadata.name);
    });

    void it('a Job deleted with the default propagation (orphan) is gone', async () => {
      const job = await world.cluster.jobs.create(
        {
          metadata: { name: `${world.prefix}-job`, namespace: 'default' },
          spec: {
            template: {
              spec: { restartPolicy: 'Never', containers: [{ name: 'c', image: 'registry.example/c:contract' }] },
            },
          },
        },
        { namespace: 'default' },
      );
      await world.cluster.jobs.delete(job.metadata.name, { namespace: 'default' });
      await eventually(
        async () =>
          world.cluster.jobs.get(job.metadata.name, { namespace: 'default' }).then(
            () => undefined,
            (error: unknown) => (isNotFound(error) ? true : undefined),
          ),
        'the Job gone',
      );
    });
  });
}
