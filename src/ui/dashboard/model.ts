// The dashboard's view model: one pure reducer from what the agent sends (its event stream and the
// connection's ups and downs) and what the user does (keys, resizes) to the state the terminal
// view renders. No React, no I/O: the reducer returns the side effects it wants (reload, load the
// diff, quit) and the UI runs them and feeds their outcome back as actions.
import type { AgentEvent, AgentStatusJson, CleanupStatus, ReloadResult } from '../../core/agent/reload-types.js';
import type { DeviceVerdict } from '../../core/disk-rules/decide.js';
import type { FeedMessage } from './feed.js';
import { computeLayout } from './layout.js';
import type { Layout, Size } from './layout.js';
import { plural } from '../../render/text.js';

export type { Size } from './layout.js';

export type Connection =
  | { readonly state: 'connecting' }
  | { readonly state: 'connected'; readonly since: number }
  | {
      readonly state: 'reconnecting';
      /** When the connection was lost. */
      readonly since: number;
      readonly attempt: number;
      readonly retryAt: number;
      readonly reason: string;
    };

export type Severity = 'info' | 'warn' | 'error';
export type EventKind = 'reload' | 'pass' | 'cleanup' | 'log' | 'connection';

export interface EventEntry {
  readonly id: number;
  /** Agent time for agent events, local time for connection events. */
  readonly at: number;
  readonly kind: EventKind;
  readonly severity: Severity;
  readonly text: string;
}

/** The two panes the arrow keys scroll (Tab switches). */
export type Pane = 'volumes' | 'events';

export type Overlay =
  | { readonly kind: 'help' }
  | {
      /** diff: `d`, the on-disk config against the applied one; fleet: `f`, the rollout status of every node. */
      readonly kind: 'diff' | 'fleet';
      readonly phase: 'loading' | 'ready' | 'error';
      readonly title: string;
      readonly lines: readonly string[];
    };

/** The reload the user asked for with `r`, and its outcome. */
export type ReloadRequestState =
  | { readonly phase: 'idle' }
  | { readonly phase: 'running'; readonly force: boolean; readonly since: number }
  | { readonly phase: 'done'; readonly result: ReloadResult; readonly at: number }
  | { readonly phase: 'error'; readonly message: string; readonly at: number };

export interface Scroll {
  readonly volumes: number;
  readonly events: number;
  readonly overlay: number;
}

export interface DashboardState {
  /** Local time of the last tick. */
  readonly now: number;
  readonly size: Size;
  readonly connection: Connection;
  readonly status?: AgentStatusJson;
  /** Local time the status arrived: with status.now, maps local time onto the agent's clock. */
  readonly statusReceivedAt?: number;
  /** Cleanups by PV name: the status's list, updated by cleanup events in between. */
  readonly cleanups: readonly CleanupStatus[];
  /** Newest first, at most MAX_EVENTS. */
  readonly events: readonly EventEntry[];
  readonly nextEventId: number;
  readonly filter: string;
  readonly editingFilter: boolean;
  readonly focus: Pane;
  readonly scroll: Scroll;
  readonly overlay?: Overlay;
  /** First column shown of an overlay whose lines are wider than the panel (Left/Right). */
  readonly overlayColumn: number;
  readonly reload: ReloadRequestState;
  /** A short notice in the footer (e.g. "a reload is already running"). */
  readonly notice?: { readonly text: string; readonly severity: Severity };
  /** False when stdin cannot deliver keys (no raw mode): the view is read-only. */
  readonly keys: boolean;
  readonly quitting: boolean;
}

/** Side effects the reducer asks for; the UI runs them and reports back with actions. */
export type Effect =
  | { readonly type: 'reload'; readonly force: boolean }
  | { readonly type: 'diff' }
  | { readonly type: 'fleet' }
  | { readonly type: 'quit' };

