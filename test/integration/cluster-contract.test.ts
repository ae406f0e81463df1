/**
 * The Cluster contract against RestCluster and the real kube-apiserver started by
 * scripts/run-tests.mjs, plus what only a real server can show: loading the harness' kubeconfig,
 * 401/403 mapping, token-file rotation, and no leaked listeners after a real watch ends.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { getEventListeners } from 'node:events';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';

import { ManualClock } from '../../src/core/clock.js';
import { KubeApiError, isGone } from '../../src/core/kube/cluster.js';
import { loadKubeconfig, type ConnectionSettings } from '../../src/core/kube/kubeconfig.js';
import { RestCluster } from '../../src/core/kube/rest-cluster.js';
import { clusterContract } from '../contract/cluster-contract.js';
import { rbacRolesFromManifests, tokenForServiceAccount } from '../support/cluster.js';
import { adminKubeConfig, requireTestControlPlane } from '../support/test-cluster.js';

async function adminConnection(): Promise<ConnectionSettings> {
  const plane = requireTestControlPlane();
  return { server: plane.server, ca: await readFile(plane.caFile, 'utf8'), token: plane.adminToken, source: 'test' };
}

/**
 * Waits until the server has compacted resourceVersion 1 for Events. Events bypass the watch cache
 * (kube-apiserver's default --watch-cache-sizes disables it for events), so a watch of them from an
 * old resourceVersion goes to etcd, which the harness compacts every few seconds (PersistentVolumes
 * are served from the watch cache, which can still replay from "1" on a young server).
 */
