// The staged rollout's RBAC on the real kube-apiserver, exactly as the chart renders it: the rollout
// controller's ServiceAccount can read the operator's ConfigMap but write only the two copies, its
// own leader Lease and Events; the agent's can get, list and watch the two copies and nothing else
// (resourceNames: RBAC narrows a list or watch by name only when the request selects that one name
// with a field selector, which is how the staged source reads each copy), and write no ConfigMap.
//
// Lint: client-node's models are plain data classes; rendered manifests are used as such.
/* eslint-disable @typescript-eslint/no-unsafe-class-instance-assignment */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { after, before, describe, it } from 'node:test';
import { CoreV1Api } from '@kubernetes/client-node';
import { systemClock } from '../../../src/core/clock.js';
import { StagedConfigSource } from '../../../src/core/config/source/staged.js';
import { statusLeaseName, statusSelector } from '../../../src/core/fleet/applied-state.js';
import { KubeApiError } from '../../../src/core/kube/cluster.js';
import type { ListOptions, ResourceClient } from '../../../src/core/kube/cluster.js';
import { RestCluster } from '../../../src/core/kube/rest-cluster.js';
import { MemoryLogger } from '../../../src/core/log.js';
import {
  CONFIG_HASH_ANNOTATION,
  ROLLOUT_STATE_ANNOTATION,
  stagedConfigMapName,
} from '../../../src/core/rollout-state/annotations.js';
import { stagedConfigMap, stagedSelector } from '../../../src/core/staged-rollout/objects.js';
import { rbacRolesFromManifests, tokenForServiceAccount } from '../../support/cluster.js';
import type { RbacRole, ServiceAccountAccess } from '../../support/cluster.js';
import { renderChart } from '../../support/helm.js';
import type { Rendered } from '../../support/helm.js';
import { adminKubeConfig, requireTestControlPlane } from '../../support/test-cluster.js';
import { isRecord } from '../../../src/core/unknown-values.js';

const suffix = randomBytes(3).toString('hex');
const NAMESPACE = `lvp-sr-${suffix}`;
const release = `sr-${suffix}`;
const fullname = `${release}-local-static-provisioner`;
const configName = `${fullname}-config`;
const stableName = stagedConfigMapName(configName, 'stable');
const candidateName = stagedConfigMapName(configName, 'candidate');
const controllerName = `${fullname}-rollout-controller`;

async function refused(what: string, call: Promise<unknown>): Promise<void> {
  await assert.rejects(
    call,
    (error: unknown) => error instanceof KubeApiError && error.status === 403,
    `${what} must be forbidden`,
  );
}

/** Drains a watch for about a second (the server ends it): throws its error, e.g. a 403. */
async function watchFor<T>(client: ResourceClient<T>, options: ListOptions): Promise<number> {
  const stop = new AbortController();
  const timer = setTimeout(() => {
    stop.abort();
  }, 5_000);
  let events = 0;
  try {
    for await (const event of client.watch({
      ...options,
      resourceVersion: '0',
      timeoutSeconds: 1,
      signal: stop.signal,
    }))
      if (event.type !== 'BOOKMARK') events++;
  } finally {
    clearTimeout(timer);
  }
  return events;
}

function names(items: readonly { readonly metadata: { readonly name: string } }[]): string[] {
  return items.map((i) => i.metadata.name).sort();
}

