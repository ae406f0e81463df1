// A generation: one running sync loop for one config — its informers (reflectors), the discovery
// loop and its change detector. Everything it starts is stopped by its AbortSignal; a reload
// (run issue) stops one generation and starts the next.
import { createHash } from 'node:crypto';
import { isAborted, TIMER_NOT_NEEDED } from '../clock.js';
import type { ProvisionerConfig } from '../config/model.js';
import { durationToMilliseconds } from '../config/duration.js';
import { disksElsewhere, reportIdentityConflict } from '../discovery/conflicts.js';
import { NameVerdicts, planDiscovery, ROUTINE_SKIPS } from '../discovery/plan.js';
import type { ClassProblem, DiscoveryPlan, SkippedEntry, SkipReason } from '../discovery/plan.js';
import { publishVolumes } from '../discovery/publish.js';
import type { Cluster } from '../kube/cluster.js';
import type { Job, Node, ObjectList, PersistentVolume, StorageClass } from '../kube/objects.js';
import { listAllPages } from '../kube/list-pages.js';
import { Reflector } from '../kube/reflector.js';
import { projectPersistentVolume, StringPool } from '../pv/cached.js';
import type { CachedPersistentVolume } from '../pv/cached.js';
import { NODE_LABEL, nodeLabelValue } from '../pv/naming.js';
import type { NodeIdentity } from '../pv/naming.js';
import { removeStartupTaint } from './taint.js';
import { adoptNodeVolume } from './adoption.js';
import { Reclaimer } from '../cleanup/reclaim.js';
import { VolumeHealth } from '../health/volume-health.js';
import type { HealthSummary } from '../health/volume-health.js';
import type { ReclaimDeps, ReclaimSummary } from '../cleanup/reclaim.js';
import { HOSTNAME_LABEL } from '../pv/naming.js';
import { jobLookup, type JobsForbidden } from '../cleanup/job-lookup.js';
import {
  countVerdicts,
  DeviceRules,
  ruleClasses,
  type DeviceRulesResult,
  type DeviceRulesState,
} from '../disk-rules/service.js';
import type { DeviceCarver, DeviceInventory, DiscoveryLinkWriter } from '../devices/ports.js';
import { nodeProcessHost } from '../process-host.js';
import type { ProcessHost } from '../process-host.js';
import { errorMessage } from '../unknown-values.js';

/** What the reclaimer needs (its cleanup table is the process-level one: it outlives this generation), and more. */
export interface GenerationDeps extends Omit<ReclaimDeps, 'jobs'> {
  readonly random?: () => number;
  /** Told about every completed pass (the agent's event stream). */
  readonly onPass?: (generation: number, summary: PassSummary) => void;
  /**
   * Measures each pass's CPU time; default the real process (the agent passes its own). */
  readonly host?: Pick<ProcessHost, 'cpuUsage'>;
  /** Since when each PV's disk has been missing (volume health), kept across generations by the agent. */
  readonly missingSince?: Map<string, number>;
  /** Since when reading cleanup Jobs has been forbidden (403), kept across generations by the agent. */
  readonly jobsForbidden?: JobsForbidden;
  /**
   * Whether new PVs are held back now: a config change is being decided (the agent's watcher
   * noticed one), and a PV published meanwhile would keep the old settings for its whole life.
   */
  readonly publishHeld?: () => boolean;
  /** Disks by rule: the node's block devices, the link writer, and the state kept across generations. */
  readonly deviceRules?: {
    readonly inventory: DeviceInventory & { changeStamp?(): Promise<string> };
    readonly links: DiscoveryLinkWriter;
    readonly carver?: DeviceCarver;
    readonly state: DeviceRulesState;
  };
}

/** Pages of the informers' lists (the reflector's default, named so a head start asks the same). */
const LIST_PAGE_SIZE = 500;

const persistentVolumeSelector = (nodeName: string): string => `${NODE_LABEL}=${nodeLabelValue(nodeName)}`;

/** A generation's PV and StorageClass lists, requested ahead of it (each whole, as one page). */
export interface GenerationFirstLists {
  readonly nodeName: string;
  readonly persistentVolumes: Promise<ObjectList<PersistentVolume>>;
  readonly storageClasses: Promise<ObjectList<StorageClass>>;
}

