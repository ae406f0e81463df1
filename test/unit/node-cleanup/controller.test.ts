import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ManualClock } from '../../../src/core/clock.js';
import type { ResourceClient } from '../../../src/core/kube/cluster.js';
import type { EventSink } from '../../../src/core/kube/events.js';
import { MemoryCluster } from '../../../src/core/kube/memory/memory-cluster.js';
import type { ObjectReference, PersistentVolume } from '../../../src/core/kube/objects.js';
import { MemoryLogger } from '../../../src/core/log.js';
import { createNodeCleanupMetrics } from '../../../src/core/metrics/node-cleanup-metrics.js';
import { EVENT_REASONS, NodeCleanupController } from '../../../src/core/node-cleanup/controller.js';
import type { NodeCleanupSettings } from '../../../src/core/node-cleanup/controller.js';
import { HOSTNAME_LABEL } from '../../../src/core/pv/naming.js';

const GRACE_MS = 60_000;
const INTERVAL_MS = 10_000;

interface Recorded {
  readonly object: ObjectReference;
  readonly type: 'Normal' | 'Warning';
  readonly reason: string;
  readonly message: string;
}

class RecordingEvents implements EventSink {
  readonly events: Recorded[] = [];
  record(object: ObjectReference, type: 'Normal' | 'Warning', reason: string, message: string): void {
    this.events.push({ object, type, reason, message });
  }
  reasons(): string[] {
    return this.events.map((e) => e.reason);
  }
}

async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
}

function harness(settings: Partial<NodeCleanupSettings> = {}, options: { leading?: boolean } = {}) {
  const clock = new ManualClock(Date.parse('2026-12-01T14:00:00Z'));
  const cluster = new MemoryCluster({ clock });
  const events = new RecordingEvents();
  const logger = new MemoryLogger();
  const metrics = createNodeCleanupMetrics();
  let term: AbortController | undefined = options.leading === false ? undefined : new AbortController();
  // The controller's port, mutable so that a test can intercept a call.
  const port: {
    persistentVolumes: ResourceClient<PersistentVolume>;
    nodes: MemoryCluster['nodes'];
    persistentVolumeClaims: MemoryCluster['persistentVolumeClaims'];
    pods: MemoryCluster['pods'];
  } = {
    persistentVolumes: cluster.persistentVolumes,
    nodes: cluster.nodes,
    persistentVolumeClaims: cluster.persistentVolumeClaims,
    pods: cluster.pods,
  };
  const controller = new NodeCleanupController(
    {
      storageClassNames: new Set(['local-storage']),
      gracePeriodMs: GRACE_MS,
      discoveryIntervalMs: INTERVAL_MS,
      resyncMs: 0,
      dryRun: false,
      ...settings,
    },
    {
      cluster: port,
      events,
      clock,
      logger,
      metrics,
      leading: () => (term !== undefined && !term.signal.aborted ? term.signal : undefined),
      random: () => 0.5,
    },
  );
  const stop = new AbortController();
  const running = controller.run(stop.signal);

  async function node(name: string, hostname = name) {
    return cluster.nodes.create({ metadata: { name, labels: { [HOSTNAME_LABEL]: hostname } } });
  }

  async function volume(
    name: string,
    hostname: string,
    options: { phase?: 'Available' | 'Bound' | 'Released'; claim?: string; policy?: string } = {},
  ): Promise<PersistentVolume> {
    let claimRef: PersistentVolume['spec']['claimRef'];
    if (options.claim !== undefined) {
      const claim = await cluster.persistentVolumeClaims.create({
        metadata: { name: options.claim, namespace: 'default' },
        spec: {
          accessModes: ['ReadWriteOnce'],
          resources: { requests: { storage: '1Gi' } },
          storageClassName: 'local-storage',
          volumeName: name,
        },
      });
      claimRef = {
        kind: 'PersistentVolumeClaim',
        apiVersion: 'v1',
        namespace: 'default',
        name: options.claim,
        uid: claim.metadata.uid ?? '',
      };
    }
    const created = await cluster.persistentVolumes.create({
      metadata: { name },
      spec: {
        capacity: { storage: '1Gi' },
        accessModes: ['ReadWriteOnce'],
        persistentVolumeReclaimPolicy: options.policy ?? 'Delete',
        storageClassName: 'local-storage',
        local: { path: `/mnt/disks/${name}` },
        nodeAffinity: {
          required: {
            nodeSelectorTerms: [{ matchExpressions: [{ key: HOSTNAME_LABEL, operator: 'In', values: [hostname] }] }],
          },
        },
        ...(claimRef !== undefined ? { claimRef } : {}),
      },
    });
    return cluster.persistentVolumes.updateStatus({
      ...created,
      status: { phase: options.phase ?? (options.claim !== undefined ? 'Bound' : 'Available') },
    });
  }

  /** The PV controller's part: a PV whose claim is gone becomes Released. */
  async function release(name: string): Promise<void> {
    const pv = await cluster.persistentVolumes.get(name);
    await cluster.persistentVolumes.updateStatus({ ...pv, status: { phase: 'Released' } });
  }

  async function advance(ms: number): Promise<void> {
    for (let t = 0; t < ms; t += 1_000) {
      await clock.advance(1_000);
      await settle();
    }
  }

  async function claimState(name: string): Promise<'present' | 'deleting' | 'gone'> {
    try {
      const claim = await cluster.persistentVolumeClaims.get(name, { namespace: 'default' });
      return claim.metadata.deletionTimestamp === undefined ? 'present' : 'deleting';
    } catch {
      return 'gone';
    }
  }

  async function volumeState(name: string): Promise<'present' | 'deleting' | 'gone'> {
    try {
      const pv = await cluster.persistentVolumes.get(name);
      return pv.metadata.deletionTimestamp === undefined ? 'present' : 'deleting';
    } catch {
      return 'gone';
    }
  }

  return {
    clock,
    cluster,
    port,
    events,
    logger,
    metrics,
    controller,
    node,
    volume,
    release,
    advance,
    claimState,
    volumeState,
    lead: () => {
      term = new AbortController();
      controller.poke();
    },
    stepDown: () => {
      term?.abort();
    },
    async stop(): Promise<void> {
      stop.abort();
      await running;
    },
  };
}

