/**
 * A real Kubernetes control plane (etcd + kube-apiserver, and on request kube-controller-manager
 * and kube-scheduler) for the integration tests.
 *
 * The binaries are built from the Go module proxy by `scripts/build-kube-binaries.sh`; this module
 * only starts them on free loopback ports in a fresh temp dir, waits until they are ready, and
 * stops them again. See docs/testing.md.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import {
  accessSync,
  appendFileSync,
  closeSync,
  constants as fsConstants,
  existsSync,
  openSync,
  readFileSync,
  rmSync,
} from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { errorMessage } from '../../src/core/unknown-values.js';

export interface ControlPlane {
  /** https://127.0.0.1:<port> */
  readonly server: string;
  /** PEM file to trust for `server` (the apiserver's self-signed certificate and its CA). */
  readonly caFile: string;
  /** Bearer token of a `system:masters` user (bypasses RBAC). */
  readonly adminToken: string;
  /** kubeconfig using `adminToken`, context `lvp-test`. */
  readonly kubeconfigPath: string;
  /** Temp dir holding etcd data, certificates, keys and the process logs. Removed by stop(). */
  readonly dir: string;
  /** Process ids, for diagnostics and the harness' own clean-up test. */
  readonly pids: {
    readonly etcd: number;
    readonly apiserver: number;
    /** Only with `controllers: true`. */
    readonly controllerManager?: number;
    /** Only with `controllers: true`. */
    readonly scheduler?: number;
  };
  /**
   * SIGKILLs etcd or kube-apiserver, waits `downMs`, and starts it again with the same flags, ports
   * and data (a crash and a supervisor's restart); resolves once it answers its health check.
   * Restarts run one at a time. `pids` keeps the first processes' ids.
   */
  restart(component: RestartableComponent, downMs?: number): Promise<RestartTimings>;
  /**
   * Stops kube-scheduler and kube-controller-manager (if started), then kube-apiserver, then etcd
   * (SIGTERM, SIGKILL after a deadline) and removes `dir`. Idempotent.
   */
  stop(): Promise<void>;
}

/** What a ControlPlane.restart took: killed → spawned again, spawned → healthy. */
export interface RestartTimings {
  readonly downMs: number;
  readonly healthyMs: number;
}

export interface StartControlPlaneOptions {
  /** Directory holding `etcd` and `kube-apiserver` (last stdout line of scripts/build-kube-binaries.sh). */
  readonly binDir: string;
  /** Aborting stops whatever was started, removes the temp dir and rejects with ControlPlaneStartError. */
  readonly signal?: AbortSignal;
  /** Time allowed for etcd and the apiserver to become ready (default 90 s). */
  readonly readyTimeoutMs?: number;
  /**
   * kube-apiserver `--etcd-compaction-interval` in seconds (default 5; 0 disables compaction). A real
   * cluster compacts every 5 minutes; a short interval lets tests see the 410 Gone a watch from a
   * compacted resourceVersion gets within seconds. Only watches the apiserver serves from etcd see
   * it: the watch cache (on for every resource but PodTemplates, see WATCH_CACHE_SIZES) initialises
   * at start-up and replays its whole history, so recent resourceVersions stay watchable there.
   */
  readonly etcdCompactionIntervalSeconds?: number;
  /** Extra kube-apiserver flags, appended after the harness' own (a later flag wins). */
  readonly extraApiserverArgs?: readonly string[];
  /**
   * Also start kube-controller-manager (with exactly CONTROLLERS) and kube-scheduler against the
   * apiserver. Off by default: the shared control plane of a test run has no controllers, so the
   * tests that play them (test/support/cluster.ts) are not raced by real ones. Tests that want the
   * real claim lifecycle start a control plane of their own with this on.
   */
  readonly controllers?: boolean;
  /**
   * Keep the ServiceAccount admission plugin on (off by default): every pod then gets the
   * projected token volume `kube-api-access-*` (a token the kubelet requests, the
   * `kube-root-ca.crt` ConfigMap, the namespace), as in a real cluster, and its ServiceAccount must
   * exist. Tests of pods on a real node that talk to the apiserver as their ServiceAccount.
   */
  readonly serviceAccountAdmission?: boolean;
}

