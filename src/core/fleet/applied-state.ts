// The per-node applied state each agent publishes, and its encoding as a coordination.k8s.io/v1
// Lease: the state in annotations (readable with `kubectl get lease -o yaml`), renewTime as the
// heartbeat, leaseDurationSeconds as the age after which a reader calls it stale. Pure.
import { sourceLabel } from '../config/source/port.js';
import { createHash } from 'node:crypto';
import type { AgentStatusJson, ReloadResult } from '../agent/reload-types.js';
import { RELOAD_OUTCOMES } from '../agent/reload-types.js';
import { MAX_ERRORS_SINCE_APPLY } from '../agent/errors-since-apply.js';
import type { ReloadOutcome } from '../agent/reload-types.js';
import { formatIssue } from '../errors.js';
import { microTime } from '../kube/micro-time.js';
import type { Lease } from '../kube/objects.js';
import { dns1123SubdomainErrors } from '../kube/validation.js';
import { nodeLabelValue } from '../pv/naming.js';
import type { AvailableClass } from '../metrics/volume-usage.js';

/** `started`: the agent has not reloaded since it started (its start-up config serves). */
export type AppliedResult = ReloadOutcome | 'started';
export const APPLIED_RESULTS: readonly AppliedResult[] = ['started', ...RELOAD_OUTCOMES];

export interface AppliedState {
  readonly node: string;
  /** `sha256:…` of the config serving now. */
  readonly appliedHash: string;
  readonly generation: number;
  readonly result: AppliedResult;
  /** Why the last reload was not applied (rejected, refused, rolled back, failed). */
  readonly reason?: string;
  /** Hash of the config the last reload read, when it parsed. */
  readonly candidateHash?: string;
  /** Where the agent reads its config (a directory path, or a ConfigMap). */
  readonly source: string;
  readonly agentVersion: string;
  /** Available or Bound PVs of the node whose volume is not healthy (last pass); absent: none, or an older agent. */
  readonly volumesAbnormal?: number;
  /** Released PVs held back because another disk is at their path (last pass); absent: none. */
  readonly volumesQuarantined?: number;
  /** Discovery entries not published because their disk is a PV's or at two entries (last pass); absent: none. */
  readonly volumesConflicting?: number;
  /** Disks by rule (last pass): devices linked, skipped with a reason, planned (plan mode); absent: none. */
  readonly devicesLinked?: number;
  readonly devicesSkipped?: number;
  readonly devicesPlanned?: number;
  /**
   * Warning Events of discovery or cleanup failures the agent recorded since it applied the config
   * serving now (a staged rollout halts on them); absent: none.
   */
  readonly errorsSinceApply?: number;
  /**
   * The config the agent's last finished discovery pass ran under, NO_PASS before the serving
   * generation's first one; absent: an older agent. A staged rollout counts a node as running the
   * candidate healthily only once a pass under it finished (its errors are in errorsSinceApply then).
   */
  readonly lastPassHash?: string;
  /**
   * Available PVs not reserved for a claim, per storage class (volumes, bytes, the largest), at
   * most MAX_AVAILABLE_CLASSES classes; absent: none, or an older agent.
   */
  readonly available?: Readonly<Record<string, AvailableClass>>;
}

/** lastPassHash before the serving generation finished a discovery pass (a hash is `sha256:…`). */
export const NO_PASS = 'none';

/**
 * Whether an agent that applies `hash` has not finished a discovery pass under it yet (its PVs and
 * its errors do not reflect it). An older agent does not say (no lastPassHash): never.
 */
export function passPendingUnder(state: AppliedState, hash: string): boolean {
  return state.appliedHash === hash && state.lastPassHash !== undefined && state.lastPassHash !== hash;
}

/** Classes the `available` annotation carries at most (in name order): a Lease stays small. */
export const MAX_AVAILABLE_CLASSES = 64;

/** A published state as read back, with its heartbeat. */
export interface PublishedState extends AppliedState {
  /** ms since the epoch of the last heartbeat (Lease spec.renewTime); undefined when absent. */
  readonly heartbeatAt: number | undefined;
  /** After this long without a heartbeat the state is stale (Lease spec.leaseDurationSeconds). */
  readonly staleAfterMs: number;
}

export const STATE_PREFIX = 'local-static-provisioner/';
/** Label on every status Lease: the provisioner instance (the chart's full name) it belongs to. */
export const STATUS_OF_LABEL = `${STATE_PREFIX}status-of`;
/** Label on every status Lease: the node (its label value form, see nodeLabelValue). */
export const STATUS_NODE_LABEL = `${STATE_PREFIX}node`;
export const DEFAULT_STATUS_NAME = 'local-static-provisioner';
export const STATE_FORMAT = '1';

