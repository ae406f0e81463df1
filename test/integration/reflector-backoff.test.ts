// The reflector against the real kube-apiserver with RBAC that allows `list` but forbids `watch`
// (a ClusterRole missing one verb, as after a hand-edited install): the LIST requests it makes
// over a few seconds stay few and spaced out by a growing delay, instead of one every 500 ms.
//
// Lint: client-node's models are plain data classes; the ClusterRole is an object literal as in its examples.
/* eslint-disable @typescript-eslint/no-unsafe-class-instance-assignment */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { after, before, describe, it } from 'node:test';
import { systemClock } from '../../src/core/clock.js';
import type { ResourceClient } from '../../src/core/kube/cluster.js';
import type { StorageClass } from '../../src/core/kube/objects.js';
import { Reflector } from '../../src/core/kube/reflector.js';
import { RestCluster } from '../../src/core/kube/rest-cluster.js';
import { silentLogger } from '../../src/core/log.js';
import { tokenForServiceAccount, type ServiceAccountAccess } from '../support/cluster.js';
import { adminKubeConfig, requireTestControlPlane } from '../support/test-cluster.js';

void describe('Reflector against a real apiserver that allows list but forbids watch', () => {
  const name = `lvp-nowatch-${randomBytes(3).toString('hex')}`;
  let access: ServiceAccountAccess | undefined;
  let cluster: RestCluster | undefined;

  before(async () => {
    access = await tokenForServiceAccount(adminKubeConfig(), 'default', name, {
      kind: 'ClusterRole',
      apiVersion: 'rbac.authorization.k8s.io/v1',
      metadata: { name },
      rules: [{ apiGroups: ['storage.k8s.io'], resources: ['storageclasses'], verbs: ['list'] }],
    });
    const plane = requireTestControlPlane();
    cluster = new RestCluster({
      connection: {
        server: plane.server,
        ca: await readFile(plane.caFile, 'utf8'),
        token: access.token,
        source: 'test',
      },
    });
  });

  after(async () => {
    cluster?.close();
    await access?.cleanup();
  });

  void it('makes a few, increasingly spaced LIST requests in 6 s', async () => {
    assert.ok(cluster);
    const base = cluster.storageClasses;
    const lists: number[] = [];
    let watches = 0;
    const client: ResourceClient<StorageClass> = {
      ...base,
      list: (options) => {
        lists.push(Date.now());
        return base.list(options);
      },
      watch: (options) => {
        watches += 1;
        return base.watch(options);
      },
    };
    const reflector = new Reflector<StorageClass>({
      client,
      clock: systemClock,
      logger: silentLogger,
      resource: 'storageclasses',
    });
    const abort = new AbortController();
    const running = reflector.run(abort.signal);
    await reflector.synced;
    await new Promise((resolve) => setTimeout(resolve, 6_000));
    abort.abort();
    await running;
    assert.match(reflector.lastError ?? '', /forbidden/iu, 'the watch was refused');
    // Backoff 800 ms, 1.6 s, 3.2 s (each jittered up to ×2): 3 or 4 LISTs in 6 s; before, one
    // every 500 ms (a dozen).
    assert.ok(lists.length >= 2 && lists.length <= 4, `LIST requests in 6 s: ${lists.length}`);
    assert.ok(watches >= lists.length - 1 && watches <= lists.length, `one watch attempt per list: ${watches}`);
    const intervals = lists.slice(1).map((t, i) => t - (lists[i] ?? 0));
    for (const [i, gap] of intervals.entries()) {
      assert.ok(gap >= 800 * 2 ** i, `LIST ${i + 2} came ${gap} ms after the one before, at least ${800 * 2 ** i}`);
    }
  });
});