/**
 * The kube-controller-manager controllers started with `controllers: true`: the claim lifecycle
 * (binding, release, the protection finalizers), cleanup Jobs and their pods, StatefulSets, and the
 * garbage collector that deletes a Job's pods. Nothing else, and in particular not the
 * node-lifecycle controller: no kubelet renews Node Leases here, so it would mark every Node
 * NotReady and taint it after 50 s. Nodes stay as a test registers them.
 */
export const CONTROLLERS: readonly string[] = [
  'persistentvolume-binder-controller',
  'persistentvolume-protection-controller',
  'persistentvolumeclaim-protection-controller',
  'job-controller',
  'garbage-collector-controller',
  'statefulset-controller',
];

/** Thrown when the control plane cannot be started (or the start was aborted). */
export class ControlPlaneStartError extends Error {
  override readonly name = 'ControlPlaneStartError';
  /** True when the start was cancelled through `signal`. */
  readonly aborted: boolean;
  /** The temp dir that was used (already removed when this is thrown). */
  readonly dir: string;
  /** Pids of the processes that had been spawned (already stopped when this is thrown). */
  readonly pids: readonly number[];

  constructor(message: string, details: { aborted: boolean; dir: string; pids: readonly number[]; cause?: unknown }) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.aborted = details.aborted;
    this.dir = details.dir;
    this.pids = details.pids;
  }
}

const DEFAULT_READY_TIMEOUT_MS = 90_000;
const DEFAULT_COMPACTION_SECONDS = 5;
/**
 * PodTemplates (unused by the provisioner) bypass the watch cache, so a watch from a compacted
 * resourceVersion on them reliably gets 410 Gone: the deterministic way for tests to exercise an
 * informer's relist. Every other resource keeps the watch cache, as in a real cluster.
 */
const WATCH_CACHE_SIZES = 'podtemplates#0';
const STOP_GRACE_MS = 10_000;
const KILL_WAIT_MS = 5_000;
/** Time a restarted etcd or kube-apiserver has to answer its health check. */
const RESTART_READY_MS = 60_000;
const MAX_PORT_ATTEMPTS = 3;
const LOG_TAIL_BYTES = 4_000;

/** Every child process still running, killed from the 'exit' handler as a last resort. */
const liveChildren = new Set<ChildProcess>();
/** Temp dirs of control planes not stopped yet, removed from the 'exit' handler as a last resort. */
const liveDirs = new Set<string>();
let exitHandlerInstalled = false;

function installExitHandler(): void {
  if (exitHandlerInstalled) return;
  exitHandlerInstalled = true;
  process.on('exit', () => {
    for (const child of liveChildren) {
      try {
        child.kill('SIGKILL');
      } catch {
        // already gone
      }
    }
    for (const dir of liveDirs) {
      try {
        rmSync(dir, { recursive: true, force: true });
      } catch {
        // a SIGKILLed process may still hold files open; nothing more can be done here
      }
    }
  });
}

/**
 * `setpriv --pdeathsig KILL` (util-linux) makes the kernel kill the child when this process dies,
 * even by SIGKILL, which no 'exit' handler can cover.
 */
const SETPRIV = ['/usr/bin/setpriv', '/bin/setpriv'].find((p) => {
  try {
    accessSync(p, fsConstants.X_OK);
    return true;
  } catch {
    return false;
  }
});

class StartAttemptError extends Error {
  override readonly name = 'StartAttemptError';
  constructor(
    message: string,
    readonly portInUse: boolean,
  ) {
    super(message);
  }
}

interface Ports {
  readonly etcdClient: number;
  readonly etcdPeer: number;
  readonly apiserver: number;
  readonly controllerManager: number;
  readonly scheduler: number;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', reject);
    server.listen({ host: '127.0.0.1', port: 0, exclusive: true }, () => {
      const address = server.address();
      if (address === null || typeof address === 'string') {
        server.close();
        reject(new Error('could not determine a free port'));
        return;
      }
      const { port } = address;
      server.close(() => {
        resolve(port);
      });
    });
  });
}

