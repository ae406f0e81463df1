// The one place that turns errors into output and exit codes for every command.
import { Command, Errors } from '@oclif/core';
import { ProvisionerError } from '../core/errors.js';
import { errorOutput } from './error-output.js';

export { type ErrorJson } from './error-output.js';
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

  /**
   * Exits with `code` once stdout and stderr have handed everything to the OS: oclif's exit is
   * process.exit(), which drops what a pipe has not taken yet (a `diff-config -o json | jq` of a
   * large diff was cut at 64 KiB).
   */
  protected async exitDrained(code: number): Promise<never> {
    await Promise.all([drained(process.stdout), drained(process.stderr)]);
    this.exit(code);
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
    await Promise.all([drained(process.stdout), drained(process.stderr)]);
    throw new Errors.ExitError(out.exitCode);
  }
}

/** Resolves when the stream's buffered writes have been handed to the OS (or it closed). */
function drained(stream: NodeJS.WriteStream): Promise<void> {
  if (stream.writableLength === 0 || stream.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    const done = (): void => {
      stream.off('drain', done);
      stream.off('close', done);
      stream.off('error', done);
      resolve();
    };
    stream.on('drain', done);
    stream.on('close', done);
    stream.on('error', done);
  });
}

/** Colour on a TTY unless NO_COLOR is set or TERM is dumb; a --color/--no-color flag wins. */
export function useColor(flag: boolean | undefined): boolean {
  if (flag !== undefined) return flag;
  const env = process.env;
  return process.stdout.isTTY && env['NO_COLOR'] === undefined && env['TERM'] !== 'dumb';
}
