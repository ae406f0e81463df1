// A real node: the kubelet built from the Go module proxy, containerd and runc from Debian, the
// CNI bridge plugin, registered as a Node of a control plane of this file's own that runs the real
// kube-scheduler and kube-controller-manager (plus a second controller-manager with the
// DaemonSet and Deployment controllers). Pods run images built locally by scripts/prepare-node.sh
// and are never pulled. After stop() nothing of the node may be left on the machine, and a node
// whose test process was SIGKILLed is cleaned by the next start (sweepStaleKubeletNodes).
//
// Lint: client-node's models are plain data classes; object literals are what its API takes.
/* eslint-disable @typescript-eslint/no-unsafe-class-instance-assignment */
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { AppsV1Api, CoreV1Api, type KubeConfig, type V1PodSpec } from '@kubernetes/client-node';

import { REPO_ROOT } from '../../support/cli.js';
import { apiStatusCode } from '../../support/cluster.js';
import { startControlPlane, type ControlPlane } from '../../support/control-plane.js';
import { eventually } from '../../support/eventually.js';
import { execIn, isRunning, podGone, podWhen } from '../../support/node-pods.js';
import {
  KUBELET_ADDRESS_FLAG,
  type ExtraControllerManager,
  type KubeletNode,
  type NodeKit,
  nodeKit,
  planeKubeConfig,
  probeNodeDir,
  skipUnlessKubeletNodePossible,
  startExtraControllerManager,
  startKubeletNode,
  sweepStaleKubeletNodes,
} from '../../support/kubelet-node.js';
import { kubeBinDir } from '../../support/test-cluster.js';

const NS = 'default';
const SLOW = 90_000;
const HOST_PATHS = ['/var/lib/kubelet', '/var/log/containers', '/var/lib/cni', '/run/containerd'];
const SYSCTLS = ['vm/overcommit_memory', 'kernel/panic', 'kernel/panic_on_oops'];

function hostSnapshot(): Record<string, string> {
  const snap: Record<string, string> = {};
  for (const p of HOST_PATHS) snap[p] = existsSync(p) ? 'exists' : 'absent';
  for (const s of SYSCTLS) snap[s] = readFileSync(join('/proc/sys', s), 'utf8').trim();
  return snap;
}

const logsOf = (core: CoreV1Api, name: string): Promise<string> => core.readNamespacedPodLog({ name, namespace: NS });

