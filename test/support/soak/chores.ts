// The soak's chores: what tenants, operators and the node do between faults. Each returns a short
// note for the log; a chore whose subject is missing (no tenant to release) does the natural
// thing instead (claims one).
import { existsSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';

import { isRecord } from '../../../src/core/unknown-values.js';
import { CHART_FULLNAME, CHART_NS, STATE } from '../chart-node.js';
import { eventually } from '../eventually.js';
import { run } from '../real-node.js';
import { CLEANER_HOLD, configHash } from './config-model.js';
import {
  addDisk,
  between,
  claim,
  expectApplied,
  pick,
  RECOVERY_BOUND_MS,
  release,
  restartTenant,
  writeModel,
  type SoakContext,
} from './context.js';
import type { ChoreKind } from './plan.js';
import type { Tenant } from './world.js';

const MAX_TENANTS = 6;

const tenantOf = (ctx: SoakContext, cls?: Tenant['cls'], onExt4 = false): Tenant | undefined =>
  pick(
    ctx,
    [...ctx.world.tenants.values()].filter(
      (t) => (cls === undefined || t.cls === cls) && (!onExt4 || ctx.world.disks.get(t.path)?.kind === 'ext4'),
    ),
  );

async function claimChore(ctx: SoakContext): Promise<string> {
  if (ctx.world.tenants.size >= MAX_TENANTS) return releaseChore(ctx);
  const tenant = await claim(ctx, ctx.random() < 0.65 ? 'fs' : 'blk');
  return `${tenant.set} claimed ${tenant.pvName} (${tenant.path})`;
}

async function releaseChore(ctx: SoakContext): Promise<string> {
  const tenant = tenantOf(ctx);
  if (tenant === undefined) return claimChore(ctx);
  await release(ctx, tenant);
  return `${tenant.set} released ${tenant.pvName}`;
}

async function tenantRestartChore(ctx: SoakContext): Promise<string> {
  const tenant = tenantOf(ctx);
  if (tenant === undefined) return claimChore(ctx);
  await restartTenant(ctx, tenant);
  return `${tenant.set} scaled to 0 and back: read its own token`;
}

/** A valid edit of the model, waited for until applied. */
async function editChore(
  ctx: SoakContext,
  change: (m: SoakContext['world']['model']) => SoakContext['world']['model'],
): Promise<string> {
  const model = change(ctx.world.model);
  const hash = await writeModel(ctx, model);
  if (hash === undefined) throw new Error(`the soak wrote an invalid config: ${JSON.stringify(model)}`);
  const ms = await expectApplied(ctx, hash, 'an edit');
  return `${JSON.stringify(model)} applied in ${String(ms)} ms (${ctx.world.source} source)`;
}

/** Holds the block cleaner, releases a block tenant and waits until its cleanup started; undefined: none. */
export async function releaseMidCleanup(ctx: SoakContext): Promise<{ tenant: Tenant; unhold: () => void } | undefined> {
  const tenant = tenantOf(ctx, 'blk');
  if (tenant === undefined) return undefined;
  const hold = join(ctx.world.dirs.blk, CLEANER_HOLD);
  writeFileSync(hold, '');
  const unhold = (): void => {
    rmSync(hold, { force: true });
  };
  try {
    const record = await release(ctx, tenant);
    await eventually(
      () =>
        ctx.world
          .cleanerLog()
          .slice(record.logOffset)
          .includes(`start ${record.device ?? '?'}\n`)
          ? true
          : undefined,
      `the cleanup of ${tenant.pvName} started`,
      120_000,
      100,
    );
  } catch (error) {
    unhold();
    throw error;
  }
  return { tenant, unhold };
}

/**
 * A class added, or one removed: adding applies; a removal would orphan the class's PVs, which
 * the agent's reload guard refuses (the default), so it keeps serving; an edit keeping it follows.
 */
async function classChore(ctx: SoakContext): Promise<string> {
  const kept = ctx.world.model;
  if (!kept.spareClass) return editChore(ctx, (m) => ({ ...m, spareClass: true }));
  const { env } = ctx.world;
  const before = (await env.statusLease())[`${STATE}applied-hash`];
  const removed = ctx.random() < 0.5 ? 'spare-disks' : 'extra-disks';
  try {
    const hash = await writeModel(
      ctx,
      removed === 'spare-disks' ? { ...kept, spareClass: false } : { ...kept, extraClass: false },
    );
    await expectRefused(ctx, hash, `the removal of ${removed} refused`);
    const after = (await env.statusLease())[`${STATE}applied-hash`];
    // under staged rollout the refusal halts the rollout, and a halt reverts the wave to the
    // stable copy: the last edit's rollout, if it had not completed, is undone with it
    const allowed = ctx.world.source === 'staged' ? [before, await stableHash(ctx)] : [before];
    if (!allowed.includes(after))
      ctx.world.violate(
        'refused-edit',
        `a refused edit changed the applied config: ${String(before)} → ${String(after)}`,
      );
  } finally {
    // whatever happened, the soak goes on from a config that keeps both classes
    ctx.world.model = kept;
  }
  const note = await editChore(ctx, () => ({ ...kept, labelsRevision: kept.labelsRevision + 1 }));
  return `removing ${removed} refused by the reload guard; then ${note}`;
}

/**
 * A refused config: the agent's status Lease says so (file source); under staged rollout the agent
 * refuses the candidate and goes back to stable at once (the Lease may never show it), and the
 * controller halts the rollout of that hash, which its state on the candidate copy says.
 */
async function expectRefused(ctx: SoakContext, hash: string | undefined, what: string): Promise<void> {
  const { env } = ctx.world;
  if (ctx.world.source === 'file') {
    await env.leaseWhen(what, (a) => a[`${STATE}last-result`] === 'refused', 120_000);
    return;
  }
  await eventually(
    async () => {
      const state = await rolloutState(ctx);
      const candidate = isRecord(state?.['candidate']) ? state['candidate']['hash'] : undefined;
      return state?.['phase'] === 'halted' && candidate === hash ? true : undefined;
    },
    `${what} (the rollout of ${String(hash)} halted)`,
    120_000,
    200,
  );
}

/** The seed's table: the cleaner switched (in-process ↔ Job) while a cleanup runs. */
async function cleanerChore(ctx: SoakContext): Promise<string> {
  const held = await releaseMidCleanup(ctx);
  try {
    const note = await editChore(ctx, (m) => ({ ...m, useJobForCleaning: !m.useJobForCleaning }));
    return `${held === undefined ? 'cleaner switched' : `cleaner switched during the cleanup of ${held.tenant.pvName}`}: ${note}`;
  } finally {
    held?.unhold();
  }
}

/** The rollout state on the candidate copy (staged source), or undefined. */
async function rolloutState(ctx: SoakContext): Promise<Record<string, unknown> | undefined> {
  const copy = await ctx.world.env.core
    .readNamespacedConfigMap({ name: `${CHART_FULLNAME}-config-candidate`, namespace: CHART_NS })
    .catch(() => undefined);
  const state: unknown = JSON.parse(copy?.metadata?.annotations?.[`${STATE}rollout-state`] ?? 'null');
  return isRecord(state) ? state : undefined;
}

/** The hash of the stable copy (staged source): what every node runs while the rollout is `invalid`. */
async function stableHash(ctx: SoakContext): Promise<string | undefined> {
  const copy = await ctx.world.env.core
    .readNamespacedConfigMap({ name: `${CHART_FULLNAME}-config-stable`, namespace: CHART_NS })
    .catch(() => undefined);
  return copy?.data === undefined ? undefined : configHash(copy.data);
}

/**
 * A broken edit: rejected by the agent (file source), or the rollout `invalid` (staged); then
 * undone. The applied config stays, except that under staged rollout a candidate the broken edit
 * superseded before it completed goes back to stable (docs/staged-rollout.md "A new apply
 * mid-rollout"): the stable copy is then what the node must run.
 */
async function badChore(ctx: SoakContext): Promise<string> {
  const { env } = ctx.world;
  const before = (await env.statusLease())[`${STATE}applied-hash`];
  const good = ctx.world.model;
  await writeModel(ctx, { ...good, broken: true });
  let allowed = [before];
  if (ctx.world.source === 'file') {
    await env.leaseWhen('the broken edit rejected', (a) => a[`${STATE}last-result`] === 'rejected', 120_000);
  } else {
    await eventually(
      async () => ((await rolloutState(ctx))?.['phase'] === 'invalid' ? true : undefined),
      'the rollout of the broken edit invalid',
      120_000,
      200,
    );
    const stable = await stableHash(ctx);
    allowed = [before, stable];
    if (stable !== undefined && stable !== before)
      await env.leaseWhen('back on stable', (a) => a[`${STATE}applied-hash`] === stable, RECOVERY_BOUND_MS);
  }
  const after = (await env.statusLease())[`${STATE}applied-hash`];
  if (!allowed.includes(after))
    ctx.world.violate('bad-edit', `a broken edit changed the applied config: ${String(before)} → ${String(after)}`);
  const hash = await writeModel(ctx, { ...good, labelsRevision: good.labelsRevision + 1 });
  if (hash !== undefined) await expectApplied(ctx, hash, 'the edit after a broken one');
  return `broken edit kept ${String(before)}; fixed`;
}

/** Unmounts a Bound tenant's disk for a while and mounts the same disk again: nothing may change. */
async function unmountBoundChore(ctx: SoakContext): Promise<string> {
  const tenant = tenantOf(ctx, 'fs', true);
  const disk = tenant === undefined ? undefined : ctx.world.disks.get(tenant.path);
  if (tenant === undefined || disk?.loop === undefined) return claimChore(ctx);
  tenant.paused = true;
  try {
    run('umount', [tenant.path]);
    await delay(between(ctx, 3000, 8000));
    const pv = await ctx.world.env.core.readPersistentVolume({ name: tenant.pvName });
    if (pv.metadata?.uid !== tenant.pvUid || pv.status?.phase !== 'Bound')
      ctx.world.violate(
        'bound-kept',
        `${tenant.pvName} changed while its disk was unmounted: ${pv.status?.phase ?? '?'}`,
      );
  } finally {
    run('mount', [disk.loop.path, tenant.path]);
    tenant.paused = false;
  }
  return `${tenant.path} unmounted under Bound ${tenant.pvName} and mounted again`;
}

/** Releases a claim whose disk is unmounted: the directory under it must not be emptied; then the disk comes back. */
async function unmountReleasedChore(ctx: SoakContext): Promise<string> {
  const tenant = tenantOf(ctx, 'fs', true);
  const disk = tenant === undefined ? undefined : ctx.world.disks.get(tenant.path);
  if (tenant === undefined || disk?.loop === undefined) return claimChore(ctx);
  tenant.paused = true;
  run('umount', [tenant.path]);
  const sentinel = join(tenant.path, 'not-the-disk');
  writeFileSync(sentinel, 'root filesystem');
  try {
    const record = await release(ctx, tenant);
    record.heldUntil = Number.MAX_SAFE_INTEGER;
    await delay(between(ctx, 4000, 10_000));
    if (!existsSync(sentinel))
      ctx.world.violate(
        'wiped-wrong-disk',
        `the directory under ${tenant.path} (no disk mounted) was emptied after ${tenant.pvName} was released`,
      );
    record.heldUntil = Date.now();
  } finally {
    rmSync(sentinel, { force: true });
    run('mount', [disk.loop.path, tenant.path]);
  }
  return `${tenant.pvName} released while ${tenant.path} was unmounted; mounted again`;
}

/** Swaps the links of two free block entries for a while: neither PV may be republished or doubled. */
async function swapChore(ctx: SoakContext): Promise<string> {
  const free = [...ctx.world.disks.values()].filter(
    (d) =>
      d.kind === 'block' &&
      ![...ctx.world.tenants.values()].some((t) => t.path === d.path) &&
      !ctx.world.releases.some((r) => r.tenant.path === d.path),
  );
  while (free.length < 2) free.push(addDisk(ctx, 'blk', 'block'));
  const [a, b] = free.slice(-2);
  if (a?.loop === undefined || b?.loop === undefined) throw new Error('two block disks');
  for (const d of [a, b]) await ctx.world.env.pvAt(d.path, 'published before the swap');
  // through a name discovery ignores (not blk*), then renamed over the entry at once
  const relink = (path: string, target: string): void => {
    const temporary = join(dirname(path), `.swap-${basename(path)}`);
    symlinkSync(target, temporary);
    renameSync(temporary, path);
  };
  relink(a.path, b.loop.path);
  relink(b.path, a.loop.path);
  await delay(between(ctx, 3000, 8000));
  relink(a.path, a.loop.path);
  relink(b.path, b.loop.path);
  return `${a.path} and ${b.path} swapped and swapped back`;
}

export const CHORES: Readonly<Record<ChoreKind, (ctx: SoakContext) => Promise<string>>> = {
  claim: claimChore,
  'tenant-restart': tenantRestartChore,
  release: releaseChore,
  'edit-fstype': (ctx) =>
    editChore(ctx, (m) => ({
      ...m,
      fsType: (['ext4', 'ext3', 'xfs'] as const).filter((f) => f !== m.fsType)[between(ctx, 0, 1)] ?? 'ext4',
    })),
  'edit-labels': (ctx) => editChore(ctx, (m) => ({ ...m, labelsRevision: m.labelsRevision + 1 })),
  'edit-cleaner': cleanerChore,
  'edit-class': classChore,
  'edit-bad': badChore,
  'disk-unmount-bound': unmountBoundChore,
  'disk-unmount-released': unmountReleasedChore,
  'disk-swap': swapChore,
};
