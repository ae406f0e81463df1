// The dashboard's reducer and selectors: pure, so every path is tested here without React.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { computeLayout, MAX_DEVICE_ROWS, MIN_COLUMNS, MIN_ROWS } from '../../../src/ui/dashboard/layout.js';
import {
  HELP_LINES,
  agentNow,
  cleanupsInFlight,
  configSync,
  initialState,
  layoutOf,
  MAX_EVENTS,
  overlayInnerWidth,
  overlayWidth,
  rejectedErrors,
  SIDE_STEP,
  update,
  visibleEvents,
  volumeRows,
} from '../../../src/ui/dashboard/model.js';
import type { Action, DashboardState, Effect, KeyPress } from '../../../src/ui/dashboard/model.js';
import {
  APPLIED,
  cleanup,
  HASH_A,
  HASH_B,
  HASH_C,
  logEvent,
  REJECTED,
  reloadResult,
  status,
  T0,
  withDevices,
} from './fixtures.js';

const SIZE = { columns: 100, rows: 30 };

function connected(overrides: Parameters<typeof status>[0] = {}): DashboardState {
  return run(initialState({ now: T0, size: SIZE, status: status(overrides) }), { type: 'connected', at: T0 }).state;
}

function run(state: DashboardState, ...actions: Action[]): { state: DashboardState; effects: Effect[] } {
  let current = state;
  const effects: Effect[] = [];
  for (const action of actions) {
    const next = update(current, action);
    current = next.state;
    effects.push(...next.effects);
  }
  return { state: current, effects };
}

const key = (input: string, k: KeyPress = {}): Action => ({ type: 'key', input, key: k });
const press = (state: DashboardState, ...keys: (string | KeyPress)[]): { state: DashboardState; effects: Effect[] } =>
  run(state, ...keys.map((k) => (typeof k === 'string' ? key(k) : key('', k))));

function rowNames(state: DashboardState): string[] {
  return volumeRows(state).map((r) =>
    r.kind === 'class' ? r.name : r.kind === 'pv' ? `  ${r.name}` : `  ~${r.entry}`,
  );
}

function many(n: number, from = 0): Action[] {
  return Array.from({ length: n }, (_, i) => ({
    type: 'agent-event' as const,
    event: logEvent(`event ${from + i}`, 'info', T0 + from + i),
    at: T0,
  }));
}

describe('dashboard model: status', () => {
  it('starts from a status fetched before the view opened', () => {
    const state = initialState({ now: T0 + 500, size: SIZE, status: status() });
    assert.equal(state.connection.state, 'connecting');
    assert.equal(state.status?.node, 'worker-7');
    assert.deepEqual(state.cleanups, [cleanup()]);
    assert.equal(agentNow(state), T0, 'the status counts as just received');
    assert.deepEqual(rowNames(state), [
      'fast-disks',
      '  local-pv-11111111',
      '  local-pv-22222222',
      '  ~lost+found',
      'slow-disks',
      '  local-pv-33333333',
    ]);
  });

  it('starts empty without a status', () => {
    const state = initialState({ now: T0, size: SIZE });
    assert.equal(state.status, undefined);
    assert.deepEqual(volumeRows(state), []);
    assert.equal(configSync(state.status), 'unknown');
  });

  it('replaces status and cleanups on a status event and maps local time onto the agent clock', () => {
    const next = status({ generation: 9, now: T0 + 10_000, cleanups: [] });
    const { state } = run(connected(), {
      type: 'agent-event',
      event: { type: 'status', at: T0, status: next },
      at: T0 + 200,
    });
    assert.equal(state.status?.generation, 9);
    assert.deepEqual(state.cleanups, []);
    const later = run(state, { type: 'tick', now: T0 + 1200 }).state;
    assert.equal(agentNow(later), T0 + 11_000);
  });

  it('never lists a status event among the events', () => {
    const { state } = run(connected(), {
      type: 'agent-event',
      event: { type: 'status', at: T0, status: status() },
      at: T0,
    });
    assert.deepEqual(
      state.events.map((e) => e.kind),
      ['connection'],
    );
  });
});