/** The keys the dashboard knows; a subset of ink's Key, every field optional. */
export interface KeyPress {
  readonly upArrow?: boolean;
  readonly downArrow?: boolean;
  readonly leftArrow?: boolean;
  readonly rightArrow?: boolean;
  readonly pageUp?: boolean;
  readonly pageDown?: boolean;
  readonly home?: boolean;
  readonly end?: boolean;
  readonly return?: boolean;
  readonly escape?: boolean;
  readonly tab?: boolean;
  readonly backspace?: boolean;
  readonly delete?: boolean;
  readonly ctrl?: boolean;
  readonly meta?: boolean;
  readonly shift?: boolean;
}

export type Action =
  /** The connection's ups and downs, as the feed reports them. */
  | Extract<FeedMessage, { readonly type: 'connected' | 'disconnected' }>
  | { readonly type: 'agent-event'; readonly event: AgentEvent; readonly at: number }
  | { readonly type: 'tick'; readonly now: number }
  | { readonly type: 'resize'; readonly size: Size }
  | { readonly type: 'key'; readonly input: string; readonly key: KeyPress }
  | { readonly type: 'reload-finished'; readonly result: ReloadResult; readonly at: number }
  | { readonly type: 'reload-failed'; readonly message: string; readonly at: number }
  | { readonly type: 'diff-loaded'; readonly title: string; readonly lines: readonly string[] }
  | { readonly type: 'diff-failed'; readonly title: string; readonly lines: readonly string[] }
  | { readonly type: 'fleet-loaded'; readonly title: string; readonly lines: readonly string[] }
  | { readonly type: 'fleet-failed'; readonly title: string; readonly lines: readonly string[] };

export interface Update {
  readonly state: DashboardState;
  readonly effects: readonly Effect[];
}

export const MAX_EVENTS = 500;

export interface InitialStateOptions {
  readonly now: number;
  readonly size: Size;
  /** A status fetched before the view opened (the first frame is then complete at once). */
  readonly status?: AgentStatusJson;
  readonly keys?: boolean;
}

export function initialState(options: InitialStateOptions): DashboardState {
  const base: DashboardState = {
    now: options.now,
    size: options.size,
    connection: { state: 'connecting' },
    cleanups: [],
    events: [],
    nextEventId: 1,
    filter: '',
    editingFilter: false,
    focus: 'volumes',
    scroll: { volumes: 0, events: 0, overlay: 0 },
    overlayColumn: 0,
    reload: { phase: 'idle' },
    keys: options.keys ?? true,
    quitting: false,
  };
  return options.status === undefined ? base : withStatus(base, options.status, options.now);
}

// ---- selectors ----------------------------------------------------------------------------------

/** The agent's clock now, estimated from the last status (same node: usually the local clock). */
export function agentNow(state: DashboardState): number {
  if (state.status === undefined || state.statusReceivedAt === undefined) return state.now;
  return state.status.now + Math.max(0, state.now - state.statusReceivedAt);
}

export type SyncState = 'in-sync' | 'propagating' | 'rejected' | 'refused' | 'unknown';

/**
 * The applied config against the on-disk one: in sync (same hash), propagating (the source changed
 * and a reload is pending or running), rejected (the last read was invalid or failed, and it is
 * still what is on disk), refused (the reload guard refused what is on disk: it waits for
 * `reload --allow` or a restart), unknown (no status, or the source was unreadable at the last read).
 */
export function configSync(status: AgentStatusJson | undefined): SyncState {
  if (status === undefined) return 'unknown';
  const { appliedHash, onDiskHash } = status.config;
  const rejected = status.rejected;
  if (rejected?.outcome === 'refused' && rejected.candidateHash === onDiskHash) return 'refused';
  if (rejected !== undefined && (onDiskHash === undefined || rejected.candidateHash === onDiskHash)) return 'rejected';
  if (onDiskHash === undefined) return status.reloadPending ? 'propagating' : 'unknown';
  if (status.reloadPending || onDiskHash !== appliedHash) return 'propagating';
  return 'in-sync';
}

export type VolumeRow =
  | {
      readonly kind: 'class';
      readonly name: string;
      readonly hostDir: string;
      readonly pvs: number;
      readonly skipped: number;
      readonly problem?: string;
    }
  | {
      readonly kind: 'pv';
      readonly className: string;
      readonly name: string;
      readonly path: string;
      readonly capacity: string;
      readonly phase: string;
      readonly claim?: string;
      /** Not healthy, or quarantined (docs/disk-identity.md). */
      readonly condition?: string;
    }
  | {
      readonly kind: 'skipped';
      readonly className: string;
      readonly entry: string;
      readonly reason: string;
      readonly message: string;
    };

