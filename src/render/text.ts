// Small pieces the text renderers share: ANSI colours (or none), counted nouns, short hashes.

const ansi = (code: string) => (s: string) => `\u001b[${code}m${s}\u001b[0m`;

export type Paint = (s: string) => string;

export const PAINT = {
  red: ansi('31'),
  green: ansi('32'),
  yellow: ansi('33'),
  cyan: ansi('36'),
  bold: ansi('1'),
  dim: ansi('2'),
} as const satisfies Readonly<Record<string, Paint>>;

export type Painter = { readonly [K in keyof typeof PAINT]: Paint };

const plain: Paint = (s) => s;
const PLAIN: Painter = { red: plain, green: plain, yellow: plain, cyan: plain, bold: plain, dim: plain };

/** The colours, or text left as it is. */
export function painter(color: boolean): Painter {
  return color ? PAINT : PLAIN;
}

/** `1 disk`, `2 disks`, `2 classes`. */
export function plural(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}

/** `sha256:` and the first 12 hex digits (`sha256:0123456789ab`): enough to tell configs apart at a glance. */
export function shortHash(hash: string | undefined): string {
  if (hash === undefined) return '-';
  const m = /^([a-z0-9]+:)([0-9a-f]+)$/u.exec(hash);
  return m?.[1] !== undefined && m[2] !== undefined ? `${m[1]}${m[2].slice(0, 12)}` : hash.slice(0, 19);
}
