// What every soak step works with, and the moves steps share: disks added to the node, a claim run
// through a StatefulSet and released, a config written and waited for, the agent's container
// killed, and the recovery check after a fault (the agent publishes a disk added after it).
import { realpathSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import type { V1PersistentVolume } from '@kubernetes/client-node';

import { isRecord } from '../../../src/core/unknown-values.js';
import { CHART_NS, STATE, box } from '../chart-node.js';
import { apiStatusCode } from '../cluster.js';
import type { Violation } from '../data-safety-invariants.js';
import { eventually } from '../eventually.js';
import { isReady, logMatches, podGone, podWhen, isRunning } from '../node-pods.js';
import { attachLoopDevice, mountTmpfs, mountsUnder, run, unmount, type Cleanup } from '../real-node.js';
import type { AgentLogKeeper } from './agent-logs.js';
import { configData, configHash, type ConfigModel } from './config-model.js';
import type { ControllerReplicas } from './controllers.js';
import type { FaultKind } from './plan.js';
import type { Disk, Release, SoakWorld, Tenant } from './world.js';

const MiB = 1024 * 1024;
/** How long the agent may take to serve again after a fault is healed (kubelet restarts included). */
export const RECOVERY_BOUND_MS = 120_000;
const CLAIM_MS = 120_000;
export const CLASS_OF = { fs: 'fs-disks', blk: 'blk-disks', extra: 'extra-disks' } as const;

export interface SoakContext {
  readonly world: SoakWorld;
  readonly cleanup: Cleanup;
  readonly random: () => number;
  readonly seed: number;
  readonly rollout: ControllerReplicas;
  readonly nodeCleanup: ControllerReplicas;
  /** Base of the chart's ConfigMap data (its keys other than the soak's). */
  readonly baseData: Readonly<Record<string, string>>;
  readonly recoveries: Map<FaultKind, number[]>;
  /** Recoveries slower than SLOW_RECOVERY_MS, with where the time went and the agent's log then. */
  readonly slowRecoveries: SlowRecovery[];
  readonly log: (line: string) => void;
  /** The agent's and its cleanup Jobs' container logs, kept for the whole soak. */
  readonly agentLogs: AgentLogKeeper;
  /** When the data-safety checker found each of its violations (ms since the epoch). */
  readonly checkerSeen: ReadonlyMap<Violation, number>;
}

/** A recovery over this long is kept with its parts and the agent's log (the soak's unexplained tails). */
export const SLOW_RECOVERY_MS = 10_000;

export interface SlowRecovery {
  readonly kind: FaultKind;
  /** From the fault healed: the agent's pod Ready seen through the apiserver. */
  readonly readyMs: number;
  /** Then: the disk added has its PV. */
  readonly publishMs: number;
  /** The pod's restarts and Ready condition as seen then. */
  readonly pod: string;
  /** The agent's last log lines (its current container, from the apiserver). */
  readonly agentLog: string;
}

/** A whole number in [min, max]. */
export const between = (ctx: SoakContext, min: number, max: number): number =>
  min + Math.floor(ctx.random() * (max - min + 1));

export function pick<T>(ctx: SoakContext, items: readonly T[]): T | undefined {
  return items.length === 0 ? undefined : items[Math.floor(ctx.random() * items.length)];
}

/** A new disk of the class: ext4 on a loop device or tmpfs (filesystem classes), a linked loop device (block). */
export function addDisk(ctx: SoakContext, cls: Disk['cls'], kind: Disk['kind']): Disk {
  const { world, cleanup } = ctx;
  const dir = world.dirs[cls];
  if (kind === 'tmpfs') {
    const path = join(dir, world.next('t'));
    mountTmpfs(cleanup, path, 4 * MiB);
    const disk: Disk = { path, cls, kind };
    world.disks.set(path, disk);
    return disk;
  }
  // The backing file in the block class's directory (a name discovery does not take): the agent's
  // container sees it there, so a loop device's identity (its backing file's inode and birth) is
  // read as on a real node a disk's serial is.
  const loop = attachLoopDevice(cleanup, join(world.dirs.blk, `${world.next('img-')}.img`), 16 * MiB);
  if (kind === 'block') {
    const path = join(dir, world.next('blk'));
    symlinkSync(loop.path, path);
    // runs before the detach: the loop devices a kubelet stacked on this one (it holds a Block
    // volume's device so) and left when it was stopped with a pod still using it
    cleanup.defer(`detach loop devices stacked on ${loop.path}`, () => {
      detachStackedLoops(loop.path);
    });
    const disk: Disk = { path, cls, kind, loop };
    world.disks.set(path, disk);
    return disk;
  }
  run('mkfs.ext4', ['-q', '-F', loop.path]);
  const path = join(dir, world.next('x'));
  run('mkdir', ['-p', path]);
  run('mount', [loop.path, path]);
  // registered after the loop device's detach, so it runs before it: unmounted, then detached
  cleanup.defer(`unmount ${path}`, () => {
    while (mountsUnder(path).some((m) => m.mountPoint === path)) unmount(path);
  });
  rmSync(join(path, 'lost+found'), { recursive: true, force: true });
  const disk: Disk = { path, cls, kind, loop };
  world.disks.set(path, disk);
  return disk;
}

/** Detaches the loop devices whose backing file is the device node `device` (`/dev/loopN`). */
function detachStackedLoops(device: string): void {
  const node = statSync(device);
  const listed: unknown = JSON.parse(run('losetup', ['--json', '--list', '--output', 'NAME,BACK-INO,BACK-MAJ:MIN']));
  const devices = isRecord(listed) && Array.isArray(listed['loopdevices']) ? listed['loopdevices'] : [];
  const dev = `${String(Math.floor(node.dev / 256))}:${String(node.dev % 256)}`;
  for (const entry of devices) {
    if (!isRecord(entry) || String(entry['back-ino']) !== String(node.ino) || entry['back-maj:min'] !== dev) continue;
    run('losetup', ['-d', String(entry['name'])]);
  }
}

const inUse = (world: SoakWorld, path: string): boolean =>
  [...world.tenants.values()].some((t) => t.path === path) || world.releases.some((r) => r.tenant.path === path);

/** An Available PV of the class on a disk no tenant or release holds. */
export async function availablePv(ctx: SoakContext, cls: 'fs' | 'blk'): Promise<V1PersistentVolume | undefined> {
  const pvs = (await ctx.world.env.core.listPersistentVolume()).items;
  return pvs.find(
    (pv) =>
      pv.spec?.storageClassName === CLASS_OF[cls] &&
      pv.status?.phase === 'Available' &&
      pv.metadata?.deletionTimestamp === undefined &&
      ctx.world.disks.has(pv.spec.local?.path ?? '') &&
      !inUse(ctx.world, pv.spec.local?.path ?? ''),
  );
}

/** Makes sure an Available PV of the class exists (adding a disk when none is free). */
export async function ensureAvailable(ctx: SoakContext, cls: 'fs' | 'blk'): Promise<void> {
  if ((await availablePv(ctx, cls)) !== undefined) return;
  const disk = addDisk(ctx, cls, cls === 'blk' ? 'block' : 'ext4');
  await ctx.world.env.pvAt(disk.path, 'published for a claim', (pv) => pv.status?.phase === 'Available', CLAIM_MS);
}

const hex = (text: string): string => Buffer.from(text, 'latin1').toString('hex');

/** A tenant: a StatefulSet whose pod checks its new volume is empty, writes its token and reads it back. */
export async function claim(ctx: SoakContext, cls: 'fs' | 'blk'): Promise<Tenant> {
  const { world } = ctx;
  const { env } = world;
  await ensureAvailable(ctx, cls);
  const set = world.next('w');
  const token = `s${String(ctx.seed)}-${set}-`.padEnd(16, 'x').slice(0, 16);
  const args =
    cls === 'fs'
      ? // watch: the pod prints its token again whenever it changes (another writer shows in its log)
        box('ls /data', `write /data/token ${token}`, 'watch /data/token 500')
      : box('peek /dev/xvda 16', `write /dev/xvda ${token}`, 'peek /dev/xvda 16', 'sleep');
  await env.apps.createNamespacedStatefulSet({
    namespace: CHART_NS,
    body: env.statefulSet(set, CLASS_OF[cls], cls === 'fs' ? 'Filesystem' : 'Block', args),
  });
  await podWhen(env.core, CHART_NS, `${set}-0`, 'Running', isRunning, CLAIM_MS);
  const done = cls === 'fs' ? new RegExp(`/data/token: ${token}`) : new RegExp(`peek /dev/xvda: ${hex(token)}`);
  const log = await logMatches(env.core, CHART_NS, `${set}-0`, done, CLAIM_MS);
  const fresh = cls === 'fs' ? /^ls \/data: -$/m : new RegExp(`^peek /dev/xvda: ${'0'.repeat(32)}$`, 'm');
  const claimName = `data-${set}-0`;
  const pvc = await env.core.readNamespacedPersistentVolumeClaim({ name: claimName, namespace: CHART_NS });
  const pv = await env.core.readPersistentVolume({ name: pvc.spec?.volumeName ?? '' });
  const path = pv.spec?.local?.path ?? '';
  if (!fresh.test(log.split('\n')[0] ?? ''))
    world.violate(
      'new-claim-empty',
      `${set} got ${pv.metadata?.name ?? '?'} (${path}) with data on it: ${log.split('\n')[0] ?? ''}`,
    );
  const tenant: Tenant = {
    set,
    cls,
    pvName: pv.metadata?.name ?? '',
    pvUid: pv.metadata?.uid ?? '',
    path,
    token,
    paused: false,
  };
  world.tenants.set(set, tenant);
  world.counts.claims += 1;
  return tenant;
}

/** Scales the tenant's StatefulSet to 0 and back: its new pod must read its own token first. */
export async function restartTenant(ctx: SoakContext, tenant: Tenant): Promise<void> {
  const { env } = ctx.world;
  const scale = async (replicas: number): Promise<void> => {
    // read-modify-replace, again on a conflict (the controller updates the object's status)
    for (let attempt = 0; ; attempt++) {
      const set = await env.apps.readNamespacedStatefulSet({ name: tenant.set, namespace: CHART_NS });
      if (set.spec !== undefined) set.spec.replicas = replicas;
      try {
        await env.apps.replaceNamespacedStatefulSet({ name: tenant.set, namespace: CHART_NS, body: set });
        return;
      } catch (error) {
        if (apiStatusCode(error) !== 409 || attempt >= 5) throw error;
      }
    }
  };
  await scale(0);
  await podGone(env.core, CHART_NS, `${tenant.set}-0`, CLAIM_MS);
  await scale(1);
  await podWhen(env.core, CHART_NS, `${tenant.set}-0`, 'Running again', isRunning, CLAIM_MS);
  const done = tenant.cls === 'fs' ? new RegExp(`/data/token: ${tenant.token}`) : /peek[\s\S]*peek/;
  const log = await logMatches(env.core, CHART_NS, `${tenant.set}-0`, done, CLAIM_MS);
  const first = log.split('\n')[0] ?? '';
  const kept = tenant.cls === 'fs' ? first === 'ls /data: token' : first === `peek /dev/xvda: ${hex(tenant.token)}`;
  if (!kept)
    ctx.world.violate('tenant-data', `${tenant.set} restarted and found ${JSON.stringify(first)}, not its own data`);
  ctx.world.counts.tenantRestarts += 1;
}

/** Releases the tenant's claim; the world's monitors follow the cleanup and the republish. */
export async function release(ctx: SoakContext, tenant: Tenant): Promise<Release> {
  const { world } = ctx;
  const disk = world.disks.get(tenant.path);
  const device = tenant.cls === 'blk' ? realpathSync(tenant.path) : undefined;
  void world.checker.expectWipedOnRepublish(
    { name: tenant.pvName, uid: tenant.pvUid },
    `the token of ${tenant.set}`,
    () => (disk === undefined ? false : world.tokenOnDisk(tenant) === tenant.token),
  );
  const logOffset = world.cleanerLog().length;
  const loggedAt = Date.now();
  world.tenants.delete(tenant.set);
  if (tenant.cls === 'fs') {
    // what the tenant's own pod saw: its token, and nothing else, every time the file changed
    const log = await world.env.core
      .readNamespacedPodLog({ name: `${tenant.set}-0`, namespace: CHART_NS })
      .catch(() => '');
    const seen = log.split('\n').filter((l) => l.startsWith('/data/token: '));
    if (seen.some((l) => l !== `/data/token: ${tenant.token}`))
      world.violate('tenant-data', `${tenant.set} saw its token file change in its pod: ${JSON.stringify(seen)}`);
  }
  const at = await world.env.releaseClaim(tenant.set, CLAIM_MS);
  const record: Release = { tenant, at, logOffset, loggedAt, ...(device === undefined ? {} : { device }) };
  world.releases.push(record);
  world.counts.releases += 1;
  return record;
}

/** Writes the model's ConfigMap; the hash the agent will report, undefined for a broken one. */
export async function writeModel(ctx: SoakContext, model: ConfigModel): Promise<string | undefined> {
  const data = configData(ctx.baseData, ctx.world.dirs, model);
  const hash = configHash(data);
  if (hash !== undefined) ctx.world.written.set(hash, JSON.stringify(model));
  await ctx.world.env.writeConfig(data);
  ctx.world.model = model;
  ctx.world.counts.configWrites += 1;
  // under staged rollout every new content is a rollout (a broken one ends `invalid`)
  if (ctx.world.source === 'staged') ctx.world.counts.rollouts += 1;
  return hash;
}

/** Waits until the status Lease says `hash` is applied; a violation when it does not within the bound. */
export async function expectApplied(ctx: SoakContext, hash: string, what: string): Promise<number> {
  const t0 = Date.now();
  try {
    await ctx.world.env.leaseWhen(
      `${what}: ${hash} applied`,
      (a) => a[`${STATE}applied-hash`] === hash,
      RECOVERY_BOUND_MS,
    );
  } catch {
    ctx.world.violate('config-applied', `${what}: ${hash} written but not applied within ${RECOVERY_BOUND_MS} ms`);
  }
  return Date.now() - t0;
}

/** SIGKILLs the agent's container (the kubelet starts it again); false when none runs. */
export function killAgent(ctx: SoakContext): boolean {
  const { node } = ctx.world.env;
  const container = node
    .runtimeContainers()
    .find((c) => c.podNamespace === CHART_NS && c.containerName === 'provisioner' && c.task === 'RUNNING');
  if (container === undefined) return false;
  ctx.world.agentKills.push(Date.now());
  node.killContainer(container.id, 'SIGKILL');
  return true;
}

/** After a fault: the agent Ready and publishing a disk added now; records the time from `healedAt`. */
export async function recover(ctx: SoakContext, kind: FaultKind, healedAt: number): Promise<number> {
  const { world } = ctx;
  let readyAt = healedAt;
  try {
    await world.env.agentPod('the agent Ready after the fault', isReady, RECOVERY_BOUND_MS);
    readyAt = Date.now();
    const disk = addDisk(ctx, 'fs', 'tmpfs');
    await world.env.pvAt(disk.path, 'published after the fault', () => true, RECOVERY_BOUND_MS);
  } catch (error) {
    world.violate(
      'recovery',
      `after ${kind} the agent did not publish a new disk within ${RECOVERY_BOUND_MS} ms: ${String(error)}`,
    );
  }
  const ms = Date.now() - healedAt;
  ctx.recoveries.set(kind, [...(ctx.recoveries.get(kind) ?? []), ms]);
  if (ms > SLOW_RECOVERY_MS) ctx.slowRecoveries.push(await slowRecovery(ctx, kind, readyAt - healedAt, ms));
  return ms;
}

/** Where a slow recovery's time went, and what the agent logged meanwhile. */
async function slowRecovery(ctx: SoakContext, kind: FaultKind, readyMs: number, ms: number): Promise<SlowRecovery> {
  const { env } = ctx.world;
  const pod = await env.agentPod('the agent pod', () => true, 5_000).catch(() => undefined);
  const ready = pod?.status?.conditions?.find((c) => c.type === 'Ready');
  const agentLog =
    pod === undefined
      ? '<no agent pod>'
      : await env.core
          .readNamespacedPodLog({ name: pod.metadata?.name ?? '', namespace: CHART_NS, tailLines: 60 })
          .catch((e: unknown) => `<${String(e)}>`);
  return {
    kind,
    readyMs,
    publishMs: ms - readyMs,
    pod: `${pod?.metadata?.name ?? '?'} restarts ${String(pod?.status?.containerStatuses?.[0]?.restartCount ?? '?')}, Ready ${ready?.status ?? '?'} since ${String(ready?.lastTransitionTime ?? '?')}`,
    agentLog,
  };
}

/** Waits until `check` holds (polling), a violation named `rule` when it does not within `ms`. */
export async function expectEventually(
  ctx: SoakContext,
  rule: string,
  what: string,
  check: () => Promise<boolean>,
  ms = RECOVERY_BOUND_MS,
): Promise<boolean> {
  try {
    await eventually(async () => ((await check().catch(() => false)) ? true : undefined), what, ms, 250);
    return true;
  } catch {
    ctx.world.violate(rule, `${what}: not within ${ms} ms`);
    return false;
  }
}
