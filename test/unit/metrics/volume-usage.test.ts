// Per-volume usage gauges and the per-class Available capacity: values from the health probe's
// statfs, labels (the claim's when Bound), Block capacity only, the per-node series cap and what
// it leaves out, and the same per-class counts on the status Lease and in `rollout status`.
import assert from 'node:assert/strict';
import { rm } from 'node:fs/promises';
import { describe, it } from 'node:test';
import type { PersistentVolume } from '../../../src/core/kube/objects.js';
import {
  stateAnnotations,
  stateFromLease,
  statusLease,
  type AppliedState,
} from '../../../src/core/fleet/applied-state.js';
import { createAgentMetrics } from '../../../src/core/metrics/agent-metrics.js';
import {
  availableSummary,
  volumeKey,
  volumeRows,
  type VolumeUsageStore,
} from '../../../src/core/metrics/volume-usage.js';
import { persistentVolumeName } from '../../../src/core/pv/naming.js';
import { availableLines } from '../../../src/render/rollout-status.js';
import type { NodeRollout } from '../../../src/core/staged-rollout/status.js';
import { waitFor } from '../../support/eventually.js';
import { memoryAgentFixture, startMemoryAgent } from '../../support/memory-agent.js';
import { parsePrometheusText } from '../../support/prom-text.js';

const GiB = 2 ** 30;
const TiB = 2 ** 40;

function pv(name: string, phase: string, capacity: string, extra: Partial<PersistentVolume['spec']> = {}) {
  return {
    metadata: { name, uid: `uid-${name}` },
    spec: { storageClassName: 'fast', capacity: { storage: capacity }, ...extra },
    status: { phase },
  } as PersistentVolume;
}

const usage = {
  capacityBytes: 10 * GiB,
  usedBytes: 3 * GiB,
  availableBytes: 7 * GiB,
  inodes: 1000,
  inodesUsed: 10,
  inodesFree: 990,
};

