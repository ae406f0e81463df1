// A loopback TCP proxy in front of the apiserver that a test can cut (every connection reset,
// nothing accepted) and restore on the same port: an apiserver outage or restart as the agent
// sees it, without touching the control plane the other tests share. TLS passes through.
import { connect, createServer, type Server, type Socket } from 'node:net';

export class TcpProxy {
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();

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
      client.pipe(upstream);
      upstream.pipe(client);
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
