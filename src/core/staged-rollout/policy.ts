// The staged rollout policy: which nodes take a new config first (the canary), then in which
// waves the rest follow, how long each wave bakes, and what a halt does. Parsed from the
// controller's flags (the chart's `stagedRollout` values); pure.
import { durationToMilliseconds, parseGoDuration } from '../config/duration.js';
import { UsageError } from '../errors.js';
import { LabelSelectorError, parseLabelSelector } from '../kube/label-selector.js';

/** A wave's cumulative reach over the nodes outside the canary: a percentage or a node count. */
export type WaveReach =
  { readonly kind: 'percent'; readonly value: number } | { readonly kind: 'count'; readonly value: number };

export type CanaryPolicy =
  { readonly kind: 'selector'; readonly selector: string } | { readonly kind: 'count'; readonly count: number };

/** What a halt does to the nodes that took the candidate: back to stable, or left as they are. */
export const HALT_ACTIONS = ['revert', 'halt'] as const;
export type HaltAction = (typeof HALT_ACTIONS)[number];

export interface StagedRolloutPolicy {
  readonly canary: CanaryPolicy;
  /** Cumulative reach of each wave after the canary, ascending; the last one reaches every node. */
  readonly waves: readonly WaveReach[];
  /** How long every node of a wave must keep the candidate applied and healthy before the next opens. */
  readonly bakeMs: number;
  /** A wave whose nodes have not all applied the candidate this long after it opened halts. */
  readonly progressDeadlineMs: number;
  readonly onHalt: HaltAction;
}

export const DEFAULT_POLICY: StagedRolloutPolicy = {
  canary: { kind: 'count', count: 1 },
  waves: [
    { kind: 'percent', value: 10 },
    { kind: 'percent', value: 50 },
    { kind: 'percent', value: 100 },
  ],
  bakeMs: 5 * 60_000,
  progressDeadlineMs: 10 * 60_000,
  onHalt: 'revert',
};

export interface PolicyFlags {
  readonly canarySelector?: string | undefined;
  readonly canaryCount?: number | undefined;
  readonly waves?: string | undefined;
  readonly bakeTime?: string | undefined;
  readonly progressDeadline?: string | undefined;
  readonly onHalt?: string | undefined;
}

/** `10%,50%,100%` or `5,20,100%` → the waves; a last wave short of every node gets `100%` after it. */
export function parseWaves(text: string): readonly WaveReach[] {
  const parts = text.split(',').map((p) => p.trim());
  if (parts.length === 0 || parts.some((p) => p === ''))
    throw new UsageError(`--waves ${JSON.stringify(text)}: expected a comma-separated list such as 10%,50%,100%`);
  if (parts.length > 20) throw new UsageError(`--waves: at most 20 waves (got ${String(parts.length)})`);
  const waves: WaveReach[] = [];
  for (const part of parts) {
    const percent = /^(\d{1,3})%$/u.exec(part);
    const count = /^(\d{1,6})$/u.exec(part);
    let wave: WaveReach;
    if (percent?.[1] !== undefined) {
      const value = Number(percent[1]);
      if (value < 1 || value > 100) throw new UsageError(`--waves: ${part}: a percentage from 1% to 100%`);
      wave = { kind: 'percent', value };
    } else if (count?.[1] !== undefined) {
      const value = Number(count[1]);
      if (value < 1) throw new UsageError(`--waves: ${part}: a node count of at least 1`);
      wave = { kind: 'count', value };
    } else {
      throw new UsageError(`--waves: ${JSON.stringify(part)} is neither a percentage (25%) nor a node count (5)`);
    }
    const previous = waves.at(-1);
    if (previous !== undefined && previous.kind === wave.kind && wave.value <= previous.value)
      throw new UsageError(
        `--waves: ${part} does not reach further than the wave before it (the reaches are cumulative)`,
      );
    waves.push(wave);
  }
  const last = waves.at(-1);
  if (last === undefined || last.kind !== 'percent' || last.value !== 100) waves.push({ kind: 'percent', value: 100 });
  return waves;
}

function durationFlag(flag: string, text: string, minMs: number): number {
  const parsed = parseGoDuration(text);
  if (!parsed.ok) throw new UsageError(`--${flag} ${JSON.stringify(text)}: ${parsed.message}`);
  const ms = durationToMilliseconds(text);
  if (ms < minMs) throw new UsageError(`--${flag} ${text}: must be at least ${String(minMs / 1000)}s`);
  return ms;
}

/** The controller's flags → the policy; a UsageError names the flag and why. */
export function policyFromFlags(flags: PolicyFlags): StagedRolloutPolicy {
  if (flags.canarySelector !== undefined && flags.canarySelector !== '' && flags.canaryCount !== undefined)
    throw new UsageError('--canary-selector and --canary-count exclude each other');
  let canary: CanaryPolicy = DEFAULT_POLICY.canary;
  if (flags.canarySelector !== undefined && flags.canarySelector !== '') {
    try {
      parseLabelSelector(flags.canarySelector);
    } catch (err) {
      if (err instanceof LabelSelectorError) throw new UsageError(`--canary-selector: ${err.message}`);
      throw err;
    }
    canary = { kind: 'selector', selector: flags.canarySelector };
  } else if (flags.canaryCount !== undefined) {
    if (!Number.isInteger(flags.canaryCount) || flags.canaryCount < 1 || flags.canaryCount > 1000)
      throw new UsageError('--canary-count: a whole number from 1 to 1000');
    canary = { kind: 'count', count: flags.canaryCount };
  }
  let onHalt: HaltAction = DEFAULT_POLICY.onHalt;
  if (flags.onHalt !== undefined) {
    if (!(HALT_ACTIONS as readonly string[]).includes(flags.onHalt))
      throw new UsageError(`--on-halt ${JSON.stringify(flags.onHalt)}: expected revert or halt`);
    onHalt = flags.onHalt as HaltAction;
  }
  return {
    canary,
    waves: flags.waves !== undefined ? parseWaves(flags.waves) : DEFAULT_POLICY.waves,
    bakeMs: flags.bakeTime !== undefined ? durationFlag('bake-time', flags.bakeTime, 0) : DEFAULT_POLICY.bakeMs,
    progressDeadlineMs:
      flags.progressDeadline !== undefined
        ? durationFlag('progress-deadline', flags.progressDeadline, 1000)
        : DEFAULT_POLICY.progressDeadlineMs,
    onHalt,
  };
}

/** One line: `canary 1 node, waves 10%,50%,100%, bake 5m0s, on halt revert`. */
export function describePolicy(policy: StagedRolloutPolicy): string {
  const canary =
    policy.canary.kind === 'selector'
      ? `canary nodes matching ${policy.canary.selector}`
      : `canary ${String(policy.canary.count)} node${policy.canary.count === 1 ? '' : 's'}`;
  const waves = policy.waves.map((w) => (w.kind === 'percent' ? `${String(w.value)}%` : String(w.value))).join(',');
  return `${canary}, waves ${waves}, bake ${String(policy.bakeMs / 1000)}s, on halt ${policy.onHalt}`;
}
