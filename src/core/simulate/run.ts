// Scenario replay: the REAL Agent (agent.ts: generations, reload state machine, cleanup table,
// Reclaimer, planDiscovery, publishVolumes) runs against a MemoryCluster, MemoryVolumes and a
// ScriptedCleaner on a ManualClock. Steps change that world; the virtual clock moves only when
// the runner moves it, so a scenario replays the same way every time. What the agent did is read
// off its side effects — the API writes it made, the cleanups it ran, the reloads it answered and
// what it logged — each stamped with virtual time.
import { mkdir, mkdtemp, rename, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, posix } from 'node:path';
import { stringify } from 'yaml';
import { Agent } from '../agent/agent.js';
import type { ReloadResult } from '../agent/reload-types.js';
import type { CleanOptions, FilesystemCleanResult, VolumeCleaner } from '../cleanup/cleaner.js';
import { cleanupJobName } from '../cleanup/jobs.js';
import type { CleanupState } from '../cleanup/table.js';
import { ManualClock } from '../clock.js';
import { formatGoDuration } from '../config/duration.js';
import type { ProvisionerConfig } from '../config/model.js';
import { loadConfig, readConfigSnapshot } from '../config/source.js';
import type { ConfigSnapshot } from '../config/source.js';
import { ROUTINE_SKIPS } from '../discovery/plan.js';
import { ConfigSourceError, InvalidConfigError } from '../errors.js';
import type { ConfigIssue, SourcePosition } from '../errors.js';
import { isNotFound } from '../kube/cluster.js';
import type { Cluster, ResourceClient } from '../kube/cluster.js';
import { MemoryCluster } from '../kube/memory/memory-cluster.js';
import type { CoreEvent, Job, Node, PersistentVolume, StorageClass } from '../kube/objects.js';
import type { LogFields, Logger, LogLevel } from '../log.js';
import { formatBinaryQuantity } from '../node/capacity.js';
import { MemoryVolumes } from '../node/memory-volumes.js';
import { NODE_LABEL, nodeLabelValue, persistentVolumeName } from '../pv/naming.js';
import { loadClusterFixture } from './cluster-fixture.js';
import { bindClaim, releaseClaim, runControllerStandIns } from './controllers.js';
import { evaluateExpectations } from './expect.js';
import type { ExpectationResult, PvField, WorldView } from './expect.js';
import { InvalidInputError } from './input.js';
import { addEntry, loadNodeFacts, removeEntry } from './node-facts.js';
import type { EntrySpec } from './node-facts.js';
import type { ConfigInput, DiskSpec, Scenario, ScenarioSettings, Step, StepType } from './scenario.js';
import { ScriptedCleaner } from './stand-ins.js';

/** Virtual time zero of every scenario (timestamps in objects; the timeline shows offsets). */
export const SCENARIO_EPOCH = Date.UTC(2030, 0, 1);

export type ActionType =
  | 'agent-started'
  | 'agent-stopped'
  | 'pv-created'
  | 'pv-deleted'
  | 'pv-adopted'
  | 'job-created'
  | 'job-deleted'
  | 'cleanup-started'
  | 'cleanup-succeeded'
  | 'cleanup-failed'
  | 'cleanup-interrupted'
  | 'reload'
  | 'skipped'
  | 'class-problem'
  | 'node-updated'
  | 'log';

/** One thing the agent did, at virtual time `at` (ms since the scenario started). */
export interface TimelineAction {
  readonly at: number;
  readonly type: ActionType;
  readonly summary: string;
  readonly pv?: string;
  readonly volume?: string;
  /** Further lines: a reload's changes or problems. */
  readonly details?: readonly string[];
}

export interface StepReport {
  /** 0: the start (world set up, agent started); then the scenario's steps, 1-based. */
  readonly index: number;
  readonly type: StepType | 'start';
  readonly at: number;
  readonly summary: string;
  readonly note?: string;
  readonly actions: readonly TimelineAction[];
  readonly expectations: readonly ExpectationResult[];
}

export interface FinalPV {
  readonly pv: string;
  readonly volume: string;
  readonly phase: string;
  readonly capacity: string;
}

export interface ScenarioReport {
  readonly name: string;
  readonly file: string;
  readonly description?: string;
  readonly node: string;
  readonly settings: ScenarioSettings;
  readonly steps: readonly StepReport[];
  readonly expectations: { readonly total: number; readonly failed: number };
  readonly passed: boolean;
  readonly final: {
    readonly at: number;
    readonly generation: number;
    readonly configHash: string;
    readonly persistentVolumes: readonly FinalPV[];
    readonly cleanups: readonly { readonly pv: string; readonly method: string; readonly state: CleanupState }[];
  };
}

