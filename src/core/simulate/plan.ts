// `simulate` plans: what one pass of a freshly started agent would do on this node, computed by
// the code `run` uses — the adoption scan, Reclaimer (cleanups and deletions of Released PVs,
// against a real CleanupTable) and planDiscovery (PVs to create, entries skipped) — with a
// PlanningCluster over a ReadOnlyCluster and a RecordingCleaner, so nothing is ever written and
// nothing is ever wiped. With a `from` config: the plans under both configs, the config changes
// with their effect-table rows, and what differs between the two plans. With device rules, the
// pass's disks-by-rule step runs first (device-plan.ts): the links it would make, and the PVs
// discovery would publish from them.
import { adoptNodeVolumes } from '../agent/adoption.js';
import { nodeIdentity } from '../agent/generation.js';
import { cleanupJobName } from '../cleanup/jobs.js';
import { Reclaimer } from '../cleanup/reclaim.js';
import type { JobLookup, ReclaimSummary } from '../cleanup/reclaim.js';
import { CleanupTable } from '../cleanup/table.js';
import type { CleanupEntry } from '../cleanup/table.js';
import { systemClock } from '../clock.js';
import type { Clock } from '../clock.js';
import { diffConfigs } from '../config/diff.js';
import type { ConfigChange } from '../config/diff.js';
import type { ProvisionerConfig, VolumeMode } from '../config/model.js';
import type { DeviceInventory, DiscoveryLinkWriter } from '../devices/ports.js';
import { loadConfig } from '../config/source/load.js';
import type { FileLayout, LoadedConfig } from '../config/source/port.js';
import { planDiscovery, ROUTINE_SKIPS } from '../discovery/plan.js';
import type { ClassProblem, PlannedVolume, SkippedEntry } from '../discovery/plan.js';
import { StartupError, UsageError } from '../errors.js';
import type { ConfigIssue } from '../errors.js';
import { isNotFound, KubeApiError } from '../kube/cluster.js';
import { listAllPages } from '../kube/list-pages.js';
import type { Cluster } from '../kube/cluster.js';
import type { Job, PersistentVolume, StorageClass } from '../kube/objects.js';
import { ReadOnlyCluster } from '../kube/read-only-cluster.js';
import { MemoryLogger } from '../log.js';
import { createAgentMetrics } from '../metrics/agent-metrics.js';
import type { AgentMetrics } from '../metrics/agent-metrics.js';
import { LinuxBlockDevices } from '../node/block-devices.js';
import { memoryDiscoveryLinks } from '../node/discovery-links.js';
import { LinuxVolumes } from '../node/linux-volumes.js';
import type { NodeVolumes } from '../node/volumes.js';
import { NODE_LABEL, nodeLabelValue } from '../pv/naming.js';
import type { NodeIdentity } from '../pv/naming.js';
import { errorMessage } from '../unknown-values.js';
import { loadClusterFixture } from './cluster-fixture.js';
import { InvalidInputError } from './input.js';
import { planDevices, PlannedLinks, withPublished } from './device-plan.js';
import type { DevicePlan, PlannedDevice } from './device-plan.js';
import { loadNodeFacts, nodeFactsNode } from './node-facts.js';
import { planningCluster, RecordingCleaner, RecordingEvents } from './stand-ins.js';
import type { IntendedWrite, PlanningCluster, RecordedEvent } from './stand-ins.js';

export interface PlanOptions {
  /** The config to plan with (directory, YAML file or ConfigMap manifest). */
  readonly config: string;
  /** A config the agent applies now: also plan with it and show what a reload to `config` changes. */
  readonly from?: string;
  /** Default: the only Node of a cluster fixture. */
  readonly nodeName?: string;
  readonly nodeFacts: { readonly kind: 'live' } | { readonly kind: 'fixture'; readonly path: string };
  readonly cluster:
    | { readonly kind: 'live'; readonly cluster: Cluster; readonly description: string }
    | { readonly kind: 'fixture'; readonly path: string };
  /** Namespace of cleanup Jobs (MY_NAMESPACE). */
  readonly namespace: string;
  /** JOB_CONTAINER_IMAGE. */
  readonly jobImage: string | undefined;
  /** Time source of Job start-time annotations; default the system clock. */
  readonly clock?: Clock;
}