describe('dashboard model: config sync', () => {
  const cases: [string, Parameters<typeof status>[0], string][] = [
    ['same hashes', {}, 'in-sync'],
    [
      'a new config on disk',
      { config: { source: 's', appliedHash: HASH_A, onDiskHash: HASH_B, subPath: false } },
      'propagating',
    ],
    ['a reload pending', { reloadPending: true }, 'propagating'],
    [
      'the on-disk config rejected',
      { config: { source: 's', appliedHash: HASH_A, onDiskHash: HASH_C, subPath: false }, rejected: REJECTED },
      'rejected',
    ],
    [
      'an unreadable source after a failed read',
      {
        config: { source: 's', appliedHash: HASH_A, subPath: false },
        rejected: reloadResult('failed', { error: 'EACCES' }),
      },
      'rejected',
    ],
    [
      'a newer config on disk than the rejected one',
      { config: { source: 's', appliedHash: HASH_A, onDiskHash: HASH_B, subPath: false }, rejected: REJECTED },
      'propagating',
    ],
    ['no on-disk hash yet', { config: { source: 's', appliedHash: HASH_A, subPath: false } }, 'unknown'],
    [
      'the on-disk config refused by the reload guard',
      {
        config: { source: 's', appliedHash: HASH_A, onDiskHash: HASH_C, subPath: false },
        rejected: reloadResult('refused', { candidateHash: HASH_C, needsAllow: ['orphans-pvs'] }),
      },
      'refused',
    ],
    [
      'a newer config on disk than the refused one',
      {
        config: { source: 's', appliedHash: HASH_A, onDiskHash: HASH_B, subPath: false },
        rejected: reloadResult('refused', { candidateHash: HASH_C, needsAllow: ['orphans-pvs'] }),
      },
      'propagating',
    ],
  ];
  for (const [name, overrides, expected] of cases) {
    it(`${expected}: ${name}`, () => {
      assert.equal(configSync(status(overrides)), expected);
    });
  }

  it('a refused config shows why (and what to allow) under the config line', () => {
    const error = 'a live reload that would orphan existing PVs (storageClassMap.slow) was refused; …';
    const state = connected({
      config: { source: 's', appliedHash: HASH_A, onDiskHash: HASH_C, subPath: false },
      rejected: reloadResult('refused', { candidateHash: HASH_C, needsAllow: ['orphans-pvs'], error }),
    });
    assert.deepEqual(rejectedErrors(state), [error]);
  });

  it('lists the rejected config errors with file and line, only while rejected', () => {
    const rejected = connected({
      config: { source: 's', appliedHash: HASH_A, onDiskHash: HASH_C, subPath: false },
      rejected: REJECTED,
    });
    assert.deepEqual(rejectedErrors(rejected), [
      '/etc/provisioner/config/storageClassMap:4: storageClassMap.fast-disks.volumeMode: unsupported volume mode "Blok"',
      'useJobForCleaning: not a boolean',
    ]);
    const superseded = connected({
      config: { source: 's', appliedHash: HASH_A, onDiskHash: HASH_B, subPath: false },
      rejected: REJECTED,
    });
    assert.deepEqual(rejectedErrors(superseded), []);
  });

  it('falls back to the error message of a failed read', () => {
    const state = connected({
      config: { source: 's', appliedHash: HASH_A, subPath: false },
      rejected: reloadResult('failed', { error: 'cannot read /etc/provisioner/config: EACCES' }),
    });
    assert.deepEqual(rejectedErrors(state), ['cannot read /etc/provisioner/config: EACCES']);
  });
});

