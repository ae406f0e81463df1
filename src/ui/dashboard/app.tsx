// The dashboard's ink root: holds the view model, feeds it the agent's messages, keys, resizes and
// a clock tick, and runs the effects the reducer asks for (reload, diff, quit).
import { useApp, useInput, useStdin, useWindowSize } from 'ink';
import type { Key } from 'ink';
import { useCallback, useEffect, useRef, useState } from 'react';
import type { ReactNode } from 'react';
import type { ReloadResult } from '../../core/agent/reload-types.js';
import type { DashboardFeed, FeedMessage } from './feed.js';
import { update } from './model.js';
import { errorMessage } from '../../core/unknown-values.js';
import type { Action, DashboardState, Effect, KeyPress, Size } from './model.js';
import { DashboardView } from './view.js';

/** What `d` shows: a diff (ok) or why there is none (the on-disk config is invalid or unreadable). */
export interface DiffContent {
  readonly ok: boolean;
  readonly title: string;
  readonly lines: readonly string[];
}

/** The actions keys trigger; AdminClient-backed in the command, fakes in tests. */
export interface DashboardServices {
  reload(force: boolean): Promise<ReloadResult>;
  diff(): Promise<DiffContent>;
  /** What `f` shows: the rollout status of every node (same shape as the diff). */
  fleet(): Promise<DiffContent>;
}

export interface DashboardAppProps {
  readonly initial: DashboardState;
  readonly feed: DashboardFeed;
  readonly services: DashboardServices;
  readonly color: boolean;
  readonly now?: () => number;
  /** A fixed size (tests); default: the terminal's, following resizes. */
  readonly size?: Size;
  /** Period of the clock tick that ages uptimes and elapsed times; default 1 s. */
  readonly tickMs?: number;
}

export function toAction(message: FeedMessage): Action {
  switch (message.type) {
    case 'connected':
      return { type: 'connected', at: message.at };
    case 'event':
      return { type: 'agent-event', event: message.event, at: message.at };
    case 'disconnected':
      return {
        type: 'disconnected',
        at: message.at,
        reason: message.reason,
        attempt: message.attempt,
        retryAt: message.retryAt,
      };
  }
}

export function toKeyPress(key: Key): KeyPress {
  return {
    upArrow: key.upArrow,
    downArrow: key.downArrow,
    leftArrow: key.leftArrow,
    rightArrow: key.rightArrow,
    pageUp: key.pageUp,
    pageDown: key.pageDown,
    home: key.home,
    end: key.end,
    return: key.return,
    escape: key.escape,
    tab: key.tab,
    backspace: key.backspace,
    delete: key.delete,
    ctrl: key.ctrl,
    meta: key.meta,
    shift: key.shift,
  };
}

/** What an effect needs of the running app. */
interface EffectContext {
  readonly props: DashboardAppProps;
  readonly exit: () => void;
  readonly now: () => number;
  readonly dispatch: (action: Action) => void;
  /** Marks the app gone: actions dispatched after it are dropped. */
  readonly unmount: () => void;
}

/** Runs one effect of the reducer: a reload, a panel to load, or quitting. */
function performEffect(effect: Effect, context: EffectContext): void {
  const { props, dispatch, now } = context;
  switch (effect.type) {
    case 'reload':
      props.services.reload(effect.force).then(
        (result) => {
          dispatch({ type: 'reload-finished', result, at: now() });
        },
        (err: unknown) => {
          dispatch({ type: 'reload-failed', message: errorMessage(err), at: now() });
        },
      );
      break;
    case 'diff':
    case 'fleet':
      loadPanel(effect.type, context);
      break;
    case 'quit':
      context.unmount();
      context.exit();
      break;
  }
}

/** The panel's content, or why it could not be loaded (shown in the panel too). */
function loadPanel(kind: 'diff' | 'fleet', { props, dispatch }: EffectContext): void {
  (kind === 'diff' ? props.services.diff() : props.services.fleet()).then(
    (d) => {
      dispatch({ type: d.ok ? `${kind}-loaded` : `${kind}-failed`, title: d.title, lines: d.lines });
    },
    (err: unknown) => {
      const title = kind === 'diff' ? 'Diff: failed' : 'Fleet: failed';
      dispatch({ type: `${kind}-failed`, title, lines: [errorMessage(err)] });
    },
  );
}

export function DashboardApp(props: DashboardAppProps): ReactNode {
  const { exit } = useApp();
  const { isRawModeSupported } = useStdin();
  const terminal = useWindowSize();
  const size = props.size ?? terminal;
  const now = props.now ?? Date.now;
  const [state, setState] = useState(props.initial);
  // The reducer runs outside React's updater so that effects run exactly once per action.
  const current = useRef(props.initial);
  const mounted = useRef(true);
  const latest = useRef({ props, exit, now });
  latest.current = { props, exit, now };

  const dispatch = useCallback((action: Action): void => {
    if (!mounted.current) return;
    const { state: next, effects } = update(current.current, action);
    if (next !== current.current) {
      current.current = next;
      setState(next);
    }
    for (const effect of effects) runEffect(effect);
  }, []);

  const runEffect = (effect: Effect): void => {
    performEffect(effect, {
      ...latest.current,
      dispatch,
      unmount: () => {
        mounted.current = false;
      },
    });
  };

  useEffect(() => {
    dispatch({ type: 'resize', size: { columns: size.columns, rows: size.rows } });
  }, [dispatch, size.columns, size.rows]);

  useEffect(() => {
    const stop = props.feed.start((message) => {
      dispatch(toAction(message));
    });
    return () => {
      void stop();
    };
  }, [dispatch, props.feed]);

  const tickMs = props.tickMs ?? 1000;
  useEffect(() => {
    const timer = setInterval(() => {
      dispatch({ type: 'tick', now: latest.current.now() });
    }, tickMs);
    return () => {
      clearInterval(timer);
    };
  }, [dispatch, tickMs]);

  useEffect(
    () => () => {
      mounted.current = false;
    },
    [],
  );

  useInput(
    (input, key) => {
      dispatch({ type: 'key', input, key: toKeyPress(key) });
    },
    { isActive: isRawModeSupported },
  );

  return <DashboardView state={state} color={props.color} />;
}
