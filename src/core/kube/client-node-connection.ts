// The parts of a kubeconfig that @kubernetes/client-node handles for us: OIDC (`auth-provider:
// oidc`, with the refresh-token grant against the issuer) and `proxy-url` (HTTP CONNECT and SOCKS
// agents). Loaded only by loadKubeconfig when a kubeconfig uses one of them: client-node's
// KubeConfig module costs ~33 MiB of RSS and ~250 ms to load (docs/architecture.md), which the
// agent and the common token / certificate / exec kubeconfigs do not pay. RestCluster stays the
// client; this only supplies its Authorization header and, for a proxy, its agent.
import { Agent as HttpAgent } from 'node:http';
import type { RequestOptions } from 'node:https';
import { KubeConfig } from '@kubernetes/client-node/dist/config.js';
import type { CredentialSource, RequestCredentials } from './exec-credential.js';
import { KubeconfigError } from './kubeconfig-error.js';
import { errorMessage, isRecord } from '../unknown-values.js';

export interface ClientNodeInput {
  readonly server: string;
  readonly ca?: string;
  readonly insecureSkipTLSVerify?: boolean;
  readonly tlsServerName?: string;
  readonly proxyUrl?: string;
  readonly clientCert?: string;
  readonly clientKey?: string;
  /** The user's `auth-provider` stanza (only `oidc` gets here). */
  readonly authProvider?: { readonly name: string; readonly config: Record<string, unknown> };
  /** `kubeconfig FILE: user "NAME"`, for messages. */
  readonly where: string;
  /** Bound on one token refresh (an issuer that never answers). */
  readonly timeoutMs: number;
}

export interface ClientNodeConnection {
  /** The proxy agent, when the cluster has a proxy-url. */
  readonly agent?: HttpAgent;
  /** The auth-provider's bearer token, when the user has one. */
  readonly credentials?: CredentialSource;
}

const b64 = (text: string | undefined): string | undefined =>
  text === undefined ? undefined : Buffer.from(text).toString('base64');

async function bounded<T>(work: Promise<T>, timeoutMs: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      reject(new KubeconfigError(`${what}: no answer within ${String(timeoutMs / 1000)} s`));
    }, timeoutMs);
  });
  try {
    return await Promise.race([work, timeout]);
  } catch (error) {
    if (error instanceof KubeconfigError) throw error;
    throw new KubeconfigError(`${what}: ${errorMessage(error)}`, { cause: error });
  } finally {
    clearTimeout(timer);
  }
}

function bearer(options: RequestOptions): string | undefined {
  const headers: unknown = options.headers;
  if (!isRecord(headers)) return undefined;
  const value = headers['Authorization'];
  return typeof value === 'string' && value.startsWith('Bearer ') ? value.slice('Bearer '.length) : undefined;
}

export async function clientNodeConnection(input: ClientNodeInput): Promise<ClientNodeConnection> {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [
      {
        name: 'cluster',
        server: input.server,
        caData: b64(input.ca),
        skipTLSVerify: input.insecureSkipTLSVerify === true,
        tlsServerName: input.tlsServerName,
        proxyUrl: input.proxyUrl,
      },
    ],
    users: [
      {
        name: 'user',
        certData: b64(input.clientCert),
        keyData: b64(input.clientKey),
        // client-node mutates the config in place when it refreshes a token: give it a copy.
        authProvider:
          input.authProvider === undefined
            ? undefined
            : { name: input.authProvider.name, config: { ...input.authProvider.config } },
      },
    ],
    contexts: [{ name: 'context', cluster: 'cluster', user: 'user' }],
    currentContext: 'context',
  });
  const what =
    input.authProvider === undefined
      ? `${input.where}: proxy-url`
      : `${input.where}: auth-provider ${input.authProvider.name}`;
  const first: RequestOptions = {};
  await bounded(kc.applyToHTTPSOptions(first), input.timeoutMs, what);
  const agent = input.proxyUrl !== undefined && first.agent instanceof HttpAgent ? first.agent : undefined;
  if (input.authProvider === undefined) return agent === undefined ? {} : { agent };
  let latest = bearer(first);
  if (latest === undefined) throw new KubeconfigError(`${what}: gave no token (is id-token set?)`);
  const credentials: CredentialSource = {
    get: async (): Promise<RequestCredentials> => {
      const options: RequestOptions = {};
      await bounded(kc.applyToHTTPSOptions(options), input.timeoutMs, what);
      latest = bearer(options) ?? latest;
      return latest === undefined ? {} : { token: latest };
    },
    // client-node refreshes on the id-token's own expiry; a 401 before it has nothing to redo.
    invalidate: () => undefined,
  };
  return { ...(agent === undefined ? {} : { agent }), credentials };
}
