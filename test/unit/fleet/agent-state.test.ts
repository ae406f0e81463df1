// The agent → status Lease wiring: which of the agent's events publish its state again. A staged
// rollout reads the Lease, so what it says between a reload and the first pass under the new
// config matters (the controller must not take an applied candidate for a healthy one).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { AgentEvent, AgentStatusJson } from '../../../src/core/agent/reload-types.js';
import { ManualClock } from '../../../src/core/clock.js';
import { FIRST_WRITE_WAIT_MS, publishAgentState } from '../../../src/core/fleet/agent-state.js';
import { NO_PASS, stateFromLease } from '../../../src/core/fleet/applied-state.js';
import { MemoryCluster } from '../../../src/core/kube/memory/memory-cluster.js';
import { MemoryLogger } from '../../../src/core/log.js';
import { FakeAdminTarget, HASH_A, HASH_B, reloadResult } from '../../support/fake-admin.js';

const target = { name: 'lvp-node-a', namespace: 'default', instance: 'lvp' };

/** An agent whose last pass (and the config it ran under) the test sets. */
class PassingAgent extends FakeAdminTarget {
  lastPass: AgentStatusJson['lastPass'];
  errorsSinceApply = 0;

  override status(): AgentStatusJson {
    return {
      ...super.status(),
      errorsSinceApply: this.errorsSinceApply,
      ...(this.lastPass !== undefined ? { lastPass: this.lastPass } : {}),
    };
  }

  pass(configHash: string, at: number): AgentEvent {
    this.lastPass = { at, configHash, durationMs: 1, created: 0, deleted: 0, abnormal: 0, quarantined: 0 };
    return {
      type: 'pass',
      at,
      generation: this.generation,
      configHash,
      created: [],
      deleted: [],
      skipped: 0,
      abnormal: 0,
      quarantined: 0,
      errorsSinceApply: this.errorsSinceApply,
    };
  }
}

async function settle(): Promise<void> {
  for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
}

interface Publishing {
  readonly clock: ManualClock;
  readonly cluster: MemoryCluster;
  readonly agent: PassingAgent;
  readonly publishing: ReturnType<typeof publishAgentState>;
  /** The state on the Lease; undefined while there is none. */
  readonly lease: () => Promise<ReturnType<typeof stateFromLease>>;
}

/** An agent publishing to an in-memory Lease on a manual clock; `passed`: its start-up pass ran under that config. */
async function startPublishing(passed?: string): Promise<Publishing> {
  const clock = new ManualClock(1_780_000_000_000);
  const cluster = new MemoryCluster({ clock });
  const agent = new PassingAgent();
  if (passed !== undefined) agent.emit(agent.pass(passed, clock.now()));
  const publishing = publishAgentState(agent, {
    leases: cluster.leases,
    target,
    clock,
    logger: new MemoryLogger(),
    random: () => 0.5,
  });
  await settle();
  const lease = async (): Promise<ReturnType<typeof stateFromLease>> => {
    const found = await cluster.leases.get(target.name, { namespace: target.namespace }).catch(() => undefined);
    return found === undefined ? undefined : stateFromLease(found);
  };
  return { clock, cluster, agent, publishing, lease };
}

void describe('the agent state on its status Lease', () => {
  void it('says no pass after a reload applies a config, the config once a pass under it finished, and nothing new for later passes', async () => {
    const { clock, agent, publishing, lease: published } = await startPublishing(HASH_A);
    try {
      assert.equal((await published())?.lastPassHash, HASH_A, 'the start-up pass is in the first write');

      // A reload applies HASH_B: the new generation has not finished a pass yet.
      agent.applied = { ...agent.applied, hash: HASH_B };
      agent.generation += 1;
      agent.lastPass = undefined;
      agent.emit({ type: 'reload', at: clock.now(), result: reloadResult('applied', { appliedHash: HASH_B }) });
      await settle();
      const applied = await published();
      assert.equal(applied?.appliedHash, HASH_B);
      assert.equal(applied.lastPassHash, NO_PASS);

      // Its first pass finds an error: the pass hash and the error arrive in one write.
      agent.errorsSinceApply = 1;
      const writes = publishing.publisher.writes;
      agent.emit(agent.pass(HASH_B, clock.now()));
      await settle();
      const passed = await published();
      assert.equal(passed?.lastPassHash, HASH_B);
      assert.equal(passed.errorsSinceApply, 1);
      assert.equal(publishing.publisher.writes, writes + 1, 'one write for the pass');

      // Later passes under the same config with nothing new: no write until the heartbeat.
      for (let i = 0; i < 5; i++) agent.emit(agent.pass(HASH_B, clock.now() + i));
      await settle();
      assert.equal(publishing.publisher.writes, writes + 1);

      // Back to HASH_A; a clean first pass (no count changes) is published all the same.
      agent.applied = { ...agent.applied, hash: HASH_A };
      agent.generation += 1;
      agent.lastPass = undefined;
      agent.errorsSinceApply = 0;
      agent.emit({ type: 'reload', at: clock.now(), result: reloadResult('applied', { appliedHash: HASH_A }) });
      await settle();
      assert.equal((await published())?.lastPassHash, NO_PASS);
      agent.emit(agent.pass(HASH_A, clock.now()));
      await settle();
      assert.equal((await published())?.lastPassHash, HASH_A, 'the clean pass published without a heartbeat');
    } finally {
      await publishing.stop();
    }
  });

  void it('writes first once the first discovery pass ended, one write with it; FIRST_WRITE_WAIT_MS after the start without one', async () => {
    const passing = await startPublishing();
    try {
      assert.equal(await passing.lease(), undefined, 'nothing written before the first pass');
      await passing.clock.advance(FIRST_WRITE_WAIT_MS - 1);
      assert.equal(await passing.lease(), undefined);
      passing.agent.emit(passing.agent.pass(HASH_A, passing.clock.now()));
      await settle();
      assert.equal((await passing.lease())?.lastPassHash, HASH_A);
      assert.equal(passing.publishing.publisher.writes, 1, 'one write, with the pass');
    } finally {
      await passing.publishing.stop();
    }

    const stuck = await startPublishing();
    try {
      await stuck.clock.advance(FIRST_WRITE_WAIT_MS - 1);
      assert.equal(await stuck.lease(), undefined);
      await stuck.clock.advance(1);
      await settle();
      const written = await stuck.lease();
      assert.equal(written?.appliedHash, HASH_A, 'written at the bound without a pass');
      assert.equal(written.lastPassHash, NO_PASS);
    } finally {
      await stuck.publishing.stop();
    }
  });
});
