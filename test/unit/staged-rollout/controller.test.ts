// The staged rollout controller's loop on the in-memory apiserver with a manual clock: what it
// writes (the stable copy, the candidate copy with the state) and records, step by step, as the
// operator applies, the agents report through their status Leases, and time passes.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ManualClock } from '../../../src/core/clock.js';
import { statusLease, statusLeaseName } from '../../../src/core/fleet/applied-state.js';
import type { AppliedResult } from '../../../src/core/fleet/applied-state.js';
import type { ResourceClient } from '../../../src/core/kube/cluster.js';
import type { EventSink } from '../../../src/core/kube/events.js';
import { MemoryCluster } from '../../../src/core/kube/memory/memory-cluster.js';
import type { ConfigMap, ObjectReference } from '../../../src/core/kube/objects.js';
import { MemoryLogger } from '../../../src/core/log.js';
import { createRolloutMetrics } from '../../../src/core/metrics/rollout-metrics.js';
import { RolloutController } from '../../../src/core/staged-rollout/controller.js';
import type { RolloutControllerSettings } from '../../../src/core/staged-rollout/controller.js';
import { EVENT_REASONS } from '../../../src/core/staged-rollout/decide.js';
import {
  CONFIG_HASH_ANNOTATION,
  ROLLOUT_REQUEST_ANNOTATION,
  STAGED_ROLE_LABEL,
  stateOf,
} from '../../../src/core/rollout-state/annotations.js';
import { contentOf } from '../../../src/core/staged-rollout/objects.js';
import { policyFromFlags } from '../../../src/core/staged-rollout/policy.js';
import { encodeRolloutRequest, runsCandidate } from '../../../src/core/rollout-state/state.js';
import type { RolloutAction, RolloutState } from '../../../src/core/rollout-state/state.js';
import { waveMembers } from '../../../src/core/rollout-state/membership.js';

const NS = 'default';
const NAME = 'lvp-config';
const INSTANCE = 'lvp';
const BAKE_MS = 30_000;
const NODES = ['node-a', 'node-b', 'node-c', 'node-d'];

function configData(dir: string): Record<string, string> {
  return { storageClassMap: `local:\n  hostDir: /mnt/${dir}\n  mountDir: /mnt/${dir}\n` };
}

function hashOf(dir: string): string {
  const hash = contentOf(NS, NAME, { metadata: { name: NAME }, data: configData(dir) }).hash;
  assert.ok(hash !== undefined);
  return hash;
}

interface Recorded {
  readonly object: ObjectReference;
  readonly type: 'Normal' | 'Warning';
  readonly reason: string;
  readonly message: string;
}

class RecordingEvents implements EventSink {
  readonly events: Recorded[] = [];
  record(object: ObjectReference, type: 'Normal' | 'Warning', reason: string, message: string): void {
    this.events.push({ object, type, reason, message });
  }
  reasons(): string[] {
    return this.events.map((e) => e.reason);
  }
}

async function settle(): Promise<void> {
  for (let i = 0; i < 10; i++) await new Promise((resolve) => setImmediate(resolve));
}

interface HarnessOptions {
  readonly leading?: boolean;
  readonly settings?: Partial<RolloutControllerSettings>;
  /** Share a cluster (and clock) with an earlier harness: a restarted controller. */
  readonly from?: { readonly cluster: MemoryCluster; readonly clock: ManualClock };
}

