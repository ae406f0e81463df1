/**
 * A real node for the integration tests: containerd (with runc and the CNI bridge plugin) and
 * the real kubelet, registered as a Node of a test control plane. Pods run from images built on
 * this machine only (scripts/prepare-node.sh); nothing is ever pulled and no traffic leaves the
 * machine. See docs/testing.md ("A real node").
 *
 *   const node = await startKubeletNode({ plane, binDir: kubeBinDir() });
 *   try { ... pods with nodeName: node.name or scheduled to it ... } finally { await node.stop(); }
 *
 * Everything a node creates lives in a directory of its own under `<tmpdir>/lvp-kubelet-nodes/`
 * (containerd's config, socket, root and state dirs, runc's state, the kubelet's root dir, pod
 * logs, the CNI config and IPAM data), except what containerd, runc, the CNI plugins and the kubelet
 * put on the host whatever they are told; the node records each of those in `node-state.json` and
 * its cleanup undoes them:
 *
 * - the node IP, a /32 on `lo` from 198.18.0.0/15 (RFC 2544, never routed): the kubelet refuses a
 *   loopback node IP, and the apiserver reaches the kubelet (logs, exec) at this address;
 * - the CNI bridge `lvpbr<N>` and its veths (the pod subnet is 198.19.N.0/24). The bridge holds
 *   198.19.N.1, so the node reaches its pods (the kubelet's probes) on the bridge, never through
 *   the machine's default route; a pod has a route to the node IP only (no default route, no
 *   masquerading, no IP forwarding): it reaches other pods of the node and services on the node
 *   IP; hostNetwork pods reach the apiserver on loopback;
 * - network namespaces: kept under containerd's state dir (`netns_mounts_under_state_dir`);
 * - cgroups `/k8s.io/<container id>` in every hierarchy (cgroupfs driver, `cgroupsPerQOS: false`,
 *   so containerd's default parent);
 * - `/var/log/containers/*.log` symlinks, `/var/lib/cni/results/<network>-*`, shim sockets in
 *   `/run/containerd/s/`, `/var/lib/kubelet/device-plugins/` (hard-coded paths), and the
 *   directories themselves when they did not exist before;
 * - the kernel tunables the kubelet sets at start (vm.overcommit_memory, kernel.panic, ...),
 *   restored to the values read before it started.
 *
 * `stop()` first lets the kubelet delete the node's pods (its own teardown: containers, sandboxes,
 * CNI DEL, netns), then stops the kubelet, removes every container left with `ctr`, stops
 * containerd, and then removes by force whatever is left (runc, processes in the node's cgroups,
 * cgroups, mounts, the host state above), checks that nothing is left and throws if something is.
 * The forced part also runs from a process 'exit'/signal handler, and `startKubeletNode` first
 * cleans the directory of any node whose owner process died (a SIGKILLed test run).
 *
 * Requires root, Linux, util-linux, iproute2 and what scripts/prepare-node.sh installs.
 */
import { type ChildProcess, execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import {
  copyFileSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  readlinkSync,
  realpathSync,
  rmSync,
  rmdirSync,
  statSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { freePort, kubeconfigYaml, spawnLogged } from './control-plane.js';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { CoordinationV1Api, CoreV1Api, type KubeConfig, type V1Node } from '@kubernetes/client-node';

import { errorMessage, isRecord } from '../../src/core/unknown-values.js';
import { apiStatusCode } from './cluster.js';
import { Cleanup, mountTable, mountsUnder, unmount } from './real-node.js';
import { tokenKubeConfig } from './test-cluster.js';

/** What scripts/prepare-node.sh prepared (its `node-kit.json`). */
export interface NodeKit {
  readonly dir: string;
  readonly containerd: string;
  readonly ctr: string;
  readonly runc: string;
  readonly cniBinDir: string;
  /** OCI archive holding both images, imported into every node's containerd. */
  readonly imagesArchive: string;
  /** The pod sandbox image (containerd's `sandbox_image`). */
  readonly pauseImage: string;
  /** A busybox-like image: `testbox <step> [-- <step>...]`, see test/node-image/testbox/main.go. */
  readonly testboxImage: string;
  readonly containerdVersion: string;
  readonly runcVersion: string;
}

/** The control plane a node joins: the shared one (LVP_TEST_CONTROL_PLANE) or a ControlPlane. */
export interface NodePlane {
  readonly server: string;
  readonly caFile: string;
  readonly adminToken: string;
}

export interface StartKubeletNodeOptions {
  readonly plane: NodePlane;
  /** Directory holding `kubelet` (scripts/build-kube-binaries.sh; `kubeBinDir()`). */
  readonly binDir: string;
  /** Default `lvp-node-<random>`. */
  readonly name?: string;
  /** Extra Node labels (`--node-labels`). */
  readonly labels?: Readonly<Record<string, string>>;
  /** Default: `nodeKit()` (LVP_NODE_KIT_DIR, else runs scripts/prepare-node.sh). */
  readonly kit?: NodeKit;
  /**
   * KubeletConfiguration `syncFrequency` (default here `5s`; a default kubelet takes `1m`): how often
   * every pod is re-synced, which is when a changed ConfigMap or Secret reaches its volumes.
   */
  readonly syncFrequency?: string;
  /**
   * KubeletConfiguration `configMapAndSecretChangeDetectionStrategy`: `Watch` (the default, also of
   * a default kubelet: a watch per referenced object, so the cache is current at each sync),
   * `Cache` (a TTL cache: the Node annotation `node.alpha.kubernetes.io/ttl`, kept by the ttl controller,
   * which does not run here; 1 min without it) or `Get`
   * (read at every sync).
   */
  readonly configMapAndSecretChangeDetectionStrategy?: 'Watch' | 'Cache' | 'Get';
  /** More KubeletConfiguration fields, applied last (they win). */
  readonly kubeletConfig?: Readonly<Record<string, unknown>>;
  /** Time allowed from start to the Node's Ready condition (default 120 s). */
  readonly readyTimeoutMs?: number;
  /** containerd's `--log-level` (default `info`; `debug` shows registry host resolution, CNI calls). */
  readonly containerdLogLevel?: 'debug' | 'info' | 'warn' | 'error';
  /** The kubelet's `--v` (default 2). */
  readonly kubeletVerbosity?: number;
}

/** A container (or pod sandbox) in the node's containerd, from `ctr`. */
export interface RuntimeContainer {
  readonly id: string;
  readonly kind: 'sandbox' | 'container' | 'unknown';
  readonly podName: string;
  readonly podNamespace: string;
  /** Empty for sandboxes. */
  readonly containerName: string;
  readonly image: string;
  /** The task's status (`RUNNING`, `STOPPED`, ...), `none` when it has no task. */
  readonly task: string;
}

export interface KubeletNodeTimings {
  /** containerd spawned → answering on its socket. */
  readonly containerdMs: number;
  /** `ctr images import` of both images. */
  readonly importMs: number;
  /** kubelet spawned → the Node's Ready condition is True. */
  readonly kubeletReadyMs: number;
  /** startKubeletNode() called → Ready. */
  readonly totalMs: number;
}

export interface KubeletNode {
  readonly name: string;
  readonly dir: string;
  /** The Node's InternalIP (a /32 on lo), where the kubelet serves. */
  readonly nodeIP: string;
  readonly kubeletPort: number;
  readonly podSubnet: string;
  readonly bridge: string;
  readonly kit: NodeKit;
  readonly images: { readonly pause: string; readonly testbox: string };
  readonly pids: { readonly containerd: number; readonly kubelet: number };
  readonly logs: { readonly containerd: string; readonly kubelet: string };
  /** The kubelet's container logs: `<namespace>_<pod>_<uid>/<container>/<restart>.log` (removed with the pod). */
  readonly podLogsDir: string;
  readonly containerdSocket: string;
  readonly timings: KubeletNodeTimings;
  /**
   * Imports an image archive (OCI, e.g. `podman save --format oci-archive`, or docker-archive)
   * into the node's containerd (namespace k8s.io), where pods find it without pulling
   * (imagePullPolicy Never or IfNotPresent). With `reference`, the image is also tagged so (when
   * the archive names it otherwise). Returns the references now present from the archive.
   */
  importImage(archive: string, reference?: string): string[];
  /** The node's containers and sandboxes, from its containerd. */
  runtimeContainers(): RuntimeContainer[];
  /**
   * SIGKILLs the kubelet (its pods keep running, as when a kubelet crashes), runs `between` (e.g.
   * deleting the Node object, which the kubelet registers again at start), starts it again with
   * the same flags and waits for the Node's Ready condition. `pids.kubelet` keeps the first id.
   */
  restartKubelet(between?: () => Promise<void>): Promise<{ readonly readyMs: number }>;
  /** Sends a signal to a container's task (its id from runtimeContainers()), as a crash or the OOM killer would. */
  killContainer(id: string, signal?: 'SIGKILL' | 'SIGTERM'): void;
  /** Inodes of the pods' network namespaces now (remembered: `leftovers()` checks none survives). */
  networkNamespaces(): number[];
  /** What of this node is still on the machine; empty after a successful stop(). */
  leftovers(): string[];
  /** Tail of the kubelet's (or containerd's) log, for failure messages. */
  logTail(which?: 'kubelet' | 'containerd', bytes?: number): string;
  /**
   * Deletes the node's pods through its kubelet, stops everything, removes everything, and throws
   * when something is left. Idempotent.
   */
  stop(): Promise<void>;
  /** What went wrong on the polite path of stop() (the forced path then did the work). */
  readonly stopWarnings: readonly string[];
}

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const KIT_ENV = 'LVP_NODE_KIT_DIR';
const MARKER_ROOT_NAME = 'lvp-kubelet-nodes';
const OWNER_FILE = 'owner.pid';
const STATE_FILE = 'node-state.json';
const K8S_NAMESPACE = 'k8s.io';
const DEFAULT_READY_TIMEOUT_MS = 120_000;
const STOP_GRACE_MS = 10_000;
const DRAIN_TIMEOUT_MS = 30_000;
const COMMAND_TIMEOUT_MS = 20_000;
/** What the kubelet sets at start (pkg/kubelet/cm/container_manager_linux.go setupKernelTunables). */
const KERNEL_TUNABLES = [
  'vm/overcommit_memory',
  'vm/panic_on_oom',
  'kernel/panic',
  'kernel/panic_on_oops',
  'kernel/keys/root_maxkeys',
  'kernel/keys/root_maxbytes',
] as const;
/** Host paths containerd, CNI and the kubelet write to whatever they are told. */
const HOST_DIRS = {
  varLibKubelet: '/var/lib/kubelet',
  varLogContainers: '/var/log/containers',
  varLibCni: '/var/lib/cni',
  runContainerd: '/run/containerd',
} as const;
type HostDir = keyof typeof HOST_DIRS;

/** Persisted in `node-state.json`: everything cleanup needs, also after a crash. */
interface NodeState {
  readonly version: 1;
  readonly name: string;
  readonly dir: string;
  readonly index: number;
  readonly nodeIP: string;
  readonly podSubnet: string;
  readonly bridge: string;
  readonly cniNetwork: string;
  readonly containerdSocket: string;
  readonly runcRoot: string;
  readonly runc: string;
  readonly ctr: string;
  readonly podLogsDir: string;
  /** Kernel tunables before the kubelet started (restored when the last node goes). */
  readonly sysctls: Readonly<Record<string, string>>;
  /** HOST_DIRS that did not exist before this node (removed when empty). */
  readonly createdHostDirs: readonly HostDir[];
  /** cgroup mounts whose `k8s.io` child did not exist before this node. */
  readonly createdCgroupParents: readonly string[];
}

// ---- small synchronous helpers (cleanup also runs from an 'exit' handler) ----------------------

function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/** Runs a command; stdout, or throws with the command line and stderr. */
function sh(command: string, args: readonly string[], timeout = COMMAND_TIMEOUT_MS): string {
  try {
    return execFileSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout });
  } catch (error) {
    const stderr = typeof error === 'object' && error !== null && 'stderr' in error ? String(error.stderr).trim() : '';
    throw new Error(`${command} ${args.join(' ')} failed: ${stderr || errorMessage(error)}`, { cause: error });
  }
}

