// The product as users run it, for tests that drive it for a while: a control plane with the real
// scheduler and controllers, a real kubelet node (kubelet-node.ts) with the image scripts/build-image.sh
// built, a TCP proxy on the node IP in front of the apiserver (the agent's way to it; a test can cut,
// black-hole or slow it), and the chart installed with the values a test gives. Helpers for what
// such a test does all the time: find the agent pod, wait for a PV or the status Lease, edit the
// ConfigMap, run a claim through a StatefulSet, release it.
//
// Why the proxy: the test apiserver listens on 127.0.0.1 only and there is no kube-proxy, so the
// `kubernetes` Service's ClusterIP leads nowhere. The agent gets a kubeconfig (the chart's
// `kubeConfigEnv`, a ConfigMap through `additionalVolumes`) naming the proxy, the serving
// certificate's name `kubernetes.default.svc`, and the pod's projected token and CA files.
//
// Lint: client-node's models are plain data classes; object literals are what its API takes.
/* eslint-disable @typescript-eslint/no-unsafe-class-instance-assignment */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  AppsV1Api,
  BatchV1Api,
  CoordinationV1Api,
  CoreV1Api,
  StorageV1Api,
  type KubeConfig,
  type V1PersistentVolume,
  type V1Pod,
  type V1StatefulSet,
} from '@kubernetes/client-node';

import { startControlPlane, type ControlPlane } from './control-plane.js';
import { eventually } from './eventually.js';
import { CHART_DIR, runHelm } from './helm.js';
import { builtImage } from './image.js';
import {
  KUBELET_ADDRESS_FLAG,
  planeKubeConfig,
  startExtraControllerManager,
  startKubeletNode,
  type ExtraControllerManager,
  type KubeletNode,
  type StartKubeletNodeOptions,
} from './kubelet-node.js';
import { isReady, podGone } from './node-pods.js';
import { bindMount, makeTempDir, run, type Cleanup } from './real-node.js';
import { TcpProxy } from './tcp-proxy.js';
import { kubeBinDir } from './test-cluster.js';

export const CHART_NS = 'lvp';
export const CHART_RELEASE = 'lvp';
/** fullnameOverride: the ConfigMap is lvp-config, the status Lease lvp-<node>. */
export const CHART_FULLNAME = 'lvp';
/** The status Lease's annotation prefix. */
export const STATE = 'local-static-provisioner/';
const SA_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';
const SLOW = 120_000;

/** testbox arguments: each step a space-separated string (`'write /data/x hi', 'sleep'`). */
export const box = (...steps: readonly string[]): string[] =>
  steps.flatMap((step, i) => [...(i > 0 ? ['--'] : []), ...step.split(' ')]);

export interface ChartNodeOptions {
  readonly cleanup: Cleanup;
  /** Prefix of the shared discovery base directory. */
  readonly prefix: string;
  readonly kubelet?: Pick<StartKubeletNodeOptions, 'kubeletConfig' | 'syncFrequency'>;
}

/** Everything started, and the helpers; stop() in the test's `after`. */
export class ChartNode {
  readonly core: CoreV1Api;
  readonly apps: AppsV1Api;
  readonly batch: BatchV1Api;
  readonly leases: CoordinationV1Api;
  readonly storage: StorageV1Api;
  readonly image: string;

  private constructor(
    readonly plane: ControlPlane,
    readonly extraControllers: ExtraControllerManager,
    readonly node: KubeletNode,
    readonly proxy: TcpProxy,
    readonly kc: KubeConfig,
    /** A shared (rshared) mount the discovery directories live under. */
    readonly base: string,
    image: string,
  ) {
    this.core = kc.makeApiClient(CoreV1Api);
    this.apps = kc.makeApiClient(AppsV1Api);
    this.batch = kc.makeApiClient(BatchV1Api);
    this.leases = kc.makeApiClient(CoordinationV1Api);
    this.storage = kc.makeApiClient(StorageV1Api);
    this.image = image;
  }

