// An in-memory Cluster that behaves like a bare kube-apiserver (no controllers) for every
// operation of the port: one global resourceVersion counter, uids, creation and deletion
// timestamps, finalizers, optimistic concurrency, the status subresource, JSON merge patch,
// consistent paginated lists, and watches that replay retained history and answer a compacted
// resourceVersion with 410 Gone. The contract suite (test/contract/cluster-contract.ts) runs the
// same tests against this and against a real apiserver.
import { randomBytes, randomUUID } from 'node:crypto';
import { isAborted, systemClock, type Clock } from '../../clock.js';
import { errorMessage, isRecord } from '../../unknown-values.js';
import {
  ClusterClients,
  KubeApiError,
  type DeleteOptions,
  type ListOptions,
  type NamespaceOption,
  type ResourceClient,
  type ResourceName,
  type ResourceObjects,
  type WatchEvent,
  type WatchOptions,
} from '../cluster.js';
import { LabelSelectorError, everything, parseLabelSelector, type LabelSelector } from '../label-selector.js';
import { refuseProjection } from '../objects.js';
import type { ObjectList, ObjectMeta } from '../objects.js';
import { jsonEqual, objectAt, stringAt, type JsonObject } from './json.js';
import { DecodeError, qualifiedKind, qualifiedResource, STRATEGIES, type KindStrategy } from './strategies.js';
import { aggregate, goQuote, labelValueErrors, qualifiedNameErrors } from '../validation.js';
import { fieldError, formatFieldError, type FieldError } from './field-errors.js';

export interface MemoryClusterOptions {
  /** Timestamps and watch timeouts. Default: the system clock. */
  readonly clock?: Clock;
  /**
   * How many changes the watch history retains (default 10 000). A watch or a list continuation
   * from a resourceVersion older than the retained window fails with 410 Gone, as on a real server
   * after etcd compaction.
   */
  readonly historyLimit?: number;
  /** Namespaces that exist (default: default, kube-system, kube-public, kube-node-lease). */
  readonly namespaces?: readonly string[];
  /**
   * Keep at most this many Events, deleting the oldest (default: no limit). A real apiserver
   * expires Events after --event-ttl (1 h); a long-lived in-memory cluster in the agent's own
   * process (the sandbox) would otherwise keep every reload's Event in the agent's heap.
   */
  readonly eventLimit?: number;
}

const DEFAULT_HISTORY_LIMIT = 10_000;
const DEFAULT_NAMESPACES = ['default', 'kube-system', 'kube-public', 'kube-node-lease'];
const STANDARD_FINALIZERS = ['kubernetes', 'orphan', 'foregroundDeletion'];
const ANNOTATIONS_MAX_BYTES = 256 * 1024;

type ChangeType = 'ADDED' | 'MODIFIED' | 'DELETED';

interface Change {
  readonly rv: number;
  readonly strategy: KindStrategy;
  readonly key: string;
  readonly namespace: string | undefined;
  readonly type: ChangeType;
  /** The object after the change (for DELETED: its last state, with the delete's resourceVersion). */
  readonly object: JsonObject;
  /** The object before the change (undefined for ADDED). */
  readonly previous: JsonObject | undefined;
}

interface Watcher {
  readonly strategy: KindStrategy;
  readonly namespace: string | undefined;
  readonly selector: LabelSelector;
  readonly fields: FieldSelector;
  readonly allowBookmarks: boolean;
  readonly queue: WatchEvent<JsonObject>[];
  wake: (() => void) | undefined;
}

const CONTINUE_VERSION = 'meta.k8s.io/v1';

function timestamp(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

function metadataOf(object: JsonObject): JsonObject {
  const metadata = object['metadata'];
  if (isRecord(metadata)) return metadata;
  const created: JsonObject = {};
  object['metadata'] = created;
  return created;
}

/** A deep copy without apiVersion and kind. */
function withoutTypeMeta(object: JsonObject): JsonObject {
  const copy = structuredClone(object);
  delete copy['apiVersion'];
  delete copy['kind'];
  return copy;
}

function labelsOf(object: JsonObject): Record<string, string> {
  const labels = objectAt(object, 'metadata', 'labels') ?? {};
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(labels)) if (typeof v === 'string') out[k] = v;
  return out;
}

function finalizersOf(object: JsonObject): string[] {
  const finalizers = metadataOf(object)['finalizers'];
  return Array.isArray(finalizers) ? finalizers.filter((f): f is string => typeof f === 'string') : [];
}

function setFinalizers(object: JsonObject, finalizers: readonly string[]): void {
  const metadata = metadataOf(object);
  if (finalizers.length === 0) delete metadata['finalizers'];
  else metadata['finalizers'] = [...finalizers];
}

