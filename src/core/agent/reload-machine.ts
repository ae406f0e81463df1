// The reload state machine: request → read → validate → drain → start → commit, or rollback →
// restore. One reload runs at a time; requests arriving meanwhile coalesce into one pending
// reload. Each phase ends at an await, and between phases a stopping agent makes the reload give
// up (it never starts a generation once stopping). What it drives — the config source, the
// generations, Node events — it reaches through ReloadHost, so it runs alone on a manual clock.
import { within } from '../clock.js';
import type { Clock } from '../clock.js';
import { diffConfigs } from '../config/diff.js';
import type { ConfigSnapshot, LoadedConfig } from '../config/source/port.js';
import type { SourceRead } from '../config/source/port.js';
import { allowCommand, DEFAULT_RELOAD_GUARD_POLICY, guardReload } from '../config/reload-guard.js';
import type { GuardedImpact, GuardVerdict, ReloadGuardPolicy } from '../config/reload-guard.js';
import { ConfigSourceError, InvalidConfigError } from '../errors.js';
import type { ConfigIssue } from '../errors.js';
import type { Logger } from '../log.js';
import { hash48 } from '../metrics/reload-metrics.js';
import type { ReloadMetrics } from '../metrics/reload-metrics.js';
import { errorMessage } from '../unknown-values.js';
import type { ReloadChange, ReloadOutcome, ReloadRequest, ReloadResult, ReloadTrigger } from './reload-types.js';

/** What the machine needs of a generation (a Generation is one). */
export interface ReloadGeneration {
  readonly number: number;
  /** Resolves once its caches have synced. */
  readonly whenSynced: Promise<void>;
  stop(): Promise<void>;
  /** Why it has not synced, if it knows. */
  syncError(): string | undefined;
}

/** What the machine drives: the supervisor, or a fake in tests. */
export interface ReloadHost {
  /** Reads the config source now (a reload asked without a read of the watcher's). */
  read(): Promise<SourceRead>;
  /** Where the config comes from, for a read that failed. */
  sourceLabel(): string;
  /** Validates one read (throws InvalidConfigError). */
  parse(snapshot: ConfigSnapshot): LoadedConfig;
  /** Re-reads the Node before a restart: new PVs copy its labels as they are now. */
  refreshNode(): Promise<void>;
  /** The generation serving now. */
  current(): ReloadGeneration;
  /** Creates the next generation for `loaded`, makes it the current one and starts it. */
  launch(loaded: LoadedConfig): ReloadGeneration;
  /** An event on this agent's Node. */
  nodeEvent(type: 'Normal' | 'Warning', reason: string, message: string): void;
  /** Every finished reload, after the machine's own bookkeeping (the event stream). */
  finished(result: ReloadResult): void;
}

export interface ReloadMachineOptions {
  readonly host: ReloadHost;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly metrics: ReloadMetrics;
  /** The config the first generation serves. */
  readonly applied: LoadedConfig;
  readonly reloadGuard?: ReloadGuardPolicy;
  /** The config comes from a staged rollout's copies: a refusal's advice is the rollout's, not a reload's. */
  readonly staged?: boolean;
  /** Longest wait for the old generation to stop (default 10 s). */
  readonly drainTimeoutMs?: number;
  /** Longest wait for a new generation's caches to sync before rolling back (default 30 s). */
  readonly startTimeoutMs?: number;
}

export const DEFAULT_DRAIN_TIMEOUT_MS = 10_000;
export const DEFAULT_START_TIMEOUT_MS = 30_000;

/** One reload as asked: what asked, when it began, whether forced, which guarded impacts it allows. */
interface Run {
  readonly trigger: ReloadTrigger;
  readonly force: boolean;
  readonly allow: readonly GuardedImpact[];
  readonly startedAt: number;
}

/** A valid candidate the guard let through: what a restart applies. */
interface Plan {
  readonly loaded: LoadedConfig;
  readonly changes: readonly ReloadChange[];
  readonly verdict: Exclude<GuardVerdict, { verdict: 'refuse' }>;
  readonly restartStarted: number;
}

