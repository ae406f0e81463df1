// How the dashboard's rows are shared out for a terminal size. Pure: the reducer uses it to clamp
// scroll offsets, the ink view to size its sections, so both always agree.

export interface Size {
  readonly columns: number;
  readonly rows: number;
}

/** Smallest terminal the full view fits in; below it the view shows a one-line notice. */
export const MIN_COLUMNS = 40;
export const MIN_ROWS = 12;

/** Header: the title, config, hashes and last-reload lines, then at most this many error lines of a rejected config. */
export const HEADER_LINES = 4;
export const MAX_ERROR_LINES = 3;
export const FOOTER_LINES = 2;
/** At most this many cleanup rows; more are scrolled with the volumes' filter (the title says how many). */
export const MAX_CLEANUP_ROWS = 3;
/** At most this many device rows; skipped devices come first, the filter finds the others (the title counts them all). */
export const MAX_DEVICE_ROWS = 5;

export interface Layout {
  readonly tooSmall: boolean;
  /** Header lines, error lines included. */
  readonly header: number;
  /** Error lines of a rejected config shown in the header. */
  readonly errors: number;
  /** Data rows of each section (titles and the column header not counted). */
  readonly volumes: number;
  readonly cleanups: number;
  readonly devices: number;
  /** Whether the Devices section (its title at least) is shown: the rules select devices. */
  readonly devicesPane: boolean;
  readonly events: number;
  /** Content rows of an overlay panel (its border and title not counted). */
  readonly overlay: number;
  readonly footer: number;
  /** Rows between header and footer. */
  readonly body: number;
}

export interface LayoutCounts {
  readonly rejectedErrors: number;
  readonly cleanups: number;
  readonly volumeRows: number;
  /** Devices the rules select (after the filter); absent: no Devices pane (no rules, or nothing selected). */
  readonly devices?: number;
}

const TOO_SMALL: Layout = {
  tooSmall: true,
  header: 0,
  errors: 0,
  volumes: 0,
  cleanups: 0,
  devices: 0,
  devicesPane: false,
  events: 0,
  overlay: 0,
  footer: 0,
  body: 0,
};

export function computeLayout(size: Size, counts: LayoutCounts): Layout {
  if (size.columns < MIN_COLUMNS || size.rows < MIN_ROWS) return TOO_SMALL;
  // Titles: volumes (and its column header), devices (when shown), cleanups, events.
  const devicesPane = counts.devices !== undefined;
  const fixed = 2 + (devicesPane ? 1 : 0) + 1 + 1;
  // Error lines never squeeze the lists below two data rows.
  const room = size.rows - HEADER_LINES - FOOTER_LINES - fixed - 2;
  const errors = Math.max(0, Math.min(counts.rejectedErrors, MAX_ERROR_LINES, room));
  const header = HEADER_LINES + errors;
  const body = size.rows - header - FOOTER_LINES;
  const cleanups = Math.max(0, Math.min(counts.cleanups, MAX_CLEANUP_ROWS, body - fixed - 2));
  // Devices give way before cleanups (those are in flight); neither squeezes the lists below two rows.
  const devices = Math.max(0, Math.min(counts.devices ?? 0, MAX_DEVICE_ROWS, body - fixed - cleanups - 2));
  const data = Math.max(0, body - fixed - cleanups - devices);
  // Volumes take up to 60 % (at least one row), events the rest; unused volume rows go to events.
  const volumes = Math.min(Math.max(1, counts.volumeRows), Math.max(1, Math.floor(data * 0.6)), data);
  const events = data - volumes;
  return {
    tooSmall: false,
    header,
    errors,
    volumes,
    cleanups,
    devices,
    devicesPane,
    events,
    overlay: Math.max(0, body - 3),
    footer: FOOTER_LINES,
    body,
  };
}