function harness(options: HarnessOptions = {}) {
  const clock = options.from?.clock ?? new ManualClock(Date.parse('2026-12-01T14:00:00Z'));
  const cluster = options.from?.cluster ?? new MemoryCluster({ clock });
  const events = new RecordingEvents();
  const logger = new MemoryLogger();
  const metrics = createRolloutMetrics();
  let term: AbortController | undefined = options.leading === false ? undefined : new AbortController();
  // The controller's port, mutable so that a test can intercept a call.
  const port: {
    configMaps: ResourceClient<ConfigMap>;
    nodes: MemoryCluster['nodes'];
    leases: MemoryCluster['leases'];
  } = { configMaps: cluster.configMaps, nodes: cluster.nodes, leases: cluster.leases };
  const settings: RolloutControllerSettings = {
    namespace: NS,
    name: NAME,
    instance: INSTANCE,
    policy: policyFromFlags({ canaryCount: 1, waves: '50%,100%', bakeTime: '30s', progressDeadline: '10m' }),
    resyncMs: 0,
    ...options.settings,
  };
  const controller = new RolloutController(settings, {
    cluster: {
      get configMaps() {
        return port.configMaps;
      },
      nodes: port.nodes,
      leases: port.leases,
    },
    events,
    clock,
    logger,
    metrics,
    leading: () => (term !== undefined && !term.signal.aborted ? term.signal : undefined),
    random: () => 0.5,
  });
  const stop = new AbortController();
  let running: Promise<void> | undefined;

  /** Moves the clock in 100 ms steps (the debounce), letting the loop run between them. */
  async function advance(ms: number): Promise<void> {
    await settle();
    for (let t = 0; t < ms; t += 100) {
      await clock.advance(Math.min(100, ms - t));
      await settle();
    }
  }

  async function get(name: string): Promise<ConfigMap | undefined> {
    try {
      return await cluster.configMaps.get(name, { namespace: NS });
    } catch {
      return undefined;
    }
  }

  async function state(): Promise<RolloutState> {
    const decoded = stateOf(await get(`${NAME}-candidate`));
    assert.ok(decoded?.ok === true, `a readable state: ${JSON.stringify(decoded)}`);
    return decoded.state;
  }

  return {
    clock,
    cluster,
    port,
    events,
    logger,
    metrics,
    controller,
    advance,
    get,
    state,
    start(): void {
      running = controller.run(stop.signal);
    },
    async nodes(names: readonly string[] = NODES): Promise<void> {
      for (const name of names) await cluster.nodes.create({ metadata: { name } });
    },
    /** kubectl apply of the operator's ConfigMap. */
    async apply(dir: string): Promise<void> {
      const existing = await get(NAME);
      if (existing === undefined)
        await cluster.configMaps.create({ metadata: { name: NAME, namespace: NS }, data: configData(dir) });
      else await cluster.configMaps.update({ ...existing, data: configData(dir) });
    },
    /** An agent's status Lease: what it applied and how its last reload went. */
    async report(
      node: string,
      appliedHash: string,
      extra: { result?: AppliedResult; candidateHash?: string; reason?: string; errorsSinceApply?: number } = {},
    ): Promise<void> {
      const target = { name: statusLeaseName(INSTANCE, node), namespace: NS, instance: INSTANCE };
      let existing;
      try {
        existing = await cluster.leases.get(target.name, { namespace: NS });
      } catch {
        existing = undefined;
      }
      const lease = statusLease(
        target,
        {
          node,
          appliedHash,
          generation: 1,
          result: extra.result ?? 'applied',
          source: `staged:${NS}/${NAME}`,
          agentVersion: '0.1.0',
          ...(extra.candidateHash !== undefined ? { candidateHash: extra.candidateHash } : {}),
          ...(extra.reason !== undefined ? { reason: extra.reason } : {}),
          ...(extra.errorsSinceApply !== undefined ? { errorsSinceApply: extra.errorsSinceApply } : {}),
        },
        clock.now(),
        3_600_000,
        existing,
      );
      if (existing === undefined) await cluster.leases.create(lease, { namespace: NS });
      else await cluster.leases.update(lease, { namespace: NS });
    },
    /** The operator's `rollout <action>`: the request annotation on the candidate copy. */
    async request(action: RolloutAction, candidate: string): Promise<void> {
      await cluster.configMaps.patch(
        `${NAME}-candidate`,
        {
          metadata: {
            annotations: {
              [ROLLOUT_REQUEST_ANNOTATION]: encodeRolloutRequest({ action, candidate, by: 'alice', at: clock.now() }),
            },
          },
        },
        { namespace: NS },
      );
    },
    lead(): void {
      term = new AbortController();
      controller.poke();
    },
    stepDown(): void {
      term?.abort();
    },
    async stop(): Promise<void> {
      stop.abort();
      await running;
    },
  };
}

type Harness = ReturnType<typeof harness>;

/** A started controller that adopted `v1` as stable over the four nodes, which all run it. */
async function adopted(options: HarnessOptions = {}): Promise<Harness> {
  const h = harness(options);
  await h.nodes();
  await h.apply('v1');
  for (const node of NODES) await h.report(node, hashOf('v1'));
  h.start();
  await h.advance(200);
  return h;
}

/** The nodes of the open waves. */
function openNodes(state: RolloutState): string[] {
  return waveMembers(state.waves, NODES).slice(0, state.opened).flat();
}

