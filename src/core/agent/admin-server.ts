// The agent's admin endpoint: HTTP/1.1 on a Unix socket only root (the agent's user) can open.
// Serves status, the applied config, synchronous reloads and a live event stream (docs/reload-command.md).
import { chmod, lstat, mkdir, unlink } from 'node:fs/promises';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { connect } from 'node:net';
import { dirname } from 'node:path';
import { StartupError } from '../errors.js';
import { createServer } from '../node-http.js';
import type { Logger } from '../log.js';
import { GUARDED_IMPACTS, isGuardedImpact } from '../config/reload-guard.js';
import type { GuardedImpact } from '../config/reload-guard.js';
import type { AdminTarget, AgentEvent } from './reload-types.js';
import { nodeProcessHost } from '../process-host.js';
import type { ProcessHost } from '../process-host.js';
import { errnoCode, errorMessage } from '../unknown-values.js';

export interface AdminServerOptions {
  readonly socketPath: string;
  readonly target: AdminTarget;
  readonly logger: Logger;
  /** Interval of the status event that keeps /v1/events streams alive; default 15 s. */
  readonly keepAliveMs?: number;
  /** Its umask is narrowed around the bind; default the real process. */
  readonly host?: Pick<ProcessHost, 'umask'>;
}

export interface RunningAdminServer {
  readonly socketPath: string;
  /** Ends event streams and open requests, stops listening and removes the socket file. */
  close(): Promise<void>;
}

const DEFAULT_KEEP_ALIVE_MS = 15_000;
const MAX_REQUEST_BODY = 64 * 1024;
/** A stream client that stops reading is dropped rather than buffered without bound. */
const MAX_STREAM_BACKLOG = 4 * 1024 * 1024;
const SOCKET_MODE = 0o600;

type Method = 'GET' | 'POST';

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  if (res.headersSent || res.destroyed) return;
  const text = `${JSON.stringify(body)}\n`;
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
    'cache-control': 'no-store',
    ...headers,
  });
  res.end(text);
}

function readBody(req: IncomingMessage): Promise<string | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_REQUEST_BODY) {
        resolve(undefined);
        req.removeAllListeners('data');
        req.resume();
        return;
      }
      chunks.push(chunk);
    });
    req.once('end', () => {
      resolve(Buffer.concat(chunks).toString('utf8'));
    });
    req.on('error', reject);
  });
}

/**
 * `{}`, `{ "force": boolean, "allow": ["orphans-pvs", "ownership-change"] }`; an empty body is `{}`.
 * Returns an error message when invalid.
 */
export function parseReloadBody(text: string): { force: boolean; allow: readonly GuardedImpact[] } | { error: string } {
  if (text.trim() === '') return { force: false, allow: [] };
  let value: unknown;
  try {
    value = JSON.parse(text) as unknown;
  } catch (err) {
    return { error: `the body is not JSON: ${errorMessage(err)}` };
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return { error: 'the body must be a JSON object such as {"force": true}' };
  }
  const force: unknown = (value as Record<string, unknown>)['force'];
  if (force !== undefined && typeof force !== 'boolean') return { error: '"force" must be true or false' };
  const allow: unknown = (value as Record<string, unknown>)['allow'];
  const valid = `one of ${GUARDED_IMPACTS.join(', ')}`;
  if (allow !== undefined && !Array.isArray(allow))
    return { error: `"allow" must be a list of impact classes, ${valid}` };
  const items: readonly unknown[] = Array.isArray(allow) ? allow : [];
  const allowed: GuardedImpact[] = [];
  for (const item of items) {
    if (typeof item !== 'string' || !isGuardedImpact(item))
      return { error: `"allow": ${JSON.stringify(item)} is not a guarded impact class; expected ${valid}` };
    if (!allowed.includes(item)) allowed.push(item);
  }
  return { force: force === true, allow: allowed };
}

