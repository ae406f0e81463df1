// The one module that owns process signals. SIGTERM/SIGINT ask for a graceful stop (a second one
// forces the exit); SIGHUP asks for a reload. Everything else is stopped through AbortSignals.
import { systemClock, within } from '../core/clock.js';
import type { Logger } from '../core/log.js';

export interface SignalHandlers {
  readonly shutdown: (signal: NodeJS.Signals) => void;
  readonly reload?: () => void;
  /** Called on a second shutdown signal; default: exit(130/143) at once. */
  readonly force?: (signal: NodeJS.Signals) => void;
}

const EXIT_ON: Readonly<Record<string, number>> = { SIGINT: 130, SIGTERM: 143 };

export function installSignalHandlers(handlers: SignalHandlers): () => void {
  let stopping = false;
  const onStop = (signal: NodeJS.Signals): void => {
    if (stopping) {
      if (handlers.force) handlers.force(signal);
      else process.exit(EXIT_ON[signal] ?? 1);
      return;
    }
    stopping = true;
    handlers.shutdown(signal);
  };
  const onHup = (): void => {
    handlers.reload?.();
  };
  process.on('SIGTERM', onStop);
  process.on('SIGINT', onStop);
  process.on('SIGHUP', onHup);
  return () => {
    process.off('SIGTERM', onStop);
    process.off('SIGINT', onStop);
    process.off('SIGHUP', onHup);
  };
}

/**
 * Installs the signal handlers for a long-running command: `stopped` resolves with the first
 * SIGTERM/SIGINT, SIGHUP calls `reload`. Call `uninstall` when the command ends.
 */
export function untilStopSignal(reload?: () => void): { stopped: Promise<NodeJS.Signals>; uninstall: () => void } {
  let stopRequested: (signal: NodeJS.Signals) => void = () => undefined;
  const stopped = new Promise<NodeJS.Signals>((resolve) => {
    stopRequested = resolve;
  });
  const uninstall = installSignalHandlers({
    shutdown: (signal) => {
      stopRequested(signal);
    },
    ...(reload === undefined ? {} : { reload }),
  });
  return { stopped, uninstall };
}

/** Waits for a graceful stop at most `ms`; a stop that takes longer is logged and left behind. */
export async function stopWithin(stop: Promise<void>, ms: number, logger: Logger): Promise<void> {
  const result = await within(systemClock, stop, ms);
  if (!result.ok) logger.log('warn', 'graceful stop timed out', { timeoutMs: ms });
}
