// `provisioner rollout status`: the desired config's hash against every node's published applied
// state. Classification and the summary are pure; readRollout does the reads (one list of Leases,
// one metadata list of Nodes, both paginated), waitForRollout repeats it until done.
import type { Clock } from '../clock.js';
import { isAborted } from '../clock.js';
import { snapshotFromDirectoryFiles } from '../config/decode/layout.js';
import { loadConfig } from '../config/source/load.js';
import { parseConfigSnapshot } from '../config/decode/parse.js';
import { ConfigSourceError, StartupError } from '../errors.js';
import { isNotFound, KubeApiError } from '../kube/cluster.js';
import type { ListOptions, ResourceClient } from '../kube/cluster.js';
import type { ConfigMap, Lease, Node, ObjectList, ObjectMeta } from '../kube/objects.js';
import type { AppliedResult, PublishedState } from './applied-state.js';
import { stateFromLease, statusSelector } from './applied-state.js';
import { errorMessage } from '../unknown-values.js';

export const NODE_ROLLOUT_STATES = ['in-sync', 'pending', 'rejected', 'stale', 'missing'] as const;
export type NodeRolloutState = (typeof NODE_ROLLOUT_STATES)[number];

/** Outcomes that leave the previous config serving. */
const NOT_APPLIED: readonly AppliedResult[] = ['rejected', 'refused', 'rolled-back', 'failed'];

export interface NodeRollout {
  readonly node: string;
  readonly state: NodeRolloutState;
  /** What the agent published (absent for a missing agent). */
  readonly published?: PublishedState;
}

export type RolloutVerdict = 'complete' | 'rejected' | 'in-progress';

export interface DesiredConfig {
  readonly hash: string;
  /** `configmap NS/NAME` or the file/directory path. */
  readonly source: string;
}

export interface RolloutStatus {
  readonly desired: DesiredConfig;
  readonly namespace: string;
  readonly instance: string;
  readonly checkedAt: number;
  readonly nodes: readonly NodeRollout[];
  readonly counts: Readonly<Record<NodeRolloutState, number>>;
  /** Published states of nodes that are not in the Node list (deleted, or outside --selector). */
  readonly unknownNodes: readonly string[];
  readonly verdict: RolloutVerdict;
}

/**
 * One node's state. A stale heartbeat hides what it published (the agent may be gone); a node
 * rejected the desired config only when its last reload read exactly that config and did not
 * apply it. A failure on another config (an older one, or one that does not parse while the
 * desired one does) means the node has not read the desired config yet: pending.
 */
export function classifyNode(
  node: string,
  desiredHash: string,
  published: PublishedState | undefined,
  now: number,
): NodeRollout {
  if (published === undefined) return { node, state: 'missing' };
  const stale =
    published.heartbeatAt === undefined ||
    (published.staleAfterMs > 0 && now - published.heartbeatAt > published.staleAfterMs);
  if (stale) return { node, state: 'stale', published };
  if (published.appliedHash === desiredHash) return { node, state: 'in-sync', published };
  if (NOT_APPLIED.includes(published.result) && published.candidateHash === desiredHash)
    return { node, state: 'rejected', published };
  return { node, state: 'pending', published };
}

export function verdictOf(counts: Readonly<Record<NodeRolloutState, number>>): RolloutVerdict {
  if (counts.rejected > 0) return 'rejected';
  const notDone = counts.pending + counts.stale + counts.missing;
  return notDone === 0 ? 'complete' : 'in-progress';
}

/**
 * The rollout over `nodeNames` (the cluster's Nodes, maybe filtered by a selector). Several Leases
 * of one node (a renamed instance leaves none behind; a copied one could): the freshest counts.
 */
export function summarizeRollout(
  desired: DesiredConfig,
  scope: { readonly namespace: string; readonly instance: string },
  nodeNames: readonly string[],
  states: readonly PublishedState[],
  now: number,
): RolloutStatus {
  const byNode = new Map<string, PublishedState>();
  for (const state of states) {
    const seen = byNode.get(state.node);
    if (seen === undefined || (state.heartbeatAt ?? 0) > (seen.heartbeatAt ?? 0)) byNode.set(state.node, state);
  }
  const known = new Set(nodeNames);
  const nodes = [...known].sort().map((name) => classifyNode(name, desired.hash, byNode.get(name), now));
  const counts = Object.fromEntries(NODE_ROLLOUT_STATES.map((s) => [s, 0])) as Record<NodeRolloutState, number>;
  for (const n of nodes) counts[n.state] += 1;
  return {
    desired,
    namespace: scope.namespace,
    instance: scope.instance,
    checkedAt: now,
    nodes,
    counts,
    unknownNodes: [...byNode.keys()].filter((n) => !known.has(n)).sort(),
    verdict: verdictOf(counts),
  };
}

// ---- reading ----------------------------------------------------------------------------------

export interface RolloutCluster {
  readonly nodes: ResourceClient<Node>;
  readonly leases: ResourceClient<Lease>;
  readonly configMaps: ResourceClient<ConfigMap>;
}

