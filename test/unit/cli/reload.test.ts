// `provisioner reload` through the built CLI, as a process, against an admin server in this process.
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, beforeEach, describe, it } from 'node:test';
import { Ajv } from 'ajv';
import { startAdminServer } from '../../../src/core/agent/admin-server.js';
import type { RunningAdminServer } from '../../../src/core/agent/admin-server.js';
import type { ReloadOutcome, ReloadResult } from '../../../src/core/agent/reload-types.js';
import { silentLogger } from '../../../src/core/log.js';
import { REPO_ROOT, runCli } from '../../support/cli.js';
import type { CliResult } from '../../support/cli.js';
import { FakeAdminTarget, HASH_A, HASH_B, reloadResult } from '../../support/fake-admin.js';

const H = (hash: string): string => hash.replace(/[.*+?^${}()|[\]\\]/gu, '\\$&');

const CHANGES = [
  {
    path: 'storageClassMap.fast.fsType',
    action: 'modified',
    impact: 'new-pvs-only',
    summary: 'New PVs get the new spec.local.fsType.',
  },
  {
    path: 'storageClassMap.nvme',
    action: 'added',
    impact: 'needs-pod-change',
    summary: 'Entries of the new mountDir are published.',
  },
];

const OUTCOMES = {
  applied: reloadResult('applied', {
    generation: 8,
    appliedHash: HASH_B,
    candidateHash: HASH_B,
    changes: CHANGES,
    issues: [{ severity: 'warning', path: 'fsType2', message: 'unknown key ignored' }],
  }),
  noop: reloadResult('noop'),
  rejected: reloadResult('rejected', {
    candidateHash: HASH_B,
    issues: [
      {
        severity: 'error',
        path: 'storageClassMap.fast.volumeMode',
        message: 'unsupported volume mode "block"',
        position: { file: '/etc/provisioner/config/storageClassMap', line: 5, column: 17 },
      },
      { severity: 'error', path: 'useJobForCleaning', message: 'not a boolean' },
    ],
  }),
  'rolled-back': reloadResult('rolled-back', {
    candidateHash: HASH_B,
    changes: CHANGES.slice(0, 1),
    error: 'listing PVs failed: connection refused',
  }),
  failed: reloadResult('failed', { error: 'cannot read /etc/provisioner/config: EACCES' }),
  refused: reloadResult('refused', {
    candidateHash: HASH_B,
    changes: [
      {
        path: 'storageClassMap.slow',
        action: 'removed',
        impact: 'orphans-pvs',
        summary: 'PVs of the removed class are left alone.',
      },
    ],
    error:
      'a live reload that would orphan existing PVs (storageClassMap.slow) was refused; generation 7 keeps serving x. Apply it with `provisioner reload --allow orphans-pvs` or by restarting the agent',
    needsAllow: ['orphans-pvs'],
  }),
} satisfies Record<ReloadOutcome, ReloadResult>;