/** Where a reload is. Each phase but the last ends at an await; `done` carries the result. */
export type ReloadState =
  /** Reading the source, unless the watcher's read is given. */
  | { readonly phase: 'read'; readonly run: Run; readonly read: SourceRead | undefined }
  /** Parse and check; noop, rejected and refused end here; else re-read the Node. */
  | { readonly phase: 'validate'; readonly run: Run; readonly read: SourceRead }
  /** The serving generation stopping, within the drain deadline. */
  | { readonly phase: 'drain'; readonly run: Run; readonly plan: Plan }
  /**
   * The next generation starting, its caches syncing within the start deadline; `overran`: the
   * number of the old one when it did not stop in time.
   */
  | { readonly phase: 'start'; readonly run: Run; readonly plan: Plan; readonly overran: number | undefined }
  /** It synced: the candidate becomes the applied config. */
  | { readonly phase: 'commit'; readonly run: Run; readonly plan: Plan; readonly next: ReloadGeneration }
  /** It did not: stopping it. */
  | { readonly phase: 'rollback'; readonly run: Run; readonly plan: Plan; readonly failed: ReloadGeneration }
  /** Starting the last good config again. */
  | { readonly phase: 'restore'; readonly run: Run; readonly plan: Plan; readonly error: string }
  | { readonly phase: 'done'; readonly result: ReloadResult };

/** The phase of a reload in progress. */
export type ReloadPhase = Exclude<ReloadState, { phase: 'done' }>['phase'];

/** A reload waiting to run; requests that join it may still change `force`, `allow` and `read`. */
interface ReloadAsk {
  readonly trigger: ReloadTrigger;
  force: boolean;
  allow: readonly GuardedImpact[];
  /** What the watcher read (the reload applies exactly that); undefined: read the source when it runs. */
  read: SourceRead | undefined;
}

/** What the guard found, for the result, the log and the Node event. */
function guardReason(verdict: Exclude<GuardVerdict, { verdict: 'apply' }>): string {
  const what = verdict.needs
    .map((impact) => {
      const paths = verdict.guarded.filter((c) => c.impact === impact).map((c) => c.path);
      const effect = impact === 'orphans-pvs' ? 'would orphan existing PVs' : 'would change which PVs the agent owns';
      return `${effect} (${paths.join(', ')})`;
    })
    .join('; ');
  return `a live reload that ${what}`;
}

/** Sets the metrics of the applied config: the generation serving and its config's hash. */
export function recordApplied(metrics: ReloadMetrics, generation: number, hash: string): void {
  metrics.generation.set({}, generation);
  metrics.configHash.set({}, hash48(hash));
  metrics.configInfo.reset();
  metrics.configInfo.set({ hash, generation: String(generation) }, 1);
}

export class ReloadMachine {
  private readonly host: ReloadHost;
  private readonly clock: Clock;
  private readonly logger: Logger;
  private readonly metrics: ReloadMetrics;
  private readonly policy: ReloadGuardPolicy;
  private readonly drainTimeoutMs: number;
  private readonly startTimeoutMs: number;
  private readonly staged: boolean;
  private appliedConfig: LoadedConfig;
  private diskHash: string | undefined;
  private last: ReloadResult | undefined;
  private notApplied: ReloadResult | undefined;
  /** The candidate hash last refused by the guard: its Node event is sent once. */
  private refusedHash: string | undefined;
  private running: Promise<ReloadResult> | undefined;
  private queued: (ReloadAsk & { promise: Promise<ReloadResult> }) | undefined;
  private state: Exclude<ReloadState, { phase: 'done' }> | undefined;
  private halted = false;
  /** Aborted by halt(): a reload waiting on a drain or a sync gives up at once. */
  private readonly abandon = new AbortController();

  constructor(options: ReloadMachineOptions) {
    this.host = options.host;
    this.clock = options.clock;
    this.logger = options.logger;
    this.metrics = options.metrics;
    this.policy = options.reloadGuard ?? DEFAULT_RELOAD_GUARD_POLICY;
    this.drainTimeoutMs = options.drainTimeoutMs ?? DEFAULT_DRAIN_TIMEOUT_MS;
    this.startTimeoutMs = options.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS;
    this.staged = options.staged ?? false;
    this.appliedConfig = options.applied;
    this.diskHash = options.applied.hash;
  }

  /** The config serving now: the last one committed (or restored). */
  get applied(): LoadedConfig {
    return this.appliedConfig;
  }

  /** Hash of the last read that parsed (even if not applied); undefined after a rejected read. */
  get onDiskHash(): string | undefined {
    return this.diskHash;
  }

