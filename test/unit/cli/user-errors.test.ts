// Mistakes a user makes on the command line reach them as usage or config errors with the
// documented exit code, at once, never as "a bug" (exit 70) or a hang (issue 12, items 8 and 9).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { AdminClient } from '../../../src/core/agent/admin-client.js';
import { CLI, runCli } from '../../support/cli.js';
import type { CliResult } from '../../support/cli.js';

/** A hang detector, generous for a loaded machine: the point is "it ends", not how fast. */
const FINISHES_WITHIN_MS = 10_000;
/** So long that a start-up failure reported only after a discovery period is a hang. */
const LONG_PERIOD = ['--discovery-period', '1h'];
const NO_CLUSTER = { MY_NODE_NAME: '', KUBECONFIG: '', KUBERNETES_SERVICE_HOST: '', KUBERNETES_SERVICE_PORT: '' };

function run(args: readonly string[], env: NodeJS.ProcessEnv = {}, cwd?: string): Promise<CliResult> {
  return runCli(args, { env: { ...NO_CLUSTER, ...env }, timeoutMs: FINISHES_WITHIN_MS, ...(cwd ? { cwd } : {}) });
}

function assertUserError(r: CliResult, code: number, message: RegExp): void {
  assert.equal(r.code, code, r.stderr);
  assert.match(r.stderr, message);
  assert.doesNotMatch(r.stderr, /unexpected failure|a bug/u);
  assert.doesNotMatch(r.stderr, /^\s+at /mu, 'no stack trace');
}

/** A sandbox agent running in the background, serving its admin socket. */
async function startSandboxAgent(sandbox: string, socket: string): Promise<ChildProcess> {
  const child = spawn(
    process.execPath,
    [CLI, 'run', '--sandbox', sandbox, '--admin-socket', socket, '--listen-address', '127.0.0.1:0', ...LONG_PERIOD],
    { stdio: ['ignore', 'ignore', 'ignore'], env: { ...process.env, ...NO_CLUSTER } },
  );
  const client = new AdminClient(socket, { timeoutMs: 2000 });
  const until = Date.now() + 15_000;
  for (;;) {
    if ((await client.status().catch(() => undefined)) !== undefined) return child;
    if (child.exitCode !== null || Date.now() > until) {
      child.kill('SIGKILL');
      assert.fail(`the sandbox agent did not start serving ${socket}`);
    }
    await delay(50);
  }
}

async function kill(child: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill(signal);
  await exited;
}

