/**
 * RestCluster and kubeconfig loading without an apiserver: kubeconfig files in a temp dir, the rate
 * limiter on a ManualClock, and the HTTP side against a small local server that answers like the
 * apiserver does (Status bodies, newline-delimited watch streams, ERROR events, Retry-After).
 */
import assert from 'node:assert/strict';
import { getEventListeners } from 'node:events';
import { execFileSync } from 'node:child_process';
import { mkdtemp, rm, symlink, writeFile, mkdir } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createNetServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createGzip, gzipSync } from 'node:zlib';

import { ManualClock } from '../../../src/core/clock.js';
import { KubeApiError } from '../../../src/core/kube/cluster.js';
import {
  KubeconfigError,
  MAX_CREDENTIAL_FILE_BYTES,
  inClusterSettings,
  loadKubeconfig,
  readCredentialFile,
} from '../../../src/core/kube/kubeconfig.js';
import { RestCluster, TokenBucket, statusToError } from '../../../src/core/kube/rest-cluster.js';

/** Polls until check holds (the fake server's side of a test). */
async function waitUntil(check: () => boolean): Promise<void> {
  while (!check()) await new Promise((resolve) => setTimeout(resolve, 5));
}

const CA = '-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n';
const CERT = '-----BEGIN CERTIFICATE-----\nMIIBcert\n-----END CERTIFICATE-----\n';
const KEY = '-----BEGIN PRIVATE KEY-----\nMIIBkey\n-----END PRIVATE KEY-----\n';
const b64 = (text: string): string => Buffer.from(text).toString('base64');

function rejectsKubeconfig(promise: Promise<unknown>, pattern: RegExp): Promise<void> {
  return assert.rejects(promise, (error: unknown) => {
    assert.ok(error instanceof KubeconfigError, String(error));
    assert.match(error.message, pattern);
    return true;
  });
}

