// The staged rollout controller (in process) against the real kube-apiserver: its field and label
// selectors, its create and resourceVersion-conditional updates, the status Leases it reads and
// the Events it records, through a whole rollout (canary, waves, complete), a request, and a halt.
// The agents' part is played by the test, writing their status Leases. Other tests create Nodes
// too: the waves are frozen at the start, so every node of them gets a Lease.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { systemClock } from '../../../src/core/clock.js';
import { statusLease, statusLeaseName } from '../../../src/core/fleet/applied-state.js';
import type { AppliedResult } from '../../../src/core/fleet/applied-state.js';
import { isNotFound } from '../../../src/core/kube/cluster.js';
import { loadKubeconfig } from '../../../src/core/kube/kubeconfig.js';
import type { ConfigMap } from '../../../src/core/kube/objects.js';
import { RestCluster } from '../../../src/core/kube/rest-cluster.js';
import { silentLogger } from '../../../src/core/log.js';
import { EVENT_REASONS } from '../../../src/core/staged-rollout/decide.js';
import { contentOf } from '../../../src/core/staged-rollout/objects.js';
import { ROLLOUT_REQUEST_ANNOTATION, stateOf } from '../../../src/core/rollout-state/annotations.js';
import { policyFromFlags } from '../../../src/core/staged-rollout/policy.js';
import { startRolloutController } from '../../../src/core/staged-rollout/service.js';
import type { RunningRolloutController } from '../../../src/core/staged-rollout/service.js';
import { encodeRolloutRequest, runsCandidate } from '../../../src/core/rollout-state/state.js';
import type { RolloutState } from '../../../src/core/rollout-state/state.js';
import { waveMembers } from '../../../src/core/rollout-state/membership.js';
import { eventually } from '../../support/eventually.js';
import { requireTestControlPlane } from '../../support/test-cluster.js';

const NS = 'default';
const suffix = randomBytes(3).toString('hex');
const NAME = `rc-${suffix}-config`;
const INSTANCE = `rc-${suffix}`;
const CANARY_LABEL = `rc-${suffix}-canary`;
const NODES = [`rc-${suffix}-a`, `rc-${suffix}-b`, `rc-${suffix}-c`];

function configData(dir: string): Record<string, string> {
  return { storageClassMap: `local:\n  hostDir: /mnt/${dir}\n  mountDir: /mnt/${dir}\n` };
}

function hashOf(dir: string): string {
  const hash = contentOf(NS, NAME, { metadata: { name: NAME }, data: configData(dir) }).hash;
  assert.ok(hash !== undefined);
  return hash;
}