export interface ScenarioRunOptions {
  /** Where the runner keeps the config files it hands the agent; default the OS temp directory. */
  readonly tempRoot?: string;
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function duration(ms: number): string {
  return Number.isFinite(ms) ? formatGoDuration(BigInt(Math.round(ms)) * 1_000_000n) : 'forever';
}

function shortHash(hash: string): string {
  return hash.replace(/^sha256:/u, 'sha256:').slice(0, 'sha256:'.length + 12);
}

function plural(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}

/** Fails a step: a scenario that cannot be carried out is bad input (exit 3), with its step and position. */
class StepError extends Error {}

interface DiskRecord {
  /** Removed by a step: still resolvable by name (its PV may outlive it). */
  readonly removed?: boolean;
  readonly dir: string;
  readonly name: string;
  readonly className: string | undefined;
  readonly type: EntrySpec['type'];
  readonly mounted: boolean;
}

interface ResolvedVolume {
  readonly dir: string;
  readonly name: string;
  readonly className: string | undefined;
  /** Path in the agent's container. */
  readonly path: string;
  readonly pvName: string | undefined;
  readonly display: string;
}

/** Logs of the agent, stamped with virtual time. */
class TimedLogger implements Logger {
  readonly records: { at: number; level: LogLevel; message: string; fields: LogFields }[] = [];
  onRecord: (record: { at: number; level: LogLevel; message: string; fields: LogFields }) => void = () => undefined;
  constructor(private readonly clock: ManualClock) {}
  log(level: LogLevel, text: string, fields: LogFields = {}): void {
    const record = { at: this.clock.now(), level, message: text, fields };
    this.records.push(record);
    this.onRecord(record);
  }
}

/** Log records shown elsewhere in the timeline (or of no interest to it). */
const QUIET_LOGS = new Set([
  'cleanup failed',
  'config rejected: the running config stays',
  'config reload failed: the running config stays',
  'config could not be applied; rolled back to the last good config',
]);

/** Observes the agent's API writes (forwarded to the in-memory cluster unchanged). */
function tap(inner: Cluster, onWrite: (verb: string, resource: string, object: unknown) => void): Cluster {
  const wrap = <T>(client: ResourceClient<T>, resource: string): ResourceClient<T> => ({
    get: (name, options) => client.get(name, options),
    list: (options) => client.list(options),
    listMetadata: (options) => client.listMetadata(options),
    watch: (options) => client.watch(options),
    create: async (object, options) => {
      const r = await client.create(object, options);
      if (options?.dryRun !== true) onWrite('create', resource, r);
      return r;
    },
    update: async (object, options) => {
      const r = await client.update(object, options);
      onWrite('update', resource, r);
      return r;
    },
    updateStatus: async (object, options) => {
      const r = await client.updateStatus(object, options);
      onWrite('updateStatus', resource, r);
      return r;
    },
    patch: async (name, patch, options) => {
      const r = await client.patch(name, patch, options);
      onWrite('patch', resource, r);
      return r;
    },
    delete: async (name, options) => {
      await client.delete(name, options);
      onWrite('delete', resource, { metadata: { name, namespace: options?.namespace } });
    },
  });
  return {
    persistentVolumes: wrap(inner.persistentVolumes, 'persistentvolumes'),
    storageClasses: wrap(inner.storageClasses, 'storageclasses'),
    nodes: wrap(inner.nodes, 'nodes'),
    events: wrap(inner.events, 'events'),
    jobs: wrap(inner.jobs, 'jobs'),
    configMaps: wrap(inner.configMaps, 'configmaps'),
  };
}

/** The scripted cleaner, with start and end of every cleanup reported to the timeline. */
class TappedCleaner implements VolumeCleaner {
  constructor(
    readonly inner: ScriptedCleaner,
    private readonly on: (
      event: 'started' | 'succeeded' | 'failed' | 'interrupted',
      path: string,
      detail: { command?: readonly string[]; error?: string },
    ) => void,
  ) {}

  private async observe<T>(
    path: string,
    command: readonly string[] | undefined,
    options: CleanOptions,
    run: () => Promise<T>,
  ): Promise<T> {
    this.on('started', path, command ? { command } : {});
    try {
      const r = await run();
      this.on('succeeded', path, {});
      return r;
    } catch (err) {
      this.on(options.signal.aborted ? 'interrupted' : 'failed', path, { error: message(err) });
      throw err;
    }
  }

  cleanBlock(device: string, command: readonly string[], options: CleanOptions): Promise<void> {
    return this.observe(device, command, options, () => this.inner.cleanBlock(device, command, options));
  }

  cleanFilesystem(path: string, options: CleanOptions): Promise<FilesystemCleanResult> {
    return this.observe(path, undefined, options, () => this.inner.cleanFilesystem(path, options));
  }
}

function configText(value: unknown): string {
  return typeof value === 'string' ? value : stringify(value, { version: '1.1' });
}

/** ConfigMap keys of a snapshot as texts (for merging inline keys into a file-given config). */
function snapshotKeys(snapshot: ConfigSnapshot): Record<string, string> {
  const keys: Record<string, string> = {};
  for (const e of snapshot.entries) {
    keys[e.key] =
      e.value.kind === 'text'
        ? e.value.text
        : configText(e.value.node === null ? null : (e.value.node.toJS(e.value.yaml.doc) as unknown));
  }
  return keys;
}

class ScenarioRun {
  private readonly clock = new ManualClock(SCENARIO_EPOCH);
  private cluster!: MemoryCluster;
  private agentCluster!: Cluster;
  private readonly volumes = new MemoryVolumes();
  private readonly scripted = new ScriptedCleaner(this.clock);
  private cleaner!: TappedCleaner;
  private readonly logger = new TimedLogger(this.clock);
  private agent: Agent | undefined;
  private tmp = '';
  private keys: Record<string, string> = {};
  private configFile: string | undefined;
  private configVersion = 0;
  private config!: ProvisionerConfig;
  private nodeName = '';
  private readonly disks = new Map<string, DiskRecord>();
  private actions: TimelineAction[] = [];
  private readonly jobsCreated: string[] = [];
  private readonly cleanupsByPath = new Map<string, number>();
  private lastReload: ReloadResult | undefined;
  private readonly worldStop = new AbortController();
  private readonly controllers: Promise<void>[] = [];
  private readonly steps: StepReport[] = [];

  constructor(
    private readonly scenario: Scenario,
    private readonly options: ScenarioRunOptions,
  ) {}

  private get settings(): ScenarioSettings {
    return this.scenario.settings;
  }

  private now(): number {
    return this.clock.now() - SCENARIO_EPOCH;
  }

  /** Adds an action to the timeline; `before` puts it ahead of the actions recorded since that index. */
  private record(action: Omit<TimelineAction, 'at'>, before?: number): void {
    const entry = { at: this.now(), ...action };
    if (before === undefined) this.actions.push(entry);
    else this.actions.splice(before, 0, entry);
  }

  private fail(step: { index: number; position: SourcePosition; type: string }, text: string): never {
    throw new InvalidInputError('scenario', this.scenario.file, [
      { severity: 'error', path: `steps[${step.index}].${step.type}`, message: text, position: step.position },
    ]);
  }

  // ---- the world ------------------------------------------------------------------------------

