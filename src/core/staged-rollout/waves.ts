// Wave membership: deterministic, from the node names alone (and the canary selector's labels), so
// the same fleet always gets the same waves. Nodes are ranked by a hash of their name; the canary
// is the selector's nodes or the first N by rank, then each wave reaches its cumulative share of
// the rest by rank. The plan is frozen as rank bounds, not names: wave i takes the nodes whose rank
// is above wave i-1's bound and up to its own, so the state's size does not grow with the fleet,
// every node (one that joins later too) is in exactly one wave, and a node joining or leaving
// during a rollout moves no other. Only a canary a selector picked is listed by name. Pure.
import { parseLabelSelector } from '../kube/label-selector.js';
import type { StagedRolloutPolicy } from './policy.js';
import { MAX_LISTED_NODES, MAX_RANK, nodeRank } from '../rollout-state/membership.js';
import type { Wave } from '../rollout-state/membership.js';

export interface FleetNode {
  readonly name: string;
  readonly labels?: Readonly<Record<string, string>>;
}

interface RankedNode {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly rank: string;
}

function byRank(a: RankedNode, b: RankedNode): number {
  if (a.rank !== b.rank) return a.rank < b.rank ? -1 : 1;
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}

export type WavePlan =
  | {
      readonly ok: true;
      readonly waves: readonly Wave[];
      /** Each wave's nodes at planning time, sorted (messages, simulate's report). */
      readonly members: readonly (readonly string[])[];
    }
  | { readonly ok: false; readonly reason: string };

/** The canary: the selector's nodes (listed), or the first N by rank (a rank bound). */
function pickCanary(
  policy: StagedRolloutPolicy,
  ranked: readonly RankedNode[],
): { readonly canary: readonly RankedNode[]; readonly listed: boolean } | { readonly reason: string } {
  if (policy.canary.kind !== 'selector') return { canary: ranked.slice(0, policy.canary.count), listed: false };
  const selector = parseLabelSelector(policy.canary.selector);
  const canary = ranked.filter((n) => selector.matches(n.labels));
  if (canary.length === 0 && ranked.length > 0)
    return { reason: `the canary selector ${policy.canary.selector} matches no node` };
  if (canary.length > MAX_LISTED_NODES)
    return {
      reason: `the canary selector ${policy.canary.selector} matches ${String(canary.length)} nodes; a canary is at most ${String(MAX_LISTED_NODES)} (use --canary-count, or a narrower selector)`,
    };
  return { canary, listed: true };
}

/** The policy's steps over the nodes outside the canary, as runs of them by rank (none empty). */
function stepsOver(policy: StagedRolloutPolicy, rest: readonly RankedNode[]): RankedNode[][] {
  const runs: RankedNode[][] = [];
  let reached = 0;
  for (const step of policy.waves) {
    const target = Math.min(
      rest.length,
      step.kind === 'percent' ? Math.ceil((step.value * rest.length) / 100) : step.value,
    );
    if (target <= reached) continue;
    runs.push(rest.slice(reached, target));
    reached = target;
  }
  if (reached < rest.length) runs.push(rest.slice(reached));
  return runs;
}

/**
 * The waves of a rollout over `nodes`: the canary first, then one wave per policy step that adds
 * nodes (a step that adds none, on a small fleet, is dropped). The last wave ranked by bound
 * reaches MAX_RANK. A canary selector that matches no node is a plan error: the operator asked for
 * canaries and there are none.
 */
export function planWaves(policy: StagedRolloutPolicy, nodes: readonly FleetNode[]): WavePlan {
  const ranked = [...new Map(nodes.map((n) => [n.name, n])).values()]
    .map((n) => ({ name: n.name, labels: n.labels ?? {}, rank: nodeRank(n.name) }))
    .sort(byRank);
  const picked = pickCanary(policy, ranked);
  if ('reason' in picked) return { ok: false, reason: picked.reason };
  const { canary, listed } = picked;
  const inCanary = new Set(canary.map((n) => n.name));
  const runs = stepsOver(
    policy,
    ranked.filter((n) => !inCanary.has(n.name)),
  );
  const names = (run: readonly RankedNode[]): string[] => run.map((n) => n.name).sort();
  const waves: Wave[] = [];
  const members: string[][] = [];
  if (canary.length > 0) {
    const bound = runs.length === 0 ? MAX_RANK : (canary.at(-1)?.rank ?? MAX_RANK);
    waves.push(
      listed
        ? { name: 'canary', nodes: names(canary), size: canary.length }
        : { name: 'canary', upTo: bound, size: canary.length },
    );
    members.push(names(canary));
  }
  runs.forEach((run, i) => {
    const last = i === runs.length - 1;
    waves.push({
      name: `wave-${String(i + 1)}`,
      upTo: last ? MAX_RANK : (run.at(-1)?.rank ?? MAX_RANK),
      size: run.length,
    });
    members.push(names(run));
  });
  return { ok: true, waves, members };
}
