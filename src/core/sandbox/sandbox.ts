// `provisioner run --sandbox DIR`: the real agent against the in-memory cluster, with its config
// and discovery directories under DIR, for trying hot reload without a cluster or root. Everything
// a sandbox is, in one place: the directory layout, the in-memory cluster with its Node and the
// StorageClasses the config names, the node whose directories count as disks, and the config rule
// that keeps those disks inside DIR.
import { mkdir, readdir, stat, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import type { AgentEvent, AppliedConfigJson } from '../agent/reload-types.js';
import type { ProvisionerConfig } from '../config/model.js';
import { loadConfig } from '../config/source/load.js';
import type { LoadedConfig } from '../config/source/port.js';
import { UsageError } from '../errors.js';
import type { ConfigIssue } from '../errors.js';
import { MemoryCluster } from '../kube/memory/memory-cluster.js';
import type { PersistentVolume } from '../kube/objects.js';
import type { NodeVolumes } from '../node/volumes.js';
import { errnoCode, errorMessage } from '../unknown-values.js';
import { isBelow, SandboxVolumes } from './sandbox-volumes.js';

export interface SandboxLayout {
  readonly root: string;
  readonly configDir: string;
  readonly disksDir: string;
  readonly adminSocket: string;
}

/** The newest Events the sandbox's cluster keeps (`kubectl get events` of a sandbox has no more). */
export const SANDBOX_EVENT_LIMIT = 100;
/** Changes its watch history keeps: a watch from an older resourceVersion relists (410 Gone). */
export const SANDBOX_HISTORY_LIMIT = 500;

/** The Node of a sandbox started without a node name. */
export const SANDBOX_NODE = 'sandbox-node';

/**
 * `mkdir -p` one level at a time. Not `mkdir(..., { recursive: true })`: where mkdir fails with
 * ENOENT although the parent exists (procfs, sysfs: `/proc/x`), Node's recursive mkdir retries forever.
 */
async function makeDirectories(path: string): Promise<void> {
  const missing: string[] = [];
  for (let dir = path; ; dir = dirname(dir)) {
    const found = await stat(dir).catch((err: unknown) => {
      if (errnoCode(err) === 'ENOENT') return undefined;
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
      if (errnoCode(err) !== 'EEXIST') throw err;
    });
  }
}

/**
 * Creates DIR/config (one file per key) and DIR/disks/<class>/vol1..2 unless they exist; with
 * `configPath` (--config-dir given) the config is that source instead and only DIR/disks is
 * created. Any problem with DIR is the user's --sandbox (exit 2), never a bug.
 */
async function prepareSandbox(dir: string, configPath?: string): Promise<SandboxLayout> {
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
    throw new UsageError(`--sandbox ${dir}: ${errorMessage(err)}`);
  }
  return { root, configDir, disksDir, adminSocket: join(root, 'admin.sock') };
}

/**
 * The sandbox's own rule on top of the config's validation: every class's mountDir lies below
 * DIR/disks. A sandbox counts every directory of a discovery directory as a disk, and cleans
 * released ones for real, so a mountDir elsewhere (`/mnt/../etc`) would publish, and could wipe,
 * directories of the host.
 */
function sandboxConfigCheck(disksDir: string): (loaded: LoadedConfig) => ConfigIssue[] {
  return (loaded) =>
    Object.entries(loaded.config.storageClassMap).flatMap(([name, c]): ConfigIssue[] => {
      if (isBelow(disksDir, resolve(c.mountDir))) return [];
      const path = `storageClassMap.${name}.mountDir`;
      const position = loaded.positions[path];
      const issue: ConfigIssue = {
        severity: 'error',
        path,
        message: `${c.mountDir} is outside the sandbox's disks directory ${disksDir}: a sandbox publishes only directories below it`,
      };
      return [position === undefined ? issue : { ...issue, position }];
    });
}

/** The in-memory cluster with this sandbox's Node; StorageClasses follow the config. */
async function sandboxCluster(nodeName: string): Promise<MemoryCluster> {
  // It lives in the agent's process: bounded as a real apiserver bounds what it keeps (Events
  // expire after an hour, etcd compacts its history), or every reload's Event and change would
  // stay in the agent's heap. Small bounds, full within the first few hundred reloads: the agent's
  // RSS then stays flat (docs/benchmarks.md, "Reload churn").
  const cluster = new MemoryCluster({ eventLimit: SANDBOX_EVENT_LIMIT, historyLimit: SANDBOX_HISTORY_LIMIT });
  await cluster.nodes.create({ metadata: { name: nodeName, labels: { 'kubernetes.io/hostname': nodeName } } });
  return cluster;
}

