// Go-duration flags (`--timeout 30s`) → milliseconds, or a usage error (exit 2) naming the flag.
// One reading for every command; commands load it with `await import()` (as the parser it wraps).
import { parseGoDuration } from '../core/config/duration.js';
import { UsageError } from '../core/errors.js';

/**
 * The least a duration flag accepts: `positive` (the default), `zero-or-positive` (0 turns
 * something off), or `1ms` (a client timeout, which counts in whole milliseconds).
 */
export type DurationFloor = 'positive' | 'zero-or-positive' | '1ms';

const FLOORS: Readonly<Record<DurationFloor, { readonly least: bigint; readonly says: string }>> = {
  positive: { least: 1n, says: 'must be positive' },
  'zero-or-positive': { least: 0n, says: 'must be zero or positive' },
  '1ms': { least: 1_000_000n, says: 'must be at least 1ms' },
};

/** The flag's value in whole milliseconds (rounded down). */
export function durationFlagMs(flag: string, text: string, floor: DurationFloor = 'positive'): number {
  const parsed = parseGoDuration(text);
  if (!parsed.ok) throw new UsageError(`--${flag}: ${parsed.message}`);
  const { least, says } = FLOORS[floor];
  if (parsed.nanos < least) throw new UsageError(`--${flag}: ${says}, found ${text}`);
  return Number(parsed.nanos / 1_000_000n);
}

/** Reads the duration flags of one parsed command line by name: `ms('resync', 'zero-or-positive')`. */
export function durationReader<F extends object>(flags: F): (flag: keyof F & string, floor?: DurationFloor) => number {
  return (flag, floor) => durationFlagMs(flag, String(flags[flag]), floor);
}
