// The activity behind the dashboard picture: the real kube-apiserver and etcd with the real
// persistent-volume controllers (binding, release), one agent as the image runs it (`bin/run.js
// run`, its own process, on tmpfs disks mounted under its discovery directories) and the staged
// rollout controller (`bin/run.js rollout controller`), both scraped over HTTP every few seconds
// while claims come and go, disks are added, swapped and pulled, and the config is edited.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { loadKubeconfig } from '../../src/core/kube/kubeconfig.js';
import { RestCluster } from '../../src/core/kube/rest-cluster.js';
import { writeConfigMapVolume } from '../../test/support/configmap-volume.js';
import { freePort, startControlPlane } from '../../test/support/control-plane.js';
import { Cleanup, makeTempDir, mountTmpfs, unmount } from '../../test/support/real-node.js';
import { IMAGE_NODE_OPTIONS, kubeBinDir, REPO_ROOT } from '../support.js';
import { scrapeEvery, type ScrapeManifest } from './scrapes.js';

const MiB = 2 ** 20;
const NODE = 'node-a';
const NAMESPACE = 'default';
const CONFIG_MAP = 'lvp-config';
const CLASSES = ['fast', 'bulk', 'archive'];

/** The scenario's world: the cluster client, the node's directories, the timeline being written. */
interface World {
  readonly cluster: RestCluster;
  readonly cleanup: Cleanup;
  readonly root: string;
  readonly configDir: string;
  readonly socket: string;
  readonly kubeconfig: string;
  readonly timeline: [number, string][];
}

const classMap = (root: string, classes: readonly string[]): string =>
  classes.map((c) => `${c}:\n  hostDir: ${join(root, c)}\n  mountDir: ${join(root, c)}\n`).join('');

function note(w: World, what: string): void {
  w.timeline.push([Date.now(), what]);
  console.error(`[dashboard-picture] ${new Date().toISOString()} ${what}`);
}

function spawnCli(w: World, args: readonly string[], env: Record<string, string> = {}): ChildProcess {
  const child = spawn(process.execPath, [join(REPO_ROOT, 'bin/run.js'), ...args], {
    env: { ...process.env, KUBECONFIG: w.kubeconfig, NODE_OPTIONS: IMAGE_NODE_OPTIONS, ...env },
    stdio: ['ignore', 'ignore', 'ignore'],
  });
  w.cleanup.defer(`stop ${args.slice(0, 2).join(' ')}`, () => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  return child;
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await Promise.race([exited, delay(15_000)]);
}

async function untilServing(url: string, child: ChildProcess): Promise<void> {
  for (let i = 0; i < 600; i++) {
    if (child.exitCode !== null) throw new Error(`${url}: the process exited (${String(child.exitCode)})`);
    const ok = await fetch(url).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) return;
    await delay(100);
  }
  throw new Error(`${url} never answered`);
}

async function setUpCluster(w: World): Promise<void> {
  const { cluster } = w;
  await cluster.nodes.create({ metadata: { name: NODE, labels: { 'kubernetes.io/hostname': NODE } } });
  for (const name of ['fast', 'bulk', 'archive'])
    await cluster.storageClasses.create({
      metadata: { name },
      provisioner: 'kubernetes.io/no-provisioner',
      volumeBindingMode: 'Immediate',
    });
  await cluster.configMaps.create({
    metadata: { name: CONFIG_MAP, namespace: NAMESPACE },
    data: { storageClassMap: classMap(w.root, ['fast', 'bulk']) },
  });
}

/** Four 64 MiB disks of `fast`, two 256 MiB of `bulk`, the config naming both classes. */
async function setUpNode(w: World): Promise<void> {
  for (const c of ['fast', 'bulk', 'archive']) mkdirSync(join(w.root, c));
  for (let i = 1; i <= 4; i++) mountTmpfs(w.cleanup, join(w.root, 'fast', `f${String(i)}`), 64 * MiB);
  for (let i = 1; i <= 2; i++) mountTmpfs(w.cleanup, join(w.root, 'bulk', `b${String(i)}`), 256 * MiB);
  await writeConfigMapVolume(w.configDir, { storageClassMap: classMap(w.root, ['fast', 'bulk']) });
}