/**
 * A head start for a generation's lists. At start-up they leave with the request for the Node
 * instead of after it (and after the listen, the admin socket and the findmnt spawn), which put two
 * round trips before the first pass; on a reload, while the config change is debounced. The
 * generation's reflectors take them as their first (and only) page, and watch on from their
 * resourceVersion; a failed one is listed again as usual.
 */
export function requestFirstLists(
  cluster: Pick<Cluster, 'persistentVolumes' | 'storageClasses'>,
  nodeName: string,
): GenerationFirstLists {
  const persistentVolumes = listAllPages((o) => cluster.persistentVolumes.list(o), {
    labelSelector: persistentVolumeSelector(nodeName),
    limit: LIST_PAGE_SIZE,
  });
  const storageClasses = listAllPages((o) => cluster.storageClasses.list(o), { limit: LIST_PAGE_SIZE });
  // Not awaited when start-up fails first, or a reload does not start a generation.
  persistentVolumes.catch(() => undefined);
  storageClasses.catch(() => undefined);
  return { nodeName, persistentVolumes, storageClasses };
}

/** Discovery directories holding more entries start the change watch beside the first pass. */
export const EARLY_WATCH_ENTRIES = 64;

/** How often the block devices are checked for a change (a cheap sysfs read) while rules exist. */
export const DEVICE_POLL_MS = 5_000;

export interface GenerationSettings {
  readonly discoveryPeriodMs: number;
  /**
   * 0 disables change detection (only the discovery period's passes); otherwise changes are
   * watched as events, and polled at this interval when the node cannot report them.
   */
  readonly changePollMs: number;
  readonly createConcurrency: number;
  /**
   * How long a directory that is not (yet) a mount point is pending before it is reported (log,
   * Node Event): an operator's mkdir is followed by its mount a moment later. 0 reports at once.
   */
  readonly mountGraceMs: number;
  /**
   * The least time from one pass's start to the next one's when changes keep arriving (a burst of
   * mounts): the changes meanwhile wait and are taken together. A change after a quiet spell is
   * taken at once. 0: a pass for each change.
   */
  readonly minPassIntervalMs: number;
  /** Namespace of cleanup Jobs (MY_NAMESPACE). */
  readonly namespace: string;
  /** JOB_CONTAINER_IMAGE. */
  readonly jobImage: string | undefined;
}

/** One discovery pass: its plan's counts and problems (routine skips left out), what it published, what it reclaimed. */
export interface PassSummary extends Pick<DiscoveryPlan, 'entries' | 'skipped' | 'classProblems'> {
  readonly at: number;
  readonly durationMs: number;
  readonly created: readonly string[];
  readonly failed: readonly { readonly name: string; readonly path: string; readonly error: string }[];
  readonly reclaim: ReclaimSummary;
  /** The volume health check of this node's Available and Bound PVs. */
  readonly health: HealthSummary;
  /** Disks by rule: each selected device's verdict, and the links made; absent without rules. */
  readonly devices?: DeviceRulesResult;
}

export interface GenerationStatus {
  readonly number: number;
  readonly configHash: string;
  readonly synced: boolean;
  readonly ready: boolean;
  readonly passes: number;
  readonly lastPass?: PassSummary;
  readonly persistentVolumes: number;
  readonly taintRemoved: boolean;
}

export function nodeIdentity(node: Node): NodeIdentity {
  const labels = node.metadata.labels ?? {};
  return {
    name: node.metadata.name,
    uid: node.metadata.uid ?? '',
    hostname: labels['kubernetes.io/hostname'] ?? node.metadata.name,
    labels,
  };
}

/** The default of --mount-grace-period: upstream polls every 10 s, so an operator's mount lands within one of its periods. */
export const DEFAULT_MOUNT_GRACE_MS = 10_000;

/**
 * The default of --min-pass-interval. A burst of 200 mounts (docs/benchmarks.md), the agent
 * --jitless: 0.83 s of CPU at most a pass every 250 ms, 0.62 s every 500 ms, 0.51 s every 1 s
 * (a pass per mount, before --jitless: 2.0 s; upstream's 10 s poll: 0.41 s); the burst's last PV
 * came as soon either way. A lone disk is still published at once.
 */
export const DEFAULT_MIN_PASS_INTERVAL_MS = 500;

/** Skips that are often a moment in an operator's work (mkdir, then mount): reported after a grace period. */
const GRACE_SKIPS: ReadonlySet<SkipReason> = new Set(['not-a-mount-point']);

