// Exec credential plugins (client.authentication.k8s.io/v1 and v1beta1 ExecCredential), the way
// EKS (`aws eks get-token`), GKE (`gke-gcloud-auth-plugin`) and AKS (`kubelogin`) authenticate.
// Hand-written rather than client-node's ExecAuth, which spawns the plugin with no time limit,
// leaves its stdin open, sets no KUBERNETES_EXEC_INFO and checks nothing it prints
// (docs/architecture.md, "Kubeconfig and client-node"). Core code: the environment the plugin
// inherits is passed in by the caller.
import { KubeconfigError } from './kubeconfig-error.js';
import { nodeProcessHost } from '../process-host.js';
import type { ProcessHost } from '../process-host.js';
import { isRecord } from '../unknown-values.js';
import { childProcess } from '../on-demand-builtins.js';

export const EXEC_API_VERSIONS = ['client.authentication.k8s.io/v1', 'client.authentication.k8s.io/v1beta1'] as const;
export type ExecApiVersion = (typeof EXEC_API_VERSIONS)[number];

/** How long a plugin may take to print its credential before it is killed. */
export const DEFAULT_EXEC_TIMEOUT_MS = 15_000;
/** The most a plugin may print on stdout; an ExecCredential is a few KiB. */
const MAX_EXEC_OUTPUT_BYTES = 1024 * 1024;
/** The tail of stderr quoted in an error. */
const STDERR_TAIL_CHARS = 2_000;
/** A credential that expires this soon is refreshed before use (clock skew, request time). */
const EXPIRY_MARGIN_MS = 10_000;

/** The `exec` stanza of a kubeconfig user, validated. */
export interface ExecConfig {
  /** The command, resolved against the kubeconfig's directory when it is a relative path with a slash. */
  readonly command: string;
  readonly args: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  readonly apiVersion: ExecApiVersion;
  readonly installHint?: string;
  readonly provideClusterInfo: boolean;
  readonly interactiveMode: 'Never' | 'IfAvailable' | 'Always';
}

/** What the plugin is told about the cluster when provideClusterInfo is set. */
export interface ExecClusterInfo {
  readonly server: string;
  readonly 'certificate-authority-data'?: string;
  readonly 'tls-server-name'?: string;
  readonly 'insecure-skip-tls-verify'?: boolean;
  readonly 'proxy-url'?: string;
}

/** Credentials for one request. */
export interface RequestCredentials {
  readonly token?: string;
  readonly clientCert?: string;
  readonly clientKey?: string;
}

/** Credentials obtained at request time (an exec plugin, an auth-provider), cached until they expire. */
export interface CredentialSource {
  /** The credentials to send now; runs the plugin when none are cached or they expired. */
  get(): Promise<RequestCredentials>;
  /** The server answered 401 Unauthorized: the next get() obtains fresh credentials. */
  invalidate(): void;
}

export interface ExecCredentialOptions {
  readonly exec: ExecConfig;
  /** `kubeconfig FILE: user "NAME"`: where the plugin is configured, for messages. */
  readonly where: string;
  readonly cluster: ExecClusterInfo;
  /** The environment the plugin inherits (the caller's process environment). */
  readonly environment: Readonly<Record<string, string | undefined>>;
  readonly timeoutMs?: number;
  readonly now?: () => number;
  /** Kills the plugin's process group on a timeout; default the real process. */
  readonly host?: Pick<ProcessHost, 'kill'>;
}

/** Runs an exec plugin and caches its ExecCredential until status.expirationTimestamp. */
export class ExecCredentialSource implements CredentialSource {
  private cached: { readonly credentials: RequestCredentials; readonly expiresAt: number } | undefined;
  private running: Promise<RequestCredentials> | undefined;
  private readonly now: () => number;

  constructor(private readonly options: ExecCredentialOptions) {
    this.now = options.now ?? Date.now;
  }