/** One series' value from a scrape, by name and labels given (others ignored). */
function value(text: string, name: string, labels: Record<string, string>): number | undefined {
  const family = parsePrometheusText(text).get(name);
  const sample = family?.samples.find((s) => Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  return sample?.value;
}

describe('volume usage gauges', () => {
  it('show the statfs of each Available or Bound PV, the claim of a Bound one, and per-class Available capacity', async () => {
    const t = await memoryAgentFixture('lvp-usage-');
    const { cluster, volumes } = t;
    volumes.addMount('/mnt/fast/d1', { capacity: 10 * GiB });
    volumes.addMount('/mnt/fast/d2', { capacity: 20 * GiB });
    volumes.setUsed('/mnt/fast/d1', 4 * GiB);
    const agent = await startMemoryAgent(t);
    const scrape = (): string => agent['metrics'].registry.render();
    try {
      await agent.generation.whenReady;
      const names = ['d1', 'd2'].map((d) => persistentVolumeName(d, 'node-a', 'fast'));
      await waitFor(async () => (await cluster.persistentVolumes.list()).items.length === 2, 'both PVs');
      // Pending PVs are not probed and offer nothing: no series yet.
      assert.equal(value(scrape(), 'local_volume_provisioner_volume_used_bytes', {}), undefined);
      for (const name of names) {
        const current = await cluster.persistentVolumes.get(name);
        await cluster.persistentVolumes.updateStatus({ ...current, status: { phase: 'Available' } });
      }
      await waitFor(
        () => agent.generation.persistentVolumes.list().every((p) => p.status?.phase === 'Available'),
        'cache',
      );
      agent.generation.trigger();
      const d1 = { persistentvolume: names[0] ?? '' };
      await waitFor(
        () => value(scrape(), 'local_volume_provisioner_volume_used_bytes', d1) === 4 * GiB,
        'd1 used bytes from its statfs',
      );
      const text = scrape();
      assert.equal(value(text, 'local_volume_provisioner_volume_capacity_bytes', d1), 10 * GiB);
      assert.equal(value(text, 'local_volume_provisioner_volume_available_bytes', d1), 6 * GiB);
      assert.equal(value(text, 'local_volume_provisioner_volume_inodes', d1), (10 * GiB) / 16384);
      assert.equal(value(text, 'local_volume_provisioner_volume_inodes_used', d1), (4 * GiB) / 65536);
      const cls = { node: 'node-a', storageclass: 'fast', mode: 'Filesystem' };
      assert.equal(value(text, 'local_volume_provisioner_available_persistentvolumes', cls), 2);
      assert.equal(value(text, 'local_volume_provisioner_available_largest_bytes', cls), 20 * GiB);
      assert.equal(value(text, 'local_volume_provisioner_available_capacity_bytes', cls), 30 * GiB);
      assert.equal(value(text, 'local_volume_provisioner_volume_stats_omitted', {}), 0);

      // Bound to a claim: the claim's labels, and the class offers one PV less, at the next scrape.
      const bound = await cluster.persistentVolumes.get(names[1] ?? '');
      await cluster.persistentVolumes.update({
        ...bound,
        spec: { ...bound.spec, claimRef: { namespace: 'ns1', name: 'data', uid: 'c1' } },
      });
      const b = await cluster.persistentVolumes.get(names[1] ?? '');
      await cluster.persistentVolumes.updateStatus({ ...b, status: { phase: 'Bound' } });
      const claimed = { persistentvolume: names[1] ?? '', claim_namespace: 'ns1', claim_name: 'data' };
      await waitFor(
        () => value(scrape(), 'local_volume_provisioner_volume_capacity_bytes', claimed) === 20 * GiB,
        'the Bound PV carries its claim',
      );
      const after = scrape();
      assert.equal(value(after, 'local_volume_provisioner_available_persistentvolumes', cls), 1);
      assert.equal(value(after, 'local_volume_provisioner_available_largest_bytes', cls), 10 * GiB);
      const unclaimed = parsePrometheusText(after)
        .get('local_volume_provisioner_volume_capacity_bytes')
        ?.samples.filter((s) => s.labels['persistentvolume'] === names[1] && s.labels['claim_name'] === '');
      assert.deepEqual(unclaimed, [], 'no series left with the old (unclaimed) labels');
      // The status (and so the Lease) counts the same.
      assert.deepEqual(agent.status().available, { fast: { volumes: 1, bytes: 10 * GiB, largestBytes: 10 * GiB } });
    } finally {
      await agent.stop();
      await rm(t.dir, { recursive: true, force: true });
    }
  });

  it('give a Block PV its capacity only, and a PV not probed yet its spec capacity', () => {
    const store: VolumeUsageStore = new Map();
    const fs = pv('fs', 'Bound', '10Gi', { claimRef: { namespace: 'a', name: 'b' } });
    const block = pv('blk', 'Available', '1Ti', { volumeMode: 'Block' });
    store.set(volumeKey(fs), usage);
    store.set(volumeKey(block), usage); // a stray sample for a Block PV is not used
    const { rows, series, omitted } = volumeRows([fs, block, pv('rel', 'Released', '1Gi')], store, 100);
    assert.equal(omitted, 0);
    assert.equal(series, 7);
    assert.deepEqual(
      rows.map((r) => [r.labels.persistentvolume, r.capacityBytes, r.usage !== undefined, r.labels.claim_name]),
      [
        ['blk', TiB, false, ''],
        ['fs', 10 * GiB, true, 'b'],
      ],
    );
  });

  it('stop at the series cap in PV name order and count the PVs left out', () => {
    const store: VolumeUsageStore = new Map();
    const pvs = Array.from({ length: 10 }, (_, i) => pv(`pv-${String(i).padStart(2, '0')}`, 'Available', '1Gi'));
    for (const p of pvs) store.set(volumeKey(p), usage);
    const capped = volumeRows([...pvs].reverse(), store, 20);
    assert.deepEqual(
      capped.rows.map((r) => r.labels.persistentvolume),
      ['pv-00', 'pv-01', 'pv-02'],
    );
    assert.equal(capped.series, 18);
    assert.equal(capped.omitted, 7);

    const metrics = createAgentMetrics(undefined, { volumeSeriesLimit: 20 });
    metrics.managedPersistentVolumes = () => pvs;
    for (const [k, v] of store) metrics.volumeUsage.set(k, v);
    const text = metrics.registry.render();
    const families = parsePrometheusText(text);
    const perVolume = [
      'capacity_bytes',
      'used_bytes',
      'available_bytes',
      'inodes',
      'inodes_used',
      'inodes_free',
    ].reduce((n, f) => n + (families.get(`local_volume_provisioner_volume_${f}`)?.samples.length ?? 0), 0);
    assert.equal(perVolume, 18, 'never more per-volume series than the cap');
    assert.equal(value(text, 'local_volume_provisioner_volume_stats_omitted', {}), 7);
    // The per-class gauges still count every PV.
    assert.equal(value(text, 'local_volume_provisioner_available_persistentvolumes', { storageclass: 'fast' }), 10);

    const none = createAgentMetrics(undefined, { volumeSeriesLimit: 0 });
    none.managedPersistentVolumes = () => pvs;
    assert.equal(value(none.registry.render(), 'local_volume_provisioner_volume_stats_omitted', {}), 10);
  });

  it('count only Available PVs not reserved for a claim nor being deleted', () => {
    const summary = availableSummary([
      pv('a', 'Available', '1Ti'),
      pv('b', 'Available', '100Gi'),
      pv('c', 'Available', '2Ti', { claimRef: { namespace: 'x', name: 'pre-bound' } }),
      { ...pv('d', 'Available', '4Ti'), metadata: { name: 'd', deletionTimestamp: '2026-01-01T00:00:00Z' } },
      pv('e', 'Bound', '8Ti'),
      {
        ...pv('f', 'Available', '3Gi', { volumeMode: 'Block' }),
        spec: { storageClassName: 'raw', capacity: { storage: '3Gi' }, volumeMode: 'Block' },
      },
    ]);
    assert.deepEqual(summary, {
      fast: { volumes: 2, bytes: TiB + 100 * GiB, largestBytes: TiB },
      raw: { volumes: 1, bytes: 3 * GiB, largestBytes: 3 * GiB },
    });
  });
});

describe('Available capacity on the status Lease and in rollout status', () => {
  const state: AppliedState = {
    node: 'n1',
    appliedHash: `sha256:${'a'.repeat(64)}`,
    generation: 1,
    result: 'started',
    source: '/etc/provisioner/config',
    agentVersion: 'test',
    available: { fast: { volumes: 3, bytes: 3 * TiB, largestBytes: TiB } },
  };
  const target = { name: 'lvp-n1', namespace: 'kube-system', instance: 'lvp' };

  it('round-trips through the Lease annotation; a malformed one reads as none', () => {
    const lease = statusLease(target, state, 1_000, 180_000);
    assert.equal(
      stateAnnotations(state)['local-static-provisioner/available'],
      '{"fast":{"volumes":3,"bytes":3298534883328,"largestBytes":1099511627776}}',
    );
    assert.deepEqual(stateFromLease(lease)?.available, state.available);
    const hand = {
      ...lease,
      metadata: {
        ...lease.metadata,
        annotations: { ...lease.metadata.annotations, 'local-static-provisioner/available': '{"fast":{"volumes":-1}}' },
      },
    };
    assert.equal(stateFromLease(hand)?.available, undefined);
  });

  it('rollout status sums each class over the nodes and names the node with the largest', () => {
    const node = (name: string, available: AppliedState['available']): NodeRollout =>
      ({
        node: name,
        state: 'in-sync',
        published: { ...state, node: name, available, heartbeatAt: 0, staleAfterMs: 1 },
      }) as unknown as NodeRollout;
    const lines = availableLines({
      nodes: [
        node('n1', { fast: { volumes: 3, bytes: 3 * TiB, largestBytes: TiB } }),
        node('n2', { fast: { volumes: 1, bytes: 2 * TiB, largestBytes: 2 * TiB } }),
        node('n3', undefined),
      ],
    });
    assert.deepEqual(lines.slice(1), [
      'AVAILABLE CLASS  PVS  BYTES  NODES  LARGEST',
      'fast             4    5Ti    2      2Ti (n2)',
    ]);
    assert.deepEqual(availableLines({ nodes: [node('n3', undefined)] }), []);
  });
});