/** A claim bound by the real binder; resolves with its disk's path once it is Bound. */
async function claim(w: World, name: string, storageClass: string, size: string): Promise<string> {
  await w.cluster.persistentVolumeClaims.create({
    metadata: { name, namespace: NAMESPACE },
    spec: {
      accessModes: ['ReadWriteOnce'],
      storageClassName: storageClass,
      resources: { requests: { storage: size } },
    },
  });
  for (let i = 0; i < 300; i++) {
    const pvc = await w.cluster.persistentVolumeClaims.get(name, { namespace: NAMESPACE });
    if (pvc.status?.phase === 'Bound' && pvc.spec.volumeName !== undefined) {
      const pv = await w.cluster.persistentVolumes.get(pvc.spec.volumeName);
      return pv.spec.local?.path ?? '';
    }
    await delay(200);
  }
  throw new Error(`claim ${name} never bound`);
}

async function unclaim(w: World, name: string): Promise<void> {
  await w.cluster.persistentVolumeClaims.delete(name, { namespace: NAMESPACE });
}

/** `count` files of `size` bytes each on a disk: its used bytes and inodes on the next pass. */
function fill(path: string, prefix: string, count: number, size: number): void {
  for (let i = 0; i < count; i++) writeFileSync(join(path, `${prefix}-${String(i)}`), Buffer.alloc(size, 7));
}

export interface ScenarioOptions {
  readonly dir: string;
  readonly intervalMs: number;
}

/** Runs the whole scenario; returns the manifest of the scrapes saved in `dir`. */
export async function recordScenario(options: ScenarioOptions): Promise<ScrapeManifest> {
  const cleanup = new Cleanup();
  const plane = await startControlPlane({ binDir: kubeBinDir(), controllers: true });
  const root = makeTempDir(cleanup, 'lvp-picture-');
  const cluster = new RestCluster({ connection: await loadKubeconfig(plane.kubeconfigPath) });
  const w: World = {
    cluster,
    cleanup,
    root,
    configDir: join(root, 'config'),
    socket: join(root, 'admin.sock'),
    kubeconfig: plane.kubeconfigPath,
    timeline: [],
  };
  try {
    await setUpCluster(w);
    await setUpNode(w);
    return await runScraped(w, options);
  } finally {
    cluster.close();
    try {
      cleanup.run();
    } finally {
      await plane.stop();
    }
  }
}

async function runScraped(w: World, options: ScenarioOptions): Promise<ScrapeManifest> {
  const [agentPort, controllerPort] = [await freePort(), await freePort()];
  const agent = spawnCli(
    w,
    ['run', '--config-dir', w.configDir, '--listen-address', `127.0.0.1:${String(agentPort)}`],
    { MY_NODE_NAME: NODE, MY_NAMESPACE: NAMESPACE, PROVISIONER_ADMIN_SOCKET: w.socket },
  );
  const controller = spawnCli(w, [
    'rollout',
    'controller',
    '--config-map',
    CONFIG_MAP,
    '--namespace',
    NAMESPACE,
    '--no-leader-elect',
    '--listen-address',
    `127.0.0.1:${String(controllerPort)}`,
  ]);
  await untilServing(`http://127.0.0.1:${String(agentPort)}/ready`, agent);
  await untilServing(`http://127.0.0.1:${String(controllerPort)}/metrics`, controller);
  note(w, 'agent and rollout controller serving; six disks (4 fast, 2 bulk) mounted');
  const stop = new AbortController();
  const start = Date.now();
  const scraping = scrapeEvery(
    options.dir,
    [
      { job: 'local-volume-provisioner', instance: `127.0.0.1:${String(agentPort)}`, path: '/metrics' },
      { job: 'local-volume-rollout-controller', instance: `127.0.0.1:${String(controllerPort)}`, path: '/metrics' },
    ],
    options.intervalMs,
    stop.signal,
  );
  try {
    await steps(w);
  } finally {
    stop.abort();
  }
  const scrapes = await scraping.done;
  const end = Date.now();
  await Promise.all([stopChild(agent), stopChild(controller)]);
  return { intervalMs: options.intervalMs, start, end, scrapes, timeline: w.timeline };
}

