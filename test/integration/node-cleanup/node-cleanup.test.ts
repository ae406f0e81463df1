// `provisioner node-cleanup` against the real kube-apiserver: leader election on a real Lease, and
// two replicas of the real command, with exactly the chart's RBAC, of which only the leader acts;
// killing the leader hands over to the other one, and no object is ever deleted by both.
// (The apiserver runs no controllers here: the test plays the PV controller's part by marking a PV
// Released; test/integration/node-cleanup/controllers.test.ts runs the real ones.)
//
// Lint: client-node's models are plain data classes; rendered manifests are used as such.
/* eslint-disable @typescript-eslint/no-unsafe-class-instance-assignment */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { V1Deployment } from '@kubernetes/client-node';
import { systemClock } from '../../../src/core/clock.js';
import { isNotFound } from '../../../src/core/kube/cluster.js';
import { LeaderElector } from '../../../src/core/kube/leader-election.js';
import { loadKubeconfig } from '../../../src/core/kube/kubeconfig.js';
import type { CoreEvent, PersistentVolume } from '../../../src/core/kube/objects.js';
import { RestCluster } from '../../../src/core/kube/rest-cluster.js';
import { silentLogger } from '../../../src/core/log.js';
import { EVENT_REASONS } from '../../../src/core/node-cleanup/controller.js';
import { CLI } from '../../support/cli.js';
import { rbacRolesFromManifests, tokenForServiceAccount } from '../../support/cluster.js';
import type { ServiceAccountAccess } from '../../support/cluster.js';
import { eventually } from '../../support/eventually.js';
import { renderChart } from '../../support/helm.js';
import { adminKubeConfig, requireTestControlPlane } from '../../support/test-cluster.js';

const NAMESPACE = 'default';
const HOSTNAME = 'kubernetes.io/hostname';

