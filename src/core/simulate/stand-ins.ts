// The stand-ins simulate hands to the real agent code in place of what would change the world:
// - PlanningCluster: reads go to a ReadOnlyCluster; writes are recorded as intentions and never
//   forwarded (and the read-only layer underneath would refuse them anyway);
// - RecordingCleaner: records the cleanup it was asked for and never runs anything;
// - ScriptedCleaner (scenarios): per-volume outcome and duration on the virtual clock;
// - RecordingEvents: the Kubernetes Events the agent would record.
import type { Clock } from '../clock.js';
import type { CleanOptions, FilesystemCleanResult, VolumeCleaner } from '../cleanup/cleaner.js';
import { CleanerFailedError } from '../cleanup/cleaner.js';
import type { Cluster, DeleteOptions, NamespaceOption, ResourceClient } from '../kube/cluster.js';
import { objectName } from '../kube/cluster.js';
import type { EventSink } from '../kube/events.js';
import type { ObjectReference } from '../kube/objects.js';
import type { ReadOnlyCluster, WriteVerb } from '../kube/read-only-cluster.js';

export interface IntendedWrite {
  readonly verb: WriteVerb;
  readonly resource: string;
  readonly name: string;
  readonly namespace?: string;
  /** The object sent by create/update/updateStatus. */
  readonly object?: unknown;
  /** The merge patch sent by patch. */
  readonly patch?: unknown;
}

/** Reads through; writes are recorded and answered as the server would, without sending anything. */
export type PlanningCluster = Cluster & { readonly writes: readonly IntendedWrite[] };

/** Only a read-only cluster can be planned against: nothing can reach the real one. */
export function planningCluster(inner: ReadOnlyCluster): PlanningCluster {
  const writes: IntendedWrite[] = [];
  const wrap = <T>(client: ResourceClient<T>, resource: string): ResourceClient<T> => planned(client, resource, writes);
  return {
    writes,
    persistentVolumes: wrap(inner.persistentVolumes, 'persistentvolumes'),
    storageClasses: wrap(inner.storageClasses, 'storageclasses'),
    nodes: wrap(inner.nodes, 'nodes'),
    events: wrap(inner.events, 'events'),
    jobs: wrap(inner.jobs, 'jobs'),
    configMaps: wrap(inner.configMaps, 'configmaps'),
  };
}

function planned<T>(inner: ResourceClient<T>, resource: string, writes: IntendedWrite[]): ResourceClient<T> {
  const record = (
    verb: WriteVerb,
    name: string,
    options: NamespaceOption | DeleteOptions | undefined,
    extra: { object?: unknown; patch?: unknown },
  ): void => {
    writes.push({
      verb,
      resource,
      name,
      ...(options?.namespace !== undefined ? { namespace: options.namespace } : {}),
      ...extra,
    });
  };
  const answer = (object: T): T => {
    const copy = structuredClone(object) as T & { metadata?: Record<string, unknown> };
    if (copy.metadata) copy.metadata = { ...copy.metadata, uid: 'simulated', resourceVersion: '0' };
    return copy;
  };
  return {
    get: (name, options) => inner.get(name, options),
    list: (options) => inner.list(options),
    listMetadata: (options) => inner.listMetadata(options),
    watch: (options) => inner.watch(options),
    create: (object, options) => {
      record('create', objectName(object) ?? '?', options, { object: structuredClone(object) });
      return Promise.resolve(answer(object));
    },
    update: (object, options) => {
      record('update', objectName(object) ?? '?', options, { object: structuredClone(object) });
      return Promise.resolve(answer(object));
    },
    updateStatus: (object, options) => {
      record('updateStatus', objectName(object) ?? '?', options, { object: structuredClone(object) });
      return Promise.resolve(answer(object));
    },
    patch: async (name, patch, options) => {
      record('patch', name, options, { patch: structuredClone(patch) });
      return answer(await inner.get(name, options));
    },
    delete: (name, options) => {
      record('delete', name, options, {});
      return Promise.resolve();
    },
  };
}

export interface RecordedCleanup {
  readonly kind: 'block' | 'filesystem';
  readonly path: string;
  readonly command?: readonly string[];
  readonly at: number;
}

/** Never runs anything: records the cleanup and reports success at once. */
export class RecordingCleaner implements VolumeCleaner {
  readonly calls: RecordedCleanup[] = [];
  constructor(private readonly clock: Clock) {}