/** RFC 7386 JSON merge patch. */
export function applyMergePatch(target: unknown, patch: unknown): unknown {
  if (!isRecord(patch)) return structuredClone(patch);
  const result: JsonObject = isRecord(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) {
      Reflect.deleteProperty(result, key);
    } else {
      Object.defineProperty(result, key, {
        value: applyMergePatch(result[key], value),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
  }
  return result;
}

function parseResourceVersion(value: string, what: string): number {
  if (!/^\d+$/.test(value)) {
    throw new KubeApiError(
      500,
      'InternalError',
      `${what}: Invalid value: ${goQuote(value)}: strconv.ParseUint: parsing ${goQuote(value)}: invalid syntax`,
    );
  }
  return Number(value);
}

function parseSelector(text: string | undefined): LabelSelector {
  if (text === undefined || text === '') return everything;
  try {
    return parseLabelSelector(text);
  } catch (error) {
    if (error instanceof LabelSelectorError) throw new KubeApiError(400, 'BadRequest', error.message);
    throw error;
  }
}

/** A field selector of `metadata.name` / `metadata.namespace` terms, the fields every resource supports. */
type FieldSelector = (object: JsonObject) => boolean;

function parseFieldSelector(text: string | undefined): FieldSelector {
  if (text === undefined || text.trim() === '') return () => true;
  const terms = text.split(',').map((term) => {
    const match = /^\s*([^=!\s]+)\s*(==|=|!=)\s*([^,]*?)\s*$/u.exec(term);
    const field = match?.[1];
    if (match === null || field === undefined) {
      throw new KubeApiError(400, 'BadRequest', `invalid field selector: ${goQuote(term)}`);
    }
    if (field !== 'metadata.name' && field !== 'metadata.namespace') {
      throw new KubeApiError(400, 'BadRequest', `field label not supported: ${field}`);
    }
    const key = field === 'metadata.name' ? 'name' : 'namespace';
    const value = match[3] ?? '';
    const equal = match[2] !== '!=';
    return (object: JsonObject): boolean => ((stringAt(object, 'metadata', key) ?? '') === value) === equal;
  });
  return (object) => terms.every((matches) => matches(object));
}

function encodeContinue(rv: number, start: string): string {
  return Buffer.from(JSON.stringify({ v: CONTINUE_VERSION, rv, start: `${start}\u0000` })).toString('base64url');
}

function decodeContinue(token: string): { rv: number; after: string } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(token, 'base64url').toString('utf8'));
  } catch (error) {
    throw new KubeApiError(
      400,
      'BadRequest',
      `invalid continue token: continue key is not valid: ${errorMessage(error)}`,
    );
  }
  const rv = isRecord(parsed) ? parsed['rv'] : undefined;
  const start = isRecord(parsed) ? parsed['start'] : undefined;
  if (!isRecord(parsed) || parsed['v'] !== CONTINUE_VERSION || typeof rv !== 'number' || typeof start !== 'string') {
    throw new KubeApiError(400, 'BadRequest', 'invalid continue token: continue key is not valid');
  }
  // Keys after `start` (which ends in \0, the smallest key after the last one returned).
  return { rv, after: start.endsWith('\u0000') ? start.slice(0, -1) : start };
}

type UpdateTarget = 'main' | 'status' | 'patch';

/** One update as the preconditions see it. */
interface UpdateWrite {
  readonly namespace: string | undefined;
  readonly name: string;
  readonly object: JsonObject;
  readonly old: JsonObject;
  readonly target: UpdateTarget;
}

/**
 * What the server owns stays as stored: uid, creationTimestamp and generation. An update can never
 * remove or change a deletion timestamp (rest.BeforeUpdate), nor set one: the errors of a try.
 */
function keepServerMetadata(object: JsonObject, old: JsonObject): FieldError[] {
  const metadata = metadataOf(object);
  const oldMetadata = metadataOf(old);
  metadata['uid'] = stringAt(oldMetadata, 'uid') ?? '';
  metadata['creationTimestamp'] = oldMetadata['creationTimestamp'];
  if (oldMetadata['generation'] === undefined) delete metadata['generation'];
  else metadata['generation'] = oldMetadata['generation'];
  const errors: FieldError[] = [];
  for (const field of ['deletionTimestamp', 'deletionGracePeriodSeconds'] as const) {
    if (oldMetadata[field] !== undefined) {
      metadata[field] = oldMetadata[field];
    } else if (metadata[field] !== undefined) {
      errors.push(fieldError.invalid(`metadata.${field}`, metadata[field], 'field is immutable'));
    }
  }
  return errors;
}

/** The in-memory apiserver. */
export class MemoryCluster extends ClusterClients {
  private readonly clock: Clock;
  private readonly historyLimit: number;
  private readonly eventLimit: number;
  private readonly namespaceSet: Set<string>;
  private readonly stores = new Map<KindStrategy, Map<string, JsonObject>>();
  private history: Change[] = [];
  private rv = 1;
  /** Watches and continuations must start at or after this resourceVersion. */
  private compactedRv = 1;
  private readonly watchers = new Set<Watcher>();