function matches(filter: string, ...fields: readonly (string | undefined)[]): boolean {
  if (filter === '') return true;
  const needle = filter.toLowerCase();
  return fields.some((f) => f?.toLowerCase().includes(needle) === true);
}

/** Classes, their PVs and skipped entries, as table rows; with a filter, the matching rows (and their class). */
export function volumeRows(state: DashboardState): readonly VolumeRow[] {
  const rows: VolumeRow[] = [];
  for (const c of state.status?.classes ?? []) {
    const classMatches = matches(state.filter, c.name, c.hostDir, c.mountDir);
    const children: VolumeRow[] = [
      ...c.persistentVolumes
        .filter(
          (pv) =>
            classMatches ||
            matches(state.filter, pv.name, pv.path, pv.capacity, pv.phase, pv.claim, pv.condition?.reason),
        )
        .map((pv): VolumeRow => ({
          kind: 'pv',
          className: c.name,
          name: pv.name,
          path: pv.path,
          capacity: pv.capacity,
          phase: pv.phase,
          ...(pv.claim !== undefined ? { claim: pv.claim } : {}),
          ...(pv.condition !== undefined ? { condition: pv.condition.reason } : {}),
        })),
      ...c.skipped
        .filter((s) => classMatches || matches(state.filter, s.entry, s.reason, s.message))
        .map((s): VolumeRow => ({
          kind: 'skipped',
          className: c.name,
          entry: s.entry,
          reason: s.reason,
          message: s.message,
        })),
    ];
    if (!classMatches && children.length === 0) continue;
    rows.push(
      {
        kind: 'class',
        name: c.name,
        hostDir: c.hostDir,
        pvs: c.persistentVolumes.length,
        skipped: c.skipped.length,
        ...(c.problem !== undefined ? { problem: c.problem } : {}),
      },
      ...children,
    );
  }
  return rows;
}

/** Cleanups still to finish: queued, running, or failed and waiting to retry. */
export function cleanupsInFlight(state: DashboardState): readonly CleanupStatus[] {
  return state.cleanups
    .filter((c) => c.state !== 'succeeded')
    .filter((c) => matches(state.filter, c.pv, c.method, c.state, c.lastError));
}

/**
 * What the last pass did or would do with a device a rule selects, in words: `linked → ENTRY`,
 * `carved into N partitions`, `will link → ENTRY (plan)`, `linking → ENTRY`, `skipped: REASON`.
 */
export function deviceState(v: DeviceVerdict): string {
  switch (v.kind) {
    case 'linked':
      return `linked → ${v.entry}`;
    case 'carved':
      return `carved into ${plural(v.partitions, 'partition')}`;
    case 'link':
      return v.apply ? `linking → ${v.entry}` : `will link → ${v.entry} (plan)`;
    case 'carve':
      return v.apply
        ? `carving into ${plural(v.partitions, 'partition')}`
        : `will carve into ${plural(v.partitions, 'partition')} (plan)`;
    case 'skip':
      return `skipped: ${v.reason}`;
  }
}

/** 0: skipped (a problem to look at); 1: still to do (settling, planned, linking, carving); 2: done. */
function deviceRank(v: DeviceVerdict): number {
  if (v.kind === 'skip') return v.reason === 'settling' ? 1 : 0;
  return v.kind === 'link' || v.kind === 'carve' ? 1 : 2;
}

/** Kernel names in the order a person counts them: nvme2n1 before nvme10n1. */
const DEVICE_NAME_ORDER = new Intl.Collator('en', { numeric: true });

/** Whether the Devices pane is shown: the last pass has verdicts (disks-by-rule rules select devices). */
export function hasDevicePane(state: DashboardState): boolean {
  return (state.status?.devices?.length ?? 0) > 0;
}