const A = {
  format: `${STATE_PREFIX}state-format`,
  node: `${STATE_PREFIX}node`,
  appliedHash: `${STATE_PREFIX}applied-hash`,
  generation: `${STATE_PREFIX}generation`,
  result: `${STATE_PREFIX}last-result`,
  reason: `${STATE_PREFIX}last-reason`,
  candidateHash: `${STATE_PREFIX}candidate-hash`,
  source: `${STATE_PREFIX}source`,
  agentVersion: `${STATE_PREFIX}agent-version`,
  volumesAbnormal: `${STATE_PREFIX}volumes-abnormal`,
  volumesQuarantined: `${STATE_PREFIX}volumes-quarantined`,
  volumesConflicting: `${STATE_PREFIX}volumes-conflicting`,
  errorsSinceApply: `${STATE_PREFIX}errors-since-apply`,
  lastPassHash: `${STATE_PREFIX}last-pass-hash`,
  devicesLinked: `${STATE_PREFIX}devices-linked`,
  devicesSkipped: `${STATE_PREFIX}devices-skipped`,
  devicesPlanned: `${STATE_PREFIX}devices-planned`,
  available: `${STATE_PREFIX}available`,
} as const;

/** A reason longer than this is cut: annotations are bounded, a Lease is read by every status call. */
export const MAX_REASON_CHARS = 1024;
const MAX_LEASE_NAME = 253;

function shortHash(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, 8);
}

/**
 * `<name>-<node>` as a valid Lease name (a DNS subdomain). Node names are subdomains already; a
 * name that needs changing (characters, case, length) gets a hash of the original appended, so two
 * nodes never share a Lease.
 */
export function statusLeaseName(name: string, node: string): string {
  const raw = `${name}-${node}`;
  if (raw.length <= MAX_LEASE_NAME && dns1123SubdomainErrors(raw).length === 0) return raw;
  const suffix = `-${shortHash(raw)}`;
  const cleaned = raw
    .toLowerCase()
    .replace(/[^a-z0-9.-]+/g, '-')
    .split('.')
    .map((label) => label.replace(/^-+|-+$/g, ''))
    .filter((label) => label !== '')
    .join('.');
  // Each label of a subdomain starts and ends alphanumeric; the suffix ends the last one.
  const head = cleaned.slice(0, MAX_LEASE_NAME - suffix.length).replace(/[-.]+$/, '');
  return `${head === '' ? 'lvp' : head}${suffix}`;
}

/** The label selector of every status Lease of one provisioner instance. */
export function statusSelector(name: string): string {
  return `${STATUS_OF_LABEL}=${nodeLabelValue(name)}`;
}

function truncate(text: string): string {
  return text.length <= MAX_REASON_CHARS ? text : `${text.slice(0, MAX_REASON_CHARS - 1)}…`;
}

/** Why a reload was not applied, in one line. */
export function reloadReason(result: ReloadResult): string | undefined {
  if (result.outcome === 'applied' || result.outcome === 'noop') return undefined;
  const errors = result.issues.filter((i) => i.severity === 'error');
  const first = errors[0];
  if (result.error !== undefined) return truncate(result.error);
  if (first === undefined) return undefined;
  const more = errors.length > 1 ? ` (and ${String(errors.length - 1)} more)` : '';
  return truncate(`${formatIssue(first)}${more}`);
}

/**
 * The agent's status → the state it publishes. The one place that knows which status fields are
 * published (the config source description included).
 */
export function appliedStateFromStatus(status: AgentStatusJson): AppliedState {
  const last = status.lastReload;
  const reason = last === undefined ? undefined : reloadReason(last);
  return {
    node: status.node,
    appliedHash: status.config.appliedHash,
    generation: status.generation,
    result: last?.outcome ?? 'started',
    ...(reason !== undefined ? { reason } : {}),
    ...(last?.candidateHash !== undefined ? { candidateHash: last.candidateHash } : {}),
    // The source in use, and when it is the start-up fallback, the one configured.
    source:
      status.source.fallbackReason === undefined
        ? status.config.source
        : `${status.config.source} (fallback from ${sourceLabel(status.source.configured)})`,
    agentVersion: status.version,
    ...(status.lastPass !== undefined && status.lastPass.abnormal > 0
      ? { volumesAbnormal: status.lastPass.abnormal }
      : {}),
    ...(status.lastPass !== undefined && status.lastPass.quarantined > 0
      ? { volumesQuarantined: status.lastPass.quarantined }
      : {}),
    ...(status.lastPass?.conflicting !== undefined && status.lastPass.conflicting > 0
      ? { volumesConflicting: status.lastPass.conflicting }
      : {}),
    ...positive('devicesLinked', status.lastPass?.devices?.linked),
    ...positive('devicesSkipped', status.lastPass?.devices?.skipped),
    ...positive('devicesPlanned', status.lastPass?.devices?.planned),
    ...(status.errorsSinceApply !== undefined && status.errorsSinceApply > 0
      ? { errorsSinceApply: Math.min(status.errorsSinceApply, MAX_ERRORS_SINCE_APPLY) }
      : {}),
    lastPassHash: status.lastPass?.configHash ?? NO_PASS,
    ...availableOf(status.available),
  };
}

