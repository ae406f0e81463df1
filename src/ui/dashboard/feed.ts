// The dashboard's connection to the agent: the event stream (GET /v1/events), kept open across
// agent restarts with backoff, plus status refreshes. The stream carries a status only on connect
// and every keep-alive (15 s), so the feed also asks for one shortly after every other event (a
// reload, pass or cleanup changes what the status shows) and every refreshMs while connected.
import { backoffDelay } from '../../core/backoff.js';
import { isAborted } from '../../core/clock.js';
import type { Clock } from '../../core/clock.js';
import type { AgentEvent, AgentStatusJson } from '../../core/agent/reload-types.js';

export type FeedMessage =
  | { readonly type: 'connected'; readonly at: number }
  | { readonly type: 'event'; readonly event: AgentEvent; readonly at: number }
  | {
      readonly type: 'disconnected';
      readonly at: number;
      readonly reason: string;
      /** Reconnection attempts since the last successful connection, this one included. */
      readonly attempt: number;
      readonly retryAt: number;
    };

/** What the view subscribes to: the agent, or a scripted fake in tests. */
export interface DashboardFeed {
  /** Starts delivering messages; the returned function stops the feed and resolves once it has. */
  start(listener: (message: FeedMessage) => void): () => Promise<void>;
}

/** The parts of AdminClient the feed uses. */
export interface AgentEventSource {
  status(): Promise<AgentStatusJson>;
  events(signal?: AbortSignal): AsyncIterable<AgentEvent>;
}

export interface AgentFeedOptions {
  readonly clock: Clock;
  /** Status refresh period while connected; default 2 s. */
  readonly refreshMs?: number;
  /** Quiet time after a non-status event before the status is refreshed; default 100 ms. */
  readonly refreshDelayMs?: number;
  /** First reconnection delay, doubled per failed attempt up to maxBackoffMs; defaults 250 ms and 2 s. */
  readonly initialBackoffMs?: number;
  readonly maxBackoffMs?: number;
}

/** A short reason for the header: AgentUnreachableError's detail ("the socket does not exist"), else the message. */
export function disconnectReason(err: unknown): string {
  if (err instanceof Error) {
    const detail: unknown = (err as Error & { detail?: unknown }).detail;
    return typeof detail === 'string' ? detail : err.message;
  }
  return String(err);
}

/** Sleeps until `ms` passed, `wake` is called, or `signal` aborts; never rejects. */
function nap(clock: Clock, ms: number, signal: AbortSignal, setWake: (wake: () => void) => void): Promise<void> {
  const inner = new AbortController();
  const onAbort = (): void => {
    inner.abort();
  };
  signal.addEventListener('abort', onAbort, { once: true });
  setWake(onAbort);
  return clock
    .sleep(ms, inner.signal)
    .catch(() => undefined)
    .finally(() => {
      signal.removeEventListener('abort', onAbort);
    });
}

export function agentFeed(source: AgentEventSource, options: AgentFeedOptions): DashboardFeed {
  const { clock } = options;
  const refreshMs = options.refreshMs ?? 2000;
  const refreshDelayMs = options.refreshDelayMs ?? 100;
  const initialBackoffMs = options.initialBackoffMs ?? 250;
  const maxBackoffMs = options.maxBackoffMs ?? 2000;

  /** Refreshes the status every refreshMs, and refreshDelayMs after poke(), until `signal` aborts. */
  function refresher(
    signal: AbortSignal,
    emit: (status: AgentStatusJson) => void,
  ): { poke(): void; done: Promise<void> } {
    let wake = (): void => undefined;
    let poked = false;
    const setWake = (w: () => void): void => {
      wake = w;
    };
    const loop = async (): Promise<void> => {
      while (!isAborted(signal)) {
        if (!poked) await nap(clock, refreshMs, signal, setWake);
        if (poked) {
          poked = false;
          await nap(clock, refreshDelayMs, signal, setWake);
        }
        if (isAborted(signal)) return;
        try {
          const status = await source.status();
          if (!isAborted(signal)) emit(status);
        } catch {
          // The event stream notices a lost agent and reconnects; nothing to do here.
        }
      }
    };
    return {
      poke: () => {
        poked = true;
        wake();
      },
      done: loop(),
    };
  }

  async function run(listener: (message: FeedMessage) => void, signal: AbortSignal): Promise<void> {
    let attempt = 0;
    while (!isAborted(signal)) {
      const connection = new AbortController();
      const onAbort = (): void => {
        connection.abort();
      };
      signal.addEventListener('abort', onAbort, { once: true });
      let refresh: { poke(): void; done: Promise<void> } | undefined;
      let reason: string;
      try {
        for await (const event of source.events(connection.signal)) {
          if (refresh === undefined) {
            attempt = 0;
            listener({ type: 'connected', at: clock.now() });
            refresh = refresher(connection.signal, (status) => {
              listener({ type: 'event', event: { type: 'status', at: status.now, status }, at: clock.now() });
            });
          }
          listener({ type: 'event', event, at: clock.now() });
          if (event.type !== 'status') refresh.poke();
        }
        reason = 'the agent closed the event stream (stopping or restarting?)';
      } catch (err) {
        reason = disconnectReason(err);
      } finally {
        connection.abort();
        signal.removeEventListener('abort', onAbort);
      }
      await refresh?.done;
      if (isAborted(signal)) return;
      attempt += 1;
      const delay = backoffDelay(attempt - 1, { initialMs: initialBackoffMs, maxMs: maxBackoffMs });
      const at = clock.now();
      listener({ type: 'disconnected', at, reason, attempt, retryAt: at + delay });
      await nap(clock, delay, signal, () => undefined);
    }
  }

  return {
    start(listener) {
      const controller = new AbortController();
      const done = run(listener, controller.signal);
      return async () => {
        controller.abort();
        await done;
      };
    },
  };
}
