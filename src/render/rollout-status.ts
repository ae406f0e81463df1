// Text and JSON renderings of a rollout status. The JSON is a documented contract
// (docs/rollout-status.md, docs/schemas/rollout-status.v1.schema.json).
import type { NodeRollout, NodeRolloutState, RolloutStatus, RolloutVerdict } from '../core/fleet/rollout.js';
import { plural, shortHash } from './text.js';

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
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

function nodeJson(n: NodeRollout, now: number): NodeRolloutJson {
  const p = n.published;
  if (p === undefined) return { node: n.node, state: n.state };
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
          p !== undefined && p.reason !== undefined
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
  return parts.join(', ');
}

function pad(text: string, width: number): string {
  return text + ' '.repeat(Math.max(0, width - text.length));
}

/** One line per node, a summary first. */
export function renderRolloutText(status: RolloutStatus, timedOut?: boolean): string {
  const now = status.checkedAt;
  const c = status.counts;
  const total = status.nodes.length;
  const headline =
    status.verdict === 'complete'
      ? `rollout complete: ${String(total)} of ${String(total)} nodes apply ${shortHash(status.desired.hash)}`
      : status.verdict === 'rejected'
        ? `rollout rejected: ${String(c.rejected)} of ${String(total)} nodes rejected ${shortHash(status.desired.hash)}`
        : `rollout ${timedOut === true ? 'timed out' : 'in progress'}: ${String(c['in-sync'])} of ${String(total)} nodes apply ${shortHash(status.desired.hash)}`;
  const lines = [
    headline,
    `desired: ${status.desired.hash} (${status.desired.source}); agents: ${status.instance} in namespace ${status.namespace}`,
    `in sync ${String(c['in-sync'])}, pending ${String(c.pending)}, rejected ${String(c.rejected)}, stale ${String(c.stale)}, missing ${String(c.missing)}`,
    '',
  ];
  const rows = status.nodes.map((n) => {
    const cell = stateCell(n, now);
    const detail = [cell.detail, volumesDetail(n)].filter((d) => d !== '').join('; ');
    return [n.node, n.published === undefined ? '-' : shortHash(n.published.appliedHash), cell.state, detail];
  });
  const header = ['NODE', 'APPLIED', 'STATE', 'DETAIL'];
  const widths = [0, 1, 2].map((i) => Math.max(header[i]?.length ?? 0, ...rows.map((r) => r[i]?.length ?? 0)));
  for (const row of [header, ...rows]) {
    lines.push(
      row
        .map((cell, i) => (i < 3 ? pad(cell, widths[i] ?? 0) : cell))
        .join('  ')
        .trimEnd(),
    );
  }
  if (status.unknownNodes.length > 0)
    lines.push('', `status Leases of nodes not in the Node list (ignored): ${status.unknownNodes.join(', ')}`);
  return `${lines.join('\n')}\n`;
}
