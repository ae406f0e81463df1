// Connects an agent to its StatePublisher: the state once the agent's first discovery pass ended
// (at most FIRST_WRITE_WAIT_MS after the start), then again after every reload, and when a pass or
// a cleanup changes what the state counts (unhealthy volumes, errors since apply, the config of
// the last pass). Waiting for the first pass makes the start's write one, with the pass in it, and
// keeps it out of the way of the first PVs.
import type { AdminTarget } from '../agent/reload-types.js';
import { appliedStateFromStatus, availableText } from './applied-state.js';
import { StatePublisher } from './publisher.js';
import { errorMessage } from '../unknown-values.js';
import type { StatePublisherOptions } from './publisher.js';

export interface RunningStatePublisher {
  readonly publisher: StatePublisher;
  stop(): Promise<void>;
}

/** The longest the first write waits for the agent's first discovery pass. */
export const FIRST_WRITE_WAIT_MS = 5_000;

export function publishAgentState(agent: AdminTarget, options: StatePublisherOptions): RunningStatePublisher {
  const publisher = new StatePublisher(options);
  const initial = agent.status();
  let counts = '';
  let available = initial.available === undefined ? '' : availableText(initial.available);
  let errors = initial.errorsSinceApply ?? 0;
  let passHash = initial.lastPass?.configHash;
  let started = false;
  const firstWrite = new AbortController();
  const publish = (): void => {
    const status = agent.status();
    errors = status.errorsSinceApply ?? 0;
    passHash = status.lastPass?.configHash;
    const state = appliedStateFromStatus(status);
    if (started) {
      publisher.update(state);
      return;
    }
    started = true;
    firstWrite.abort();
    publisher.start(state);
  };
  if (initial.lastPass !== undefined) publish();
  else
    options.clock
      .sleep(FIRST_WRITE_WAIT_MS, firstWrite.signal)
      .then(publish, () => undefined)
      // Publishing never stops the agent (as the publisher's own failures).
      .catch((err: unknown) => {
        options.logger.log('warn', 'could not publish the applied state', { error: errorMessage(err) });
      });
  // Not on every pass: status() walks every PV. Only when a count the state carries changed.
  const unsubscribe = agent.subscribe((event) => {
    if (event.type === 'reload') publish();
    if (event.type === 'pass') {
      const volumes = `${event.abnormal}/${event.quarantined}`;
      const offered = event.available === undefined ? available : availableText(event.available);
      if (
        volumes !== counts ||
        offered !== available ||
        (event.errorsSinceApply !== undefined && event.errorsSinceApply !== errors) ||
        // The first pass under a config: a staged rollout waits for it (lastPassHash).
        event.configHash !== passHash
      ) {
        counts = volumes;
        available = offered;
        publish();
      }
    }
    if (event.type === 'cleanup' && event.errorsSinceApply !== undefined && event.errorsSinceApply !== errors)
      publish();
  });
  return {
    publisher,
    stop: async () => {
      unsubscribe();
      firstWrite.abort();
      await publisher.stop();
    },
  };
}
