import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseListenAddress, startHttpServer } from '../../../src/core/agent/http.js';

describe('agent HTTP server', () => {
  it('parses Go-style listen addresses', () => {
    assert.deepEqual(parseListenAddress(':8080'), { host: undefined, port: 8080 });
    assert.deepEqual(parseListenAddress('127.0.0.1:0'), { host: '127.0.0.1', port: 0 });
    assert.deepEqual(parseListenAddress('[::1]:9000'), { host: '::1', port: 9000 });
    assert.throws(() => parseListenAddress('8080'), /invalid listen address/u);
  });

  it('serves metrics, liveness and readiness (with upstream paths)', async () => {
    let ready = false;
    const server = await startHttpServer({
      listenAddress: '127.0.0.1:0',
      metricsPath: '/custom-metrics',
      metrics: () => 'm 1\n',
      live: () => ({ ok: true, reason: '' }),
      ready: () => ({ ok: ready, reason: 'first discovery pass not done' }),
    });
    try {
      const get = async (path: string): Promise<[number, string]> => {
        const r = await fetch(`http://127.0.0.1:${server.port}${path}`);
        return [r.status, await r.text()];
      };
      assert.deepEqual(await get('/custom-metrics'), [200, 'm 1\n']);
      assert.deepEqual(await get('/healthz'), [200, 'ok']);
      assert.deepEqual(await get('/ready'), [503, 'not ready: first discovery pass not done']);
      ready = true;
      assert.deepEqual(await get('/ready'), [200, 'ok']);
      assert.deepEqual(await get('/ready/DiscovererReadyzCheck'), [200, 'ok']);
      assert.equal((await get('/metrics'))[0], 404);
    } finally {
      await server.close();
    }
  });
});
