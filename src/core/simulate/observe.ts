// How a replay sees what the agent does without changing it: its API writes (forwarded to the
// in-memory cluster unchanged), its cleanups (the scripted cleaner, with start and end reported)
// and its logs (stamped with virtual time); and which of those make a timeline event. The one
// thing the agent is shown differently is its Node's UID: a fixed one, so replays are the same.
import { posix } from 'node:path';
import type { CleanOptions, FilesystemCleanResult, VolumeCleaner } from '../cleanup/cleaner.js';
import type { Clock } from '../clock.js';
import type { Cluster, ResourceClient, WatchEvent } from '../kube/cluster.js';
import type { Job, Node, PersistentVolume } from '../kube/objects.js';
import type { LogFields, Logger, LogLevel } from '../log.js';
import { NODE_LABEL } from '../pv/naming.js';
import { isRecord } from '../unknown-values.js';
import { errorMessage } from '../unknown-values.js';
import type { TimelineEvent } from './report.js';
import type { ScriptedCleaner } from './stand-ins.js';

/** A write the agent made: the object the server answered (and a patch's body), or the name it deleted. */
export type ObservedWrite<T> =
  | { readonly verb: 'create' | 'update' | 'updateStatus'; readonly object: T }
  | { readonly verb: 'patch'; readonly object: T; readonly patch?: unknown }
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
      on({ verb: 'patch', object: r, patch });
      return r;
    },
    delete: async (name, options) => {
      await client.delete(name, options);
      on({ verb: 'delete', name });
    },
  };
}

/**
 * The UIDs the agent sees for Nodes. The in-memory server gives every object a random UID; the
 * replay shows the agent a fixed one per Node object (a cluster fixture's own, or one derived from
 * the name and how many times the Node was registered), so what the agent records and says about
 * its Node (the PVs' node-uid annotation, identity messages) is the same on every replay.
 */
export class NodeUids {
  private readonly shownOf = new Map<string, string>();
  private readonly realOf = new Map<string, string>();

  /** From now on, the Node object whose UID is `real` shows as `shown`. */
  set(real: string, shown: string): void {
    this.shownOf.set(real, shown);
    this.realOf.set(shown, real);
  }

  shown(real: string): string {
    return this.shownOf.get(real) ?? real;
  }

  real(shown: string): string {
    return this.realOf.get(shown) ?? shown;
  }

  private withUid<T>(object: T, map: (uid: string) => string): T {
    const metadata = (object as { metadata?: { uid?: string } }).metadata;
    if (metadata?.uid === undefined) return object;
    const uid = map(metadata.uid);
    return uid === metadata.uid ? object : { ...object, metadata: { ...metadata, uid } };
  }

  /** The Nodes client with UIDs translated: shown in what comes back, real in what goes to the server. */
  client<T>(inner: ResourceClient<T>): ResourceClient<T> {
    const out = (o: T): T => this.withUid(o, (uid) => this.shown(uid));
    const inward = (o: T): T => this.withUid(o, (uid) => this.real(uid));
    const watch = (options: Parameters<ResourceClient<T>['watch']>[0]): AsyncIterable<WatchEvent<T>> => {
      const events = inner.watch(options);
      return {
        [Symbol.asyncIterator]: async function* () {
          for await (const ev of events) yield ev.type === 'BOOKMARK' ? ev : { ...ev, object: out(ev.object) };
        },
      };
    };
    return {
      get: async (name, options) => out(await inner.get(name, options)),
      list: async (options) => {
        const list = await inner.list(options);
        return { ...list, items: list.items.map(out) };
      },
      listMetadata: async (options) => {
        const list = await inner.listMetadata(options);
        return { ...list, items: list.items.map((i) => this.withUid(i, (uid) => this.shown(uid))) };
      },
      watch,
      create: async (object, options) => out(await inner.create(object, options)),
      update: async (object, options) => out(await inner.update(inward(object), options)),
      updateStatus: async (object, options) => out(await inner.updateStatus(inward(object), options)),
      patch: async (name, patch, options) =>
        out(
          await inner.patch(
            name,
            this.withUid(patch, (uid) => this.real(uid)),
            options,
          ),
        ),
      delete: (name, options) => inner.delete(name, options),
    };
  }
}

/**
 * The cluster the agent is handed: every write reaches `inner`, those of PVs, Jobs and Nodes are
 * observed; Node UIDs are translated by `nodeUids` when given.
 */
export function tapCluster(inner: Cluster, on: WriteObservers, nodeUids?: NodeUids): Cluster {
  // Every resource goes through the same wrapper, so all writes take the same number of steps.
  return {
    persistentVolumes: observed(inner.persistentVolumes, on.persistentVolumes),
    storageClasses: observed(inner.storageClasses),
    nodes: observed(nodeUids ? nodeUids.client(inner.nodes) : inner.nodes, on.nodes),
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
  if (write.verb === 'patch')
    return patchSetsNodeLabel(write.patch) ? { type: 'pv-adopted', pv: pv.metadata.name } : undefined;
  return undefined;
}

/**
 * Whether a PV patch is the adoption's (it sets the node label), not the one recording a disk
 * identity (annotations alone: the agent's log record makes that line). An unknown patch counts.
 */
function patchSetsNodeLabel(patch: unknown): boolean {
  if (patch === undefined) return true;
  const metadata = isRecord(patch) ? patch['metadata'] : undefined;
  const labels = isRecord(metadata) ? metadata['labels'] : undefined;
  return isRecord(labels) && NODE_LABEL in labels;
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
  volumeOfPv: (pv: string) => string | undefined = () => undefined,
): TimelineEvent | undefined {
  const f = r.fields;
  const str = (k: string): string => {
    const v = f[k];
    return typeof v === 'string' ? v : v === undefined ? '' : JSON.stringify(v);
  };
  const pvRef = (): { pv: string; volume?: string } => {
    const volume = volumeOfPv(str('pv'));
    return { pv: str('pv'), ...(volume !== undefined ? { volume } : {}) };
  };
  // The identity check's report (Reclaimer.verifyIdentity): the message is the Warning Event's text.
  if (r.fields['reason'] === 'VolumeIdentityMismatch') return { type: 'quarantined', ...pvRef(), message: r.message };
  if (r.message === 'disk identity accepted')
    return { type: 'identity-accepted', ...pvRef(), identity: str('identity') };
  if (r.message === 'disk identity recorded')
    return { type: 'identity-recorded', ...pvRef(), identity: str('identity') };
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
  // Disks by rule: a device's verdict, said once (DeviceRules.report: the Node Event's text).
  if (typeof f['device'] === 'string' && r.message.startsWith('Device /dev/'))
    return {
      type: 'device',
      device: f['device'],
      storageClass: str('storageClass'),
      level: r.level,
      message: r.message,
    };
  if ((r.level === 'warn' || r.level === 'error') && !QUIET_LOGS.has(r.message)) {
    const pv = str('pv');
    const fields = Object.fromEntries(Object.entries(f).filter(([k]) => k !== 'pv' && k !== 'reason'));
    return { type: 'log', level: r.level, ...(pv !== '' ? { pv } : {}), message: r.message, fields };
  }
  return undefined;
}
