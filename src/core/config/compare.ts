// The diff-config service: load two sources, diff them, classify, gate. Returns data; never prints.
import { createTwoFilesPatch } from 'diff';
import { InvalidConfigError } from '../errors.js';
import type { ConfigIssue } from '../errors.js';
import { canonicalYaml } from './canonical.js';
import { diffConfigs } from './diff.js';
import type { ConfigChange } from './diff.js';
import { IMPACT_CLASSES } from './effects.js';
import type { ImpactClass } from './effects.js';
import type { ProvisionerConfig } from './model.js';
import { loadConfig } from './source/load.js';
import type { SnapshotOrigin, FileLayout, LoadedConfig } from './source/port.js';

/** A side loaded elsewhere: the config a running agent applies (GET /v1/config of its admin socket). */
export interface AgentConfigSide {
  readonly kind: 'agent';
  /** The admin socket asked. */
  readonly path: string;
  readonly hash: string;
  readonly config: ProvisionerConfig;
}

export interface CompareConfigsOptions {
  /** A path to load, or the running agent's applied config. */
  readonly from: string | AgentConfigSide;
  readonly to: string;
  /** Impact classes that make the comparison fail a CI gate. */
  readonly failOn: readonly ImpactClass[];
  /** Lines of context in the unified diff. */
  readonly context: number;
}

export interface ComparedSide extends Omit<SnapshotOrigin, 'kind'> {
  readonly kind: FileLayout | 'agent';
  readonly hash: string;
}

export interface ConfigComparison {
  readonly from: ComparedSide;
  readonly to: ComparedSide;
  readonly identical: boolean;
  readonly changes: readonly ConfigChange[];
  /** Unified diff of the canonical YAML of both configs; empty when identical. */
  readonly unifiedDiff: string;
  readonly countsByImpact: Readonly<Record<ImpactClass, number>>;
  readonly warnings: readonly (ConfigIssue & { readonly side: 'from' | 'to' })[];
  readonly failOn: readonly ImpactClass[];
  /** Paths of the changes whose impact is in failOn. */
  readonly gateTripped: readonly string[];
}

interface LoadedSide {
  readonly config: ProvisionerConfig;
  readonly hash: string;
  readonly side: ComparedSide;
  readonly warnings: readonly ConfigIssue[];
}

function fromLoaded(loaded: LoadedConfig): LoadedSide {
  return { ...loaded, side: { ...loaded.source, hash: loaded.hash } };
}

async function loadSide(source: string | AgentConfigSide): Promise<LoadedSide> {
  if (typeof source === 'string') return fromLoaded(await loadConfig(source));
  const { config, hash } = source;
  return { config, hash, side: { path: source.path, kind: 'agent', hash }, warnings: [] };
}

function label(source: string | AgentConfigSide): string {
  return typeof source === 'string' ? source : `agent ${source.path}`;
}

async function loadBoth(from: string | AgentConfigSide, to: string): Promise<[LoadedSide, LoadedSide]> {
  const [a, b] = await Promise.allSettled([loadSide(from), loadSide(to)]);
  if (a.status === 'fulfilled' && b.status === 'fulfilled') return [a.value, b.value];
  // Report every problem of both sides in one go when both are invalid.
  const invalid = [a, b].flatMap((r) =>
    r.status === 'rejected' && r.reason instanceof InvalidConfigError ? [r.reason] : [],
  );
  const other = [a, b].find((r) => r.status === 'rejected' && !(r.reason instanceof InvalidConfigError));
  if (other?.status === 'rejected') throw other.reason;
  if (invalid.length === 2) {
    throw new InvalidConfigError(
      `${label(from)} and ${to}`,
      invalid.flatMap((e) => e.issues),
    );
  }
  throw invalid[0] ?? new Error('unreachable: a side failed without an error');
}

export async function compareConfigs(options: CompareConfigsOptions): Promise<ConfigComparison> {
  const [from, to] = await loadBoth(options.from, options.to);
  const changes = from.hash === to.hash ? [] : diffConfigs(from.config, to.config);
  const countsByImpact = Object.fromEntries(IMPACT_CLASSES.map((c) => [c, 0])) as Record<ImpactClass, number>;
  for (const change of changes) countsByImpact[change.effect.impact] += 1;
  const identical = changes.length === 0;
  const unifiedDiff = identical
    ? ''
    : createTwoFilesPatch(
        `from: ${label(options.from)}`,
        `to: ${options.to}`,
        canonicalYaml(from.config),
        canonicalYaml(to.config),
        from.hash.slice(0, 19),
        to.hash.slice(0, 19),
        { context: options.context },
      ).replace(/^=+\n/u, '');
  const failOn = IMPACT_CLASSES.filter((c) => options.failOn.includes(c));
  return {
    from: from.side,
    to: to.side,
    identical,
    changes,
    unifiedDiff,
    countsByImpact,
    warnings: [
      ...from.warnings.map((w) => ({ ...w, side: 'from' as const })),
      ...to.warnings.map((w) => ({ ...w, side: 'to' as const })),
    ],
    failOn,
    gateTripped: changes.filter((c) => failOn.includes(c.effect.impact)).map((c) => c.path),
  };
}
