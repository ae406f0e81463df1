// The staged rollout's state: which candidate, its waves (frozen when the rollout starts), how many
// are open, and whether it is progressing, paused, halted, complete, aborted or invalid. Stored as
// one JSON annotation on the candidate ConfigMap, written only by the controller; the agents read
// it to know whether their node takes the candidate. Read back from the API it is untrusted:
// decodeRolloutState checks every field and bounds every list. Pure.
import { isRecord } from '../unknown-values.js';
import { MAX_LISTED_NODES, waveIndexOf, type Wave } from './membership.js';

export const ROLLOUT_PHASES = ['progressing', 'paused', 'halted', 'complete', 'aborted', 'invalid'] as const;
export type RolloutPhase = (typeof ROLLOUT_PHASES)[number];

/** Phases in which opened waves run the candidate (a halt that reverted excepted). */
export const ACTIVE_PHASES: readonly RolloutPhase[] = ['progressing', 'paused', 'halted'];

/** Format 2 freezes the waves as rank bounds (staged-rollout/waves.ts); format 1 listed every node, and is still read. */
export const ROLLOUT_STATE_FORMAT = 2;
/** Annotations are at most 256 KiB together; the state keeps well under it. */
export const MAX_STATE_BYTES = 200 * 1024;
export const MAX_WAVES = 21;
export const MAX_REASON_CHARS = 1024;

/** The content a rollout is about: its bytes' fingerprint, and its config hash when it parses. */
export interface ContentRef {
  /** keysFingerprint of the ConfigMap's data: equal bytes, equal fingerprint. */
  readonly fingerprint: string;
  /** The agents' config hash (`sha256:…`); absent when the content does not parse. */
  readonly hash?: string;
}

export interface Halt {
  /** Index of the wave the halting node belongs to. */
  readonly wave: number;
  /** The node that halted it; empty when the halt is not one node's (a canary selector matching none). */
  readonly node: string;
  readonly reason: string;
  readonly at: number;
}

export interface RolloutState {
  readonly phase: RolloutPhase;
  readonly candidate: ContentRef;
  readonly stable: ContentRef;
  readonly waves: readonly Wave[];
  /** How many waves are open (0 … waves.length); wave i is open when i < opened. */
  readonly opened: number;
  /** When the last opened wave opened (ms since the epoch). */
  readonly waveOpenedAt: number;
  /** When every node of the open waves first reported the candidate applied: the bake started. */
  readonly bakeStartedAt?: number;
  /** The halt reverted the open waves: the candidate runs nowhere. */
  readonly reverted: boolean;
  readonly halt?: Halt;
  readonly startedAt: number;
  readonly updatedAt: number;
  /** The last thing that happened, in one line (why invalid, who paused, …). */
  readonly message?: string;
}

/** Whether `node` runs the candidate under `state` (undefined state: nobody does). */
export function runsCandidate(state: RolloutState | undefined, node: string): boolean {
  if (state === undefined || !ACTIVE_PHASES.includes(state.phase) || state.reverted) return false;
  const wave = waveIndexOf(state.waves, node);
  return wave !== undefined && wave < state.opened;
}

/** The index of the wave `node` belongs to, or undefined. */
export function waveOf(state: RolloutState, node: string): number | undefined {
  return waveIndexOf(state.waves, node);
}

export function encodeRolloutState(state: RolloutState): string {
  return JSON.stringify({ format: ROLLOUT_STATE_FORMAT, ...state });
}

export type DecodedState =
  { readonly ok: true; readonly state: RolloutState } | { readonly ok: false; readonly reason: string };

const HASH = /^sha256:[0-9a-f]{64}$/u;
const NODE_NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/u;

function contentRef(value: unknown): ContentRef | undefined {
  if (!isRecord(value)) return undefined;
  const { fingerprint, hash } = value;
  if (typeof fingerprint !== 'string' || !HASH.test(fingerprint)) return undefined;
  if (hash !== undefined && (typeof hash !== 'string' || !HASH.test(hash))) return undefined;
  return hash === undefined ? { fingerprint } : { fingerprint, hash };
}

function time(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 ? value : undefined;
}

const RANK = /^[0-9a-f]{16}$/u;

/**
 * The waves of a stored state: names, listed nodes (valid, never in two waves, at most
 * MAX_LISTED_NODES in all unless format 1, which listed every node), rank bounds that rise from
 * wave to wave, and sizes.
 */
function decodeWaves(
  raw: unknown,
  listsAll: boolean,
): { readonly ok: true; readonly waves: Wave[] } | { readonly ok: false; readonly reason: string } {
  if (!Array.isArray(raw) || raw.length > MAX_WAVES)
    return { ok: false, reason: `waves is not a list of at most ${String(MAX_WAVES)}` };
  const waves: Wave[] = [];
  const seen = new Set<string>();
  let bound = '';
  for (const w of raw as unknown[]) {
    if (!isRecord(w) || typeof w['name'] !== 'string') return { ok: false, reason: 'a wave has no name' };
    const name = w['name'].slice(0, 40);
    const listed = w['nodes'];
    if (listed !== undefined && !Array.isArray(listed))
      return { ok: false, reason: `wave ${name}: nodes is not a list` };
    const nodes: string[] = [];
    for (const n of (listed ?? []) as unknown[]) {
      if (typeof n !== 'string' || !NODE_NAME.test(n) || seen.has(n))
        return { ok: false, reason: `wave ${name}: a node name is invalid or repeated` };
      seen.add(n);
      nodes.push(n);
    }
    if (!listsAll && seen.size > MAX_LISTED_NODES)
      return { ok: false, reason: `more than ${String(MAX_LISTED_NODES)} nodes listed by name` };
    const upTo = w['upTo'];
    if (upTo !== undefined && (listsAll || typeof upTo !== 'string' || !RANK.test(upTo) || upTo <= bound))
      return { ok: false, reason: `wave ${name}: upTo is not a rank above the previous wave's` };
    if (typeof upTo === 'string') bound = upTo;
    const size = listsAll ? nodes.length : w['size'];
    if (typeof size !== 'number' || !Number.isSafeInteger(size) || size < 0)
      return { ok: false, reason: `wave ${name}: size is not a node count` };
    if (listed === undefined && upTo === undefined)
      return { ok: false, reason: `wave ${name}: neither nodes nor upTo` };
    waves.push({
      name,
      ...(listed !== undefined ? { nodes } : {}),
      ...(typeof upTo === 'string' ? { upTo } : {}),
      size,
    });
  }
  return { ok: true, waves };
}