export interface PlannedCreate {
  readonly pv: string;
  readonly className: string;
  readonly entry: string;
  /** Path in the agent's container (mountDir/entry). */
  readonly path: string;
  /** spec.local.path (hostDir/entry). */
  readonly hostPath: string;
  readonly capacityBytes: number;
  readonly capacity: string;
  readonly volumeMode: string;
  readonly detectedMode: VolumeMode;
  readonly manifest: PersistentVolume;
}

export type CleanupAction = 'clean' | 'follow-job' | 'delete' | 'retain' | 'orphan' | 'fail' | 'unsupported-policy';

export interface PlannedCleanup {
  readonly pv: string;
  readonly className: string;
  readonly hostPath: string;
  readonly action: CleanupAction;
  readonly method?: 'process' | 'job';
  readonly mode?: VolumeMode;
  /** Path of the volume in the agent's container. */
  readonly path?: string;
  /** Block volumes: the cleaner command (LOCAL_PV_BLKDEVICE=path). */
  readonly command?: readonly string[];
  /** The cleanup Job: the manifest to create, or the name of the one found running. */
  readonly job?: { readonly name: string; readonly manifest?: Job; readonly status?: string };
  /** The PV is deleted once the cleanup succeeds (this pass for a finished one). */
  readonly deleteAfter: boolean;
  readonly message: string;
}

export type OrphanReason = 'class-not-configured' | 'path-outside-hostDir' | 'volume-missing';

export interface OrphanedPV {
  readonly pv: string;
  readonly className: string;
  readonly hostPath: string;
  readonly phase: string;
  readonly reason: OrphanReason;
  readonly message: string;
}

export interface ExistingPV {
  readonly pv: string;
  readonly className: string;
  readonly hostPath: string;
  readonly phase: string;
  readonly capacity: string;
}

export interface PlanConfigSide {
  readonly path: string;
  readonly kind: FileLayout;
  readonly hash: string;
}

export interface PassPlan {
  readonly config: PlanConfigSide;
  readonly entries: number;
  readonly create: readonly PlannedCreate[];
  readonly cleanups: readonly PlannedCleanup[];
  /** Every entry not published, routine ones (name pattern, already published) included. */
  readonly skipped: readonly SkippedEntry[];
  readonly classProblems: readonly ClassProblem[];
  readonly orphaned: readonly OrphanedPV[];
  /** This node's PVs in the cluster (after adoption). */
  readonly existing: readonly ExistingPV[];
  /** PVs provisioned by this node without the node label: the agent labels them at start-up. */
  readonly adopt: readonly string[];
  /** Every API write the pass would make, in order; none was sent. */
  readonly writes: readonly IntendedWrite[];
  readonly events: readonly RecordedEvent[];
  /** Disks by rule (absent when the config has no rules): every device a rule selects, its verdict. */
  readonly devices?: DevicePlan;
}

export interface PlanDelta {
  readonly create: {
    readonly added: readonly PlannedCreate[];
    readonly removed: readonly PlannedCreate[];
    readonly changed: readonly { readonly pv: string; readonly fields: readonly FieldDifference[] }[];
  };
  readonly cleanups: readonly {
    readonly pv: string;
    readonly before: PlannedCleanup | undefined;
    readonly after: PlannedCleanup | undefined;
  }[];
  readonly orphaned: { readonly added: readonly OrphanedPV[]; readonly removed: readonly OrphanedPV[] };
  readonly skipped: { readonly added: readonly SkippedEntry[]; readonly removed: readonly SkippedEntry[] };
  readonly classProblems: { readonly added: readonly ClassProblem[]; readonly removed: readonly ClassProblem[] };
  /** Devices whose verdict differs (absent when neither config has rules). */
  readonly devices?: readonly {
    readonly device: string;
    readonly before: PlannedDevice | undefined;
    readonly after: PlannedDevice | undefined;
  }[];
}

export interface FieldDifference {
  readonly path: string;
  readonly before: unknown;
  readonly after: unknown;
}

export interface SimulationPlan {
  readonly node: { readonly name: string; readonly source: 'live' | 'fixture'; readonly file?: string };
  readonly cluster: { readonly source: 'live' | 'fixture'; readonly description: string };
  readonly namespace: string;
  readonly jobImage?: string;
  readonly plan: PassPlan;
  readonly reload?: {
    readonly from: PlanConfigSide;
    readonly changes: readonly ConfigChange[];
    readonly before: PassPlan;
    readonly delta: PlanDelta;
  };
  /** Config warnings and fixture warnings. */
  readonly warnings: readonly ConfigIssue[];
}

