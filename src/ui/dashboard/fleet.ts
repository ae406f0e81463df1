// The fleet pane's text (`f`, and the snapshot's Fleet section with --fleet): a staged rollout's
// waves in a compact block (one line per wave, then the halt), above the lines of
// `provisioner rollout status`. Pure; the words and helpers are those of render/rollout-status.ts.
import { ProvisionerError } from '../../core/errors.js';
import type { RolloutStatus, StagedSummary, WaveProgress } from '../../core/staged-rollout/status.js';
import { alignColumns, PHASE_TEXT, renderRolloutText, stagedNotes } from '../../render/rollout-status.js';
import { shortHash } from '../../render/text.js';
import { WAVES_HEAD } from './lines.js';

/** Indent of the lines under the waves block's head. */
const INDENT = '  ';

function waveCells(w: WaveProgress): string[] {
  return [
    w.name,
    w.open ? 'open' : 'not open',
    `${String(w.applied)}/${String(w.nodes)} applied`,
    `${String(w.failed)} failed${w.gone > 0 ? `, ${String(w.gone)} gone` : ''}`,
  ];
}

/**
 * A staged rollout in a few lines: the phase and the candidate, one line per wave (open or not,
 * applied of its nodes, failed), then the halted node and why, the controller's message, and a
 * request not taken up yet.
 */
export function fleetWaveLines(staged: StagedSummary, now: number): string[] {
  const state = staged.state;
  const stable = shortHash(staged.stable?.hash);
  if (state === undefined)
    return [`${WAVES_HEAD}  no rollout state (${staged.stateProblem ?? 'none'}); every node runs stable ${stable}`];
  const candidate = state.candidate.hash === undefined ? '(does not parse)' : shortHash(state.candidate.hash);
  const open = staged.waves.filter((w) => w.open).length;
  const behind = staged.followsDesired ? '' : '; not the desired config yet';
  return [
    `${WAVES_HEAD}  ${PHASE_TEXT[state.phase]}  ${String(open)} of ${String(staged.waves.length)} waves open  candidate ${candidate}${behind}`,
    ...alignColumns(staged.waves.map(waveCells)).map((line) => INDENT + line),
    ...stagedNotes(staged, now).map((line) => INDENT + line),
  ];
}

/** The fleet pane: without a staged rollout exactly `rollout status`'s text; with one, its waves block first. */
export function fleetPaneLines(status: RolloutStatus): string[] {
  const staged = status.staged;
  if (staged === undefined) return renderRolloutText(status).trimEnd().split('\n');
  return [
    ...fleetWaveLines(staged, status.checkedAt),
    '',
    ...renderRolloutText(status, undefined, { staged: false }).trimEnd().split('\n'),
  ];
}

/** The pane's title and the snapshot's Fleet line: how many nodes run what they should. */
export function fleetSummary(status: RolloutStatus): string {
  return `${String(status.counts['in-sync'])} of ${String(status.nodes.length)} nodes in sync`;
}

/** The fleet as read, or why it could not be (a typed error: the pane or the snapshot says it). */
export type FleetRead = { readonly status: RolloutStatus } | { readonly problem: string };

export async function readFleet(read: () => Promise<RolloutStatus>): Promise<FleetRead> {
  try {
    return { status: await read() };
  } catch (err) {
    if (err instanceof ProvisionerError) return { problem: err.message };
    throw err;
  }
}