/** Disks by rule for a generation: absent without rules or without the node's devices; its verdicts feed the gauge. */
function deviceRulesStep(config: ProvisionerConfig, node: NodeIdentity, deps: GenerationDeps): DeviceRules | undefined {
  const classes = ruleClasses(config);
  if (classes.length === 0) return undefined;
  if (deps.deviceRules === undefined) {
    // --sandbox: directories stand for disks, so rules have nothing to select; say so once a config
    deps.logger.log(
      'warn',
      'device rules are not run: this agent reads no block devices (--sandbox); `provisioner simulate` shows what they would do on a node',
      {
        storageClasses: classes.map((c) => c.name).join(','),
      },
    );
    return undefined;
  }
  return new DeviceRules(config, node, {
    ...deps,
    ...deps.deviceRules,
    volumes: deps.volumes,
    onVerdicts: (verdicts) => {
      deps.metrics.ruleDevices.reset();
      for (const [key, n] of countVerdicts(verdicts)) {
        const [storageclass = '', state = ''] = key.split('\0');
        deps.metrics.ruleDevices.set({ storageclass, state }, n);
      }
    },
  });
}

export class Generation {
  /** This node's PVs, projected (pv/cached.ts): read only, never written back. */
  readonly persistentVolumes: Reflector<PersistentVolume, CachedPersistentVolume>;
  readonly storageClasses: Reflector<StorageClass>;
  /** Cleanup Jobs of this node, watched only while job cleaning is on. */
  readonly jobs: Reflector<Job> | undefined;
  private readonly reclaimer: Reclaimer;
  private readonly health: VolumeHealth;
  private readonly abort = new AbortController();
  /** Entry names already judged by an earlier pass of this generation (same config, same node). */
  private readonly nameVerdicts = new NameVerdicts();
  private readonly tasks: Promise<void>[] = [];
  private wake: (() => void) | undefined;
  private pendingTrigger = false;
  private passes = 0;
  private lastPass: PassSummary | undefined;
  private synced = false;
  private ready = false;
  private taintRemoved = false;
  private readyResolve: (() => void) | undefined;
  /** Resolves after the caches synced and the first discovery pass ran. */
  readonly whenReady: Promise<void>;
  private syncedResolve: (() => void) | undefined;
  /** Resolves when every informer of this generation has listed (the reload commit point). */
  readonly whenSynced: Promise<void>;
  private readonly reported = new Set<string>();
  /** Skips within their grace period (key → first seen), not reported yet. */
  private readonly pendingSince = new Map<string, number>();
  private readonly deviceRules: DeviceRules | undefined;
  /** When the last pass started, failed or not (the minimum interval counts from it). */
  private lastPassStartedAt = -Infinity;
  /** A device settling is due then: a pass runs. */
  private deviceWakeAt: number | undefined;