/** The world one pass sees: this node's PVs (as the reflector lists them) and the StorageClasses. */
interface ClusterView {
  readonly persistentVolumes: readonly PersistentVolume[];
  readonly storageClasses: ReadonlyMap<string, StorageClass>;
}

function withUid<T extends { metadata: { uid?: string; labels?: Record<string, string> } }>(
  object: T,
  uids: ReadonlyMap<string, string>,
): T {
  const uid = object.metadata.uid !== undefined ? uids.get(object.metadata.uid) : undefined;
  const pvuuid = object.metadata.labels?.['pvuuid'];
  const label = pvuuid !== undefined ? uids.get(pvuuid) : undefined;
  if (uid === undefined && label === undefined) return object;
  return {
    ...object,
    metadata: {
      ...object.metadata,
      ...(uid !== undefined ? { uid } : {}),
      ...(label !== undefined ? { labels: { ...object.metadata.labels, pvuuid: label } } : {}),
    },
  };
}

async function readView(
  cluster: Cluster,
  node: NodeIdentity,
  adopted: readonly string[],
  uids: ReadonlyMap<string, string>,
): Promise<ClusterView> {
  const labelled = (
    await listAllPages((o) => cluster.persistentVolumes.list(o), {
      labelSelector: `${NODE_LABEL}=${nodeLabelValue(node.name)}`,
      limit: 500,
    })
  ).items;
  const byName = new Map(labelled.map((pv) => [pv.metadata.name, pv]));
  for (const name of adopted) {
    if (byName.has(name)) continue;
    try {
      byName.set(name, await cluster.persistentVolumes.get(name));
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  }
  const classes = (await listAllPages((o) => cluster.storageClasses.list(o), { limit: 500 })).items;
  return {
    persistentVolumes: [...byName.values()]
      .map((pv) => withUid(pv, uids))
      .sort((a, b) => (a.metadata.name < b.metadata.name ? -1 : 1)),
    storageClasses: new Map(classes.map((sc) => [sc.metadata.name, sc])),
  };
}

/** Where a PV's volume is inside the agent's container, as Reclaimer computes it. */
function containerPath(pv: PersistentVolume, config: ProvisionerConfig): string | undefined {
  const classConfig = config.storageClassMap[pv.spec.storageClassName ?? ''];
  const path = pv.spec.local?.path;
  if (!classConfig || path === undefined) return undefined;
  const prefix = classConfig.hostDir === '/' ? '/' : `${classConfig.hostDir}/`;
  if (!path.startsWith(prefix)) return undefined;
  const rest = path.slice(prefix.length);
  if (rest === '' || rest.split('/').includes('..')) return undefined;
  return classConfig.mountDir === '/' ? `/${rest}` : `${classConfig.mountDir}/${rest}`;
}

function phaseOf(pv: PersistentVolume): string {
  return pv.metadata.deletionTimestamp !== undefined ? 'Terminating' : (pv.status?.phase ?? 'Pending');
}

async function findOrphans(
  pvs: readonly PersistentVolume[],
  config: ProvisionerConfig,
  volumes: NodeVolumes,
): Promise<OrphanedPV[]> {
  const out: OrphanedPV[] = [];
  for (const pv of pvs) {
    if (pv.metadata.deletionTimestamp !== undefined) continue;
    const className = pv.spec.storageClassName ?? '';
    const hostPath = pv.spec.local?.path ?? pv.spec.hostPath?.path ?? '';
    const base = { pv: pv.metadata.name, className, hostPath, phase: phaseOf(pv) };
    const classConfig = config.storageClassMap[className];
    if (!classConfig) {
      out.push({
        ...base,
        reason: 'class-not-configured',
        message: `storage class ${className === '' ? '(none)' : className} is not in storageClassMap: the PV is not cleaned or deleted after release`,
      });
      continue;
    }
    const path = containerPath(pv, config);
    if (path === undefined) {
      out.push({
        ...base,
        reason: 'path-outside-hostDir',
        message: `path ${hostPath} is not under hostDir ${classConfig.hostDir}: the PV is not cleaned or deleted after release`,
      });
      continue;
    }
    const info = await volumes.entryInfo(path).catch(() => ({ kind: 'missing' as const }));
    if (info.kind === 'missing') {
      out.push({
        ...base,
        reason: 'volume-missing',
        message: `its volume ${path} does not exist on the node: the PV is kept after release, never cleaned`,
      });
    }
  }
  return out;
}

async function idle(table: CleanupTable): Promise<void> {
  for (let i = 0; i < 1000 && (table.count('queued') > 0 || table.count('running') > 0); i++) {
    const entries = table.list();
    // Job cleanups stay "running" until the Job finishes: only in-process ones are waited for.
    if (!entries.some((e) => e.method === 'process' && (e.state === 'queued' || e.state === 'running'))) return;
    await new Promise((resolve) => setImmediate(resolve));
  }
}

function classify(
  pv: PersistentVolume,
  entry: CleanupEntry | undefined,
  first: ReclaimSummary,
  second: ReclaimSummary,
  writes: readonly IntendedWrite[],
  jobImage: string | undefined,
): PlannedCleanup | undefined {
  const name = pv.metadata.name;
  const base = {
    pv: name,
    className: pv.spec.storageClassName ?? '',
    hostPath: pv.spec.local?.path ?? '',
  };
  const policy = pv.spec.persistentVolumeReclaimPolicy ?? 'Delete';
  if (policy === 'Retain')
    return { ...base, action: 'retain', deleteAfter: false, message: 'reclaim policy Retain: kept as it is' };
  if (policy !== 'Delete')
    return {
      ...base,
      action: 'unsupported-policy',
      deleteAfter: false,
      message: `reclaim policy ${policy} is not supported: kept as it is`,
    };
  const orphan = first.orphaned.find((o) => o.pv === name);
  if (orphan) return { ...base, action: 'orphan', deleteAfter: false, message: orphan.reason };
  if (!entry) return undefined;
  const deleted = second.deleted.includes(name);
  const common = {
    ...base,
    method: entry.method,
    mode: entry.mode,
    path: entry.path,
    ...(entry.mode === 'Block' ? { command: entry.command } : {}),
  };
  if (entry.state === 'failed' || (entry.state === 'succeeded' && !deleted && entry.method === 'process')) {
    return {
      ...common,
      action: 'fail',
      deleteAfter: false,
      message: entry.lastError ?? 'the cleanup would not complete',
    };
  }
  const jobName = cleanupJobName(name);
  const created = writes.find((w) => w.verb === 'create' && w.resource === 'jobs' && w.name === jobName);
  if (entry.method === 'job' && created) {
    return {
      ...common,
      action: 'clean',
      job: { name: jobName, manifest: created.object as Job },
      deleteAfter: true,
      message: `Job ${jobName} (image ${jobImage ?? '?'}) runs ${entry.command.join(' ')} on ${entry.path}; the PV is deleted when it succeeds`,
    };
  }
  if (entry.method === 'job') {
    return {
      ...common,
      action: deleted ? 'delete' : 'follow-job',
      job: { name: jobName, status: deleted ? 'succeeded' : 'running' },
      deleteAfter: true,
      message: deleted
        ? `Job ${jobName} already succeeded: the PV is deleted now`
        : `Job ${jobName} is already cleaning it: followed to the end, the PV is deleted when it succeeds`,
    };
  }
  return {
    ...common,
    action: 'clean',
    deleteAfter: deleted,
    message:
      entry.mode === 'Block'
        ? `in-process: LOCAL_PV_BLKDEVICE=${entry.path} ${entry.command.join(' ')}; then the PV is deleted`
        : `in-process: delete everything inside ${entry.path} (nested mounts kept); then the PV is deleted`,
  };
}

interface PlanContext {
  readonly cluster: ReadOnlyCluster;
  /** Fixture uids to show instead of the in-memory server's (manifests then match the dump). */
  readonly uids: ReadonlyMap<string, string>;
  readonly volumes: NodeVolumes;
  readonly node: NodeIdentity;
  readonly namespace: string;
  readonly jobImage: string | undefined;
  readonly clock: Clock;
  /** Disks by rule: the node's block devices, and where links go (never onto a live node). */
  readonly devices?: { readonly inventory: DeviceInventory; readonly links: DiscoveryLinkWriter };
}

/** The disks-by-rule step of a planned pass (none without the node's devices or without rules). */
function devicesStep(
  config: ProvisionerConfig,
  ctx: PlanContext,
  sinks: { readonly logger: MemoryLogger; readonly events: RecordingEvents },
  persistentVolumes: readonly PersistentVolume[],
): Promise<DevicePlan | undefined> {
  if (ctx.devices === undefined) return Promise.resolve(undefined);
  const deps = { ...ctx.devices, ...sinks, volumes: ctx.volumes, clock: ctx.clock };
  return planDevices(config, ctx.node, deps, persistentVolumes);
}

/** The agent's stand-ins of one planned pass: its writes recorded, its cleanups never run. */
interface PassWorld {
  readonly cluster: PlanningCluster;
  readonly logger: MemoryLogger;
  readonly metrics: AgentMetrics;
  readonly events: RecordingEvents;
  readonly table: CleanupTable;
}

function passWorld(ctx: PlanContext): PassWorld {
  const cluster = planningCluster(ctx.cluster);
  const logger = new MemoryLogger();
  const metrics = createAgentMetrics();
  const events = new RecordingEvents();
  const cleaner = new RecordingCleaner(ctx.clock);
  const table = new CleanupTable({ cleaner, clock: ctx.clock, logger, concurrency: 1_000_000 });
  return { cluster, logger, metrics, events, table };
}

/** The cleanup Jobs as the Reclaimer looks them up (a 403 of the cache read: none seen yet). */
function jobLookup(cluster: Cluster, ctx: PlanContext): JobLookup {
  return {
    get: async (name) => {
      try {
        return withUid(await cluster.jobs.get(name, { namespace: ctx.namespace }), ctx.uids);
      } catch (err) {
        if (isNotFound(err) || (err instanceof KubeApiError && err.status === 403)) return undefined;
        throw err;
      }
    },
    read: async (name) => {
      try {
        return withUid(await cluster.jobs.get(name, { namespace: ctx.namespace }), ctx.uids);
      } catch (err) {
        if (isNotFound(err)) return undefined;
        throw err;
      }
    },
  };
}

/** The reclaim half of a pass, and what the pass after a cleanup does; the table as the first left it. */
interface ReclaimPasses {
  readonly first: ReclaimSummary;
  readonly second: ReclaimSummary;
  readonly entries: ReadonlyMap<string, CleanupEntry>;
}

async function reclaimPasses(
  reclaimer: Reclaimer,
  w: PassWorld,
  persistentVolumes: readonly PersistentVolume[],
): Promise<ReclaimPasses> {
  const { cluster, table } = w;
  // The reclaim half of the pass (upstream's order: reclaim, then discover).
  const first = await reclaimer.pass(persistentVolumes);
  const createdJobs = new Set(
    cluster.writes.filter((wr) => wr.verb === 'create' && wr.resource === 'jobs').map((wr) => wr.name),
  );
  await idle(table);
  // The table as the first pass left it (the second one forgets the entries of deleted PVs).
  const entries = new Map(table.list().map((e) => [e.pvName, e]));
  // What the pass after a cleanup does: delete the PV of a finished cleanup, follow a Job found running.
  const second = await reclaimer.pass(
    persistentVolumes.filter((pv) => {
      const e = table.get(pv.metadata.name);
      return (
        e?.state === 'succeeded' ||
        (e?.method === 'job' && e.state === 'running' && !createdJobs.has(cleanupJobName(pv.metadata.name)))
      );
    }),
  );
  return { first, second, entries };
}

/** What becomes of each Released PV (not being deleted), in the order of the view. */
function plannedCleanups(
  persistentVolumes: readonly PersistentVolume[],
  reclaim: ReclaimPasses,
  writes: readonly IntendedWrite[],
  jobImage: string | undefined,
): PlannedCleanup[] {
  const cleanups: PlannedCleanup[] = [];
  for (const pv of persistentVolumes) {
    if (pv.status?.phase !== 'Released' || pv.metadata.deletionTimestamp !== undefined) continue;
    const entry = reclaim.entries.get(pv.metadata.name);
    const c = classify(pv, entry, reclaim.first, reclaim.second, writes, jobImage);
    if (c) cleanups.push(c);
  }
  return cleanups;
}

function plannedCreate(c: PlannedVolume): PlannedCreate {
  return {
    pv: c.persistentVolume.metadata.name,
    className: c.className,
    entry: c.entry,
    path: c.path,
    hostPath: c.persistentVolume.spec.local?.path ?? '',
    capacityBytes: c.capacityBytes,
    capacity: c.persistentVolume.spec.capacity?.['storage'] ?? '',
    volumeMode: c.persistentVolume.spec.volumeMode ?? 'Filesystem',
    detectedMode: c.detectedMode,
    manifest: c.persistentVolume,
  };
}

function existingPv(pv: PersistentVolume): ExistingPV {
  return {
    pv: pv.metadata.name,
    className: pv.spec.storageClassName ?? '',
    hostPath: pv.spec.local?.path ?? pv.spec.hostPath?.path ?? '',
    phase: phaseOf(pv),
    capacity: pv.spec.capacity?.['storage'] ?? '',
  };
}

/** One pass of a freshly started agent under `loaded`, run by the agent's own code against stand-ins. */
export async function planPass(loaded: LoadedConfig, ctx: PlanContext): Promise<PassPlan> {
  const { config } = loaded;
  const w = passWorld(ctx);
  const { cluster, logger, metrics, events, table } = w;
  // Start-up: PVs of this node without the node label are labelled (adoption).
  const adoption = await adoptNodeVolumes({ cluster, logger, metrics }, ctx.node);
  const view = await readView(cluster, ctx.node, adoption.adopted, ctx.uids);
  const reclaimer = new Reclaimer(
    { config, node: ctx.node, namespace: ctx.namespace, jobImage: ctx.jobImage },
    { cluster, volumes: ctx.volumes, clock: ctx.clock, logger, metrics, events, table, jobs: jobLookup(cluster, ctx) },
  );
  try {
    const reclaim = await reclaimPasses(reclaimer, w, view.persistentVolumes);
    // Then disks by rule, as the agent's pass does: the links made now are discovered by this pass.
    const devices = await devicesStep(config, ctx, { logger, events }, view.persistentVolumes);
    const discovery = await planDiscovery({
      config,
      node: ctx.node,
      volumes: ctx.volumes,
      persistentVolumes: view.persistentVolumes,
      storageClass: (name) => view.storageClasses.get(name),
      cleanupInProgress: (name) => table.inProgress(name),
    });
    return {
      config: { path: loaded.source.path, kind: loaded.source.kind, hash: loaded.hash },
      entries: discovery.entries,
      create: discovery.create.map(plannedCreate),
      cleanups: plannedCleanups(view.persistentVolumes, reclaim, cluster.writes, ctx.jobImage),
      skipped: discovery.skipped,
      classProblems: discovery.classProblems,
      orphaned: await findOrphans(view.persistentVolumes, config, ctx.volumes),
      existing: view.persistentVolumes.map(existingPv),
      adopt: adoption.adopted,
      writes: cluster.writes,
      events: events.events,
      ...(devices !== undefined ? { devices: withPublished(devices, discovery.create) } : {}),
    };
  } finally {
    await table.stop();
  }
}

/** Leaves that differ between two JSON values, as dotted paths. */
export function jsonDifferences(before: unknown, after: unknown, path = ''): FieldDifference[] {
  const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
  if (isObj(before) && isObj(after)) {
    const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])].sort();
    return keys.flatMap((k) => jsonDifferences(before[k], after[k], path === '' ? k : `${path}.${k}`));
  }
  return JSON.stringify(before) === JSON.stringify(after) ? [] : [{ path, before, after }];
}

