// The Cluster port over the Kubernetes REST API, on node:http(s) alone (no client library: start-up
// time and memory matter for a per-node agent). JSON in and out, Status bodies mapped to
// KubeApiError, watches as newline-delimited JSON streams, a client-side token-bucket rate limiter,
// and bearer tokens re-read from their file as projected service-account tokens rotate. Responses
// are asked for gzip (a LIST of PV metadata shrinks about 15×) and decompressed as a stream,
// bounded per response and per watch event so a hostile server cannot exhaust memory.
import type { Agent as HttpAgentType, IncomingMessage, OutgoingHttpHeaders } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { isAborted, systemClock, type Clock } from '../clock.js';
import { Agent as HttpAgent, request as httpRequest } from '../node-http.js';
import { isRecord } from '../unknown-values.js';
import {
  ClusterClients,
  KubeApiError,
  objectName,
  RESOURCES,
  type DeleteOptions,
  type ListOptions,
  type NamespaceOption,
  type ResourceClient,
  type ResourceInfo,
  type ResourceName,
  type ResourceObjects,
  type WatchEvent,
  type WatchOptions,
} from './cluster.js';
import { readCredentialFile } from './kubeconfig.js';
import type { ConnectionSettings, ReadTextFile, RequestCredentials } from './kubeconfig.js';
import { refuseProjection } from './objects.js';
import type { ObjectList, ObjectMeta } from './objects.js';
import { pipeline, type Readable } from 'node:stream';
import { createSecureContext, type SecureContext } from 'node:tls';
import { zlib } from '../on-demand-builtins.js';

export interface RestClusterOptions {
  readonly connection: ConnectionSettings;
  /** Rate limiting, retry delays and token refresh. Default: the system clock. */
  readonly clock?: Clock;
  /** Sustained requests per second (default 200; 0 or less: unlimited). */
  readonly qps?: number;
  /** Requests allowed in a burst above qps (default 400). */
  readonly burst?: number;
  /** User-Agent header (default `local-volume-provisioner-ts`). */
  readonly userAgent?: string;
  /**
   * `fieldManager` of every create, update and patch: the name in the objects' managedFields
   * (default none: the apiserver then takes the User-Agent up to its first "/").
   */
  readonly fieldManager?: string;
  /** Time a non-watch request may stay idle before it fails (default 30 s). */
  readonly requestTimeoutMs?: number;
  /**
   * Time a watch may stay silent before it counts as dead and fails (the reflector then watches
   * again from its resourceVersion). The apiserver sends a bookmark about every minute to a watch
   * that asked for them, and ends every watch at its timeoutSeconds; a connection lost on the way
   * (a NAT or conntrack entry, a black-holed route, a hung apiserver) says nothing at all.
   * Default 90 s with bookmarks, else timeoutSeconds + 30 s, else 330 s.
   */
  readonly watchIdleTimeoutMs?: number;
  /** How often a token file is re-read (default 60 s, like client-go). */
  readonly tokenRefreshMs?: number;
  /** Retries of a request answered 429, or 5xx with Retry-After (default 3). */
  readonly maxRetries?: number;
  /** Namespace of namespaced calls that name none (default `default`). */
  readonly defaultNamespace?: string;
  readonly readFile?: ReadTextFile;
  /** Largest response body accepted, decompressed (default 256 MiB). */
  readonly maxResponseBytes?: number;
  /** Largest single watch event accepted, decompressed (default 16 MiB). */
  readonly maxWatchEventBytes?: number;
}

/** RestClusterOptions' defaults, by option name. */
const DEFAULTS = {
  qps: 200,
  burst: 400,
  requestTimeoutMs: 30_000,
  tokenRefreshMs: 60_000,
  maxRetries: 3,
  // etcd stores objects of at most 1.5 MiB; a page of 5,000 full PVs is well under 64 MiB.
  maxResponseBytes: 256 * 2 ** 20,
  maxWatchEventBytes: 16 * 2 ** 20,
} as const;
const MAX_RETRY_DELAY_MS = 10_000;
/** A minute between the apiserver's bookmarks, and half a minute of slack. */
const WATCH_IDLE_WITH_BOOKMARKS_MS = 90_000;

