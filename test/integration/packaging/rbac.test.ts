// The chart's RBAC is the RBAC the agent needs: the ClusterRole and Role exactly as the chart renders
// them, bound to a ServiceAccount whose token is the agent's only credential; the real agent
// (`provisioner run` with the DaemonSet's args and env) on a real loop device against the real
// kube-apiserver, through a Job cleanup, a hot reload to in-process cleaning, an in-process
// cleanup and a hot reload back to Jobs. No request may be forbidden.
//
// Lint: client-node's models are plain data classes; rendered manifests are used as such.
/* eslint-disable @typescript-eslint/no-unsafe-class-instance-assignment */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { CoreV1Api, KubernetesObjectApi, StorageV1Api } from '@kubernetes/client-node';
import type { V1Container, V1DaemonSet } from '@kubernetes/client-node';
import { AdminClient } from '../../../src/core/agent/admin-client.js';
import type { AgentStatusJson } from '../../../src/core/agent/reload-types.js';
import { parseConfigSnapshot } from '../../../src/core/config/decode/parse.js';
import { snapshotFromDirectoryFiles } from '../../../src/core/config/decode/layout.js';
import { stateFromLease, statusLeaseName } from '../../../src/core/fleet/applied-state.js';
import { isNotFound } from '../../../src/core/kube/cluster.js';
import { loadKubeconfig } from '../../../src/core/kube/kubeconfig.js';
import type { PersistentVolume } from '../../../src/core/kube/objects.js';
import { RestCluster } from '../../../src/core/kube/rest-cluster.js';
import { NODE_LABEL, persistentVolumeName } from '../../../src/core/pv/naming.js';
import { CLI, REPO_ROOT } from '../../support/cli.js';
import {
  bindPersistentVolume,
  deleteJob,
  forbiddenLogLines,
  markJob,
  rbacRolesFromManifests,
  releasePersistentVolume,
  tokenForServiceAccount,
} from '../../support/cluster.js';
import type { ServiceAccountAccess } from '../../support/cluster.js';
import { writeConfigMapVolume } from '../../support/configmap-volume.js';
import { eventually } from '../../support/eventually.js';
import { renderChart } from '../../support/helm.js';
import { runPvProtectionController } from '../../support/pv-protection.js';
import type { Rendered } from '../../support/helm.js';
import { attachLoopDevice, Cleanup, makeTempDir, skipUnlessRoot } from '../../support/real-node.js';
import { adminKubeConfig, requireTestControlPlane } from '../../support/test-cluster.js';
import { isRecord } from '../../../src/core/unknown-values.js';

const MiB = 2 ** 20;
const suffix = Math.random().toString(36).slice(2, 8);
const NAMESPACE = 'default';

