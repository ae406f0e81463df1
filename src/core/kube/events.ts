// Kubernetes Events, as client-go's recorder writes them: cluster-scoped objects' events go to the
// `default` namespace; repeats of the same event are suppressed for a while instead of spamming
// the apiserver every pass (upstream re-emits on every 10 s loop).
//
// Events are written one at a time from a bounded queue. While the apiserver is slow or hangs,
// the queue stays at its bound: the oldest events are dropped and counted (client-go's
// broadcaster also queues at most 1000 and drops when full), with a warning at most once a
// minute, so a slow API never grows the agent's memory. Events are best effort by design.
import { createHash } from 'node:crypto';
import { within } from '../clock.js';
import type { Clock } from '../clock.js';
import type { Logger } from '../log.js';
import type { Cluster } from './cluster.js';
import type { CoreEvent, ObjectReference } from './objects.js';
import { errorMessage } from '../unknown-values.js';

export interface EventSink {
  record(object: ObjectReference, type: 'Normal' | 'Warning', reason: string, message: string): void;
}

export interface EventRecorderOptions {
  readonly cluster: Cluster;
  readonly clock: Clock;
  readonly logger: Logger;
  /** source.component, upstream: the provisioner name. */
  readonly component: string;
  readonly host: string;
  /** Suppress an identical event for this long. */
  readonly repeatAfterMs?: number;
  readonly maxTracked?: number;
  /** Events waiting to be written, at most (default 1000, as client-go); the oldest are dropped beyond. */
  readonly maxQueued?: number;
  /** How long flush() waits by default (default 5 s); what is left is dropped. */
  readonly flushTimeoutMs?: number;
  /** Counts the events dropped (queue full, or left at a flush deadline): a metrics Counter fits. */
  readonly dropped?: { inc(labels?: Readonly<Record<string, string>>, by?: number): void };
}

const DROP_LOG_INTERVAL_MS = 60_000;
/** How long an identical event is suppressed by default. */
const DEFAULT_REPEAT_AFTER_MS = 10 * 60_000;

/**
 * What makes two events the same, as a digest: the map that suppresses repeats keeps up to
 * maxTracked of them, and under reload churn every reload's event is new (~300 bytes of text each,
 * built by concatenation) where the digest is 27 characters.
 */
function repeatKey(object: ObjectReference, reason: string, message: string): string {
  return createHash('sha256')
    .update(
      `${object.kind ?? ''}/${object.namespace ?? ''}/${object.name ?? ''}/${object.uid ?? ''}/${reason}/${message}`,
    )
    .digest('base64')
    .slice(0, 27);
}

export class EventRecorder implements EventSink {
  private readonly lastSent = new Map<string, number>();
  private readonly queue: CoreEvent[] = [];
  private writer: Promise<void> | undefined;
  private lastDropLog = -Infinity;
  private droppedSinceLog = 0;
  /** Makes the names of events recorded in the same millisecond differ (the clock has ms resolution). */
  private recorded = 0;
  sent = 0;
  /** Events dropped since the start (queue full or flush deadline). */
  dropped = 0;

  constructor(private readonly options: EventRecorderOptions) {}

  /** Events waiting to be written (the one being written included). */
  get queued(): number {
    return this.queue.length + (this.writer !== undefined ? 1 : 0);
  }

  record(object: ObjectReference, type: 'Normal' | 'Warning', reason: string, message: string): void {
    const { clock } = this.options;
    const key = repeatKey(object, reason, message);
    const now = clock.now();
    const repeatAfter = this.options.repeatAfterMs ?? DEFAULT_REPEAT_AFTER_MS;
    const last = this.lastSent.get(key);
    if (last !== undefined && now - last < repeatAfter) return;
    this.lastSent.delete(key);
    this.lastSent.set(key, now);
    this.forgetOld(now - repeatAfter);
    const namespace = object.namespace ?? 'default';
    const time = new Date(now).toISOString();
    // client-go's `<object>.<unix nanoseconds in hex>`: the nanoseconds of a millisecond count the
    // events recorded in it, so a burst never reuses a name (a random suffix alone collided, and the
    // apiserver refused the duplicate); the random suffix keeps two processes apart.
    const nanos = BigInt(now) * 1_000_000n + BigInt(this.recorded++ % 1_000_000);
    const name = `${object.name ?? 'unknown'}.${nanos.toString(16)}${Math.floor(Math.random() * 0xffff).toString(16)}`;
    this.queue.push({
      metadata: { name, namespace },
      involvedObject: object,
      reason,
      message,
      type,
      source: { component: this.options.component, host: this.options.host },
      firstTimestamp: time,
      lastTimestamp: time,
      count: 1,
    });
    const bound = Math.max(1, this.options.maxQueued ?? 1000);
    // The one being written counts against the bound too.
    const excess = this.queued - bound;
    if (excess > 0) this.drop(this.queue.splice(0, excess), 'the event queue is full');
    this.writer ??= this.write();
  }

  /**
   * Keeps lastSent to the keys that still suppress a repeat (sent since `before`), and at most
   * maxTracked. Every reload's event is new (its message names the generation), so without the
   * expiry the map would hold maxTracked keys under reload churn.
   */
  private forgetOld(before: number): void {
    const max = this.options.maxTracked ?? 2000;
    // Insertion order is send order (a resend is deleted and set again): the oldest come first.
    for (const [key, at] of this.lastSent) {
      if (at >= before && this.lastSent.size <= max) break;
      this.lastSent.delete(key);
    }
  }

  /** Keys that suppress a repeat now (tests). */
  get tracked(): number {
    return this.lastSent.size;
  }

  private async write(): Promise<void> {
    const { cluster, logger } = this.options;
    try {
      for (let event = this.queue.shift(); event !== undefined; event = this.queue.shift()) {
        try {
          await cluster.events.create(event, { namespace: event.metadata.namespace ?? 'default' });
          this.sent += 1;
        } catch (err) {
          logger.log('warn', 'could not record event', {
            reason: event.reason,
            error: errorMessage(err),
          });
        }
      }
    } finally {
      this.writer = undefined;
    }
  }

  private drop(events: readonly CoreEvent[], why: string): void {
    if (events.length === 0) return;
    this.dropped += events.length;
    this.droppedSinceLog += events.length;
    this.options.dropped?.inc({}, events.length);
    const now = this.options.clock.now();
    if (now - this.lastDropLog < DROP_LOG_INTERVAL_MS) return;
    this.lastDropLog = now;
    this.options.logger.log('warn', `${why}: dropping the oldest events (the apiserver is slow or unreachable)`, {
      dropped: this.droppedSinceLog,
      droppedTotal: this.dropped,
      lastReason: events.at(-1)?.reason,
    });
    this.droppedSinceLog = 0;
  }

  /**
   * Waits for the events recorded so far to be written, at most `timeoutMs` (shutdown, tests);
   * the ones still queued then are dropped. A write in flight is left to its request timeout.
   */
  async flush(timeoutMs = this.options.flushTimeoutMs ?? 5_000): Promise<void> {
    if (this.writer === undefined) return;
    const done = await within(this.options.clock, this.writer, timeoutMs);
    if (!done.ok) {
      this.lastDropLog = -Infinity;
      this.drop(this.queue.splice(0), `events not written within ${timeoutMs} ms of the flush`);
    }
  }
}

export const discardEvents: EventSink = { record: () => undefined };
