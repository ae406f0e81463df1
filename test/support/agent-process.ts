// `provisioner run` as a real process against the test apiserver, the way the discovery and
// disk-rules tests run it: started with a config directory and a node name, ready once its
// /ready answers 200, stopped with SIGTERM (SIGKILL after a bound). Its stderr (JSON logs) is kept.
import { spawn, type ChildProcessByStdio } from 'node:child_process';
import type { Readable } from 'node:stream';

import { CLI } from './cli.js';
import { eventually } from './eventually.js';

export interface AgentProcess {
  readonly child: ChildProcessByStdio<null, Readable, Readable>;
  /** The metrics and probes port. */
  readonly port: string;
  stderr(): string;
  /** SIGTERM, then SIGKILL after 10 s; resolves with the exit code. */
  stop(): Promise<number | null>;
}

export async function startAgentProcess(options: {
  readonly configDir: string;
  readonly node: string;
  readonly kubeconfig: string;
  readonly args?: readonly string[];
}): Promise<AgentProcess> {
  const child = spawn(
    process.execPath,
    [
      CLI,
      'run',
      '--config-dir',
      options.configDir,
      '--listen-address',
      '127.0.0.1:0',
      '--log-format',
      'json',
      ...(options.args ?? []),
    ],
    {
      env: { ...process.env, MY_NODE_NAME: options.node, KUBECONFIG: options.kubeconfig },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const exited = new Promise<number | null>((resolve) => {
    child.on('exit', (code) => {
      resolve(code);
    });
  });
  const stop = async (): Promise<number | null> => {
    if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    try {
      return await exited;
    } finally {
      clearTimeout(timer);
    }
  };
  try {
    const port = await eventually(
      () => Promise.resolve(/"msg":"agent started".*?"listen":"[^"]*:(\d+)"/u.exec(stderr)?.[1]),
      `the agent to start (stderr: ${stderr.slice(-2000)})`,
      20_000,
    );
    await eventually(
      async () => ((await fetch(`http://127.0.0.1:${port}/ready`)).status === 200 ? true : undefined),
      'the agent ready',
    );
    return { child, port, stderr: () => stderr, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
