// The one table of the port's resources (RESOURCES in src/core/kube/cluster.ts): every client the
// implementations build answers for the resource the table names. RestCluster's paths are held
// by rest-cluster.test.ts and the contract suite against the real apiserver.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { KubeApiError, RESOURCES, type ResourceName } from '../../../src/core/kube/cluster.js';
import { MemoryCluster } from '../../../src/core/kube/memory/memory-cluster.js';
import { ReadOnlyCluster, WriteRefusedError } from '../../../src/core/kube/read-only-cluster.js';

const names = Object.keys(RESOURCES).filter((key): key is ResourceName => key in RESOURCES);

describe('the resource table', () => {
  it('names each resource once, with its group taken from the apiVersion', () => {
    assert.deepEqual(
      names.map((name) => `${RESOURCES[name].group}/${RESOURCES[name].resource}`),
      [
        '/persistentvolumes',
        'storage.k8s.io/storageclasses',
        '/nodes',
        '/events',
        'batch/jobs',
        '/configmaps',
        'coordination.k8s.io/leases',
        '/persistentvolumeclaims',
        '/pods',
      ],
    );
  });

  it("MemoryCluster: each client is its resource's (kind in objects, resource in errors)", async () => {
    const cluster = new MemoryCluster();
    for (const name of names) {
      const { group, resource } = RESOURCES[name];
      const qualified = group === '' ? resource : `${resource}.${group}`;
      await assert.rejects(
        cluster[name].get('missing'),
        (err: unknown) => err instanceof KubeApiError && err.message === `${qualified} "missing" not found`,
        name,
      );
      const list: object = await cluster[name].list();
      assert.ok('kind' in list && 'apiVersion' in list, name);
      assert.equal(list.kind, `${RESOURCES[name].kind}List`, name);
      assert.equal(list.apiVersion, RESOURCES[name].apiVersion, name);
    }
  });

  it("ReadOnlyCluster: a refused write names the table's resource", async () => {
    const readOnly = new ReadOnlyCluster(new MemoryCluster());
    for (const name of ['persistentVolumes', 'storageClasses', 'nodes', 'events', 'jobs', 'configMaps'] as const) {
      await assert.rejects(
        readOnly[name].delete('x'),
        (err: unknown) => err instanceof WriteRefusedError && err.resource === RESOURCES[name].resource,
        name,
      );
    }
  });
});
