// Kubernetes Events, as client-go's recorder writes them: cluster-scoped objects' events go to the
// `default` namespace; repeats of the same event are suppressed for a while instead of spamming
// the apiserver every pass (upstream re-emits on every 10 s loop).
import type { Clock } from '../clock.js';
import type { Logger } from '../log.js';
import type { Cluster } from './cluster.js';
import type { ObjectReference } from './objects.js';

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
}

export class EventRecorder implements EventSink {
  private readonly lastSent = new Map<string, number>();
  private pending = Promise.resolve();
  sent = 0;

  constructor(private readonly options: EventRecorderOptions) {}

  record(object: ObjectReference, type: 'Normal' | 'Warning', reason: string, message: string): void {
    const { clock, cluster, logger } = this.options;
    const key = `${object.kind ?? ''}/${object.namespace ?? ''}/${object.name ?? ''}/${object.uid ?? ''}/${reason}/${message}`;
    const now = clock.now();
    const last = this.lastSent.get(key);
    if (last !== undefined && now - last < (this.options.repeatAfterMs ?? 10 * 60_000)) return;
    this.lastSent.delete(key);
    this.lastSent.set(key, now);
    const max = this.options.maxTracked ?? 2000;
    while (this.lastSent.size > max) {
      const oldest = this.lastSent.keys().next().value;
      if (oldest === undefined) break;
      this.lastSent.delete(oldest);
    }
    const namespace = object.namespace ?? 'default';
    const time = new Date(now).toISOString();
    const name = `${object.name ?? 'unknown'}.${(BigInt(now) * 1_000_000n).toString(16)}${Math.floor(Math.random() * 0xffff).toString(16)}`;
    this.pending = this.pending.then(async () => {
      try {
        await cluster.events.create(
          {
            metadata: { name, namespace },
            involvedObject: object,
            reason,
            message,
            type,
            source: { component: this.options.component, host: this.options.host },
            firstTimestamp: time,
            lastTimestamp: time,
            count: 1,
          },
          { namespace },
        );
        this.sent += 1;
      } catch (err) {
        logger.log('warn', 'could not record event', {
          reason,
          error: err instanceof Error ? err.message : String(err),
        });
      }
    });
  }

  /** Waits for events already recorded to be written (tests, shutdown). */
  async flush(): Promise<void> {
    await this.pending;
  }
}

export const discardEvents: EventSink = { record: () => undefined };
