// The live-reload guard: a reload that nobody explicitly allowed (file watcher, content poll,
// SIGHUP, `provisioner reload` without --allow) must not orphan existing PVs or change which PVs
// the agent owns. It decides by the impact class of each change (the effect table), not by whether
// PVs exist right now: the same edit gets the same verdict on every node and in `diff-config`, and
// a PV created a second later cannot slip through. A restart (start-up) is not guarded.
import type { ImpactClass } from './effects.js';

/** What a live reload with a guarded change does. */
export const RELOAD_GUARD_POLICIES = ['refuse', 'warn', 'apply'] as const;
export type ReloadGuardPolicy = (typeof RELOAD_GUARD_POLICIES)[number];
export const DEFAULT_RELOAD_GUARD_POLICY: ReloadGuardPolicy = 'refuse';

/** The impact classes a live reload applies only when allowed (or after a restart). */
export const GUARDED_IMPACTS = ['orphans-pvs', 'ownership-change'] as const satisfies readonly ImpactClass[];
export type GuardedImpact = (typeof GUARDED_IMPACTS)[number];

/**
 * `--allow` vocabulary: the guarded class names and their `--fail-on` aliases (diff-config), so a
 * CI gate `--fail-on orphans` and `reload --allow orphans` name the same thing.
 */
export const ALLOW_NAMES: Readonly<Record<string, GuardedImpact>> = {
  'orphans-pvs': 'orphans-pvs',
  'ownership-change': 'ownership-change',
  orphans: 'orphans-pvs',
  ownership: 'ownership-change',
};

export function isReloadGuardPolicy(value: string): value is ReloadGuardPolicy {
  return (RELOAD_GUARD_POLICIES as readonly string[]).includes(value);
}

export function isGuardedImpact(value: string): value is GuardedImpact {
  return (GUARDED_IMPACTS as readonly string[]).includes(value);
}

export interface GuardedChange {
  readonly path: string;
  readonly impact: string;
}

export type GuardVerdict =
  /** Nothing guarded, or everything guarded was allowed, or policy `apply`. */
  | { readonly verdict: 'apply' }
  /** Policy `warn`: applied, with a warning per guarded change. */
  | { readonly verdict: 'warn'; readonly guarded: readonly GuardedChange[]; readonly needs: readonly GuardedImpact[] }
  /** Policy `refuse`: the running config stays until these classes are allowed or the agent restarts. */
  | {
      readonly verdict: 'refuse';
      readonly guarded: readonly GuardedChange[];
      readonly needs: readonly GuardedImpact[];
    };

/** Pure: the verdict on a live reload's changes under a policy and the classes the request allowed. */
export function guardReload(
  changes: readonly GuardedChange[],
  policy: ReloadGuardPolicy,
  allow: readonly GuardedImpact[],
): GuardVerdict {
  const guarded = changes.filter((c) => isGuardedImpact(c.impact) && !allow.includes(c.impact));
  if (guarded.length === 0 || policy === 'apply') return { verdict: 'apply' };
  // In the canonical order, each once.
  const needs = GUARDED_IMPACTS.filter((i) => guarded.some((c) => c.impact === i));
  return policy === 'warn' ? { verdict: 'warn', guarded, needs } : { verdict: 'refuse', guarded, needs };
}

/** The command that would apply a refused candidate. */
export function allowCommand(needs: readonly GuardedImpact[]): string {
  return `provisioner reload --allow ${needs.join(',')}`;
}
