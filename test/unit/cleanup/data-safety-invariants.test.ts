// The invariant checker of the integration tests (test/support/data-safety-invariants.ts): its
// rules over sequences of PV lists, each with a case that must be reported and the legitimate
// neighbours that must not; a property over random legitimate histories (any subset of their states
// listed: no violation) and the same histories with one disk published twice (reported once
// listed); the polling checker with a fake list, its probes and its stop.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { PersistentVolume } from '../../../src/core/kube/objects.js';
import { IDENTITY_ACTION_ANNOTATION, IDENTITY_ANNOTATION } from '../../../src/core/pv/identity.js';
import { HOSTNAME_LABEL, NODE_LABEL } from '../../../src/core/pv/naming.js';
import {
  InvariantRules,
  startInvariantChecker,
  type PvLike,
  type Violation,
} from '../../support/data-safety-invariants.js';

const NODE = 'node-a';
const T0 = Date.parse('2030-01-01T00:00:00Z');
/** An RFC 3339 timestamp as the apiserver writes it (whole seconds). */
const at = (ms: number): string => new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');

interface PvSpec {
  readonly name: string;
  readonly uid: string;
  readonly identity?: string;
  readonly node?: string;
  readonly phase?: string;
  readonly createdMs?: number;
  readonly deletionMs?: number;
  readonly accept?: boolean;
}

function pv(s: PvSpec): PersistentVolume {
  const annotations: Record<string, string> = {};
  if (s.identity !== undefined) annotations[IDENTITY_ANNOTATION] = s.identity;
  if (s.accept === true) annotations[IDENTITY_ACTION_ANNOTATION] = 'accept';
  return {
    metadata: {
      name: s.name,
      uid: s.uid,
      labels: { [NODE_LABEL]: s.node ?? NODE },
      annotations,
      creationTimestamp: at(s.createdMs ?? T0),
      ...(s.deletionMs !== undefined ? { deletionTimestamp: at(s.deletionMs) } : {}),
    },
    spec: { local: { path: `/mnt/disks/${s.name}` } },
    status: { phase: (s.phase ?? 'Available') as 'Available' },
  };
}

/** The violations of a sequence of lists, in order. */
function run(lists: readonly (readonly PvLike[])[], setup?: (rules: InvariantRules) => void): Violation[] {
  const rules = new InvariantRules();
  setup?.(rules);
  for (const list of lists) rules.observe(list, [NODE, 'node-b']);
  return [...rules.violations];
}

const rulesOf = (violations: readonly Violation[]): string[] => violations.map((v) => v.rule);

describe('the outside rule: a PV of the node for a path that is no entry of a discovery directory', () => {
  const rules = (dirs: readonly string[]): InvariantRules => new InvariantRules({ discoveryDirs: () => dirs });
  it('is reported once, naming the PV and the directories', () => {
    const r = rules(['/mnt/other']);
    const list = [pv({ name: 'a', uid: 'u1', identity: 'dev:1' })];
    r.observe(list, [NODE]);
    r.observe(list, [NODE]);
    assert.equal(r.violations.length, 1);
    assert.equal(r.violations[0]?.rule, 'outside');
    assert.match(r.violations.map((v) => v.message).join(), /\/mnt\/disks\/a,.*\(\/mnt\/other\)/);
  });
  it('is not reported for an entry of a directory, nor for a subdirectory path of one only when it is an entry', () => {
    const r = rules(['/mnt/disks']);
    r.observe([pv({ name: 'a', uid: 'u1', identity: 'dev:1' })], [NODE]);
    assert.deepEqual(r.violations, []);
    const nested = rules(['/mnt']);
    nested.observe([pv({ name: 'a', uid: 'u1', identity: 'dev:1' })], [NODE]);
    assert.equal(nested.violations.length, 1, 'a path two levels down is no entry of /mnt');
  });
  it('is not checked without discoveryDirs, nor for PVs of other nodes', () => {
    const r = new InvariantRules();
    r.observe([pv({ name: 'a', uid: 'u1' })], [NODE]);
    assert.deepEqual(r.violations, []);
    const other = rules(['/elsewhere']);
    other.observe([pv({ name: 'a', uid: 'u1', node: 'node-z' })], [NODE]);
    assert.deepEqual(other.violations, []);
  });
});

