// Per-volume usage and per-class Available capacity on real mounts (tmpfs, a loop device) against
// the real kube-apiserver: /metrics over HTTP shows what statfs says of each filesystem PV (a file
// written shows as used), a Block PV's capacity only, the claim of a Bound PV, and the per-class
// Available counts, which the status Lease carries too.
import assert from 'node:assert/strict';
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { systemClock } from '../../../src/core/clock.js';
import { publishAgentState } from '../../../src/core/fleet/agent-state.js';
import { stateFromLease } from '../../../src/core/fleet/applied-state.js';
import { isNotFound } from '../../../src/core/kube/cluster.js';
import { loadKubeconfig } from '../../../src/core/kube/kubeconfig.js';
import type { PersistentVolume } from '../../../src/core/kube/objects.js';
import { RestCluster } from '../../../src/core/kube/rest-cluster.js';
import { MemoryLogger } from '../../../src/core/log.js';
import { NODE_LABEL } from '../../../src/core/pv/naming.js';
import { attachLoopDevice, Cleanup, makeTempDir, mountTmpfs, skipUnlessRoot } from '../../support/real-node.js';
import { requireTestControlPlane } from '../../support/test-cluster.js';
import { eventually, waitFor } from '../../support/eventually.js';
import { startLinuxAgent } from '../../support/memory-agent.js';
import { parsePrometheusText } from '../../support/prom-text.js';

const MiB = 2 ** 20;
const suffix = Math.random().toString(36).slice(2, 8);
const NODE = `usage-${suffix}`;
const FAST = `usage-${suffix}-fast`;
const BLOCK = `usage-${suffix}-block`;

function sampleOf(text: string, name: string, labels: Record<string, string>): number | undefined {
  return parsePrometheusText(text)
    .get(name)
    ?.samples.find((s) => Object.entries(labels).every(([k, v]) => s.labels[k] === v))?.value;
}

