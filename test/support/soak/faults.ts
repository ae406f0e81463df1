// The soak's faults: each injects one, heals it, and checks the recovery (the agent serves a disk
// added after it; a controller's Lease has a live holder again). Returns a note for the log.
import { setTimeout as delay } from 'node:timers/promises';

import { CHART_NS } from '../chart-node.js';
import { apiStatusCode } from '../cluster.js';
import { eventually } from '../eventually.js';
import { releaseMidCleanup } from './chores.js';
import {
  addDisk,
  between,
  claim,
  expectApplied,
  expectEventually,
  killAgent,
  recover,
  writeModel,
  type SoakContext,
} from './context.js';
import type { ControllerReplicas } from './controllers.js';
import type { FaultKind } from './plan.js';

async function killMidCleanup(ctx: SoakContext): Promise<string> {
  let held = await releaseMidCleanup(ctx);
  if (held === undefined) {
    await claim(ctx, 'blk');
    held = await releaseMidCleanup(ctx);
  }
  try {
    if (!killAgent(ctx)) throw new Error('no agent container running');
    await delay(between(ctx, 200, 3000));
  } finally {
    held?.unhold();
  }
  const ms = await recover(ctx, 'agent-kill-mid-cleanup', Date.now());
  return `agent killed during the cleanup of ${held?.tenant.pvName ?? '?'}; serving again in ${String(ms)} ms`;
}

async function killMidReload(ctx: SoakContext): Promise<string> {
  const hash = await writeModel(ctx, { ...ctx.world.model, labelsRevision: ctx.world.model.labelsRevision + 1 });
  // the file source sees the edit when the kubelet projects it (≤ its 5 s sync), the API source at once
  await delay(between(ctx, 0, ctx.world.source === 'file' ? 6000 : 1500));
  if (!killAgent(ctx)) throw new Error('no agent container running');
  const ms = await recover(ctx, 'agent-kill-mid-reload', Date.now());
  if (hash !== undefined) await expectApplied(ctx, hash, 'the edit the killed agent was reloading');
  return `agent killed around a reload; serving again in ${String(ms)} ms, the edit applied`;
}

async function killMidPublish(ctx: SoakContext): Promise<string> {
  const disks = [0, 1, 2].map(() => addDisk(ctx, 'fs', 'tmpfs'));
  const paths = new Set(disks.map((d) => d.path));
  await eventually(
    async () =>
      (await ctx.world.env.core.listPersistentVolume()).items.some((pv) => paths.has(pv.spec?.local?.path ?? ''))
        ? true
        : undefined,
    'a PV of the new disks',
    120_000,
    20,
  );
  if (!killAgent(ctx)) throw new Error('no agent container running');
  const ms = await recover(ctx, 'agent-kill-mid-publish', Date.now());
  await expectEventually(ctx, 'one-pv-per-disk', 'each disk added during the kill has exactly one PV', async () => {
    const pvs = (await ctx.world.env.core.listPersistentVolume()).items;
    return disks.every((d) => pvs.filter((pv) => pv.spec?.local?.path === d.path).length === 1);
  });
  return `agent killed while publishing 3 disks; serving again in ${String(ms)} ms`;
}

async function restartComponent(ctx: SoakContext, kind: 'apiserver-restart' | 'etcd-restart'): Promise<string> {
  const component = kind === 'etcd-restart' ? 'etcd' : 'kube-apiserver';
  const timings = await ctx.world.env.plane.restart(component, between(ctx, 0, 3000));
  const ms = await recover(ctx, kind, Date.now());
  return `${component} down ${String(timings.downMs)} ms, healthy ${String(timings.healthyMs)} ms later; agent serving ${String(ms)} ms after`;
}

async function proxyFault(ctx: SoakContext, kind: 'apiserver-blackhole' | 'apiserver-slow'): Promise<string> {
  const { proxy } = ctx.world.env;
  const ms = between(ctx, 8000, 25_000);
  if (kind === 'apiserver-blackhole') proxy.setMode({ kind: 'blackhole' });
  else proxy.setMode({ kind: 'slow', delayMs: between(ctx, 100, 400) });
  try {
    // the node keeps changing meanwhile: a disk added during the fault
    addDisk(ctx, 'fs', 'tmpfs');
    await delay(ms);
  } finally {
    proxy.setMode({ kind: 'pass' });
  }
  const recovered = await recover(ctx, kind, Date.now());
  // and its watches work again (a config edit reaches it through them)
  const hash = await writeModel(ctx, { ...ctx.world.model, labelsRevision: ctx.world.model.labelsRevision + 1 });
  const applied = hash === undefined ? NaN : await expectApplied(ctx, hash, `an edit after ${kind}`);
  return `the agent's apiserver ${kind === 'apiserver-blackhole' ? 'black-holed' : 'slowed'} for ${String(ms)} ms; serving ${String(recovered)} ms after, an edit applied ${String(applied)} ms after that`;
}

