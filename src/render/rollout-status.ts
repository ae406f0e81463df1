// Text and JSON renderings of a rollout status. The JSON is a documented contract
// (docs/rollout-status.md, docs/schemas/rollout-status.v1.schema.json).
import type {
  NodeRollout,
  NodeRolloutState,
  RolloutStatus,
  RolloutVerdict,
  StagedSummary,
  WaveProgress,
} from '../core/staged-rollout/status.js';
import type { ContentRef, RolloutAction, RolloutPhase } from '../core/rollout-state/state.js';
import { plural, shortHash } from './text.js';
import { formatByteQuantity } from '../core/config/quantity.js';
import type { AvailableClass } from '../core/metrics/volume-usage.js';

export const ROLLOUT_FORMAT_VERSION = 1;

/** The exit codes of `rollout status` (docs/exit-codes.md). */
export const RolloutExit = { Complete: 0, Rejected: 1, NotDone: 6 } as const;

export function rolloutExitCode(verdict: RolloutVerdict): 0 | 1 | 6 {
  if (verdict === 'complete') return RolloutExit.Complete;
  if (verdict === 'rejected') return RolloutExit.Rejected;
  return RolloutExit.NotDone;
}

export interface NodeRolloutJson {
  readonly node: string;
  readonly state: NodeRolloutState;
  readonly appliedHash?: string;
  readonly generation?: number;
  readonly lastResult?: string;
  readonly reason?: string;
  readonly candidateHash?: string;
  readonly source?: string;
  readonly agentVersion?: string;
  /** RFC 3339 */
  readonly heartbeat?: string;
  readonly heartbeatAgeSeconds?: number;
  /** Available or Bound PVs of the node whose volume is not healthy (absent: none). */
  readonly volumesAbnormal?: number;
  /** Released PVs of the node quarantined: another disk is at their path (absent: none). */
  readonly volumesQuarantined?: number;
  /** Discovery entries of the node not published: their disk is a PV's or at two entries (absent: none). */
  readonly volumesConflicting?: number;
  /** Disks by rule: devices linked, skipped with a reason, and planned (plan mode) at the last pass (absent: none). */
  readonly devicesLinked?: number;
  readonly devicesSkipped?: number;
  readonly devicesPlanned?: number;
  /** The config of the agent's last finished discovery pass; `none`: none since it applied (absent: an older agent). */
  readonly lastPassHash?: string;
  /** Available PVs not reserved for a claim, per storage class (absent: none, or an older agent). */
  readonly available?: Readonly<Record<string, AvailableClass>>;
  /** Staged rollout: the config the node should run now, and its wave (absent: in none). */
  readonly expects?: 'candidate' | 'stable';
  readonly wave?: string;
}

export interface WaveJson {
  readonly name: string;
  readonly nodes: number;
  readonly open: boolean;
  readonly applied: number;
  readonly pending: number;
  readonly failed: number;
  readonly gone: number;
  readonly openedAt?: string;
  readonly bakingSince?: string;
}

export interface StagedJson {
  /** The operator's ConfigMap, NAMESPACE/NAME; its copies are NAME-candidate and NAME-stable. */
  readonly configMap: string;
  /** Absent when NAME-candidate carries no readable state (`problem` says why): every node runs stable. */
  readonly phase?: RolloutPhase;
  readonly candidate?: ContentRef;
  readonly stable?: ContentRef;
  /** The rollout is of the desired config; false: the controller has not taken up the change yet. */
  readonly followsDesired: boolean;
  readonly waves: readonly WaveJson[];
  readonly halt?: {
    readonly wave: string;
    readonly node: string;
    readonly reason: string;
    readonly at: string;
    readonly reverted: boolean;
  };
  readonly message?: string;
  readonly startedAt?: string;
  readonly updatedAt?: string;
  /** A request (`rollout pause|resume|abort|promote`) the controller has not taken up yet. */
  readonly request?: { readonly action: RolloutAction; readonly by?: string; readonly at: string };
  readonly problem?: string;
}

