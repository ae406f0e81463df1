// The API config source end to end: `provisioner run` as a process, with the chart's args for
// configSource=configmap and a token bound to exactly the chart's rules (its ClusterRole, Jobs
// Role and the Role on the one ConfigMap), against the real kube-apiserver through a loopback
// proxy that the test cuts and restores (an apiserver outage or restart as the agent sees it; the
// shared control plane cannot be restarted). A PUT of the ConfigMap (what `kubectl apply` sends)
// is applied within 2 s; an invalid one is rejected while the old config serves; deleting the
// ConfigMap is reported and ignored, re-creating it applies it; an update made while the API is
// cut is applied once it is back. No request is forbidden.
/* eslint-disable @typescript-eslint/no-unsafe-class-instance-assignment */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { KubernetesObjectApi } from '@kubernetes/client-node';
import type { V1Container, V1DaemonSet } from '@kubernetes/client-node';
import { AdminClient } from '../../../src/core/agent/admin-client.js';
import type { AgentStatusJson } from '../../../src/core/agent/reload-types.js';
import { loadKubeconfig } from '../../../src/core/kube/kubeconfig.js';
import type { ConfigMap } from '../../../src/core/kube/objects.js';
import { RestCluster } from '../../../src/core/kube/rest-cluster.js';
import { CLI } from '../../support/cli.js';
import { forbiddenLogLines, rbacRolesFromManifests, tokenForServiceAccount } from '../../support/cluster.js';
import type { ServiceAccountAccess } from '../../support/cluster.js';
import { eventually } from '../../support/eventually.js';
import { renderChart } from '../../support/helm.js';
import type { Rendered } from '../../support/helm.js';
import { Cleanup, makeTempDir } from '../../support/real-node.js';
import { TcpProxy } from '../../support/tcp-proxy.js';
import { adminKubeConfig, requireTestControlPlane } from '../../support/test-cluster.js';

const suffix = Math.random().toString(36).slice(2, 8);
const NAMESPACE = 'default';

