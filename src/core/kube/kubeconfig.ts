// Connection settings for RestCluster: from a kubeconfig file (like client-go's clientcmd: tokens,
// client certificates, exec credential plugins, impersonation; OIDC and proxy-url through
// @kubernetes/client-node, loaded only for them) or from the in-cluster service account. Core
// code: the caller passes in what it read from the environment (KUBECONFIG, the environment
// an exec plugin inherits, KUBERNETES_SERVICE_HOST/PORT).
import { stat } from 'node:fs/promises';
import type { Agent as HttpAgent } from 'node:http';
import { dirname, isAbsolute, resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { readRegularFile } from '../bounded-file.js';
import {
  DEFAULT_EXEC_TIMEOUT_MS,
  EXEC_API_VERSIONS,
  ExecCredentialSource,
  type CredentialSource,
  type ExecApiVersion,
  type ExecClusterInfo,
  type ExecConfig,
} from './exec-credential.js';
import { KubeconfigError } from './kubeconfig-error.js';
import type { ProcessHost } from '../process-host.js';
import { errnoCode, errorMessage, isRecord } from '../unknown-values.js';

export { KubeconfigError } from './kubeconfig-error.js';
export type { CredentialSource, RequestCredentials } from './exec-credential.js';

/** Kubeconfig `as`, `as-uid`, `as-groups`, `as-user-extra`: sent as Impersonate-* headers. */
export interface Impersonation {
  readonly user: string;
  readonly uid?: string;
  readonly groups: readonly string[];
  readonly extra: Readonly<Record<string, readonly string[]>>;
}

/** How to reach and authenticate to an apiserver. */
export interface ConnectionSettings {
  /** `https://host:port` (a path prefix is kept). */
  readonly server: string;
  /** PEM bundle to trust; undefined: the system roots. */
  readonly ca?: string;
  /** A fixed bearer token. */
  readonly token?: string;
  /** A file holding the bearer token, re-read periodically (projected tokens rotate). */
  readonly tokenFile?: string;
  /** Client certificate and key (PEM). */
  readonly clientCert?: string;
  readonly clientKey?: string;
  readonly insecureSkipTLSVerify?: boolean;
  /** SNI / certificate name to verify instead of the server's host. */
  readonly tlsServerName?: string;
  /** The context's (or the service account's) namespace, when there is one. */
  readonly namespace?: string;
  /** Where these settings came from, for messages: the kubeconfig path or `in-cluster`. */
  readonly source: string;
  /** The kubeconfig user's name (the impersonated user when there is one), to say who asked in notes; not an identity check. */
  readonly user?: string;
  /** Act as another user (and groups): the apiserver checks the caller may impersonate them. */
  readonly impersonate?: Impersonation;
  /** Credentials obtained per request (an exec plugin, OIDC); they replace token and tokenFile. */
  readonly credentials?: CredentialSource;
  /** The agent every request must go through (a proxy-url's); RestCluster's own otherwise. */
  readonly agent?: HttpAgent;
}

export type ReadTextFile = (path: string) => Promise<string>;

/** The most a kubeconfig, CA bundle, client key or token file may hold; real ones are a few KiB. */
export const MAX_CREDENTIAL_FILE_BYTES = 4 * 1024 * 1024;

/**
 * Reads a kubeconfig or credential file: regular files only and at most MAX_CREDENTIAL_FILE_BYTES,
 * so a FIFO cannot hang start-up and /dev/zero cannot fill memory. fs errors (ENOENT) are thrown
 * as they are, so a KUBECONFIG list can skip missing files as kubectl does.
 */
export const readCredentialFile: ReadTextFile = async (path) => {
  const info = await stat(path);
  if (!info.isFile()) throw new Error('not a regular file');
  const bytes = await readRegularFile(path, MAX_CREDENTIAL_FILE_BYTES);
  if (bytes === undefined) throw new Error(`larger than ${String(MAX_CREDENTIAL_FILE_BYTES / 2 ** 20)} MiB`);
  return bytes.toString('utf8');
};

const defaultReadFile = readCredentialFile;

export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

interface Named {
  readonly name: string;
  readonly body: Record<string, unknown>;
}

/** `clusters`, `users`, `contexts`: lists of { name, <field>: {...} }. */
function namedEntries(config: Record<string, unknown>, list: string, field: string, file: string): Named[] {
  const raw = config[list];
  if (raw === undefined || raw === null) return [];
  if (!Array.isArray(raw)) throw new KubeconfigError(`${file}: "${list}" must be a list`);
  return raw.map((entry, i) => {
    if (!isRecord(entry) || typeof entry['name'] !== 'string') {
      throw new KubeconfigError(`${file}: ${list}[${i}] must have a name`);
    }
    const body = entry[field];
    return { name: entry['name'], body: isRecord(body) ? body : {} };
  });
}

interface ParsedFile {
  readonly path: string;
  readonly currentContext: string | undefined;
  readonly clusters: Named[];
  readonly users: Named[];
  readonly contexts: Named[];
}

function parseKubeconfigText(text: string, path: string): ParsedFile {
  let config: unknown;
  try {
    config = parseYaml(text);
  } catch (error) {
    throw new KubeconfigError(`${path}: not valid YAML: ${errorMessage(error)}`, {
      cause: error,
    });
  }
  if (config === null || config === undefined) config = {};
  if (!isRecord(config)) throw new KubeconfigError(`${path}: a kubeconfig must be a YAML mapping`);
  const current = config['current-context'];
  return {
    path,
    currentContext: typeof current === 'string' && current !== '' ? current : undefined,
    clusters: namedEntries(config, 'clusters', 'cluster', path),
    users: namedEntries(config, 'users', 'user', path),
    contexts: namedEntries(config, 'contexts', 'context', path),
  };
}

export interface KubeconfigOptions {
  /** Use this context instead of current-context. */
  readonly context?: string;
  readonly readFile?: ReadTextFile;
  /** The environment an exec credential plugin inherits (default: none but the plugin's own `env`). */
  readonly environment?: Readonly<Record<string, string | undefined>>;
  /** How long an exec plugin or an OIDC refresh may take (default 15 s). */
  readonly credentialTimeoutMs?: number;
  /** Kills an exec plugin's process group on a timeout; default the real process. */
  readonly host?: Pick<ProcessHost, 'kill'>;
}

function str(body: Record<string, unknown>, key: string): string | undefined {
  const value = body[key];
  return typeof value === 'string' && value !== '' ? value : undefined;
}

function decodeData(value: string, what: string, file: string): string {
  const text = Buffer.from(value, 'base64').toString('utf8');
  if (!text.includes('-----BEGIN')) throw new KubeconfigError(`${file}: ${what} is not base64-encoded PEM`);
  return text;
}

/** A named entry and the file that defines it (relative paths in it resolve against that file). */
interface Found {
  readonly entry: Named;
  readonly file: ParsedFile;
}

/** The files of the list that exist, parsed; in a list of several a missing one is skipped, as kubectl does. */
async function readKubeconfigFiles(list: readonly string[], readFile: ReadTextFile): Promise<ParsedFile[]> {
  const files: ParsedFile[] = [];
  for (const path of list) {
    let text: string;
    try {
      text = await readFile(path);
    } catch (error) {
      if (list.length > 1 && errnoCode(error) === 'ENOENT') continue; // kubectl skips them
      throw new KubeconfigError(`cannot read kubeconfig ${path}: ${errorMessage(error)}`, { cause: error });
    }
    files.push(parseKubeconfigText(text, path));
  }
  return files;
}

/** The first file's entry of that name wins. */
function findNamed(
  files: readonly ParsedFile[],
  kind: 'clusters' | 'users' | 'contexts',
  name: string,
): Found | undefined {
  for (const file of files) {
    const entry = file[kind].find((e) => e.name === name);
    if (entry !== undefined) return { entry, file };
  }
  return undefined;
}

/** The context in use and the cluster and user it names. */
interface Selection {
  readonly context: Found;
  readonly clusterName: string;
  readonly cluster: Found;
  readonly user: Found | undefined;
}

function selectContext(files: readonly ParsedFile[], requested: string | undefined, where: string): Selection {
  const contextName = requested ?? files.find((f) => f.currentContext !== undefined)?.currentContext;
  if (contextName === undefined) {
    throw new KubeconfigError(`kubeconfig ${where} has no current-context (and no context was requested)`);
  }
  const context = findNamed(files, 'contexts', contextName);
  if (context === undefined) throw new KubeconfigError(`context "${contextName}" not found in kubeconfig ${where}`);
  const clusterName = str(context.entry.body, 'cluster');
  if (clusterName === undefined) throw new KubeconfigError(`context "${contextName}" names no cluster (${where})`);
  const cluster = findNamed(files, 'clusters', clusterName);
  if (cluster === undefined) throw new KubeconfigError(`cluster "${clusterName}" not found in kubeconfig ${where}`);
  const userName = str(context.entry.body, 'user');
  const user = userName === undefined ? undefined : findNamed(files, 'users', userName);
  if (userName !== undefined && user === undefined) {
    throw new KubeconfigError(`user "${userName}" not found in kubeconfig ${where}`);
  }
  return { context, clusterName, cluster, user };
}

/** A PEM given inline as `<field>-data` (base64), else as the file `<field>` (relative to its kubeconfig). */
async function readPem(found: Found, field: string, readFile: ReadTextFile): Promise<string | undefined> {
  const file = found.file.path;
  const data = str(found.entry.body, `${field}-data`);
  if (data !== undefined) return decodeData(data, `${field}-data`, file);
  const value = str(found.entry.body, field);
  if (value === undefined) return undefined;
  const path = isAbsolute(value) ? value : resolve(dirname(file), value);
  try {
    return await readFile(path);
  } catch (error) {
    throw new KubeconfigError(`${file}: cannot read ${field} ${path}: ${errorMessage(error)}`, { cause: error });
  }
}

/** The cluster's address and TLS settings. */
interface ClusterSettings {
  readonly server: string;
  readonly proxyUrl: string | undefined;
  readonly ca: string | undefined;
  readonly tlsServerName: string | undefined;
  readonly insecureSkipTLSVerify: boolean;
}

async function clusterSettings(selection: Selection, readFile: ReadTextFile): Promise<ClusterSettings> {
  const { cluster, clusterName } = selection;
  const c = cluster.entry.body;
  const clusterFile = cluster.file.path;
  const server = str(c, 'server');
  if (server === undefined) throw new KubeconfigError(`cluster "${clusterName}" has no server (${clusterFile})`);
  const proxyUrl = str(c, 'proxy-url');
  if (proxyUrl !== undefined && !/^(https?|socks5h?|socks4a?):\/\//u.test(proxyUrl)) {
    throw new KubeconfigError(
      `${clusterFile}: cluster "${clusterName}" proxy-url ${JSON.stringify(proxyUrl)} must be an http://, https:// or socks5:// URL`,
    );
  }
  const ca = await readPem(cluster, 'certificate-authority', readFile);
  return {
    server,
    proxyUrl,
    ca,
    tlsServerName: str(c, 'tls-server-name'),
    insecureSkipTLSVerify: c['insecure-skip-tls-verify'] === true,
  };
}

/** The user's `auth-provider: oidc` stanza, for client-node. */
interface OidcProvider {
  readonly name: string;
  readonly config: Record<string, unknown>;
}

/** `auth-provider`: only oidc; gcp and azure were removed (as kubectl since 1.26) in favour of exec plugins. */
function parseAuthProvider(provider: unknown, where: string): OidcProvider | undefined {
  if (provider === undefined || provider === null) return undefined;
  const providerName = isRecord(provider) ? str(provider, 'name') : undefined;
  if (providerName === 'gcp' || providerName === 'azure') {
    const plugin = providerName === 'gcp' ? 'gke-gcloud-auth-plugin' : 'kubelogin';
    throw new KubeconfigError(
      `${where}: auth-provider "${providerName}" was removed from Kubernetes clients; use the exec plugin "${plugin}" instead`,
    );
  }
  if (providerName !== 'oidc' || !isRecord(provider)) {
    throw new KubeconfigError(
      `${where}: auth-provider ${JSON.stringify(providerName ?? null)} is not supported (only "oidc"); use an exec credential plugin`,
    );
  }
  const config = provider['config'];
  if (!isRecord(config) || str(config, 'id-token') === undefined) {
    throw new KubeconfigError(`${where}: auth-provider oidc needs config.id-token`);
  }
  return { name: providerName, config };
}

/** `token`, else `tokenFile` (relative to its kubeconfig). */
function parseToken(u: Record<string, unknown>, userFile: string): { token?: string; tokenFile?: string } {
  const token = str(u, 'token');
  if (token !== undefined) return { token };
  const tokenPath = str(u, 'tokenFile');
  if (tokenPath === undefined) return {};
  return { tokenFile: isAbsolute(tokenPath) ? tokenPath : resolve(dirname(userFile), tokenPath) };
}

/** The user's authentication, before client-node adds what it handles. */
interface UserSettings {
  readonly token?: string;
  readonly tokenFile?: string;
  readonly clientCert?: string;
  readonly clientKey?: string;
  readonly impersonate?: Impersonation;
  readonly credentials?: CredentialSource;
  readonly oidc?: OidcProvider;
}

/** The exec plugin's view of the cluster (its KUBERNETES_EXEC_INFO when provideClusterInfo). */
function execClusterInfo(cluster: ClusterSettings): ExecClusterInfo {
  const { server, ca, tlsServerName, insecureSkipTLSVerify, proxyUrl } = cluster;
  return {
    server,
    ...(ca === undefined ? {} : { 'certificate-authority-data': Buffer.from(ca).toString('base64') }),
    ...(tlsServerName === undefined ? {} : { 'tls-server-name': tlsServerName }),
    ...(insecureSkipTLSVerify ? { 'insecure-skip-tls-verify': true } : {}),
    ...(proxyUrl === undefined ? {} : { 'proxy-url': proxyUrl }),
  };
}

function execCredentials(
  exec: unknown,
  where: string,
  userFile: string,
  cluster: ClusterSettings,
  options: KubeconfigOptions,
): CredentialSource {
  return new ExecCredentialSource({
    exec: parseExec(exec, where, dirname(userFile)),
    where,
    cluster: execClusterInfo(cluster),
    environment: options.environment ?? {},
    timeoutMs: options.credentialTimeoutMs ?? DEFAULT_EXEC_TIMEOUT_MS,
    ...(options.host === undefined ? {} : { host: options.host }),
  });
}

async function userSettings(
  user: Found,
  cluster: ClusterSettings,
  options: KubeconfigOptions,
  readFile: ReadTextFile,
): Promise<UserSettings> {
  const u = user.entry.body;
  const userFile = user.file.path;
  const name = user.entry.name;
  const where = `${userFile}: user "${name}"`;
  const oidc = parseAuthProvider(u['auth-provider'], where);
  if (str(u, 'username') !== undefined || str(u, 'password') !== undefined) {
    throw new KubeconfigError(`${where} uses basic authentication, which is not supported`);
  }
  const token = parseToken(u, userFile);
  const clientCert = await readPem(user, 'client-certificate', readFile);
  const clientKey = await readPem(user, 'client-key', readFile);
  if ((clientCert === undefined) !== (clientKey === undefined)) {
    throw new KubeconfigError(`user "${name}" needs both a client certificate and a client key (${userFile})`);
  }
  const impersonate = parseImpersonation(u, where);
  const exec = u['exec'];
  const hasExec = exec !== undefined && exec !== null;
  if (hasExec && oidc !== undefined) throw new KubeconfigError(`${where} has both exec and auth-provider: choose one`);
  return {
    ...token,
    ...(clientCert === undefined ? {} : { clientCert }),
    ...(clientKey === undefined ? {} : { clientKey }),
    ...(impersonate === undefined ? {} : { impersonate }),
    ...(hasExec ? { credentials: execCredentials(exec, where, userFile, cluster, options) } : {}),
    ...(oidc === undefined ? {} : { oidc }),
  };
}

/** What client-node supplies: a proxy's agent, and OIDC credentials (they replace an exec plugin's). */
interface ClientNodeSettings {
  readonly agent: HttpAgent | undefined;
  readonly credentials: CredentialSource | undefined;
}

/** OIDC and proxies go through client-node, loaded only for them: everything else stays on the lean path. */
async function clientNodeSettings(
  selection: Selection,
  cluster: ClusterSettings,
  auth: UserSettings,
  timeoutMs: number,
): Promise<ClientNodeSettings> {
  const { oidc, clientCert, clientKey } = auth;
  const { server, ca, insecureSkipTLSVerify, tlsServerName, proxyUrl } = cluster;
  if (oidc === undefined && proxyUrl === undefined) return { agent: undefined, credentials: auth.credentials };
  const { user } = selection;
  const { clientNodeConnection } = await import('./client-node-connection.js');
  const extra = await clientNodeConnection({
    server,
    where: user === undefined ? selection.cluster.file.path : `${user.file.path}: user "${user.entry.name}"`,
    timeoutMs,
    ...(ca === undefined ? {} : { ca }),
    ...(insecureSkipTLSVerify ? { insecureSkipTLSVerify } : {}),
    ...(tlsServerName === undefined ? {} : { tlsServerName }),
    ...(proxyUrl === undefined ? {} : { proxyUrl }),
    ...(clientCert === undefined || clientKey === undefined ? {} : { clientCert, clientKey }),
    ...(oidc === undefined ? {} : { authProvider: oidc }),
  });
  return { agent: extra.agent, credentials: extra.credentials ?? auth.credentials };
}

/** The settings in the order RestCluster's callers have always seen them; absent fields left out. */
function connectionSettings(
  where: string,
  selection: Selection,
  cluster: ClusterSettings,
  auth: UserSettings,
  extra: ClientNodeSettings,
): ConnectionSettings {
  const { server, ca, insecureSkipTLSVerify, tlsServerName } = cluster;
  const { token, tokenFile, clientCert, clientKey, impersonate } = auth;
  const { agent, credentials } = extra;
  const namespace = str(selection.context.entry.body, 'namespace');
  const userLabel = impersonate?.user ?? selection.user?.entry.name;
  return {
    server,
    source: where,
    ...(userLabel === undefined ? {} : { user: userLabel }),
    ...(ca === undefined ? {} : { ca }),
    ...(token === undefined ? {} : { token }),
    ...(tokenFile === undefined ? {} : { tokenFile }),
    ...(clientCert === undefined ? {} : { clientCert }),
    ...(clientKey === undefined ? {} : { clientKey }),
    ...(insecureSkipTLSVerify ? { insecureSkipTLSVerify: true } : {}),
    ...(tlsServerName === undefined ? {} : { tlsServerName }),
    ...(namespace === undefined ? {} : { namespace }),
    ...(impersonate === undefined ? {} : { impersonate }),
    ...(credentials === undefined ? {} : { credentials }),
    ...(agent === undefined ? {} : { agent }),
  };
}

/**
 * Loads connection settings from one kubeconfig file or several (the KUBECONFIG list: for each
 * name the first file that defines it wins, as in kubectl). Relative file references resolve
 * against the directory of the file that holds them.
 */
export async function loadKubeconfig(
  paths: string | readonly string[],
  options: KubeconfigOptions = {},
): Promise<ConnectionSettings> {
  const readFile = options.readFile ?? defaultReadFile;
  const list = (typeof paths === 'string' ? [paths] : paths).filter((p) => p !== '');
  if (list.length === 0) throw new KubeconfigError('no kubeconfig file given');
  const files = await readKubeconfigFiles(list, readFile);
  const where = list.join(':');
  const selection = selectContext(files, options.context, where);
  const cluster = await clusterSettings(selection, readFile);
  const auth = selection.user === undefined ? {} : await userSettings(selection.user, cluster, options, readFile);
  const timeoutMs = options.credentialTimeoutMs ?? DEFAULT_EXEC_TIMEOUT_MS;
  const extra = await clientNodeSettings(selection, cluster, auth, timeoutMs);
  return connectionSettings(where, selection, cluster, auth, extra);
}

function stringList(value: unknown, what: string): string[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value) || !value.every((v): v is string => typeof v === 'string')) {
    throw new KubeconfigError(`${what} must be a list of strings`);
  }
  return value;
}

