// Runs the built CLI as a real process, the way users and CI run it.
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';

export const REPO_ROOT = join(import.meta.dirname, '../../..');
export const CLI = join(REPO_ROOT, 'bin/run.js');

export interface CliResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Runs the CLI to its end. With `timeoutMs` (a hang detector, not a timing assertion) a process
 * still running then is killed and the promise rejects.
 */
export function runCli(
  args: readonly string[],
  options: {
    env?: NodeJS.ProcessEnv;
    cwd?: string;
    /** Kill the process (SIGKILL) after this long: a hang detector, so a hung CLI fails the test and is not left running. */
    timeoutMs?: number;
  } = {},
): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      cwd: options.cwd ?? REPO_ROOT,
      env: { ...process.env, NO_COLOR: undefined, FORCE_COLOR: undefined, ...options.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const timer =
      options.timeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            child.kill('SIGKILL');
            reject(new Error(`${args.join(' ')} still running after ${String(options.timeoutMs)} ms\n${stderr}`));
          }, options.timeoutMs);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** Stops every child still running: SIGTERM, then SIGKILL after killAfterMs; resolves once each has exited or been killed. */
export async function stopChildren(children: readonly ChildProcess[], killAfterMs = 10_000): Promise<void> {
  const running = (child: ChildProcess): boolean => child.exitCode === null && child.signalCode === null;
  for (const child of children) if (running(child)) child.kill('SIGTERM');
  await Promise.all(
    children.map(
      (child) =>
        new Promise<void>((resolve) => {
          if (!running(child)) resolve();
          else
            child.once('exit', () => {
              resolve();
            });
          setTimeout(() => {
            child.kill('SIGKILL');
            resolve();
          }, killAfterMs).unref();
        }),
    ),
  );
}