function text(value: unknown): string | undefined {
  return typeof value === 'string' ? value.slice(0, MAX_REASON_CHARS) : undefined;
}

/** The annotation's text → the state, or why it is not one (written by someone else, or damaged). */
export function decodeRolloutState(raw: string): DecodedState {
  if (raw.length > MAX_STATE_BYTES) return { ok: false, reason: `larger than ${String(MAX_STATE_BYTES)} bytes` };
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    return { ok: false, reason: 'not JSON' };
  }
  if (!isRecord(value)) return { ok: false, reason: 'not a JSON object' };
  const format = value['format'];
  if (format !== ROLLOUT_STATE_FORMAT && format !== 1)
    return { ok: false, reason: `format ${String(format)} is not ${String(ROLLOUT_STATE_FORMAT)} (or 1)` };
  const phase = value['phase'];
  if (typeof phase !== 'string' || !(ROLLOUT_PHASES as readonly string[]).includes(phase))
    return { ok: false, reason: 'phase is not one of ' + ROLLOUT_PHASES.join(', ') };
  const candidate = contentRef(value['candidate']);
  const stable = contentRef(value['stable']);
  if (candidate === undefined || stable === undefined)
    return { ok: false, reason: 'candidate or stable is not a content reference' };
  const decodedWaves = decodeWaves(value['waves'], format === 1);
  if (!decodedWaves.ok) return decodedWaves;
  const { waves } = decodedWaves;
  const opened = value['opened'];
  if (typeof opened !== 'number' || !Number.isInteger(opened) || opened < 0 || opened > waves.length)
    return { ok: false, reason: 'opened is not a wave count' };
  const waveOpenedAt = time(value['waveOpenedAt']);
  const startedAt = time(value['startedAt']);
  const updatedAt = time(value['updatedAt']);
  if (waveOpenedAt === undefined || startedAt === undefined || updatedAt === undefined)
    return { ok: false, reason: 'a time is missing' };
  const bakeStartedAt = time(value['bakeStartedAt']);
  const reverted = value['reverted'] === true;
  let halt: Halt | undefined;
  const rawHalt = value['halt'];
  if (rawHalt !== undefined) {
    if (!isRecord(rawHalt)) return { ok: false, reason: 'halt is not an object' };
    const wave = rawHalt['wave'];
    const node = text(rawHalt['node']);
    const reason = text(rawHalt['reason']);
    const at = time(rawHalt['at']);
    if (
      typeof wave !== 'number' ||
      !Number.isInteger(wave) ||
      wave < 0 ||
      wave >= Math.max(1, waves.length) ||
      node === undefined ||
      reason === undefined ||
      at === undefined
    )
      return { ok: false, reason: 'halt is not {wave, node, reason, at}' };
    halt = { wave, node, reason, at };
  }
  const message = text(value['message']);
  return {
    ok: true,
    state: {
      phase: phase as RolloutPhase,
      candidate,
      stable,
      waves,
      opened,
      waveOpenedAt,
      ...(bakeStartedAt !== undefined ? { bakeStartedAt } : {}),
      reverted,
      ...(halt !== undefined ? { halt } : {}),
      startedAt,
      updatedAt,
      ...(message !== undefined ? { message } : {}),
    },
  };
}

// ---- the operator's requests --------------------------------------------------------------------

export const ROLLOUT_ACTIONS = ['pause', 'resume', 'abort', 'promote'] as const;
export type RolloutAction = (typeof ROLLOUT_ACTIONS)[number];

/** What `provisioner rollout pause|resume|abort|promote` asks the controller, for one candidate. */
export interface RolloutRequest {
  readonly action: RolloutAction;
  /** The candidate's fingerprint the operator saw: a request for an older candidate is dropped. */
  readonly candidate: string;
  readonly by?: string;
  readonly at: number;
}

export function encodeRolloutRequest(request: RolloutRequest): string {
  return JSON.stringify(request);
}

export function decodeRolloutRequest(raw: string): RolloutRequest | undefined {
  if (raw.length > 4096) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    return undefined;
  }
  if (!isRecord(value)) return undefined;
  const { action, candidate, by, at } = value;
  if (typeof action !== 'string' || !(ROLLOUT_ACTIONS as readonly string[]).includes(action)) return undefined;
  if (typeof candidate !== 'string' || !HASH.test(candidate)) return undefined;
  const when = time(at);
  if (when === undefined) return undefined;
  const who = text(by);
  return {
    action: action as RolloutAction,
    candidate,
    ...(who !== undefined ? { by: who.slice(0, 253) } : {}),
    at: when,
  };
}