  get lastReload(): ReloadResult | undefined {
    return this.last;
  }

  /** The last reload not applied (rejected, refused, rolled back or failed), until one succeeds. */
  get rejected(): ReloadResult | undefined {
    return this.notApplied;
  }

  /** A reload waits behind the one running. */
  get pending(): boolean {
    return this.queued !== undefined;
  }

  /** The running reload's phase, or idle. */
  get phase(): ReloadPhase | 'idle' {
    return this.state?.phase ?? 'idle';
  }

  /**
   * Asks for a reload: of `read` (what the watcher read), or of a fresh read of the source when
   * undefined. Requests arriving while one runs coalesce into a single pending one (the latest
   * content wins, `force` if any asked for it), whose result they all get.
   */
  request(request: ReloadRequest, read: SourceRead | undefined): Promise<ReloadResult> {
    this.metrics.watchEvents.inc({ source: request.trigger });
    const allow = request.allow ?? [];
    if (this.running === undefined)
      return this.begin({ trigger: request.trigger, force: request.force === true, allow, read });
    if (this.queued) {
      // Joining requests share one reload: force if any asked, allowed what any allowed, and the
      // latest content: the newest read, or a fresh read when one asked without one.
      this.queued.force ||= request.force === true;
      this.queued.allow = [...new Set([...this.queued.allow, ...allow])];
      this.queued.read = read;
      return this.queued.promise;
    }
    const pending: ReloadAsk = { trigger: request.trigger, force: request.force === true, allow, read };
    const promise = this.running
      .catch(() => undefined)
      .then(() => {
        this.queued = undefined;
        this.metrics.reloadPending.set({}, 0);
        return this.begin(pending);
      });
    this.queued = Object.assign(pending, { promise });
    this.metrics.reloadPending.set({}, 1);
    return promise;
  }

  /** The agent is stopping: a reload in progress gives up at its next step, a later one does not begin. */
  halt(): void {
    this.halted = true;
    this.abandon.abort();
  }

  /** The reload to wait for before stopping: the pending one, else the running one. */
  inFlight(): Promise<ReloadResult> | undefined {
    return this.queued?.promise ?? this.running;
  }

  private begin(ask: ReloadAsk): Promise<ReloadResult> {
    const run = this.run(ask).finally(() => {
      if (this.running === run) this.running = undefined;
    });
    this.running = run;
    return run;
  }

  /** A method, not the field: TypeScript would carry a test of the field across the awaits. */
  private isHalted(): boolean {
    return this.halted;
  }

  private async run(ask: ReloadAsk): Promise<ReloadResult> {
    const run: Run = { trigger: ask.trigger, force: ask.force, allow: ask.allow, startedAt: this.clock.now() };
    // Asked of a stopping agent: it never began, so it is not counted either.
    if (this.halted) return this.result('failed', run, { error: 'the agent is stopping' });
    let state: ReloadState = { phase: 'read', run, read: ask.read };
    while (state.phase !== 'done') {
      this.state = state;
      const next: ReloadState = await this.step(state);
      state = next.phase !== 'done' && this.isHalted() ? this.abandoned(run) : next;
    }
    this.state = undefined;
    return state.result;
  }

  /** The transition function: one phase's work, and the state it leads to. */
  private async step(state: Exclude<ReloadState, { phase: 'done' }>): Promise<ReloadState> {
    switch (state.phase) {
      case 'read':
        // Read here, not by the watcher: the host tells it it need not offer this content again.
        return { phase: 'validate', run: state.run, read: state.read ?? (await this.host.read()) };
      case 'validate':
        return this.validate(state.run, state.read);
      case 'drain': {
        const old = this.host.current();
        const drained = await within(this.clock, old.stop(), this.drainTimeoutMs, this.abandon.signal);
        return { phase: 'start', run: state.run, plan: state.plan, overran: drained.ok ? undefined : old.number };
      }
      case 'start': {
        if (state.overran !== undefined)
          this.logger.log(
            'warn',
            'the old generation did not stop within the drain deadline; starting the new one anyway',
            { generation: state.overran },
          );
        const next = this.host.launch(state.plan.loaded);
        const synced = await within(this.clock, next.whenSynced, this.startTimeoutMs, this.abandon.signal);
        return synced.ok
          ? { phase: 'commit', run: state.run, plan: state.plan, next }
          : { phase: 'rollback', run: state.run, plan: state.plan, failed: next };
      }
      case 'commit':
        return this.commit(state.run, state.plan, state.next);
      case 'rollback': {
        // The new generation cannot start (a missing permission, an unreachable API).
        const { failed } = state;
        const error = `generation ${String(failed.number)} did not sync within ${String(this.startTimeoutMs)} ms: ${failed.syncError() ?? 'no error reported'}`;
        await failed.stop();
        return { phase: 'restore', run: state.run, plan: state.plan, error };
      }
      case 'restore':
        return this.restore(state.run, state.plan, state.error);
    }
  }