  get(): Promise<RequestCredentials> {
    const cached = this.cached;
    if (cached !== undefined && this.now() < cached.expiresAt - EXPIRY_MARGIN_MS)
      return Promise.resolve(cached.credentials);
    // One plugin run at a time: concurrent requests share it.
    this.running ??= this.run().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  invalidate(): void {
    this.cached = undefined;
  }

  private async run(): Promise<RequestCredentials> {
    const { exec, where } = this.options;
    const stdout = await runPlugin(this.options);
    let parsed: unknown;
    try {
      parsed = JSON.parse(stdout);
    } catch {
      throw new KubeconfigError(
        `${where}: exec plugin "${exec.command}" printed no ExecCredential JSON: ${JSON.stringify(stdout.slice(0, 200))}`,
      );
    }
    const { credentials, expiresAt } = readExecCredential(
      parsed,
      exec.apiVersion,
      `${where}: exec plugin "${exec.command}"`,
    );
    this.cached = { credentials, expiresAt };
    return credentials;
  }
}

/** Validates what a plugin printed: kind, apiVersion, a token or a certificate pair, the expiry. */
export function readExecCredential(
  parsed: unknown,
  apiVersion: ExecApiVersion,
  what: string,
): { credentials: RequestCredentials; expiresAt: number } {
  if (!isRecord(parsed) || parsed['kind'] !== 'ExecCredential') {
    throw new KubeconfigError(`${what} printed JSON that is not an ExecCredential (kind must be "ExecCredential")`);
  }
  if (parsed['apiVersion'] !== apiVersion) {
    throw new KubeconfigError(
      `${what} printed an ExecCredential of apiVersion ${JSON.stringify(parsed['apiVersion'])}; the kubeconfig asks for ${apiVersion}`,
    );
  }
  const status = parsed['status'];
  if (!isRecord(status)) throw new KubeconfigError(`${what} printed an ExecCredential without status`);
  const text = (key: string): string | undefined => {
    const value = status[key];
    if (value === undefined || value === null || value === '') return undefined;
    if (typeof value !== 'string') throw new KubeconfigError(`${what}: status.${key} must be a string`);
    return value;
  };
  const token = text('token');
  const clientCert = text('clientCertificateData');
  const clientKey = text('clientKeyData');
  if ((clientCert === undefined) !== (clientKey === undefined)) {
    throw new KubeconfigError(`${what}: status.clientCertificateData and status.clientKeyData must come together`);
  }
  if (token === undefined && clientCert === undefined) {
    throw new KubeconfigError(`${what} printed an ExecCredential with neither status.token nor a client certificate`);
  }
  const expiry = text('expirationTimestamp');
  let expiresAt = Infinity;
  if (expiry !== undefined) {
    expiresAt = Date.parse(expiry);
    if (Number.isNaN(expiresAt)) {
      throw new KubeconfigError(
        `${what}: status.expirationTimestamp ${JSON.stringify(expiry)} is not an RFC 3339 time`,
      );
    }
  }
  return {
    credentials: {
      ...(token === undefined ? {} : { token }),
      ...(clientCert === undefined ? {} : { clientCert }),
      ...(clientKey === undefined ? {} : { clientKey }),
    },
    expiresAt,
  };
}

/** Spawns the plugin (own process group, stdin closed) and resolves with its stdout. */
function runPlugin(options: ExecCredentialOptions): Promise<string> {
  const { exec, where, cluster } = options;
  const timeoutMs = options.timeoutMs ?? DEFAULT_EXEC_TIMEOUT_MS;
  const execInfo = {
    apiVersion: exec.apiVersion,
    kind: 'ExecCredential',
    spec: { interactive: false, ...(exec.provideClusterInfo ? { cluster } : {}) },
  };
  const env: Record<string, string | undefined> = {
    ...options.environment,
    ...exec.env,
    KUBERNETES_EXEC_INFO: JSON.stringify(execInfo),
  };
  const hint = exec.installHint === undefined ? '' : `\n${exec.installHint.trim()}`;
  return new Promise((resolve, reject) => {
    const child = childProcess().spawn(exec.command, [...exec.args], {
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
      // Its own process group, so a timeout kills whatever the plugin started too.
      detached: true,
    });
    let stdout = '';
    let stderr = '';
    let failure: KubeconfigError | undefined;
    const kill = (): void => {
      try {
        if (child.pid !== undefined) (options.host ?? nodeProcessHost).kill(-child.pid, 'SIGKILL');
      } catch {
        child.kill('SIGKILL');
      }
    };
    const timer = setTimeout(() => {
      failure = new KubeconfigError(
        `${where}: exec plugin "${exec.command}" printed no credential within ${String(timeoutMs / 1000)} s (killed)`,
      );
      kill();
    }, timeoutMs);
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
      if (stdout.length > MAX_EXEC_OUTPUT_BYTES && failure === undefined) {
        failure = new KubeconfigError(
          `${where}: exec plugin "${exec.command}" printed more than ${String(MAX_EXEC_OUTPUT_BYTES / 1024)} KiB`,
        );
        kill();
      }
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr = (stderr + chunk).slice(-STDERR_TAIL_CHARS);
    });
    child.once('error', (error: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      const reason = error.code === 'ENOENT' ? 'not found' : error.code === 'EACCES' ? 'not executable' : error.message;
      reject(new KubeconfigError(`${where}: exec plugin "${exec.command}": ${reason}${hint}`, { cause: error }));
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      if (failure !== undefined) {
        reject(failure);
        return;
      }
      if (code !== 0) {
        const how = code === null ? `was killed by ${String(signal)}` : `exited with code ${String(code)}`;
        const said = stderr.trim() === '' ? '' : `: ${stderr.trim()}`;
        reject(new KubeconfigError(`${where}: exec plugin "${exec.command}" ${how}${said}${hint}`));
        return;
      }
      resolve(stdout);
    });
  });
}
