// The agent on a node whose CPU its tenants use to the full: the chart on a real kubelet node, a
// tenant pod that requests 1,500m and spins on both cores, and the agent with its 10m request
// publishing a new disk every --every seconds. Counted per probe setting: the kubelet's liveness
// restarts of the agent, its failed probes, and mount → PV times. Each setting gets its own agent
// pod (helm upgrade), then the same window of load.
//
// Usage (root, after `npm run build`): node dist/bench/starved-agent.js [--seconds 180] [--every 20]
//   [--settings chart,tight]   chart: the chart's probes; tight: 10 s × 3 with a 5 s timeout, no startup probe
// Lint: client-node's models are plain data classes; object literals are what its API takes.
/* eslint-disable @typescript-eslint/no-unsafe-class-instance-assignment */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { ChartNode, CHART_FULLNAME, CHART_NS } from '../test/support/chart-node.js';
import { eventually } from '../test/support/eventually.js';
import { isReady } from '../test/support/node-pods.js';
import { Cleanup, mountTmpfs } from '../test/support/real-node.js';
import { livenessKills } from '../test/support/soak/agent-logs.js';
import { kubeBinDir, median, numberFlag } from './support.js';

const SECONDS = numberFlag('--seconds', 180);
const EVERY = numberFlag('--every', 20);
const settingsFlag = process.argv.indexOf('--settings');
const SETTINGS = (settingsFlag > 0 ? (process.argv[settingsFlag + 1] ?? '') : 'tight,chart').split(',');

const HEALTHZ = { httpGet: { path: '/healthz', port: 'metrics' } };
/** Both probes given whole for each setting (the upgrades reuse the values before them). */
const PROBES: Record<string, Record<string, unknown>> = {
  chart: {
    livenessProbe: { ...HEALTHZ, periodSeconds: 20, timeoutSeconds: 10, failureThreshold: 6 },
    startupProbe: { ...HEALTHZ, periodSeconds: 5, timeoutSeconds: 5, failureThreshold: 60 },
  },
  tight: {
    livenessProbe: { ...HEALTHZ, periodSeconds: 10, timeoutSeconds: 5, failureThreshold: 3 },
    startupProbe: {},
  },
};

interface Window {
  readonly setting: string;
  readonly livenessKills: number;
  readonly probeFailures: number;
  readonly publishMs: readonly number[];
  readonly unpublished: number;
}

const probeFailures = (log: string): number =>
  log.split('\n').filter((l) => l.includes('"Probe failed"') && l.includes(`pod="${CHART_NS}/${CHART_FULLNAME}-`))
    .length;

/** The tenant: two containers spinning, 1,500m requested (Burstable, as a busy tenant's pod). */
async function spin(env: ChartNode, on: boolean): Promise<void> {
  if (!on) {
    await env.core.deleteNamespacedPod({ name: 'spin', namespace: CHART_NS, gracePeriodSeconds: 0 });
    // gone: a read fails (404)
    await eventually(
      () =>
        env.core.readNamespacedPod({ name: 'spin', namespace: CHART_NS }).then(
          () => undefined,
          () => true,
        ),
      'the spinning tenant gone',
      60_000,
      200,
    );
    return;
  }
  await env.core.createNamespacedPod({
    namespace: CHART_NS,
    body: {
      metadata: { name: 'spin' },
      spec: {
        terminationGracePeriodSeconds: 0,
        containers: [0, 1].map((i) => ({
          name: `spin${String(i)}`,
          image: env.image,
          imagePullPolicy: 'Never',
          command: ['node', '-e', 'for (;;) {}'],
          resources: { requests: { cpu: '750m' } },
        })),
      },
    },
  });
}

async function window(env: ChartNode, cleanup: Cleanup, hostDir: string, setting: string): Promise<Window> {
  const log = env.node.logs.kubelet;
  const from = readFileSync(log, 'utf8').length;
  await spin(env, true);
  const publishMs: number[] = [];
  let unpublished = 0;
  const end = Date.now() + SECONDS * 1000;
  for (let i = 0; Date.now() < end; i++) {
    const path = join(hostDir, `${setting}-${String(i)}`);
    const mounted = Date.now();
    mountTmpfs(cleanup, path, 1024 * 1024);
    const left = Math.max(1000, end - Date.now());
    const pv = await env.pvAt(path, 'published', () => true, Math.min(left, EVERY * 1000)).catch(() => undefined);
    if (pv === undefined) unpublished += 1;
    else publishMs.push(Date.now() - mounted);
    const wait = mounted + EVERY * 1000 - Date.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  }
  await spin(env, false);
  const text = readFileSync(log, 'utf8').slice(from);
  return {
    setting,
    livenessKills: livenessKills(text, CHART_NS, `${CHART_FULLNAME}-`).length,
    probeFailures: probeFailures(text),
    publishMs,
    unpublished,
  };
}

const row = (r: Window): string =>
  `| ${r.setting} | ${String(r.livenessKills)} | ${String(r.probeFailures)} | ${r.publishMs.length > 0 ? `${String(median(r.publishMs))} ms (${String(Math.max(...r.publishMs))})` : '—'} | ${String(r.unpublished)} |`;

process.env['LVP_KUBE_BIN_DIR'] ??= kubeBinDir();
const cleanup = new Cleanup();
try {
  const env = await ChartNode.start({ cleanup, prefix: 'lvp-starved-' });
  try {
    const hostDir = join(env.base, 'disks');
    const results: Window[] = [];
    for (const [n, setting] of SETTINGS.entries()) {
      const values = env.valuesWith({
        classes: [{ name: 'disks', hostDir, volumeMode: 'Filesystem', storageClass: true }],
        ...(PROBES[setting] ?? {}),
      });
      const before = (await env.agentPods())[0]?.metadata?.uid;
      env.helm(n === 0 ? 'install' : 'upgrade', values);
      await env.agentPod(`the agent (${setting}) Ready`, (p) => isReady(p) && p.metadata?.uid !== before);
      process.stdout.write(`${setting}: agent Ready; ${String(SECONDS)} s of a spinning tenant\n`);
      const result = await window(env, cleanup, hostDir, setting);
      results.push(result);
      process.stdout.write(`${row(result)}\n`);
    }
    process.stdout.write(
      `\n| probes | liveness restarts | failed probes | mount → PV, median (max) | not published within ${String(EVERY)} s |\n|---|---|---|---|---|\n`,
    );
    for (const r of results) process.stdout.write(`${row(r)}\n`);
  } finally {
    await env.stop();
  }
} finally {
  cleanup.run();
}
