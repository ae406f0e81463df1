// `provisioner run --sandbox DIR`: the real agent against the in-memory cluster, with its config
// and discovery directories under DIR, for trying hot reload without a cluster or root.
import { mkdir, readdir, stat, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { UsageError } from '../errors.js';
import type { ConfigIssue } from '../errors.js';
import type { ProvisionerConfig } from '../config/model.js';
import { MemoryCluster } from '../kube/memory/memory-cluster.js';
import { isBelow } from '../node/sandbox-volumes.js';

export interface SandboxLayout {
  readonly root: string;
  readonly configDir: string;
  readonly disksDir: string;
  readonly adminSocket: string;
}

export const SANDBOX_NODE = 'sandbox-node';

function errnoOf(err: unknown): string | undefined {
  return err instanceof Error && 'code' in err && typeof err.code === 'string' ? err.code : undefined;
}

/**
 * `mkdir -p` one level at a time. Not `mkdir(..., { recursive: true })`: where mkdir fails with
 * ENOENT although the parent exists (procfs, sysfs: `/proc/x`), Node's recursive mkdir retries forever.
 */
async function makeDirectories(path: string): Promise<void> {
  const missing: string[] = [];
  for (let dir = path; ; dir = dirname(dir)) {
    const found = await stat(dir).catch((err: unknown) => {
      if (errnoOf(err) === 'ENOENT') return undefined;
      throw err;
    });
    if (found !== undefined) {
      if (!found.isDirectory()) throw new Error(`${dir} is not a directory`);
      break;
    }
    missing.unshift(dir);
    if (dirname(dir) === dir) break;
  }
  for (const dir of missing) {
    await mkdir(dir).catch((err: unknown) => {
      if (errnoOf(err) !== 'EEXIST') throw err;
    });
  }
}

/**
 * Creates DIR/config (one file per key) and DIR/disks/<class>/vol1..2 unless they exist; with
 * `configPath` (--config-dir given) the config is that source instead and only DIR/disks is
 * created. Any problem with DIR is the user's --sandbox (exit 2), never a bug.
 */
export async function prepareSandbox(dir: string, configPath?: string): Promise<SandboxLayout> {
  const root = resolve(dir);
  const configDir = configPath ?? join(root, 'config');
  const disksDir = join(root, 'disks');
  try {
    const found = await stat(root).catch(() => undefined);
    if (found !== undefined && !found.isDirectory()) throw new Error('not a directory');
    if (configPath !== undefined) {
      await makeDirectories(disksDir);
    } else {
      await makeDirectories(configDir);
      if ((await readdir(configDir)).length === 0) {
        const discovery = join(disksDir, 'local-storage');
        await writeFile(
          join(configDir, 'storageClassMap'),
          `local-storage:\n  hostDir: ${discovery}\n  mountDir: ${discovery}\n  blockCleanerCommand: ["/scripts/quick_reset.sh"]\n`,
        );
        for (const vol of ['vol1', 'vol2']) await makeDirectories(join(discovery, vol));
      }
    }
  } catch (err) {
    throw new UsageError(`--sandbox ${dir}: ${err instanceof Error ? err.message : String(err)}`);
  }
  return { root, configDir, disksDir, adminSocket: join(root, 'admin.sock') };
}

/**
 * The sandbox's own rule on top of the config's validation: every class's mountDir lies below
 * DIR/disks. A sandbox counts every directory of a discovery directory as a disk, and cleans
 * released ones for real, so a mountDir elsewhere (`/mnt/../etc`) would publish, and could wipe,
 * directories of the host.
 */
export function sandboxConfigCheck(disksDir: string): (config: ProvisionerConfig) => ConfigIssue[] {
  return (config) =>
    Object.entries(config.storageClassMap).flatMap(([name, c]): ConfigIssue[] => {
      const resolved = resolve(c.mountDir);
      if (isBelow(disksDir, resolved)) return [];
      const shown = resolved === c.mountDir ? c.mountDir : `${c.mountDir} (${resolved})`;
      return [
        {
          severity: 'error',
          path: `storageClassMap.${name}.mountDir`,
          message: `${shown} is outside the sandbox's disks directory ${disksDir}: a sandbox publishes only directories below it`,
        },
      ];
    });
}

/** The in-memory cluster with this sandbox's Node; StorageClasses follow the config. */
export async function sandboxCluster(nodeName: string = SANDBOX_NODE): Promise<MemoryCluster> {
  const cluster = new MemoryCluster();
  await cluster.nodes.create({ metadata: { name: nodeName, labels: { 'kubernetes.io/hostname': nodeName } } });
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