export interface RolloutJson {
  readonly formatVersion: typeof ROLLOUT_FORMAT_VERSION;
  readonly verdict: RolloutVerdict;
  /** --wait only: the timeout passed before the rollout was complete or rejected. */
  readonly timedOut?: boolean;
  readonly desired: { readonly hash: string; readonly source: string };
  readonly namespace: string;
  readonly instance: string;
  readonly checkedAt: string;
  readonly counts: Readonly<Record<NodeRolloutState, number>>;
  readonly nodes: readonly NodeRolloutJson[];
  readonly unknownNodes: readonly string[];
  /** The staged rollout of the desired ConfigMap, when its staged copies exist (additive in format 1). */
  readonly staged?: StagedJson;
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

function nodeJson(n: NodeRollout, now: number): NodeRolloutJson {
  const p = n.published;
  if (p === undefined) return { node: n.node, state: n.state, ...stagedNodeJson(n) };
  return {
    node: n.node,
    state: n.state,
    appliedHash: p.appliedHash,
    generation: p.generation,
    lastResult: p.result,
    ...(p.reason !== undefined ? { reason: p.reason } : {}),
    ...(p.candidateHash !== undefined ? { candidateHash: p.candidateHash } : {}),
    source: p.source,
    agentVersion: p.agentVersion,
    ...(p.heartbeatAt !== undefined
      ? { heartbeat: iso(p.heartbeatAt), heartbeatAgeSeconds: Math.max(0, Math.round((now - p.heartbeatAt) / 1000)) }
      : {}),
    ...(p.volumesAbnormal !== undefined ? { volumesAbnormal: p.volumesAbnormal } : {}),
    ...(p.volumesQuarantined !== undefined ? { volumesQuarantined: p.volumesQuarantined } : {}),
    ...(p.volumesConflicting !== undefined ? { volumesConflicting: p.volumesConflicting } : {}),
    ...(p.devicesLinked !== undefined ? { devicesLinked: p.devicesLinked } : {}),
    ...(p.devicesSkipped !== undefined ? { devicesSkipped: p.devicesSkipped } : {}),
    ...(p.devicesPlanned !== undefined ? { devicesPlanned: p.devicesPlanned } : {}),
    ...(p.lastPassHash !== undefined ? { lastPassHash: p.lastPassHash } : {}),
    ...(p.available !== undefined ? { available: p.available } : {}),
    ...stagedNodeJson(n),
  };
}

function stagedNodeJson(n: NodeRollout): Pick<NodeRolloutJson, 'expects' | 'wave'> {
  return {
    ...(n.expects !== undefined ? { expects: n.expects } : {}),
    ...(n.wave !== undefined ? { wave: n.wave } : {}),
  };
}

function contentJson(ref: ContentRef): ContentRef {
  return ref.hash === undefined ? { fingerprint: ref.fingerprint } : { fingerprint: ref.fingerprint, hash: ref.hash };
}

function waveJson(w: WaveProgress): WaveJson {
  return {
    name: w.name,
    nodes: w.nodes,
    open: w.open,
    applied: w.applied,
    pending: w.pending,
    failed: w.failed,
    gone: w.gone,
    ...(w.openedAt !== undefined ? { openedAt: iso(w.openedAt) } : {}),
    ...(w.bakingSince !== undefined ? { bakingSince: iso(w.bakingSince) } : {}),
  };
}

export function toStagedJson(staged: StagedSummary): StagedJson {
  const state = staged.state;
  const halt = state?.halt;
  const request = staged.request;
  return {
    configMap: `${staged.namespace}/${staged.name}`,
    ...(state !== undefined ? { phase: state.phase, candidate: contentJson(state.candidate) } : {}),
    ...(staged.stable !== undefined ? { stable: contentJson(staged.stable) } : {}),
    followsDesired: staged.followsDesired,
    waves: staged.waves.map(waveJson),
    ...(state !== undefined && halt !== undefined
      ? {
          halt: {
            // A halt before any wave: the canary could not be chosen.
            wave: state.waves[halt.wave]?.name ?? 'canary',
            node: halt.node,
            reason: halt.reason,
            at: iso(halt.at),
            reverted: state.reverted,
          },
        }
      : {}),
    ...(state?.message !== undefined ? { message: state.message } : {}),
    ...(state !== undefined ? { startedAt: iso(state.startedAt), updatedAt: iso(state.updatedAt) } : {}),
    ...(request !== undefined
      ? {
          request: {
            action: request.action,
            ...(request.by !== undefined ? { by: request.by } : {}),
            at: iso(request.at),
          },
        }
      : {}),
    ...(staged.stateProblem !== undefined ? { problem: staged.stateProblem } : {}),
  };
}

export function toRolloutJson(status: RolloutStatus, timedOut?: boolean): RolloutJson {
  return {
    formatVersion: ROLLOUT_FORMAT_VERSION,
    verdict: status.verdict,
    ...(timedOut !== undefined ? { timedOut } : {}),
    desired: { hash: status.desired.hash, source: status.desired.source },
    namespace: status.namespace,
    instance: status.instance,
    checkedAt: iso(status.checkedAt),
    counts: { ...status.counts },
    nodes: status.nodes.map((n) => nodeJson(n, status.checkedAt)),
    unknownNodes: [...status.unknownNodes],
    ...(status.staged !== undefined ? { staged: toStagedJson(status.staged) } : {}),
  };
}

function age(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 120) return `${String(s)}s`;
  if (s < 7200) return `${String(Math.round(s / 60))}m`;
  return `${String(Math.round(s / 3600))}h`;
}