async function freePorts(): Promise<Ports> {
  const ports = new Set<number>();
  while (ports.size < 5) ports.add(await freePort());
  const [etcdClient, etcdPeer, apiserver, controllerManager, scheduler] = [...ports] as [
    number,
    number,
    number,
    number,
    number,
  ];
  return { etcdClient, etcdPeer, apiserver, controllerManager, scheduler };
}

const DIR_PREFIX = 'lvp-control-plane-';
const OWNER_FILE = 'owner.pid';

/**
 * Removes temp dirs left by control planes whose owning process died without running its 'exit'
 * handler (SIGKILL; the processes themselves die through --pdeathsig). Dirs without an owner file,
 * or whose owner is alive, are left alone.
 */
async function sweepStaleDirs(root: string): Promise<void> {
  let entries: string[];
  try {
    entries = await readdir(root);
  } catch {
    return;
  }
  for (const entry of entries.filter((e) => e.startsWith(DIR_PREFIX))) {
    const dir = join(root, entry);
    try {
      const owner = Number((await readFile(join(dir, OWNER_FILE), 'utf8')).trim());
      if (!Number.isInteger(owner) || owner <= 0 || pidAlive(owner)) continue;
      await rm(dir, { recursive: true, force: true });
    } catch {
      // no owner file, or removed concurrently
    }
  }
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
  try {
    // a killed process whose parent has not reaped it yet is a zombie: dead for our purposes
    return !/^\d+ \(.*\) Z /s.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return true;
  }
}

function pickTempRoot(): string {
  try {
    accessSync('/dev/shm', fsConstants.W_OK);
    return '/dev/shm';
  } catch {
    return tmpdir();
  }
}

async function readTail(file: string): Promise<string> {
  try {
    const text = await readFile(file, 'utf8');
    return text.length > LOG_TAIL_BYTES ? `...${text.slice(-LOG_TAIL_BYTES)}` : text;
  } catch {
    return '(no log)';
  }
}

function exited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

function waitForExit(child: ChildProcess, timeoutMs: number): Promise<boolean> {
  if (exited(child)) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      child.off('exit', onExit);
      resolve(false);
    }, timeoutMs);
    const onExit = (): void => {
      clearTimeout(timer);
      resolve(true);
    };
    child.once('exit', onExit);
  });
}

async function terminate(child: ChildProcess): Promise<void> {
  if (!exited(child)) {
    child.kill('SIGTERM');
    if (!(await waitForExit(child, STOP_GRACE_MS))) {
      child.kill('SIGKILL');
      await waitForExit(child, KILL_WAIT_MS);
    }
  }
  liveChildren.delete(child);
}

/** The log file of each process spawnLogged started (a supervisor starts it again with the same). */
const logFiles = new WeakMap<ChildProcess, string>();

/** How long a supervised component stays down before it is started again (a crash loop is bounded). */
const RESPAWN_DELAY_MS = 1000;

/**
 * Starts `child`'s command again (same binary, arguments and log) each time it exits while
 * `stopping()` is false, after RESPAWN_DELAY_MS; returns the process running now.
 */
function supervise(child: ChildProcess, stopping: () => boolean): () => ChildProcess {
  let current = child;
  const logFile = logFiles.get(child);
  const watch = (proc: ChildProcess): void => {
    proc.once('exit', (code, signal) => {
      if (stopping() || logFile === undefined) return;
      appendFileSync(
        logFile,
        `\nharness: exited (${String(code ?? signal)}); starting it again in ${String(RESPAWN_DELAY_MS)} ms\n`,
      );
      setTimeout(() => {
        if (stopping()) return;
        const args = proc.spawnargs.slice(1);
        // spawnLogged wraps in setpriv: the real binary and its arguments follow `--`
        const at = args.indexOf('--');
        const [binary, ...rest] = at >= 0 ? args.slice(at + 1) : [proc.spawnfile, ...args];
        current = spawnLogged(binary ?? proc.spawnfile, rest, logFile);
        watch(current);
      }, RESPAWN_DELAY_MS).unref();
    });
  };
  watch(child);
  return () => current;
}

/**
 * Spawns a test binary with its output appended to logFile, killed with this process (setpriv's
 * pdeathsig, and the exit handler for the children still alive).
 */
