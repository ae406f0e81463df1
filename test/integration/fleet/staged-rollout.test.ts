// Staged config rollout end to end: four real agents (`provisioner run --config-source staged:…`,
// each in its own mount namespace, so a discovery directory can exist on some nodes and not on
// others, as on real nodes) and the real controller (`provisioner rollout controller`) against the
// real apiserver, every process with the chart's args and a ServiceAccount token bound to exactly
// the chart's RBAC. The operator only ever edits the chart's ConfigMap.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { V1Container, V1DaemonSet, V1Deployment } from '@kubernetes/client-node';
import { parseConfigSnapshot } from '../../../src/core/config/decode/parse.js';
import { snapshotFromDirectoryFiles } from '../../../src/core/config/decode/layout.js';
import { stateFromLease, statusLeaseName, statusSelector } from '../../../src/core/fleet/applied-state.js';
import { KubeApiError } from '../../../src/core/kube/cluster.js';
import { loadKubeconfig } from '../../../src/core/kube/kubeconfig.js';
import type { ConfigMap } from '../../../src/core/kube/objects.js';
import { RestCluster } from '../../../src/core/kube/rest-cluster.js';
import { stagedConfigMapName, stateOf } from '../../../src/core/rollout-state/annotations.js';
import type { RolloutState } from '../../../src/core/rollout-state/state.js';
import { waveMembers } from '../../../src/core/rollout-state/membership.js';
import { CLI, runCli } from '../../support/cli.js';
import { forbiddenLogLines, rbacRolesFromManifests, tokenForServiceAccount } from '../../support/cluster.js';
import type { RbacRole, ServiceAccountAccess } from '../../support/cluster.js';
import { kubeconfigYaml } from '../../support/control-plane.js';
import { eventually } from '../../support/eventually.js';
import { renderChart } from '../../support/helm.js';
import type { Rendered } from '../../support/helm.js';
import { Cleanup, makeTempDir, skipUnlessRoot } from '../../support/real-node.js';
import { adminKubeConfig, requireTestControlPlane } from '../../support/test-cluster.js';
import { isRecord } from '../../../src/core/unknown-values.js';

const suffix = Math.random().toString(36).slice(2, 8);
const NAMESPACE = 'default';
const RELEASE = `lvp-sr-${suffix}`;
const CANARY_LABEL = 'lvp-staged-canary';

interface Agent {
  readonly node: string;
  child: ChildProcess;
  log: string;
}