  constructor(
    readonly number: number,
    readonly config: ProvisionerConfig,
    readonly configHash: string,
    readonly node: NodeIdentity,
    private readonly deps: GenerationDeps,
    private readonly settings: GenerationSettings,
    /** The informers' first lists, requested before (see requestFirstLists); not kept after. */
    headStart?: GenerationFirstLists,
  ) {
    const resync = durationToMilliseconds(config.minResyncPeriod);
    // A head start asked for another node's PVs is not this generation's.
    const firstLists = headStart?.nodeName === node.name ? headStart : undefined;
    const strings = new StringPool();
    this.persistentVolumes = new Reflector<PersistentVolume, CachedPersistentVolume>({
      client: deps.cluster.persistentVolumes,
      clock: deps.clock,
      logger: deps.logger,
      resource: 'persistentvolumes',
      labelSelector: persistentVolumeSelector(node.name),
      pageSize: LIST_PAGE_SIZE,
      ...(firstLists !== undefined ? { firstPage: firstLists.persistentVolumes } : {}),
      relistPeriodMs: resync,
      ...(deps.random ? { random: deps.random } : {}),
      transform: (pv) => projectPersistentVolume(pv, strings),
      onChange: (type, pv) => {
        // A claim was released: reclaim it now. A PV is gone: publish its volume again now.
        if (type === 'DELETED' || pv.status?.phase === 'Released') this.trigger();
      },
    });
    this.jobs = config.useJobForCleaning
      ? new Reflector<Job>({
          client: deps.cluster.jobs,
          clock: deps.clock,
          logger: deps.logger,
          resource: 'jobs',
          namespace: settings.namespace,
          labelSelector: `${HOSTNAME_LABEL}=${node.name}`,
          relistPeriodMs: resync,
          ...(deps.random ? { random: deps.random } : {}),
          onChange: () => {
            this.trigger();
          },
        })
      : undefined;
    this.deviceRules = deviceRulesStep(config, node, deps);
    this.reclaimer = new Reclaimer(
      { config, node, namespace: settings.namespace, jobImage: settings.jobImage },
      {
        ...deps,
        jobs: jobLookup({
          cluster: deps.cluster,
          namespace: settings.namespace,
          clock: deps.clock,
          logger: deps.logger,
          ...(this.jobs !== undefined ? { watched: this.jobs } : {}),
          forbidden: deps.jobsForbidden ?? { since: undefined, logged: false },
        }),
      },
    );
    this.health = new VolumeHealth({ config, node }, deps);
    this.storageClasses = new Reflector<StorageClass>({
      client: deps.cluster.storageClasses,
      clock: deps.clock,
      logger: deps.logger,
      resource: 'storageclasses',
      pageSize: LIST_PAGE_SIZE,
      ...(firstLists !== undefined ? { firstPage: firstLists.storageClasses } : {}),
      relistPeriodMs: resync,
      ...(deps.random ? { random: deps.random } : {}),
    });
    this.whenReady = new Promise((resolve) => {
      this.readyResolve = resolve;
    });
    this.whenSynced = new Promise((resolve) => {
      this.syncedResolve = resolve;
    });
  }

  get signal(): AbortSignal {
    return this.abort.signal;
  }

  start(): void {
    const signal = this.abort.signal;
    this.tasks.push(this.persistentVolumes.run(signal), this.storageClasses.run(signal), this.loop(signal));
    if (this.jobs) this.tasks.push(this.jobs.run(signal));
    if (this.settings.changePollMs > 0) this.tasks.push(this.watchAfterFirstPass(signal));
    if (this.deviceRules !== undefined) this.tasks.push(this.watchDevices(signal));
    // a config without rules: no device is selected any more
    else this.deps.metrics.ruleDevices.reset();
  }

  /** Stops everything this generation started and waits for it to finish. */
  async stop(): Promise<void> {
    this.abort.abort(new Error('generation stopped'));
    this.wake?.();
    await Promise.allSettled(this.tasks);
  }

  /** Why the informers have not synced yet, if one of them failed. */
  syncError(): string | undefined {
    const failing = [
      ['persistentvolumes', this.persistentVolumes.lastError],
      ['storageclasses', this.storageClasses.lastError],
      ['jobs', this.jobs?.lastError],
    ].filter(([, e]) => e !== undefined);
    return failing.length === 0 ? undefined : failing.map(([r, e]) => `${r ?? ''}: ${e ?? ''}`).join('; ');
  }

  /** Runs a discovery pass as soon as possible (coalesced). */
  trigger(): void {
    this.pendingTrigger = true;
    this.wake?.();
  }

  status(): GenerationStatus {
    return {
      number: this.number,
      configHash: this.configHash,
      synced: this.synced,
      ready: this.ready,
      passes: this.passes,
      ...(this.lastPass ? { lastPass: this.lastPass } : {}),
      persistentVolumes: this.persistentVolumes.size,
      taintRemoved: this.taintRemoved,
    };
  }

  /** The discovery period, or less when a pending skip's grace period ends first (it is then reported). */
  private nextWaitMs(): number {
    let wait = this.settings.discoveryPeriodMs;
    const now = this.deps.clock.now();
    if (this.deviceWakeAt !== undefined) wait = Math.min(wait, Math.max(0, this.deviceWakeAt - now));
    for (const since of this.pendingSince.values())
      wait = Math.min(wait, Math.max(0, since + this.settings.mountGraceMs - now));
    return wait;
  }

  private async waitForTrigger(signal: AbortSignal): Promise<void> {
    // Stopped during the pass: an 'abort' listener added now would never fire (the sleep would run out).
    if (this.pendingTrigger || signal.aborted) return;
    const timer = new AbortController();
    const stop = (): void => {
      timer.abort(TIMER_NOT_NEEDED);
    };
    signal.addEventListener('abort', stop, { once: true });
    try {
      await Promise.race([
        this.deps.clock.sleep(this.nextWaitMs(), timer.signal).catch(() => undefined),
        new Promise<void>((resolve) => {
          this.wake = resolve;
        }),
      ]);
    } finally {
      this.wake = undefined;
      signal.removeEventListener('abort', stop);
      timer.abort(TIMER_NOT_NEEDED);
    }
  }

