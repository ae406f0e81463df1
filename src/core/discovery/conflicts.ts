// One disk, one PV (invariant I2, docs/disk-identity.md): what discovery found about disks that are
// already a PV's or are at two entries, turned into what people see — where a PV's disk is now, and
// one Warning Event per finding, said once across restarts for a PV (kept on it in an annotation).
import type { EventSink } from '../kube/events.js';
import type { PersistentVolumeView } from '../pv/cached.js';
import type { ResourceClients } from '../kube/cluster.js';
import type { Logger } from '../log.js';
import { REPORTED_ANNOTATIONS } from '../pv/identity.js';
import type { NodeIdentity } from '../pv/naming.js';
import { errorMessage } from '../unknown-values.js';
import type { SkippedEntry } from './plan.js';

export const CONFLICT_REASON = 'VolumeIdentityConflict';

/** PV name → the entry its disk was found at this pass (another entry than the PV's own). */
export function disksElsewhere(skipped: readonly SkippedEntry[]): ReadonlyMap<string, string> {
  const found = new Map<string, string>();
  for (const s of skipped)
    if (s.reason === 'identity-conflict' && s.persistentVolume !== undefined) found.set(s.persistentVolume, s.path);
  return found;
}

export interface ConflictReportDeps {
  readonly events: EventSink;
  readonly logger: Logger;
  readonly cluster: ResourceClients<'persistentVolumes'>;
  readonly node: NodeIdentity;
  readonly persistentVolumes: { get(name: string): PersistentVolumeView | undefined };
}

/**
 * Says an identity conflict: on the PV whose disk it is (once across restarts: the finding is
 * recorded on the PV), or on the Node for two entries of one disk that no PV holds.
 */
export function reportIdentityConflict(skip: SkippedEntry, deps: ConflictReportDeps): void {
  const pv = skip.persistentVolume === undefined ? undefined : deps.persistentVolumes.get(skip.persistentVolume);
  const fields = { path: skip.path, pv: skip.persistentVolume, otherEntry: skip.otherEntry, detail: skip.message };
  if (pv === undefined) {
    deps.logger.log('warn', 'one disk at two entries', fields);
    const node = { apiVersion: 'v1', kind: 'Node', name: deps.node.name, uid: deps.node.uid };
    deps.events.record(node, 'Warning', CONFLICT_REASON, skip.message);
    return;
  }
  const finding = skip.path;
  if (pv.metadata.annotations?.[REPORTED_ANNOTATIONS.conflict] === finding) return;
  deps.logger.log('warn', "a PV's disk found at another entry", fields);
  const ref = {
    apiVersion: 'v1',
    kind: 'PersistentVolume',
    name: pv.metadata.name,
    ...(pv.metadata.uid !== undefined ? { uid: pv.metadata.uid } : {}),
  };
  deps.events.record(ref, 'Warning', CONFLICT_REASON, skip.message);
  deps.cluster.persistentVolumes
    .patch(pv.metadata.name, { metadata: { annotations: { [REPORTED_ANNOTATIONS.conflict]: finding } } })
    .catch((err: unknown) => {
      deps.logger.log('debug', 'could not record a reported finding on the PV', {
        pv: pv.metadata.name,
        error: errorMessage(err),
      });
    });
}
