// Go time.ParseDuration / Duration.String, exactly, for upstream's duration strings (`5m0s`, `1h30m`).

const UNIT_NANOS: Readonly<Record<string, bigint>> = {
  ns: 1n,
  us: 1_000n,
  µs: 1_000n, // U+00B5 micro sign
  μs: 1_000n, // U+03BC Greek mu
  ms: 1_000_000n,
  s: 1_000_000_000n,
  m: 60_000_000_000n,
  h: 3_600_000_000_000n,
};

const MAX_INT64 = 9_223_372_036_854_775_807n;

/** Parses a Go duration into nanoseconds; returns an error message instead of throwing. */
export function parseGoDuration(text: string): { ok: true; nanos: bigint } | { ok: false; message: string } {
  const invalid = {
    ok: false as const,
    message: `invalid duration "${text}": expected a Go duration such as 5m0s, 90s or 1h30m`,
  };
  let s = text;
  let negative = false;
  if (s.startsWith('-') || s.startsWith('+')) {
    negative = s.startsWith('-');
    s = s.slice(1);
  }
  if (s === '0') return { ok: true, nanos: 0n };
  if (s === '') return invalid;
  let total = 0n;
  const part = /^(\d*)(?:\.(\d*))?([^\d.]+)/u;
  while (s !== '') {
    const m = part.exec(s);
    if (!m) return invalid;
    const whole = m[1] ?? '';
    const frac = m[2] ?? '';
    const unitName = m[3] ?? '';
    if (whole === '' && frac === '') return invalid;
    const unit = UNIT_NANOS[unitName];
    if (unit === undefined) {
      return {
        ok: false,
        message: `invalid duration "${text}": unknown unit "${unitName}" (use ns, us, ms, s, m or h)`,
      };
    }
    let value = BigInt(whole === '' ? '0' : whole) * unit;
    if (frac !== '') {
      // Go truncates the fractional part towards zero at nanosecond precision.
      const scale = 10n ** BigInt(frac.length);
      value += (BigInt(frac) * unit) / scale;
    }
    total += value;
    if (total > MAX_INT64) return { ok: false, message: `invalid duration "${text}": out of range` };
    s = s.slice(m[0].length);
  }
  return { ok: true, nanos: negative ? -total : total };
}

function fraction(value: bigint, digits: number): string {
  const text = value.toString().padStart(digits, '0').replace(/0+$/u, '');
  return text === '' ? '' : `.${text}`;
}

/** Go's Duration.String(): `1h30m0s`, `1.5s`, `500ms`, `0s`. */
export function formatGoDuration(nanos: bigint): string {
  if (nanos === 0n) return '0s';
  const sign = nanos < 0n ? '-' : '';
  const n = nanos < 0n ? -nanos : nanos;
  if (n < 1_000n) return `${sign}${n}ns`;
  if (n < 1_000_000n) return `${sign}${n / 1_000n}${fraction(n % 1_000n, 3)}µs`;
  if (n < 1_000_000_000n) return `${sign}${n / 1_000_000n}${fraction(n % 1_000_000n, 6)}ms`;
  const hours = n / 3_600_000_000_000n;
  const minutes = (n / 60_000_000_000n) % 60n;
  const seconds = (n / 1_000_000_000n) % 60n;
  const secText = `${seconds}${fraction(n % 1_000_000_000n, 9)}s`;
  if (hours > 0n) return `${sign}${hours}h${minutes}m${secText}`;
  if (minutes > 0n) return `${sign}${minutes}m${secText}`;
  return `${sign}${secText}`;
}

export function durationToMilliseconds(text: string): number {
  const parsed = parseGoDuration(text);
  if (!parsed.ok) throw new RangeError(parsed.message);
  return Number(parsed.nanos / 1_000_000n);
}