/** Creates the StorageClasses a config names (a sandbox has no operator to do it). */
async function ensureStorageClasses(cluster: MemoryCluster, config: ProvisionerConfig): Promise<void> {
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

export interface SandboxOptions {
  /** `--sandbox DIR`. */
  readonly dir: string;
  /** The config source the user chose (--config-dir); undefined: DIR/config, created with a sample. */
  readonly configPath: string | undefined;
  /** The admin socket the user chose (--admin-socket); undefined: DIR/admin.sock. */
  readonly adminSocket: string | undefined;
  /** The agent's node name; '' for the sandbox's own (SANDBOX_NODE). */
  readonly nodeName: string;
  /** The real node: its mount table and filesystems, beneath the sandbox's directory "mounts". */
  readonly node: NodeVolumes;
}

/** What the sandbox follows of the running agent. */
export interface SandboxAgent {
  appliedConfig(): Pick<AppliedConfigJson, 'config'>;
  subscribe(listener: (event: AgentEvent) => void): () => void;
}

export interface Sandbox {
  readonly layout: SandboxLayout;
  /** What the sandbox sets in the agent's options. */
  readonly agentOptions: {
    readonly configPath: string;
    readonly nodeName: string;
    readonly adminSocket: string;
    readonly configCheck: (loaded: LoadedConfig) => ConfigIssue[];
  };
  readonly cluster: MemoryCluster;
  readonly volumes: NodeVolumes;
  /**
   * Follows the started agent: its discovery directories are those of the config it applies, and
   * each applied reload creates the StorageClasses the new config names. Returns the unsubscribe.
   */
  attach(agent: SandboxAgent): () => void;
}

/**
 * What kube-controller-manager's PV controller does first with a PV nobody claims: moves it from
 * Pending to Available. The sandbox has no controller-manager, and its PVs would stay Pending.
 */
async function markUnclaimedAvailable(cluster: MemoryCluster, signal: AbortSignal): Promise<void> {
  try {
    const listed = await cluster.persistentVolumes.list();
    for (const pv of listed.items) await markAvailable(cluster, pv);
    const events = cluster.persistentVolumes.watch({ resourceVersion: listed.metadata.resourceVersion ?? '0', signal });
    for await (const event of events)
      if (event.type === 'ADDED' || event.type === 'MODIFIED') await markAvailable(cluster, event.object);
  } catch (error) {
    if (!signal.aborted) throw error;
  }
}

async function markAvailable(cluster: MemoryCluster, pv: PersistentVolume): Promise<void> {
  const phase = pv.status?.phase;
  if ((phase !== undefined && phase !== 'Pending') || pv.spec.claimRef !== undefined) return;
  // A conflict or a deletion meanwhile: the watch brings the newer object.
  await cluster.persistentVolumes
    .updateStatus({ ...pv, status: { ...pv.status, phase: 'Available' } })
    .catch(() => undefined);
}

/**
 * Prepares DIR (see prepareSandbox) and builds the sandbox's cluster, with the StorageClasses the
 * config names now, and its node. A config that does not load fails here, as at the agent's start.
 */
export async function openSandbox(options: SandboxOptions): Promise<Sandbox> {
  const layout = await prepareSandbox(options.dir, options.configPath);
  const nodeName = options.nodeName === '' ? SANDBOX_NODE : options.nodeName;
  const cluster = await sandboxCluster(nodeName);
  const initial = (await loadConfig(layout.configDir)).config;
  await ensureStorageClasses(cluster, initial);
  let agent: SandboxAgent | undefined;
  const volumes = new SandboxVolumes(
    options.node,
    () => Object.values((agent?.appliedConfig().config ?? initial).storageClassMap).map((c) => c.mountDir),
    layout.disksDir,
  );
  return {
    layout,
    agentOptions: {
      configPath: layout.configDir,
      nodeName,
      adminSocket: options.adminSocket ?? layout.adminSocket,
      configCheck: sandboxConfigCheck(layout.disksDir),
    },
    cluster,
    volumes,
    attach(started) {
      agent = started;
      const stop = new AbortController();
      markUnclaimedAvailable(cluster, stop.signal).catch(() => undefined);
      const unsubscribe = started.subscribe((event) => {
        if (event.type === 'reload' && event.result.outcome === 'applied')
          void ensureStorageClasses(cluster, started.appliedConfig().config);
      });
      return () => {
        stop.abort();
        unsubscribe();
      };
    },
  };
}
