// What a staged rollout costs in-process as the fleet grows (issue 35): the stored state's bytes
// (format 2, rank bounds) beside what format 1 (every node listed) would have been, the plan, one
// controller pass (building the view from cached Leases and deciding) with the Leases decoded once
// and decoded every pass, the pass one Lease change costs with the controller's FleetIndex and the
// index's rebuild when a wave opens, and `rollout status`'s classification of every node. No apiserver: the
// functions the controller and the command call, on the same inputs, timed as medians of several
// runs in one process. Not a timed test.
//
// Usage (after `npm run build`): node dist/bench/rollout-decide.js [--fleets 1000,10000] [--runs 15]
import { performance } from 'node:perf_hooks';
import { statusLease, stateFromLease } from '../src/core/fleet/applied-state.js';
import type { PublishedState } from '../src/core/fleet/applied-state.js';
import { summarizeRollout } from '../src/core/staged-rollout/status.js';
import type { Lease } from '../src/core/kube/objects.js';
import { decide } from '../src/core/staged-rollout/decide.js';
import { FleetIndex } from '../src/core/staged-rollout/fleet-index.js';
import type { RolloutView } from '../src/core/staged-rollout/decide.js';
import { DEFAULT_POLICY } from '../src/core/staged-rollout/policy.js';
import { encodeRolloutState } from '../src/core/rollout-state/state.js';
import type { RolloutState } from '../src/core/rollout-state/state.js';
import { planWaves } from '../src/core/staged-rollout/waves.js';

function flag(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? (process.argv[i + 1] ?? fallback) : fallback;
}

const FLEETS = flag('fleets', '1000,10000').split(',').map(Number);
const RUNS = Number(flag('runs', '15'));
const T0 = 1_800_000_000_000;
const STABLE = { fingerprint: `sha256:${'1'.repeat(64)}`, hash: `sha256:${'a'.repeat(64)}` };
const CANDIDATE = { fingerprint: `sha256:${'2'.repeat(64)}`, hash: `sha256:${'b'.repeat(64)}` };

/** EC2-style names: 26 characters, as in the docs' limit. */
const nodeName = (i: number): string =>
  `ip-10-${String(Math.floor(i / 65536) % 256).padStart(3, '0')}-${String(Math.floor(i / 256) % 256).padStart(3, '0')}-${String(i % 256).padStart(3, '0')}.ec2.internal`.slice(
    0,
    26,
  );

function median(samples: readonly number[]): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? NaN;
}

function time(runs: number, work: () => void): number {
  const samples: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t = performance.now();
    work();
    samples.push(performance.now() - t);
  }
  return median(samples);
}

/** The fleet mid-rollout: the canary and wave-1 open, their nodes on the candidate, the others on stable. */
function fleetMidRollout(n: number): { names: string[]; state: RolloutState; leases: Lease[]; members: string[][] } {
  const names = Array.from({ length: n }, (_, i) => nodeName(i));
  const plan = planWaves(
    DEFAULT_POLICY,
    names.map((name) => ({ name })),
  );
  if (!plan.ok) throw new Error(plan.reason);
  const state: RolloutState = {
    phase: 'progressing',
    candidate: CANDIDATE,
    stable: STABLE,
    waves: plan.waves,
    opened: 2,
    waveOpenedAt: T0,
    reverted: false,
    startedAt: T0,
    updatedAt: T0,
  };
  const onCandidate = new Set([...(plan.members[0] ?? []), ...(plan.members[1] ?? [])]);
  const leases = names.map((node) =>
    statusLease(
      { name: `lvp-${node}`, namespace: 'kube-system', instance: 'lvp' },
      {
        node,
        appliedHash: onCandidate.has(node) ? CANDIDATE.hash : STABLE.hash,
        generation: 3,
        result: 'applied',
        source: 'staged:kube-system/lvp-config',
        agentVersion: '0.1.0',
      },
      T0,
      180_000,
    ),
  );
  return { names, state, leases, members: plan.members.map((m) => [...m]) };
}

/**
 * The controller as it runs now: a FleetIndex fed every Lease once, then one Lease changing (a node
 * applying the candidate, then back) and the pass it triggers; and the index's rebuild when the
 * rollout's plan changes (the walk it does once per wave opened).
 */
