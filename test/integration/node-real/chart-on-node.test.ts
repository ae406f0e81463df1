// The product as users meet it: `helm install` of the chart in helm/provisioner with the image that
// scripts/build-image.sh built from the Dockerfile, on a real kubelet node (test/support/kubelet-node.ts)
// of a control plane with the real scheduler and controllers. The agent's pod talks to the apiserver
// as its ServiceAccount with the token the kubelet projects (ServiceAccount admission on), so the
// chart's RBAC is what it runs with. One story, in order: disks mounted on the host after the pod
// started get PVs (mount propagation), the seed's hot reload of a ConfigMap edit through the kubelet,
// an invalid edit, `kubectl exec` of reload and dashboard, claims released and cleaned (in-process and
// by a cleanup Job of the same image), the pod deleted in the middle of a cleanup, and the chart's API
// config source. The figures (t.diagnostic) are the ones in docs/benchmarks.md. The data-safety
// invariant checker (test/support/data-safety-invariants.ts) lists the node's PVs over the whole run
// (from the node's start to the last step) and checks, at each republish after a claim, that the
// tenant's token is no longer on the volume; its findings fail the last test.
//
// The plane, the node, the image, the proxy the agent reaches the apiserver through and the
// namespace are test/support/chart-node.ts' (it says why the proxy). The DaemonSet is the chart's,
// on the pod network; nothing else in it is changed for the test.

