// Kubeconfigs as users have them, against the real apiserver, through the built CLI (`simulate`
// live mode): an exec credential plugin (v1 and v1beta1) whose token is the only way in,
// impersonation (`as`, `as-groups`) honoured by RBAC and refused when not allowed, OIDC
// (`auth-provider: oidc`) and `proxy-url` through an HTTP CONNECT proxy (both via client-node).
/* eslint-disable @typescript-eslint/no-unsafe-class-instance-assignment -- client-node's model types are classes; the API takes plain objects */
import assert from 'node:assert/strict';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { AuthorizationV1Api, RbacAuthorizationV1Api, type KubeConfig } from '@kubernetes/client-node';
import { stringify } from 'yaml';
import { loadKubeconfig } from '../../src/core/kube/kubeconfig.js';
import { RestCluster } from '../../src/core/kube/rest-cluster.js';
import { persistentVolumeName } from '../../src/core/pv/naming.js';
import { runCli, type CliResult } from '../support/cli.js';
import { tokenForServiceAccount, type RbacRole, type ServiceAccountAccess } from '../support/cluster.js';
import { adminKubeConfig, requireTestControlPlane } from '../support/test-cluster.js';

const suffix = Math.random().toString(36).slice(2, 8);
const NODE = `kc-${suffix}`;
const CLASS = `kc-${suffix}-fast`;
const IMP_USER = `lvp-imp-user-${suffix}`;
const IMP_OTHER = `lvp-imp-other-${suffix}`;
const IMP_GROUP = `lvp-imp-group-${suffix}`;
const READER = `lvp-kc-reader-${suffix}`;

/** What `simulate` reads of a live cluster. */
const readerRules = [
  { apiGroups: [''], resources: ['persistentvolumes', 'nodes'], verbs: ['get', 'list'] },
  { apiGroups: ['storage.k8s.io'], resources: ['storageclasses'], verbs: ['get', 'list'] },
  { apiGroups: ['batch'], resources: ['jobs'], verbs: ['get', 'list'] },
];