  constructor(options: MemoryClusterOptions = {}) {
    super();
    this.clock = options.clock ?? systemClock;
    this.historyLimit = Math.max(0, options.historyLimit ?? DEFAULT_HISTORY_LIMIT);
    this.eventLimit = Math.max(0, options.eventLimit ?? Infinity);
    this.namespaceSet = new Set(options.namespaces ?? DEFAULT_NAMESPACES);
  }

  /** The current (latest) resourceVersion. */
  get resourceVersion(): string {
    return String(this.rv);
  }

  /** Open watches (for leak checks in tests). */
  get activeWatches(): number {
    return this.watchers.size;
  }

  /**
   * Forgets the change history up to `resourceVersion` (default: everything so far), as etcd
   * compaction does: watches and list continuations from an older resourceVersion fail with 410.
   */
  compact(resourceVersion?: string): void {
    const upTo = resourceVersion === undefined ? this.rv : Math.min(this.rv, Number(resourceVersion));
    if (!Number.isFinite(upTo) || upTo <= this.compactedRv) return;
    this.compactedRv = upTo;
    this.history = this.history.filter((change) => change.rv > upTo);
  }

  /** Sends a BOOKMARK with the current resourceVersion to every watch that allows bookmarks. */
  sendBookmarks(): void {
    for (const watcher of this.watchers) {
      if (!watcher.allowBookmarks) continue;
      watcher.queue.push({ type: 'BOOKMARK', resourceVersion: this.resourceVersion });
      watcher.wake?.();
    }
  }

  /** Makes a namespace exist (namespaced objects can only be created in existing namespaces). */
  addNamespace(name: string): void {
    this.namespaceSet.add(name);
  }

  // -------------------------------------------------------------------------------------------

  protected client<K extends ResourceName>(resource: K): ResourceClient<ResourceObjects[K]> {
    return this.resourceClient<ResourceObjects[K]>(STRATEGIES[resource]);
  }

  /** Closures only: this runs from ClusterClients' field initialisers, before this constructor. */
  private resourceClient<T>(strategy: KindStrategy): ResourceClient<T> {
    // The port's object types are JSON shapes: they travel through here as plain JSON objects.
    const out = (object: JsonObject): T => object as unknown as T;
    const input = (object: T): JsonObject => {
      if (!isRecord(object)) throw new KubeApiError(400, 'BadRequest', 'the request body must be a JSON object');
      refuseProjection(object);
      return structuredClone(object);
    };
    return {
      get: (name, options) => Promise.resolve().then(() => out(this.get(strategy, name, options))),
      list: (options) => Promise.resolve().then(() => this.list(strategy, options) as unknown as ObjectList<T>),
      listMetadata: (options) =>
        Promise.resolve().then(() => {
          const full = this.list(strategy, options) as unknown as ObjectList<{ metadata: ObjectMeta }>;
          return { metadata: full.metadata, items: full.items.map((item) => ({ metadata: item.metadata })) };
        }),
      watch: (options) => this.watch(strategy, options) as AsyncIterable<WatchEvent<T>>,
      create: (object, options) => Promise.resolve().then(() => out(this.create(strategy, input(object), options))),
      update: (object, options) =>
        Promise.resolve().then(() => out(this.update(strategy, input(object), options, 'main'))),
      updateStatus: (object, options) =>
        Promise.resolve().then(() => out(this.update(strategy, input(object), options, 'status'))),
      patch: (name, patch, options) => Promise.resolve().then(() => out(this.patch(strategy, name, patch, options))),
      delete: (name, options) =>
        Promise.resolve().then(() => {
          this.delete(strategy, name, options);
        }),
    };
  }

  private store(strategy: KindStrategy): Map<string, JsonObject> {
    let store = this.stores.get(strategy);
    if (store === undefined) {
      store = new Map();
      this.stores.set(strategy, store);
    }
    return store;
  }

  private namespaceFor(strategy: KindStrategy, options: NamespaceOption | undefined): string | undefined {
    if (!strategy.namespaced) return undefined;
    return options?.namespace === undefined || options.namespace === '' ? 'default' : options.namespace;
  }

  private static key(namespace: string | undefined, name: string): string {
    return namespace === undefined ? name : `${namespace}/${name}`;
  }

  private now(): string {
    return timestamp(this.clock.now());
  }

  /** The object as the API returns it from get/create/update and in watch events. */
  private present(strategy: KindStrategy, object: JsonObject): JsonObject {
    return { kind: strategy.kind, apiVersion: strategy.apiVersion, ...withoutTypeMeta(object) };
  }

  private notFound(strategy: KindStrategy, name: string): KubeApiError {
    return new KubeApiError(404, 'NotFound', `${qualifiedResource(strategy)} ${goQuote(name)} not found`);
  }