/** `as`, `as-uid`, `as-groups`, `as-user-extra` of a kubeconfig user (client-go's ImpersonationConfig). */
function parseImpersonation(u: Record<string, unknown>, where: string): Impersonation | undefined {
  const as = str(u, 'as');
  const uid = str(u, 'as-uid');
  const groups = stringList(u['as-groups'], `${where}: as-groups`);
  const rawExtra = u['as-user-extra'];
  const extra: Record<string, string[]> = {};
  if (rawExtra !== undefined && rawExtra !== null) {
    if (!isRecord(rawExtra)) throw new KubeconfigError(`${where}: as-user-extra must be a mapping of lists`);
    for (const [key, values] of Object.entries(rawExtra)) {
      extra[key] = stringList(values, `${where}: as-user-extra.${key}`);
    }
  }
  if (as === undefined) {
    if (uid !== undefined || groups.length > 0 || Object.keys(extra).length > 0) {
      throw new KubeconfigError(`${where}: as-uid, as-groups and as-user-extra need "as" (the user to impersonate)`);
    }
    return undefined;
  }
  return { user: as, ...(uid === undefined ? {} : { uid }), groups, extra };
}

/** The `exec` stanza, checked as client-go does; a relative command with a slash is relative to the kubeconfig. */
function parseExec(raw: unknown, where: string, baseDir: string): ExecConfig {
  const what = `${where}: exec`;
  if (!isRecord(raw)) throw new KubeconfigError(`${what} must be a mapping`);
  const command = str(raw, 'command');
  if (command === undefined) throw new KubeconfigError(`${what}.command is missing`);
  const apiVersion: ExecApiVersion | undefined = EXEC_API_VERSIONS.find((v) => v === raw['apiVersion']);
  if (apiVersion === undefined) {
    throw new KubeconfigError(
      `${what}.apiVersion ${JSON.stringify(raw['apiVersion'] ?? null)} is not supported: use ${EXEC_API_VERSIONS.join(' or ')}`,
    );
  }
  const args = stringList(raw['args'], `${what}.args`);
  const env: Record<string, string> = {};
  const rawEnv = raw['env'];
  if (rawEnv !== undefined && rawEnv !== null) {
    if (!Array.isArray(rawEnv)) throw new KubeconfigError(`${what}.env must be a list of {name, value}`);
    rawEnv.forEach((entry: unknown, i) => {
      if (!isRecord(entry) || typeof entry['name'] !== 'string' || typeof entry['value'] !== 'string') {
        throw new KubeconfigError(`${what}.env[${i}] must have a name and a value (strings)`);
      }
      env[entry['name']] = entry['value'];
    });
  }
  const mode = raw['interactiveMode'] ?? 'IfAvailable';
  if (mode !== 'Never' && mode !== 'IfAvailable' && mode !== 'Always') {
    throw new KubeconfigError(`${what}.interactiveMode ${JSON.stringify(mode)} must be Never, IfAvailable or Always`);
  }
  if (mode === 'Always') {
    throw new KubeconfigError(
      `${what}.interactiveMode is Always, but the provisioner has no terminal to give the plugin; use a plugin that runs non-interactively`,
    );
  }
  const hint = str(raw, 'installHint');
  return {
    command: command.includes('/') && !isAbsolute(command) ? resolve(baseDir, command) : command,
    args,
    env,
    apiVersion,
    ...(hint === undefined ? {} : { installHint: hint }),
    provideClusterInfo: raw['provideClusterInfo'] === true,
    interactiveMode: mode,
  };
}

