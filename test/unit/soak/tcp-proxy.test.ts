// The test harness' TCP proxy (test/support/tcp-proxy.ts) in its fault modes, against an echo
// server on loopback: bytes pass; slowed, each chunk comes after the delay; black-holed, none
// passes, and a connection it swallowed bytes of stays dead after it while new ones pass again.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';

import { waitFor } from '../../support/eventually.js';
import { TcpProxy } from '../../support/tcp-proxy.js';

let echo: Server;
let proxy: TcpProxy;
/** Bytes the echo server got. */
let received = 0;

/** Connects through the proxy; resolves with the socket and a reader of the next data (or its end). */
async function client(): Promise<{ socket: Socket; next: (ms: number) => Promise<string> }> {
  const socket = connect(proxy.port, '127.0.0.1');
  socket.on('error', () => undefined);
  await once(socket, 'connect');
  const next = (ms: number): Promise<string> =>
    new Promise((resolve) => {
      const timer = setTimeout(() => {
        resolve('timeout');
      }, ms);
      socket.once('data', (d: Buffer) => {
        clearTimeout(timer);
        resolve(d.toString());
      });
      socket.once('close', () => {
        clearTimeout(timer);
        resolve('closed');
      });
    });
  return { socket, next };
}

describe('the TCP proxy of the tests, in its fault modes', () => {
  before(async () => {
    echo = createServer((s) => {
      s.on('error', () => undefined);
      s.on('data', (d: Buffer) => (received += d.length));
      s.pipe(s);
    });
    echo.listen(0, '127.0.0.1');
    await once(echo, 'listening');
    const address = echo.address();
    assert.ok(address !== null && typeof address === 'object');
    proxy = await TcpProxy.start(`https://127.0.0.1:${String(address.port)}`);
  });
  after(async () => {
    await proxy.close();
    echo.close();
  });

  it('passes bytes both ways', async () => {
    const c = await client();
    c.socket.write('hello');
    assert.equal(await c.next(5000), 'hello');
    c.socket.destroy();
  });

  it('slowed: a chunk comes back only after the delay each way', async () => {
    proxy.setMode({ kind: 'slow', delayMs: 150 });
    try {
      const c = await client();
      const t0 = performance.now();
      c.socket.write('slow');
      assert.equal(await c.next(5000), 'slow');
      // two hops (to the server and back), each held 150 ms
      assert.ok(performance.now() - t0 >= 290, `came back after ${String(performance.now() - t0)} ms`);
      c.socket.destroy();
    } finally {
      proxy.setMode({ kind: 'pass' });
    }
  });

  it('black-holed: nothing passes; after it the swallowed connection stays silent, and a new one passes', async () => {
    const held = await client();
    proxy.setMode({ kind: 'blackhole' });
    const before = received;
    const dropped = proxy.dropped;
    held.socket.write('lost');
    await waitFor(() => proxy.dropped === dropped + 4, 'the proxy swallowed the 4 bytes');
    assert.equal(received, before, 'nothing reached the server');
    proxy.setMode({ kind: 'pass' });
    held.socket.write('still');
    await waitFor(() => proxy.dropped === dropped + 9, 'the proxy swallowed the next 5 bytes too');
    assert.equal(received, before, 'the swallowed connection stays dead after the black hole');
    held.socket.destroy();
    const fresh = await client();
    fresh.socket.write('again');
    assert.equal(await fresh.next(5000), 'again');
    fresh.socket.destroy();
  });
});