/**
 * The devices the rules select, with their verdicts: skipped first, then those still to do, then
 * those linked or carved; by device name within each (then storage class). With a filter, the
 * devices whose name, class, state or skip detail contain it.
 */
export function selectedDevices(state: DashboardState): readonly DeviceVerdict[] {
  return (state.status?.devices ?? [])
    .filter((v) => matches(state.filter, v.device, v.className, deviceState(v), v.kind === 'skip' ? v.detail : ''))
    .toSorted(
      (a, b) =>
        deviceRank(a) - deviceRank(b) ||
        DEVICE_NAME_ORDER.compare(a.device, b.device) ||
        DEVICE_NAME_ORDER.compare(a.className, b.className),
    );
}

export function visibleEvents(state: DashboardState): readonly EventEntry[] {
  if (state.filter === '') return state.events;
  return state.events.filter((e) => matches(state.filter, e.kind, e.severity, e.text));
}

/** Line counts of the variable parts, for the layout. */
export function layoutOf(state: DashboardState): Layout {
  return computeLayout(state.size, {
    rejectedErrors: rejectedErrors(state).length,
    cleanups: cleanupsInFlight(state).length,
    volumeRows: volumeRows(state).length,
    ...(hasDevicePane(state) ? { devices: selectedDevices(state).length } : {}),
  });
}

/** Error lines of the rejected config (or why it was refused), shown under the config line. */
export function rejectedErrors(state: DashboardState): readonly string[] {
  const rejected = state.status?.rejected;
  const sync = configSync(state.status);
  if (rejected === undefined || (sync !== 'rejected' && sync !== 'refused')) return [];
  const errors = rejected.issues.filter((i) => i.severity === 'error');
  if (errors.length > 0) {
    return errors.map((i) => {
      const line = i.position?.line !== undefined ? `:${i.position.line}` : '';
      const where = i.position !== undefined ? `${i.position.file}${line}: ` : '';
      return `${where}${i.path === '' ? '' : `${i.path}: `}${i.message}`;
    });
  }
  return rejected.error !== undefined ? [rejected.error] : [];
}

/** Line count of the overlay's content. */
function overlayLength(state: DashboardState): number {
  if (state.overlay === undefined) return 0;
  if (state.overlay.kind === 'help') return HELP_LINES.length;
  return state.overlay.lines.length;
}

/** Width of the overlay's widest line. */
export function overlayWidth(state: DashboardState): number {
  if (state.overlay === undefined) return 0;
  if (state.overlay.kind === 'help') return Math.max(...HELP_LINES.map(([, what]) => HELP_KEY_WIDTH + what.length));
  return state.overlay.lines.reduce((w, line) => Math.max(w, Array.from(line).length), 0);
}

/** Columns inside the overlay's border. */
export function overlayInnerWidth(state: DashboardState): number {
  return Math.max(0, state.size.columns - 2);
}

/** Width of the key column of the help. */
export const HELP_KEY_WIDTH = 14;
/** Columns Left and Right move an overlay by. */
export const SIDE_STEP = 8;

export const HELP_LINES: readonly (readonly [string, string])[] = [
  ['r', 'reload the config now (R: force, restarting the sync loop)'],
  ['d', 'the on-disk config against the applied one (d or Esc closes)'],
  ['f', "the fleet: a staged rollout's waves, every node (f or Esc closes)"],
  ['/', 'filter volumes, devices, cleanups and events (Enter keeps, Esc clears)'],
  ['Esc', 'clear the filter, close a panel'],
  ['Tab', 'switch the scrolled pane (volumes / events)'],
  ['Up Down', 'scroll one line (also k j); Left Right: sideways in a panel'],
  ['PgUp PgDn', 'scroll one page'],
  ['Home End', 'top, bottom'],
  ['?', 'this help (? or Esc closes)'],
  ['q Ctrl-C', 'quit'],
];

// ---- reducer ------------------------------------------------------------------------------------

/** A copy without an optional field (exactOptionalPropertyTypes: absent, not undefined). */
function omit<T extends object, K extends keyof T>(value: T, key: K): Omit<T, K> {
  const copy = { ...value };
  Reflect.deleteProperty(copy, key);
  return copy;
}

