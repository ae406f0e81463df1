// The staged rollout controller's loop (`provisioner rollout controller`): caches of the operator's
// ConfigMap, its two copies, the agents' status Leases and the Nodes; on a change (debounced) or
// when the last decision asked to be woken (a bake or a progress deadline ends), it reads the
// caches into a RolloutView, calls decide() and writes what it says: the stable copy first (an
// agent outside the open waves must never read a state that sends it to a stable copy not yet
// written), then the candidate copy with the state, then the Events; and decides again from what
// it wrote until there is nothing to do.
//
// Safety: only the elected leader writes, and it checks its term right before each write; every
// write carries the resourceVersion it decided from (a 409 re-reads and decides again); all it
// knows is in the stored state, so a successor (or a restarted controller) resumes where it stood.
import type { ElectedControllerDeps } from '../leader-elected/service.js';
import { Backoff } from '../backoff.js';
import { isAborted, TIMER_NOT_NEEDED } from '../clock.js';
import { stateFromLease, statusSelector } from '../fleet/applied-state.js';
import { isAlreadyExists, isConflict, isNotFound } from '../kube/cluster.js';
import type { Cluster, LeaseCluster } from '../kube/cluster.js';
import { metadataClient } from '../kube/metadata-client.js';
import type { MetadataOnly } from '../kube/metadata-client.js';
import type { ConfigMap, Lease, ObjectReference } from '../kube/objects.js';
import { Reflector } from '../kube/reflector.js';
import type { RolloutMetrics } from '../metrics/rollout-metrics.js';
import { errorMessage } from '../unknown-values.js';
import { decide, EVENT_REASONS, openWaveCounts } from './decide.js';
import { FleetIndex } from './fleet-index.js';
import type { DesiredContent, RolloutDecision, RolloutView } from './decide.js';
import {
  CONFIG_HASH_ANNOTATION,
  ROLLOUT_REQUEST_ANNOTATION,
  ROLLOUT_STATE_ANNOTATION,
  stagedConfigMapName,
  stateOf,
  requestOf,
} from '../rollout-state/annotations.js';
import { contentOf, stagedConfigMap, stateAnnotation } from './objects.js';
import type { StagedRolloutPolicy } from './policy.js';
import type { ContentRef, DecodedState, RolloutRequest, RolloutState } from '../rollout-state/state.js';
import { ROLLOUT_PHASES } from '../rollout-state/state.js';
import type { FleetNode } from './waves.js';

export const ROLLOUT_CONTROLLER_COMPONENT = 'local-volume-rollout-controller';

export interface RolloutControllerSettings {
  /** Where the operator's ConfigMap, its copies and the status Leases are. */
  readonly namespace: string;
  /** The operator's ConfigMap (the copies are `<name>-stable` and `<name>-candidate`). */
  readonly name: string;
  /** The provisioner instance whose status Leases report the nodes (`run --status-name`). */
  readonly instance: string;
  readonly policy: StagedRolloutPolicy;
  /** Full relist of the caches, a watchdog under the watches; 0: watch only. */
  readonly resyncMs: number;
  /** Changes within this long are decided on together (default 100 ms). */
  readonly debounceMs?: number;
  /** Decide-and-write steps of one pass at most (default 50); a pass that hits it retries later. */
  readonly maxStepsPerPass?: number;
}

export interface RolloutControllerDeps extends ElectedControllerDeps {
  readonly cluster: Pick<Cluster, 'configMaps' | 'nodes'> & LeaseCluster;
  readonly metrics?: RolloutMetrics;
}

const DEFAULT_DEBOUNCE_MS = 100;
const DEFAULT_MAX_STEPS = 50;
/** A wake-up that is due already is taken this much later at the soonest: no busy loop. */
const MIN_WAKE_MS = 1_000;

/** What one pass did (tests and logs). */
export interface PassReport {
  readonly leading: boolean;
  /** Decisions that wrote something. */
  readonly steps: number;
  /** Objects written (stable or candidate copy). */
  readonly writes: number;
  /** Writes refused with 409 (re-read and decided again). */
  readonly conflicts: number;
  readonly events: number;
  /** When the pass asked to be woken (a bake or a deadline), undefined: on a change only. */
  readonly wakeAt?: number;
}

