// The claim lifecycle end to end with Kubernetes' own controllers: a control plane of this file's
// own with the real kube-controller-manager (PV binder, pv- and pvc-protection, Job, garbage
// collector, StatefulSet) and kube-scheduler, `provisioner run` as a process per node on real
// mounts and loop devices. The test plays only the kubelet: it registers Ready Nodes, reports the
// phase of cleanup pods, and finishes the deletion of pods (test/support/kubelet.ts).
//
// Lint: client-node's models are plain data classes; object literals are what its API takes.
/* eslint-disable @typescript-eslint/no-unsafe-class-instance-assignment */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import {
  AppsV1Api,
  BatchV1Api,
  CoreV1Api,
  StorageV1Api,
  type KubeConfig,
  type V1Job,
  type V1PersistentVolume,
  type V1PersistentVolumeClaim,
  type V1Pod,
} from '@kubernetes/client-node';

import { AdminClient } from '../../../src/core/agent/admin-client.js';
import { persistentVolumeName } from '../../../src/core/pv/naming.js';
import { CLI, REPO_ROOT } from '../../support/cli.js';
import { apiStatusCode, recordWatch } from '../../support/cluster.js';
import { startControlPlane, type ControlPlane } from '../../support/control-plane.js';
import { eventually } from '../../support/eventually.js';
import { passesFromNow } from '../../support/passes.js';
import { registerNode, reportPod, runKubelet } from '../../support/kubelet.js';
import {
  attachLoopDevice,
  Cleanup,
  makeTempDir,
  mountTmpfs,
  readAt,
  skipUnlessRoot,
  writeAt,
} from '../../support/real-node.js';
import { kubeBinDir, tokenKubeConfig } from '../../support/test-cluster.js';

const MiB = 2 ** 20;
const NS = 'default';
/** Scheduling, binding and the controllers' resyncs take seconds on 2 busy cores. */
const SLOW = 90_000;
const NODE_A = 'node-a';
const NODE_B = 'node-b';
/** No agent: only reachable through the extra selector term of node-a's `shared` class. */
const NODE_C = 'node-c';
/** Its agent cleans Block volumes by Job. */
const NODE_J = 'node-j';
const SHARED_LABEL = 'lvp-e2e/shared-disk';
const JOB_IMAGE = 'registry.example/lvp-cleaner:e2e';

/** The object, or undefined when the API says 404 (not created yet, or gone). */
async function notFoundAsUndefined<T>(read: Promise<T>): Promise<T | undefined> {
  return read.catch((error: unknown) => {
    if (apiStatusCode(error) === 404) return undefined;
    throw error;
  });
}

interface RunningAgent {
  readonly node: string;
  readonly child: ChildProcess;
  readonly exited: Promise<number | null>;
  stderr(): string;
}

