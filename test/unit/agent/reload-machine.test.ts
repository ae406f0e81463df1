// The reload state machine alone, on the manual clock: scripted reads of the real config parser,
// fake generations whose stop and sync the test holds, and a host that records what the machine
// asks of it. No agent, no cluster, no files.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ReloadMachine } from '../../../src/core/agent/reload-machine.js';
import type { ReloadGeneration, ReloadHost, ReloadPhase } from '../../../src/core/agent/reload-machine.js';
import { RELOAD_OUTCOMES, type ReloadResult } from '../../../src/core/agent/reload-types.js';
import { ManualClock } from '../../../src/core/clock.js';
import type { SourceRead } from '../../../src/core/config/source/port.js';
import { parseConfigSnapshot } from '../../../src/core/config/decode/parse.js';
import { snapshotFromDirectoryFiles } from '../../../src/core/config/decode/layout.js';
import type { LoadedConfig } from '../../../src/core/config/source/port.js';
import type { ReloadGuardPolicy } from '../../../src/core/config/reload-guard.js';
import { MemoryLogger } from '../../../src/core/log.js';
import { MetricsRegistry } from '../../../src/core/metrics/registry.js';
import { createReloadMetrics } from '../../../src/core/metrics/reload-metrics.js';

const DIR = '/etc/provisioner/config';
const DRAIN_MS = 10_000;
const START_MS = 30_000;
const FAST = 'fast:\n  hostDir: /mnt/fast\n  mountDir: /mnt/fast\n';
const SLOW = 'slow:\n  hostDir: /mnt/slow\n  mountDir: /mnt/slow\n';

/** One read of the source holding these classes. */
function readOf(storageClassMap: string, fingerprint = storageClassMap): SourceRead {
  return {
    ok: true,
    fingerprint,
    snapshot: snapshotFromDirectoryFiles(DIR, [{ name: 'storageClassMap', text: storageClassMap }]),
  };
}

function loadedOf(storageClassMap: string): LoadedConfig {
  const read = readOf(storageClassMap);
  assert.ok(read.ok);
  return parseConfigSnapshot(read.snapshot);
}

/** A promise the test settles. */
function held(): { promise: Promise<void>; release: () => void } {
  let release = (): void => undefined;
  const promise = new Promise<void>((resolve) => (release = resolve));
  return { promise, release };
}

class FakeGeneration implements ReloadGeneration {
  stopped = false;
  /** Set: stop() waits for it. */
  stopHold: Promise<void> | undefined;
  private readonly sync = held();
  syncProblem: string | undefined;
  constructor(
    readonly number: number,
    readonly config: LoadedConfig,
  ) {}
  get whenSynced(): Promise<void> {
    return this.sync.promise;
  }
  synced(): void {
    this.sync.release();
  }
  async stop(): Promise<void> {
    this.stopped = true;
    await this.stopHold;
  }
  syncError(): string | undefined {
    return this.syncProblem;
  }
}

/** Lets woken tasks run their next steps (the manual clock does not move). */
async function settle(): Promise<void> {
  for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
}

async function until(check: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 50 && !check(); i++) await settle();
  assert.ok(check(), `timed out waiting for ${what}`);
}

interface Setup {
  initial?: string;
  reloadGuard?: ReloadGuardPolicy;
  staged?: boolean;
  /** How each launched generation behaves (default: syncs at once). */
  onLaunch?: (generation: FakeGeneration) => void;
}