function byKey<T>(items: readonly T[], key: (t: T) => string): Map<string, T> {
  return new Map(items.map((i) => [key(i), i]));
}

function addedRemoved<T>(before: readonly T[], after: readonly T[], key: (t: T) => string) {
  const b = byKey(before, key);
  const a = byKey(after, key);
  return { added: after.filter((x) => !b.has(key(x))), removed: before.filter((x) => !a.has(key(x))) };
}

export function planDelta(before: PassPlan, after: PassPlan): PlanDelta {
  const createBefore = byKey(before.create, (c) => c.pv);
  const changed = after.create.flatMap((c) => {
    const old = createBefore.get(c.pv);
    if (!old) return [];
    const fields = jsonDifferences(old.manifest, c.manifest);
    return fields.length > 0 ? [{ pv: c.pv, fields }] : [];
  });
  const cleanupBefore = byKey(before.cleanups, (c) => c.pv);
  const cleanupAfter = byKey(after.cleanups, (c) => c.pv);
  const cleanupNames = [...new Set([...cleanupBefore.keys(), ...cleanupAfter.keys()])].sort();
  const summary = (c: PlannedCleanup | undefined): string =>
    JSON.stringify(c ? [c.action, c.method, c.command, c.deleteAfter] : null);
  const cleanups = cleanupNames.flatMap((pv) => {
    const b = cleanupBefore.get(pv);
    const a = cleanupAfter.get(pv);
    return summary(b) === summary(a) ? [] : [{ pv, before: b, after: a }];
  });
  const visibleSkips = (p: PassPlan): SkippedEntry[] => p.skipped.filter((s) => !ROUTINE_SKIPS.has(s.reason));
  return {
    create: { ...addedRemoved(before.create, after.create, (c) => c.pv), changed },
    cleanups,
    orphaned: addedRemoved(before.orphaned, after.orphaned, (o) => `${o.pv}\0${o.reason}`),
    skipped: addedRemoved(visibleSkips(before), visibleSkips(after), (s) => `${s.className}\0${s.entry}\0${s.reason}`),
    classProblems: addedRemoved(before.classProblems, after.classProblems, (p) => `${p.className}\0${p.message}`),
    ...(before.devices !== undefined || after.devices !== undefined
      ? { devices: deviceDelta(before.devices, after.devices) }
      : {}),
  };
}