/** Every node of the open waves reports the candidate applied. */
async function applyOpenWaves(h: Harness, hash: string): Promise<void> {
  for (const node of openNodes(await h.state())) await h.report(node, hash);
  await h.advance(200);
}

describe('staged rollout controller (in-memory apiserver, manual clock)', () => {
  it('adopts the ConfigMap as stable on its first start', async () => {
    const h = await adopted();
    const stable = await h.get(`${NAME}-stable`);
    assert.ok(stable !== undefined, 'the stable copy is written');
    assert.deepEqual(stable.data, configData('v1'));
    assert.equal(stable.metadata.annotations?.[CONFIG_HASH_ANNOTATION], hashOf('v1'));
    assert.equal(stable.metadata.labels?.[STAGED_ROLE_LABEL], 'stable');
    const state = await h.state();
    assert.equal(state.phase, 'complete');
    assert.equal(state.stable.hash, hashOf('v1'));
    assert.deepEqual(h.events.reasons(), [EVENT_REASONS.adopted]);
    const adoptedEvent = h.events.events[0];
    assert.deepEqual(
      { kind: adoptedEvent?.object.kind, namespace: adoptedEvent?.object.namespace, name: adoptedEvent?.object.name },
      { kind: 'ConfigMap', namespace: NS, name: NAME },
      'Events are on the operator’s ConfigMap',
    );
    assert.ok(h.controller.synced);
    assert.equal(h.metrics.phase.get({ phase: 'complete' }), 1);
    // Heartbeats change nothing while no rollout waits on them.
    const rv = (await h.get(`${NAME}-candidate`))?.metadata.resourceVersion;
    const passes = h.controller.passes;
    for (const node of NODES) await h.report(node, hashOf('v1'));
    await h.advance(1_000);
    assert.equal((await h.get(`${NAME}-candidate`))?.metadata.resourceVersion, rv);
    assert.equal(h.controller.passes, passes, 'no pass for a heartbeat outside a rollout');
    await h.stop();
  });

  it('a good candidate: canary, then each wave after its bake, then complete; stable becomes the candidate', async () => {
    const h = await adopted();
    const v2 = hashOf('v2');
    await h.apply('v2');
    await h.advance(200);
    let state = await h.state();
    assert.equal(state.phase, 'progressing');
    assert.equal(state.candidate.hash, v2);
    assert.deepEqual(
      state.waves.map((w) => w.name),
      ['canary', 'wave-1', 'wave-2'],
    );
    assert.equal(state.opened, 1);
    assert.equal(state.waves[0]?.size, 1);
    assert.deepEqual((await h.get(`${NAME}-candidate`))?.data, configData('v2'), 'the candidate copy has the data');
    assert.deepEqual((await h.get(`${NAME}-stable`))?.data, configData('v1'), 'stable is untouched');
    assert.ok(h.events.reasons().includes(EVENT_REASONS.started));
    assert.equal(h.metrics.nodes.get({ state: 'pending' }), 1);

    await applyOpenWaves(h, v2);
    state = await h.state();
    assert.ok(state.bakeStartedAt !== undefined, 'the bake started when the canary applied');
    assert.equal(h.metrics.nodes.get({ state: 'applied' }), 1);
    await h.advance(BAKE_MS - 1_000);
    assert.equal((await h.state()).opened, 1, 'no wave opens inside the bake');
    await h.advance(1_000);
    state = await h.state();
    assert.equal(state.opened, 2, 'wave-1 opens after the bake');
    assert.equal(state.bakeStartedAt, undefined);
    assert.ok(h.events.reasons().includes(EVENT_REASONS.waveOpened));

    await applyOpenWaves(h, v2);
    await h.advance(BAKE_MS);
    assert.equal((await h.state()).opened, 3);
    await applyOpenWaves(h, v2);
    await h.advance(BAKE_MS);
    state = await h.state();
    assert.equal(state.phase, 'complete');
    assert.equal(state.stable.hash, v2);
    const stable = await h.get(`${NAME}-stable`);
    assert.deepEqual(stable?.data, configData('v2'), 'the stable copy is the candidate now');
    assert.equal(stable.metadata.annotations?.[CONFIG_HASH_ANNOTATION], v2);
    assert.equal(h.events.reasons().at(-1), EVENT_REASONS.completed);
    assert.equal(h.metrics.completed.get(), 1);
    assert.equal(h.metrics.phase.get({ phase: 'complete' }), 1);
    assert.equal(h.metrics.phase.get({ phase: 'progressing' }), 0);
    await h.stop();
  });

  it('a node of the canary that rejects the candidate halts and reverts the rollout (Warning RolloutHalted)', async () => {
    const h = await adopted();
    const v1 = hashOf('v1');
    const v2 = hashOf('v2');
    await h.apply('v2');
    await h.advance(200);
    const [canary] = openNodes(await h.state());
    assert.ok(canary !== undefined);
    await h.report(canary, v1, { result: 'rejected', candidateHash: v2, reason: 'fsType xfs: not supported' });
    await h.advance(200);
    const state = await h.state();
    assert.equal(state.phase, 'halted');
    assert.equal(state.reverted, true);
    assert.equal(state.halt?.node, canary);
    assert.match(state.halt.reason, /rejected the candidate: fsType xfs/);
    assert.equal(runsCandidate(state, canary), false, 'the canary runs stable again');
    assert.ok(
      NODES.every((n) => !runsCandidate(state, n)),
      'no node runs the candidate',
    );
    const halted = h.events.events.find((e) => e.reason === EVENT_REASONS.halted);
    assert.equal(halted?.type, 'Warning');
    assert.match(halted.message, new RegExp(`node ${canary}: rejected`));
    assert.deepEqual((await h.get(`${NAME}-stable`))?.data, configData('v1'));
    assert.equal(h.metrics.halts.get(), 1);
    assert.equal(h.metrics.phase.get({ phase: 'halted' }), 1);
    // Nothing moves on from a halt by itself.
    await h.advance(BAKE_MS * 3);
    assert.equal((await h.state()).phase, 'halted');
    assert.equal(h.events.reasons().filter((r) => r === EVENT_REASONS.halted).length, 1);
    await h.stop();
  });

  it('errors reported since the candidate was applied halt the wave too', async () => {
    const h = await adopted();
    const v2 = hashOf('v2');
    await h.apply('v2');
    await h.advance(200);
    await applyOpenWaves(h, v2);
    const [canary] = openNodes(await h.state());
    assert.ok(canary !== undefined);
    await h.report(canary, v2, { errorsSinceApply: 2 });
    await h.advance(200);
    const state = await h.state();
    assert.equal(state.phase, 'halted');
    assert.match(state.halt?.reason ?? '', /2 discovery or cleanup errors/);
    await h.stop();
  });

  it('acts on pause, resume, abort and promote, and clears each request', async () => {
    const h = await adopted();
    const v2 = hashOf('v2');
    await h.apply('v2');
    await h.advance(200);
    const fingerprint = (await h.state()).candidate.fingerprint;
    const requestOf = async (): Promise<string | undefined> =>
      (await h.get(`${NAME}-candidate`))?.metadata.annotations?.[ROLLOUT_REQUEST_ANNOTATION];

    await h.request('pause', fingerprint);
    await h.advance(200);
    assert.equal((await h.state()).phase, 'paused');
    assert.equal(await requestOf(), undefined, 'the request is cleared');
    assert.ok(h.events.reasons().includes(EVENT_REASONS.paused));
    // Paused: an applied canary does not open the next wave.
    await applyOpenWaves(h, v2);
    await h.advance(BAKE_MS * 2);
    assert.equal((await h.state()).opened, 1);

    await h.request('resume', fingerprint);
    await h.advance(200);
    assert.equal((await h.state()).phase, 'progressing');
    assert.equal(await requestOf(), undefined);
    assert.ok(h.events.reasons().includes(EVENT_REASONS.resumed));
    await h.advance(BAKE_MS);
    assert.equal((await h.state()).opened, 2, 'resumed: the next wave opens after the bake');

    await h.request('abort', fingerprint);
    await h.advance(200);
    let state = await h.state();
    assert.equal(state.phase, 'aborted');
    assert.ok(NODES.every((n) => !runsCandidate(state, n)));
    assert.equal(await requestOf(), undefined);
    assert.ok(h.events.reasons().includes(EVENT_REASONS.aborted));

    await h.request('promote', fingerprint);
    await h.advance(200);
    state = await h.state();
    assert.equal(state.phase, 'complete');
    assert.equal(state.stable.hash, v2);
    assert.deepEqual((await h.get(`${NAME}-stable`))?.data, configData('v2'), 'promoted: stable everywhere');
    assert.equal(await requestOf(), undefined);
    assert.ok(h.events.reasons().includes(EVENT_REASONS.promoted));
    await h.stop();
  });

  it('a request for another candidate is dropped: cleared, nothing else changes', async () => {
    const h = await adopted();
    await h.apply('v2');
    await h.advance(200);
    const before = await h.state();
    await h.request('abort', `sha256:${'0'.repeat(64)}`);
    await h.advance(200);
    const after = await h.state();
    assert.equal(after.phase, 'progressing');
    assert.deepEqual(after, before);
    assert.equal((await h.get(`${NAME}-candidate`))?.metadata.annotations?.[ROLLOUT_REQUEST_ANNOTATION], undefined);
    assert.ok(!h.events.reasons().includes(EVENT_REASONS.aborted));
    await h.stop();
  });

  it('a damaged request annotation is cleared', async () => {
    const h = await adopted();
    await h.cluster.configMaps.patch(
      `${NAME}-candidate`,
      { metadata: { annotations: { [ROLLOUT_REQUEST_ANNOTATION]: '{not json' } } },
      { namespace: NS },
    );
    await h.advance(200);
    assert.equal((await h.get(`${NAME}-candidate`))?.metadata.annotations?.[ROLLOUT_REQUEST_ANNOTATION], undefined);
    assert.equal((await h.state()).phase, 'complete');
    await h.stop();
  });

  it('a new apply mid-rollout supersedes the candidate and starts again at the canary', async () => {
    const h = await adopted();
    const v2 = hashOf('v2');
    await h.apply('v2');
    await h.advance(200);
    await applyOpenWaves(h, v2);
    await h.advance(BAKE_MS);
    assert.equal((await h.state()).opened, 2);
    await h.apply('v3');
    await h.advance(200);
    const state = await h.state();
    assert.equal(state.phase, 'progressing');
    assert.equal(state.candidate.hash, hashOf('v3'));
    assert.equal(state.opened, 1, 'back at the canary');
    assert.equal(state.stable.hash, hashOf('v1'));
    assert.deepEqual((await h.get(`${NAME}-candidate`))?.data, configData('v3'));
    assert.ok(h.events.reasons().includes(EVENT_REASONS.superseded));
    await h.stop();
  });

  it('a restarted controller resumes from the stored state without opening or closing anything again', async () => {
    const first = await adopted();
    const v2 = hashOf('v2');
    await first.apply('v2');
    await first.advance(200);
    await applyOpenWaves(first, v2);
    await first.advance(BAKE_MS);
    await applyOpenWaves(first, v2);
    const stored = await first.state();
    assert.equal(stored.opened, 2);
    assert.ok(stored.bakeStartedAt !== undefined);
    await first.stop();
    const rv = (await first.get(`${NAME}-candidate`))?.metadata.resourceVersion;

    const second = harness({ from: first });
    second.start();
    await second.advance(1_000);
    assert.equal(
      (await second.get(`${NAME}-candidate`))?.metadata.resourceVersion,
      rv,
      'the restart writes nothing: the bake goes on from the stored start',
    );
    assert.deepEqual(second.events.reasons(), []);
    await second.advance(BAKE_MS);
    const state = await second.state();
    assert.equal(state.opened, 3, 'the next wave opens when the stored bake ends');
    assert.equal(state.waveOpenedAt, stored.bakeStartedAt + BAKE_MS, 'not a restart of the bake');
    assert.deepEqual(second.events.reasons(), [EVENT_REASONS.waveOpened]);
    await second.stop();
  });

  it('a follower writes nothing; once it leads, it acts', async () => {
    const h = harness({ leading: false });
    await h.nodes();
    await h.apply('v1');
    h.start();
    await h.advance(1_000);
    assert.equal(await h.get(`${NAME}-stable`), undefined);
    assert.equal(await h.get(`${NAME}-candidate`), undefined);
    assert.deepEqual(h.events.reasons(), []);
    assert.equal(h.controller.passes, 0);
    h.lead();
    await h.advance(200);
    assert.deepEqual((await h.get(`${NAME}-stable`))?.data, configData('v1'));
    h.stepDown();
    await h.apply('v2');
    await h.advance(1_000);
    assert.equal((await h.state()).phase, 'complete', 'stepped down: the new content is not acted on');
    assert.equal((await h.state()).candidate.hash, hashOf('v1'));
    await h.stop();
  });

  it('a 409 on the candidate write re-reads it and decides again, keeping the other writer’s change', async () => {
    const h = await adopted();
    const real = h.cluster.configMaps;
    let conflicts = 0;
    h.port.configMaps = {
      ...real,
      update: async (object, options) => {
        if (object.metadata.name === `${NAME}-candidate` && conflicts === 0) {
          conflicts += 1;
          // Someone else writes the candidate between the controller's read and its write.
          await real.patch(
            object.metadata.name,
            { metadata: { annotations: { 'example.com/note': 'hello' } } },
            { namespace: NS },
          );
        }
        return real.update(object, options);
      },
    };
    await h.apply('v2');
    await h.advance(200);
    assert.equal(conflicts, 1);
    const candidate = await h.get(`${NAME}-candidate`);
    const state = await h.state();
    assert.equal(state.phase, 'progressing', 'written after the re-read');
    assert.equal(state.candidate.hash, hashOf('v2'));
    assert.equal(candidate?.metadata.annotations?.['example.com/note'], 'hello', 'the other change is kept');
    assert.equal(h.events.reasons().filter((r) => r === EVENT_REASONS.started).length, 1, 'one Event');
    assert.ok(h.logger.messages().some((m) => m.includes('changed under the write')));
    await h.stop();
  });

  it('an apiserver failure is logged and retried with backoff, never a crash', async () => {
    const h = await adopted();
    const real = h.cluster.configMaps;
    let failures = 0;
    h.port.configMaps = {
      ...real,
      update: (object, options) => {
        if (failures < 2) {
          failures += 1;
          return Promise.reject(new Error('connection reset'));
        }
        return real.update(object, options);
      },
    };
    await h.apply('v2');
    await h.advance(200);
    assert.equal(failures, 1);
    assert.equal((await h.state()).phase, 'complete', 'not written yet');
    assert.ok(h.logger.messages('warn').some((m) => m.includes('retrying')));
    assert.equal(h.metrics.writeFailures.get({ copy: 'candidate' }), 1);
    await h.advance(5_000);
    await h.advance(5_000);
    assert.equal(failures, 2);
    assert.equal((await h.state()).phase, 'progressing', 'written on a retry');
    await h.stop();
  });

  it('a canary selector matching no node halts before the canary; resume plans the waves then, never completing untested', async () => {
    const h = await adopted({
      settings: {
        policy: policyFromFlags({ canarySelector: 'rollout=canary', waves: '100%', bakeTime: '30s' }),
      },
    });
    await h.apply('v2');
    await h.advance(200);
    let state = await h.state();
    assert.equal(state.phase, 'halted');
    assert.deepEqual(state.waves, []);
    assert.match(state.halt?.reason ?? '', /matches no node/);
    const fingerprint = state.candidate.fingerprint;
    // Resumed while still no node matches: it stays halted.
    await h.request('resume', fingerprint);
    await h.advance(200);
    await h.advance(BAKE_MS * 2);
    state = await h.state();
    assert.notEqual(state.phase, 'complete', 'no wave ran the candidate: it is not stable');
    assert.deepEqual((await h.get(`${NAME}-stable`))?.data, configData('v1'));
    // A node labelled as canary, then resume: the canary opens first.
    const node = await h.cluster.nodes.get('node-c');
    await h.cluster.nodes.update({ ...node, metadata: { ...node.metadata, labels: { rollout: 'canary' } } });
    await h.request('resume', fingerprint);
    await h.advance(200);
    state = await h.state();
    assert.equal(state.phase, 'progressing');
    assert.deepEqual(state.waves[0], { name: 'canary', nodes: ['node-c'], size: 1 });
    assert.equal(state.opened, 1);
    await h.stop();
  });

  it('a candidate that does not parse is marked invalid; no node takes it', async () => {
    const h = await adopted();
    const existing = await h.get(NAME);
    assert.ok(existing);
    await h.cluster.configMaps.update({ ...existing, data: { storageClassMap: 'local: [' } });
    await h.advance(200);
    const state = await h.state();
    assert.equal(state.phase, 'invalid');
    assert.ok(NODES.every((n) => !runsCandidate(state, n)));
    assert.ok(h.events.events.some((e) => e.reason === EVENT_REASONS.invalid && e.type === 'Warning'));
    await h.stop();
  });
});
