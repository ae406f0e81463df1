// How a failed command reports its error: the text, the stream and the exit code. Shared by the
// oclif commands (base-command.ts) and the lean `run` entry (run-lean.ts), which loads no oclif.
import { ExitCode, formatIssue, InvalidConfigError, issueToJson, ProvisionerError } from '../core/errors.js';
import type { IssueJson } from '../core/errors.js';

export interface ErrorJson {
  readonly formatVersion: 1;
  readonly error: {
    readonly code: string;
    readonly exitCode: number;
    readonly message: string;
    readonly issues: readonly IssueJson[];
  };
}

export interface ErrorOutput {
  readonly stream: 'stdout' | 'stderr';
  readonly text: string;
  readonly exitCode: number;
}

/**
 * A ProvisionerError as its documented exit code and message (JSON on stdout for commands with
 * machine output); anything else is a bug: exit 70, the stack only when DEBUG is set.
 */
export function errorOutput(err: Error, machineOutput: boolean, debug: boolean): ErrorOutput {
  if (err instanceof ProvisionerError) {
    const issues = err instanceof InvalidConfigError ? err.issues : [];
    if (machineOutput) {
      const json: ErrorJson = {
        formatVersion: 1,
        error: { code: err.code, exitCode: err.exitCode, message: err.message, issues: issues.map(issueToJson) },
      };
      return { stream: 'stdout', text: line(JSON.stringify(json, null, 2)), exitCode: err.exitCode };
    }
    const errors = issues.filter((i) => i.severity === 'error');
    const warnings = issues.filter((i) => i.severity === 'warning');
    const text = [
      `error: ${err.message}`,
      ...errors.map((i) => `  ${formatIssue(i)}`),
      ...warnings.map((i) => `  warning: ${formatIssue(i)}`),
    ].join('\n');
    return { stream: 'stderr', text: line(text), exitCode: err.exitCode };
  }
  const bug = line(
    `error: unexpected failure: ${err.message}\n  (a bug: please report it with the command you ran; set DEBUG=* for the stack)`,
  );
  return { stream: 'stderr', text: bug + (debug ? line(err.stack ?? '') : ''), exitCode: ExitCode.Internal };
}

function line(text: string): string {
  return text.endsWith('\n') ? text : `${text}\n`;
}