  private conflict(strategy: KindStrategy, name: string, detail: string): KubeApiError {
    return new KubeApiError(
      409,
      'Conflict',
      `Operation cannot be fulfilled on ${qualifiedResource(strategy)} ${goQuote(name)}: ${detail}`,
    );
  }

  private invalid(strategy: KindStrategy, name: string, errors: readonly FieldError[]): KubeApiError {
    return new KubeApiError(
      422,
      'Invalid',
      `${qualifiedKind(strategy)} ${goQuote(name)} is invalid: ${aggregate(errors.map(formatFieldError))}`,
    );
  }

  private static noSuchSubresource(): KubeApiError {
    return new KubeApiError(404, 'NotFound', 'the server could not find the requested resource');
  }

  private existing(strategy: KindStrategy, name: string, namespace: string | undefined): JsonObject {
    const current = this.store(strategy).get(MemoryCluster.key(namespace, name));
    if (current === undefined) throw this.notFound(strategy, name);
    return current;
  }

  /** ObjectMeta validation common to every kind. */
  private validateMetadata(strategy: KindStrategy, object: JsonObject): FieldError[] {
    const errors: FieldError[] = [];
    const metadata = metadataOf(object);
    const name = stringAt(metadata, 'name') ?? '';
    if (name === '') {
      errors.push(fieldError.required('metadata.name', 'name or generateName is required'));
    } else {
      const problems = strategy.validateName(name);
      if (problems.length > 0) errors.push(fieldError.invalid('metadata.name', name, problems.join('; ')));
    }
    for (const [key, value] of Object.entries(objectAt(metadata, 'labels') ?? {})) {
      const keyProblems = qualifiedNameErrors(key);
      if (keyProblems.length > 0) errors.push(fieldError.invalid('metadata.labels', key, keyProblems.join('; ')));
      const valueProblems = typeof value === 'string' ? labelValueErrors(value) : ['must be a string'];
      if (valueProblems.length > 0) {
        errors.push(fieldError.invalid('metadata.labels', value, valueProblems.join('; ')));
      }
    }
    let annotationBytes = 0;
    for (const [key, value] of Object.entries(objectAt(metadata, 'annotations') ?? {})) {
      const keyProblems = qualifiedNameErrors(key.toLowerCase());
      if (keyProblems.length > 0) {
        errors.push(fieldError.invalid('metadata.annotations', key, keyProblems.join('; ')));
      }
      annotationBytes += Buffer.byteLength(key) + Buffer.byteLength(typeof value === 'string' ? value : '');
    }
    if (annotationBytes > ANNOTATIONS_MAX_BYTES) {
      errors.push(fieldError.tooLong('metadata.annotations', ANNOTATIONS_MAX_BYTES));
    }
    finalizersOf(object).forEach((finalizer, i) => {
      const problems = qualifiedNameErrors(finalizer);
      if (problems.length > 0) {
        errors.push(fieldError.invalid('metadata.finalizers', finalizer, problems.join('; ')));
      }
      if (!finalizer.includes('/') && !STANDARD_FINALIZERS.includes(finalizer)) {
        errors.push(
          fieldError.invalid(
            `metadata.finalizers[${i}]`,
            finalizer,
            'name is neither a standard finalizer name nor is it fully qualified',
          ),
        );
      }
    });
    return errors;
  }

  /** Checks what the request URL implies (namespace) and the decoder enforces. */
  private admitBody(strategy: KindStrategy, object: JsonObject, namespace: string | undefined): void {
    const metadata = metadataOf(object);
    if (namespace === undefined) {
      delete metadata['namespace'];
    } else {
      const given = stringAt(metadata, 'namespace');
      if (given !== undefined && given !== '' && given !== namespace) {
        throw new KubeApiError(
          400,
          'BadRequest',
          'the namespace of the provided object does not match the namespace sent on the request',
        );
      }
      metadata['namespace'] = namespace;
    }
    delete metadata['managedFields'];
    const kind = object['kind'];
    if (kind !== undefined && kind !== strategy.kind) {
      throw new KubeApiError(
        400,
        'BadRequest',
        `${typeof kind === 'string' ? kind : JSON.stringify(kind)} in version ${goQuote(strategy.apiVersion.split('/').pop() ?? '')} cannot be handled as a ${strategy.kind}`,
      );
    }
    try {
      strategy.applyDefaults(object);
    } catch (error) {
      if (error instanceof DecodeError) {
        throw new KubeApiError(
          400,
          'BadRequest',
          `${strategy.kind} in version ${goQuote(strategy.apiVersion.split('/').pop() ?? '')} cannot be handled as a ${strategy.kind}: ${error.message}`,
        );
      }
      throw error;
    }
  }

  private nextRv(): number {
    this.rv += 1;
    return this.rv;
  }