  /**
   * Starts the plane, the node, the proxy, the namespace and the agent's kubeconfig; the chart is
   * installed by install(). On a failure what started is stopped.
   */
  static async start(options: ChartNodeOptions): Promise<ChartNode> {
    const built = builtImage();
    const binDir = kubeBinDir();
    // Discovery dirs on a shared mount: the kubelet bind-mounts each hostDir into the agent's
    // container `rslave`, which only carries later host mounts when the source is shared.
    const base = makeTempDir(options.cleanup, options.prefix);
    bindMount(options.cleanup, base, base);
    run('mount', ['--make-rshared', base]);
    const plane = await startControlPlane({
      binDir,
      controllers: true,
      serviceAccountAdmission: true,
      extraApiserverArgs: [KUBELET_ADDRESS_FLAG],
    });
    const parts: { stop(): Promise<void> | void }[] = [plane];
    try {
      const extra = await startExtraControllerManager({
        plane,
        binDir,
        // What a pod with ServiceAccount admission needs: the `default` ServiceAccount and the
        // kube-root-ca.crt ConfigMap of its namespace.
        controllers: ['daemonset-controller', 'serviceaccount-controller', 'root-ca-certificate-publisher-controller'],
        dir: plane.dir,
        extraArgs: [`--root-ca-file=${plane.caFile}`],
      });
      parts.unshift(extra);
      const node = await startKubeletNode({
        plane,
        binDir,
        labels: { 'lvp-test/real-node': 'true' },
        ...options.kubelet,
      });
      parts.unshift(node);
      const refs = node.importImage(built.archive, built.image);
      if (!refs.includes(built.image)) throw new Error(`${built.image} not imported: ${refs.join(', ')}`);
      const proxy = await TcpProxy.start(plane.server, node.nodeIP);
      parts.unshift({ stop: () => proxy.close() });
      const env = new ChartNode(plane, extra, node, proxy, planeKubeConfig(plane), base, built.image);
      await env.prepareNamespace();
      return env;
    } catch (error) {
      for (const part of parts) await Promise.resolve(part.stop()).catch(() => undefined);
      throw error;
    }
  }

  private async prepareNamespace(): Promise<void> {
    await this.core.createNamespace({ body: { metadata: { name: CHART_NS } } });
    await eventually(
      async () => {
        const sa = await this.core
          .readNamespacedServiceAccount({ name: 'default', namespace: CHART_NS })
          .catch(() => undefined);
        const ca = await this.core
          .readNamespacedConfigMap({ name: 'kube-root-ca.crt', namespace: CHART_NS })
          .catch(() => undefined);
        return sa !== undefined && ca !== undefined ? true : undefined;
      },
      `namespace ${CHART_NS}: the default ServiceAccount and kube-root-ca.crt`,
      SLOW,
      200,
    );
    const agentKubeconfig = {
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [
        {
          name: 'test-plane',
          cluster: {
            server: this.proxy.url,
            'certificate-authority': `${SA_DIR}/ca.crt`,
            'tls-server-name': 'kubernetes.default.svc',
          },
        },
      ],
      users: [{ name: 'pod-service-account', user: { tokenFile: `${SA_DIR}/token` } }],
      contexts: [
        { name: 'in-pod', context: { cluster: 'test-plane', user: 'pod-service-account', namespace: CHART_NS } },
      ],
      'current-context': 'in-pod',
    };
    await this.core.createNamespacedConfigMap({
      namespace: CHART_NS,
      body: { metadata: { name: 'agent-kubeconfig' }, data: { kubeconfig: JSON.stringify(agentKubeconfig) } },
    });
  }

  /** The values every install needs (image, the kubeconfig through the proxy), merged with `values`. */
  valuesWith(values: Readonly<Record<string, unknown>>): Record<string, unknown> {
    return {
      fullnameOverride: CHART_FULLNAME,
      image: this.image,
      imagePullPolicy: 'Never',
      kubeConfigEnv: '/etc/agent-kubeconfig/kubeconfig',
      additionalVolumes: [{ name: 'agent-kubeconfig', configMap: { name: 'agent-kubeconfig' } }],
      additionalVolumeMounts: [{ name: 'agent-kubeconfig', mountPath: '/etc/agent-kubeconfig', readOnly: true }],
      ...values,
    };
  }

