// Connects an agent to its StatePublisher: the state at start, then again after every reload, and
// when a pass or a cleanup changes what the state counts (unhealthy volumes, errors since apply,
// the config of the last pass).
import type { AdminTarget } from '../agent/reload-types.js';
import { appliedStateFromStatus, availableText } from './applied-state.js';
import { StatePublisher } from './publisher.js';
import type { StatePublisherOptions } from './publisher.js';

export interface RunningStatePublisher {
  readonly publisher: StatePublisher;
  stop(): Promise<void>;
}

export function publishAgentState(agent: AdminTarget, options: StatePublisherOptions): RunningStatePublisher {
  const publisher = new StatePublisher(options);
  const initial = agent.status();
  publisher.start(appliedStateFromStatus(initial));
  let counts = '';
  let available = initial.available === undefined ? '' : availableText(initial.available);
  let errors = initial.errorsSinceApply ?? 0;
  let passHash = initial.lastPass?.configHash;
  const publish = (): void => {
    const status = agent.status();
    errors = status.errorsSinceApply ?? 0;
    passHash = status.lastPass?.configHash;
    publisher.update(appliedStateFromStatus(status));
  };
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
      await publisher.stop();
    },
  };
}
