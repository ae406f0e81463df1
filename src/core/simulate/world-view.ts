// What a replay reads back from its world: the view a step's expectations are checked against,
// and the end state of the report. Reads only: the cluster, the agent's tables, what was observed.
import type { Agent } from '../agent/agent.js';
import type { ReloadOutcome } from '../agent/reload-types.js';
import { cleanupJobName } from '../cleanup/jobs.js';
import { ROUTINE_SKIPS } from '../discovery/plan.js';
import type { Cluster } from '../kube/cluster.js';
import type { CoreEvent, PersistentVolume } from '../kube/objects.js';
import { NODE_LABEL, nodeLabelValue } from '../pv/naming.js';
import { StepError } from './disks.js';
import type { Disks, ResolvedVolume } from './disks.js';
import type { PvField, RolloutWorldView, WorldView } from './expect.js';
import { verdictState } from './device-plan.js';
import { volumeOfPV } from './observe.js';
import type { FinalRollout, ScenarioReport } from './report.js';

export interface ReplayState {
  readonly cluster: Cluster;
  /** The running agent (none between a stop and a start). */
  readonly agent: Agent | undefined;
  readonly disks: Disks;
  readonly nodeName: string;
  /** Of cleanup Jobs. */
  readonly namespace: string;
  /** Every cleanup Job the agent created, by name, in order. */
  readonly jobsCreated: readonly string[];
  /** In-process cleanups started, by volume path. */
  readonly cleanupsByPath: ReadonlyMap<string, number>;
  readonly lastReload: ReloadOutcome | undefined;
  /** A staged scenario: the rollout as stored and reported now. */
  readonly rollout?: () => Promise<{ readonly world: RolloutWorldView; readonly final: FinalRollout }>;
}

async function nodePVs(s: ReplayState): Promise<readonly PersistentVolume[]> {
  return (await s.cluster.persistentVolumes.list({ labelSelector: `${NODE_LABEL}=${nodeLabelValue(s.nodeName)}` }))
    .items;
}

/** The world as expectations see it; `refs` are the volume references they name. */
export async function worldView(s: ReplayState, refs: readonly string[]): Promise<WorldView> {
  const agent = s.agent;
  const pvs = (await nodePVs(s)).filter((pv) => pv.metadata.deletionTimestamp === undefined);
  const phaseCounts: Record<string, number> = {};
  for (const pv of pvs)
    phaseCounts[pv.status?.phase ?? 'Pending'] = (phaseCounts[pv.status?.phase ?? 'Pending'] ?? 0) + 1;
  const jobs = (await s.cluster.jobs.list({ namespace: s.namespace })).items.filter(
    (j) => j.metadata.deletionTimestamp === undefined,
  );
  const events: CoreEvent[] = (await s.cluster.events.list()).items;
  const resolved = new Map<string, ResolvedVolume>();
  for (const ref of refs) {
    try {
      resolved.set(ref, await s.disks.resolve(ref));
    } catch (err) {
      if (!(err instanceof StepError)) throw err;
    }
  }
  const need = (ref: string): ResolvedVolume => {
    const v = resolved.get(ref);
    if (!v) throw new StepError(`expect: no volume named "${ref}"`);
    return v;
  };
  const byName = new Map(pvs.map((pv) => [pv.metadata.name, pv]));
  const rollout = s.rollout ? (await s.rollout()).world : undefined;
  const lastPass = agent?.generation.status().lastPass;
  const skipped = lastPass?.skipped ?? [];
  const quarantined = lastPass?.reclaim.quarantined ?? [];
  const verdicts = lastPass?.devices?.verdicts ?? [];
  return {
    pvCount: pvs.length,
    pvPhaseCounts: phaseCounts,
    pvFields: (ref) => {
      const v = need(ref);
      const pv = v.pvName !== undefined ? byName.get(v.pvName) : undefined;
      if (!pv) return undefined;
      const fields: Record<Exclude<PvField, 'exists'>, string> = {
        phase: pv.status?.phase ?? 'Pending',
        fsType: pv.spec.local?.fsType ?? '',
        capacity: pv.spec.capacity?.['storage'] ?? '',
        class: pv.spec.storageClassName ?? '',
        volumeMode: pv.spec.volumeMode ?? 'Filesystem',
        reclaimPolicy: pv.spec.persistentVolumeReclaimPolicy ?? '',
        path: pv.spec.local?.path ?? '',
      };
      return fields;
    },
    cleanupCounts: {
      queued: agent?.cleanups.count('queued') ?? 0,
      running: agent?.cleanups.count('running') ?? 0,
      succeeded: agent?.cleanups.count('succeeded') ?? 0,
      failed: agent?.cleanups.count('failed') ?? 0,
    },
    cleaned: (ref) => {
      const v = need(ref);
      const jobs =
        v.pvName !== undefined ? s.jobsCreated.filter((j) => j === cleanupJobName(v.pvName ?? '')).length : 0;
      return (s.cleanupsByPath.get(v.path) ?? 0) + jobs;
    },
    jobCount: jobs.length,
    jobsCreated: s.jobsCreated.length,
    lastReload: s.lastReload,
    generation: agent?.generation.number ?? 0,
    skipReason: (ref) => {
      const v = need(ref);
      const skip = skipped.find((x) => x.path === v.path && !ROUTINE_SKIPS.has(x.reason));
      return skip?.reason ?? 'none';
    },
    eventCount: (reason) => events.filter((e) => e.reason === reason).length,
    quarantineReason: (ref) => {
      const v = need(ref);
      return quarantined.find((q) => q.pv === v.pvName)?.reason ?? 'none';
    },
    deviceState: (device) => {
      const verdict = verdicts.find((x) => x.device === device);
      return verdict !== undefined ? verdictState(verdict) : 'none';
    },
    ...(rollout !== undefined ? { rollout } : {}),
  };
}

/** The end state of the report, at virtual time `at`. */
export async function finalState(s: ReplayState, at: number): Promise<ScenarioReport['final']> {
  const agent = s.agent;
  return {
    at,
    generation: agent?.generation.number ?? 0,
    configHash: agent?.appliedConfig().hash ?? '',
    persistentVolumes: (await nodePVs(s))
      .map((pv) => ({
        pv: pv.metadata.name,
        volume: volumeOfPV(pv),
        phase: pv.metadata.deletionTimestamp !== undefined ? 'Terminating' : (pv.status?.phase ?? 'Pending'),
        capacity: pv.spec.capacity?.['storage'] ?? '',
      }))
      .sort((a, b) => (a.volume < b.volume ? -1 : a.volume > b.volume ? 1 : 0)),
    cleanups: (agent?.cleanups.list() ?? []).map((c) => ({ pv: c.pvName, method: c.method, state: c.state })),
    ...(s.rollout ? { rollout: (await s.rollout()).final } : {}),
  };
}