/** The first MAX_AVAILABLE_CLASSES classes of a status's `available`, or nothing when it has none. */
function availableOf(available: Readonly<Record<string, AvailableClass>> | undefined): {
  available?: Readonly<Record<string, AvailableClass>>;
} {
  if (available === undefined) return {};
  const names = Object.keys(available).sort().slice(0, MAX_AVAILABLE_CLASSES);
  if (names.length === 0) return {};
  const out: Record<string, AvailableClass> = {};
  for (const name of names) {
    const a = available[name];
    if (a !== undefined) out[name] = { volumes: a.volumes, bytes: a.bytes, largestBytes: a.largestBytes };
  }
  return { available: out };
}

/** The `available` annotation: `{"class":{"volumes":n,"bytes":n,"largestBytes":n},…}`, classes in name order. */
export function availableText(available: Readonly<Record<string, AvailableClass>>): string {
  return JSON.stringify(available);
}

function isCount(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
}

/** The `available` annotation read back; anything malformed (someone else's hand): none. */
export function availableFromText(text: string | undefined): Record<string, AvailableClass> | undefined {
  if (text === undefined) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return undefined;
  const out: Record<string, AvailableClass> = {};
  for (const [name, value] of Object.entries(parsed as Record<string, unknown>)) {
    if (typeof value !== 'object' || value === null) return undefined;
    const { volumes, bytes, largestBytes } = value as Record<string, unknown>;
    if (!isCount(volumes) || !isCount(bytes) || !isCount(largestBytes)) return undefined;
    out[name] = { volumes, bytes, largestBytes };
  }
  return out;
}

export function sameState(a: AppliedState, b: AppliedState): boolean {
  return (
    a.node === b.node &&
    a.appliedHash === b.appliedHash &&
    a.generation === b.generation &&
    a.result === b.result &&
    a.reason === b.reason &&
    a.candidateHash === b.candidateHash &&
    a.source === b.source &&
    a.agentVersion === b.agentVersion &&
    a.volumesAbnormal === b.volumesAbnormal &&
    a.volumesQuarantined === b.volumesQuarantined &&
    a.volumesConflicting === b.volumesConflicting &&
    a.errorsSinceApply === b.errorsSinceApply &&
    a.lastPassHash === b.lastPassHash &&
    a.devicesLinked === b.devicesLinked &&
    a.devicesSkipped === b.devicesSkipped &&
    a.devicesPlanned === b.devicesPlanned &&
    (a.available === undefined ? '' : availableText(a.available)) ===
      (b.available === undefined ? '' : availableText(b.available))
  );
}

/** The annotations that carry a state. */
export function stateAnnotations(state: AppliedState): Record<string, string> {
  return {
    [A.format]: STATE_FORMAT,
    [A.node]: state.node,
    [A.appliedHash]: state.appliedHash,
    [A.generation]: String(state.generation),
    [A.result]: state.result,
    ...(state.reason !== undefined ? { [A.reason]: state.reason } : {}),
    ...(state.candidateHash !== undefined ? { [A.candidateHash]: state.candidateHash } : {}),
    [A.source]: state.source,
    [A.agentVersion]: state.agentVersion,
    ...(state.volumesAbnormal !== undefined ? { [A.volumesAbnormal]: String(state.volumesAbnormal) } : {}),
    ...(state.volumesQuarantined !== undefined ? { [A.volumesQuarantined]: String(state.volumesQuarantined) } : {}),
    ...(state.volumesConflicting !== undefined ? { [A.volumesConflicting]: String(state.volumesConflicting) } : {}),
    ...(state.errorsSinceApply !== undefined ? { [A.errorsSinceApply]: String(state.errorsSinceApply) } : {}),
    ...(state.lastPassHash !== undefined ? { [A.lastPassHash]: state.lastPassHash } : {}),
    ...(state.devicesLinked !== undefined ? { [A.devicesLinked]: String(state.devicesLinked) } : {}),
    ...(state.devicesSkipped !== undefined ? { [A.devicesSkipped]: String(state.devicesSkipped) } : {}),
    ...(state.devicesPlanned !== undefined ? { [A.devicesPlanned]: String(state.devicesPlanned) } : {}),
    ...(state.available !== undefined ? { [A.available]: availableText(state.available) } : {}),
  };
}

/** `{ key: n }` when n is a positive count, else nothing (a zero is not published). */
function positive<K extends string>(key: K, n: number | undefined): Partial<Record<K, number>> {
  return n === undefined || n <= 0 ? {} : ({ [key]: n } as Partial<Record<K, number>>);
}