void describe('loadKubeconfig', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'lvp-kubeconfig-'));
    await mkdir(join(dir, 'certs'));
    await writeFile(join(dir, 'certs', 'ca.crt'), CA);
    await writeFile(join(dir, 'certs', 'client.crt'), CERT);
    await writeFile(join(dir, 'certs', 'client.key'), KEY);
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  async function config(name: string, text: string): Promise<string> {
    const path = join(dir, name);
    await writeFile(path, text);
    return path;
  }

  void it('reads a token user and inline -data fields of the current context', async () => {
    const path = await config(
      'token.yaml',
      `apiVersion: v1
kind: Config
current-context: dev
clusters:
  - name: c1
    cluster:
      server: https://10.0.0.1:6443
      certificate-authority-data: ${b64(CA)}
      tls-server-name: kubernetes
users:
  - name: u1
    user:
      token: abc123
contexts:
  - name: dev
    context: { cluster: c1, user: u1, namespace: storage }
  - name: other
    context: { cluster: c1 }
`,
    );
    assert.deepEqual(await loadKubeconfig(path), {
      server: 'https://10.0.0.1:6443',
      source: path,
      ca: CA,
      token: 'abc123',
      tlsServerName: 'kubernetes',
      namespace: 'storage',
      user: 'u1',
    });
    const other = await loadKubeconfig(path, { context: 'other' });
    assert.equal(other.token, undefined);
    assert.equal(other.namespace, undefined);
    assert.equal(other.user, undefined, 'a context without a user');
  });

  void it('resolves relative certificate, key and tokenFile paths against the kubeconfig directory', async () => {
    const path = await config(
      'files.yaml',
      `current-context: ctx
clusters:
  - name: c
    cluster: { server: "https://api.example:443", certificate-authority: certs/ca.crt }
users:
  - name: u
    user: { client-certificate: certs/client.crt, client-key: ./certs/client.key, tokenFile: certs/token }
contexts:
  - name: ctx
    context: { cluster: c, user: u }
`,
    );
    const settings = await loadKubeconfig(path);
    assert.equal(settings.ca, CA);
    assert.equal(settings.clientCert, CERT);
    assert.equal(settings.clientKey, KEY);
    assert.equal(settings.tokenFile, join(dir, 'certs', 'token'));
  });

  void it('reads client-certificate-data and client-key-data, and insecure-skip-tls-verify', async () => {
    const path = await config(
      'data.yaml',
      `current-context: ctx
clusters:
  - { name: c, cluster: { server: "https://h:1", insecure-skip-tls-verify: true } }
users:
  - { name: u, user: { client-certificate-data: ${b64(CERT)}, client-key-data: ${b64(KEY)} } }
contexts:
  - { name: ctx, context: { cluster: c, user: u } }
`,
    );
    const settings = await loadKubeconfig(path);
    assert.equal(settings.clientCert, CERT);
    assert.equal(settings.clientKey, KEY);
    assert.equal(settings.insecureSkipTLSVerify, true);
    assert.equal(settings.ca, undefined);
  });

  void it('merges a KUBECONFIG list: the first file defining a name wins', async () => {
    const first = await config(
      'first.yaml',
      `current-context: ctx
users:
  - { name: u, user: { token: first } }
`,
    );
    const second = await config(
      'second.yaml',
      `current-context: ignored
clusters:
  - { name: c, cluster: { server: "https://merged:6443" } }
users:
  - { name: u, user: { token: second } }
contexts:
  - { name: ctx, context: { cluster: c, user: u } }
`,
    );
    const settings = await loadKubeconfig([first, join(dir, 'missing.yaml'), second]);
    assert.equal(settings.server, 'https://merged:6443');
    assert.equal(settings.token, 'first');
  });

  void it('fails clearly: no current-context, unknown context/cluster/user, bad exec, auth-provider, missing file', async () => {
    const noCurrent = await config('nocurrent.yaml', 'clusters: []\n');
    await rejectsKubeconfig(loadKubeconfig(noCurrent), /has no current-context/);
    const base = `clusters:
  - { name: c, cluster: { server: "https://h:1" } }
contexts:
  - { name: ctx, context: { cluster: c, user: u } }
  - { name: nocluster, context: { cluster: gone } }
current-context: ctx
`;
    const missingUser = await config('missinguser.yaml', base);
    await rejectsKubeconfig(loadKubeconfig(missingUser), /user "u" not found/);
    await rejectsKubeconfig(loadKubeconfig(missingUser, { context: 'nope' }), /context "nope" not found/);
    await rejectsKubeconfig(loadKubeconfig(missingUser, { context: 'nocluster' }), /cluster "gone" not found/);
    // Exec plugins are supported (they used to be refused here); a malformed stanza is named.
    const exec = await config(
      'exec.yaml',
      `${base}users:\n  - { name: u, user: { exec: { command: aws, args: [eks, get-token], apiVersion: client.authentication.k8s.io/v1 } } }\n`,
    );
    assert.ok((await loadKubeconfig(exec)).credentials !== undefined);
    const badExec = await config(
      'badexec.yaml',
      `${base}users:\n  - { name: u, user: { exec: { command: aws, args: eks, apiVersion: client.authentication.k8s.io/v1 } } }\n`,
    );
    await rejectsKubeconfig(loadKubeconfig(badExec), /badexec\.yaml: user "u": exec\.args must be a list of strings/);
    // gcp and azure were removed from client-go (1.26): the message names the exec plugin to use.
    const provider = await config(
      'provider.yaml',
      `${base}users:\n  - { name: u, user: { auth-provider: { name: gcp } } }\n`,
    );
    await rejectsKubeconfig(loadKubeconfig(provider), /auth-provider "gcp" was removed .*gke-gcloud-auth-plugin/);
    const unknownProvider = await config(
      'unknownprovider.yaml',
      `${base}users:\n  - { name: u, user: { auth-provider: { name: keystone } } }\n`,
    );
    await rejectsKubeconfig(
      loadKubeconfig(unknownProvider),
      /auth-provider "keystone" is not supported \(only "oidc"\)/,
    );
    const halfCert = await config(
      'half.yaml',
      `${base}users:\n  - { name: u, user: { client-certificate-data: ${b64(CERT)} } }\n`,
    );
    await rejectsKubeconfig(loadKubeconfig(halfCert), /both a client certificate and a client key/);
    const badCaFile = await config(
      'badca.yaml',
      base.replace('server: "https://h:1"', 'server: "https://h:1", certificate-authority: nowhere/ca.crt') +
        'users:\n  - { name: u, user: { token: t } }\n',
    );
    await rejectsKubeconfig(loadKubeconfig(badCaFile), /cannot read certificate-authority .*nowhere\/ca\.crt/);
    await rejectsKubeconfig(loadKubeconfig(join(dir, 'absent.yaml')), /cannot read kubeconfig/);
    const notYaml = await config('notyaml.yaml', 'a: [unclosed\n');
    await rejectsKubeconfig(loadKubeconfig(notYaml), /not valid YAML/);
  });

  void it('reads impersonation (as, as-uid, as-groups, as-user-extra) and refuses groups without a user', async () => {
    const base = `current-context: ctx
clusters: [{ name: c, cluster: { server: "https://h:1" } }]
contexts: [{ name: ctx, context: { cluster: c, user: u } }]
`;
    const path = await config(
      'impersonate.yaml',
      `${base}users:\n  - name: u\n    user: { token: t, as: jane, as-uid: "42", as-groups: [ops, dev], as-user-extra: { scopes: [view] } }\n`,
    );
    assert.deepEqual((await loadKubeconfig(path)).impersonate, {
      user: 'jane',
      uid: '42',
      groups: ['ops', 'dev'],
      extra: { scopes: ['view'] },
    });
    assert.equal((await loadKubeconfig(path)).user, 'jane', 'the user acted as names who asked');
    const groupsOnly = await config(
      'groups-only.yaml',
      `${base}users:\n  - { name: u, user: { token: t, as-groups: [ops] } }\n`,
    );
    await rejectsKubeconfig(
      loadKubeconfig(groupsOnly),
      /groups-only\.yaml: user "u": as-uid, as-groups and as-user-extra need "as"/,
    );
  });

  void it('reads only regular files of bounded size: a FIFO, /dev/zero or a huge file is an error, at once', async () => {
    const fifo = join(dir, 'fifo-kubeconfig');
    execFileSync('mkfifo', [fifo]);
    await rejectsKubeconfig(loadKubeconfig(fifo), /cannot read kubeconfig .*fifo-kubeconfig: not a regular file/u);
    const zero = join(dir, 'zero-kubeconfig');
    await symlink('/dev/zero', zero);
    await rejectsKubeconfig(loadKubeconfig(zero), /zero-kubeconfig: not a regular file/u);
    const huge = join(dir, 'huge-kubeconfig');
    await writeFile(huge, Buffer.alloc(MAX_CREDENTIAL_FILE_BYTES + 1, 0x61));
    await rejectsKubeconfig(loadKubeconfig(huge), /huge-kubeconfig: larger than 4 MiB/u);
    const tokenFifo = join(dir, 'token-fifo');
    execFileSync('mkfifo', [tokenFifo]);
    const path = await config(
      'fifo-token.yaml',
      `apiVersion: v1
kind: Config
current-context: dev
clusters: [{ name: c1, cluster: { server: "https://10.0.0.1:6443" } }]
users: [{ name: u1, user: { tokenFile: token-fifo } }]
contexts: [{ name: dev, context: { cluster: c1, user: u1 } }]
`,
    );
    const settings = await loadKubeconfig(path);
    assert.equal(settings.tokenFile, tokenFifo);
    await assert.rejects(readCredentialFile(tokenFifo), /not a regular file/u);
  });
});

