// Volume capacities as upstream reports them: rounded down to a readable unit, then written as a
// Kubernetes quantity the way client-go prints resource.NewQuantity(bytes, resource.BinarySI).

export const KiB = 1024;
export const MiB = 1024 * KiB;
export const GiB = 1024 * MiB;
export const TiB = 1024 * GiB;
export const PiB = 1024 * TiB;

function assertBytes(bytes: number): void {
  if (!Number.isSafeInteger(bytes) || bytes < 0) {
    throw new RangeError(`capacity must be a non-negative safe integer number of bytes, got ${bytes}`);
  }
}

/**
 * Upstream's roundDownCapacityPretty: round down to whole GiB when that leaves at least 10 GiB,
 * else to whole MiB when that leaves at least 10 MiB, else keep the exact byte count.
 */
export function roundDownCapacityPretty(bytes: number): number {
  assertBytes(bytes);
  for (const unit of [GiB, MiB]) {
    const units = Math.floor(bytes / unit);
    if (units >= 10) return units * unit;
  }
  return bytes;
}

const BINARY_SUFFIXES = ['', 'Ki', 'Mi', 'Gi', 'Ti', 'Pi', 'Ei'] as const;

/**
 * A byte count as client-go's Quantity.String() prints a BinarySI quantity: the largest binary
 * suffix that divides exactly (10737418240 → `10Gi`, 12345 → `12345`). Values below 1024 are
 * printed in DecimalSI form, as client-go does (`0`, `512`, but 1000 → `1k`).
 */
export function formatBinaryQuantity(bytes: number): string {
  assertBytes(bytes);
  if (bytes < 1024) {
    // client-go: |q| < 1024 falls back to DecimalSI, whose canonical form uses an exponent that is
    // a multiple of 3 with an integer mantissa; below 1024 only 1000 itself becomes `1k`.
    return bytes === 1000 ? '1k' : String(bytes);
  }
  let mantissa = bytes;
  let exponent = 0;
  while (mantissa % 1024 === 0 && exponent < BINARY_SUFFIXES.length - 1) {
    mantissa /= 1024;
    exponent++;
  }
  return `${mantissa}${BINARY_SUFFIXES[exponent] ?? ''}`;
}