import assert from 'node:assert/strict';
import {
  closeSync,
  existsSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { setTimeout as delay } from 'node:timers/promises';
import { after, before, describe, it, type TestContext } from 'node:test';
import {
  AppsV1Api,
  BatchV1Api,
  CoreV1Api,
  Log,
  Watch,
  type KubeConfig,
  type V1ContainerStateTerminated,
  type V1PersistentVolume,
  type V1Pod,
  type V1StatefulSet,
} from '@kubernetes/client-node';

import { apiStatusCode } from '../../support/cluster.js';
import { box, CHART_FULLNAME, CHART_NS, CHART_RELEASE, ChartNode, STATE } from '../../support/chart-node.js';
import {
  describeReport,
  startInvariantChecker,
  type InvariantChecker,
  type RepublishProbe,
} from '../../support/data-safety-invariants.js';
import { eventually } from '../../support/eventually.js';
import { CHART_DIR, runHelm } from '../../support/helm.js';
import { type KubeletNode, skipUnlessKubeletNodePossible } from '../../support/kubelet-node.js';
import { execIn, isReady, isRunning, logMatches, podGone, podWhen } from '../../support/node-pods.js';
import { attachLoopDevice, Cleanup, mountTmpfs, run, type LoopDevice } from '../../support/real-node.js';

const NS = CHART_NS;
const RELEASE = CHART_RELEASE;
const FULLNAME = CHART_FULLNAME;
const SLOW = 120_000;
const MiB = 1024 * 1024;
/** The slow in-process block cleaner of the pod-deletion test: it logs to the discovery dir. */
const CLEANER_LOG = 'cleaner.log';

const median = (values: readonly number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
};

describe('the chart and the image on a real kubelet node', { skip: skipUnlessKubeletNodePossible() }, () => {
  const cleanup = new Cleanup();
  let env: ChartNode | undefined;
  let node: KubeletNode | undefined;
  let kc: KubeConfig;
  let core: CoreV1Api;
  let apps: AppsV1Api;
  let batch: BatchV1Api;
  let image = '';
  let base = '';
  let valuesFile = '';
  /** Host dirs of the classes (hostDir = mountDir). */
  const dirs = { fast: '', claim: '', block: '' };
  let loop: LoopDevice | undefined;
  /** The invariant checker, from the node's start to the last test. */
  let invariants: InvariantChecker | undefined;
  /** Set once the agent runs: the later steps build on it, and are skipped (not timed out) without it. */
  let installed = false;
  /** The figures for docs/benchmarks.md. */
  const figures: Record<string, string> = {};

  const theNode = (): KubeletNode => {
    assert.ok(node, 'the node did not start');
    return node;
  };

  /** The loop device's first 8 bytes (hex), read on the host without reading the rest. */
  function deviceHead(): string {
    assert.ok(loop, 'the loop device');
    const fd = openSync(loop.path, 'r');
    try {
      const head = Buffer.alloc(8);
      readSync(fd, head, 0, 8, 0);
      return head.toString('hex');
    } finally {
      closeSync(fd);
    }
  }

  const theEnv = (): ChartNode => {
    assert.ok(env, 'the plane and the node did not start');
    return env;
  };
  /** What the namespace's pods and events say, for a failure message. */
  const namespaceReport = (): Promise<string> => theEnv().namespaceReport();

  async function agentPod(what = 'an agent pod Ready', check: (p: V1Pod) => boolean = isReady): Promise<V1Pod> {
    try {
      return await theEnv().agentPod(what, check, SLOW);
    } catch (error) {
      throw new Error(`${String(error)}\n${await namespaceReport()}`, { cause: error });
    }
  }

  const restartCount = (pod: V1Pod): number => pod.status?.containerStatuses?.[0]?.restartCount ?? -1;

  async function pvAt(path: string, what: string, check: (pv: V1PersistentVolume) => boolean = () => true) {
    try {
      return await theEnv().pvAt(path, what, check, SLOW);
    } catch (error) {
      throw new Error(`${String(error)}\n${await namespaceReport()}`, { cause: error });
    }
  }

  const statusLease = (): Promise<Record<string, string>> => theEnv().statusLease();

  async function leaseWhen(
    what: string,
    check: (a: Record<string, string>) => boolean,
  ): Promise<Record<string, string>> {
    let last: Record<string, string> | undefined;
    try {
      return await eventually(
        async () => {
          last = await statusLease().catch(() => undefined);
          return last !== undefined && check(last) ? last : undefined;
        },
        `status Lease: ${what}`,
        SLOW,
        50,
      );
    } catch (error) {
      throw new Error(`${String(error)}\nlast seen: ${JSON.stringify(last)}\n${await namespaceReport()}`, {
        cause: error,
      });
    }
  }

  /** Rewrites the agent's ConfigMap data through the API, as `kubectl edit` would. */
  async function editConfig(edit: (data: Record<string, string>) => void): Promise<void> {
    const name = `${FULLNAME}-config`;
    const cm = await core.readNamespacedConfigMap({ name, namespace: NS });
    const data = { ...(cm.data ?? {}) };
    const before = JSON.stringify(data);
    edit(data);
    assert.notEqual(JSON.stringify(data), before, 'the edit changes the config');
    cm.data = data;
    await core.replaceNamespacedConfigMap({ name, namespace: NS, body: cm });
  }

  /**
   * An edit of storageClassMap (as the chart renders it: `"<class>":` at column 0, its fields
   * indented) that sets `field` of `className` to `value` (a YAML flow value), replacing the field's
   * nested lines too.
   */
  const setClassField =
    (className: string, field: string, value: string) =>
    (data: Record<string, string>): void => {
      const lines = (data['storageClassMap'] ?? '').split('\n');
      const start = lines.indexOf(`"${className}":`);
      assert.ok(start >= 0, `class ${className} in ${data['storageClassMap']}`);
      let end = start + 1;
      while (end < lines.length && (lines[end] ?? '').startsWith(' ')) end++;
      const indent = /^ */.exec(lines[start + 1] ?? '')?.[0] ?? '  ';
      const line = `${indent}${field}: ${value}`;
      const at = lines.findIndex((l, i) => i > start && i < end && l.startsWith(`${indent}${field}:`));
      if (at < 0) {
        lines.splice(start + 1, 0, line);
      } else {
        let stop = at + 1;
        while (stop < end && (lines[stop] ?? '').startsWith(`${indent} `)) stop++;
        lines.splice(at, stop - at, line);
      }
      data['storageClassMap'] = lines.join('\n');
    };

  /** Edits the config and waits until the agent serves it; returns ms from the edit to applied. */
  async function editAndWaitApplied(edit: (data: Record<string, string>) => void): Promise<number> {
    const was = await statusLease();
    const t0 = Date.now();
    await editConfig(edit);
    await leaseWhen(
      'a new config applied',
      (a) => a[`${STATE}applied-hash`] !== was[`${STATE}applied-hash`] && a[`${STATE}last-result`] === 'applied',
    );
    return Date.now() - t0;
  }

  const statefulSet = (
    name: string,
    className: string,
    mode: 'Filesystem' | 'Block',
    args: readonly string[],
  ): V1StatefulSet => theEnv().statefulSet(name, className, mode, args);

  /** Runs a StatefulSet until its pod logs `until`; returns the bound PV and the log. */
  async function runClaim(set: V1StatefulSet, until: RegExp): Promise<{ pv: V1PersistentVolume; log: string }> {
    const name = set.metadata?.name ?? '';
    await apps.createNamespacedStatefulSet({ namespace: NS, body: set });
    await podWhen(core, NS, `${name}-0`, 'Running', isRunning, SLOW);
    const log = await logMatches(core, NS, `${name}-0`, until, SLOW);
    const claim = await core.readNamespacedPersistentVolumeClaim({ name: `data-${name}-0`, namespace: NS });
    const pv = await core.readPersistentVolume({ name: claim.spec?.volumeName ?? '' });
    return { pv, log };
  }

  /** Deletes the StatefulSet, then (once its pod is gone) its claim: the PV is released. Returns when. */
  const releaseClaim = (name: string): Promise<number> => theEnv().releaseClaim(name, SLOW);

  /**
   * Asks the invariant checker to look at the volume of `pv` (about to be released) when it sees it
   * republished: `holds` says whether the tenant's token is still there. Await the result after the
   * republish with assertWipedAtRepublish.
   */
  function expectWiped(pv: V1PersistentVolume, what: string, holds: () => boolean): Promise<RepublishProbe> {
    assert.ok(invariants, 'the invariant checker runs');
    return invariants.expectWipedOnRepublish(
      { name: pv.metadata?.name ?? '', uid: pv.metadata?.uid ?? '' },
      what,
      holds,
    );
  }

  async function assertWipedAtRepublish(probe: Promise<RepublishProbe>, what: string): Promise<void> {
    const late: RepublishProbe = { checked: false, reason: 'not seen within 10 s of the republish' };
    const timer = new AbortController();
    const outcome = await Promise.race([
      probe,
      delay(10_000, undefined, { signal: timer.signal }).then(
        () => late,
        () => late,
      ),
    ]).finally(() => {
      timer.abort();
    });
    assert.ok(
      outcome.checked,
      `${what}: the checker did not look at the republished volume: ${JSON.stringify(outcome)}`,
    );
    assert.equal(outcome.tokenFound, false, `${what}: still on the volume when the checker saw it republished`);
  }

  /** Waits until the PV of `path` is a new object (not `oldUid`) and Available. */
  async function republished(path: string, oldUid: string): Promise<V1PersistentVolume> {
    return pvAt(
      path,
      'republished (a new PV, Available)',
      (pv) => pv.metadata?.uid !== oldUid && pv.status?.phase === 'Available',
    );
  }

  before(async () => {
    // Discovery dirs under the shared mount ChartNode makes (propagation into the agent's container)
    env = await ChartNode.start({ cleanup, prefix: 'lvp-chart-node-' });
    ({ node, kc, core, apps, batch, image, base } = env);
    for (const key of ['fast', 'claim', 'block'] as const) {
      dirs[key] = join(base, key);
      run('mkdir', ['-p', dirs[key]]);
    }
    // one disk before the pod starts (pod start → first PV), one claimable disk
    mountTmpfs(cleanup, join(dirs.fast, 'vol0'), 16 * MiB);
    mountTmpfs(cleanup, join(dirs.claim, 'c0'), 16 * MiB);
    const nodeName = node.name;
    invariants = startInvariantChecker({
      listPersistentVolumes: async () => (await core.listPersistentVolume()).items,
      node: nodeName,
      onViolation: (v) => process.stderr.write(`chart-on-node: data-safety invariant violated: ${v.message}\n`),
    });
    valuesFile = join(base, 'values.yaml');
    writeFileSync(
      valuesFile,
      JSON.stringify(
        env.valuesWith({
          discoveryPeriod: '2s',
          logFormat: 'text',
          useJobForCleaning: true,
          classes: [
            { name: 'fast-disks', hostDir: dirs.fast, volumeMode: 'Filesystem', fsType: 'ext4', storageClass: true },
            { name: 'claim-disks', hostDir: dirs.claim, volumeMode: 'Filesystem', storageClass: true },
            {
              name: 'block-disks',
              hostDir: dirs.block,
              volumeMode: 'Block',
              namePattern: 'blk*',
              blockCleanerCommand: ['/scripts/shred.sh', '1'],
              storageClass: true,
            },
          ],
        }),
      ),
    );
  });

  after(async () => {
    const failures: unknown[] = [];
    const steps: (() => Promise<void> | void)[] = [
      async () => {
        await invariants?.stop();
      },
      () => env?.stop(),
      () => {
        cleanup.run();
      },
    ];
    for (const step of steps) {
      try {
        await step();
      } catch (error) {
        failures.push(error);
      }
    }
    if (failures.length > 0) throw new AggregateError(failures, 'teardown failed');
  });

  /** A step of the story after the install: skipped, not timed out one by one, when the agent never ran. */
  const step = (name: string, timeout: number, fn: (t: TestContext) => Promise<void>): void => {
    it(name, { timeout }, async (t) => {
      if (!installed) {
        t.skip('the agent is not installed');
        return;
      }
      await fn(t);
    });
  };

  it(
    'helm install: the DaemonSet pod runs the image and publishes the disk that was there (pod start → first PV)',
    { timeout: SLOW * 2 },
    async (t) => {
      const plane = theEnv().plane;
      const t0 = Date.now();
      const install = runHelm([
        'install',
        RELEASE,
        CHART_DIR,
        '--namespace',
        NS,
        '--kubeconfig',
        plane.kubeconfigPath,
        '--values',
        valuesFile,
      ]);
      assert.equal(install.status, 0, install.stderr);
      const running = await agentPod('the agent pod running', isRunning);
      const tRunning = Date.now();
      const pv = await pvAt(join(dirs.fast, 'vol0'), 'published');
      const tPv = Date.now();
      const ready = await agentPod();
      assert.equal(ready.metadata?.uid, running.metadata?.uid, 'the pod that started became Ready');
      assert.equal(ready.spec?.nodeName, theNode().name);
      assert.equal(ready.spec.hostNetwork ?? false, false, 'on the pod network, as the chart renders it');
      assert.equal(ready.status?.containerStatuses?.[0]?.image.replace(/^docker\.io\//, ''), image);
      assert.equal(restartCount(ready), 0);
      // the PV as upstream builds it: node affinity, class, capacity of the tmpfs, fsType
      assert.equal(pv.spec?.storageClassName, 'fast-disks');
      assert.equal(pv.spec.capacity?.['storage'], '16Mi');
      assert.equal(pv.spec.local?.fsType, 'ext4');
      assert.equal(pv.spec.volumeMode, 'Filesystem');
      const term = pv.spec.nodeAffinity?.required?.nodeSelectorTerms[0]?.matchExpressions?.[0];
      assert.deepEqual([term?.key, term?.values], ['kubernetes.io/hostname', [theNode().name]]);
      assert.match(pv.metadata?.annotations?.['pv.kubernetes.io/provisioned-by'] ?? '', /^local-volume-provisioner-/);
      // it talks to the apiserver as the chart's ServiceAccount, with the kubelet's projected token
      const lease = await statusLease();
      assert.equal(lease[`${STATE}last-result`], 'started');
      assert.equal(lease[`${STATE}source`], '/etc/provisioner/config', JSON.stringify(lease));
      const saVolume = ready.spec.volumes?.find((v) => v.name.startsWith('kube-api-access-'));
      assert.ok(saVolume?.projected, 'ServiceAccount admission gave the pod a projected token');
      assert.equal(ready.spec.serviceAccountName, FULLNAME);
      // the agent's own clock, from its log: its first line (the process is up) → the first PV created
      const log = await core.readNamespacedPodLog({ name: ready.metadata?.name ?? '', namespace: NS });
      const stamp = (line: string | undefined): number => Date.parse(line?.split(' ')[0] ?? '');
      const lines = log.split('\n');
      const inAgent = stamp(lines.find((l) => l.includes('created PersistentVolume'))) - stamp(lines[0]);
      assert.ok(Number.isFinite(inAgent) && inAgent >= 0, log);
      figures['helm install → agent pod Running'] = `${tRunning - t0} ms`;
      figures['helm install → first PV'] = `${tPv - t0} ms`;
      figures["agent's first log line → first PV created"] = `${inAgent} ms`;
      t.diagnostic(
        `helm install → pod Running ${tRunning - t0} ms, → first PV ${tPv - t0} ms; ` +
          `in the agent's log: first line → first PV ${inAgent} ms`,
      );
      installed = true;
    },
  );

  step(
    'a disk mounted on the host after the pod started gets its PV (mount propagation), a loop device too',
    SLOW * 2,
    async (t) => {
      const t0 = Date.now();
      mountTmpfs(cleanup, join(dirs.fast, 'vol1'), 8 * MiB);
      const pv = await pvAt(join(dirs.fast, 'vol1'), 'published');
      const tMount = Date.now() - t0;
      assert.equal(pv.spec?.capacity?.['storage'], '8Mi');
      loop = attachLoopDevice(cleanup, join(base, 'blk1.img'), 64 * MiB);
      const t1 = Date.now();
      symlinkSync(loop.path, join(dirs.block, 'blk1'));
      const block = await pvAt(join(dirs.block, 'blk1'), 'published');
      const tLoop = Date.now() - t1;
      assert.equal(block.spec?.volumeMode, 'Block');
      assert.equal(block.spec.capacity?.['storage'], '64Mi');
      assert.equal(block.spec.storageClassName, 'block-disks');
      assert.equal(restartCount(await agentPod()), 0);
      figures['disk mounted on the host → its PV'] = `${tMount} ms`;
      figures['loop device linked → its PV'] = `${tLoop} ms`;
      t.diagnostic(`mount → PV ${tMount} ms; loop device symlink → PV ${tLoop} ms`);
    },
  );

  step(
    "the seed's story: an fsType edit through the API reaches the pod via the kubelet and applies without a restart",
    SLOW * 2,
    async (t) => {
      const pod = await agentPod();
      const old = await pvAt(join(dirs.fast, 'vol0'), 'published');
      const times: number[] = [];
      // five edits, the last one leaving xfs; each timed from the API write to the Lease saying applied
      for (const fsType of ['ext3', 'ext2', 'ext4', 'ext3', 'xfs']) {
        times.push(await editAndWaitApplied(setClassField('fast-disks', 'fsType', JSON.stringify(fsType))));
      }
      const after = await agentPod();
      assert.equal(after.metadata?.uid, pod.metadata?.uid, 'the same pod');
      assert.equal(restartCount(after), 0, 'no restart');
      mountTmpfs(cleanup, join(dirs.fast, 'vol2'), 8 * MiB);
      const fresh = await pvAt(join(dirs.fast, 'vol2'), 'published');
      assert.equal(fresh.spec?.local?.fsType, 'xfs', 'the next new disk gets the new fsType');
      const kept = await core.readPersistentVolume({ name: old.metadata?.name ?? '' });
      assert.equal(kept.metadata?.uid, old.metadata?.uid, 'existing PVs stay');
      assert.equal(kept.spec?.local?.fsType, 'ext4');
      figures['ConfigMap edit → applied, via the kubelet (median of 5)'] =
        `${median(times)} ms (${times.join(', ')} ms)`;
      t.diagnostic(
        `edit → applied via the kubelet: median ${median(times)} ms of ${times.join(', ')} ms ` +
          `(syncFrequency 5s, Watch; --config-sync-period 5s)`,
      );
    },
  );

  step('an invalid edit is rejected: the pod keeps running the old config', SLOW * 2, async () => {
    const was = await statusLease();
    const pod = await agentPod();
    await editConfig(setClassField('fast-disks', 'volumeMode', '"Blok"'));
    assert.equal(was[`${STATE}last-result`], 'applied');
    const rejected = await leaseWhen('the edit rejected', (a) => a[`${STATE}last-result`] === 'rejected');
    assert.match(rejected[`${STATE}last-reason`] ?? '', /volumeMode/);
    assert.equal(rejected[`${STATE}applied-hash`], was[`${STATE}applied-hash`], 'the old config still serves');
    // `kubectl exec … provisioner reload` reads the same file and says why, exit 1
    const reload = await execIn(kc, NS, pod.metadata?.name ?? '', 'provisioner', ['provisioner', 'reload']);
    assert.equal(reload.exitCode, 1, reload.stdout + reload.stderr);
    assert.match(reload.stdout, /^Rejected: /m);
    assert.match(reload.stdout, /storageClassMap:\d+:\d+: .*volumeMode/);
    // the old config publishes: a new disk gets the fsType it says
    mountTmpfs(cleanup, join(dirs.fast, 'vol3'), 8 * MiB);
    const fresh = await pvAt(join(dirs.fast, 'vol3'), 'published');
    assert.equal(fresh.spec?.local?.fsType, 'xfs');
    const still = await agentPod();
    assert.equal(still.metadata?.uid, pod.metadata?.uid);
    assert.equal(restartCount(still), 0);
    // the edit undone: the config read is the one serving, nothing to apply
    await editConfig(setClassField('fast-disks', 'volumeMode', '"Filesystem"'));
    const back = await leaseWhen('the valid config back', (a) => a[`${STATE}last-result`] === 'noop');
    assert.equal(back[`${STATE}applied-hash`], was[`${STATE}applied-hash`]);
  });

  step('provisioner reload and provisioner dashboard --once through kubectl exec in the pod', SLOW * 2, async () => {
    const pod = await agentPod();
    const name = pod.metadata?.name ?? '';
    const noop = await execIn(kc, NS, name, 'provisioner', ['provisioner', 'reload', '-o', 'json']);
    assert.equal(noop.exitCode, 0, noop.stderr);
    const json = JSON.parse(noop.stdout) as { result?: { outcome?: string } };
    assert.equal(json.result?.outcome, 'noop', noop.stdout);
    const forced = await execIn(kc, NS, name, 'provisioner', ['provisioner', 'reload', '--force']);
    assert.equal(forced.exitCode, 0, forced.stderr);
    assert.match(forced.stdout, /^Applied \(forced\): generation \d+ serves sha256:/);
    const dash = await execIn(kc, NS, name, 'provisioner', ['provisioner', 'dashboard', '--once']);
    assert.equal(dash.exitCode, 0, dash.stderr);
    assert.ok(dash.stdout.includes(theNode().name), dash.stdout);
    for (const cls of ['fast-disks', 'claim-disks', 'block-disks']) assert.ok(dash.stdout.includes(cls), dash.stdout);
    assert.ok(!dash.stdout.includes('\u001b['), 'plain text, no terminal escapes');
  });

  step(
    'a StatefulSet claim is written, released, cleaned in-process and republished: the next claim sees an empty volume',
    SLOW * 2,
    async (t) => {
      const path = join(dirs.claim, 'c0');
      const first = await runClaim(
        statefulSet(
          'writer',
          'claim-disks',
          'Filesystem',
          box('ls /data', 'write /data/hello hi', 'ls /data', 'sleep'),
        ),
        /ls \/data: hello/,
      );
      assert.equal(first.pv.spec?.local?.path, path);
      assert.match(first.log, /ls \/data: -\n/);
      assert.equal(readFileSync(join(path, 'hello'), 'utf8'), 'hi', 'written to the disk on the host');
      const wiped = expectWiped(first.pv, "the writer's file hello", () => existsSync(join(path, 'hello')));
      const released = await releaseClaim('writer');
      const again = await republished(path, first.pv.metadata?.uid ?? '');
      await assertWipedAtRepublish(wiped, "the writer's file hello");
      const ms = Date.now() - released;
      assert.deepEqual(readdirSync(path), [], 'emptied on the host');
      assert.equal(again.metadata?.name, first.pv.metadata?.name, 'the same name (upstream hash of the path)');
      const second = await runClaim(
        statefulSet('reader', 'claim-disks', 'Filesystem', box('ls /data', 'sleep')),
        /ls \/data: /,
      );
      assert.equal(second.pv.metadata?.uid, again.metadata?.uid);
      assert.match(second.log, /ls \/data: -\n/, 'the new claim sees an empty volume');
      await releaseClaim('reader');
      await republished(path, again.metadata?.uid ?? '');
      figures['claim deleted → PV republished (Filesystem, in-process)'] = `${ms} ms`;
      t.diagnostic(`claim deleted → PV republished (in-process cleanup) ${ms} ms`);
    },
  );

  step(
    'a Block claim released with useJobForCleaning: a Job of the image runs /scripts, the next claim reads zeros',
    SLOW * 2,
    async (t) => {
      const path = join(dirs.block, 'blk1');
      const first = await runClaim(
        statefulSet(
          'blockwriter',
          'block-disks',
          'Block',
          box('write /dev/xvda LVPDATA1', 'peek /dev/xvda 8', 'sleep'),
        ),
        /peek \/dev\/xvda: /,
      );
      assert.equal(first.pv.spec?.local?.path, path);
      assert.match(first.log, new RegExp(`peek /dev/xvda: ${Buffer.from('LVPDATA1').toString('hex')}`));
      const pvName = first.pv.metadata?.name ?? '';
      const token1 = Buffer.from('LVPDATA1').toString('hex');
      const wiped = expectWiped(first.pv, "the block writer's LVPDATA1", () => deviceHead() === token1);
      const released = await releaseClaim('blockwriter');
      // the agent's cleanup Job, in the release namespace, of the image the chart names
      const job = await eventually(
        () => batch.readNamespacedJob({ name: `cleanup-${pvName}`, namespace: NS }).catch(() => undefined),
        'the cleanup Job',
        SLOW,
        100,
      );
      const container = job.spec?.template.spec?.containers[0];
      assert.equal(container?.image, image);
      // The class's cleaner behind the guard, bound to the device node and identity the agent checked.
      const command = container.command ?? [];
      assert.deepEqual(command.slice(0, 3), ['provisioner', 'clean-block', '--device']);
      assert.match(command[3] ?? '', /^\/dev\/loop\d+$/u, 'the resolved device node, not the entry');
      assert.equal(command[4], '--identity');
      assert.deepEqual(command.slice(6), ['--', '/scripts/shred.sh', '1']);
      const jobPod = await eventually(
        async () => {
          const pods = await core.listNamespacedPod({ namespace: NS, labelSelector: `job-name=cleanup-${pvName}` });
          return pods.items.find((p) => p.status?.phase === 'Succeeded');
        },
        'the cleanup Job pod succeeded',
        SLOW,
        100,
      ).catch(async (error: unknown) => {
        throw new Error(`${String(error)}\n${await namespaceReport()}`, { cause: error });
      });
      assert.equal(jobPod.spec?.nodeName, theNode().name);
      const again = await republished(path, first.pv.metadata?.uid ?? '');
      const ms = Date.now() - released;
      await assertWipedAtRepublish(wiped, "the block writer's LVPDATA1");
      // the agent deletes the Job once the PV is cleaned
      await eventually(
        () =>
          batch.readNamespacedJob({ name: `cleanup-${pvName}`, namespace: NS }).then(
            () => undefined,
            (e: unknown) => (apiStatusCode(e) === 404 ? true : undefined),
          ),
        'the cleanup Job deleted',
        SLOW,
        200,
      );
      assert.equal(deviceHead(), '0000000000000000', 'the device zeroed on the host');
      const second = await runClaim(
        statefulSet('blockreader', 'block-disks', 'Block', box('peek /dev/xvda 8', 'sleep')),
        /peek \/dev\/xvda: /,
      );
      assert.equal(second.pv.metadata?.uid, again.metadata?.uid);
      assert.match(second.log, /peek \/dev\/xvda: 0000000000000000/, 'the new claim reads zeros');
      await releaseClaim('blockreader');
      await republished(path, again.metadata?.uid ?? '');
      figures['claim deleted → PV republished (Block, cleanup Job)'] = `${ms} ms`;
      t.diagnostic(`claim deleted → PV republished (cleanup Job) ${ms} ms`);
    },
  );

  step(
    'the agent pod deleted during a cleanup: SIGTERM, a graceful stop, and the new pod finishes it exactly once',
    SLOW * 3,
    async (t) => {
      const path = join(dirs.block, 'blk1');
      const log = join(dirs.block, CLEANER_LOG);
      // in-process now, with a cleaner slow enough to be caught in the middle (hot reload again)
      const slow = JSON.stringify([
        '/bin/sh',
        '-c',
        // slow the first time only: the agent pod is deleted in the middle of it
        `echo start >> ${log}; [ "$(grep -c start ${log})" = 1 ] && sleep 120; /scripts/dd_zero.sh 1 && echo done >> ${log}`,
      ]);
      await editAndWaitApplied((data) => {
        setClassField('block-disks', 'blockCleanerCommand', slow)(data);
        delete data['useJobForCleaning'];
      });
      const current = await pvAt(path, 'Available', (pv) => pv.status?.phase === 'Available');
      const claim = await runClaim(
        statefulSet('victim', 'block-disks', 'Block', box('write /dev/xvda LVPDATA2', 'echo written', 'sleep')),
        /written/,
      );
      assert.equal(claim.pv.metadata?.uid, current.metadata?.uid);
      const oldPod = await agentPod();
      const oldName = oldPod.metadata?.name ?? '';
      const token2 = Buffer.from('LVPDATA2').toString('hex');
      const wiped = expectWiped(claim.pv, "the victim's LVPDATA2", () => deviceHead() === token2);
      await releaseClaim('victim');
      await eventually(
        () => (existsSync(log) && readFileSync(log, 'utf8') === 'start\n' ? true : undefined),
        'the slow cleaner started in the agent pod',
        SLOW,
        100,
      );
      // follow the old pod's log to its end, as `kubectl logs -f` does
      const followed = new PassThrough();
      let tail = '';
      followed.on('data', (c: Buffer) => (tail += c.toString()));
      const ended = new Promise<void>((resolve) => followed.on('end', resolve));
      await new Log(kc).log(NS, oldName, 'provisioner', followed, { follow: true, sinceSeconds: 1 });
      const grace = oldPod.spec?.terminationGracePeriodSeconds ?? 30;
      // the container's last state, which the kubelet reports just before it deletes the pod
      let terminated: V1ContainerStateTerminated | undefined;
      const watching = await new Watch(kc).watch(
        `/api/v1/namespaces/${NS}/pods`,
        { fieldSelector: `metadata.name=${oldName}` },
        (_type: string, pod: V1Pod) => {
          terminated = pod.status?.containerStatuses?.[0]?.state?.terminated ?? terminated;
        },
        () => undefined,
      );
      const tDelete = Date.now();
      await core.deleteNamespacedPod({ name: oldName, namespace: NS });
      await podGone(core, NS, oldName, SLOW);
      const stopMs = Date.now() - tDelete;
      await ended;
      const last = await eventually(() => terminated, 'the terminated state of the old container', SLOW, 50);
      watching.abort();
      // exit 0 of its own: SIGTERM handled, nothing killed at the end of the grace period
      assert.deepEqual({ exitCode: last.exitCode, signal: last.signal }, { exitCode: 0, signal: undefined });
      assert.ok(stopMs < grace * 1000, `gone ${stopMs} ms after the delete, inside the ${grace} s grace period`);
      assert.match(tail, /stopping.*SIGTERM/, `the agent logged its stop: ${tail}`);
      assert.equal(readFileSync(log, 'utf8'), 'start\n', 'the interrupted cleaner did not finish');
      // the DaemonSet's new pod starts the cleanup again and finishes it, once
      const newPod = await agentPod('a new agent pod Ready', (p) => isReady(p) && p.metadata?.name !== oldName);
      assert.equal(restartCount(newPod), 0);
      const again = await pvAt(
        path,
        'republished by the new pod, Available',
        (p) => p.metadata?.uid !== current.metadata?.uid && p.status?.phase === 'Available',
      );
      assert.equal(readFileSync(log, 'utf8'), 'start\nstart\ndone\n', 'restarted from the beginning, finished once');
      assert.equal(deviceHead(), '0000000000000000');
      await assertWipedAtRepublish(wiped, "the victim's LVPDATA2");
      const pvs = (await core.listPersistentVolume()).items.filter((pv) => pv.spec?.local?.path === path);
      assert.deepEqual(
        pvs.map((pv) => pv.metadata?.uid),
        [again.metadata?.uid],
        'one PV for the device',
      );
      figures['agent pod deleted mid-cleanup → pod gone (grace 30 s)'] = `${stopMs} ms`;
      t.diagnostic(`pod deleted during a cleanup: stopped and gone in ${stopMs} ms (grace ${grace} s)`);
    },
  );

  step(
    "the chart's API config source: helm upgrade, then an edit is applied without the kubelet",
    SLOW * 2,
    async (t) => {
      const plane = theEnv().plane;
      const before = await agentPod();
      const upgrade = runHelm([
        'upgrade',
        RELEASE,
        CHART_DIR,
        '--namespace',
        NS,
        '--kubeconfig',
        plane.kubeconfigPath,
        '--reuse-values',
        '--set',
        'configSource=configmap',
      ]);
      assert.equal(upgrade.status, 0, upgrade.stderr);
      // the pod template changed (the args): the DaemonSet replaces the pod
      const pod = await agentPod(
        'the upgraded agent pod Ready',
        (p) => isReady(p) && p.metadata?.uid !== before.metadata?.uid,
      );
      await leaseWhen('source configmap', (a) => a[`${STATE}source`] === `configmap:${NS}/${FULLNAME}-config`);
      const times: number[] = [];
      for (const fsType of ['ext3', 'ext2', 'ext4', 'ext3', 'xfs']) {
        times.push(await editAndWaitApplied(setClassField('fast-disks', 'fsType', JSON.stringify(fsType))));
      }
      const still = await agentPod();
      assert.deepEqual([still.metadata?.uid, restartCount(still)], [pod.metadata?.uid, 0], 'the same pod, no restart');
      figures['ConfigMap edit → applied, API source (median of 5)'] = `${median(times)} ms (${times.join(', ')} ms)`;
      t.diagnostic(`edit → applied via the API source: median ${median(times)} ms of ${times.join(', ')} ms`);
      t.diagnostic(`figures: ${JSON.stringify(figures)}`);
    },
  );

  it('no data-safety invariant violated over the whole run (the checker, from the node start on)', async (t) => {
    assert.ok(invariants, 'the invariant checker started');
    const report = await invariants.stop();
    t.diagnostic(describeReport(report));
    assert.ok(report.polls > 0, `the checker listed the PVs: ${describeReport(report)}`);
    assert.deepEqual(
      report.violations.map((v) => v.message),
      [],
      describeReport(report),
    );
  });
});
