// The one place that turns errors into output and exit codes for every command.
import { Command, Errors } from '@oclif/core';
import { ProvisionerError } from '../core/errors.js';
import { errorOutput } from './error-output.js';

export { issueToJson, type ErrorJson, type IssueJson } from './error-output.js';
export { defaultConfigDir } from './config-dir.js';

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
    if (err instanceof Errors.CLIError && !(err instanceof ProvisionerError)) {
      // Flag parsing errors: oclif renders them (exit 2).
      return super.catch(err);
    }
    const out = errorOutput(err, this.machineOutput, process.env['DEBUG'] !== undefined);
    if (out.stream === 'stdout') this.writeOut(out.text);
    else this.writeErr(out.text);
    throw new Errors.ExitError(out.exitCode);
  }
}

/** Colour on a TTY unless NO_COLOR is set or TERM is dumb; a --color/--no-color flag wins. */
export function useColor(flag: boolean | undefined): boolean {
  if (flag !== undefined) return flag;
  const env = process.env;
  return process.stdout.isTTY && env['NO_COLOR'] === undefined && env['TERM'] !== 'dumb';
}