/** The caches read into one view, with the objects it came from (the writes start from them). */
interface Snapshot {
  readonly view: RolloutView;
  readonly desired: ConfigMap | undefined;
  readonly stable: ConfigMap | undefined;
  readonly candidate: ConfigMap | undefined;
  /** The request annotation is there but is not a request: cleared with the next write. */
  readonly requestDamaged: boolean;
}

type Source = 'desired' | 'copies' | 'leases' | 'nodes' | 'lead';

/** The leader's term ended between a decision and its write: the pass stops writing. */
class NotLeading extends Error {}

function sameStrings(
  a: Readonly<Record<string, string>> | undefined,
  b: Readonly<Record<string, string>> | undefined,
): boolean {
  const ea = Object.entries(a ?? {});
  const eb = b ?? {};
  return ea.length === Object.keys(eb).length && ea.every(([k, v]) => eb[k] === v);
}

/** Whether writing `next` over `current` changes anything the controller owns. */
function sameCopy(current: ConfigMap | undefined, next: ConfigMap): boolean {
  return (
    current !== undefined &&
    sameStrings(current.data, next.data) &&
    sameStrings(current.metadata.annotations, next.metadata.annotations) &&
    sameStrings(current.metadata.labels, next.metadata.labels)
  );
}

function waitForAbort(signals: readonly AbortSignal[]): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      for (const s of signals) s.removeEventListener('abort', done);
      resolve();
    };
    if (signals.some((s) => s.aborted)) {
      resolve();
      return;
    }
    for (const s of signals) s.addEventListener('abort', done, { once: true });
  });
}

function fleetNodeOf(n: MetadataOnly): FleetNode {
  return { name: n.metadata.name, ...(n.metadata.labels !== undefined ? { labels: n.metadata.labels } : {}) };
}

export class RolloutController {
  /** The operator's ConfigMap (one object, by a field selector on its name). */
  readonly desired: Reflector<ConfigMap>;
  /** The stable and the candidate copy (one label selector). */
  readonly stableCopy: Reflector<ConfigMap>;
  readonly candidateCopy: Reflector<ConfigMap>;
  /** The agents' status Leases of the instance. */
  readonly leases: Reflector<Lease>;
  /** The Nodes, metadata only (names and labels). */
  readonly nodes: Reflector<MetadataOnly>;
  private readonly stableName: string;
  private readonly candidateName: string;
  private wake = new AbortController();
  private readonly dirty = new Set<Source>();
  private wakeAt: number | undefined;
  private retryAt: number | undefined;
  private readonly backoff: Backoff;
  /** Parsed once per object version (the caches replace an object when it changes). */
  private readonly contents = new WeakMap<ConfigMap, DesiredContent>();
  private readonly states = new WeakMap<ConfigMap, DecodedState | undefined>();
  /** The Nodes, the freshest status Lease of each and the rollout's progress, kept per event. */
  private readonly fleet = new FleetIndex();
  /** The damaged state last logged (its raw text), so it is said once. */
  private damagedLogged: string | undefined;
  /** Passes run while leading (tests, diagnostics). */
  passes = 0;

  constructor(
    private readonly settings: RolloutControllerSettings,
    private readonly deps: RolloutControllerDeps,
  ) {
    const { clock, logger, cluster } = deps;
    const { namespace, name } = settings;
    this.stableName = stagedConfigMapName(name, 'stable');
    this.candidateName = stagedConfigMapName(name, 'candidate');
    const common = {
      clock,
      logger,
      relistPeriodMs: settings.resyncMs,
      ...(deps.random ? { random: deps.random } : {}),
    };
    this.desired = new Reflector({
      ...common,
      client: cluster.configMaps,
      resource: 'configmaps (the operator’s)',
      namespace,
      fieldSelector: `metadata.name=${name}`,
      onChange: () => {
        this.changed('desired');
      },
    });
    // One watch per copy, by name, as the agents watch them: the Role can then name the three
    // ConfigMaps it reads (a label-selected watch needs every ConfigMap of the namespace).
    const copy = (copyName: string, which: string): Reflector<ConfigMap> =>
      new Reflector({
        ...common,
        client: cluster.configMaps,
        resource: `configmaps (the ${which} copy)`,
        namespace,
        fieldSelector: `metadata.name=${copyName}`,
        onChange: () => {
          this.changed('copies');
        },
      });
    this.stableCopy = copy(this.stableName, 'stable');
    this.candidateCopy = copy(this.candidateName, 'candidate');
    this.leases = new Reflector({
      ...common,
      client: cluster.leases,
      resource: 'leases (status)',
      namespace,
      labelSelector: statusSelector(settings.instance),
      onChange: (type, lease) => {
        // Each Lease decoded once per change: a pass over 10,000 nodes decodes none.
        this.fleet.setLease(lease.metadata.name, type === 'DELETED' ? undefined : stateFromLease(lease));
        this.changed('leases');
      },
    });
    this.nodes = new Reflector({
      ...common,
      client: metadataClient(cluster.nodes),
      resource: 'nodes',
      // A Node's status heartbeat changes nothing here: only a Node coming or going does (labels
      // matter when a rollout plans its waves, which a ConfigMap change starts).
      onChange: (type, n) => {
        if (type === 'DELETED') this.fleet.deleteNode(n.metadata.name);
        else this.fleet.setNode(fleetNodeOf(n));
        if (type !== 'MODIFIED') this.changed('nodes');
      },
    });
    this.backoff = new Backoff({ clock, ...(deps.random ? { random: deps.random } : {}) });
  }