  /** Stores a change, records it in the history and tells the watchers. */
  private commit(
    strategy: KindStrategy,
    namespace: string | undefined,
    name: string,
    type: ChangeType,
    object: JsonObject,
    previous: JsonObject | undefined,
  ): JsonObject {
    const rv = this.nextRv();
    const stored = structuredClone(object);
    metadataOf(stored)['resourceVersion'] = String(rv);
    const key = MemoryCluster.key(namespace, name);
    if (type === 'DELETED') this.store(strategy).delete(key);
    else this.store(strategy).set(key, stored);
    const change: Change = { rv, strategy, key, namespace, type, object: stored, previous };
    this.history.push(change);
    if (this.history.length > this.historyLimit) {
      const dropped = this.history.splice(0, this.history.length - this.historyLimit);
      const last = dropped[dropped.length - 1];
      if (last !== undefined) this.compactedRv = Math.max(this.compactedRv, last.rv);
    }
    for (const watcher of this.watchers) this.deliver(watcher, change);
    if (type === 'ADDED' && strategy.kind === 'Event') this.expireEvents(strategy);
    return stored;
  }

  /** Deletes the oldest Events beyond eventLimit (watchers see them DELETED, as after their TTL). */
  private expireEvents(strategy: KindStrategy): void {
    const events = this.store(strategy);
    // A Map keeps insertion order, and an update keeps an entry's place: the oldest come first.
    for (const [key, object] of events) {
      if (events.size <= this.eventLimit) return;
      const namespace = stringAt(metadataOf(object), 'namespace');
      const name = stringAt(metadataOf(object), 'name') ?? key;
      this.commit(strategy, namespace, name, 'DELETED', object, object);
    }
  }

  /** Turns a change into what a watcher with a label selector sees (like the watch cache). */
  private static eventFor(watcher: Watcher, change: Change): WatchEvent<JsonObject> | undefined {
    if (watcher.strategy !== change.strategy) return undefined;
    if (watcher.namespace !== undefined && watcher.namespace !== change.namespace) return undefined;
    // Name and namespace never change, so the field selector needs no "stopped matching" case.
    if (!watcher.fields(change.object)) return undefined;
    const matchesNow = watcher.selector.matches(labelsOf(change.object));
    if (change.type !== 'MODIFIED') {
      return matchesNow ? { type: change.type, object: change.object } : undefined;
    }
    const matchedBefore = change.previous !== undefined && watcher.selector.matches(labelsOf(change.previous));
    if (matchesNow) return { type: matchedBefore ? 'MODIFIED' : 'ADDED', object: change.object };
    if (!matchedBefore) return undefined;
    // It stopped matching: the watcher sees it deleted (its previous state at this resourceVersion).
    const gone = structuredClone(change.previous);
    metadataOf(gone)['resourceVersion'] = String(change.rv);
    return { type: 'DELETED', object: gone };
  }

  private deliver(watcher: Watcher, change: Change): void {
    const event = MemoryCluster.eventFor(watcher, change);
    if (event === undefined) return;
    if (event.type !== 'BOOKMARK')
      watcher.queue.push({ type: event.type, object: this.present(change.strategy, event.object) });
    watcher.wake?.();
  }

  // -------------------------------------------------------------------------------------------
  // Operations

  private get(strategy: KindStrategy, name: string, options: NamespaceOption | undefined): JsonObject {
    return this.present(strategy, this.existing(strategy, name, this.namespaceFor(strategy, options)));
  }

  /** The objects of a kind as they were at resourceVersion `at` (undoing later changes). */
  private snapshot(strategy: KindStrategy, at: number): Map<string, JsonObject> {
    const snapshot = new Map(this.store(strategy));
    for (let i = this.history.length - 1; i >= 0; i--) {
      const change = this.history[i];
      if (change === undefined || change.rv <= at) break;
      if (change.strategy !== strategy) continue;
      if (change.previous === undefined) snapshot.delete(change.key);
      else snapshot.set(change.key, change.previous);
    }
    return snapshot;
  }

  private list(strategy: KindStrategy, options: ListOptions | undefined): JsonObject {
    const namespace = this.namespaceFor(strategy, options);
    const selector = parseSelector(options?.labelSelector);
    const fields = parseFieldSelector(options?.fieldSelector);
    let at = this.rv;
    let after: string | undefined;
    if (options?.continue !== undefined && options.continue !== '') {
      const token = decodeContinue(options.continue);
      if (token.rv < this.compactedRv) {
        throw new KubeApiError(
          410,
          'Expired',
          'The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.',
        );
      }
      at = token.rv;
      after = token.after;
    }
    const source = at === this.rv ? this.store(strategy) : this.snapshot(strategy, at);
    const prefix = namespace === undefined ? '' : `${namespace}/`;
    const matching = [...source.entries()]
      .filter(([key]) => key.startsWith(prefix))
      .map(([key, object]) => ({ name: key.slice(prefix.length), object }))
      .filter(({ name }) => after === undefined || name > after)
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
      .filter(({ object }) => selector.matches(labelsOf(object)) && fields(object));
    const limit = options?.limit !== undefined && options.limit > 0 ? options.limit : undefined;
    const page = limit === undefined ? matching : matching.slice(0, limit);
    const metadata: JsonObject = { resourceVersion: String(at) };
    const last = page[page.length - 1];
    if (limit !== undefined && matching.length > page.length && last !== undefined) {
      metadata['continue'] = encodeContinue(at, last.name);
      if (selector === everything && options?.fieldSelector === undefined)
        metadata['remainingItemCount'] = matching.length - page.length;
    }
    return {
      kind: `${strategy.kind}List`,
      apiVersion: strategy.apiVersion,
      metadata,
      // List items carry no kind/apiVersion, as in a real list response.
      items: page.map(({ object }) => withoutTypeMeta(object)),
    };
  }

