// How the reclaimer finds a PV's cleanup Job: from the Job watch when job cleaning is on, else by
// one GET (a Job left by an earlier config or agent process). A 403 means "no permission, so no
// Jobs" (a chart without the Jobs Role) only once it has lasted a grace period: an apiserver
// starting up answers 403 for a few seconds, and taking that for "none" would clean a volume
// in-process while its Job of an earlier agent process still runs.
import type { Clock } from '../clock.js';
import { isNotFound, KubeApiError, type Cluster } from '../kube/cluster.js';
import type { Job } from '../kube/objects.js';
import type { Logger } from '../log.js';
import type { JobLookup } from './reclaim.js';

/** How long reading Jobs must stay forbidden before a 403 means there are none. */
export const JOBS_FORBIDDEN_GRACE_MS = 60_000;

/** Since when reading Jobs has been forbidden; the agent keeps one across its generations. */
export interface JobsForbidden {
  since: number | undefined;
  logged: boolean;
}

export interface JobLookupDeps {
  readonly cluster: Pick<Cluster, 'jobs'>;
  readonly namespace: string;
  readonly clock: Clock;
  readonly logger: Logger;
  /** The Job watch's cache, when job cleaning is on. */
  readonly watched?: { get(name: string): Job | undefined };
  readonly forbidden: JobsForbidden;
}

export function jobLookup(deps: JobLookupDeps): JobLookup {
  const { cluster, namespace, clock, logger, watched, forbidden } = deps;
  const read = async (name: string): Promise<Job | undefined> => {
    try {
      return await cluster.jobs.get(name, { namespace });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  };
  const get = async (name: string): Promise<Job | undefined> => {
    if (watched !== undefined) return watched.get(name);
    try {
      const job = await read(name);
      forbidden.since = undefined;
      return job;
    } catch (err) {
      if (!(err instanceof KubeApiError && err.status === 403)) throw err;
      const now = clock.now();
      forbidden.since ??= now;
      if (now - forbidden.since < JOBS_FORBIDDEN_GRACE_MS) throw err;
      if (!forbidden.logged) {
        forbidden.logged = true;
        logger.log('warn', 'no permission to read cleanup Jobs; assuming none exist', { error: err.message });
      }
      return undefined;
    }
  };
  return { get, read };
}
