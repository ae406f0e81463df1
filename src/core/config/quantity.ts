// Kubernetes resource quantities (`100Gi`, `1.5T`, `4e9`) as whole byte counts, for device sizes.
// Grammar of k8s.io/apimachinery/pkg/api/resource: <sign><number><suffix>, suffix a binary SI
// (Ki…Ei), decimal SI (n u m "" k M G T P E) or decimal exponent (e3, E-2).

const BINARY: Readonly<Record<string, bigint>> = {
  Ki: 1024n,
  Mi: 1024n ** 2n,
  Gi: 1024n ** 3n,
  Ti: 1024n ** 4n,
  Pi: 1024n ** 5n,
  Ei: 1024n ** 6n,
};
const DECIMAL_EXPONENT: Readonly<Record<string, number>> = {
  n: -9,
  u: -6,
  m: -3,
  '': 0,
  k: 3,
  M: 6,
  G: 9,
  T: 12,
  P: 15,
  E: 18,
};
const QUANTITY = /^([+-]?)([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$/u;
/** Longer texts are no size anyone means; the bound keeps BigInt arithmetic cheap. */
const MAX_TEXT = 64;
/** Exponents beyond this are far outside any device size (and would make huge BigInts). */
const MAX_EXPONENT = 40;
const MAX_BYTES = BigInt(Number.MAX_SAFE_INTEGER);

export type QuantityResult =
  { readonly ok: true; readonly bytes: number } | { readonly ok: false; readonly message: string };

/** Numerator and denominator of the value written, or why it is no quantity. */
function ratio(text: string): { num: bigint; den: bigint } | string {
  const m = text.length <= MAX_TEXT ? QUANTITY.exec(text) : null;
  if (!m) return `${JSON.stringify(text)} is not a Kubernetes quantity such as 100Gi, 500G or 1e12`;
  const [, sign = '', number = '', suffix = ''] = m;
  const [whole = '', fraction = ''] = number.split('.');
  let num = BigInt(`${whole}${fraction}` || '0') * (sign === '-' ? -1n : 1n);
  let den = 10n ** BigInt(fraction.length);
  const binary = BINARY[suffix];
  const exponent = binary === undefined ? (DECIMAL_EXPONENT[suffix] ?? Number(suffix.slice(1))) : 0;
  if (Math.abs(exponent) > MAX_EXPONENT) return `${JSON.stringify(text)} is out of range`;
  if (binary !== undefined) num *= binary;
  else if (exponent >= 0) num *= 10n ** BigInt(exponent);
  else den *= 10n ** BigInt(-exponent);
  return { num, den };
}

/** A quantity as a whole, positive number of bytes; a fraction (`100m` is 0.1) or zero is refused. */
export function parseByteQuantity(text: string): QuantityResult {
  const r = ratio(text);
  if (typeof r === 'string') return { ok: false, message: r };
  if (r.num <= 0n) return { ok: false, message: `must be a positive size, found ${JSON.stringify(text)}` };
  if (r.num % r.den !== 0n) {
    // `m` is milli in Kubernetes: `100m` meant as megabytes is the usual slip.
    const hint = /[0-9]m$/u.test(text) ? `; "m" is milli, write M (10^6) or Mi (2^20) for megabytes` : '';
    return { ok: false, message: `${JSON.stringify(text)} is not a whole number of bytes${hint}` };
  }
  const bytes = r.num / r.den;
  if (bytes > MAX_BYTES) return { ok: false, message: `${JSON.stringify(text)} is more than 2^53 - 1 bytes` };
  return { ok: true, bytes: Number(bytes) };
}

/** The shortest exact quantity for a byte count (`100Gi`, `500G`, else the number itself); binary on a tie. */
export function formatByteQuantity(bytes: number): string {
  const n = BigInt(bytes);
  const units: [string, bigint][] = [
    ...['Ei', 'Pi', 'Ti', 'Gi', 'Mi', 'Ki'].map((s): [string, bigint] => [s, BINARY[s] ?? 1n]),
    ...['E', 'P', 'T', 'G', 'M', 'k'].map((s): [string, bigint] => [s, 10n ** BigInt(DECIMAL_EXPONENT[s] ?? 0)]),
  ];
  let best = n.toString();
  for (const [suffix, unit] of units) {
    const text = `${n / unit}${suffix}`;
    if (n !== 0n && n % unit === 0n && text.length < best.length) best = text;
  }
  return best;
}