/** The filter minus its last user-perceived character (an emoji or accented letter is one). */
function dropLastCharacter(text: string): string {
  const parts = Array.from(new Intl.Segmenter().segment(text), (s) => s.segment);
  parts.pop();
  return parts.join('');
}

function clamp(value: number, max: number): number {
  return Math.max(0, Math.min(value, Math.max(0, max)));
}

/** Keeps every scroll offset inside its content for the current size and data. */
function normalize(state: DashboardState): DashboardState {
  const layout = layoutOf(state);
  const scroll: Scroll = {
    volumes: clamp(state.scroll.volumes, volumeRows(state).length - layout.volumes),
    events: clamp(state.scroll.events, visibleEvents(state).length - layout.events),
    overlay: clamp(state.scroll.overlay, overlayLength(state) - layout.overlay),
  };
  const overlayColumn = clamp(state.overlayColumn, overlayWidth(state) - overlayInnerWidth(state));
  const same =
    scroll.volumes === state.scroll.volumes &&
    scroll.events === state.scroll.events &&
    scroll.overlay === state.scroll.overlay &&
    overlayColumn === state.overlayColumn;
  return same ? state : { ...state, scroll, overlayColumn };
}

function withStatus(state: DashboardState, status: AgentStatusJson, receivedAt: number): DashboardState {
  return { ...state, status, statusReceivedAt: receivedAt, cleanups: status.cleanups };
}

function addEvent(state: DashboardState, entry: Omit<EventEntry, 'id'>): DashboardState {
  const events = [{ ...entry, id: state.nextEventId }, ...state.events].slice(0, MAX_EVENTS);
  // Scrolled away from the newest: keep the same lines in view as a new one arrives on top.
  const shown = matches(state.filter, entry.kind, entry.severity, entry.text);
  const scroll = state.scroll.events > 0 && shown ? { ...state.scroll, events: state.scroll.events + 1 } : state.scroll;
  return { ...state, events, nextEventId: state.nextEventId + 1, scroll };
}

function reloadSeverity(result: ReloadResult): Severity {
  if (result.outcome === 'applied' || result.outcome === 'noop') return 'info';
  return result.outcome === 'rejected' || result.outcome === 'refused' ? 'warn' : 'error';
}

/** One line about a reload, for the event list. */
export function reloadEventText(result: ReloadResult): string {
  const forced = result.forced ? ', forced' : '';
  const head = `${result.outcome} (${result.trigger}${forced})`;
  switch (result.outcome) {
    case 'applied':
      return `${head}: generation ${result.generation}, ${plural(result.changes.length, 'change')}`;
    case 'noop':
      return `${head}: generation ${result.generation} unchanged`;
    case 'rejected': {
      const errors = result.issues.filter((i) => i.severity === 'error').length;
      return `${head}: ${plural(errors, 'problem')}; generation ${result.generation} keeps serving`;
    }
    case 'refused':
      return `${head}: needs --allow ${(result.needsAllow ?? []).join(',')}; generation ${result.generation} keeps serving`;
    case 'rolled-back':
    case 'failed':
      return `${head}: ${result.error ?? 'no reason given'}`;
  }
}

function fieldsText(fields: Readonly<Record<string, unknown>>): string {
  return Object.entries(fields)
    .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
    .join(' ');
}

function eventEntry(event: AgentEvent): Omit<EventEntry, 'id'> | undefined {
  switch (event.type) {
    case 'status':
      return undefined;
    case 'reload':
      return {
        at: event.at,
        kind: 'reload',
        severity: reloadSeverity(event.result),
        text: reloadEventText(event.result),
      };
    case 'pass': {
      // Quiet passes (nothing created or deleted) would drown the list every discovery period.
      if (event.created.length === 0 && event.deleted.length === 0) return undefined;
      const parts = [
        ...(event.created.length > 0 ? [`created ${event.created.join(', ')}`] : []),
        ...(event.deleted.length > 0 ? [`deleted ${event.deleted.join(', ')}`] : []),
      ];
      return {
        at: event.at,
        kind: 'pass',
        severity: 'info',
        text: `generation ${event.generation}: ${parts.join('; ')}`,
      };
    }
    case 'cleanup': {
      const c = event.cleanup;
      const error = c.lastError !== undefined ? `: ${c.lastError}` : '';
      return {
        at: event.at,
        kind: 'cleanup',
        severity: c.state === 'failed' ? 'error' : 'info',
        text: `${c.pv} ${c.state} (${c.method}, attempt ${c.attempts})${error}`,
      };
    }
    case 'log': {
      const severity: Severity = event.level === 'error' ? 'error' : event.level === 'warn' ? 'warn' : 'info';
      const fields = fieldsText(event.fields);
      return {
        at: event.at,
        kind: 'log',
        severity,
        text: fields === '' ? event.message : `${event.message} ${fields}`,
      };
    }
  }
}

