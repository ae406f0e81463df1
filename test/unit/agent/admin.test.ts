// The admin endpoint (real server on a temp Unix socket) and its client, against a fake target.
import assert from 'node:assert/strict';
import { lstat, mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, afterEach, before, describe, it } from 'node:test';
import {
  AdminClient,
  AgentResponseError,
  AgentTimeoutError,
  AgentUnreachableError,
} from '../../../src/core/agent/admin-client.js';
import { parseReloadBody, startAdminServer } from '../../../src/core/agent/admin-server.js';
import type { RunningAdminServer } from '../../../src/core/agent/admin-server.js';
import type { AgentEvent } from '../../../src/core/agent/reload-types.js';
import { StartupError } from '../../../src/core/errors.js';
import { MemoryLogger } from '../../../src/core/log.js';
import { eventually, FakeAdminTarget, HASH_B, leaveStaleSocket, reloadResult } from '../../support/fake-admin.js';

interface RawResponse {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: string;
}

function raw(socketPath: string, method: string, path: string, body?: string): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath, method, path, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (d: string) => (text += d));
      res.on('end', () => {
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('admin endpoint', () => {
  let dir = '';
  let n = 0;
  const servers: RunningAdminServer[] = [];
  const freshSocket = (): string => join(dir, `run-${++n}`, 'admin.sock');
  const start = async (
    target: FakeAdminTarget,
    socketPath = freshSocket(),
    extra: { keepAliveMs?: number; logger?: MemoryLogger } = {},
  ): Promise<RunningAdminServer> => {
    const server = await startAdminServer({ socketPath, target, logger: extra.logger ?? new MemoryLogger(), ...extra });
    servers.push(server);
    return server;
  };
  const client = (server: RunningAdminServer, timeoutMs = 5000): AdminClient =>
    new AdminClient(server.socketPath, { timeoutMs });

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'lvp-admin-'));
  });
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => s.close()));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('creates the socket with mode 0600 in a 0700 directory it creates', async () => {
    const server = await start(new FakeAdminTarget());
    const socket = await lstat(server.socketPath);
    assert.ok(socket.isSocket());
    assert.equal(socket.mode & 0o777, 0o600);
    assert.equal((await stat(join(server.socketPath, '..'))).mode & 0o777, 0o700);
  });

  it('serves status and the applied config', async () => {
    const target = new FakeAdminTarget();
    target.generation = 9;
    const server = await start(target);
    const status = await client(server).status();
    assert.equal(status.generation, 9);
    assert.equal(status.node, 'node-a');
    assert.deepEqual(await client(server).config(), target.applied);
    const r = await raw(server.socketPath, 'GET', '/v1/status?verbose=1');
    assert.equal(r.status, 200);
    assert.match(String(r.headers['content-type']), /^application\/json/u);
  });

  it('reloads with trigger admin and passes force through', async () => {
    const target = new FakeAdminTarget();
    const server = await start(target);
    const plain = await client(server).reload();
    assert.equal(plain.outcome, 'noop');
    const forced = await client(server).reload({ force: true });
    assert.equal(forced.forced, true);
    assert.deepEqual(target.reloadRequests, [
      { trigger: 'admin', force: false },
      { trigger: 'admin', force: true },
    ]);
    // Every outcome is a 200 with the outcome in the body.
    target.onReload = () => Promise.resolve(reloadResult('rejected', { error: 'invalid' }));
    const r = await raw(server.socketPath, 'POST', '/v1/reload', '{"force":false}');
    assert.equal(r.status, 200);
    assert.equal((JSON.parse(r.body) as { outcome: string }).outcome, 'rejected');
  });

  it('answers a reload only when it finished', async () => {
    const target = new FakeAdminTarget();
    let finish = (): void => undefined;
    target.onReload = () =>
      new Promise((resolve) => {
        finish = () => {
          resolve(reloadResult('applied', { generation: 8, appliedHash: HASH_B }));
        };
      });
    const server = await start(target);
    let answered = false;
    const pending = client(server)
      .reload()
      .then((r) => {
        answered = true;
        return r;
      });
    await eventually(() => target.reloadRequests.length === 1, 'the reload to reach the target');
    // A whole request on another connection after it: an answer sent at once would be in by then.
    assert.equal((await client(server).status()).node, 'node-a');
    assert.equal(answered, false, 'no answer while the reload runs');
    finish();
    const result = await pending;
    assert.equal(result.generation, 8);
    assert.equal(result.appliedHash, HASH_B);
  });

  it('rejects a malformed reload body with 400, a wrong method with 405 and an unknown path with 404', async () => {
    const server = await start(new FakeAdminTarget());
    const bad = await raw(server.socketPath, 'POST', '/v1/reload', '{"force":"yes"}');
    assert.equal(bad.status, 400);
    assert.deepEqual(JSON.parse(bad.body), { error: '"force" must be true or false' });
    assert.equal((await raw(server.socketPath, 'POST', '/v1/reload', 'nope')).status, 400);
    const wrong = await raw(server.socketPath, 'GET', '/v1/reload');
    assert.equal(wrong.status, 405);
    assert.equal(wrong.headers['allow'], 'POST');
    assert.ok(typeof (JSON.parse(wrong.body) as { error: unknown }).error === 'string');
    assert.equal((await raw(server.socketPath, 'DELETE', '/v1/status')).status, 405);
    const missing = await raw(server.socketPath, 'GET', '/v2/nothing');
    assert.equal(missing.status, 404);
    assert.deepEqual(JSON.parse(missing.body), { error: 'no such endpoint: /v2/nothing' });
    assert.deepEqual(parseReloadBody(''), { force: false, allow: [] });
    assert.deepEqual(parseReloadBody('{"force":true}'), { force: true, allow: [] });
    const badAllow = await raw(server.socketPath, 'POST', '/v1/reload', '{"allow":["everything"]}');
    assert.equal(badAllow.status, 400);
    assert.match(
      (JSON.parse(badAllow.body) as { error: string }).error,
      /^"allow": "everything" is not a guarded impact class; expected one of orphans-pvs, ownership-change$/u,
    );
    assert.ok('error' in parseReloadBody('[true]'));
  });

  it('turns a reload that throws into a 500, which the client reports', async () => {
    const target = new FakeAdminTarget();
    target.onReload = () => Promise.reject(new Error('boom'));
    const logger = new MemoryLogger();
    const server = await start(target, freshSocket(), { logger });
    await assert.rejects(client(server).reload(), (err: unknown) => {
      assert.ok(err instanceof AgentResponseError);
      assert.equal(err.status, 500);
      assert.match(err.message, /answered 500: boom/u);
      return true;
    });
    assert.deepEqual(logger.messages('error'), ['admin request failed']);

    // A status() that throws: a clean 500 for /v1/status and /v1/events alike, no half-open stream.
    target.status = () => {
      throw new Error('no status yet');
    };
    for (const path of ['/v1/status', '/v1/events']) {
      const r = await raw(server.socketPath, 'GET', path);
      assert.equal(r.status, 500, path);
      assert.deepEqual(JSON.parse(r.body), { error: 'no status yet' });
    }
    assert.equal(target.listeners.size, 0);
  });

  it('streams a status event, then every event in order, and unsubscribes when the client goes', async () => {
    const target = new FakeAdminTarget();
    const server = await start(target);
    const controller = new AbortController();
    const seen: AgentEvent[] = [];
    const reading = (async () => {
      for await (const event of client(server).events(controller.signal)) {
        seen.push(event);
        if (seen.length === 1) {
          // The stream is open and subscribed once the status event arrived.
          for (let i = 1; i <= 3; i++) {
            target.emit({ type: 'log', at: i, level: 'info', message: `m${i}`, fields: {} });
          }
        }
        if (seen.length === 4) controller.abort();
      }
    })();
    await reading;
    assert.equal(seen[0]?.type, 'status');
    assert.deepEqual(
      seen.slice(1).map((e) => (e.type === 'log' ? e.message : e.type)),
      ['m1', 'm2', 'm3'],
    );
    await eventually(() => target.listeners.size === 0, 'the stream to unsubscribe after abort');

    // Leaving the loop early (break) disconnects too.
    for await (const event of client(server).events()) {
      assert.equal(event.type, 'status');
      assert.equal(target.listeners.size, 1);
      break;
    }
    await eventually(() => target.listeners.size === 0, 'the stream to unsubscribe after break');

    // And so does a raw client that just hangs up.
    await new Promise<void>((resolve, reject) => {
      const req = request({ socketPath: server.socketPath, path: '/v1/events', agent: false }, (res) => {
        assert.match(String(res.headers['content-type']), /^application\/x-ndjson/u);
        res.once('data', () => {
          req.destroy();
          resolve();
        });
      });
      req.on('error', () => undefined);
      req.end();
      setTimeout(() => {
        reject(new Error('no data'));
      }, 3000).unref();
    });
    await eventually(() => target.listeners.size === 0, 'the stream to unsubscribe after a hang-up');
  });

  it('keeps streams alive with a periodic status event', async () => {
    const target = new FakeAdminTarget();
    const server = await start(target, freshSocket(), { keepAliveMs: 50 });
    const types: string[] = [];
    for await (const event of client(server).events()) {
      types.push(event.type);
      if (types.length === 3) break;
    }
    assert.deepEqual(types, ['status', 'status', 'status']);
  });

  it('close() ends streams, stops listening and removes the socket file', async () => {
    const target = new FakeAdminTarget();
    const server = await start(target);
    let count = 0;
    const reading = (async () => {
      for await (const event of client(server).events()) {
        assert.equal(event.type, 'status');
        count += 1;
      }
    })();
    await eventually(() => target.listeners.size === 1, 'the stream to subscribe');
    await server.close();
    await reading; // the stream ended normally: no error
    assert.equal(count, 1);
    assert.equal(target.listeners.size, 0);
    await assert.rejects(lstat(server.socketPath), { code: 'ENOENT' });
    await server.close(); // idempotent
  });

  it('replaces a stale socket left by a dead process', async () => {
    const socketPath = freshSocket();
    await startAdminServer({ socketPath, target: new FakeAdminTarget(), logger: new MemoryLogger() }).then((s) =>
      s.close(),
    );
    await leaveStaleSocket(socketPath);
    assert.ok((await lstat(socketPath)).isSocket(), 'the dead process left its socket');
    await assert.rejects(new AdminClient(socketPath, { timeoutMs: 1000 }).status(), (err: unknown) => {
      assert.ok(err instanceof AgentUnreachableError);
      assert.equal(err.reason, 'refused');
      return true;
    });
    const logger = new MemoryLogger();
    const server = await start(new FakeAdminTarget(), socketPath, { logger });
    assert.equal((await client(server).status()).generation, 7);
    assert.equal((await lstat(socketPath)).mode & 0o777, 0o600);
    assert.deepEqual(logger.messages('warn'), ['replacing a stale admin socket left by an agent that is not running']);
  });

  it('refuses a socket another agent serves, and leaves that agent working', async () => {
    const first = await start(new FakeAdminTarget());
    await assert.rejects(
      startAdminServer({ socketPath: first.socketPath, target: new FakeAdminTarget(), logger: new MemoryLogger() }),
      (err: unknown) => {
        assert.ok(err instanceof StartupError);
        assert.equal(
          err.message,
          `another agent is serving ${first.socketPath}: stop it, or give this one another --admin-socket`,
        );
        return true;
      },
    );
    assert.equal((await client(first).status()).generation, 7);
  });

  it('refuses to replace a file that is not a socket', async () => {
    const socketPath = join(dir, 'not-a-socket');
    await writeFile(socketPath, 'data');
    await assert.rejects(
      startAdminServer({ socketPath, target: new FakeAdminTarget(), logger: new MemoryLogger() }),
      /exists and is not a socket/u,
    );
    assert.ok((await lstat(socketPath)).isFile(), 'the file is left alone');
  });

  it('client: a missing socket is unreachable, a silent agent times out', async () => {
    const missing = join(dir, 'nothing-here.sock');
    await assert.rejects(new AdminClient(missing, { timeoutMs: 1000 }).reload(), (err: unknown) => {
      assert.ok(err instanceof AgentUnreachableError);
      assert.equal(err.reason, 'missing');
      assert.equal(err.exitCode, 2);
      assert.match(
        err.message,
        /^no agent reachable at .*nothing-here\.sock: the socket does not exist; is `provisioner run` running on this node\?/u,
      );
      return true;
    });
    const target = new FakeAdminTarget();
    target.onReload = () => new Promise(() => undefined);
    const server = await start(target);
    const started = Date.now();
    await assert.rejects(client(server, 150).reload(), (err: unknown) => {
      assert.ok(err instanceof AgentTimeoutError);
      assert.equal(err.exitCode, 3);
      assert.match(err.message, /did not answer the reload request .* within 150ms/u);
      return true;
    });
    assert.ok(Date.now() - started < 2000);
  });
});
