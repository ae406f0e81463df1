// A Lease client over a real one (the in-memory apiserver) with the interleavings a leader stopping
// meets on a real network: a read still on its way, a write that reached the apiserver while its
// answer is still on the way, and another write landing between the release's read and its write.
import type { LeaseCluster, ResourceClient } from '../../src/core/kube/cluster.js';
import type { Lease } from '../../src/core/kube/objects.js';
import { eventually } from './eventually.js';

/** A request or a reply held back until deliver(). */
export interface Held {
  /** Resolves once the request was sent (a read) or written (an update), and held. */
  readonly reached: Promise<void>;
  readonly deliver: () => void;
}

export interface LeaseFaults {
  readonly client: ResourceClient<Lease>;
  /** The next read waits, before it reaches the apiserver, for deliver(). */
  holdNextRead(): Held;
  /**
   * The next update is written, then its answer waits for deliver() (with 'or a later request':
   * also until this client sends another request, which the held answer then precedes).
   */
  holdNextReply(until?: 'deliver' | 'deliver or a later request'): Held;
  /** Runs `write` right before the next release (an update clearing the holder) reaches the apiserver. */
  beforeNextRelease(write: () => Promise<void>): void;
  /** Updates that cleared the holder, as sent (a 409 included). */
  readonly releaseWrites: number;
  /** Resolves when no request of this client is in flight, nor sent in the turn after. */
  idle(): Promise<void>;
}

interface Gate {
  readonly reached: () => void;
  readonly delivered: Promise<void>;
}

function gate(): { gate: Gate; held: Held } {
  let reached = (): void => undefined;
  let deliver = (): void => undefined;
  const reachedP = new Promise<void>((resolve) => (reached = resolve));
  const delivered = new Promise<void>((resolve) => (deliver = resolve));
  return { gate: { reached, delivered }, held: { reached: reachedP, deliver } };
}

export function leaseFaults(inner: ResourceClient<Lease>): LeaseFaults {
  const gates: { read?: Gate | undefined; reply?: Gate | undefined } = {};
  let beforeRelease: (() => Promise<void>) | undefined;
  let releaseWrites = 0;
  let inFlight = 0;
  const idle: (() => void)[] = [];
  let overtaken: (() => void) | undefined;
  const counted = async <T>(call: () => Promise<T>): Promise<T> => {
    overtaken?.();
    overtaken = undefined;
    inFlight += 1;
    try {
      return await call();
    } finally {
      inFlight -= 1;
      if (inFlight === 0) for (const wake of idle.splice(0)) wake();
    }
  };
  const pass = async (which: 'read' | 'reply'): Promise<void> => {
    const held = gates[which];
    gates[which] = undefined;
    if (held === undefined) return;
    held.reached();
    await held.delivered;
  };
  const update = async (lease: Lease, options?: { namespace?: string }): Promise<Lease> => {
    if (lease.spec?.holderIdentity === '') {
      releaseWrites += 1;
      const write = beforeRelease;
      beforeRelease = undefined;
      await write?.();
    }
    const written = await inner.update(lease, options);
    await pass('reply');
    return written;
  };
  const get = async (name: string, options?: { namespace?: string }): Promise<Lease> => {
    await pass('read');
    return inner.get(name, options);
  };
  const hold = (which: 'read' | 'reply', untilLater = false): Held => {
    const { gate: g, held } = gate();
    gates[which] = g;
    if (untilLater) void held.reached.then(() => (overtaken = held.deliver));
    return held;
  };
  return {
    client: {
      ...inner,
      get: (name, options) => counted(() => get(name, options)),
      update: (lease, options) => counted(() => update(lease, options)),
      create: (lease, options) => counted(() => inner.create(lease, options)),
    },
    holdNextRead: () => hold('read'),
    holdNextReply: (until = 'deliver') => hold('reply', until !== 'deliver'),
    beforeNextRelease: (write) => {
      beforeRelease = write;
    },
    get releaseWrites(): number {
      return releaseWrites;
    },
    idle: async () => {
      // Quiet across a turn: an attempt's write follows its read once the read is answered.
      for (;;) {
        if (inFlight > 0) await new Promise<void>((resolve) => idle.push(resolve));
        await new Promise((resolve) => setImmediate(resolve));
        if (inFlight === 0) return;
      }
    },
  };
}

/** `cluster` with its Lease client replaced (the other clients, and the methods, are the cluster's). */
export function withLeases<C extends LeaseCluster>(cluster: C, leases: ResourceClient<Lease>): C {
  const view = Object.create(cluster) as C;
  Object.defineProperty(view, 'leases', { value: leases });
  return view;
}

/**
 * A leader-elected service stopped while its renew's answer is on its way (the write moved the
 * resourceVersion already; the answer comes 300 ms later, or before the next request): what the
 * Lease's holder is once stop() resolved. Both controllers' services stop through
 * LeaderElector.release; each runs this.
 */
export async function holderAfterStopWithRenewInFlight(
  cluster: LeaseCluster,
  faults: LeaseFaults,
  lease: string,
  identity: string,
  service: { stop(): Promise<void> },
): Promise<string | undefined> {
  let stopping: Promise<void> | undefined;
  try {
    await eventually(
      async () =>
        (await cluster.leases.get(lease).catch(() => undefined))?.spec?.holderIdentity === identity ? true : undefined,
      `${identity} leads`,
    );
    const renew = faults.holdNextReply('deliver or a later request');
    await renew.reached;
    stopping = service.stop();
    setTimeout(() => {
      renew.deliver();
    }, 300);
  } finally {
    await (stopping ?? service.stop());
  }
  return (await cluster.leases.get(lease)).spec?.holderIdentity;
}