function applyAgentEvent(state: DashboardState, event: AgentEvent, at: number): DashboardState {
  let next = state;
  switch (event.type) {
    case 'status':
      next = withStatus(state, event.status, at);
      break;
    case 'reload':
      if (state.status !== undefined) {
        const ok = event.result.outcome === 'applied' || event.result.outcome === 'noop';
        const rest = omit(state.status, 'rejected');
        next = {
          ...state,
          status: {
            ...rest,
            generation: event.result.generation,
            config: {
              ...state.status.config,
              appliedHash: event.result.appliedHash,
              // What the agent read is what is on disk now (a rejected read included).
              ...(event.result.candidateHash !== undefined ? { onDiskHash: event.result.candidateHash } : {}),
            },
            lastReload: event.result,
            ...(ok ? {} : { rejected: event.result }),
          },
        };
      }
      break;
    case 'cleanup': {
      const others = state.cleanups.filter((c) => c.pv !== event.cleanup.pv);
      next = { ...state, cleanups: [...others, event.cleanup] };
      break;
    }
    case 'pass':
    case 'log':
      break;
  }
  const entry = eventEntry(event);
  return entry === undefined ? next : addEvent(next, entry);
}

function scrollBy(state: DashboardState, target: keyof Scroll, delta: number): DashboardState {
  return { ...state, scroll: { ...state.scroll, [target]: Math.max(0, state.scroll[target] + delta) } };
}

function scrollTarget(state: DashboardState): keyof Scroll {
  return state.overlay !== undefined ? 'overlay' : state.focus;
}

function pageOf(state: DashboardState, target: keyof Scroll): number {
  const layout = layoutOf(state);
  return Math.max(1, layout[target]);
}

function scrollKey(state: DashboardState, input: string, key: KeyPress): DashboardState | undefined {
  const target = scrollTarget(state);
  if (key.upArrow === true || (!state.editingFilter && input === 'k')) return scrollBy(state, target, -1);
  if (key.downArrow === true || (!state.editingFilter && input === 'j')) return scrollBy(state, target, 1);
  if (key.pageUp === true) return scrollBy(state, target, -pageOf(state, target));
  if (key.pageDown === true) return scrollBy(state, target, pageOf(state, target));
  if (key.home === true) return { ...state, scroll: { ...state.scroll, [target]: 0 } };
  if (key.end === true) return { ...state, scroll: { ...state.scroll, [target]: Number.MAX_SAFE_INTEGER } };
  return undefined;
}

const NONE: readonly Effect[] = [];

function filterKey(state: DashboardState, input: string, key: KeyPress): Update {
  if (key.escape === true) return { state: { ...state, filter: '', editingFilter: false }, effects: NONE };
  if (key.return === true) return { state: { ...state, editingFilter: false }, effects: NONE };
  if (key.backspace === true || key.delete === true) {
    return { state: { ...state, filter: dropLastCharacter(state.filter) }, effects: NONE };
  }
  const scrolled = scrollKey(state, input, key);
  if (scrolled !== undefined) return { state: scrolled, effects: NONE };
  if (key.ctrl === true || key.meta === true || key.tab === true) return { state, effects: NONE };
  // eslint-disable-next-line no-control-regex -- strip control characters from typed or pasted text
  const text = input.replace(/[\u0000-\u001f\u007f]/gu, '');
  if (text === '') return { state, effects: NONE };
  return {
    state: { ...state, filter: state.filter + text, scroll: { ...state.scroll, volumes: 0, events: 0 } },
    effects: NONE,
  };
}

