// `provisioner simulate`'s controller stand-ins on the in-memory cluster, held to the same
// contract as the real kube-controller-manager (test/integration/e2e/controller-contract.test.ts).
import { MemoryCluster } from '../../../src/core/kube/memory/memory-cluster.js';
import { bindClaim, releaseClaim, runControllerStandIns } from '../../../src/core/simulate/controllers.js';
import { controllerContract } from '../../contract/controller-contract.js';

controllerContract('simulate stand-ins on MemoryCluster', () => {
  const cluster = new MemoryCluster();
  const stop = new AbortController();
  const running = runControllerStandIns(cluster, stop.signal);
  return Promise.resolve({
    cluster,
    prefix: 'standins',
    bindClaim: async (pv, namespace, name) => {
      await bindClaim(cluster, await cluster.persistentVolumes.get(pv.metadata.name), namespace, name);
    },
    deleteClaim: async (pv) => {
      await releaseClaim(cluster, await cluster.persistentVolumes.get(pv.metadata.name));
    },
    close: async () => {
      stop.abort();
      await Promise.allSettled(running);
    },
  });
});