  cleanBlock(device: string, command: readonly string[]): Promise<void> {
    this.calls.push({ kind: 'block', path: device, command: [...command], at: this.clock.now() });
    return Promise.resolve();
  }

  cleanFilesystem(path: string): Promise<FilesystemCleanResult> {
    this.calls.push({ kind: 'filesystem', path, at: this.clock.now() });
    return Promise.resolve({ removed: 0, skippedMounts: [] });
  }
}

export interface CleanupBehaviour {
  readonly result: 'succeed' | 'fail';
  /** Virtual time a cleanup takes; Infinity: until a step finishes it. */
  readonly durationMs: number;
  readonly message?: string;
}

const INSTANT_SUCCESS: CleanupBehaviour = { result: 'succeed', durationMs: 0 };

/** A scenario's cleaner: outcome and duration per volume path, on the virtual clock. */
export class ScriptedCleaner implements VolumeCleaner {
  readonly calls: RecordedCleanup[] = [];
  private readonly behaviour = new Map<string, CleanupBehaviour>();
  private readonly running = new Map<string, Set<(outcome: CleanupBehaviour) => void>>();

  constructor(private readonly clock: Clock) {}

  /** How cleanups of path started from now on behave. */
  set(path: string, behaviour: CleanupBehaviour): void {
    this.behaviour.set(path, behaviour);
  }

  /** Ends the cleanups of path running now with this outcome; returns how many there were. */
  finish(path: string, outcome: CleanupBehaviour): number {
    const waiting = this.running.get(path);
    if (!waiting) return 0;
    this.running.delete(path);
    for (const done of waiting) done(outcome);
    return waiting.size;
  }

  isRunning(path: string): boolean {
    return (this.running.get(path)?.size ?? 0) > 0;
  }

  private async run(path: string, options: CleanOptions): Promise<void> {
    const planned = this.behaviour.get(path) ?? INSTANT_SUCCESS;
    let outcome = planned;
    if (planned.durationMs > 0) {
      const timer = new AbortController();
      const stop = (): void => {
        timer.abort();
      };
      options.signal.addEventListener('abort', stop, { once: true });
      let release: (o: CleanupBehaviour) => void = () => undefined;
      const finished = new Promise<CleanupBehaviour>((resolve) => {
        release = resolve;
      });
      const set = this.running.get(path) ?? new Set();
      set.add(release);
      this.running.set(path, set);
      try {
        outcome = await Promise.race([
          finished,
          Number.isFinite(planned.durationMs)
            ? this.clock.sleep(planned.durationMs, timer.signal).then(
                () => planned,
                () => new Promise<CleanupBehaviour>(() => undefined),
              )
            : new Promise<CleanupBehaviour>(() => undefined),
          new Promise<CleanupBehaviour>((_, reject) => {
            timer.signal.addEventListener(
              'abort',
              () => {
                reject(new CleanerFailedError('aborted: the agent stopped'));
              },
              { once: true },
            );
          }),
        ]);
      } finally {
        set.delete(release);
        if (set.size === 0 && this.running.get(path) === set) this.running.delete(path);
        options.signal.removeEventListener('abort', stop);
        timer.abort();
      }
    }
    if (outcome.result === 'fail') throw new CleanerFailedError(outcome.message ?? 'the cleaner failed');
  }

  async cleanBlock(device: string, command: readonly string[], options: CleanOptions): Promise<void> {
    this.calls.push({ kind: 'block', path: device, command: [...command], at: this.clock.now() });
    await this.run(device, options);
  }

  async cleanFilesystem(path: string, options: CleanOptions): Promise<FilesystemCleanResult> {
    this.calls.push({ kind: 'filesystem', path, at: this.clock.now() });
    await this.run(path, options);
    return { removed: 0, skippedMounts: [] };
  }
}

export interface RecordedEvent {
  readonly object: ObjectReference;
  readonly type: 'Normal' | 'Warning';
  readonly reason: string;
  readonly message: string;
}

export class RecordingEvents implements EventSink {
  readonly events: RecordedEvent[] = [];
  record(object: ObjectReference, type: 'Normal' | 'Warning', reason: string, message: string): void {
    this.events.push({ object, type, reason, message });
  }
}
