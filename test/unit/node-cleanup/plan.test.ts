import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { NodeSelectorTerm, PersistentVolume } from '../../../src/core/kube/objects.js';
import { namedHostnames, termMatches, volumeAffinity, volumeHasNode } from '../../../src/core/node-cleanup/affinity.js';
import type { NodeFacts } from '../../../src/core/node-cleanup/affinity.js';
import { decideVolume, planStranded } from '../../../src/core/node-cleanup/plan.js';
import type { ClaimFacts, PodFacts, StrandedSince } from '../../../src/core/node-cleanup/plan.js';
import { ALPHA_NODE_AFFINITY_ANNOTATION, HOSTNAME_LABEL } from '../../../src/core/pv/naming.js';

const GRACE = 60_000;
const CLASSES = new Set(['local-storage']);
const SETTINGS = { storageClassNames: CLASSES, gracePeriodMs: GRACE };

function hostnameTerm(...values: string[]): NodeSelectorTerm {
  return { matchExpressions: [{ key: HOSTNAME_LABEL, operator: 'In', values }] };
}

function volume(
  name: string,
  options: {
    terms?: NodeSelectorTerm[];
    phase?: 'Available' | 'Bound' | 'Released' | 'Pending' | 'Failed';
    policy?: string;
    className?: string;
    claim?: { namespace: string; name: string; uid: string };
    local?: boolean;
    deleting?: boolean;
  } = {},
): PersistentVolume {
  return {
    metadata: {
      name,
      uid: `uid-${name}`,
      ...(options.deleting === true ? { deletionTimestamp: '2026-12-01T00:00:00Z' } : {}),
    },
    spec: {
      storageClassName: options.className ?? 'local-storage',
      persistentVolumeReclaimPolicy: options.policy ?? 'Delete',
      ...(options.local === false ? { hostPath: { path: '/x' } } : { local: { path: `/mnt/disks/${name}` } }),
      nodeAffinity: { required: { nodeSelectorTerms: options.terms ?? [hostnameTerm('node-a')] } },
      ...(options.claim ? { claimRef: { kind: 'PersistentVolumeClaim', ...options.claim } } : {}),
    },
    status: { phase: options.phase ?? 'Available' },
  };
}

const node = (name: string, labels: Record<string, string> = { [HOSTNAME_LABEL]: name }): NodeFacts => ({
  name,
  labels,
});