/** Devices whose class or verdict state differs between two plans. */
function deviceDelta(before: DevicePlan | undefined, after: DevicePlan | undefined): NonNullable<PlanDelta['devices']> {
  const b = byKey(before?.devices ?? [], (d) => d.device);
  const a = byKey(after?.devices ?? [], (d) => d.device);
  const names = [...new Set([...b.keys(), ...a.keys()])].sort();
  const label = (d: PlannedDevice | undefined): string => (d ? `${d.className}\0${d.state}` : '');
  return names.flatMap((device) =>
    label(b.get(device)) === label(a.get(device)) ? [] : [{ device, before: b.get(device), after: a.get(device) }],
  );
}

/** The node a plan runs on: a fixture's (in memory) or this machine's (read only), a fresh one per plan. */
interface PlanNodes {
  readonly source: SimulationPlan['node']['source'];
  readonly file?: string;
  next(): Pick<PlanContext, 'volumes' | 'devices'>;
}

async function planNodes(facts: PlanOptions['nodeFacts']): Promise<PlanNodes> {
  if (facts.kind === 'fixture') {
    // Read (and checked) once; each plan builds its own in-memory node from it.
    const loaded = await loadNodeFacts(facts.path);
    let first: ReturnType<typeof nodeFactsNode> | undefined = loaded;
    return {
      source: 'fixture',
      file: facts.path,
      next: () => {
        const node = first ?? nodeFactsNode(loaded.facts);
        first = undefined;
        return {
          volumes: node.volumes,
          devices: { inventory: node.devices.inventory, links: memoryDiscoveryLinks(node.volumes) },
        };
      },
    };
  }
  const volumes = new LinuxVolumes();
  const inventory = new LinuxBlockDevices();
  return {
    source: 'live',
    next: () => {
      const overlay = new PlannedLinks(volumes);
      return { volumes: overlay, devices: { inventory, links: overlay } };
    },
  };
}

