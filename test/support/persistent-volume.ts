// A valid local PersistentVolume for the in-memory cluster (which validates as the apiserver does):
// capacity, access mode, a local path under /mnt and the hostname node affinity.
import type { PersistentVolume } from '../../src/core/kube/objects.js';

export function localPersistentVolume(
  name: string,
  labels: Record<string, string> = {},
  hostname = 'n1',
): PersistentVolume {
  return {
    metadata: { name, labels },
    spec: {
      capacity: { storage: '1Gi' },
      accessModes: ['ReadWriteOnce'],
      local: { path: `/mnt/${name}` },
      nodeAffinity: {
        required: {
          nodeSelectorTerms: [
            { matchExpressions: [{ key: 'kubernetes.io/hostname', operator: 'In', values: [hostname] }] },
          ],
        },
      },
    },
  };
}