describe('node affinity: which nodes can use a volume', () => {
  it('a node matches by its hostname label, which may differ from its name (upstream #434)', () => {
    const pv = volume('pv1', { terms: [hostnameTerm('ip-10-0-0-1')] });
    const affinity = volumeAffinity(pv);
    assert.equal(
      volumeHasNode(affinity, [node('ip-10-0-0-1.ec2.internal', { [HOSTNAME_LABEL]: 'ip-10-0-0-1' })]),
      true,
    );
    assert.equal(volumeHasNode(affinity, [node('ip-10-0-0-1', { [HOSTNAME_LABEL]: 'something-else' })]), false);
    assert.equal(volumeHasNode(affinity, []), false);
  });

  it('a node without a hostname label is taken to carry its name there', () => {
    const affinity = volumeAffinity(volume('pv1', { terms: [hostnameTerm('node-a')] }));
    assert.equal(volumeHasNode(affinity, [node('node-a', {})]), true);
  });

  it('extra selector terms are ORed: a shared disk reachable from another node is not stranded', () => {
    const shared = volume('pv1', {
      terms: [hostnameTerm('gone'), { matchExpressions: [{ key: 'rack', operator: 'In', values: ['r1'] }] }],
    });
    assert.equal(
      volumeHasNode(volumeAffinity(shared), [node('other', { [HOSTNAME_LABEL]: 'other', rack: 'r1' })]),
      true,
    );
    assert.equal(
      volumeHasNode(volumeAffinity(shared), [node('other', { [HOSTNAME_LABEL]: 'other', rack: 'r2' })]),
      false,
    );
    assert.deepEqual(namedHostnames(volumeAffinity(shared)), ['gone']);
  });

  it('operators: NotIn, Exists, DoesNotExist, Gt, Lt and matchFields on metadata.name', () => {
    const n = node('n1', { [HOSTNAME_LABEL]: 'n1', cores: '16', zone: 'a' });
    const matches = (term: NodeSelectorTerm): boolean => termMatches(term, n);
    assert.equal(matches({ matchExpressions: [{ key: 'zone', operator: 'NotIn', values: ['b'] }] }), true);
    assert.equal(matches({ matchExpressions: [{ key: 'zone', operator: 'Exists' }] }), true);
    assert.equal(matches({ matchExpressions: [{ key: 'gpu', operator: 'DoesNotExist' }] }), true);
    assert.equal(matches({ matchExpressions: [{ key: 'cores', operator: 'Gt', values: ['8'] }] }), true);
    assert.equal(matches({ matchExpressions: [{ key: 'cores', operator: 'Lt', values: ['8'] }] }), false);
    assert.equal(matches({ matchExpressions: [{ key: 'cores', operator: 'Gt', values: ['eight'] }] }), false);
    assert.equal(matches({ matchFields: [{ key: 'metadata.name', operator: 'In', values: ['n1'] }] }), true);
    assert.equal(matches({ matchFields: [{ key: 'metadata.uid', operator: 'In', values: ['n1'] }] }), false);
    assert.equal(matches({}), false, 'an empty term matches no node');
    assert.equal(matches({ matchExpressions: [{ key: 'zone', operator: 'Near', values: ['a'] }] }), false);
  });

  it('the alpha annotation is read; one that cannot be read counts as having a node (never act on it)', () => {
    const pv = volume('pv1');
    const { nodeAffinity: _unused, ...withoutAffinity } = pv.spec;
    assert.ok(_unused);
    const alpha = (text: string): PersistentVolume => ({
      metadata: { ...pv.metadata, annotations: { [ALPHA_NODE_AFFINITY_ANNOTATION]: text } },
      spec: withoutAffinity,
    });
    const good = alpha(
      JSON.stringify({ requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [hostnameTerm('x')] } }),
    );
    assert.equal(volumeHasNode(volumeAffinity(good), []), false);
    assert.equal(volumeHasNode(volumeAffinity(good), [node('x')]), true);
    for (const bad of [
      '{',
      '[]',
      '{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":1}]}]}}',
    ]) {
      const affinity = volumeAffinity(alpha(bad));
      assert.equal(affinity.kind, 'unreadable', bad);
      assert.equal(volumeHasNode(affinity, []), true, bad);
    }
    const none: PersistentVolume = { ...pv, spec: withoutAffinity };
    assert.equal(volumeHasNode(volumeAffinity(none), []), true, 'a PV pinned to no node is never stranded');
  });
});

describe('planStranded: the grace period', () => {
  it('a volume of a gone node is noticed at once and due only after the grace period', () => {
    const pvs = [volume('pv1', { phase: 'Bound', claim: { namespace: 'db', name: 'data-0', uid: 'c1' } })];
    const first = planStranded(pvs, [], new Map(), SETTINGS, 1_000);
    assert.deepEqual(
      first.steps.map((s) => s.kind),
      ['stranded'],
    );
    const [noticed] = first.steps;
    assert.ok(noticed?.kind === 'stranded');
    assert.deepEqual(noticed.claim, { namespace: 'db', name: 'data-0', uid: 'c1' });
    assert.equal(noticed.deadlineMs, 61_000);
    assert.deepEqual(noticed.nodes, ['node-a']);
    assert.deepEqual(planStranded(pvs, [], first.since, SETTINGS, 60_999).steps, []);
    assert.deepEqual(
      planStranded(pvs, [], first.since, SETTINGS, 61_000).steps.map((s) => s.kind),
      ['due'],
    );
  });

  it('a node that returns inside the grace period cancels it, and a later loss starts the clock again', () => {
    const pvs = [volume('pv1')];
    const gone = planStranded(pvs, [], new Map(), SETTINGS, 0);
    const back = planStranded(pvs, [node('node-a')], gone.since, SETTINGS, 30_000);
    assert.deepEqual(
      back.steps.map((s) => s.kind),
      ['returned'],
    );
    assert.equal(back.since.size, 0);
    const again = planStranded(pvs, [], back.since, SETTINGS, 50_000);
    assert.equal(planStranded(pvs, [], again.since, SETTINGS, 100_000).steps.length, 0);
    assert.equal(planStranded(pvs, [], again.since, SETTINGS, 110_000).steps[0]?.kind, 'due');
  });

  it('only local PVs of the opted-in classes, not being deleted, are looked at', () => {
    const pvs = [
      volume('other-class', { className: 'fast' }),
      volume('no-class', { className: '' }),
      volume('host-path', { local: false }),
      volume('deleting', { deleting: true }),
    ];
    assert.deepEqual(planStranded(pvs, [], new Map(), SETTINGS, 0).steps, []);
  });

  it('property: nothing is due before the grace period since first seen, nor ever while a node can use it', () => {
    const hostnames = ['a', 'b', 'c'];
    const pvs = hostnames.map((h) => volume(`pv-${h}`, { terms: [hostnameTerm(h)] }));
    const pass = fc.record({
      advanceMs: fc.integer({ min: 0, max: 40_000 }),
      present: fc.subarray(hostnames),
    });
    fc.assert(
      fc.property(fc.array(pass, { minLength: 1, maxLength: 20 }), (passes) => {
        let since: StrandedSince = new Map();
        let now = 0;
        // When each volume has been continuously without a node since (undefined: it has one).
        const goneSince = new Map<string, number>();
        for (const { advanceMs, present } of passes) {
          now += advanceMs;
          const nodes = present.map((h) => node(h));
          for (const h of hostnames) {
            if (present.includes(h)) goneSince.delete(h);
            else if (!goneSince.has(h)) goneSince.set(h, now);
          }
          const plan = planStranded(pvs, nodes, since, SETTINGS, now);
          for (const step of plan.steps.filter((s) => s.kind === 'due')) {
            const h = step.volume.name.slice('pv-'.length);
            assert.ok(!present.includes(h), `${h} is due while its node is there`);
            const start = goneSince.get(h);
            assert.ok(start !== undefined && now - start >= GRACE, `${h} due ${now - (start ?? now)} ms after it went`);
          }
          for (const h of hostnames) {
            const start = goneSince.get(h);
            const due = plan.steps.some((s) => s.kind === 'due' && s.volume.name === `pv-${h}`);
            if (start !== undefined && now - start >= GRACE) assert.ok(due, `${h} gone ${now - start} ms, not due`);
          }
          since = plan.since;
        }
      }),
    );
  });
});

