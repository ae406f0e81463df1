import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { MemoryCluster } from '../../../src/core/kube/memory/memory-cluster.js';
import { PROJECTED } from '../../../src/core/kube/objects.js';
import type { PersistentVolume } from '../../../src/core/kube/objects.js';
import { isProjected, projectPersistentVolume, StringPool } from '../../../src/core/pv/cached.js';
import type { CachedPersistentVolume, PersistentVolumeView } from '../../../src/core/pv/cached.js';

const word = fc.string({ minLength: 1, maxLength: 12 });
const record = fc.dictionary(word, fc.string({ maxLength: 140 }), { maxKeys: 4 });
const maybe = <T>(arb: fc.Arbitrary<T>): fc.Arbitrary<T | undefined> => fc.option(arb, { nil: undefined });

/** Whole PVs as the server sends them: every field the type knows, and fields it does not. */
const wholePv: fc.Arbitrary<PersistentVolume> = fc
  .record({
    name: word,
    uid: maybe(fc.uuid()),
    resourceVersion: maybe(fc.integer({ min: 1 }).map(String)),
    deletionTimestamp: maybe(fc.constant('2026-12-04T00:00:00Z')),
    labels: maybe(record),
    annotations: maybe(record),
    path: word.map((w) => `/mnt/${w}`),
    fsType: maybe(fc.constantFrom('ext4', 'xfs')),
    capacity: maybe(fc.constantFrom('1Gi', '10Gi')),
    policy: maybe(fc.constantFrom('Delete', 'Retain')),
    className: maybe(word),
    mode: maybe(fc.constantFrom('Filesystem', 'Block')),
    claim: maybe(fc.record({ name: word, namespace: word, uid: fc.uuid() })),
    phase: maybe(fc.constantFrom('Available' as const, 'Bound' as const, 'Released' as const)),
  })
  .map((f) => {
    const pv: PersistentVolume = {
      apiVersion: 'v1',
      kind: 'PersistentVolume',
      metadata: {
        name: f.name,
        creationTimestamp: '2026-12-04T00:00:00Z',
        finalizers: ['kubernetes.io/pv-protection'],
        managedFields: [{ manager: 'local-volume-provisioner', operation: 'Update' }],
        ...(f.uid !== undefined ? { uid: f.uid } : {}),
        ...(f.resourceVersion !== undefined ? { resourceVersion: f.resourceVersion } : {}),
        ...(f.deletionTimestamp !== undefined ? { deletionTimestamp: f.deletionTimestamp } : {}),
        ...(f.labels !== undefined ? { labels: f.labels } : {}),
        ...(f.annotations !== undefined ? { annotations: f.annotations } : {}),
      },
      spec: {
        accessModes: ['ReadWriteOnce'],
        nodeAffinity: {
          required: {
            nodeSelectorTerms: [
              { matchExpressions: [{ key: 'kubernetes.io/hostname', operator: 'In', values: ['n'] }] },
            ],
          },
        },
        local: { path: f.path, ...(f.fsType !== undefined ? { fsType: f.fsType } : {}) },
        ...(f.capacity !== undefined ? { capacity: { storage: f.capacity } } : {}),
        ...(f.policy !== undefined ? { persistentVolumeReclaimPolicy: f.policy } : {}),
        ...(f.className !== undefined ? { storageClassName: f.className } : {}),
        ...(f.mode !== undefined ? { volumeMode: f.mode } : {}),
        ...(f.claim !== undefined ? { claimRef: { kind: 'PersistentVolumeClaim', ...f.claim } } : {}),
      },
      ...(f.phase !== undefined ? { status: { phase: f.phase, message: 'm', reason: 'r' } } : {}),
    };
    return pv;
  });

/** What the readers may read (PersistentVolumeView), picked from a whole PV by hand. */
function readersFields(pv: PersistentVolume): PersistentVolumeView {
  const { name, uid, resourceVersion, deletionTimestamp, labels, annotations } = pv.metadata;
  const { capacity, persistentVolumeReclaimPolicy, storageClassName, volumeMode, local, hostPath, claimRef } = pv.spec;
  return JSON.parse(
    JSON.stringify({
      metadata: { name, uid, resourceVersion, deletionTimestamp, labels, annotations },
      spec: { capacity, persistentVolumeReclaimPolicy, storageClassName, volumeMode, local, hostPath, claimRef },
      ...(pv.status !== undefined ? { status: { phase: pv.status.phase } } : {}),
    }),
  ) as PersistentVolumeView;
}

describe('the PV cache projection', () => {
  it('keeps exactly the fields its readers read, equal to the whole PV, and marks it', () => {
    const pool = new StringPool();
    fc.assert(
      fc.property(wholePv, (pv) => {
        const cached = projectPersistentVolume(pv, pool);
        // JSON drops the mark (a symbol key) and undefined fields: what is left is the data.
        assert.deepEqual(JSON.parse(JSON.stringify(cached)), readersFields(pv));
        assert.equal(cached[PROJECTED], true);
        assert.ok(isProjected(cached) && isProjected({ ...cached }), 'a spread copy keeps the mark');
        assert.ok(!isProjected(pv));
        for (const present of [cached.metadata, cached.spec, cached.status ?? {}])
          for (const [key, value] of Object.entries(present)) assert.notEqual(value, undefined, key);
      }),
    );
  });

  it('shares repeated strings in a bounded pool', () => {
    const pool = new StringPool();
    const values = Array.from({ length: 5_000 }, (_, i) => `value-${String(i)}`);
    for (const v of values) assert.equal(pool.share(v), v);
    assert.equal(pool.size, 1_024);
    assert.equal(pool.share(undefined), undefined);
  });

  it('is refused by the write path, as is a copy of it; a whole PV is written', async () => {
    const cluster = new MemoryCluster();
    const created = await cluster.persistentVolumes.create({
      metadata: { name: 'pv1' },
      spec: {
        capacity: { storage: '1Gi' },
        local: { path: '/mnt/a' },
        accessModes: ['ReadWriteOnce'],
        nodeAffinity: {
          required: {
            nodeSelectorTerms: [
              { matchExpressions: [{ key: 'kubernetes.io/hostname', operator: 'In', values: ['n'] }] },
            ],
          },
        },
      },
    });
    const cached = projectPersistentVolume(created, new StringPool());
    const writeBack = (object: CachedPersistentVolume): Promise<PersistentVolume> =>
      // The type refuses a projection; the cast stands for code that widened it on the way.
      cluster.persistentVolumes.update(object as unknown as PersistentVolume);
    await assert.rejects(writeBack(cached), /projection is not written back/u);
    await assert.rejects(writeBack({ ...cached, metadata: { ...cached.metadata } }), /projection is not written back/u);
    const updated = await cluster.persistentVolumes.update({
      ...created,
      metadata: { ...created.metadata, labels: { a: 'b' } },
    });
    assert.deepEqual(updated.spec.accessModes, ['ReadWriteOnce'], 'the whole PV keeps what a projection lacks');
  });

  it('is not a PersistentVolume to the type checker, while a PersistentVolume is a view', () => {
    const cached = projectPersistentVolume({ metadata: { name: 'pv1' }, spec: {} }, new StringPool());
    // @ts-expect-error a projection lacks fields: it cannot be passed where a whole PV is written
    const whole: PersistentVolume = cached;
    const view: PersistentVolumeView = { metadata: { name: 'pv2' }, spec: {} } satisfies PersistentVolume;
    // @ts-expect-error a view neither: it may be a projection
    const fromView: PersistentVolume = view;
    assert.deepEqual([whole.metadata.name, fromView.metadata.name], ['pv1', 'pv2']);
  });
});