  /** `helm install` (or `upgrade` with `--reuse-values` and `set`), failing with helm's stderr. */
  helm(verb: 'install' | 'upgrade', values: Readonly<Record<string, unknown>>, set: readonly string[] = []): void {
    const file = join(this.base, `values-${String(Date.now())}.yaml`);
    writeFileSync(file, JSON.stringify(values));
    const reuse = verb === 'upgrade' ? ['--reuse-values'] : [];
    const result = runHelm([
      verb,
      CHART_RELEASE,
      CHART_DIR,
      '--namespace',
      CHART_NS,
      '--kubeconfig',
      this.plane.kubeconfigPath,
      '--values',
      file,
      ...reuse,
      ...set.flatMap((s) => ['--set', s]),
    ]);
    if (result.status !== 0) throw new Error(`helm ${verb}: ${result.stderr}`);
  }

  /** The agent pods (not being deleted). */
  async agentPods(): Promise<V1Pod[]> {
    const pods = await this.core.listNamespacedPod({
      namespace: CHART_NS,
      labelSelector: `app.kubernetes.io/instance=${CHART_RELEASE},app.kubernetes.io/name=local-static-provisioner`,
    });
    return pods.items.filter((p) => p.metadata?.deletionTimestamp === undefined);
  }

  async agentPod(what = 'an agent pod Ready', check: (p: V1Pod) => boolean = isReady, ms = SLOW): Promise<V1Pod> {
    return eventually(async () => (await this.agentPods()).find(check), what, ms, 200);
  }

  /** The PV of `path` for which `check` holds, waiting for it. */
  async pvAt(
    path: string,
    what: string,
    check: (pv: V1PersistentVolume) => boolean = () => true,
    ms = SLOW,
  ): Promise<V1PersistentVolume> {
    return eventually(
      async () =>
        (await this.core.listPersistentVolume()).items.find((pv) => pv.spec?.local?.path === path && check(pv)),
      `PV of ${path}: ${what}`,
      ms,
      100,
    );
  }

  /** The annotations of the node's status Lease. */
  async statusLease(): Promise<Record<string, string>> {
    const lease = await this.leases.readNamespacedLease({
      name: `${CHART_FULLNAME}-${this.node.name}`,
      namespace: CHART_NS,
    });
    // client-node leaves a MicroTime as the apiserver's string (typed Date)
    return { ...(lease.metadata?.annotations ?? {}), renewTime: String(lease.spec?.renewTime ?? '') };
  }

  async leaseWhen(
    what: string,
    check: (a: Record<string, string>) => boolean,
    ms = SLOW,
  ): Promise<Record<string, string>> {
    return eventually(
      async () => {
        const last = await this.statusLease().catch(() => undefined);
        return last !== undefined && check(last) ? last : undefined;
      },
      `status Lease: ${what}`,
      ms,
      100,
    );
  }

  /** The data of the chart's ConfigMap. */
  async configData(): Promise<Record<string, string>> {
    const cm = await this.core.readNamespacedConfigMap({ name: `${CHART_FULLNAME}-config`, namespace: CHART_NS });
    return { ...(cm.data ?? {}) };
  }

  /** Replaces the chart's ConfigMap data, as `kubectl edit` would. */
  async writeConfig(data: Readonly<Record<string, string>>): Promise<void> {
    const name = `${CHART_FULLNAME}-config`;
    const cm = await this.core.readNamespacedConfigMap({ name, namespace: CHART_NS });
    cm.data = { ...data };
    await this.core.replaceNamespacedConfigMap({ name, namespace: CHART_NS, body: cm });
  }

