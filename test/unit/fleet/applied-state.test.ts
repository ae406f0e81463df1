import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  appliedStateFromStatus,
  MAX_REASON_CHARS,
  NO_PASS,
  sameState,
  statusLease,
  statusLeaseName,
  statusNameProblem,
  stateFromLease,
  STATUS_OF_LABEL,
} from '../../../src/core/fleet/applied-state.js';
import { microTime } from '../../../src/core/kube/micro-time.js';
import type { Lease } from '../../../src/core/kube/objects.js';
import type { AppliedState } from '../../../src/core/fleet/applied-state.js';
import { RELOAD_OUTCOMES } from '../../../src/core/agent/reload-types.js';
import type { AgentStatusJson } from '../../../src/core/agent/reload-types.js';
import { dns1123SubdomainErrors } from '../../../src/core/kube/validation.js';
import { sourceLabel } from '../../../src/core/config/source/port.js';
import { HASH_A, HASH_B, reloadResult } from '../../support/fake-admin.js';

const hash = fc.stringMatching(/^[0-9a-f]{64}$/).map((h) => `sha256:${h}`);
const dnsLabel = fc.stringMatching(/^[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?$/);
const nodeName = fc.array(dnsLabel, { minLength: 1, maxLength: 12 }).map((labels) => labels.join('.'));

const state = fc.record(
  {
    node: nodeName,
    appliedHash: hash,
    generation: fc.nat({ max: 10_000 }),
    result: fc.constantFrom('started' as const, ...RELOAD_OUTCOMES),
    reason: fc.string({ maxLength: 200 }),
    candidateHash: hash,
    source: fc.string({ maxLength: 80 }),
    agentVersion: fc.string({ maxLength: 20 }),
    volumesAbnormal: fc.integer({ min: 1, max: 100_000 }),
    volumesQuarantined: fc.integer({ min: 1, max: 100_000 }),
    lastPassHash: fc.oneof(hash, fc.constant(NO_PASS)),
  },
  { requiredKeys: ['node', 'appliedHash', 'generation', 'result', 'source', 'agentVersion'] },
);

void describe('status Lease names', () => {
  void it('are <name>-<node> when that is a valid Lease name', () => {
    assert.equal(
      statusLeaseName('local-static-provisioner', 'node-a.example.com'),
      'local-static-provisioner-node-a.example.com',
    );
  });

  void it('are always valid DNS subdomains of at most 253 characters, for any name and node', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 80 }), fc.string({ maxLength: 300 }), (name, node) => {
        const lease = statusLeaseName(name, node);
        assert.deepEqual(dns1123SubdomainErrors(lease), [], lease);
        assert.ok(lease.length <= 253);
        assert.equal(statusLeaseName(name, node), lease, 'deterministic');
      }),
    );
  });

  void it('never give two valid node names the same Lease (long names get a hash)', () => {
    fc.assert(
      fc.property(nodeName, nodeName, (a, b) => {
        fc.pre(a !== b);
        assert.notEqual(statusLeaseName('local-static-provisioner', a), statusLeaseName('local-static-provisioner', b));
      }),
    );
    const long = `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(61)}`;
    const other = `${long.slice(0, -1)}e`;
    assert.equal(dns1123SubdomainErrors(long).length, 0);
    assert.notEqual(statusLeaseName('lvp', long), statusLeaseName('lvp', other));
  });

  void it('--status-name must be a valid label value and DNS name', () => {
    assert.equal(statusNameProblem('local-static-provisioner'), undefined);
    assert.match(statusNameProblem('Has_Upper') ?? '', /lowercase DNS label/);
    assert.match(statusNameProblem('') ?? '', /needs a name/);
    assert.match(statusNameProblem('x'.repeat(64)) ?? '', /at most 63/);
  });
});