  private volumeOfPath(path: string): DiskRecord | undefined {
    return this.disks.get(path);
  }

  private classOfDir(dir: string): string | undefined {
    return Object.entries(this.config.storageClassMap).find(([, c]) => c.mountDir === dir)?.[0];
  }

  private displayOf(dir: string, name: string, className: string | undefined): string {
    return className !== undefined ? `${className}/${name}` : posix.join(dir, name);
  }

  private async resolveVolume(ref: string): Promise<ResolvedVolume> {
    const make = (dir: string, name: string, className: string | undefined): ResolvedVolume => ({
      dir,
      name,
      className,
      path: posix.join(dir, name),
      pvName: className !== undefined ? persistentVolumeName(name, this.nodeName, className) : undefined,
      display: this.displayOf(dir, name, className),
    });
    if (ref.startsWith('/')) {
      const dir = posix.dirname(ref);
      const name = posix.basename(ref);
      return make(dir, name, this.volumeOfPath(ref)?.className ?? this.classOfDir(dir));
    }
    if (ref.startsWith('local-pv-')) {
      const pv = await this.cluster.persistentVolumes.get(ref).catch(() => undefined);
      if (!pv) throw new StepError(`no PersistentVolume named ${ref}`);
      const className = pv.spec.storageClassName ?? '';
      const name = posix.basename(pv.spec.local?.path ?? '');
      const classConfig = this.config.storageClassMap[className];
      const known = [...this.disks.values()].find((d) => d.name === name && d.className === className);
      const dir = known?.dir ?? classConfig?.mountDir ?? posix.dirname(pv.spec.local?.path ?? '/');
      return { ...make(dir, name, className), pvName: ref };
    }
    const slash = ref.indexOf('/');
    if (slash > 0) {
      const className = ref.slice(0, slash);
      const name = ref.slice(slash + 1);
      const known = [...this.disks.values()].find((d) => d.name === name && d.className === className);
      const dir = known?.dir ?? this.config.storageClassMap[className]?.mountDir;
      if (dir === undefined) throw new StepError(`no volume ${ref}: class ${className} is not configured`);
      return make(dir, name, className);
    }
    const named = [...this.disks.values()].filter((d) => d.name === ref);
    const present = named.filter((d) => d.removed !== true);
    const matches = present.length > 0 ? present : named;
    if (matches.length > 1)
      throw new StepError(
        `volume "${ref}" is ambiguous: ${matches.map((m) => this.displayOf(m.dir, m.name, m.className)).join(', ')}; write class/entry`,
      );
    const only = matches[0];
    if (only) return make(only.dir, only.name, only.className);
    for (const [className, c] of Object.entries(this.config.storageClassMap)) {
      const names = await this.volumes.listDirectory(c.mountDir).catch(() => [] as readonly string[]);
      if (names.includes(ref)) return make(c.mountDir, ref, className);
    }
    throw new StepError(
      `no volume named "${ref}" (disks: ${[...this.disks.values()].map((d) => d.name).join(', ') || 'none'})`,
    );
  }

  private async ensureClassesFor(config: ProvisionerConfig): Promise<void> {
    for (const [name, c] of Object.entries(config.storageClassMap)) {
      if (this.settings.createDiscoveryDirectories) {
        try {
          this.volumes.addDirectory(c.mountDir);
        } catch {
          // Something else is there: discovery reports it.
        }
      }
      if (!this.settings.createStorageClasses) continue;
      const sc: StorageClass = {
        apiVersion: 'storage.k8s.io/v1',
        kind: 'StorageClass',
        metadata: { name },
        provisioner: 'kubernetes.io/no-provisioner',
        reclaimPolicy: 'Delete',
        volumeBindingMode: 'WaitForFirstConsumer',
      };
      await this.cluster.storageClasses.create(sc).catch(() => undefined);
    }
  }

  private addDisk(disk: DiskSpec, fail: (text: string) => never): DiskRecord {
    let dir = disk.dir;
    let className = disk.className;
    if (dir === undefined) {
      const c = this.config.storageClassMap[className ?? ''];
      if (!c) fail(`class ${className ?? ''} is not configured: use a configured class or dir`);
      dir = c.mountDir;
    } else {
      className = this.classOfDir(dir);
    }
    const entry: EntrySpec = {
      dir,
      name: disk.name,
      type: disk.type,
      mounted: disk.mounted,
      ...(disk.capacity !== undefined ? { capacity: disk.capacity } : {}),
      ...(disk.fsType !== undefined ? { fsType: disk.fsType } : {}),
      ...(disk.target !== undefined ? { target: disk.target } : {}),
    };
    try {
      addEntry(this.volumes, entry);
    } catch (err) {
      fail(`cannot add ${posix.join(dir, disk.name)}: ${message(err)}`);
    }
    const record: DiskRecord = { dir, name: disk.name, className, type: disk.type, mounted: entry.mounted };
    this.disks.set(posix.join(dir, disk.name), record);
    return record;
  }

  /** Stand-ins for the controllers a real cluster runs: the PV controller and pv-protection, Job GC. */
  private startControllers(): void {
    this.controllers.push(...runControllerStandIns(this.cluster, this.worldStop.signal));
  }