export type DesiredConfigRef =
  | { readonly kind: 'configmap'; readonly namespace: string; readonly name: string }
  | { readonly kind: 'path'; readonly path: string };

export interface RolloutQuery {
  /** Namespace of the agents (their status Leases). */
  readonly namespace: string;
  /** The provisioner instance (`run --status-name`). */
  readonly instance: string;
  /** Label selector of the Nodes that must run an agent (the DaemonSet's nodeSelector). */
  readonly nodeSelector?: string;
}

const PAGE = 500;
/** Bounds a list to 200 pages (100,000 objects): a cluster larger than that is not a fleet we read. */
const MAX_PAGES = 200;

function clusterError(what: string, err: unknown): StartupError {
  const hint =
    err instanceof KubeApiError && err.status === 403 ? ' (see docs/rollout-status.md for the permissions needed)' : '';
  return new StartupError(`cannot ${what}: ${errorMessage(err)}${hint}`);
}

async function listAll<T>(
  list: (options: ListOptions) => Promise<ObjectList<T>>,
  options: ListOptions,
  what: string,
): Promise<T[]> {
  const items: T[] = [];
  let next: string | undefined;
  for (let page = 0; page < MAX_PAGES; page++) {
    let result: ObjectList<T>;
    try {
      result = await list({ ...options, limit: PAGE, ...(next !== undefined ? { continue: next } : {}) });
    } catch (err) {
      throw clusterError(what, err);
    }
    items.push(...result.items);
    next = result.metadata.continue;
    if (next === undefined || next === '') return items;
  }
  throw new StartupError(`cannot ${what}: more than ${String(PAGE * MAX_PAGES)} objects`);
}

/** The desired config's hash, computed by the agent's loader (the same normalization, the same hash). */
export async function readDesiredConfig(
  cluster: Pick<RolloutCluster, 'configMaps'> | undefined,
  ref: DesiredConfigRef,
): Promise<DesiredConfig> {
  if (ref.kind === 'path') return { hash: (await loadConfig(ref.path)).hash, source: ref.path };
  const source = `configmap ${ref.namespace}/${ref.name}`;
  if (cluster === undefined) throw new StartupError(`cannot read ${source}: no cluster`);
  let configMap: ConfigMap;
  try {
    configMap = await cluster.configMaps.get(ref.name, { namespace: ref.namespace });
  } catch (err) {
    if (isNotFound(err)) throw new ConfigSourceError(source, `${source} does not exist`);
    throw clusterError(`read ${source}`, err);
  }
  // The keys as a mounted ConfigMap directory shows them: what the agents read.
  const files = Object.entries(configMap.data ?? {}).map(([name, text]) => ({ name, text }));
  return { hash: parseConfigSnapshot(snapshotFromDirectoryFiles(source, files)).hash, source };
}

/** Every node's published state now, against `desired`. */
export async function readRollout(
  cluster: RolloutCluster,
  query: RolloutQuery,
  desired: DesiredConfig,
  now: () => number,
  signal?: AbortSignal,
): Promise<RolloutStatus> {
  const sig = signal === undefined ? {} : { signal };
  const [leases, nodes] = await Promise.all([
    listAll(
      (o) => cluster.leases.list(o),
      { namespace: query.namespace, labelSelector: statusSelector(query.instance), ...sig },
      `list the status Leases in namespace ${query.namespace}`,
    ),
    listAll<{ metadata: ObjectMeta }>(
      (o) => cluster.nodes.listMetadata(o),
      { ...(query.nodeSelector !== undefined ? { labelSelector: query.nodeSelector } : {}), ...sig },
      'list the Nodes',
    ),
  ]);
  const states = leases.map(stateFromLease).filter((s): s is PublishedState => s !== undefined);
  return summarizeRollout(
    desired,
    query,
    nodes.map((n) => n.metadata.name),
    states,
    now(),
  );
}

export interface WaitOptions {
  readonly clock: Clock;
  readonly timeoutMs: number;
  /** Between two reads (default 1 s). */
  readonly intervalMs?: number;
  /** Each status read (to show progress). */
  readonly onProgress?: (status: RolloutStatus) => void;
  readonly signal?: AbortSignal;
}

/** Reads until the rollout is complete or rejected, or the timeout passes (`timedOut`). */
export async function waitForRollout(
  cluster: RolloutCluster,
  query: RolloutQuery,
  desired: DesiredConfig,
  options: WaitOptions,
): Promise<{ readonly status: RolloutStatus; readonly timedOut: boolean }> {
  const { clock } = options;
  const deadline = clock.now() + options.timeoutMs;
  const interval = options.intervalMs ?? 1000;
  for (;;) {
    const status = await readRollout(cluster, query, desired, () => clock.now(), options.signal);
    options.onProgress?.(status);
    if (status.verdict !== 'in-progress') return { status, timedOut: false };
    const left = deadline - clock.now();
    if (left <= 0 || (options.signal !== undefined && isAborted(options.signal))) return { status, timedOut: true };
    await clock.sleep(Math.min(interval, left), options.signal).catch(() => undefined);
  }
}
