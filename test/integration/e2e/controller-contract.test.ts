// The controller contract against the real kube-controller-manager: a control plane of this
// file's own with the controllers on; a claim is a real PVC naming the PV.
//
// Lint: client-node's models are plain data classes; object literals are what its API takes.
/* eslint-disable @typescript-eslint/no-unsafe-class-instance-assignment */
import { CoreV1Api, StorageV1Api } from '@kubernetes/client-node';

import { loadKubeconfig } from '../../../src/core/kube/kubeconfig.js';
import { RestCluster } from '../../../src/core/kube/rest-cluster.js';
import { controllerContract } from '../../contract/controller-contract.js';
import { apiStatusCode } from '../../support/cluster.js';
import { startControlPlane } from '../../support/control-plane.js';
import { eventually } from '../../support/eventually.js';
import { kubeBinDir, tokenKubeConfig } from '../../support/test-cluster.js';

controllerContract('the real kube-controller-manager', async () => {
  const plane = await startControlPlane({ binDir: kubeBinDir(), controllers: true });
  try {
    const kc = tokenKubeConfig(plane.server, plane.caFile, plane.adminToken, 'lvp-test-admin');
    const core = kc.makeApiClient(CoreV1Api);
    const cluster = new RestCluster({ connection: await loadKubeconfig(plane.kubeconfigPath) });
    const prefix = 'real';
    await kc.makeApiClient(StorageV1Api).createStorageClass({
      body: { metadata: { name: prefix }, provisioner: 'kubernetes.io/no-provisioner', reclaimPolicy: 'Delete' },
    });
    return {
      cluster,
      prefix,
      bindClaim: async (pv, namespace, name) => {
        await core.createNamespacedPersistentVolumeClaim({
          namespace,
          body: {
            metadata: { name },
            spec: {
              storageClassName: pv.spec.storageClassName ?? '',
              volumeName: pv.metadata.name,
              accessModes: ['ReadWriteOnce'],
              resources: { requests: { storage: pv.spec.capacity?.['storage'] ?? '1Mi' } },
            },
          },
        });
      },
      deleteClaim: async (_pv, namespace, name) => {
        await core.deleteNamespacedPersistentVolumeClaim({ namespace, name });
        await eventually(
          async () =>
            core.readNamespacedPersistentVolumeClaim({ namespace, name }).then(
              () => undefined,
              (error: unknown) => (apiStatusCode(error) === 404 ? true : undefined),
            ),
          `claim ${name} gone`,
          60_000,
        );
      },
      close: async () => {
        cluster.close();
        await plane.stop();
      },
    };
  } catch (error) {
    await plane.stop();
    throw error;
  }
});