  private onWrite(verb: string, resource: string, object: unknown): void {
    if (resource === 'persistentvolumes') {
      const pv = object as PersistentVolume;
      const name = pv.metadata.name;
      if (verb === 'create') {
        const entry = posix.basename(pv.spec.local?.path ?? '');
        const volume = `${pv.spec.storageClassName ?? ''}/${entry}`;
        this.record({
          type: 'pv-created',
          pv: name,
          volume,
          summary: `created PV ${name} for ${volume} (${pv.spec.capacity?.['storage'] ?? '?'}, ${pv.spec.volumeMode ?? 'Filesystem'}${pv.spec.local?.fsType !== undefined ? `, fsType ${pv.spec.local.fsType}` : ''})`,
        });
      } else if (verb === 'delete') {
        this.record({ type: 'pv-deleted', pv: name, summary: `deleted PV ${name}` });
      } else if (verb === 'patch') {
        this.record({ type: 'pv-adopted', pv: name, summary: `labelled PV ${name} as this node's (adopted)` });
      }
    } else if (resource === 'jobs') {
      const job = object as Job;
      const name = job.metadata.name;
      if (verb === 'create') {
        this.jobsCreated.push(name);
        const container = job.spec?.template.spec.containers[0];
        const device = job.metadata.annotations?.['device'] ?? '?';
        const pv = job.metadata.labels?.['pv'];
        this.record({
          type: 'job-created',
          ...(pv !== undefined ? { pv } : {}),
          summary: `cleanup started: Job ${name} runs ${(container?.command ?? []).join(' ')} on ${device} (image ${container?.image ?? '?'})`,
        });
      } else if (verb === 'delete') {
        this.record({ type: 'job-deleted', summary: `deleted finished Job ${name}` });
      }
    } else if (resource === 'nodes' && (verb === 'patch' || verb === 'update')) {
      this.record({
        type: 'node-updated',
        summary: `updated Node ${(object as Node).metadata.name} (startup taint removed)`,
      });
    }
  }

  private onCleaner(
    event: 'started' | 'succeeded' | 'failed' | 'interrupted',
    path: string,
    detail: { command?: readonly string[]; error?: string },
  ): void {
    const disk = this.volumeOfPath(path);
    const className = disk?.className ?? this.classOfDir(posix.dirname(path));
    const name = posix.basename(path);
    const volume = this.displayOf(posix.dirname(path), name, className);
    const pv = className !== undefined ? persistentVolumeName(name, this.nodeName, className) : undefined;
    const base = { volume, ...(pv !== undefined ? { pv } : {}) };
    switch (event) {
      case 'started':
        this.cleanupsByPath.set(path, (this.cleanupsByPath.get(path) ?? 0) + 1);
        this.record({
          ...base,
          type: 'cleanup-started',
          summary: detail.command
            ? `cleanup started: in-process, LOCAL_PV_BLKDEVICE=${path} ${detail.command.join(' ')}`
            : `cleanup started: in-process, deleting the contents of ${path}`,
        });
        return;
      case 'succeeded':
        this.record({ ...base, type: 'cleanup-succeeded', summary: `cleanup of ${volume} succeeded` });
        return;
      case 'failed':
        this.record({
          ...base,
          type: 'cleanup-failed',
          summary: `cleanup of ${volume} failed: ${detail.error ?? '?'}`,
        });
        return;
      case 'interrupted':
        this.record({
          ...base,
          type: 'cleanup-interrupted',
          summary: `cleanup of ${volume} interrupted (the agent stopped)`,
        });
        return;
    }
  }