/**
 * A token bucket (golang.org/x/time/rate style): `burst` requests at once, then `qps` per second.
 * Each caller reserves a token immediately and waits until it is due, so waiters are served in
 * order; an aborted wait returns its token.
 */
export class TokenBucket {
  private tokens: number;
  private last: number;

  constructor(
    private readonly qps: number,
    private readonly burst: number,
    private readonly clock: Clock = systemClock,
  ) {
    this.tokens = Math.max(1, burst);
    this.last = clock.now();
  }

  /** Resolves when the caller may send a request; rejects when the signal aborts first. */
  async take(signal?: AbortSignal): Promise<void> {
    signal?.throwIfAborted();
    if (!(this.qps > 0) || !Number.isFinite(this.qps)) return;
    this.refill();
    this.tokens -= 1;
    if (this.tokens >= 0) return;
    const waitMs = (-this.tokens * 1000) / this.qps;
    try {
      await this.clock.sleep(waitMs, signal);
    } catch (error) {
      this.tokens += 1;
      throw error;
    }
  }

  /** Tokens available now (negative: reserved by waiters). */
  get available(): number {
    this.refill();
    return this.tokens;
  }

  private refill(): void {
    const now = this.clock.now();
    const elapsed = Math.max(0, now - this.last);
    this.last = now;
    this.tokens = Math.min(Math.max(1, this.burst), this.tokens + (elapsed * this.qps) / 1000);
  }
}

const REASONS: Record<number, string> = {
  400: 'BadRequest',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'NotFound',
  405: 'MethodNotAllowed',
  406: 'NotAcceptable',
  409: 'Conflict',
  410: 'Expired',
  413: 'RequestEntityTooLarge',
  415: 'UnsupportedMediaType',
  422: 'Invalid',
  429: 'TooManyRequests',
  500: 'InternalError',
  503: 'ServiceUnavailable',
  504: 'Timeout',
};

/** A Kubernetes Status object (or any error body) as a KubeApiError. */
export function statusToError(httpStatus: number, body: unknown): KubeApiError {
  let status: unknown = body;
  if (typeof body === 'string') {
    try {
      status = JSON.parse(body);
    } catch {
      status = undefined;
    }
  }
  if (isRecord(status) && status['kind'] === 'Status') {
    const code = typeof status['code'] === 'number' && status['code'] > 0 ? status['code'] : httpStatus;
    const reason =
      typeof status['reason'] === 'string' && status['reason'] !== '' ? status['reason'] : (REASONS[code] ?? 'Unknown');
    const message =
      typeof status['message'] === 'string' && status['message'] !== '' ? status['message'] : `HTTP ${code}`;
    return new KubeApiError(code, reason, message);
  }
  const text = typeof body === 'string' ? body.trim() : '';
  return new KubeApiError(httpStatus, REASONS[httpStatus] ?? 'Unknown', text === '' ? `HTTP ${httpStatus}` : text);
}

const enc = encodeURIComponent;

/** The collection path of a resource: `/api/v1/...` for the core group, `/apis/<group>/<version>/...` else. */
function collectionPath(info: ResourceInfo, namespace: string): string {
  const prefix = info.group === '' ? `/api/${info.apiVersion}` : `/apis/${info.apiVersion}`;
  return info.namespaced ? `${prefix}/namespaces/${enc(namespace)}/${info.resource}` : `${prefix}/${info.resource}`;
}

type Query = Record<string, string | number | boolean | undefined>;

interface RequestSpec {
  readonly method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  readonly path: string;
  readonly query?: Query;
  readonly body?: unknown;
  readonly contentType?: string;
  readonly accept?: string;
  readonly signal?: AbortSignal;
  /** Streaming (a watch): how long the connection may stay silent, headers included. */
  readonly idleTimeoutMs?: number;
}