const STATE_TEXT: Readonly<Record<NodeRolloutState, string>> = {
  'in-sync': 'in sync',
  pending: 'pending',
  rejected: 'rejected',
  stale: 'stale heartbeat',
  missing: 'missing agent',
};

/** The STATE column and the detail after it. */
export function stateCell(n: NodeRollout, now: number): { readonly state: string; readonly detail: string } {
  const p = n.published;
  switch (n.state) {
    case 'missing':
      return { state: STATE_TEXT.missing, detail: 'no status Lease for this node' };
    case 'stale':
      return {
        state: STATE_TEXT.stale,
        detail: p?.heartbeatAt === undefined ? 'no heartbeat' : `last heartbeat ${age(now - p.heartbeatAt)} ago`,
      };
    case 'rejected':
      return { state: STATE_TEXT.rejected, detail: `${p?.result ?? ''}: ${p?.reason ?? 'no reason given'}` };
    case 'pending':
      return {
        state: STATE_TEXT.pending,
        detail:
          n.passPending === true
            ? 'applied; no discovery pass under it has finished yet'
            : p !== undefined && p.reason !== undefined
              ? `last reload ${p.result} (another config): ${p.reason}`
              : 'has not read the desired config yet',
      };
    case 'in-sync':
      return { state: STATE_TEXT['in-sync'], detail: '' };
  }
}

/** The node's volumes that need a look (docs/disk-identity.md), or ''. */
function volumesDetail(n: NodeRollout): string {
  const p = n.published;
  const parts: string[] = [];
  if (p?.volumesAbnormal !== undefined) parts.push(`${plural(p.volumesAbnormal, 'volume')} abnormal`);
  if (p?.volumesQuarantined !== undefined) parts.push(`${plural(p.volumesQuarantined, 'PV')} quarantined`);
  if (p?.volumesConflicting !== undefined)
    parts.push(`${plural(p.volumesConflicting, 'entry', 'entries')} of a disk already used`);
  if (p?.devicesSkipped !== undefined) parts.push(`${plural(p.devicesSkipped, 'device')} a rule skips`);
  if (p?.devicesPlanned !== undefined) parts.push(`${plural(p.devicesPlanned, 'device')} planned`);
  return parts.join(', ');
}

function pad(text: string, width: number): string {
  return text + ' '.repeat(Math.max(0, width - text.length));
}

/** A rollout phase in words (`rollout status` and the dashboard's fleet pane). */
export const PHASE_TEXT: Readonly<Record<RolloutPhase, string>> = {
  progressing: 'progressing',
  paused: 'paused',
  halted: 'halted',
  complete: 'complete',
  aborted: 'aborted',
  invalid: 'candidate invalid',
};

/** The first line: the verdict, and in a staged rollout what holds it. */
function headline(status: RolloutStatus, timedOut: boolean | undefined): string {
  const c = status.counts;
  const total = status.nodes.length;
  const desired = shortHash(status.desired.hash);
  const state = status.staged?.state;
  if (status.verdict === 'complete')
    return `rollout complete: ${String(total)} of ${String(total)} nodes apply ${desired}`;
  if (status.verdict === 'rejected') {
    if (c.rejected === 0 && state !== undefined) {
      if (state.phase === 'halted') {
        const h = state.halt;
        const wave = h === undefined ? '' : ` at ${state.waves[h.wave]?.name ?? 'canary'}`;
        const who = h === undefined || h.node === '' ? '' : `: node ${h.node}`;
        return `rollout halted${wave}${who}; ${desired} is not rolled out further`;
      }
      return `rollout ${PHASE_TEXT[state.phase]}: ${desired} is not rolled out; every node returns to stable ${shortHash(status.staged?.stable?.hash)}`;
    }
    return `rollout rejected: ${String(c.rejected)} of ${String(total)} nodes rejected ${desired}`;
  }
  const word = timedOut === true ? 'timed out' : 'in progress';
  if (status.staged === undefined)
    return `rollout ${word}: ${String(c['in-sync'])} of ${String(total)} nodes apply ${desired}`;
  if (state === undefined || !status.staged.followsDesired)
    return `rollout ${word}: the staged rollout controller has not taken up ${desired} yet`;
  const open = status.staged.waves.filter((w) => w.open).length;
  return `rollout ${word} (staged, ${PHASE_TEXT[state.phase]}): ${String(open)} of ${String(status.staged.waves.length)} waves open; ${String(c['in-sync'])} of ${String(total)} nodes run the config of their wave`;
}