describe('dashboard model: agent events', () => {
  it('an applied reload moves generation and hashes, clears a rejection and is listed', () => {
    const start = connected({
      config: { source: 's', appliedHash: HASH_A, onDiskHash: HASH_C, subPath: false },
      rejected: REJECTED,
    });
    const { state } = run(start, { type: 'agent-event', event: { type: 'reload', at: T0, result: APPLIED }, at: T0 });
    assert.equal(state.status?.generation, 8);
    assert.equal(state.status.config.appliedHash, HASH_B);
    assert.equal(state.status.config.onDiskHash, HASH_B);
    assert.equal(state.status.rejected, undefined);
    assert.equal(state.status.lastReload, APPLIED);
    assert.equal(configSync(state.status), 'in-sync');
    assert.deepEqual(state.events[0], {
      id: 2,
      at: T0,
      kind: 'reload',
      severity: 'info',
      text: 'applied (fs): generation 8, 1 change',
    });
  });

  it('a rejected reload marks the config rejected and is listed as a warning', () => {
    const { state } = run(connected(), {
      type: 'agent-event',
      event: { type: 'reload', at: T0, result: REJECTED },
      at: T0,
    });
    assert.equal(state.status?.rejected, REJECTED);
    assert.equal(state.status.config.onDiskHash, HASH_C);
    assert.equal(configSync(state.status), 'rejected');
    assert.equal(rejectedErrors(state).length, 2);
    assert.deepEqual(
      [state.events[0]?.severity, state.events[0]?.text],
      ['warn', 'rejected (fs): 2 problems; generation 7 keeps serving'],
    );
  });

  it('rolled-back and failed reloads are errors with their reason', () => {
    const { state } = run(
      connected(),
      {
        type: 'agent-event',
        event: {
          type: 'reload',
          at: T0,
          result: reloadResult('rolled-back', { error: 'cache sync timed out', forced: true }),
        },
        at: T0,
      },
      { type: 'agent-event', event: { type: 'reload', at: T0, result: reloadResult('noop') }, at: T0 },
    );
    assert.deepEqual(
      state.events.slice(0, 2).map((e) => [e.severity, e.text]),
      [
        ['info', 'noop (admin): generation 7 unchanged'],
        ['error', 'rolled-back (admin, forced): cache sync timed out'],
      ],
    );
  });

  it('merges cleanup events by PV and hides finished ones', () => {
    const { state } = run(
      connected(),
      {
        type: 'agent-event',
        event: { type: 'cleanup', at: T0, cleanup: cleanup({ pv: 'local-pv-5', method: 'job', state: 'queued' }) },
        at: T0,
      },
      { type: 'agent-event', event: { type: 'cleanup', at: T0, cleanup: cleanup({ state: 'succeeded' }) }, at: T0 },
      {
        type: 'agent-event',
        event: {
          type: 'cleanup',
          at: T0,
          cleanup: cleanup({ pv: 'local-pv-6', state: 'failed', lastError: 'exit 1', retryAt: T0 + 5000 }),
        },
        at: T0,
      },
    );
    assert.deepEqual(
      cleanupsInFlight(state).map((c) => `${c.pv} ${c.method} ${c.state}`),
      ['local-pv-5 job queued', 'local-pv-6 process failed'],
    );
    assert.deepEqual(
      [state.events[0]?.severity, state.events[0]?.text],
      ['error', 'local-pv-6 failed (process, attempt 1): exit 1'],
    );
  });

  it('lists passes that created or deleted PVs, not quiet ones', () => {
    const pass = (created: string[], deleted: string[]): Action => ({
      type: 'agent-event',
      event: { type: 'pass', at: T0, generation: 7, created, deleted, skipped: 0, abnormal: 0, quarantined: 0 },
      at: T0,
    });
    const { state } = run(
      connected(),
      pass([], []),
      pass(['local-pv-9'], []),
      pass([], []),
      pass([], ['local-pv-1', 'local-pv-2']),
    );
    assert.deepEqual(
      state.events.filter((e) => e.kind === 'pass').map((e) => e.text),
      ['generation 7: deleted local-pv-1, local-pv-2', 'generation 7: created local-pv-9'],
    );
  });

  it('lists log records with their fields and level', () => {
    const { state } = run(connected(), {
      type: 'agent-event',
      event: { type: 'log', at: T0, level: 'warn', message: 'class problem', fields: { class: 'fast', count: 2 } },
      at: T0,
    });
    assert.deepEqual([state.events[0]?.severity, state.events[0]?.text], ['warn', 'class problem class=fast count=2']);
    const error = run(state, { type: 'agent-event', event: logEvent('boom', 'error'), at: T0 }).state;
    assert.equal(error.events[0]?.severity, 'error');
  });

  it(`keeps the newest ${MAX_EVENTS} events, newest first`, () => {
    const { state } = run(connected(), ...many(MAX_EVENTS + 20));
    assert.equal(state.events.length, MAX_EVENTS);
    assert.equal(state.events[0]?.text, `event ${MAX_EVENTS + 19}`);
    assert.equal(state.events.at(-1)?.text, 'event 20');
    const ids = state.events.map((e) => e.id);
    assert.equal(new Set(ids).size, ids.length, 'ids are unique');
  });

  it('keeps the same events in view when one arrives while scrolled down', () => {
    const s = run(connected(), ...many(60)).state;
    const scrolled = press(s, '\t', { downArrow: true }, { downArrow: true }).state;
    assert.equal(scrolled.scroll.events, 2);
    const first = visibleEvents(scrolled)[scrolled.scroll.events];
    const after = run(scrolled, ...many(3, 100)).state;
    assert.equal(after.scroll.events, 5);
    assert.equal(visibleEvents(after)[after.scroll.events], first);
    const top = press(s, '\t').state;
    assert.equal(run(top, ...many(1, 200)).state.scroll.events, 0, 'at the top it follows the newest');
  });
});

