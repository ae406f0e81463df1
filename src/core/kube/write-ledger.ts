// Counts the writes a process makes to one resource, so that a list asked for ahead of its use can
// be checked to hold every one of them: no write was in flight when it was asked for, and none
// started since. A generation's guards against its own cache lagging (a PV it deleted and still
// sees) start empty; a list that holds all of the agent's writes needs none, one that may not does.
import type { ResourceClient } from './cluster.js';

export class WriteLedger {
  /** Writes (create, update, patch, delete) started since the start. */
  started = 0;
  /** Of those, answered or failed. */
  settled = 0;

  get inFlight(): number {
    return this.started - this.settled;
  }
}

function recorded<R>(ledger: WriteLedger, write: () => Promise<R>): Promise<R> {
  ledger.started += 1;
  let call: Promise<R>;
  try {
    call = write();
  } catch (err) {
    ledger.settled += 1;
    throw err;
  }
  return call.finally(() => {
    ledger.settled += 1;
  });
}

/** `client` with each of its writes recorded in `ledger`. */
export function recordWrites<T>(client: ResourceClient<T>, ledger: WriteLedger): ResourceClient<T> {
  return {
    get: (name, options) => client.get(name, options),
    list: (options) => client.list(options),
    listMetadata: (options) => client.listMetadata(options),
    watch: (options) => client.watch(options),
    create: (object, options) => recorded(ledger, () => client.create(object, options)),
    update: (object, options) => recorded(ledger, () => client.update(object, options)),
    updateStatus: (object, options) => recorded(ledger, () => client.updateStatus(object, options)),
    patch: (name, patch, options) => recorded(ledger, () => client.patch(name, patch, options)),
    delete: (name, options) => recorded(ledger, () => client.delete(name, options)),
  };
}