/** The cluster a plan reads: a fixture's, in memory, or the live one. */
interface PlanCluster {
  readonly base: Cluster;
  readonly info: SimulationPlan['cluster'];
  /** A fixture's Nodes (none for a live cluster). */
  readonly fixtureNodes?: readonly string[];
  /** A fixture's uids to show instead of the in-memory server's. */
  readonly uids: ReadonlyMap<string, string>;
  readonly warnings: readonly ConfigIssue[];
}

async function planCluster(spec: PlanOptions['cluster'], clock: Clock): Promise<PlanCluster> {
  if (spec.kind === 'live')
    return {
      base: spec.cluster,
      info: { source: 'live', description: spec.description },
      uids: new Map(),
      warnings: [],
    };
  const fixture = await loadClusterFixture(spec.path, { clock });
  return {
    base: fixture.cluster,
    info: { source: 'fixture', description: spec.path },
    fixtureNodes: fixture.nodes,
    uids: fixture.uids,
    warnings: fixture.warnings,
  };
}

/** The node to plan for: the one named, else a cluster fixture's only Node. */
function planNodeName(nodeName: string | undefined, fixtureNodes: readonly string[] | undefined): string {
  if (nodeName !== undefined && nodeName !== '') return nodeName;
  if (fixtureNodes?.length === 1) return fixtureNodes[0] ?? '';
  throw new UsageError(
    fixtureNodes
      ? `--node is required: the cluster fixture has ${fixtureNodes.length} Nodes (${fixtureNodes.join(', ') || 'none'})`
      : '--node is required (or MY_NODE_NAME): which node to plan for',
  );
}