function setup(options: Setup = {}) {
  const clock = new ManualClock(1_780_000_000_000);
  const logger = new MemoryLogger();
  const registry = new MetricsRegistry();
  const generations: FakeGeneration[] = [new FakeGeneration(1, loadedOf(options.initial ?? FAST))];
  const current = (): FakeGeneration => generations[generations.length - 1] ?? assert.fail('no generation');
  const nodeEvents: string[] = [];
  const finished: ReloadResult[] = [];
  const phasesAtLaunch: (ReloadPhase | 'idle')[] = [];
  let sourceReads = 0;
  let nodeReads = 0;
  /** What the source holds now (a reload without the watcher's read reads it). */
  let onDisk = readOf(options.initial ?? FAST);
  const host: ReloadHost = {
    read: () => {
      sourceReads++;
      return Promise.resolve(onDisk);
    },
    sourceLabel: () => DIR,
    parse: parseConfigSnapshot,
    refreshNode: () => {
      nodeReads++;
      return Promise.resolve();
    },
    current,
    launch: (loaded) => {
      phasesAtLaunch.push(machine.phase);
      const next = new FakeGeneration(generations.length + 1, loaded);
      generations.push(next);
      if (options.onLaunch) options.onLaunch(next);
      else next.synced();
      return next;
    },
    nodeEvent: (_type, reason) => {
      nodeEvents.push(reason);
    },
    finished: (result) => {
      finished.push(result);
    },
  };
  const machine = new ReloadMachine({
    host,
    clock,
    logger,
    metrics: createReloadMetrics(registry, RELOAD_OUTCOMES),
    applied: current().config,
    drainTimeoutMs: DRAIN_MS,
    startTimeoutMs: START_MS,
    ...(options.reloadGuard !== undefined ? { reloadGuard: options.reloadGuard } : {}),
    ...(options.staged !== undefined ? { staged: options.staged } : {}),
  });
  const metric = (series: string): string | undefined =>
    new RegExp(`^local_volume_provisioner_${series.replace(/[{}]/gu, '\\$&')} (\\S+)$`, 'mu').exec(
      registry.render(),
    )?.[1];
  return {
    clock,
    logger,
    machine,
    generations,
    current,
    nodeEvents,
    finished,
    phasesAtLaunch,
    metric,
    counts: () => ({ sourceReads, nodeReads }),
    write: (storageClassMap: string) => {
      onDisk = readOf(storageClassMap);
    },
  };
}