  /** Every cache has listed once. */
  get synced(): boolean {
    return [this.desired, this.stableCopy, this.candidateCopy, this.leases, this.nodes].every((r) => r.lastSync > 0);
  }

  /** Decides now (this replica just became the leader). */
  poke(): void {
    this.changed('lead');
  }

  private changed(source: Source): void {
    this.dirty.add(source);
    // A shared reason: a heartbeat's wake-up builds no exception and stack.
    this.wake.abort(TIMER_NOT_NEEDED);
  }

  /** Runs the caches, and a pass on every change and due wake-up, until the signal aborts. */
  async run(signal: AbortSignal): Promise<void> {
    const { clock } = this.deps;
    const reflectors = [this.desired, this.stableCopy, this.candidateCopy, this.leases, this.nodes];
    const caches = Promise.all(reflectors.map((r) => r.run(signal)));
    try {
      await Promise.race([Promise.all(reflectors.map((r) => r.synced)), caches]);
      let first = true;
      while (!isAborted(signal)) {
        if (!first) {
          const woke = await this.sleep(signal);
          if (woke === 'stop') break;
          if (woke === 'change') {
            try {
              await clock.sleep(this.settings.debounceMs ?? DEFAULT_DEBOUNCE_MS, signal);
            } catch {
              break;
            }
            if (!this.relevant()) continue;
          }
        }
        first = false;
        this.dirty.clear();
        await this.pass();
      }
    } finally {
      await caches;
    }
  }

  /** Waits for a change, the decision's wake-up or a retry, or the stop. */
  private async sleep(signal: AbortSignal): Promise<'change' | 'timer' | 'stop'> {
    const { clock } = this.deps;
    const woken = this.wake.signal;
    const due = Math.min(this.wakeAt ?? Infinity, this.retryAt ?? Infinity);
    if (!woken.aborted && !signal.aborted) {
      if (Number.isFinite(due)) {
        const timer = new AbortController();
        const stop = (): void => {
          timer.abort(TIMER_NOT_NEEDED);
        };
        woken.addEventListener('abort', stop, { once: true });
        signal.addEventListener('abort', stop, { once: true });
        try {
          await clock.sleep(Math.max(0, due - clock.now()), timer.signal);
        } catch {
          // a change or the stop
        } finally {
          woken.removeEventListener('abort', stop);
          signal.removeEventListener('abort', stop);
        }
      } else {
        await waitForAbort([woken, signal]);
      }
    }
    if (isAborted(signal)) return 'stop';
    if (woken.aborted) {
      this.wake = new AbortController();
      return 'change';
    }
    return 'timer';
  }

  /**
   * Whether the changes seen warrant a decision: a Lease heartbeat or a Node coming or going
   * matters only while a rollout waits on its nodes (progressing or paused).
   */
  private relevant(): boolean {
    if ([...this.dirty].some((s) => s !== 'leases' && s !== 'nodes')) return true;
    if (this.retryAt !== undefined) return true;
    const stored = this.storedState(this.candidateCopy.get(this.candidateName));
    const moving = stored?.ok === true && (stored.state.phase === 'progressing' || stored.state.phase === 'paused');
    if (!moving) this.dirty.clear();
    return moving;
  }

