// `provisioner rollout status`: the desired config's hash against every node's published applied
// state. Classification and the summary are pure; readRollout does the reads (one list of Leases,
// one metadata list of Nodes, both paginated, and with a staged rollout one GET of each staged
// copy), waitForRollout repeats it until done. With a staged rollout (docs/rollout-status.md) each
// node is held to the config the agents' rule gives it (runsCandidate): the candidate in an open
// wave, the stable config elsewhere.
import type { Clock } from '../clock.js';
import { isAborted } from '../clock.js';
import { snapshotFromDirectoryFiles } from '../config/decode/layout.js';
import { loadConfig } from '../config/source/load.js';
import { parseConfigSnapshot } from '../config/decode/parse.js';
import { ConfigSourceError, StartupError } from '../errors.js';
import { isNotFound, KubeApiError } from '../kube/cluster.js';
import type { ListOptions, ResourceClient } from '../kube/cluster.js';
import { listAllPages, ListTooLongError } from '../kube/list-pages.js';
import type { ConfigMap, Lease, Node, ObjectList, ObjectMeta } from '../kube/objects.js';
import { nodeProgress } from './open-waves.js';
import { requestOf, stagedConfigMapName, stateOf } from '../rollout-state/annotations.js';
import { stableRefOf } from './objects.js';
import type { ContentRef, RolloutRequest, RolloutState } from '../rollout-state/state.js';
import { ACTIVE_PHASES, runsCandidate } from '../rollout-state/state.js';
import { waveMembers } from '../rollout-state/membership.js';
import type { AppliedResult, PublishedState } from '../fleet/applied-state.js';
import { passPendingUnder, stateFromLease, statusSelector } from '../fleet/applied-state.js';
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
  /** Staged rollout only: the config the node should run now, and its wave. */
  readonly expects?: 'candidate' | 'stable';
  readonly wave?: string;
  /** Pending because it applies the config but no discovery pass under it has finished yet. */
  readonly passPending?: true;
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
  /** The staged rollout of the desired ConfigMap, when its staged copies exist. */
  readonly staged?: StagedSummary;
  /** Why the staged copies could not be read (a permission): the view is the unstaged one. */
  readonly stagedProblem?: string;
}

// ---- staged rollouts (pure) -------------------------------------------------------------------

/** The staged copies of the operator's ConfigMap as read (undefined: 404). */
export interface StagedObjects {
  readonly namespace: string;
  /** The operator's ConfigMap (NAME; the copies are NAME-candidate and NAME-stable). */
  readonly name: string;
  readonly candidate: ConfigMap | undefined;
  readonly stable: ConfigMap | undefined;
}

/** What the staged copies say, before the Leases are looked at. */
export interface StagedSource {
  readonly namespace: string;
  readonly name: string;
  /** The rollout state on NAME-candidate; undefined: none or unreadable (then every node runs stable). */
  readonly state?: RolloutState;
  /** Why NAME-candidate carries no readable state (absent object included). */
  readonly stateProblem?: string;
  /** What the nodes outside the open waves run: NAME-stable's content, else the state's stable. */
  readonly stable?: ContentRef;
  /** An operator's request the controller has not taken up yet. */
  readonly request?: RolloutRequest;
}

export interface WaveProgress {
  readonly name: string;
  readonly nodes: number;
  readonly open: boolean;
  /** Counted with the controller's own rule (nodeProgress) against the candidate. */
  readonly applied: number;
  readonly pending: number;
  readonly failed: number;
  /** Nodes of the wave that neither exist in the Node list nor publish a Lease. */
  readonly gone: number;
  /** The last open wave: when it opened, and when its bake started. */
  readonly openedAt?: number;
  readonly bakingSince?: number;
}

export interface StagedSummary extends StagedSource {
  /** The state is about the desired config; false: the controller has not taken up the change yet. */
  readonly followsDesired: boolean;
  readonly waves: readonly WaveProgress[];
}

/** The staged copies → what they say; undefined when neither exists (not staged). */
export function stagedSourceOf(objects: StagedObjects): StagedSource | undefined {
  const { namespace, name, candidate, stable } = objects;
  if (candidate === undefined && stable === undefined) return undefined;
  const decoded = stateOf(candidate);
  const stableRef = stableRefOf(namespace, stagedConfigMapName(name, 'stable'), stable);
  const request = requestOf(candidate);
  const where = `${namespace}/${stagedConfigMapName(name, 'candidate')}`;
  const problem =
    candidate === undefined
      ? `${where} does not exist yet`
      : decoded === undefined
        ? `${where} has no rollout state`
        : decoded.ok
          ? undefined
          : `${where}: the rollout state is unreadable (${decoded.reason})`;
  const state = decoded?.ok === true ? decoded.state : undefined;
  const stableContent = stableRef ?? state?.stable;
  return {
    namespace,
    name,
    ...(state !== undefined ? { state } : {}),
    ...(problem !== undefined ? { stateProblem: problem } : {}),
    ...(stableContent !== undefined ? { stable: stableContent } : {}),
    ...(request !== undefined ? { request } : {}),
  };
}