/** Like sh, but a failure is only returned (cleanup goes on). */
function trySh(command: string, args: readonly string[], timeout = COMMAND_TIMEOUT_MS): string | undefined {
  try {
    return sh(command, args, timeout);
  } catch {
    return undefined;
  }
}

function readText(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}

function listDir(path: string): string[] {
  try {
    return readdirSync(path);
  } catch {
    return [];
  }
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
  const stat = readText(`/proc/${pid}/stat`);
  return stat === undefined || !/^\d+ \(.*\) Z /s.test(stat);
}

interface ProcInfo {
  readonly pid: number;
  readonly cmdline: string;
  readonly cgroup: string;
}

function processes(): ProcInfo[] {
  const out: ProcInfo[] = [];
  for (const entry of listDir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    if (pid === process.pid) continue;
    const cmdline = readText(`/proc/${pid}/cmdline`);
    if (cmdline === undefined) continue;
    out.push({ pid, cmdline: cmdline.replaceAll('\0', ' ').trim(), cgroup: readText(`/proc/${pid}/cgroup`) ?? '' });
  }
  return out;
}

function killPids(pids: Iterable<number>): void {
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone already
    }
  }
}

/** Mount points of every cgroup (v1 hierarchies and/or the v2 unified tree). */
function cgroupMounts(): string[] {
  return mountTable()
    .filter((m) => m.fsType === 'cgroup' || m.fsType === 'cgroup2')
    .map((m) => m.mountPoint);
}

/** Inode of a network namespace file (an nsfs bind mount, or /proc/<pid>/ns/net). */
function nsInode(path: string): number | undefined {
  try {
    return statSync(path).ino;
  } catch {
    return undefined;
  }
}

// ---- the kit -----------------------------------------------------------------------------------

function field(raw: Record<string, unknown>, name: string, file: string): string {
  const value = raw[name];
  if (typeof value !== 'string' || value === '') throw new Error(`${file}: ${name} must be a non-empty string`);
  return value;
}

/**
 * The node kit: LVP_NODE_KIT_DIR when the runner passes it, else scripts/prepare-node.sh (which
 * installs the packages when missing and builds the images once; a warm run only prints the dir).
 */
