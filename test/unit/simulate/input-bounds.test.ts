// simulate's fixtures are bounded like a config source, with larger bounds of their own: a cluster
// fixture may list thousands of PVs (issue 12).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MAX_INPUT_YAML_VALUES } from '../../../src/core/config/decode/yaml-node.js';
import { buildClusterFixture, parseClusterFixture } from '../../../src/core/simulate/cluster-fixture.js';
import { InvalidInputError } from '../../../src/core/simulate/input.js';

/** n PersistentVolumes as `kubectl get pv -o yaml` prints them: about 94 YAML values each. */
function pvList(n: number): string {
  const items = Array.from(
    { length: n },
    (_, i) => `  - apiVersion: v1
    kind: PersistentVolume
    metadata:
      name: local-pv-${String(i)}
      uid: aaaaaaaa-0000-0000-0000-${String(i).padStart(12, '0')}
      labels: { local-static-provisioner/node: node-a }
      annotations: { pv.kubernetes.io/provisioned-by: local-volume-provisioner-node-a }
    spec:
      capacity: { storage: 100Gi }
      accessModes: [ReadWriteOnce]
      persistentVolumeReclaimPolicy: Delete
      storageClassName: fast
      volumeMode: Filesystem
      local: { path: /mnt/fast/disk${String(i)} }
      claimRef: { namespace: shop, name: data-db-${String(i)} }
      nodeAffinity:
        required:
          nodeSelectorTerms: [{ matchExpressions: [{ key: kubernetes.io/hostname, operator: In, values: [node-a] }] }]
    status: { phase: Bound }
`,
  );
  return `apiVersion: v1\nkind: List\nitems:\n${items.join('')}`;
}

describe('simulate input bounds', () => {
  it('a cluster fixture of 5,000 PVs (far more YAML values than a config may hold) loads', async () => {
    const fixture = await buildClusterFixture('cluster.yaml', pvList(5000));
    assert.equal(fixture.counts.PersistentVolume, 5000);
  });

  it(`more than ${MAX_INPUT_YAML_VALUES} YAML values in a fixture are refused, naming the file and line`, () => {
    // `- 1` is two values.
    const items = MAX_INPUT_YAML_VALUES / 2 + 1;
    assert.throws(
      () => parseClusterFixture('cluster.yaml', '- 1\n'.repeat(items)),
      (err: unknown) => {
        assert.ok(err instanceof InvalidInputError);
        assert.deepEqual(
          err.issues.map((i) => [i.message, i.position]),
          [
            [
              `more than ${MAX_INPUT_YAML_VALUES} YAML values (scalars, aliases, list items and mapping entries) in this source, the most one may hold: a cluster fixture of 5000 PersistentVolumes as kubectl prints them holds about 470000`,
              { file: 'cluster.yaml', line: items, column: 1 },
            ],
          ],
        );
        return true;
      },
    );
  });

  it('a duplicate key is found in a mapping of 40,000 keys (a Set per mapping, not the quadratic check)', () => {
    const labels = Array.from({ length: 40_000 }, (_, i) => `      k${String(i)}: v`).join('\n');
    const text = `apiVersion: v1\nkind: List\nitems:\n  - apiVersion: v1\n    kind: Node\n    metadata:\n      name: a\n      labels:\n${labels}\n      k7: again\n`;
    assert.throws(
      () => parseClusterFixture('cluster.yaml', text),
      (err: unknown) => {
        assert.ok(err instanceof InvalidInputError);
        assert.deepEqual(
          err.issues.map((i) => [i.message, i.position?.line]),
          [['the key "k7" appears twice in one mapping', 40_009]],
        );
        return true;
      },
    );
  });
});
