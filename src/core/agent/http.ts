// The process-level HTTP server: metrics, liveness and readiness. Created once per process and
// never re-registered per generation (upstream's /ready re-registration panics on reload).
import type { AddressInfo } from 'node:net';
import { createServer } from '../node-http.js';

export interface ProbeResult {
  readonly ok: boolean;
  readonly reason: string;
}

export interface HttpServerOptions {
  /** Go-style listen address: `:8080`, `127.0.0.1:8080`, `[::1]:0`. */
  readonly listenAddress: string;
  readonly metricsPath: string;
  readonly metrics: () => string;
  readonly ready: () => ProbeResult;
  readonly live: () => ProbeResult;
}

export interface RunningHttpServer {
  readonly port: number;
  readonly host: string;
  close(): Promise<void>;
}

export function parseListenAddress(address: string): { host: string | undefined; port: number } {
  const m = /^(?:\[([^\]]*)\]|([^:]*)):(\d+)$/u.exec(address);
  if (!m) throw new RangeError(`invalid listen address "${address}": expected [host]:port such as :8080`);
  const host = m[1] ?? m[2] ?? '';
  const port = Number(m[3]);
  if (port > 65535) throw new RangeError(`invalid listen address "${address}": port ${m[3] ?? ''} is above 65535`);
  return { host: host === '' ? undefined : host, port };
}

export async function startHttpServer(options: HttpServerOptions): Promise<RunningHttpServer> {
  const { host, port } = parseListenAddress(options.listenAddress);
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const probe = (r: ProbeResult): void => {
      res.writeHead(r.ok ? 200 : 503, { 'content-type': 'text/plain; charset=utf-8' });
      res.end(r.ok ? 'ok' : `not ready: ${r.reason}`);
    };
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405).end();
    } else if (path === options.metricsPath) {
      res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' });
      res.end(options.metrics());
    } else if (path === '/healthz' || path === '/livez') {
      probe(options.live());
    } else if (path === '/ready' || path === '/readyz' || path === '/ready/DiscovererReadyzCheck') {
      probe(options.ready());
    } else {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
    }
  });
  server.keepAliveTimeout = 5000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  return {
    port: address.port,
    host: address.address,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => {
          resolve();
        });
        server.closeAllConnections();
      }),
  };
}