describe('dashboard model: connection', () => {
  it('goes connecting -> connected -> reconnecting -> connected, with one line per change', () => {
    let s = initialState({ now: T0, size: SIZE, status: status() });
    s = run(s, { type: 'connected', at: T0 }).state;
    assert.deepEqual(s.connection, { state: 'connected', since: T0 });
    s = run(s, {
      type: 'disconnected',
      at: T0 + 1000,
      reason: 'the socket does not exist',
      attempt: 1,
      retryAt: T0 + 1250,
    }).state;
    s = run(s, {
      type: 'disconnected',
      at: T0 + 1300,
      reason: 'connection refused',
      attempt: 2,
      retryAt: T0 + 1800,
    }).state;
    assert.deepEqual(s.connection, {
      state: 'reconnecting',
      since: T0 + 1000,
      attempt: 2,
      retryAt: T0 + 1800,
      reason: 'connection refused',
    });
    s = run(s, { type: 'connected', at: T0 + 2000 }).state;
    assert.deepEqual(
      s.events.map((e) => e.text),
      ['reconnected to the agent', 'connection lost: the socket does not exist', 'connected to the agent'],
    );
    assert.equal(s.events[1]?.severity, 'warn');
    assert.equal(s.status?.node, 'worker-7', 'the last status stays shown while reconnecting');
  });
});