describe('decideVolume (upstream controller_test / deleter_test cases)', () => {
  const claimRef = { namespace: 'db', name: 'data-0', uid: 'c1' };
  const bound = volume('pv1', { phase: 'Bound', claim: claimRef });
  const claim = (over: Partial<ClaimFacts> = {}): ClaimFacts => ({
    namespace: 'db',
    name: 'data-0',
    uid: 'c1',
    volumeName: 'pv1',
    deleting: false,
    ...over,
  });
  const pod = (over: Partial<PodFacts> = {}): PodFacts => ({
    name: 'db-0',
    nodeName: 'node-a',
    phase: 'Running',
    ...over,
  });

  it('a bound claim that points back at the volume is deleted', () => {
    assert.deepEqual(decideVolume(bound, claim(), []), { kind: 'delete-claim', claim: claimRef });
  });

  it('not when the claim is gone, points elsewhere, has another UID or is being deleted', () => {
    for (const c of [undefined, claim({ volumeName: 'pv2' }), claim({ uid: 'c2' }), claim({ deleting: true })]) {
      assert.equal(decideVolume(bound, c, []).kind, 'hold', JSON.stringify(c));
    }
  });

  it('never while a scheduled pod that has not finished uses the claim; a Pending unscheduled one does not hold it', () => {
    const held = decideVolume(bound, claim(), [pod()]);
    assert.ok(held.kind === 'hold');
    assert.match(held.reason, /used by pod db-0 on node node-a \(Running\)/u);
    assert.equal(decideVolume(bound, claim(), [pod({ phase: 'Pending' })]).kind, 'hold');
    assert.equal(decideVolume(bound, claim(), [pod({ nodeName: undefined, phase: 'Pending' })]).kind, 'delete-claim');
    assert.equal(
      decideVolume(bound, claim(), [pod({ phase: 'Succeeded' }), pod({ phase: 'Failed' })]).kind,
      'delete-claim',
    );
  });

  it('the volume itself: Available, or Released with Delete; never Retain, Pending, Failed', () => {
    assert.deepEqual(decideVolume(volume('a', { phase: 'Available' }), undefined, []), {
      kind: 'delete-volume',
      phase: 'Available',
    });
    assert.deepEqual(decideVolume(volume('r', { phase: 'Released', claim: claimRef }), undefined, []), {
      kind: 'delete-volume',
      phase: 'Released',
    });
    for (const pv of [
      volume('retain', { phase: 'Released', policy: 'Retain', claim: claimRef }),
      volume('pending', { phase: 'Pending' }),
      volume('failed', { phase: 'Failed' }),
    ]) {
      assert.equal(decideVolume(pv, undefined, []).kind, 'hold', pv.metadata.name);
    }
  });
});
