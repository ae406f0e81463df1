// How the reclaimer finds cleanup Jobs (src/core/cleanup/job-lookup.ts): the watch's cache when
// there is one; a GET otherwise, where a 403 means "no Jobs" only once it lasted the grace period
// (an apiserver starting up answers 403 for seconds); `read` never guesses.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { JOBS_FORBIDDEN_GRACE_MS, jobLookup, type JobsForbidden } from '../../../src/core/cleanup/job-lookup.js';
import { ManualClock } from '../../../src/core/clock.js';
import { KubeApiError, type Cluster } from '../../../src/core/kube/cluster.js';
import { MemoryCluster } from '../../../src/core/kube/memory/memory-cluster.js';
import type { Job } from '../../../src/core/kube/objects.js';
import { MemoryLogger } from '../../../src/core/log.js';

const JOB: Job = {
  metadata: { name: 'cleanup-pv-a', namespace: 'default', labels: { pvuuid: 'u1' } },
  spec: { template: { spec: { containers: [{ name: 'c', image: 'i' }], restartPolicy: 'Never' } } },
};

async function setup() {
  const cluster = new MemoryCluster();
  await cluster.jobs.create(JOB, { namespace: 'default' });
  const answer = { forbidden: false };
  const jobs = Object.assign(Object.create(cluster.jobs) as Cluster['jobs'], {
    get: (name: string, options: { namespace: string }) =>
      answer.forbidden
        ? Promise.reject(new KubeApiError(403, 'Forbidden', 'jobs.batch "x" is forbidden'))
        : cluster.jobs.get(name, options),
  });
  const clock = new ManualClock(1_000);
  const logger = new MemoryLogger();
  const forbidden: JobsForbidden = { since: undefined, logged: false };
  const lookup = jobLookup({ cluster: { jobs }, namespace: 'default', clock, logger, forbidden });
  return { answer, clock, logger, forbidden, lookup };
}

describe('the cleanup Job lookup', () => {
  it('takes a 403 for "no Jobs" only after it lasted the grace period, said once; a read in between resets it', async () => {
    const w = await setup();
    assert.equal((await w.lookup.get('cleanup-pv-a'))?.metadata.name, 'cleanup-pv-a');
    assert.equal(await w.lookup.get('cleanup-pv-b'), undefined, '404: none');
    w.answer.forbidden = true;
    await assert.rejects(w.lookup.get('cleanup-pv-a'), { status: 403 }, 'at first a 403 says nothing');
    await w.clock.advance(JOBS_FORBIDDEN_GRACE_MS - 1);
    await assert.rejects(w.lookup.get('cleanup-pv-a'), { status: 403 });
    w.answer.forbidden = false;
    assert.equal((await w.lookup.get('cleanup-pv-a'))?.metadata.name, 'cleanup-pv-a');
    assert.equal(w.forbidden.since, undefined, 'an answer ends the forbidden spell');
    w.answer.forbidden = true;
    await assert.rejects(w.lookup.get('cleanup-pv-a'), { status: 403 });
    await w.clock.advance(JOBS_FORBIDDEN_GRACE_MS);
    assert.equal(await w.lookup.get('cleanup-pv-a'), undefined, 'a lasting 403: no permission, so no Jobs');
    assert.equal(await w.lookup.get('cleanup-pv-a'), undefined);
    assert.deepEqual(w.logger.messages('warn'), ['no permission to read cleanup Jobs; assuming none exist']);
  });

  it('read never guesses: a Job, undefined on 404, and a 403 thrown even after the grace period', async () => {
    const w = await setup();
    assert.equal((await w.lookup.read('cleanup-pv-a'))?.metadata.labels?.['pvuuid'], 'u1');
    assert.equal(await w.lookup.read('cleanup-pv-b'), undefined);
    w.answer.forbidden = true;
    await assert.rejects(w.lookup.get('cleanup-pv-a'), { status: 403 });
    await w.clock.advance(JOBS_FORBIDDEN_GRACE_MS * 2);
    assert.equal(await w.lookup.get('cleanup-pv-a'), undefined);
    await assert.rejects(w.lookup.read('cleanup-pv-a'), { status: 403 });
  });

  it("answers get from the watch's cache when there is one, and read from the apiserver", async () => {
    const w = await setup();
    const cached = new Map<string, Job>();
    const lookup = jobLookup({
      cluster: { jobs: new MemoryCluster().jobs },
      namespace: 'default',
      clock: w.clock,
      logger: w.logger,
      watched: { get: (name) => cached.get(name) },
      forbidden: w.forbidden,
    });
    assert.equal(await lookup.get('cleanup-pv-a'), undefined, 'not in the cache yet');
    cached.set('cleanup-pv-a', JOB);
    assert.equal(await lookup.get('cleanup-pv-a'), JOB);
    assert.equal(await lookup.read('cleanup-pv-a'), undefined, 'read asks the apiserver (an empty one here)');
  });
});