  /** A StatefulSet of one testbox pod with a claim of `className`. */
  statefulSet(name: string, className: string, mode: 'Filesystem' | 'Block', args: readonly string[]): V1StatefulSet {
    const volume = mode === 'Block' ? { volumeDevices: [{ name: 'data', devicePath: '/dev/xvda' }] } : {};
    const mount = mode === 'Filesystem' ? { volumeMounts: [{ name: 'data', mountPath: '/data' }] } : {};
    return {
      metadata: { name },
      spec: {
        serviceName: name,
        replicas: 1,
        selector: { matchLabels: { app: name } },
        template: {
          metadata: { labels: { app: name } },
          spec: {
            terminationGracePeriodSeconds: 1,
            containers: [
              {
                name: 'box',
                image: this.node.images.testbox,
                imagePullPolicy: 'Never',
                args: [...args],
                ...volume,
                ...mount,
              },
            ],
          },
        },
        volumeClaimTemplates: [
          {
            metadata: { name: 'data' },
            spec: {
              accessModes: ['ReadWriteOnce'],
              storageClassName: className,
              volumeMode: mode,
              resources: { requests: { storage: '1Mi' } },
            },
          },
        ],
      },
    };
  }

  /** Deletes the StatefulSet, then (once its pod is gone) its claim: the PV is released. Returns when. */
  async releaseClaim(name: string, ms = SLOW): Promise<number> {
    await this.apps.deleteNamespacedStatefulSet({ name, namespace: CHART_NS });
    await podGone(this.core, CHART_NS, `${name}-0`, ms);
    const t = Date.now();
    await this.core.deleteNamespacedPersistentVolumeClaim({ name: `data-${name}-0`, namespace: CHART_NS });
    return t;
  }

  /** The namespace's pods, Warning events and agent logs, for a failure message. */
  async namespaceReport(): Promise<string> {
    const pods = await this.core.listNamespacedPod({ namespace: CHART_NS }).catch(() => undefined);
    const events = await this.core.listNamespacedEvent({ namespace: CHART_NS }).catch(() => undefined);
    const podLines = (pods?.items ?? []).map(
      (p) =>
        `pod ${p.metadata?.name ?? '?'} ${p.status?.phase ?? '?'} ` +
        JSON.stringify((p.status?.containerStatuses ?? []).map((c) => ({ ready: c.ready, state: c.state }))),
    );
    const eventLines = (events?.items ?? [])
      .filter((e) => e.type === 'Warning')
      .slice(-15)
      .map(
        (e) =>
          `event ${e.involvedObject.kind ?? ''}/${e.involvedObject.name ?? ''} ${e.reason ?? ''}: ${e.message ?? ''}`,
      );
    const jobs = await this.batch.listNamespacedJob({ namespace: CHART_NS }).catch(() => undefined);
    const jobLines = (jobs?.items ?? []).map((j) => `job ${j.metadata?.name ?? '?'} ${JSON.stringify(j.status ?? {})}`);
    const logs: string[] = [];
    for (const p of pods?.items ?? []) {
      const labels = p.metadata?.labels ?? {};
      // the agents' pods and the cleanup Jobs' pods
      if (labels['app.kubernetes.io/instance'] !== CHART_RELEASE && labels['job-name'] === undefined) continue;
      const text = await this.core
        .readNamespacedPodLog({ name: p.metadata?.name ?? '', namespace: CHART_NS, tailLines: 40 })
        .catch((e: unknown) => `<${String(e)}>`);
      logs.push(`log of ${p.metadata?.name ?? ''}:\n${text}`);
    }
    return [...podLines, ...jobLines, ...eventLines, ...logs].join('\n');
  }

  /** Stops the proxy, the node (its pods first), the extra controllers and the plane; every step runs. */
  async stop(): Promise<void> {
    const failures: unknown[] = [];
    for (const part of [{ stop: () => this.proxy.close() }, this.node, this.extraControllers, this.plane]) {
      try {
        await part.stop();
      } catch (error) {
        failures.push(error);
      }
    }
    if (failures.length > 0) throw new AggregateError(failures, 'stopping the chart node failed');
  }
}
