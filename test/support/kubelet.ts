/**
 * The kubelet's part, for tests that run the real kube-controller-manager and kube-scheduler
 * (`startControlPlane({ controllers: true })`): no kubelet runs, so a test registers its Nodes,
 * reports the phase of the pods scheduled to them, and finishes the deletion of their pods.
 * Nothing else: binding, release, finalizers, Jobs and StatefulSets are the real controllers'.
 *
 * Lint: client-node's models are plain data classes with no instance methods, and its API takes
 * object literals for them (as all of its own examples do), so the class-instance rules do not apply.
 */
/* eslint-disable @typescript-eslint/no-unsafe-class-instance-assignment, @typescript-eslint/no-misused-spread */
import { CoreV1Api, type KubeConfig, type V1ContainerStatus, type V1Node, type V1Pod } from '@kubernetes/client-node';
import { setTimeout as delay } from 'node:timers/promises';

import { apiStatusCode, retryOnConflict } from './cluster.js';

/** What a registered Node offers the scheduler (capacity = allocatable). */
export const NODE_RESOURCES = { cpu: '4', memory: '8Gi', pods: '110' } as const;

/**
 * Registers a Node as a kubelet would: the `kubernetes.io/hostname` label (the key this agent's
 * node affinity and cleanup Jobs select on), capacity and allocatable, and a Ready condition, so
 * that the scheduler can place pods on it. No Lease is renewed: the node-lifecycle controller,
 * which would then mark it NotReady, is not among the controllers started (control-plane.ts).
 */
export async function registerNode(kc: KubeConfig, name: string, labels: Record<string, string> = {}): Promise<V1Node> {
  const core = kc.makeApiClient(CoreV1Api);
  const now = new Date();
  const status = {
    capacity: { ...NODE_RESOURCES },
    allocatable: { ...NODE_RESOURCES },
    conditions: [
      {
        type: 'Ready',
        status: 'True',
        reason: 'KubeletReady',
        message: 'kubelet is posting ready status (played by the test)',
        lastHeartbeatTime: now,
        lastTransitionTime: now,
      },
    ],
    addresses: [{ type: 'Hostname', address: name }],
  };
  await core.createNode({
    body: {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name, labels: { 'kubernetes.io/hostname': name, 'kubernetes.io/os': 'linux', ...labels } },
      status,
    },
  });
  // A create keeps the status a kubelet registers with; write it through the status subresource
  // as well so the Node is Ready whatever the create kept.
  return retryOnConflict(async () => {
    const node = await core.readNodeStatus({ name });
    node.status = { ...node.status, ...status };
    return core.replaceNodeStatus({ name, body: node });
  });
}

/** What the kubelet reports for a pod's containers. */
export type PodReport =
  | { readonly phase: 'Running' }
  | { readonly phase: 'Succeeded' }
  | { readonly phase: 'Failed'; readonly exitCode: number }
  /** restartPolicy OnFailure: the container failed `restarts` times and was restarted in place. */
  | { readonly phase: 'CrashLooping'; readonly restarts: number };

function containerStatuses(pod: V1Pod, report: PodReport, now: Date): V1ContainerStatus[] {
  return (pod.spec?.containers ?? []).map((c) => {
    const base = { name: c.name, image: c.image ?? '', imageID: '', containerID: `test://${c.name}` };
    switch (report.phase) {
      case 'Running':
        return { ...base, ready: true, started: true, restartCount: 0, state: { running: { startedAt: now } } };
      case 'Succeeded':
      case 'Failed': {
        const exitCode = report.phase === 'Succeeded' ? 0 : report.exitCode;
        const reason = exitCode === 0 ? 'Completed' : 'Error';
        return {
          ...base,
          ready: false,
          started: false,
          restartCount: 0,
          state: { terminated: { exitCode, reason, startedAt: now, finishedAt: now } },
        };
      }
      case 'CrashLooping':
        return {
          ...base,
          ready: false,
          started: false,
          restartCount: report.restarts,
          state: { waiting: { reason: 'CrashLoopBackOff', message: 'back-off restarting failed container' } },
          lastState: { terminated: { exitCode: 1, reason: 'Error', startedAt: now, finishedAt: now } },
        };
    }
  });
}

/** Reports a pod's phase and container statuses through the status subresource, as its kubelet would. */
export async function reportPod(kc: KubeConfig, namespace: string, name: string, report: PodReport): Promise<V1Pod> {
  const core = kc.makeApiClient(CoreV1Api);
  return retryOnConflict(async () => {
    const pod = await core.readNamespacedPodStatus({ namespace, name });
    const now = new Date();
    const ready = report.phase === 'Running' ? 'True' : 'False';
    pod.status = {
      ...pod.status,
      phase: report.phase === 'CrashLooping' ? 'Running' : report.phase,
      startTime: pod.status?.startTime ?? now,
      conditions: [
        { type: 'Initialized', status: 'True', lastTransitionTime: now },
        { type: 'ContainersReady', status: ready, lastTransitionTime: now },
        { type: 'Ready', status: ready, lastTransitionTime: now },
        ...(pod.status?.conditions ?? []).filter((c) => !['Initialized', 'ContainersReady', 'Ready'].includes(c.type)),
      ],
      containerStatuses: containerStatuses(pod, report, now),
    };
    return core.replaceNamespacedPodStatus({ namespace, name, body: pod });
  });
}

/**
 * Until `signal` aborts, finishes the deletion of pods on `nodes` as their kubelet would once the
 * containers are stopped: a pod with a deletionTimestamp is deleted with grace period 0 (finalizers
 * such as the Job controller's still hold it until their controller lets go).
 */
export async function runKubelet(
  kc: KubeConfig,
  nodes: ReadonlySet<string>,
  signal: AbortSignal,
  intervalMs = 100,
): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  while (!signal.aborted) {
    try {
      const pods = await core.listPodForAllNamespaces({});
      for (const pod of pods.items) {
        const { name, namespace, deletionTimestamp, uid } = pod.metadata ?? {};
        if (deletionTimestamp === undefined || name === undefined || namespace === undefined) continue;
        if (!nodes.has(pod.spec?.nodeName ?? '')) continue;
        if ((pod.metadata?.deletionGracePeriodSeconds ?? 1) === 0) continue; // already done
        await core
          .deleteNamespacedPod({
            namespace,
            name,
            gracePeriodSeconds: 0,
            body: { gracePeriodSeconds: 0, preconditions: { uid: uid ?? '' } },
          })
          .catch((error: unknown) => {
            if (apiStatusCode(error) !== 404 && apiStatusCode(error) !== 409) throw error;
          });
      }
    } catch {
      // the control plane may be going away at the end of the test
    }
    await delay(intervalMs).catch(() => undefined);
  }
}