  private async validate(run: Run, read: SourceRead): Promise<ReloadState> {
    const where = read.ok ? read.snapshot.source.path : this.host.sourceLabel();
    let loaded: LoadedConfig;
    try {
      if (!read.ok) throw read.error;
      loaded = this.host.parse(read.snapshot);
    } catch (err) {
      if (err instanceof InvalidConfigError) {
        this.diskHash = undefined;
        const errors = err.issues.filter((i) => i.severity === 'error');
        this.logger.log('error', 'config rejected: the running config stays', {
          source: where,
          problems: errors.length,
          first: errors[0]?.message,
        });
        this.host.nodeEvent(
          'Warning',
          'ConfigRejected',
          `config in ${where} rejected (${errors.length} problems; first: ${errors[0] ? `${errors[0].path}: ${errors[0].message}` : '?'}); still applying ${this.appliedConfig.hash}`,
        );
        return this.done(this.result('rejected', run, { issues: err.issues }));
      }
      const error = err instanceof ConfigSourceError ? err.message : `cannot read the config: ${errorMessage(err)}`;
      this.logger.log('error', 'config reload failed: the running config stays', { error });
      return this.done(this.result('failed', run, { error }));
    }
    this.diskHash = loaded.hash;
    if (loaded.hash === this.appliedConfig.hash && !run.force) {
      return this.done(this.result('noop', run, { candidateHash: loaded.hash, issues: loaded.warnings }));
    }
    const changes = diffConfigs(this.appliedConfig.config, loaded.config).map((c) => ({
      path: c.path,
      action: c.action,
      impact: c.effect.impact,
      summary: c.effect.summary,
    }));
    const verdict = guardReload(changes, this.policy, run.allow);
    if (verdict.verdict === 'refuse') return this.refuse(run, verdict, loaded, changes);
    const restartStarted = this.clock.now();
    await this.host.refreshNode();
    return { phase: 'drain', run, plan: { loaded, changes, verdict, restartStarted } };
  }

  /** The guard said refuse: the running config stays; log and Node event once per candidate. */
  private refuse(
    run: Run,
    verdict: Extract<GuardVerdict, { verdict: 'refuse' }>,
    loaded: LoadedConfig,
    changes: readonly ReloadChange[],
  ): ReloadState {
    const command = allowCommand(verdict.needs);
    // Under a staged rollout the refusal halts it and the node returns to stable: a reload or a
    // restart of this agent would then apply stable, not this candidate.
    const advice = this.staged
      ? 'Under a staged rollout this halts it; to roll the change out, `provisioner rollout promote` it and restart the agents (start-up is not guarded), or set their guard to warn or apply'
      : `Apply it with \`${command}\` or by restarting the agent`;
    const error = `${guardReason(verdict)} was refused; generation ${String(this.host.current().number)} keeps serving ${this.appliedConfig.hash}. ${advice}`;
    const first = this.refusedHash !== loaded.hash;
    this.refusedHash = loaded.hash;
    this.logger.log(first ? 'warn' : 'info', 'config refused by the reload guard: the running config stays', {
      config: loaded.hash,
      needsAllow: verdict.needs.join(','),
      changes: verdict.guarded.map((c) => c.path).join(', '),
      trigger: run.trigger,
    });
    if (first) this.host.nodeEvent('Warning', 'ConfigRefused', `config ${loaded.hash}: ${error}`);
    return this.done(
      this.result('refused', run, {
        candidateHash: loaded.hash,
        changes,
        issues: loaded.warnings,
        error,
        needsAllow: verdict.needs,
      }),
    );
  }