describe('kubeconfig credentials against the real apiserver (simulate, as a process)', () => {
  const plane = requireTestControlPlane();
  let admin: KubeConfig;
  let cluster: RestCluster;
  let dir = '';
  let reader: ServiceAccountAccess | undefined;
  let caller: ServiceAccountAccess | undefined;
  const cleanups: (() => Promise<unknown>)[] = [];

  function kubeconfig(user: Record<string, unknown>, cluster: Record<string, unknown> = {}): Record<string, unknown> {
    return {
      apiVersion: 'v1',
      kind: 'Config',
      'current-context': 'test',
      clusters: [
        { name: 'test', cluster: { server: plane.server, 'certificate-authority': plane.caFile, ...cluster } },
      ],
      users: [{ name: 'someone', user }],
      contexts: [{ name: 'test', context: { cluster: 'test', user: 'someone' } }],
    };
  }

  async function write(name: string, config: Record<string, unknown>): Promise<string> {
    const path = join(dir, name);
    await writeFile(path, stringify(config));
    return path;
  }

  function simulate(kubeconfigPath: string): Promise<CliResult> {
    return runCli(
      [
        'simulate',
        '--config',
        join(dir, 'config.yaml'),
        '--node-facts',
        join(dir, 'node.yaml'),
        '--kubeconfig',
        kubeconfigPath,
        '--node',
        NODE,
        '-o',
        'json',
      ],
      { env: { MY_NODE_NAME: '', JOB_CONTAINER_IMAGE: '' }, timeoutMs: 60_000 },
    );
  }

  /** simulate planned the one volume of the node facts from the live cluster. */
  function assertLivePlan(r: CliResult): void {
    assert.equal(r.code, 0, r.stderr);
    const plan = JSON.parse(r.stdout) as { cluster: { source: string }; create: { pv: string }[] };
    assert.equal(plan.cluster.source, 'live');
    assert.deepEqual(
      plan.create.map((c) => c.pv),
      [persistentVolumeName('disk1', NODE, CLASS)],
    );
  }

  function assertCleanError(r: CliResult, code: number, pattern: RegExp): void {
    // With -o json the error is a JSON object on stdout (docs/exit-codes.md).
    const output = `${r.stdout}\n${r.stderr}`;
    assert.equal(r.code, code, output);
    assert.match(output, pattern);
    assert.doesNotMatch(output, /^\s+at /mu, 'no stack trace');
  }

  async function waitUntilAllowed(user: string, groups: string[]): Promise<void> {
    const authz = admin.makeApiClient(AuthorizationV1Api);
    for (const deadline = Date.now() + 15_000; ;) {
      const review = await authz.createSubjectAccessReview({
        body: { spec: { user, groups, resourceAttributes: { verb: 'list', resource: 'persistentvolumes' } } },
      });
      if (review.status?.allowed === true) return;
      if (Date.now() > deadline) throw new Error(`RBAC for ${user} not effective after 15 s`);
      await delay(100);
    }
  }

  before(async () => {
    admin = adminKubeConfig(plane);
    cluster = new RestCluster({ connection: await loadKubeconfig(plane.kubeconfigPath) });
    dir = await mkdtemp(join(tmpdir(), 'lvp-kc-auth-'));
    await cluster.nodes.create({ metadata: { name: NODE, labels: { 'kubernetes.io/hostname': NODE } } });
    cleanups.push(() => cluster.nodes.delete(NODE));
    await cluster.storageClasses.create({
      metadata: { name: CLASS },
      provisioner: 'kubernetes.io/no-provisioner',
      reclaimPolicy: 'Delete',
      volumeBindingMode: 'WaitForFirstConsumer',
    });
    cleanups.push(() => cluster.storageClasses.delete(CLASS));
    const mountDir = `/mnt/${NODE}/fast`;
    await writeFile(
      join(dir, 'config.yaml'),
      `storageClassMap:\n  ${CLASS}:\n    hostDir: ${mountDir}\n    mountDir: ${mountDir}\n`,
    );
    await writeFile(join(dir, 'node.yaml'), `paths:\n  ${mountDir}:\n    - { name: disk1, capacity: 10Gi }\n`);

    const readerRole: RbacRole = { kind: 'ClusterRole', metadata: { name: READER }, rules: readerRules };
    reader = await tokenForServiceAccount(admin, 'default', `lvp-kc-reader-${suffix}`, readerRole);
    // The caller may impersonate two users and one group, and read nothing itself.
    const impersonator: RbacRole = {
      kind: 'ClusterRole',
      metadata: { name: `lvp-kc-impersonator-${suffix}` },
      rules: [
        { apiGroups: [''], resources: ['users'], verbs: ['impersonate'], resourceNames: [IMP_USER, IMP_OTHER] },
        { apiGroups: [''], resources: ['groups'], verbs: ['impersonate'], resourceNames: [IMP_GROUP] },
      ],
    };
    caller = await tokenForServiceAccount(admin, 'default', `lvp-kc-caller-${suffix}`, impersonator);
    // The reader role (made above) bound to the impersonated user and, apart, to the group.
    const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
    const roleRef = { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: READER };
    for (const [name, subject] of [
      [`${READER}-user`, { kind: 'User', name: IMP_USER, apiGroup: 'rbac.authorization.k8s.io' }],
      [`${READER}-group`, { kind: 'Group', name: IMP_GROUP, apiGroup: 'rbac.authorization.k8s.io' }],
    ] as const) {
      await rbac.createClusterRoleBinding({ body: { metadata: { name }, roleRef, subjects: [subject] } });
      cleanups.push(() => rbac.deleteClusterRoleBinding({ name }));
    }
    await waitUntilAllowed(IMP_USER, []);
    await waitUntilAllowed(IMP_OTHER, [IMP_GROUP]);
  });

  after(async () => {
    for (const fn of cleanups.reverse()) await fn().catch(() => undefined);
    await caller?.cleanup().catch(() => undefined);
    await reader?.cleanup().catch(() => undefined);
    cluster.close();
    await rm(dir, { recursive: true, force: true });
  });

  /** An exec plugin: records its runs and KUBERNETES_EXEC_INFO, prints the credential file. */
  async function execPlugin(name: string, credential: unknown): Promise<{ command: string; marker: string }> {
    const marker = join(dir, `${name}.runs`);
    const credentialFile = join(dir, `${name}.json`);
    await writeFile(credentialFile, JSON.stringify(credential));
    const command = join(dir, `${name}.sh`);
    await writeFile(
      command,
      `#!/bin/sh\necho "run $1" >> "${marker}"\nprintf '%s' "$KUBERNETES_EXEC_INFO" > "${marker}.info"\ncat "${credentialFile}"\n`,
    );
    await chmod(command, 0o755);
    return { command, marker };
  }

  for (const apiVersion of ['client.authentication.k8s.io/v1', 'client.authentication.k8s.io/v1beta1']) {
    it(`an exec plugin (${apiVersion}) supplies the only credential: simulate plans from the live cluster`, async () => {
      assert.ok(reader);
      const name = `exec-${apiVersion.split('/')[1] ?? ''}`;
      const expires = new Date(Date.now() + 3_600_000).toISOString();
      const plugin = await execPlugin(name, {
        apiVersion,
        kind: 'ExecCredential',
        status: { token: reader.token, expirationTimestamp: expires },
      });
      const path = await write(
        `${name}.yaml`,
        kubeconfig({
          exec: {
            apiVersion,
            // Relative to the kubeconfig's directory, as in client-go.
            command: `./${name}.sh`,
            args: ['--cluster-name', 'test'],
            interactiveMode: 'Never',
            provideClusterInfo: true,
          },
        }),
      );
      assertLivePlan(await simulate(path));
      assert.equal((await readFile(plugin.marker, 'utf8')).trim(), 'run --cluster-name');
      const info = JSON.parse(await readFile(`${plugin.marker}.info`, 'utf8')) as {
        apiVersion: string;
        kind: string;
        spec: { interactive: boolean; cluster?: { server: string } };
      };
      assert.equal(info.apiVersion, apiVersion);
      assert.equal(info.kind, 'ExecCredential');
      assert.equal(info.spec.interactive, false);
      assert.equal(info.spec.cluster?.server, plane.server);
    });
  }

  it("a plugin's token is what authenticates: a wrong one is a clear start-up error (exit 5)", async () => {
    await execPlugin('exec-bad-token', {
      apiVersion: 'client.authentication.k8s.io/v1',
      kind: 'ExecCredential',
      status: { token: 'not-a-valid-token' },
    });
    const path = await write(
      'exec-bad-token.yaml',
      kubeconfig({ exec: { apiVersion: 'client.authentication.k8s.io/v1', command: './exec-bad-token.sh' } }),
    );
    assertCleanError(await simulate(path), 5, /Unauthorized/u);
  });

  it('impersonation (`as`) is honoured: the caller alone may read nothing, as the impersonated user it plans', async () => {
    assert.ok(caller);
    const alone = await write('caller.yaml', kubeconfig({ token: caller.token }));
    assertCleanError(await simulate(alone), 5, /forbidden/iu);
    const as = await write('as-user.yaml', kubeconfig({ token: caller.token, as: IMP_USER }));
    assertLivePlan(await simulate(as));
  });

  it('impersonation of a group (`as-groups`) is honoured: only the group may read', async () => {
    assert.ok(caller);
    const withoutGroup = await write('as-other.yaml', kubeconfig({ token: caller.token, as: IMP_OTHER }));
    assertCleanError(await simulate(withoutGroup), 5, /forbidden/iu);
    const withGroup = await write(
      'as-group.yaml',
      kubeconfig({ token: caller.token, as: IMP_OTHER, 'as-groups': [IMP_GROUP] }),
    );
    assertLivePlan(await simulate(withGroup));
  });

  it('impersonating a user the caller may not impersonate is refused with a clear error (exit 5)', async () => {
    assert.ok(caller);
    const path = await write('as-denied.yaml', kubeconfig({ token: caller.token, as: `not-allowed-${suffix}` }));
    assertCleanError(await simulate(path), 5, /cannot impersonate/u);
  });

  it('an OIDC auth-provider sends its id-token (through client-node)', async () => {
    assert.ok(reader);
    // A service-account token is a JWT with an expiry an hour away: client-node sends it as is.
    const path = await write(
      'oidc.yaml',
      kubeconfig({
        'auth-provider': {
          name: 'oidc',
          config: { 'client-id': 'lvp', 'idp-issuer-url': 'https://issuer.invalid', 'id-token': reader.token },
        },
      }),
    );
    assertLivePlan(await simulate(path));
  });

  it('proxy-url: every request goes through the HTTP CONNECT proxy (through client-node)', async () => {
    const target = new URL(plane.server);
    const tunnels: string[] = [];
    const sockets = new Set<Socket>();
    const proxy: Server = createServer((_req, res) => {
      res.writeHead(405).end();
    });
    proxy.on('connect', (req, client: Socket) => {
      tunnels.push(req.url ?? '');
      const upstream = connect(Number(target.port), target.hostname, () => {
        client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
        upstream.pipe(client);
        client.pipe(upstream);
      });
      for (const s of [client, upstream]) {
        sockets.add(s);
        s.on('error', () => undefined).on('close', () => sockets.delete(s));
      }
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    try {
      const address = proxy.address();
      assert.ok(address !== null && typeof address === 'object');
      const path = await write(
        'proxy.yaml',
        kubeconfig({ token: plane.adminToken }, { 'proxy-url': `http://127.0.0.1:${String(address.port)}` }),
      );
      assertLivePlan(await simulate(path));
      assert.ok(tunnels.length > 0, 'the proxy carried the requests');
      assert.ok(
        tunnels.every((t) => t === `${target.hostname}:${target.port}`),
        tunnels.join(', '),
      );
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => proxy.close(resolve));
    }
  });
});