export function nodeKit(env: NodeJS.ProcessEnv = process.env): NodeKit {
  let dir = env[KIT_ENV] ?? '';
  if (dir === '') {
    const out = execFileSync('bash', [join(ROOT, 'scripts/prepare-node.sh')], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    dir = out.trim().split('\n').at(-1) ?? '';
    if (dir === '') throw new Error('prepare-node.sh printed no kit dir');
  }
  const file = join(dir, 'node-kit.json');
  const raw: unknown = JSON.parse(readFileSync(file, 'utf8'));
  if (!isRecord(raw)) throw new Error(`${file} is not a JSON object`);
  return {
    dir,
    containerd: field(raw, 'containerd', file),
    ctr: field(raw, 'ctr', file),
    runc: field(raw, 'runc', file),
    cniBinDir: field(raw, 'cniBinDir', file),
    imagesArchive: field(raw, 'imagesArchive', file),
    pauseImage: field(raw, 'pauseImage', file),
    testboxImage: field(raw, 'testboxImage', file),
    containerdVersion: field(raw, 'containerdVersion', file),
    runcVersion: field(raw, 'runcVersion', file),
  };
}

/** Why the real-node tests cannot run here, or false: for `describe(..., { skip })`. */
export function skipUnlessKubeletNodePossible(): string | false {
  if (process.platform !== 'linux') return 'a kubelet node needs Linux';
  if (process.getuid?.() !== 0) return 'a kubelet node needs root (containerd, mounts, cgroups, network)';
  return false;
}

// ---- marker dirs: this process' nodes and dead owners' leftovers --------------------------------

/** A node dir without an owner file younger than this may be one another process is creating. */
const FRESH_DIR_MS = 60_000;

function mtimeMs(path: string): number {
  try {
    return statSync(path).mtimeMs;
  } catch {
    return 0;
  }
}

function markerRoot(): string {
  const root = join(tmpdir(), MARKER_ROOT_NAME);
  mkdirSync(root, { recursive: true, mode: 0o700 });
  return realpathSync(root);
}

function readState(dir: string): NodeState | undefined {
  const text = readText(join(dir, STATE_FILE));
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text) as NodeState;
  } catch {
    return undefined;
  }
}

/** Node dirs whose owner process is alive (other than `except`). */
function liveNodeStates(except: string): NodeState[] {
  const root = markerRoot();
  const states: NodeState[] = [];
  for (const entry of listDir(root)) {
    const dir = join(root, entry);
    if (dir === except) continue;
    const owner = Number(readText(join(dir, OWNER_FILE))?.trim());
    if (!Number.isInteger(owner) || owner <= 0 || !pidAlive(owner)) continue;
    const state = readState(dir);
    if (state !== undefined) states.push(state);
  }
  return states;
}

/**
 * Cleans the dir of every node whose owner process is dead (a test run killed by SIGKILL, or a
 * crash): the processes, containers, cgroups, mounts, network and host state it left. Returns
 * what could not be removed.
 */
export function sweepStaleKubeletNodes(): string[] {
  const root = markerRoot();
  const problems: string[] = [];
  for (const entry of listDir(root)) {
    const dir = join(root, entry);
    const ownerText = readText(join(dir, OWNER_FILE));
    if (ownerText === undefined && Date.now() - mtimeMs(dir) < FRESH_DIR_MS) continue; // being created
    const owner = Number(ownerText?.trim());
    if (Number.isInteger(owner) && owner > 0 && pidAlive(owner)) continue;
    problems.push(...cleanupNodeDir(dir));
  }
  return problems;
}

// ---- the forced cleanup ------------------------------------------------------------------------

/** Container ids the node's runtime knows of, from its dirs (works with containerd dead). */
function containerIdsOnDisk(dir: string, state: NodeState | undefined): Set<string> {
  const ids = new Set<string>();
  const add = (names: string[]): void => {
    for (const n of names) if (/^[0-9a-f]{64}$/.test(n)) ids.add(n);
  };
  const cd = join(dir, 'containerd');
  add(listDir(join(cd, 'root', 'io.containerd.grpc.v1.cri', 'containers')));
  add(listDir(join(cd, 'root', 'io.containerd.grpc.v1.cri', 'sandboxes')));
  add(listDir(join(cd, 'state', 'io.containerd.grpc.v1.cri', 'sandboxes')));
  add(listDir(join(cd, 'state', 'io.containerd.runtime.v2.task', K8S_NAMESPACE)));
  add(listDir(join(state?.runcRoot ?? join(dir, 'runc'), K8S_NAMESPACE)));
  return ids;
}

/** Every cgroup dir of these container ids that exists, deepest first. */
function cgroupDirs(ids: Iterable<string>): string[] {
  const dirs: string[] = [];
  const mounts = cgroupMounts();
  for (const id of ids) {
    for (const m of mounts) {
      const p = join(m, K8S_NAMESPACE, id);
      if (existsSync(p)) dirs.push(p);
    }
  }
  return dirs;
}

function pidsInCgroup(cgroupDir: string): number[] {
  return (readText(join(cgroupDir, 'cgroup.procs')) ?? '')
    .split('\n')
    .filter((l) => /^\d+$/.test(l))
    .map(Number);
}

/** Removes a cgroup dir after killing what runs in it (children first). */
function removeCgroup(path: string): string | undefined {
  for (const child of listDir(path)) {
    const p = join(path, child);
    try {
      if (lstatSync(p).isDirectory()) removeCgroup(p);
    } catch {
      // raced
    }
  }
  for (let attempt = 0; attempt < 50; attempt++) {
    killPids(pidsInCgroup(path));
    try {
      rmdirSync(path);
      return undefined;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      if (attempt === 49) return `cgroup ${path}: ${errorMessage(error)}`;
      sleepSync(100);
    }
  }
  return undefined;
}

/** `/run/containerd/s/<hash>`: the socket a containerd shim of this node listens on. */
function shimSocket(containerdSocket: string, id: string): string {
  const hash = createHash('sha256')
    .update(join(containerdSocket, K8S_NAMESPACE, id))
    .digest('hex');
  return join(HOST_DIRS.runContainerd, 's', hash);
}

function ctrArgs(state: Pick<NodeState, 'containerdSocket'>, ...args: string[]): string[] {
  return ['--address', state.containerdSocket, '--namespace', K8S_NAMESPACE, ...args];
}

function containerdAnswers(state: NodeState): boolean {
  return existsSync(state.containerdSocket) && trySh(state.ctr, ctrArgs(state, 'version'), 5_000) !== undefined;
}

/** Through containerd: kills and deletes every task and container (and its snapshot). */
function removeContainersWithCtr(state: NodeState): void {
  const ids = (trySh(state.ctr, ctrArgs(state, 'containers', 'list', '--quiet')) ?? '').split('\n').filter(Boolean);
  for (const id of ids) {
    trySh(state.ctr, ctrArgs(state, 'tasks', 'kill', '--signal', 'SIGKILL', id), 10_000);
  }
  for (const id of ids) {
    trySh(state.ctr, ctrArgs(state, 'tasks', 'delete', '--force', id), 10_000);
    trySh(state.ctr, ctrArgs(state, 'containers', 'delete', id), 10_000);
  }
}

function restoreSysctls(sysctls: Readonly<Record<string, string>>): string[] {
  const problems: string[] = [];
  for (const [key, value] of Object.entries(sysctls)) {
    const path = join('/proc/sys', key);
    if (readText(path)?.trim() === value) continue;
    try {
      writeFileSync(path, `${value}\n`);
    } catch (error) {
      problems.push(`sysctl ${key}=${value}: ${errorMessage(error)}`);
    }
  }
  return problems;
}

/**
 * libcni's result cache, `/var/lib/cni/results/<network>-<container id>-<interface>`: ours are
 * those of the node's network and of containerd's loopback network (`cni-loopback`) for its
 * sandboxes. The CNI DEL of a sandbox stop removes them; a crash leaves them.
 */
function isOurCniCache(file: string, state: NodeState, ids: ReadonlySet<string>): boolean {
  if (file.startsWith(`${state.cniNetwork}-`)) return true;
  const loopback = /^cni-loopback-([0-9a-f]{64})-/.exec(file);
  return loopback !== null && ids.has(loopback[1] ?? '');
}

function rmdirIfEmpty(path: string): void {
  try {
    rmdirSync(path);
  } catch {
    // not empty (someone else's files), or gone
  }
}

/**
 * The forced, synchronous cleanup of a node dir: kills the node's processes (kubelet, containerd,
 * shims, containers), deletes its containers (ctr while containerd answers, then runc), removes
 * its cgroups, unmounts everything under the dir (lazily if need be), removes the bridge, the
 * node IP and the host files it left, restores the kernel tunables (when no other node is alive)
 * and deletes the dir. Idempotent; returns what could not be removed.
 */
