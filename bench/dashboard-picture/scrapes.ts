// The scrape side of the dashboard picture: Prometheus text scrapes of targets saved to files at a
// fixed interval, with the manifest that tools/promql-eval reads (each scrape's time, job,
// instance and file) and the timeline of what was done meanwhile.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';

export interface ScrapeTarget {
  readonly job: string;
  /** host:port, as Prometheus's `instance` label has it. */
  readonly instance: string;
  readonly path: string;
}

export interface SavedScrape {
  readonly t: number;
  readonly job: string;
  readonly instance: string;
  /** Relative to the manifest's directory, so that a copy of the directory renders anywhere. */
  readonly file: string;
}

export interface ScrapeManifest {
  readonly intervalMs: number;
  readonly start: number;
  readonly end: number;
  readonly scrapes: SavedScrape[];
  /** What the scenario did, in order: [ms since the epoch, what]. */
  readonly timeline: [number, string][];
}

/** Scrapes every target every `intervalMs` into `dir` until `stop` is aborted. */
export function scrapeEvery(
  dir: string,
  targets: readonly ScrapeTarget[],
  intervalMs: number,
  stop: AbortSignal,
): { readonly done: Promise<SavedScrape[]> } {
  const saved: SavedScrape[] = [];
  const loop = async (): Promise<SavedScrape[]> => {
    let next = Date.now();
    while (!stop.aborted) {
      const t = Date.now();
      await Promise.all(targets.map(async (target) => saveOne(dir, target, t, saved)));
      next += intervalMs;
      // A fixed grid, as a scrape loop keeps: a slow scrape does not shift the next one.
      await delay(Math.max(0, next - Date.now()), undefined, { signal: stop }).catch(() => undefined);
    }
    return saved;
  };
  return { done: loop() };
}

async function saveOne(dir: string, target: ScrapeTarget, t: number, into: SavedScrape[]): Promise<void> {
  try {
    const res = await fetch(`http://${target.instance}${target.path}`, { signal: AbortSignal.timeout(4000) });
    if (!res.ok) return;
    const file = `${String(t)}-${target.job}.prom`;
    writeFileSync(join(dir, file), await res.text());
    into.push({ t, job: target.job, instance: target.instance, file });
  } catch {
    // A failed scrape is a gap, as in Prometheus (its `up` would be 0).
  }
}
