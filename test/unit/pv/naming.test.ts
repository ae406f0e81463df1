import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  fnv1a32,
  isProvisionedByNode,
  nodeLabelValue,
  persistentVolumeName,
  provisionerName,
} from '../../../src/core/pv/naming.js';

describe('PV names and provisioner identity (upstream golden values)', () => {
  it("hashes entry + node + class like upstream's discovery_test.go", () => {
    const golden: [string, string, string, string][] = [
      ['mount1', 'test-node', 'sc1', 'local-pv-aaaafef5'],
      ['symlink2', 'test-node', 'sc1', 'local-pv-23645a36'],
      ['symlink1', 'test-node', 'sc2', 'local-pv-55d5adba'],
      ['symlink2', 'test-node', 'sc2', 'local-pv-226458a3'],
      ['mount3', 'test-node', 'sc1', 'local-pv-f34b8003'],
    ];
    for (const [entry, node, cls, name] of golden) assert.equal(persistentVolumeName(entry, node, cls), name);
  });

  it('FNV-1a-32 matches the reference vectors and never pads', () => {
    assert.equal(fnv1a32(''), 0x811c9dc5);
    assert.equal(fnv1a32('a'), 0xe40c292c);
    assert.equal(fnv1a32('foobar'), 0xbf9cf968);
    fc.assert(
      fc.property(fc.string(), fc.string(), fc.string(), (a, b, c) => {
        assert.match(persistentVolumeName(a, b, c), /^local-pv-[0-9a-f]{1,8}$/u);
        assert.doesNotMatch(persistentVolumeName(a, b, c), /^local-pv-0/u);
      }),
    );
  });

  it('hashes UTF-8 bytes, as Go does', () => {
    assert.equal(fnv1a32('é'), fnv1a32Bytes([0xc3, 0xa9]));
    // The ASCII fast path and the encoded path agree with the byte-wise reference on any text.
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), (text) => {
        assert.equal(fnv1a32(text), fnv1a32Bytes([...new TextEncoder().encode(text)]));
      }),
    );
  });

  it('names the provisioner with or without the node UID', () => {
    const node = { name: 'node-1', uid: 'abc-123' };
    assert.equal(provisionerName(node, false), 'local-volume-provisioner-node-1-abc-123');
    assert.equal(provisionerName(node, true), 'local-volume-provisioner-node-1');
    assert.ok(isProvisionedByNode({ 'pv.kubernetes.io/provisioned-by': 'local-volume-provisioner-node-1' }, node));
    assert.ok(
      isProvisionedByNode({ 'pv.kubernetes.io/provisioned-by': 'local-volume-provisioner-node-1-abc-123' }, node),
    );
    assert.ok(!isProvisionedByNode({ 'pv.kubernetes.io/provisioned-by': 'local-volume-provisioner-node-10' }, node));
    assert.ok(!isProvisionedByNode(undefined, node));
  });

  it('uses the node name as label value when it is one, else a stable hash', () => {
    assert.equal(nodeLabelValue('worker-3.example.com'), 'worker-3.example.com');
    const long = `n${'x'.repeat(70)}`;
    assert.match(nodeLabelValue(long), /^fnv-[0-9a-f]+$/u);
    assert.equal(nodeLabelValue(long), nodeLabelValue(long));
  });
});

function fnv1a32Bytes(bytes: number[]): number {
  let hash = 0x811c9dc5;
  for (const b of bytes) hash = Math.imul(hash ^ b, 0x01000193) >>> 0;
  return hash;
}