function startReload(state: DashboardState, force: boolean): Update {
  if (state.reload.phase === 'running') {
    return { state: { ...state, notice: { text: 'a reload is already running', severity: 'warn' } }, effects: NONE };
  }
  if (state.connection.state !== 'connected') {
    return { state: { ...state, notice: { text: 'not connected to the agent', severity: 'warn' } }, effects: NONE };
  }
  const rest = omit(state, 'notice');
  return {
    state: { ...rest, reload: { phase: 'running', force, since: state.now } },
    effects: [{ type: 'reload', force }],
  };
}

function toggleOverlay(state: DashboardState, overlay: Overlay | undefined): DashboardState {
  const rest = { ...omit(state, 'overlay'), overlayColumn: 0 };
  const scroll = { ...state.scroll, overlay: 0 };
  return overlay === undefined ? { ...rest, scroll } : { ...rest, overlay, scroll };
}

function quit(state: DashboardState): Update {
  return { state: { ...state, quitting: true }, effects: [{ type: 'quit' }] };
}

/** The panels opened and closed by a key: help (?), the config diff (d), the fleet (f). */
function toggleHelp(state: DashboardState): Update {
  return { state: toggleOverlay(state, state.overlay?.kind === 'help' ? undefined : { kind: 'help' }), effects: NONE };
}

function toggleDiff(state: DashboardState): Update {
  if (state.overlay?.kind === 'diff') return { state: toggleOverlay(state, undefined), effects: NONE };
  if (state.status === undefined) {
    return { state: { ...state, notice: { text: 'no status from the agent yet', severity: 'warn' } }, effects: NONE };
  }
  const overlay: Overlay = { kind: 'diff', phase: 'loading', title: 'Diff: loading…', lines: [] };
  return { state: toggleOverlay(state, overlay), effects: [{ type: 'diff' }] };
}

function toggleFleet(state: DashboardState): Update {
  if (state.overlay?.kind === 'fleet') return { state: toggleOverlay(state, undefined), effects: NONE };
  const overlay: Overlay = { kind: 'fleet', phase: 'loading', title: 'Fleet: loading…', lines: [] };
  return { state: toggleOverlay(state, overlay), effects: [{ type: 'fleet' }] };
}

/** Escape closes the panel, else clears the filter, else the notice. */
function escapeKey(state: DashboardState): Update {
  if (state.overlay !== undefined) return { state: toggleOverlay(state, undefined), effects: NONE };
  if (state.filter !== '') return { state: { ...state, filter: '' }, effects: NONE };
  return { state: omit(state, 'notice'), effects: NONE };
}

/** The keys bound to one character (a Map: no input reaches Object.prototype). */
const CHARACTER_KEYS: ReadonlyMap<string, (state: DashboardState) => Update> = new Map([
  ['q', quit],
  ['?', toggleHelp],
  ['d', toggleDiff],
  ['f', toggleFleet],
  ['r', (state: DashboardState) => startReload(state, false)],
  ['R', (state: DashboardState) => startReload(state, true)],
  ['/', (state: DashboardState): Update => ({ state: { ...state, editingFilter: true }, effects: NONE })],
]);

/** Left and right scroll an open panel sideways; with none open they, like tab, switch the focused list. */
function sideKey(state: DashboardState, input: string, key: KeyPress): Update | undefined {
  if (state.overlay !== undefined && (key.leftArrow === true || key.rightArrow === true)) {
    const step = key.leftArrow === true ? -SIDE_STEP : SIDE_STEP;
    return { state: { ...state, overlayColumn: Math.max(0, state.overlayColumn + step) }, effects: NONE };
  }
  if (key.tab === true || input === '\t' || key.leftArrow === true || key.rightArrow === true) {
    if (state.overlay !== undefined) return { state, effects: NONE };
    return { state: { ...state, focus: state.focus === 'volumes' ? 'events' : 'volumes' }, effects: NONE };
  }
  return undefined;
}

