/**
 * The Cluster contract: behaviour every implementation of the Cluster port must share with a real
 * kube-apiserver (no controllers running). test/integration/cluster-contract.test.ts runs it against
 * RestCluster and the real control plane; test/unit/kube/memory/memory-cluster.test.ts against
 * MemoryCluster. Each expectation here was first observed on a real kube-apiserver 1.35.
 *
 * Tests isolate themselves by name prefix and a `contract=<prefix>` label, and remove what they
 * created (PV finalizers included) when the suite ends.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import {
  KubeApiError,
  isAlreadyExists,
  isConflict,
  isGone,
  isNotFound,
  type Cluster,
  type LeaseCluster,
  type NodeCleanupCluster,
  type ResourceClient,
  type WatchEvent,
} from '../../src/core/kube/cluster.js';
import type {
  CoreEvent,
  Job,
  Lease,
  Node,
  PersistentVolume,
  PersistentVolumeClaim,
  Pod,
  StorageClass,
} from '../../src/core/kube/objects.js';

export interface ContractSetup {
  readonly cluster: Cluster & LeaseCluster & NodeCleanupCluster;
  /** Unique per run: a valid label value (at most 40 characters) and name prefix. */
  readonly prefix: string;
  cleanup(): Promise<void>;
  /**
   * A resourceVersion that a watch of Events in `default` must answer with 410 Gone, resolved once
   * the server has compacted it. Without it the 410 case is skipped.
   */
  expiredEventsResourceVersion?(): Promise<string>;
}

const LABEL = 'contract';
const WAIT_MS = 10_000;

function apiError(status: number, reason?: string): (error: unknown) => boolean {
  return (error: unknown) => {
    assert.ok(error instanceof KubeApiError, `expected a KubeApiError, got ${String(error)}`);
    assert.equal(error.status, status, `status of: ${error.message}`);
    if (reason !== undefined) assert.equal(error.reason, reason, `reason of: ${error.message}`);
    return true;
  };
}

function metaName(object: unknown): string | undefined {
  const metadata = (object as { metadata?: { name?: string } } | undefined)?.metadata;
  return metadata?.name;
}

function rvOf(object: { metadata: { resourceVersion?: string } }): number {
  const rv = object.metadata.resourceVersion;
  assert.ok(rv !== undefined && /^\d+$/.test(rv), `resourceVersion ${String(rv)} is a decimal integer`);
  return Number(rv);
}

interface Recorder<T> {
  readonly events: WatchEvent<T>[];
  /** Resolves with the first event (seen already or later) matching `predicate`. */
  waitFor(predicate: (event: WatchEvent<T>) => boolean, what: string): Promise<WatchEvent<T>>;
  /** Resolves when the iteration has ended (with the error it ended with, if any). */
  readonly ended: Promise<{ error?: unknown }>;
  stop(): void;
}

/** Iterates a watch in the background, recording every event. */
function record<T>(
  client: ResourceClient<T>,
  options: {
    resourceVersion: string;
    labelSelector?: string;
    fieldSelector?: string;
    timeoutSeconds?: number;
    namespace?: string;
  },
): Recorder<T> {
  const controller = new AbortController();
  const events: WatchEvent<T>[] = [];
  const listeners = new Set<() => void>();
  const notify = (): void => {
    for (const listener of [...listeners]) listener();
  };
  const ended = (async () => {
    try {
      for await (const event of client.watch({ ...options, signal: controller.signal })) {
        events.push(event);
        notify();
      }
      return {};
    } catch (error) {
      return { error };
    } finally {
      notify();
    }
  })();
  let done = false;
  void ended.then(() => {
    done = true;
    notify();
  });
  return {
    events,
    ended,
    stop: () => {
      controller.abort();
    },
    waitFor: (predicate, what) =>
      new Promise((resolve, reject) => {
        const check = (): void => {
          const found = events.find(predicate);
          if (found !== undefined) {
            cleanup();
            resolve(found);
          } else if (done) {
            cleanup();
            reject(new Error(`watch ended before ${what}; events: ${describe(events)}`));
          }
        };
        const timer = setTimeout(() => {
          cleanup();
          reject(new Error(`timed out waiting for ${what}; events: ${describe(events)}`));
        }, WAIT_MS);
        const cleanup = (): void => {
          clearTimeout(timer);
          listeners.delete(check);
        };
        listeners.add(check);
        check();
      }),
  };

  function describe(list: readonly WatchEvent<T>[]): string {
    return JSON.stringify(
      list.map((e) => (e.type === 'BOOKMARK' ? 'BOOKMARK' : `${e.type}:${metaName(e.object) ?? '?'}`)),
    );
  }
}