function abortError(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException('The operation was aborted', 'AbortError');
}

function nameOf(object: unknown): string {
  const name = objectName(object);
  if (name === undefined || name === '') throw new KubeApiError(400, 'BadRequest', 'the object has no metadata.name');
  return name;
}

/** The query of a list: selectors and paging. */
function listQuery(options: ListOptions | undefined): Query {
  return {
    labelSelector: options?.labelSelector || undefined,
    fieldSelector: options?.fieldSelector || undefined,
    limit: options?.limit,
    continue: options?.continue || undefined,
  };
}

interface ConnectionTls {
  readonly ca?: string;
  readonly cert?: string;
  readonly key?: string;
}

/**
 * The CA and client key pair as one TLS context for every connection: without it each new
 * connection parses them again (milliseconds each; four connections open before the first PV).
 * Material OpenSSL refuses stays per connection, so each request fails with its error as before.
 */
function sharedTlsContext(connection: ConnectionSettings): { secureContext: SecureContext } | ConnectionTls {
  const material: ConnectionTls = {
    ...(connection.ca === undefined ? {} : { ca: connection.ca }),
    ...(connection.clientCert === undefined ? {} : { cert: connection.clientCert }),
    ...(connection.clientKey === undefined ? {} : { key: connection.clientKey }),
  };
  try {
    return { secureContext: createSecureContext(material) };
  } catch {
    return material;
  }
}

/** The Cluster port over HTTPS to a real apiserver. Call close() to release its connections. */
export class RestCluster extends ClusterClients {
  private readonly connection: ConnectionSettings;
  private readonly clock: Clock;
  private readonly limiter: TokenBucket;
  private readonly agent: HttpAgentType;
  private readonly secure: boolean;
  private readonly base: URL;
  private readonly userAgent: string;
  private readonly fieldManager: string | undefined;
  private readonly timeoutMs: number;
  private readonly watchIdleTimeoutMs: number | undefined;
  private readonly tokenRefreshMs: number;
  private readonly maxRetries: number;
  private readonly defaultNamespace: string;
  private readonly readFile: ReadTextFile;
  private readonly maxResponseBytes: number;
  private readonly maxWatchEventBytes: number;
  private cachedToken: { value: string; readAt: number } | undefined;
  private tokenRead: Promise<string> | undefined;

  constructor(options: RestClusterOptions) {
    super();
    const { connection } = options;
    this.connection = connection;
    this.clock = options.clock ?? systemClock;
    this.limiter = new TokenBucket(options.qps ?? DEFAULTS.qps, options.burst ?? DEFAULTS.burst, this.clock);
    this.base = new URL(connection.server);
    this.secure = this.base.protocol === 'https:';
    if (!this.secure && this.base.protocol !== 'http:') {
      throw new Error(`unsupported apiserver URL ${connection.server}: only https:// and http:// are supported`);
    }
    this.agent =
      connection.agent ??
      (this.secure
        ? new HttpsAgent({
            keepAlive: true,
            ...sharedTlsContext(connection),
            ...(connection.tlsServerName === undefined ? {} : { servername: connection.tlsServerName }),
            rejectUnauthorized: connection.insecureSkipTLSVerify !== true,
          })
        : new HttpAgent({ keepAlive: true }));
    this.userAgent = options.userAgent ?? 'local-volume-provisioner-ts';
    this.fieldManager = options.fieldManager;
    this.timeoutMs = options.requestTimeoutMs ?? DEFAULTS.requestTimeoutMs;
    this.watchIdleTimeoutMs = options.watchIdleTimeoutMs;
    this.tokenRefreshMs = options.tokenRefreshMs ?? DEFAULTS.tokenRefreshMs;
    this.maxRetries = options.maxRetries ?? DEFAULTS.maxRetries;
    this.defaultNamespace = options.defaultNamespace ?? 'default';
    this.readFile = options.readFile ?? readCredentialFile;
    this.maxResponseBytes = options.maxResponseBytes ?? DEFAULTS.maxResponseBytes;
    this.maxWatchEventBytes = options.maxWatchEventBytes ?? DEFAULTS.maxWatchEventBytes;
  }

