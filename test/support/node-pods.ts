// Pods on a real test node (test/support/kubelet-node.ts) as a user meets them: waiting for a
// state, reading logs, and `kubectl exec` (apiserver → kubelet → containerd's streaming server).
import { PassThrough } from 'node:stream';
import { finished } from 'node:stream/promises';
import { CoreV1Api, Exec, type KubeConfig, type V1Pod, type V1Status } from '@kubernetes/client-node';

import { apiStatusCode } from './cluster.js';
import { eventually } from './eventually.js';

export const POD_WAIT_MS = 90_000;

/** Every container of the pod runs (and the pod is in phase Running). */
export const isRunning = (pod: V1Pod): boolean =>
  pod.status?.phase === 'Running' &&
  (pod.status.containerStatuses ?? []).length > 0 &&
  (pod.status.containerStatuses ?? []).every((c) => c.state?.running !== undefined);

/** Running and every container passes its readiness probe. */
export const isReady = (pod: V1Pod): boolean =>
  isRunning(pod) && (pod.status?.containerStatuses ?? []).every((c) => c.ready);

/** Polls the pod until `check` holds; returns it. */
export async function podWhen(
  core: CoreV1Api,
  namespace: string,
  name: string,
  what: string,
  check: (pod: V1Pod) => boolean,
  ms = POD_WAIT_MS,
): Promise<V1Pod> {
  return eventually(
    async () => {
      const pod = await core.readNamespacedPod({ name, namespace }).catch(() => undefined);
      return pod !== undefined && check(pod) ? pod : undefined;
    },
    `pod ${namespace}/${name}: ${what}`,
    ms,
    250,
  );
}

/** Waits until the pod object is gone (the kubelet deletes it once its containers stopped). */
export async function podGone(core: CoreV1Api, namespace: string, name: string, ms = POD_WAIT_MS): Promise<void> {
  await eventually(
    async () =>
      core.readNamespacedPod({ name, namespace }).then(
        () => undefined,
        (error: unknown) => (apiStatusCode(error) === 404 ? true : undefined),
      ),
    `pod ${namespace}/${name} deleted`,
    ms,
    250,
  );
}

/** Polls the pod's log until `pattern` matches; returns the whole log. */
export async function logMatches(
  core: CoreV1Api,
  namespace: string,
  name: string,
  pattern: RegExp,
  ms = POD_WAIT_MS,
  container?: string,
): Promise<string> {
  return eventually(
    async () => {
      const text = await core
        .readNamespacedPodLog({ name, namespace, ...(container === undefined ? {} : { container }) })
        .catch(() => '');
      return pattern.test(text) ? text : undefined;
    },
    `log of ${namespace}/${name} matching ${String(pattern)}`,
    ms,
    250,
  );
}

export interface ExecResult {
  readonly stdout: string;
  readonly stderr: string;
  /** 0 on success, else the exit code the runtime reported (-1 when it gave none). */
  readonly exitCode: number;
}

function exitCodeOf(status: V1Status): number {
  if (status.status === 'Success') return 0;
  const cause = status.details?.causes?.find((c) => c.reason === 'ExitCode');
  return cause?.message === undefined ? -1 : Number(cause.message);
}

/** Runs a command in a container the way `kubectl exec` does, and collects its output. */
export async function execIn(
  kc: KubeConfig,
  namespace: string,
  pod: string,
  container: string,
  command: readonly string[],
): Promise<ExecResult> {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let out = '';
  let err = '';
  stdout.on('data', (c: Buffer) => (out += c.toString()));
  stderr.on('data', (c: Buffer) => (err += c.toString()));
  // The status frame comes after the last output frame; the output is complete once the streams,
  // ended then, have drained.
  const status = await new Promise<V1Status>((resolve, reject) => {
    new Exec(kc).exec(namespace, pod, container, [...command], stdout, stderr, null, false, resolve).catch(reject);
  });
  stdout.end();
  stderr.end();
  await Promise.all([finished(stdout), finished(stderr)]);
  return { stdout: out, stderr: err, exitCode: exitCodeOf(status) };
}
