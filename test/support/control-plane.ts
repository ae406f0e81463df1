/**
 * A real Kubernetes control plane (etcd + kube-apiserver) for the integration tests.
 *
 * The binaries are built from the Go module proxy by `scripts/build-kube-binaries.sh`; this module
 * only starts them on free loopback ports in a fresh temp dir, waits until they are ready, and
 * stops them again. See docs/testing.md.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { accessSync, closeSync, constants as fsConstants, existsSync, openSync, readFileSync, rmSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';

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
  readonly pids: { readonly etcd: number; readonly apiserver: number };
  /** Stops kube-apiserver then etcd (SIGTERM, SIGKILL after a deadline) and removes `dir`. Idempotent. */
  stop(): Promise<void>;
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
}

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
}

async function freePort(): Promise<number> {
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
  while (ports.size < 3) ports.add(await freePort());
  const [etcdClient, etcdPeer, apiserver] = [...ports] as [number, number, number];
  return { etcdClient, etcdPeer, apiserver };
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

function spawnLogged(binary: string, args: readonly string[], logFile: string): ChildProcess {
  const fd = openSync(logFile, 'a');
  try {
    const [command, commandArgs] =
      SETPRIV === undefined ? [binary, [...args]] : [SETPRIV, ['--pdeathsig', 'KILL', '--', binary, ...args]];
    const child = spawn(command, commandArgs, {
      detached: false,
      stdio: ['ignore', fd, fd],
      env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', HOME: process.env['HOME'] ?? '/' },
    });
    liveChildren.add(child);
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

function probe(url: string, options: { ca?: Buffer; token?: string }): Promise<ProbeResult> {
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
      lastError = error instanceof Error ? error.message : String(error);
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

function kubeconfigYaml(server: string, caFile: string, token: string): string {
  // JSON is valid YAML, and every kubeconfig reader accepts it.
  return `${JSON.stringify(
    {
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'lvp-test', cluster: { server, 'certificate-authority': caFile } }],
      users: [{ name: 'lvp-test-admin', user: { token } }],
      contexts: [{ name: 'lvp-test', context: { cluster: 'lvp-test', user: 'lvp-test-admin', namespace: 'default' } }],
      'current-context': 'lvp-test',
    },
    null,
    2,
  )}\n`;
}

interface Attempt {
  readonly etcd: ChildProcess;
  readonly apiserver: ChildProcess;
  readonly server: string;
}

async function startAttempt(
  dir: string,
  binDir: string,
  adminToken: string,
  compactionSeconds: number,
  extraArgs: readonly string[],
  deadline: number,
  signal: AbortSignal | undefined,
  started: ChildProcess[],
): Promise<Attempt> {
  const ports = await freePorts();
  const etcdLog = join(dir, 'etcd.log');
  const apiserverLog = join(dir, 'kube-apiserver.log');
  const etcdUrl = `http://127.0.0.1:${ports.etcdClient}`;
  const peerUrl = `http://127.0.0.1:${ports.etcdPeer}`;

  const etcd = spawnLogged(
    join(binDir, 'etcd'),
    [
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
    ],
    etcdLog,
  );
  started.push(etcd);
  await waitUntil('etcd', deadline, signal, etcd, etcdLog, async () => {
    const res = await probe(`${etcdUrl}/health`, {});
    return res.status === 200 && /"health":\s*"true"/.test(res.body);
  });

  const pki = join(dir, 'pki');
  const apiserver = spawnLogged(
    join(binDir, 'kube-apiserver'),
    [
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
      '--disable-admission-plugins=ServiceAccount',
      `--etcd-compaction-interval=${compactionSeconds}s`,
      `--watch-cache-sizes=${WATCH_CACHE_SIZES}`,
      '--profiling=false',
      '--v=0',
      ...extraArgs,
    ],
    apiserverLog,
  );
  started.push(apiserver);
  const server = `https://127.0.0.1:${ports.apiserver}`;
  const caFile = join(pki, 'apiserver.crt');
  await waitUntil('kube-apiserver', deadline, signal, apiserver, apiserverLog, async () => {
    if (!existsSync(caFile)) return false;
    const res = await probe(`${server}/readyz`, { ca: await readFile(caFile), token: adminToken });
    return res.status === 200 && res.body.trim() === 'ok';
  });
  return { etcd, apiserver, server };
}

/** Starts etcd and kube-apiserver from `binDir` and resolves once the apiserver answers /readyz. */
export async function startControlPlane(options: StartControlPlaneOptions): Promise<ControlPlane> {
  const { binDir, signal } = options;
  for (const binary of ['etcd', 'kube-apiserver']) {
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
    // apiserver (spawned last) first
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
    await writeFile(join(dir, 'tokens.csv'), `${adminToken},lvp-test-admin,lvp-test-admin,system:masters\n`, {
      mode: 0o600,
    });

    let attempt: Attempt | undefined;
    for (let i = 1; attempt === undefined; i++) {
      try {
        attempt = await startAttempt(
          dir,
          binDir,
          adminToken,
          compactionSeconds,
          options.extraApiserverArgs ?? [],
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
        await rm(join(dir, 'etcd.log'), { force: true });
        await rm(join(dir, 'kube-apiserver.log'), { force: true });
        await mkdir(join(dir, 'pki'), { recursive: true, mode: 0o700 });
      }
    }

    const { etcd, apiserver, server } = attempt;
    const caFile = join(dir, 'pki', 'apiserver.crt');
    const kubeconfigPath = join(dir, 'kubeconfig');
    await writeFile(kubeconfigPath, kubeconfigYaml(server, caFile, adminToken), { mode: 0o600 });

    let stopping: Promise<void> | undefined;
    const stop = (): Promise<void> => {
      stopping ??= (async () => {
        await terminate(apiserver);
        await terminate(etcd);
        await rm(dir, { recursive: true, force: true });
        liveDirs.delete(dir);
      })();
      return stopping;
    };
    return {
      server,
      caFile,
      adminToken,
      kubeconfigPath,
      dir,
      pids: { etcd: etcd.pid ?? -1, apiserver: apiserver.pid ?? -1 },
      stop,
    };
  } catch (error) {
    const pids = started.map((c) => c.pid ?? -1);
    await cleanupAfterFailure();
    const aborted = signal?.aborted === true;
    const message = aborted
      ? 'control plane start aborted'
      : `control plane failed to start: ${error instanceof Error ? error.message : String(error)}`;
    throw new ControlPlaneStartError(message, { aborted, dir, pids, cause: aborted ? signal.reason : error });
  }
}