  /** The namespace of the kubeconfig context (or the service account), when there is one. */
  get contextNamespace(): string | undefined {
    return this.connection.namespace;
  }

  /** The kubeconfig context's user name, when there is one (the in-cluster account has none here). */
  get contextUser(): string | undefined {
    return this.connection.user;
  }

  /** Closes idle keep-alive connections and every open one (ending watches). */
  close(): void {
    this.agent.destroy();
  }

  // -------------------------------------------------------------------------------------------

  protected client<K extends ResourceName>(resource: K): ResourceClient<ResourceObjects[K]> {
    return this.resourceClient<ResourceObjects[K]>(RESOURCES[resource]);
  }

  /** Closures only: this runs from ClusterClients' field initialisers, before this constructor. */
  private resourceClient<T>(info: ResourceInfo): ResourceClient<T> {
    const collection = (options: NamespaceOption | undefined): string =>
      collectionPath(info, (options?.namespace ?? this.defaultNamespace) || this.defaultNamespace);
    const item = (name: string, options: NamespaceOption | undefined): string => `${collection(options)}/${enc(name)}`;
    const withType = (object: T): unknown => {
      refuseProjection(object);
      return isRecord(object) ? { apiVersion: info.apiVersion, kind: info.kind, ...object } : object;
    };
    const json = async (spec: RequestSpec): Promise<T> => (await this.request(spec)) as T;
    return {
      get: (name, options) => json({ method: 'GET', path: item(name, options) }),
      list: async (options?: ListOptions) =>
        (await this.request({
          method: 'GET',
          path: collection(options),
          query: listQuery(options),
          ...(options?.signal === undefined ? {} : { signal: options.signal }),
        })) as ObjectList<T>,
      listMetadata: async (options?: ListOptions) => {
        const list = (await this.request({
          method: 'GET',
          path: collection(options),
          // Server-side projection to metadata, as client-go's metadata informers ask for it.
          accept: 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json',
          query: listQuery(options),
          ...(options?.signal === undefined ? {} : { signal: options.signal }),
        })) as { metadata: ObjectList<unknown>['metadata']; items?: { metadata: ObjectMeta }[] | null };
        // An empty PartialObjectMetadataList comes with `items: null`.
        return { metadata: list.metadata, items: list.items ?? [] };
      },
      watch: (options) => this.watch<T>(collection(options), options),
      create: (object, options) =>
        json({
          method: 'POST',
          path: collection(options),
          query: { dryRun: options?.dryRun === true ? 'All' : undefined, fieldManager: this.fieldManager },
          body: withType(object),
        }),
      update: (object, options) =>
        json({
          method: 'PUT',
          path: item(nameOf(object), options),
          query: { fieldManager: this.fieldManager },
          body: withType(object),
        }),
      updateStatus: (object, options) =>
        json({
          method: 'PUT',
          path: `${item(nameOf(object), options)}/status`,
          query: { fieldManager: this.fieldManager },
          body: withType(object),
        }),
      patch: (name, patch, options) =>
        json({
          method: 'PATCH',
          path: item(name, options),
          query: { fieldManager: this.fieldManager },
          body: patch,
          contentType: 'application/merge-patch+json',
        }),
      delete: async (name, options?: DeleteOptions) => {
        await this.request({
          method: 'DELETE',
          path: item(name, options),
          body: {
            apiVersion: 'v1',
            kind: 'DeleteOptions',
            ...(options?.uid === undefined ? {} : { preconditions: { uid: options.uid } }),
            ...(options?.propagationPolicy === undefined ? {} : { propagationPolicy: options.propagationPolicy }),
            ...(options?.gracePeriodSeconds === undefined ? {} : { gracePeriodSeconds: options.gracePeriodSeconds }),
          },
        });
      },
    };
  }

