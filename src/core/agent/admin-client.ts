// Client of the agent's admin endpoint (admin-server.ts): HTTP/1.1 over the agent's Unix socket.
// Used by `provisioner reload` and by `diff-config` (the running agent as --from).
import type { ClientRequest, IncomingMessage } from 'node:http';
import { formatGoDuration } from '../config/duration.js';
import { ExitCode, ProvisionerError } from '../errors.js';
import { request } from '../node-http.js';
import { RELOAD_OUTCOMES } from './reload-types.js';
import type { AgentEvent, AgentStatusJson, AppliedConfigJson, ReloadResult } from './reload-types.js';
import type { GuardedImpact } from '../config/reload-guard.js';
import { errnoCode, errorMessage, isRecord } from '../unknown-values.js';

/** Why the socket could not be used: it does not exist, nobody listens on it, or we may not connect. */
export type UnreachableReason = 'missing' | 'refused' | 'denied';

const REASON_DETAIL: Readonly<Record<UnreachableReason, string>> = {
  missing: 'the socket does not exist',
  refused: 'connection refused (a stale socket: the agent that created it is not running)',
  denied: 'permission denied (the socket is mode 0600: run as the user of the agent, e.g. in its pod)',
};

/** No agent answers on the admin socket. */
export class AgentUnreachableError extends ProvisionerError {
  readonly exitCode = ExitCode.AgentUnreachable;
  readonly code = 'agent-unreachable';
  /** One phrase saying what went wrong, e.g. "the socket does not exist". */
  readonly detail: string;
  constructor(
    readonly socketPath: string,
    readonly reason: UnreachableReason,
  ) {
    super(
      `no agent reachable at ${socketPath}: ${REASON_DETAIL[reason]}; is \`provisioner run\` running on this node? ` +
        `(point --admin-socket or PROVISIONER_ADMIN_SOCKET at its admin socket)`,
    );
    this.detail = REASON_DETAIL[reason];
  }
}

/** The agent accepted the connection but did not answer in time. */
export class AgentTimeoutError extends ProvisionerError {
  readonly exitCode = ExitCode.AgentTimeout;
  readonly code = 'agent-timeout';
  constructor(
    readonly socketPath: string,
    readonly timeoutMs: number,
    what: string,
  ) {
    super(`the agent at ${socketPath} did not answer ${what} within ${formatMs(timeoutMs)}`);
  }
}