  private storedState(candidate: ConfigMap | undefined): DecodedState | undefined {
    if (candidate === undefined) return undefined;
    if (this.states.has(candidate)) return this.states.get(candidate);
    const decoded = stateOf(candidate);
    this.states.set(candidate, decoded);
    return decoded;
  }

  private content(configMap: ConfigMap, name: string): DesiredContent {
    let content = this.contents.get(configMap);
    if (content === undefined) {
      content = contentOf(this.settings.namespace, name, configMap);
      this.contents.set(configMap, content);
    }
    return content;
  }

  /** The caches as decide() sees them. */
  private read(): Snapshot {
    const { namespace, name, policy } = this.settings;
    const desiredObject = this.desired.get(name);
    const stableObject = this.stableCopy.get(this.stableName);
    const candidateObject = this.candidateCopy.get(this.candidateName);
    const desired = desiredObject === undefined ? undefined : this.content(desiredObject, name);
    let stable: ContentRef | undefined;
    if (stableObject !== undefined) {
      const c = this.content(stableObject, this.stableName);
      stable = c.hash === undefined ? { fingerprint: c.fingerprint } : { fingerprint: c.fingerprint, hash: c.hash };
    }
    const decoded = this.storedState(candidateObject);
    let state: RolloutState | undefined;
    if (decoded?.ok === true) state = decoded.state;
    else if (decoded !== undefined) {
      const raw = candidateObject?.metadata.annotations?.[ROLLOUT_STATE_ANNOTATION];
      if (raw !== this.damagedLogged) {
        this.damagedLogged = raw;
        this.deps.logger.log('warn', 'the stored rollout state is damaged: deciding as if there were none', {
          configMap: `${namespace}/${this.candidateName}`,
          reason: decoded.reason,
        });
      }
    }
    const rawRequest = candidateObject?.metadata.annotations?.[ROLLOUT_REQUEST_ANNOTATION];
    const request: RolloutRequest | undefined = requestOf(candidateObject);
    return {
      view: {
        now: this.deps.clock.now(),
        policy,
        desired,
        stable,
        state,
        request,
        nodes: this.fleet.nodes(),
        reports: this.fleet.reports,
        openWaves: (s, now) => this.fleet.openWaves(s, now),
      },
      desired: desiredObject,
      stable: stableObject,
      candidate: candidateObject,
      requestDamaged: rawRequest !== undefined && request === undefined,
    };
  }

  /**
   * One pass: decide and write until decide() has nothing to write (while leading), then keep the
   * wake-up it asked for. Never throws: an apiserver failure is logged and retried with backoff.
   */
  async pass(): Promise<PassReport> {
    const { clock, logger, leading } = this.deps;
    const term = leading();
    const counts = { steps: 0, writes: 0, conflicts: 0, events: 0 };
    if (term === undefined || term.aborted) {
      // A follower only keeps its metrics: the leader's writes reach it through the caches.
      this.wakeAt = undefined;
      this.retryAt = undefined;
      this.updateMetrics(this.read().view);
      return { leading: false, ...counts };
    }
    this.passes += 1;
    const max = this.settings.maxStepsPerPass ?? DEFAULT_MAX_STEPS;
    try {
      for (;;) {
        const snapshot = this.read();
        const decision = decide(snapshot.view);
        if (counts.steps >= max) {
          logger.log('warn', 'staged rollout: too many steps in one pass; deciding again later', {
            steps: counts.steps,
            phase: snapshot.view.state?.phase,
          });
          this.updateMetrics(snapshot.view);
          this.scheduleRetry();
          return { leading: true, ...counts };
        }
        const step = await this.apply(decision, snapshot, term);
        if (step === 'conflict') {
          counts.conflicts += 1;
          counts.steps += 1;
          continue;
        }
        if (step.writes === 0) {
          // Nothing (more) to write: this decision is where the rollout stands.
          this.recordEvents(decision, snapshot);
          counts.events += decision.events.length;
          this.updateMetrics(snapshot.view);
          const now = clock.now();
          this.wakeAt =
            decision.wakeAt === undefined
              ? undefined
              : Math.max(decision.wakeAt, now + (decision.wakeAt <= now ? MIN_WAKE_MS : 0));
          this.retryAt = undefined;
          return {
            leading: true,
            ...counts,
            ...(this.wakeAt !== undefined ? { wakeAt: this.wakeAt } : {}),
          };
        }
        counts.steps += 1;
        counts.writes += step.writes;
        counts.events += decision.events.length;
      }
    } catch (err) {
      if (err instanceof NotLeading) {
        logger.log('info', 'staged rollout: not leading any more; the write was skipped');
        return { leading: false, ...counts };
      }
      const delay = this.scheduleRetry();
      logger.log('warn', 'staged rollout: could not read or write its ConfigMaps; retrying', {
        error: errorMessage(err),
        retryInMs: delay,
      });
      return { leading: true, ...counts };
    }
  }