/**
 * The config `node` should run now, by the agents' rule: the candidate when its wave is open
 * (runsCandidate), else the stable config. `hash` is undefined only when that content does not
 * parse (no agent can run it).
 */
export function expectedConfig(
  staged: StagedSource,
  node: string,
): { readonly expects: 'candidate' | 'stable'; readonly hash: string | undefined } {
  if (staged.state !== undefined && runsCandidate(staged.state, node))
    return { expects: 'candidate', hash: staged.state.candidate.hash };
  return { expects: 'stable', hash: staged.stable?.hash ?? staged.state?.stable.hash };
}

/**
 * Each wave's nodes counted against the candidate: the nodes of the wave among the Nodes and the
 * Leases now (membership by rank, rollout-state/membership.ts). `gone`: how many fewer than when the wave was planned.
 * A node in a wave but in neither list is not counted (its Node and its Lease are both gone).
 */
function waveProgress(
  state: RolloutState,
  reports: ReadonlyMap<string, PublishedState>,
  members: readonly (readonly string[])[],
  now: number,
): WaveProgress[] {
  const hash = state.candidate.hash ?? '';
  const baking = state.phase === 'progressing' || state.phase === 'paused';
  return state.waves.map((wave, i) => {
    const nodes = members[i] ?? [];
    const counts = { applied: 0, pending: 0, failed: 0, gone: Math.max(0, wave.size - nodes.length) };
    for (const node of nodes) counts[nodeProgress(node, hash, reports.get(node), true, now).kind] += 1;
    const last = i === state.opened - 1;
    return {
      name: wave.name,
      // the planned nodes, or more when nodes joined it since (so the counts add up to it)
      nodes: Math.max(wave.size, nodes.length),
      open: i < state.opened,
      ...counts,
      ...(last ? { openedAt: state.waveOpenedAt } : {}),
      ...(last && baking && state.bakeStartedAt !== undefined ? { bakingSince: state.bakeStartedAt } : {}),
    };
  });
}

/**
 * The verdict of a staged rollout: complete only when the desired config is what every node runs
 * (the rollout of it complete, or it is the stable config and no rollout is active) and every node
 * is in sync; rejected when a node rejected its config or the rollout of the desired config halted,
 * was aborted or is invalid; otherwise in progress (the controller has not taken up the change yet
 * included).
 */
export function stagedVerdict(
  counts: Readonly<Record<NodeRolloutState, number>>,
  desiredHash: string,
  staged: StagedSummary,
): RolloutVerdict {
  const ordinary = verdictOf(counts);
  if (ordinary === 'rejected') return 'rejected';
  const state = staged.state;
  // No rollout runs and the stable config is the desired one: every node should simply run it.
  if ((state === undefined || !ACTIVE_PHASES.includes(state.phase)) && staged.stable?.hash === desiredHash)
    return ordinary;
  if (state === undefined || !staged.followsDesired) return 'in-progress';
  if (state.phase === 'halted' || state.phase === 'aborted' || state.phase === 'invalid') return 'rejected';
  return state.phase === 'complete' ? ordinary : 'in-progress';
}

/**
 * One node's state. A stale heartbeat hides what it published (the agent may be gone); a node
 * rejected the desired config only when its last reload read exactly that config and did not
 * apply it. A failure on another config (an older one, or one that does not parse while the
 * desired one does) means the node has not read the desired config yet: pending. An agent that
 * applies it is in sync once a discovery pass under it finished (its PVs show it), pending until then.
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
  // Applied, but no discovery pass under it finished yet: its PVs do not show the config.
  if (passPendingUnder(published, desiredHash)) return { node, state: 'pending', published, passPending: true };
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
 * With `staged`, each node is held to its expected config (expectedConfig) and the waves are
 * counted; a wave's node counts as gone only when it is neither a Node here nor has a Lease.
 */