export function clusterContract(name: string, setup: () => Promise<ContractSetup>): void {
  void describe(`Cluster contract: ${name}`, () => {
    let ctx: ContractSetup;
    let cluster: Cluster & LeaseCluster & NodeCleanupCluster;
    let prefix: string;
    const pvs = new Set<string>();
    const events = new Set<string>();
    const jobs = new Set<string>();
    const classes = new Set<string>();
    const nodes = new Set<string>();
    const leases = new Set<string>();
    const configMaps = new Set<string>();
    const claims = new Set<string>();
    const pods = new Set<string>();

    const n = (suffix: string): string => `${prefix}-${suffix}`;
    const selector = (): string => `${LABEL}=${prefix}`;

    function localPv(pvName: string, labels: Record<string, string> = {}): PersistentVolume {
      pvs.add(pvName);
      return {
        apiVersion: 'v1',
        kind: 'PersistentVolume',
        metadata: { name: pvName, labels: { [LABEL]: prefix, ...labels } },
        spec: {
          capacity: { storage: '1Gi' },
          accessModes: ['ReadWriteOnce'],
          storageClassName: `${prefix}-local`,
          local: { path: `/mnt/disks/${pvName}` },
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

    function event(eventName: string, extra: Partial<CoreEvent> = {}): CoreEvent {
      events.add(eventName);
      return {
        apiVersion: 'v1',
        kind: 'Event',
        metadata: { name: eventName, labels: { [LABEL]: prefix } },
        involvedObject: { apiVersion: 'v1', kind: 'PersistentVolume', name: `${prefix}-pv` },
        reason: 'ContractTest',
        message: 'written by the cluster contract suite',
        type: 'Normal',
        ...extra,
      };
    }

    function job(jobName: string): Job {
      jobs.add(jobName);
      return {
        apiVersion: 'batch/v1',
        kind: 'Job',
        metadata: { name: jobName, labels: { [LABEL]: prefix } },
        spec: {
          template: {
            spec: {
              restartPolicy: 'Never',
              containers: [{ name: 'cleanup', image: 'busybox:1.36', command: ['true'] }],
            },
          },
        },
      };
    }

    async function ignoreNotFound(fn: () => Promise<unknown>): Promise<void> {
      try {
        await fn();
      } catch (error) {
        if (!isNotFound(error)) throw error;
      }
    }

    async function removePv(pvName: string): Promise<void> {
      await ignoreNotFound(() => cluster.persistentVolumes.delete(pvName));
      await ignoreNotFound(() => cluster.persistentVolumes.patch(pvName, { metadata: { finalizers: null } }));
    }

    before(async () => {
      ctx = await setup();
      cluster = ctx.cluster;
      prefix = ctx.prefix;
    });

    after(async () => {
      for (const pvName of pvs) await removePv(pvName);
      for (const eventName of events) await ignoreNotFound(() => cluster.events.delete(eventName));
      for (const jobName of jobs) {
        await ignoreNotFound(() => cluster.jobs.delete(jobName, { propagationPolicy: 'Background' }));
      }
      for (const className of classes) await ignoreNotFound(() => cluster.storageClasses.delete(className));
      for (const nodeName of nodes) await ignoreNotFound(() => cluster.nodes.delete(nodeName));
      for (const leaseName of leases) await ignoreNotFound(() => cluster.leases.delete(leaseName));
      for (const cmName of configMaps) await ignoreNotFound(() => cluster.configMaps.delete(cmName));
      for (const podName of pods) await ignoreNotFound(() => cluster.pods.delete(podName, { gracePeriodSeconds: 0 }));
      for (const claimName of claims) {
        await ignoreNotFound(() => cluster.persistentVolumeClaims.delete(claimName));
        await ignoreNotFound(() => cluster.persistentVolumeClaims.patch(claimName, { metadata: { finalizers: null } }));
      }
      await ctx.cleanup();
    });

    void describe('PersistentVolumes: create, get, update, status, patch, delete', () => {
      void it('create sets uid, resourceVersion, creationTimestamp, defaults, phase Pending and the pv-protection finalizer', async () => {
        const body = localPv(n('create'));
        body.status = { phase: 'Bound' };
        const created = await cluster.persistentVolumes.create(body);
        assert.equal(created.kind, 'PersistentVolume');
        assert.equal(created.apiVersion, 'v1');
        assert.equal(created.metadata.name, n('create'));
        assert.match(created.metadata.uid ?? '', /^[0-9a-f-]{36}$/);
        rvOf(created);
        assert.match(created.metadata.creationTimestamp ?? '', /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
        assert.equal(created.metadata.namespace, undefined);
        // StorageObjectInUseProtection admission; a bare apiserver has no controller to remove it.
        assert.deepEqual(created.metadata.finalizers, ['kubernetes.io/pv-protection']);
        // The client's status is dropped; a new PV is Pending until a PV controller runs.
        assert.equal(created.status?.phase, 'Pending');
        assert.equal(created.spec.persistentVolumeReclaimPolicy, 'Retain');
        assert.equal(created.spec.volumeMode, 'Filesystem');

        const got = await cluster.persistentVolumes.get(n('create'));
        assert.deepEqual(got.metadata.uid, created.metadata.uid);
        assert.equal(got.metadata.resourceVersion, created.metadata.resourceVersion);
        assert.equal(got.kind, 'PersistentVolume');
      });

      void it('create of an existing name fails with 409 AlreadyExists', async () => {
        await cluster.persistentVolumes.create(localPv(n('dup')));
        await assert.rejects(cluster.persistentVolumes.create(localPv(n('dup'))), (error: unknown) => {
          apiError(409, 'AlreadyExists')(error);
          assert.ok(isAlreadyExists(error));
          return true;
        });
      });

      void it('a dry-run create validates and answers like a create, but stores nothing', async () => {
        const dry = await cluster.persistentVolumes.create(localPv(n('dry')), { dryRun: true });
        assert.equal(dry.metadata.name, n('dry'));
        assert.equal(dry.status?.phase, 'Pending');
        await assert.rejects(cluster.persistentVolumes.get(n('dry')), apiError(404, 'NotFound'));
        const invalid = localPv(n('dry-bad'));
        delete invalid.spec.capacity;
        await assert.rejects(cluster.persistentVolumes.create(invalid, { dryRun: true }), apiError(422, 'Invalid'));
      });

      void it('get, update, updateStatus, patch and delete of a missing object fail with 404 NotFound', async () => {
        const missing = localPv(n('missing'));
        const notFound = (error: unknown): boolean => {
          apiError(404, 'NotFound')(error);
          assert.ok(isNotFound(error));
          return true;
        };
        await assert.rejects(cluster.persistentVolumes.get(n('missing')), notFound);
        await assert.rejects(cluster.persistentVolumes.update(missing), notFound);
        await assert.rejects(cluster.persistentVolumes.updateStatus(missing), notFound);
        await assert.rejects(
          cluster.persistentVolumes.patch(n('missing'), { metadata: { labels: { a: 'b' } } }),
          notFound,
        );
        await assert.rejects(cluster.persistentVolumes.delete(n('missing')), notFound);
      });

      void it('update bumps the resourceVersion and ignores status; a stale resourceVersion is a 409 Conflict', async () => {
        const created = await cluster.persistentVolumes.create(localPv(n('update')));
        const changed = structuredClone(created);
        changed.metadata.labels = { ...changed.metadata.labels, updated: 'yes' };
        changed.spec.persistentVolumeReclaimPolicy = 'Delete';
        changed.status = { phase: 'Bound' };
        const updated = await cluster.persistentVolumes.update(changed);
        assert.ok(rvOf(updated) > rvOf(created));
        assert.equal(updated.metadata.labels?.['updated'], 'yes');
        assert.equal(updated.spec.persistentVolumeReclaimPolicy, 'Delete');
        assert.equal(updated.status?.phase, 'Pending', 'status only changes through the status subresource');
        assert.equal(updated.metadata.uid, created.metadata.uid);
        assert.equal(updated.metadata.creationTimestamp, created.metadata.creationTimestamp);

        const stale = structuredClone(created);
        stale.metadata.labels = { ...stale.metadata.labels, stale: 'yes' };
        await assert.rejects(cluster.persistentVolumes.update(stale), (error: unknown) => {
          apiError(409, 'Conflict')(error);
          assert.ok(isConflict(error));
          return true;
        });
      });

      void it('update without a resourceVersion is unconditional; a no-op update keeps the resourceVersion', async () => {
        const created = await cluster.persistentVolumes.create(localPv(n('uncond')));
        const unconditional = structuredClone(created);
        delete unconditional.metadata.resourceVersion;
        unconditional.metadata.labels = { ...unconditional.metadata.labels, forced: 'yes' };
        const updated = await cluster.persistentVolumes.update(unconditional);
        assert.equal(updated.metadata.labels?.['forced'], 'yes');
        assert.ok(rvOf(updated) > rvOf(created));

        const same = await cluster.persistentVolumes.update(updated);
        assert.equal(same.metadata.resourceVersion, updated.metadata.resourceVersion);
      });

      void it('update with another uid is a 409 Conflict; server-owned metadata cannot be rewritten', async () => {
        const created = await cluster.persistentVolumes.create(localPv(n('uid')));
        await assert.rejects(
          cluster.persistentVolumes.update({ ...created, metadata: { ...created.metadata, uid: 'not-the-uid' } }),
          apiError(409, 'Conflict'),
        );
        const rewritten = await cluster.persistentVolumes.update({
          ...created,
          metadata: {
            ...created.metadata,
            creationTimestamp: '2000-01-01T00:00:00Z',
            labels: { [LABEL]: prefix, x: '1' },
          },
        });
        assert.equal(rewritten.metadata.creationTimestamp, created.metadata.creationTimestamp);
        await assert.rejects(
          cluster.persistentVolumes.update({
            ...rewritten,
            metadata: { ...rewritten.metadata, deletionTimestamp: '2000-01-01T00:00:00Z' },
          }),
          apiError(422, 'Invalid'),
        );
      });

      void it('updateStatus changes status and metadata but not spec; a stale resourceVersion is a 409 Conflict', async () => {
        const created = await cluster.persistentVolumes.create(localPv(n('status')));
        const body = structuredClone(created);
        body.status = { phase: 'Available' };
        body.spec.persistentVolumeReclaimPolicy = 'Delete';
        body.metadata.labels = { ...body.metadata.labels, via: 'status' };
        const updated = await cluster.persistentVolumes.updateStatus(body);
        assert.equal(updated.status?.phase, 'Available');
        assert.equal(updated.spec.persistentVolumeReclaimPolicy, 'Retain', 'spec is ignored by the status subresource');
        assert.equal(updated.metadata.labels?.['via'], 'status', 'metadata changes are kept (PV status strategy)');
        assert.ok(rvOf(updated) > rvOf(created));
        assert.equal((await cluster.persistentVolumes.get(n('status'))).status?.phase, 'Available');

        await assert.rejects(
          cluster.persistentVolumes.updateStatus({ ...created, status: { phase: 'Bound' } }),
          apiError(409, 'Conflict'),
        );
        // Any phase is accepted; an empty one is defaulted to Pending.
        const emptied = await cluster.persistentVolumes.updateStatus({ ...updated, status: {} });
        assert.equal(emptied.status?.phase, 'Pending');
      });

      void it('merge patch adds, replaces and (with null) removes labels, and ignores status', async () => {
        await cluster.persistentVolumes.create(localPv(n('patch'), { keep: 'k', drop: 'd', change: 'old' }));
        const patched = await cluster.persistentVolumes.patch(n('patch'), {
          metadata: { labels: { drop: null, change: 'new', added: 'a' }, annotations: { 'example.com/note': 'hi' } },
          status: { phase: 'Bound' },
        });
        assert.deepEqual(patched.metadata.labels, { [LABEL]: prefix, keep: 'k', change: 'new', added: 'a' });
        assert.equal(patched.metadata.annotations?.['example.com/note'], 'hi');
        assert.equal(patched.status?.phase, 'Pending');
        assert.equal(patched.kind, 'PersistentVolume');

        await assert.rejects(
          cluster.persistentVolumes.patch(n('patch'), { metadata: { resourceVersion: '1', labels: { x: 'y' } } }),
          apiError(409, 'Conflict'),
        );
        await assert.rejects(
          cluster.persistentVolumes.patch(n('patch'), { metadata: { labels: { bad: 'not a label value!' } } }),
          apiError(422, 'Invalid'),
        );
        await assert.rejects(
          cluster.persistentVolumes.patch(n('patch'), { metadata: { name: n('other') } }),
          apiError(400, 'BadRequest'),
        );
        await assert.rejects(
          cluster.persistentVolumes.patch(n('patch'), { spec: { local: { path: '/elsewhere' } } }),
          apiError(422, 'Invalid'),
        );
      });

      void it('delete: a wrong uid precondition is a 409 Conflict; finalizers keep the PV, with a deletionTimestamp', async () => {
        const created = await cluster.persistentVolumes.create(localPv(n('delete')));
        await assert.rejects(
          cluster.persistentVolumes.delete(n('delete'), { uid: '00000000-0000-0000-0000-000000000000' }),
          (error: unknown) => {
            apiError(409, 'Conflict')(error);
            assert.ok(isConflict(error));
            return true;
          },
        );
        await cluster.persistentVolumes.delete(n('delete'), { uid: created.metadata.uid ?? '' });
        const deleting = await cluster.persistentVolumes.get(n('delete'));
        assert.ok(deleting.metadata.deletionTimestamp, 'deletionTimestamp is set');
        assert.deepEqual(deleting.metadata.finalizers, ['kubernetes.io/pv-protection']);
        // Deleting again changes nothing.
        await cluster.persistentVolumes.delete(n('delete'));
        assert.equal(
          (await cluster.persistentVolumes.get(n('delete'))).metadata.resourceVersion,
          deleting.metadata.resourceVersion,
        );
        // An update cannot take the deletionTimestamp away.
        const undelete = structuredClone(deleting);
        delete undelete.metadata.deletionTimestamp;
        undelete.metadata.labels = { ...undelete.metadata.labels, touched: 'yes' };
        const touched = await cluster.persistentVolumes.update(undelete);
        assert.equal(touched.metadata.deletionTimestamp, deleting.metadata.deletionTimestamp);
        assert.equal(touched.metadata.labels?.['touched'], 'yes');
        // No new finalizers on an object being deleted.
        await assert.rejects(
          cluster.persistentVolumes.patch(n('delete'), {
            metadata: { finalizers: ['kubernetes.io/pv-protection', 'example.com/late'] },
          }),
          apiError(422, 'Invalid'),
        );
        // Removing the last finalizer completes the deletion.
        await cluster.persistentVolumes.patch(n('delete'), { metadata: { finalizers: null } });
        await assert.rejects(cluster.persistentVolumes.get(n('delete')), apiError(404, 'NotFound'));
      });

      void it('delete with propagationPolicy Orphan or Foreground adds the garbage collector finalizer', async () => {
        for (const [policy, finalizer] of [
          ['Orphan', 'orphan'],
          ['Foreground', 'foregroundDeletion'],
        ] as const) {
          const pvName = n(`gc-${finalizer.toLowerCase()}`);
          await cluster.persistentVolumes.create(localPv(pvName));
          await cluster.persistentVolumes.patch(pvName, { metadata: { finalizers: null } });
          await cluster.persistentVolumes.delete(pvName, { propagationPolicy: policy });
          const deleting = await cluster.persistentVolumes.get(pvName);
          assert.deepEqual(deleting.metadata.finalizers, [finalizer]);
          assert.ok(deleting.metadata.deletionTimestamp);
        }
        const plain = n('gc-none');
        await cluster.persistentVolumes.create(localPv(plain));
        await cluster.persistentVolumes.patch(plain, { metadata: { finalizers: null } });
        await cluster.persistentVolumes.delete(plain);
        await assert.rejects(cluster.persistentVolumes.get(plain), apiError(404, 'NotFound'));
      });

      void it('invalid PersistentVolumes are rejected with 422 Invalid', async () => {
        const cases: [string, (pv: PersistentVolume) => void][] = [
          ['no capacity', (pv) => delete pv.spec.capacity],
          ['no access modes', (pv) => delete pv.spec.accessModes],
          ['an unknown access mode', (pv) => (pv.spec.accessModes = ['ReadSometimes'])],
          ['zero capacity', (pv) => (pv.spec.capacity = { storage: '0' })],
          ['no volume source', (pv) => delete pv.spec.local],
          ['two volume sources', (pv) => (pv.spec.hostPath = { path: '/tmp' })],
          ['a local volume without node affinity', (pv) => delete pv.spec.nodeAffinity],
          ['an empty local path', (pv) => (pv.spec.local = { path: '' })],
          ["a local path with '..'", (pv) => (pv.spec.local = { path: '/mnt/../etc' })],
          ['no node selector terms', (pv) => (pv.spec.nodeAffinity = { required: { nodeSelectorTerms: [] } })],
          [
            'a bad node selector operator',
            (pv) =>
              (pv.spec.nodeAffinity = {
                required: {
                  nodeSelectorTerms: [{ matchExpressions: [{ key: 'k', operator: 'Near', values: ['x'] }] }],
                },
              }),
          ],
          ['an unknown reclaim policy', (pv) => (pv.spec.persistentVolumeReclaimPolicy = 'Keep')],
          ['an unknown volume mode', (pv) => (pv.spec.volumeMode = 'Tape')],
          ['a bad storage class name', (pv) => (pv.spec.storageClassName = 'Not_A_Name')],
          ['a name that is not a DNS subdomain', (pv) => (pv.metadata.name = `${prefix}-Bad_Name`)],
          ['a bad label value', (pv) => (pv.metadata.labels = { a: 'no spaces allowed' })],
          ['a finalizer that is not qualified', (pv) => (pv.metadata.finalizers = ['mine'])],
        ];
        for (const [what, mutate] of cases) {
          const pv = localPv(n(`invalid-${what.replace(/[^a-z]+/g, '-').replace(/-+$/, '')}`.slice(0, 60)));
          mutate(pv);
          await assert.rejects(cluster.persistentVolumes.create(pv), (error: unknown) => {
            assert.ok(error instanceof KubeApiError, `${what}: ${String(error)}`);
            assert.equal(error.status, 422, `${what}: ${error.message}`);
            assert.equal(error.reason, 'Invalid', `${what}: ${error.message}`);
            return true;
          });
        }
        const quantity = localPv(n('invalid-quantity'));
        quantity.spec.capacity = { storage: 'lots' };
        await assert.rejects(cluster.persistentVolumes.create(quantity), apiError(400, 'BadRequest'));
      });

      void it('accepts a relative local path (the apiserver only forbids empty paths and ..)', async () => {
        const pv = localPv(n('relative'));
        pv.spec.local = { path: 'relative/dir' };
        const created = await cluster.persistentVolumes.create(pv);
        assert.equal(created.spec.local?.path, 'relative/dir');
      });

      void it('the volume source, volumeMode and node affinity are immutable', async () => {
        await cluster.persistentVolumes.create(localPv(n('immutable')));
        await assert.rejects(
          cluster.persistentVolumes.patch(n('immutable'), { spec: { volumeMode: 'Block' } }),
          apiError(422, 'Invalid'),
        );
        await assert.rejects(
          cluster.persistentVolumes.patch(n('immutable'), {
            spec: {
              nodeAffinity: {
                required: { nodeSelectorTerms: [{ matchExpressions: [{ key: 'k', operator: 'Exists' }] }] },
              },
            },
          }),
          apiError(422, 'Invalid'),
        );
        const patched = await cluster.persistentVolumes.patch(n('immutable'), {
          spec: { persistentVolumeReclaimPolicy: 'Delete', capacity: { storage: '2Gi' } },
        });
        assert.equal(patched.spec.persistentVolumeReclaimPolicy, 'Delete');
        assert.equal(patched.spec.capacity?.['storage'], '2Gi');
      });
    });

    void describe('list', () => {
      void it('filters by label selector: =, ==, !=, in, notin, exists, !exists', async () => {
        const tiers = { a: 'fast', b: 'slow', c: 'fast', d: undefined } as const;
        for (const [suffix, tier] of Object.entries(tiers)) {
          await cluster.persistentVolumes.create(
            localPv(n(`sel-${suffix}`), tier === undefined ? { sel: 'y' } : { sel: 'y', tier }),
          );
        }
        const names = async (extra: string): Promise<string[]> =>
          (await cluster.persistentVolumes.list({ labelSelector: `${selector()},sel=y${extra}` })).items
            .map((pv) => pv.metadata.name)
            .sort();
        const expect = (...suffixes: string[]): string[] => suffixes.map((s) => n(`sel-${s}`)).sort();
        assert.deepEqual(await names(''), expect('a', 'b', 'c', 'd'));
        assert.deepEqual(await names(',tier=fast'), expect('a', 'c'));
        assert.deepEqual(await names(',tier==slow'), expect('b'));
        assert.deepEqual(await names(',tier!=fast'), expect('b', 'd'));
        assert.deepEqual(await names(',tier in (slow,none)'), expect('b'));
        assert.deepEqual(await names(',tier notin (slow)'), expect('a', 'c', 'd'));
        assert.deepEqual(await names(',tier'), expect('a', 'b', 'c'));
        assert.deepEqual(await names(',!tier'), expect('d'));
        const list = await cluster.persistentVolumes.list({ labelSelector: `${selector()},sel=y` });
        rvOf(list);
        for (const item of list.items) {
          assert.equal((item as { kind?: string }).kind, undefined, 'list items carry no kind');
        }
      });

      void it('listMetadata returns the same objects as list, with their metadata only', async () => {
        for (const suffix of ['m1', 'm2', 'm3']) {
          const pv = localPv(n(`meta-${suffix}`), { meta: 'y' });
          pv.metadata.annotations = { 'pv.kubernetes.io/provisioned-by': `owner-${suffix}` };
          await cluster.persistentVolumes.create(pv);
        }
        const selector2 = `${selector()},meta=y`;
        const full = await cluster.persistentVolumes.list({ labelSelector: selector2 });
        const seen: { metadata: { name: string; annotations?: Record<string, string>; uid?: string } }[] = [];
        let token: string | undefined;
        do {
          const page = await cluster.persistentVolumes.listMetadata({
            labelSelector: selector2,
            limit: 2,
            ...(token === undefined ? {} : { continue: token }),
          });
          seen.push(...page.items);
          token =
            page.metadata.continue === undefined || page.metadata.continue === '' ? undefined : page.metadata.continue;
        } while (token !== undefined);
        assert.deepEqual(
          seen
            .map((i) => [i.metadata.name, i.metadata.uid, i.metadata.annotations?.['pv.kubernetes.io/provisioned-by']])
            .sort(),
          full.items
            .map((i) => [i.metadata.name, i.metadata.uid, i.metadata.annotations?.['pv.kubernetes.io/provisioned-by']])
            .sort(),
        );
        for (const item of seen)
          assert.equal((item as { spec?: unknown }).spec, undefined, 'no spec in a metadata list');
      });

      void it('an invalid label selector is a 400 BadRequest', async () => {
        for (const bad of ['a in (x', 'a=b=c', 'Bad Key=x', '!', 'a,', 'a>x', 'x/y/z']) {
          await assert.rejects(cluster.persistentVolumes.list({ labelSelector: bad }), apiError(400, 'BadRequest'));
        }
        const controller = new AbortController();
        try {
          await assert.rejects(
            (async () => {
              for await (const event of cluster.persistentVolumes.watch({
                resourceVersion: '0',
                labelSelector: 'a in (',
                signal: controller.signal,
              })) {
                assert.fail(`no event expected, got ${event.type}`);
              }
            })(),
            apiError(400, 'BadRequest'),
          );
        } finally {
          controller.abort();
        }
      });

      void it('limit and continue visit every object exactly once, from one consistent snapshot', async () => {
        const created: string[] = [];
        for (let i = 0; i < 7; i++) {
          const pvName = n(`page-${i}`);
          created.push(pvName);
          await cluster.persistentVolumes.create(localPv(pvName, { page: 'y' }));
        }
        const labelSelector = `${selector()},page=y`;
        const seen: string[] = [];
        const versions = new Set<string>();
        let token: string | undefined;
        let pages = 0;
        do {
          const page = await cluster.persistentVolumes.list({
            labelSelector,
            limit: 3,
            ...(token === undefined ? {} : { continue: token }),
          });
          pages++;
          assert.ok(page.items.length <= 3);
          seen.push(...page.items.map((pv) => pv.metadata.name));
          versions.add(page.metadata.resourceVersion ?? '');
          token = page.metadata.continue === '' ? undefined : page.metadata.continue;
          if (pages === 1) {
            // Created after the first page: not part of this list's snapshot.
            await cluster.persistentVolumes.create(localPv(n('page-late'), { page: 'y' }));
          }
        } while (token !== undefined && pages < 10);
        assert.deepEqual([...seen].sort(), [...created].sort());
        assert.equal(new Set(seen).size, seen.length, 'no object twice');
        assert.equal(versions.size, 1, `every page has the snapshot's resourceVersion: ${[...versions].join()}`);
        assert.ok(pages >= 3);

        const all = await cluster.persistentVolumes.list({ labelSelector });
        assert.equal(all.items.length, 8);
        assert.equal(all.metadata.continue ?? '', '');
      });

      void it('a malformed continue token is a 400 BadRequest', async () => {
        await assert.rejects(
          cluster.persistentVolumes.list({ limit: 1, continue: 'not-a-token' }),
          apiError(400, 'BadRequest'),
        );
      });
    });

    void describe('ConfigMaps and field selectors (the API config source)', () => {
      void it('list and watch with fieldSelector metadata.name see that one ConfigMap only; an unknown field is a 400', async () => {
        const [a, b] = [n('cm-a'), n('cm-b')];
        for (const name of [a, b]) {
          configMaps.add(name);
          await cluster.configMaps.create({ metadata: { name, labels: { [LABEL]: prefix } }, data: { k: name } });
        }
        const list = await cluster.configMaps.list({ fieldSelector: `metadata.name=${a}` });
        assert.deepEqual(
          list.items.map((i) => [i.metadata.name, i.data?.['k']]),
          [[a, a]],
        );
        const watch = record(cluster.configMaps, {
          resourceVersion: list.metadata.resourceVersion ?? '',
          fieldSelector: `metadata.name=${a}`,
        });
        try {
          for (const name of [b, a]) {
            const current = await cluster.configMaps.get(name);
            await cluster.configMaps.update({ ...current, data: { k: 'changed' } });
          }
          await cluster.configMaps.delete(a);
          await watch.waitFor((e) => e.type === 'DELETED', 'DELETED');
          assert.deepEqual(
            watch.events.filter((e) => e.type !== 'BOOKMARK').map((e) => `${e.type}:${e.object.metadata.name}`),
            [`MODIFIED:${a}`, `DELETED:${a}`],
          );
        } finally {
          watch.stop();
          assert.deepEqual(await watch.ended, {});
        }
        await assert.rejects(cluster.configMaps.list({ fieldSelector: 'data.k=x' }), (error: unknown) => {
          assert.ok(error instanceof KubeApiError);
          assert.equal(error.status, 400);
          return true;
        });
      });
    });

    void describe('watch', () => {
      void it('sees ADDED, MODIFIED and DELETED in order after the given resourceVersion', async () => {
        const before = await cluster.persistentVolumes.create(localPv(n('w-before'), { w: 'order' }));
        const list = await cluster.persistentVolumes.list({ labelSelector: `${selector()},w=order` });
        const watch = record(cluster.persistentVolumes, {
          resourceVersion: list.metadata.resourceVersion ?? '',
          labelSelector: `${selector()},w=order`,
        });
        try {
          const created = await cluster.persistentVolumes.create(localPv(n('w-order'), { w: 'order' }));
          const modified = await cluster.persistentVolumes.patch(n('w-order'), {
            metadata: { annotations: { step: '2' } },
          });
          await cluster.persistentVolumes.patch(n('w-order'), { metadata: { finalizers: null } });
          await cluster.persistentVolumes.delete(n('w-order'));
          await watch.waitFor((e) => e.type === 'DELETED', 'DELETED');
          const seen = watch.events.filter((e) => e.type !== 'BOOKMARK');
          assert.deepEqual(
            seen.map((e) => `${e.type}:${e.object.metadata.name}`),
            [
              `ADDED:${n('w-order')}`,
              `MODIFIED:${n('w-order')}`,
              `MODIFIED:${n('w-order')}`,
              `DELETED:${n('w-order')}`,
            ],
          );
          assert.ok(!seen.some((e) => e.object.metadata.name === before.metadata.name));
          const versions = seen.map((e) => rvOf(e.object));
          assert.deepEqual(
            versions,
            [...versions].sort((a, b) => a - b),
            'resourceVersions increase',
          );
          assert.equal(versions[0], rvOf(created));
          assert.equal(versions[1], rvOf(modified));
          const first = seen[0];
          assert.ok(first !== undefined && first.type === 'ADDED');
          assert.equal(first.object.kind, 'PersistentVolume');
        } finally {
          watch.stop();
          assert.deepEqual(await watch.ended, {});
        }
      });

      void it('honours the label selector: an object that stops matching is DELETED, one that starts matching ADDED', async () => {
        const list = await cluster.persistentVolumes.list({ labelSelector: selector() });
        const watch = record(cluster.persistentVolumes, {
          resourceVersion: list.metadata.resourceVersion ?? '',
          labelSelector: `${selector()},w=sel`,
        });
        try {
          await cluster.persistentVolumes.create(localPv(n('w-other'), { w: 'other' }));
          await cluster.persistentVolumes.create(localPv(n('w-sel'), { w: 'sel' }));
          const leaving = await cluster.persistentVolumes.patch(n('w-sel'), { metadata: { labels: { w: 'gone' } } });
          await cluster.persistentVolumes.patch(n('w-sel'), { metadata: { labels: { w: 'sel' } } });
          await cluster.persistentVolumes.patch(n('w-other'), { metadata: { annotations: { touched: 'yes' } } });
          await watch.waitFor(
            (e) => e.type === 'ADDED' && watch.events.filter((x) => x.type === 'ADDED').length === 2,
            'second ADDED',
          );
          const seen = watch.events.filter((e) => e.type !== 'BOOKMARK');
          assert.deepEqual(
            seen.map((e) => `${e.type}:${e.object.metadata.name}`),
            [`ADDED:${n('w-sel')}`, `DELETED:${n('w-sel')}`, `ADDED:${n('w-sel')}`],
          );
          const deleted = seen[1];
          assert.ok(deleted !== undefined && deleted.type === 'DELETED');
          // The DELETED event carries the last matching state, at the resourceVersion of the change.
          assert.equal(deleted.object.metadata.labels?.['w'], 'sel');
          assert.equal(deleted.object.metadata.resourceVersion, leaving.metadata.resourceVersion);
        } finally {
          watch.stop();
          await watch.ended;
        }
      });

      void it('from resourceVersion "0" starts with the current matching objects as ADDED', async () => {
        await cluster.persistentVolumes.create(localPv(n('w-zero-a'), { w: 'zero' }));
        await cluster.persistentVolumes.create(localPv(n('w-zero-b'), { w: 'zero' }));
        const watch = record(cluster.persistentVolumes, {
          resourceVersion: '0',
          labelSelector: `${selector()},w=zero`,
        });
        try {
          await watch.waitFor((e) => e.type === 'ADDED' && metaName(e.object) === n('w-zero-b'), 'w-zero-b');
          await watch.waitFor((e) => e.type === 'ADDED' && metaName(e.object) === n('w-zero-a'), 'w-zero-a');
        } finally {
          watch.stop();
          await watch.ended;
        }
      });

      void it('ends cleanly when the signal aborts, idle or mid-stream', async () => {
        const list = await cluster.persistentVolumes.list({ labelSelector: selector() });
        const idle = record(cluster.persistentVolumes, {
          resourceVersion: list.metadata.resourceVersion ?? '',
          labelSelector: `${selector()},w=never`,
        });
        await new Promise((resolve) => setTimeout(resolve, 200));
        idle.stop();
        assert.deepEqual(await idle.ended, {});
        assert.deepEqual(idle.events, []);

        // An already aborted signal: the iterator returns at once.
        const controller = new AbortController();
        controller.abort();
        const events: unknown[] = [];
        for await (const e of cluster.persistentVolumes.watch({ resourceVersion: '0', signal: controller.signal })) {
          events.push(e);
        }
        assert.deepEqual(events, []);

        // Breaking out of the loop ends the watch too.
        await cluster.persistentVolumes.create(localPv(n('w-break'), { w: 'break' }));
        const breaker = new AbortController();
        try {
          for await (const e of cluster.persistentVolumes.watch({
            resourceVersion: '0',
            labelSelector: `${selector()},w=break`,
            signal: breaker.signal,
          })) {
            assert.equal(e.type, 'ADDED');
            break;
          }
        } finally {
          breaker.abort();
        }
      });

      void it('ends when timeoutSeconds elapses', async () => {
        const list = await cluster.persistentVolumes.list({ labelSelector: selector() });
        const watch = record(cluster.persistentVolumes, {
          resourceVersion: list.metadata.resourceVersion ?? '',
          labelSelector: `${selector()},w=timeout`,
          timeoutSeconds: 1,
        });
        let timer: NodeJS.Timeout | undefined;
        const result = await Promise.race([
          watch.ended,
          new Promise<'timeout'>((resolve) => {
            timer = setTimeout(() => {
              resolve('timeout');
            }, 8_000);
          }),
        ]);
        clearTimeout(timer);
        watch.stop();
        assert.deepEqual(result, {});
      });

      void it('from a compacted resourceVersion fails with 410 Gone (Expired)', async (t) => {
        if (ctx.expiredEventsResourceVersion === undefined) {
          t.skip('this cluster cannot produce a compacted resourceVersion');
          return;
        }
        const resourceVersion = await ctx.expiredEventsResourceVersion();
        const controller = new AbortController();
        try {
          await assert.rejects(
            (async () => {
              for await (const e of cluster.events.watch({ resourceVersion, signal: controller.signal })) {
                assert.fail(`no event expected, got ${e.type}`);
              }
            })(),
            (error: unknown) => {
              apiError(410, 'Expired')(error);
              assert.ok(isGone(error));
              return true;
            },
          );
        } finally {
          controller.abort();
        }
      });
    });

    void describe('Events (namespaced)', () => {
      void it('live in `default` when no namespace is given; create, get, list, watch, delete', async () => {
        const list = await cluster.events.list({ labelSelector: selector() });
        const watch = record(cluster.events, {
          resourceVersion: list.metadata.resourceVersion ?? '',
          labelSelector: selector(),
        });
        try {
          const created = await cluster.events.create(event(n('ev')));
          assert.equal(created.metadata.namespace, 'default');
          assert.equal(created.reason, 'ContractTest');
          assert.equal((await cluster.events.get(n('ev'))).message, 'written by the cluster contract suite');
          assert.equal(
            (await cluster.events.get(n('ev'), { namespace: 'default' })).metadata.uid,
            created.metadata.uid,
          );
          await assert.rejects(cluster.events.get(n('ev'), { namespace: 'kube-system' }), apiError(404, 'NotFound'));
          assert.deepEqual(
            (await cluster.events.list({ labelSelector: selector() })).items.map((e) => e.metadata.name),
            [n('ev')],
          );
          assert.deepEqual(
            (await cluster.events.list({ namespace: 'kube-public', labelSelector: selector() })).items,
            [],
          );
          const updated = await cluster.events.update({ ...created, count: 2 });
          assert.equal(updated.count, 2);
          await cluster.events.delete(n('ev'));
          await assert.rejects(cluster.events.get(n('ev')), apiError(404, 'NotFound'));
          await watch.waitFor((e) => e.type === 'DELETED', 'DELETED');
          assert.deepEqual(
            watch.events.map((e) => e.type),
            ['ADDED', 'MODIFIED', 'DELETED'],
          );
        } finally {
          watch.stop();
          await watch.ended;
        }
      });

      void it('rejects a namespace mismatch (400), a mismatched involvedObject (422), a missing namespace (404)', async () => {
        await assert.rejects(
          cluster.events.create({ ...event(n('ev-ns')), metadata: { name: n('ev-ns'), namespace: 'kube-system' } }),
          apiError(400, 'BadRequest'),
        );
        // An event about a cluster-scoped object must be in `default`.
        await assert.rejects(
          cluster.events.create(event(n('ev-sys')), { namespace: 'kube-system' }),
          apiError(422, 'Invalid'),
        );
        await assert.rejects(
          cluster.events.create(
            event(n('ev-inv'), { involvedObject: { kind: 'Pod', name: 'p', namespace: 'kube-system' } }),
          ),
          apiError(422, 'Invalid'),
        );
        await assert.rejects(
          cluster.events.create(event(n('ev-nons')), { namespace: `${prefix}-no-such-namespace` }),
          apiError(404, 'NotFound'),
        );
        const created = await cluster.events.create(event(n('ev-status')));
        await assert.rejects(cluster.events.updateStatus(created), apiError(404, 'NotFound'));
      });
    });

    void describe('Jobs (namespaced, batch/v1)', () => {
      void it('are defaulted, keep status out of updates, and a plain delete orphans (finalizer) until a Background delete', async () => {
        const created = await cluster.jobs.create(job(n('job')));
        assert.equal(created.metadata.namespace, 'default');
        assert.equal(created.metadata.generation, 1);
        const spec = created.spec as NonNullable<Job['spec']> & { completions?: number; parallelism?: number };
        assert.equal(spec.completions, 1);
        assert.equal(spec.parallelism, 1);
        assert.equal(spec.backoffLimit, 6);
        assert.equal(created.spec?.template.metadata?.labels?.['job-name'], n('job'));

        const withStatus = await cluster.jobs.updateStatus({
          ...created,
          status: { active: 1, startTime: new Date().toISOString().replace(/\.\d+Z$/, 'Z') },
        });
        assert.equal(withStatus.status?.active, 1);
        const updated = await cluster.jobs.update({ ...withStatus, status: {} });
        assert.equal(updated.status?.active, 1, 'status only changes through the status subresource');
        const bumped = await cluster.jobs.patch(n('job'), { spec: { backoffLimit: 2 } });
        assert.equal(bumped.metadata.generation, 2, 'a spec change bumps the generation');
        await assert.rejects(
          cluster.jobs.patch(n('job'), {
            spec: { template: { spec: { containers: [{ name: 'other', image: 'x' }] } } },
          }),
          apiError(422, 'Invalid'),
        );

        await cluster.jobs.delete(n('job'));
        const orphaning = await cluster.jobs.get(n('job'));
        assert.deepEqual(orphaning.metadata.finalizers, ['orphan']);
        assert.ok(orphaning.metadata.deletionTimestamp);
        await cluster.jobs.delete(n('job'), { propagationPolicy: 'Background' });
        await assert.rejects(cluster.jobs.get(n('job')), apiError(404, 'NotFound'));
      });

      void it('rejects a Job without restartPolicy or containers with 422 Invalid', async () => {
        const noPolicy = job(n('job-bad'));
        delete noPolicy.spec?.template.spec.restartPolicy;
        await assert.rejects(cluster.jobs.create(noPolicy), apiError(422, 'Invalid'));
        const noContainers = job(n('job-bad2'));
        if (noContainers.spec !== undefined) noContainers.spec.template.spec.containers = [];
        await assert.rejects(cluster.jobs.create(noContainers), apiError(422, 'Invalid'));
      });
    });

    void describe('StorageClasses and Nodes (cluster-scoped)', () => {
      void it('StorageClass: defaults, immutable provisioner, no status subresource, deleted at once', async () => {
        const scName = n('sc');
        classes.add(scName);
        const body: StorageClass = {
          apiVersion: 'storage.k8s.io/v1',
          kind: 'StorageClass',
          metadata: { name: scName, labels: { [LABEL]: prefix } },
          provisioner: 'kubernetes.io/no-provisioner',
        };
        const created = await cluster.storageClasses.create(body);
        assert.equal(created.reclaimPolicy, 'Delete');
        assert.equal(created.volumeBindingMode, 'Immediate');
        assert.equal(created.metadata.finalizers, undefined);
        await assert.rejects(
          cluster.storageClasses.update({ ...created, provisioner: 'example.com/other' }),
          apiError(422, 'Invalid'),
        );
        await assert.rejects(cluster.storageClasses.updateStatus(created), apiError(404, 'NotFound'));
        const listed = await cluster.storageClasses.list({ labelSelector: selector() });
        assert.deepEqual(
          listed.items.map((sc) => sc.metadata.name),
          [scName],
        );
        await cluster.storageClasses.delete(scName);
        await assert.rejects(cluster.storageClasses.get(scName), apiError(404, 'NotFound'));
      });

      void it('Node: tainted not-ready on create; status only through updateStatus', async () => {
        const nodeName = n('node');
        nodes.add(nodeName);
        const body: Node = {
          apiVersion: 'v1',
          kind: 'Node',
          metadata: { name: nodeName, labels: { [LABEL]: prefix, 'kubernetes.io/hostname': nodeName } },
        };
        const created = await cluster.nodes.create(body);
        assert.deepEqual(
          created.spec?.taints?.map((t) => `${t.key}:${t.effect}`),
          ['node.kubernetes.io/not-ready:NoSchedule'],
        );
        type WithStatus = Node & { status?: { capacity?: Record<string, string> } };
        const withStatus = (await cluster.nodes.updateStatus({
          ...created,
          status: { capacity: { cpu: '2' } },
        } as WithStatus)) as WithStatus;
        assert.equal(withStatus.status?.capacity?.['cpu'], '2');
        const updated = (await cluster.nodes.update({
          ...withStatus,
          status: { capacity: { cpu: '8' } },
        } as WithStatus)) as WithStatus;
        assert.equal(updated.status?.capacity?.['cpu'], '2');
        const listed = await cluster.nodes.list({ labelSelector: selector() });
        assert.deepEqual(
          listed.items.map((node) => node.metadata.name),
          [nodeName],
        );
        await cluster.nodes.delete(nodeName);
        await assert.rejects(cluster.nodes.get(nodeName), apiError(404, 'NotFound'));
      });
    });

    void describe('PersistentVolumeClaims and Pods (namespaced, core/v1: what node-cleanup reads and deletes)', () => {
      function claim(claimName: string): PersistentVolumeClaim {
        claims.add(claimName);
        return {
          apiVersion: 'v1',
          kind: 'PersistentVolumeClaim',
          metadata: { name: claimName, labels: { [LABEL]: prefix } },
          spec: {
            accessModes: ['ReadWriteOnce'],
            resources: { requests: { storage: '1Gi' } },
            storageClassName: `${prefix}-local`,
          },
        };
      }
      function pod(podName: string, nodeName: string | undefined): Pod {
        pods.add(podName);
        return {
          apiVersion: 'v1',
          kind: 'Pod',
          metadata: { name: podName, labels: { [LABEL]: prefix } },
          spec: {
            ...(nodeName !== undefined ? { nodeName } : {}),
            containers: [{ name: 'main', image: 'busybox:1.36' }],
            volumes: [{ name: 'data', persistentVolumeClaim: { claimName: n('claim') } }],
          },
        };
      }

      void it('a claim is created Pending with the pvc-protection finalizer; a delete with a stale UID is a 409; a delete leaves it terminating until the finalizer goes', async () => {
        const created = await cluster.persistentVolumeClaims.create(claim(n('claim')));
        assert.equal(created.kind, 'PersistentVolumeClaim');
        assert.equal(created.metadata.namespace, 'default');
        assert.equal(created.status?.phase, 'Pending');
        assert.equal(created.spec.volumeMode, 'Filesystem');
        assert.deepEqual(created.metadata.finalizers, ['kubernetes.io/pvc-protection']);
        const listed = await cluster.persistentVolumeClaims.list({ labelSelector: selector() });
        assert.deepEqual(
          listed.items.map((c) => c.metadata.name),
          [n('claim')],
        );
        await assert.rejects(
          cluster.persistentVolumeClaims.delete(n('claim'), { uid: '00000000-0000-0000-0000-000000000000' }),
          apiError(409, 'Conflict'),
        );
        await cluster.persistentVolumeClaims.delete(n('claim'), { uid: created.metadata.uid ?? '' });
        const terminating = await cluster.persistentVolumeClaims.get(n('claim'));
        assert.ok(terminating.metadata.deletionTimestamp !== undefined);
        await cluster.persistentVolumeClaims.patch(n('claim'), { metadata: { finalizers: null } });
        await assert.rejects(cluster.persistentVolumeClaims.get(n('claim')), apiError(404, 'NotFound'));
      });

      void it('a claim without a storage request is refused (422)', async () => {
        const body = claim(n('claim-bad'));
        body.spec.resources = {};
        await assert.rejects(cluster.persistentVolumeClaims.create(body), apiError(422, 'Invalid'));
      });

      void it('pods: created Pending; a scheduled pod is deleted gracefully (terminating), an unscheduled one at once, gracePeriodSeconds 0 forces it', async () => {
        const scheduled = await cluster.pods.create(pod(n('pod-on-node'), `${prefix}-node`));
        assert.equal(scheduled.status?.phase, 'Pending');
        assert.equal(scheduled.spec.nodeName, `${prefix}-node`);
        assert.equal(scheduled.spec.volumes?.[0]?.persistentVolumeClaim?.claimName, n('claim'));
        await cluster.pods.create(pod(n('pod-pending'), undefined));
        const listed = await cluster.pods.list({ namespace: 'default', labelSelector: selector() });
        assert.deepEqual(listed.items.map((p) => p.metadata.name).sort(), [n('pod-on-node'), n('pod-pending')]);
        await cluster.pods.delete(n('pod-pending'));
        await assert.rejects(cluster.pods.get(n('pod-pending')), apiError(404, 'NotFound'));
        await cluster.pods.delete(n('pod-on-node'));
        const terminating = await cluster.pods.get(n('pod-on-node'));
        assert.ok(terminating.metadata.deletionTimestamp !== undefined, 'a scheduled pod waits for its kubelet');
        await cluster.pods.delete(n('pod-on-node'), { gracePeriodSeconds: 0 });
        await assert.rejects(cluster.pods.get(n('pod-on-node')), apiError(404, 'NotFound'));
      });

      void it('a pod without an image is refused (422)', async () => {
        const body = pod(n('pod-bad'), undefined);
        body.spec.containers = [{ name: 'main' }];
        await assert.rejects(cluster.pods.create(body), apiError(422, 'Invalid'));
      });
    });

    void describe('Leases (namespaced, coordination.k8s.io/v1)', () => {
      function lease(leaseName: string, renewTime: string, extra: Record<string, string> = {}): Lease {
        leases.add(leaseName);
        return {
          apiVersion: 'coordination.k8s.io/v1',
          kind: 'Lease',
          metadata: { name: leaseName, labels: { [LABEL]: prefix }, annotations: { 'contract/state': 'a', ...extra } },
          spec: { holderIdentity: `${prefix}-node`, leaseDurationSeconds: 180, renewTime },
        };
      }

      void it('create, get, update (409 on a stale resourceVersion), list by label; renewTime round-trips', async () => {
        const renewTime = '2026-12-01T14:00:00.123456Z';
        const created = await cluster.leases.create(lease(n('lease'), renewTime));
        assert.equal(created.kind, 'Lease');
        assert.equal(created.apiVersion, 'coordination.k8s.io/v1');
        assert.equal(created.metadata.namespace, 'default');
        assert.equal(created.spec?.renewTime, renewTime);
        assert.equal(created.spec.leaseDurationSeconds, 180);
        const got = await cluster.leases.get(n('lease'));
        assert.equal(got.metadata.resourceVersion, created.metadata.resourceVersion);
        assert.equal(got.metadata.annotations?.['contract/state'], 'a');

        const later = '2026-12-01T14:01:00.000001Z';
        const updated = await cluster.leases.update({
          ...got,
          metadata: { ...got.metadata, annotations: { 'contract/state': 'b' } },
          spec: { ...got.spec, renewTime: later },
        });
        assert.ok(rvOf(updated) > rvOf(got));
        assert.equal(updated.spec?.renewTime, later);
        assert.equal(updated.metadata.annotations?.['contract/state'], 'b');
        await assert.rejects(cluster.leases.update(got), apiError(409, 'Conflict'));

        await cluster.leases.create(lease(n('lease2'), renewTime));
        const listed = await cluster.leases.list({ labelSelector: selector() });
        assert.deepEqual(listed.items.map((l) => l.metadata.name).sort(), [n('lease'), n('lease2')]);
        assert.ok(listed.items.every((l) => l.spec?.holderIdentity === `${prefix}-node`));
        await assert.rejects(cluster.leases.create(lease(n('lease'), renewTime)), apiError(409, 'AlreadyExists'));
        await cluster.leases.delete(n('lease2'));
        await assert.rejects(cluster.leases.get(n('lease2')), apiError(404, 'NotFound'));
      });

      void it('rejects a non-positive leaseDurationSeconds (422) and a renewTime that is not a MicroTime (400)', async () => {
        const zero = lease(n('lease-bad'), '2026-12-01T14:00:00.000000Z');
        if (zero.spec !== undefined) zero.spec.leaseDurationSeconds = 0;
        await assert.rejects(cluster.leases.create(zero), apiError(422, 'Invalid'));
        await assert.rejects(cluster.leases.create(lease(n('lease-bad2'), 'yesterday')), apiError(400));
      });
    });
  });
}