  /** A change soon after a pass waits for the minimum interval; the ones meanwhile join it. */
  private async spaceFromLastPass(signal: AbortSignal): Promise<void> {
    const { clock } = this.deps;
    const left = this.lastPassStartedAt + this.settings.minPassIntervalMs - clock.now();
    if (left > 0 && !signal.aborted) await clock.sleep(left, signal).catch(() => undefined);
  }

  private async loop(signal: AbortSignal): Promise<void> {
    await Promise.race([
      Promise.all([this.persistentVolumes.synced, this.storageClasses.synced, this.jobs?.synced]),
      new Promise((resolve) => {
        signal.addEventListener('abort', resolve, { once: true });
      }),
    ]);
    if (isAborted(signal)) return;
    this.synced = true;
    this.syncedResolve?.();
    while (!isAborted(signal)) {
      await this.spaceFromLastPass(signal);
      if (isAborted(signal)) break;
      this.pendingTrigger = false;
      // Failed passes are spaced too: a change that keeps failing does not spin the loop.
      this.lastPassStartedAt = this.deps.clock.now();
      try {
        await this.pass(signal);
      } catch (err) {
        if (isAborted(signal)) break;
        this.deps.metrics.discoveryPasses.inc({ result: 'error' });
        this.deps.logger.log('error', 'discovery pass failed', {
          error: errorMessage(err),
        });
      }
      if (!this.ready && !isAborted(signal)) {
        this.ready = true;
        this.readyResolve?.();
      }
      if (
        this.ready &&
        this.config.removeNodeNotReadyTaint &&
        !this.taintRemoved &&
        this.lastPass?.classProblems.length === 0
      ) {
        this.taintRemoved = await removeStartupTaint(
          { cluster: this.deps.cluster, clock: this.deps.clock, logger: this.deps.logger },
          this.node.name,
          this.config.provisionerNotReadyNodeTaintKey,
          signal,
        );
      }
      await this.waitForTrigger(signal);
    }
  }

  private async pass(signal: AbortSignal): Promise<void> {
    const { clock, metrics, logger } = this.deps;
    const started = clock.now();
    const host = this.deps.host ?? nodeProcessHost;
    const cpuStart = host.cpuUsage();
    // Upstream's order: reclaim released volumes, then discover.
    const reclaim = await this.reclaimer.pass(this.persistentVolumes.list());
    // Then disks by rule: the links made now are discovered by this very pass.
    const devices = await this.devicePass();
    const plan = await planDiscovery({
      config: this.config,
      node: this.node,
      volumes: this.deps.volumes,
      persistentVolumes: this.persistentVolumes.list(),
      storageClass: (name) => this.storageClasses.get(name),
      cleanupInProgress: (name) => this.deps.table.inProgress(name),
      nameVerdicts: this.nameVerdicts,
    });
    // Planned before health, so a PV whose disk the plan found at another entry is said to have moved there.
    const health = await this.health.check(
      this.persistentVolumes.list(),
      await this.deps.volumes.mountPoints(),
      disksElsewhere(plan.skipped),
    );
    // Every write below starts after this point of the PV watch (see Reflector.upsert).
    const since = this.persistentVolumes.position();
    // The agent triggers a pass once the change is decided: under the new config, or this one.
    const held = plan.create.length > 0 && this.deps.publishHeld?.() === true;
    if (held) logger.log('debug', 'new PVs held back while a config change is decided', { count: plan.create.length });
    const published = await publishVolumes(
      held ? [] : plan.create,
      {
        cluster: this.deps.cluster,
        clock,
        logger,
        metrics,
        onCreated: (pv) => {
          this.persistentVolumes.upsert(pv, since);
        },
        onExisting: async (name) => {
          const adopted = await adoptNodeVolume({ cluster: this.deps.cluster, logger, metrics }, this.node, name);
          if (adopted) this.persistentVolumes.upsert(adopted, since);
          return adopted !== undefined;
        },
      },
      { concurrency: this.settings.createConcurrency, signal, passStartedAt: started },
    );
    const durationMs = clock.now() - started;
    this.passes += 1;
    this.lastPass = {
      at: started,
      durationMs,
      entries: plan.entries,
      created: published.created,
      failed: published.failed,
      skipped: plan.skipped.filter((s) => !ROUTINE_SKIPS.has(s.reason)),
      classProblems: plan.classProblems,
      reclaim,
      health,
      ...(devices !== undefined ? { devices } : {}),
    };
    // Reported before the pass is told: its listeners see the Events the pass recorded.
    this.report(plan.skipped, plan.classProblems);
    this.deps.onPass?.(this.number, this.lastPass);
    metrics.discoveryPassDuration.observe({}, durationMs / 1000);
    metrics.discoveryPasses.inc({
      result: plan.classProblems.length > 0 || published.failed.length > 0 ? 'problems' : 'ok',
    });
    const cpu = host.cpuUsage(cpuStart);
    logger.log('debug', 'discovery pass', {
      entries: plan.entries,
      created: published.created.length,
      skipped: this.lastPass.skipped.length,
      durationMs,
      cpuMs: (cpu.user + cpu.system) / 1000,
    });
  }