describe('the reload state machine', () => {
  it('read → validate → drain → start → commit: the candidate serves in the next generation', async () => {
    const t = setup();
    const first = t.current();
    const drain = held();
    first.stopHold = drain.promise;
    t.write(`${FAST}  fsType: ext4\n`);
    assert.equal(t.machine.phase, 'idle');
    const reload = t.machine.request({ trigger: 'admin' }, undefined);
    await until(() => t.machine.phase === 'drain', 'the drain phase');
    assert.ok(first.stopped, 'draining stops the serving generation');
    assert.equal(t.generations.length, 1, 'nothing started while draining');
    assert.deepEqual(t.counts(), { sourceReads: 1, nodeReads: 1 }, 'read the source, re-read the Node');
    drain.release();
    const r = await reload;
    assert.deepEqual(t.phasesAtLaunch, ['start']);
    assert.equal(r.outcome, 'applied');
    assert.equal(r.generation, 2);
    assert.equal(r.appliedHash, t.current().config.hash);
    assert.equal(t.machine.applied.config.storageClassMap['fast']?.fsType, 'ext4');
    assert.deepEqual(
      r.changes.map((c) => c.path),
      ['storageClassMap.fast.fsType'],
    );
    assert.deepEqual(t.nodeEvents, ['ConfigApplied']);
    assert.deepEqual(t.finished, [r], 'the host hears of every finished reload');
    assert.equal(t.machine.phase, 'idle');
    assert.equal(t.machine.lastReload, r);
    assert.equal(t.metric('config_generation'), '2');
    assert.equal(t.metric('config_reloads_total{result="applied"}'), '1');
    assert.equal(t.metric('config_last_reload_successful'), '1');
  });

  it('applies the read it is given (the watcher’s) without reading the source', async () => {
    const t = setup();
    t.write(`${FAST}  fsType: xfs\n`);
    const r = await t.machine.request({ trigger: 'fs' }, readOf(`${FAST}  fsType: ext4\n`));
    assert.equal(r.outcome, 'applied');
    assert.equal(t.machine.applied.config.storageClassMap['fast']?.fsType, 'ext4');
    assert.equal(t.counts().sourceReads, 0);
  });

  it('requests arriving during the drain wait as one pending reload: the latest read, force if any asked', async () => {
    const t = setup();
    const drain = held();
    t.current().stopHold = drain.promise;
    const running = t.machine.request({ trigger: 'fs' }, readOf(`${FAST}  fsType: ext4\n`));
    await until(() => t.machine.phase === 'drain', 'the drain phase');
    const second = t.machine.request({ trigger: 'fs' }, readOf(`${FAST}  fsType: xfs\n`));
    const third = t.machine.request({ trigger: 'poll', force: true }, readOf(`${FAST}  fsType: btrfs\n`));
    assert.equal(second, third, 'the joining request shares the pending reload');
    assert.equal(t.machine.pending, true);
    assert.equal(t.metric('config_reload_pending'), '1');
    await settle();
    assert.equal(t.machine.phase, 'drain', 'the running reload is not disturbed');
    drain.release();
    const [a, b] = await Promise.all([running, second]);
    assert.equal(a.outcome, 'applied');
    assert.equal(a.generation, 2);
    assert.equal(b.outcome, 'applied');
    assert.equal(b.generation, 3, 'one more reload for the two requests');
    assert.equal(b.trigger, 'fs', 'the first of them asked');
    assert.equal(b.forced, true);
    assert.equal(t.machine.applied.config.storageClassMap['fast']?.fsType, 'btrfs', 'the latest read wins');
    assert.equal(t.generations.length, 3);
    assert.equal(t.machine.pending, false);
    assert.equal(t.metric('config_reload_pending'), '0');
  });

  it('a drain that overruns its deadline does not block the next generation', async () => {
    const t = setup();
    t.current().stopHold = new Promise(() => undefined);
    const reload = t.machine.request({ trigger: 'admin' }, readOf(`${FAST}  fsType: ext4\n`));
    await until(() => t.machine.phase === 'drain', 'the drain phase');
    await t.clock.advance(DRAIN_MS - 1);
    await settle();
    assert.equal(t.machine.phase, 'drain');
    await t.clock.advance(1);
    const r = await reload;
    assert.equal(r.outcome, 'applied');
    assert.ok(t.logger.messages('warn').some((m) => m.includes('did not stop within the drain deadline')));
  });

  it('rolls back when the next generation does not sync within the start deadline', async () => {
    const launched: FakeGeneration[] = [];
    const t = setup({
      onLaunch: (g) => {
        launched.push(g);
        if (launched.length === 1) g.syncProblem = 'jobs: forbidden';
        else g.synced();
      },
    });
    const before = t.machine.applied;
    const reload = t.machine.request({ trigger: 'admin' }, readOf(`${FAST}  fsType: ext4\n`));
    await until(() => t.machine.phase === 'start', 'the start phase');
    await t.clock.advance(START_MS - 1);
    await settle();
    assert.equal(t.machine.phase, 'start', 'still within the start deadline');
    await t.clock.advance(1);
    const r = await reload;
    assert.equal(r.outcome, 'rolled-back');
    assert.equal(r.error, `generation 2 did not sync within ${String(START_MS)} ms: jobs: forbidden`);
    assert.ok(launched[0]?.stopped, 'the failed generation is stopped');
    assert.deepEqual(t.phasesAtLaunch, ['start', 'restore']);
    assert.equal(launched[1]?.config, before, 'the last good config starts again');
    assert.equal(r.generation, 3);
    assert.equal(r.appliedHash, before.hash);
    assert.equal(r.candidateHash, launched[0].config.hash);
    assert.equal(t.machine.applied, before);
    assert.equal(t.machine.rejected, r);
    assert.deepEqual(t.nodeEvents, ['ConfigRolledBack']);
    assert.equal(t.metric('config_generation'), '3');
    assert.equal(t.metric('config_last_reload_successful'), '0');
  });

  it('the guard refuses a change that orphans PVs: no drain, one Node event per candidate; allow applies it', async () => {
    const t = setup({ initial: `${FAST}${SLOW}` });
    const first = t.current();
    const r = await t.machine.request({ trigger: 'fs' }, readOf(FAST));
    assert.equal(r.outcome, 'refused');
    assert.deepEqual(r.needsAllow, ['orphans-pvs']);
    assert.match(r.error ?? '', /would orphan existing PVs \(storageClassMap\.slow\)/u);
    assert.match(r.error ?? '', /provisioner reload --allow orphans-pvs/u);
    assert.equal(first.stopped, false, 'the serving generation was not drained');
    assert.equal(t.generations.length, 1);
    assert.equal(t.counts().nodeReads, 0);
    assert.equal(t.machine.onDiskHash, r.candidateHash, 'the refused candidate is what the source holds');
    const again = await t.machine.request({ trigger: 'signal', force: true }, readOf(FAST));
    assert.equal(again.outcome, 'refused', 'force is not allow');
    assert.deepEqual(t.nodeEvents, ['ConfigRefused'], 'one event for the same candidate');
    assert.equal(t.metric('config_reload_refused'), '1');
    const allowed = await t.machine.request({ trigger: 'admin', allow: ['orphans-pvs'] }, readOf(FAST));
    assert.equal(allowed.outcome, 'applied');
    assert.equal(t.machine.rejected, undefined);
    assert.equal(t.metric('config_reload_refused'), '0');
  });

  it('under a staged rollout a refusal advises the rollout’s way (promote, then restart), not a reload of this node', async () => {
    const t = setup({ initial: `${FAST}${SLOW}`, staged: true });
    const r = await t.machine.request({ trigger: 'fs' }, readOf(FAST));
    assert.equal(r.outcome, 'refused');
    assert.match(r.error ?? '', /would orphan existing PVs \(storageClassMap\.slow\)/u);
    assert.match(r.error ?? '', /`provisioner rollout promote` it and restart the agents/u);
    assert.doesNotMatch(r.error ?? '', /reload --allow|by restarting the agent/u);
  });

  it('policy warn applies a guarded change with a warning per change and a Warning event', async () => {
    const t = setup({ initial: `${FAST}${SLOW}`, reloadGuard: 'warn' });
    const r = await t.machine.request({ trigger: 'fs' }, readOf(FAST));
    assert.equal(r.outcome, 'applied');
    assert.deepEqual(
      r.issues.map((i) => [i.severity, i.path]),
      [['warning', 'storageClassMap.slow']],
    );
    assert.deepEqual(t.nodeEvents, ['ConfigApplied', 'UnsafeConfigApplied']);
  });

  it('rejected and noop end at validate: nothing drains, the applied config stays', async () => {
    const t = setup();
    const before = t.machine.applied;
    const bad = await t.machine.request({ trigger: 'fs' }, readOf(`${FAST}  namePattern: *\n`));
    assert.equal(bad.outcome, 'rejected');
    assert.ok(bad.issues.some((i) => i.severity === 'error'));
    assert.equal(t.machine.onDiskHash, undefined);
    assert.equal(t.machine.rejected, bad);
    const same = await t.machine.request({ trigger: 'fs' }, readOf(`# reformatted\n${FAST}`));
    assert.equal(same.outcome, 'noop');
    assert.equal(t.machine.rejected, undefined, 'a noop clears the rejected one');
    assert.equal(t.machine.onDiskHash, before.hash);
    assert.equal(t.machine.applied, before);
    assert.equal(t.current().stopped, false);
    assert.deepEqual(t.nodeEvents, ['ConfigRejected']);
    const forced = await t.machine.request({ trigger: 'admin', force: true }, readOf(FAST));
    assert.equal(forced.outcome, 'applied', 'force restarts on the same config');
    assert.equal(forced.generation, 2);
  });

  it('halted during the drain: the reload gives up at once, starts nothing, and later ones never begin', async () => {
    const t = setup();
    const first = t.current();
    first.stopHold = new Promise(() => undefined);
    const reload = t.machine.request({ trigger: 'admin' }, readOf(`${FAST}  fsType: ext4\n`));
    await until(() => t.machine.phase === 'drain', 'the drain phase');
    const queued = t.machine.request({ trigger: 'fs' }, readOf(`${FAST}  fsType: xfs\n`));
    assert.equal(t.machine.inFlight(), queued, 'stop waits for the pending reload');
    t.machine.halt();
    const r = await reload;
    assert.equal(r.outcome, 'failed');
    assert.equal(r.error, 'the agent is stopping');
    assert.equal(r.generation, 1);
    assert.equal(t.generations.length, 1, 'no generation started once halted');
    assert.equal(t.clock.pendingSleepers, 0, 'the drain deadline timer is gone');
    const q = await queued;
    assert.equal(q.outcome, 'failed');
    assert.deepEqual(
      t.finished.map((f) => f.outcome),
      ['failed'],
      'the one that never began is not reported',
    );
    assert.equal(t.metric('config_reloads_total{result="failed"}'), '1');
  });
});
