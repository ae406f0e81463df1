// Which Nodes a local PersistentVolume can be used from, read from its required node affinity the
// way the scheduler reads it. A volume is stranded only when no Node of the cluster satisfies it.
import type { NodeSelectorRequirement, NodeSelectorTerm, PersistentVolume } from '../kube/objects.js';
import { requirementMatches } from '../kube/label-selector.js';
import type { SelectorOperator } from '../kube/label-selector.js';
import { ALPHA_NODE_AFFINITY_ANNOTATION, HOSTNAME_LABEL } from '../pv/naming.js';
import { isRecord } from '../unknown-values.js';

/** What the cleanup needs of a Node: its name and labels. */
export interface NodeFacts {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
}

/** The node selector terms a PV requires (ORed), or why they cannot be read. */
export type VolumeAffinity =
  | { readonly kind: 'terms'; readonly terms: readonly NodeSelectorTerm[] }
  /** No affinity at all: the volume is not pinned to nodes, so it is never stranded. */
  | { readonly kind: 'none' }
  /** An affinity that cannot be read: treated as satisfied (never act on what is not understood). */
  | { readonly kind: 'unreadable'; readonly reason: string };

const MAX_ALPHA_ANNOTATION_BYTES = 256 * 1024;

export function volumeAffinity(pv: PersistentVolume): VolumeAffinity {
  const terms = pv.spec.nodeAffinity?.required?.nodeSelectorTerms;
  if (terms !== undefined) return { kind: 'terms', terms };
  const alpha = pv.metadata.annotations?.[ALPHA_NODE_AFFINITY_ANNOTATION];
  if (alpha === undefined) return { kind: 'none' };
  if (alpha.length > MAX_ALPHA_ANNOTATION_BYTES) return { kind: 'unreadable', reason: 'annotation too large' };
  try {
    const parsed: unknown = JSON.parse(alpha);
    const list = termsOfAlphaAnnotation(parsed);
    return list === undefined ? { kind: 'unreadable', reason: 'annotation has no node selector terms' } : list;
  } catch {
    return { kind: 'unreadable', reason: 'annotation is not JSON' };
  }
}

function termsOfAlphaAnnotation(value: unknown): VolumeAffinity | undefined {
  if (!isRecord(value)) return undefined;
  const required = value['requiredDuringSchedulingIgnoredDuringExecution'];
  if (!isRecord(required)) return undefined;
  const terms = required['nodeSelectorTerms'];
  if (!Array.isArray(terms) || !terms.every(isTerm)) return undefined;
  return { kind: 'terms', terms };
}

function isRequirement(value: unknown): value is NodeSelectorRequirement {
  if (!isRecord(value)) return false;
  const values = value['values'];
  return (
    typeof value['key'] === 'string' &&
    typeof value['operator'] === 'string' &&
    (values === undefined || (Array.isArray(values) && values.every((v) => typeof v === 'string')))
  );
}

function isTerm(value: unknown): value is NodeSelectorTerm {
  if (!isRecord(value)) return false;
  const { matchExpressions, matchFields } = value;
  const ok = (list: unknown): boolean => list === undefined || (Array.isArray(list) && list.every(isRequirement));
  return ok(matchExpressions) && ok(matchFields);
}

/**
 * The labels a requirement is matched against. A Node without the hostname label (just registered,
 * or labelled by hand) is taken to carry its name there, so a PV naming the node by either is not
 * mistaken for one of a deleted node (upstream deleted valid PVs when the two differed).
 */
function labelsOf(node: NodeFacts): Readonly<Record<string, string>> {
  return HOSTNAME_LABEL in node.labels ? node.labels : { ...node.labels, [HOSTNAME_LABEL]: node.name };
}

/** A node selector's operators as the label selector's (the scheduler matches both alike). */
const SELECTOR_OPERATORS: Readonly<Record<string, SelectorOperator>> = {
  In: 'in',
  NotIn: 'notin',
  Exists: 'exists',
  DoesNotExist: '!',
  Gt: 'gt',
  Lt: 'lt',
};

function requirementHolds(req: NodeSelectorRequirement, labels: Readonly<Record<string, string>>): boolean {
  const operator = SELECTOR_OPERATORS[req.operator];
  const values = req.values ?? [];
  // The API allows exactly one value for Gt and Lt; an unknown operator matches nothing.
  if (operator === undefined || ((operator === 'gt' || operator === 'lt') && values.length !== 1)) return false;
  return requirementMatches({ key: req.key, operator, values }, labels);
}

/** A term matches a node when every expression and field requirement does; an empty term matches none. */
export function termMatches(term: NodeSelectorTerm, node: NodeFacts): boolean {
  const expressions = term.matchExpressions ?? [];
  const fields = term.matchFields ?? [];
  if (expressions.length === 0 && fields.length === 0) return false;
  const labels = labelsOf(node);
  return (
    expressions.every((req) => requirementHolds(req, labels)) &&
    // The API only allows metadata.name as a field of a node selector.
    fields.every((req) => req.key === 'metadata.name' && requirementHolds(req, { 'metadata.name': node.name }))
  );
}

/** Whether some node of the list can use the volume (or its affinity is not one to act on). */
export function volumeHasNode(affinity: VolumeAffinity, nodes: readonly NodeFacts[]): boolean {
  if (affinity.kind !== 'terms') return true;
  return affinity.terms.some((term) => nodes.some((node) => termMatches(term, node)));
}

/**
 * The node names a volume's affinity names with `kubernetes.io/hostname In` (for messages and
 * events): the union over terms, as upstream's GetLocalPersistentVolumeNodeNames.
 */
export function namedHostnames(affinity: VolumeAffinity): readonly string[] {
  if (affinity.kind !== 'terms') return [];
  const names = new Set<string>();
  for (const term of affinity.terms) {
    for (const req of term.matchExpressions ?? []) {
      if (req.key === HOSTNAME_LABEL && req.operator === 'In') for (const v of req.values ?? []) names.add(v);
    }
  }
  return [...names].sort();
}