  /** An agent log record worth a timeline line becomes one, in the order things happened. */
  private onLog(r: { at: number; level: LogLevel; message: string; fields: LogFields }): void {
    {
      const at = r.at - SCENARIO_EPOCH;
      const f = r.fields;
      const str = (k: string): string => {
        const v = f[k];
        return typeof v === 'string' ? v : v === undefined ? '' : JSON.stringify(v);
      };
      if (r.message === 'discovery skipped an entry') {
        const path = str('path');
        const volume = this.displayOf(posix.dirname(path), posix.basename(path), str('storageClass') || undefined);
        this.actions.push({
          at,
          type: 'skipped',
          volume,
          summary: `skipped ${volume}: ${str('detail')} (${str('reason')})`,
        });
      } else if (r.message === 'discovery failed for a storage class') {
        this.actions.push({ at, type: 'class-problem', summary: `class ${str('storageClass')}: ${str('detail')}` });
      } else if (r.message === 'cleanup could not start') {
        this.actions.push({
          at,
          type: 'cleanup-failed',
          pv: str('pv'),
          summary: `cleanup of PV ${str('pv')} could not start: ${str('error')}`,
        });
      } else if ((r.level === 'warn' || r.level === 'error') && !QUIET_LOGS.has(r.message)) {
        const pv = str('pv');
        const extra = Object.entries(f)
          .filter(([k]) => k !== 'pv' && k !== 'reason')
          .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`);
        this.actions.push({
          at,
          type: 'log',
          ...(pv !== '' ? { pv } : {}),
          summary: `${r.level}: ${pv !== '' ? `PV ${pv}: ` : ''}${r.message}${extra.length > 0 ? ` (${extra.join(', ')})` : ''}`,
        });
      }
    }
  }

  // ---- config ---------------------------------------------------------------------------------

  private get configPath(): string {
    return join(this.tmp, 'config');
  }

  /** Points the agent's config path at the new config (an atomic symlink swap). */
  private async writeConfig(input: ConfigInput, fail: (text: string) => never): Promise<void> {
    this.configVersion += 1;
    let target: string;
    if (input.kind === 'file') {
      try {
        await stat(input.path);
      } catch (err) {
        fail(`config ${input.display}: ${message(err)}`);
      }
      target = input.path;
      this.configFile = input.display;
      this.keys = await readConfigSnapshot(input.path)
        .then(snapshotKeys)
        .catch(() => ({}));
    } else {
      for (const [key, value] of Object.entries(input.keys)) {
        if (!/^[-._a-zA-Z0-9]+$/u.test(key) || key.startsWith('..')) fail(`"${key}" is not a valid ConfigMap key`);
        if (value === null) {
          this.keys = Object.fromEntries(Object.entries(this.keys).filter(([k]) => k !== key));
        } else this.keys[key] = configText(value);
      }
      this.configFile = undefined;
      target = join(this.tmp, `config-v${this.configVersion}`);
      await mkdir(target);
      for (const [key, text] of Object.entries(this.keys)) await writeFile(join(target, key), text);
    }
    const link = join(this.tmp, `config-link-${this.configVersion}`);
    await symlink(target, link);
    await rename(link, this.configPath);
  }

  /** Problems of the config in the timeline: positions in the runner's files made readable. */
  private readableIssue(issue: ConfigIssue): string {
    const file = issue.position?.file;
    let where = '';
    if (file !== undefined) {
      let display = file;
      if (file.startsWith(`${this.configPath}/`)) display = `config/${file.slice(this.configPath.length + 1)}`;
      else if (file === this.configPath) display = this.configFile ?? 'config';
      where = [display, issue.position?.line, issue.position?.column].filter((p) => p !== undefined).join(':');
    }
    return `${issue.severity === 'warning' ? 'warning: ' : ''}${where !== '' ? `${where}: ` : ''}${issue.path !== '' ? `${issue.path}: ` : ''}${issue.message}`;
  }

  private recordReload(r: ReloadResult, before: number): void {
    this.lastReload = r;
    const errors = r.issues.filter((i) => i.severity === 'error');
    const details =
      r.outcome === 'rejected'
        ? errors.map((i) => this.readableIssue(i))
        : [
            ...(r.outcome === 'refused' && r.error !== undefined ? [r.error] : []),
            ...r.changes.map((c) => `${c.path} [${c.impact}] ${c.summary}`),
          ];
    const summaries: Record<ReloadResult['outcome'], string> = {
      applied: `reload applied: generation ${r.generation} serves ${shortHash(r.appliedHash)} (${r.changes.length} ${r.changes.length === 1 ? 'change' : 'changes'})`,
      noop: `reload: no change (${shortHash(r.appliedHash)} already applied)`,
      rejected: `reload rejected: ${errors.length} ${errors.length === 1 ? 'problem' : 'problems'}; generation ${r.generation} keeps serving ${shortHash(r.appliedHash)}`,
      refused: `reload refused by the reload guard (needs --allow ${(r.needsAllow ?? []).join(',')}); generation ${r.generation} keeps serving ${shortHash(r.appliedHash)}`,
      'rolled-back': `reload rolled back: ${r.error ?? '?'}; generation ${r.generation} serves ${shortHash(r.appliedHash)}`,
      failed: `reload failed: ${r.error ?? '?'}; generation ${r.generation} keeps serving`,
    };
    this.record({ type: 'reload', summary: summaries[r.outcome], ...(details.length > 0 ? { details } : {}) }, before);
  }

  // ---- driving the agent ------------------------------------------------------------------------

  private fingerprint(): string {
    const table = this.agent?.cleanups;
    return [
      this.cluster.resourceVersion,
      this.actions.length,
      this.logger.records.length,
      this.scripted.calls.length,
      this.clock.pendingSleepers,
      table ? (['queued', 'running', 'succeeded', 'failed'] as const).map((s) => table.count(s)).join(',') : '',
    ].join('|');
  }

  /** Lets everything runnable at the current virtual time run to completion. */
  private async settle(): Promise<void> {
    let stable = 0;
    let last = '';
    for (let i = 0; i < 100_000; i++) {
      await new Promise((resolve) => setImmediate(resolve));
      const fp = this.fingerprint();
      if (fp === last) {
        if (++stable >= 3) return;
      } else {
        stable = 0;
        last = fp;
      }
    }
    throw new Error('the simulation did not settle (the agent keeps working at one instant)');
  }

  /**
   * Awaits a promise that does real IO (config files, the HTTP listener) and may also wait on the
   * virtual clock (drain and start deadlines): virtual time moves only when it is stuck there.
   */
  private async drive<T>(promise: Promise<T>): Promise<T> {
    let settled = false;
    const isSettled = (): boolean => settled;
    const tracked = promise.finally(() => {
      settled = true;
    });
    tracked.catch(() => undefined);
    for (let i = 0; i < 600 && !isSettled(); i++) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        tracked.catch(() => undefined),
        new Promise((r) => {
          timer = setTimeout(r, 500);
        }),
      ]);
      clearTimeout(timer);
      if (isSettled()) break;
      if (this.clock.pendingSleepers > 0) await this.clock.advance(1000);
    }
    return tracked;
  }

  private async advance(ms: number): Promise<void> {
    if (ms > 0) await this.clock.advance(ms);
    await this.settle();
  }

  private async startAgent(): Promise<void> {
    const s = this.settings;
    const mark = this.actions.length;
    this.agent = await this.drive(
      Agent.start(
        {
          configPath: this.configPath,
          nodeName: this.nodeName,
          namespace: s.namespace,
          listenAddress: '127.0.0.1:0',
          metricsPath: '/metrics',
          discoveryPeriodMs: s.discoveryPeriodMs,
          changePollMs: s.changePollMs,
          createConcurrency: 4,
          cleanupConcurrency: s.cleanupConcurrency,
          jobImage: s.jobImage,
          cleanupBackoff: { initialMs: s.cleanupBackoffMs, maxMs: Math.max(s.cleanupBackoffMs, 300_000) },
          drainTimeoutMs: 10_000,
          startTimeoutMs: 30_000,
          reloadGuard: s.reloadGuard,
          version: 'simulate',
        },
        {
          cluster: this.agentCluster,
          volumes: this.volumes,
          clock: this.clock,
          logger: this.logger,
          cleaner: this.cleaner,
        },
      ),
    );
    const applied = this.agent.appliedConfig();
    this.record(
      {
        type: 'agent-started',
        summary: `agent started: generation ${applied.generation} serves ${shortHash(applied.hash)}${this.agent.adopted > 0 ? `, adopted ${this.agent.adopted} PVs` : ''}`,
      },
      mark,
    );
    await this.settle();
  }

  private async stopAgent(): Promise<void> {
    const agent = this.agent;
    if (!agent) return;
    this.agent = undefined;
    const inFlight = agent.cleanups.count('running') + agent.cleanups.count('queued');
    await this.drive(agent.stop());
    this.record({
      type: 'agent-stopped',
      summary: `agent stopped${inFlight > 0 ? ` (${inFlight} cleanup${inFlight === 1 ? '' : 's'} in flight)` : ''}; its cleanup table is gone with it`,
    });
    await this.settle();
  }

  // ---- setup ----------------------------------------------------------------------------------

  private async setup(): Promise<void> {
    const sc = this.scenario;
    const setupFail =
      (position: SourcePosition | undefined, path: string) =>
      (text: string): never => {
        throw new InvalidInputError('scenario', sc.file, [
          { severity: 'error', path, message: text, ...(position ? { position } : {}) },
        ]);
      };
    this.tmp = await mkdtemp(join(this.options.tempRoot ?? tmpdir(), 'lvp-simulate-'));
    let fixtureNodes: readonly string[] = [];
    if (sc.cluster) {
      const fixture = await loadClusterFixture(sc.cluster.path, { clock: this.clock });
      this.cluster = fixture.cluster;
      fixtureNodes = fixture.nodes;
    } else {
      this.cluster = new MemoryCluster({ clock: this.clock });
    }
    this.nodeName = sc.node ?? (fixtureNodes.length === 1 ? (fixtureNodes[0] ?? 'node-a') : 'node-a');
    try {
      await this.cluster.nodes.get(this.nodeName);
    } catch (err) {
      if (!isNotFound(err)) throw err;
      await this.cluster.nodes.create({
        metadata: { name: this.nodeName, labels: { 'kubernetes.io/hostname': this.nodeName } },
      });
    }
    this.cluster.addNamespace(this.settings.namespace);
    await this.writeConfig(sc.config, setupFail(undefined, 'config'));
    try {
      this.config = (await loadConfig(this.configPath)).config;
    } catch (err) {
      if (err instanceof InvalidConfigError) {
        throw new InvalidInputError(
          'scenario',
          sc.file,
          err.issues
            .filter((i) => i.severity === 'error')
            .map((i) => ({
              severity: 'error' as const,
              path: 'config',
              message: `the starting config is invalid: ${this.readableIssue(i)}`,
            })),
        );
      }
      // Name the user's config, not the runner's link to it.
      if (err instanceof ConfigSourceError)
        setupFail(undefined, 'config')(err.message.replaceAll(this.configPath, this.configFile ?? 'config'));
      throw err;
    }
    await this.ensureClassesFor(this.config);
    if (sc.nodeFacts) {
      const { facts } = await loadNodeFacts(sc.nodeFacts.path);
      for (const dir of facts.directories) {
        try {
          this.volumes.addDirectory(dir);
        } catch (err) {
          setupFail(undefined, 'nodeFacts')(`${sc.nodeFacts.display}: ${dir}: ${message(err)}`);
        }
      }
      for (const e of [...facts.entries].sort((a, b) => Number(a.type === 'symlink') - Number(b.type === 'symlink'))) {
        try {
          addEntry(this.volumes, e);
        } catch (err) {
          setupFail(undefined, 'nodeFacts')(`${sc.nodeFacts.display}: ${e.name}: ${message(err)}`);
        }
        this.disks.set(posix.join(e.dir, e.name), {
          dir: e.dir,
          name: e.name,
          className: this.classOfDir(e.dir),
          type: e.type,
          mounted: e.mounted,
        });
      }
    }
    sc.disks.forEach((d, i) => {
      this.addDisk(d, setupFail(d.position, `disks[${i}]`));
    });
    this.cleaner = new TappedCleaner(this.scripted, (event, path, detail) => {
      this.onCleaner(event, path, detail);
    });
    this.agentCluster = tap(this.cluster, (verb, resource, object) => {
      this.onWrite(verb, resource, object);
    });
    this.logger.onRecord = (record) => {
      this.onLog(record);
    };
    this.startControllers();
  }

  // ---- steps ----------------------------------------------------------------------------------

  private async pvOf(volume: ResolvedVolume, fail: (t: string) => never): Promise<PersistentVolume> {
    if (volume.pvName === undefined) fail(`${volume.display} has no storage class: no PV can be named`);
    const pv = await this.cluster.persistentVolumes.get(volume.pvName).catch(() => undefined);
    if (!pv || pv.metadata.deletionTimestamp !== undefined)
      fail(`no PV for ${volume.display} (${volume.pvName}) exists at this point`);
    return pv;
  }

  /** Carries out a step; returns what it did, for the timeline. */
  private async apply(step: Step): Promise<string> {
    const fail: (text: string) => never = (text) => this.fail(step, text);
    const resolve = async (ref: string): Promise<ResolvedVolume> => {
      try {
        return await this.resolveVolume(ref);
      } catch (err) {
        if (err instanceof StepError) fail(err.message);
        throw err;
      }
    };
    switch (step.type) {
      case 'disk added': {
        const d = this.addDisk(step.disk, fail);
        const cap = step.disk.capacity !== undefined ? `, ${formatBinaryQuantity(step.disk.capacity)}` : '';
        const kind =
          step.disk.type === 'directory'
            ? d.mounted
              ? 'mounted filesystem'
              : 'directory, not mounted'
            : step.disk.type;
        return `${this.displayOf(d.dir, d.name, d.className)} (${kind}${cap}) at ${posix.join(d.dir, d.name)}`;
      }
      case 'disk removed': {
        const v = await resolve(step.volume);
        const known = this.disks.get(v.path);
        const info = await this.volumes.entryInfo(v.path);
        if (info.kind === 'missing' && !info.isSymlink) fail(`${v.display}: nothing at ${v.path}`);
        const mounted = (await this.volumes.mountPoints()).some((m) => m.mountPoint === v.path);
        try {
          removeEntry(this.volumes, {
            dir: v.dir,
            name: v.name,
            type: known?.type ?? (info.kind === 'directory' ? 'directory' : 'file'),
            mounted,
          });
        } catch (err) {
          fail(`cannot remove ${v.path}: ${message(err)}`);
        }
        if (known) this.disks.set(v.path, { ...known, removed: true });
        return `${v.display} removed from ${v.path}`;
      }
      case 'claim bound': {
        const v = await resolve(step.volume);
        const pv = await this.pvOf(v, fail);
        const [namespace = 'default', name = `claim-${v.name}`] = (step.claim ?? `default/claim-${v.name}`).split('/');
        await bindClaim(this.cluster, pv, namespace, name);
        return `claim ${namespace}/${name} bound to ${pv.metadata.name} (${v.display})`;
      }
      case 'claim released': {
        const v = await resolve(step.volume);
        const pv = await this.pvOf(v, fail);
        await releaseClaim(this.cluster, pv);
        const claim = pv.spec.claimRef
          ? `${pv.spec.claimRef.namespace ?? ''}/${pv.spec.claimRef.name ?? ''}`
          : 'the claim';
        return `${claim} deleted: ${pv.metadata.name} (${v.display}) is Released`;
      }
      case 'config changed': {
        await this.writeConfig(step.config, fail);
        const candidate = await loadConfig(this.configPath).catch(() => undefined);
        if (candidate) await this.ensureClassesFor(candidate.config);
        const what =
          step.config.kind === 'file'
            ? `the ConfigMap now holds ${step.config.display}`
            : `the ConfigMap's keys ${Object.keys(step.config.keys).join(', ')} changed`;
        // The watcher would notice within its debounce; the reload itself is the real one.
        const agent = this.agent;
        if (!agent) fail('no agent is running');
        const mark = this.actions.length;
        const result = await this.drive(agent.reload({ trigger: 'fs' }));
        if (result.outcome === 'applied' || result.outcome === 'rolled-back')
          this.config = agent.appliedConfig().config;
        this.recordReload(result, mark);
        return what;
      }
      case 'reload requested': {
        const agent = this.agent;
        if (!agent) fail('no agent is running');
        const mark = this.actions.length;
        const result = await this.drive(
          agent.reload({
            trigger: 'admin',
            force: step.force,
            ...(step.allow.length > 0 ? { allow: step.allow } : {}),
          }),
        );
        if (result.outcome === 'applied' || result.outcome === 'rolled-back')
          this.config = agent.appliedConfig().config;
        this.recordReload(result, mark);
        const flags = [
          ...(step.allow.length > 0 ? [`--allow ${step.allow.join(',')}`] : []),
          ...(step.force ? ['--force'] : []),
        ];
        return `the operator runs provisioner reload${flags.length > 0 ? ` ${flags.join(' ')}` : ''}`;
      }
      case 'cleanup succeeds':
      case 'cleanup fails':
      case 'cleanup is slow': {
        const v = await resolve(step.volume);
        if (step.type === 'cleanup is slow') {
          this.scripted.set(v.path, {
            result: step.then,
            durationMs: step.durationMs,
            ...(step.message !== undefined ? { message: step.message } : {}),
          });
          return `cleanups of ${v.display} take ${duration(step.durationMs)}${step.then === 'fail' ? ', then fail' : ''}`;
        }
        const behaviour =
          step.type === 'cleanup succeeds'
            ? { result: 'succeed' as const, durationMs: 0 }
            : { result: 'fail' as const, durationMs: 0, message: step.message };
        this.scripted.set(v.path, behaviour);
        const finished = this.scripted.finish(v.path, behaviour);
        const verb = step.type === 'cleanup succeeds' ? 'succeed' : `fail ("${step.message}")`;
        return finished > 0
          ? `the running cleanup of ${v.display} finishes now; cleanups of it ${verb}`
          : `cleanups of ${v.display} ${verb}`;
      }
      case 'job succeeds':
      case 'job fails': {
        const v = await resolve(step.volume);
        if (v.pvName === undefined) fail(`${v.display} has no storage class: no Job can be named`);
        const name = cleanupJobName(v.pvName);
        const job = await this.cluster.jobs.get(name, { namespace: this.settings.namespace }).catch(() => undefined);
        if (!job)
          fail(
            `no cleanup Job ${name} in namespace ${this.settings.namespace} (is useJobForCleaning on, and the volume Block?)`,
          );
        const now = new Date(this.clock.now()).toISOString();
        const status: NonNullable<Job['status']> =
          step.type === 'job succeeds'
            ? { succeeded: 1, startTime: now, completionTime: now, conditions: [{ type: 'Complete', status: 'True' }] }
            : {
                failed: 7,
                startTime: now,
                conditions: [
                  {
                    type: 'Failed',
                    status: 'True',
                    reason: 'BackoffLimitExceeded',
                    message: step.message ?? 'Job has reached the specified backoff limit',
                  },
                ],
              };
        await this.cluster.jobs.updateStatus({ ...job, status }, { namespace: this.settings.namespace });
        return `Job ${name} ${step.type === 'job succeeds' ? 'succeeded' : 'failed'}`;
      }
      case 'agent restarted':
        await this.stopAgent();
        await this.startAgent();
        return 'a new agent process (empty cleanup table), same cluster and disks';
      case 'time passes':
        return `${duration(step.durationMs)} of virtual time go by`;
      case 'check':
        return 'expectations only';
    }
  }