  private create(
    strategy: KindStrategy,
    object: JsonObject,
    options: (NamespaceOption & { readonly dryRun?: boolean }) | undefined,
  ): JsonObject {
    const namespace = this.namespaceFor(strategy, options);
    const metadata = metadataOf(object);
    const generateName = stringAt(metadata, 'generateName');
    if ((stringAt(metadata, 'name') ?? '') === '' && generateName !== undefined && generateName !== '') {
      metadata['name'] = `${generateName}${randomBytes(4).toString('hex').slice(0, 5)}`;
    }
    const name = stringAt(metadata, 'name') ?? '';
    this.admitBody(strategy, object, namespace);
    if (namespace !== undefined && !this.namespaceSet.has(namespace)) {
      throw new KubeApiError(404, 'NotFound', `namespaces ${goQuote(namespace)} not found`);
    }
    if ((stringAt(metadata, 'resourceVersion') ?? '') !== '') {
      throw new KubeApiError(500, 'InternalError', 'resourceVersion should not be set on objects to be created');
    }
    const now = this.now();
    metadata['uid'] = randomUUID();
    metadata['creationTimestamp'] = now;
    delete metadata['deletionTimestamp'];
    delete metadata['deletionGracePeriodSeconds'];
    if (strategy.managesGeneration) metadata['generation'] = 1;
    strategy.prepareForCreate(object, { now });
    const errors = [...this.validateMetadata(strategy, object), ...strategy.validate(object)];
    if (errors.length > 0) throw this.invalid(strategy, name, errors);
    if (this.store(strategy).has(MemoryCluster.key(namespace, name))) {
      throw new KubeApiError(409, 'AlreadyExists', `${qualifiedResource(strategy)} ${goQuote(name)} already exists`);
    }
    if (options?.dryRun === true) return this.present(strategy, object);
    return this.present(strategy, this.commit(strategy, namespace, name, 'ADDED', object, undefined));
  }

  /**
   * PUT (or the write half of a PATCH) of the main resource or the status subresource: optimistic
   * concurrency on metadata.resourceVersion (none: unconditional), the strategy's field resets,
   * validation, and the finalizer rules of an object being deleted.
   */
  private update(
    strategy: KindStrategy,
    object: JsonObject,
    options: NamespaceOption | undefined,
    target: UpdateTarget,
  ): JsonObject {
    if (target === 'status' && !strategy.statusSubresource) throw MemoryCluster.noSuchSubresource();
    const namespace = this.namespaceFor(strategy, options);
    const name = stringAt(metadataOf(object), 'name') ?? '';
    this.admitBody(strategy, object, namespace);
    const old = this.existing(strategy, name, namespace);
    this.checkPreconditions(strategy, { namespace, name, object, old, target });
    const errors = keepServerMetadata(object, old);
    this.prepareUpdate(strategy, object, old, target);
    errors.push(...this.updateErrors(strategy, object, old, target));
    if (errors.length > 0) throw this.invalid(strategy, name, errors);
    return this.commitUpdate(strategy, namespace, name, object, old);
  }

  /** The resourceVersion and uid the client sent, when it sent them, must be the stored object's. */
  private checkPreconditions(strategy: KindStrategy, write: UpdateWrite): void {
    const { namespace, name, target } = write;
    const metadata = metadataOf(write.object);
    const oldMetadata = metadataOf(write.old);
    const requestedRv = stringAt(metadata, 'resourceVersion') ?? '';
    if (requestedRv !== '') {
      parseResourceVersion(requestedRv, 'metadata.resourceVersion');
      if (requestedRv !== oldMetadata['resourceVersion']) {
        throw this.conflict(
          strategy,
          name,
          'the object has been modified; please apply your changes to the latest version and try again',
        );
      }
    }
    const uid = stringAt(metadata, 'uid') ?? '';
    const oldUid = stringAt(oldMetadata, 'uid') ?? '';
    if (uid !== '' && uid !== oldUid) {
      if (target === 'patch') {
        throw this.invalid(strategy, name, [fieldError.invalid('metadata.uid', uid, 'field is immutable')]);
      }
      throw this.conflict(
        strategy,
        name,
        `StorageError: invalid object, Code: 4, Key: ${MemoryCluster.key(namespace, name)}, ResourceVersion: 0, ` +
          `AdditionalErrorMsg: Precondition failed: UID in precondition: ${uid}, UID in object meta: ${oldUid}`,
      );
    }
  }