/** The Node planned for; a fixture without it is an invalid input, any other failure a start-up error. */
async function planNode(
  cluster: ReadOnlyCluster,
  name: string,
  source: PlanCluster,
  spec: PlanOptions['cluster'],
): Promise<NodeIdentity> {
  try {
    return nodeIdentity(withUid(await cluster.nodes.get(name), source.uids));
  } catch (err) {
    if (spec.kind === 'fixture' && isNotFound(err)) {
      throw new InvalidInputError('cluster fixture', spec.path, [
        {
          severity: 'error',
          path: '',
          message: `no Node named ${name} (Nodes: ${source.fixtureNodes?.join(', ') || 'none'})`,
          position: { file: spec.path },
        },
      ]);
    }
    throw new StartupError(`cannot get Node ${name}: ${errorMessage(err)}`);
  }
}

/** The pass under `loaded`, and under `from` when given; an API error means the cluster cannot be read. */
async function planPasses(
  loaded: LoadedConfig,
  from: LoadedConfig | undefined,
  ctx: () => PlanContext,
): Promise<{ readonly plan: PassPlan; readonly before: PassPlan | undefined }> {
  try {
    const plan = await planPass(loaded, ctx());
    const before = from ? await planPass(from, ctx()) : undefined;
    return { plan, before };
  } catch (err) {
    if (err instanceof KubeApiError) throw new StartupError(`cannot read the cluster: ${err.message}`);
    throw err;
  }
}