export function summarizeRollout(
  desired: DesiredConfig,
  scope: { readonly namespace: string; readonly instance: string },
  nodeNames: readonly string[],
  states: readonly PublishedState[],
  now: number,
  staged?: StagedSource,
): RolloutStatus {
  const byNode = new Map<string, PublishedState>();
  for (const state of states) {
    const seen = byNode.get(state.node);
    if (seen === undefined || (state.heartbeatAt ?? 0) > (seen.heartbeatAt ?? 0)) byNode.set(state.node, state);
  }
  const known = new Set(nodeNames);
  const stagedWaves = staged?.state?.waves ?? [];
  const members = waveMembers(stagedWaves, new Set([...known, ...byNode.keys()]));
  const waveOfNode = new Map<string, string>();
  members.forEach((names, i) => {
    for (const node of names) waveOfNode.set(node, stagedWaves[i]?.name ?? '');
  });
  const nodes = [...known].sort().map((name): NodeRollout => {
    if (staged === undefined) return classifyNode(name, desired.hash, byNode.get(name), now);
    const expected = expectedConfig(staged, name);
    const wave = waveOfNode.get(name);
    return {
      ...classifyNode(name, expected.hash ?? desired.hash, byNode.get(name), now),
      expects: expected.expects,
      ...(wave !== undefined ? { wave } : {}),
    };
  });
  const counts = Object.fromEntries(NODE_ROLLOUT_STATES.map((s) => [s, 0])) as Record<NodeRolloutState, number>;
  for (const n of nodes) counts[n.state] += 1;
  let summary: StagedSummary | undefined;
  if (staged !== undefined) {
    const state = staged.state;
    summary = {
      ...staged,
      followsDesired: state !== undefined && state.candidate.hash === desired.hash,
      waves: state === undefined ? [] : waveProgress(state, byNode, members, now),
    };
  }
  return {
    desired,
    namespace: scope.namespace,
    instance: scope.instance,
    checkedAt: now,
    nodes,
    counts,
    unknownNodes: [...byNode.keys()].filter((n) => !known.has(n)).sort(),
    verdict: summary === undefined ? verdictOf(counts) : stagedVerdict(counts, desired.hash, summary),
    ...(summary !== undefined ? { staged: summary } : {}),
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
  /** The operator's ConfigMap whose staged copies (NAME-candidate, NAME-stable) to look for. */
  readonly stagedOf?: { readonly namespace: string; readonly name: string };
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
  try {
    return (await listAllPages(list, { ...options, limit: PAGE }, MAX_PAGES)).items;
  } catch (err) {
    if (err instanceof ListTooLongError)
      throw new StartupError(`cannot ${what}: more than ${String(PAGE * MAX_PAGES)} objects`);
    throw clusterError(what, err);
  }
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

/** One staged copy: undefined when it does not exist; `forbidden` when the reader may not get it. */
async function getStaged(
  cluster: Pick<RolloutCluster, 'configMaps'>,
  namespace: string,
  name: string,
): Promise<ConfigMap | undefined | 'forbidden'> {
  try {
    return await cluster.configMaps.get(name, { namespace });
  } catch (err) {
    if (isNotFound(err)) return undefined;
    if (err instanceof KubeApiError && err.status === 403) return 'forbidden';
    throw clusterError(`read ${namespace}/${name}`, err);
  }
}

export interface StagedRead {
  readonly source?: StagedSource;
  readonly problem?: string;
}

const NOT_STAGED: StagedRead = {};

/**
 * The staged copies of `of` (one GET each). A copy the reader may not get (a Role made before
 * staged rollouts) leaves the view unstaged, with the reason, rather than failing the command.
 */
export async function readStaged(
  cluster: Pick<RolloutCluster, 'configMaps'>,
  of: { readonly namespace: string; readonly name: string },
): Promise<StagedRead> {
  const names = [stagedConfigMapName(of.name, 'candidate'), stagedConfigMapName(of.name, 'stable')] as const;
  const [candidate, stable] = await Promise.all(names.map((n) => getStaged(cluster, of.namespace, n)));
  if (candidate === 'forbidden' || stable === 'forbidden')
    return {
      problem: `cannot get configmaps ${names.join(', ')} in namespace ${of.namespace} (forbidden): a staged rollout is not shown (see docs/rollout-status.md for the permissions needed)`,
    };
  const source = stagedSourceOf({ ...of, candidate, stable });
  return source === undefined ? {} : { source };
}

/** Every node's published state now, against `desired` (with a staged rollout: its expected config). */
export async function readRollout(
  cluster: RolloutCluster,
  query: RolloutQuery,
  desired: DesiredConfig,
  now: () => number,
  signal?: AbortSignal,
): Promise<RolloutStatus> {
  const sig = signal === undefined ? {} : { signal };
  const [staged, leases, nodes] = await Promise.all([
    query.stagedOf === undefined ? Promise.resolve(NOT_STAGED) : readStaged(cluster, query.stagedOf),
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
  const status = summarizeRollout(
    desired,
    query,
    nodes.map((n) => n.metadata.name),
    states,
    now(),
    staged.source,
  );
  return staged.problem !== undefined ? { ...status, stagedProblem: staged.problem } : status;
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