export function spawnLogged(
  binary: string,
  args: readonly string[],
  logFile: string,
  extraEnv: Readonly<Record<string, string>> = {},
): ChildProcess {
  const fd = openSync(logFile, 'a');
  try {
    const [command, commandArgs] =
      SETPRIV === undefined ? [binary, [...args]] : [SETPRIV, ['--pdeathsig', 'KILL', '--', binary, ...args]];
    const child = spawn(command, commandArgs, {
      detached: false,
      stdio: ['ignore', fd, fd],
      env: {
        PATH: process.env['PATH'] ?? '/usr/sbin:/usr/bin:/sbin:/bin',
        HOME: process.env['HOME'] ?? '/',
        ...extraEnv,
      },
    });
    liveChildren.add(child);
    logFiles.set(child, logFile);
    child.once('exit', () => liveChildren.delete(child));
    // spawn errors (ENOENT, EACCES) surface as an exit with no pid; keep them from crashing the process
    child.on('error', () => undefined);
    return child;
  } finally {
    closeSync(fd);
  }
}

interface ProbeResult {
  readonly status: number;
  readonly body: string;
}

function probe(url: string, options: { ca?: Buffer | undefined; token?: string }): Promise<ProbeResult> {
  return new Promise((resolve, reject) => {
    const parsed = new URL(url);
    const headers: Record<string, string> = {};
    if (options.token !== undefined) headers['Authorization'] = `Bearer ${options.token}`;
    const callback = (res: import('node:http').IncomingMessage): void => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => {
        resolve({ status: res.statusCode ?? 0, body });
      });
      res.on('error', reject);
    };
    const req =
      parsed.protocol === 'https:'
        ? httpsRequest(parsed, { headers, timeout: 5_000, ...(options.ca ? { ca: options.ca } : {}) }, callback)
        : httpRequest(parsed, { headers, timeout: 5_000 }, callback);
    req.on('timeout', () => req.destroy(new Error('probe timed out')));
    req.on('error', reject);
    req.end();
  });
}

async function waitUntil(
  what: string,
  deadline: number,
  signal: AbortSignal | undefined,
  child: ChildProcess,
  logFile: string,
  check: () => Promise<boolean>,
): Promise<void> {
  let lastError = '';
  for (;;) {
    signal?.throwIfAborted();
    if (exited(child)) {
      const tail = await readTail(logFile);
      throw new StartAttemptError(
        `${what} exited early (code ${String(child.exitCode)}, signal ${String(child.signalCode)}); log tail:\n${tail}`,
        /address already in use/i.test(tail),
      );
    }
    try {
      if (await check()) return;
    } catch (error) {
      lastError = errorMessage(error);
    }
    if (Date.now() > deadline) {
      throw new StartAttemptError(
        `${what} not ready in time${lastError ? ` (last error: ${lastError})` : ''}; log tail:\n${await readTail(logFile)}`,
        false,
      );
    }
    await delay(200, undefined, signal ? { signal } : undefined);
  }
}

/** A kubeconfig for a bearer token (JSON, which is valid YAML). */
export function kubeconfigYaml(server: string, caFile: string, token: string, user = 'lvp-test-admin'): string {
  // JSON is valid YAML, and every kubeconfig reader accepts it.
  return `${JSON.stringify(
    {
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'lvp-test', cluster: { server, 'certificate-authority': caFile } }],
      users: [{ name: user, user: { token } }],
      contexts: [{ name: 'lvp-test', context: { cluster: 'lvp-test', user, namespace: 'default' } }],
      'current-context': 'lvp-test',
    },
    null,
    2,
  )}\n`;
}

/** The control-plane processes a test may kill and start again (ControlPlane.restart). */
export type RestartableComponent = 'etcd' | 'kube-apiserver';

interface Attempt {
  readonly etcd: ChildProcess;
  readonly apiserver: ChildProcess;
  readonly server: string;
  /** Starts the component again with the same flags, ports and data; resolves once it is healthy. */
  readonly respawn: Readonly<Record<RestartableComponent, (deadline: number) => Promise<ChildProcess>>>;
  readonly controllerManager?: ChildProcess;
  readonly scheduler?: ChildProcess;
}

