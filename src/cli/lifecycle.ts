// The one module that owns process signals. SIGTERM/SIGINT ask for a graceful stop (a second one
// forces the exit); SIGHUP asks for a reload. Everything else is stopped through AbortSignals.

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

/** Resolves with the first of the promise or the deadline. */
export async function withDeadline<T>(promise: Promise<T>, ms: number): Promise<T | 'timeout'> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<'timeout'>((resolve) => {
        timer = setTimeout(() => {
          resolve('timeout');
        }, ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