void describe('inClusterSettings', () => {
  void it('uses the service host and port, the mounted CA and the token file', async () => {
    const files: Record<string, string> = {
      '/sa/token': 'tok',
      '/sa/ca.crt': CA,
      '/sa/namespace': 'kube-system\n',
    };
    const readFile = (path: string): Promise<string> => {
      const text = files[path];
      return text === undefined ? Promise.reject(new Error(`ENOENT ${path}`)) : Promise.resolve(text);
    };
    assert.deepEqual(await inClusterSettings({ host: '10.96.0.1', port: '443', serviceAccountDir: '/sa', readFile }), {
      server: 'https://10.96.0.1:443',
      ca: CA,
      tokenFile: '/sa/token',
      source: 'in-cluster',
      namespace: 'kube-system',
    });
    const v6 = await inClusterSettings({ host: 'fd00::1', port: '443', serviceAccountDir: '/sa', readFile });
    assert.equal(v6.server, 'https://[fd00::1]:443');
    await rejectsKubeconfig(inClusterSettings({ host: undefined, port: '443', readFile }), /not running in a cluster/);
    await rejectsKubeconfig(
      inClusterSettings({ host: 'h', port: '1', serviceAccountDir: '/nowhere', readFile }),
      /service account files missing in \/nowhere/,
    );
  });
});

void describe('TokenBucket', () => {
  void it('allows a burst, then qps per second, in order, on the injected clock', async () => {
    const clock = new ManualClock(0);
    const bucket = new TokenBucket(10, 3, clock);
    const done: number[] = [];
    const take = (i: number): Promise<void> => bucket.take().then(() => void done.push(i));
    await Promise.all([take(1), take(2), take(3)]);
    assert.deepEqual(done, [1, 2, 3]);
    const waiting = [take(4), take(5)];
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(done, [1, 2, 3]);
    await clock.advance(99);
    assert.deepEqual(done, [1, 2, 3]);
    await clock.advance(1);
    assert.deepEqual(done, [1, 2, 3, 4]);
    await clock.advance(100);
    await Promise.all(waiting);
    assert.deepEqual(done, [1, 2, 3, 4, 5]);
    // An idle second refills up to the burst, not beyond.
    await clock.advance(10_000);
    assert.equal(bucket.available, 3);
  });

  void it('returns the token of an aborted wait and rejects with the abort reason', async () => {
    const clock = new ManualClock(0);
    const bucket = new TokenBucket(1, 1, clock);
    await bucket.take();
    const controller = new AbortController();
    const waiting = bucket.take(controller.signal);
    controller.abort(new Error('stop'));
    await assert.rejects(waiting, /stop/);
    assert.equal(bucket.available, 0);
    assert.equal(clock.pendingSleepers, 0);
  });

  void it('does not limit with qps 0', async () => {
    const bucket = new TokenBucket(0, 0, new ManualClock(0));
    for (let i = 0; i < 1000; i++) await bucket.take();
  });
});

