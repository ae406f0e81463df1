// `provisioner node-cleanup` as a process: bad flags are usage errors (exit 2) with the flag named
// and no stack trace; a cluster it cannot reach is a failed start-up (exit 5).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { runCli } from '../../support/cli.js';

const HANG_MS = 30_000;

describe('provisioner node-cleanup: flags and start-up errors', () => {
  const dir = mkdtempSync(join(tmpdir(), 'lvp-nc-cli-'));
  after(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  for (const [args, message] of [
    [['--storageclass-names', 'fast,Bad_Class'], /--storageclass-names: "Bad_Class" is not a StorageClass name/],
    [['--pvc-deletion-delay', '1 minute'], /--pvc-deletion-delay: /],
    [['--stale-pv-discovery-interval', '0s'], /--stale-pv-discovery-interval: must be positive/],
    [['--leader-elect-renew-deadline', '20s'], /greater than the renew deadline/],
    [['--leader-elect-lease-name', 'Not A Name'], /--leader-elect-lease-name: /],
    [['--metrics-path', 'metrics'], /--metrics-path: must start with "\/"/],
    [['--listen-address', '8080'], /--listen-address: invalid listen address/],
  ] as const) {
    it(`${args.join(' ')} is a usage error (exit 2)`, async () => {
      const r = await runCli(['node-cleanup', ...args], { timeoutMs: HANG_MS, env: { KUBECONFIG: '/nonexistent' } });
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, message);
      assert.doesNotMatch(r.stderr, /\n\s+at /, 'no stack trace');
    });
  }

  it('an unreachable apiserver is a failed start-up (exit 5), before anything is deleted', async () => {
    const kubeconfig = join(dir, 'kubeconfig');
    writeFileSync(
      kubeconfig,
      [
        'apiVersion: v1',
        'kind: Config',
        'clusters: [{name: t, cluster: {server: "http://127.0.0.1:1"}}]',
        'users: [{name: u, user: {token: "x"}}]',
        'contexts: [{name: c, context: {cluster: t, user: u}}]',
        'current-context: c',
        '',
      ].join('\n'),
    );
    const r = await runCli(['node-cleanup', '--storageclass-names', 'local', '--listen-address', ''], {
      timeoutMs: HANG_MS,
      env: { KUBECONFIG: kubeconfig },
    });
    assert.equal(r.code, 5, r.stderr);
    assert.match(r.stderr, /error: cannot list Nodes: /);
  });
});