async function kubeletFault(ctx: SoakContext, kind: 'kubelet-restart' | 'node-reregister'): Promise<string> {
  const { env } = ctx.world;
  const tenants = [...ctx.world.tenants.values()];
  const deleteNode = async (): Promise<void> => {
    await env.core.deleteNode({ name: env.node.name });
    await eventually(
      () =>
        env.core.readNode({ name: env.node.name }).then(
          () => undefined,
          (e: unknown) => (apiStatusCode(e) === 404 ? true : undefined),
        ),
      'the Node deleted',
      60_000,
      100,
    );
  };
  const { readyMs } = await env.node.restartKubelet(kind === 'node-reregister' ? deleteNode : undefined);
  const ms = await recover(ctx, kind, Date.now());
  for (const tenant of tenants) {
    const pv = await env.core.readPersistentVolume({ name: tenant.pvName }).catch(() => undefined);
    const pvc = await env.core
      .readNamespacedPersistentVolumeClaim({ name: `data-${tenant.set}-0`, namespace: CHART_NS })
      .catch(() => undefined);
    if (pv?.metadata?.uid !== tenant.pvUid || pvc?.status?.phase !== 'Bound')
      ctx.world.violate('bound-kept', `${tenant.pvName} or its claim did not survive ${kind}`);
  }
  return `${kind}: kubelet Ready ${String(readyMs)} ms after its start; agent serving ${String(ms)} ms after`;
}

async function controllerFault(
  ctx: SoakContext,
  kind: 'rollout-controller-kill' | 'node-cleanup-kill',
): Promise<string> {
  const replicas: ControllerReplicas = kind === 'rollout-controller-kill' ? ctx.rollout : ctx.nodeCleanup;
  const killedAt = Date.now();
  const killed = await replicas.killLeader();
  if (killed === undefined) throw new Error(`${kind}: no leader holds the Lease`);
  const ok = await expectEventually(
    ctx,
    'leader',
    `${kind}: a live leader again`,
    async () => {
      const now = await replicas.leader();
      return now !== undefined && now.identity !== killed && now.renewMs > killedAt;
    },
    60_000,
  );
  const ms = Date.now() - killedAt;
  ctx.recoveries.set(kind, [...(ctx.recoveries.get(kind) ?? []), ms]);
  if (ok && kind === 'rollout-controller-kill' && ctx.world.source === 'staged') {
    const hash = await writeModel(ctx, { ...ctx.world.model, labelsRevision: ctx.world.model.labelsRevision + 1 });
    if (hash !== undefined) await expectApplied(ctx, hash, 'a rollout by the new leader');
  }
  return `${kind}: ${killed} SIGKILLed; a leader again after ${String(ms)} ms`;
}

export const FAULTS: Readonly<Record<FaultKind, (ctx: SoakContext) => Promise<string>>> = {
  'agent-kill-mid-cleanup': killMidCleanup,
  'agent-kill-mid-reload': killMidReload,
  'agent-kill-mid-publish': killMidPublish,
  'apiserver-restart': (ctx) => restartComponent(ctx, 'apiserver-restart'),
  'etcd-restart': (ctx) => restartComponent(ctx, 'etcd-restart'),
  'apiserver-blackhole': (ctx) => proxyFault(ctx, 'apiserver-blackhole'),
  'apiserver-slow': (ctx) => proxyFault(ctx, 'apiserver-slow'),
  'kubelet-restart': (ctx) => kubeletFault(ctx, 'kubelet-restart'),
  'node-reregister': (ctx) => kubeletFault(ctx, 'node-reregister'),
  'rollout-controller-kill': (ctx) => controllerFault(ctx, 'rollout-controller-kill'),
  'node-cleanup-kill': (ctx) => controllerFault(ctx, 'node-cleanup-kill'),
};
