// Text and JSON renderings of a ConfigComparison. JSON is a documented contract (docs/diff-config.md).
import type { ConfigComparison } from '../core/config/compare.js';
import type { ConfigChange } from '../core/config/diff.js';
import { IMPACT_CLASSES } from '../core/config/effects.js';
import type { EffectRow, ImpactClass } from '../core/config/effects.js';
import { issueToJson } from '../core/errors.js';
import type { IssueJson } from '../core/errors.js';
import { PAINT } from './text.js';

export const DIFF_CONFIG_FORMAT_VERSION = 1;

/** A change: where and what, then its row of the effect table. */
export type ChangeJson = {
  readonly path: string;
  readonly field: string;
  readonly action: string;
  readonly before?: unknown;
  readonly after?: unknown;
} & Omit<EffectRow, 'field' | 'action'>;

export interface DiffConfigJson {
  readonly formatVersion: typeof DIFF_CONFIG_FORMAT_VERSION;
  readonly from: ConfigComparison['from'];
  readonly to: ConfigComparison['to'];
  readonly identical: boolean;
  readonly changes: readonly ChangeJson[];
  readonly summary: { readonly changes: number; readonly byImpact: Readonly<Record<ImpactClass, number>> };
  readonly unifiedDiff: string;
  readonly warnings: readonly (IssueJson & { readonly side: 'from' | 'to' })[];
  readonly gate: { readonly failOn: readonly ImpactClass[]; readonly tripped: readonly string[] };
  readonly exitCode: 0 | 1;
}

/** 0 when nothing differs (or, with a gate, when no gated change exists); else 1. */
export function diffConfigExitCode(c: ConfigComparison): 0 | 1 {
  if (c.failOn.length > 0) return c.gateTripped.length > 0 ? 1 : 0;
  return c.identical ? 0 : 1;
}

/** One change with its effect-table row, as diff-config and simulate print it in JSON. */
export function changeToJson(ch: ConfigChange): ChangeJson {
  return {
    path: ch.path,
    field: ch.field,
    action: ch.action,
    ...(ch.before !== undefined ? { before: ch.before } : {}),
    ...(ch.after !== undefined ? { after: ch.after } : {}),
    impact: ch.effect.impact,
    summary: ch.effect.summary,
    existingPVs: ch.effect.existingPVs,
    newPVs: ch.effect.newPVs,
    cleanupsInFlight: ch.effect.cleanupsInFlight,
    ...(ch.effect.upstream !== undefined ? { upstream: ch.effect.upstream } : {}),
  };
}

export function toDiffConfigJson(c: ConfigComparison): DiffConfigJson {
  return {
    formatVersion: DIFF_CONFIG_FORMAT_VERSION,
    from: c.from,
    to: c.to,
    identical: c.identical,
    changes: c.changes.map(changeToJson),
    summary: { changes: c.changes.length, byImpact: c.countsByImpact },
    unifiedDiff: c.unifiedDiff,
    warnings: c.warnings.map((w) => ({ ...issueToJson(w), side: w.side })),
    gate: { failOn: c.failOn, tripped: c.gateTripped },
    exitCode: diffConfigExitCode(c),
  };
}

function short(value: unknown): string {
  const text = value === undefined ? 'null' : JSON.stringify(value);
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}

const SEVERE: ReadonlySet<ImpactClass> = new Set([
  'orphans-pvs',
  'ownership-change',
  'needs-pod-change',
  'claims-devices',
]);

function changeLine(ch: ConfigChange, color: boolean): string {
  const impact = `[${ch.effect.impact}]`;
  const tag = color ? (SEVERE.has(ch.effect.impact) ? PAINT.yellow(impact) : PAINT.dim(impact)) : impact;
  let head: string;
  switch (ch.action) {
    case 'added':
      head = `+ ${ch.path}`;
      break;
    case 'removed':
      head = `- ${ch.path}`;
      break;
    case 'renamed':
      head = `> storageClassMap.${String(ch.before)} -> ${ch.path}`;
      break;
    default:
      head = `~ ${ch.path}: ${short(ch.before)} -> ${short(ch.after)}`;
  }
  return `${head}  ${tag} ${ch.effect.summary}`;
}

function colorDiff(diff: string): string {
  return diff
    .split('\n')
    .map((line) => {
      if (line.startsWith('+++') || line.startsWith('---')) return PAINT.bold(line);
      if (line.startsWith('@@')) return PAINT.cyan(line);
      if (line.startsWith('+')) return PAINT.green(line);
      if (line.startsWith('-')) return PAINT.red(line);
      return line;
    })
    .join('\n');
}

export function renderDiffConfigText(c: ConfigComparison, options: { color: boolean }): string {
  if (c.identical) {
    const gate = c.failOn.length > 0 ? ` Gate --fail-on ${c.failOn.join(',')}: passed.` : '';
    return `No differences (${c.to.hash}).${gate}\n`;
  }
  const parts: string[] = [];
  parts.push(options.color ? colorDiff(c.unifiedDiff.trimEnd()) : c.unifiedDiff.trimEnd(), '');
  parts.push('Changes:');
  for (const ch of c.changes) parts.push(`  ${changeLine(ch, options.color)}`);
  parts.push('');
  const counts = IMPACT_CLASSES.filter((i) => c.countsByImpact[i] > 0)
    .slice()
    .reverse()
    .map((i) => `${c.countsByImpact[i]} ${i}`);
  const n = c.changes.length;
  parts.push(`Summary: ${n} ${n === 1 ? 'change' : 'changes'} (${counts.join(', ')}).`);
  if (c.failOn.length > 0) {
    parts.push(
      c.gateTripped.length > 0
        ? `Gate --fail-on ${c.failOn.join(',')}: FAILED by ${c.gateTripped.join(', ')}.`
        : `Gate --fail-on ${c.failOn.join(',')}: passed.`,
    );
  }
  return `${parts.join('\n')}\n`;
}