/** Is a process serving this socket? Connecting tells: refused means the file is stale. */
function probeSocket(path: string): Promise<'live' | 'stale' | 'gone' | { error: string }> {
  return new Promise((resolve) => {
    const socket = connect(path);
    socket.once('connect', () => {
      socket.destroy();
      resolve('live');
    });
    socket.once('error', (err) => {
      socket.destroy();
      const code = errnoCode(err);
      if (code === 'ECONNREFUSED') resolve('stale');
      else if (code === 'ENOENT') resolve('gone');
      else if (code === 'EAGAIN')
        resolve('live'); // the listen backlog is full: someone listens
      else resolve({ error: errorMessage(err) });
    });
  });
}

function listenOn(server: Server, path: string, host: Pick<ProcessHost, 'umask'>): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (err: Error): void => {
      reject(err);
    };
    server.once('error', onError);
    server.once('listening', () => {
      server.off('error', onError);
      resolve();
    });
    // The bind is synchronous inside listen(): a restrictive umask around it means the socket is
    // never, even briefly, connectable by other users. (process.umask cannot be set in a worker.)
    let previous: number | undefined;
    try {
      previous = host.umask(0o177);
    } catch {
      previous = undefined;
    }
    try {
      server.listen(path);
    } finally {
      if (previous !== undefined) host.umask(previous);
    }
  });
}

/** Deals with a file already at the socket path: a stale socket is removed, anything else refuses start-up. */
async function clearStaleSocket(path: string, logger: Logger): Promise<void> {
  const stat = await lstat(path).catch((err: unknown) => {
    if (errnoCode(err) === 'ENOENT') return undefined;
    throw err;
  });
  if (stat === undefined) return;
  if (!stat.isSocket()) {
    throw new StartupError(
      `admin socket ${path} exists and is not a socket: remove it or choose another --admin-socket`,
    );
  }
  const probe = await probeSocket(path);
  if (probe === 'live') {
    throw new StartupError(`another agent is serving ${path}: stop it, or give this one another --admin-socket`);
  }
  if (probe === 'gone') return;
  if (typeof probe === 'object') {
    throw new StartupError(`cannot tell whether ${path} is in use (${probe.error}): remove it if no agent runs`);
  }
  logger.log('warn', 'replacing a stale admin socket left by an agent that is not running', { socket: path });
  await unlink(path).catch((err: unknown) => {
    if (errnoCode(err) !== 'ENOENT') throw err;
  });
}

/** What the handlers share with the server: the agent, and the open event streams. */
interface AdminState {
  readonly socketPath: string;
  readonly target: AdminTarget;
  readonly logger: Logger;
  readonly keepAliveMs: number;
  /** Open event streams: how to stop each one (unsubscribe) and its response. */
  readonly streams: Map<() => void, ServerResponse>;
  /** close() has begun: a stream that opens now ends at once. */
  closing: boolean;
}

type Handler = (admin: AdminState, req: IncomingMessage, res: ServerResponse) => void | Promise<void>;

const statusEvent = (target: AdminTarget): AgentEvent => ({ type: 'status', at: Date.now(), status: target.status() });

/** One client of /v1/events, open until either side ends it. */
interface EventStream {
  send(event: AgentEvent): void;
  /** Never lets one stream's trouble reach the agent (the emitter calling the listener) or the timer. */
  sendSafely(make: () => AgentEvent): void;
  stop(): void;
  isEnded(): boolean;
  /** How stop() ends the subscription, once there is one. */
  setUnsubscribe(unsubscribe: () => void): void;
}