  private url(path: string, query: Query | undefined): URL {
    const url = new URL(this.base.href);
    url.pathname = `${this.base.pathname.replace(/\/+$/, '')}${path}`;
    for (const [key, value] of Object.entries(query ?? {})) {
      if (value !== undefined) url.searchParams.set(key, String(value));
    }
    return url;
  }

  /** Credentials for one request: a plugin's (exec, OIDC), or the bearer token. */
  private async requestCredentials(): Promise<RequestCredentials> {
    if (this.connection.credentials !== undefined) return this.connection.credentials.get();
    const token = await this.bearerToken();
    return token === undefined ? {} : { token };
  }

  /** The server answered 401: the token may have rotated or expired; obtain it afresh next time. */
  private unauthorized(): void {
    this.cachedToken = undefined;
    this.connection.credentials?.invalidate();
  }

  /** The bearer token: fixed, or read from the token file and re-read every tokenRefreshMs. */
  private async bearerToken(): Promise<string | undefined> {
    const { token, tokenFile } = this.connection;
    if (token !== undefined) return token;
    if (tokenFile === undefined) return undefined;
    const cached = this.cachedToken;
    if (cached !== undefined && this.clock.now() - cached.readAt < this.tokenRefreshMs) return cached.value;
    this.tokenRead ??= this.readFile(tokenFile)
      .then((text) => {
        const value = text.trim();
        this.cachedToken = { value, readAt: this.clock.now() };
        return value;
      })
      .catch((error: unknown) => {
        // A rotation in progress can leave the file briefly missing: keep using the last token.
        if (cached !== undefined) return cached.value;
        throw error;
      })
      .finally(() => {
        this.tokenRead = undefined;
      });
    return this.tokenRead;
  }