export function cleanupNodeDir(dir: string): string[] {
  const problems: string[] = [];
  const state = readState(dir);
  const others = liveNodeStates(dir);
  const ids = containerIdsOnDisk(dir, state);

  // 1. The kubelet first (so it restarts nothing), by its command line naming its root dir.
  const kubeletRootArg = `--root-dir=${join(dir, 'kubelet')}`;
  killPids(
    processes()
      .filter((p) => p.cmdline.includes(kubeletRootArg))
      .map((p) => p.pid),
  );

  // 2. Containers through containerd while it still answers: shims exit cleanly.
  if (state !== undefined && containerdAnswers(state)) {
    removeContainersWithCtr(state);
    for (const id of (trySh(state.ctr, ctrArgs(state, 'containers', 'list', '--quiet')) ?? '').split('\n')) {
      if (id !== '') ids.add(id);
    }
  }

  // 3. Whatever runc still knows (containerd dead or not answering).
  const runcRoot = join(state?.runcRoot ?? join(dir, 'runc'), K8S_NAMESPACE);
  const runc = state?.runc ?? 'runc';
  for (const id of listDir(runcRoot)) {
    ids.add(id);
    trySh(runc, ['--root', runcRoot, 'kill', '--all', id, 'KILL'], 10_000);
    trySh(runc, ['--root', runcRoot, 'delete', '--force', id], 10_000);
  }

  // 4. Every process left: containerd and shims (their command lines name the dir), and anything in
  //    the containers' cgroups. Then the cgroups themselves.
  const idList = [...ids];
  const inOurCgroups = (p: ProcInfo): boolean => idList.some((id) => p.cgroup.includes(`/${K8S_NAMESPACE}/${id}`));
  for (let round = 0; round < 3; round++) {
    const left = processes().filter((p) => p.cmdline.includes(`${dir}/`) || inOurCgroups(p));
    if (left.length === 0) break;
    killPids(left.map((p) => p.pid));
    sleepSync(200);
  }
  for (const cg of cgroupDirs(idList)) {
    const problem = removeCgroup(cg);
    if (problem !== undefined) problems.push(problem);
  }
  if (others.length === 0) {
    for (const mount of state?.createdCgroupParents ?? []) rmdirIfEmpty(join(mount, K8S_NAMESPACE));
  }

  // 5. Mounts under the dir: overlay rootfs, sandbox shm, netns (nsfs), the kubelet's own bind
  //    mount of its root dir and pod volumes. Deepest first; lazily when busy.
  for (const mount of mountsUnder(dir)) {
    try {
      unmount(mount.mountPoint);
    } catch (error) {
      problems.push(`unmount ${mount.mountPoint}: ${errorMessage(error)}`);
    }
  }

  // 6. Network: the bridge (veths went with their namespaces) and the node IP on lo.
  if (state !== undefined) {
    if (existsSync(`/sys/class/net/${state.bridge}`)) {
      if (trySh('ip', ['link', 'delete', state.bridge]) === undefined)
        problems.push(`bridge ${state.bridge} not deleted`);
    }
    if ((trySh('ip', ['-o', '-4', 'addr', 'show', 'dev', 'lo']) ?? '').includes(` ${state.nodeIP}/`)) {
      if (trySh('ip', ['addr', 'delete', `${state.nodeIP}/32`, 'dev', 'lo']) === undefined) {
        problems.push(`address ${state.nodeIP} on lo not deleted`);
      }
    }
  }

  // 7. Host files the runtime and the kubelet left.
  const created = new Set(state?.createdHostDirs ?? []);
  const last = others.length === 0;
  if (state !== undefined) {
    const results = join(HOST_DIRS.varLibCni, 'results');
    for (const f of listDir(results)) {
      if (isOurCniCache(f, state, ids)) rmSync(join(results, f), { force: true });
    }
    for (const f of listDir(HOST_DIRS.varLogContainers)) {
      const p = join(HOST_DIRS.varLogContainers, f);
      try {
        if (readlinkSync(p).startsWith(`${state.podLogsDir}/`)) unlinkSync(p);
      } catch {
        // not a symlink, or gone
      }
    }
    for (const id of ids) rmSync(shimSocket(state.containerdSocket, id), { force: true });
  }
  if (last && created.has('varLibCni')) {
    rmdirIfEmpty(join(HOST_DIRS.varLibCni, 'results'));
    rmdirIfEmpty(join(HOST_DIRS.varLibCni, 'networks'));
    rmdirIfEmpty(HOST_DIRS.varLibCni);
  }
  if (last && created.has('varLogContainers')) rmdirIfEmpty(HOST_DIRS.varLogContainers);
  if (last && created.has('runContainerd')) {
    rmdirIfEmpty(join(HOST_DIRS.runContainerd, 's'));
    rmdirIfEmpty(HOST_DIRS.runContainerd);
  }
  if (last && created.has('varLibKubelet')) {
    // the device manager's socket and checkpoint: a path the kubelet hard-codes
    const plugins = join(HOST_DIRS.varLibKubelet, 'device-plugins');
    rmSync(join(plugins, 'kubelet.sock'), { force: true });
    rmSync(join(plugins, 'kubelet_internal_checkpoint'), { force: true });
    rmdirIfEmpty(plugins);
    rmdirIfEmpty(HOST_DIRS.varLibKubelet);
  }

  // 8. Kernel tunables, once no other node of ours runs (they all saw the same originals).
  if (last && state !== undefined) problems.push(...restoreSysctls(state.sysctls));

  // 9. The dir, only once nothing is mounted under it.
  const stillMounted = mountsUnder(dir);
  if (stillMounted.length > 0) {
    problems.push(`not removing ${dir}: still mounted: ${stillMounted.map((m) => m.mountPoint).join(', ')}`);
  } else {
    try {
      rmSync(dir, { recursive: true, force: true });
    } catch (error) {
      problems.push(`remove ${dir}: ${errorMessage(error)}`);
    }
  }
  return problems;
}

/** What of a node is still on the machine (processes, mounts, netns, cgroups, network, files). */
function nodeLeftovers(state: NodeState, ids: ReadonlySet<string>, netns: ReadonlySet<number>): string[] {
  const left: string[] = [];
  const idList = [...ids];
  for (const p of processes()) {
    if (p.cmdline.includes(`${state.dir}/`)) left.push(`process ${p.pid}: ${p.cmdline.slice(0, 200)}`);
    else if (idList.some((id) => p.cgroup.includes(`/${K8S_NAMESPACE}/${id}`))) {
      left.push(`process ${p.pid} in a container cgroup: ${p.cmdline.slice(0, 200)}`);
    }
    if (netns.size > 0) {
      const ino = nsInode(`/proc/${p.pid}/ns/net`);
      if (ino !== undefined && netns.has(ino)) left.push(`process ${p.pid} in a pod network namespace (${ino})`);
    }
  }
  for (const m of mountTable()) {
    if (m.mountPoint === state.dir || m.mountPoint.startsWith(`${state.dir}/`)) left.push(`mount ${m.mountPoint}`);
    const ns = /^net:\[(\d+)\]$/.exec(m.root);
    if (m.fsType === 'nsfs' && ns !== null && netns.has(Number(ns[1]))) {
      left.push(`network namespace ${ns[1]} mounted at ${m.mountPoint}`);
    }
  }
  for (const cg of cgroupDirs(idList)) left.push(`cgroup ${cg}`);
  if (existsSync(`/sys/class/net/${state.bridge}`)) left.push(`bridge ${state.bridge}`);
  if ((trySh('ip', ['-o', '-4', 'addr', 'show', 'dev', 'lo']) ?? '').includes(` ${state.nodeIP}/`)) {
    left.push(`address ${state.nodeIP} on lo`);
  }
  for (const f of listDir(join(HOST_DIRS.varLibCni, 'results'))) {
    if (isOurCniCache(f, state, ids)) left.push(`CNI cache /var/lib/cni/results/${f}`);
  }
  for (const f of listDir(HOST_DIRS.varLogContainers)) {
    try {
      if (readlinkSync(join(HOST_DIRS.varLogContainers, f)).startsWith(`${state.podLogsDir}/`)) {
        left.push(`log symlink /var/log/containers/${f}`);
      }
    } catch {
      // not a symlink
    }
  }
  for (const id of ids) {
    if (existsSync(shimSocket(state.containerdSocket, id))) left.push(`shim socket for ${id}`);
  }
  if (existsSync(state.dir)) left.push(`dir ${state.dir}`);
  return left;
}