/** The stream's keep-alive status events, its backlog bound, and its registration with the server. */
function openEventStream(admin: AdminState, res: ServerResponse): EventStream {
  const { streams, logger } = admin;
  let ended = false;
  let unsubscribe = (): void => undefined;
  const timer = setInterval(() => {
    sendSafely(() => statusEvent(admin.target));
  }, admin.keepAliveMs);
  const stop = (): void => {
    if (ended) return;
    ended = true;
    clearInterval(timer);
    unsubscribe();
    streams.delete(stop);
  };
  const send = (event: AgentEvent): void => {
    if (ended) return;
    res.write(`${JSON.stringify(event)}\n`);
    if (res.writableLength > MAX_STREAM_BACKLOG) {
      logger.log('warn', 'dropping an admin event stream whose client does not read', { socket: admin.socketPath });
      stop();
      res.destroy();
    }
  };
  const sendSafely = (make: () => AgentEvent): void => {
    try {
      send(make());
    } catch (err) {
      logger.log('warn', 'admin event not sent', { error: errorMessage(err) });
    }
  };
  streams.set(stop, res);
  res.once('close', stop);
  res.once('finish', stop);
  const isEnded = (): boolean => ended;
  const setUnsubscribe = (next: () => void): void => {
    unsubscribe = next;
  };
  return { send, sendSafely, stop, isEnded, setUnsubscribe };
}

/** Forwards the agent's events to the stream; one that ended or was closed meanwhile is ended at once. */
function subscribeStream(admin: AdminState, stream: EventStream, res: ServerResponse): void {
  let unsubscribe: () => void;
  try {
    unsubscribe = admin.target.subscribe((event) => {
      stream.sendSafely(() => event);
    });
  } catch (err) {
    admin.logger.log('error', 'admin event subscription failed', { error: errorMessage(err) });
    stream.stop();
    res.end();
    return;
  }
  stream.setUnsubscribe(unsubscribe);
  if (stream.isEnded()) {
    // Dropped while subscribing (stop() ran before there was anything to unsubscribe).
    unsubscribe();
  } else if (admin.closing) {
    stream.stop();
    res.end();
  }
}

/** GET /v1/events: NDJSON, a status event first, then the agent's events. */
const streamEvents: Handler = (admin, _req, res) => {
  // Before the 200: a status() that throws is still a clean 500.
  const first = statusEvent(admin.target);
  res.writeHead(200, {
    'content-type': 'application/x-ndjson; charset=utf-8',
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
  });
  const stream = openEventStream(admin, res);
  stream.send(first);
  subscribeStream(admin, stream, res);
};

/** POST /v1/reload: synchronous, it answers when the reload finished. */
const reload: Handler = async (admin, req, res) => {
  const body = await readBody(req);
  if (body === undefined) {
    sendJson(res, 413, { error: `the body is larger than ${MAX_REQUEST_BODY} bytes` });
    return;
  }
  const parsed = parseReloadBody(body);
  if ('error' in parsed) {
    sendJson(res, 400, { error: parsed.error });
    return;
  }
  // Every outcome is a 200; the outcome is in the body.
  const result = await admin.target.reload({
    trigger: 'admin',
    force: parsed.force,
    ...(parsed.allow.length > 0 ? { allow: parsed.allow } : {}),
  });
  sendJson(res, 200, result);
};

/** The endpoints: path, then method. */
const ROUTES: Readonly<Record<string, Partial<Record<Method, Handler>>>> = {
  '/v1/status': {
    GET: (admin, _req, res) => {
      sendJson(res, 200, admin.target.status());
    },
  },
  '/v1/config': {
    GET: (admin, _req, res) => {
      sendJson(res, 200, admin.target.appliedConfig());
    },
  },
  '/v1/reload': { POST: reload },
  '/v1/events': { GET: streamEvents },
};

/** Routes a request: 404 for an unknown path, 405 for a method it lacks, 500 for a handler that throws. */
async function handle(admin: AdminState, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const path = new URL(req.url ?? '/', 'http://admin').pathname;
  const route = ROUTES[path];
  if (route === undefined) {
    sendJson(res, 404, { error: `no such endpoint: ${path}` });
    return;
  }
  const handler = req.method === 'GET' || req.method === 'POST' ? route[req.method] : undefined;
  if (handler === undefined) {
    const allow = Object.keys(route).join(', ');
    sendJson(res, 405, { error: `${req.method ?? ''} is not allowed on ${path}: use ${allow}` }, { allow });
    return;
  }
  try {
    await handler(admin, req, res);
  } catch (err) {
    admin.logger.log('error', 'admin request failed', { method: req.method, path, error: errorMessage(err) });
    sendJson(res, 500, { error: errorMessage(err) });
  }
}