export interface InClusterOptions {
  /** The value of KUBERNETES_SERVICE_HOST. */
  readonly host: string | undefined;
  /** The value of KUBERNETES_SERVICE_PORT. */
  readonly port: string | undefined;
  /** Default /var/run/secrets/kubernetes.io/serviceaccount. */
  readonly serviceAccountDir?: string;
  readonly readFile?: ReadTextFile;
}

/** Settings for a pod: the service's address, the mounted CA and the (rotating) projected token. */
export async function inClusterSettings(options: InClusterOptions): Promise<ConnectionSettings> {
  const { host, port } = options;
  if (host === undefined || host === '' || port === undefined || port === '') {
    throw new KubeconfigError(
      'not running in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set',
    );
  }
  const readFile = options.readFile ?? defaultReadFile;
  const dir = options.serviceAccountDir ?? SERVICE_ACCOUNT_DIR;
  const tokenFile = resolve(dir, 'token');
  let ca: string;
  try {
    // Fail early when the token is missing too, rather than on the first request.
    await readFile(tokenFile);
    ca = await readFile(resolve(dir, 'ca.crt'));
  } catch (error) {
    throw new KubeconfigError(`in-cluster service account files missing in ${dir}: ${errorMessage(error)}`, {
      cause: error,
    });
  }
  let namespace: string | undefined;
  try {
    namespace = (await readFile(resolve(dir, 'namespace'))).trim() || undefined;
  } catch {
    namespace = undefined;
  }
  const hostPart = host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
  return {
    server: `https://${hostPart}:${port}`,
    ca,
    tokenFile,
    source: 'in-cluster',
    ...(namespace === undefined ? {} : { namespace }),
  };
}
