// Entry of the interactive dashboard, loaded with `await import()` by `provisioner dashboard` only:
// the one place ink and React are loaded. Renders full screen (alternate screen, like top), owns
// q/Ctrl-C (exitOnCtrlC off) and SIGINT/SIGTERM/SIGHUP, leaves console alone (patchConsole off).
import { setTimeout as delay } from 'node:timers/promises';
import { render } from 'ink';
import type { AdminClient } from '../../core/agent/admin-client.js';
import type { AgentStatusJson } from '../../core/agent/reload-types.js';
import { systemClock } from '../../core/clock.js';
import { agentFeed } from './feed.js';
import type { DashboardFeed } from './feed.js';
import { initialState } from './model.js';
import type { RolloutStatus } from '../../core/staged-rollout/status.js';
import { DashboardApp } from './app.js';
import { agentServices } from './services.js';

export interface RunDashboardOptions {
  /** Client for status, config and the event stream. */
  readonly client: AdminClient;
  /** Client for reloads, whose answer may take as long as a drain and a cache sync. */
  readonly reloadClient: AdminClient;
  /** The status fetched before the view opened: the first frame shows it at once. */
  readonly status: AgentStatusJson;
  readonly color: boolean;
  readonly stdin: NodeJS.ReadStream;
  readonly stdout: NodeJS.WriteStream;
  readonly stderr: NodeJS.WriteStream;
  /** The fleet pane's data (`f`): the rollout service's result, read when asked. */
  readonly fleet: () => Promise<RolloutStatus>;
}

const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
/** Longest wait for the feed to stop after the view closed. */
const STOP_GRACE_MS = 1000;

/** Runs until the user quits (or a signal arrives); resolves once the terminal is restored and the feed stopped. */
export async function runDashboard(options: RunDashboardOptions): Promise<void> {
  const now = Date.now();
  const size = { columns: options.stdout.columns || 80, rows: options.stdout.rows || 24 };
  const keys = options.stdin.isTTY && typeof options.stdin.setRawMode === 'function';
  const feed = agentFeed(options.client, { clock: systemClock });
  let stopping: Promise<void> | undefined;
  // Tracks the feed's stop so nothing (socket, timer) outlives the view.
  const tracked: DashboardFeed = {
    start(listener) {
      const stop = feed.start(listener);
      return () => (stopping ??= stop());
    },
  };
  const instance = render(
    <DashboardApp
      initial={initialState({ now, size, status: options.status, keys })}
      feed={tracked}
      services={agentServices(options.client, options.reloadClient, options.fleet)}
      color={options.color}
    />,
    {
      stdin: options.stdin,
      stdout: options.stdout,
      stderr: options.stderr,
      exitOnCtrlC: false,
      patchConsole: false,
      alternateScreen: true,
      // The command decided: stdout is a terminal. (Ink alone would also turn this off under CI=true.)
      interactive: true,
    },
  );
  const onSignal = (): void => {
    instance.unmount();
  };
  for (const signal of SIGNALS) process.on(signal, onSignal);
  try {
    await instance.waitUntilExit();
  } finally {
    for (const signal of SIGNALS) process.off(signal, onSignal);
    instance.cleanup();
    // The event stream closes at once; a status refresh in flight could take up to --timeout.
    await Promise.race([stopping, delay(STOP_GRACE_MS, undefined, { ref: false })]);
  }
}