  private scheduleRetry(): number {
    const delay = this.backoff.next();
    this.retryAt = this.deps.clock.now() + delay;
    return delay;
  }

  private checkTerm(term: AbortSignal): void {
    if (term.aborted || this.deps.leading() !== term) throw new NotLeading();
  }

  /**
   * Writes one decision: the stable copy, then the candidate copy, then its Events. 'conflict':
   * a write was refused with 409 (or the candidate moved under it): the caches were refreshed from
   * a GET, decide again.
   */
  private async apply(
    decision: RolloutDecision,
    snapshot: Snapshot,
    term: AbortSignal,
  ): Promise<{ writes: number } | 'conflict'> {
    const { namespace, name } = this.settings;
    const { logger } = this.deps;
    let writes = 0;
    if (decision.stable !== undefined) {
      const from = decision.stable === 'desired' ? snapshot.desired : snapshot.candidate;
      if (from === undefined) throw new Error(`the ${decision.stable} ConfigMap to make stable is not there`);
      const data = from.data ?? {};
      const hash = this.content(from, decision.stable === 'desired' ? name : this.candidateName).hash;
      const next = stagedConfigMap(
        namespace,
        name,
        'stable',
        data,
        hash !== undefined ? { [CONFIG_HASH_ANNOTATION]: hash } : {},
        snapshot.stable,
      );
      if (!sameCopy(snapshot.stable, next)) {
        // Stable is rewritten rarely (adopt, complete, promote) and changes every node outside the
        // waves: first make sure the candidate it was decided from is the live one.
        if (snapshot.candidate !== undefined && !(await this.candidateIsLive(snapshot.candidate))) return 'conflict';
        const done = await this.write(next, snapshot.stable, term);
        if (done === 'conflict') return done;
        writes += 1;
        logger.log('info', 'staged rollout: stable ConfigMap written', {
          configMap: `${namespace}/${this.stableName}`,
          hash,
          from: decision.stable,
        });
      }
    }
    const clear = (decision.clearRequest || snapshot.requestDamaged) && snapshot.candidate !== undefined;
    if (decision.state !== undefined || clear) {
      const existing = snapshot.candidate;
      const annotations: Record<string, string> = {};
      const raw = existing?.metadata.annotations ?? {};
      if (decision.state !== undefined) Object.assign(annotations, stateAnnotation(decision.state.state));
      else if (raw[ROLLOUT_STATE_ANNOTATION] !== undefined)
        annotations[ROLLOUT_STATE_ANNOTATION] = raw[ROLLOUT_STATE_ANNOTATION];
      const request = raw[ROLLOUT_REQUEST_ANNOTATION];
      if (request !== undefined && !decision.clearRequest && !snapshot.requestDamaged)
        annotations[ROLLOUT_REQUEST_ANNOTATION] = request;
      const next = stagedConfigMap(
        namespace,
        name,
        'candidate',
        this.candidateData(decision, snapshot),
        annotations,
        existing,
      );
      if (!sameCopy(existing, next)) {
        const done = await this.write(next, existing, term);
        if (done === 'conflict') return done;
        writes += 1;
        const state = decision.state?.state;
        logger.log('info', 'staged rollout: candidate ConfigMap written', {
          configMap: `${namespace}/${this.candidateName}`,
          phase: state?.phase,
          candidate: state?.candidate.hash,
          opened: state === undefined ? undefined : `${String(state.opened)}/${String(state.waves.length)}`,
          requestCleared: request !== undefined && annotations[ROLLOUT_REQUEST_ANNOTATION] === undefined,
        });
      }
    }
    if (writes > 0) this.recordEvents(decision, snapshot);
    return { writes };
  }

