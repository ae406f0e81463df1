// The dashboard's connection: the event stream, status refreshes, reconnection with backoff.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { describe, it } from 'node:test';
import { AgentUnreachableError } from '../../../src/core/agent/admin-client.js';
import type { AgentEvent, AgentStatusJson } from '../../../src/core/agent/reload-types.js';
import { systemClock } from '../../../src/core/clock.js';
import type { Clock } from '../../../src/core/clock.js';
import { backoffDelay } from '../../../src/core/backoff.js';
import { agentFeed, disconnectReason } from '../../../src/ui/dashboard/feed.js';
import type { AgentEventSource, FeedMessage } from '../../../src/ui/dashboard/feed.js';
import { eventually } from '../../support/fake-admin.js';
import { APPLIED, logEvent, status, T0 } from './fixtures.js';

type Connection = (signal: AbortSignal | undefined) => AsyncIterable<AgentEvent>;

/** Yields `events`, then stays open until aborted (or ends, with `end`). */
function stream(events: readonly AgentEvent[], options: { end?: boolean } = {}): Connection {
  return async function* (signal) {
    for (const e of events) yield e;
    if (options.end === true || signal === undefined) return;
    if (!signal.aborted) await once(signal, 'abort');
  };
}

function fail(err: Error): Connection {
  // eslint-disable-next-line require-yield -- a stream that fails before its first event
  return async function* () {
    await Promise.resolve();
    throw err;
  };
}

class ScriptedSource implements AgentEventSource {
  statusCalls = 0;
  opened = 0;
  constructor(
    private readonly script: Connection[],
    private readonly fallback: Connection = fail(new AgentUnreachableError('/run/a.sock', 'missing')),
  ) {}
  status(): Promise<AgentStatusJson> {
    this.statusCalls += 1;
    return Promise.resolve(status({ generation: 100 + this.statusCalls }));
  }
  events(signal?: AbortSignal): AsyncIterable<AgentEvent> {
    this.opened += 1;
    return (this.script.shift() ?? this.fallback)(signal);
  }
}

const FAST = { clock: systemClock, refreshMs: 60_000, refreshDelayMs: 5, initialBackoffMs: 10, maxBackoffMs: 40 };

/** The system clock, counting the sleeps not yet over: the feed's every timer is one. */
function countingClock(): Clock & { readonly pending: () => number } {
  let pending = 0;
  return {
    now: () => systemClock.now(),
    sleep: async (ms, signal) => {
      pending += 1;
      try {
        await systemClock.sleep(ms, signal);
      } finally {
        pending -= 1;
      }
    },
    pending: () => pending,
  };
}
const statusEvent = (): AgentEvent => ({ type: 'status', at: T0, status: status() });

function collect(): { messages: FeedMessage[]; listener: (m: FeedMessage) => void } {
  const messages: FeedMessage[] = [];
  return { messages, listener: (m) => messages.push(m) };
}

describe('dashboard feed', () => {
  it('doubles the reconnection delay up to the maximum', () => {
    assert.deepEqual(
      // Attempt a (1-based) waits backoffDelay(a - 1) with the feed's defaults, 250 ms and 2 s.
      [1, 2, 3, 4, 5, 40].map((a) => backoffDelay(a - 1, { initialMs: 250, maxMs: 2000 })),
      [250, 500, 1000, 2000, 2000, 2000],
    );
  });

  it('says why the agent is unreachable in a few words', () => {
    assert.equal(
      disconnectReason(new AgentUnreachableError('/x', 'refused')),
      new AgentUnreachableError('/x', 'refused').detail,
    );
    assert.equal(disconnectReason(new Error('boom')), 'boom');
    assert.equal(disconnectReason('text'), 'text');
  });

  it('connects on the first event and passes every event on', async () => {
    const source = new ScriptedSource([stream([statusEvent(), logEvent('hello')])]);
    const { messages, listener } = collect();
    const stop = agentFeed(source, FAST).start(listener);
    try {
      await eventually(() => messages.length >= 3, 'connected, status and log');
      assert.deepEqual(
        messages.slice(0, 3).map((m) => (m.type === 'event' ? `event:${m.event.type}` : m.type)),
        ['connected', 'event:status', 'event:log'],
      );
    } finally {
      await stop();
    }
  });

  it('refreshes the status shortly after any other event, and periodically', async () => {
    const source = new ScriptedSource([stream([statusEvent(), { type: 'reload', at: T0, result: APPLIED }])]);
    const { messages, listener } = collect();
    const clock = countingClock();
    const stop = agentFeed(source, { ...FAST, clock, refreshMs: 50 }).start(listener);
    try {
      await eventually(() => source.statusCalls >= 1, 'a refresh after the reload event');
      const refreshed = messages.find(
        (m) => m.type === 'event' && m.event.type === 'status' && m.event.status.generation === 101,
      );
      assert.ok(refreshed, 'the refreshed status is delivered as a status event');
      await eventually(() => source.statusCalls >= 3, 'periodic refreshes');
    } finally {
      await stop();
    }
    // No refresh after stop: none is waiting on the clock any more.
    assert.equal(clock.pending(), 0, 'no timer left after stop');
  });

  it('reconnects with growing backoff, and resets it after a connection', async () => {
    const unreachable = new AgentUnreachableError('/run/a.sock', 'missing');
    const source = new ScriptedSource([
      fail(unreachable),
      fail(unreachable),
      fail(new Error('connection reset')),
      stream([statusEvent()], { end: true }),
      stream([statusEvent()]),
    ]);
    const { messages, listener } = collect();
    const stop = agentFeed(source, FAST).start(listener);
    try {
      await eventually(() => messages.filter((m) => m.type === 'connected').length === 2, 'two connections');
      const lifecycle = messages.filter((m) => m.type !== 'event');
      assert.deepEqual(
        lifecycle.map((m) => (m.type === 'disconnected' ? `lost#${m.attempt}: ${m.reason}` : m.type)),
        [
          `lost#1: ${unreachable.detail}`,
          `lost#2: ${unreachable.detail}`,
          'lost#3: connection reset',
          'connected',
          'lost#1: the agent closed the event stream (stopping or restarting?)',
          'connected',
        ],
      );
      const delays = lifecycle.flatMap((m) => (m.type === 'disconnected' ? [m.retryAt - m.at] : []));
      assert.deepEqual(delays, [10, 20, 40, 10]);
    } finally {
      await stop();
    }
    assert.equal(source.opened, 5);
  });

  it('stops: the open stream is aborted and nothing is delivered afterwards', async () => {
    const source = new ScriptedSource([stream([statusEvent()])]);
    const { messages, listener } = collect();
    const clock = countingClock();
    const stop = agentFeed(source, { ...FAST, clock }).start(listener);
    await eventually(() => messages.length === 2, 'connected');
    await stop();
    // Nothing can be delivered afterwards: no timer left, and the stream was aborted (not reopened).
    assert.equal(clock.pending(), 0, 'no timer left after stop');
    assert.equal(messages.length, 2);
    assert.equal(source.opened, 1, 'no reconnection after stop');
  });

  it('stops while waiting to reconnect', async () => {
    const source = new ScriptedSource([], fail(new Error('down')));
    const { messages, listener } = collect();
    const stop = agentFeed(source, { ...FAST, initialBackoffMs: 60_000, maxBackoffMs: 60_000 }).start(listener);
    await eventually(() => messages.length === 1, 'the first failure');
    const started = Date.now();
    await stop();
    assert.ok(Date.now() - started < 1000, 'stop does not wait out the backoff');
  });
});