  /** Metrics every pass; logs and Node events only when a problem first appears. */
  private report(skipped: readonly SkippedEntry[], problems: readonly ClassProblem[]): void {
    const { metrics, events, logger } = this.deps;
    metrics.skippedEntries.reset();
    const counts = new Map<string, Map<SkipReason, number>>();
    for (const s of skipped) {
      let row = counts.get(s.className);
      if (row === undefined) counts.set(s.className, (row = new Map<SkipReason, number>()));
      row.set(s.reason, (row.get(s.reason) ?? 0) + 1);
    }
    for (const [storageclass, row] of counts)
      for (const [reason, n] of row) metrics.skippedEntries.set({ storageclass, reason }, n);
    const nodeRef = { apiVersion: 'v1', kind: 'Node', name: this.node.name, uid: this.node.uid };
    const current = new Set<string>();
    const pending = new Set<string>();
    const now = this.deps.clock.now();
    for (const s of skipped) {
      if (ROUTINE_SKIPS.has(s.reason)) continue;
      const key = `entry:${s.path}:${s.reason}`;
      if (GRACE_SKIPS.has(s.reason) && !this.reported.has(key)) {
        const since = this.pendingSince.get(key) ?? now;
        if (now - since < this.settings.mountGraceMs) {
          if (!this.pendingSince.has(key))
            logger.log('debug', 'discovery waits for an entry to become a mount point', {
              storageClass: s.className,
              path: s.path,
              graceMs: this.settings.mountGraceMs,
            });
          this.pendingSince.set(key, since);
          pending.add(key);
          continue;
        }
      }
      current.add(key);
      if (this.reported.has(key)) continue;
      if (s.reason === 'identity-conflict') {
        reportIdentityConflict(s, { ...this.deps, node: this.node, persistentVolumes: this.persistentVolumes });
        continue;
      }
      logger.log('warn', 'discovery skipped an entry', {
        storageClass: s.className,
        path: s.path,
        reason: s.reason,
        detail: s.message,
      });
      events.record(nodeRef, 'Warning', 'VolumeDiscoverySkipped', `${s.path}: ${s.message}`);
    }
    for (const p of problems) {
      const key = `class:${p.className}:${p.message}`;
      current.add(key);
      if (this.reported.has(key)) continue;
      logger.log('error', 'discovery failed for a storage class', { storageClass: p.className, detail: p.message });
      events.record(nodeRef, 'Warning', 'DiscoveryFailed', `storage class ${p.className}: ${p.message}`);
    }
    this.reported.clear();
    for (const k of current) this.reported.add(k);
    for (const k of this.pendingSince.keys()) if (!pending.has(k)) this.pendingSince.delete(k);
  }

  /** Disks by rule for this pass; a failure is logged and the pass goes on (discovery is independent). */
  private async devicePass(): Promise<DeviceRulesResult | undefined> {
    if (this.deviceRules === undefined) return undefined;
    try {
      const result = await this.deviceRules.pass(this.persistentVolumes.list());
      this.deviceWakeAt = result?.wakeAt;
      return result;
    } catch (err) {
      this.deps.logger.log('error', 'device rules pass failed', { error: errorMessage(err) });
      return undefined;
    }
  }