  // ---- expectations ---------------------------------------------------------------------------

  private async world(): Promise<WorldView> {
    const agent = this.agent;
    const pvs = (
      await this.cluster.persistentVolumes.list({ labelSelector: `${NODE_LABEL}=${nodeLabelValue(this.nodeName)}` })
    ).items.filter((pv) => pv.metadata.deletionTimestamp === undefined);
    const phaseCounts: Record<string, number> = {};
    for (const pv of pvs)
      phaseCounts[pv.status?.phase ?? 'Pending'] = (phaseCounts[pv.status?.phase ?? 'Pending'] ?? 0) + 1;
    const jobs = (await this.cluster.jobs.list({ namespace: this.settings.namespace })).items.filter(
      (j) => j.metadata.deletionTimestamp === undefined,
    );
    const events: CoreEvent[] = (await this.cluster.events.list()).items;
    const resolved = new Map<string, ResolvedVolume>();
    for (const ref of this.refsToResolve) {
      try {
        resolved.set(ref, await this.resolveVolume(ref));
      } catch (err) {
        if (!(err instanceof StepError)) throw err;
      }
    }
    const need = (ref: string): ResolvedVolume => {
      const v = resolved.get(ref);
      if (!v) throw new StepError(`expect: no volume named "${ref}"`);
      return v;
    };
    const byName = new Map(pvs.map((pv) => [pv.metadata.name, pv]));
    const skipped = agent?.generation.status().lastPass?.skipped ?? [];
    return {
      pvCount: pvs.length,
      pvPhaseCounts: phaseCounts,
      pvFields: (ref) => {
        const v = need(ref);
        const pv = v.pvName !== undefined ? byName.get(v.pvName) : undefined;
        if (!pv) return undefined;
        const fields: Record<Exclude<PvField, 'exists'>, string> = {
          phase: pv.status?.phase ?? 'Pending',
          fsType: pv.spec.local?.fsType ?? '',
          capacity: pv.spec.capacity?.['storage'] ?? '',
          class: pv.spec.storageClassName ?? '',
          volumeMode: pv.spec.volumeMode ?? 'Filesystem',
          reclaimPolicy: pv.spec.persistentVolumeReclaimPolicy ?? '',
          path: pv.spec.local?.path ?? '',
        };
        return fields;
      },
      cleanupCounts: {
        queued: agent?.cleanups.count('queued') ?? 0,
        running: agent?.cleanups.count('running') ?? 0,
        succeeded: agent?.cleanups.count('succeeded') ?? 0,
        failed: agent?.cleanups.count('failed') ?? 0,
      },
      cleaned: (ref) => {
        const v = need(ref);
        const jobs =
          v.pvName !== undefined ? this.jobsCreated.filter((j) => j === cleanupJobName(v.pvName ?? '')).length : 0;
        return (this.cleanupsByPath.get(v.path) ?? 0) + jobs;
      },
      jobCount: jobs.length,
      jobsCreated: this.jobsCreated.length,
      lastReload: this.lastReload?.outcome,
      generation: agent?.generation.number ?? 0,
      skipReason: (ref) => {
        const v = need(ref);
        const s = skipped.find((x) => x.path === v.path && !ROUTINE_SKIPS.has(x.reason));
        return s?.reason ?? 'none';
      },
      eventCount: (reason) => events.filter((e) => e.reason === reason).length,
    };
  }