void describe('staged config rollout: real agents, the real controller, the chart', { skip: skipUnlessRoot() }, () => {
  const cleanup = new Cleanup();
  const nodes = [0, 1, 2, 3].map((i) => `sr-${String(i)}-${suffix}`);
  const canary = nodes[0] ?? '';
  const classA = `${RELEASE}-a`;
  const classExtra = `${RELEASE}-extra`;
  const agents = new Map<string, Agent>();
  const controllers: { child: ChildProcess; log: string }[] = [];
  const accesses: ServiceAccountAccess[] = [];
  let cluster: RestCluster;
  let root = '';
  let view = '';
  let rendered: Rendered;
  let configMapName = '';
  let instance = '';
  let agentKubeconfig = '';
  let controllerKubeconfig = '';
  /** For each node, every config hash its Lease was ever seen with (polled every 100 ms). */
  const seen = new Map<string, Set<string>>();
  let polling = true;
  let poller: Promise<void> = Promise.resolve();

  // ---- configs -------------------------------------------------------------------------------

  function config(namePattern: string, extra = false): Record<string, string> {
    const cls = (name: string, dir: string): string =>
      `${name}:\n  hostDir: ${dir}\n  mountDir: ${dir}\n  namePattern: "${namePattern}"\n`;
    return {
      storageClassMap: cls(classA, join(view, 'disks')) + (extra ? cls(classExtra, join(view, 'extra')) : ''),
    };
  }
  function hashOf(data: Record<string, string>): string {
    return parseConfigSnapshot(
      snapshotFromDirectoryFiles(
        '/x',
        Object.entries(data).map(([name, text]) => ({ name, text })),
      ),
    ).hash;
  }
  async function apply(data: Record<string, string>): Promise<void> {
    const existing = await cluster.configMaps.get(configMapName, { namespace: NAMESPACE }).catch(() => undefined);
    if (existing === undefined)
      await cluster.configMaps.create({ metadata: { name: configMapName, namespace: NAMESPACE }, data });
    else await cluster.configMaps.update({ ...existing, data }, { namespace: NAMESPACE });
  }
  async function rolloutState(): Promise<RolloutState | undefined> {
    const cm = await cluster.configMaps
      .get(stagedConfigMapName(configMapName, 'candidate'), { namespace: NAMESPACE })
      .catch(() => undefined);
    const decoded = stateOf(cm);
    return decoded?.ok === true ? decoded.state : undefined;
  }
  async function stateWhere(what: string, check: (s: RolloutState) => boolean, ms = 60_000): Promise<RolloutState> {
    return eventually(
      async () => {
        const s = await rolloutState();
        return s !== undefined && check(s) ? s : undefined;
      },
      `${what}; controller log: ${controllers.at(-1)?.log.slice(-3000) ?? ''}`,
      ms,
    );
  }
  async function appliedHash(node: string): Promise<string | undefined> {
    const lease = await cluster.leases
      .get(statusLeaseName(instance, node), { namespace: NAMESPACE })
      .catch(() => undefined);
    return lease === undefined ? undefined : stateFromLease(lease)?.appliedHash;
  }
  async function allOn(hash: string, which: readonly string[] = nodes): Promise<void> {
    await eventually(
      async () => ((await Promise.all(which.map(appliedHash))).every((h) => h === hash) ? true : undefined),
      `${which.join(',')} on ${hash}; logs: ${[...agents.values()].map((a) => a.log.slice(-1500)).join('\n')}`,
      60_000,
    );
  }
  async function events(reason: string): Promise<string[]> {
    const core = await cluster.events.list({ namespace: NAMESPACE });
    return core.items
      .filter((e) => e.involvedObject.name === configMapName && e.reason === reason)
      .sort((a, b) => (a.metadata.creationTimestamp ?? '').localeCompare(b.metadata.creationTimestamp ?? ''))
      .map((e) => e.message);
  }

  // ---- processes -----------------------------------------------------------------------------

  function container(kind: 'DaemonSet' | 'Deployment', name?: string): V1Container {
    const objects = rendered.objects.filter((o) => o.kind === kind && (name === undefined || o.metadata.name === name));
    assert.equal(objects.length, 1, `one ${kind}${name !== undefined ? ` ${name}` : ''} in the chart`);
    const object = objects[0] as unknown as V1DaemonSet | V1Deployment;
    const c = object.spec?.template.spec?.containers[0];
    assert.ok(c);
    return c;
  }

  /** The DaemonSet's container on `node`, in a mount namespace where `view` is this node's own directory. */
  function startAgent(node: string): Agent {
    const [command, ...chartArgs] = container('DaemonSet').args ?? [];
    assert.equal(command, 'run');
    const replaced = new Set(['--config-dir', '--discovery-period', '--admin-socket', '--listen-address']);
    const args = [
      CLI,
      'run',
      ...chartArgs.filter((a) => !replaced.has(a.split('=')[0] ?? '')),
      `--config-dir=${join(root, 'no-fallback')}`,
      '--discovery-period=500ms',
      `--admin-socket=${join(root, `${node}.sock`)}`,
      '--listen-address=127.0.0.1:0',
    ];
    const child = spawn(
      'unshare',
      [
        '--mount',
        '--propagation',
        'private',
        '--',
        'sh',
        '-c',
        'mount --bind "$1" "$2" && shift 2 && exec "$@"',
        'sh',
        join(root, 'nodes', node),
        view,
        process.execPath,
        ...args,
      ],
      {
        env: {
          PATH: process.env['PATH'] ?? '/usr/bin:/bin',
          MY_NODE_NAME: node,
          MY_NAMESPACE: NAMESPACE,
          KUBECONFIG: agentKubeconfig,
        },
        stdio: ['ignore', 'ignore', 'pipe'],
      },
    );
    const agent: Agent = { node, child, log: '' };
    child.stderr.setEncoding('utf8').on('data', (d: string) => (agent.log += d));
    agents.set(node, agent);
    return agent;
  }

  function startController(): { child: ChildProcess; log: string } {
    const name = rendered.objects.find((o) => o.kind === 'Deployment' && o.metadata.name.endsWith('rollout-controller'))
      ?.metadata.name;
    const [topic, command, ...chartArgs] = container('Deployment', name).args ?? [];
    assert.deepEqual([topic, command], ['rollout', 'controller']);
    const replaced = new Set([
      '--listen-address',
      '--leader-elect-lease-duration',
      '--leader-elect-renew-deadline',
      '--leader-elect-retry-period',
    ]);
    const child = spawn(
      process.execPath,
      [
        CLI,
        'rollout',
        'controller',
        ...chartArgs.filter((a) => !replaced.has(a.split('=')[0] ?? '')),
        '--listen-address=127.0.0.1:0',
        // Short terms, so a successor of a killed controller takes over within seconds.
        '--leader-elect-lease-duration=3s',
        '--leader-elect-renew-deadline=2s',
        '--leader-elect-retry-period=500ms',
      ],
      {
        env: {
          PATH: process.env['PATH'] ?? '/usr/bin:/bin',
          POD_NAMESPACE: NAMESPACE,
          POD_NAME: `controller-${String(controllers.length)}`,
          KUBECONFIG: controllerKubeconfig,
        },
        stdio: ['ignore', 'ignore', 'pipe'],
      },
    );
    const c = { child, log: '' };
    child.stderr.setEncoding('utf8').on('data', (d: string) => (c.log += d));
    controllers.push(c);
    return c;
  }

  async function stopProcess(child: ChildProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => {
      child.once('exit', () => {
        resolve();
      });
    });
    child.kill(signal);
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  }

  /** Roles of the rendered chart by the ServiceAccount their bindings name. */
  function rolesBySubject(): Map<string, RbacRole[]> {
    const roles = new Map(rbacRolesFromManifests(rendered.text).map((r) => [`${r.kind}/${r.metadata?.name ?? ''}`, r]));
    const bySubject = new Map<string, RbacRole[]>();
    for (const o of rendered.objects) {
      if (o.kind !== 'RoleBinding' && o.kind !== 'ClusterRoleBinding') continue;
      const roleRef = (o as unknown as { roleRef: { kind: string; name: string } }).roleRef;
      const subjects = (o as unknown as { subjects?: { kind: string; name: string }[] }).subjects ?? [];
      const role = roles.get(`${roleRef.kind}/${roleRef.name}`);
      assert.ok(role, `${o.kind} ${o.metadata.name} binds a role of the chart`);
      for (const s of subjects)
        if (s.kind === 'ServiceAccount') bySubject.set(s.name, [...(bySubject.get(s.name) ?? []), role]);
    }
    return bySubject;
  }

  function serviceAccountOf(kind: 'DaemonSet' | 'Deployment', name?: string): string {
    const object = rendered.objects.find(
      (o) => o.kind === kind && (name === undefined || o.metadata.name === name),
    ) as unknown as V1DaemonSet | V1Deployment | undefined;
    const sa = object?.spec?.template.spec?.serviceAccountName;
    assert.ok(sa !== undefined && sa !== '', `${kind} names its ServiceAccount`);
    return sa;
  }

  before(async () => {
    const plane = requireTestControlPlane();
    const admin = adminKubeConfig();
    cluster = new RestCluster({ connection: await loadKubeconfig(plane.kubeconfigPath) });
    root = makeTempDir(cleanup, 'lvp-staged-');
    view = join(root, 'view');
    mkdirSync(view);
    for (const node of nodes) {
      mkdirSync(join(root, 'nodes', node, 'disks'), { recursive: true });
      // The extra class's directory exists on every node but the canary.
      if (node !== canary) mkdirSync(join(root, 'nodes', node, 'extra'));
      await cluster.nodes.create({
        metadata: {
          name: node,
          labels: { 'kubernetes.io/hostname': node, ...(node === canary ? { [CANARY_LABEL]: suffix } : {}) },
        },
      });
      seen.set(node, new Set());
    }
    for (const name of [classA, classExtra]) {
      await cluster.storageClasses.create({
        metadata: { name },
        provisioner: 'kubernetes.io/no-provisioner',
        volumeBindingMode: 'WaitForFirstConsumer',
        reclaimPolicy: 'Delete',
      });
    }
    rendered = renderChart({
      release: RELEASE,
      namespace: NAMESPACE,
      values: [
        'classes: []',
        'stagedRollout:',
        '  enabled: true',
        '  canary:',
        `    selector: ${CANARY_LABEL}=${suffix}`,
        '  waves: 50%,100%',
        '  bakeTime: 0s',
        '  progressDeadline: 60s',
        '  onHalt: revert',
      ].join('\n'),
    });
    const sourceArg = (container('DaemonSet').args ?? []).find((a) => a.startsWith('--config-source'));
    const match = /^--config-source[= ]staged:(?:[^/]+\/)?(.+)$/u.exec(sourceArg ?? '');
    assert.ok(match?.[1], `the DaemonSet reads a staged source: ${String(sourceArg)}`);
    configMapName = match[1];
    const statusArg = (container('DaemonSet').args ?? []).find((a) => a.startsWith('--status-name'));
    instance = statusArg?.split('=')[1] ?? 'local-static-provisioner';

    const bySubject = rolesBySubject();
    const agentSa = serviceAccountOf('DaemonSet');
    const controllerName = rendered.objects.find(
      (o) => o.kind === 'Deployment' && o.metadata.name.endsWith('rollout-controller'),
    )?.metadata.name;
    const controllerSa = serviceAccountOf('Deployment', controllerName);
    assert.notEqual(agentSa, controllerSa, 'the controller runs as its own ServiceAccount');
    const agentAccess = await tokenForServiceAccount(admin, NAMESPACE, agentSa, ...(bySubject.get(agentSa) ?? []));
    accesses.push(agentAccess);
    const controllerAccess = await tokenForServiceAccount(
      admin,
      NAMESPACE,
      controllerSa,
      ...(bySubject.get(controllerSa) ?? []),
    );
    accesses.push(controllerAccess);
    agentKubeconfig = join(root, 'agent.kubeconfig');
    controllerKubeconfig = join(root, 'controller.kubeconfig');
    writeFileSync(agentKubeconfig, kubeconfigYaml(plane.server, plane.caFile, agentAccess.token, 'agent'));
    writeFileSync(
      controllerKubeconfig,
      kubeconfigYaml(plane.server, plane.caFile, controllerAccess.token, 'controller'),
    );

    // The operator's ConfigMap as installed; the controller adopts it as stable, the agents start on it.
    await apply(config('*'));
    startController();
    await stateWhere('the controller adopts the ConfigMap as stable', (s) => s.phase === 'complete');
    for (const node of nodes) startAgent(node);
    await allOn(hashOf(config('*')));
    poller = (async () => {
      while (polling) {
        for (const node of nodes) {
          const h = await appliedHash(node).catch(() => undefined);
          if (h !== undefined) seen.get(node)?.add(h);
        }
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
  });

  after(async () => {
    polling = false;
    await poller;
    await Promise.all([...agents.values()].map((a) => stopProcess(a.child)));
    await Promise.all(controllers.map((c) => stopProcess(c.child)));
    try {
      const leases = await cluster.leases.list({ namespace: NAMESPACE, labelSelector: statusSelector(instance) });
      for (const lease of leases.items)
        await cluster.leases.delete(lease.metadata.name, { namespace: NAMESPACE }).catch(() => undefined);
      for (const name of [
        configMapName,
        stagedConfigMapName(configMapName, 'stable'),
        stagedConfigMapName(configMapName, 'candidate'),
      ])
        await cluster.configMaps.delete(name, { namespace: NAMESPACE }).catch(() => undefined);
      for (const node of nodes) await cluster.nodes.delete(node).catch(() => undefined);
      for (const name of [classA, classExtra]) await cluster.storageClasses.delete(name).catch(() => undefined);
      for (const access of accesses) await access.cleanup();
    } finally {
      cluster.close();
      cleanup.run();
    }
  });

  void it('a good candidate opens the canary, then each wave in order, and becomes stable', async () => {
    const x1 = config('disk-*');
    const h1 = hashOf(x1);
    await apply(x1);
    const done = await stateWhere('the rollout completes', (s) => s.phase === 'complete' && s.candidate.hash === h1);
    assert.deepEqual(
      done.waves.map((w) => w.name),
      ['canary', 'wave-1', 'wave-2'],
    );
    assert.deepEqual(done.waves[0]?.nodes, [canary]);
    await allOn(h1);
    const stable = await cluster.configMaps.get(stagedConfigMapName(configMapName, 'stable'), { namespace: NAMESPACE });
    assert.deepEqual(stable.data, x1);
    const opened = (await events('RolloutWaveOpened')).filter((m) => m.includes(h1.slice(0, 15)));
    assert.deepEqual(
      opened.map((m) => /: (\S+) opened/u.exec(m)?.[1]),
      ['wave-1', 'wave-2'],
      'the canary opens with the start, then each wave once, in order',
    );
    assert.equal((await events('RolloutCompleted')).filter((m) => m.includes(h1.slice(0, 15))).length, 1);
  });

  void it('a candidate that fails on the canary halts there: the other nodes never apply it, the canary reverts', async () => {
    const before = await rolloutState();
    const stableHash = before?.stable.hash ?? '';
    const x2 = config('disk-*', true);
    const h2 = hashOf(x2);
    await apply(x2);
    const halted = await stateWhere('the rollout halts', (s) => s.phase === 'halted' && s.candidate.hash === h2);
    const halt = halted.halt;
    assert.ok(halt);
    assert.equal(halt.node, canary);
    assert.equal(halt.wave, 0);
    assert.match(halt.reason, /discovery or cleanup error/u);
    assert.equal(halted.reverted, true);
    await allOn(stableHash);
    // the halt's reason says the canary ran it (errors since it applied it); the 100 ms poll of its
    // Lease may miss so short a stay on a loaded machine
    assert.ok(
      (seen.get(canary)?.has(h2) ?? false) || /since it applied the candidate/u.test(halt.reason),
      'the canary applied the candidate before it halted',
    );
    for (const node of nodes.slice(1)) assert.ok(!(seen.get(node)?.has(h2) ?? false), `${node} never applied it`);
    // Not only what the poll saw: no wave past the canary ever opened (the canary's applied
    // candidate counts only once a discovery pass under it finished, and that pass failed).
    assert.equal(halted.opened, 1, 'only the canary was open');
    assert.deepEqual(
      (await events('RolloutWaveOpened')).filter((m) => m.includes(h2.slice(0, 15))),
      [],
      'no RolloutWaveOpened for the failing candidate',
    );
    const warnings = await events('RolloutHalted');
    assert.match(warnings.at(-1) ?? '', new RegExp(`halted at canary: node ${canary}: `, 'u'));
    // `rollout status --wait` reports the halt and exits 1.
    const status = await runCli(
      [
        'rollout',
        'status',
        '-n',
        NAMESPACE,
        '--name',
        instance,
        '--configmap',
        `${NAMESPACE}/${configMapName}`,
        '--wait',
        '--timeout',
        '20s',
        '-o',
        'json',
      ],
      {
        env: { KUBECONFIG: requireTestControlPlane().kubeconfigPath },
        timeoutMs: 60_000,
      },
    );
    assert.equal(status.code, 1, status.stdout + status.stderr);
    const json: unknown = JSON.parse(status.stdout);
    assert.ok(isRecord(json) && isRecord(json['staged']));
    assert.equal(json['staged']['phase'], 'halted');
  });

  void it('a new apply mid-rollout supersedes the candidate and starts again from the canary', async () => {
    // The canary cannot finish while stopped: its wave stays open.
    const canaryAgent = agents.get(canary);
    assert.ok(canaryAgent);
    canaryAgent.child.kill('SIGSTOP');
    try {
      const x3 = config('disk-3-*');
      await apply(x3);
      await stateWhere(
        'the canary opens for x3',
        (s) => s.phase === 'progressing' && s.candidate.hash === hashOf(x3) && s.opened === 1,
      );
      const x4 = config('disk-4-*');
      const h4 = hashOf(x4);
      await apply(x4);
      const restarted = await stateWhere('x4 supersedes x3', (s) => s.candidate.hash === h4);
      assert.equal(restarted.phase, 'progressing');
      assert.equal(restarted.opened, 1, 'from the canary again');
      assert.match((await events('RolloutSuperseded')).at(-1) ?? '', /superseded/u);
      canaryAgent.child.kill('SIGCONT');
      await stateWhere('x4 completes', (s) => s.phase === 'complete' && s.candidate.hash === h4);
      await allOn(h4);
      // The canary may still apply x3 on its way to x4 (it was stopped with both in its watch); no other node does.
      for (const node of nodes.slice(1))
        assert.ok(!(seen.get(node)?.has(hashOf(x3)) ?? false), `${node} never applied the superseded x3`);
    } finally {
      canaryAgent.child.kill('SIGCONT');
    }
  });

  void it('a restarted agent outside the open waves starts on stable, one inside on the candidate', async () => {
    const canaryAgent = agents.get(canary);
    assert.ok(canaryAgent);
    const stableHash = (await rolloutState())?.stable.hash ?? '';
    canaryAgent.child.kill('SIGSTOP');
    const outside = nodes[3] ?? '';
    try {
      const x5 = config('disk-5-*');
      const h5 = hashOf(x5);
      await apply(x5);
      await stateWhere('the canary opens for x5', (s) => s.candidate.hash === h5 && s.opened === 1);
      const old = agents.get(outside);
      assert.ok(old);
      await stopProcess(old.child);
      await cluster.leases.delete(statusLeaseName(instance, outside), { namespace: NAMESPACE });
      const fresh = startAgent(outside);
      await eventually(
        async () => appliedHash(outside),
        `${outside} publishes again; log: ${fresh.log.slice(-2000)}`,
        30_000,
      );
      assert.equal(await appliedHash(outside), stableHash, 'outside the open waves: stable');
      canaryAgent.child.kill('SIGCONT');
      await eventually(
        async () => ((await appliedHash(canary)) === h5 ? true : undefined),
        'the canary applies x5',
        30_000,
      );
      // The canary restarted inside its open wave comes back on the candidate (the rollout may have moved on: still h5).
      await stopProcess(canaryAgent.child);
      await cluster.leases.delete(statusLeaseName(instance, canary), { namespace: NAMESPACE });
      startAgent(canary);
      await eventually(
        async () => ((await appliedHash(canary)) === h5 ? true : undefined),
        'the restarted canary starts on x5',
        30_000,
      );
      await stateWhere('x5 completes', (s) => s.phase === 'complete' && s.candidate.hash === h5);
      await allOn(h5);
    } finally {
      canaryAgent.child.kill('SIGCONT');
    }
  });

  void it('a controller killed mid-wave resumes from the stored state: no wave opens twice', async () => {
    // wave-2's node stays behind (stopped), so wave-2 stays open while the controller is killed.
    const state = await rolloutState();
    assert.ok(state);
    const lastWave = waveMembers(state.waves, agents.keys()).at(-1)?.[0] ?? '';
    const straggler = agents.get(lastWave);
    assert.ok(straggler);
    straggler.child.kill('SIGSTOP');
    try {
      const x6 = config('disk-6-*');
      const h6 = hashOf(x6);
      await apply(x6);
      await stateWhere('the last wave opens for x6', (s) => s.candidate.hash === h6 && s.opened === s.waves.length);
      const first = controllers.at(-1);
      assert.ok(first);
      await stopProcess(first.child, 'SIGKILL');
      startController();
      straggler.child.kill('SIGCONT');
      await stateWhere(
        'x6 completes under the new controller',
        (s) => s.phase === 'complete' && s.candidate.hash === h6,
      );
      await allOn(h6);
      const short = h6.slice(0, 15);
      assert.equal((await events('RolloutStarted')).filter((m) => m.includes(short)).length, 1);
      // Each wave opened once: no Event twice. The killed controller may not have sent the Event of
      // the wave it opened last (Events are best effort, recorded after the state write).
      const opened = (await events('RolloutWaveOpened'))
        .filter((m) => m.includes(short))
        .map((m) => /: (\S+) opened/u.exec(m)?.[1]);
      assert.ok(
        JSON.stringify(opened) === JSON.stringify(['wave-1', 'wave-2']) ||
          JSON.stringify(opened) === JSON.stringify(['wave-1']),
        `each wave's opening recorded at most once, in order: ${JSON.stringify(opened)}`,
      );
      assert.equal((await events('RolloutCompleted')).filter((m) => m.includes(short)).length, 1);
    } finally {
      straggler.child.kill('SIGCONT');
    }
  });

  void it("every process ran with exactly the chart's RBAC: nothing forbidden, and nothing more", async () => {
    for (const a of agents.values()) assert.deepEqual(forbiddenLogLines(a.log), [], `${a.node}'s log`);
    for (const c of controllers) assert.deepEqual(forbiddenLogLines(c.log), [], 'the controller log');
    // Least privilege: an agent cannot read the operator's ConfigMap nor write a copy.
    const agentCluster = new RestCluster({ connection: await loadKubeconfig(agentKubeconfig) });
    try {
      const denied = async (what: string, call: () => Promise<unknown>): Promise<void> => {
        const err = await call().then(
          () => undefined,
          (e: unknown) => e,
        );
        assert.ok(
          err instanceof KubeApiError && err.status === 403,
          `${what} is forbidden to the agents: ${String(err)}`,
        );
      };
      await denied('reading the operator ConfigMap', () =>
        agentCluster.configMaps.get(configMapName, { namespace: NAMESPACE }),
      );
      const candidate: ConfigMap = await cluster.configMaps.get(stagedConfigMapName(configMapName, 'candidate'), {
        namespace: NAMESPACE,
      });
      await denied('writing the candidate copy', () =>
        agentCluster.configMaps.update(candidate, { namespace: NAMESPACE }),
      );
      await agentCluster.configMaps
        .get(stagedConfigMapName(configMapName, 'stable'), { namespace: NAMESPACE })
        .catch((err: unknown) => assert.fail(`an agent reads the stable copy: ${String(err)}`));
    } finally {
      agentCluster.close();
    }
  });
});