/**
 * Each kind of event twice: a labelled counter or histogram series is born with its first event,
 * and Prometheus's rate() and increase() do not count a series' first value, so only the second
 * shows in the rate panels (the docs say so).
 */
async function steps(w: World): Promise<void> {
  await delay(15_000);
  note(w, 'claims data-0, data-1 (fast, 32Mi) and logs-0 (bulk, 128Mi) created; files written to their disks');
  const data0 = await claim(w, 'data-0', 'fast', '32Mi');
  const data1 = await claim(w, 'data-1', 'fast', '32Mi');
  const logs0 = await claim(w, 'logs-0', 'bulk', '128Mi');
  fill(data0, 'a', 20, MiB);
  fill(data1, 'b', 2000, 16 * 1024);
  fill(logs0, 'c', 5, 20 * MiB);
  await delay(20_000);
  note(w, 'two more fast disks mounted (f5, f6)');
  for (const d of ['f5', 'f6']) mountTmpfs(w.cleanup, join(w.root, 'fast', d), 64 * MiB);
  await delay(20_000);
  note(w, 'claim data-0 deleted: its PV Released, cleaned and published again');
  await unclaim(w, 'data-0');
  await delay(15_000);
  await editConfig(w);
  note(w, 'claim data-2 (fast, 16Mi) created; 8 MiB written');
  fill(await claim(w, 'data-2', 'fast', '16Mi'), 'e', 8, MiB);
  await delay(15_000);
  await swapAndPull(w, data1);
  await delay(15_000);
  await reload(w);
  note(w, 'claim data-2 deleted: cleaned and published again');
  await unclaim(w, 'data-2');
  await delay(15_000);
  note(w, 'config edited with a YAML error again (rejected), then put back (unchanged)');
  await writeConfigMapVolume(w.configDir, { storageClassMap: `${classMap(w.root, CLASSES)}  : [\n` });
  await delay(10_000);
  await writeConfigMapVolume(w.configDir, { storageClassMap: classMap(w.root, CLASSES) });
  await delay(10_000);
  await reload(w);
  for (let i = 0; i < 5; i++) {
    await delay(10_000);
    fill(logs0, `d${String(i)}`, 1, 12 * MiB);
  }
  note(w, 'logs-0 grew by 12 MiB every 10 s; end');
}

async function reload(w: World): Promise<void> {
  note(w, '`provisioner reload` (nothing changed: noop)');
  await new Promise((resolve) => spawnCli(w, ['reload', '--admin-socket', w.socket]).once('exit', resolve));
}

/** A broken edit (rejected, the last good config kept), then a third class with one disk (applied). */
async function editConfig(w: World): Promise<void> {
  note(w, 'config edited with a YAML error: rejected');
  await writeConfigMapVolume(w.configDir, { storageClassMap: `${classMap(w.root, ['fast', 'bulk'])}  : [\n` });
  await delay(10_000);
  note(w, 'config edited: class archive added, one 512 MiB disk under it (applied)');
  mountTmpfs(w.cleanup, join(w.root, 'archive', 'a1'), 512 * MiB);
  const data = { storageClassMap: classMap(w.root, CLASSES) };
  const cm = await w.cluster.configMaps.get(CONFIG_MAP, { namespace: NAMESPACE });
  await w.cluster.configMaps.update({ ...cm, data });
  await writeConfigMapVolume(w.configDir, data);
  await delay(10_000);
}

/**
 * Another disk under a Bound PV before its claim goes (the agent quarantines it instead of wiping
 * the new disk), and an Available disk unmounted (an abnormal volume).
 */
async function swapAndPull(w: World, bound: string): Promise<void> {
  note(w, 'the disk under data-1 swapped for another, then data-1 deleted: quarantined');
  unmount(bound);
  mountTmpfs(w.cleanup, bound, 64 * MiB);
  await unclaim(w, 'data-1');
  await delay(10_000);
  const pvs = await w.cluster.persistentVolumes.list();
  const free = pvs.items.find((pv) => pv.spec.storageClassName === 'fast' && pv.status?.phase === 'Available');
  const path = free?.spec.local?.path;
  if (path === undefined) throw new Error('no Available fast PV to unmount');
  note(w, `the disk of an Available PV (${path}) unmounted: abnormal`);
  unmount(path);
}