// ---- start -------------------------------------------------------------------------------------

/** A free index N: node IP 198.18.N.1, pod subnet 198.19.N.0/24, bridge lvpbrN. */
function pickIndex(): number {
  const used = new Set(liveNodeStates('').map((s) => s.index));
  const addrs = trySh('ip', ['-o', 'addr', 'show']) ?? '';
  const routes = trySh('ip', ['route', 'show']) ?? '';
  const start = randomBytes(1)[0] ?? 0;
  for (let k = 0; k < 256; k++) {
    const n = (start + k) % 256;
    if (used.has(n)) continue;
    if (addrs.includes(`198.18.${n}.`) || routes.includes(`198.19.${n}.`)) continue;
    if (existsSync(`/sys/class/net/lvpbr${n}`)) continue;
    return n;
  }
  throw new Error('no free node index (198.18.N.1 / 198.19.N.0/24) left');
}

function readSysctls(): Record<string, string> {
  const values: Record<string, string> = {};
  for (const key of KERNEL_TUNABLES) {
    const v = readText(join('/proc/sys', key));
    if (v !== undefined) values[key] = v.trim();
  }
  return values;
}

function exited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

async function terminate(child: ChildProcess): Promise<void> {
  if (exited(child)) return;
  const done = new Promise<void>((resolve) => {
    child.once('exit', () => {
      resolve();
    });
  });
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
  await done;
  clearTimeout(timer);
}

function tail(file: string, bytes = 4000): string {
  const text = readText(file) ?? '(no log)';
  return text.length > bytes ? `...${text.slice(-bytes)}` : text;
}

function containerdConfig(dir: string, kit: NodeKit, socket: string, runcRoot: string): string {
  const q = (s: string): string => JSON.stringify(s); // a TOML basic string
  const cri = 'plugins."io.containerd.grpc.v1.cri"';
  return `# containerd config of a test node (test/support/kubelet-node.ts); nothing outside ${dir}
version = 2
root = ${q(join(dir, 'containerd', 'root'))}
state = ${q(join(dir, 'containerd', 'state'))}
oom_score = 0

[grpc]
  address = ${q(socket)}

[ttrpc]
  address = ${q(`${socket}.ttrpc`)}

[plugins."io.containerd.internal.v1.opt"]
  path = ${q(join(dir, 'containerd', 'opt'))}

[plugins."io.containerd.runtime.v1.linux"]
  runtime_root = ${q(join(dir, 'runc-v1'))}

[${cri}]
  sandbox_image = ${q(kit.pauseImage)}
  # This machine refuses negative oom_score_adj writes; without this every sandbox fails with
  # "runc create failed: ... can't get final child's PID from pipe: EOF".
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_tls_streaming = false

[${cri}.cni]
  bin_dir = ${q(kit.cniBinDir)}
  conf_dir = ${q(join(dir, 'cni', 'net.d'))}
  max_conf_num = 1

[${cri}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"

[${cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[${cri}.containerd.runtimes.runc.options]
  BinaryName = ${q(kit.runc)}
  Root = ${q(runcRoot)}
  SystemdCgroup = false

# Every registry is 127.0.0.1:9 (nothing listens): an image that is not imported fails at once
# instead of reaching out.
[${cri}.registry]
  config_path = ${q(join(dir, 'containerd', 'certs.d'))}
`;
}

/** The apiserver flag a node's plane needs (see apiserverReachesKubeletByIP). */
export const KUBELET_ADDRESS_FLAG = '--kubelet-preferred-address-types=InternalIP';

/**
 * Whether the local kube-apiserver serving `server` reaches kubelets by InternalIP first. Its
 * default order starts with Hostname: for logs, exec and port-forward it would resolve the node
 * name through DNS, a query that leaves the machine. undefined when no such process is found.
 */
export function apiserverReachesKubeletByIP(server: string): boolean | undefined {
  const port = new URL(server).port;
  const apiserver = processes().find(
    (p) => /(^|\/)kube-apiserver\s/.test(p.cmdline) && p.cmdline.includes(`--secure-port=${port} `),
  );
  if (apiserver === undefined) return undefined;
  const flags = [...apiserver.cmdline.matchAll(/--kubelet-preferred-address-types=(\S+)/g)];
  // the last occurrence wins
  return flags.at(-1)?.[1]?.split(',')[0] === 'InternalIP';
}

/**
 * Starts containerd and the kubelet for a new Node of `plane` and resolves once the Node is Ready.
 * On failure everything started is removed again and the error carries the logs' tails.
 */