function perEvent(
  leases: readonly Lease[],
  nodes: readonly { name: string }[],
  state: RolloutState,
): { onePerEvent: number; rebuild: number } {
  const index = new FleetIndex();
  for (const n of nodes) index.setNode(n);
  for (const l of leases) index.setLease(l.metadata.name, stateFromLease(l));
  const view = (): RolloutView => ({
    now: T0 + 1000,
    policy: DEFAULT_POLICY,
    desired: CANDIDATE,
    stable: STABLE,
    state,
    request: undefined,
    nodes: index.nodes(),
    reports: index.reports,
    openWaves: (s, now) => index.openWaves(s, now),
  });
  decide(view());
  const pending = leases.map((l) => stateFromLease(l)).find((r) => r?.appliedHash === STABLE.hash);
  const lease = leases.find((l) => stateFromLease(l)?.node === pending?.node);
  if (pending === undefined || lease === undefined) throw new Error('no node on stable');
  let flip = false;
  const onePerEvent = time(RUNS * 20, () => {
    flip = !flip;
    index.setLease(lease.metadata.name, { ...pending, appliedHash: flip ? CANDIDATE.hash : STABLE.hash });
    decide(view());
  });
  let startedAt = T0;
  const rebuild = time(RUNS, () => {
    startedAt += 1;
    index.openWaves({ ...state, startedAt }, T0 + 1000);
  });
  return { onePerEvent, rebuild };
}

function measure(n: number): Record<string, string> {
  const { names, state, leases, members } = fleetMidRollout(n);
  const nodes = names.map((name) => ({ name }));
  const planMs = time(RUNS, () => planWaves(DEFAULT_POLICY, nodes));
  const bytes = encodeRolloutState(state).length;
  // Format 1 stored the same waves with every node listed by name.
  const listed = JSON.stringify({
    format: 1,
    ...state,
    waves: state.waves.map((w, i) => ({ name: w.name, nodes: members[i] ?? [] })),
  }).length;
  const decoded = new Map(leases.map((l) => [l, stateFromLease(l)]));
  const viewFrom = (decodeEvery: boolean): RolloutView => {
    const reports = new Map<string, PublishedState>();
    for (const lease of leases) {
      const r = decodeEvery ? stateFromLease(lease) : decoded.get(lease);
      if (r !== undefined) reports.set(r.node, r);
    }
    const policy = DEFAULT_POLICY;
    return { now: T0 + 1000, policy, desired: CANDIDATE, stable: STABLE, state, request: undefined, nodes, reports };
  };
  const passCached = time(RUNS, () => decide(viewFrom(false)));
  const passDecoding = time(RUNS, () => decide(viewFrom(true)));
  const { onePerEvent, rebuild } = perEvent(leases, nodes, state);
  const reports = [...decoded.values()].filter((r) => r !== undefined);
  const staged = { namespace: 'kube-system', name: 'lvp-config', state, stable: STABLE };
  const scope = { namespace: 'kube-system', instance: 'lvp' };
  const status = time(RUNS, () =>
    summarizeRollout({ hash: CANDIDATE.hash, source: 'configmap' }, scope, names, reports, T0 + 1000, staged),
  );
  return {
    'state bytes (format 2)': String(bytes),
    'state bytes if every node were listed (format 1)': String(listed),
    'plan the waves (ms)': planMs.toFixed(1),
    'controller pass, Leases decoded once (ms)': passCached.toFixed(1),
    'controller pass, every Lease decoded (ms)': passDecoding.toFixed(1),
    'one Lease changed → a pass, with the FleetIndex (ms)': onePerEvent.toFixed(3),
    'the FleetIndex rebuilt (a wave opened or a rollout started) (ms)': rebuild.toFixed(1),
    'rollout status: classify every node (ms)': status.toFixed(1),
  };
}

const columns = FLEETS.map((n) => ({ n, values: measure(n) }));
const rows = Object.keys(columns[0]?.values ?? {});
console.log(
  `| in-process, median of ${String(RUNS)} | ${columns.map((c) => `${c.n.toLocaleString('en')} nodes`).join(' | ')} |`,
);
console.log(`|---|${columns.map(() => '---').join('|')}|`);
for (const row of rows) console.log(`| ${row} | ${columns.map((c) => c.values[row] ?? '').join(' | ')} |`);
