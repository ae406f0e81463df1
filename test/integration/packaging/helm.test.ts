// The Helm chart with the real helm binary and the real kube-apiserver: lint, render, the rendered
// ConfigMap read by the agent's own config loader, the DaemonSet and RBAC shapes, a server-side
// dry-run apply of everything rendered, and the committed plain manifests kept in sync.
/* eslint-disable @typescript-eslint/no-unsafe-class-instance-assignment */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import {
  ApiextensionsV1Api,
  KubernetesObjectApi,
  PatchStrategy,
  type KubeConfig,
  type V1ClusterRole,
  type V1ConfigMap,
  type V1Container,
  type V1CustomResourceDefinition,
  type V1DaemonSet,
  type V1Deployment,
  type V1Role,
  type V1Service,
  type V1StorageClass,
} from '@kubernetes/client-node';
import { parseConfigSnapshot } from '../../../src/core/config/decode/parse.js';
import { snapshotFromFileText } from '../../../src/core/config/decode/layout.js';
import type { ProvisionerConfig } from '../../../src/core/config/model.js';
import { REPO_ROOT } from '../../support/cli.js';
import { apiStatusCode } from '../../support/cluster.js';
import { CHART_DIR, helmBinary, renderChart, runHelm, templateChart } from '../../support/helm.js';
import type { RenderedObject, RenderOptions } from '../../support/helm.js';
import { adminKubeConfig, requireTestControlPlane } from '../../support/test-cluster.js';

const EXAMPLE = join(REPO_ROOT, 'helm/examples/baremetal-jobs-monitoring.yaml');
const suffix = Math.random().toString(36).slice(2, 8);

/** The rendered objects are plain data of these shapes (the apiserver validates them below). */
const asDaemonSet = (o: RenderedObject): V1DaemonSet => o;
const asClusterRole = (o: RenderedObject): V1ClusterRole => o;
const asRole = (o: RenderedObject): V1Role => o;
const asStorageClass = (o: RenderedObject): V1StorageClass => o as unknown as V1StorageClass;
const asService = (o: RenderedObject): V1Service => o;
const asConfigMap = (o: RenderedObject): V1ConfigMap => o;

function args(c: V1Container): readonly string[] {
  return c.args ?? [];
}

/** Renders on first use (inside a test, not while the file's tests are collected). */
function once<T>(fn: () => T): () => T {
  let value: { v: T } | undefined;
  return () => (value ??= { v: fn() }).v;
}

function loadRenderedConfig(options: RenderOptions): { config: ProvisionerConfig; hash: string; text: string } {
  const r = templateChart({ ...options, showOnly: ['templates/configmap.yaml'] });
  assert.equal(r.status, 0, r.stderr);
  const loaded = parseConfigSnapshot(snapshotFromFileText('configmap.yaml', r.stdout));
  assert.deepEqual(
    loaded.warnings.map((w) => w.message),
    [],
    'the rendered ConfigMap loads without warnings',
  );
  return { config: loaded.config, hash: loaded.hash, text: r.stdout };
}

function container(ds: V1DaemonSet): V1Container {
  const [first, ...rest] = ds.spec?.template.spec?.containers ?? [];
  assert.ok(first !== undefined && rest.length === 0, 'one container');
  return first;
}

function envValue(c: V1Container, name: string): string | undefined {
  return c.env?.find((e) => e.name === name)?.value;
}

function envFieldPath(c: V1Container, name: string): string | undefined {
  return c.env?.find((e) => e.name === name)?.valueFrom?.fieldRef?.fieldPath;
}

const fastDisks = {
  hostDir: '/mnt/fast-disks',
  mountDir: '/mnt/fast-disks',
  blockCleanerCommand: ['/scripts/shred.sh', '2'],
  volumeMode: 'Filesystem',
  accessMode: 'ReadWriteOnce',
  fsType: 'ext4',
  namePattern: '*',
  selector: [],
};

const defaultsOfConfig = {
  nodeLabelsForPV: [],
  labelsForPV: {},
  useAlphaAPI: false,
  useJobForCleaning: false,
  jobTolerations: [],
  minResyncPeriod: '5m0s',
  useNodeNameOnly: false,
  setPVOwnerRef: false,
  removeNodeNotReadyTaint: false,
  provisionerNotReadyNodeTaintKey: '',
};

