import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseConfigSnapshot } from '../../../src/core/config/decode/parse.js';
import { snapshotFromFileText } from '../../../src/core/config/decode/layout.js';
import type { ProvisionerConfig } from '../../../src/core/config/model.js';
import { buildPersistentVolume } from '../../../src/core/pv/build.js';
import type { NodeIdentity } from '../../../src/core/pv/naming.js';

const NODE: NodeIdentity = {
  name: 'test-node',
  uid: 'uid-1',
  hostname: 'test-node-host',
  labels: { 'kubernetes.io/hostname': 'test-node-host', 'topology.kubernetes.io/zone': 'z1', rack: 'r7' },
};

function config(extra = ''): ProvisionerConfig {
  return parseConfigSnapshot(
    snapshotFromFileText(
      'c.yaml',
      `storageClassMap:\n  sc1:\n    hostDir: /mnt/disks\n    mountDir: /discovery\n    fsType: ext4\n    accessMode: ReadWriteOncePod\n${extra}`,
    ),
  ).config;
}

function build(cfg: ProvisionerConfig) {
  const classConfig = cfg.storageClassMap['sc1'];
  assert.ok(classConfig);
  return buildPersistentVolume({
    config: cfg,
    className: 'sc1',
    classConfig,
    entryName: 'mount1',
    node: NODE,
    capacityBytes: 10 * 2 ** 30,
    reclaimPolicy: 'Delete',
    mountOptions: ['noatime'],
  });
}

describe('the PersistentVolume object', () => {
  it('has every field as upstream builds it (plus the node label)', () => {
    assert.deepEqual(
      build(config('nodeLabelsForPV: [topology.kubernetes.io/zone, missing-label]\nlabelsForPV: {team: storage}\n')),
      {
        apiVersion: 'v1',
        kind: 'PersistentVolume',
        metadata: {
          name: 'local-pv-aaaafef5',
          labels: {
            'topology.kubernetes.io/zone': 'z1',
            team: 'storage',
            'local-static-provisioner/node': 'test-node',
          },
          annotations: { 'pv.kubernetes.io/provisioned-by': 'local-volume-provisioner-test-node-uid-1' },
        },
        spec: {
          capacity: { storage: '10Gi' },
          accessModes: ['ReadWriteOncePod'],
          persistentVolumeReclaimPolicy: 'Delete',
          storageClassName: 'sc1',
          volumeMode: 'Filesystem',
          mountOptions: ['noatime'],
          local: { path: '/mnt/disks/mount1', fsType: 'ext4' },
          nodeAffinity: {
            required: {
              nodeSelectorTerms: [
                { matchExpressions: [{ key: 'kubernetes.io/hostname', operator: 'In', values: ['test-node-host'] }] },
              ],
            },
          },
        },
      },
    );
  });

  it('ORs the class selector terms, sets the owner reference and the name-only provisioner', () => {
    const pv = build(
      config(
        '    selector:\n    - matchExpressions:\n      - {key: shelf, operator: In, values: [a]}\nsetPVOwnerRef: true\nuseNodeNameOnly: true\nlabelsForPV: {topology.kubernetes.io/zone: override}\nnodeLabelsForPV: [topology.kubernetes.io/zone]\n',
      ),
    );
    assert.deepEqual(pv.spec.nodeAffinity?.required?.nodeSelectorTerms, [
      { matchExpressions: [{ key: 'kubernetes.io/hostname', operator: 'In', values: ['test-node-host'] }] },
      { matchExpressions: [{ key: 'shelf', operator: 'In', values: ['a'] }] },
    ]);
    assert.deepEqual(pv.metadata.ownerReferences, [
      { apiVersion: 'v1', kind: 'Node', name: 'test-node', uid: 'uid-1' },
    ]);
    assert.equal(pv.metadata.annotations?.['pv.kubernetes.io/provisioned-by'], 'local-volume-provisioner-test-node');
    assert.equal(pv.metadata.labels?.['topology.kubernetes.io/zone'], 'override', 'labelsForPV wins');
  });

  it('with useAlphaAPI writes the affinity annotation instead of spec.nodeAffinity', () => {
    const pv = build(config('useAlphaAPI: true\n'));
    assert.equal(pv.spec.nodeAffinity, undefined);
    const alpha = pv.metadata.annotations?.['volume.alpha.kubernetes.io/node-affinity'];
    assert.deepEqual(JSON.parse(alpha ?? '{}'), {
      requiredDuringSchedulingIgnoredDuringExecution: {
        nodeSelectorTerms: [
          { matchExpressions: [{ key: 'kubernetes.io/hostname', operator: 'In', values: ['test-node-host'] }] },
        ],
      },
    });
  });

  it('omits fsType and mountOptions when empty', () => {
    const cfg = parseConfigSnapshot(
      snapshotFromFileText('c.yaml', 'storageClassMap:\n  sc1:\n    hostDir: /mnt/disks\n    mountDir: /mnt/disks\n'),
    ).config;
    const classConfig = cfg.storageClassMap['sc1'];
    assert.ok(classConfig);
    const pv = buildPersistentVolume({
      config: cfg,
      className: 'sc1',
      classConfig,
      entryName: 'd',
      node: NODE,
      capacityBytes: 12345,
      reclaimPolicy: 'Retain',
      mountOptions: [],
    });
    assert.deepEqual(pv.spec.local, { path: '/mnt/disks/d' });
    assert.equal(pv.spec.mountOptions, undefined);
    assert.deepEqual(pv.spec.capacity, { storage: '12345' });
    assert.deepEqual(pv.spec.accessModes, ['ReadWriteOnce']);
  });
});
