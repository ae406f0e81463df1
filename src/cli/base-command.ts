// The one place that turns errors into output and exit codes for every command.
import { Command, Errors } from '@oclif/core';
import { ExitCode, formatIssue, InvalidConfigError, ProvisionerError } from '../core/errors.js';
import type { ConfigIssue } from '../core/errors.js';

export interface ErrorJson {
  readonly formatVersion: 1;
  readonly error: {
    readonly code: string;
    readonly exitCode: number;
    readonly message: string;
    readonly issues: readonly IssueJson[];
  };
}

export interface IssueJson {
  readonly severity: 'error' | 'warning';
  readonly path: string;
  readonly message: string;
  readonly file?: string;
  readonly line?: number;
  readonly column?: number;
}

export function issueToJson(issue: ConfigIssue): IssueJson {
  return {
    severity: issue.severity,
    path: issue.path,
    message: issue.message,
    ...(issue.position?.file !== undefined ? { file: issue.position.file } : {}),
    ...(issue.position?.line !== undefined ? { line: issue.position.line } : {}),
    ...(issue.position?.column !== undefined ? { column: issue.position.column } : {}),
  };
}

export abstract class ProvisionerCommand extends Command {
  /** Set by commands that print machine output, so errors are JSON too. */
  protected machineOutput = false;

  protected writeOut(text: string): void {
    process.stdout.write(text.endsWith('\n') ? text : `${text}\n`);
  }

  protected writeErr(text: string): void {
    process.stderr.write(text.endsWith('\n') ? text : `${text}\n`);
  }

  protected override async catch(err: Error & { exitCode?: number }): Promise<unknown> {
    if (err instanceof Errors.ExitError) throw err;
    if (err instanceof ProvisionerError) {
      const issues = err instanceof InvalidConfigError ? err.issues : [];
      if (this.machineOutput) {
        const json: ErrorJson = {
          formatVersion: 1,
          error: { code: err.code, exitCode: err.exitCode, message: err.message, issues: issues.map(issueToJson) },
        };
        this.writeOut(JSON.stringify(json, null, 2));
      } else {
        const errors = issues.filter((i) => i.severity === 'error');
        const warnings = issues.filter((i) => i.severity === 'warning');
        this.writeErr(
          [
            `error: ${err.message}`,
            ...errors.map((i) => `  ${formatIssue(i)}`),
            ...warnings.map((i) => `  warning: ${formatIssue(i)}`),
          ].join('\n'),
        );
      }
      throw new Errors.ExitError(err.exitCode);
    }
    if (err instanceof Errors.CLIError) {
      // Flag parsing errors: oclif renders them (exit 2).
      return super.catch(err);
    }
    this.writeErr(
      `error: unexpected failure: ${err.message}\n  (a bug: please report it with the command you ran; set DEBUG=* for the stack)`,
    );
    if (process.env['DEBUG'] !== undefined) this.writeErr(err.stack ?? '');
    throw new Errors.ExitError(ExitCode.Internal);
  }
}

/** Colour on a TTY unless NO_COLOR is set or TERM is dumb; a --color/--no-color flag wins. */
export function useColor(flag: boolean | undefined): boolean {
  if (flag !== undefined) return flag;
  const env = process.env;
  return process.stdout.isTTY && env['NO_COLOR'] === undefined && env['TERM'] !== 'dumb';
}

/** The node's config source (the mounted ConfigMap) when a command is given none. */
export const DEFAULT_CONFIG_DIR = '/etc/provisioner/config';
/** Overrides DEFAULT_CONFIG_DIR for every command (`run --config-dir` reads it as its env). */
export const CONFIG_DIR_ENV = 'PROVISIONER_CONFIG_DIR';

export function defaultConfigDir(): string {
  const value = process.env[CONFIG_DIR_ENV];
  return value === undefined || value === '' ? DEFAULT_CONFIG_DIR : value;
}