  private refsToResolve: string[] = [];

  private async check(step: Step): Promise<ExpectationResult[]> {
    if (!step.expect) return [];
    const e = step.expect;
    this.refsToResolve = [...e.pv.map((p) => p.volume), ...Object.keys(e.cleaned), ...Object.keys(e.skipped)];
    try {
      return evaluateExpectations(e, await this.world());
    } catch (err) {
      if (err instanceof StepError) this.fail(step, err.message);
      throw err;
    }
  }

  // ---- the run --------------------------------------------------------------------------------

  private finishStep(report: Omit<StepReport, 'actions'>): void {
    this.steps.push({ ...report, actions: this.actions });
    this.actions = [];
  }

  async run(): Promise<ScenarioReport> {
    try {
      await this.setup();
      await this.startAgent();
      this.finishStep({
        index: 0,
        type: 'start',
        at: 0,
        summary: `node ${this.nodeName}: ${plural([...this.disks.values()].filter((d) => d.removed !== true).length, 'disk')}, ${plural(Object.keys(this.config.storageClassMap).length, 'class', 'classes')} configured`,
        expectations: [],
      });
      for (const step of this.scenario.steps) {
        const at = this.now();
        const summary = await this.apply(step);
        await this.settle();
        if (step.type === 'time passes') await this.advance(step.durationMs);
        else if (step.type !== 'check') await this.advance(this.settings.reactionMs);
        const expectations = await this.check(step);
        this.finishStep({
          index: step.index,
          type: step.type,
          at,
          summary,
          ...(step.note !== undefined ? { note: step.note } : {}),
          expectations,
        });
      }
      return await this.report();
    } finally {
      await this.teardown();
    }
  }