function ago(now: number, at: number): string {
  return `${age(now - at)} ago`;
}

/** The WAVES section of a staged rollout: the state's facts, one line per wave. */
function stagedLines(staged: StagedSummary, now: number): string[] {
  const state = staged.state;
  const lines: string[] = [];
  const stable = shortHash(staged.stable?.hash);
  if (state === undefined) {
    lines.push(
      `staged rollout of configmap ${staged.namespace}/${staged.name}: no rollout state (${staged.stateProblem ?? 'none'}); every node runs stable ${stable}`,
    );
  } else {
    const candidate = state.candidate.hash === undefined ? '(does not parse)' : shortHash(state.candidate.hash);
    lines.push(
      `staged rollout of configmap ${staged.namespace}/${staged.name}: ${PHASE_TEXT[state.phase]}; candidate ${candidate}, stable ${stable}; started ${ago(now, state.startedAt)}`,
    );
  }
  if (staged.waves.length > 0) {
    const header = ['WAVE', 'NODES', 'OPEN', 'APPLIED', 'PENDING', 'FAILED', ''];
    const rows = staged.waves.map((w) => [
      w.name,
      String(w.nodes),
      w.open ? 'yes' : 'no',
      String(w.applied),
      String(w.pending),
      String(w.failed),
      [
        w.gone > 0 ? `${String(w.gone)} gone` : '',
        w.openedAt !== undefined ? `opened ${ago(now, w.openedAt)}` : '',
        w.bakingSince !== undefined ? `baking since ${ago(now, w.bakingSince)}` : '',
      ]
        .filter((t) => t !== '')
        .join(', '),
    ]);
    lines.push(...table(header, rows));
  }
  lines.push(...stagedNotes(staged, now));
  return lines;
}

/** Under the waves: the halted node and why, the controller's message, a request not taken up yet. */
export function stagedNotes(staged: StagedSummary, now: number): string[] {
  const state = staged.state;
  const lines: string[] = [];
  const halt = state?.halt;
  if (state !== undefined && halt !== undefined) {
    const who = halt.node === '' ? '' : `node ${halt.node}: `;
    const after = state.reverted ? 'its nodes run stable again' : 'its nodes keep the candidate';
    lines.push(
      `halted at ${state.waves[halt.wave]?.name ?? 'canary'} ${ago(now, halt.at)}: ${who}${halt.reason}; ${after}`,
    );
  }
  if (state?.message !== undefined) lines.push(`message: ${state.message}`);
  const request = staged.request;
  if (request !== undefined)
    lines.push(
      `request: ${request.action}${request.by !== undefined ? ` by ${request.by}` : ''} ${ago(now, request.at)}, not taken up by the controller yet`,
    );
  return lines;
}

/** Columns padded to their widest cell; the last one is left as it is. */
function table(header: readonly string[], rows: readonly (readonly string[])[]): string[] {
  return alignColumns([header, ...rows]);
}

/** Rows of cells as lines, each column padded to its widest cell (the last one left as it is). */
export function alignColumns(rows: readonly (readonly string[])[]): string[] {
  const last = Math.max(0, ...rows.map((r) => r.length)) - 1;
  const widths = Array.from({ length: last + 1 }, (_, i) => Math.max(0, ...rows.map((r) => r[i]?.length ?? 0)));
  return rows.map((row) =>
    row
      .map((cell, i) => (i < last ? pad(cell, widths[i] ?? 0) : cell))
      .join('  ')
      .trimEnd(),
  );
}

/** The DETAIL of a pending node in a staged rollout: which config it should run. */
function stagedPendingDetail(n: NodeRollout, status: RolloutStatus): string {
  const staged = status.staged;
  if (staged === undefined || n.expects === undefined || n.state !== 'pending' || n.passPending === true) return '';
  const hash = n.expects === 'candidate' ? staged.state?.candidate.hash : staged.stable?.hash;
  return `should run the ${n.expects} ${shortHash(hash)}`;
}