async function expiredEventsResourceVersion(cluster: RestCluster): Promise<string> {
  const deadline = Date.now() + 45_000;
  for (;;) {
    const controller = new AbortController();
    const timer = setTimeout(() => {
      controller.abort();
    }, 2_000);
    try {
      for await (const event of cluster.events.watch({ resourceVersion: '1', signal: controller.signal })) {
        if (event.type !== 'BOOKMARK') break;
      }
    } catch (error) {
      if (isGone(error)) return '1';
      throw error;
    } finally {
      clearTimeout(timer);
      controller.abort();
    }
    if (Date.now() > deadline) throw new Error('resourceVersion 1 was never compacted');
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

clusterContract('RestCluster against a real kube-apiserver', async () => {
  const cluster = new RestCluster({ connection: await adminConnection() });
  return {
    cluster,
    prefix: `ct-${randomBytes(3).toString('hex')}`,
    cleanup: () => {
      cluster.close();
      return Promise.resolve();
    },
    expiredEventsResourceVersion: () => expiredEventsResourceVersion(cluster),
  };
});

void describe('RestCluster against a real kube-apiserver', () => {
  const prefix = `rc-${randomBytes(3).toString('hex')}`;
  const cleanups: (() => Promise<void>)[] = [];
  let admin: RestCluster;

  before(async () => {
    admin = new RestCluster({ connection: await adminConnection() });
  });

  after(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
    admin.close();
  });

  void it('connects with the kubeconfig file the harness writes', async () => {
    const plane = requireTestControlPlane();
    const settings = await loadKubeconfig(plane.kubeconfigPath);
    assert.equal(settings.server, plane.server);
    assert.equal(settings.namespace, 'default');
    const cluster = new RestCluster({ connection: settings });
    try {
      const list = await cluster.storageClasses.list();
      assert.match(list.metadata.resourceVersion ?? '', /^\d+$/);
    } finally {
      cluster.close();
    }
  });

  void it('verifies the server certificate unless insecureSkipTLSVerify is set', async () => {
    const plane = requireTestControlPlane();
    const untrusted = new RestCluster({
      connection: { server: plane.server, token: plane.adminToken, source: 'test' },
    });
    try {
      await assert.rejects(untrusted.storageClasses.list(), (error: unknown) => {
        assert.ok(error instanceof Error && !(error instanceof KubeApiError), String(error));
        assert.match((error as NodeJS.ErrnoException).code ?? '', /CERT|SELF_SIGNED|UNABLE_TO_VERIFY/);
        return true;
      });
    } finally {
      untrusted.close();
    }
    const insecure = new RestCluster({
      connection: { server: plane.server, token: plane.adminToken, insecureSkipTLSVerify: true, source: 'test' },
    });
    try {
      await insecure.storageClasses.list();
    } finally {
      insecure.close();
    }
  });

  void it('maps a bad token to 401 Unauthorized and a token without permissions to 403 Forbidden', async () => {
    const plane = requireTestControlPlane();
    const ca = await readFile(plane.caFile, 'utf8');
    const anonymous = new RestCluster({
      connection: { server: plane.server, ca, token: 'not-a-token', source: 'test' },
    });
    try {
      await assert.rejects(anonymous.nodes.list(), (error: unknown) => {
        assert.ok(error instanceof KubeApiError);
        assert.equal(error.status, 401);
        assert.equal(error.reason, 'Unauthorized');
        return true;
      });
    } finally {
      anonymous.close();
    }

    const [role] = rbacRolesFromManifests(`
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: ${prefix}-pv-reader
rules:
  - apiGroups: [""]
    resources: ["persistentvolumes"]
    verbs: ["get"]
`);
    assert.ok(role);
    const access = await tokenForServiceAccount(adminKubeConfig(plane), 'default', `${prefix}-sa`, role);
    cleanups.push(() => access.cleanup());
    const limited = new RestCluster({ connection: { server: plane.server, ca, token: access.token, source: 'test' } });
    try {
      // get is allowed: a missing PV is a 404, not a 403
      await assert.rejects(limited.persistentVolumes.get(`${prefix}-missing`), (error: unknown) => {
        assert.ok(error instanceof KubeApiError);
        assert.equal(error.status, 404);
        return true;
      });
      await assert.rejects(limited.persistentVolumes.list(), (error: unknown) => {
        assert.ok(error instanceof KubeApiError);
        assert.equal(error.status, 403);
        assert.equal(error.reason, 'Forbidden');
        assert.match(error.message, /cannot list resource "persistentvolumes"/);
        return true;
      });
      const controller = new AbortController();
      await assert.rejects(
        (async () => {
          for await (const event of limited.persistentVolumes.watch({
            resourceVersion: '0',
            signal: controller.signal,
          })) {
            assert.fail(`no event expected, got ${event.type}`);
          }
        })(),
        (error: unknown) => error instanceof KubeApiError && error.status === 403 && error.reason === 'Forbidden',
      );
      controller.abort();
    } finally {
      limited.close();
    }
  });

  void it('re-reads a token file after the refresh period and after a 401', async () => {
    const plane = requireTestControlPlane();
    const dir = await mkdtemp(join(tmpdir(), 'lvp-token-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const tokenFile = join(dir, 'token');
    await writeFile(tokenFile, `${plane.adminToken}\n`);
    const clock = new ManualClock(Date.now());
    const cluster = new RestCluster({
      connection: { server: plane.server, ca: await readFile(plane.caFile, 'utf8'), tokenFile, source: 'test' },
      clock,
      tokenRefreshMs: 60_000,
    });
    try {
      await cluster.storageClasses.list();
      await writeFile(tokenFile, 'rotated-to-garbage\n');
      await cluster.storageClasses.list(); // still the cached token
      await clock.advance(60_000);
      await assert.rejects(cluster.storageClasses.list(), (error: unknown) => {
        assert.ok(error instanceof KubeApiError);
        assert.equal(error.status, 401);
        return true;
      });
      await writeFile(tokenFile, plane.adminToken);
      // The 401 dropped the cached token: the next request reads the file again.
      await cluster.storageClasses.list();
    } finally {
      cluster.close();
    }
  });

  void it('a real watch leaves no abort listener behind, whether aborted, broken out of or timed out', async () => {
    const signal = new AbortController();
    const list = await admin.storageClasses.list();
    // Ended by break after the first event.
    const name = `${prefix}-sc`;
    cleanups.push(async () => {
      await admin.storageClasses.delete(name).catch(() => undefined);
    });
    await admin.storageClasses.create({ metadata: { name }, provisioner: 'kubernetes.io/no-provisioner' });
    for await (const event of admin.storageClasses.watch({
      resourceVersion: list.metadata.resourceVersion ?? '',
      signal: signal.signal,
    })) {
      assert.equal(event.type, 'ADDED');
      break;
    }
    assert.equal(getEventListeners(signal.signal, 'abort').length, 0);
    // Ended by the server (timeoutSeconds).
    for await (const event of admin.storageClasses.watch({
      resourceVersion: list.metadata.resourceVersion ?? '',
      labelSelector: 'no-such-label=x',
      timeoutSeconds: 1,
      signal: signal.signal,
    })) {
      assert.fail(`no event expected, got ${event.type}`);
    }
    assert.equal(getEventListeners(signal.signal, 'abort').length, 0);
    // Ended by abort while idle.
    const aborting = new AbortController();
    const idle = (async () => {
      for await (const event of admin.storageClasses.watch({
        resourceVersion: list.metadata.resourceVersion ?? '',
        labelSelector: 'no-such-label=x',
        signal: aborting.signal,
      })) {
        assert.fail(`no event expected, got ${event.type}`);
      }
    })();
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal(getEventListeners(aborting.signal, 'abort').length, 1);
    aborting.abort();
    await idle;
    assert.equal(getEventListeners(aborting.signal, 'abort').length, 0);
  });
});
