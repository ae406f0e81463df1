// Which wave a node is in, from its name alone: nodes are ranked by a hash of their name, and a
// wave takes the nodes whose rank is above the previous wave's bound and up to its own (or, for a
// selector canary, the nodes it lists). What an agent needs to find its own wave, below config;
// planning the waves is staged-rollout/waves.ts. Pure.
import { createHash } from 'node:crypto';

/** A wave of the state (state.ts): who it takes, and how many it had at the start. */
export interface Wave {
  /** `canary`, `wave-1`, `wave-2`, … */
  readonly name: string;
  /** Nodes listed by name, sorted: a canary a selector picked (and every wave of a format-1 state). */
  readonly nodes?: readonly string[];
  /**
   * The highest node rank (nodeRank) this wave takes of the nodes no wave lists: those
   * above the previous wave's bound and up to this one. The last such wave's is the highest rank.
   */
  readonly upTo?: string;
  /** How many nodes it had when the rollout started. */
  readonly size: number;
}

/** The highest rank: the last wave's bound, so that every node, whatever its name, has a wave. */
export const MAX_RANK = 'ffffffffffffffff';

/** Nodes a selector canary may list by name: the state stays small (format and bound in state.ts). */
export const MAX_LISTED_NODES = 1000;

const RANK_CACHE_LIMIT = 50_000;
const rankCache = new Map<string, string>();

/** A node's rank key: the first 8 bytes of sha256(name), as hex (compares like the number). */
export function nodeRank(name: string): string {
  let rank = rankCache.get(name);
  if (rank === undefined) {
    rank = createHash('sha256').update(name).digest('hex').slice(0, 16);
    // A fleet's names are reused on every decision and status; a bound keeps churn from growing it.
    if (rankCache.size >= RANK_CACHE_LIMIT) rankCache.clear();
    rankCache.set(name, rank);
  }
  return rank;
}

const listedSets = new WeakMap<Wave, ReadonlySet<string>>();

/** A wave's listed nodes as a set (a selector canary lists up to MAX_LISTED_NODES: no scan per lookup). */
function listedIn(wave: Wave): ReadonlySet<string> | undefined {
  if (wave.nodes === undefined) return undefined;
  let set = listedSets.get(wave);
  if (set === undefined) {
    set = new Set(wave.nodes);
    listedSets.set(wave, set);
  }
  return set;
}

/** The index of the wave `node` belongs to: a wave listing it, else the first whose bound its rank is under. */
export function waveIndexOf(waves: readonly Wave[], node: string): number | undefined {
  const listed = waves.findIndex((w) => listedIn(w)?.has(node) === true);
  if (listed >= 0) return listed;
  const rank = nodeRank(node);
  const i = waves.findIndex((w) => w.upTo !== undefined && rank <= w.upTo);
  return i < 0 ? undefined : i;
}

/** The names of each wave among `names` (sorted); a name in no wave is left out. */
export function waveMembers(waves: readonly Wave[], names: Iterable<string>): string[][] {
  const members = waves.map((): string[] => []);
  for (const name of names) {
    const i = waveIndexOf(waves, name);
    if (i !== undefined) members[i]?.push(name);
  }
  for (const m of members) m.sort();
  return members;
}