void describe('the state in a Lease', () => {
  const target = { name: 'lvp-node-a', namespace: 'kube-system', instance: 'lvp' };

  void it('round-trips through the annotations; renewTime is a MicroTime heartbeat, the duration the stale age', () => {
    fc.assert(
      fc.property(state, fc.integer({ min: 0, max: 4_102_444_800_000 }), (s: AppliedState, now) => {
        const lease = statusLease(target, s, now, 180_000);
        assert.match(lease.spec?.renewTime ?? '', /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
        assert.equal(lease.metadata.labels?.[STATUS_OF_LABEL], 'lvp');
        const read = stateFromLease(lease);
        assert.ok(read);
        const { heartbeatAt, staleAfterMs, ...rest } = read;
        assert.deepEqual(rest, { ...s });
        assert.equal(heartbeatAt, now);
        assert.equal(staleAfterMs, 180_000);
      }),
    );
  });

  void it('keeps annotations and labels that are not its own, and drops a reason that is gone', () => {
    const first = statusLease(
      target,
      {
        node: 'a',
        appliedHash: HASH_A,
        generation: 2,
        result: 'rejected',
        reason: 'bad',
        source: '/c',
        agentVersion: '1',
      },
      0,
      180_000,
    );
    first.metadata.annotations = { ...first.metadata.annotations, 'team.example/owner': 'storage' };
    first.metadata.resourceVersion = '42';
    const next = statusLease(
      target,
      { node: 'a', appliedHash: HASH_B, generation: 3, result: 'applied', source: '/c', agentVersion: '1' },
      1000,
      180_000,
      first,
    );
    assert.equal(next.metadata.resourceVersion, '42', 'an update of what was read');
    assert.equal(next.metadata.annotations?.['team.example/owner'], 'storage');
    assert.equal(stateFromLease(next)?.reason, undefined);
    assert.equal(microTime(1000), '1970-01-01T00:00:01.000000Z');
  });

  void it('a Lease without the state (someone else’s) carries none', () => {
    assert.equal(stateFromLease({ metadata: { name: 'x', annotations: {} } }), undefined);
  });
});

void describe('the agent status → the published state', () => {
  const DIRECTORY = { kind: 'directory', path: '/etc/provisioner/config' } as const;
  const status = (
    lastReload?: AgentStatusJson['lastReload'],
    source: AgentStatusJson['source'] = { configured: DIRECTORY, inUse: DIRECTORY },
  ): AgentStatusJson => ({
    formatVersion: 1,
    node: 'node-a',
    version: '0.1.0',
    pid: 1,
    startedAt: 0,
    now: 0,
    generation: 3,
    ready: true,
    config: { source: '/etc/provisioner/config', appliedHash: HASH_A, subPath: false },
    ...(lastReload !== undefined ? { lastReload } : {}),
    reloadPending: false,
    classes: [],
    cleanups: [],
    source,
  });

  void it('a start-up fallback publishes the directory in use and the source configured', () => {
    const configured = { kind: 'configmap', namespace: 'kube-system', name: 'lvp-config' } as const;
    const fallback = status(undefined, { configured, inUse: DIRECTORY, fallbackReason: 'the API is unreachable' });
    assert.equal(
      appliedStateFromStatus(fallback).source,
      '/etc/provisioner/config (fallback from configmap:kube-system/lvp-config)',
    );
  });

  void it('a staged source publishes the copy it reads; its fallback names the staged source', () => {
    const configured = { kind: 'staged', namespace: 'kube-system', name: 'lvp-config' } as const;
    const candidate = {
      kind: 'configmap',
      namespace: 'kube-system',
      name: 'lvp-config-candidate',
      staged: true,
    } as const;
    const reading = status(undefined, { configured, inUse: candidate, stagedRole: 'candidate' });
    assert.equal(
      appliedStateFromStatus({ ...reading, config: { ...reading.config, source: sourceLabel(candidate) } }).source,
      'configmap:kube-system/lvp-config-candidate (staged)',
    );
    const fallback = status(undefined, { configured, inUse: DIRECTORY, fallbackReason: 'not written yet' });
    assert.equal(
      appliedStateFromStatus(fallback).source,
      '/etc/provisioner/config (fallback from staged:kube-system/lvp-config)',
    );
  });

  void it('publishes the errors since the config was applied (none: absent), capped', () => {
    const published = appliedStateFromStatus({ ...status(), errorsSinceApply: 3 });
    assert.equal(published.errorsSinceApply, 3);
    const lease = statusLease({ name: 'l', namespace: 'ns', instance: 'lvp' }, published, 0, 1000);
    assert.equal(lease.metadata.annotations?.['local-static-provisioner/errors-since-apply'], '3');
    assert.equal(stateFromLease(lease)?.errorsSinceApply, 3);
    const none = appliedStateFromStatus({ ...status(), errorsSinceApply: 0 });
    assert.equal('errorsSinceApply' in none, false);
    assert.equal(sameState(published, none), false, 'a change of the count is a new state to publish');
    assert.equal(appliedStateFromStatus({ ...status(), errorsSinceApply: 5_000_000 }).errorsSinceApply, 999_999);
  });

  void it('publishes node, hash, generation, source, version; started before any reload', () => {
    assert.deepEqual(appliedStateFromStatus(status()), {
      node: 'node-a',
      appliedHash: HASH_A,
      generation: 3,
      result: 'started',
      source: '/etc/provisioner/config',
      agentVersion: '0.1.0',
      lastPassHash: NO_PASS,
    });
  });

  void it('publishes the config of the last discovery pass (none before the first), read back as written', () => {
    const pass = { at: 0, durationMs: 1, created: 0, deleted: 0, abnormal: 0, quarantined: 0 };
    const before = appliedStateFromStatus(status());
    const after = appliedStateFromStatus({ ...status(), lastPass: { ...pass, configHash: HASH_B } });
    assert.equal(before.lastPassHash, NO_PASS);
    assert.equal(after.lastPassHash, HASH_B);
    assert.equal(sameState(before, after), false, 'the first pass under a config is a new state to publish');
    const target = { name: 'l', namespace: 'ns', instance: 'lvp' };
    const lease = statusLease(target, after, 0, 1000);
    assert.equal(lease.metadata.annotations?.['local-static-provisioner/last-pass-hash'], HASH_B);
    assert.equal(stateFromLease(lease)?.lastPassHash, HASH_B);
    assert.equal(stateFromLease(statusLease(target, before, 0, 1000))?.lastPassHash, NO_PASS);
    // someone else's hand: not a hash, not `none`; and an older agent's Lease without it
    for (const foreign of ['sha256:XYZ', 'sha256:abc', 'yes', '', `${HASH_B} `]) {
      const edited: Lease = {
        ...lease,
        metadata: {
          ...lease.metadata,
          annotations: { ...lease.metadata.annotations, 'local-static-provisioner/last-pass-hash': foreign },
        },
      };
      assert.equal('lastPassHash' in (stateFromLease(edited) ?? {}), false, JSON.stringify(foreign));
    }
    const older = statusLease(target, after, 0, 1000);
    delete older.metadata.annotations?.['local-static-provisioner/last-pass-hash'];
    assert.equal('lastPassHash' in (stateFromLease(older) ?? {}), false);
  });

  void it('publishes the counts of abnormal and quarantined volumes of the last pass, and none when there are none', () => {
    const pass = { at: 0, durationMs: 1, created: 0, deleted: 0, abnormal: 2, quarantined: 1, conflicting: 3 };
    const published = appliedStateFromStatus({ ...status(), lastPass: pass });
    assert.equal(published.volumesAbnormal, 2);
    assert.equal(published.volumesQuarantined, 1);
    assert.equal(published.volumesConflicting, 3);
    const lease = statusLease({ name: 'l', namespace: 'ns', instance: 'lvp' }, published, 0, 1000);
    assert.equal(lease.metadata.annotations?.['local-static-provisioner/volumes-abnormal'], '2');
    assert.equal(lease.metadata.annotations['local-static-provisioner/volumes-quarantined'], '1');
    assert.equal(lease.metadata.annotations['local-static-provisioner/volumes-conflicting'], '3');
    assert.equal(stateFromLease(lease)?.volumesConflicting, 3, 'read back from the Lease');
    const healthy = appliedStateFromStatus({
      ...status(),
      lastPass: { ...pass, abnormal: 0, quarantined: 0, conflicting: 0 },
    });
    assert.equal(
      'volumesAbnormal' in healthy || 'volumesQuarantined' in healthy || 'volumesConflicting' in healthy,
      false,
    );
    assert.equal(sameState(published, healthy), false, 'a change of the counts is a new state to publish');
    // A count someone else wrote by hand is not one.
    const forged = {
      ...lease,
      metadata: {
        ...lease.metadata,
        annotations: { ...lease.metadata.annotations, 'local-static-provisioner/volumes-abnormal': '-3' },
      },
    };
    assert.equal(stateFromLease(forged)?.volumesAbnormal, undefined);
  });

  void it('a refused reload: its error is the reason, its candidate the hash it refused', () => {
    const refused = reloadResult('refused', { candidateHash: HASH_B, error: 'a live reload that would orphan PVs' });
    const s = appliedStateFromStatus(status(refused));
    assert.equal(s.result, 'refused');
    assert.equal(s.candidateHash, HASH_B);
    assert.equal(s.reason, 'a live reload that would orphan PVs');
  });

  void it('a rejected reload: the first error, with its key path, and how many more; bounded', () => {
    const rejected = reloadResult('rejected', {
      issues: [
        { severity: 'warning', path: 'x', message: 'a warning' },
        { severity: 'error', path: 'storageClassMap.fast.volumeMode', message: 'must be Filesystem or Block' },
        { severity: 'error', path: 'y', message: 'z'.repeat(5000) },
      ],
    });
    const s = appliedStateFromStatus(status(rejected));
    assert.equal(s.reason, 'storageClassMap.fast.volumeMode: must be Filesystem or Block (and 1 more)');
    const long = appliedStateFromStatus(status(reloadResult('failed', { error: 'e'.repeat(5000) })));
    assert.equal(long.reason?.length, MAX_REASON_CHARS);
  });
});