  /** The candidate copy's data: the desired ConfigMap's, or the data it has (see below). */
  private candidateData(decision: RolloutDecision, snapshot: Snapshot): Readonly<Record<string, string>> {
    if (decision.state?.content === 'desired') {
      if (snapshot.desired === undefined) throw new Error('the ConfigMap to copy into the candidate is not there');
      return snapshot.desired.data ?? {};
    }
    // 'keep' without a readable stored state (none, or damaged): the decision's candidate is the
    // stable content, so the copy holds the stable data rather than bytes nobody accounts for.
    if (decision.state !== undefined && snapshot.view.state === undefined)
      return snapshot.stable?.data ?? snapshot.candidate?.data ?? {};
    return snapshot.candidate?.data ?? snapshot.stable?.data ?? {};
  }

  /** GET the candidate: whether it is the version decided from (else the cache is refreshed from it). */
  private async candidateIsLive(cached: ConfigMap): Promise<boolean> {
    const since = this.candidateCopy.position();
    let live: ConfigMap;
    try {
      live = await this.deps.cluster.configMaps.get(this.candidateName, { namespace: this.settings.namespace });
    } catch (err) {
      if (isNotFound(err))
        throw new Error(`${this.candidateName} was deleted under the rollout; waiting for the cache`, { cause: err });
      throw err;
    }
    if (live.metadata.resourceVersion === cached.metadata.resourceVersion) return true;
    this.candidateCopy.upsert(live, since);
    return false;
  }

  /** Creates or updates (at the version read) one copy; records it in the cache. */
  private async write(next: ConfigMap, existing: ConfigMap | undefined, term: AbortSignal): Promise<'ok' | 'conflict'> {
    const { cluster, metrics } = this.deps;
    const { namespace } = this.settings;
    const name = next.metadata.name;
    const copy = name === this.stableName ? 'stable' : 'candidate';
    const cache = this.copyCache(name);
    const since = cache.position();
    // The term is checked right before the request: a replica that lost the lease writes nothing.
    this.checkTerm(term);
    let written: ConfigMap;
    try {
      written =
        existing === undefined
          ? await cluster.configMaps.create(next, { namespace })
          : await cluster.configMaps.update(next, { namespace });
    } catch (err) {
      if (isConflict(err) || isAlreadyExists(err)) {
        this.deps.logger.log('info', 'staged rollout: the ConfigMap changed under the write; reading it again', {
          configMap: `${namespace}/${name}`,
        });
        await this.reread(name);
        return 'conflict';
      }
      metrics?.writeFailures.inc({ copy });
      throw err;
    }
    cache.upsert(written, since);
    return 'ok';
  }

  /** The cache of the copy named `name`. */
  private copyCache(name: string): Reflector<ConfigMap> {
    return name === this.stableName ? this.stableCopy : this.candidateCopy;
  }

  /** Refreshes one copy in the cache from a GET (the watch may be behind). */
  private async reread(name: string): Promise<void> {
    const cache = this.copyCache(name);
    const since = cache.position();
    try {
      cache.upsert(await this.deps.cluster.configMaps.get(name, { namespace: this.settings.namespace }), since);
    } catch (err) {
      // Gone: the watch will say so; the next decision starts from there.
      if (!isNotFound(err)) throw err;
    }
  }

  private recordEvents(decision: RolloutDecision, snapshot: Snapshot): void {
    const { events, logger, metrics } = this.deps;
    const { namespace, name } = this.settings;
    const involved: ObjectReference = {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      namespace,
      name,
      ...(snapshot.desired?.metadata.uid !== undefined ? { uid: snapshot.desired.metadata.uid } : {}),
    };
    for (const event of decision.events) {
      events.record(involved, event.type, event.reason, event.message);
      logger.log(event.type === 'Warning' ? 'warn' : 'info', event.message, { reason: event.reason });
      if (event.reason === EVENT_REASONS.halted) metrics?.halts.inc();
      if (event.reason === EVENT_REASONS.completed || event.reason === EVENT_REASONS.promoted) metrics?.completed.inc();
    }
  }

  private updateMetrics(view: RolloutView): void {
    const metrics = this.deps.metrics;
    if (metrics === undefined) return;
    const state = view.state;
    for (const phase of ROLLOUT_PHASES) metrics.phase.set({ phase }, state?.phase === phase ? 1 : 0);
    metrics.waves.set({}, state?.waves.length ?? 0);
    metrics.wavesOpened.set({}, state?.opened ?? 0);
    const counts = state === undefined ? { applied: 0, pending: 0, failed: 0 } : openWaveCounts(view, state);
    for (const [s, n] of Object.entries(counts)) metrics.nodes.set({ state: s }, n);
  }
}