  /** While rules exist: a pass when the node's block devices change (arrive, go, resize). */
  private async watchDevices(signal: AbortSignal): Promise<void> {
    const inventory = this.deps.deviceRules?.inventory;
    if (this.deviceRules === undefined || inventory?.changeStamp === undefined) return;
    let previous: string | undefined;
    while (!signal.aborted) {
      const stamp = await inventory.changeStamp().catch((err: unknown) => {
        this.deps.logger.log('debug', 'block device change check failed', { error: errorMessage(err) });
        return previous;
      });
      if (previous !== undefined && stamp !== previous && this.synced) this.trigger();
      previous = stamp;
      try {
        await this.deps.clock.sleep(DEVICE_POLL_MS, signal);
      } catch {
        return;
      }
    }
  }

  /**
   * The change watch starts once the first pass ran: spawning findmnt blocks the main thread for
   * 7–16 ms, which at start-up came right before the first pass. Nothing is missed meanwhile: the
   * watch's ready, or the fallback's first listing, triggers a pass. Unless the discovery
   * directories hold many entries: until a watch runs, each entry's identity reads the whole mount
   * table again (a fresh one), which over 1,000 entries and their mounts took seconds; the watch
   * started beside the pass lets the rest of it share one table.
   */
  private async watchAfterFirstPass(signal: AbortSignal): Promise<void> {
    const early = this.discoveryEntries().then((n) => (n > EARLY_WATCH_ENTRIES ? undefined : this.whenReady));
    await Promise.race([
      early,
      this.whenReady,
      new Promise((resolve) => {
        signal.addEventListener('abort', resolve, { once: true });
      }),
    ]);
    if (!isAborted(signal)) await this.watchForChanges(signal);
  }

  /** The entries of the discovery directories now (one listing each; one that fails counts none). */
  private async discoveryEntries(): Promise<number> {
    const directories = new Set(Object.values(this.config.storageClassMap).map((c) => c.mountDir));
    let count = 0;
    for (const dir of directories) count += (await this.deps.volumes.listDirectory(dir).catch(() => [])).length;
    return count;
  }

  /**
   * Change detection between full passes. The node reports mount-table changes and entries
   * created or removed in the discovery directories as they happen, and each report triggers a
   * pass (coalesced with one in progress). When it cannot (no findmnt), the cheap poll instead.
   * The discovery period's full pass stays the safety net either way.
   */
  private async watchForChanges(signal: AbortSignal): Promise<void> {
    const directories = [...new Set(Object.values(this.config.storageClassMap).map((c) => c.mountDir))];
    const watch = this.deps.volumes.watchChanges({
      directories,
      signal,
      onChange: () => {
        this.trigger();
      },
    });
    const ready = await watch.ready;
    // A change between start-up and now was not reported: one pass covers it.
    if (ready.ok) this.trigger();
    const done = await watch.done;
    if (isAborted(signal)) return;
    const reason = ready.ok ? (done.ok ? 'the watch ended' : done.reason) : ready.reason;
    this.deps.logger.log('warn', 'no mount-table and directory events; polling for changes', {
      reason,
      intervalMs: this.settings.changePollMs,
    });
    await this.pollForChanges(signal);
  }

  /**
   * The fallback: the mount table and the discovery directories' listings, hashed every
   * changePollMs. A new mount or device link triggers a pass at once instead of waiting for the
   * discovery period.
   */
  private async pollForChanges(signal: AbortSignal): Promise<void> {
    let previous: string | undefined;
    while (!signal.aborted) {
      try {
        const hash = createHash('sha256');
        for (const m of await this.deps.volumes.mountPoints()) hash.update(m.mountPoint).update('\0');
        for (const c of Object.values(this.config.storageClassMap)) {
          hash.update('\u0001').update(c.mountDir);
          try {
            for (const n of [...(await this.deps.volumes.listDirectory(c.mountDir))].sort())
              hash.update('\0').update(n);
          } catch {
            hash.update('\u0002');
          }
        }
        const digest = hash.digest('hex');
        // The first listing too: what changed before the polling began has had no pass of its own.
        if ((previous === undefined || digest !== previous) && this.synced) this.trigger();
        previous = digest;
      } catch (err) {
        this.deps.logger.log('debug', 'change detector failed', {
          error: errorMessage(err),
        });
      }
      try {
        await this.deps.clock.sleep(this.settings.changePollMs, signal);
      } catch {
        return;
      }
    }
  }
}