describe('the API config source (run --config-source configmap:…) against the real apiserver', () => {
  const cleanup = new Cleanup();
  const release = `lvp-api-${suffix}`;
  const nodeName = `lvp-api-${suffix}`;
  const className = `lvp-api-${suffix}-fs`;
  let cluster: RestCluster;
  let rendered: Rendered;
  let access: ServiceAccountAccess | undefined;
  let proxy: TcpProxy | undefined;
  let root = '';
  let configMapName = '';

  const values = (disc: string): string =>
    [
      'configSource: configmap',
      'classes:',
      `  - name: ${className}`,
      `    hostDir: ${disc}`,
      '    storageClass: true',
    ].join('\n');

  before(async () => {
    const plane = requireTestControlPlane();
    const admin = adminKubeConfig();
    cluster = new RestCluster({ connection: await loadKubeconfig(plane.kubeconfigPath) });
    root = makeTempDir(cleanup, 'lvp-api-');
    mkdirSync(join(root, 'disks'));
    rendered = renderChart({ release, namespace: NAMESPACE, values: values(join(root, 'disks')) });
    const roles = rbacRolesFromManifests(rendered.text);
    assert.deepEqual(
      roles.map((r) => `${r.kind}/${r.metadata?.name ?? ''}`),
      [
        `ClusterRole/${release}-local-static-provisioner-node-clusterrole`,
        `Role/${release}-local-static-provisioner-jobs-role`,
        `Role/${release}-local-static-provisioner-status-role`,
        `Role/${release}-local-static-provisioner-config-role`,
      ],
    );
    access = await tokenForServiceAccount(admin, NAMESPACE, rendered.one('ServiceAccount').metadata.name, ...roles);
    await cluster.nodes.create({ metadata: { name: nodeName, labels: { 'kubernetes.io/hostname': nodeName } } });
    await KubernetesObjectApi.makeApiClient(admin).create(rendered.one('StorageClass'));
    const cm = rendered.one('ConfigMap');
    configMapName = cm.metadata.name;
    const data = cm['data'];
    assert.ok(typeof data === 'object' && data !== null);
    await cluster.configMaps.create(
      {
        metadata: { name: configMapName },
        data: Object.fromEntries(Object.entries(data).map(([k, v]) => [k, String(v)])),
      },
      { namespace: NAMESPACE },
    );
    proxy = await TcpProxy.start(plane.server);
  });

  after(async () => {
    await proxy?.close();
    await cluster.configMaps.delete(configMapName, { namespace: NAMESPACE }).catch(() => undefined);
    const events = await cluster.events.list({ namespace: NAMESPACE }).catch(() => ({ items: [] }));
    for (const e of events.items)
      if (e.involvedObject.name === nodeName)
        await cluster.events.delete(e.metadata.name, { namespace: NAMESPACE }).catch(() => undefined);
    await cluster.nodes.delete(nodeName).catch(() => undefined);
    await cluster.storageClasses.delete(className).catch(() => undefined);
    await access?.cleanup();
    cluster.close();
    cleanup.run();
  });

  async function configMap(): Promise<ConfigMap> {
    return cluster.configMaps.get(configMapName, { namespace: NAMESPACE });
  }

  /** A PUT of the whole ConfigMap, as `kubectl apply` (or edit) sends it. */
  async function put(data: Record<string, string>): Promise<void> {
    const current = await configMap();
    await cluster.configMaps.update({ ...current, data }, { namespace: NAMESPACE });
  }

  it('applies a PUT within 2 s, rejects an invalid one, survives deletion, re-creation and an API outage', async () => {
    assert.ok(access && proxy);
    const plane = requireTestControlPlane();
    const kubeconfig = join(root, 'agent.kubeconfig');
    writeFileSync(
      kubeconfig,
      [
        'apiVersion: v1',
        'kind: Config',
        `clusters: [{name: t, cluster: {server: "${proxy.url}", certificate-authority: "${plane.caFile}"}}]`,
        `users: [{name: agent, user: {token: "${access.token}"}}]`,
        'contexts: [{name: c, context: {cluster: t, user: agent}}]',
        'current-context: c',
        '',
      ].join('\n'),
    );
    const ds: V1DaemonSet = rendered.one('DaemonSet');
    const container: V1Container | undefined = ds.spec?.template.spec?.containers[0];
    assert.ok(container);
    const [command, ...chartArgs] = container.args ?? [];
    assert.equal(command, 'run');
    const sourceArg = `--config-source=configmap:${NAMESPACE}/${configMapName}`;
    assert.ok(chartArgs.includes(sourceArg), 'the chart passes --config-source');
    const socket = join(root, 'admin.sock');
    const child = spawn(
      process.execPath,
      [
        CLI,
        'run',
        ...chartArgs.filter((a) => !/^--(config-dir|discovery-period)=/u.test(a)),
        // No mounted directory: the ConfigMap through the API is the only source.
        `--config-dir=${join(root, 'not-mounted')}`,
        '--discovery-period=1s',
        '--admin-socket',
        socket,
        '--listen-address',
        '127.0.0.1:0',
      ],
      {
        env: {
          PATH: process.env['PATH'] ?? '/usr/bin:/bin',
          MY_NODE_NAME: nodeName,
          MY_NAMESPACE: NAMESPACE,
          KUBECONFIG: kubeconfig,
          JOB_CONTAINER_IMAGE: 'img',
        },
        stdio: ['ignore', 'ignore', 'pipe'],
      },
    );
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
    const client = new AdminClient(socket, { timeoutMs: 10_000 });
    const status = async (): Promise<AgentStatusJson> => {
      if (child.exitCode !== null) assert.fail(`the agent exited ${String(child.exitCode)}:\n${stderr}`);
      return client.status();
    };
    try {
      const first = await eventually(async () => {
        const s = await status().catch(() => undefined);
        return s?.ready === true ? s : undefined;
      }, 'the agent ready');
      assert.deepEqual(first.source.configured, { kind: 'configmap', namespace: NAMESPACE, name: configMapName });
      assert.deepEqual(first.source.inUse, first.source.configured);
      assert.equal(first.source.api?.reachable, true);
      assert.equal(first.config.source, `configmap:${NAMESPACE}/${configMapName}`);
      const initial = (await configMap()).data ?? {};
      const fsType = async (): Promise<string | undefined> =>
        (await client.config()).config.storageClassMap[className]?.fsType;

      // 1. A PUT, applied within the requirement (the reload itself takes about 0.2 s).
      const classMap = initial['storageClassMap'] ?? '';
      const withFsType = (fs: string): Record<string, string> => ({
        ...initial,
        storageClassMap: `${classMap.trimEnd()}\n  fsType: ${fs}\n`,
      });
      const sent = Date.now();
      await put(withFsType('ext4'));
      await eventually(
        async () => ((await fsType()) === 'ext4' ? true : undefined),
        'the PUT applied within 2 s',
        2_000,
      );
      const applied = await status();
      assert.equal(applied.lastReload?.trigger, 'api');
      assert.equal(applied.lastReload.outcome, 'applied');
      const appliedIn = Date.now() - sent;

      // 2. An invalid update: rejected, the old config serves.
      await put({ ...initial, storageClassMap: `${classMap.trimEnd()}\n  volumeMode: Sideways\n` });
      const rejected = await eventually(async () => (await status()).rejected, 'the invalid update rejected');
      assert.equal(rejected.outcome, 'rejected');
      assert.ok(rejected.issues.some((i) => i.path.endsWith('volumeMode')));
      assert.equal((await status()).config.appliedHash, applied.config.appliedHash);
      assert.equal(await fsType(), 'ext4');

      // 3. Deleted: reported and ignored; re-created: applied.
      await cluster.configMaps.delete(configMapName, { namespace: NAMESPACE });
      await eventually(
        async () => ((await status()).source.api?.object === 'deleted' ? true : undefined),
        'the deletion reported',
      );
      await eventually(async () => {
        const events = await cluster.events.list({ namespace: NAMESPACE });
        return events.items.some((e) => e.reason === 'ConfigSourceDeleted' && e.involvedObject.name === nodeName)
          ? true
          : undefined;
      }, 'the ConfigSourceDeleted Node event');
      assert.equal((await status()).config.appliedHash, applied.config.appliedHash, 'nothing wiped');
      await cluster.configMaps.create(
        { metadata: { name: configMapName }, data: withFsType('xfs') },
        { namespace: NAMESPACE },
      );
      await eventually(async () => ((await fsType()) === 'xfs' ? true : undefined), 'the re-created ConfigMap applied');
      assert.equal((await status()).source.api?.object, 'present');

      // 4. The API cut (an apiserver restart as the agent sees it): the last good config stays,
      //    the status says so; an update made meanwhile is applied once the API is back.
      await proxy.cut();
      const down = await eventually(async () => {
        const s = await status();
        return s.source.api?.reachable === false ? s : undefined;
      }, 'the API reported unreachable');
      assert.equal(down.source.api?.stale, true);
      assert.equal(await fsType(), 'xfs');
      await put(withFsType('ext3'));
      await proxy.restore();
      await eventually(
        async () => ((await fsType()) === 'ext3' ? true : undefined),
        'the update applied after the outage',
        30_000,
      );
      assert.equal((await status()).source.api?.reachable, true);
      assert.match(stderr, /config source unreachable: the last good config stays/u);

      child.kill('SIGTERM');
      assert.equal(await exited, 0, stderr);
      assert.deepEqual(forbiddenLogLines(stderr), [], 'no request of the agent was forbidden');
      assert.ok(appliedIn <= 2_000, `applied ${String(appliedIn)} ms after the PUT`);
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
  });
});