describe('Helm chart helm/provisioner', () => {
  it('grafanaDashboard.enabled ships the dashboard JSON in a ConfigMap the Grafana sidecar picks up; off by default', () => {
    assert.deepEqual(
      renderChart({})
        .all('ConfigMap')
        .filter((c) => c.metadata.name.endsWith('-dashboard')),
      [],
    );
    const r = renderChart({
      set: ['grafanaDashboard.enabled=true', 'grafanaDashboard.annotations.grafana_folder=Storage'],
    });
    const cm = r.one('ConfigMap', 'lvp-test-local-static-provisioner-dashboard') as RenderedObject & {
      readonly metadata: { labels?: Record<string, string>; annotations?: Record<string, string> };
      readonly data?: Record<string, string>;
    };
    assert.equal(cm.metadata.labels?.['grafana_dashboard'], '1');
    assert.equal(cm.metadata.annotations?.['grafana_folder'], 'Storage');
    const shipped = cm.data?.['local-static-provisioner.json'] ?? '';
    assert.deepEqual(
      JSON.parse(shipped),
      JSON.parse(readFileSync(join(CHART_DIR, 'dashboards/local-static-provisioner.json'), 'utf8')),
    );
  });

  before(() => {
    const version = runHelm(['version', '--short']);
    assert.equal(version.status, 0, `${helmBinary()}: ${version.stderr}`);
    assert.match(version.stdout, /^v3\.22\./u);
  });

  it('passes helm lint --strict with the default values, the example values and each rbac.jobs mode', () => {
    for (const args of [
      [],
      ['--values', EXAMPLE],
      ['--set', 'rbac.jobs=auto'],
      ['--set', 'rbac.jobs=never'],
      ['--set', 'configChecksumAnnotation=true,removeNodeNotReadyTaint=true'],
      ['--set', 'configSource=configmap'],
      ['--set', 'nodeCleanup.enabled=true,nodeCleanup.dryRun=true'],
      ['--set', 'stagedRollout.enabled=true'],
      ['--set', 'configSource=configmap,stagedRollout.enabled=true,stagedRollout.canary.selector=tier=canary'],
    ]) {
      const r = runHelm(['lint', '--strict', CHART_DIR, ...args]);
      assert.equal(r.status, 0, `helm lint ${args.join(' ')}:\n${r.stdout}${r.stderr}`);
      assert.match(r.stdout, /1 chart\(s\) linted, 0 chart\(s\) failed/u);
    }
  });

  describe('default values', () => {
    const rendered = once(() => renderChart({ release: 'lvp', namespace: 'kube-system' }));

    it('renders the ServiceAccount, ConfigMap, StorageClass, RBAC and DaemonSet, no monitoring objects', () => {
      assert.deepEqual(
        rendered()
          .objects.map((o) => `${o.kind}/${o.metadata.name}`)
          .sort(),
        [
          'ClusterRole/lvp-local-static-provisioner-node-clusterrole',
          'ClusterRoleBinding/lvp-local-static-provisioner-node-binding',
          'ConfigMap/lvp-local-static-provisioner-config',
          'DaemonSet/lvp-local-static-provisioner',
          'Role/lvp-local-static-provisioner-jobs-role',
          'Role/lvp-local-static-provisioner-status-role',
          'RoleBinding/lvp-local-static-provisioner-jobs-rolebinding',
          'RoleBinding/lvp-local-static-provisioner-status-rolebinding',
          'ServiceAccount/lvp-local-static-provisioner',
          'StorageClass/fast-disks',
        ],
      );
      for (const o of rendered().objects.filter(
        (x) => !['ClusterRole', 'ClusterRoleBinding', 'StorageClass'].includes(x.kind),
      )) {
        assert.equal(o.metadata.namespace, 'kube-system', `${o.kind} in the release namespace`);
      }
    });

    it('the ConfigMap loads with the agent loader into the expected normalized config', () => {
      const { config } = loadRenderedConfig({ release: 'lvp' });
      assert.deepEqual(config, { storageClassMap: { 'fast-disks': fastDisks }, ...defaultsOfConfig });
    });

    it('the StorageClass is a no-provisioner, WaitForFirstConsumer, Delete class', () => {
      const sc = asStorageClass(rendered().one('StorageClass'));
      assert.equal(sc.provisioner, 'kubernetes.io/no-provisioner');
      assert.equal(sc.volumeBindingMode, 'WaitForFirstConsumer');
      assert.equal(sc.reclaimPolicy, 'Delete');
      assert.equal(sc.metadata?.annotations, undefined);
    });

    it('the DaemonSet: config directory, hostPath per class with HostToContainer, /dev, downward API env, probes, admin socket dir', () => {
      const ds = asDaemonSet(rendered().one('DaemonSet'));
      const pod = ds.spec?.template.spec;
      assert.ok(pod);
      assert.deepEqual(ds.spec?.selector.matchLabels, {
        'app.kubernetes.io/name': 'local-static-provisioner',
        'app.kubernetes.io/instance': 'lvp',
      });
      assert.equal(pod.serviceAccountName, 'lvp-local-static-provisioner');
      assert.deepEqual(pod.nodeSelector, { 'kubernetes.io/os': 'linux' });
      const c = container(ds);
      assert.equal(c.image, 'local-volume-provisioner-ts:0.1.0');
      assert.equal(c.securityContext?.privileged, true);
      assert.equal(args(c)[0], 'run', 'args replace the image CMD ["run"]');
      assert.equal(c.command, undefined, 'no command: the image ENTRYPOINT (tini as PID 1) stays');
      assert.ok(args(c).includes('--config-sync-period=5s'));
      assert.ok(args(c).includes('--drain-timeout=10s'));
      assert.ok(args(c).includes('--start-timeout=30s'));
      assert.ok(args(c).includes('--reload-guard=refuse'), 'the reload guard refuses by default');
      assert.equal(envFieldPath(c, 'MY_NODE_NAME'), 'spec.nodeName');
      assert.equal(envFieldPath(c, 'MY_NAMESPACE'), 'metadata.namespace');
      assert.equal(envValue(c, 'JOB_CONTAINER_IMAGE'), c.image, 'cleanup Jobs run the same image');
      assert.equal(envValue(c, 'PROVISIONER_ADMIN_SOCKET'), '/run/provisioner/admin.sock');
      assert.deepEqual(c.ports, [{ name: 'metrics', containerPort: 8080, protocol: 'TCP' }]);
      // Liveness restarts only after 2 minutes without an answer, a start gets 5 (values.yaml: a
      // restart does not help an agent slowed by a busy node).
      assert.deepEqual(c.livenessProbe, {
        httpGet: { path: '/healthz', port: 'metrics' },
        periodSeconds: 20,
        timeoutSeconds: 10,
        failureThreshold: 6,
      });
      assert.deepEqual(c.startupProbe, {
        httpGet: { path: '/healthz', port: 'metrics' },
        periodSeconds: 5,
        timeoutSeconds: 5,
        failureThreshold: 60,
      });
      assert.deepEqual(c.readinessProbe?.httpGet, { path: '/ready', port: 'metrics' });
      // From the measured peak under reload churn (docs/benchmarks.md, "Reload churn"), with its margin.
      assert.deepEqual(c.resources, { requests: { cpu: '10m', memory: '128Mi' }, limits: { memory: '256Mi' } });

      const volumes = new Map((pod.volumes ?? []).map((v) => [v.name, v]));
      const mounts = new Map((c.volumeMounts ?? []).map((m) => [m.mountPath, m]));
      const config = mounts.get('/etc/provisioner/config');
      assert.ok(config, 'the config is mounted at /etc/provisioner/config');
      assert.equal(config.subPath, undefined, 'as a directory, never subPath (a subPath mount never updates)');
      assert.equal(config.readOnly, true);
      assert.equal(volumes.get(config.name)?.configMap?.name, 'lvp-local-static-provisioner-config');
      const admin = mounts.get('/run/provisioner');
      assert.ok(admin && volumes.get(admin.name)?.emptyDir !== undefined, 'an emptyDir at /run/provisioner');
      const dev = mounts.get('/dev');
      assert.ok(dev);
      assert.equal(volumes.get(dev.name)?.hostPath?.path, '/dev');
      const disks = mounts.get('/mnt/fast-disks');
      assert.ok(disks);
      assert.equal(disks.mountPropagation, 'HostToContainer');
      assert.equal(volumes.get(disks.name)?.hostPath?.path, '/mnt/fast-disks');
      assert.equal(pod.volumes?.length, 4);
      assert.equal(ds.spec.template.metadata?.annotations?.['checksum/config'], undefined, 'no checksum/config');
    });

    it('least-privilege RBAC: the ClusterRole rules and a namespaced Jobs Role', () => {
      const role = asClusterRole(rendered().one('ClusterRole'));
      assert.deepEqual(
        role.rules?.map((r) => [r.apiGroups, r.resources, r.verbs]),
        [
          [[''], ['persistentvolumes'], ['get', 'list', 'watch', 'create', 'delete', 'patch', 'update']],
          [['storage.k8s.io'], ['storageclasses'], ['get', 'list', 'watch']],
          [[''], ['nodes'], ['get']],
          [[''], ['events'], ['create', 'patch', 'update']],
        ],
      );
      const byName = (kind: string, name: string): RenderedObject => {
        const found = rendered()
          .all(kind)
          .find((o) => o.metadata.name === name);
        assert.ok(found, `${kind}/${name}`);
        return found;
      };
      const jobs = asRole(byName('Role', 'lvp-local-static-provisioner-jobs-role'));
      assert.equal(jobs.metadata?.namespace, 'kube-system');
      assert.deepEqual(
        jobs.rules?.map((r) => [r.apiGroups, r.resources, r.verbs]),
        [[['batch'], ['jobs'], ['get', 'list', 'watch', 'create', 'delete']]],
      );
      const binding = byName('RoleBinding', 'lvp-local-static-provisioner-jobs-rolebinding');
      assert.deepEqual(binding['subjects'], [
        { kind: 'ServiceAccount', name: 'lvp-local-static-provisioner', namespace: 'kube-system' },
      ]);
      // The status Leases: no list, watch or delete (rollout status reads with the user's credentials).
      const status = asRole(byName('Role', 'lvp-local-static-provisioner-status-role'));
      assert.equal(status.metadata?.namespace, 'kube-system');
      assert.deepEqual(
        status.rules?.map((r) => [r.apiGroups, r.resources, r.verbs]),
        [[['coordination.k8s.io'], ['leases'], ['get', 'create', 'update']]],
      );
      assert.deepEqual(byName('RoleBinding', 'lvp-local-static-provisioner-status-rolebinding')['subjects'], [
        { kind: 'ServiceAccount', name: 'lvp-local-static-provisioner', namespace: 'kube-system' },
      ]);
    });

    it('statusLease: the agents publish as <fullname>; enabled: false drops the Role and turns publishing off', () => {
      const args = (r: ReturnType<typeof renderChart>): string[] =>
        asDaemonSet(r.one('DaemonSet')).spec?.template.spec?.containers[0]?.args ?? [];
      assert.ok(args(rendered()).includes('--status-name=lvp-local-static-provisioner'));
      assert.ok(args(rendered()).includes('--status-heartbeat=60s'));
      const off = renderChart({ release: 'lvp', namespace: 'kube-system', set: ['statusLease.enabled=false'] });
      assert.ok(args(off).includes('--no-publish-status'));
      assert.deepEqual(
        off.all('Role').map((r) => r.metadata.name),
        ['lvp-local-static-provisioner-jobs-role'],
      );
    });
  });

  describe('values', () => {
    it('configChecksumAnnotation: true adds checksum/config to the pod template', () => {
      const ds = asDaemonSet(renderChart({ set: ['configChecksumAnnotation=true'] }).one('DaemonSet'));
      assert.match(ds.spec?.template.metadata?.annotations?.['checksum/config'] ?? '', /^[0-9a-f]{64}$/u);
    });

    it('rbac.jobs: always grants Jobs whatever useJobForCleaning says, auto only with it, never not at all', () => {
      const roles = (set: string[]): string[] =>
        renderChart({ set })
          .all('Role')
          .map((r) => r.metadata.name);
      assert.deepEqual(roles(['useJobForCleaning=false']), [
        'lvp-test-local-static-provisioner-jobs-role',
        'lvp-test-local-static-provisioner-status-role',
      ]);
      assert.deepEqual(roles(['rbac.jobs=auto']), ['lvp-test-local-static-provisioner-status-role']);
      assert.deepEqual(roles(['rbac.jobs=auto', 'useJobForCleaning=true']), [
        'lvp-test-local-static-provisioner-jobs-role',
        'lvp-test-local-static-provisioner-status-role',
      ]);
      assert.deepEqual(roles(['rbac.jobs=never']), ['lvp-test-local-static-provisioner-status-role']);
      assert.deepEqual(renderChart({ set: ['rbac.create=false'] }).all('ClusterRole'), []);
      const never = templateChart({ set: ['rbac.jobs=never', 'useJobForCleaning=true'] });
      assert.notEqual(never.status, 0);
      assert.match(never.stderr, /useJobForCleaning needs the Jobs Role/u);
      const bad = templateChart({ set: ['rbac.jobs=sometimes'] });
      assert.notEqual(bad.status, 0);
      assert.match(bad.stderr, /rbac\.jobs must be always, auto or never/u);
    });

    it('configSource: configmap reads the ConfigMap through the API with get/list/watch on it alone; the volume stays', () => {
      const chart = renderChart({ release: 'lvp', namespace: 'storage', set: ['configSource=configmap'] });
      const c = container(asDaemonSet(chart.one('DaemonSet')));
      assert.ok(args(c).includes('--config-source=configmap:storage/lvp-local-static-provisioner-config'));
      assert.ok(args(c).includes('--config-dir=/etc/provisioner/config'), 'the mounted fallback stays');
      assert.ok(c.volumeMounts?.some((m) => m.mountPath === '/etc/provisioner/config'));
      const role = asRole(chart.one('Role', 'lvp-local-static-provisioner-config-role'));
      assert.equal(role.metadata?.namespace, 'storage');
      assert.deepEqual(
        role.rules?.map((r) => [r.apiGroups, r.resources, r.resourceNames, r.verbs]),
        [[[''], ['configmaps'], ['lvp-local-static-provisioner-config'], ['get', 'list', 'watch']]],
      );
      const binding = chart.one('RoleBinding', 'lvp-local-static-provisioner-config-rolebinding');
      assert.deepEqual(binding['roleRef'], {
        apiGroup: 'rbac.authorization.k8s.io',
        kind: 'Role',
        name: 'lvp-local-static-provisioner-config-role',
      });
      assert.deepEqual(binding['subjects'], [
        { kind: 'ServiceAccount', name: 'lvp-local-static-provisioner', namespace: 'storage' },
      ]);
      // The default: the mounted directory, no ConfigMap permission.
      const directory = renderChart({ release: 'lvp' });
      assert.ok(!args(container(asDaemonSet(directory.one('DaemonSet')))).some((a) => a.startsWith('--config-source')));
      assert.deepEqual(
        directory.all('Role').map((r) => r.metadata.name),
        ['lvp-local-static-provisioner-jobs-role', 'lvp-local-static-provisioner-status-role'],
      );
      const bad = templateChart({ set: ['configSource=api'] });
      assert.notEqual(bad.status, 0);
      assert.match(bad.stderr, /configSource must be directory or configmap, not "api"/u);
    });

    it('upstream values this chart does not support fail the render instead of being dropped', () => {
      for (const [set, message] of [
        ['enableWindows=true', /Linux nodes only/u],
        ['additionalArgs={--v=2}', /klog flags/u],
        ['nodeCleanupController.enabled=true', /node cleanup is nodeCleanup\.enabled/u],
        ['logFormat=xml', /logFormat must be text or json/u],
        ['logLevel=trace', /logLevel must be/u],
        ['hotReload.guard=ignore', /hotReload\.guard must be refuse, warn or apply, not "ignore"/u],
      ] as const) {
        const r = templateChart({ set: [set] });
        assert.notEqual(r.status, 0, set);
        assert.match(r.stderr, message, set);
      }
    });

    it('values.schema.json: a typo in a key or a wrong type fails the render, naming the key', () => {
      for (const [values, message] of [
        ['logLevl: debug', /at '': additional properties 'logLevl' not allowed/u],
        ['hotReload: {gaurd: warn}', /at '\/hotReload': additional properties 'gaurd' not allowed/u],
        [
          'classes: [{name: a, hostDir: /mnt/a, fstype: ext4}]',
          /at '\/classes\/0': additional properties 'fstype' not allowed/u,
        ],
        [
          'classes: [{name: a, hostDir: /mnt/a, storageClass: {reclaimPolicy: Retain, isDefault: true}}]',
          /\/classes\/0\/storageClass/u,
        ],
        ['useJobForCleaning: maybe', /at '\/useJobForCleaning': got string, want boolean/u],
        ['nodeLabels: topology.kubernetes.io/zone', /at '\/nodeLabels': got string, want array/u],
        ['terminationGracePeriodSeconds: 30s', /at '\/terminationGracePeriodSeconds': got string, want integer/u],
        ['classes: [{hostDir: /mnt/a}]', /at '\/classes\/0': missing property 'name'/u],
      ] as const) {
        const r = templateChart({ values });
        assert.notEqual(r.status, 0, values);
        assert.match(r.stderr, /values don't meet the specifications of the schema/u, values);
        assert.match(r.stderr, message, `${values}\n${r.stderr}`);
      }
      // The values the chart documents only in comments, and upstream's values that the templates
      // refuse with their own message, pass the schema.
      const r = templateChart({
        valuesFiles: [EXAMPLE],
        values: [
          'minResyncPeriod: 5m0s',
          'labelsForPV: {a: "1", b: 2, c: true}',
          'enableWindows: false',
          'nodeSelectorWindows: {}',
          'additionalArgs: []',
          'nodeCleanupController: {enabled: false}',
          'classes: [{name: a, hostDir: /mnt/a, mountDir: /mnt/a, accessMode: ReadWriteOnce, allowedTopologies: [], storageClass: {reclaimPolicy: Retain, isDefaultClass: true, provisioner: x}}]',
        ].join('\n'),
      });
      assert.equal(r.status, 0, r.stderr);
    });

    it('removeNodeNotReadyTaint grants nodes update, tolerates the taint and writes both keys', () => {
      const rendered = renderChart({ set: ['removeNodeNotReadyTaint=true'] });
      const role = asClusterRole(rendered.one('ClusterRole'));
      assert.deepEqual(role.rules?.find((r) => r.resources?.includes('nodes'))?.verbs, ['get', 'update']);
      const ds = asDaemonSet(rendered.one('DaemonSet'));
      assert.deepEqual(ds.spec?.template.spec?.tolerations, [
        { key: 'sig-storage-local-static-provisioner/agent-not-ready', operator: 'Exists' },
      ]);
      const { config } = loadRenderedConfig({ set: ['removeNodeNotReadyTaint=true'] });
      assert.equal(config.removeNodeNotReadyTaint, true);
      assert.equal(config.provisionerNotReadyNodeTaintKey, 'sig-storage-local-static-provisioner/agent-not-ready');
    });

    it('hotReload, adminSocket, logFormat and extraArgs reach the container', () => {
      const ds = asDaemonSet(
        renderChart({
          values: [
            'hotReload: {configSyncPeriod: 2s, drainTimeout: 3s, startTimeout: 1m, guard: warn}',
            'adminSocket: {dir: /var/run/lvp}',
            'logFormat: text',
            'extraArgs: ["--cleanup-concurrency=2"]',
          ].join('\n'),
        }).one('DaemonSet'),
      );
      const c = container(ds);
      for (const arg of [
        '--config-sync-period=2s',
        '--drain-timeout=3s',
        '--start-timeout=1m',
        '--reload-guard=warn',
        '--log-format=text',
        '--cleanup-concurrency=2',
      ]) {
        assert.ok(args(c).includes(arg), arg);
      }
      assert.equal(envValue(c, 'PROVISIONER_ADMIN_SOCKET'), '/var/run/lvp/admin.sock');
      assert.ok(c.volumeMounts?.some((m) => m.mountPath === '/var/run/lvp'));
    });
  });

  describe('stagedRollout', () => {
    const STAGED = ['stagedRollout.enabled=true'];
    const fullname = 'lvp-local-static-provisioner';
    const controllerName = `${fullname}-rollout-controller`;
    const rendered = once(() => renderChart({ release: 'lvp', namespace: 'storage', set: STAGED }));
    const asDeployment = (o: RenderedObject): V1Deployment => o;

    it('off (the default): whatever else stagedRollout says, the chart renders byte for byte what it renders without it', () => {
      const offValues = [
        'stagedRollout:',
        '  enabled: false',
        '  canary: {selector: "tier=canary", count: 3}',
        '  waves: "5,100%"',
        '  bakeTime: 1m',
        '  progressDeadline: 2m',
        '  onHalt: halt',
        '  controller: {replicas: 3, listenAddress: ":9000", extraArgs: ["--x"]}',
      ].join('\n');
      for (const set of [[], ['configSource=configmap'], ['nodeCleanup.enabled=true']]) {
        const plain = templateChart({ release: 'lvp', set });
        const off = templateChart({ release: 'lvp', set, values: offValues });
        assert.equal(plain.status, 0, plain.stderr);
        assert.equal(off.status, 0, off.stderr);
        assert.equal(off.stdout, plain.stdout, `stagedRollout off with --set ${set.join(',')}`);
        assert.doesNotMatch(off.stdout, /rollout-controller|-config-stable|-config-candidate|staged:/u);
      }
      // deploy/provisioner.yaml (the default render, checked below) is unchanged by the feature too.
    });

    it('on: the rollout controller Deployment, its ServiceAccount and RBAC, next to what the chart renders anyway', () => {
      assert.deepEqual(
        rendered()
          .objects.map((o) => `${o.kind}/${o.metadata.name}`)
          .sort(),
        [
          `ClusterRole/${controllerName}`,
          `ClusterRole/${fullname}-node-clusterrole`,
          `ClusterRoleBinding/${controllerName}`,
          `ClusterRoleBinding/${fullname}-node-binding`,
          `ConfigMap/${fullname}-config`,
          `DaemonSet/${fullname}`,
          `Deployment/${controllerName}`,
          `Role/${controllerName}`,
          `Role/${fullname}-config-role`,
          `Role/${fullname}-jobs-role`,
          `Role/${fullname}-status-role`,
          `RoleBinding/${controllerName}`,
          `RoleBinding/${fullname}-config-rolebinding`,
          `RoleBinding/${fullname}-jobs-rolebinding`,
          `RoleBinding/${fullname}-status-rolebinding`,
          `ServiceAccount/${controllerName}`,
          `ServiceAccount/${fullname}`,
          'StorageClass/fast-disks',
        ].sort(),
      );
      // The chart does not render the copies: the controller writes them.
      assert.deepEqual(
        rendered()
          .all('ConfigMap')
          .map((o) => o.metadata.name),
        [`${fullname}-config`],
      );
    });

    it("on: the DaemonSet reads staged:<ns>/<config> and mounts the stable copy (optional) as its fallback, never the operator's ConfigMap", () => {
      const ds = asDaemonSet(rendered().one('DaemonSet'));
      const c = container(ds);
      const sources = args(c).filter((a) => a.startsWith('--config-source'));
      assert.deepEqual(sources, [`--config-source=staged:storage/${fullname}-config`]);
      assert.ok(args(c).includes('--config-dir=/etc/provisioner/config'));
      assert.ok(args(c).includes(`--status-name=${fullname}`), 'the status Leases the controller reads');
      const mount = c.volumeMounts?.find((m) => m.mountPath === '/etc/provisioner/config');
      assert.ok(mount);
      assert.equal(mount.readOnly, true);
      const volume = ds.spec?.template.spec?.volumes?.find((v) => v.name === mount.name);
      assert.deepEqual(volume?.configMap, { name: `${fullname}-config-stable`, optional: true });
      assert.ok(
        !(ds.spec?.template.spec?.volumes ?? []).some((v) => v.configMap?.name === `${fullname}-config`),
        "the operator's ConfigMap is not mounted",
      );
    });

    it("on: the agent's config Role gets, lists and watches exactly the two copies (it watches each by name), not the operator's ConfigMap", () => {
      const role = asRole(rendered().one('Role', `${fullname}-config-role`));
      assert.equal(role.metadata?.namespace, 'storage');
      assert.deepEqual(role.rules, [
        {
          apiGroups: [''],
          resources: ['configmaps'],
          resourceNames: [`${fullname}-config-stable`, `${fullname}-config-candidate`],
          verbs: ['get', 'list', 'watch'],
        },
      ]);
      assert.deepEqual(rendered().one('RoleBinding', `${fullname}-config-rolebinding`)['subjects'], [
        { kind: 'ServiceAccount', name: fullname, namespace: 'storage' },
      ]);
    });

    it('on: the controller runs as its own ServiceAccount with exactly these rules (it reads only its three ConfigMaps)', () => {
      assert.deepEqual(rendered().one('Role', controllerName)['rules'], [
        {
          apiGroups: [''],
          resources: ['configmaps'],
          resourceNames: [`${fullname}-config`, `${fullname}-config-stable`, `${fullname}-config-candidate`],
          verbs: ['get', 'list', 'watch'],
        },
        { apiGroups: [''], resources: ['configmaps'], verbs: ['create'] },
        {
          apiGroups: [''],
          resources: ['configmaps'],
          resourceNames: [`${fullname}-config-stable`, `${fullname}-config-candidate`],
          verbs: ['update', 'patch'],
        },
        { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['get', 'list', 'watch'] },
        { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['create'] },
        {
          apiGroups: ['coordination.k8s.io'],
          resources: ['leases'],
          resourceNames: [controllerName],
          verbs: ['get', 'update'],
        },
        { apiGroups: [''], resources: ['events'], verbs: ['create', 'patch'] },
      ]);
      assert.equal(rendered().one('Role', controllerName).metadata.namespace, 'storage');
      assert.deepEqual(rendered().one('ClusterRole', controllerName)['rules'], [
        { apiGroups: [''], resources: ['nodes'], verbs: ['get', 'list', 'watch'] },
      ]);
      const subject = [{ kind: 'ServiceAccount', name: controllerName, namespace: 'storage' }];
      for (const [kind, roleKind] of [
        ['RoleBinding', 'Role'],
        ['ClusterRoleBinding', 'ClusterRole'],
      ] as const) {
        const binding = rendered().one(kind, controllerName);
        assert.deepEqual(binding['subjects'], subject, kind);
        assert.deepEqual(binding['roleRef'], {
          apiGroup: 'rbac.authorization.k8s.io',
          kind: roleKind,
          name: controllerName,
        });
      }
      assert.equal(rendered().one('ServiceAccount', controllerName).metadata.namespace, 'storage');
    });

    it('on: the Deployment: 2 replicas, the policy as flags, POD_NAMESPACE/POD_NAME, probes on the listen port, non-root', () => {
      const deployment = asDeployment(rendered().one('Deployment', controllerName));
      assert.equal(deployment.metadata?.namespace, 'storage');
      assert.equal(deployment.spec?.replicas, 2);
      const pod = deployment.spec.template.spec;
      assert.ok(pod);
      assert.equal(pod.serviceAccountName, controllerName);
      assert.deepEqual(deployment.spec.selector.matchLabels, {
        'app.kubernetes.io/name': 'local-static-provisioner-rollout-controller',
        'app.kubernetes.io/instance': 'lvp',
      });
      assert.deepEqual(pod.nodeSelector, { 'kubernetes.io/os': 'linux' });
      assert.ok(pod.affinity?.podAntiAffinity, 'replicas prefer different nodes');
      assert.deepEqual(pod.securityContext, {
        runAsNonRoot: true,
        runAsUser: 65534,
        runAsGroup: 65534,
        seccompProfile: { type: 'RuntimeDefault' },
      });
      const [c, ...more] = pod.containers;
      assert.ok(c !== undefined && more.length === 0);
      assert.equal(c.image, 'local-volume-provisioner-ts:0.1.0');
      assert.equal(c.command, undefined, 'the image ENTRYPOINT (tini) stays');
      assert.deepEqual(c.args, [
        'rollout',
        'controller',
        `--config-map=${fullname}-config`,
        `--status-name=${fullname}`,
        '--canary-count=1',
        '--waves=10%,50%,100%',
        '--bake-time=5m',
        '--progress-deadline=10m',
        '--on-halt=revert',
        `--leader-elect-lease-name=${controllerName}`,
        '--listen-address=:8081',
        '--log-level=info',
        '--log-format=json',
      ]);
      assert.deepEqual(
        c.env?.map((e) => [e.name, e.valueFrom?.fieldRef?.fieldPath]),
        [
          ['POD_NAME', 'metadata.name'],
          ['POD_NAMESPACE', 'metadata.namespace'],
        ],
      );
      assert.deepEqual(c.ports, [{ name: 'metrics', containerPort: 8081 }]);
      assert.deepEqual(c.livenessProbe?.httpGet, { path: '/healthz', port: 'metrics' });
      assert.deepEqual(c.readinessProbe?.httpGet, { path: '/readyz', port: 'metrics' });
      assert.deepEqual(c.securityContext, {
        allowPrivilegeEscalation: false,
        readOnlyRootFilesystem: true,
        capabilities: { drop: ['ALL'] },
      });
      assert.deepEqual(c.resources, { requests: { cpu: '10m', memory: '64Mi' } });
    });

    it('on: a canary selector replaces the count; the policy and controller values reach the Deployment', () => {
      const chart = renderChart({
        release: 'lvp',
        set: STAGED,
        values: [
          'stagedRollout:',
          '  canary: {selector: "tier in (canary, edge)", count: 5}',
          '  waves: "5, 50%, 100%"',
          '  bakeTime: 0s',
          '  progressDeadline: 90s',
          '  onHalt: halt',
          '  controller:',
          '    replicas: 1',
          '    listenAddress: "127.0.0.1:9100"',
          '    image: registry.example.com/provisioner:1',
          '    extraArgs: ["--kube-api-qps=5"]',
          '    nodeSelector: {node-role.kubernetes.io/control-plane: ""}',
          '    tolerations: [{key: node-role.kubernetes.io/control-plane, operator: Exists, effect: NoSchedule}]',
          '    affinity: {nodeAffinity: {}}',
          '    podAnnotations: {a: b}',
          '    priorityClassName: system-cluster-critical',
        ].join('\n'),
      });
      const deployment = asDeployment(chart.one('Deployment'));
      const pod = deployment.spec?.template.spec;
      const c = pod?.containers[0];
      assert.ok(pod && c);
      assert.equal(deployment.spec?.replicas, 1);
      assert.equal(c.image, 'registry.example.com/provisioner:1');
      const policy = (c.args ?? []).filter((a) => /^--(canary|waves|bake|progress|on-halt|listen|kube-api)/u.test(a));
      assert.deepEqual(policy, [
        '--canary-selector=tier in (canary, edge)',
        '--waves=5, 50%, 100%',
        '--bake-time=0s',
        '--progress-deadline=90s',
        '--on-halt=halt',
        '--listen-address=127.0.0.1:9100',
        '--kube-api-qps=5',
      ]);
      assert.deepEqual(c.ports, [{ name: 'metrics', containerPort: 9100 }]);
      assert.deepEqual(pod.nodeSelector, {
        'kubernetes.io/os': 'linux',
        'node-role.kubernetes.io/control-plane': '',
      });
      assert.deepEqual(pod.tolerations, [
        { key: 'node-role.kubernetes.io/control-plane', operator: 'Exists', effect: 'NoSchedule' },
      ]);
      assert.deepEqual(pod.affinity, { nodeAffinity: {} });
      assert.equal(pod.priorityClassName, 'system-cluster-critical');
      assert.deepEqual(deployment.spec.template.metadata?.annotations, { a: 'b' });
    });

    it('on: the agents read through the API whatever configSource says (a mounted ConfigMap cannot be staged)', () => {
      for (const source of ['directory', 'configmap']) {
        const r = templateChart({ release: 'lvp', namespace: 'storage', set: [...STAGED, `configSource=${source}`] });
        assert.equal(r.status, 0, r.stderr);
        assert.equal(r.stdout, rendered().text, `configSource=${source}`);
      }
    });

    it('refused: without status Leases; the schema checks onHalt, waves, durations and the listen port', () => {
      const noLeases = templateChart({ set: [...STAGED, 'statusLease.enabled=false'] });
      assert.notEqual(noLeases.status, 0);
      assert.match(noLeases.stderr, /stagedRollout\.enabled needs statusLease\.enabled: the rollout controller/u);
      for (const [values, message] of [
        ['stagedRollout: {onHalt: rollback}', /at '\/stagedRollout\/onHalt'/u],
        ['stagedRollout: {waves: "10%,50%,150%"}', /at '\/stagedRollout\/waves'/u],
        ['stagedRollout: {waves: "10%;100%"}', /at '\/stagedRollout\/waves'/u],
        ['stagedRollout: {waves: "0,100%"}', /at '\/stagedRollout\/waves'/u],
        ['stagedRollout: {bakeTime: "5 minutes"}', /at '\/stagedRollout\/bakeTime'/u],
        ['stagedRollout: {progressDeadline: 600}', /at '\/stagedRollout\/progressDeadline'/u],
        ['stagedRollout: {canary: {count: 0}}', /at '\/stagedRollout\/canary\/count'/u],
        ['stagedRollout: {canary: {selectors: "a=b"}}', /additional properties 'selectors' not allowed/u],
        ['stagedRollout: {controller: {listenAddress: ""}}', /at '\/stagedRollout\/controller\/listenAddress'/u],
        ['stagedRollout: {controler: {}}', /additional properties 'controler' not allowed/u],
      ] as const) {
        const r = templateChart({ values });
        assert.notEqual(r.status, 0, values);
        assert.match(r.stderr, /values don't meet the specifications of the schema/u, values);
        assert.match(r.stderr, message, `${values}\n${r.stderr}`);
      }
    });
  });

  describe('the example values (two classes, job cleaning, ServiceMonitor, PrometheusRule)', () => {
    const rendered = once(() => renderChart({ release: 'lvp', valuesFiles: [EXAMPLE] }));

    it('the ConfigMap loads with the agent loader into the expected normalized config', () => {
      const { config, text } = loadRenderedConfig({ release: 'lvp', valuesFiles: [EXAMPLE] });
      assert.match(text, /useJobForCleaning: "yes"/u, 'written as upstream writes it');
      assert.deepEqual(config, {
        storageClassMap: {
          'fast-disks': fastDisks,
          'local-block': {
            hostDir: '/mnt/local-block',
            mountDir: '/mnt/block',
            blockCleanerCommand: ['/scripts/quick_reset.sh'],
            volumeMode: 'Block',
            accessMode: 'ReadWriteOnce',
            fsType: '',
            namePattern: 'nvme-*,scsi-*',
            selector: [
              { matchExpressions: [{ key: 'storage.example.com/shelf', operator: 'In', values: ['shelf-a'] }] },
            ],
          },
        },
        nodeLabelsForPV: ['topology.kubernetes.io/zone', 'kubernetes.io/hostname'],
        labelsForPV: { team: 'storage' },
        useAlphaAPI: false,
        useJobForCleaning: true,
        jobTolerations: [{ key: 'dedicated', operator: 'Equal', value: 'storage', effect: 'NoSchedule' }],
        minResyncPeriod: '1h30m0s',
        useNodeNameOnly: true,
        setPVOwnerRef: true,
        removeNodeNotReadyTaint: false,
        provisionerNotReadyNodeTaintKey: '',
      });
    });

    it("gives the same config (hash) as upstream's chart rendered for the same values", () => {
      const upstream = parseConfigSnapshot(
        snapshotFromFileText(
          'helm-configmap.yaml',
          readFileSync(join(REPO_ROOT, 'test/fixtures/upstream/helm-configmap.yaml'), 'utf8'),
        ),
      );
      // The fixture's values differ from the example in one path only.
      const ours = loadRenderedConfig({ valuesFiles: [EXAMPLE], set: ['classes[1].hostDir=/dev/disk/by-id'] });
      assert.equal(ours.hash, upstream.hash);
    });

    it('two hostPath volumes at their mountDirs, the StorageClass settings, Service, ServiceMonitor and the two alerts', () => {
      const ds = asDaemonSet(rendered().one('DaemonSet'));
      const pod = ds.spec?.template.spec;
      const volumes = new Map((pod?.volumes ?? []).map((v) => [v.name, v]));
      const classMounts = (container(ds).volumeMounts ?? []).filter((m) => m.mountPropagation === 'HostToContainer');
      assert.deepEqual(
        classMounts.map((m) => [m.mountPath, volumes.get(m.name)?.hostPath?.path]),
        [
          ['/mnt/fast-disks', '/mnt/fast-disks'],
          ['/mnt/block', '/mnt/local-block'],
        ],
      );
      assert.ok(pod);
      assert.equal(pod.priorityClassName, 'system-node-critical');
      assert.deepEqual(pod.tolerations, [
        { key: 'dedicated', operator: 'Equal', value: 'storage', effect: 'NoSchedule' },
      ]);

      const block = asStorageClass(rendered().one('StorageClass', 'local-block'));
      assert.equal(block.provisioner, 'example.com/local-block');
      assert.equal(block.reclaimPolicy, 'Retain');

      const service = asService(rendered().one('Service'));
      assert.deepEqual(
        service.spec?.ports?.map((p) => [p.name, p.port]),
        [['metrics', 8080]],
      );
      const monitor = rendered().one('ServiceMonitor');
      assert.equal(monitor.apiVersion, 'monitoring.coreos.com/v1');
      assert.equal((monitor.metadata['labels'] as Record<string, string>)['release'], 'prometheus');

      const rule = rendered().one('PrometheusRule');
      const spec = rule['spec'] as { groups: { rules: { alert: string; expr: string; for: string }[] }[] };
      assert.deepEqual(
        spec.groups.flatMap((g) => g.rules.map((r) => [r.alert, r.expr, r.for])),
        [
          [
            'LocalVolumeProvisionerConfigReloadFailed',
            'max_over_time(local_volume_provisioner_config_last_reload_successful[5m]) == 0',
            '10m',
          ],
          [
            'LocalVolumeProvisionerConfigInconsistent',
            'count(count_values("hash", local_volume_provisioner_config_hash)) > 1',
            '15m',
          ],
        ],
      );
      assert.deepEqual(
        rendered()
          .all('ConfigMap')
          .map((o) => asConfigMap(o).metadata?.name),
        ['lvp-local-static-provisioner-config'],
      );
    });
  });

  describe('server-side dry-run apply on the real apiserver', () => {
    let kc: KubeConfig;
    const crdNames = ['servicemonitors.monitoring.coreos.com', 'prometheusrules.monitoring.coreos.com'];

    /** Minimal CRDs for the two prometheus-operator kinds (a bare apiserver has none). */
    function crd(kind: string, plural: string): V1CustomResourceDefinition {
      return {
        apiVersion: 'apiextensions.k8s.io/v1',
        kind: 'CustomResourceDefinition',
        metadata: { name: `${plural}.monitoring.coreos.com` },
        spec: {
          group: 'monitoring.coreos.com',
          names: { kind, plural, listKind: `${kind}List`, singular: kind.toLowerCase() },
          scope: 'Namespaced',
          versions: [
            {
              name: 'v1',
              served: true,
              storage: true,
              schema: {
                openAPIV3Schema: {
                  type: 'object',
                  properties: { spec: { type: 'object', x_kubernetes_preserve_unknown_fields: true } },
                },
              },
            },
          ],
        },
      };
    }

    before(async () => {
      requireTestControlPlane();
      kc = adminKubeConfig();
      const ext = kc.makeApiClient(ApiextensionsV1Api);
      for (const body of [crd('ServiceMonitor', 'servicemonitors'), crd('PrometheusRule', 'prometheusrules')]) {
        try {
          await ext.createCustomResourceDefinition({ body });
        } catch (error) {
          if (apiStatusCode(error) !== 409) throw error;
        }
      }
      const deadline = Date.now() + 30_000;
      for (const name of crdNames) {
        for (;;) {
          const crdNow = await ext.readCustomResourceDefinition({ name });
          if (crdNow.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True') === true) break;
          if (Date.now() > deadline) assert.fail(`CRD ${name} not established`);
          await delay(100);
        }
      }
    });

    after(async () => {
      const ext = kc.makeApiClient(ApiextensionsV1Api);
      for (const name of crdNames) {
        try {
          await ext.deleteCustomResourceDefinition({ name });
        } catch (error) {
          if (apiStatusCode(error) !== 404) throw error;
        }
      }
      const deadline = Date.now() + 30_000;
      for (const name of crdNames) {
        for (;;) {
          try {
            await ext.readCustomResourceDefinition({ name });
          } catch (error) {
            if (apiStatusCode(error) === 404) break;
            throw error;
          }
          if (Date.now() > deadline) assert.fail(`CRD ${name} still exists`);
          await delay(100);
        }
      }
    });

    async function dryRunApply(objects: readonly RenderedObject[]): Promise<string[]> {
      const client = KubernetesObjectApi.makeApiClient(kc);
      const applied: string[] = [];
      for (const object of objects) {
        const what = `${object.kind}/${object.metadata.name}`;
        // Discovery of a just-established CRD can lag a moment: retry a 404 briefly.
        for (let attempt = 1; ; attempt++) {
          try {
            const result = await client.patch(
              object,
              undefined,
              'All',
              `lvp-test-${suffix}`,
              true,
              PatchStrategy.ServerSideApply,
            );
            assert.equal(result.kind, object.kind, what);
            applied.push(what);
            break;
          } catch (error) {
            if (attempt < 50 && (apiStatusCode(error) === 404 || /resource .* not found/iu.test(String(error)))) {
              await delay(200);
              continue;
            }
            assert.fail(`${what}: server-side dry-run apply failed: ${String(error)}`);
          }
        }
      }
      return applied;
    }

    it('with the default values; nothing is stored, and an invalid object is refused', async () => {
      const rendered = renderChart({ release: `lvp-dry-${suffix}` });
      const applied = await dryRunApply(rendered.objects);
      assert.equal(applied.length, rendered.objects.length);
      const client = KubernetesObjectApi.makeApiClient(kc);
      const role = rendered.one('ClusterRole');
      await assert.rejects(
        client.read({ apiVersion: role.apiVersion, kind: role.kind, metadata: { name: role.metadata.name } }),
        (error: unknown) => apiStatusCode(error) === 404,
        'a dry run stores nothing',
      );
      // The server validates what a dry run sends: a volume name that is not a DNS label is refused.
      const ds = asDaemonSet(rendered.one('DaemonSet'));
      const broken = structuredClone(ds);
      const firstVolume = broken.spec?.template.spec?.volumes?.[0];
      assert.ok(firstVolume);
      firstVolume.name = 'not.a.dns_label';
      await assert.rejects(
        client.patch(broken, undefined, 'All', `lvp-test-${suffix}`, true, PatchStrategy.ServerSideApply),
        (error: unknown) => apiStatusCode(error) === 422,
      );
    });

    it('with the example values (ServiceMonitor and PrometheusRule through minimal CRDs)', async () => {
      const rendered = renderChart({ release: `lvp-dry-${suffix}`, valuesFiles: [EXAMPLE] });
      const applied = await dryRunApply(rendered.objects);
      assert.ok(applied.some((a) => a.startsWith('ServiceMonitor/')));
      assert.ok(applied.some((a) => a.startsWith('PrometheusRule/')));
      assert.equal(applied.length, rendered.objects.length);
    });

    it('with node cleanup on (its Deployment, ServiceAccount and RBAC)', async () => {
      const rendered = renderChart({ release: `lvp-nc-${suffix}`, set: ['nodeCleanup.enabled=true'] });
      const applied = await dryRunApply(rendered.objects);
      assert.ok(applied.some((a) => a.startsWith('Deployment/')));
      assert.equal(applied.length, rendered.objects.length);
    });

    it('with staged rollout on (the rollout controller Deployment, its ServiceAccount and RBAC)', async () => {
      const rendered = renderChart({
        release: `lvp-sr-${suffix}`,
        set: ['stagedRollout.enabled=true'],
      });
      const applied = await dryRunApply(rendered.objects);
      assert.ok(applied.includes(`Deployment/lvp-sr-${suffix}-local-static-provisioner-rollout-controller`));
      assert.equal(applied.length, rendered.objects.length);
    });

    it('stagedRollout on: NOTES.txt names the controller, how to watch a rollout and how to pause, resume, abort or promote it (helm install --dry-run)', () => {
      // `install --dry-run=client` asks the cluster for its version first.
      const kube = { KUBECONFIG: requireTestControlPlane().kubeconfigPath };
      const r = runHelm(
        [
          'install',
          'lvp',
          CHART_DIR,
          '--dry-run=client',
          '--namespace',
          'storage',
          '--set',
          'stagedRollout.enabled=true',
        ],
        kube,
      );
      assert.equal(r.status, 0, r.stderr);
      assert.match(r.stdout, /Staged rollout is on: .*canary first/su);
      assert.match(r.stdout, /Deployment storage\/lvp-local-static-provisioner-rollout-controller/u);
      assert.match(r.stdout, /provisioner rollout status -n storage --name lvp-local-static-provisioner --wait/u);
      for (const action of ['pause', 'resume', 'abort', 'promote'])
        assert.match(
          r.stdout,
          new RegExp(`^ {2}provisioner rollout ${action} -n storage --name lvp-local-static-provisioner +# `, 'mu'),
        );
      const off = runHelm(['install', 'lvp', CHART_DIR, '--dry-run=client'], kube);
      assert.equal(off.status, 0, off.stderr);
      assert.doesNotMatch(off.stdout, /Staged rollout/u);
    });

    it('the plain manifests deploy/provisioner.yaml (namespace kube-system)', async () => {
      const objects = renderChart({ release: 'local-static-provisioner', namespace: 'kube-system' }).objects;
      assert.equal((await dryRunApply(objects)).length, objects.length);
    });
  });

  it('deploy/provisioner.yaml is what scripts/render-manifests.sh renders now', () => {
    const dir = mkdtempSync(join(tmpdir(), 'lvp-render-'));
    try {
      const out = join(dir, 'provisioner.yaml');
      const r = spawnSync('bash', [join(REPO_ROOT, 'scripts/render-manifests.sh'), out], {
        cwd: REPO_ROOT,
        encoding: 'utf8',
        env: { ...process.env, HELM: helmBinary() },
      });
      assert.equal(r.status, 0, r.stderr);
      assert.equal(
        readFileSync(join(REPO_ROOT, 'deploy/provisioner.yaml'), 'utf8'),
        readFileSync(out, 'utf8'),
        'deploy/provisioner.yaml is out of date: run `bash scripts/render-manifests.sh`',
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