  private commit(run: Run, plan: Plan, next: ReloadGeneration): ReloadState {
    const { loaded, changes, verdict } = plan;
    this.appliedConfig = loaded;
    recordApplied(this.metrics, next.number, loaded.hash);
    this.metrics.restartDuration.observe({}, (this.clock.now() - plan.restartStarted) / 1000);
    this.logger.log('info', 'config applied', {
      generation: next.number,
      config: loaded.hash,
      changes: changes.length,
      trigger: run.trigger,
    });
    this.host.nodeEvent(
      'Normal',
      'ConfigApplied',
      `generation ${String(next.number)} applies config ${loaded.hash} (${String(changes.length)} changes)`,
    );
    let guardWarnings: ConfigIssue[] = [];
    if (verdict.verdict === 'warn') {
      guardWarnings = verdict.guarded.map((c) => ({
        severity: 'warning',
        path: c.path,
        message: `applied by a live reload although it is ${c.impact} (--reload-guard=warn)`,
      }));
      this.logger.log('warn', 'config applied although the reload guard would refuse it (--reload-guard=warn)', {
        config: loaded.hash,
        changes: verdict.guarded.map((c) => c.path).join(', '),
      });
      this.host.nodeEvent(
        'Warning',
        'UnsafeConfigApplied',
        `config ${loaded.hash}: ${guardReason(verdict)} was applied (--reload-guard=warn)`,
      );
    }
    return this.done(
      this.result('applied', run, {
        candidateHash: loaded.hash,
        changes,
        issues: [...loaded.warnings, ...guardWarnings],
      }),
    );
  }

  private restore(run: Run, plan: Plan, error: string): ReloadState {
    const previous = this.host.launch(this.appliedConfig);
    recordApplied(this.metrics, previous.number, this.appliedConfig.hash);
    this.logger.log('error', 'config could not be applied; rolled back to the last good config', {
      error,
      config: this.appliedConfig.hash,
    });
    this.host.nodeEvent('Warning', 'ConfigRolledBack', `${error}; rolled back to ${this.appliedConfig.hash}`);
    return this.done(
      this.result('rolled-back', run, {
        candidateHash: plan.loaded.hash,
        changes: plan.changes,
        issues: plan.loaded.warnings,
        error,
      }),
    );
  }

  /** A reload that finds the agent stopping gives up before starting anything. */
  private abandoned(run: Run): ReloadState {
    this.logger.log('info', 'reload abandoned: the agent is stopping', { trigger: run.trigger });
    return this.done(this.result('failed', run, { error: 'the agent is stopping' }));
  }

  /** The end of a reload that ran: metrics, the status's last and rejected results, the host told. */
  private done(result: ReloadResult): ReloadState {
    const m = this.metrics;
    m.reloads.inc({ result: result.outcome });
    m.reloadRefused.set({}, result.outcome === 'refused' ? 1 : 0);
    if (result.outcome !== 'refused') this.refusedHash = undefined;
    this.last = result;
    if (result.outcome === 'applied' || result.outcome === 'noop') {
      this.notApplied = undefined;
      m.lastReloadSuccessful.set({}, 1);
      if (result.outcome === 'applied') m.lastReloadSuccessTimestamp.set({}, result.startedAt / 1000);
    } else {
      this.notApplied = result;
      m.lastReloadSuccessful.set({}, 0);
    }
    this.host.finished(result);
    return { phase: 'done', result };
  }

  private result(
    outcome: ReloadOutcome,
    run: Run,
    fields: {
      candidateHash?: string;
      changes?: readonly ReloadChange[];
      issues?: readonly ConfigIssue[];
      error?: string;
      needsAllow?: readonly GuardedImpact[];
    },
  ): ReloadResult {
    return {
      outcome,
      trigger: run.trigger,
      forced: run.force,
      generation: this.host.current().number,
      appliedHash: this.appliedConfig.hash,
      ...(fields.candidateHash !== undefined ? { candidateHash: fields.candidateHash } : {}),
      changes: fields.changes ?? [],
      issues: fields.issues ?? [],
      ...(fields.error !== undefined ? { error: fields.error } : {}),
      ...(fields.needsAllow !== undefined ? { needsAllow: fields.needsAllow } : {}),
      startedAt: run.startedAt,
      durationMs: this.clock.now() - run.startedAt,
    };
  }
}