describe('node cleanup controller (in-memory apiserver, manual clock)', () => {
  it('node deleted: a Warning on the claim, after the grace period the claim goes, then the released PV', async () => {
    const h = harness();
    await h.node('node-a');
    await h.node('node-b');
    await h.volume('pv-a', 'node-a', { claim: 'data-web-0' });
    await h.volume('pv-b', 'node-b', { claim: 'data-web-1' });
    await h.advance(INTERVAL_MS);
    assert.equal(h.events.events.length, 0, 'nothing happens while the nodes exist');

    await h.cluster.nodes.delete('node-a');
    await h.advance(1_000);
    const warning = h.events.events.find((e) => e.reason === EVENT_REASONS.referencedNodeDeleted);
    assert.ok(warning, 'a Node delete starts a pass at once');
    assert.equal(warning.type, 'Warning');
    assert.deepEqual(
      { kind: warning.object.kind, namespace: warning.object.namespace, name: warning.object.name },
      { kind: 'PersistentVolumeClaim', namespace: 'default', name: 'data-web-0' },
    );
    assert.equal(
      warning.message,
      "PVC is tied to a deleted Node. PVC will be cleaned up in 1m0s if the Node doesn't come back",
    );

    await h.advance(GRACE_MS - 12_000);
    assert.equal(await h.claimState('data-web-0'), 'present', 'nothing is deleted inside the grace period');
    await h.advance(12_000);
    assert.equal(await h.claimState('data-web-0'), 'deleting', 'the claim is deleted after the grace period');
    assert.equal(await h.claimState('data-web-1'), 'present');
    assert.equal(await h.volumeState('pv-a'), 'present', 'the PV waits until the PV controller releases it');
    const deletedClaim = h.events.events.find((e) => e.reason === EVENT_REASONS.deletedClaim);
    assert.ok(deletedClaim);
    assert.equal(deletedClaim.object.name, 'data-web-0');
    assert.match(deletedClaim.message, /no Node \(node-a\) has existed for 1m0s/);
    assert.equal(h.metrics.claimDeletes.get(), 1);

    await h.release('pv-a');
    await h.advance(INTERVAL_MS);
    assert.equal(await h.volumeState('pv-a'), 'deleting');
    assert.equal(await h.volumeState('pv-b'), 'present');
    assert.ok(h.events.events.some((e) => e.reason === EVENT_REASONS.deletedVolume && e.object.name === 'pv-a'));
    assert.equal(h.metrics.volumeDeletes.get({ phase: 'Released' }), 1);
    assert.equal(h.metrics.claimDeleteFailures.get(), 0);
    await h.stop();
  });

  it('an unbound (Available) PV of a deleted node is deleted after the grace period; Retain+Released is held', async () => {
    const h = harness();
    await h.volume('pv-free', 'gone-node');
    await h.volume('pv-kept', 'gone-node', { phase: 'Released', policy: 'Retain' });
    await h.advance(GRACE_MS + INTERVAL_MS);
    assert.equal(await h.volumeState('pv-free'), 'deleting');
    assert.equal(await h.volumeState('pv-kept'), 'present');
    assert.equal(h.metrics.volumeDeletes.get({ phase: 'Available' }), 1);
    const holds = h.logger.records.filter((r) => r.message === 'volume of a deleted node left as it is');
    assert.equal(holds.length, 1, 'a hold is logged once per reason, not every pass');
    assert.match(String(holds[0]?.fields['reason']), /reclaim policy Retain/);
    await h.stop();
  });

  it('a node that comes back inside the grace period keeps everything', async () => {
    const h = harness();
    await h.node('node-a');
    await h.volume('pv-a', 'node-a', { claim: 'data-0' });
    await h.advance(INTERVAL_MS);
    await h.cluster.nodes.delete('node-a');
    await h.advance(GRACE_MS / 2);
    await h.node('node-a');
    await h.advance(GRACE_MS * 3);
    assert.equal(await h.claimState('data-0'), 'present');
    assert.equal(await h.volumeState('pv-a'), 'present');
    assert.ok(h.logger.messages().includes('a Node of the volume is back: nothing of it is deleted'));
    assert.deepEqual(h.events.reasons(), [EVENT_REASONS.referencedNodeDeleted]);
    await h.stop();
  });

  it('matches nodes by the hostname label, not the node name (upstream #434)', async () => {
    const h = harness();
    await h.node('ip-10-0-0-1.ec2.internal', 'ip-10-0-0-1');
    await h.volume('pv-a', 'ip-10-0-0-1', { claim: 'data-0' });
    await h.advance(GRACE_MS * 2);
    assert.equal(h.events.events.length, 0);
    assert.equal(await h.claimState('data-0'), 'present');
    await h.cluster.nodes.delete('ip-10-0-0-1.ec2.internal');
    await h.advance(GRACE_MS + INTERVAL_MS);
    assert.equal(await h.claimState('data-0'), 'deleting', 'its real node (by label) going does strand it');
    await h.stop();
  });

  it('a claim used by a scheduled, running pod is held until the pod is gone', async () => {
    const h = harness();
    await h.volume('pv-a', 'gone-node', { claim: 'data-0' });
    const pod = await h.cluster.pods.create({
      metadata: { name: 'web-0', namespace: 'default' },
      spec: {
        nodeName: 'gone-node',
        containers: [{ name: 'web', image: 'nginx' }],
        volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'data-0' } }],
      },
    });
    await h.cluster.pods.updateStatus({ ...pod, status: { phase: 'Running' } });
    await h.advance(GRACE_MS * 3);
    assert.equal(await h.claimState('data-0'), 'present');
    const holds = h.logger.records.filter((r) => r.message === 'volume of a deleted node left as it is');
    assert.equal(holds.length, 1);
    assert.match(String(holds[0]?.fields['reason']), /used by pod web-0 on node gone-node \(Running\)/);
    // PodGC removes pods of deleted nodes; the StatefulSet's new pod is unscheduled (Pending).
    await h.cluster.pods.delete('web-0', { namespace: 'default', gracePeriodSeconds: 0 });
    await h.cluster.pods.create({
      metadata: { name: 'web-0', namespace: 'default' },
      spec: {
        containers: [{ name: 'web', image: 'nginx' }],
        volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'data-0' } }],
      },
    });
    await h.advance(INTERVAL_MS);
    assert.equal(await h.claimState('data-0'), 'deleting');
    await h.stop();
  });

  it('dry run deletes nothing and says what it would delete, once, as Normal events', async () => {
    const h = harness({ dryRun: true });
    await h.volume('pv-bound', 'gone-node', { claim: 'data-0' });
    await h.volume('pv-free', 'gone-node');
    await h.advance(GRACE_MS * 3);
    assert.equal(await h.claimState('data-0'), 'present');
    assert.equal(await h.volumeState('pv-free'), 'present');
    assert.equal(await h.volumeState('pv-bound'), 'present');
    const would = h.events.events.filter((e) => e.type === 'Normal');
    assert.deepEqual(would.map((e) => e.reason).sort(), [
      EVENT_REASONS.wouldDeleteClaim,
      EVENT_REASONS.wouldDeleteVolume,
    ]);
    assert.match(
      would.find((e) => e.reason === EVENT_REASONS.wouldDeleteClaim)?.message ?? '',
      /^Dry run: would delete PVC default\/data-0 bound to PV pv-bound/,
    );
    assert.equal(h.metrics.claimDeletes.get(), 0);
    await h.stop();
  });

  it('a replica that does not lead does nothing; a new leader starts the grace period afresh', async () => {
    const h = harness({}, { leading: false });
    await h.volume('pv-free', 'gone-node');
    await h.advance(GRACE_MS * 2);
    assert.equal(await h.volumeState('pv-free'), 'present');
    assert.equal(h.events.events.length, 0);
    assert.equal(h.controller.passes, 0);
    h.lead();
    await h.advance(GRACE_MS - 12_000);
    assert.equal(await h.volumeState('pv-free'), 'present', 'the grace period counts from when it led');
    await h.advance(12_000 + INTERVAL_MS);
    assert.equal(await h.volumeState('pv-free'), 'deleting');
    await h.stop();
  });

  it('a leader that lost its term between the decision and the delete deletes nothing', async () => {
    const h = harness();
    await h.volume('pv-free', 'gone-node');
    await h.advance(GRACE_MS - 1_000);
    // The PV GET of the re-check is where it steps down: the delete right after must not happen.
    const volumes = h.cluster.persistentVolumes;
    h.port.persistentVolumes = {
      ...volumes,
      get: async (name, options) => {
        const pv = await volumes.get(name, options);
        h.stepDown();
        return pv;
      },
    };
    await h.advance(INTERVAL_MS * 2);
    assert.equal(await h.volumeState('pv-free'), 'present');
    assert.ok(h.logger.messages().includes('not leading any more: delete skipped'));
    await h.stop();
  });
});