function adminHttpServer(admin: AdminState): Server {
  return createServer((req, res) => {
    void handle(admin, req, res);
  });
}

/**
 * Only the socket's own directory is created (0700, like the pod's emptyDir), never a chain of
 * them: a mistyped --admin-socket fails here instead of growing directories.
 */
async function makeSocketDir(socketPath: string): Promise<void> {
  await mkdir(dirname(socketPath), { mode: 0o700 }).catch((err: unknown) => {
    if (errnoCode(err) === 'EEXIST') return;
    const hint = errnoCode(err) === 'ENOENT' ? ' (only the last directory is created, not its parents)' : '';
    throw new StartupError(`cannot create the directory of admin socket ${socketPath}: ${errorMessage(err)}${hint}`);
  });
}

/** Listens on the socket; a socket file in the way is cleared (when stale) and the listen tried once more. */
async function listenAdmin(admin: AdminState, host: Pick<ProcessHost, 'umask'>): Promise<Server> {
  const { socketPath } = admin;
  const server = adminHttpServer(admin);
  try {
    await listenOn(server, socketPath, host);
    return server;
  } catch (err) {
    if (errnoCode(err) !== 'EADDRINUSE') {
      throw new StartupError(`cannot listen on admin socket ${socketPath}: ${errorMessage(err)}`);
    }
  }
  await clearStaleSocket(socketPath, admin.logger);
  const again = adminHttpServer(admin);
  await listenOn(again, socketPath, host).catch((error: unknown) => {
    throw new StartupError(`cannot listen on admin socket ${socketPath}: ${errorMessage(error)}`);
  });
  return again;
}

function shutdown(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => {
      resolve();
    });
    server.closeAllConnections();
  });
}

/** Belt and braces on top of the umask: chmod, then check what is really on disk. Returns its inode. */
async function restrictSocket(server: Server, socketPath: string): Promise<number> {
  try {
    await chmod(socketPath, SOCKET_MODE);
    const stat = await lstat(socketPath);
    if (!stat.isSocket() || (stat.mode & 0o777) !== SOCKET_MODE) {
      throw new Error(`mode is ${(stat.mode & 0o777).toString(8)}, not ${SOCKET_MODE.toString(8)}`);
    }
    return stat.ino;
  } catch (err) {
    await shutdown(server);
    throw new StartupError(`cannot restrict admin socket ${socketPath} to its owner: ${errorMessage(err)}`);
  }
}

async function closeAdmin(admin: AdminState, server: Server, inode: number): Promise<void> {
  admin.closing = true;
  // End streams cleanly: their clients see the end of the body, not a reset.
  for (const [stop, res] of [...admin.streams]) {
    stop();
    res.end();
  }
  await shutdown(server);
  // The server removes its socket on close; make sure, but never remove another agent's.
  const stat = await lstat(admin.socketPath).catch(() => undefined);
  if (stat?.ino === inode) await unlink(admin.socketPath).catch(() => undefined);
}

export async function startAdminServer(options: AdminServerOptions): Promise<RunningAdminServer> {
  const { socketPath, target, logger } = options;
  const admin: AdminState = {
    socketPath,
    target,
    logger,
    keepAliveMs: options.keepAliveMs ?? DEFAULT_KEEP_ALIVE_MS,
    streams: new Map(),
    closing: false,
  };
  await makeSocketDir(socketPath);
  const server = await listenAdmin(admin, options.host ?? nodeProcessHost);
  const inode = await restrictSocket(server, socketPath);
  logger.log('info', 'admin endpoint listening', { socket: socketPath });
  let closed: Promise<void> | undefined;
  return {
    socketPath,
    close: () => {
      closed ??= closeAdmin(admin, server, inode);
      return closed;
    },
  };
}
