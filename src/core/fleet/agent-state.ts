// Connects an agent to its StatePublisher: the state at start, then again after every reload.
import type { AdminTarget } from '../agent/reload-types.js';
import { appliedStateFromStatus } from './applied-state.js';
import { StatePublisher } from './publisher.js';
import type { StatePublisherOptions } from './publisher.js';

export interface RunningStatePublisher {
  readonly publisher: StatePublisher;
  stop(): Promise<void>;
}

export function publishAgentState(agent: AdminTarget, options: StatePublisherOptions): RunningStatePublisher {
  const publisher = new StatePublisher(options);
  publisher.start(appliedStateFromStatus(agent.status()));
  let counts = '';
  const unsubscribe = agent.subscribe((event) => {
    if (event.type === 'reload') publisher.update(appliedStateFromStatus(agent.status()));
    // A pass that changes the volume counts changes the state (not every pass: status() walks every PV).
    if (event.type === 'pass' && `${event.abnormal}/${event.quarantined}` !== counts) {
      counts = `${event.abnormal}/${event.quarantined}`;
      publisher.update(appliedStateFromStatus(agent.status()));
    }
  });
  return {
    publisher,
    stop: async () => {
      unsubscribe();
      await publisher.stop();
    },
  };
}