describe('provisioner reload (process)', () => {
  let dir = '';
  let socket = '';
  let server: RunningAdminServer;
  const target = new FakeAdminTarget();
  let validate: (data: unknown) => boolean;
  let schemaErrors: () => string;
  const reload = (...args: string[]): Promise<CliResult> => runCli(['reload', '--admin-socket', socket, ...args]);

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'lvp-reload-cli-'));
    socket = join(dir, 'admin.sock');
    server = await startAdminServer({ socketPath: socket, target, logger: silentLogger });
    const schema: unknown = JSON.parse(await readFile(join(REPO_ROOT, 'docs/schemas/reload.v1.schema.json'), 'utf8'));
    const ajv = new Ajv({ allErrors: true, strict: false });
    const compiled = ajv.compile(schema as object);
    validate = (data) => compiled(data);
    schemaErrors = () => ajv.errorsText(compiled.errors);
  });
  beforeEach(() => {
    target.reloadRequests.length = 0;
    target.onReload = (request) => Promise.resolve(reloadResult('noop', { force: request.force ?? false }));
  });
  after(async () => {
    await server.close();
    await rm(dir, { recursive: true, force: true });
  });

  const answer = (result: ReloadResult): void => {
    target.onReload = () => Promise.resolve(result);
  };

  it('applied: exit 0, the generation, the hash and one line per change', async () => {
    answer(OUTCOMES.applied);
    const r = await reload();
    assert.equal(r.code, 0, r.stderr);
    assert.equal(
      r.stdout,
      [
        `Applied: generation 8 serves ${HASH_B} (2 changes, 12 ms).`,
        'Changes:',
        '  ~ storageClassMap.fast.fsType  [new-pvs-only] New PVs get the new spec.local.fsType.',
        '  + storageClassMap.nvme  [needs-pod-change] Entries of the new mountDir are published.',
        'warning: fsType2: unknown key ignored',
        '',
      ].join('\n'),
    );
    assert.deepEqual(target.reloadRequests, [{ trigger: 'admin', force: false }]);
  });

  it('noop: exit 0; --force is passed to the agent', async () => {
    const r = await reload();
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, new RegExp(`^No change: generation 7 already serves ${H(HASH_A)} \\(12 ms\\)\\.$`, 'mu'));
    assert.match(r.stdout, /--force/u);

    const forced = await reload('--force');
    assert.equal(forced.code, 0);
    assert.deepEqual(target.reloadRequests.at(-1), { trigger: 'admin', force: true });
  });

  it('rejected: exit 1, every problem as file:line:col: path: message', async () => {
    answer(OUTCOMES.rejected);
    const r = await reload();
    assert.equal(r.code, 1, r.stderr);
    assert.equal(
      r.stdout,
      [
        `Rejected: the config read (${HASH_B}) is invalid (2 problems); generation 7 keeps serving ${HASH_A}.`,
        '  /etc/provisioner/config/storageClassMap:5:17: storageClassMap.fast.volumeMode: unsupported volume mode "block"',
        '  useJobForCleaning: not a boolean',
        '',
      ].join('\n'),
    );
    assert.equal(r.stderr, '');
  });

  it('refused: exit 1, why, what to allow and the changes not applied; --allow is passed on', async () => {
    answer(OUTCOMES.refused);
    const r = await reload();
    assert.equal(r.code, 1, r.stderr);
    assert.equal(
      r.stdout,
      [
        'Refused: a live reload that would orphan existing PVs (storageClassMap.slow) was refused; generation 7 keeps serving x. Apply it with `provisioner reload --allow orphans-pvs` or by restarting the agent.',
        'Changes not applied:',
        '  - storageClassMap.slow  [orphans-pvs] PVs of the removed class are left alone.',
        '',
      ].join('\n'),
    );
    const json = await reload('-o', 'json');
    assert.equal(json.code, 1);
    const parsed: unknown = JSON.parse(json.stdout);
    assert.ok(validate(parsed), schemaErrors());
    assert.deepEqual((parsed as { result: ReloadResult }).result.needsAllow, ['orphans-pvs']);
    // The --fail-on aliases of diff-config name the same classes; the agent gets canonical names, once each.
    const allowed = await reload('--allow', 'orphans,ownership-change', '--allow', 'orphans-pvs');
    assert.equal(allowed.code, 1);
    assert.deepEqual(target.reloadRequests.at(-1), {
      trigger: 'admin',
      force: false,
      allow: ['orphans-pvs', 'ownership-change'],
    });
  });

  it('--allow with a class that is not guarded (or unknown) is a usage error: exit 2, nothing sent', async () => {
    for (const value of ['new-pvs-only', 'orphan', 'any']) {
      const r = await reload('--allow', value);
      assert.equal(r.code, 2, `${value}: ${r.stderr}`);
      assert.match(r.stderr, /--allow/u);
      assert.match(r.stderr, /orphans-pvs/u, 'names the valid values');
    }
    assert.equal(target.reloadRequests.length, 0);
  });

  it('rolled-back and failed: exit 1 with the error', async () => {
    answer(OUTCOMES['rolled-back']);
    const rolled = await reload();
    assert.equal(rolled.code, 1, rolled.stderr);
    assert.match(
      rolled.stdout,
      /^Rolled back: the new generation failed to start: listing PVs failed: connection refused$/mu,
    );
    assert.match(rolled.stdout, new RegExp(`^Generation 7 serves the previous config ${H(HASH_A)} again\\.$`, 'mu'));
    assert.match(rolled.stdout, /^Changes not applied:\n {2}~ storageClassMap\.fast\.fsType/mu);

    answer(OUTCOMES.failed);
    const failed = await reload();
    assert.equal(failed.code, 1, failed.stderr);
    assert.match(failed.stdout, /^Failed: cannot read \/etc\/provisioner\/config: EACCES$/mu);
  });

  it('-o json: {formatVersion: 1, result} following the schema, for every outcome', async () => {
    for (const [outcome, result] of Object.entries(OUTCOMES)) {
      answer(result);
      const r = await reload('-o', 'json');
      assert.equal(r.code, outcome === 'applied' || outcome === 'noop' ? 0 : 1, `${outcome}: ${r.stderr}`);
      const out: unknown = JSON.parse(r.stdout);
      assert.ok(validate(out), `${outcome}: ${schemaErrors()}`);
      assert.deepEqual(out, { formatVersion: 1, result });
    }
  });

  it('reads the socket from PROVISIONER_ADMIN_SOCKET', async () => {
    const r = await runCli(['reload'], { env: { PROVISIONER_ADMIN_SOCKET: socket } });
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^No change/u);
  });

  it('no agent: exit 2, a message naming the socket and what to do, no stack trace', async () => {
    const missing = join(dir, 'missing', 'admin.sock');
    const r = await runCli(['reload', '--admin-socket', missing]);
    assert.equal(r.code, 2);
    assert.equal(r.stdout, '');
    assert.equal(
      r.stderr,
      `error: no agent reachable at ${missing}: the socket does not exist; is \`provisioner run\` running on this node? ` +
        '(point --admin-socket or PROVISIONER_ADMIN_SOCKET at its admin socket)\n',
    );
    const json = await runCli(['reload', '--admin-socket', missing, '-o', 'json']);
    assert.equal(json.code, 2);
    const out: unknown = JSON.parse(json.stdout);
    assert.ok(validate(out), schemaErrors());
    assert.equal((out as { error: { code: string } }).error.code, 'agent-unreachable');
  });

  it('an agent that never answers: exit 3 after --timeout', async () => {
    target.onReload = () => new Promise(() => undefined);
    const started = Date.now();
    const r = await reload('--timeout', '200ms');
    assert.equal(r.code, 3, r.stderr);
    assert.match(r.stderr, /^error: the agent at .*admin\.sock did not answer the reload request .* within 200ms\n$/u);
    assert.ok(!r.stderr.includes('    at '), 'no stack trace');
    assert.ok(Date.now() - started < 10_000);
  });

  it('a bad --timeout is a usage error (exit 2)', async () => {
    const r = await reload('--timeout', 'soon');
    assert.equal(r.code, 2);
    assert.match(r.stderr, /--timeout: invalid duration "soon"/u);
  });
});
