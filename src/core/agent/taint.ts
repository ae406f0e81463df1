// Startup-taint removal (removeNodeNotReadyTaint). Upstream's call site (pkg/node-taint, v2.9) is
// inverted, so there the taint is never removed; here it is removed once discovery is ready.
import type { Clock } from '../clock.js';
import { isConflict } from '../kube/cluster.js';
import type { Cluster } from '../kube/cluster.js';
import type { Logger } from '../log.js';
import { errorMessage } from '../unknown-values.js';

export async function removeStartupTaint(
  deps: { readonly cluster: Cluster; readonly clock: Clock; readonly logger: Logger },
  nodeName: string,
  taintKey: string,
  signal: AbortSignal,
): Promise<boolean> {
  if (taintKey === '') return false;
  for (let attempt = 1; attempt <= 5 && !signal.aborted; attempt++) {
    try {
      const node = await deps.cluster.nodes.get(nodeName);
      const taints = node.spec?.taints ?? [];
      const kept = taints.filter((t) => t.key !== taintKey);
      if (kept.length === taints.length) return true;
      await deps.cluster.nodes.update({ ...node, spec: { ...node.spec, taints: kept } });
      deps.logger.log('info', 'removed startup taint from the Node', { node: nodeName, taint: taintKey });
      return true;
    } catch (err) {
      if (!isConflict(err) && attempt >= 3) {
        deps.logger.log('error', 'could not remove startup taint', {
          node: nodeName,
          taint: taintKey,
          error: errorMessage(err),
        });
        return false;
      }
      await deps.clock.sleep(200 * attempt, signal).catch(() => undefined);
    }
  }
  return false;
}
