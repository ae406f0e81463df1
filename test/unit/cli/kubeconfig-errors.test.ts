// Bad kubeconfigs through the built CLI (`simulate` live mode, as a process): a missing file, an
// unknown context, exec plugins that fail, are not found, print garbage or the wrong
// ExecCredential, or hang (killed after the bounded timeout, with what they started). Each is
// exit 5 (docs/exit-codes.md) with one message naming the file, the user and the field, and no
// stack trace. No apiserver is contacted: the credential is obtained before the first request.
import assert from 'node:assert/strict';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { stringify } from 'yaml';
import { REPO_ROOT, runCli, type CliResult } from '../../support/cli.js';

const BASIC = join(REPO_ROOT, 'test/fixtures/simulate/basic');
const env = { MY_NODE_NAME: '', JOB_CONTAINER_IMAGE: '', KUBECONFIG: '' };
const V1 = 'client.authentication.k8s.io/v1';

function kubeconfig(user: Record<string, unknown>, currentContext = 'test'): string {
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    'current-context': currentContext,
    clusters: [{ name: 'test', cluster: { server: 'https://127.0.0.1:1' } }],
    users: [{ name: 'eks-admin', user }],
    contexts: [{ name: 'test', context: { cluster: 'test', user: 'eks-admin' } }],
  });
}

describe('bad kubeconfigs: a clear start-up error, exit 5 (process)', () => {
  let dir = '';
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'lvp-kc-errors-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  async function simulate(kubeconfigPath: string): Promise<CliResult> {
    return runCli(
      [
        'simulate',
        '--config',
        join(BASIC, 'config.yaml'),
        '--node-facts',
        join(BASIC, 'node.yaml'),
        '--kubeconfig',
        kubeconfigPath,
        '--node',
        'node-1',
      ],
      { env, timeoutMs: 40_000 },
    );
  }

  async function plugin(name: string, script: string): Promise<string> {
    const path = join(dir, name);
    await writeFile(path, `#!/bin/sh\n${script}\n`);
    await chmod(path, 0o755);
    return path;
  }

  async function expectError(name: string, text: string, pattern: RegExp): Promise<void> {
    const path = join(dir, `${name}.yaml`);
    await writeFile(path, text);
    const r = await simulate(path);
    assert.equal(r.code, 5, `${r.stdout}\n${r.stderr}`);
    assert.match(r.stderr, /^error: cannot connect to the cluster: /mu);
    assert.match(r.stderr, pattern);
    assert.ok(r.stderr.includes(path), `names the kubeconfig ${path}: ${r.stderr}`);
    assert.doesNotMatch(r.stderr, /^\s+at /mu, 'no stack trace');
    assert.equal(r.stdout, '');
  }

  it('a missing file and an unknown context', async () => {
    const missing = join(dir, 'nowhere', 'config');
    const r = await simulate(missing);
    assert.equal(r.code, 5, r.stderr);
    assert.match(r.stderr, new RegExp(`cannot read kubeconfig ${missing}: ENOENT`, 'u'));
    assert.doesNotMatch(r.stderr, /^\s+at /mu);
    await expectError('unknown-context', kubeconfig({ token: 't' }, 'prod'), /context "prod" not found in kubeconfig/u);
  });

  it('an exec plugin that fails: its exit code, its stderr and the install hint', async () => {
    const command = await plugin('fails.sh', 'echo "the SSO session has expired" >&2; exit 3');
    await expectError(
      'exec-fails',
      kubeconfig({ exec: { apiVersion: V1, command, installHint: 'Run `aws sso login` first.' } }),
      /user "eks-admin": exec plugin ".*fails\.sh" exited with code 3: the SSO session has expired\nRun `aws sso login` first\./u,
    );
  });

  it('an exec plugin that is not found, with the install hint', async () => {
    await expectError(
      'exec-not-found',
      kubeconfig({
        exec: { apiVersion: V1, command: 'lvp-no-such-plugin', installHint: 'Install lvp-no-such-plugin.' },
      }),
      /user "eks-admin": exec plugin "lvp-no-such-plugin": not found\nInstall lvp-no-such-plugin\./u,
    );
  });

  it('an exec plugin that prints garbage, the wrong apiVersion, or no token', async () => {
    await expectError(
      'exec-garbage',
      kubeconfig({ exec: { apiVersion: V1, command: await plugin('garbage.sh', 'echo "hello, world"') } }),
      /exec plugin ".*garbage\.sh" printed no ExecCredential JSON: "hello, world\\n"/u,
    );
    const beta = JSON.stringify({
      apiVersion: 'client.authentication.k8s.io/v1beta1',
      kind: 'ExecCredential',
      status: { token: 'x' },
    });
    await expectError(
      'exec-wrong-version',
      kubeconfig({ exec: { apiVersion: V1, command: await plugin('beta.sh', `echo '${beta}'`) } }),
      /printed an ExecCredential of apiVersion "client\.authentication\.k8s\.io\/v1beta1"; the kubeconfig asks for client\.authentication\.k8s\.io\/v1/u,
    );
    const empty = JSON.stringify({ apiVersion: V1, kind: 'ExecCredential', status: {} });
    await expectError(
      'exec-no-token',
      kubeconfig({ exec: { apiVersion: V1, command: await plugin('empty.sh', `echo '${empty}'`) } }),
      /neither status\.token nor a client certificate/u,
    );
  });

  it('exec fields that are wrong are named: no apiVersion, an unsupported one, interactiveMode Always', async () => {
    await expectError(
      'exec-no-version',
      kubeconfig({ exec: { command: 'aws' } }),
      /user "eks-admin": exec\.apiVersion null is not supported: use client\.authentication\.k8s\.io\/v1 or client\.authentication\.k8s\.io\/v1beta1/u,
    );
    await expectError(
      'exec-alpha',
      kubeconfig({ exec: { command: 'aws', apiVersion: 'client.authentication.k8s.io/v1alpha1' } }),
      /exec\.apiVersion "client\.authentication\.k8s\.io\/v1alpha1" is not supported/u,
    );
    await expectError(
      'exec-interactive',
      kubeconfig({ exec: { command: 'aws', apiVersion: V1, interactiveMode: 'Always' } }),
      /exec\.interactiveMode is Always, but the provisioner has no terminal/u,
    );
    await expectError(
      'gcp-provider',
      kubeconfig({ 'auth-provider': { name: 'gcp' } }),
      /auth-provider "gcp" was removed from Kubernetes clients; use the exec plugin "gke-gcloud-auth-plugin" instead/u,
    );
  });

  it('a hanging exec plugin is killed after 15 s, with the processes it started', async () => {
    const pids = join(dir, 'hang.pids');
    const command = await plugin('hang.sh', `sleep 300 &\necho "$$ $!" > "${pids}"\nwait`);
    const started = Date.now();
    await expectError(
      'exec-hangs',
      kubeconfig({ exec: { apiVersion: V1, command } }),
      /exec plugin ".*hang\.sh" printed no credential within 15 s \(killed\)/u,
    );
    assert.ok(Date.now() - started < 30_000, 'bounded');
    for (const pid of (await readFile(pids, 'utf8')).trim().split(' ').map(Number)) {
      // Gone, or a zombie waiting for a reaper that this container may not have.
      const stat = await readFile(`/proc/${String(pid)}/stat`, 'utf8').catch(() => '');
      assert.ok(stat === '' || /^\d+ \(.*\) Z /su.test(stat), `process ${String(pid)} still running: ${stat}`);
    }
  });
});
