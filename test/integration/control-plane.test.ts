/**
 * Smoke tests of the real control plane (etcd + kube-apiserver) started by scripts/run-tests.mjs,
 * through @kubernetes/client-node: the operations the provisioner relies on, the behaviours a fake
 * could get wrong (410 Gone on a stale resourceVersion, RBAC denials, status subresources), and the
 * helpers in test/support/cluster.ts.
 *
 * Lint: client-node's models are plain data classes with no instance methods, and its API takes
 * object literals for them (as all of its own examples do), so the class-instance rules do not apply.
 */
/* eslint-disable @typescript-eslint/no-unsafe-class-instance-assignment, @typescript-eslint/no-misused-spread */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';

import {
  BatchV1Api,
  CoreV1Api,
  StorageV1Api,
  VersionApi,
  makeInformer,
  type CoreV1Event,
  type KubeConfig,
  type V1Job,
  type V1PersistentVolume,
  type V1PodTemplate,
  type V1StorageClass,
} from '@kubernetes/client-node';

import {
  apiStatusCode,
  bindPersistentVolume,
  createNode,
  deleteJob,
  deletePersistentVolume,
  markJob,
  rbacRolesFromManifests,
  recordWatch,
  releasePersistentVolume,
  tokenForServiceAccount,
  type WatchEvent,
} from '../support/cluster.js';
import { adminKubeConfig, requireTestControlPlane } from '../support/test-cluster.js';

const NAMESPACE = 'default';
const prefix = `cp-smoke-${randomBytes(3).toString('hex')}`;

function localPv(name: string, labels: Record<string, string> = {}): V1PersistentVolume {
  return {
    apiVersion: 'v1',
    kind: 'PersistentVolume',
    metadata: { name, labels: { 'lvp-test': prefix, ...labels } },
    spec: {
      capacity: { storage: '1Gi' },
      accessModes: ['ReadWriteOnce'],
      persistentVolumeReclaimPolicy: 'Delete',
      storageClassName: `${prefix}-sc`,
      volumeMode: 'Filesystem',
      local: { path: `/mnt/disks/${name}` },
      nodeAffinity: {
        required: {
          nodeSelectorTerms: [
            { matchExpressions: [{ key: 'kubernetes.io/hostname', operator: 'In', values: [`${prefix}-node`] }] },
          ],
        },
      },
    },
  };
}

function job(name: string): V1Job {
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { name, namespace: NAMESPACE, labels: { 'lvp-test': prefix } },
    spec: {
      backoffLimit: 0,
      template: {
        spec: {
          restartPolicy: 'Never',
          containers: [{ name: 'cleanup', image: 'busybox:1.36', command: ['true'] }],
        },
      },
    },
  };
}

/** Up to two compaction intervals after start-up, plus slack for a slow machine. */
const COMPACTION_WAIT_MS = 30_000;
const PODTEMPLATES = `/api/v1/namespaces/${NAMESPACE}/podtemplates`;

function podTemplate(name: string, informerLabel: string): V1PodTemplate {
  return {
    apiVersion: 'v1',
    kind: 'PodTemplate',
    metadata: { name, namespace: NAMESPACE, labels: { 'lvp-test': prefix, informer: informerLabel } },
    template: { spec: { containers: [{ name: 'c', image: 'busybox:1.36' }] } },
  };
}

function nameOf(event: WatchEvent): string | undefined {
  const object = event.object as { metadata?: { name?: string } } | undefined;
  return object?.metadata?.name;
}