  /**
   * Sends one request; resolves with the response once its headers arrive, and `release`, which
   * detaches the request from spec.signal (call it when done with the response).
   */
  private async open(
    spec: RequestSpec,
    streaming: boolean,
  ): Promise<{ readonly res: IncomingMessage; readonly release: () => void }> {
    const { token, clientCert, clientKey } = await this.requestCredentials();
    const payload =
      spec.body === undefined
        ? undefined
        : Buffer.from(typeof spec.body === 'string' ? spec.body : JSON.stringify(spec.body));
    const headers: OutgoingHttpHeaders = {
      Accept: spec.accept ?? 'application/json',
      'Accept-Encoding': 'gzip',
      'User-Agent': this.userAgent,
      // Always framed: a DELETE with an unframed body is misread by the server.
      'Content-Length': payload?.length ?? 0,
    };
    if (payload !== undefined) headers['Content-Type'] = spec.contentType ?? 'application/json';
    if (token !== undefined && token !== '') headers['Authorization'] = `Bearer ${token}`;
    const { impersonate } = this.connection;
    if (impersonate !== undefined) {
      headers['Impersonate-User'] = impersonate.user;
      if (impersonate.uid !== undefined) headers['Impersonate-Uid'] = impersonate.uid;
      if (impersonate.groups.length > 0) headers['Impersonate-Group'] = [...impersonate.groups];
      for (const [key, values] of Object.entries(impersonate.extra)) {
        headers[`Impersonate-Extra-${encodeURIComponent(key)}`] = [...values];
      }
    }
    const url = this.url(spec.path, spec.query);
    const { signal } = spec;
    signal?.throwIfAborted();
    return new Promise((resolve, reject) => {
      const send = this.secure ? httpsRequest : httpRequest;
      // A plugin's client certificate goes with the request: the agent pools its sockets apart.
      const tls = clientCert === undefined || clientKey === undefined ? {} : { cert: clientCert, key: clientKey };
      const req = send(url, { method: spec.method, agent: this.agent, headers, ...tls });
      const onAbort = (): void => {
        req.destroy(signal === undefined ? undefined : (abortError(signal) as Error));
      };
      const release = (): void => {
        signal?.removeEventListener('abort', onAbort);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      req.once('close', release);
      const idleMs = streaming ? spec.idleTimeoutMs : this.timeoutMs;
      let response: IncomingMessage | undefined;
      if (idleMs !== undefined) {
        // The socket's idle timer: it also runs while a watch's body streams (its reader then
        // gets this error, not the bare "aborted" of a destroyed request).
        req.setTimeout(idleMs, () => {
          const error = new Error(`${spec.method} ${url.pathname}: nothing received for ${String(idleMs)} ms`);
          response?.destroy(error);
          req.destroy(error);
          // A request that got no answer says the way to the apiserver failed: the other
          // connections on it (the watches) are suspect too, and would stay silent until their own
          // idle limit. Closed, each watch starts again on a new connection.
          if (!streaming) this.agent.destroy();
        });
      }
      req.once('error', (error) => {
        release();
        reject(error);
      });
      req.once('response', (res) => {
        response = res;
        resolve({ res, release });
      });
      req.end(payload);
    });
  }

  private async readBody(res: IncomingMessage): Promise<string> {
    // Decoded chunk by chunk: one Buffer.concat(...).toString() of a body over ~1 MB (a LIST of
    // 1,000 PVs) makes an external string that outlives the parse until a full GC, beside the
    // chunks and their concatenation (docs/benchmarks.md, footprint).
    const decoder = new TextDecoder('utf-8', { ignoreBOM: true });
    let text = '';
    let size = 0;
    for await (const chunk of decoded(res)) {
      const buffer = chunk as Buffer;
      size += buffer.length;
      if (size > this.maxResponseBytes) {
        res.destroy();
        throw new KubeApiError(
          500,
          'InternalError',
          `response body larger than ${String(this.maxResponseBytes)} bytes (decompressed)`,
        );
      }
      text += decoder.decode(buffer, { stream: true });
    }
    return text + decoder.decode();
  }

  private retryDelayMs(res: IncomingMessage): number | undefined {
    const status = res.statusCode ?? 0;
    const header = res.headers['retry-after'];
    if (status !== 429 && !(status >= 500 && header !== undefined)) return undefined;
    const seconds = header === undefined ? 1 : Number(header);
    return Math.min(MAX_RETRY_DELAY_MS, Math.max(0, Number.isFinite(seconds) ? seconds * 1000 : 1000));
  }

  private async request(spec: RequestSpec): Promise<unknown> {
    for (let attempt = 0; ; attempt++) {
      await this.limiter.take(spec.signal);
      const { res, release } = await this.open(spec, false);
      let body: string;
      try {
        body = await this.readBody(res);
      } finally {
        release();
      }
      const status = res.statusCode ?? 0;
      if (status >= 200 && status < 300) return body === '' ? undefined : (JSON.parse(body) as unknown);
      if (status === 401) {
        this.unauthorized();
        // A plugin's credential may have been revoked before its expiry: run it again, once.
        if (this.connection.credentials !== undefined && attempt === 0) continue;
      }
      const delay = this.retryDelayMs(res);
      if (delay !== undefined && attempt < this.maxRetries) {
        await this.clock.sleep(delay, spec.signal);
        continue;
      }
      throw statusToError(status, body);
    }
  }

  /** How long this watch may stay silent (see RestClusterOptions.watchIdleTimeoutMs). */
  private watchIdleMs(options: WatchOptions): number {
    if (this.watchIdleTimeoutMs !== undefined) return this.watchIdleTimeoutMs;
    if (options.allowBookmarks === true) return WATCH_IDLE_WITH_BOOKMARKS_MS;
    return ((options.timeoutSeconds ?? 300) + 30) * 1000;
  }

  private watch<T>(path: string, options: WatchOptions): AsyncIterable<WatchEvent<T>> {
    const iterate = async function* (this: RestCluster): AsyncGenerator<WatchEvent<T>, void, undefined> {
      const { signal } = options;
      if (isAborted(signal)) return;
      let res: IncomingMessage;
      let release: () => void;
      try {
        await this.limiter.take(signal);
        ({ res, release } = await this.open(
          {
            method: 'GET',
            path,
            query: {
              watch: 1,
              resourceVersion: options.resourceVersion,
              allowWatchBookmarks: options.allowBookmarks === true ? 'true' : undefined,
              labelSelector: options.labelSelector || undefined,
              fieldSelector: options.fieldSelector || undefined,
              timeoutSeconds: options.timeoutSeconds,
            },
            signal,
            idleTimeoutMs: this.watchIdleMs(options),
          },
          true,
        ));
      } catch (error) {
        if (isAborted(signal)) return;
        throw error;
      }
      try {
        const status = res.statusCode ?? 0;
        if (status !== 200) {
          if (status === 401) this.unauthorized();
          throw statusToError(status, await this.readBody(res));
        }
        const body = decoded(res);
        body.setEncoding('utf8');
        let buffer = '';
        for await (const chunk of body) {
          buffer += chunk as string;
          let newline: number;
          while ((newline = buffer.indexOf('\n')) >= 0) {
            const line = buffer.slice(0, newline).trim();
            buffer = buffer.slice(newline + 1);
            if (line === '') continue;
            const event = parseWatchLine<T>(line);
            if (event !== undefined) yield event;
            if (isAborted(signal)) return;
          }
          // The unfinished line, in UTF-16 units (never more than its UTF-8 bytes).
          if (buffer.length > this.maxWatchEventBytes) {
            throw new KubeApiError(
              500,
              'InternalError',
              `watch event larger than ${String(this.maxWatchEventBytes)} bytes (decompressed)`,
            );
          }
        }
        const rest = buffer.trim();
        if (rest !== '' && !isAborted(signal)) {
          const event = parseWatchLine<T>(rest);
          if (event !== undefined) yield event;
        }
      } catch (error) {
        if (isAborted(signal)) return;
        throw error;
      } finally {
        release();
        res.destroy();
      }
    };
    return { [Symbol.asyncIterator]: () => iterate.call(this) };
  }
}

/** The response body as sent before Content-Encoding (gzip is decompressed as it streams). */
function decoded(res: IncomingMessage): Readable {
  const encoding = res.headers['content-encoding']?.trim().toLowerCase();
  if (encoding === undefined || encoding === '' || encoding === 'identity') return res;
  if (encoding !== 'gzip') {
    res.destroy();
    throw new KubeApiError(500, 'InternalError', `unsupported Content-Encoding ${JSON.stringify(encoding)}`);
  }
  const gunzip = zlib().createGunzip();
  // Errors of either side end up on gunzip, where the reader sees them.
  pipeline(res, gunzip, () => undefined);
  return gunzip;
}

/** One line of a watch stream; ERROR events (e.g. 410 Expired) become a thrown KubeApiError. */
function parseWatchLine<T>(line: string): WatchEvent<T> | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(line);
  } catch {
    throw new KubeApiError(500, 'InternalError', `malformed watch event: ${line.slice(0, 200)}`);
  }
  if (!isRecord(parsed)) return undefined;
  const { type, object } = parsed;
  switch (type) {
    case 'ADDED':
    case 'MODIFIED':
    case 'DELETED':
      return { type, object: object as T };
    case 'BOOKMARK': {
      const metadata = isRecord(object) ? object['metadata'] : undefined;
      const resourceVersion = isRecord(metadata) ? metadata['resourceVersion'] : undefined;
      return { type: 'BOOKMARK', resourceVersion: typeof resourceVersion === 'string' ? resourceVersion : '' };
    }
    case 'ERROR':
      throw statusToError(500, object);
    default:
      return undefined;
  }
}