describe('user errors are usage or config errors, reported at once', () => {
  let dir = '';
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'lvp-user-errors-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  describe('simulate', () => {
    const scenario = (node: string): string =>
      `name: bad node\nnode: ${node}\nconfig:\n  storageClassMap:\n    fast: { hostDir: /mnt/fast, mountDir: /mnt/fast }\nsteps:\n  - time passes: 1m\n`;

    for (const node of ['Bad_Node', '"worker b"']) {
      it(`a scenario with node ${node} is invalid (exit 3): file, line and field named`, async () => {
        const file = join(dir, `node-${node.replace(/\W/gu, '')}.yaml`);
        await writeFile(file, scenario(node));
        const r = await run(['simulate', '--scenario', file]);
        const shown = node.replace(/^"|"$/gu, '');
        assertUserError(r, 3, new RegExp(`^error: invalid scenario .*node-\\w+\\.yaml \\(1 problem\\)$`, 'mu'));
        assert.match(r.stderr, new RegExp(`^ {2}.*\\.yaml:2:7: node: "${shown}" is not a valid Node name: `, 'mu'));
      });
    }

    it('--node and MY_NODE_NAME that cannot be Node names are usage errors (exit 2) naming them', async () => {
      const plan = [
        'simulate',
        '--config',
        'test/fixtures/simulate/basic/config.yaml',
        '--node-facts',
        'test/fixtures/simulate/basic/node.yaml',
        '--cluster',
        'test/fixtures/simulate/basic/cluster.yaml',
      ];
      assertUserError(
        await run([...plan, '--node', 'Bad_Node']),
        2,
        /^error: --node: "Bad_Node" is not a valid Node name/mu,
      );
      assertUserError(await run([...plan, '--node', '']), 2, /^error: --node: "" is not a valid Node name/mu);
      assertUserError(
        await run(plan, { MY_NODE_NAME: 'worker b' }),
        2,
        /^error: MY_NODE_NAME: "worker b" is not a valid Node name/mu,
      );
    });
  });

  describe('run', () => {
    it('--sandbox FILE is a usage error (exit 2) naming the flag', async () => {
      const file = join(dir, 'a-file');
      await writeFile(file, 'not a directory');
      assertUserError(await run(['run', '--sandbox', file]), 2, /^error: --sandbox .*a-file: not a directory$/mu);
      // In a scratch directory: before the fix, an empty --sandbox made a sandbox in the working directory.
      assertUserError(await run(['run', '--sandbox', ''], {}, dir), 2, /^error: --sandbox: needs a directory$/mu);
    });

    it('--sandbox under /proc fails at once (exit 2) instead of hanging', async () => {
      assert.ok(!existsSync('/proc/lvp-no-such-dir'));
      assertUserError(
        await run(['run', '--sandbox', '/proc/lvp-no-such-dir', ...LONG_PERIOD]),
        2,
        /^error: --sandbox \/proc\/lvp-no-such-dir: .*mkdir '\/proc\/lvp-no-such-dir'/mu,
      );
    });

    it('an invalid MY_NODE_NAME, --listen-address, --admin-socket or --metrics-path is a usage error (exit 2)', async () => {
      assertUserError(
        await run(['run'], { MY_NODE_NAME: 'Bad_Node' }),
        2,
        /^error: MY_NODE_NAME: "Bad_Node" is not a valid Node name/mu,
      );
      const sandbox = join(dir, 'flags');
      assertUserError(
        await run(['run', '--sandbox', sandbox, '--listen-address', '127.0.0.1:99999']),
        2,
        /^error: --listen-address: invalid listen address "127\.0\.0\.1:99999": port 99999 is above 65535$/mu,
      );
      assertUserError(
        await run(['run', '--sandbox', sandbox, '--admin-socket', '']),
        2,
        /^error: --admin-socket: needs a socket path$/mu,
      );
      assertUserError(
        await run(['run', '--sandbox', sandbox, '--metrics-path', 'metrics']),
        2,
        /^error: --metrics-path: must start with "\/", found "metrics"$/mu,
      );
      assertUserError(
        await run(['run', '--sandbox', sandbox, '--status-name', 'Bad_Name']),
        2,
        /^error: --status-name: "Bad_Name" must be a lowercase DNS label/mu,
      );
    });

    it('rollout status: a --configmap that is not NAMESPACE/NAME, a bad --selector, --timeout without --wait: exit 2', async () => {
      assertUserError(
        await run(['rollout', 'status', '--configmap', 'just-a-name']),
        2,
        /^error: --configmap: expected NAMESPACE\/NAME, found "just-a-name"$/mu,
      );
      assertUserError(
        await run(['rollout', 'status', '--config', dir, '--selector', 'a in (']),
        2,
        /^error: --selector: /mu,
      );
      const noWait = await run(['rollout', 'status', '--timeout', '5s']);
      assert.equal(noWait.code, 2, noWait.stderr);
      assert.match(noWait.stderr, /--wait/u);
    });

    it('rollout pause|resume|abort|promote: a bad --configmap or --name, --timeout without --wait: exit 2, before any cluster', async () => {
      assertUserError(
        await run(['rollout', 'pause', '--configmap', 'a/b/c']),
        2,
        /^error: --configmap: expected NAMESPACE\/NAME, found "a\/b\/c"$/mu,
      );
      assertUserError(
        await run(['rollout', 'promote', '--name', 'Bad_Name']),
        2,
        /^error: --name: "Bad_Name" must be/mu,
      );
      for (const action of ['resume', 'abort']) {
        const noWait = await run(['rollout', action, '--timeout', '5s']);
        assert.equal(noWait.code, 2, noWait.stderr);
        assert.match(noWait.stderr, /--wait/u);
      }
      // Flags fine, no cluster: exit 5 naming the connection, never a bug.
      assertUserError(await run(['rollout', 'abort']), 5, /^error: cannot connect to the cluster: /mu);
    });

    it('an invalid --config-source is a usage error (exit 2) naming the flag and the reason', async () => {
      const node = { MY_NODE_NAME: 'node-a' };
      assertUserError(
        await run(['run', '--config-source', 'configmaps/x'], node),
        2,
        /^error: --config-source: "configmaps\/x": expected `directory`, `configmap:\[NAMESPACE\/\]NAME` or `staged:\[NAMESPACE\/\]NAME`$/mu,
      );
      assertUserError(
        await run(['run', '--config-source', 'configmap:kube-system/Bad_Name'], node),
        2,
        /^error: --config-source: "Bad_Name" is not a valid ConfigMap name/mu,
      );
      assertUserError(
        await run(['run', '--config-source', 'configmap:x'], { ...node, MY_NAMESPACE: '' }),
        2,
        /^error: --config-source: no namespace: give configmap:NAMESPACE\/x, or set MY_NAMESPACE$/mu,
      );
      assertUserError(
        await run(['run', '--config-source', 'staged:x'], { ...node, MY_NAMESPACE: '' }),
        2,
        /^error: --config-source: no namespace: give staged:NAMESPACE\/x, or set MY_NAMESPACE$/mu,
      );
      assertUserError(
        await run(['run', '--sandbox', join(dir, 'cm'), '--config-source', 'configmap:a/b']),
        2,
        /^error: --config-source: a ConfigMap cannot be read with --sandbox$/mu,
      );
    });

    it('an admin socket a live agent serves fails start-up at once (exit 5); a dead one’s is replaced', async () => {
      const socket = join(dir, 'taken.sock');
      const first = await startSandboxAgent(join(dir, 'first'), socket);
      try {
        const r = await run([
          'run',
          '--sandbox',
          join(dir, 'second'),
          '--admin-socket',
          socket,
          '--listen-address',
          '127.0.0.1:0',
          ...LONG_PERIOD,
        ]);
        assertUserError(r, 5, new RegExp(`^error: another agent is serving ${socket}: `, 'mu'));
        // The live agent keeps its socket.
        assert.equal((await new AdminClient(socket, { timeoutMs: 5000 }).status()).node, 'sandbox-node');
        // Killed, it leaves its socket file behind: the next agent replaces it.
        await kill(first, 'SIGKILL');
        assert.ok(existsSync(socket), 'the dead agent left its socket');
        const next = await startSandboxAgent(join(dir, 'second'), socket);
        await kill(next, 'SIGTERM');
      } finally {
        await kill(first, 'SIGKILL');
      }
    });

    it('an admin socket that cannot be bound fails start-up at once (exit 5), naming the path and reason', async () => {
      const file = join(dir, 'plain-file');
      await writeFile(file, '');
      const socket = join(file, 'admin.sock');
      const r = await run([
        'run',
        '--sandbox',
        join(dir, 'unbindable'),
        '--admin-socket',
        socket,
        '--listen-address',
        '127.0.0.1:0',
        ...LONG_PERIOD,
      ]);
      assertUserError(r, 5, new RegExp(`^error: cannot listen on admin socket ${socket}: .*ENOTDIR`, 'mu'));
    });

    it('--admin-socket in a directory whose parent is missing fails (exit 5) and creates nothing', async () => {
      const missing = join(dir, 'no', 'such');
      const socket = join(missing, 'admin.sock');
      const r = await run([
        'run',
        '--sandbox',
        join(dir, 'no-dirs'),
        '--admin-socket',
        socket,
        '--listen-address',
        '127.0.0.1:0',
        ...LONG_PERIOD,
      ]);
      assertUserError(
        r,
        5,
        new RegExp(`^error: cannot create the directory of admin socket ${socket}: ENOENT.*not its parents\\)$`, 'mu'),
      );
      assert.ok(!existsSync(join(dir, 'no')), 'no directory was created');
      // Its own directory (one level, 0700) is still created, as in the pod's emptyDir layout.
      await mkdir(join(dir, 'parent'));
      const own = await startSandboxAgent(join(dir, 'own-dir'), join(dir, 'parent', 'run', 'admin.sock'));
      await kill(own, 'SIGTERM');
    });
  });
});
