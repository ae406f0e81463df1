// Assembles the real dependency bag for `provisioner run` (the one place that does), starts the
// agent and keeps the process alive until a shutdown signal, then stops it within a deadline.
import { Agent } from '../core/agent/agent.js';
import type { AgentOptions } from '../core/agent/agent.js';
import { systemClock } from '../core/clock.js';
import { LinuxVolumes } from '../core/node/linux-volumes.js';
import { ProcessCleaner } from '../core/cleanup/cleaner.js';
import { installSignalHandlers, withDeadline } from './lifecycle.js';
import { connectCluster } from './cluster-connection.js';
import { StderrLogger } from './logger.js';

export interface RunAgentProcessOptions {
  readonly agent: AgentOptions;
  /** The process environment, passed on to cleaner commands. */
  readonly environment: Readonly<Record<string, string | undefined>>;
  readonly kubeconfig: string | undefined;
  readonly inCluster: { readonly host: string | undefined; readonly port: string | undefined };
  readonly qps: number;
  readonly burst: number;
  readonly shutdownTimeoutMs: number;
  readonly logLevel: 'debug' | 'info' | 'warn' | 'error';
  readonly logFormat: 'text' | 'json';
}

export async function runAgentProcess(options: RunAgentProcessOptions): Promise<void> {
  const logger = new StderrLogger(options.logLevel, options.logFormat);
  const cluster = await connectCluster({
    kubeconfig: options.kubeconfig,
    inCluster: options.inCluster,
    qps: options.qps,
    burst: options.burst,
    clock: systemClock,
  });
  let stopRequested: (signal: NodeJS.Signals) => void = () => undefined;
  const stopped = new Promise<NodeJS.Signals>((resolve) => {
    stopRequested = resolve;
  });
  // Signals are handled from before start-up, so a SIGTERM while starting still stops cleanly.
  const uninstall = installSignalHandlers({
    shutdown: (signal) => {
      stopRequested(signal);
    },
  });
  try {
    const agent = await Agent.start(options.agent, {
      cluster,
      volumes: new LinuxVolumes(),
      cleaner: new ProcessCleaner(options.environment),
      clock: systemClock,
      logger,
    });
    const signal = await stopped;
    logger.log('info', 'stopping', { signal });
    const result = await withDeadline(agent.stop(), options.shutdownTimeoutMs);
    if (result === 'timeout') logger.log('warn', 'graceful stop timed out', { timeoutMs: options.shutdownTimeoutMs });
  } finally {
    uninstall();
    cluster.close();
  }
}