function optionalCount<K extends string>(key: K, n: number | undefined): Partial<Record<K, number>> {
  return n === undefined ? {} : ({ [key]: n } as Partial<Record<K, number>>);
}

/** A count annotation written by an agent (anything else, from someone else's hand: none). */
function countOf(text: string | undefined): number | undefined {
  if (text === undefined || !/^[1-9]\d{0,8}$/u.test(text)) return undefined;
  return Number(text);
}

/** The last-pass-hash annotation as an agent writes it (anything else, from someone else's hand: absent). */
function lastPassHashOf(text: string | undefined): { lastPassHash?: string } {
  return text !== undefined && (text === NO_PASS || /^sha256:[0-9a-f]{64}$/u.test(text)) ? { lastPassHash: text } : {};
}

export interface StatusLeaseTarget {
  readonly name: string;
  readonly namespace: string;
  /** The provisioner instance (STATUS_OF_LABEL). */
  readonly instance: string;
}

/**
 * The Lease carrying `state`, renewed at `now`. Keeps the annotations and labels of `existing`
 * that are not the state's own (someone else's), drops stale state annotations (a reason no longer
 * there).
 */
export function statusLease(
  target: StatusLeaseTarget,
  state: AppliedState,
  now: number,
  staleAfterMs: number,
  existing?: Lease,
): Lease {
  const foreign = Object.fromEntries(
    Object.entries(existing?.metadata.annotations ?? {}).filter(([k]) => !k.startsWith(STATE_PREFIX)),
  );
  return {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: {
      ...(existing?.metadata ?? {}),
      name: target.name,
      namespace: target.namespace,
      labels: {
        ...(existing?.metadata.labels ?? {}),
        [STATUS_OF_LABEL]: nodeLabelValue(target.instance),
        [STATUS_NODE_LABEL]: nodeLabelValue(state.node),
      },
      annotations: { ...foreign, ...stateAnnotations(state) },
    },
    spec: {
      ...(existing?.spec ?? {}),
      holderIdentity: state.node,
      leaseDurationSeconds: Math.max(1, Math.ceil(staleAfterMs / 1000)),
      renewTime: microTime(now),
    },
  };
}

function isResult(value: string): value is AppliedResult {
  return (APPLIED_RESULTS as readonly string[]).includes(value);
}

/** A Lease → the state it carries; undefined when it carries none (or a format this reader does not know). */
export function stateFromLease(lease: Lease): PublishedState | undefined {
  const a = lease.metadata.annotations ?? {};
  const node = a[A.node];
  const appliedHash = a[A.appliedHash];
  const result = a[A.result];
  if (a[A.format] !== STATE_FORMAT || node === undefined || appliedHash === undefined || result === undefined)
    return undefined;
  const generation = Number(a[A.generation] ?? '0');
  const renew = lease.spec?.renewTime;
  const heartbeatAt = renew === undefined ? undefined : Date.parse(renew);
  const reason = a[A.reason];
  const candidateHash = a[A.candidateHash];
  return {
    node,
    appliedHash,
    generation: Number.isFinite(generation) ? generation : 0,
    result: isResult(result) ? result : 'failed',
    ...(reason !== undefined ? { reason } : {}),
    ...(candidateHash !== undefined ? { candidateHash } : {}),
    source: a[A.source] ?? '',
    agentVersion: a[A.agentVersion] ?? '',
    ...optionalCount('volumesAbnormal', countOf(a[A.volumesAbnormal])),
    ...optionalCount('volumesQuarantined', countOf(a[A.volumesQuarantined])),
    ...optionalCount('volumesConflicting', countOf(a[A.volumesConflicting])),
    ...optionalCount('devicesLinked', countOf(a[A.devicesLinked])),
    ...optionalCount('devicesSkipped', countOf(a[A.devicesSkipped])),
    ...optionalCount('devicesPlanned', countOf(a[A.devicesPlanned])),
    ...optionalCount('errorsSinceApply', countOf(a[A.errorsSinceApply])),
    ...lastPassHashOf(a[A.lastPassHash]),
    ...availableOf(availableFromText(a[A.available])),
    heartbeatAt: heartbeatAt === undefined || Number.isNaN(heartbeatAt) ? undefined : heartbeatAt,
    staleAfterMs: (lease.spec?.leaseDurationSeconds ?? 0) * 1000,
  };
}

/** Why a --status-name cannot name status Leases (it is also their label value), or undefined. */
export function statusNameProblem(name: string): string | undefined {
  if (name === '') return 'needs a name';
  if (nodeLabelValue(name) !== name || dns1123SubdomainErrors(name).length > 0)
    return `${JSON.stringify(name)} must be a lowercase DNS label of at most 63 characters (a-z, 0-9, "-", ".")`;
  return undefined;
}