/** Tokens of kube-controller-manager and kube-scheduler (in tokens.csv beside the admin's). */
interface ComponentTokens {
  readonly controllerManager: string;
  readonly scheduler: string;
}

/**
 * The identities the components authenticate as. kube-scheduler is `system:kube-scheduler`, whose
 * permissions are the apiserver's bootstrap RBAC (ClusterRoles system:kube-scheduler and
 * system:volume-scheduler), as in a kubeadm cluster. kube-controller-manager runs its controllers
 * with its own credentials (no --use-service-account-credentials: that needs the token controller
 * and ServiceAccount admission), which takes the rights of every controller: system:masters.
 */
const CONTROLLER_MANAGER_USER = 'system:kube-controller-manager';
/**
 * Off with the controllers: this admission plugin taints every new Node
 * `node.kubernetes.io/not-ready:NoSchedule` for the node-lifecycle controller to lift once the
 * kubelet reports Ready. Neither runs here (see CONTROLLERS), so the taint would stay and the
 * scheduler would place nothing.
 */
const NO_LIFECYCLE_ADMISSION = 'TaintNodesByCondition';
const SCHEDULER_USER = 'system:kube-scheduler';

function tokensCsv(adminToken: string, components: ComponentTokens | undefined): string {
  const lines = [`${adminToken},lvp-test-admin,lvp-test-admin,system:masters`];
  if (components !== undefined) {
    lines.push(`${components.controllerManager},${CONTROLLER_MANAGER_USER},${CONTROLLER_MANAGER_USER},system:masters`);
    lines.push(`${components.scheduler},${SCHEDULER_USER},${SCHEDULER_USER}`);
  }
  return `${lines.join('\n')}\n`;
}

/** Secure-serving flags of kube-controller-manager and kube-scheduler: loopback, a self-signed cert. */
function componentServingArgs(kubeconfig: string, port: number, certDir: string): string[] {
  return [
    // No --authentication/authorization-kubeconfig: nothing but the health probes (always
    // allowed) calls these servers, and the client CA they would read is not configured here.
    `--kubeconfig=${kubeconfig}`,
    '--leader-elect=false',
    '--bind-address=127.0.0.1',
    `--secure-port=${port}`,
    `--cert-dir=${certDir}`,
    '--profiling=false',
  ];
}

/** Waits until a component's health endpoint answers ok; it serves a certificate it signed itself into certDir. */
async function waitComponentHealthy(
  what: string,
  url: string,
  certFile: string,
  deadline: number,
  signal: AbortSignal | undefined,
  child: ChildProcess,
  logFile: string,
): Promise<void> {
  await waitUntil(what, deadline, signal, child, logFile, async () => {
    if (!existsSync(certFile)) return false;
    const res = await probe(url, { ca: await readFile(certFile) });
    return res.status === 200 && res.body.trim() === 'ok';
  });
}

async function startComponents(
  dir: string,
  binDir: string,
  server: string,
  caFile: string,
  tokens: ComponentTokens,
  ports: Ports,
  deadline: number,
  signal: AbortSignal | undefined,
  started: ChildProcess[],
): Promise<{ controllerManager: ChildProcess; scheduler: ChildProcess }> {
  const kcmKubeconfig = join(dir, 'kube-controller-manager.kubeconfig');
  const schedulerKubeconfig = join(dir, 'kube-scheduler.kubeconfig');
  await writeFile(kcmKubeconfig, kubeconfigYaml(server, caFile, tokens.controllerManager, CONTROLLER_MANAGER_USER), {
    mode: 0o600,
  });
  await writeFile(schedulerKubeconfig, kubeconfigYaml(server, caFile, tokens.scheduler, SCHEDULER_USER), {
    mode: 0o600,
  });

  const kcmLog = join(dir, 'kube-controller-manager.log');
  const kcmCerts = join(dir, 'pki-kube-controller-manager');
  const controllerManager = spawnLogged(
    join(binDir, 'kube-controller-manager'),
    [
      ...componentServingArgs(kcmKubeconfig, ports.controllerManager, kcmCerts),
      `--controllers=${CONTROLLERS.join(',')}`,
      `--root-ca-file=${caFile}`,
      '--v=1',
    ],
    kcmLog,
  );
  started.push(controllerManager);
  const schedulerLog = join(dir, 'kube-scheduler.log');
  const schedulerCerts = join(dir, 'pki-kube-scheduler');
  const scheduler = spawnLogged(
    join(binDir, 'kube-scheduler'),
    [...componentServingArgs(schedulerKubeconfig, ports.scheduler, schedulerCerts), '--v=1'],
    schedulerLog,
  );
  started.push(scheduler);
  await waitComponentHealthy(
    'kube-controller-manager',
    `https://127.0.0.1:${ports.controllerManager}/healthz`,
    join(kcmCerts, 'kube-controller-manager.crt'),
    deadline,
    signal,
    controllerManager,
    kcmLog,
  );
  await waitComponentHealthy(
    'kube-scheduler',
    `https://127.0.0.1:${ports.scheduler}/readyz`,
    join(schedulerCerts, 'kube-scheduler.crt'),
    deadline,
    signal,
    scheduler,
    schedulerLog,
  );
  return { controllerManager, scheduler };
}