  private async report(): Promise<ScenarioReport> {
    const all = this.steps.flatMap((s) => s.expectations);
    const failed = all.filter((e) => !e.ok).length;
    const pvs = (
      await this.cluster.persistentVolumes.list({ labelSelector: `${NODE_LABEL}=${nodeLabelValue(this.nodeName)}` })
    ).items;
    const agent = this.agent;
    return {
      name: this.scenario.name,
      file: this.scenario.file,
      ...(this.scenario.description !== undefined ? { description: this.scenario.description } : {}),
      node: this.nodeName,
      settings: this.settings,
      steps: this.steps,
      expectations: { total: all.length, failed },
      passed: failed === 0,
      final: {
        at: this.now(),
        generation: agent?.generation.number ?? 0,
        configHash: agent?.appliedConfig().hash ?? '',
        persistentVolumes: pvs
          .map((pv) => ({
            pv: pv.metadata.name,
            volume: `${pv.spec.storageClassName ?? ''}/${posix.basename(pv.spec.local?.path ?? '')}`,
            phase: pv.metadata.deletionTimestamp !== undefined ? 'Terminating' : (pv.status?.phase ?? 'Pending'),
            capacity: pv.spec.capacity?.['storage'] ?? '',
          }))
          .sort((a, b) => (a.volume < b.volume ? -1 : a.volume > b.volume ? 1 : 0)),
        cleanups: (agent?.cleanups.list() ?? []).map((c) => ({ pv: c.pvName, method: c.method, state: c.state })),
      },
    };
  }

  private async teardown(): Promise<void> {
    try {
      await this.stopAgent().catch(() => undefined);
    } finally {
      this.worldStop.abort();
      await Promise.allSettled(this.controllers);
      if (this.tmp !== '') await rm(this.tmp, { recursive: true, force: true });
    }
  }
}

/** Replays a scenario with the real agent on a virtual clock. Nothing outside a temp directory is touched. */
export function runScenario(scenario: Scenario, options: ScenarioRunOptions = {}): Promise<ScenarioReport> {
  return new ScenarioRun(scenario, options).run();
}