async function ignoreNotFound(fn: () => Promise<unknown>): Promise<void> {
  try {
    await fn();
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
}

describe('staged rollout controller on the real apiserver', () => {
  let cluster: RestCluster;
  let service: RunningRolloutController | undefined;
  const reported = new Set<string>();

  before(async () => {
    cluster = new RestCluster({ connection: await loadKubeconfig(requireTestControlPlane().kubeconfigPath) });
    for (const [i, name] of NODES.entries())
      await cluster.nodes.create({ metadata: { name, labels: i === 0 ? { [CANARY_LABEL]: 'true' } : {} } });
    await cluster.configMaps.create(
      { metadata: { name: NAME, namespace: NS }, data: configData('v1') },
      { namespace: NS },
    );
  });

  after(async () => {
    await service?.stop();
    for (const name of NODES) await ignoreNotFound(() => cluster.nodes.delete(name));
    for (const name of [NAME, `${NAME}-stable`, `${NAME}-candidate`])
      await ignoreNotFound(() => cluster.configMaps.delete(name, { namespace: NS }));
    for (const node of reported)
      await ignoreNotFound(() => cluster.leases.delete(statusLeaseName(INSTANCE, node), { namespace: NS }));
    await ignoreNotFound(() => cluster.leases.delete(`${INSTANCE}-leader`, { namespace: NS }));
    cluster.close();
  });

  async function get(name: string): Promise<ConfigMap | undefined> {
    try {
      return await cluster.configMaps.get(name, { namespace: NS });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  async function state(): Promise<RolloutState | undefined> {
    const decoded = stateOf(await get(`${NAME}-candidate`));
    return decoded?.ok === true ? decoded.state : undefined;
  }

  function until(what: string, check: (s: RolloutState) => boolean): Promise<RolloutState> {
    return eventually(
      async () => {
        const s = await state();
        return s !== undefined && check(s) ? s : undefined;
      },
      what,
      30_000,
      100,
    );
  }

  async function report(
    node: string,
    appliedHash: string,
    extra: { result?: AppliedResult; candidateHash?: string } = {},
  ) {
    const target = { name: statusLeaseName(INSTANCE, node), namespace: NS, instance: INSTANCE };
    let existing;
    try {
      existing = await cluster.leases.get(target.name, { namespace: NS });
    } catch (err) {
      if (!isNotFound(err)) throw err;
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
      },
      systemClock.now(),
      600_000,
      existing,
    );
    reported.add(node);
    if (existing === undefined) await cluster.leases.create(lease, { namespace: NS });
    else await cluster.leases.update(lease, { namespace: NS });
  }

  async function apply(dir: string): Promise<void> {
    const existing = await get(NAME);
    assert.ok(existing);
    await cluster.configMaps.update({ ...existing, data: configData(dir) }, { namespace: NS });
  }

  it('adopts, rolls a good candidate out wave by wave, acts on a request, and halts on a rejecting canary', async () => {
    service = await startRolloutController(
      {
        settings: {
          namespace: NS,
          name: NAME,
          instance: INSTANCE,
          policy: policyFromFlags({ canarySelector: `${CANARY_LABEL}=true`, waves: '50%,100%', bakeTime: '1s' }),
          resyncMs: 0,
        },
        listenAddress: '',
        metricsPath: '/metrics',
        identity: 'replica-a',
        leaderElection: {
          name: `${INSTANCE}-leader`,
          namespace: NS,
          timing: { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 },
        },
      },
      { cluster, clock: systemClock, logger: silentLogger },
    );
    const adopted = await until('the ConfigMap adopted as stable', (s) => s.phase === 'complete');
    assert.equal(adopted.stable.hash, hashOf('v1'));
    assert.deepEqual((await get(`${NAME}-stable`))?.data, configData('v1'));

    // The agents run the stable config (a rollout stages only nodes that publish a Lease).
    for (const node of NODES) await report(node, hashOf('v1'));

    // A good candidate, to the end.
    const v2 = hashOf('v2');
    await apply('v2');
    let s = await until('the canary opened', (x) => x.phase === 'progressing' && x.candidate.hash === v2);
    assert.deepEqual(s.waves[0], { name: 'canary', nodes: [NODES[0]], size: 1 });
    assert.deepEqual((await get(`${NAME}-candidate`))?.data, configData('v2'));
    // A pause, acted on and cleared (written as the CLI does: a merge patch).
    await cluster.configMaps.patch(
      `${NAME}-candidate`,
      {
        metadata: {
          annotations: {
            [ROLLOUT_REQUEST_ANNOTATION]: encodeRolloutRequest({
              action: 'pause',
              candidate: s.candidate.fingerprint,
              at: systemClock.now(),
            }),
          },
        },
      },
      { namespace: NS },
    );
    await until('paused', (x) => x.phase === 'paused');
    assert.equal((await get(`${NAME}-candidate`))?.metadata.annotations?.[ROLLOUT_REQUEST_ANNOTATION], undefined);
    await cluster.configMaps.patch(
      `${NAME}-candidate`,
      {
        metadata: {
          annotations: {
            [ROLLOUT_REQUEST_ANNOTATION]: encodeRolloutRequest({
              action: 'resume',
              candidate: s.candidate.fingerprint,
              at: systemClock.now(),
            }),
          },
        },
      },
      { namespace: NS },
    );
    s = await until('resumed', (x) => x.phase === 'progressing');
    for (let wave = 0; wave < s.waves.length; wave++) {
      s = await until(`wave ${String(wave)} open`, (x) => x.opened > wave || x.phase === 'complete');
      if (s.phase === 'complete') break;
      for (const node of waveMembers(s.waves, NODES)[wave] ?? []) await report(node, v2);
    }
    s = await until('complete', (x) => x.phase === 'complete' && x.stable.hash === v2);
    assert.deepEqual((await get(`${NAME}-stable`))?.data, configData('v2'));

    // A candidate the canary rejects: halted and reverted; the other nodes never run it.
    const v3 = hashOf('v3');
    await apply('v3');
    s = await until('the canary opened for v3', (x) => x.phase === 'progressing' && x.candidate.hash === v3);
    const canary = NODES[0] ?? '';
    await report(canary, v2, { result: 'rejected', candidateHash: v3 });
    s = await until('halted', (x) => x.phase === 'halted');
    assert.equal(s.halt?.node, canary);
    assert.equal(s.reverted, true);
    assert.ok(NODES.every((n) => !runsCandidate(s, n)));
    assert.deepEqual((await get(`${NAME}-stable`))?.data, configData('v2'));

    const events = await eventually(async () => {
      const list = await cluster.events.list({ namespace: NS });
      const mine = list.items.filter((e) => e.involvedObject.name === NAME);
      return mine.some((e) => e.reason === EVENT_REASONS.halted) ? mine : undefined;
    }, 'the Events on the ConfigMap');
    const reasons = new Set(events.map((e) => e.reason));
    for (const reason of [
      EVENT_REASONS.adopted,
      EVENT_REASONS.started,
      EVENT_REASONS.paused,
      EVENT_REASONS.resumed,
      EVENT_REASONS.waveOpened,
      EVENT_REASONS.completed,
      EVENT_REASONS.halted,
    ])
      assert.ok(reasons.has(reason), `Event ${reason}`);
    assert.ok(events.every((e) => e.source?.component === 'local-volume-rollout-controller'));
  });
});
