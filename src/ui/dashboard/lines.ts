// The dashboard's text, as lines of styled segments: the ink view colours them (or not) and
// truncates them to the terminal width; the plain snapshot joins them. Pure, no I/O.
import type { AgentStatusJson, CleanupStatus, ReloadResult } from '../../core/agent/reload-types.js';
import {
  agentNow,
  cleanupsInFlight,
  configSync,
  deviceState,
  HELP_KEY_WIDTH,
  HELP_LINES,
  rejectedErrors,
  selectedDevices,
  visibleEvents,
  volumeRows,
} from './model.js';
import type { DashboardState, EventEntry, Pane, Severity, SyncState, VolumeRow } from './model.js';
import type { DeviceVerdict } from '../../core/disk-rules/decide.js';
import { plural, shortHash } from '../../render/text.js';

export type Tone =
  'plain' | 'title' | 'focus' | 'dim' | 'ok' | 'warn' | 'bad' | 'accent' | 'added' | 'removed' | 'hunk' | 'key';

export interface Segment {
  readonly text: string;
  readonly tone?: Tone;
}

export type Line = readonly Segment[];

export function lineText(line: Line): string {
  return line.map((s) => s.text).join('');
}

const seg = (text: string, tone?: Tone): Segment => (tone === undefined ? { text } : { text, tone });

// ---- small formatters ---------------------------------------------------------------------------

