// Adoption of PVs this node's provisioner created before this agent ran (upstream, or this agent
// before it labelled its PVs): one paginated scan of the PVs that lack the node label; the ones
// annotated as provisioned by this node get the label and nothing else changes.
import type { Cluster } from '../kube/cluster.js';
import type { PersistentVolume } from '../kube/objects.js';
import { isGone, isNotFound } from '../kube/cluster.js';
import type { Logger } from '../log.js';
import type { AgentMetrics } from '../metrics/agent-metrics.js';
import { isProvisionedByNode, NODE_LABEL, nodeLabelValue } from '../pv/naming.js';
import type { NodeIdentity } from '../pv/naming.js';

export interface AdoptionResult {
  readonly scanned: number;
  readonly pages: number;
  readonly adopted: readonly string[];
}

/**
 * Metadata of about 600 bytes a PV: a page is ~1.5 MB of JSON (~100 KB gzip), so 10,000 unlabelled
 * PVs take 4 requests instead of 20, and no page is big enough to move the agent's memory.
 */
export const ADOPTION_PAGE_SIZE = 2500;

/** Scans started over after an expired continue token (410) before the error stands. */
const MAX_SCAN_RESTARTS = 3;

export async function adoptNodeVolumes(
  deps: { readonly cluster: Cluster; readonly logger: Logger; readonly metrics?: AgentMetrics },
  node: NodeIdentity,
  options: { readonly pageSize?: number; readonly signal?: AbortSignal } = {},
): Promise<AdoptionResult> {
  const value = nodeLabelValue(node.name);
  const adopted: string[] = [];
  let scanned = 0;
  let pages = 0;
  let continueToken: string | undefined;
  let restarts = 0;
  for (;;) {
    let page: Awaited<ReturnType<Cluster['persistentVolumes']['listMetadata']>>;
    try {
      page = await deps.cluster.persistentVolumes.listMetadata({
        labelSelector: `!${NODE_LABEL}`,
        limit: options.pageSize ?? ADOPTION_PAGE_SIZE,
        ...(continueToken !== undefined ? { continue: continueToken } : {}),
        ...(options.signal ? { signal: options.signal } : {}),
      });
    } catch (err) {
      // 410: etcd compacted past the scan's snapshot between two pages. Start over, as client-go's
      // pager does; the PVs labelled so far no longer match the selector.
      if (continueToken === undefined || !isGone(err) || restarts >= MAX_SCAN_RESTARTS) throw err;
      restarts += 1;
      continueToken = undefined;
      continue;
    }
    pages += 1;
    scanned += page.items.length;
    for (const pv of page.items) {
      if (!isProvisionedByNode(pv.metadata.annotations, node)) continue;
      try {
        // A merge patch of one label: upstream's fields and annotations stay exactly as they were.
        await deps.cluster.persistentVolumes.patch(pv.metadata.name, { metadata: { labels: { [NODE_LABEL]: value } } });
        adopted.push(pv.metadata.name);
        deps.metrics?.adoptedVolumes.inc();
      } catch (err) {
        if (!isNotFound(err)) throw err;
      }
    }
    continueToken =
      page.metadata.continue !== undefined && page.metadata.continue !== '' ? page.metadata.continue : undefined;
    if (continueToken === undefined) break;
  }
  if (adopted.length > 0) deps.logger.log('info', 'adopted PersistentVolumes of this node', { count: adopted.length });
  return { scanned, pages, adopted };
}

/**
 * Adopts one PV found by name (a create that hit AlreadyExists): labels it when it is this node's
 * and unlabelled, so it enters the node-scoped cache instead of failing every pass (upstream #209).
 */
export async function adoptNodeVolume(
  deps: { readonly cluster: Cluster; readonly logger: Logger; readonly metrics?: AgentMetrics },
  node: NodeIdentity,
  name: string,
): Promise<PersistentVolume | undefined> {
  const pv = await deps.cluster.persistentVolumes.get(name);
  const value = nodeLabelValue(node.name);
  if (!isProvisionedByNode(pv.metadata.annotations, node) || pv.metadata.labels?.[NODE_LABEL] === value)
    return undefined;
  const adopted = await deps.cluster.persistentVolumes.patch(name, { metadata: { labels: { [NODE_LABEL]: value } } });
  deps.metrics?.adoptedVolumes.inc();
  deps.logger.log('info', 'adopted a PersistentVolume of this node', { pv: name });
  return adopted;
}
