// How a replay sees what the agent does without changing it: its API writes (forwarded to the
// in-memory cluster unchanged), its cleanups (the scripted cleaner, with start and end reported)
// and its logs (stamped with virtual time); and which of those make a timeline event.
import { posix } from 'node:path';
import type { CleanOptions, FilesystemCleanResult, VolumeCleaner } from '../cleanup/cleaner.js';
import type { Clock } from '../clock.js';
import type { Cluster, ResourceClient } from '../kube/cluster.js';
import type { Job, Node, PersistentVolume } from '../kube/objects.js';
import type { LogFields, Logger, LogLevel } from '../log.js';
import { errorMessage } from '../unknown-values.js';
import type { TimelineEvent } from './report.js';
import type { ScriptedCleaner } from './stand-ins.js';

/** A write the agent made: the object the server answered, or the name it deleted. */
export type ObservedWrite<T> =
  | { readonly verb: 'create' | 'update' | 'updateStatus' | 'patch'; readonly object: T }
  | { readonly verb: 'delete'; readonly name: string };

export interface WriteObservers {
  readonly persistentVolumes: (write: ObservedWrite<PersistentVolume>) => void;
  readonly jobs: (write: ObservedWrite<Job>) => void;
  readonly nodes: (write: ObservedWrite<Node>) => void;
}

function observed<T>(
  client: ResourceClient<T>,
  on: (write: ObservedWrite<T>) => void = () => undefined,
): ResourceClient<T> {
  return {
    get: (name, options) => client.get(name, options),
    list: (options) => client.list(options),
    listMetadata: (options) => client.listMetadata(options),
    watch: (options) => client.watch(options),
    create: async (object, options) => {
      const r = await client.create(object, options);
      if (options?.dryRun !== true) on({ verb: 'create', object: r });
      return r;
    },
    update: async (object, options) => {
      const r = await client.update(object, options);
      on({ verb: 'update', object: r });
      return r;
    },
    updateStatus: async (object, options) => {
      const r = await client.updateStatus(object, options);
      on({ verb: 'updateStatus', object: r });
      return r;
    },
    patch: async (name, patch, options) => {
      const r = await client.patch(name, patch, options);
      on({ verb: 'patch', object: r });
      return r;
    },
    delete: async (name, options) => {
      await client.delete(name, options);
      on({ verb: 'delete', name });
    },
  };
}

/** The cluster the agent is handed: every write reaches `inner`, those of PVs, Jobs and Nodes are observed. */
export function tapCluster(inner: Cluster, on: WriteObservers): Cluster {
  // Every resource goes through the same wrapper, so all writes take the same number of steps.
  return {
    persistentVolumes: observed(inner.persistentVolumes, on.persistentVolumes),
    storageClasses: observed(inner.storageClasses),
    nodes: observed(inner.nodes, on.nodes),
    events: observed(inner.events),
    jobs: observed(inner.jobs, on.jobs),
    configMaps: observed(inner.configMaps),
  };
}

export type CleanerEvent = 'started' | 'succeeded' | 'failed' | 'interrupted';

/** The scripted cleaner, with start and end of every cleanup reported. */
export class TappedCleaner implements VolumeCleaner {
  constructor(
    readonly inner: ScriptedCleaner,
    private readonly on: (
      event: CleanerEvent,
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
      this.on(options.signal.aborted ? 'interrupted' : 'failed', path, { error: errorMessage(err) });
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

export interface LogRecord {
  readonly at: number;
  readonly level: LogLevel;
  readonly message: string;
  readonly fields: LogFields;
}

/** Logs of the agent, stamped with the clock's time. */
export class TimedLogger implements Logger {
  readonly records: LogRecord[] = [];
  onRecord: (record: LogRecord) => void = () => undefined;
  constructor(private readonly clock: Clock) {}
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

/** `class/entry` of a PV's volume. */
export function volumeOfPV(pv: PersistentVolume): string {
  return `${pv.spec.storageClassName ?? ''}/${posix.basename(pv.spec.local?.path ?? '')}`;
}

/** The timeline event of a PV write, if it makes one. */
export function pvWriteEvent(write: ObservedWrite<PersistentVolume>): TimelineEvent | undefined {
  if (write.verb === 'delete') return { type: 'pv-deleted', pv: write.name };
  const pv = write.object;
  if (write.verb === 'create') {
    const capacity = pv.spec.capacity?.['storage'];
    const fsType = pv.spec.local?.fsType;
    return {
      type: 'pv-created',
      pv: pv.metadata.name,
      volume: volumeOfPV(pv),
      ...(capacity !== undefined ? { capacity } : {}),
      volumeMode: pv.spec.volumeMode ?? 'Filesystem',
      ...(fsType !== undefined ? { fsType } : {}),
    };
  }
  if (write.verb === 'patch') return { type: 'pv-adopted', pv: pv.metadata.name };
  return undefined;
}

/** The timeline event of a Job write, if it makes one. */
export function jobWriteEvent(write: ObservedWrite<Job>): TimelineEvent | undefined {
  if (write.verb === 'delete') return { type: 'job-deleted', job: write.name };
  if (write.verb !== 'create') return undefined;
  const job = write.object;
  const container = job.spec?.template.spec.containers[0];
  const device = job.metadata.annotations?.['device'];
  const pv = job.metadata.labels?.['pv'];
  const image = container?.image;
  return {
    type: 'job-created',
    job: job.metadata.name,
    ...(pv !== undefined ? { pv } : {}),
    command: container?.command ?? [],
    ...(device !== undefined ? { device } : {}),
    ...(image !== undefined ? { image } : {}),
  };
}

/** The timeline event of a Node write: the agent removed its start-up taint. */
export function nodeWriteEvent(write: ObservedWrite<Node>): TimelineEvent | undefined {
  return write.verb === 'patch' || write.verb === 'update'
    ? { type: 'node-updated', node: write.object.metadata.name }
    : undefined;
}

/** The timeline event of an agent log record, if it is worth one; `volumeAt` names a volume by its path. */
export function logEvent(
  r: LogRecord,
  volumeAt: (path: string, className: string | undefined) => string,
): TimelineEvent | undefined {
  const f = r.fields;
  const str = (k: string): string => {
    const v = f[k];
    return typeof v === 'string' ? v : v === undefined ? '' : JSON.stringify(v);
  };
  if (r.message === 'discovery skipped an entry')
    return {
      type: 'skipped',
      volume: volumeAt(str('path'), str('storageClass') || undefined),
      reason: str('reason'),
      detail: str('detail'),
    };
  if (r.message === 'discovery failed for a storage class')
    return { type: 'class-problem', storageClass: str('storageClass'), detail: str('detail') };
  if (r.message === 'cleanup could not start') return { type: 'cleanup-failed', pv: str('pv'), error: str('error') };
  if ((r.level === 'warn' || r.level === 'error') && !QUIET_LOGS.has(r.message)) {
    const pv = str('pv');
    const fields = Object.fromEntries(Object.entries(f).filter(([k]) => k !== 'pv' && k !== 'reason'));
    return { type: 'log', level: r.level, ...(pv !== '' ? { pv } : {}), message: r.message, fields };
  }
  return undefined;
}