void describe('statusToError', () => {
  void it('maps Status bodies and plain error bodies to KubeApiError', () => {
    const conflict = statusToError(
      409,
      JSON.stringify({ kind: 'Status', code: 409, reason: 'Conflict', message: 'stale' }),
    );
    assert.deepEqual([conflict.status, conflict.reason, conflict.message], [409, 'Conflict', 'stale']);
    const noReason = statusToError(500, { kind: 'Status', code: 500, message: 'resourceVersion should not be set' });
    assert.deepEqual([noReason.status, noReason.reason], [500, 'InternalError']);
    const plain = statusToError(401, 'Unauthorized\n');
    assert.deepEqual([plain.status, plain.reason, plain.message], [401, 'Unauthorized', 'Unauthorized']);
    const empty = statusToError(418, '');
    assert.deepEqual([empty.status, empty.reason, empty.message], [418, 'Unknown', 'HTTP 418']);
  });
});

interface Seen {
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingMessage['headers'];
  readonly body: string;
}

void describe('RestCluster TLS material', () => {
  void it('a client key pair OpenSSL refuses does not stop the client being made: each request fails with its error', async () => {
    // Made once for every connection now; what OpenSSL refuses stays per connection, as before.
    const sink = createNetServer((socket) => socket.destroy());
    await new Promise<void>((resolve) => sink.listen(0, '127.0.0.1', resolve));
    const address = sink.address();
    assert.ok(address !== null && typeof address === 'object');
    const cluster = new RestCluster({
      connection: {
        server: `https://127.0.0.1:${String(address.port)}`,
        clientCert: CERT,
        clientKey: KEY,
        source: 'test',
      },
      maxRetries: 0,
    });
    try {
      for (let i = 0; i < 2; i++) {
        await assert.rejects(cluster.nodes.get('n'), (error: unknown) => {
          assert.match((error as NodeJS.ErrnoException).code ?? '', /^ERR_OSSL_/u, String(error));
          return true;
        });
      }
    } finally {
      cluster.close();
      await new Promise((resolve) => sink.close(resolve));
    }
  });
});