describe("staged rollout: the chart's RBAC on the real apiserver", () => {
  let admin: RestCluster;
  let ca = '';
  let server = '';
  let rendered: Rendered;
  let data: Record<string, string> = {};
  const accesses: ServiceAccountAccess[] = [];
  const clients: RestCluster[] = [];

  async function clientFor(serviceAccount: string, roles: readonly RbacRole[]): Promise<RestCluster> {
    const access = await tokenForServiceAccount(adminKubeConfig(), NAMESPACE, serviceAccount, ...roles);
    accesses.push(access);
    const client = new RestCluster({ connection: { server, ca, token: access.token, source: 'test' } });
    clients.push(client);
    return client;
  }

  before(async () => {
    const plane = requireTestControlPlane();
    server = plane.server;
    ca = await readFile(plane.caFile, 'utf8');
    admin = new RestCluster({ connection: { server, ca, token: plane.adminToken, source: 'test' } });
    await adminKubeConfig()
      .makeApiClient(CoreV1Api)
      .createNamespace({ body: { metadata: { name: NAMESPACE } } });
    rendered = renderChart({
      release,
      namespace: NAMESPACE,
      set: ['stagedRollout.enabled=true'],
    });
    const raw = rendered.one('ConfigMap', configName)['data'];
    assert.ok(isRecord(raw));
    data = Object.fromEntries(Object.entries(raw).map(([k, v]) => [k, String(v)]));
    // The operator's ConfigMap, as `helm install` creates it.
    await admin.configMaps.create(
      { metadata: { name: configName, namespace: NAMESPACE }, data },
      { namespace: NAMESPACE },
    );
  });

  after(async () => {
    for (const client of clients) client.close();
    for (const access of accesses) await access.cleanup().catch(() => undefined);
    await adminKubeConfig()
      .makeApiClient(CoreV1Api)
      .deleteNamespace({ name: NAMESPACE })
      .catch(() => undefined);
    admin.close();
  });

  it('the rollout controller: reads the desired ConfigMap, writes only the two copies, its leader Lease and Events', async () => {
    const roles = rbacRolesFromManifests(
      renderChart({
        release,
        namespace: NAMESPACE,
        set: ['stagedRollout.enabled=true'],
        showOnly: ['templates/rollout-controller.yaml'],
      }).text,
    );
    assert.deepEqual(
      roles.map((r) => `${r.kind}/${r.metadata?.name ?? ''}`),
      [`ClusterRole/${controllerName}`, `Role/${controllerName}`],
    );
    const controller = await clientFor(controllerName, roles);
    const ns = { namespace: NAMESPACE };

    // ConfigMaps: the desired one read, never written; the copies created and written.
    assert.deepEqual((await controller.configMaps.get(configName, ns)).data, data);
    await controller.configMaps.list({ ...ns, fieldSelector: `metadata.name=${configName}` });
    assert.ok((await watchFor(controller.configMaps, { ...ns, fieldSelector: `metadata.name=${configName}` })) >= 1);
    const stable = await controller.configMaps.create(
      stagedConfigMap(NAMESPACE, configName, 'stable', data, { [CONFIG_HASH_ANNOTATION]: 'sha256:0' }, undefined),
      ns,
    );
    const candidate = await controller.configMaps.create(
      stagedConfigMap(NAMESPACE, configName, 'candidate', data, { [ROLLOUT_STATE_ANNOTATION]: '{}' }, undefined),
      ns,
    );
    await controller.configMaps.update({ ...stable, data: { ...data, extra: '1' } }, ns);
    await controller.configMaps.patch(
      candidateName,
      { metadata: { annotations: { [ROLLOUT_STATE_ANNOTATION]: '{"phase":1}' } } },
      ns,
    );
    // each copy read by name (list + watch, as the controller's caches do); nothing label-selected or namespace-wide
    for (const name of [stableName, candidateName]) {
      assert.deepEqual(
        names((await controller.configMaps.list({ ...ns, fieldSelector: `metadata.name=${name}` })).items),
        [name],
      );
      assert.ok((await watchFor(controller.configMaps, { ...ns, fieldSelector: `metadata.name=${name}` })) >= 1);
    }
    await refused(
      'a label-selected list of the copies',
      controller.configMaps.list({ ...ns, labelSelector: stagedSelector(configName) }),
    );
    await refused('every ConfigMap of its namespace', controller.configMaps.list(ns));
    const desired = await admin.configMaps.get(configName, ns);
    await refused("update of the operator's ConfigMap", controller.configMaps.update(desired, ns));
    await refused(
      "patch of the operator's ConfigMap",
      controller.configMaps.patch(configName, { data: { x: 'y' } }, ns),
    );
    await refused('delete of a copy', controller.configMaps.delete(candidate.metadata.name, ns));
    await refused('a ConfigMap of another namespace', controller.configMaps.list({ namespace: 'default' }));
    // create cannot be limited to a name (RBAC has no name at create time): documented, checked.
    await controller.configMaps.create({ metadata: { name: `${fullname}-other`, namespace: NAMESPACE } }, ns);
    await refused(
      'update of another ConfigMap',
      controller.configMaps.patch(`${fullname}-other`, { data: { a: 'b' } }, ns),
    );
    await refused('a read of another ConfigMap', controller.configMaps.get(`${fullname}-other`, ns));

    // Leases: the agents' status Leases read (list + watch by label); only its leader Lease written.
    const statusLease = await admin.leases.create(
      {
        metadata: {
          name: statusLeaseName(fullname, 'node-a'),
          namespace: NAMESPACE,
          labels: { 'local-static-provisioner/status-of': fullname },
        },
        spec: { holderIdentity: 'node-a' },
      },
      ns,
    );
    assert.deepEqual(names((await controller.leases.list({ ...ns, labelSelector: statusSelector(fullname) })).items), [
      statusLease.metadata.name,
    ]);
    assert.equal(await watchFor(controller.leases, { ...ns, labelSelector: statusSelector(fullname) }), 1);
    const leader = await controller.leases.create(
      { metadata: { name: controllerName, namespace: NAMESPACE }, spec: { holderIdentity: 'replica-1' } },
      ns,
    );
    await controller.leases.update({ ...leader, spec: { holderIdentity: 'replica-2' } }, ns);
    await refused('update of an agent status Lease', controller.leases.update(statusLease, ns));
    await refused('delete of its leader Lease', controller.leases.delete(controllerName, ns));

    // Nodes: read, never written.
    await controller.nodes.list({});
    await watchFor(controller.nodes, {});
    await refused('a patch of a Node', controller.nodes.patch('any-node', { metadata: { labels: { a: 'b' } } }));

    // Events on the operator's ConfigMap.
    const event = await controller.events.create(
      {
        metadata: { name: `${configName}.${suffix}`, namespace: NAMESPACE },
        involvedObject: { apiVersion: 'v1', kind: 'ConfigMap', name: configName, namespace: NAMESPACE },
        reason: 'RolloutStarted',
        message: 'rollout of sha256:0 started',
        type: 'Normal',
        source: { component: 'local-volume-rollout-controller' },
        count: 1,
      },
      ns,
    );
    await controller.events.patch(event.metadata.name, { count: 2 }, ns);
  });

  it("the agent: gets, lists and watches each copy by name and nothing else: no label-selected or namespace-wide read, never the operator's ConfigMap, never a write", async () => {
    const roles = rbacRolesFromManifests(
      renderChart({
        release,
        namespace: NAMESPACE,
        set: ['stagedRollout.enabled=true'],
        showOnly: ['templates/rbac.yaml'],
      }).text,
    );
    assert.deepEqual(
      roles.map((r) => `${r.kind}/${r.metadata?.name ?? ''}`),
      [
        `ClusterRole/${fullname}-node-clusterrole`,
        `Role/${fullname}-jobs-role`,
        `Role/${fullname}-status-role`,
        `Role/${fullname}-config-role`,
      ],
    );
    const agent = await clientFor(rendered.one('ServiceAccount', fullname).metadata.name, roles);
    const ns = { namespace: NAMESPACE };
    // The copies exist (the controller test wrote them); create them if this test runs alone.
    for (const role of ['stable', 'candidate'] as const) {
      const name = stagedConfigMapName(configName, role);
      await admin.configMaps
        .create(stagedConfigMap(NAMESPACE, configName, role, data, {}, undefined), ns)
        .catch((error: unknown) => {
          if (!(error instanceof KubeApiError && error.status === 409)) throw error;
        });
      assert.equal((await agent.configMaps.get(name, ns)).metadata.name, name);
    }
    // What the staged source does: a list + watch of each copy by name (field selector).
    for (const name of [stableName, candidateName]) {
      const byName = { ...ns, fieldSelector: `metadata.name=${name}` };
      assert.deepEqual(names((await agent.configMaps.list(byName)).items), [name]);
      assert.equal(await watchFor(agent.configMaps, byName), 1);
    }
    // The staged source itself, on the agent's token: both copies read, the API reachable.
    const source = new StagedConfigSource({
      client: agent.configMaps,
      namespace: NAMESPACE,
      name: configName,
      nodeName: 'node-a',
      clock: systemClock,
      logger: new MemoryLogger(),
      startTimeoutMs: 10_000,
    });
    await source.start({ changed: () => undefined });
    try {
      const read = await source.read();
      assert.ok(read.ok, read.ok ? '' : read.error.message);
      assert.equal(read.snapshot.source.path, `configmap:${NAMESPACE}/${stableName}`);
      const api = source.status().api;
      assert.equal(api?.reachable, true, api?.lastError);
    } finally {
      await source.stop();
    }
    // Nothing else: not both copies by their label, not every ConfigMap of the namespace (the
    // operator's included), not the operator's ConfigMap by name or by field selector.
    const selected = { ...ns, labelSelector: stagedSelector(configName) };
    await refused('a label-selected list', agent.configMaps.list(selected));
    await refused('a label-selected watch', watchFor(agent.configMaps, selected));
    await refused("a list of the namespace's ConfigMaps", agent.configMaps.list(ns));
    await refused("a watch of the namespace's ConfigMaps", watchFor(agent.configMaps, ns));
    await refused("a get of the operator's ConfigMap", agent.configMaps.get(configName, ns));
    await refused(
      "the operator's ConfigMap by field selector",
      agent.configMaps.list({ ...ns, fieldSelector: `metadata.name=${configName}` }),
    );
    await refused(
      'a ConfigMap write',
      agent.configMaps.patch(candidateName, { metadata: { annotations: { a: 'b' } } }, ns),
    );
    await refused('a ConfigMap create', agent.configMaps.create({ metadata: { name: `${fullname}-x` } }, ns));
    await refused(
      'ConfigMaps of another namespace',
      agent.configMaps.list({ namespace: 'default', fieldSelector: `metadata.name=${stableName}` }),
    );
  });
});