describe(
  'a real kubelet node (containerd, runc, CNI) in a test control plane',
  { skip: skipUnlessKubeletNodePossible() },
  () => {
    let plane: ControlPlane | undefined;
    let extraControllers: ExtraControllerManager | undefined;
    let node: KubeletNode | undefined;
    let kit: NodeKit;
    let kc: KubeConfig;
    let core: CoreV1Api;
    let binDir = '';
    let before0: Record<string, string> = {};
    /** Containers of the deleted pod: the kubelet's garbage collection must remove them. */
    let deletedPodContainers: string[] = [];
    let netnsSeen: number[] = [];

    const theNode = (): KubeletNode => {
      assert.ok(node, 'the node did not start');
      return node;
    };
    const podSpec = (spec: Partial<V1PodSpec> & Pick<V1PodSpec, 'containers'>): V1PodSpec => ({
      nodeName: theNode().name,
      terminationGracePeriodSeconds: 2,
      ...spec,
    });
    const testbox = (args: string[], extra: Record<string, unknown> = {}): V1PodSpec['containers'][number] => ({
      name: 'box',
      image: kit.testboxImage,
      imagePullPolicy: 'Never',
      args,
      ...extra,
    });

    before(async () => {
      before0 = hostSnapshot();
      binDir = kubeBinDir();
      kit = nodeKit();
      plane = await startControlPlane({
        binDir,
        controllers: true,
        // Reach the kubelet at its InternalIP (the node IP on lo): the default order tries the
        // Hostname first, i.e. a DNS lookup of the node name that would leave the machine.
        extraApiserverArgs: [KUBELET_ADDRESS_FLAG],
      });
      kc = planeKubeConfig(plane);
      core = kc.makeApiClient(CoreV1Api);
      extraControllers = await startExtraControllerManager({
        plane,
        binDir,
        controllers: ['daemonset-controller', 'deployment-controller', 'replicaset-controller'],
        dir: plane.dir,
      });
      node = await startKubeletNode({ plane, binDir, kit, labels: { 'lvp-test/real-node': 'true' } });
    });

    after(async () => {
      const failures: unknown[] = [];
      for (const step of [() => node?.stop(), () => extraControllers?.stop(), () => plane?.stop()]) {
        try {
          await step();
        } catch (error) {
          failures.push(error);
        }
      }
      if (failures.length > 0) throw new AggregateError(failures, 'teardown failed');
    });

    it('registers as a Node that becomes Ready, with the node IP and the real versions', async (t) => {
      const n = theNode();
      const object = await core.readNode({ name: n.name });
      const ready = object.status?.conditions?.find((c) => c.type === 'Ready');
      assert.equal(ready?.status, 'True');
      const labels = object.metadata?.labels ?? {};
      const info = object.status?.nodeInfo;
      const addresses = object.status?.addresses ?? [];
      const kubeletPort = object.status?.daemonEndpoints?.kubeletEndpoint?.Port;
      assert.equal(addresses.find((a) => a.type === 'InternalIP')?.address, n.nodeIP);
      assert.equal(labels['kubernetes.io/hostname'], n.name);
      assert.equal(labels['lvp-test/real-node'], 'true');
      assert.equal(info?.kubeletVersion, 'v1.35.4');
      assert.match(info.containerRuntimeVersion, /^containerd:\/\/1\./);
      assert.equal(kubeletPort, n.kubeletPort);
      t.diagnostic(
        `node ${n.name} Ready: containerd ${n.timings.containerdMs} ms, image import ${n.timings.importMs} ms, ` +
          `kubelet start → Ready ${n.timings.kubeletReadyMs} ms, total ${n.timings.totalMs} ms`,
      );
    });

    it(
      'runs a pod of a locally built image (imagePullPolicy Never) on the pod network',
      { timeout: SLOW },
      async () => {
        const n = theNode();
        await core.createNamespacedPod({
          namespace: NS,
          body: {
            metadata: { name: 'net-pod' },
            spec: podSpec({
              containers: [
                testbox([
                  'echo',
                  'hello from net-pod',
                  '--',
                  'ifaces',
                  '--',
                  'write',
                  '/tmp/note',
                  'written',
                  '--',
                  'sleep',
                ]),
              ],
            }),
          },
        });
        const pod = await podWhen(core, NS, 'net-pod', 'Running', isRunning);
        const subnetPrefix = n.podSubnet.replace(/\.0\/24$/, '.');
        assert.ok(pod.status?.podIP?.startsWith(subnetPrefix), `pod IP ${pod.status?.podIP} in ${n.podSubnet}`);
        // the node reaches the pod on its bridge, never through the machine's default route
        const route = execFileSync('ip', ['route', 'get', pod.status?.podIP ?? ''], { encoding: 'utf8' });
        assert.match(route, new RegExp(`dev ${n.bridge} `), route);
        const logs = await eventually(async () => {
          const text = await logsOf(core, 'net-pod');
          return text.includes('iface eth0') ? text : undefined;
        }, 'net-pod logs');
        assert.match(logs, /hello from net-pod/);
        assert.match(logs, new RegExp(`iface eth0 ${pod.status?.podIP?.replaceAll('.', '\\.')}/24`));
        // exec: apiserver → kubelet (node IP) → containerd's streaming server
        const note = await execIn(kc, NS, 'net-pod', 'box', ['/testbox', 'cat', '/tmp/note']);
        assert.deepEqual({ exitCode: note.exitCode, stdout: note.stdout }, { exitCode: 0, stdout: 'written' });
        // the pod's sandbox and container run in containerd, in a network namespace of their own
        const mine = n.runtimeContainers().filter((c) => c.podName === 'net-pod');
        assert.deepEqual(mine.map((c) => `${c.kind}:${c.task}`).sort(), ['container:RUNNING', 'sandbox:RUNNING']);
        assert.ok(mine.some((c) => c.kind === 'sandbox' && c.image === kit.pauseImage));
        netnsSeen = n.networkNamespaces();
        assert.equal(netnsSeen.length, 1, 'one pod network namespace');
      },
    );

    it('runs a hostNetwork pod that reaches the apiserver on loopback', { timeout: SLOW }, async () => {
      const n = theNode();
      assert.ok(plane);
      await core.createNamespacedPod({
        namespace: NS,
        body: {
          metadata: { name: 'host-pod' },
          spec: podSpec({
            hostNetwork: true,
            containers: [testbox(['http-get', `${plane.server}/readyz`, '--', 'sleep'])],
          }),
        },
      });
      const pod = await podWhen(core, NS, 'host-pod', 'Running', isRunning);
      assert.equal(pod.status?.podIP, n.nodeIP);
      const logs = await eventually(async () => {
        const text = await logsOf(core, 'host-pod');
        return text.includes('status') ? text : undefined;
      }, 'host-pod logs');
      assert.match(logs, /status 200\nok/);
      assert.equal(n.networkNamespaces().length, 1, 'a hostNetwork pod gets no network namespace');
    });

    it('never pulls: an image that was not imported fails at the loopback "registry"', { timeout: SLOW }, async () => {
      await core.createNamespacedPod({
        namespace: NS,
        body: {
          metadata: { name: 'pull-pod' },
          spec: podSpec({
            containers: [{ name: 'box', image: 'lvp.test/not-imported:v1', imagePullPolicy: 'IfNotPresent' }],
          }),
        },
      });
      const pod = await podWhen(core, NS, 'pull-pod', 'pull failed', (p) =>
        /ErrImagePull|ImagePullBackOff/.test(p.status?.containerStatuses?.[0]?.state?.waiting?.reason ?? ''),
      );
      const events = await core.listNamespacedEvent({
        namespace: NS,
        fieldSelector: `involvedObject.name=pull-pod`,
      });
      const messages = [pod.status?.containerStatuses?.[0]?.state?.waiting?.message ?? '']
        .concat(events.items.map((e) => e.message ?? ''))
        .join('\n');
      assert.match(messages, /127\.0\.0\.1:9/, messages);
      await core.deleteNamespacedPod({ name: 'pull-pod', namespace: NS, gracePeriodSeconds: 0 });
    });

    it("brings a ConfigMap change into a running pod's volume within syncFrequency", { timeout: SLOW }, async (t) => {
      await core.createNamespacedConfigMap({
        namespace: NS,
        body: { metadata: { name: 'cfg' }, data: { key: 'one' } },
      });
      await core.createNamespacedPod({
        namespace: NS,
        body: {
          metadata: { name: 'cfg-pod' },
          spec: podSpec({
            containers: [testbox(['watch', '/cfg/key', '100'], { volumeMounts: [{ name: 'cfg', mountPath: '/cfg' }] })],
            volumes: [{ name: 'cfg', configMap: { name: 'cfg' } }],
          }),
        },
      });
      await podWhen(core, NS, 'cfg-pod', 'Running', isRunning);
      await eventually(
        async () => ((await logsOf(core, 'cfg-pod')).includes('/cfg/key: one') ? true : undefined),
        'first value',
      );
      const changed = Date.now();
      await core.replaceNamespacedConfigMap({
        name: 'cfg',
        namespace: NS,
        body: { metadata: { name: 'cfg' }, data: { key: 'two' } },
      });
      await eventually(
        async () => ((await logsOf(core, 'cfg-pod')).includes('/cfg/key: two') ? true : undefined),
        'the new value in the pod',
        30_000,
        100,
      );
      t.diagnostic(`ConfigMap change visible in the pod after ${Date.now() - changed} ms (syncFrequency 5s, Watch)`);
      await core.deleteNamespacedPod({ name: 'cfg-pod', namespace: NS, gracePeriodSeconds: 1 });
      await core.deleteNamespacedConfigMap({ name: 'cfg', namespace: NS });
    });

    it(
      'a deleted pod: the kubelet stops its containers and sandbox and tears its network down',
      { timeout: SLOW },
      async () => {
        const n = theNode();
        deletedPodContainers = n
          .runtimeContainers()
          .filter((c) => c.podName === 'net-pod')
          .map((c) => c.id);
        assert.equal(deletedPodContainers.length, 2);
        await core.deleteNamespacedPod({ name: 'net-pod', namespace: NS, gracePeriodSeconds: 2 });
        // the kubelet deletes the pod object only once its containers and sandbox are stopped
        await podGone(core, NS, 'net-pod');
        const left = n.runtimeContainers().filter((c) => deletedPodContainers.includes(c.id));
        assert.ok(
          left.every((c) => c.task !== 'RUNNING'),
          `no task of the deleted pod runs: ${JSON.stringify(left)}`,
        );
        // the sandbox stop (CNI DEL, netns removal) may finish just after the pod object went
        await eventually(() => (n.networkNamespaces().length === 0 ? true : undefined), 'its network namespace gone');
      },
    );

    it(
      'the real scheduler and controllers place a Deployment pod and a DaemonSet pod on it',
      { timeout: SLOW },
      async () => {
        const n = theNode();
        const apps = kc.makeApiClient(AppsV1Api);
        const template = (app: string, hostNetwork: boolean) => ({
          metadata: { labels: { app } },
          spec: {
            hostNetwork,
            terminationGracePeriodSeconds: 2,
            nodeSelector: { 'lvp-test/real-node': 'true' },
            containers: [testbox(['echo', `${app} up`, '--', 'sleep'])],
          },
        });
        await apps.createNamespacedDaemonSet({
          namespace: NS,
          body: {
            metadata: { name: 'ds' },
            spec: { selector: { matchLabels: { app: 'ds' } }, template: template('ds', true) },
          },
        });
        await apps.createNamespacedDeployment({
          namespace: NS,
          body: {
            metadata: { name: 'deploy' },
            spec: { replicas: 1, selector: { matchLabels: { app: 'deploy' } }, template: template('deploy', false) },
          },
        });
        for (const app of ['ds', 'deploy']) {
          const pod = await eventually(
            async () => {
              const pods = await core.listNamespacedPod({ namespace: NS, labelSelector: `app=${app}` });
              return pods.items.find((p) => isRunning(p));
            },
            `a running ${app} pod`,
            SLOW,
            250,
          );
          assert.equal(pod.spec?.nodeName, n.name, `${app} pod on the node`);
          // the scheduler bound it (a DaemonSet pod gets node affinity, then the scheduler binds it)
          assert.equal(pod.status?.conditions?.find((c) => c.type === 'PodScheduled')?.status, 'True');
          assert.match(await logsOf(core, pod.metadata?.name ?? ''), new RegExp(`${app} up`));
        }
        await apps.deleteNamespacedDaemonSet({ name: 'ds', namespace: NS, propagationPolicy: 'Foreground' });
        await apps.deleteNamespacedDeployment({ name: 'deploy', namespace: NS, propagationPolicy: 'Foreground' });
        await eventually(
          async () => {
            const pods = await core.listNamespacedPod({ namespace: NS, labelSelector: 'app in (ds,deploy)' });
            return pods.items.length === 0 ? true : undefined;
          },
          'the DaemonSet and Deployment pods deleted',
          SLOW,
          250,
        );
      },
    );

    it("the kubelet garbage-collects the deleted pod's containers", { timeout: 150_000 }, async (t) => {
      const n = theNode();
      const started = Date.now();
      // the kubelet's container GC runs once a minute; the app container may go at once
      await eventually(
        () => {
          const left = n.runtimeContainers().filter((c) => deletedPodContainers.includes(c.id));
          return left.length === 0 ? true : undefined;
        },
        "the deleted pod's containers removed from containerd",
        140_000,
        1_000,
      );
      t.diagnostic(`removed ${Date.now() - started} ms after this check began`);
    });

    it(
      'stop() leaves no process, mount, network namespace, cgroup or host change behind',
      { timeout: SLOW },
      async () => {
        const n = theNode();
        // nothing looked a name up in DNS (the registry is 127.0.0.1:9, the apiserver an IP)
        for (const which of ['kubelet', 'containerd'] as const) {
          assert.doesNotMatch(readFileSync(n.logs[which], 'utf8'), /dial tcp: lookup /, `${which}.log`);
        }
        assert.ok(netnsSeen.length > 0);
        const probe = probeNodeDir(n.dir);
        await n.stop();
        assert.deepEqual(n.leftovers(), []);
        assert.deepEqual(probe.leftovers(), []);
        for (const pid of [n.pids.kubelet, n.pids.containerd]) {
          assert.equal(existsSync(`/proc/${pid}`) && !/\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8')), false);
        }
        const mounts = readFileSync('/proc/self/mountinfo', 'utf8');
        assert.ok(!mounts.includes(n.dir), 'no mount under the node dir');
        for (const ino of netnsSeen) assert.ok(!mounts.includes(`net:[${ino}]`), `netns ${ino} not mounted`);
        assert.equal(existsSync(n.dir), false);
        assert.equal(existsSync(`/sys/class/net/${n.bridge}`), false);
        assert.deepEqual(hostSnapshot(), before0, 'host dirs and kernel tunables as before');
        await assert.rejects(core.readNode({ name: n.name }), (e: unknown) => apiStatusCode(e) === 404);
      },
    );

    it('cleans up after a test process that was SIGKILLed with a pod running', { timeout: 150_000 }, async () => {
      assert.ok(plane);
      const planeJson = JSON.stringify({ server: plane.server, caFile: plane.caFile, adminToken: plane.adminToken });
      const script = `
      import { startKubeletNode } from ${JSON.stringify(join(REPO_ROOT, 'dist/test/support/kubelet-node.js'))};
      import { CoreV1Api } from '@kubernetes/client-node';
      import { setTimeout as delay } from 'node:timers/promises';
      const plane = JSON.parse(process.env.PLANE);
      const kit = JSON.parse(process.env.KIT);
      const node = await startKubeletNode({ plane, binDir: process.env.BIN_DIR, kit, name: 'lvp-crash-node' });
      const { tokenKubeConfig } = await import(${JSON.stringify(join(REPO_ROOT, 'dist/test/support/test-cluster.js'))});
      const core = tokenKubeConfig(plane.server, plane.caFile, plane.adminToken).makeApiClient(CoreV1Api);
      await core.createNamespacedPod({ namespace: 'default', body: { metadata: { name: 'crash-pod' }, spec: {
        nodeName: node.name, containers: [{ name: 'box', image: kit.testboxImage, imagePullPolicy: 'Never', args: ['sleep'] }] } } });
      for (;;) {
        const pod = await core.readNamespacedPod({ name: 'crash-pod', namespace: 'default' });
        if (pod.status?.phase === 'Running') break;
        await delay(250);
      }
      process.stdout.write('READY ' + node.dir + '\\n');
      setInterval(() => {}, 1 << 30);
    `;
      const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
        cwd: REPO_ROOT,
        env: { ...process.env, PLANE: planeJson, KIT: JSON.stringify(kit), BIN_DIR: binDir },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      let err = '';
      child.stdout.on('data', (c: Buffer) => (out += c.toString()));
      child.stderr.on('data', (c: Buffer) => (err += c.toString()));
      const dir = await eventually(
        () => /READY (\S+)/.exec(out)?.[1],
        `the child's node ready (stderr: ${err})`,
        SLOW,
        200,
      );
      const exitedChild = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGKILL');
      await exitedChild;
      await delay(500); // --pdeathsig: the kernel kills its kubelet and containerd
      const probe = probeNodeDir(dir);
      // a crash leaves the pod's shim and containers running, its netns and rootfs mounted
      assert.ok(probe.containerIds.length >= 2, `containers left: ${probe.containerIds.join(', ')}`);
      assert.equal(probe.networkNamespaces.length, 1);
      assert.ok(probe.processes.length > 0, 'shim and container processes survive the crash');
      assert.ok(probe.leftovers().length > 0);
      // what the next startKubeletNode does first
      assert.deepEqual(sweepStaleKubeletNodes(), []);
      assert.deepEqual(probe.leftovers(), []);
      assert.deepEqual(hostSnapshot(), before0, 'host dirs and kernel tunables as before');
      // the API objects of the dead node are the test's to delete (the sweep has no API access)
      await core
        .deleteNamespacedPod({ name: 'crash-pod', namespace: NS, gracePeriodSeconds: 0 })
        .catch(() => undefined);
      await core.deleteNode({ name: 'lvp-crash-node' }).catch(() => undefined);
    });
  },
);
