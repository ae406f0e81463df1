// Runs the built CLI as a real process, the way users and CI run it.
import { spawn } from 'node:child_process';
import { join } from 'node:path';

export const REPO_ROOT = join(import.meta.dirname, '../../..');
export const CLI = join(REPO_ROOT, 'bin/run.js');

export interface CliResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

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
      ...(options.timeoutMs !== undefined ? { timeout: options.timeoutMs, killSignal: 'SIGKILL' as const } : {}),
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => {
      resolve({ code, stdout, stderr });
    });
  });
}