describe("the agent with exactly the chart's RBAC", { skip: skipUnlessRoot() }, () => {
  const cleanup = new Cleanup();
  const stopController = new AbortController();
  const release = `lvp-rbac-${suffix}`;
  const nodeName = `lvp-rbac-${suffix}`;
  const className = `lvp-rbac-${suffix}-block`;
  const entry = 'nvme-rbac';
  const pvName = persistentVolumeName(entry, nodeName, className);
  let cluster: RestCluster;
  let root = '';
  let disc = '';
  let access: ServiceAccountAccess | undefined;
  const agents: ChildProcess[] = [];
  let rendered: Rendered;

  /** The chart's values for this node: one Block class on the test's discovery directory. */
  const values = (jobs: boolean, labels = ''): string =>
    [
      `useJobForCleaning: ${String(jobs)}`,
      `labelsForPV: {${labels}}`,
      'classes:',
      `  - name: ${className}`,
      '    hostDir: /dev/disk/lvp-test',
      `    mountDir: ${disc}`,
      '    volumeMode: Block',
      `    blockCleanerCommand: ["${join(REPO_ROOT, 'cleaners/dd_zero.sh')}"]`,
      '    storageClass: true',
    ].join('\n');

  const render = (jobs: boolean, labels = ''): Rendered =>
    renderChart({ release, namespace: NAMESPACE, values: values(jobs, labels) });

  function configData(r: Rendered): Record<string, string> {
    const data = r.one('ConfigMap')['data'];
    assert.ok(isRecord(data));
    return Object.fromEntries(Object.entries(data).map(([k, v]) => [k, String(v)]));
  }

  function hashOf(configDir: string, data: Record<string, string>): string {
    return parseConfigSnapshot(
      snapshotFromDirectoryFiles(
        configDir,
        Object.entries(data).map(([name, text]) => ({ name, text })),
      ),
    ).hash;
  }

  async function currentPv(): Promise<PersistentVolume | undefined> {
    try {
      const pv = await cluster.persistentVolumes.get(pvName);
      return pv.metadata.deletionTimestamp === undefined ? pv : undefined;
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  async function republished(previous: PersistentVolume): Promise<PersistentVolume> {
    return eventually(async () => {
      const pv = await currentPv();
      return pv !== undefined && pv.metadata.uid !== previous.metadata.uid ? pv : undefined;
    }, `${pvName} republished with a new UID`);
  }

  async function bindAndRelease(pv: PersistentVolume): Promise<void> {
    const kc = adminKubeConfig();
    await bindPersistentVolume(kc, pv.metadata.name, { namespace: NAMESPACE, name: `claim-${suffix}`, uid: suffix });
    await releasePersistentVolume(kc, pv.metadata.name);
  }

  before(async () => {
    const plane = requireTestControlPlane();
    const admin = adminKubeConfig();
    cluster = new RestCluster({ connection: await loadKubeconfig(plane.kubeconfigPath) });
    root = makeTempDir(cleanup, 'lvp-rbac-');
    disc = join(root, 'disks');
    mkdirSync(disc);
    rendered = render(true);

    void runPvProtectionController(cluster, stopController.signal);

    await cluster.nodes.create({ metadata: { name: nodeName, labels: { 'kubernetes.io/hostname': nodeName } } });
    // The StorageClass as the chart renders it (admin: the agent only reads StorageClasses).
    await KubernetesObjectApi.makeApiClient(admin).create(rendered.one('StorageClass'));

    const roles = rbacRolesFromManifests(rendered.text);
    assert.deepEqual(
      roles.map((r) => `${r.kind}/${r.metadata?.name ?? ''}`),
      [
        `ClusterRole/${release}-local-static-provisioner-node-clusterrole`,
        `Role/${release}-local-static-provisioner-jobs-role`,
        `Role/${release}-local-static-provisioner-status-role`,
      ],
    );
    const serviceAccount = rendered.one('ServiceAccount').metadata.name;
    access = await tokenForServiceAccount(admin, NAMESPACE, serviceAccount, ...roles);
  });

  after(async () => {
    stopController.abort();
    for (const child of agents) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    const admin = adminKubeConfig();
    try {
      const leases = await cluster.leases.list({
        namespace: NAMESPACE,
        labelSelector: `local-static-provisioner/node=${nodeName}`,
      });
      for (const lease of leases.items)
        await cluster.leases.delete(lease.metadata.name, { namespace: NAMESPACE }).catch(() => undefined);
      const pvs = await cluster.persistentVolumes.list({ labelSelector: `${NODE_LABEL}=${nodeName}` });
      for (const pv of pvs.items) {
        await cluster.persistentVolumes.delete(pv.metadata.name).catch(() => undefined);
        await cluster.persistentVolumes
          .patch(pv.metadata.name, { metadata: { finalizers: null } })
          .catch(() => undefined);
      }
      const jobs = await cluster.jobs.list({
        namespace: NAMESPACE,
        labelSelector: `kubernetes.io/hostname=${nodeName}`,
      });
      for (const job of jobs.items) await deleteJob(admin, NAMESPACE, job.metadata.name);
      const core = admin.makeApiClient(CoreV1Api);
      const events = await core.listNamespacedEvent({ namespace: NAMESPACE });
      for (const event of events.items) {
        const involved = event.involvedObject.name ?? '';
        if (involved === nodeName || involved === pvName) {
          await core
            .deleteNamespacedEvent({ namespace: NAMESPACE, name: event.metadata.name ?? '' })
            .catch(() => undefined);
        }
      }
      await core.deleteNode({ name: nodeName }).catch(() => undefined);
      await admin
        .makeApiClient(StorageV1Api)
        .deleteStorageClass({ name: className })
        .catch(() => undefined);
      await access?.cleanup();
    } finally {
      cluster.close();
      cleanup.run();
    }
  });

  interface RunningAgent {
    readonly child: ChildProcess;
    readonly client: AdminClient;
    readonly exited: Promise<number | null>;
    readonly jobImage: string;
    stderr(): string;
    status(): Promise<AgentStatusJson>;
  }

  function writeKubeconfig(file: string, token: string): void {
    const plane = requireTestControlPlane();
    writeFileSync(
      file,
      [
        'apiVersion: v1',
        'kind: Config',
        `clusters: [{name: t, cluster: {server: "${plane.server}", certificate-authority: "${plane.caFile}"}}]`,
        `users: [{name: agent, user: {token: "${token}"}}]`,
        'contexts: [{name: c, context: {cluster: t, user: agent}}]',
        'current-context: c',
        '',
      ].join('\n'),
    );
  }

  /** The DaemonSet's container as a process: the chart's args and env, with test paths. */
  function startAgent(
    chart: Rendered,
    kubeconfig: string,
    dir: string,
    extraArgs: readonly string[] = [],
  ): RunningAgent {
    const ds: V1DaemonSet = chart.one('DaemonSet');
    const container: V1Container | undefined = ds.spec?.template.spec?.containers[0];
    assert.ok(container);
    const env = new Map((container.env ?? []).map((e) => [e.name, e]));
    assert.equal(env.get('MY_NAMESPACE')?.valueFrom?.fieldRef?.fieldPath, 'metadata.namespace');
    assert.equal(env.get('MY_NODE_NAME')?.valueFrom?.fieldRef?.fieldPath, 'spec.nodeName');
    const jobImage = env.get('JOB_CONTAINER_IMAGE')?.value;
    assert.ok(jobImage !== undefined && jobImage !== '');
    const [command, ...chartArgs] = container.args ?? [];
    assert.equal(command, 'run');
    assert.ok(chartArgs.includes('--log-format=json'));
    const socket = join(dir, 'admin.sock');
    const replaced = new Set(['--config-dir', '--discovery-period', ...extraArgs.map((a) => a.split('=')[0] ?? '')]);
    const args = [
      CLI,
      'run',
      // Flags set here replace the chart's (a flag may be given only once).
      ...chartArgs.filter((a) => !replaced.has(a.split('=')[0] ?? '')),
      `--config-dir=${join(dir, 'config')}`,
      '--discovery-period=500ms',
      '--admin-socket',
      socket,
      '--listen-address',
      '127.0.0.1:0',
      ...extraArgs,
    ];
    const child = spawn(process.execPath, args, {
      env: {
        PATH: process.env['PATH'] ?? '/usr/bin:/bin',
        MY_NODE_NAME: nodeName,
        MY_NAMESPACE: NAMESPACE,
        KUBECONFIG: kubeconfig,
        JOB_CONTAINER_IMAGE: jobImage,
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    agents.push(child);
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
    const client = new AdminClient(socket, { timeoutMs: 30_000 });
    return {
      child,
      client,
      exited,
      jobImage,
      stderr: () => stderr,
      status: async () => {
        if (child.exitCode !== null) assert.fail(`the agent exited ${String(child.exitCode)}:\n${stderr}`);
        return client.status();
      },
    };
  }

  async function ready(agent: RunningAgent): Promise<AgentStatusJson> {
    return eventually(async () => {
      const s = await agent.status().catch((err: unknown) => {
        if (agent.child.exitCode !== null) throw err;
        return undefined;
      });
      return s?.ready === true ? s : undefined;
    }, 'the agent to be ready');
  }

  async function stop(agent: RunningAgent): Promise<void> {
    agent.child.kill('SIGTERM');
    assert.equal(await agent.exited, 0, agent.stderr());
    assert.match(agent.stderr(), /"msg":"agent stopped"/u);
  }

  it('rbac.jobs=always: discovers, cleans by Job, reloads to in-process cleaning and back, never forbidden', async () => {
    assert.ok(access);
    const dir = join(root, 'always');
    const configDir = join(dir, 'config');
    const kubeconfig = join(dir, 'agent.kubeconfig');
    mkdirSync(dir);
    writeKubeconfig(kubeconfig, access.token);
    await writeConfigMapVolume(configDir, configData(rendered));
    const loop = attachLoopDevice(cleanup, join(root, 'disk.img'), 16 * MiB);
    symlinkSync(loop.path, join(disc, entry));

    const agent = startAgent(rendered, kubeconfig, dir);
    const reloadTo = async (data: Record<string, string>): Promise<void> => {
      await writeConfigMapVolume(configDir, data);
      const result = await agent.client.reload();
      assert.ok(['applied', 'noop'].includes(result.outcome), `reload: ${JSON.stringify(result)}`);
      const expected = hashOf(configDir, data);
      await eventually(
        async () => {
          const s = await agent.status();
          return s.config.appliedHash === expected && s.ready ? s : undefined;
        },
        `config ${expected.slice(0, 19)} applied and ready`,
      );
    };
    try {
      await ready(agent);

      // 1. Discovery, then a release cleaned by a Job.
      const first = await eventually(currentPv, `PV ${pvName}`);
      assert.equal(first.spec.volumeMode, 'Block');
      await bindAndRelease(first);
      const jobName = `cleanup-${pvName}`;
      const job = await eventually(
        async () => cluster.jobs.get(jobName, { namespace: NAMESPACE }).catch(() => undefined),
        'the cleanup Job',
      );
      assert.equal(job.spec?.template.spec.containers[0]?.image, agent.jobImage);
      await markJob(adminKubeConfig(), NAMESPACE, jobName, 'succeeded');
      const second = await republished(first);
      await eventually(
        async () =>
          cluster.jobs.get(jobName, { namespace: NAMESPACE }).then(
            () => undefined,
            (err: unknown) => (isNotFound(err) ? true : undefined),
          ),
        'the Job deleted',
      );

      // 2. Hot reload to in-process cleaning (the Jobs Role stays: rbac.jobs=always), then a
      //    release: the agent looks for a cleanup Job first, then runs the cleaner itself.
      await reloadTo(configData(render(false, 'lvp-rbac: reloaded')));
      await bindAndRelease(second);
      const third = await republished(second);
      assert.equal(third.metadata.labels?.['lvp-rbac'], 'reloaded', 'the new PV follows the reloaded config');
      await eventually(async () => {
        const events = await cluster.events.list({ namespace: NAMESPACE });
        return events.items.some((e) => e.reason === 'VolumeDelete' && e.involvedObject.name === pvName)
          ? true
          : undefined;
      }, 'the VolumeDelete event of the in-process cleanup (written with the agent token)');

      // 3. Hot reload back to Job cleaning: the new generation watches Jobs, no rollback.
      await reloadTo(configData(render(true)));
      const last = await agent.status();
      assert.equal(last.rejected, undefined, `no rejected or rolled-back reload: ${JSON.stringify(last.rejected)}`);

      // 4. The status Lease, written with the chart's Role alone (get, create, update), follows the reloads.
      const leaseName = statusLeaseName(`${release}-local-static-provisioner`, nodeName);
      await eventually(async () => {
        const lease = await cluster.leases.get(leaseName, { namespace: NAMESPACE }).catch(() => undefined);
        const state = lease === undefined ? undefined : stateFromLease(lease);
        return state?.appliedHash === last.config.appliedHash ? true : undefined;
      }, `the status Lease ${leaseName} with the last applied hash`);
      await stop(agent);
    } finally {
      if (agent.child.exitCode === null && agent.child.signalCode === null) agent.child.kill('SIGKILL');
    }
    assert.deepEqual(forbiddenLogLines(agent.stderr()), [], 'no request of the agent was forbidden');
  });

  it('rbac.jobs=auto without job cleaning: switching it on by a ConfigMap edit alone is rolled back (why always is the default)', async () => {
    const autoRelease = `lvp-rbac-auto-${suffix}`;
    const chart = renderChart({
      release: autoRelease,
      namespace: NAMESPACE,
      values: `${values(false)}\nrbac: {jobs: auto}`,
    });
    const roles = rbacRolesFromManifests(chart.text);
    assert.deepEqual(
      roles.map((r) => `${r.kind}/${r.metadata?.name ?? ''}`),
      [
        `ClusterRole/${autoRelease}-local-static-provisioner-node-clusterrole`,
        `Role/${autoRelease}-local-static-provisioner-status-role`,
      ],
      'no Jobs Role',
    );
    const autoAccess = await tokenForServiceAccount(
      adminKubeConfig(),
      NAMESPACE,
      chart.one('ServiceAccount').metadata.name,
      ...roles,
    );
    const dir = join(root, 'auto');
    const configDir = join(dir, 'config');
    const kubeconfig = join(dir, 'agent.kubeconfig');
    mkdirSync(dir);
    writeKubeconfig(kubeconfig, autoAccess.token);
    const initial = configData(chart);
    await writeConfigMapVolume(configDir, initial);
    const agent = startAgent(chart, kubeconfig, dir, ['--start-timeout=2s']);
    try {
      await ready(agent);
      await writeConfigMapVolume(configDir, { ...initial, useJobForCleaning: 'yes' });
      const result = await agent.client.reload();
      const rolledBack =
        result.outcome === 'rolled-back'
          ? result
          : (
              await eventually(async () => {
                const s = await agent.status();
                return s.rejected?.outcome === 'rolled-back' ? s : undefined;
              }, 'the rollback')
            ).rejected;
      assert.match(rolledBack?.error ?? '', /jobs.*forbidden/iu);
      await eventually(async () => {
        const s = await agent.status();
        return s.ready && s.config.appliedHash === hashOf(configDir, initial) ? true : undefined;
      }, 'the previous config serving again');
      await stop(agent);
    } finally {
      if (agent.child.exitCode === null && agent.child.signalCode === null) agent.child.kill('SIGKILL');
      await autoAccess.cleanup();
    }
  });

  it('the log check would see a denial (self-test)', () => {
    assert.equal(
      forbiddenLogLines(
        [
          '{"level":"info","msg":"pass","durationMs":403}',
          '{"level":"warn","msg":"could not record event","error":"events is forbidden: User cannot create"}',
          '{"level":"error","msg":"x","status":403}',
          'plain text: 403 Forbidden',
        ].join('\n'),
      ).length,
      3,
    );
  });
});
