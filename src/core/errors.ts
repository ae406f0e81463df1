// Typed errors carry the process exit code; the command layer renders them in one place.

/** Exit codes shared by every command. docs/exit-codes.md is the user-facing table. */
export const ExitCode = {
  /** Success; for diff-config: no differences. */
  Ok: 0,
  /** The command's negative result: diff-config found differences (or a --fail-on gate tripped). */
  Differences: 1,
  /** Bad flags or arguments. */
  Usage: 2,
  /** A config source was read but is invalid (YAML error, wrong type, failed validation). */
  InvalidConfig: 3,
  /** A config source does not exist or cannot be read. */
  SourceUnreadable: 4,
  /** The agent could not start: cluster unreachable, Node not found, listen address in use. */
  StartupFailed: 5,
  /** A bug: an unexpected error. */
  Internal: 70,
  // `provisioner reload` has its own table (docs/exit-codes.md); these coincide numerically with the above.
  /** reload: the config was not applied (rejected, rolled back, failed, or the agent answered with an error). */
  NotApplied: 1,
  /** reload: no agent answers on the admin socket. */
  AgentUnreachable: 2,
  /** reload: the agent did not answer in time. */
  AgentTimeout: 3,
  /** rollout pause|resume|abort|promote: no staged rollout, or the request does not fit its phase (or the controller dropped it). */
  Refused: 1,
  /** clean-block: the cleaner failed (exited non-zero or on a signal, could not start, the device could not be opened). */
  CleanerFailed: 1,
  /** clean-block: the disk at the device is not, or no longer, the expected one (or cannot be verified): refused. */
  DiskMismatch: 7,
} as const;
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode];

/** Where in which file a problem sits. Lines and columns are 1-based. */
export interface SourcePosition {
  readonly file: string;
  readonly line?: number;
  readonly column?: number;
}

/** One problem (error or warning) found in a config source. */
export interface ConfigIssue {
  readonly severity: 'error' | 'warning';
  /** Dotted key path, e.g. `storageClassMap.fast-disks.volumeMode`; empty for the whole source. */
  readonly path: string;
  readonly message: string;
  readonly position?: SourcePosition;
}

export abstract class ProvisionerError extends Error {
  abstract readonly exitCode: ExitCode;
  /** Stable machine-readable code used in `-o json` output. */
  abstract readonly code: string;
}

export class UsageError extends ProvisionerError {
  readonly exitCode = ExitCode.Usage;
  readonly code = 'usage';
}

export class ConfigSourceError extends ProvisionerError {
  readonly exitCode = ExitCode.SourceUnreadable;
  readonly code = 'source-unreadable';
  constructor(
    readonly source: string,
    message: string,
  ) {
    super(message);
  }
}

export class StartupError extends ProvisionerError {
  readonly exitCode = ExitCode.StartupFailed;
  readonly code = 'startup-failed';
}

/** `rollout pause|resume|abort|promote` refused: no staged rollout of the ConfigMap, or not in this phase. */
export class RolloutRequestError extends ProvisionerError {
  readonly exitCode = ExitCode.Refused;
  readonly code = 'rollout-refused';
  constructor(
    /** `not-staged`: no NAME-candidate or no readable state; `phase`: the action does not fit the phase. */
    readonly reason: 'not-staged' | 'phase',
    message: string,
  ) {
    super(message);
  }
}

/** The most errors (and, apart, warnings) an InvalidConfigError carries: enough to fix a config, bounded for any input. */
export const MAX_REPORTED_ISSUES = 100;

/** A config that was read but is invalid. Holds every problem found (the first MAX_REPORTED_ISSUES of each severity). */
export class InvalidConfigError extends ProvisionerError {
  readonly exitCode = ExitCode.InvalidConfig;
  readonly code = 'invalid-config';
  readonly issues: readonly ConfigIssue[];
  constructor(
    readonly source: string,
    issues: readonly ConfigIssue[],
  ) {
    const errors = issues.filter((i) => i.severity === 'error');
    const warnings = issues.filter((i) => i.severity === 'warning');
    const shown = errors.length > MAX_REPORTED_ISSUES ? `; the first ${String(MAX_REPORTED_ISSUES)} are shown` : '';
    super(
      `invalid configuration in ${source} (${String(errors.length)} ${errors.length === 1 ? 'problem' : 'problems'}${shown})`,
    );
    this.issues =
      issues.length <= MAX_REPORTED_ISSUES
        ? issues
        : [...errors.slice(0, MAX_REPORTED_ISSUES), ...warnings.slice(0, MAX_REPORTED_ISSUES)];
  }
}

/** `file:line:col: path: message`, the shape compilers and editors understand. */
export function formatIssue(issue: ConfigIssue): string {
  const where = issue.position
    ? [issue.position.file, issue.position.line, issue.position.column].filter((p) => p !== undefined).join(':')
    : '';
  const prefix = where === '' ? '' : `${where}: `;
  const path = issue.path === '' ? '' : `${issue.path}: `;
  return `${prefix}${path}${issue.message}`;
}

/** An issue in the JSON contracts (`-o json` of diff-config and simulate, the error JSON). */
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
