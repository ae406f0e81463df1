// How many error Events (discovery or cleanup failures) the agent recorded since it applied the
// config serving now: published on its status Lease (errors-since-apply), where a staged rollout's
// controller halts a wave whose node reports any after applying the candidate. Counted where the
// agent records them (an EventSink in front of the recorder), so every failure the code reports
// counts, including repeats the recorder does not write again.
import type { EventSink } from '../kube/events.js';

/**
 * The Warning Event reasons that are errors: a class whose discovery failed, a volume that could
 * not be cleaned or its PV deleted. Not VolumeDiscoverySkipped (one entry skipped, by design).
 */
export const ERROR_EVENT_REASONS: ReadonlySet<string> = new Set(['DiscoveryFailed', 'VolumeFailedDelete']);

/** The count stops here (the Lease annotation stays short; past it, "many" is all that matters). */
export const MAX_ERRORS_SINCE_APPLY = 999_999;

/** Failures remembered per config (each distinct reason and message once), to tell a new one from an old one. */
const MAX_REMEMBERED = 1000;

/**
 * Counts the error Events that are new under the config serving now: one the previous config's
 * generations recorded too (the same reason and message: a class whose StorageClass was missing
 * before the change as after) is not the new config's doing, and would halt every staged rollout
 * of a node with a standing problem.
 */
export class ErrorsSinceApply {
  private hash: string | undefined;
  private value = 0;
  /** What the previous config recorded, and what this one records. */
  private before = new Set<string>();
  private now = new Set<string>();

  get count(): number {
    return this.value;
  }

  /** A generation starts on the config `hash`: a different config than counted so far starts from 0. */
  applying(hash: string): void {
    if (hash === this.hash) return;
    if (this.hash !== undefined) this.before = this.now;
    this.now = new Set();
    this.hash = hash;
    this.value = 0;
  }

  /** `inner`, counting the error Events recorded through it. */
  counting(inner: () => EventSink): EventSink {
    return {
      record: (object, type, reason, message) => {
        if (type === 'Warning' && ERROR_EVENT_REASONS.has(reason)) {
          const key = `${reason}\0${object.kind}/${object.name}\0${message}`;
          if (this.now.size < MAX_REMEMBERED) this.now.add(key);
          if (!this.before.has(key)) this.value = Math.min(MAX_ERRORS_SINCE_APPLY, this.value + 1);
        }
        inner().record(object, type, reason, message);
      },
    };
  }
}