export async function startKubeletNode(options: StartKubeletNodeOptions): Promise<KubeletNode> {
  const t0 = Date.now();
  const skip = skipUnlessKubeletNodePossible();
  if (skip !== false) throw new Error(skip);
  const kit = options.kit ?? nodeKit();
  const byIP = apiserverReachesKubeletByIP(options.plane.server);
  if (byIP !== true) {
    throw new Error(
      byIP === undefined
        ? `no local kube-apiserver serves ${options.plane.server}: cannot check that it reaches kubelets by IP`
        : `the kube-apiserver of ${options.plane.server} lacks ${KUBELET_ADDRESS_FLAG}: it would look the node ` +
            'name up in DNS (a query leaving the machine) for logs and exec; start the plane with ' +
            `extraApiserverArgs: ['${KUBELET_ADDRESS_FLAG}']`,
    );
  }
  const kubeletBin = join(options.binDir, 'kubelet');
  if (!existsSync(kubeletBin)) throw new Error(`${kubeletBin} is missing (scripts/build-kube-binaries.sh builds it)`);

  const stale = sweepStaleKubeletNodes();
  if (stale.length > 0) throw new Error(`leftovers of a dead test node could not be removed: ${stale.join('; ')}`);

  const name = options.name ?? `lvp-node-${randomBytes(3).toString('hex')}`;
  const root = markerRoot();
  const dir = mkdtempSync(join(root, `${name.slice(0, 24)}-`));
  writeFileSync(join(dir, OWNER_FILE), `${process.pid}\n`);

  // The forced cleanup, also on exit or a signal (real-node.ts' Cleanup installs the handlers).
  const children: ChildProcess[] = [];
  const lastResort = new Cleanup();
  const forced = lastResort.defer(`kubelet node ${name} (${dir})`, () => {
    for (const child of children) if (!exited(child)) child.kill('SIGKILL');
    const problems = cleanupNodeDir(dir);
    if (problems.length > 0) throw new Error(problems.join('; '));
  });

  let state: NodeState;
  try {
    const index = pickIndex();
    const others = liveNodeStates(dir);
    // What a live node of ours created counts as created by this one too: the last to go removes it.
    const cgroupParents = new Set(cgroupMounts().filter((m) => !existsSync(join(m, K8S_NAMESPACE))));
    const hostDirs = new Set((Object.keys(HOST_DIRS) as HostDir[]).filter((k) => !existsSync(HOST_DIRS[k])));
    for (const other of others) {
      for (const m of other.createdCgroupParents) cgroupParents.add(m);
      for (const d of other.createdHostDirs) hostDirs.add(d);
    }
    state = {
      version: 1,
      name,
      dir,
      index,
      nodeIP: `198.18.${index}.1`,
      podSubnet: `198.19.${index}.0/24`,
      bridge: `lvpbr${index}`,
      cniNetwork: `lvp-${basename(dir)}`,
      containerdSocket: join(dir, 'containerd.sock'),
      runcRoot: join(dir, 'runc'),
      runc: kit.runc,
      ctr: kit.ctr,
      podLogsDir: join(dir, 'pod-logs'),
      // another live node already changed them: its snapshot holds the originals
      sysctls: others[0]?.sysctls ?? readSysctls(),
      createdHostDirs: [...hostDirs],
      createdCgroupParents: [...cgroupParents],
    };
    writeFileSync(join(dir, STATE_FILE), `${JSON.stringify(state, null, 2)}\n`);
  } catch (error) {
    forced();
    throw error;
  }

  const logs = { containerd: join(dir, 'containerd.log'), kubelet: join(dir, 'kubelet.log') };
  const withLogs = (message: string): Error =>
    new Error(
      `${message}\n--- kubelet.log (tail) ---\n${tail(logs.kubelet)}\n--- containerd.log (tail) ---\n${tail(logs.containerd)}`,
    );
  const kc = tokenKubeConfig(options.plane.server, options.plane.caFile, options.plane.adminToken, 'lvp-test-admin');
  const core = kc.makeApiClient(CoreV1Api);

  try {
    // ---- network: the node IP and the CNI config ----
    sh('ip', ['addr', 'add', `${state.nodeIP}/32`, 'dev', 'lo']);
    // The bridge made here with the node's side of the pod subnet: the CNI plugin (isGateway false,
    // which would also turn on IP forwarding) uses it as it is.
    const podGateway = state.podSubnet.replace(/\.0\/24$/, '.1');
    sh('ip', ['link', 'add', state.bridge, 'type', 'bridge']);
    sh('ip', ['addr', 'add', `${podGateway}/24`, 'dev', state.bridge]);
    sh('ip', ['link', 'set', state.bridge, 'up']);
    mkdirSync(join(dir, 'cni', 'net.d'), { recursive: true });
    writeFileSync(
      join(dir, 'cni', 'net.d', '10-lvp-bridge.conflist'),
      `${JSON.stringify(
        {
          cniVersion: '1.0.0',
          name: state.cniNetwork,
          plugins: [
            {
              type: 'bridge',
              bridge: state.bridge,
              // no default route, no masquerading: pods reach each other and the node IP, nothing else
              isGateway: false,
              ipMasq: false,
              hairpinMode: false,
              ipam: {
                type: 'host-local',
                ranges: [[{ subnet: state.podSubnet, gateway: podGateway }]],
                routes: [{ dst: `${state.nodeIP}/32`, gw: podGateway }],
                dataDir: join(dir, 'cni', 'ipam'),
              },
            },
          ],
        },
        null,
        2,
      )}\n`,
    );

    // ---- containerd ----
    const certsDefault = join(dir, 'containerd', 'certs.d', '_default');
    mkdirSync(certsDefault, { recursive: true });
    // containerd 1.6 ignores a hosts.toml without a [host] table (and then goes to the registry
    // named in the image), so the "mirror" is spelled out as well.
    writeFileSync(
      join(certsDefault, 'hosts.toml'),
      'server = "http://127.0.0.1:9"\n\n[host."http://127.0.0.1:9"]\n  capabilities = ["pull", "resolve"]\n',
    );
    const configFile = join(dir, 'containerd', 'config.toml');
    writeFileSync(configFile, containerdConfig(dir, kit, state.containerdSocket, state.runcRoot));
    const tContainerd = Date.now();
    const containerd = spawnLogged(
      kit.containerd,
      ['--config', configFile, '--log-level', options.containerdLogLevel ?? 'info'],
      logs.containerd,
    );
    children.push(containerd);
    for (;;) {
      if (exited(containerd)) throw withLogs(`containerd exited early (code ${String(containerd.exitCode)})`);
      if (existsSync(state.containerdSocket) && trySh(kit.ctr, ctrArgs(state, 'version'), 5_000) !== undefined) break;
      if (Date.now() - tContainerd > 30_000) throw withLogs('containerd did not answer within 30 s');
      await delay(100);
    }
    const containerdMs = Date.now() - tContainerd;
    const tImport = Date.now();
    sh(kit.ctr, ctrArgs(state, 'images', 'import', kit.imagesArchive), 60_000);
    const importMs = Date.now() - tImport;

    // ---- kubelet ----
    const caFile = join(dir, 'ca.crt');
    copyFileSync(options.plane.caFile, caFile);
    const kubeconfig = join(dir, 'kubelet.kubeconfig');
    // The apiserver's admin (system:masters): a test node needs no Node authorizer identity.
    writeFileSync(kubeconfig, kubeconfigYaml(options.plane.server, caFile, options.plane.adminToken), { mode: 0o600 });
    const kubeletPort = await freePort();
    const healthzPort = await freePort();
    writeFileSync(join(dir, 'resolv.conf'), 'nameserver 127.0.0.1\noptions ndots:0\n');
    const kubeletConfig: Record<string, unknown> = {
      apiVersion: 'kubelet.config.k8s.io/v1beta1',
      kind: 'KubeletConfiguration',
      // Serve on the node IP only (the apiserver comes here for logs, exec, port-forward).
      address: state.nodeIP,
      port: kubeletPort,
      readOnlyPort: 0,
      healthzBindAddress: '127.0.0.1',
      healthzPort,
      // A test node: anonymous requests allowed, no webhook authn/authz against the apiserver.
      authentication: { anonymous: { enabled: true }, webhook: { enabled: false }, x509: {} },
      authorization: { mode: 'AlwaysAllow' },
      containerRuntimeEndpoint: `unix://${state.containerdSocket}`,
      imageServiceEndpoint: `unix://${state.containerdSocket}`,
      // This host has cgroup v1 only; v1.35 refuses v1 unless told not to.
      failCgroupV1: false,
      cgroupDriver: 'cgroupfs',
      // No kubepods/QoS cgroup tree (and so no node allocatable enforcement).
      cgroupsPerQOS: false,
      enforceNodeAllocatable: [],
      failSwapOn: false,
      // No iptables chains (KUBE-FIREWALL, KUBE-IPTABLES-HINT, canaries) on the host.
      makeIPTablesUtilChains: false,
      // This machine refuses negative oom_score_adj writes (a default kubelet takes -999).
      oomScoreAdj: 0,
      podLogsDir: state.podLogsDir,
      volumePluginDir: join(dir, 'volume-plugins'),
      // Pods resolve names against loopback only: no DNS query leaves the machine.
      resolvConf: join(dir, 'resolv.conf'),
      syncFrequency: options.syncFrequency ?? '5s',
      configMapAndSecretChangeDetectionStrategy: options.configMapAndSecretChangeDetectionStrategy ?? 'Watch',
      // The images are imported, never pulled: never garbage-collect them, never evict for disk.
      imageGCHighThresholdPercent: 100,
      imageGCLowThresholdPercent: 99,
      evictionHard: {
        'memory.available': '1Mi',
        'nodefs.available': '1%',
        'nodefs.inodesFree': '1%',
        'imagefs.available': '1%',
      },
      serializeImagePulls: false,
      registerNode: true,
      ...options.kubeletConfig,
    };
    const kubeletConfigFile = join(dir, 'kubelet-config.yaml');
    writeFileSync(kubeletConfigFile, `${JSON.stringify(kubeletConfig, null, 2)}\n`);
    const labels = Object.entries(options.labels ?? {})
      .map(([k, v]) => `${k}=${v}`)
      .join(',');
    const kubeletArgs = [
      `--config=${kubeletConfigFile}`,
      `--kubeconfig=${kubeconfig}`,
      `--root-dir=${join(dir, 'kubelet')}`,
      `--cert-dir=${join(dir, 'kubelet', 'pki')}`,
      `--hostname-override=${name}`,
      `--node-ip=${state.nodeIP}`,
      ...(labels === '' ? [] : [`--node-labels=${labels}`]),
      `--v=${options.kubeletVerbosity ?? 2}`,
    ];
    /**
     * Spawns the kubelet and waits until the Node says Ready (registering it when it is missing) in
     * a heartbeat of this kubelet (after a restart the condition may still hold the last one's).
     */
    const startKubelet = async (deadline: number): Promise<ChildProcess> => {
      const since = Math.floor(Date.now() / 1000) * 1000;
      const child = spawnLogged(kubeletBin, kubeletArgs, logs.kubelet);
      children.push(child);
      let lastSeen = 'not registered';
      for (;;) {
        if (exited(child)) throw withLogs(`kubelet exited early (code ${String(child.exitCode)})`);
        if (exited(containerd)) throw withLogs(`containerd exited (code ${String(containerd.exitCode)})`);
        try {
          const node: V1Node = await core.readNode({ name });
          const ready = node.status?.conditions?.find((c) => c.type === 'Ready');
          lastSeen = `Ready=${ready?.status ?? 'unknown'} (${ready?.reason ?? ''}: ${ready?.message ?? ''})`;
          const heartbeat: unknown = ready?.lastHeartbeatTime;
          const beat = heartbeat instanceof Date ? heartbeat.getTime() : Date.parse(String(heartbeat));
          if (ready?.status === 'True' && beat >= since) return child;
        } catch (error) {
          if (apiStatusCode(error) !== 404) lastSeen = errorMessage(error);
        }
        if (Date.now() > deadline) throw withLogs(`node ${name} not Ready in time (last: ${lastSeen})`);
        await delay(250);
      }
    };
    const tKubelet = Date.now();
    let kubelet = await startKubelet(t0 + (options.readyTimeoutMs ?? DEFAULT_READY_TIMEOUT_MS));
    const readyAt = Date.now();
    const timings: KubeletNodeTimings = {
      containerdMs,
      importMs,
      kubeletReadyMs: readyAt - tKubelet,
      totalMs: readyAt - t0,
    };

    const seenIds = new Set<string>();
    const seenNetns = new Set<number>();
    const finalState = state;
    const netnsDir = join(dir, 'containerd', 'state', 'io.containerd.grpc.v1.cri', 'netns');

    const importImage = (archive: string, reference?: string): string[] => {
      const out = sh(kit.ctr, ctrArgs(finalState, 'images', 'import', archive), 300_000);
      // "unpacking <ref> (sha256:...)...done", one line per image
      const refs = [...out.matchAll(/unpacking (\S+) \(sha256:[0-9a-f]+\)/g)].map((m) => m[1] ?? '');
      if (reference !== undefined && !refs.includes(reference)) {
        const source = refs[0];
        if (source === undefined) throw new Error(`ctr imported no image from ${archive}: ${out}`);
        sh(kit.ctr, ctrArgs(finalState, 'images', 'tag', '--force', source, reference));
        refs.push(reference);
      }
      return refs;
    };
    const runtimeContainers = (): RuntimeContainer[] => {
      const tasks = new Map<string, string>();
      for (const line of (trySh(kit.ctr, ctrArgs(finalState, 'tasks', 'list')) ?? '').split('\n').slice(1)) {
        const [id, , status] = line.trim().split(/\s+/);
        if (id !== undefined && id !== '' && status !== undefined) tasks.set(id, status);
      }
      const ids = (trySh(kit.ctr, ctrArgs(finalState, 'containers', 'list', '--quiet')) ?? '').split('\n');
      const out: RuntimeContainer[] = [];
      for (const id of ids.filter(Boolean)) {
        seenIds.add(id);
        let labels: Record<string, unknown> = {};
        let image = '';
        try {
          const info: unknown = JSON.parse(sh(kit.ctr, ctrArgs(finalState, 'containers', 'info', id)));
          if (isRecord(info)) {
            if (isRecord(info['Labels'])) labels = info['Labels'];
            if (typeof info['Image'] === 'string') image = info['Image'];
          }
        } catch {
          continue; // removed meanwhile
        }
        const label = (key: string): string => {
          const v = labels[key];
          return typeof v === 'string' ? v : '';
        };
        const kind = label('io.cri-containerd.kind');
        out.push({
          id,
          kind: kind === 'sandbox' || kind === 'container' ? kind : 'unknown',
          podName: label('io.kubernetes.pod.name'),
          podNamespace: label('io.kubernetes.pod.namespace'),
          containerName: label('io.kubernetes.container.name'),
          image,
          task: tasks.get(id) ?? 'none',
        });
      }
      return out;
    };
    const networkNamespaces = (): number[] => {
      const inodes: number[] = [];
      for (const f of listDir(netnsDir)) {
        const ino = nsInode(join(netnsDir, f));
        // an nsfs mount's inode; a plain file (not mounted yet, or unmounted) is not a namespace
        if (ino !== undefined && mountTable().some((m) => m.mountPoint === join(netnsDir, f) && m.fsType === 'nsfs')) {
          inodes.push(ino);
          seenNetns.add(ino);
        }
      }
      return inodes;
    };

    let stopping: Promise<void> | undefined;
    const restartKubelet = async (between?: () => Promise<void>): Promise<{ readyMs: number }> => {
      if (stopping !== undefined) throw new Error(`node ${name} is stopping: the kubelet is not restarted`);
      kubelet.kill('SIGKILL');
      await new Promise<void>((resolve) => {
        if (exited(kubelet)) resolve();
        else
          kubelet.once('exit', () => {
            resolve();
          });
      });
      await between?.();
      const spawned = Date.now();
      kubelet = await startKubelet(spawned + (options.readyTimeoutMs ?? DEFAULT_READY_TIMEOUT_MS));
      return { readyMs: Date.now() - spawned };
    };
    const killContainer = (id: string, signal: 'SIGKILL' | 'SIGTERM' = 'SIGKILL'): void => {
      sh(kit.ctr, ctrArgs(finalState, 'tasks', 'kill', '--signal', signal, id));
    };
    const stopWarnings: string[] = [];
    const stop = (): Promise<void> => {
      stopping ??= (async () => {
        const problems: string[] = [];
        try {
          runtimeContainers();
          networkNamespaces();
        } catch {
          // best effort: only widens what leftovers() checks
        }
        // 1. The kubelet's own teardown: delete the node's pods and wait until it finished them
        //    (containers stopped, sandboxes stopped, CNI DEL, netns removed, pod objects gone).
        if (!exited(kubelet)) {
          try {
            await withTimeout(drainPods(core, name), DRAIN_TIMEOUT_MS + 5_000, 'draining pods');
          } catch (error) {
            stopWarnings.push(`draining pods through the kubelet: ${errorMessage(error)}`);
          }
        }
        // 2. The kubelet, then every container left (ctr), then containerd.
        await terminate(kubelet);
        if (!exited(containerd)) removeContainersWithCtr(finalState);
        await terminate(containerd);
        // 3. Whatever is left, by force; the host state (the last-resort step, run now: this also
        //    unregisters its exit and signal handlers).
        try {
          forced();
        } catch (error) {
          problems.push(errorMessage(error));
        }
        // 4. The Node and its Lease.
        await withTimeout(core.deleteNode({ name }), 10_000, 'deleting the Node').catch((error: unknown) => {
          if (apiStatusCode(error) !== 404) stopWarnings.push(`deleting Node ${name}: ${errorMessage(error)}`);
        });
        await withTimeout(
          kc.makeApiClient(CoordinationV1Api).deleteNamespacedLease({ name, namespace: 'kube-node-lease' }),
          10_000,
          'deleting the Lease',
        ).catch(() => undefined);
        const left = nodeLeftovers(finalState, seenIds, seenNetns);
        if (problems.length > 0 || left.length > 0) {
          throw new Error(`kubelet node ${name} not cleaned up completely: ${[...problems, ...left].join('; ')}`);
        }
      })();
      return stopping;
    };

    return {
      name,
      dir,
      nodeIP: state.nodeIP,
      kubeletPort,
      podSubnet: state.podSubnet,
      bridge: state.bridge,
      kit,
      images: { pause: kit.pauseImage, testbox: kit.testboxImage },
      pids: { containerd: containerd.pid ?? -1, kubelet: kubelet.pid ?? -1 },
      logs,
      podLogsDir: state.podLogsDir,
      containerdSocket: state.containerdSocket,
      timings,
      importImage,
      runtimeContainers,
      restartKubelet,
      killContainer,
      networkNamespaces,
      leftovers: () => nodeLeftovers(finalState, seenIds, seenNetns),
      logTail: (which = 'kubelet', bytes = 4000) => tail(logs[which], bytes),
      stop,
      stopWarnings,
    };
  } catch (error) {
    try {
      forced();
    } catch (cleanupError) {
      throw new AggregateError([error, cleanupError], `${errorMessage(error)} (and cleanup failed)`, {
        cause: cleanupError,
      });
    }
    throw error;
  }
}