  /** The strategy's resets for the main resource or the status, and a new generation for a spec change. */
  private prepareUpdate(strategy: KindStrategy, object: JsonObject, old: JsonObject, target: UpdateTarget): void {
    const now = this.now();
    if (target === 'status') {
      strategy.prepareForStatusUpdate(object, old, { now });
    } else if (strategy.statusSubresource) {
      strategy.prepareForUpdate(object, old, { now });
    }
    if (strategy.managesGeneration && strategy.specChanged(object, old)) {
      metadataOf(object)['generation'] = Number(metadataOf(old)['generation'] ?? 0) + 1;
    }
  }

  /** New finalizers on an object being deleted, then the metadata's and the strategy's validation. */
  private updateErrors(
    strategy: KindStrategy,
    object: JsonObject,
    old: JsonObject,
    target: UpdateTarget,
  ): FieldError[] {
    const errors: FieldError[] = [];
    if (metadataOf(old)['deletionTimestamp'] !== undefined) {
      const before = new Set(finalizersOf(old));
      const added = finalizersOf(object).filter((f) => !before.has(f));
      if (added.length > 0) {
        errors.push(
          fieldError.forbidden(
            'metadata.finalizers',
            `no new finalizers can be added if the object is being deleted, found new finalizers []string{${added.map(goQuote).join(', ')}}`,
          ),
        );
      }
    }
    errors.push(...this.validateMetadata(strategy, object));
    if (target === 'status') errors.push(...strategy.validateStatus(object));
    else errors.push(...strategy.validate(object), ...strategy.validateUpdate(object, old));
    return errors;
  }

  /** Stores a valid update: nothing for a no-op, the deletion once the last finalizer is gone. */
  private commitUpdate(
    strategy: KindStrategy,
    namespace: string | undefined,
    name: string,
    object: JsonObject,
    old: JsonObject,
  ): JsonObject {
    const metadata = metadataOf(object);
    metadata['resourceVersion'] = metadataOf(old)['resourceVersion'];
    if (jsonEqual(this.present(strategy, object), this.present(strategy, old))) {
      return this.present(strategy, old); // a no-op write changes nothing, not even the resourceVersion
    }
    if (metadata['deletionTimestamp'] !== undefined && finalizersOf(object).length === 0) {
      // The last finalizer is gone: the object is deleted now.
      this.commit(strategy, namespace, name, 'DELETED', object, old);
      return this.present(strategy, object);
    }
    return this.present(strategy, this.commit(strategy, namespace, name, 'MODIFIED', object, old));
  }

  private patch(
    strategy: KindStrategy,
    name: string,
    patch: unknown,
    options: NamespaceOption | undefined,
  ): JsonObject {
    let body: unknown = patch;
    if (typeof body === 'string') {
      try {
        body = JSON.parse(body);
      } catch (error) {
        throw new KubeApiError(400, 'BadRequest', `error decoding patch: ${errorMessage(error)}`);
      }
    }
    if (!isRecord(body)) {
      throw new KubeApiError(
        400,
        'BadRequest',
        `error decoding patch: json: cannot unmarshal ${Array.isArray(body) ? 'array' : typeof body} into Go value of type map[string]interface {}`,
      );
    }
    const namespace = this.namespaceFor(strategy, options);
    const current = this.existing(strategy, name, namespace);
    const patched = applyMergePatch(structuredClone(current), body);
    if (!isRecord(patched)) throw new KubeApiError(400, 'BadRequest', 'the patch must produce an object');
    const patchedName = stringAt(patched, 'metadata', 'name');
    if (patchedName !== name) {
      throw new KubeApiError(
        400,
        'BadRequest',
        `the name of the object (${patchedName ?? ''}) does not match the name on the URL (${name})`,
      );
    }
    return this.update(strategy, patched, options, 'patch');
  }