export interface RolloutTextOptions {
  /** The staged rollout's section (its waves, the halt); false: the caller shows them its own way. */
  readonly staged?: boolean;
}

/** One line per node, a summary first; a staged rollout's waves above the table. */
export function renderRolloutText(status: RolloutStatus, timedOut?: boolean, options: RolloutTextOptions = {}): string {
  const now = status.checkedAt;
  const c = status.counts;
  const lines = [
    headline(status, timedOut),
    `desired: ${status.desired.hash} (${status.desired.source}); agents: ${status.instance} in namespace ${status.namespace}`,
    `in sync ${String(c['in-sync'])}, pending ${String(c.pending)}, rejected ${String(c.rejected)}, stale ${String(c.stale)}, missing ${String(c.missing)}`,
    '',
  ];
  if (status.staged !== undefined && options.staged !== false) lines.push(...stagedLines(status.staged, now), '');
  if (status.stagedProblem !== undefined) lines.push(`note: ${status.stagedProblem}`, '');
  const staged = status.staged !== undefined;
  const rows = status.nodes.map((n) => {
    const cell = stateCell(n, now);
    const pendingDetail = stagedPendingDetail(n, status);
    const detail = [pendingDetail !== '' ? pendingDetail : cell.detail, volumesDetail(n)]
      .filter((d) => d !== '')
      .join('; ');
    const applied = n.published === undefined ? '-' : shortHash(n.published.appliedHash);
    return staged ? [n.node, n.wave ?? '-', applied, cell.state, detail] : [n.node, applied, cell.state, detail];
  });
  const header = staged ? ['NODE', 'WAVE', 'APPLIED', 'STATE', 'DETAIL'] : ['NODE', 'APPLIED', 'STATE', 'DETAIL'];
  lines.push(...table(header, rows));
  lines.push(...availableLines(status));
  if (status.unknownNodes.length > 0)
    lines.push('', `status Leases of nodes not in the Node list (ignored): ${status.unknownNodes.join(', ')}`);
  return `${lines.join('\n')}\n`;
}

/**
 * One line per storage class with Available PVs on the nodes shown: how many, their bytes, on how
 * many nodes, and the largest claim a node can still take (which node). Nothing when none publish it.
 */
export function availableLines(status: Pick<RolloutStatus, 'nodes'>): string[] {
  const classes = new Map<string, { volumes: number; bytes: number; nodes: number; largest: number; at: string }>();
  for (const n of status.nodes) {
    for (const [name, a] of Object.entries(n.published?.available ?? {})) {
      const c = classes.get(name) ?? { volumes: 0, bytes: 0, nodes: 0, largest: 0, at: '' };
      classes.set(name, {
        volumes: c.volumes + a.volumes,
        bytes: c.bytes + a.bytes,
        nodes: c.nodes + 1,
        ...(a.largestBytes > c.largest ? { largest: a.largestBytes, at: n.node } : { largest: c.largest, at: c.at }),
      });
    }
  }
  if (classes.size === 0) return [];
  const rows = [...classes.keys()].sort().map((name) => {
    const c = classes.get(name) ?? { volumes: 0, bytes: 0, nodes: 0, largest: 0, at: '' };
    return [
      name,
      String(c.volumes),
      formatByteQuantity(c.bytes),
      String(c.nodes),
      `${formatByteQuantity(c.largest)} (${c.at})`,
    ];
  });
  return ['', ...table(['AVAILABLE CLASS', 'PVS', 'BYTES', 'NODES', 'LARGEST'], rows)];
}

/** `--wait`'s progress line (stderr), one per change. */
export function rolloutProgressLine(status: RolloutStatus): string {
  const c = status.counts;
  const counts = `in sync ${String(c['in-sync'])}/${String(status.nodes.length)}, pending ${String(c.pending)}, stale ${String(c.stale)}, missing ${String(c.missing)}`;
  const state = status.staged?.state;
  if (status.staged === undefined) return `waiting: ${counts}`;
  if (state === undefined || !status.staged.followsDesired)
    return `waiting: the controller has not taken up the change yet; ${counts}`;
  const open = status.staged.waves.filter((w) => w.open);
  const current = open[open.length - 1];
  const wave =
    current === undefined
      ? 'no wave open'
      : `${current.name} open (${String(open.length)} of ${String(status.staged.waves.length)} waves; ${String(current.applied)}/${String(current.nodes)} applied)`;
  return `waiting: ${PHASE_TEXT[state.phase]}, ${wave}; ${counts}`;
}