/** What a reload from `from` to `loaded` changes: its config changes and the two plans' differences. */
function reloadPlan(
  loaded: LoadedConfig,
  from: LoadedConfig,
  before: PassPlan,
  plan: PassPlan,
): NonNullable<SimulationPlan['reload']> {
  return {
    from: { path: from.source.path, kind: from.source.kind, hash: from.hash },
    changes: from.hash === loaded.hash ? [] : diffConfigs(from.config, loaded.config),
    before,
    delta: planDelta(before, plan),
  };
}

/** The plan of one pass (and of a reload when `from` is given), read-only whatever the inputs. */
export async function simulatePlan(options: PlanOptions): Promise<SimulationPlan> {
  const clock = options.clock ?? systemClock;
  const [loaded, from] = await Promise.all([
    loadConfig(options.config),
    options.from !== undefined ? loadConfig(options.from) : Promise.resolve(undefined),
  ]);
  const warnings: ConfigIssue[] = [...loaded.warnings, ...(from?.warnings ?? [])];
  const nodes = await planNodes(options.nodeFacts);
  const source = await planCluster(options.cluster, clock);
  warnings.push(...source.warnings);
  // Every read of the plan goes through this wrapper; it refuses every write.
  const cluster = new ReadOnlyCluster(source.base);
  const name = planNodeName(options.nodeName, source.fixtureNodes);
  const node = await planNode(cluster, name, source, options.cluster);
  // Each plan gets a node of its own: the links one config's rules make are not the other's.
  const ctx = (): PlanContext => ({
    cluster,
    uids: source.uids,
    ...nodes.next(),
    node,
    namespace: options.namespace,
    jobImage: options.jobImage,
    clock,
  });
  const { plan, before } = await planPasses(loaded, from, ctx);
  return {
    node: { name, source: nodes.source, ...(nodes.file !== undefined ? { file: nodes.file } : {}) },
    cluster: source.info,
    namespace: options.namespace,
    ...(options.jobImage !== undefined ? { jobImage: options.jobImage } : {}),
    plan,
    ...(from && before ? { reload: reloadPlan(loaded, from, before, plan) } : {}),
    warnings,
  };
}
