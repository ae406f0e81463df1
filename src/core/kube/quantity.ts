// Kubernetes resource.Quantity parsing for capacities read back from PVs.

const SUFFIX: Readonly<Record<string, number>> = {
  '': 1,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  m: 1e-3,
};

/** Bytes of a quantity such as `10Gi`, `500M`, `12345`, `1e3`; NaN when malformed. */
export function parseQuantity(text: string): number {
  const m = /^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E|m))?$/u.exec(text.trim());
  if (!m) return Number.NaN;
  const base = Number(m[1]);
  if (m[2] !== undefined) return base * 10 ** Number(m[2].slice(1));
  return base * (SUFFIX[m[3] ?? ''] ?? Number.NaN);
}