describe('the invariant checker: its rules over PV lists', () => {
  it('I2: two PVs of one node recording one disk, named with their identity; reported once', () => {
    const a = pv({ name: 'pv-a', uid: 'u-a', identity: 'fs-uuid:1111', phase: 'Bound' });
    const b = pv({ name: 'pv-b', uid: 'u-b', identity: 'fs-uuid:1111' });
    const found = run([[a], [a, b], [a, b]]);
    assert.deepEqual(rulesOf(found), ['I2']);
    assert.match(found[0]?.message ?? '', /pv-a \(uid u-a, Bound, .*fs-uuid:1111\).*pv-b \(uid u-b, Available/);
    assert.deepEqual(found[0]?.pvs, ['pv-a', 'pv-b']);
  });

  it('I2 whatever the phase: a PV being deleted still holds its disk', () => {
    const a = pv({ name: 'pv-a', uid: 'u-a', identity: 'fs-uuid:1111', deletionMs: T0 + 5000 });
    const b = pv({ name: 'pv-b', uid: 'u-b', identity: 'fs-uuid:1111', createdMs: T0 + 9000 });
    assert.deepEqual(rulesOf(run([[a], [a, b]])), ['I2']);
  });

  it('I2 with a legacy loop record: it names the disk its extension with a birth names', () => {
    const a = pv({ name: 'pv-a', uid: 'u-a', identity: 'loop:7:0:12' });
    const b = pv({ name: 'pv-b', uid: 'u-b', identity: 'loop:7:0:12:1700000000000000000' });
    assert.deepEqual(rulesOf(run([[a, b]])), ['I2']);
    // the same numbers with another inode: another disk
    const c = pv({ name: 'pv-c', uid: 'u-c', identity: 'loop:7:0:13:1700000000000000000' });
    assert.deepEqual(run([[a, c]]), []);
  });

  it('not I2: `none` and unrecorded identities, other disks, the same disk on two nodes, other nodes’ PVs', () => {
    const lists = [
      [
        pv({ name: 'pv-a', uid: 'u-a', identity: 'none' }),
        pv({ name: 'pv-b', uid: 'u-b', identity: 'none' }),
        pv({ name: 'pv-c', uid: 'u-c' }),
        pv({ name: 'pv-d', uid: 'u-d' }),
        pv({ name: 'pv-e', uid: 'u-e', identity: 'wwid:1' }),
        pv({ name: 'pv-f', uid: 'u-f', identity: 'wwid:2' }),
        pv({ name: 'pv-g', uid: 'u-g', identity: 'wwid:1', node: 'node-b' }),
        pv({ name: 'pv-h', uid: 'u-h', identity: 'wwid:2', node: 'node-z' }),
      ],
    ];
    assert.deepEqual(run(lists), []);
  });

  it('a PV of the node found by its node affinity when it has no node label', () => {
    const a = pv({ name: 'pv-a', uid: 'u-a', identity: 'wwid:1' });
    const b: PersistentVolume = {
      metadata: { name: 'pv-b', uid: 'u-b', annotations: { [IDENTITY_ANNOTATION]: 'wwid:1' } },
      spec: {
        nodeAffinity: {
          required: {
            nodeSelectorTerms: [{ matchExpressions: [{ key: HOSTNAME_LABEL, operator: 'In', values: [NODE] }] }],
          },
        },
      },
    };
    assert.deepEqual(rulesOf(run([[a, b]])), ['I2']);
  });

  it('I2 over time: created before the other PV of its disk was marked for deletion, never listed together', () => {
    const a = { name: 'pv-a', uid: 'u-a', identity: 'fs-uuid:1111', createdMs: T0 };
    const seenDeleting = pv({ ...a, deletionMs: T0 + 5000 });
    const early = pv({ name: 'pv-b', uid: 'u-b', identity: 'fs-uuid:1111', createdMs: T0 + 3999 });
    const found = run([[pv(a)], [seenDeleting], [early]]);
    assert.deepEqual(rulesOf(found), ['I2-time']);
    assert.match(
      found[0]?.message ?? '',
      /pv-b .* was created at \S*:03\.000Z, before pv-a .* marked for deletion at \S*:05\.000Z/,
    );
    // created in the second it was marked, or later: no evidence (the timestamps are whole seconds)
    const sameSecond = pv({ name: 'pv-b', uid: 'u-b', identity: 'fs-uuid:1111', createdMs: T0 + 5500 });
    assert.deepEqual(run([[pv(a)], [seenDeleting], [sameSecond]]), []);
    // never seen with a deletion timestamp: no evidence either
    assert.deepEqual(run([[pv(a)], [early]]), []);
  });

  it('I3: republished under its name for another disk; not when the same disk, nor after an accept', () => {
    const before = pv({ name: 'pv-a', uid: 'u-1', identity: 'loop:7:0:12:100', phase: 'Released' });
    const other = pv({ name: 'pv-a', uid: 'u-2', identity: 'loop:7:0:99:200' });
    const found = run([[before], [], [other]]);
    assert.deepEqual(rulesOf(found), ['I3']);
    assert.match(
      found[0]?.message ?? '',
      /deleted object pv-a \(uid u-1, Released, .*loop:7:0:12:100\).*new one pv-a \(uid u-2, .*loop:7:0:99:200\)/,
    );
    // the same disk republished (directly, or a legacy record republished with its birth)
    assert.deepEqual(run([[before], [pv({ name: 'pv-a', uid: 'u-2', identity: 'loop:7:0:12:100' })]]), []);
    const legacy = pv({ name: 'pv-a', uid: 'u-1', identity: 'loop:7:0:12' });
    assert.deepEqual(run([[legacy], [pv({ name: 'pv-a', uid: 'u-2', identity: 'loop:7:0:12:100' })]]), []);
    // the operator's accept seen on the deleted object, or declared by the test
    assert.deepEqual(run([[pv({ name: 'pv-a', uid: 'u-1', identity: 'loop:7:0:12:100', accept: true })], [other]]), []);
    assert.deepEqual(
      run([[before], [other]], (rules) => {
        rules.operatorAccepts('u-1');
      }),
      [],
    );
    // off for a test that swaps disks at entries between a deletion and the republish
    const rules = new InvariantRules({ republishKeepsDisk: false });
    rules.observe([before], [NODE]);
    rules.observe([other], [NODE]);
    assert.deepEqual(rules.violations, []);
  });

  it('rewrite: the recorded disk changed in place without accept; not a first record, a legacy extension, an accept', () => {
    const a = { name: 'pv-a', uid: 'u-a' };
    assert.deepEqual(rulesOf(run([[pv({ ...a, identity: 'wwid:1' })], [pv({ ...a, identity: 'wwid:2' })]])), [
      'rewrite',
    ]);
    assert.deepEqual(rulesOf(run([[pv({ ...a, identity: 'none' })], [pv({ ...a, identity: 'wwid:2' })]])), ['rewrite']);
    assert.deepEqual(run([[pv(a)], [pv({ ...a, identity: 'wwid:2' })]]), []);
    assert.deepEqual(run([[pv({ ...a, identity: 'loop:7:0:12' })], [pv({ ...a, identity: 'loop:7:0:12:5' })]]), []);
    assert.deepEqual(run([[pv({ ...a, identity: 'wwid:1', accept: true })], [pv({ ...a, identity: 'wwid:2' })]]), []);
    assert.deepEqual(
      run([[pv({ ...a, identity: 'wwid:1' })], [pv({ ...a, identity: 'wwid:2' })]], (rules) => {
        rules.operatorAccepts('u-a');
      }),
      [],
    );
  });
});

// ---- random histories ----------------------------------------------------------------------------

/** A step of a node's history: what the agent (and the pv-protection controller) may do. */
type Step =
  | { readonly op: 'publish'; readonly node: number; readonly entry: number; readonly disk: number }
  | { readonly op: 'markDeleted' | 'remove'; readonly node: number; readonly entry: number }
  | { readonly op: 'accept'; readonly node: number; readonly entry: number; readonly disk: number }
  | { readonly op: 'tick'; readonly ms: number };

const NODES = ['node-a', 'node-b'];
const stepArb: fc.Arbitrary<Step> = fc.oneof(
  fc.record({ op: fc.constant('publish' as const), node: fc.nat(1), entry: fc.nat(3), disk: fc.nat(3) }),
  fc.record({ op: fc.constantFrom('markDeleted' as const, 'remove' as const), node: fc.nat(1), entry: fc.nat(3) }),
  fc.record({ op: fc.constant('accept' as const), node: fc.nat(1), entry: fc.nat(3), disk: fc.nat(3) }),
  fc.record({ op: fc.constant('tick' as const), ms: fc.integer({ min: 1, max: 3000 }) }),
);

interface ModelPv {
  readonly name: string;
  readonly uid: string;
  readonly node: string;
  disk: number;
  readonly createdMs: number;
  deletionMs?: number;
}

/**
 * Plays the steps as a correct agent would (a step it would refuse is skipped): a disk recorded on
 * a PV of the node, whatever its phase, is never published; an entry is republished with the disk
 * its last PV recorded; accept re-records only a disk no other PV holds. After each step the state
 * is listed or not (`listed`); `doubleAt` publishes one disk twice at that step, once.
 */
function playHistory(
  steps: readonly Step[],
  listed: readonly boolean[],
  doubleAt?: number,
): { rules: InvariantRules; doubleListed: boolean } {
  const rules = new InvariantRules();
  const pvs = new Map<string, ModelPv>();
  const lastDisk = new Map<string, number>();
  let clock = T0;
  let uids = 0;
  let doubleListed = false;
  let doubled = false;
  const identity = (disk: number): string => `fs-uuid:disk-${disk}`;
  const holder = (node: string, disk: number): ModelPv | undefined =>
    [...pvs.values()].find((p) => p.node === node && p.disk === disk);
  const list = (): PersistentVolume[] =>
    [...pvs.values()].map((p) =>
      pv({
        name: p.name,
        uid: p.uid,
        node: p.node,
        identity: identity(p.disk),
        createdMs: p.createdMs,
        ...(p.deletionMs !== undefined ? { deletionMs: p.deletionMs } : {}),
      }),
    );
  steps.forEach((step, i) => {
    let justDoubled = false;
    if (step.op === 'tick') {
      clock += step.ms;
    } else {
      const node = NODES[step.node] ?? NODE;
      const name = `pv-${node}-e${step.entry}`;
      const current = pvs.get(name);
      if (step.op === 'publish' && current === undefined) {
        const disk = lastDisk.get(name) ?? step.disk;
        const held = holder(node, disk);
        if (held === undefined || (doubleAt !== undefined && i >= doubleAt && !doubled)) {
          if (held !== undefined) {
            doubled = true;
            justDoubled = true;
          }
          pvs.set(name, { name, uid: `u${++uids}`, node, disk, createdMs: clock });
          lastDisk.set(name, disk);
        }
      } else if (step.op === 'markDeleted' && current !== undefined) {
        current.deletionMs ??= clock;
      } else if (step.op === 'remove' && current !== undefined) {
        pvs.delete(name);
      } else if (step.op === 'accept' && current !== undefined && holder(node, step.disk) === undefined) {
        rules.operatorAccepts(current.uid);
        current.disk = step.disk;
        lastDisk.set(name, step.disk);
      }
    }
    if (listed[i] === true || justDoubled) {
      rules.observe(list(), NODES);
      if (justDoubled) doubleListed = true;
    }
  });
  return { rules, doubleListed };
}

describe('the invariant checker over random histories', () => {
  const history = fc
    .array(stepArb, { minLength: 1, maxLength: 60 })
    .chain((steps) =>
      fc.tuple(fc.constant(steps), fc.array(fc.boolean(), { minLength: steps.length, maxLength: steps.length })),
    );

  it('a correct agent’s history, listed at any subset of its states: no violation', () => {
    fc.assert(
      fc.property(history, ([steps, listed]) => {
        assert.deepEqual(playHistory(steps, listed).rules.violations, []);
      }),
      { numRuns: 500 },
    );
  });

  it('the same with one disk published twice on a node: reported as I2 once listed', () => {
    fc.assert(
      fc.property(history, fc.nat(59), ([steps, listed], doubleAt) => {
        const { rules, doubleListed } = playHistory(steps, listed, doubleAt);
        fc.pre(doubleListed);
        const i2 = rules.violations.filter((v) => v.rule === 'I2');
        assert.equal(i2.length >= 1, true, JSON.stringify(rules.violations));
        assert.match(i2[0]?.message ?? '', /one disk backs two PVs: .*fs-uuid:disk-\d.* and .*fs-uuid:disk-\d/);
      }),
      { numRuns: 500 },
    );
  });
});

// ---- the polling checker ---------------------------------------------------------------------------

describe('the polling checker', () => {
  it('lists until stopped, reports what its rules find, counts the lists and the failures', async () => {
    const a = pv({ name: 'pv-a', uid: 'u-a', identity: 'wwid:1' });
    const b = pv({ name: 'pv-b', uid: 'u-b', identity: 'wwid:1' });
    let calls = 0;
    const seen: Violation[] = [];
    const checker = startInvariantChecker({
      listPersistentVolumes: () => {
        calls += 1;
        if (calls === 2) return Promise.reject(new Error('apiserver gone'));
        return Promise.resolve(calls < 4 ? [a] : [a, b]);
      },
      node: NODE,
      intervalMs: 5,
      onViolation: (v) => seen.push(v),
    });
    while (checker.report().polls < 6) await new Promise((resolve) => setTimeout(resolve, 5));
    const report = await checker.stop();
    assert.ok(report.polls >= 6);
    assert.equal(report.errors, 1);
    assert.equal(report.lastError, 'apiserver gone');
    assert.deepEqual(rulesOf(report.violations), ['I2']);
    assert.deepEqual(seen, report.violations);
    const after = calls;
    await new Promise((resolve) => setTimeout(resolve, 30));
    assert.equal(calls, after, 'no list after stop');
  });

  it('a republished volume still holding its tenant’s token is a violation; a wiped one is not', async () => {
    const tenant = { name: 'pv-a', uid: 'u-1' };
    let lists: PersistentVolume[][] = [[pv({ ...tenant, identity: 'wwid:1', phase: 'Bound' })]];
    const checker = startInvariantChecker({
      listPersistentVolumes: () => Promise.resolve(lists[0] ?? []),
      node: NODE,
      intervalMs: 5,
    });
    const dirty = checker.expectWipedOnRepublish(tenant, 'the token', () => true);
    const clean = checker.expectWipedOnRepublish({ name: 'pv-b', uid: 'u-3' }, 'the token', () => false);
    const never = checker.expectWipedOnRepublish({ name: 'pv-c', uid: 'u-4' }, 'the token', () => true);
    lists = [
      [pv({ name: 'pv-a', uid: 'u-2', identity: 'wwid:1' }), pv({ name: 'pv-b', uid: 'u-5', identity: 'wwid:2' })],
    ];
    assert.deepEqual(await dirty, { checked: true, republishedUid: 'u-2', tokenFound: true });
    assert.deepEqual(await clean, { checked: true, republishedUid: 'u-5', tokenFound: false });
    const report = await checker.stop();
    assert.deepEqual(await never, { checked: false, reason: 'the checker stopped before pv-c was republished' });
    assert.deepEqual(rulesOf(report.violations), ['wiped']);
    assert.match(report.violations[0]?.message ?? '', /pv-a was republished \(uid u-1 → u-2\) while the token/);
  });

  it('stops with the signal it was given', async () => {
    const abort = new AbortController();
    const checker = startInvariantChecker({
      listPersistentVolumes: () => Promise.resolve([]),
      node: () => [NODE],
      intervalMs: 5,
      signal: abort.signal,
    });
    while (checker.report().polls < 2) await new Promise((resolve) => setTimeout(resolve, 5));
    abort.abort();
    const report = await checker.stop();
    assert.deepEqual(report.violations, []);
    assert.ok(report.polls >= 2);
  });
});
