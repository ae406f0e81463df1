// The chaos soak's schedule: which step comes next, from a seed alone, so a report's seed replays
// the same run. Pure: a seed in, the steps out. Every fault kind comes once in the first
// FAULT_KINDS.length fault slots and every chore kind once in the first CHORE_KINDS.length chore
// slots (each in an order of the seed); after that faults are drawn evenly and chores by weight.
// Between two faults come workload, config and disk chores.

/** A fault injected into the node or the control plane; each is followed by a recovery check. */
export const FAULT_KINDS = [
  'agent-kill-mid-cleanup',
  'agent-kill-mid-reload',
  'agent-kill-mid-publish',
  'apiserver-restart',
  'etcd-restart',
  'apiserver-blackhole',
  'apiserver-slow',
  'kubelet-restart',
  'rollout-controller-kill',
  'node-cleanup-kill',
  'node-reregister',
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

/** What a tenant, an operator or the node does between faults. */
export const CHORE_KINDS = [
  'claim',
  'tenant-restart',
  'release',
  'edit-fstype',
  'edit-labels',
  'edit-cleaner',
  'edit-class',
  'edit-bad',
  'disk-unmount-bound',
  'disk-unmount-released',
  'disk-swap',
] as const;
export type ChoreKind = (typeof CHORE_KINDS)[number];

export type StepKind = FaultKind | ChoreKind;

const CHORE_WEIGHTS: Readonly<Record<ChoreKind, number>> = {
  claim: 6,
  'tenant-restart': 2,
  release: 5,
  'edit-fstype': 2,
  'edit-labels': 2,
  'edit-cleaner': 2,
  'edit-class': 1,
  'edit-bad': 1,
  'disk-unmount-bound': 1,
  'disk-unmount-released': 1,
  'disk-swap': 1,
};

/** A small seeded generator (mulberry32): the same numbers for the same seed. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function pickWeighted<K extends string>(random: () => number, weights: Readonly<Record<K, number>>): K {
  const entries = Object.entries(weights) as [K, number][];
  const total = entries.reduce((sum, [, w]) => sum + w, 0);
  let x = random() * total;
  for (const [kind, w] of entries) {
    x -= w;
    if (x < 0) return kind;
  }
  const last = entries.at(-1);
  if (last === undefined) throw new Error('no weights');
  return last[0];
}

function shuffled<T>(random: () => number, items: readonly T[]): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}

export interface SoakPlanOptions {
  readonly seed: number;
  /** Chores between two faults (each a count drawn in [1, choresPerFault * 2 - 1]). */
  readonly choresPerFault: number;
}

/** An endless schedule: steps come one at a time (a run stops when its time is up). */
export function* soakSchedule(options: SoakPlanOptions): Generator<StepKind, never> {
  const random = seededRandom(options.seed);
  const firstRound = shuffled(random, FAULT_KINDS);
  const firstChores = shuffled(random, CHORE_KINDS);
  for (let n = 0; ; n++) {
    const chores = 1 + Math.floor(random() * (options.choresPerFault * 2 - 1));
    for (let i = 0; i < chores; i++) yield firstChores.shift() ?? pickWeighted(random, CHORE_WEIGHTS);
    yield firstRound[n] ?? (FAULT_KINDS[Math.floor(random() * FAULT_KINDS.length)] as FaultKind);
  }
}

export const isFault = (kind: StepKind): kind is FaultKind => (FAULT_KINDS as readonly string[]).includes(kind);
