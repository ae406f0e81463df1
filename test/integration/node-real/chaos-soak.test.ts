// The CI-sized chaos soak (test/support/soak/run.ts): the chart and the image on a real kubelet node,
// a fixed seed, every fault kind at least once (the agent SIGKILLed mid-cleanup, mid-reload and
// mid-publish; kube-apiserver and etcd killed and restarted; the agent's apiserver black-holed and
// slowed; the kubelet restarted; the rollout and node-cleanup controllers' leaders killed; the Node
// deleted and registered again) and every chore kind at least once (claims, releases, config edits
// through the kubelet and then through staged rollouts, disks unmounted and swapped). Every invariant holds throughout: no
// violation, and no step that failed its own expectation. The long soak is bench/chaos-soak.ts.
import assert from 'node:assert/strict';
import { appendFileSync } from 'node:fs';
import { after, describe, it } from 'node:test';

import { skipUnlessKubeletNodePossible } from '../../support/kubelet-node.js';
import { Cleanup } from '../../support/real-node.js';
import { describeSoak, runSoak } from '../../support/soak/run.js';
import { CHORE_KINDS, FAULT_KINDS } from '../../support/soak/plan.js';

const SEED = 33;
const AGENT_KILLS = ['agent-kill-mid-cleanup', 'agent-kill-mid-reload', 'agent-kill-mid-publish'] as const;
const LIVE_LOG = process.env['LVP_SOAK_LOG'];

describe('chaos soak on the real node (CI size)', { skip: skipUnlessKubeletNodePossible() }, () => {
  const cleanup = new Cleanup();
  after(() => {
    cleanup.run();
  });

  it(`seed ${String(SEED)}: every fault kind once, no invariant violated`, { timeout: 15 * 60_000 }, async (t) => {
    const report = await runSoak({
      seed: SEED,
      durationMs: 90_000,
      choresPerFault: 1,
      coverEveryFault: true,
      cleanup,
      // in the test's diagnostics, and as it goes to LVP_SOAK_LOG when set (to follow a run)
      log: (line) => {
        if (LIVE_LOG !== undefined) appendFileSync(LIVE_LOG, `${line}\n`);
        t.diagnostic(line);
      },
    });
    t.diagnostic(describeSoak(report));
    for (const kind of FAULT_KINDS)
      assert.ok((report.faults[kind] ?? 0) > 0, `${kind} injected: ${describeSoak(report)}`);
    for (const kind of CHORE_KINDS) assert.ok((report.chores[kind] ?? 0) > 0, `${kind} done: ${describeSoak(report)}`);
    assert.deepEqual(report.violations, [], describeSoak(report));
    assert.deepEqual(report.stepErrors, [], describeSoak(report));
    // the agent is never so starved that the kubelet restarts it (the chart's probes allow 2 minutes)
    assert.deepEqual(report.livenessKills, [], describeSoak(report));
    assert.ok(report.counts.claims > 0 && report.counts.republished > 0, describeSoak(report));
    // every agent container's log kept (the kubelet keeps two of a pod's): the install's, one per
    // kill, the staged pod's
    const kills = AGENT_KILLS.reduce((n, kind) => n + (report.faults[kind] ?? 0), 0);
    assert.ok(report.agentLogs.files >= kills + 2 && report.agentLogs.bytes > 0, JSON.stringify(report.agentLogs));
  });
});