describe('dashboard model: keys', () => {
  it('q and Ctrl-C quit, once', () => {
    assert.deepEqual(press(connected(), 'q').effects, [{ type: 'quit' }]);
    const ctrlC = run(connected(), key('c', { ctrl: true }));
    assert.deepEqual(ctrlC.effects, [{ type: 'quit' }]);
    assert.equal(ctrlC.state.quitting, true);
    assert.deepEqual(press(ctrlC.state, 'r', 'q').effects, []);
  });

  it('? opens and closes the help; Esc closes it', () => {
    const open = press(connected(), '?').state;
    assert.deepEqual(open.overlay, { kind: 'help' });
    assert.equal(press(open, '?').state.overlay, undefined);
    assert.equal(press(open, { escape: true }).state.overlay, undefined);
  });

  it('d asks for the diff, shows it when loaded, and closes with d or Esc', () => {
    const { state, effects } = press(connected(), 'd');
    assert.deepEqual(effects, [{ type: 'diff' }]);
    assert.equal(state.overlay?.kind === 'diff' && state.overlay.phase, 'loading');
    const loaded = run(state, { type: 'diff-loaded', title: 'Diff', lines: ['+  fsType: ext4'] }).state;
    assert.deepEqual(loaded.overlay, { kind: 'diff', phase: 'ready', title: 'Diff', lines: ['+  fsType: ext4'] });
    assert.equal(press(loaded, 'd').state.overlay, undefined);
    assert.equal(press(loaded, { escape: true }).state.overlay, undefined);
    const failed = run(state, { type: 'diff-failed', title: 'invalid', lines: ['error: x'] }).state;
    assert.equal(failed.overlay?.kind === 'diff' && failed.overlay.phase, 'error');
  });

  it('drops a diff that arrives after its panel was closed', () => {
    const closed = press(connected(), 'd', { escape: true }).state;
    const after = run(closed, { type: 'diff-loaded', title: 'Diff', lines: ['x'] }).state;
    assert.equal(after.overlay, undefined);
    const help = press(connected(), 'd', '?').state;
    assert.deepEqual(run(help, { type: 'diff-loaded', title: 'Diff', lines: ['x'] }).state.overlay, { kind: 'help' });
  });

  it('d without a status says so', () => {
    const s = run(initialState({ now: T0, size: SIZE }), { type: 'connected', at: T0 }).state;
    const { state, effects } = press(s, 'd');
    assert.deepEqual(effects, []);
    assert.equal(state.notice?.text, 'no status from the agent yet');
  });

  it('r reloads once at a time and records the outcome; R forces', () => {
    const started = press(connected(), 'r');
    assert.deepEqual(started.effects, [{ type: 'reload', force: false }]);
    assert.deepEqual(started.state.reload, { phase: 'running', force: false, since: T0 });
    const again = press(started.state, 'r');
    assert.deepEqual(again.effects, []);
    assert.equal(again.state.notice?.text, 'a reload is already running');
    const done = run(again.state, { type: 'reload-finished', result: APPLIED, at: T0 + 20 }).state;
    assert.deepEqual(done.reload, { phase: 'done', result: APPLIED, at: T0 + 20 });
    const forced = press(done, 'R');
    assert.deepEqual(forced.effects, [{ type: 'reload', force: true }]);
    assert.equal(forced.state.notice, undefined, 'a new action clears the notice');
    const failed = run(forced.state, { type: 'reload-failed', message: 'timed out', at: T0 + 30 }).state;
    assert.deepEqual(failed.reload, { phase: 'error', message: 'timed out', at: T0 + 30 });
  });

  it('r while disconnected says so instead of reloading', () => {
    const s = run(connected(), { type: 'disconnected', at: T0, reason: 'gone', attempt: 1, retryAt: T0 + 250 }).state;
    const { state, effects } = press(s, 'r');
    assert.deepEqual(effects, []);
    assert.equal(state.notice?.text, 'not connected to the agent');
    assert.equal(press(state, { escape: true }).state.notice, undefined, 'Esc dismisses a notice');
  });

  it('ignores keys when stdin cannot deliver them', () => {
    const s = initialState({ now: T0, size: SIZE, status: status(), keys: false });
    const { state, effects } = press(s, 'q', 'r', '?');
    assert.equal(state, s);
    assert.deepEqual(effects, []);
  });
});

describe('dashboard model: filter', () => {
  it('/ edits a filter that narrows volumes (keeping their class), cleanups and events', () => {
    let s = run(connected(), { type: 'agent-event', event: logEvent('published nvme1 fast'), at: T0 }).state;
    s = press(s, '/', 'n', 'v', 'm', 'e', '1').state;
    assert.equal(s.editingFilter, true);
    assert.equal(s.filter, 'nvme1');
    assert.deepEqual(rowNames(s), ['fast-disks', '  local-pv-22222222']);
    assert.deepEqual(
      visibleEvents(s).map((e) => e.text),
      ['published nvme1 fast'],
    );
    assert.deepEqual(cleanupsInFlight(s), []);
    s = press(s, { return: true }).state;
    assert.equal(s.editingFilter, false);
    assert.equal(s.filter, 'nvme1');
    assert.equal(press(s, { escape: true }).state.filter, '', 'Esc clears a kept filter');
  });

  it('matches case-insensitively on class, claim, phase and path; a class name keeps all its rows', () => {
    assert.deepEqual(rowNames(press(connected(), '/', 'S', 'L', 'O', 'W').state), [
      'slow-disks',
      '  local-pv-33333333',
    ]);
    assert.deepEqual(rowNames(press(connected(), ...'/db/'.split('')).state), ['fast-disks', '  local-pv-11111111']);
    assert.deepEqual(rowNames(press(connected(), ...'/released'.split('')).state), [
      'slow-disks',
      '  local-pv-33333333',
    ]);
    assert.deepEqual(rowNames(press(connected(), ...'/lost'.split('')).state), ['fast-disks', '  ~lost+found']);
    assert.deepEqual(rowNames(press(connected(), ...'/zzz'.split('')).state), []);
  });

  it('types q, r, d and / into the filter instead of acting on them; Ctrl-C still quits', () => {
    const { state, effects } = press(connected(), '/', 'q', 'r', 'd', '/', '?');
    assert.deepEqual(effects, []);
    assert.equal(state.filter, 'qrd/?');
    assert.deepEqual(run(state, key('c', { ctrl: true })).effects, [{ type: 'quit' }]);
  });

  it('Backspace removes one character (a whole emoji), Esc clears and leaves', () => {
    let s = press(connected(), '/', 'a', 'b', '🙂').state;
    s = press(s, { backspace: true }).state;
    assert.equal(s.filter, 'ab');
    s = press(s, { delete: true }).state;
    assert.equal(s.filter, 'a');
    s = press(s, { escape: true }).state;
    assert.deepEqual([s.filter, s.editingFilter], ['', false]);
  });

  it('handles several characters in one input one by one (fast typing, paste, tmux)', () => {
    const s = run(connected(), key('/vol2')).state;
    assert.deepEqual([s.editingFilter, s.filter], [true, 'vol2']);
    const pasted = run(s, key('x\u001by')).state;
    assert.equal(pasted.filter, 'vol2xy', 'control characters are dropped');
    assert.deepEqual(run(connected(), key('?q')).effects, [{ type: 'quit' }]);
  });

  it('a new filter scrolls back to the top; a narrower result clamps the scroll', () => {
    let s = run(connected(), ...many(80)).state;
    s = press(s, '\t', { pageDown: true }, { pageDown: true }).state;
    assert.ok(s.scroll.events > 0);
    s = press(s, '/', '7').state;
    assert.equal(s.scroll.events, 0);
  });
});

