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
 * Metadata of about 800 bytes a PV (managedFields included: the server sends them): a page is
 * ~0.4 MB of JSON (~36 KB gzip). A page's body, its string and its parse are alive at once, and
 * the heap V8 grows for that peak stays after the scan: 2,500-PV pages left an agent that scanned
 * 10,000 foreign PVs 17–19 MiB larger than 500-PV pages do, for the same bytes on the wire (0.45
 * vs 0.47 MiB) and 21 requests instead of 5 (docs/benchmarks.md, footprint).
 */
export const ADOPTION_PAGE_SIZE = 500;

/** Scans started over after an expired continue token (410) before the error stands. */
const MAX_SCAN_RESTARTS = 3;

/** What the scan keeps of one page: this node's names and the continue token, not the page. */
interface ScannedPage {
  readonly count: number;
  readonly mine: readonly string[];
  readonly continueToken: string | undefined;
}

/**
 * One page of the scan, reduced to what it needs before returning, so the page (its items and
 * their managedFields) is garbage while the patches run and the next page is fetched.
 */
async function scanPage(
  cluster: Cluster,
  node: NodeIdentity,
  limit: number,
  continueToken: string | undefined,
  signal: AbortSignal | undefined,
): Promise<ScannedPage> {
  const page = await cluster.persistentVolumes.listMetadata({
    labelSelector: `!${NODE_LABEL}`,
    limit,
    ...(continueToken !== undefined ? { continue: continueToken } : {}),
    ...(signal ? { signal } : {}),
  });
  const next = page.metadata.continue;
  return {
    count: page.items.length,
    mine: page.items.filter((pv) => isProvisionedByNode(pv.metadata.annotations, node)).map((pv) => pv.metadata.name),
    continueToken: next !== undefined && next !== '' ? next : undefined,
  };
}

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
    let page: ScannedPage;
    try {
      page = await scanPage(deps.cluster, node, options.pageSize ?? ADOPTION_PAGE_SIZE, continueToken, options.signal);
    } catch (err) {
      // 410: etcd compacted past the scan's snapshot between two pages. Start over, as client-go's
      // pager does; the PVs labelled so far no longer match the selector.
      if (continueToken === undefined || !isGone(err) || restarts >= MAX_SCAN_RESTARTS) throw err;
      restarts += 1;
      continueToken = undefined;
      continue;
    }
    pages += 1;
    scanned += page.count;
    for (const name of page.mine) {
      try {
        // A merge patch of one label: upstream's fields and annotations stay exactly as they were.
        await deps.cluster.persistentVolumes.patch(name, { metadata: { labels: { [NODE_LABEL]: value } } });
        adopted.push(name);
        deps.metrics?.adoptedVolumes.inc();
      } catch (err) {
        if (!isNotFound(err)) throw err;
      }
    }
    continueToken = page.continueToken;
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