function disabledAdmission(controllers: boolean, serviceAccountAdmission: boolean): string[] {
  const off = [
    ...(serviceAccountAdmission ? [] : ['ServiceAccount']),
    ...(controllers ? [NO_LIFECYCLE_ADMISSION] : []),
  ];
  return off.length > 0 ? [`--disable-admission-plugins=${off.join(',')}`] : [];
}

async function startAttempt(
  dir: string,
  binDir: string,
  adminToken: string,
  compactionSeconds: number,
  extraArgs: readonly string[],
  components: ComponentTokens | undefined,
  serviceAccountAdmission: boolean,
  deadline: number,
  signal: AbortSignal | undefined,
  started: ChildProcess[],
): Promise<Attempt> {
  const ports = await freePorts();
  const etcdLog = join(dir, 'etcd.log');
  const apiserverLog = join(dir, 'kube-apiserver.log');
  const etcdUrl = `http://127.0.0.1:${ports.etcdClient}`;
  const peerUrl = `http://127.0.0.1:${ports.etcdPeer}`;

  const etcdArgs = [
    '--name=lvp-test',
    `--data-dir=${join(dir, 'etcd')}`,
    `--listen-client-urls=${etcdUrl}`,
    `--advertise-client-urls=${etcdUrl}`,
    `--listen-peer-urls=${peerUrl}`,
    `--initial-advertise-peer-urls=${peerUrl}`,
    `--initial-cluster=lvp-test=${peerUrl}`,
    '--unsafe-no-fsync=true',
    '--watch-progress-notify-interval=5s',
    '--log-level=warn',
  ];
  const spawnEtcd = async (until: number): Promise<ChildProcess> => {
    const child = spawnLogged(join(binDir, 'etcd'), etcdArgs, etcdLog);
    started.push(child);
    await waitUntil('etcd', until, signal, child, etcdLog, async () => {
      const res = await probe(`${etcdUrl}/health`, {});
      return res.status === 200 && /"health":\s*"true"/.test(res.body);
    });
    return child;
  };
  const etcd = await spawnEtcd(deadline);

  const pki = join(dir, 'pki');
  const apiserverArgs = [
    `--etcd-servers=${etcdUrl}`,
    '--bind-address=127.0.0.1',
    '--advertise-address=127.0.0.1',
    `--secure-port=${ports.apiserver}`,
    `--cert-dir=${pki}`,
    `--token-auth-file=${join(dir, 'tokens.csv')}`,
    '--authorization-mode=RBAC',
    '--service-account-issuer=https://kubernetes.default.svc',
    `--service-account-key-file=${join(dir, 'sa.key')}`,
    `--service-account-signing-key-file=${join(dir, 'sa.key')}`,
    '--service-cluster-ip-range=10.0.0.0/24',
    '--allow-privileged=true',
    // Reach kubelets (logs, exec) at their InternalIP: the default order starts with Hostname, a
    // DNS lookup of the node name that would leave the machine. No effect without kubelets.
    '--kubelet-preferred-address-types=InternalIP',
    ...disabledAdmission(components !== undefined, serviceAccountAdmission),
    `--etcd-compaction-interval=${compactionSeconds}s`,
    `--watch-cache-sizes=${WATCH_CACHE_SIZES}`,
    '--profiling=false',
    '--v=0',
    ...extraArgs,
  ];
  const server = `https://127.0.0.1:${ports.apiserver}`;
  const caFile = join(pki, 'apiserver.crt');
  const spawnApiserver = async (until: number): Promise<ChildProcess> => {
    const child = spawnLogged(join(binDir, 'kube-apiserver'), apiserverArgs, apiserverLog);
    started.push(child);
    await waitUntil('kube-apiserver', until, signal, child, apiserverLog, async () => {
      if (!existsSync(caFile)) return false;
      const res = await probe(`${server}/readyz`, { ca: await readFile(caFile), token: adminToken });
      return res.status === 200 && res.body.trim() === 'ok';
    });
    return child;
  };
  const apiserver = await spawnApiserver(deadline);
  const respawn = { etcd: spawnEtcd, 'kube-apiserver': spawnApiserver };
  if (components === undefined) return { etcd, apiserver, server, respawn };
  return {
    etcd,
    apiserver,
    server,
    respawn,
    ...(await startComponents(dir, binDir, server, caFile, components, ports, deadline, signal, started)),
  };
}

