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

/** The feed's timings, defaults applied. */
interface FeedTiming {
  readonly refreshMs: number;
  readonly refreshDelayMs: number;
  readonly initialBackoffMs: number;
  readonly maxBackoffMs: number;
}

interface StatusRefresher {
  poke(): void;
  readonly done: Promise<void>;
}

/** Refreshes the status every refreshMs, and refreshDelayMs after poke(), until `signal` aborts. */
function statusRefresher(
  source: AgentEventSource,
  clock: Clock,
  timing: FeedTiming,
  signal: AbortSignal,
  emit: (status: AgentStatusJson) => void,
): StatusRefresher {
  let wake = (): void => undefined;
  let poked = false;
  const setWake = (w: () => void): void => {
    wake = w;
  };
  const loop = async (): Promise<void> => {
    while (!isAborted(signal)) {
      if (!poked) await nap(clock, timing.refreshMs, signal, setWake);
      if (poked) {
        poked = false;
        await nap(clock, timing.refreshDelayMs, signal, setWake);
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

/** One connection to the agent's event stream, followed until it ends; why it ended. */
async function followConnection(
  source: AgentEventSource,
  clock: Clock,
  timing: FeedTiming,
  listener: (message: FeedMessage) => void,
  signal: AbortSignal,
): Promise<{ readonly connected: boolean; readonly reason: string }> {
  const connection = new AbortController();
  const onAbort = (): void => {
    connection.abort();
  };
  signal.addEventListener('abort', onAbort, { once: true });
  let refresh: StatusRefresher | undefined;
  let reason: string;
  try {
    for await (const event of source.events(connection.signal)) {
      if (refresh === undefined) {
        listener({ type: 'connected', at: clock.now() });
        refresh = statusRefresher(source, clock, timing, connection.signal, (status) => {
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
  return { connected: refresh !== undefined, reason };
}

/** Follows the agent, reconnecting with a back-off (reset by each connection), until `signal` aborts. */
async function followAgent(
  source: AgentEventSource,
  clock: Clock,
  timing: FeedTiming,
  listener: (message: FeedMessage) => void,
  signal: AbortSignal,
): Promise<void> {
  let attempt = 0;
  while (!isAborted(signal)) {
    const { connected, reason } = await followConnection(source, clock, timing, listener, signal);
    if (connected) attempt = 0;
    if (isAborted(signal)) return;
    attempt += 1;
    const delay = backoffDelay(attempt - 1, { initialMs: timing.initialBackoffMs, maxMs: timing.maxBackoffMs });
    const at = clock.now();
    listener({ type: 'disconnected', at, reason, attempt, retryAt: at + delay });
    await nap(clock, delay, signal, () => undefined);
  }
}

export function agentFeed(source: AgentEventSource, options: AgentFeedOptions): DashboardFeed {
  const timing: FeedTiming = {
    refreshMs: options.refreshMs ?? 2000,
    refreshDelayMs: options.refreshDelayMs ?? 100,
    initialBackoffMs: options.initialBackoffMs ?? 250,
    maxBackoffMs: options.maxBackoffMs ?? 2000,
  };
  return {
    start(listener) {
      const controller = new AbortController();
      const done = followAgent(source, options.clock, timing, listener, controller.signal);
      return async () => {
        controller.abort();
        await done;
      };
    },
  };
}