describe('dashboard model: scrolling and layout', () => {
  it('arrows, j/k, PgUp/PgDn, Home/End scroll the focused pane within bounds', () => {
    const s = run(connected(), ...many(100)).state;
    const events = press(s, { tab: true }).state;
    assert.equal(events.focus, 'events');
    const page = layoutOf(events).events;
    assert.equal(press(events, { downArrow: true }, 'j', 'j').state.scroll.events, 3);
    assert.equal(press(events, { downArrow: true }, 'k').state.scroll.events, 0);
    assert.equal(press(events, { upArrow: true }).state.scroll.events, 0);
    assert.equal(press(events, { pageDown: true }).state.scroll.events, page);
    assert.equal(press(events, { pageDown: true }, { pageUp: true }).state.scroll.events, 0);
    const end = press(events, { end: true }).state;
    assert.equal(end.scroll.events, 101 - page);
    assert.equal(press(end, { downArrow: true }).state.scroll.events, 101 - page);
    assert.equal(press(end, { home: true }).state.scroll.events, 0);
    assert.equal(press(events, { tab: true }).state.focus, 'volumes');
    assert.equal(press(events, { leftArrow: true }).state.focus, 'volumes');
  });

  it('does not scroll volumes that fit', () => {
    assert.equal(press(connected(), { pageDown: true }, { end: true }).state.scroll.volumes, 0);
  });

  it('scrolls an open panel instead of the panes', () => {
    const diff = Array.from({ length: 100 }, (_, i) => `line ${i}`);
    let s = run(press(connected(), 'd').state, { type: 'diff-loaded', title: 'Diff', lines: diff }).state;
    s = press(s, { pageDown: true }, { downArrow: true }).state;
    assert.equal(s.scroll.overlay, layoutOf(s).overlay + 1);
    assert.equal(s.scroll.volumes + s.scroll.events, 0);
    assert.equal(press(s, { tab: true }).state.focus, 'volumes', 'Tab does nothing under a panel');
    s = press(s, { end: true }).state;
    assert.equal(s.scroll.overlay, 100 - layoutOf(s).overlay);
    const reopened = press(press(s, { escape: true }).state, 'd').state;
    assert.equal(reopened.scroll.overlay, 0, 'a panel opens at its top');
  });

  it('scrolls a panel sideways with Left and Right, within its widest line', () => {
    const wide = ['x'.repeat(150), 'short'];
    let s = run(press(connected(), 'd').state, { type: 'diff-loaded', title: 'Diff', lines: wide }).state;
    assert.equal(overlayInnerWidth(s), 98);
    assert.equal(overlayWidth(s), 150);
    s = press(s, { rightArrow: true }, { rightArrow: true }).state;
    assert.equal(s.overlayColumn, 2 * SIDE_STEP);
    assert.equal(s.focus, 'volumes', 'Left/Right do not switch panes under a panel');
    s = press(s, ...Array.from({ length: 20 }, (): KeyPress => ({ rightArrow: true }))).state;
    assert.equal(s.overlayColumn, 150 - 98);
    s = press(s, { leftArrow: true }).state;
    assert.equal(s.overlayColumn, 150 - 98 - SIDE_STEP);
    assert.equal(press(s, { escape: true }, 'd').state.overlayColumn, 0, 'a panel opens at its left edge');
    const narrow = run(press(connected(), 'd').state, { type: 'diff-loaded', title: 'Diff', lines: ['short'] }).state;
    assert.equal(press(narrow, { rightArrow: true }).state.overlayColumn, 0);
  });

  it('a resize re-clamps every offset', () => {
    let s = run(connected(), ...many(100)).state;
    s = press(s, { tab: true }, { end: true }).state;
    const before = s.scroll.events;
    s = run(s, { type: 'resize', size: { columns: 100, rows: 60 } }).state;
    assert.equal(s.scroll.events, 101 - layoutOf(s).events);
    assert.ok(s.scroll.events < before);
    assert.equal(run(s, { type: 'resize', size: { columns: 100, rows: 60 } }).state, s, 'same size: same state');
  });

  it('shares 80x24 out exactly, and 24 rows never overflow whatever the counts', () => {
    const l = computeLayout({ columns: 80, rows: 24 }, { rejectedErrors: 0, cleanups: 1, volumeRows: 6 });
    assert.equal(l.tooSmall, false);
    assert.equal(l.header + 2 + l.volumes + 1 + l.cleanups + 1 + l.events + l.footer, 24);
    assert.deepEqual([l.header, l.cleanups, l.volumes], [4, 1, 6]);
    assert.equal(l.overlay, l.body - 3);
  });

  it('is too small below the minimum size', () => {
    assert.equal(
      computeLayout({ columns: MIN_COLUMNS - 1, rows: 40 }, { rejectedErrors: 0, cleanups: 0, volumeRows: 0 }).tooSmall,
      true,
    );
    assert.equal(
      computeLayout({ columns: 80, rows: MIN_ROWS - 1 }, { rejectedErrors: 0, cleanups: 0, volumeRows: 0 }).tooSmall,
      true,
    );
    assert.equal(
      computeLayout({ columns: MIN_COLUMNS, rows: MIN_ROWS }, { rejectedErrors: 3, cleanups: 3, volumeRows: 50 })
        .tooSmall,
      false,
    );
  });

  it('property: any size and counts fit the rows exactly, with no negative section', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: MIN_COLUMNS, max: 300 }),
        fc.integer({ min: MIN_ROWS, max: 120 }),
        fc.nat(10),
        fc.nat(20),
        fc.nat(2000),
        (columns, rows, rejectedErrors, cleanups, volumeRows) => {
          const l = computeLayout({ columns, rows }, { rejectedErrors, cleanups, volumeRows });
          for (const v of [l.header, l.volumes, l.cleanups, l.events, l.overlay, l.body]) assert.ok(v >= 0);
          assert.equal(l.header + 2 + l.volumes + 1 + l.cleanups + 1 + l.events + l.footer, rows);
          assert.ok(l.volumes >= 1);
          assert.ok(l.cleanups <= cleanups);
        },
      ),
    );
  });

  it('a Devices pane only when the rules select devices: its title and at most MAX_DEVICE_ROWS rows', () => {
    const without = layoutOf(connected());
    assert.deepEqual([without.devicesPane, without.devices], [false, 0]);
    const state = { ...connected(), status: withDevices() };
    const l = layoutOf(state);
    assert.deepEqual([l.devicesPane, l.devices], [true, MAX_DEVICE_ROWS]);
    assert.equal(l.header + 2 + l.volumes + 1 + l.devices + 1 + l.cleanups + 1 + l.events + l.footer, SIZE.rows);
    assert.equal(l.events, without.events - 1 - MAX_DEVICE_ROWS, 'the rows come out of the events');
    const filtered = layoutOf(press(state, '/', 'p', 'l', 'a', 'n').state);
    assert.deepEqual([filtered.devicesPane, filtered.devices], [true, 2], 'the filter leaves two rows');
    const none = layoutOf(press(state, '/', 'z', 'z', 'z').state);
    assert.deepEqual([none.devicesPane, none.devices], [true, 0], 'the title stays while nothing matches');
    assert.equal(layoutOf({ ...connected(), status: withDevices([]) }).devicesPane, false);
  });

  it('a short terminal squeezes the device rows before the volumes and events', () => {
    const counts = { rejectedErrors: 0, cleanups: 1, volumeRows: 6, devices: 8 };
    const short = computeLayout({ columns: 80, rows: 16 }, counts);
    assert.deepEqual([short.cleanups, short.devices, short.volumes, short.events], [1, 2, 1, 1]);
    const smallest = computeLayout({ columns: MIN_COLUMNS, rows: MIN_ROWS }, counts);
    assert.deepEqual([smallest.devicesPane, smallest.devices, smallest.cleanups, smallest.volumes], [true, 0, 0, 1]);
  });

  it('property: with a Devices pane, any size and counts still fit the rows exactly', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: MIN_COLUMNS, max: 300 }),
        fc.integer({ min: MIN_ROWS, max: 120 }),
        fc.nat(10),
        fc.nat(20),
        fc.nat(2000),
        fc.nat(100),
        (columns, rows, rejectedErrors, cleanups, volumeRows, devices) => {
          const l = computeLayout({ columns, rows }, { rejectedErrors, cleanups, volumeRows, devices });
          for (const v of [l.header, l.volumes, l.devices, l.cleanups, l.events, l.overlay, l.body]) assert.ok(v >= 0);
          assert.equal(l.header + 2 + l.volumes + 1 + l.devices + 1 + l.cleanups + 1 + l.events + l.footer, rows);
          assert.ok(l.volumes >= 1);
          assert.ok(l.devices <= Math.min(devices, MAX_DEVICE_ROWS));
        },
      ),
    );
  });

  it('property: any sequence of actions keeps every scroll offset inside its content', () => {
    const keyArb = fc.oneof(
      fc
        .constantFrom<KeyPress>(
          { upArrow: true },
          { downArrow: true },
          { pageUp: true },
          { pageDown: true },
          { home: true },
          { end: true },
          { tab: true },
          { escape: true },
          { return: true },
          { backspace: true },
        )
        .map((k): Action => key('', k)),
      fc.constantFrom('/', 'd', 'f', '?', 'r', 'j', 'k', 'a', '1', 'v').map((c): Action => key(c)),
    );
    const other = fc.oneof(
      fc
        .record({ columns: fc.integer({ min: 20, max: 200 }), rows: fc.integer({ min: 5, max: 80 }) })
        .map((size): Action => ({ type: 'resize', size })),
      fc.nat(50).map((n): Action => ({ type: 'agent-event', event: logEvent(`e${n}`), at: T0 })),
      fc.nat(200).map((n): Action => ({ type: 'diff-loaded', title: 't', lines: Array.from({ length: n }, String) })),
      fc.nat(200).map((n): Action => ({ type: 'fleet-loaded', title: 't', lines: Array.from({ length: n }, String) })),
      fc.constant<Action>({ type: 'reload-finished', result: APPLIED, at: T0 }),
    );
    fc.assert(
      fc.property(fc.array(fc.oneof(keyArb, keyArb, other), { maxLength: 60 }), (actions) => {
        const state = run(connected(), ...actions).state;
        const l = layoutOf(state);
        const overlayLines =
          state.overlay === undefined
            ? 0
            : state.overlay.kind === 'help'
              ? HELP_LINES.length
              : state.overlay.lines.length;
        assert.ok(
          state.scroll.volumes >= 0 && state.scroll.volumes <= Math.max(0, volumeRows(state).length - l.volumes),
        );
        assert.ok(
          state.scroll.events >= 0 && state.scroll.events <= Math.max(0, visibleEvents(state).length - l.events),
        );
        assert.ok(state.scroll.overlay >= 0 && state.scroll.overlay <= Math.max(0, overlayLines - l.overlay));
      }),
      { numRuns: 300 },
    );
  });
});
