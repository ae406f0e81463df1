// `provisioner rollout controller` as a process: bad flags are usage errors (exit 2) with the flag
// named and no stack trace; a cluster it cannot reach is a failed start-up (exit 5).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { runCli } from '../../support/cli.js';

const HANG_MS = 30_000;

describe('provisioner rollout controller: flags and start-up errors', () => {
  const dir = mkdtempSync(join(tmpdir(), 'lvp-rc-cli-'));
  after(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  for (const [args, message] of [
    [[], /Missing required flag config-map/],
    [['--config-map', 'Not_A_Name'], /--config-map: /],
    [['--config-map', 'x'.repeat(250)], /--config-map: must be no more than 253 characters/],
    [['--config-map', 'cfg', '--status-name', 'Bad Name'], /--status-name: /],
    [['--config-map', 'cfg', '--waves', '50%,10%'], /--waves: 10% does not reach further/],
    [['--config-map', 'cfg', '--canary-selector', 'a=b', '--canary-count', '2'], /cannot also be provided/],
    [['--config-map', 'cfg', '--canary-selector', 'a in ('], /--canary-selector: /],
    [['--config-map', 'cfg', '--bake-time', 'soon'], /--bake-time "soon": /],
    [['--config-map', 'cfg', '--on-halt', 'panic'], /Expected --on-halt=panic to be one of: revert, halt/],
    [['--config-map', 'cfg', '--leader-elect-renew-deadline', '20s'], /greater than the renew deadline/],
    [['--config-map', 'cfg', '--namespace', 'Bad_NS'], /--namespace: /],
    [['--config-map', 'cfg', '--metrics-path', 'metrics'], /--metrics-path: must start with "\/"/],
    [['--config-map', 'cfg', '--listen-address', '8081'], /--listen-address: invalid listen address/],
  ] as const) {
    it(`${args.join(' ') || '(no flags)'} is a usage error (exit 2)`, async () => {
      const r = await runCli(['rollout', 'controller', ...args], {
        timeoutMs: HANG_MS,
        env: { KUBECONFIG: '/nonexistent' },
      });
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, message);
      assert.doesNotMatch(r.stderr, /\n\s+at /, 'no stack trace');
    });
  }

  it('an unreachable apiserver is a failed start-up (exit 5), before anything is written', async () => {
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
    const r = await runCli(['rollout', 'controller', '--config-map', 'cfg', '--listen-address', ''], {
      timeoutMs: HANG_MS,
      env: { KUBECONFIG: kubeconfig },
    });
    assert.equal(r.code, 5, r.stderr);
    assert.match(r.stderr, /error: cannot list ConfigMaps in default: /);
  });
});
