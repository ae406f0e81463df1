// `provisioner run --sandbox DIR`: the real agent against the in-memory cluster, with its config
// and discovery directories under DIR, for trying hot reload without a cluster or root.
import { mkdir, readdir, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { ProvisionerConfig } from '../config/model.js';
import { MemoryCluster } from '../kube/memory-cluster.js';

export interface SandboxLayout {
  readonly root: string;
  readonly configDir: string;
  readonly disksDir: string;
  readonly adminSocket: string;
}

export const SANDBOX_NODE = 'sandbox-node';

/** Creates DIR/config (one file per key) and DIR/disks/<class>/vol1..2 unless they exist. */
export async function prepareSandbox(dir: string): Promise<SandboxLayout> {
  const root = resolve(dir);
  const configDir = join(root, 'config');
  const disksDir = join(root, 'disks');
  await mkdir(configDir, { recursive: true });
  if ((await readdir(configDir)).length === 0) {
    const discovery = join(disksDir, 'local-storage');
    await writeFile(
      join(configDir, 'storageClassMap'),
      `local-storage:\n  hostDir: ${discovery}\n  mountDir: ${discovery}\n  blockCleanerCommand: ["/scripts/quick_reset.sh"]\n`,
    );
    for (const vol of ['vol1', 'vol2']) await mkdir(join(discovery, vol), { recursive: true });
  }
  return { root, configDir, disksDir, adminSocket: join(root, 'admin.sock') };
}

/** The in-memory cluster with this sandbox's Node; StorageClasses follow the config. */
export async function sandboxCluster(): Promise<MemoryCluster> {
  const cluster = new MemoryCluster();
  await cluster.nodes.create({ metadata: { name: SANDBOX_NODE, labels: { 'kubernetes.io/hostname': SANDBOX_NODE } } });
  return cluster;
}

/** Creates the StorageClasses a config names (a sandbox has no operator to do it). */
export async function ensureStorageClasses(cluster: MemoryCluster, config: ProvisionerConfig): Promise<void> {
  for (const name of Object.keys(config.storageClassMap)) {
    await cluster.storageClasses
      .create({
        metadata: { name },
        provisioner: 'kubernetes.io/no-provisioner',
        reclaimPolicy: 'Delete',
        volumeBindingMode: 'WaitForFirstConsumer',
      })
      .catch(() => undefined);
  }
}