/** The promise, or a rejection after `ms` (an apiserver that hangs must not hang stop()). */
async function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      reject(new Error(`${what}: no answer in ${ms} ms`));
    }, ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Deletes every pod bound to the node and waits until the kubelet has finished each one. */
async function drainPods(core: CoreV1Api, nodeName: string): Promise<void> {
  const deadline = Date.now() + DRAIN_TIMEOUT_MS;
  const fieldSelector = `spec.nodeName=${nodeName}`;
  for (;;) {
    const pods = (await core.listPodForAllNamespaces({ fieldSelector })).items;
    if (pods.length === 0) return;
    if (Date.now() > deadline) {
      throw new Error(
        `pods still on the node after ${DRAIN_TIMEOUT_MS} ms: ${pods.map((p) => p.metadata?.name).join(', ')}`,
      );
    }
    for (const pod of pods) {
      if (pod.metadata?.deletionTimestamp !== undefined) continue;
      await core
        .deleteNamespacedPod({
          name: pod.metadata?.name ?? '',
          namespace: pod.metadata?.namespace ?? 'default',
          gracePeriodSeconds: 2,
        })
        .catch((error: unknown) => {
          if (apiStatusCode(error) !== 404) throw error;
        });
    }
    await delay(250);
  }
}

/** Test helper: a KubeConfig for the plane a node joined. */
export function planeKubeConfig(plane: NodePlane): KubeConfig {
  return tokenKubeConfig(plane.server, plane.caFile, plane.adminToken, 'lvp-test-admin');
}

