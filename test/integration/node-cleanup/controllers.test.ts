// Node cleanup with Kubernetes' own controllers: a control plane of this file's own with the real
// kube-controller-manager (PV binder, pv- and pvc-protection, StatefulSet) and kube-scheduler, and
// `provisioner node-cleanup` as a process. A StatefulSet's pod is on a node whose Node object is
// deleted: after the grace period its claim is deleted, the StatefulSet controller recreates it,
// the scheduler and binder put it on a PV of another node, and the stranded PV goes. A node that
// comes back inside the grace period keeps everything. The second node's hostname label differs
// from its name throughout.
//
// The test plays the kubelet (test/support/kubelet.ts) and the pod garbage collector (the harness'
// controller-manager does not run it): it force-deletes the pod of the deleted node, as podgc does
// with pods bound to a Node that no longer exists.
//
// Lint: client-node's models are plain data classes; object literals are what its API takes.
/* eslint-disable @typescript-eslint/no-unsafe-class-instance-assignment */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { AppsV1Api, CoreV1Api, StorageV1Api, type KubeConfig } from '@kubernetes/client-node';

import { isNotFound } from '../../../src/core/kube/cluster.js';
import { loadKubeconfig } from '../../../src/core/kube/kubeconfig.js';
import type { PersistentVolume, PersistentVolumeClaim } from '../../../src/core/kube/objects.js';
import { RestCluster } from '../../../src/core/kube/rest-cluster.js';
import { EVENT_REASONS } from '../../../src/core/node-cleanup/controller.js';
import { PROVISIONED_BY_ANNOTATION } from '../../../src/core/pv/naming.js';
import { CLI } from '../../support/cli.js';
import { startControlPlane, type ControlPlane } from '../../support/control-plane.js';
import { eventually } from '../../support/eventually.js';
import { registerNode, reportPod, runKubelet } from '../../support/kubelet.js';
import { kubeBinDir, tokenKubeConfig } from '../../support/test-cluster.js';

const NS = 'default';
const SLOW = 90_000;
const GRACE_S = 8;
const CLASS = 'nc-local';
const NODE_A = 'node-a';
/** Named like a cloud node; its kubernetes.io/hostname label (what PV affinity names) is `node-b`. */
const NODE_B = 'node-b.example.internal';
const HOSTNAME_B = 'node-b';
const CLAIM = 'data-web-0';

