// The dashboard as plain text, for `provisioner dashboard --once` and for output that is not a
// terminal (`kubectl exec` without -t, a pipe, a log): one snapshot of the agent's status, no
// colours, no cursor movement, and nothing of ink or React loaded. With --fleet, the fleet pane's
// summary and a staged rollout's waves after it.
import type { AgentStatusJson } from '../../core/agent/reload-types.js';
import { fleetSummary, fleetWaveLines } from './fleet.js';
import type { FleetRead } from './fleet.js';
import {
  cleanupsSection,
  configLines,
  devicesSection,
  errorLines,
  lastReloadLine,
  lineText,
  titleLine,
  volumesSection,
} from './lines.js';
import type { Line, Section } from './lines.js';
import { hasDevicePane, initialState } from './model.js';

function text(line: Line): string {
  return lineText(line).trimEnd();
}

function section(s: Section): string[] {
  return [
    text(s.title),
    ...(s.header !== undefined && s.rows.length > 0 ? [text(s.header)] : []),
    ...(s.rows.length > 0 ? s.rows : [s.empty]).map(text),
  ];
}

/** The Fleet section: how many nodes are in sync; a staged rollout's waves block under it. */
function fleetSection(fleet: FleetRead): string[] {
  if ('problem' in fleet) return [`Fleet  cannot read the rollout: ${fleet.problem}`];
  const { status } = fleet;
  return [
    `Fleet  ${fleetSummary(status)}  ${status.desired.source}`,
    ...(status.staged !== undefined ? fleetWaveLines(status.staged, status.checkedAt) : []),
    ...(status.stagedProblem !== undefined ? [`  note: ${status.stagedProblem}`] : []),
  ];
}

export function renderDashboardText(
  status: AgentStatusJson,
  options: { readonly now: number; readonly fleet?: FleetRead },
): string {
  // A snapshot: no size limit, no keys, and the status counts as just received.
  const state = initialState({ now: options.now, size: { columns: 10_000, rows: 10_000 }, status, keys: false });
  const cleanups = cleanupsSection(state);
  const lines = [
    text(titleLine(state, { connection: false })),
    ...configLines(state).map(text),
    text(lastReloadLine(state)),
    ...errorLines(state, Number.MAX_SAFE_INTEGER).map(text),
    '',
    ...section(volumesSection(state)),
    '',
    ...(hasDevicePane(state) ? [...section(devicesSection(state)), ''] : []),
    ...(cleanups.rows.length > 0 ? section(cleanups) : [text(cleanups.title)]),
    '',
    ...(options.fleet !== undefined ? [...fleetSection(options.fleet), ''] : []),
    'Live events, reload (r) and diff (d): run in a terminal, e.g. kubectl exec -it <pod> -- provisioner dashboard',
  ];
  return `${lines.join('\n')}\n`;
}