/**
 * ControlPlane.restart over the plane's current processes: one restart at a time; `settled` waits
 * for the one in flight (stop() does, so it stops the process that runs then).
 */
function restarter(
  current: Record<RestartableComponent, ChildProcess>,
  respawn: Attempt['respawn'],
  stopping: () => boolean,
): { restart: ControlPlane['restart']; settled: () => Promise<unknown> } {
  let restarting: Promise<unknown> = Promise.resolve();
  const restart = (component: RestartableComponent, downMs = 0): Promise<RestartTimings> => {
    const next = restarting.then(async () => {
      if (stopping()) throw new Error(`the control plane is stopping: ${component} not restarted`);
      const killed = Date.now();
      current[component].kill('SIGKILL');
      await waitForExit(current[component], KILL_WAIT_MS);
      liveChildren.delete(current[component]);
      if (downMs > 0) await delay(downMs);
      const spawned = Date.now();
      current[component] = await respawn[component](spawned + RESTART_READY_MS);
      return { downMs: spawned - killed, healthyMs: Date.now() - spawned };
    });
    restarting = next.catch(() => undefined);
    return next;
  };
  return { restart, settled: () => restarting };
}

/** Starts etcd and kube-apiserver from `binDir` and resolves once the apiserver answers /readyz. */
export async function startControlPlane(options: StartControlPlaneOptions): Promise<ControlPlane> {
  const { binDir, signal } = options;
  const binaries = ['etcd', 'kube-apiserver'];
  if (options.controllers === true) binaries.push('kube-controller-manager', 'kube-scheduler');
  for (const binary of binaries) {
    try {
      accessSync(join(binDir, binary), fsConstants.X_OK);
    } catch (cause) {
      throw new ControlPlaneStartError(`${join(binDir, binary)} is missing or not executable`, {
        aborted: false,
        dir: '',
        pids: [],
        cause,
      });
    }
  }
  const compactionSeconds = options.etcdCompactionIntervalSeconds ?? DEFAULT_COMPACTION_SECONDS;
  if (!Number.isInteger(compactionSeconds) || compactionSeconds < 0) {
    throw new ControlPlaneStartError(`etcdCompactionIntervalSeconds must be a non-negative integer`, {
      aborted: false,
      dir: '',
      pids: [],
    });
  }
  installExitHandler();
  const deadline = Date.now() + (options.readyTimeoutMs ?? DEFAULT_READY_TIMEOUT_MS);
  const tempRoot = pickTempRoot();
  await sweepStaleDirs(tempRoot);
  const dir = await mkdtemp(join(tempRoot, DIR_PREFIX));
  liveDirs.add(dir);
  const started: ChildProcess[] = [];
  const cleanupAfterFailure = async (): Promise<void> => {
    // the last spawned first (the apiserver before etcd)
    for (const child of [...started].reverse()) await terminate(child);
    await rm(dir, { recursive: true, force: true });
    liveDirs.delete(dir);
  };

  try {
    signal?.throwIfAborted();
    await writeFile(join(dir, OWNER_FILE), `${process.pid}\n`);
    const adminToken = randomBytes(24).toString('hex');
    await mkdir(join(dir, 'pki'), { recursive: true, mode: 0o700 });
    const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    await writeFile(join(dir, 'sa.key'), privateKey.export({ type: 'pkcs1', format: 'pem' }), { mode: 0o600 });
    const components: ComponentTokens | undefined =
      options.controllers === true
        ? { controllerManager: randomBytes(24).toString('hex'), scheduler: randomBytes(24).toString('hex') }
        : undefined;
    await writeFile(join(dir, 'tokens.csv'), tokensCsv(adminToken, components), { mode: 0o600 });

    let attempt: Attempt | undefined;
    for (let i = 1; attempt === undefined; i++) {
      try {
        attempt = await startAttempt(
          dir,
          binDir,
          adminToken,
          compactionSeconds,
          options.extraApiserverArgs ?? [],
          components,
          options.serviceAccountAdmission === true,
          deadline,
          signal,
          started,
        );
      } catch (error) {
        if (!(error instanceof StartAttemptError && error.portInUse && i < MAX_PORT_ATTEMPTS)) throw error;
        // Another process took one of the ports between probing and binding: start over on new ports.
        for (const child of [...started].reverse()) await terminate(child);
        started.length = 0;
        await rm(join(dir, 'etcd'), { recursive: true, force: true });
        await rm(join(dir, 'pki'), { recursive: true, force: true });
        for (const name of ['etcd', 'kube-apiserver', 'kube-controller-manager', 'kube-scheduler']) {
          await rm(join(dir, `${name}.log`), { force: true });
          await rm(join(dir, `pki-${name}`), { recursive: true, force: true });
        }
        await mkdir(join(dir, 'pki'), { recursive: true, mode: 0o700 });
      }
    }

    const { server, controllerManager, scheduler, respawn } = attempt;
    const current: Record<RestartableComponent, ChildProcess> = {
      etcd: attempt.etcd,
      'kube-apiserver': attempt.apiserver,
    };
    const { etcd, apiserver } = attempt;
    const caFile = join(dir, 'pki', 'apiserver.crt');
    const kubeconfigPath = join(dir, 'kubeconfig');
    await writeFile(kubeconfigPath, kubeconfigYaml(server, caFile, adminToken), { mode: 0o600 });

    let stopping: Promise<void> | undefined;
    // A real control plane's supervisor (the kubelet of its static pods) starts these again when they
    // exit: kube-scheduler exits on purpose when its cache is corrupted (a Node deleted and
    // registered again under the same name) or when it loses its leader lease.
    const schedulerNow = scheduler === undefined ? undefined : supervise(scheduler, () => stopping !== undefined);
    const kcmNow =
      controllerManager === undefined ? undefined : supervise(controllerManager, () => stopping !== undefined);
    const stop = (): Promise<void> => {
      stopping ??= (async () => {
        if (schedulerNow !== undefined) await terminate(schedulerNow());
        if (kcmNow !== undefined) await terminate(kcmNow());
        await settled();
        await terminate(current['kube-apiserver']);
        await terminate(current.etcd);
        await rm(dir, { recursive: true, force: true });
        liveDirs.delete(dir);
      })();
      return stopping;
    };
    const { restart, settled } = restarter(current, respawn, () => stopping !== undefined);
    return {
      server,
      caFile,
      adminToken,
      kubeconfigPath,
      dir,
      restart,
      pids: {
        etcd: etcd.pid ?? -1,
        apiserver: apiserver.pid ?? -1,
        ...(controllerManager === undefined ? {} : { controllerManager: controllerManager.pid ?? -1 }),
        ...(scheduler === undefined ? {} : { scheduler: scheduler.pid ?? -1 }),
      },
      stop,
    };
  } catch (error) {
    const pids = started.map((c) => c.pid ?? -1);
    await cleanupAfterFailure();
    const aborted = signal?.aborted === true;
    const message = aborted ? 'control plane start aborted' : `control plane failed to start: ${errorMessage(error)}`;
    throw new ControlPlaneStartError(message, { aborted, dir, pids, cause: aborted ? signal.reason : error });
  }
}