describe('node cleanup with the real kube-controller-manager and kube-scheduler', { timeout: 600_000 }, () => {
  let plane: ControlPlane | undefined;
  let kc: KubeConfig;
  let core: CoreV1Api;
  let cluster: RestCluster;
  let cleanup: { child: ChildProcess; stderr: () => string; exited: Promise<number | null> } | undefined;
  const kubeletStop = new AbortController();

  function localPv(name: string, hostname: string): PersistentVolume {
    return {
      metadata: {
        name,
        // As the agent's PVs: the PV binder leaves a Released one to this "external" deleter.
        annotations: { [PROVISIONED_BY_ANNOTATION]: `local-volume-provisioner-${hostname}` },
      },
      spec: {
        capacity: { storage: '1Gi' },
        accessModes: ['ReadWriteOnce'],
        persistentVolumeReclaimPolicy: 'Delete',
        storageClassName: CLASS,
        local: { path: `/mnt/disks/${name}` },
        nodeAffinity: {
          required: {
            nodeSelectorTerms: [
              { matchExpressions: [{ key: 'kubernetes.io/hostname', operator: 'In', values: [hostname] }] },
            ],
          },
        },
      },
    };
  }

  async function phase(pv: string): Promise<string | undefined> {
    try {
      return (await cluster.persistentVolumes.get(pv)).status?.phase;
    } catch (err) {
      if (isNotFound(err)) return 'gone';
      throw err;
    }
  }

  async function claim(): Promise<PersistentVolumeClaim | undefined> {
    try {
      return await cluster.persistentVolumeClaims.get(CLAIM, { namespace: NS });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  async function events(reason: string, name: string): Promise<number> {
    const list = await cluster.events.list({ namespace: NS });
    return list.items.filter((e) => e.reason === reason && e.involvedObject.name === name).length;
  }

  function logs(): string {
    const component = (name: string): string => {
      const file = join(plane?.dir ?? '', `${name}.log`);
      return existsSync(file) ? `--- ${name}:\n${readFileSync(file, 'utf8').split('\n').slice(-15).join('\n')}` : '';
    };
    return [
      `--- node-cleanup:\n${cleanup?.stderr().split('\n').slice(-25).join('\n') ?? ''}`,
      component('kube-controller-manager'),
      component('kube-scheduler'),
    ].join('\n');
  }

  async function scheduledNode(pod: string): Promise<string | undefined> {
    try {
      const p = await cluster.pods.get(pod, { namespace: NS });
      return p.metadata.deletionTimestamp === undefined ? p.spec.nodeName : undefined;
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  before(async () => {
    plane = await startControlPlane({ binDir: kubeBinDir(), controllers: true });
    kc = tokenKubeConfig(plane.server, plane.caFile, plane.adminToken, 'lvp-test-admin');
    core = kc.makeApiClient(CoreV1Api);
    cluster = new RestCluster({ connection: await loadKubeconfig(plane.kubeconfigPath) });
    await registerNode(kc, NODE_A);
    await registerNode(kc, NODE_B, { 'kubernetes.io/hostname': HOSTNAME_B });
    void runKubelet(kc, new Set([NODE_A, NODE_B]), kubeletStop.signal);
    await kc.makeApiClient(StorageV1Api).createStorageClass({
      body: {
        metadata: { name: CLASS },
        provisioner: 'kubernetes.io/no-provisioner',
        volumeBindingMode: 'WaitForFirstConsumer',
        reclaimPolicy: 'Delete',
      },
    });
    let stderr = '';
    const child = spawn(
      process.execPath,
      [
        CLI,
        'node-cleanup',
        `--storageclass-names=${CLASS}`,
        `--pvc-deletion-delay=${String(GRACE_S)}s`,
        '--stale-pv-discovery-interval=1s',
        '--listen-address=',
        '--leader-elect-lease-namespace=default',
        '--leader-elect-identity=e2e',
        '--log-format=json',
      ],
      {
        env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', KUBECONFIG: plane.kubeconfigPath },
        stdio: ['ignore', 'ignore', 'pipe'],
      },
    );
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    cleanup = { child, stderr: () => stderr, exited: new Promise((resolve) => child.on('exit', resolve)) };
  });

  after(async () => {
    kubeletStop.abort();
    try {
      if (cleanup !== undefined && cleanup.child.exitCode === null) {
        cleanup.child.kill('SIGTERM');
        const code = await Promise.race([cleanup.exited, delay(15_000, 'timeout' as const)]);
        if (code === 'timeout') cleanup.child.kill('SIGKILL');
      }
      cluster.close();
    } finally {
      await plane?.stop();
    }
  });

  it('a StatefulSet pod on a deleted node: after the grace period its claim is recreated and binds a PV on another node', async () => {
    await cluster.persistentVolumes.create(localPv('pv-a', NODE_A));
    await eventually(async () => ((await phase('pv-a')) === 'Available' ? true : undefined), 'pv-a Available', SLOW);
    await kc.makeApiClient(AppsV1Api).createNamespacedStatefulSet({
      namespace: NS,
      body: {
        metadata: { name: 'web' },
        spec: {
          serviceName: 'web',
          replicas: 1,
          selector: { matchLabels: { app: 'web' } },
          template: {
            metadata: { labels: { app: 'web' } },
            spec: {
              containers: [
                {
                  name: 'web',
                  image: 'registry.example/web:e2e',
                  volumeMounts: [{ name: 'data', mountPath: '/data' }],
                },
              ],
            },
          },
          volumeClaimTemplates: [
            {
              metadata: { name: 'data' },
              spec: {
                storageClassName: CLASS,
                accessModes: ['ReadWriteOnce'],
                resources: { requests: { storage: '1Gi' } },
              },
            },
          ],
        },
      },
    });
    assert.equal(await eventually(() => scheduledNode('web-0'), 'web-0 scheduled', SLOW), NODE_A);
    await reportPod(kc, NS, 'web-0', { phase: 'Running' });
    const first = await eventually(
      async () => {
        const c = await claim();
        return c?.status?.phase === 'Bound' ? c : undefined;
      },
      'the claim bound',
      SLOW,
    );
    assert.equal(first.spec.volumeName, 'pv-a');
    // The other node's PV: its Node's name is not its hostname label; it must never look stranded.
    await cluster.persistentVolumes.create(localPv('pv-b', HOSTNAME_B));
    await eventually(async () => ((await phase('pv-b')) === 'Available' ? true : undefined), 'pv-b Available', SLOW);

    await cluster.nodes.delete(NODE_A);
    await eventually(
      async () => ((await events(EVENT_REASONS.referencedNodeDeleted, CLAIM)) > 0 ? true : undefined),
      `the ReferencedNodeDeleted warning\n${logs()}`,
      SLOW,
    );
    // Past the grace period the running pod (its kubelet gone, nothing has stopped it) holds the
    // claim: the controller, the claim now due, says it left it as it is and why.
    await eventually(
      () => (/used by pod web-0 on node node-a \(Running\)/u.test(cleanup?.stderr() ?? '') ? true : undefined),
      `the claim held past the grace period\n${logs()}`,
      (GRACE_S + 30) * 1000,
      100,
    );
    assert.equal((await claim())?.metadata.uid, first.metadata.uid, `held while its pod runs\n${logs()}`);

    // The pod garbage collector's part: pods bound to a Node that does not exist are force-deleted.
    await core.deleteNamespacedPod({ namespace: NS, name: 'web-0', gracePeriodSeconds: 0 });

    const second = await eventually(
      async () => {
        const c = await claim();
        return c !== undefined && c.metadata.uid !== first.metadata.uid && c.status?.phase === 'Bound' ? c : undefined;
      },
      `a new claim, bound\n${logs()}`,
      SLOW,
    );
    assert.equal(second.spec.volumeName, 'pv-b', 'the recreated claim binds the PV of the other node');
    assert.equal(await eventually(() => scheduledNode('web-0'), 'web-0 rescheduled', SLOW), NODE_B);
    await eventually(
      async () => ((await phase('pv-a')) === 'gone' ? true : undefined),
      `pv-a deleted\n${logs()}`,
      SLOW,
    );
    assert.equal(await events(EVENT_REASONS.deletedClaim, CLAIM), 1);
    assert.equal(await events(EVENT_REASONS.deletedVolume, 'pv-a'), 1);
    assert.equal(await phase('pv-b'), 'Bound');
  });

  it('a node that comes back inside the grace period keeps its claim and its PVs, bound or free', async () => {
    const before = await claim();
    assert.ok(before !== undefined && before.spec.volumeName === 'pv-b');
    await reportPod(kc, NS, 'web-0', { phase: 'Running' });
    // A free PV of the node too: unlike the claim (its pod runs) nothing would hold it past the grace period.
    await cluster.persistentVolumes.create(localPv('pv-b2', HOSTNAME_B));
    await eventually(async () => ((await phase('pv-b2')) === 'Available' ? true : undefined), 'pv-b2 Available', SLOW);
    const warned = await events(EVENT_REASONS.referencedNodeDeleted, CLAIM);
    await cluster.nodes.delete(NODE_B);
    await eventually(
      async () => ((await events(EVENT_REASONS.referencedNodeDeleted, CLAIM)) > warned ? true : undefined),
      `the ReferencedNodeDeleted warning for node-b's claim\n${logs()}`,
      SLOW,
    );
    await registerNode(kc, NODE_B, { 'kubernetes.io/hostname': HOSTNAME_B });
    await delay(GRACE_S * 2 * 1000);
    const afterwards = await claim();
    assert.ok(afterwards !== undefined, `kept\n${logs()}`);
    assert.equal(afterwards.metadata.uid, before.metadata.uid);
    assert.equal(afterwards.metadata.deletionTimestamp, undefined);
    assert.equal(await phase('pv-b'), 'Bound');
    assert.equal(await phase('pv-b2'), 'Available', 'the free PV of the returned node is kept');
    assert.equal(await events(EVENT_REASONS.deletedClaim, CLAIM), 1, 'no second claim deletion');
    assert.equal(await events(EVENT_REASONS.deletedVolume, 'pv-b2'), 0);
    assert.match(cleanup?.stderr() ?? '', /a Node of the volume is back/u);
  });
});