  private delete(strategy: KindStrategy, name: string, options: DeleteOptions | undefined): void {
    const namespace = this.namespaceFor(strategy, options);
    const current = this.existing(strategy, name, namespace);
    const uid = stringAt(current, 'metadata', 'uid') ?? '';
    if (options?.uid !== undefined && options.uid !== uid) {
      throw new KubeApiError(
        409,
        'Conflict',
        `Operation cannot be fulfilled on ${qualifiedKind(strategy)} ${goQuote(name)}: the UID in the precondition ` +
          `(${options.uid}) does not match the UID in record (${uid}). The object might have been deleted and then recreated`,
      );
    }
    const policy = options?.propagationPolicy;
    const finalizers = finalizersOf(current);
    const has = (f: string): boolean => finalizers.includes(f);
    const orphan =
      policy !== undefined
        ? policy === 'Orphan'
        : has('orphan') || (!has('foregroundDeletion') && strategy.defaultPropagation === 'Orphan');
    const foreground = policy !== undefined ? policy === 'Foreground' : has('foregroundDeletion');
    // Keep the position of a GC finalizer that stays; append one that is new.
    const withGc = finalizers.filter(
      (f) => !(f === 'orphan' && !orphan) && !(f === 'foregroundDeletion' && !foreground),
    );
    if (orphan && !has('orphan')) withGc.push('orphan');
    if (foreground && !has('foregroundDeletion')) withGc.push('foregroundDeletion');
    const deleting = stringAt(current, 'metadata', 'deletionTimestamp') !== undefined;
    const grace = strategy.deletionGracePeriod?.(current, options?.gracePeriodSeconds) ?? 0;
    if (grace > 0 && !deleting) {
      // Graceful deletion: terminating until the kubelet (or a force delete) removes it.
      const updated = structuredClone(current);
      const metadata = metadataOf(updated);
      metadata['deletionTimestamp'] = timestamp(this.clock.now() + grace * 1000);
      metadata['deletionGracePeriodSeconds'] = grace;
      this.commit(strategy, namespace, name, 'MODIFIED', updated, current);
      return;
    }
    // A force delete (grace 0) of a terminating pod removes it now, unless finalizers still hold it.
    const force = strategy.deletionGracePeriod !== undefined && grace === 0 && withGc.length === 0;
    if (deleting && !force && (policy === undefined || jsonEqual(withGc, finalizers))) return; // already being deleted
    const updated = structuredClone(current);
    setFinalizers(updated, withGc);
    if (withGc.length === 0) {
      this.commit(strategy, namespace, name, 'DELETED', updated, current);
      return;
    }
    if (!deleting) {
      const metadata = metadataOf(updated);
      metadata['deletionTimestamp'] = this.now();
      metadata['deletionGracePeriodSeconds'] = 0;
      const generation = metadata['generation'];
      if (typeof generation === 'number' && generation > 0) metadata['generation'] = generation + 1;
    }
    this.commit(strategy, namespace, name, 'MODIFIED', updated, current);
  }

  private watch(strategy: KindStrategy, options: WatchOptions): AsyncIterable<WatchEvent<JsonObject>> {
    const iterate = async function* (this: MemoryCluster): AsyncGenerator<WatchEvent<JsonObject>, void, undefined> {
      const { signal } = options;
      if (signal.aborted) return;
      const selector = parseSelector(options.labelSelector);
      const fields = parseFieldSelector(options.fieldSelector);
      const namespace = this.namespaceFor(strategy, options);
      const watcher: Watcher = {
        strategy,
        namespace,
        selector,
        fields,
        allowBookmarks: options.allowBookmarks === true,
        queue: [],
        wake: undefined,
      };
      const from =
        options.resourceVersion === '' ? 0 : parseResourceVersion(options.resourceVersion, 'resourceVersion');
      if (from === 0) {
        // "Any" resourceVersion: the current state as synthetic ADDED events, then changes.
        const prefix = namespace === undefined ? '' : `${namespace}/`;
        const current = [...this.store(strategy).entries()]
          .filter(([key, object]) => key.startsWith(prefix) && selector.matches(labelsOf(object)) && fields(object))
          .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
        for (const [, object] of current) watcher.queue.push({ type: 'ADDED', object: this.present(strategy, object) });
      } else {
        if (from < this.compactedRv) {
          throw new KubeApiError(410, 'Expired', `too old resource version: ${from} (${this.compactedRv})`);
        }
        for (const change of this.history) if (change.rv > from) this.deliver(watcher, change);
      }
      const state = { ended: false };
      const wakeUp = (): void => {
        watcher.wake?.();
      };
      const timeout = new AbortController();
      signal.addEventListener('abort', wakeUp);
      this.watchers.add(watcher);
      if (options.timeoutSeconds !== undefined && options.timeoutSeconds > 0) {
        this.clock.sleep(options.timeoutSeconds * 1000, timeout.signal).then(
          () => {
            state.ended = true;
            wakeUp();
          },
          () => undefined,
        );
      }
      try {
        for (;;) {
          if (isAborted(signal) || state.ended) return;
          const event = watcher.queue.shift();
          if (event !== undefined) {
            yield event;
            continue;
          }
          await new Promise<void>((resolve) => {
            watcher.wake = resolve;
          });
          watcher.wake = undefined;
        }
      } finally {
        this.watchers.delete(watcher);
        signal.removeEventListener('abort', wakeUp);
        timeout.abort();
      }
    };
    return { [Symbol.asyncIterator]: () => iterate.call(this) };
  }
}