void describe('RestCluster over HTTP (local fake server)', () => {
  let server: Server;
  let base: string;
  const seen: Seen[] = [];
  let handler: (req: IncomingMessage, body: string, res: ServerResponse) => void = (_req, _body, res) => {
    res.end();
  };

  before(async () => {
    server = createServer((req, res) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (chunk: string) => (body += chunk));
      req.on('end', () => {
        seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
        handler(req, body, res);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    assert.ok(address !== null && typeof address === 'object');
    base = `http://127.0.0.1:${address.port}`;
  });

  after(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  function json(res: ServerResponse, status: number, body: unknown): void {
    res.writeHead(status, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify(body));
  }

  function cluster(extra: Partial<ConstructorParameters<typeof RestCluster>[0]> = {}): RestCluster {
    return new RestCluster({
      connection: { server: base, token: 'tkn', source: 'test' },
      userAgent: 'lvp-test/1',
      ...extra,
    });
  }

  void it("sends Impersonate-* headers and a credential source's token; a 401 gets a fresh one, once", async () => {
    seen.length = 0;
    let runs = 0;
    let invalidated = 0;
    handler = (req, _body, res) => {
      if (req.headers.authorization === 'Bearer plugin-1') json(res, 401, { kind: 'Status', code: 401 });
      else json(res, 200, { metadata: { name: 'n1' } });
    };
    const c = new RestCluster({
      connection: {
        server: base,
        source: 'test',
        impersonate: { user: 'jane', uid: '42', groups: ['ops', 'dev'], extra: { 'acme.com/scope': ['a', 'b'] } },
        credentials: {
          get: () => Promise.resolve({ token: `plugin-${String(++runs)}` }),
          invalidate: () => {
            invalidated++;
          },
        },
      },
    });
    try {
      await c.nodes.get('n1');
    } finally {
      c.close();
    }
    assert.deepEqual(
      seen.map((x) => x.headers.authorization),
      ['Bearer plugin-1', 'Bearer plugin-2'],
    );
    assert.equal(invalidated, 1);
    const last = seen[1];
    assert.ok(last);
    assert.equal(last.headers['impersonate-user'], 'jane');
    assert.equal(last.headers['impersonate-uid'], '42');
    assert.equal(last.headers['impersonate-group'], 'ops, dev');
    assert.equal(last.headers['impersonate-extra-acme.com%2fscope'], 'a, b');
  });

  void it('sends the documented paths, query, headers and bodies', async () => {
    seen.length = 0;
    handler = (req, _body, res) => {
      json(
        res,
        200,
        req.method === 'GET' && req.url?.includes('?') === true
          ? { metadata: {}, items: [] }
          : { metadata: { name: 'x' } },
      );
    };
    const c = cluster();
    try {
      await c.persistentVolumes.get('pv-1');
      await c.persistentVolumes.list({ labelSelector: 'a=b', limit: 5, continue: 'tok' });
      await c.storageClasses.create({ metadata: { name: 'sc' }, provisioner: 'p' }, { dryRun: true });
      await c.nodes.update({ metadata: { name: 'n1', resourceVersion: '7' } });
      await c.persistentVolumes.updateStatus({ metadata: { name: 'pv-1' }, spec: {} });
      await c.events.patch('ev', { metadata: { labels: { a: null } } }, { namespace: 'ns1' });
      await c.jobs.delete('job-1', { uid: 'u-1', propagationPolicy: 'Background' });
      await c.events.get('ev');
      await c.jobs.get('j', { namespace: 'kube-system' });
    } finally {
      c.close();
    }
    assert.deepEqual(
      seen.map((s) => `${s.method} ${s.url}`),
      [
        'GET /api/v1/persistentvolumes/pv-1',
        'GET /api/v1/persistentvolumes?labelSelector=a%3Db&limit=5&continue=tok',
        'POST /apis/storage.k8s.io/v1/storageclasses?dryRun=All',
        'PUT /api/v1/nodes/n1',
        'PUT /api/v1/persistentvolumes/pv-1/status',
        'PATCH /api/v1/namespaces/ns1/events/ev',
        'DELETE /apis/batch/v1/namespaces/default/jobs/job-1',
        'GET /api/v1/namespaces/default/events/ev',
        'GET /apis/batch/v1/namespaces/kube-system/jobs/j',
      ],
    );
    for (const s of seen) {
      assert.equal(s.headers.authorization, 'Bearer tkn');
      assert.equal(s.headers['user-agent'], 'lvp-test/1');
      assert.equal(s.headers.accept, 'application/json');
      assert.equal(s.headers['accept-encoding'], 'gzip');
      assert.equal(s.headers['content-length'], String(Buffer.byteLength(s.body)), `${s.method} ${s.url} is framed`);
    }
    const at = (i: number): Seen => {
      const request = seen[i];
      assert.ok(request);
      return request;
    };
    const [create, update, patch, del] = [at(2), at(3), at(5), at(6)];
    assert.deepEqual(JSON.parse(create.body), {
      apiVersion: 'storage.k8s.io/v1',
      kind: 'StorageClass',
      metadata: { name: 'sc' },
      provisioner: 'p',
    });
    assert.equal(create.headers['content-type'], 'application/json');
    assert.equal((JSON.parse(update.body) as { kind: string }).kind, 'Node');
    assert.equal(patch.headers['content-type'], 'application/merge-patch+json');
    assert.deepEqual(JSON.parse(patch.body), { metadata: { labels: { a: null } } });
    assert.deepEqual(JSON.parse(del.body), {
      apiVersion: 'v1',
      kind: 'DeleteOptions',
      preconditions: { uid: 'u-1' },
      propagationPolicy: 'Background',
    });
  });

  void it('names its field manager on every create, update and patch (and only there)', async () => {
    seen.length = 0;
    handler = (req, _body, res) => {
      json(res, 200, req.method === 'GET' && req.url?.includes('?') === true ? { metadata: {}, items: [] } : {});
    };
    const c = cluster({ fieldManager: 'lvp-test/1' });
    try {
      await c.persistentVolumes.create({ metadata: { name: 'pv-1' }, spec: {} });
      await c.storageClasses.create({ metadata: { name: 'sc' }, provisioner: 'p' }, { dryRun: true });
      await c.nodes.update({ metadata: { name: 'n1' } });
      await c.persistentVolumes.updateStatus({ metadata: { name: 'pv-1' }, spec: {} });
      await c.persistentVolumes.patch('pv-1', { metadata: { labels: { a: 'b' } } });
      await c.jobs.delete('job-1');
      await c.persistentVolumes.get('pv-1');
      await c.persistentVolumes.list({ limit: 1 });
    } finally {
      c.close();
    }
    assert.deepEqual(
      seen.map((s) => `${s.method} ${s.url}`),
      [
        'POST /api/v1/persistentvolumes?fieldManager=lvp-test%2F1',
        'POST /apis/storage.k8s.io/v1/storageclasses?dryRun=All&fieldManager=lvp-test%2F1',
        'PUT /api/v1/nodes/n1?fieldManager=lvp-test%2F1',
        'PUT /api/v1/persistentvolumes/pv-1/status?fieldManager=lvp-test%2F1',
        'PATCH /api/v1/persistentvolumes/pv-1?fieldManager=lvp-test%2F1',
        'DELETE /apis/batch/v1/namespaces/default/jobs/job-1',
        'GET /api/v1/persistentvolumes/pv-1',
        'GET /api/v1/persistentvolumes?limit=1',
      ],
    );
  });

  void it('maps error Status bodies to KubeApiError', async () => {
    handler = (_req, _body, res) => {
      json(res, 404, {
        kind: 'Status',
        apiVersion: 'v1',
        status: 'Failure',
        message: 'persistentvolumes "x" not found',
        reason: 'NotFound',
        code: 404,
      });
    };
    const c = cluster();
    try {
      await assert.rejects(c.persistentVolumes.get('x'), (error: unknown) => {
        assert.ok(error instanceof KubeApiError);
        assert.deepEqual(
          [error.status, error.reason, error.message],
          [404, 'NotFound', 'persistentvolumes "x" not found'],
        );
        return true;
      });
    } finally {
      c.close();
    }
  });

  void it('retries 429 after Retry-After on the injected clock', async () => {
    seen.length = 0;
    let calls = 0;
    handler = (_req, _body, res) => {
      calls++;
      if (calls < 3) {
        res.writeHead(429, { 'Retry-After': '2', 'Content-Type': 'application/json' });
        res.end(JSON.stringify({ kind: 'Status', code: 429, reason: 'TooManyRequests', message: 'slow down' }));
      } else {
        json(res, 200, { metadata: { name: 'ok' } });
      }
    };
    const clock = new ManualClock(0);
    const c = cluster({ clock });
    try {
      const result = c.nodes.get('ok');
      for (let i = 0; i < 2; i++) {
        while (clock.pendingSleepers === 0) await new Promise((resolve) => setTimeout(resolve, 5));
        await clock.advance(2_000);
      }
      assert.equal((await result).metadata.name, 'ok');
      assert.equal(calls, 3);
      // Without retries left, the 429 surfaces.
      calls = 0;
      const noRetry = cluster({ clock, maxRetries: 0 });
      try {
        await assert.rejects(
          noRetry.nodes.get('ok'),
          (error: unknown) => error instanceof KubeApiError && error.status === 429,
        );
      } finally {
        noRetry.close();
      }
    } finally {
      c.close();
    }
  });

  void it('streams watch events, bookmarks and the end of the stream', async () => {
    seen.length = 0;
    handler = (_req, _body, res) => {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      const pv = (rv: string) => ({ kind: 'PersistentVolume', metadata: { name: 'a', resourceVersion: rv } });
      // Events split across chunks, and two in one chunk.
      res.write(JSON.stringify({ type: 'ADDED', object: pv('5') }).slice(0, 20));
      setTimeout(() => {
        res.write(`${JSON.stringify({ type: 'ADDED', object: pv('5') }).slice(20)}\n`);
        res.write(
          `${JSON.stringify({ type: 'MODIFIED', object: pv('6') })}\n${JSON.stringify({ type: 'BOOKMARK', object: { kind: 'PersistentVolume', metadata: { resourceVersion: '9' } } })}\n`,
        );
        res.end(JSON.stringify({ type: 'DELETED', object: pv('10') }));
      }, 20);
    };
    const c = cluster();
    const controller = new AbortController();
    try {
      const events: string[] = [];
      for await (const event of c.persistentVolumes.watch({
        resourceVersion: '4',
        labelSelector: 'a=b',
        allowBookmarks: true,
        timeoutSeconds: 30,
        signal: controller.signal,
      })) {
        events.push(
          event.type === 'BOOKMARK'
            ? `BOOKMARK:${event.resourceVersion}`
            : `${event.type}:${event.object.metadata.resourceVersion ?? ''}`,
        );
      }
      assert.deepEqual(events, ['ADDED:5', 'MODIFIED:6', 'BOOKMARK:9', 'DELETED:10']);
      assert.equal(
        seen[0]?.url,
        '/api/v1/persistentvolumes?watch=1&resourceVersion=4&allowWatchBookmarks=true&labelSelector=a%3Db&timeoutSeconds=30',
      );
      assert.equal(getEventListeners(controller.signal, 'abort').length, 0);
    } finally {
      controller.abort();
      c.close();
    }
  });

  void it('turns an ERROR event (410 Expired) and a non-200 watch answer into KubeApiError', async () => {
    handler = (req, _body, res) => {
      if (req.url?.includes('resourceVersion=1&') === true || req.url?.endsWith('resourceVersion=1') === true) {
        res.writeHead(200, { 'Content-Type': 'application/json' });
        res.end(
          `${JSON.stringify({ type: 'ERROR', object: { kind: 'Status', apiVersion: 'v1', status: 'Failure', message: 'The resourceVersion for the provided watch is too old.', reason: 'Expired', code: 410 } })}\n`,
        );
      } else {
        json(res, 403, { kind: 'Status', code: 403, reason: 'Forbidden', message: 'nope' });
      }
    };
    const c = cluster();
    const controller = new AbortController();
    try {
      const drain = async (resourceVersion: string): Promise<void> => {
        for await (const event of c.events.watch({ resourceVersion, signal: controller.signal })) {
          assert.fail(`no event expected, got ${event.type}`);
        }
      };
      await assert.rejects(drain('1'), (error: unknown) => {
        assert.ok(error instanceof KubeApiError);
        assert.deepEqual([error.status, error.reason], [410, 'Expired']);
        return true;
      });
      await assert.rejects(drain('2'), (error: unknown) => error instanceof KubeApiError && error.status === 403);
      assert.equal(getEventListeners(controller.signal, 'abort').length, 0);
    } finally {
      controller.abort();
      c.close();
    }
  });

  void it('fails a watch that goes silent (a dead connection), before and after its headers', async () => {
    // one answers with headers and an event, then nothing; the other never answers at all
    handler = (req, _body, res) => {
      if (req.url?.includes('/nodes') === true) {
        res.writeHead(200, { 'Content-Type': 'application/json' });
        res.write(`${JSON.stringify({ type: 'ADDED', object: { metadata: { name: 'a', resourceVersion: '2' } } })}\n`);
      }
    };
    const c = cluster({ watchIdleTimeoutMs: 150 });
    const controller = new AbortController();
    try {
      const events: string[] = [];
      await assert.rejects(
        (async () => {
          for await (const event of c.nodes.watch({
            resourceVersion: '1',
            allowBookmarks: true,
            signal: controller.signal,
          }))
            events.push(event.type);
        })(),
        /nothing received for 150 ms/,
      );
      assert.deepEqual(events, ['ADDED'], 'the event before the silence came through');
      await assert.rejects(
        (async () => {
          for await (const event of c.persistentVolumes.watch({ resourceVersion: '1', signal: controller.signal }))
            assert.fail(`no event expected, got ${event.type}`);
        })(),
        /nothing received for 150 ms/,
      );
      assert.equal(getEventListeners(controller.signal, 'abort').length, 0);
    } finally {
      controller.abort();
      c.close();
    }
  });

  // The timeout detects a watch left waiting for its own one-minute idle limit (the defect).
  void it(
    'a request with no answer closes every connection: a silent watch starts over at once',
    { timeout: 20_000 },
    async () => {
      let watching = 0;
      handler = (req, _body, res) => {
        if (req.url?.includes('watch=1') === true) {
          watching += 1;
          res.writeHead(200, { 'Content-Type': 'application/json' });
          res.write(
            `${JSON.stringify({ type: 'ADDED', object: { metadata: { name: 'a', resourceVersion: '2' } } })}\n`,
          );
        }
        // a GET gets no answer at all
      };
      // the watch alone would wait a minute: what ends it here is the GET's timeout
      const c = cluster({ requestTimeoutMs: 100, watchIdleTimeoutMs: 60_000 });
      const controller = new AbortController();
      try {
        const events: string[] = [];
        const watched = (async () => {
          for await (const event of c.nodes.watch({ resourceVersion: '1', signal: controller.signal }))
            events.push(event.type);
        })();
        await waitUntil(() => events.length === 1);
        await assert.rejects(c.nodes.get('x'), /nothing received for 100 ms/);
        await assert.rejects(watched);
        assert.deepEqual([events, watching], [['ADDED'], 1]);
      } finally {
        controller.abort();
        c.close();
      }
    },
  );

  void it('ends a watch quietly when the signal aborts mid-stream, releasing the listener', async () => {
    handler = (_req, _body, res) => {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.write(`${JSON.stringify({ type: 'ADDED', object: { metadata: { name: 'a', resourceVersion: '2' } } })}\n`);
      // …and then nothing until the client goes away.
    };
    const c = cluster();
    const controller = new AbortController();
    try {
      const events: string[] = [];
      const iteration = (async () => {
        for await (const event of c.nodes.watch({ resourceVersion: '1', signal: controller.signal }))
          events.push(event.type);
      })();
      while (events.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
      assert.equal(getEventListeners(controller.signal, 'abort').length, 1);
      controller.abort();
      await iteration;
      assert.deepEqual(events, ['ADDED']);
      assert.equal(getEventListeners(controller.signal, 'abort').length, 0);
    } finally {
      c.close();
    }
  });

  void it('decompresses a gzip LIST answer and a gzip error Status', async () => {
    const items = Array.from({ length: 300 }, (_, i) => ({ metadata: { name: `pv-${String(i)}` } }));
    handler = (req, _body, res) => {
      const notFound = req.url?.includes('missing') === true;
      res.writeHead(notFound ? 404 : 200, { 'Content-Type': 'application/json', 'Content-Encoding': 'gzip' });
      res.end(
        gzipSync(
          JSON.stringify(
            notFound
              ? { kind: 'Status', code: 404, reason: 'NotFound', message: 'persistentvolumes "missing" not found' }
              : { metadata: { continue: 'next' }, items },
          ),
        ),
      );
    };
    const c = cluster();
    try {
      const list = await c.persistentVolumes.list({ limit: 300 });
      assert.equal(list.items.length, 300);
      assert.equal(list.items[299]?.metadata.name, 'pv-299');
      assert.equal(list.metadata.continue, 'next');
      await assert.rejects(c.persistentVolumes.get('missing'), (error: unknown) => {
        assert.ok(error instanceof KubeApiError && error.status === 404, String(error));
        assert.match(error.message, /"missing" not found/);
        return true;
      });
    } finally {
      c.close();
    }
  });

  void it('decodes a LIST body whose multi-byte characters are split between chunks', async () => {
    // The body is decoded chunk by chunk (no concatenated copy): a character across a chunk
    // boundary must still come out whole.
    const body = Buffer.from(JSON.stringify({ metadata: {}, items: [{ metadata: { name: 'pv-é€😀' } }] }));
    const cut = body.indexOf(Buffer.from('€')) + 1;
    handler = (_req, _body, res) => {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.write(body.subarray(0, cut));
      setTimeout(() => res.end(body.subarray(cut)), 20);
    };
    const c = cluster();
    try {
      const list = await c.persistentVolumes.list();
      assert.equal(list.items[0]?.metadata.name, 'pv-é€😀');
    } finally {
      c.close();
    }
  });

  void it('streams a gzip watch, events split across compressed chunks', async () => {
    handler = (_req, _body, res) => {
      res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Encoding': 'gzip' });
      const gzip = createGzip();
      gzip.pipe(res);
      const line = (rv: string): string =>
        `${JSON.stringify({ type: 'MODIFIED', object: { kind: 'PersistentVolume', metadata: { name: 'a', resourceVersion: rv } } })}\n`;
      gzip.write(line('1').slice(0, 15));
      gzip.flush(() => {
        setTimeout(() => {
          gzip.write(line('1').slice(15) + line('2'));
          gzip.end();
        }, 20);
      });
    };
    const c = cluster();
    try {
      const events: string[] = [];
      for await (const event of c.persistentVolumes.watch({
        resourceVersion: '0',
        signal: new AbortController().signal,
      })) {
        if (event.type !== 'BOOKMARK') events.push(`${event.type}:${event.object.metadata.resourceVersion ?? ''}`);
      }
      assert.deepEqual(events, ['MODIFIED:1', 'MODIFIED:2']);
    } finally {
      c.close();
    }
  });

  void it('refuses a gzip bomb: a response or a watch event beyond its decompressed bound', async () => {
    // 64 MiB of spaces compress to about 64 KiB.
    const bomb = gzipSync(Buffer.alloc(64 * 2 ** 20, ' '));
    handler = (_req, _body, res) => {
      res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Encoding': 'gzip' });
      res.end(bomb);
    };
    const c = cluster({ maxResponseBytes: 2 ** 20, maxWatchEventBytes: 2 ** 20 });
    try {
      await assert.rejects(c.persistentVolumes.list(), /response body larger than 1048576 bytes \(decompressed\)/);
      await assert.rejects(async () => {
        const events = c.persistentVolumes.watch({ resourceVersion: '0', signal: new AbortController().signal });
        // No event is ever complete: the first next() fails.
        await events[Symbol.asyncIterator]().next();
      }, /watch event larger than 1048576 bytes \(decompressed\)/);
    } finally {
      c.close();
    }
  });

  void it('aborts a list through ListOptions.signal', async () => {
    handler = () => {
      // never answers
    };
    const c = cluster();
    const controller = new AbortController();
    try {
      const listing = c.persistentVolumes.list({ signal: controller.signal });
      await new Promise((resolve) => setTimeout(resolve, 20));
      controller.abort(new Error('cancelled'));
      await assert.rejects(listing, /cancelled/);
      assert.equal(getEventListeners(controller.signal, 'abort').length, 0);
    } finally {
      c.close();
    }
  });
});
