// A loopback TCP proxy in front of the apiserver that a test can cut (every connection reset,
// nothing accepted) and restore on the same port: an apiserver outage or restart as the agent
// sees it, without touching the control plane the other tests share. It can also black-hole the
// apiserver (connections accepted, no byte passes: requests and watches hang, as behind a dropped
// route; those connections stay dead after it) or slow it (every chunk held for a delay). TLS
// passes through.
import { connect, createServer, type Server, type Socket } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';

/** How bytes pass: as they come, held for a delay each, or not at all. */
export type ProxyMode =
  { readonly kind: 'pass' } | { readonly kind: 'slow'; readonly delayMs: number } | { readonly kind: 'blackhole' };

export class TcpProxy {
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  private mode: ProxyMode = { kind: 'pass' };
  /** Connections that had a byte swallowed by a black hole: silent for good. */
  private readonly held = new Set<Socket>();
  /** Bytes a black hole swallowed (so a test can wait for one to have happened). */
  dropped = 0;

  private constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
    private portNumber: number,
    private readonly listenHost: string,
  ) {}

  /**
   * Listens on `listenHost` (default 127.0.0.1; a free port) and forwards every connection to
   * `target` (host:port of a URL).
   */
  static async start(target: string, listenHost = '127.0.0.1'): Promise<TcpProxy> {
    const url = new URL(target);
    const proxy = new TcpProxy(url.hostname, Number(url.port), 0, listenHost);
    await proxy.listen();
    return proxy;
  }

  get port(): number {
    return this.portNumber;
  }

  /** `https://<listen host>:<port>`: the server URL to give the client. */
  get url(): string {
    return `https://${this.listenHost}:${String(this.portNumber)}`;
  }

  private listen(): Promise<void> {
    const server = createServer((client) => {
      const upstream = connect(this.targetPort, this.targetHost);
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on('close', () => this.sockets.delete(s));
        s.on('error', () => {
          client.destroy();
          upstream.destroy();
        });
      }
      this.forward(client, upstream);
      this.forward(upstream, client);
    });
    this.server = server;
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host: this.listenHost, port: this.portNumber }, () => {
        const address = server.address();
        if (address !== null && typeof address === 'object') this.portNumber = address.port;
        resolve();
      });
    });
  }

  /** Copies `from` to `to` in order, through the mode at the time each chunk arrives. */
  private forward(from: Socket, to: Socket): void {
    let queue: Promise<void> = Promise.resolve();
    from.on('data', (chunk: Buffer) => {
      const mode = this.mode;
      if (mode.kind === 'blackhole' || this.held.has(from) || this.held.has(to)) {
        this.held.add(from);
        this.dropped += chunk.length;
        return;
      }
      queue = queue.then(async () => {
        if (mode.kind === 'slow') await delay(mode.delayMs);
        if (!to.destroyed) to.write(chunk);
      });
    });
    from.on('end', () => {
      void queue.then(() => to.end());
    });
  }

  /**
   * From now on, bytes pass as `mode` says. A connection a black hole swallowed bytes of stays
   * silent after it (as behind a NAT or conntrack entry that was lost): only new connections pass,
   * so a client must notice a dead connection by itself.
   */
  setMode(mode: ProxyMode): void {
    this.mode = mode;
  }

  /** Resets every open connection and stops accepting: connections are refused until restore(). */
  async cut(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    for (const s of this.sockets) s.resetAndDestroy();
    this.sockets.clear();
    if (server !== undefined)
      await new Promise<void>((resolve) => {
        server.close(() => {
          resolve();
        });
      });
  }

  /** Accepts connections again, on the same port. */
  async restore(): Promise<void> {
    if (this.server === undefined) await this.listen();
  }

  async close(): Promise<void> {
    await this.cut();
  }
}