describe(
  'the claim lifecycle with the real kube-controller-manager and kube-scheduler',
  { skip: skipUnlessRoot() },
  () => {
    const cleanup = new Cleanup();
    const kubeletStop = new AbortController();
    const agents: RunningAgent[] = [];
    let plane: ControlPlane | undefined;
    let kc: KubeConfig;
    let core: CoreV1Api;
    let root = '';
    /** Every Block cleanup run in-process appends the device to this file (then zeroes the device). */
    let cleanedLog = '';

    const classDir = (node: string, className: string): string => join(root, node, className);

    function startAgent(node: string, files: Record<string, string>, env: Record<string, string> = {}): RunningAgent {
      const configDir = join(root, `config-${node}`);
      mkdirSync(configDir);
      for (const [name, text] of Object.entries(files)) writeFileSync(join(configDir, name), text);
      const child = spawn(
        process.execPath,
        [
          CLI,
          'run',
          '--config-dir',
          configDir,
          '--listen-address',
          '127.0.0.1:0',
          '--discovery-period',
          '300ms',
          '--admin-socket',
          join(root, `admin-${node}.sock`),
        ],
        {
          env: {
            PATH: process.env['PATH'] ?? '/usr/bin:/bin',
            MY_NODE_NAME: node,
            MY_NAMESPACE: NS,
            KUBECONFIG: plane?.kubeconfigPath ?? '',
            ...env,
          },
          stdio: ['ignore', 'ignore', 'pipe'],
        },
      );
      let stderr = '';
      child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
      const agent: RunningAgent = {
        node,
        child,
        exited: new Promise((resolve) => child.on('exit', resolve)),
        stderr: () => stderr,
      };
      agents.push(agent);
      return agent;
    }

    /** The admin API of the agent started for node (its status tells its discovery passes). */
    const adminOf = (node: string): AdminClient =>
      new AdminClient(join(root, `admin-${node}.sock`), { timeoutMs: 10_000 });

    /** A storageClassMap entry whose discovery dir is `<root>/<node>/<class>` (created here). */
    function classEntry(node: string, className: string, extra: string[] = []): string {
      const dir = classDir(node, className);
      mkdirSync(dir, { recursive: true });
      return [`${className}:`, `  hostDir: ${dir}`, `  mountDir: ${dir}`, ...extra.map((l) => `  ${l}`)].join('\n');
    }

    /** A Filesystem volume: a tmpfs of `size` mounted at `<class dir>/<entry>`. */
    function filesystemVolume(node: string, className: string, entry: string, size: number): void {
      mountTmpfs(cleanup, join(classDir(node, className), entry), size);
    }

    /** A Block volume: a loop device of `size`, linked as `<class dir>/<entry>`. */
    function blockVolume(node: string, className: string, entry: string, size: number): string {
      const loop = attachLoopDevice(cleanup, join(root, `${node}-${className}-${entry}.img`), size);
      symlinkSync(loop.path, join(classDir(node, className), entry));
      return loop.path;
    }

    async function readPv(name: string): Promise<V1PersistentVolume | undefined> {
      return notFoundAsUndefined(core.readPersistentVolume({ name }));
    }

    /** The agent's PV for an entry, once the real PV controller has made it Available. */
    async function availablePv(
      node: string,
      entry: string,
      className: string,
      notUid?: string,
    ): Promise<V1PersistentVolume> {
      const name = persistentVolumeName(entry, node, className);
      return eventually(
        async () => {
          const pv = await readPv(name);
          if (pv === undefined || pv.metadata?.deletionTimestamp !== undefined) return undefined;
          if (notUid !== undefined && pv.metadata?.uid === notUid) return undefined;
          return pv.status?.phase === 'Available' ? pv : undefined;
        },
        `PV ${name}${notUid === undefined ? '' : ' (a new one)'} Available`,
        SLOW,
      ).catch(async (error: unknown) => {
        const pv = await readPv(name);
        throw new Error(`${String(error)}; now: ${JSON.stringify(pv?.status)}\n${agentLogs()}`, { cause: error });
      });
    }

    async function createClaim(
      name: string,
      className: string,
      size: string,
      volumeMode: 'Filesystem' | 'Block' = 'Filesystem',
    ): Promise<V1PersistentVolumeClaim> {
      return core.createNamespacedPersistentVolumeClaim({
        namespace: NS,
        body: {
          metadata: { name },
          spec: {
            storageClassName: className,
            accessModes: ['ReadWriteOnce'],
            volumeMode,
            resources: { requests: { storage: size } },
          },
        },
      });
    }

    async function createPod(
      name: string,
      claim: string,
      options: { node?: string; block?: boolean } = {},
    ): Promise<V1Pod> {
      return core.createNamespacedPod({
        namespace: NS,
        body: {
          metadata: { name },
          spec: {
            containers: [
              {
                name: 'app',
                image: 'registry.example/app:e2e',
                ...(options.block === true
                  ? { volumeDevices: [{ name: 'data', devicePath: '/dev/data' }] }
                  : { volumeMounts: [{ name: 'data', mountPath: '/data' }] }),
              },
            ],
            volumes: [{ name: 'data', persistentVolumeClaim: { claimName: claim } }],
            ...(options.node === undefined ? {} : { nodeSelector: { 'kubernetes.io/hostname': options.node } }),
          },
        },
      });
    }

    /** The node the real scheduler bound the pod to. */
    async function scheduledNode(pod: string): Promise<string> {
      return eventually(
        async () => (await notFoundAsUndefined(core.readNamespacedPod({ namespace: NS, name: pod })))?.spec?.nodeName,
        `pod ${pod} scheduled`,
        SLOW,
      ).catch(async (error: unknown) => {
        const status = (await notFoundAsUndefined(core.readNamespacedPod({ namespace: NS, name: pod })))?.status;
        throw new Error(
          `${String(error)}; conditions: ${JSON.stringify(status?.conditions)}\n${componentLog('kube-scheduler')}`,
          { cause: error },
        );
      });
    }

    /** The claim once the real PV controller has bound it. */
    async function boundClaim(claim: string): Promise<V1PersistentVolumeClaim> {
      return eventually(
        async () => {
          // A StatefulSet's claim may not exist yet.
          const pvc = await notFoundAsUndefined(
            core.readNamespacedPersistentVolumeClaim({ namespace: NS, name: claim }),
          );
          return pvc?.status?.phase === 'Bound' ? pvc : undefined;
        },
        `claim ${claim} Bound`,
        SLOW,
      );
    }

    async function gone(what: string, read: () => Promise<unknown>): Promise<void> {
      await eventually(
        async () =>
          read().then(
            () => undefined,
            (error: unknown) => (apiStatusCode(error) === 404 ? true : undefined),
          ),
        `${what} gone`,
        SLOW,
      );
    }

    /** Deletes a pod (its kubelet, played by runKubelet, finishes it) and then its claim. */
    async function deletePodAndClaim(pod: string, claim: string): Promise<void> {
      await core.deleteNamespacedPod({ namespace: NS, name: pod });
      await core.deleteNamespacedPersistentVolumeClaim({ namespace: NS, name: claim });
      await gone(`pod ${pod}`, () => core.readNamespacedPod({ namespace: NS, name: pod }));
      await gone(`claim ${claim}`, () => core.readNamespacedPersistentVolumeClaim({ namespace: NS, name: claim }));
    }

    function cleanedDevices(): string[] {
      return existsSync(cleanedLog) ? readFileSync(cleanedLog, 'utf8').trim().split('\n').filter(Boolean) : [];
    }

    before(async () => {
      plane = await startControlPlane({ binDir: kubeBinDir(), controllers: true });
      kc = tokenKubeConfig(plane.server, plane.caFile, plane.adminToken, 'lvp-test-admin');
      core = kc.makeApiClient(CoreV1Api);
      root = makeTempDir(cleanup, 'lvp-e2e-');
      cleanedLog = join(root, 'cleaned.log');
      const cleaner = join(root, 'counting-cleaner.sh');
      writeFileSync(
        cleaner,
        `#!/bin/sh\necho "$LOCAL_PV_BLKDEVICE" >> ${cleanedLog}\nexec ${join(REPO_ROOT, 'cleaners/dd_zero.sh')}\n`,
      );
      chmodSync(cleaner, 0o755);

      await registerNode(kc, NODE_A);
      await registerNode(kc, NODE_B);
      await registerNode(kc, NODE_C, { [SHARED_LABEL]: 'yes' });
      await registerNode(kc, NODE_J);
      void runKubelet(kc, new Set([NODE_A, NODE_B, NODE_C, NODE_J]), kubeletStop.signal);

      const storage = kc.makeApiClient(StorageV1Api);
      for (const name of ['fast', 'shared', 'blk', 'jblk', 'sts']) {
        await storage.createStorageClass({
          body: {
            metadata: { name },
            provisioner: 'kubernetes.io/no-provisioner',
            volumeBindingMode: 'WaitForFirstConsumer',
            reclaimPolicy: 'Delete',
          },
        });
      }

      startAgent(NODE_A, {
        storageClassMap: [
          classEntry(NODE_A, 'fast'),
          classEntry(NODE_A, 'shared', [
            'selector:',
            '  - matchExpressions:',
            `      - {key: ${SHARED_LABEL}, operator: In, values: ["yes"]}`,
          ]),
          classEntry(NODE_A, 'blk', ['volumeMode: Block', `blockCleanerCommand: ["${cleaner}"]`]),
          classEntry(NODE_A, 'sts'),
        ].join('\n'),
      });
      startAgent(NODE_B, { storageClassMap: [classEntry(NODE_B, 'fast'), classEntry(NODE_B, 'sts')].join('\n') });
      startAgent(
        NODE_J,
        { storageClassMap: classEntry(NODE_J, 'jblk', ['volumeMode: Block']), useJobForCleaning: 'yes' },
        { JOB_CONTAINER_IMAGE: JOB_IMAGE },
      );
    });

    after(async () => {
      kubeletStop.abort();
      try {
        for (const agent of agents) {
          if (agent.child.exitCode === null && agent.child.signalCode === null) agent.child.kill('SIGTERM');
        }
        for (const agent of agents) {
          const code = await Promise.race([agent.exited, delay(15_000, 'timeout' as const)]);
          if (code === 'timeout') {
            agent.child.kill('SIGKILL');
            await agent.exited;
          }
        }
      } finally {
        try {
          await plane?.stop();
        } finally {
          cleanup.run();
        }
      }
    });

    /** The tail of a control-plane component's log, for a failure message. */
    function componentLog(component: string): string {
      const file = join(plane?.dir ?? '', `${component}.log`);
      return existsSync(file)
        ? `--- ${component}:\n${readFileSync(file, 'utf8').split('\n').slice(-20).join('\n')}`
        : '';
    }

    /** On failure, the agents' logs say what they saw. */
    function agentLogs(): string {
      return agents.map((a) => `--- ${a.node}:\n${a.stderr().split('\n').slice(-15).join('\n')}`).join('\n');
    }

    it('WaitForFirstConsumer: the scheduler places each pod on a node whose local PV fits, the binder binds it, no other node’s PV is chosen', async () => {
      filesystemVolume(NODE_A, 'fast', 'big', 16 * MiB);
      filesystemVolume(NODE_A, 'fast', 'small', 4 * MiB);
      filesystemVolume(NODE_B, 'fast', 'mid', 8 * MiB);
      filesystemVolume(NODE_A, 'shared', 'disk', 8 * MiB);
      const big = await availablePv(NODE_A, 'big', 'fast');
      const small = await availablePv(NODE_A, 'small', 'fast');
      const mid = await availablePv(NODE_B, 'mid', 'fast');
      const shared = await availablePv(NODE_A, 'disk', 'shared');
      assert.deepEqual(
        JSON.parse(JSON.stringify(shared.spec?.nodeAffinity?.required?.nodeSelectorTerms)),
        [
          { matchExpressions: [{ key: 'kubernetes.io/hostname', operator: 'In', values: [NODE_A] }] },
          { matchExpressions: [{ key: SHARED_LABEL, operator: 'In', values: ['yes'] }] },
        ],
        'the hostname term ORed with the class selector',
      );

      // Only node-a has a `fast` PV of 12 MiB or more.
      await createClaim('wide', 'fast', '12Mi');
      // The PV controller has looked at the claim and decided to wait: its Event says so.
      await eventually(
        async () => {
          const events = await core.listNamespacedEvent({
            namespace: NS,
            fieldSelector: 'involvedObject.name=wide,reason=WaitForFirstConsumer',
          });
          return events.items.length > 0 ? true : undefined;
        },
        'the WaitForFirstConsumer Event of claim wide',
        SLOW,
      );
      const waiting = await core.readNamespacedPersistentVolumeClaim({ namespace: NS, name: 'wide' });
      assert.equal(waiting.status?.phase, 'Pending', 'WaitForFirstConsumer: no binding before a pod uses the claim');
      assert.equal(waiting.spec?.volumeName, undefined);
      await createPod('wide', 'wide');
      assert.equal(await scheduledNode('wide'), NODE_A, agentLogs());
      assert.equal((await boundClaim('wide')).spec?.volumeName, big.metadata?.name);

      // Pinned to node-b: node-b's PV, although node-a's 4 MiB PV is the smallest that fits.
      await createClaim('pinned', 'fast', '2Mi');
      await createPod('pinned', 'pinned', { node: NODE_B });
      assert.equal(await scheduledNode('pinned'), NODE_B);
      assert.equal((await boundClaim('pinned')).spec?.volumeName, mid.metadata?.name);

      // node-c has no agent and no PV of its own: the extra selector term makes node-a's shared disk usable there.
      await createClaim('elsewhere', 'shared', '1Mi');
      await createPod('elsewhere', 'elsewhere', { node: NODE_C });
      assert.equal(await scheduledNode('elsewhere'), NODE_C);
      assert.equal((await boundClaim('elsewhere')).spec?.volumeName, shared.metadata?.name);

      const bigNow = await readPv(big.metadata?.name ?? '');
      assert.equal(bigNow?.status?.phase, 'Bound');
      assert.equal(bigNow.spec?.claimRef?.name, 'wide');
      assert.equal(bigNow.spec.claimRef.uid, waiting.metadata?.uid);
      assert.equal(
        (await readPv(small.metadata?.name ?? ''))?.status?.phase,
        'Available',
        'node-a’s small PV untouched',
      );
    });

    it('delete the pod and the claim: the controller releases the PV, the agent cleans it once and republishes it, a new claim binds the fresh PV', async () => {
      const device = blockVolume(NODE_A, 'blk', 'nvme-1', 16 * MiB);
      const first = await availablePv(NODE_A, 'nvme-1', 'blk');
      const name = first.metadata?.name ?? '';
      assert.ok(first.metadata?.finalizers?.includes('kubernetes.io/pv-protection'), 'the admission plugin added it');
      const watch = await recordWatch(kc, '/api/v1/persistentvolumes', {
        fieldSelector: `metadata.name=${name}`,
        resourceVersion: first.metadata?.resourceVersion,
      });
      try {
        await createClaim('tenant-1', 'blk', '8Mi', 'Block');
        await createPod('tenant-1', 'tenant-1', { block: true });
        assert.equal(await scheduledNode('tenant-1'), NODE_A);
        const claim = await boundClaim('tenant-1');
        assert.equal(claim.spec?.volumeName, name);
        const secret = Buffer.from('TENANT-1-DATA-'.repeat(64));
        writeAt(device, 0, secret);

        await deletePodAndClaim('tenant-1', 'tenant-1');
        const fresh = await availablePv(NODE_A, 'nvme-1', 'blk', first.metadata?.uid);
        const pvOf = (e: { object: unknown }): V1PersistentVolume => e.object as V1PersistentVolume;
        const released = await watch.waitFor((e) => pvOf(e).status?.phase === 'Released');
        assert.equal(pvOf(released).metadata?.uid, first.metadata?.uid);
        assert.equal(pvOf(released).spec?.claimRef?.uid, claim.metadata?.uid, 'claimRef kept on release');
        assert.ok(
          pvOf(released).metadata?.managedFields?.some(
            (f) => f.manager === 'kube-controller-manager' && f.subresource === 'status',
          ),
          'the phase was written by kube-controller-manager',
        );
        await watch.waitFor((e) => e.type === 'DELETED' && pvOf(e).metadata?.uid === first.metadata?.uid);
        // The cleaner is given the device node the entry resolved to, not the entry's link.
        assert.deepEqual(cleanedDevices(), [device], 'cleaned exactly once, on its own device');
        assert.ok(
          readAt(device, 0, secret.length).equals(Buffer.alloc(secret.length)),
          'the old tenant’s data is gone',
        );
        assert.equal(fresh.spec?.claimRef, undefined);

        await passesFromNow(() => adminOf(NODE_A).status());
        assert.equal(cleanedDevices().length, 1, 'still cleaned only once');

        await createClaim('tenant-2', 'blk', '8Mi', 'Block');
        await createPod('tenant-2', 'tenant-2', { block: true });
        assert.equal(await scheduledNode('tenant-2'), NODE_A);
        const second = await boundClaim('tenant-2');
        assert.equal(second.spec?.volumeName, name);
        const bound = await readPv(name);
        assert.equal(bound?.metadata?.uid, fresh.metadata?.uid, 'the fresh PV, not the deleted one');
        assert.equal(bound?.spec?.claimRef?.uid, second.metadata?.uid);
      } finally {
        watch.stop();
      }
    });

    it('job cleaning: the Job controller runs the cleanup pod; the PV is deleted only after it succeeded; a failed Job backs off', async () => {
      blockVolume(NODE_J, 'jblk', 'nvme-j', 8 * MiB);
      const batch = kc.makeApiClient(BatchV1Api);
      const jobName = `cleanup-${persistentVolumeName('nvme-j', NODE_J, 'jblk')}`;
      const readJob = async (): Promise<V1Job | undefined> =>
        notFoundAsUndefined(batch.readNamespacedJob({ namespace: NS, name: jobName }));
      /** The pod the real Job controller made for the Job of this uid, once the scheduler placed it. */
      const cleanupPod = async (jobUid: string): Promise<V1Pod> =>
        eventually(
          async () => {
            const pods = await core.listNamespacedPod({
              namespace: NS,
              labelSelector: `batch.kubernetes.io/controller-uid=${jobUid}`,
            });
            return pods.items.find(
              (p) => p.spec?.nodeName !== undefined && p.metadata?.deletionTimestamp === undefined,
            );
          },
          `the cleanup pod of Job ${jobUid} scheduled`,
          SLOW,
        );
      const useAndRelease = async (claim: string): Promise<V1PersistentVolume> => {
        const pv = await availablePv(NODE_J, 'nvme-j', 'jblk');
        await createClaim(claim, 'jblk', '4Mi', 'Block');
        await createPod(claim, claim, { block: true });
        assert.equal(await scheduledNode(claim), NODE_J);
        assert.equal((await boundClaim(claim)).spec?.volumeName, pv.metadata?.name);
        await deletePodAndClaim(claim, claim);
        return pv;
      };
      const jobOf = async (notUid?: string): Promise<V1Job> =>
        eventually(
          async () => {
            const job = await readJob();
            return job !== undefined && job.metadata?.uid !== notUid && job.metadata?.deletionTimestamp === undefined
              ? job
              : undefined;
          },
          'the cleanup Job',
          SLOW,
        );

      // 1. Success. resourceVersions here are etcd revisions, one counter for all objects: they order
      //    the Job's and the PV's changes.
      const first = await useAndRelease('job-tenant-1');
      const job = await jobOf();
      assert.equal(job.metadata?.labels?.['pvuuid'], first.metadata?.uid);
      const pvName = first.metadata?.name ?? '';
      const jobWatch = await recordWatch(kc, `/apis/batch/v1/namespaces/${NS}/jobs`, {
        fieldSelector: `metadata.name=${jobName}`,
        resourceVersion: job.metadata?.resourceVersion,
      });
      const pvWatch = await recordWatch(kc, '/api/v1/persistentvolumes', {
        fieldSelector: `metadata.name=${pvName}`,
        resourceVersion: job.metadata?.resourceVersion,
      });
      let second: V1PersistentVolume;
      try {
        const pod = await cleanupPod(job.metadata?.uid ?? '');
        assert.equal(pod.spec?.nodeName, NODE_J, 'the scheduler followed the Job’s node selector');
        assert.equal(pod.spec.containers[0]?.image, JOB_IMAGE);
        await passesFromNow(() => adminOf(NODE_J).status());
        assert.equal((await readPv(pvName))?.metadata?.uid, first.metadata?.uid, 'PV kept while the Job runs');
        await reportPod(kc, NS, pod.metadata?.name ?? '', { phase: 'Succeeded' });
        second = await availablePv(NODE_J, 'nvme-j', 'jblk', first.metadata?.uid);
        const rv = (e: { object: unknown }): number =>
          Number((e.object as { metadata?: { resourceVersion?: string } }).metadata?.resourceVersion);
        const complete = await jobWatch.waitFor((e) =>
          ((e.object as V1Job).status?.conditions ?? []).some((c) => c.type === 'Complete' && c.status === 'True'),
        );
        assert.ok(
          (complete.object as V1Job).metadata?.managedFields?.some(
            (f) => f.manager === 'kube-controller-manager' && f.subresource === 'status',
          ),
          'the Job status was written by the Job controller',
        );
        const deleting = await pvWatch.waitFor(
          (e) => (e.object as V1PersistentVolume).metadata?.deletionTimestamp !== undefined,
        );
        assert.ok(rv(deleting) > rv(complete), 'the PV was deleted only after the Job completed');
        await jobWatch.waitFor((e) => e.type === 'DELETED', SLOW);
      } finally {
        jobWatch.stop();
        pvWatch.stop();
      }

      // 2. The container keeps failing (OnFailure: restarted in place) until the Job's backoffLimit: the Job fails.
      await useAndRelease('job-tenant-2');
      const failing = await jobOf(job.metadata?.uid);
      assert.equal(failing.metadata?.labels?.['pvuuid'], second.metadata?.uid);
      const failingPod = await cleanupPod(failing.metadata?.uid ?? '');
      await reportPod(kc, NS, failingPod.metadata?.name ?? '', {
        phase: 'CrashLooping',
        restarts: failing.spec?.backoffLimit ?? 6,
      });
      const failed = await eventually(
        async () => {
          const j = await readJob();
          return j !== undefined &&
            j.metadata?.uid === failing.metadata?.uid &&
            j.status?.conditions?.some((c) => c.type === 'Failed' && c.status === 'True') === true
            ? j
            : undefined;
        },
        'the Job Failed (BackoffLimitExceeded, set by the Job controller)',
        SLOW,
      );
      const failedAt = failed.status?.conditions?.find((c) => c.type === 'Failed')?.lastTransitionTime;
      assert.equal(failed.status?.conditions?.find((c) => c.type === 'Failed')?.reason, 'BackoffLimitExceeded');
      // The agent's backoff (5 s at first): the PV is kept, and the next Job comes only after it.
      const retry = await jobOf(failing.metadata?.uid);
      assert.equal(
        (await readPv(second.metadata?.name ?? ''))?.metadata?.uid,
        second.metadata?.uid,
        'PV kept after the failure',
      );
      assert.ok(failedAt !== undefined && retry.metadata?.creationTimestamp !== undefined);
      const waited = retry.metadata.creationTimestamp.getTime() - failedAt.getTime();
      assert.ok(waited >= 3000, `the retry Job waited for the backoff (${waited} ms after the failure)`);
      const events = await core.listNamespacedEvent({
        namespace: NS,
        fieldSelector: `involvedObject.name=${second.metadata?.name ?? ''}`,
      });
      assert.ok(
        events.items.some((e) => e.reason === 'VolumeFailedDelete'),
        `a VolumeFailedDelete event: ${events.items.map((e) => e.reason).join(', ')}`,
      );
      await reportPod(kc, NS, (await cleanupPod(retry.metadata.uid ?? '')).metadata?.name ?? '', {
        phase: 'Succeeded',
      });
      await availablePv(NODE_J, 'nvme-j', 'jblk', second.metadata?.uid);
    });

    it('a StatefulSet with volumeClaimTemplates across two nodes gets a local PV on each', async () => {
      filesystemVolume(NODE_A, 'sts', 'v1', 8 * MiB);
      filesystemVolume(NODE_B, 'sts', 'v1', 8 * MiB);
      const onA = await availablePv(NODE_A, 'v1', 'sts');
      const onB = await availablePv(NODE_B, 'v1', 'sts');
      const apps = kc.makeApiClient(AppsV1Api);
      await apps.createNamespacedStatefulSet({
        namespace: NS,
        body: {
          metadata: { name: 'db' },
          spec: {
            serviceName: 'db',
            replicas: 2,
            podManagementPolicy: 'Parallel',
            selector: { matchLabels: { app: 'db' } },
            template: {
              metadata: { labels: { app: 'db' } },
              spec: {
                affinity: {
                  podAntiAffinity: {
                    requiredDuringSchedulingIgnoredDuringExecution: [
                      { labelSelector: { matchLabels: { app: 'db' } }, topologyKey: 'kubernetes.io/hostname' },
                    ],
                  },
                },
                containers: [
                  {
                    name: 'db',
                    image: 'registry.example/db:e2e',
                    volumeMounts: [{ name: 'data', mountPath: '/data' }],
                  },
                ],
              },
            },
            volumeClaimTemplates: [
              {
                metadata: { name: 'data' },
                spec: {
                  storageClassName: 'sts',
                  accessModes: ['ReadWriteOnce'],
                  resources: { requests: { storage: '4Mi' } },
                },
              },
            ],
          },
        },
      });
      const placed = new Map<string, string>();
      for (const ordinal of [0, 1]) {
        const node = await scheduledNode(`db-${ordinal}`);
        const claim = await boundClaim(`data-db-${ordinal}`);
        placed.set(node, claim.spec?.volumeName ?? '');
      }
      assert.deepEqual(
        new Map([...placed].sort()),
        new Map([
          [NODE_A, onA.metadata?.name ?? ''],
          [NODE_B, onB.metadata?.name ?? ''],
        ]),
        'one replica per node, each on the PV of its own node',
      );
    });
  },
);
