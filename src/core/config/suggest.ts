// "Did you mean" suggestions for unknown keys and misspelled enum values.

function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      cur.push(Math.min((prev[j] ?? 0) + 1, (cur[j - 1] ?? 0) + 1, (prev[j - 1] ?? 0) + cost));
    }
    prev = cur;
  }
  return prev[b.length] ?? 0;
}

/** The closest candidate within a third of the word's length (at least 2 edits), or undefined. */
export function suggest(
  word: string,
  candidates: readonly string[],
  options: { caseInsensitive?: boolean } = {},
): string | undefined {
  const norm = (s: string): string => (options.caseInsensitive === false ? s : s.toLowerCase());
  const w = norm(word);
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const c of candidates) {
    const dist = editDistance(w, norm(c));
    if (dist < bestDistance) {
      best = c;
      bestDistance = dist;
    }
  }
  const limit = Math.max(2, Math.floor(word.length / 3));
  return bestDistance <= limit ? best : undefined;
}
