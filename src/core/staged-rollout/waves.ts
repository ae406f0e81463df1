// Wave membership: deterministic, from the node names alone (and the canary selector's labels), so
// the same fleet always gets the same waves and a node joining or leaving moves no other node to
// another wave. Nodes are ranked by a hash of their name; the canary is the selector's nodes or the
// first N by rank, then each wave reaches its cumulative share of the rest by rank. Pure.
import { createHash } from 'node:crypto';
import { parseLabelSelector } from '../kube/label-selector.js';
import type { StagedRolloutPolicy } from './policy.js';
import type { Wave } from './state.js';

export interface FleetNode {
  readonly name: string;
  readonly labels?: Readonly<Record<string, string>>;
}

/** A node's rank key: the first 8 bytes of sha256(name), as hex (compares like the number). */
export function nodeRank(name: string): string {
  return createHash('sha256').update(name).digest('hex').slice(0, 16);
}

function byRank(a: { rank: string; name: string }, b: { rank: string; name: string }): number {
  if (a.rank !== b.rank) return a.rank < b.rank ? -1 : 1;
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}

export type WavePlan =
  { readonly ok: true; readonly waves: readonly Wave[] } | { readonly ok: false; readonly reason: string };

/**
 * The waves of a rollout over `nodes`: the canary first, then one wave per policy step that adds
 * nodes (a step that adds none, on a small fleet, is dropped). A canary selector that matches no
 * node is a plan error: the operator asked for canaries and there are none.
 */
export function planWaves(policy: StagedRolloutPolicy, nodes: readonly FleetNode[]): WavePlan {
  const ranked = [...new Map(nodes.map((n) => [n.name, n])).values()]
    .map((n) => ({ name: n.name, labels: n.labels ?? {}, rank: nodeRank(n.name) }))
    .sort(byRank);
  let canary: typeof ranked;
  if (policy.canary.kind === 'selector') {
    const selector = parseLabelSelector(policy.canary.selector);
    canary = ranked.filter((n) => selector.matches(n.labels));
    if (canary.length === 0 && ranked.length > 0)
      return { ok: false, reason: `the canary selector ${policy.canary.selector} matches no node` };
  } else {
    canary = ranked.slice(0, policy.canary.count);
  }
  const inCanary = new Set(canary.map((n) => n.name));
  const rest = ranked.filter((n) => !inCanary.has(n.name));
  const waves: Wave[] = [];
  if (canary.length > 0) waves.push({ name: 'canary', nodes: canary.map((n) => n.name).sort() });
  let reached = 0;
  for (const step of policy.waves) {
    const target = Math.min(
      rest.length,
      step.kind === 'percent' ? Math.ceil((step.value * rest.length) / 100) : step.value,
    );
    if (target <= reached) continue;
    waves.push({
      name: `wave-${String(waves.length + (canary.length > 0 ? 0 : 1))}`,
      nodes: rest
        .slice(reached, target)
        .map((n) => n.name)
        .sort(),
    });
    reached = target;
  }
  if (reached < rest.length)
    waves.push({
      name: `wave-${String(waves.length)}`,
      nodes: rest
        .slice(reached)
        .map((n) => n.name)
        .sort(),
    });
  return { ok: true, waves };
}