/** The agent answered, but with an error status or something that is not the expected JSON. */
export class AgentResponseError extends ProvisionerError {
  readonly exitCode = ExitCode.NotApplied;
  readonly code = 'agent-error';
  constructor(
    readonly socketPath: string,
    message: string,
    readonly status?: number,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

export interface AdminClientOptions {
  /** Longest wait for a whole answer (for events: for the stream to open). */
  readonly timeoutMs: number;
}

const MAX_BODY_BYTES = 32 * 1024 * 1024;
const OUTCOMES: ReadonlySet<string> = new Set<string>(RELOAD_OUTCOMES);
const EVENT_TYPES: ReadonlySet<string> = new Set(['status', 'reload', 'pass', 'cleanup', 'log']);

function formatMs(ms: number): string {
  return formatGoDuration(BigInt(Math.round(ms)) * 1_000_000n);
}

function unreachableReason(code: string | undefined): UnreachableReason | undefined {
  switch (code) {
    case 'ENOENT':
    case 'ENOTDIR':
      return 'missing';
    case 'ECONNREFUSED':
    case 'ENOTSOCK':
      return 'refused';
    case 'EACCES':
    case 'EPERM':
      return 'denied';
    default:
      return undefined;
  }
}

function isReloadResult(value: unknown): value is ReloadResult {
  return (
    isRecord(value) &&
    typeof value['outcome'] === 'string' &&
    OUTCOMES.has(value['outcome']) &&
    typeof value['generation'] === 'number' &&
    typeof value['appliedHash'] === 'string' &&
    Array.isArray(value['changes']) &&
    Array.isArray(value['issues'])
  );
}

function isStatus(value: unknown): value is AgentStatusJson {
  return (
    isRecord(value) &&
    value['formatVersion'] === 1 &&
    typeof value['generation'] === 'number' &&
    isRecord(value['config'])
  );
}

function isAppliedConfig(value: unknown): value is AppliedConfigJson {
  return (
    isRecord(value) &&
    value['formatVersion'] === 1 &&
    typeof value['hash'] === 'string' &&
    typeof value['generation'] === 'number' &&
    isRecord(value['config']) &&
    isRecord(value['config']['storageClassMap'])
  );
}

function isEvent(value: unknown): value is AgentEvent {
  return isRecord(value) && typeof value['type'] === 'string' && EVENT_TYPES.has(value['type']);
}

export class AdminClient {
  constructor(
    readonly socketPath: string,
    readonly options: AdminClientOptions,
  ) {}

  /** GET /v1/status. */
  async status(): Promise<AgentStatusJson> {
    return this.json('GET', '/v1/status', undefined, 'the status request', isStatus);
  }

  /** GET /v1/config: the config the agent applies now. */
  async config(): Promise<AppliedConfigJson> {
    return this.json('GET', '/v1/config', undefined, 'the config request', isAppliedConfig);
  }

  /** POST /v1/reload: resolves when the agent finished the reload, whatever its outcome. */
  async reload(
    options: { readonly force?: boolean; readonly allow?: readonly GuardedImpact[] } = {},
  ): Promise<ReloadResult> {
    const body = JSON.stringify({
      ...(options.force === true ? { force: true } : {}),
      ...(options.allow !== undefined && options.allow.length > 0 ? { allow: options.allow } : {}),
    });
    return this.json(
      'POST',
      '/v1/reload',
      body,
      'the reload request (the reload may still complete; see GET /v1/status)',
      isReloadResult,
    );
  }

  /** GET /v1/events: a status event, then live events until `signal` aborts or the agent stops. */
  events(signal?: AbortSignal): AsyncIterable<AgentEvent> {
    return this.eventStream(signal);
  }

  private async *eventStream(signal: AbortSignal | undefined): AsyncGenerator<AgentEvent> {
    // A function, not a property test: TypeScript would keep the first test's narrowing.
    const aborted = (): boolean => signal?.aborted === true;
    if (aborted()) return;
    let opened: { res: IncomingMessage };
    try {
      opened = await this.open('GET', '/v1/events', undefined, 'the events request', { signal });
    } catch (err) {
      if (aborted()) return;
      throw err;
    }
    const { res } = opened;
    try {
      if (res.statusCode !== 200) {
        throw this.statusError(res.statusCode ?? 0, await readBody(res));
      }
      res.setEncoding('utf8');
      let buffer = '';
      for await (const chunk of res as AsyncIterable<string>) {
        buffer += chunk;
        let newline = buffer.indexOf('\n');
        while (newline >= 0) {
          const line = buffer.slice(0, newline).trim();
          buffer = buffer.slice(newline + 1);
          newline = buffer.indexOf('\n');
          if (line === '') continue;
          const event = parseJson(line, this.socketPath);
          if (!isEvent(event)) {
            throw new AgentResponseError(this.socketPath, `the agent at ${this.socketPath} sent an invalid event line`);
          }
          yield event;
        }
      }
    } catch (err) {
      if (aborted()) return;
      if (err instanceof ProvisionerError) throw err;
      throw new AgentResponseError(
        this.socketPath,
        `the event stream from ${this.socketPath} broke: ${errorMessage(err)}`,
      );
    } finally {
      res.destroy();
    }
  }

  private async json<T>(
    method: string,
    path: string,
    body: string | undefined,
    what: string,
    guard: (value: unknown) => value is T,
  ): Promise<T> {
    const { res, timer } = await this.open(method, path, body, what);
    try {
      const text = await readBody(res);
      if (res.statusCode !== 200) throw this.statusError(res.statusCode ?? 0, text);
      const value = parseJson(text, this.socketPath);
      if (!guard(value)) {
        throw new AgentResponseError(
          this.socketPath,
          `the agent at ${this.socketPath} answered ${method} ${path} with unexpected JSON (a different version?)`,
          200,
        );
      }
      return value;
    } catch (err) {
      throw timer.error ?? this.mapError(err);
    } finally {
      timer.clear();
    }
  }

  /** Sends a request and resolves with the response once its headers arrived; the timer keeps running. */
  private open(
    method: string,
    path: string,
    body: string | undefined,
    what: string,
    /** Set for a stream: only its opening is bounded by the timeout, and it ends when `signal` aborts. */
    stream?: { readonly signal: AbortSignal | undefined },
  ): Promise<{ res: IncomingMessage; timer: Deadline }> {
    const signal = stream?.signal;
    return new Promise((resolve, reject) => {
      const req: ClientRequest = request({
        socketPath: this.socketPath,
        method,
        path,
        agent: false,
        headers: {
          host: 'provisioner',
          connection: 'close',
          accept: 'application/json',
          ...(body !== undefined
            ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }
            : {}),
        },
        ...(signal !== undefined ? { signal } : {}),
      });
      const timer = new Deadline(this.options.timeoutMs, () => {
        const error = new AgentTimeoutError(this.socketPath, this.options.timeoutMs, what);
        req.destroy(error);
        return error;
      });
      req.on('error', (err) => {
        timer.clear();
        reject(timer.error ?? this.mapError(err));
      });
      req.once('response', (res) => {
        if (stream !== undefined) timer.clear();
        resolve({ res, timer });
      });
      req.end(body);
    });
  }

  private statusError(status: number, text: string): AgentResponseError {
    const parsed = safeParse(text);
    const reason =
      isRecord(parsed) && typeof parsed['error'] === 'string' ? parsed['error'] : text.trim().slice(0, 200);
    const hint = status === 404 ? ' (an agent version without this endpoint?)' : '';
    return new AgentResponseError(
      this.socketPath,
      `the agent at ${this.socketPath} answered ${status}: ${reason}${hint}`,
      status,
    );
  }

  private mapError(err: unknown): ProvisionerError {
    if (err instanceof ProvisionerError) return err;
    const reason = unreachableReason(errnoCode(err));
    if (reason !== undefined) return new AgentUnreachableError(this.socketPath, reason);
    return new AgentResponseError(
      this.socketPath,
      `the connection to the agent at ${this.socketPath} failed: ${errorMessage(err)}`,
    );
  }
}

/** A one-shot timer that remembers the error it produced. */
class Deadline {
  error: AgentTimeoutError | undefined;
  private readonly handle: NodeJS.Timeout;
  constructor(ms: number, onExpire: () => AgentTimeoutError) {
    this.handle = setTimeout(() => {
      this.error = onExpire();
    }, ms);
  }
  clear(): void {
    clearTimeout(this.handle);
  }
}

function readBody(res: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    res.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        res.destroy(new Error(`answer larger than ${MAX_BODY_BYTES} bytes`));
        return;
      }
      chunks.push(chunk);
    });
    res.once('end', () => {
      resolve(Buffer.concat(chunks).toString('utf8'));
    });
    res.on('error', reject);
    res.once('close', () => {
      if (!res.complete) reject(new Error('the agent closed the connection mid-answer'));
    });
  });
}

function safeParse(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

function parseJson(text: string, socketPath: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new AgentResponseError(
      socketPath,
      `the agent at ${socketPath} answered with something that is not JSON: ${errorMessage(err)}`,
      undefined,
      { cause: err },
    );
  }
}