describe('usage metrics on a real node against the real apiserver', { skip: skipUnlessRoot() }, () => {
  const cleanup = new Cleanup();
  let cluster: RestCluster;
  let root = '';

  before(async () => {
    const plane = requireTestControlPlane();
    cluster = new RestCluster({ connection: await loadKubeconfig(plane.kubeconfigPath) });
    await cluster.nodes.create({ metadata: { name: NODE, labels: { 'kubernetes.io/hostname': NODE } } });
    for (const name of [FAST, BLOCK])
      await cluster.storageClasses.create({
        metadata: { name },
        provisioner: 'kubernetes.io/no-provisioner',
        volumeBindingMode: 'WaitForFirstConsumer',
      });
    root = makeTempDir(cleanup, 'lvp-usage-');
  });

  after(async () => {
    try {
      const all = await cluster.persistentVolumes.list({ labelSelector: `${NODE_LABEL}=${NODE}` });
      for (const pv of all.items) {
        await cluster.persistentVolumes
          .patch(pv.metadata.name, { metadata: { finalizers: null } })
          .catch(() => undefined);
        await cluster.persistentVolumes.delete(pv.metadata.name).catch((err: unknown) => {
          if (!isNotFound(err)) throw err;
        });
      }
      await cluster.leases.delete(`lvp-${NODE}`, { namespace: 'default' }).catch(() => undefined);
      for (const sc of [FAST, BLOCK]) await cluster.storageClasses.delete(sc).catch(() => undefined);
      await cluster.nodes.delete(NODE).catch(() => undefined);
    } finally {
      cluster.close();
      cleanup.run();
    }
  });

  it('exports statfs of each filesystem PV, a Block PV capacity, the claim when Bound, and per-class Available counts (metrics and Lease)', async () => {
    const configDir = join(root, 'config');
    const fastDir = join(root, 'fast');
    const blockDir = join(root, 'block');
    for (const d of [configDir, fastDir, blockDir, join(fastDir, 'd1'), join(fastDir, 'd2')]) mkdirSync(d);
    writeFileSync(
      join(configDir, 'storageClassMap'),
      `${FAST}:\n  hostDir: ${fastDir}\n  mountDir: ${fastDir}\n${BLOCK}:\n  hostDir: ${blockDir}\n  mountDir: ${blockDir}\n  volumeMode: Block\n`,
    );
    mountTmpfs(cleanup, join(fastDir, 'd1'), 32 * MiB);
    mountTmpfs(cleanup, join(fastDir, 'd2'), 48 * MiB);
    const loop = attachLoopDevice(cleanup, join(root, 'block.img'), 64 * MiB);
    symlinkSync(loop.path, join(blockDir, 'b1'));
    writeFileSync(join(fastDir, 'd1', 'data'), Buffer.alloc(5 * MiB, 1));

    const agent = await startLinuxAgent(cluster, configDir, NODE);
    const publishing = publishAgentState(agent, {
      leases: cluster.leases,
      target: { name: `lvp-${NODE}`, namespace: 'default', instance: 'lvp' },
      clock: systemClock,
      logger: new MemoryLogger(),
    });
    const port = (agent['http'] as { port: number } | undefined)?.port;
    const scrape = async (): Promise<string> => (await fetch(`http://127.0.0.1:${String(port)}/metrics`)).text();
    try {
      const pvs = await eventually(async () => {
        const list = await cluster.persistentVolumes.list({ labelSelector: `${NODE_LABEL}=${NODE}` });
        return list.items.length === 3 ? list.items : undefined;
      }, 'three PVs published');
      // No PV controller runs on the test plane: make them Available as it would.
      for (const pv of pvs) await cluster.persistentVolumes.updateStatus({ ...pv, status: { phase: 'Available' } });
      const nameOf = (path: string): string =>
        pvs.find((pv: PersistentVolume) => pv.spec.local?.path.endsWith(path) === true)?.metadata.name ?? '';
      const d1 = { persistentvolume: nameOf('/d1'), storageclass: FAST };
      const b1 = { persistentvolume: nameOf('/b1'), storageclass: BLOCK };

      const text = await eventually(async () => {
        const t = await scrape();
        const used = sampleOf(t, 'local_volume_provisioner_volume_used_bytes', d1);
        return used !== undefined && used >= 5 * MiB ? t : undefined;
      }, 'd1 used bytes on /metrics');
      assert.equal(sampleOf(text, 'local_volume_provisioner_volume_capacity_bytes', d1), 32 * MiB);
      const available = sampleOf(text, 'local_volume_provisioner_volume_available_bytes', d1) ?? -1;
      assert.ok(available > 0 && available <= 27 * MiB, `available ${String(available)}`);
      const inodesUsed = sampleOf(text, 'local_volume_provisioner_volume_inodes_used', d1) ?? 0;
      assert.ok(inodesUsed >= 2, `the root and the file: ${String(inodesUsed)}`);
      assert.equal(sampleOf(text, 'local_volume_provisioner_volume_capacity_bytes', b1), 64 * MiB);
      assert.equal(sampleOf(text, 'local_volume_provisioner_volume_used_bytes', b1), undefined, 'Block: capacity only');
      const fastClass = { node: NODE, storageclass: FAST, mode: 'Filesystem' };
      assert.equal(sampleOf(text, 'local_volume_provisioner_available_persistentvolumes', fastClass), 2);
      assert.equal(sampleOf(text, 'local_volume_provisioner_available_largest_bytes', fastClass), 48 * MiB);

      // The Lease carries the same counts.
      const lease = await eventually(async () => {
        const l = await cluster.leases.get(`lvp-${NODE}`, { namespace: 'default' }).catch(() => undefined);
        return l !== undefined && stateFromLease(l)?.available?.[FAST]?.volumes === 2 ? l : undefined;
      }, 'the Lease counts both Available PVs of the class');
      assert.deepEqual(stateFromLease(lease)?.available, {
        [FAST]: { volumes: 2, bytes: 80 * MiB, largestBytes: 48 * MiB },
        [BLOCK]: { volumes: 1, bytes: 64 * MiB, largestBytes: 64 * MiB },
      });

      // Bound: the claim's labels; the class offers one PV less, on /metrics and on the Lease.
      const d2 = await cluster.persistentVolumes.get(nameOf('/d2'));
      const claimed = await cluster.persistentVolumes.update({
        ...d2,
        spec: { ...d2.spec, claimRef: { namespace: 'default', name: 'data-0', uid: 'c-1' } },
      });
      await cluster.persistentVolumes.updateStatus({ ...claimed, status: { phase: 'Bound' } });
      const withClaim = { persistentvolume: nameOf('/d2'), claim_namespace: 'default', claim_name: 'data-0' };
      await waitFor(
        async () => sampleOf(await scrape(), 'local_volume_provisioner_volume_capacity_bytes', withClaim) === 48 * MiB,
        'the Bound PV labelled with its claim',
        15_000,
      );
      assert.equal(sampleOf(await scrape(), 'local_volume_provisioner_available_persistentvolumes', fastClass), 1);
      await waitFor(
        async () => {
          const l = await cluster.leases.get(`lvp-${NODE}`, { namespace: 'default' });
          return stateFromLease(l)?.available?.[FAST]?.largestBytes === 32 * MiB;
        },
        'the Lease updated after the bind',
        15_000,
      );
    } finally {
      await publishing.stop();
      await agent.stop();
    }
  });
});