void describe('real control plane', () => {
  let kc: KubeConfig;
  let core: CoreV1Api;
  let storage: StorageV1Api;
  let batch: BatchV1Api;
  const cleanups: (() => Promise<void>)[] = [];

  before(() => {
    // Fails loudly when the suite is not run by scripts/run-tests.mjs.
    kc = adminKubeConfig(requireTestControlPlane());
    core = kc.makeApiClient(CoreV1Api);
    storage = kc.makeApiClient(StorageV1Api);
    batch = kc.makeApiClient(BatchV1Api);
  });

  after(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  });

  /**
   * The harness runs the apiserver with --etcd-compaction-interval=5s, so resourceVersion 1 is
   * compacted about 10 s after start-up, and PodTemplates bypass the watch cache (which would
   * otherwise replay its history from start-up), so their watches are served by etcd.
   */
  async function waitForCompaction(): Promise<void> {
    const deadline = Date.now() + COMPACTION_WAIT_MS;
    for (;;) {
      const code = await watchStatusFrom(PODTEMPLATES, '1');
      if (code === 410) return;
      if (Date.now() > deadline) assert.fail(`watch from resourceVersion 1 never got 410 Gone (last: ${code})`);
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }

  /** Watches `path` from `resourceVersion`: 410 when the server answers Gone, else what happened first. */
  async function watchStatusFrom(path: string, resourceVersion: string): Promise<number | string> {
    const watch = await recordWatch(kc, path, { resourceVersion });
    try {
      const first = await Promise.race([
        watch.waitFor(() => true, 3_000).then((event) => ({ event })),
        watch.waitForEnd(3_000).then((end) => ({ end })),
      ]).catch(() => undefined);
      if (first === undefined) return 'no event within 3 s';
      if ('event' in first) {
        const code = (first.event.object as { code?: number } | undefined)?.code;
        return first.event.type === 'ERROR' && code !== undefined ? code : first.event.type;
      }
      const error = first.end.error as { statusCode?: number; code?: number } | null;
      return error?.statusCode ?? error?.code ?? 'closed without error';
    } finally {
      watch.stop();
    }
  }

  void it('serves the Kubernetes version the binaries were built for', async () => {
    const res = await fetchVersion(kc);
    assert.match(res, /^v1\.\d+\.\d+/);
  });

  void it('creates, gets, lists, watches, updates and deletes a PersistentVolume', async () => {
    const name = `${prefix}-pv-crud`;
    cleanups.push(() => deletePersistentVolume(kc, name));
    const list0 = await core.listPersistentVolume({ labelSelector: `lvp-test=${prefix}` });
    const watch = await recordWatch(kc, '/api/v1/persistentvolumes', {
      resourceVersion: list0.metadata?.resourceVersion,
      fieldSelector: `metadata.name=${name}`,
    });
    try {
      const created = await core.createPersistentVolume({ body: localPv(name) });
      assert.equal(created.metadata?.name, name);
      // defaulted and admission-managed fields only a real server sets
      assert.ok(created.metadata.uid);
      assert.deepEqual(created.metadata.finalizers, ['kubernetes.io/pv-protection']);
      assert.equal(created.status?.phase, 'Pending');

      const got = await core.readPersistentVolume({ name });
      assert.equal(got.spec?.local?.path, `/mnt/disks/${name}`);
      const listed = await core.listPersistentVolume({ labelSelector: `lvp-test=${prefix}` });
      assert.ok(listed.items.some((pv) => pv.metadata?.name === name));

      got.metadata = { ...got.metadata, labels: { ...got.metadata?.labels, updated: 'yes' } };
      const updated = await core.replacePersistentVolume({ name, body: got });
      assert.notEqual(updated.metadata?.resourceVersion, created.metadata.resourceVersion);

      // a stale resourceVersion is a conflict
      await assert.rejects(
        core.replacePersistentVolume({
          name,
          body: { ...got, metadata: { ...got.metadata, resourceVersion: created.metadata.resourceVersion ?? '' } },
        }),
        (error: unknown) => apiStatusCode(error) === 409,
      );

      await watch.waitFor((e) => e.type === 'ADDED' && nameOf(e) === name);
      const modified = await watch.waitFor(
        (e) => e.type === 'MODIFIED' && (e.object as V1PersistentVolume).metadata?.labels?.['updated'] === 'yes',
      );
      assert.equal(nameOf(modified), name);

      await deletePersistentVolume(kc, name);
      await watch.waitFor((e) => e.type === 'DELETED' && nameOf(e) === name);
      await assert.rejects(core.readPersistentVolume({ name }), (error: unknown) => apiStatusCode(error) === 404);
    } finally {
      watch.stop();
    }
  });

  void it('creates, gets, lists, watches and deletes a StorageClass', async () => {
    const name = `${prefix}-sc`;
    cleanups.push(async () => {
      await storage.deleteStorageClass({ name }).catch(() => undefined);
    });
    const list0 = await storage.listStorageClass();
    const watch = await recordWatch(kc, '/apis/storage.k8s.io/v1/storageclasses', {
      resourceVersion: list0.metadata?.resourceVersion,
      fieldSelector: `metadata.name=${name}`,
    });
    try {
      const body: V1StorageClass = {
        apiVersion: 'storage.k8s.io/v1',
        kind: 'StorageClass',
        metadata: { name },
        provisioner: 'kubernetes.io/no-provisioner',
        volumeBindingMode: 'WaitForFirstConsumer',
      };
      const created = await storage.createStorageClass({ body });
      assert.equal(created.reclaimPolicy, 'Delete', 'reclaimPolicy is defaulted by the server');
      assert.equal((await storage.readStorageClass({ name })).provisioner, 'kubernetes.io/no-provisioner');
      assert.ok((await storage.listStorageClass()).items.some((sc) => sc.metadata?.name === name));
      // provisioner is immutable
      await assert.rejects(
        storage.replaceStorageClass({ name, body: { ...created, provisioner: 'example.com/other' } }),
        (error: unknown) => apiStatusCode(error) === 422,
      );
      await watch.waitFor((e) => e.type === 'ADDED' && nameOf(e) === name);
      await storage.deleteStorageClass({ name });
      await watch.waitFor((e) => e.type === 'DELETED' && nameOf(e) === name);
    } finally {
      watch.stop();
    }
  });

  void it('creates, gets, lists, watches and deletes a Job; markJob writes a valid status', async () => {
    const succeeded = `${prefix}-job-ok`;
    const failed = `${prefix}-job-fail`;
    cleanups.push(
      () => deleteJob(kc, NAMESPACE, succeeded),
      () => deleteJob(kc, NAMESPACE, failed),
    );
    const list0 = await batch.listNamespacedJob({ namespace: NAMESPACE });
    const watch = await recordWatch(kc, `/apis/batch/v1/namespaces/${NAMESPACE}/jobs`, {
      resourceVersion: list0.metadata?.resourceVersion,
      labelSelector: `lvp-test=${prefix}`,
    });
    try {
      const created = await batch.createNamespacedJob({ namespace: NAMESPACE, body: job(succeeded) });
      assert.equal(created.spec?.completions, 1, 'completions is defaulted by the server');
      await batch.createNamespacedJob({ namespace: NAMESPACE, body: job(failed) });
      assert.equal(
        (await batch.readNamespacedJob({ namespace: NAMESPACE, name: succeeded })).metadata?.name,
        succeeded,
      );
      const listed = await batch.listNamespacedJob({ namespace: NAMESPACE, labelSelector: `lvp-test=${prefix}` });
      assert.deepEqual(listed.items.map((j) => j.metadata?.name).sort(), [failed, succeeded].sort());

      // A status the real validation rejects: Complete without completionTime / SuccessCriteriaMet.
      const bad = await batch.readNamespacedJobStatus({ namespace: NAMESPACE, name: succeeded });
      bad.status = {
        startTime: new Date(),
        conditions: [{ type: 'Complete', status: 'True', lastTransitionTime: new Date() }],
      };
      await assert.rejects(
        batch.replaceNamespacedJobStatus({ namespace: NAMESPACE, name: succeeded, body: bad }),
        (error: unknown) => apiStatusCode(error) === 422,
      );

      const ok = await markJob(kc, NAMESPACE, succeeded, 'succeeded');
      assert.deepEqual(
        ok.status?.conditions?.map((c) => [c.type, c.status]),
        [
          ['SuccessCriteriaMet', 'True'],
          ['Complete', 'True'],
        ],
      );
      assert.equal(ok.status.succeeded, 1);
      assert.ok(ok.status.completionTime);

      const ko = await markJob(kc, NAMESPACE, failed, 'failed');
      assert.deepEqual(
        ko.status?.conditions?.map((c) => [c.type, c.status]),
        [
          ['FailureTarget', 'True'],
          ['Failed', 'True'],
        ],
      );
      assert.equal(ko.status.completionTime, undefined);

      await watch.waitFor(
        (e) =>
          e.type === 'MODIFIED' &&
          nameOf(e) === succeeded &&
          ((e.object as V1Job).status?.conditions ?? []).some((c) => c.type === 'Complete'),
      );
      await deleteJob(kc, NAMESPACE, succeeded);
      await watch.waitFor((e) => e.type === 'DELETED' && nameOf(e) === succeeded);
    } finally {
      watch.stop();
    }
  });

  void it('creates, gets, lists, watches and deletes an Event', async () => {
    const name = `${prefix}-event`;
    cleanups.push(async () => {
      await core.deleteNamespacedEvent({ namespace: NAMESPACE, name }).catch(() => undefined);
    });
    const list0 = await core.listNamespacedEvent({ namespace: NAMESPACE });
    const watch = await recordWatch(kc, `/api/v1/namespaces/${NAMESPACE}/events`, {
      resourceVersion: list0.metadata?.resourceVersion,
      fieldSelector: `metadata.name=${name}`,
    });
    try {
      const now = new Date();
      const body: CoreV1Event = {
        apiVersion: 'v1',
        kind: 'Event',
        metadata: { name, namespace: NAMESPACE },
        involvedObject: { apiVersion: 'v1', kind: 'PersistentVolume', name: `${prefix}-pv` },
        reason: 'ProvisioningSucceeded',
        message: 'created by the control-plane smoke test',
        type: 'Normal',
        source: { component: 'lvp-test' },
        firstTimestamp: now,
        lastTimestamp: now,
        count: 1,
      };
      await core.createNamespacedEvent({ namespace: NAMESPACE, body });
      const got = await core.readNamespacedEvent({ namespace: NAMESPACE, name });
      assert.equal(got.reason, 'ProvisioningSucceeded');
      const listed = await core.listNamespacedEvent({
        namespace: NAMESPACE,
        fieldSelector: `involvedObject.name=${prefix}-pv`,
      });
      assert.deepEqual(
        listed.items.map((e) => e.metadata.name),
        [name],
      );
      await watch.waitFor((e) => e.type === 'ADDED' && nameOf(e) === name);
      await core.deleteNamespacedEvent({ namespace: NAMESPACE, name });
      await watch.waitFor((e) => e.type === 'DELETED' && nameOf(e) === name);
    } finally {
      watch.stop();
    }
  });

  void it('answers a watch and an exact list from a compacted resourceVersion with 410 Gone', async () => {
    await waitForCompaction();
    assert.equal(await watchStatusFrom(PODTEMPLATES, '1'), 410);
    // so is a list at an exact, compacted resourceVersion
    await assert.rejects(
      core.listNamespacedPodTemplate({ namespace: NAMESPACE, resourceVersion: '1', resourceVersionMatch: 'Exact' }),
      (error: unknown) => apiStatusCode(error) === 410,
    );
  });

  void it('an informer relists after 410 Gone and ends with the right objects', async () => {
    const label = `${prefix}-informer`;
    const keep = `${prefix}-inf-keep`;
    const gone = `${prefix}-inf-gone`;
    const late = `${prefix}-inf-late`;
    for (const name of [keep, gone, late]) {
      cleanups.push(async () => {
        await core.deleteNamespacedPodTemplate({ namespace: NAMESPACE, name }).catch(() => undefined);
      });
    }
    await waitForCompaction();
    await core.createNamespacedPodTemplate({ namespace: NAMESPACE, body: podTemplate(keep, label) });
    await core.createNamespacedPodTemplate({ namespace: NAMESPACE, body: podTemplate(gone, label) });

    let lists = 0;
    const informer = makeInformer<V1PodTemplate>(
      kc,
      PODTEMPLATES,
      async () => {
        lists++;
        const list = await core.listNamespacedPodTemplate({ namespace: NAMESPACE, labelSelector: `informer=${label}` });
        if (lists > 1) return list;
        // The first list hands the informer a compacted resourceVersion (as if it resumed from an
        // old one), and the world changes before it watches: the real server must answer the watch
        // with 410 Gone, and the informer must relist to learn that `late` appeared and `gone` went.
        await core.createNamespacedPodTemplate({ namespace: NAMESPACE, body: podTemplate(late, label) });
        await core.deleteNamespacedPodTemplate({ namespace: NAMESPACE, name: gone });
        return { ...list, metadata: { ...list.metadata, resourceVersion: '1' } };
      },
      `informer=${label}`,
    );
    const deleted: string[] = [];
    informer.on('delete', (pt) => deleted.push(pt.metadata?.name ?? ''));
    const errors: unknown[] = [];
    informer.on('error', (error: unknown) => errors.push(error));
    await informer.start();
    try {
      const deadline = Date.now() + 20_000;
      const names = (): string[] =>
        informer
          .list()
          .map((pt) => pt.metadata?.name ?? '')
          .sort();
      while (lists < 2 || names().join() !== [keep, late].sort().join()) {
        if (Date.now() > deadline) {
          assert.fail(`informer did not converge: lists=${lists} cache=${names().join()} errors=${String(errors)}`);
        }
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      assert.ok(lists >= 2, 'the informer relisted');
      assert.deepEqual(deleted, [gone]);
      assert.deepEqual(errors, []);
    } finally {
      await informer.stop();
    }
  });

  void it('bindPersistentVolume and releasePersistentVolume write claimRef and the status phase', async () => {
    const name = `${prefix}-pv-bind`;
    cleanups.push(() => deletePersistentVolume(kc, name));
    await core.createPersistentVolume({ body: localPv(name) });
    const bound = await bindPersistentVolume(kc, name, { namespace: NAMESPACE, name: 'data-0', uid: 'uid-1234' });
    assert.equal(bound.status?.phase, 'Bound');
    assert.deepEqual(
      [bound.spec?.claimRef?.namespace, bound.spec?.claimRef?.name, bound.spec?.claimRef?.uid],
      [NAMESPACE, 'data-0', 'uid-1234'],
    );
    assert.ok(bound.status.lastPhaseTransitionTime, 'the server records the phase transition time');
    const released = await releasePersistentVolume(kc, name);
    assert.equal(released.status?.phase, 'Released');
    assert.equal(released.spec?.claimRef?.name, 'data-0');
    assert.equal((await core.readPersistentVolume({ name })).status?.phase, 'Released');
  });

  void it('createNode creates a labelled Node', async () => {
    const name = `${prefix}-node`;
    cleanups.push(async () => {
      await core.deleteNode({ name }).catch(() => undefined);
    });
    const node = await createNode(kc, name, { 'kubernetes.io/hostname': name, 'lvp-test': prefix });
    assert.equal(node.metadata?.labels?.['kubernetes.io/hostname'], name);
    const listed = await core.listNode({ labelSelector: `lvp-test=${prefix}` });
    assert.deepEqual(
      listed.items.map((n) => n.metadata?.name),
      [name],
    );
  });

  void it('a ServiceAccount with only `get` on PVs is denied create (403) and list', async () => {
    const sa = `${prefix}-sa`;
    const [role] = rbacRolesFromManifests(`
apiVersion: v1
kind: ServiceAccount
metadata:
  name: ignored
---
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
    const access = await tokenForServiceAccount(kc, NAMESPACE, sa, role);
    cleanups.push(() => access.cleanup());
    const limited = access.kubeConfig.makeApiClient(CoreV1Api);
    const name = `${prefix}-pv-rbac`;
    cleanups.push(() => deletePersistentVolume(kc, name));

    // get is allowed: a missing PV is a 404, not a 403
    await assert.rejects(limited.readPersistentVolume({ name }), (error: unknown) => apiStatusCode(error) === 404);
    await assert.rejects(
      limited.createPersistentVolume({ body: localPv(name) }),
      (error: unknown) => apiStatusCode(error) === 403,
    );
    await assert.rejects(limited.listPersistentVolume(), (error: unknown) => apiStatusCode(error) === 403);

    await core.createPersistentVolume({ body: localPv(name) });
    assert.equal((await limited.readPersistentVolume({ name })).metadata?.name, name);
  });
});

async function fetchVersion(kc: KubeConfig): Promise<string> {
  // /version through the same client stack (TLS with the test CA, bearer token)
  const info = await kc.makeApiClient(VersionApi).getCode();
  return info.gitVersion;
}
