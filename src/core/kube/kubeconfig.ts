// Connection settings for RestCluster: from a kubeconfig file (like client-go's clientcmd, minus
// credential plugins) or from the in-cluster service account. Core code: the caller passes in
// what it read from the environment (KUBECONFIG, KUBERNETES_SERVICE_HOST/PORT).
import { stat } from 'node:fs/promises';
import { dirname, isAbsolute, resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { readRegularFile } from '../config/read.js';

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
}

/** A kubeconfig that cannot be used (missing context, unsupported auth, unreadable file, …). */
export class KubeconfigError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'KubeconfigError';
  }
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

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

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
    throw new KubeconfigError(`${path}: not valid YAML: ${error instanceof Error ? error.message : String(error)}`, {
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
  const files: ParsedFile[] = [];
  for (const path of list) {
    let text: string;
    try {
      text = await readFile(path);
    } catch (error) {
      if (list.length > 1 && (error as NodeJS.ErrnoException).code === 'ENOENT') continue; // kubectl skips them
      throw new KubeconfigError(
        `cannot read kubeconfig ${path}: ${error instanceof Error ? error.message : String(error)}`,
        { cause: error },
      );
    }
    files.push(parseKubeconfigText(text, path));
  }
  const where = list.join(':');
  const find = (
    kind: 'clusters' | 'users' | 'contexts',
    name: string,
  ): { entry: Named; file: ParsedFile } | undefined => {
    for (const file of files) {
      const entry = file[kind].find((e) => e.name === name);
      if (entry !== undefined) return { entry, file };
    }
    return undefined;
  };
  const contextName = options.context ?? files.find((f) => f.currentContext !== undefined)?.currentContext;
  if (contextName === undefined) {
    throw new KubeconfigError(`kubeconfig ${where} has no current-context (and no context was requested)`);
  }
  const context = find('contexts', contextName);
  if (context === undefined) throw new KubeconfigError(`context "${contextName}" not found in kubeconfig ${where}`);
  const clusterName = str(context.entry.body, 'cluster');
  if (clusterName === undefined) throw new KubeconfigError(`context "${contextName}" names no cluster (${where})`);
  const cluster = find('clusters', clusterName);
  if (cluster === undefined) throw new KubeconfigError(`cluster "${clusterName}" not found in kubeconfig ${where}`);
  const userName = str(context.entry.body, 'user');
  const user = userName === undefined ? undefined : find('users', userName);
  if (userName !== undefined && user === undefined) {
    throw new KubeconfigError(`user "${userName}" not found in kubeconfig ${where}`);
  }

  const c = cluster.entry.body;
  const clusterFile = cluster.file.path;
  const fromFile = async (file: ParsedFile, value: string, what: string): Promise<string> => {
    const path = isAbsolute(value) ? value : resolve(dirname(file.path), value);
    try {
      return await readFile(path);
    } catch (error) {
      throw new KubeconfigError(
        `${file.path}: cannot read ${what} ${path}: ${error instanceof Error ? error.message : String(error)}`,
        { cause: error },
      );
    }
  };
  const server = str(c, 'server');
  if (server === undefined) throw new KubeconfigError(`cluster "${clusterName}" has no server (${clusterFile})`);
  if (str(c, 'proxy-url') !== undefined) {
    throw new KubeconfigError(`cluster "${clusterName}" uses proxy-url, which is not supported (${clusterFile})`);
  }
  const caData = str(c, 'certificate-authority-data');
  const caFile = str(c, 'certificate-authority');
  const ca =
    caData !== undefined
      ? decodeData(caData, 'certificate-authority-data', clusterFile)
      : caFile !== undefined
        ? await fromFile(cluster.file, caFile, 'certificate-authority')
        : undefined;

  let token: string | undefined;
  let tokenFile: string | undefined;
  let clientCert: string | undefined;
  let clientKey: string | undefined;
  if (user !== undefined) {
    const u = user.entry.body;
    const userFile = user.file.path;
    const name = user.entry.name;
    if (u['exec'] !== undefined && u['exec'] !== null) {
      throw new KubeconfigError(
        `user "${name}" uses an exec credential plugin, which is not supported; use a token, tokenFile or client certificate (${userFile})`,
      );
    }
    if (u['auth-provider'] !== undefined && u['auth-provider'] !== null) {
      throw new KubeconfigError(
        `user "${name}" uses an auth-provider, which is not supported; use a token, tokenFile or client certificate (${userFile})`,
      );
    }
    if (str(u, 'username') !== undefined || str(u, 'password') !== undefined) {
      throw new KubeconfigError(`user "${name}" uses basic authentication, which is not supported (${userFile})`);
    }
    token = str(u, 'token');
    const tokenPath = str(u, 'tokenFile');
    if (token === undefined && tokenPath !== undefined) {
      tokenFile = isAbsolute(tokenPath) ? tokenPath : resolve(dirname(userFile), tokenPath);
    }
    const certData = str(u, 'client-certificate-data');
    const certFile = str(u, 'client-certificate');
    const keyData = str(u, 'client-key-data');
    const keyFile = str(u, 'client-key');
    clientCert =
      certData !== undefined
        ? decodeData(certData, 'client-certificate-data', userFile)
        : certFile !== undefined
          ? await fromFile(user.file, certFile, 'client-certificate')
          : undefined;
    clientKey =
      keyData !== undefined
        ? decodeData(keyData, 'client-key-data', userFile)
        : keyFile !== undefined
          ? await fromFile(user.file, keyFile, 'client-key')
          : undefined;
    if ((clientCert === undefined) !== (clientKey === undefined)) {
      throw new KubeconfigError(`user "${name}" needs both a client certificate and a client key (${userFile})`);
    }
  }
  const namespace = str(context.entry.body, 'namespace');
  const tlsServerName = str(c, 'tls-server-name');
  return {
    server,
    source: where,
    ...(ca === undefined ? {} : { ca }),
    ...(token === undefined ? {} : { token }),
    ...(tokenFile === undefined ? {} : { tokenFile }),
    ...(clientCert === undefined ? {} : { clientCert }),
    ...(clientKey === undefined ? {} : { clientKey }),
    ...(c['insecure-skip-tls-verify'] === true ? { insecureSkipTLSVerify: true } : {}),
    ...(tlsServerName === undefined ? {} : { tlsServerName }),
    ...(namespace === undefined ? {} : { namespace }),
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
    throw new KubeconfigError(
      `in-cluster service account files missing in ${dir}: ${error instanceof Error ? error.message : String(error)}`,
      { cause: error },
    );
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
