// Go path/filepath.Match on Linux (separator '/'), used for upstream's comma-separated namePattern.

export class BadPatternError extends Error {}

interface Chunk {
  readonly star: boolean;
  readonly chunk: string;
}

function scanChunk(pattern: string): { star: boolean; chunk: string; rest: string } {
  let p = pattern;
  let star = false;
  while (p.startsWith('*')) {
    p = p.slice(1);
    star = true;
  }
  let inRange = false;
  let i = 0;
  scan: for (; i < p.length; i++) {
    switch (p[i]) {
      case '\\':
        if (i + 1 < p.length) i++;
        break;
      case '[':
        inRange = true;
        break;
      case ']':
        inRange = false;
        break;
      case '*':
        if (!inRange) break scan;
        break;
    }
  }
  return { star, chunk: p.slice(0, i), rest: p.slice(i) };
}

function getEsc(chunk: string): { ch: string; rest: string } {
  if (chunk === '' || chunk[0] === '-' || chunk[0] === ']') throw new BadPatternError('bad range');
  let c = chunk;
  if (c[0] === '\\') {
    c = c.slice(1);
    if (c === '') throw new BadPatternError('trailing backslash');
  }
  const cp = c.codePointAt(0);
  if (cp === undefined) throw new BadPatternError('bad range');
  const ch = String.fromCodePoint(cp);
  const rest = c.slice(ch.length);
  if (rest === '') throw new BadPatternError('unterminated range');
  return { ch, rest };
}

/** Matches one chunk against the start of s; returns the rest of s or null. Throws on a bad pattern. */
function matchChunk(chunkIn: string, sIn: string): string | null {
  let chunk = chunkIn;
  let s = sIn;
  let failed = false;
  while (chunk.length > 0) {
    if (!failed && s.length === 0) failed = true;
    switch (chunk[0]) {
      case '[': {
        let r = 0;
        let n = 0;
        if (!failed) {
          const cp = s.codePointAt(0) ?? 0;
          r = cp;
          n = String.fromCodePoint(cp).length;
        }
        chunk = chunk.slice(1);
        let negated = false;
        if (chunk.startsWith('^')) {
          negated = true;
          chunk = chunk.slice(1);
        }
        let match = false;
        let nrange = 0;
        for (;;) {
          if (chunk.length > 0 && chunk[0] === ']' && nrange > 0) {
            chunk = chunk.slice(1);
            break;
          }
          const lo = getEsc(chunk);
          chunk = lo.rest;
          let hi = lo.ch;
          if (chunk[0] === '-') {
            const h = getEsc(chunk.slice(1));
            hi = h.ch;
            chunk = h.rest;
          }
          const loCp = lo.ch.codePointAt(0) ?? 0;
          const hiCp = hi.codePointAt(0) ?? 0;
          if (loCp <= r && r <= hiCp) match = true;
          nrange++;
        }
        if (match === negated) failed = true;
        if (!failed) s = s.slice(n);
        break;
      }
      case '?':
        if (!failed) {
          if (s[0] === '/') failed = true;
          const cp = s.codePointAt(0) ?? 0;
          s = s.slice(String.fromCodePoint(cp).length);
        }
        chunk = chunk.slice(1);
        break;
      default:
        if (chunk[0] === '\\') {
          chunk = chunk.slice(1);
          if (chunk.length === 0) throw new BadPatternError('trailing backslash');
        }
        if (!failed) {
          if (chunk[0] !== s[0]) failed = true;
          s = s.slice(1);
        }
        chunk = chunk.slice(1);
    }
  }
  return failed ? null : s;
}

function chunks(pattern: string): Chunk[] {
  const out: Chunk[] = [];
  let p = pattern;
  while (p.length > 0) {
    const { star, chunk, rest } = scanChunk(p);
    out.push({ star, chunk });
    p = rest;
  }
  return out;
}

/** Go filepath.Match(pattern, name). Throws BadPatternError for a malformed pattern, like Go's ErrBadPattern. */
export function goFilepathMatch(pattern: string, name: string): boolean {
  let p = pattern;
  let s = name;
  pattern: while (p.length > 0) {
    const { star, chunk, rest } = scanChunk(p);
    p = rest;
    if (star && chunk === '') {
      // Trailing * matches the rest unless it contains a separator.
      return !s.includes('/');
    }
    const t = matchChunk(chunk, s);
    if (t !== null && (t.length === 0 || p.length > 0)) {
      s = t;
      continue;
    }
    if (star) {
      for (let i = 0; i < s.length && s[i] !== '/'; i++) {
        const t2 = matchChunk(chunk, s.slice(i + 1));
        if (t2 !== null) {
          if (p.length === 0 && t2.length > 0) continue;
          s = t2;
          continue pattern;
        }
      }
    }
    // No match: Go still validates the rest of the pattern before answering false.
    validateGlob(p);
    return false;
  }
  return s.length === 0;
}

/** Throws BadPatternError when Go would report ErrBadPattern for this pattern. */
export function validateGlob(pattern: string): void {
  for (const { chunk } of chunks(pattern)) matchChunk(chunk, '');
}

/** Upstream namePattern semantics: split on ',', skip empty patterns, no trimming; any match wins. */
export function splitNamePattern(namePattern: string): string[] {
  return namePattern.split(',').filter((p) => p !== '');
}

export function matchesNamePattern(namePattern: string, name: string): boolean {
  return splitNamePattern(namePattern).some((p) => goFilepathMatch(p, name));
}