/** A compact duration: 850ms, 12s, 3m04s, 2h05m, 3d04h. */
export function formatAge(ms: number): string {
  const v = Math.max(0, ms);
  if (v < 1000) return `${Math.round(v)}ms`;
  const s = Math.floor(v / 1000);
  if (s < 60) return `${s}s`;
  const pad = (n: number): string => String(n).padStart(2, '0');
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m${pad(s % 60)}s`;
  const h = Math.floor(m / 60);
  if (h < 24) return `${h}h${pad(m % 60)}m`;
  return `${Math.floor(h / 24)}d${pad(h % 24)}h`;
}

/** HH:MM:SS in the local time zone (UTC in most pods). */
export function clockTime(at: number): string {
  const d = new Date(at);
  const pad = (n: number): string => String(n).padStart(2, '0');
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

function pad(text: string, width: number): string {
  return text.length > width ? `${text.slice(0, Math.max(0, width - 1))}… ` : text.padEnd(width + 1);
}

const SEVERITY_TONE: Readonly<Record<Severity, Tone>> = { info: 'plain', warn: 'warn', error: 'bad' };

export const SYNC_LABEL: Readonly<Record<SyncState, string>> = {
  'in-sync': 'in sync',
  propagating: 'propagating',
  rejected: 'rejected',
  refused: 'refused',
  unknown: 'unknown',
};

const SYNC_TONE: Readonly<Record<SyncState, Tone>> = {
  'in-sync': 'ok',
  propagating: 'warn',
  rejected: 'bad',
  refused: 'warn',
  unknown: 'dim',
};

/** One sentence about the outcome of a reload, in the words of `provisioner reload`. */
export function reloadSummary(r: ReloadResult): string {
  const took = `${Math.round(r.durationMs)} ms`;
  switch (r.outcome) {
    case 'applied': {
      const forced = r.forced ? ' (forced)' : '';
      const what =
        r.changes.length === 0 ? 'no config changes: the sync loop restarted' : plural(r.changes.length, 'change');
      return `Applied${forced}: generation ${r.generation} serves ${shortHash(r.appliedHash)} (${what}, ${took}).`;
    }
    case 'noop':
      return `No change: generation ${r.generation} already serves ${shortHash(r.appliedHash)} (${took}).`;
    case 'rejected': {
      const errors = r.issues.filter((i) => i.severity === 'error').length;
      return `Rejected: the config read is invalid (${plural(errors, 'problem')}); generation ${r.generation} keeps serving ${shortHash(r.appliedHash)}.`;
    }
    case 'refused':
      return `Refused by the reload guard (needs --allow ${(r.needsAllow ?? []).join(',')}); generation ${r.generation} keeps serving ${shortHash(r.appliedHash)}.`;
    case 'rolled-back':
      return `Rolled back: ${r.error ?? 'no reason given'}; generation ${r.generation} serves ${shortHash(r.appliedHash)} again.`;
    case 'failed':
      return `Failed: ${r.error ?? 'no reason given'}; generation ${r.generation} serves ${shortHash(r.appliedHash)}.`;
  }
}

function outcomeTone(r: ReloadResult): Tone {
  if (r.outcome === 'applied' || r.outcome === 'noop') return 'ok';
  return r.outcome === 'rejected' || r.outcome === 'refused' ? 'warn' : 'bad';
}

// ---- header -------------------------------------------------------------------------------------

export function titleLine(state: DashboardState, options: { connection?: boolean } = {}): Line {
  const s = state.status;
  const parts: Segment[] = [seg('provisioner dashboard', 'title')];
  // Most important first: a narrow terminal cuts the end off.
  const c = state.connection;
  if (options.connection !== false) {
    if (c.state === 'connected') parts.push(seg('  connected', 'ok'));
    else if (c.state === 'connecting') parts.push(seg('  connecting…', 'warn'));
    else parts.push(seg('  reconnecting…', 'warn'));
  }
  if (s !== undefined) {
    parts.push(
      seg('  node '),
      seg(s.node, 'accent'),
      seg(`  up ${formatAge(agentNow(state) - s.startedAt)}`),
      s.ready ? seg('  ready', 'ok') : seg('  not ready', 'warn'),
      seg(`  agent ${s.version}  pid ${s.pid}`),
    );
  }
  return parts;
}

/** The on-disk hash; an invalid or unreadable source has none, so say which. */
function onDiskLabel(s: AgentStatusJson): string {
  if (s.config.onDiskHash !== undefined) return shortHash(s.config.onDiskHash);
  if (s.rejected === undefined) return '-';
  return s.rejected.outcome === 'rejected' ? '(invalid)' : '(unreadable)';
}

/** The config: generation, sync state and source; then the applied hash against the on-disk one. */
export function configLines(state: DashboardState): [Line, Line] {
  const s = state.status;
  if (s === undefined)
    return [[seg('config', 'title'), seg('  waiting for the agent’s status', 'dim')], [seg('hashes', 'title')]];
  const sync = configSync(s);
  const first: Segment[] = [
    seg('config', 'title'),
    seg(`  generation ${s.generation}  `),
    seg(`[${SYNC_LABEL[sync]}]`, SYNC_TONE[sync]),
  ];
  if (s.reloadPending) first.push(seg('  reload pending', 'warn'));
  if (s.config.subPath) first.push(seg('  subPath mount: never updates', 'warn'));
  first.push(seg(`  ${s.config.source}`, 'dim'));
  const second: Segment[] = [
    seg('hashes', 'title'),
    seg('  applied '),
    seg(shortHash(s.config.appliedHash), 'accent'),
    seg('  on disk '),
    seg(onDiskLabel(s), sync === 'in-sync' ? 'accent' : SYNC_TONE[sync]),
  ];
  return [first, second];
}

export function lastReloadLine(state: DashboardState): Line {
  const s = state.status;
  const parts: Segment[] = [seg('last reload', 'title')];
  const r = s?.lastReload;
  if (r === undefined) parts.push(seg('  none since the agent started', 'dim'));
  else {
    const ago = formatAge(agentNow(state) - (r.startedAt + r.durationMs));
    parts.push(seg('  '), seg(r.outcome, outcomeTone(r)), seg(` (${r.trigger}${r.forced ? ', forced' : ''})`));
    if (r.outcome === 'applied') parts.push(seg(` ${plural(r.changes.length, 'change')}`));
    parts.push(seg(`  ${Math.round(r.durationMs)} ms, ${ago} ago`));
  }
  if (s?.lastPass !== undefined) {
    const p = s.lastPass;
    parts.push(
      seg(
        `  last pass ${formatAge(agentNow(state) - p.at)} ago (+${p.created} -${p.deleted}, ${p.durationMs} ms)`,
        'dim',
      ),
    );
  }
  return parts;
}

/** The rejected config's errors, at most `max` lines (the last one says how many more). */
export function errorLines(state: DashboardState, max: number): Line[] {
  const errors = rejectedErrors(state);
  if (errors.length === 0 || max <= 0) return [];
  const shown = errors.length > max ? errors.slice(0, max - 1) : errors;
  const lines: Line[] = shown.map((e) => [seg('  error: ', 'bad'), seg(e)]);
  if (errors.length > max)
    lines.push([seg(`  … and ${errors.length - shown.length} more (d shows the on-disk config)`, 'bad')]);
  return lines;
}

// ---- sections -----------------------------------------------------------------------------------

function sectionTitle(
  state: DashboardState,
  pane: Pane | undefined,
  name: string,
  detail: string,
  range?: { offset: number; shown: number; total: number },
): Line {
  // The focus marker only means something when keys can move it.
  const focused = state.keys && pane !== undefined && state.focus === pane && state.overlay === undefined;
  const marker = state.keys ? `${focused ? '>' : ' '} ` : '';
  const parts: Segment[] = [seg(`${marker}${name}`, focused ? 'focus' : 'title'), seg(`  ${detail}`, 'dim')];
  if (range !== undefined && range.total > range.shown && range.shown > 0) {
    const last = Math.min(range.total, range.offset + range.shown);
    parts.push(seg(`  ${range.offset + 1}-${last} of ${range.total}`, 'dim'));
  }
  if (state.filter !== '') parts.push(seg(`  filter "${state.filter}"`, 'warn'));
  return parts;
}

interface Columns {
  readonly name: number;
  readonly capacity: number;
  readonly phase: number;
  readonly claim: number;
}

function columnsFor(rows: readonly VolumeRow[]): Columns {
  let name = 'PV'.length;
  let claim = 'CLAIM'.length;
  let capacity = 'CAPACITY'.length;
  let phase = 'Available'.length;
  for (const r of rows) {
    if (r.kind !== 'pv') continue;
    name = Math.max(name, r.name.length);
    claim = Math.max(claim, (r.claim ?? '-').length);
    capacity = Math.max(capacity, r.capacity.length);
    phase = Math.max(phase, r.phase.length);
  }
  return {
    name: Math.min(name, 28),
    capacity: Math.min(capacity, 10),
    phase: Math.min(phase, 11),
    claim: Math.min(claim, 24),
  };
}

const PHASE_TONE: Readonly<Record<string, Tone>> = {
  Available: 'ok',
  Bound: 'accent',
  Released: 'warn',
  Failed: 'bad',
  Terminating: 'warn',
};

function volumeRowLine(row: VolumeRow, cols: Columns): Line {
  switch (row.kind) {
    case 'class': {
      const extra = row.skipped > 0 ? `, ${row.skipped} skipped` : '';
      const parts: Segment[] = [
        seg(row.name, 'title'),
        seg(`  ${row.hostDir}`, 'dim'),
        seg(`  (${plural(row.pvs, 'PV')}${extra})`),
      ];
      if (row.problem !== undefined) parts.push(seg(`  problem: ${row.problem}`, 'bad'));
      return parts;
    }
    case 'pv':
      return [
        seg(`  ${pad(row.name, cols.name)}`),
        seg(pad(row.capacity, cols.capacity)),
        seg(pad(row.phase, cols.phase), PHASE_TONE[row.phase] ?? 'plain'),
        seg(pad(row.claim ?? '-', cols.claim), row.claim === undefined ? 'dim' : 'plain'),
        seg(row.path, 'dim'),
        ...(row.condition !== undefined ? [seg(`  ${row.condition}`, 'bad')] : []),
      ];
    case 'skipped':
      // An entry of a disk already used (one disk, one PV) is a safety finding, not routine.
      return [
        seg(
          `  skipped ${row.entry}: ${row.reason}${row.message === '' ? '' : ` (${row.message})`}`,
          row.reason === 'identity-conflict' ? 'bad' : 'dim',
        ),
      ];
  }
}

export interface Section {
  readonly title: Line;
  /** The column header (volumes only). */
  readonly header?: Line;
  /** Every row; the view shows `rows.slice(offset, offset + height)`. */
  readonly rows: readonly Line[];
  /** Shown instead of rows when there are none. */
  readonly empty: Line;
}

export function volumesSection(state: DashboardState, window?: { offset: number; shown: number }): Section {
  const rows = volumeRows(state);
  const classes = state.status?.classes ?? [];
  const pvs = classes.reduce((n, c) => n + c.persistentVolumes.length, 0);
  const cols = columnsFor(rows);
  const detail =
    state.status === undefined
      ? 'waiting for the agent'
      : `${plural(classes.length, 'class', 'classes')}, ${plural(pvs, 'PV')}`;
  return {
    title: sectionTitle(state, 'volumes', 'Volumes', detail, window && { ...window, total: rows.length }),
    header: [
      seg(
        `  ${pad('PV', cols.name)}${pad('CAPACITY', cols.capacity)}${pad('PHASE', cols.phase)}${pad('CLAIM', cols.claim)}PATH`,
        'dim',
      ),
    ],
    rows: rows.map((r) => volumeRowLine(r, cols)),
    empty: [seg(state.filter !== '' ? '  no volume matches the filter' : '  no classes configured', 'dim')],
  };
}

const DEVICE_TONE: Readonly<Record<DeviceVerdict['kind'], Tone>> = {
  linked: 'ok',
  carved: 'ok',
  link: 'accent',
  carve: 'accent',
  skip: 'warn',
};

function deviceLine(v: DeviceVerdict, widths: { readonly device: number; readonly className: number }): Line {
  // A device still settling is not a problem: it is taken when its size has been stable long enough.
  const settling = v.kind === 'skip' && v.reason === 'settling';
  return [
    seg(`  ${pad(v.device, widths.device)}`),
    seg(pad(v.className, widths.className), 'dim'),
    seg(deviceState(v), settling ? 'dim' : DEVICE_TONE[v.kind]),
    ...(v.kind === 'skip' ? [seg(`  ${v.detail}`, 'dim')] : []),
  ];
}

/** `8 devices selected (3 linked, 2 planned, 2 skipped), 5 shown`: the counts are the agent's (lastPass.devices). */
function devicesDetail(state: DashboardState, matching: number, shown: number | undefined): string {
  const all = state.status?.devices ?? [];
  const counts = state.status?.lastPass?.devices;
  const parts = [
    `${plural(all.length, 'device')} selected`,
    ...(counts !== undefined
      ? [` (${counts.linked} linked, ${counts.planned} planned, ${counts.skipped} skipped)`]
      : []),
    ...(state.filter !== '' ? [`, ${matching} match`] : []),
    ...(shown !== undefined && shown < matching ? [`, ${shown} shown`] : []),
  ];
  return parts.join('');
}

/**
 * The devices the disk rules select (docs/disk-rules.md), at most `shown` rows in the view: skipped
 * ones first. Only shown when there are some (hasDevicePane).
 */
export function devicesSection(state: DashboardState, shown?: number): Section {
  const list = selectedDevices(state);
  const widths = {
    device: Math.min(16, Math.max(0, ...list.map((v) => v.device.length))),
    className: Math.min(24, Math.max(0, ...list.map((v) => v.className.length))),
  };
  return {
    title: sectionTitle(state, undefined, 'Devices', devicesDetail(state, list.length, shown)),
    rows: list.map((v) => deviceLine(v, widths)),
    empty: [],
  };
}

function cleanupLine(state: DashboardState, c: CleanupStatus): Line {
  const now = agentNow(state);
  const parts: Segment[] = [
    seg(`  ${pad(c.pv, 20)}`),
    seg(pad(c.method, 7)),
    seg(pad(c.state, 9), c.state === 'failed' ? 'bad' : c.state === 'running' ? 'accent' : 'plain'),
    seg(pad(formatAge(now - c.startedAt), 7)),
    seg(`attempt ${c.attempts}`),
  ];
  if (c.retryAt !== undefined && c.state === 'failed')
    parts.push(seg(`  retry in ${formatAge(c.retryAt - now)}`, 'warn'));
  if (c.lastError !== undefined) parts.push(seg(`  ${c.lastError}`, 'bad'));
  return parts;
}

export function cleanupsSection(state: DashboardState, shown?: number): Section {
  const list = cleanupsInFlight(state);
  const detail =
    list.length === 0
      ? 'none in flight'
      : `${list.length} in flight${shown !== undefined && shown < list.length ? `, ${shown} shown` : ''}`;
  return {
    title: sectionTitle(state, undefined, 'Cleanups', detail),
    rows: list.map((c) => cleanupLine(state, c)),
    empty: [],
  };
}

function eventLine(e: EventEntry): Line {
  return [seg(`  ${clockTime(e.at)} `, 'dim'), seg(pad(e.kind, 10), 'dim'), seg(e.text, SEVERITY_TONE[e.severity])];
}

export function eventsSection(state: DashboardState, window?: { offset: number; shown: number }): Section {
  const events = visibleEvents(state);
  return {
    title: sectionTitle(
      state,
      'events',
      'Events',
      state.filter === '' ? 'newest first' : `${events.length} of ${state.events.length} match, newest first`,
      window && { ...window, total: events.length },
    ),
    rows: events.map(eventLine),
    empty: [seg(state.filter !== '' ? '  no event matches the filter' : '  none yet', 'dim')],
  };
}

// ---- footer and overlays ------------------------------------------------------------------------

export function statusLine(state: DashboardState): Line {
  if (state.editingFilter) {
    return [seg('filter: ', 'key'), seg(state.filter), seg('_', 'focus'), seg('  Enter keeps, Esc clears', 'dim')];
  }
  const parts: Segment[] = [];
  const c = state.connection;
  if (c.state === 'reconnecting') {
    const wait = formatAge(Math.max(0, c.retryAt - state.now));
    parts.push(
      seg(
        `agent unreachable for ${formatAge(state.now - c.since)} (attempt ${c.attempt}, next in ${wait}): ${c.reason}`,
        'warn',
      ),
    );
  } else if (state.notice !== undefined) {
    parts.push(seg(state.notice.text, SEVERITY_TONE[state.notice.severity]));
  } else {
    const r = state.reload;
    if (r.phase === 'running') parts.push(seg(r.force ? 'reload (forced): running…' : 'reload: running…', 'warn'));
    else if (r.phase === 'done')
      parts.push(seg('reload: ', 'key'), seg(reloadSummary(r.result), outcomeTone(r.result)));
    else if (r.phase === 'error') parts.push(seg(`reload: ${r.message}`, 'bad'));
  }
  if (state.filter !== '')
    parts.push(seg(`${parts.length > 0 ? '  ' : ''}filter "${state.filter}" (Esc clears)`, 'warn'));
  return parts;
}

export function keysLine(state: DashboardState): Line {
  if (!state.keys) return [seg('read-only: stdin is not a terminal (use kubectl exec -it); Ctrl-C quits', 'dim')];
  const keys: [string, string][] = [
    ['r', 'reload'],
    ['d', 'diff'],
    ['/', 'filter'],
    ['Tab', 'pane'],
    ['Up/Dn PgUp/PgDn', 'scroll'],
    ['?', 'help'],
    ['q', 'quit'],
  ];
  return keys.flatMap(([k, what], i) => [seg(`${i === 0 ? '' : '  '}${k}`, 'key'), seg(` ${what}`, 'dim')]);
}

export function helpLines(): Line[] {
  return HELP_LINES.map(([k, what]) => [seg(`  ${k.padEnd(HELP_KEY_WIDTH - 2)}`, 'key'), seg(what)]);
}

/** The line without its first `columns` characters (an overlay scrolled sideways). */
export function sliceLine(line: Line, columns: number): Line {
  if (columns <= 0) return line;
  let skip = columns;
  const out: Segment[] = [];
  for (const s of line) {
    const chars = Array.from(s.text);
    if (skip >= chars.length) {
      skip -= chars.length;
      continue;
    }
    out.push({ ...s, text: chars.slice(skip).join('') });
    skip = 0;
  }
  return out;
}

/** The unified diff and change list, coloured by their first characters. */
export function diffLine(text: string): Line {
  if (text.startsWith('+++') || text.startsWith('---')) return [seg(text, 'title')];
  if (text.startsWith('@@')) return [seg(text, 'hunk')];
  if (text.startsWith('+')) return [seg(text, 'added')];
  if (text.startsWith('-')) return [seg(text, 'removed')];
  if (/^(Changes|Summary):/u.test(text)) return [seg(text, 'title')];
  return [seg(text)];
}

/** First line of the fleet pane's waves block (fleet.ts writes it, fleetLine colours it). */
export const WAVES_HEAD = 'Staged rollout';

/**
 * The fleet pane's lines: the waves block's head as a title, a wave with failed nodes and the
 * halt in red; the lines of `rollout status` below it as they are.
 */
export function fleetLine(text: string): Line {
  if (text.startsWith(`${WAVES_HEAD}  `)) return [seg(text, 'title')];
  if (text.startsWith('  halted at ') || /^ {2}\S+ +(?:open|not open) +\d+\/\d+ applied +[1-9]\d* failed/u.test(text))
    return [seg(text, 'bad')];
  return [seg(text)];
}

export function tooSmallLine(state: DashboardState): Line {
  return [seg(`terminal too small (${state.size.columns}x${state.size.rows}); need 40x12. q quits`, 'warn')];
}