function keyUpdate(state: DashboardState, input: string, key: KeyPress): Update {
  if (key.ctrl === true && input === 'c') return quit(state);
  if (state.quitting) return { state, effects: NONE };
  if (state.editingFilter) return filterKey(state, input, key);
  if (input === 'q') return quit(state);
  if (key.escape === true) return escapeKey(state);
  const bound = CHARACTER_KEYS.get(input);
  if (bound !== undefined) return bound(state);
  return sideKey(state, input, key) ?? { state: scrollKey(state, input, key) ?? state, effects: NONE };
}

/**
 * Several characters in one input (typed fast, pasted, or sent in one write by tmux) are handled
 * one by one, so "/vol2" opens the filter and types "vol2" into it.
 */
function keysUpdate(state: DashboardState, input: string, key: KeyPress): Update {
  const chars = Array.from(input);
  if (chars.length <= 1 || key.ctrl === true || key.meta === true) return keyUpdate(state, input, key);
  let next = state;
  const effects: Effect[] = [];
  for (const char of chars) {
    const step = keyUpdate(next, char, {});
    next = step.state;
    effects.push(...step.effects);
    if (next.quitting) break;
  }
  return { state: next, effects };
}

/** The loaded (or failed) content of the diff or fleet panel, unless the user closed it (or opened another) meanwhile. */
function panelLoaded(
  state: DashboardState,
  kind: 'diff' | 'fleet',
  ok: boolean,
  content: { readonly title: string; readonly lines: readonly string[] },
): DashboardState {
  if (state.overlay?.kind !== kind) return state;
  return { ...state, overlay: { kind, phase: ok ? 'ready' : 'error', title: content.title, lines: content.lines } };
}

function reduce(state: DashboardState, action: Action): Update {
  switch (action.type) {
    case 'connected': {
      const entry = { at: action.at, kind: 'connection' as const, severity: 'info' as const };
      const text = state.connection.state === 'reconnecting' ? 'reconnected to the agent' : 'connected to the agent';
      return {
        state: addEvent({ ...state, connection: { state: 'connected', since: action.at } }, { ...entry, text }),
        effects: NONE,
      };
    }
    case 'disconnected': {
      const since = state.connection.state === 'reconnecting' ? state.connection.since : action.at;
      const next: DashboardState = {
        ...state,
        connection: {
          state: 'reconnecting',
          since,
          attempt: action.attempt,
          retryAt: action.retryAt,
          reason: action.reason,
        },
      };
      // One line when the connection drops; the retries only update the header.
      if (state.connection.state === 'reconnecting') return { state: next, effects: NONE };
      return {
        state: addEvent(next, {
          at: action.at,
          kind: 'connection',
          severity: 'warn',
          text: `connection lost: ${action.reason}`,
        }),
        effects: NONE,
      };
    }
    case 'agent-event':
      return { state: applyAgentEvent(state, action.event, action.at), effects: NONE };
    case 'tick':
      return { state: { ...state, now: action.now }, effects: NONE };
    case 'resize':
      if (action.size.columns === state.size.columns && action.size.rows === state.size.rows) {
        return { state, effects: NONE };
      }
      return { state: { ...state, size: action.size }, effects: NONE };
    case 'key':
      if (!state.keys) return { state, effects: NONE };
      return keysUpdate(state, action.input, action.key);
    case 'reload-finished':
      return { state: { ...state, reload: { phase: 'done', result: action.result, at: action.at } }, effects: NONE };
    case 'reload-failed':
      return { state: { ...state, reload: { phase: 'error', message: action.message, at: action.at } }, effects: NONE };
    case 'diff-loaded':
    case 'diff-failed':
      return { state: panelLoaded(state, 'diff', action.type === 'diff-loaded', action), effects: NONE };
    case 'fleet-loaded':
    case 'fleet-failed':
      return { state: panelLoaded(state, 'fleet', action.type === 'fleet-loaded', action), effects: NONE };
  }
}

/** The reducer: the next state and the effects to run. */
export function update(state: DashboardState, action: Action): Update {
  const { state: next, effects } = reduce(state, action);
  return { state: next === state ? state : normalize(next), effects };
}