async function ignoreNotFound(fn: () => Promise<unknown>): Promise<void> {
  try {
    await fn();
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
}

describe('the chart: node cleanup off by default, least privilege when on', () => {
  it('renders nothing of it by default; enabled: 2 replicas, its own ServiceAccount, exactly these rules', () => {
    const off = renderChart({});
    assert.deepEqual(off.all('Deployment'), []);
    assert.ok(!off.objects.some((o) => o.metadata.name.endsWith('-node-cleanup')));
    const on = renderChart({ release: 'r', namespace: 'storage', set: ['nodeCleanup.enabled=true'] });
    const name = 'r-local-static-provisioner-node-cleanup';
    const deployment: V1Deployment = on.one('Deployment');
    assert.equal(deployment.metadata?.name, name);
    assert.equal(deployment.spec?.replicas, 2);
    assert.equal(deployment.spec.template.spec?.serviceAccountName, name);
    assert.deepEqual(deployment.spec.template.spec.containers[0]?.args?.slice(0, 2), [
      'node-cleanup',
      '--storageclass-names=fast-disks',
    ]);
    const rules = (kind: string, roleName: string): unknown => on.one(kind, roleName)['rules'];
    assert.deepEqual(rules('ClusterRole', name), [
      { apiGroups: [''], resources: ['persistentvolumes'], verbs: ['get', 'list', 'watch', 'delete'] },
      { apiGroups: [''], resources: ['persistentvolumeclaims'], verbs: ['get', 'delete'] },
      { apiGroups: [''], resources: ['pods'], verbs: ['list'] },
      { apiGroups: [''], resources: ['nodes'], verbs: ['get', 'list', 'watch'] },
      { apiGroups: [''], resources: ['events'], verbs: ['create', 'patch'] },
    ]);
    assert.deepEqual(rules('Role', `${name}-leader-election`), [
      { apiGroups: ['coordination.k8s.io'], resources: ['leases'], resourceNames: [name], verbs: ['get', 'update'] },
      { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['create'] },
    ]);
  });
});

describe('leader election on a real Lease', () => {
  const lease = `le-${randomBytes(3).toString('hex')}`;
  const timing = { leaseDurationMs: 3_000, renewDeadlineMs: 2_000, retryPeriodMs: 400 };
  let cluster: RestCluster;

  before(async () => {
    cluster = new RestCluster({ connection: await loadKubeconfig(requireTestControlPlane().kubeconfigPath) });
  });
  after(async () => {
    await ignoreNotFound(() => cluster.leases.delete(lease, { namespace: NAMESPACE }));
    cluster.close();
  });

  function candidate(identity: string): { elector: LeaderElector; stop: AbortController; done: Promise<void> } {
    const elector = new LeaderElector({
      leases: cluster.leases,
      name: lease,
      namespace: NAMESPACE,
      identity,
      timing,
      clock: systemClock,
      logger: silentLogger,
    });
    const stop = new AbortController();
    return { elector, stop, done: elector.run(stop.signal) };
  }

  it('one leads; a stopped leader that does not release is replaced only after the lease duration; a release hands over at once', async () => {
    const a = candidate('a');
    await eventually(() => a.elector.leading, 'a leads');
    const b = candidate('b');
    // Both keep campaigning for a while: b must never lead while a renews.
    for (let i = 0; i < 20; i++) {
      assert.equal(b.elector.leading, undefined);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const before = await cluster.leases.get(lease, { namespace: NAMESPACE });
    assert.equal(before.spec?.holderIdentity, 'a');
    // a "crashes": its loop stops without a release.
    a.stop.abort();
    await a.done;
    const stoppedAt = Date.now();
    await eventually(() => b.elector.leading, 'b takes over', 15_000);
    const waited = Date.now() - stoppedAt;
    assert.ok(waited >= timing.leaseDurationMs - timing.retryPeriodMs, `b waited out the lease (${String(waited)} ms)`);
    const taken = await cluster.leases.get(lease, { namespace: NAMESPACE });
    assert.equal(taken.spec?.holderIdentity, 'b');
    assert.equal(taken.spec.leaseTransitions, (before.spec.leaseTransitions ?? 0) + 1);

    const c = candidate('c');
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    b.stop.abort();
    await b.done;
    assert.equal(await b.elector.release(), true);
    const releasedAt = Date.now();
    await eventually(() => c.elector.leading, 'c takes over after the release', 10_000);
    assert.ok(Date.now() - releasedAt < timing.leaseDurationMs, 'a released lease is taken at once');
    c.stop.abort();
    await c.done;
    await c.elector.release();
  });
});

describe("two replicas of `provisioner node-cleanup` with exactly the chart's RBAC", () => {
  const suffix = randomBytes(3).toString('hex');
  const release = `nc-${suffix}`;
  const className = `nc-${suffix}-local`;
  const nodeA = `nc-${suffix}-a`;
  const nodeB = `nc-${suffix}-b`;
  const dir = mkdtempSync(join(tmpdir(), 'lvp-node-cleanup-'));
  const replicas = new Map<string, { child: ChildProcess; stderr: () => string; exited: Promise<number | null> }>();
  let cluster: RestCluster;
  let access: ServiceAccountAccess | undefined;
  let args: string[] = [];
  let leaseName = '';
  const pvs = [`nc-${suffix}-pv-a`, `nc-${suffix}-pv-b`];
  const claim = `nc-${suffix}-data-0`;

  before(async () => {
    const plane = requireTestControlPlane();
    cluster = new RestCluster({ connection: await loadKubeconfig(plane.kubeconfigPath) });
    const chart = renderChart({
      release,
      namespace: NAMESPACE,
      showOnly: ['templates/node-cleanup.yaml'],
      set: [
        'nodeCleanup.enabled=true',
        `nodeCleanup.storageClassNames={${className}}`,
        'nodeCleanup.pvcDeletionDelay=3s',
        'nodeCleanup.staleDiscoveryInterval=1s',
        'nodeCleanup.extraArgs={--leader-elect-lease-duration=4s,--leader-elect-renew-deadline=3s,--leader-elect-retry-period=500ms}',
      ],
    });
    const deployment: V1Deployment = chart.one('Deployment');
    assert.equal(deployment.spec?.replicas, 2);
    const container = deployment.spec.template.spec?.containers[0];
    assert.ok(container?.args);
    // The chart's args, but metrics on a free loopback port (two replicas share this host).
    args = container.args.map((a) => (a.startsWith('--listen-address=') ? '--listen-address=127.0.0.1:0' : a));
    leaseName = (args.find((a) => a.startsWith('--leader-elect-lease-name=')) ?? '').split('=')[1] ?? '';
    assert.equal(leaseName, `${release}-local-static-provisioner-node-cleanup`);
    const roles = rbacRolesFromManifests(chart.text);
    assert.deepEqual(roles.map((r) => r.kind).sort(), ['ClusterRole', 'Role']);
    access = await tokenForServiceAccount(
      adminKubeConfig(),
      NAMESPACE,
      chart.one('ServiceAccount').metadata.name,
      ...roles,
    );
    writeFileSync(
      join(dir, 'kubeconfig'),
      [
        'apiVersion: v1',
        'kind: Config',
        `clusters: [{name: t, cluster: {server: "${plane.server}", certificate-authority: "${plane.caFile}"}}]`,
        `users: [{name: nc, user: {token: "${access.token}"}}]`,
        'contexts: [{name: c, context: {cluster: t, user: nc, namespace: default}}]',
        'current-context: c',
        '',
      ].join('\n'),
    );
    for (const name of [nodeA, nodeB]) await cluster.nodes.create({ metadata: { name, labels: { [HOSTNAME]: name } } });
  });

  after(async () => {
    for (const { child } of replicas.values())
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    for (const name of pvs) {
      await ignoreNotFound(() => cluster.persistentVolumes.delete(name));
      await ignoreNotFound(() => cluster.persistentVolumes.patch(name, { metadata: { finalizers: null } }));
    }
    await ignoreNotFound(() => cluster.persistentVolumeClaims.delete(claim, { namespace: NAMESPACE }));
    await ignoreNotFound(() =>
      cluster.persistentVolumeClaims.patch(claim, { metadata: { finalizers: null } }, { namespace: NAMESPACE }),
    );
    for (const name of [nodeA, nodeB]) await ignoreNotFound(() => cluster.nodes.delete(name));
    await ignoreNotFound(() => cluster.leases.delete(leaseName, { namespace: NAMESPACE }));
    await access?.cleanup();
    cluster.close();
    rmSync(dir, { recursive: true, force: true });
  });

  function start(identity: string): void {
    const child = spawn(process.execPath, [CLI, ...args], {
      env: {
        PATH: process.env['PATH'] ?? '/usr/bin:/bin',
        KUBECONFIG: join(dir, 'kubeconfig'),
        POD_NAME: identity,
        POD_NAMESPACE: NAMESPACE,
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    replicas.set(identity, {
      child,
      stderr: () => stderr,
      exited: new Promise((resolve) => child.on('exit', resolve)),
    });
  }

  async function volume(name: string, node: string, claimed: boolean): Promise<PersistentVolume> {
    let claimRef: PersistentVolume['spec']['claimRef'];
    if (claimed) {
      const created = await cluster.persistentVolumeClaims.create(
        {
          metadata: { name: claim },
          spec: {
            accessModes: ['ReadWriteOnce'],
            resources: { requests: { storage: '1Gi' } },
            storageClassName: className,
            volumeName: name,
          },
        },
        { namespace: NAMESPACE },
      );
      claimRef = { kind: 'PersistentVolumeClaim', namespace: NAMESPACE, name: claim, uid: created.metadata.uid ?? '' };
    }
    const pv = await cluster.persistentVolumes.create({
      metadata: { name },
      spec: {
        capacity: { storage: '1Gi' },
        accessModes: ['ReadWriteOnce'],
        persistentVolumeReclaimPolicy: 'Delete',
        storageClassName: className,
        local: { path: `/mnt/disks/${name}` },
        nodeAffinity: {
          required: { nodeSelectorTerms: [{ matchExpressions: [{ key: HOSTNAME, operator: 'In', values: [node] }] }] },
        },
        ...(claimRef !== undefined ? { claimRef } : {}),
      },
    });
    return cluster.persistentVolumes.updateStatus({ ...pv, status: { phase: claimed ? 'Bound' : 'Available' } });
  }

  async function deletionEvents(): Promise<CoreEvent[]> {
    const reasons = new Set<string>([EVENT_REASONS.deletedClaim, EVENT_REASONS.deletedVolume]);
    const names = new Set([...pvs, claim]);
    const list = await cluster.events.list({ namespace: NAMESPACE });
    return list.items.filter((e) => reasons.has(e.reason) && names.has(e.involvedObject.name ?? ''));
  }

  async function holder(): Promise<string | undefined> {
    try {
      const lease = await cluster.leases.get(leaseName, { namespace: NAMESPACE });
      const id = lease.spec?.holderIdentity;
      return id === undefined || id === '' ? undefined : id;
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  async function terminating(get: () => Promise<{ metadata: { deletionTimestamp?: string } }>): Promise<boolean> {
    try {
      return (await get()).metadata.deletionTimestamp !== undefined;
    } catch (err) {
      if (isNotFound(err)) return true;
      throw err;
    }
  }

  it('the leader deletes the claim of a deleted node; killed, the other replica takes over and deletes the PVs; each deletion is done once', async () => {
    await volume(pvs[0] ?? '', nodeA, true);
    await volume(pvs[1] ?? '', nodeB, false);
    start('replica-a');
    start('replica-b');
    const first = await eventually(holder, 'a replica leads', 30_000);
    const second = first === 'replica-a' ? 'replica-b' : 'replica-a';

    await cluster.nodes.delete(nodeA);
    await eventually(
      async () =>
        (await terminating(() => cluster.persistentVolumeClaims.get(claim, { namespace: NAMESPACE }))) || undefined,
      'the claim of the deleted node is deleted',
      30_000,
    );
    const warnings = (await cluster.events.list({ namespace: NAMESPACE })).items.filter(
      (e) => e.reason === EVENT_REASONS.referencedNodeDeleted && e.involvedObject.name === claim,
    );
    assert.deepEqual(
      warnings.map((e) => e.source?.host),
      [first],
      'only the leader warned',
    );

    // Kill the leader without a release; the PV controller's part: the claim is gone, the PV Released.
    replicas.get(first)?.child.kill('SIGKILL');
    await replicas.get(first)?.exited;
    const pv = await cluster.persistentVolumes.get(pvs[0] ?? '');
    await cluster.persistentVolumes.updateStatus({ ...pv, status: { phase: 'Released' } });
    await cluster.nodes.delete(nodeB);
    await eventually(async () => ((await holder()) === second ? true : undefined), 'the other replica leads', 30_000);
    for (const name of pvs) {
      await eventually(
        async () => (await terminating(() => cluster.persistentVolumes.get(name))) || undefined,
        `${name} is deleted by the new leader`,
        30_000,
      );
    }
    // Events are written asynchronously, after the delete.
    const deletions = await eventually(
      async () => {
        const found = await deletionEvents();
        return found.length >= 3 ? found : undefined;
      },
      'three deletion events',
      10_000,
    );
    const byObject = deletions.map(
      (e) => `${e.involvedObject.kind ?? ''}/${e.involvedObject.name ?? ''}@${e.source?.host ?? ''}`,
    );
    assert.deepEqual(byObject.sort(), [
      `PersistentVolume/${pvs[0] ?? ''}@${second}`,
      `PersistentVolume/${pvs[1] ?? ''}@${second}`,
      `PersistentVolumeClaim/${claim}@${first}`,
    ]);

    // A graceful stop releases the lease.
    const survivor = replicas.get(second);
    survivor?.child.kill('SIGTERM');
    assert.equal(await survivor?.exited, 0, survivor?.stderr());
    assert.equal(await holder(), undefined, 'the lease was released');
    const forbidden = [...replicas.values()]
      .flatMap((r) => r.stderr().split('\n'))
      .filter((l) => /forbidden|\b403\b/iu.test(l));
    assert.deepEqual(forbidden, [], "the chart's RBAC allows everything the command does");
  });
});
