// Text and JSON renderings of a ReloadResult. JSON is a documented contract (docs/reload-command.md).
import { formatIssue } from '../core/errors.js';
import type { ConfigIssue } from '../core/errors.js';
import type { ReloadChange, ReloadResult } from '../core/agent/reload-types.js';
import { plural } from './text.js';

export const RELOAD_FORMAT_VERSION = 1;

export interface ReloadJson {
  readonly formatVersion: typeof RELOAD_FORMAT_VERSION;
  readonly result: ReloadResult;
}

/** 0 when the agent serves the config it read (applied, or already did: noop); 1 otherwise (refused too). */
export function reloadExitCode(result: ReloadResult): 0 | 1 {
  return result.outcome === 'applied' || result.outcome === 'noop' ? 0 : 1;
}

function issueCopy(issue: ConfigIssue): ConfigIssue {
  return {
    severity: issue.severity,
    path: issue.path,
    message: issue.message,
    ...(issue.position !== undefined
      ? {
          position: {
            file: issue.position.file,
            ...(issue.position.line !== undefined ? { line: issue.position.line } : {}),
            ...(issue.position.column !== undefined ? { column: issue.position.column } : {}),
          },
        }
      : {}),
  };
}

/** The documented fields only, in a fixed order, whatever else the agent sent. */
export function toReloadJson(r: ReloadResult): ReloadJson {
  return {
    formatVersion: RELOAD_FORMAT_VERSION,
    result: {
      outcome: r.outcome,
      trigger: r.trigger,
      forced: r.forced,
      generation: r.generation,
      appliedHash: r.appliedHash,
      ...(r.candidateHash !== undefined ? { candidateHash: r.candidateHash } : {}),
      changes: r.changes.map((c) => ({ path: c.path, action: c.action, impact: c.impact, summary: c.summary })),
      issues: r.issues.map(issueCopy),
      ...(r.error !== undefined ? { error: r.error } : {}),
      ...(r.needsAllow !== undefined ? { needsAllow: [...r.needsAllow] } : {}),
      startedAt: r.startedAt,
      durationMs: r.durationMs,
    },
  };
}

const SYMBOL: Readonly<Record<string, string>> = { added: '+', removed: '-', renamed: '>' };

function changeLine(c: ReloadChange): string {
  return `  ${SYMBOL[c.action] ?? '~'} ${c.path}  [${c.impact}] ${c.summary}`;
}

export function renderReloadText(r: ReloadResult): string {
  const lines: string[] = [];
  const took = `${Math.round(r.durationMs)} ms`;
  const errors = r.issues.filter((i) => i.severity === 'error');
  const warnings = r.issues.filter((i) => i.severity === 'warning');
  switch (r.outcome) {
    case 'applied': {
      const forced = r.forced ? ' (forced)' : '';
      const what =
        r.changes.length === 0 ? 'no config changes: the sync loop restarted' : plural(r.changes.length, 'change');
      lines.push(`Applied${forced}: generation ${r.generation} serves ${r.appliedHash} (${what}, ${took}).`);
      if (r.changes.length > 0) lines.push('Changes:', ...r.changes.map(changeLine));
      break;
    }
    case 'noop':
      lines.push(
        `No change: generation ${r.generation} already serves ${r.appliedHash} (${took}).`,
        'Use --force to restart the sync loop anyway.',
      );
      break;
    case 'rejected': {
      const candidate = r.candidateHash !== undefined ? ` (${r.candidateHash})` : '';
      lines.push(
        `Rejected: the config read${candidate} is invalid (${plural(errors.length, 'problem')}); ` +
          `generation ${r.generation} keeps serving ${r.appliedHash}.`,
        ...errors.map((i) => `  ${formatIssue(i)}`),
      );
      if (r.error !== undefined && errors.length === 0) lines.push(`  ${r.error}`);
      break;
    }
    case 'refused':
      // The error says why, what keeps serving and how to apply it (--allow, or a restart).
      lines.push(`Refused: ${r.error ?? `generation ${r.generation} keeps serving ${r.appliedHash}`}.`);
      if (r.changes.length > 0) lines.push('Changes not applied:', ...r.changes.map(changeLine));
      break;
    case 'rolled-back':
      lines.push(
        `Rolled back: the new generation failed to start: ${r.error ?? 'no reason given'}`,
        `Generation ${r.generation} serves the previous config ${r.appliedHash} again.`,
      );
      if (r.changes.length > 0) lines.push('Changes not applied:', ...r.changes.map(changeLine));
      break;
    case 'failed':
      lines.push(`Failed: ${r.error ?? 'no reason given'}`, `Generation ${r.generation} serves ${r.appliedHash}.`);
      break;
  }
  lines.push(...warnings.map((i) => `warning: ${formatIssue(i)}`));
  return `${lines.join('\n')}\n`;
}