export interface ExtraControllerManager {
  readonly pid: number;
  readonly log: string;
  stop(): Promise<void>;
}

/**
 * A second kube-controller-manager running only `controllers` (for example
 * `daemonset-controller`, which control-plane.ts' CONTROLLERS leaves out), as the plane's admin,
 * with its logs in `dir`. Its serving port is a free loopback port; it is ready when /healthz
 * answers (its self-signed certificate is not checked: only this probe calls it).
 */
export async function startExtraControllerManager(options: {
  readonly plane: NodePlane;
  readonly binDir: string;
  readonly controllers: readonly string[];
  readonly dir: string;
  /** More flags, e.g. `--root-ca-file` for `root-ca-certificate-publisher-controller`. */
  readonly extraArgs?: readonly string[];
}): Promise<ExtraControllerManager> {
  const { plane, binDir, controllers, dir } = options;
  mkdirSync(dir, { recursive: true });
  const kubeconfig = join(dir, 'kcm.kubeconfig');
  writeFileSync(kubeconfig, kubeconfigYaml(plane.server, plane.caFile, plane.adminToken), { mode: 0o600 });
  const port = await freePort();
  const log = join(dir, 'kube-controller-manager-extra.log');
  const child = spawnLogged(
    join(binDir, 'kube-controller-manager'),
    [
      `--kubeconfig=${kubeconfig}`,
      '--leader-elect=false',
      '--bind-address=127.0.0.1',
      `--secure-port=${port}`,
      `--cert-dir=${join(dir, 'pki-kcm-extra')}`,
      `--controllers=${controllers.join(',')}`,
      '--profiling=false',
      '--v=1',
      ...(options.extraArgs ?? []),
    ],
    log,
  );
  const lastResort = new Cleanup();
  const kill = lastResort.defer(`kube-controller-manager (${controllers.join(',')})`, () => {
    if (!exited(child)) child.kill('SIGKILL');
  });
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (exited(child)) {
      kill();
      throw new Error(`kube-controller-manager exited early; log tail:\n${tail(log)}`);
    }
    const ok = await fetchHealthz(`https://127.0.0.1:${port}/healthz`);
    if (ok) break;
    if (Date.now() > deadline) {
      kill();
      throw new Error(`kube-controller-manager not healthy in time; log tail:\n${tail(log)}`);
    }
    await delay(200);
  }
  return {
    pid: child.pid ?? -1,
    log,
    stop: async () => {
      await terminate(child);
      kill();
    },
  };
}

async function fetchHealthz(url: string): Promise<boolean> {
  const { request } = await import('node:https');
  return new Promise((resolve) => {
    const req = request(url, { rejectUnauthorized: false, timeout: 2_000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => {
        resolve(res.statusCode === 200 && body.trim() === 'ok');
      });
      res.on('error', () => {
        resolve(false);
      });
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => {
      resolve(false);
    });
    req.end();
  });
}

/** What a node dir holds now, and a check of what of it is left later (for crash-recovery tests). */
export interface NodeDirProbe {
  readonly name: string | undefined;
  /** Containers the dir's runtime knows of (CRI, runc, shim bundles). */
  readonly containerIds: readonly string[];
  /** Network namespaces mounted under the dir. */
  readonly networkNamespaces: readonly number[];
  /** Processes of the node still running (command line naming the dir, or in a container cgroup). */
  readonly processes: readonly string[];
  leftovers(): string[];
}

export function probeNodeDir(dir: string): NodeDirProbe {
  const state = readState(dir);
  const ids = containerIdsOnDisk(dir, state);
  const netns = new Set<number>();
  for (const m of mountsUnder(dir)) {
    const ns = /^net:\[(\d+)\]$/.exec(m.root);
    if (m.fsType === 'nsfs' && ns !== null) netns.add(Number(ns[1]));
  }
  const idList = [...ids];
  const procs = processes()
    .filter((p) => p.cmdline.includes(`${dir}/`) || idList.some((id) => p.cgroup.includes(`/${K8S_NAMESPACE}/${id}`)))
    .map((p) => `${p.pid}: ${p.cmdline.slice(0, 120)}`);
  return {
    name: state?.name,
    containerIds: idList,
    networkNamespaces: [...netns],
    processes: procs,
    leftovers: () => (state === undefined ? (existsSync(dir) ? [`dir ${dir}`] : []) : nodeLeftovers(state, ids, netns)),
  };
}
