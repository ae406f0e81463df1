// The words of the timeline (src/render/simulate-timeline.ts), from the report's data alone: one
// sentence per step and per action, a reload's lines, and the JSON action with its keys in order.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { StepOutcome, TimelineAction } from '../../../src/core/simulate/report.js';
import { actionJson, describeAction, stepSummary, virtualTime } from '../../../src/render/simulate-timeline.js';
import { painter, plural, shortHash } from '../../../src/render/text.js';

const HASH = `sha256:${'ab'.repeat(32)}`;

describe('simulate: the words of the timeline', () => {
  it('one sentence per step', () => {
    const cases: [StepOutcome, string][] = [
      [{ type: 'start', node: 'node-a', disks: 1, classes: 2 }, 'node node-a: 1 disk, 2 classes configured'],
      [
        { type: 'disk added', volume: 'fast/d', path: '/mnt/fast/d', entryType: 'directory', mounted: false },
        'fast/d (directory, not mounted) at /mnt/fast/d',
      ],
      [
        {
          type: 'disk added',
          volume: 'fast/b',
          path: '/mnt/fast/b',
          entryType: 'block',
          mounted: false,
          capacity: 5 * 2 ** 30,
        },
        'fast/b (block, 5Gi) at /mnt/fast/b',
      ],
      [{ type: 'claim released', pv: 'p', volume: 'fast/d' }, 'the claim deleted: p (fast/d) is Released'],
      [{ type: 'config changed', config: { kind: 'inline', keys: ['a', 'b'] } }, "the ConfigMap's keys a, b changed"],
      [
        { type: 'reload requested', allow: ['orphans-pvs'], force: true },
        'the operator runs provisioner reload --allow orphans-pvs --force',
      ],
      [
        { type: 'cleanup is slow', volume: 'fast/d', durationMs: Number.POSITIVE_INFINITY, then: 'succeed' },
        'cleanups of fast/d take forever',
      ],
      [
        { type: 'cleanup fails', volume: 'fast/d', message: 'boom', finishedRunning: true },
        'the running cleanup of fast/d finishes now; cleanups of it fail ("boom")',
      ],
      [{ type: 'job fails', job: 'cleanup-p' }, 'Job cleanup-p failed'],
      [{ type: 'time passes', durationMs: 90_000 }, '1m30s of virtual time go by'],
    ];
    for (const [step, text] of cases) assert.equal(stepSummary(step), text);
  });

  it('one sentence per action; a reload lists its changes, or the problems of a rejected config', () => {
    const cases: [TimelineAction, string][] = [
      [
        { at: 0, type: 'agent-started', generation: 1, configHash: HASH, adopted: 2 },
        `agent started: generation 1 serves sha256:abababababab, adopted 2 PVs`,
      ],
      [
        { at: 0, type: 'agent-stopped', cleanupsInFlight: 1 },
        'agent stopped (1 cleanup in flight); its cleanup table is gone with it',
      ],
      [
        { at: 0, type: 'pv-created', pv: 'p', volume: 'fast/d', volumeMode: 'Filesystem' },
        'created PV p for fast/d (?, Filesystem)',
      ],
      [{ at: 0, type: 'job-created', job: 'j', command: ['a', 'b'] }, 'cleanup started: Job j runs a b on ? (image ?)'],
      [
        { at: 0, type: 'cleanup-failed', pv: 'p', error: 'no Job image' },
        'cleanup of PV p could not start: no Job image',
      ],
      [{ at: 0, type: 'cleanup-failed', volume: 'fast/d', error: 'boom' }, 'cleanup of fast/d failed: boom'],
      [{ at: 0, type: 'log', level: 'warn', message: 'odd', fields: { n: 2, s: 'x' } }, 'warn: odd (n=2, s=x)'],
    ];
    for (const [action, text] of cases) assert.deepEqual(describeAction(action), { summary: text });
    const rejected = describeAction({
      at: 0,
      type: 'reload',
      outcome: 'rejected',
      generation: 2,
      appliedHash: HASH,
      changes: [],
      problems: [{ severity: 'error', path: 'a', message: 'bad', position: { file: 'mine.yaml', line: 3 } }],
    });
    assert.deepEqual(rejected, {
      summary: 'reload rejected: 1 problem; generation 2 keeps serving sha256:abababababab',
      details: ['mine.yaml:3: a: bad'],
    });
    const refused = describeAction({
      at: 0,
      type: 'reload',
      outcome: 'refused',
      generation: 1,
      appliedHash: HASH,
      changes: [{ path: 'storageClassMap.x', action: 'removed', impact: 'orphans-pvs', summary: 'gone' }],
      problems: [],
      error: 'guarded',
      needsAllow: ['orphans-pvs'],
    });
    assert.deepEqual(refused.details, ['guarded', 'storageClassMap.x [orphans-pvs] gone']);
  });

  it("the JSON action keeps the report's key order: the cleaner's events name the volume first", () => {
    const keys = (a: TimelineAction): string[] => Object.keys(actionJson(a));
    assert.deepEqual(keys({ at: 1000, type: 'cleanup-succeeded', volume: 'fast/d', pv: 'p' }), [
      'at',
      'volume',
      'pv',
      'type',
      'summary',
      'time',
    ]);
    assert.deepEqual(keys({ at: 0, type: 'pv-created', pv: 'p', volume: 'fast/d', volumeMode: 'Block' }), [
      'at',
      'type',
      'pv',
      'volume',
      'summary',
      'time',
    ]);
    assert.equal(actionJson({ at: 61_000, type: 'pv-deleted', pv: 'p' }).time, '+1m1s');
    assert.equal(virtualTime(0), '+0s');
  });

  it('the shared text pieces: colours or none, counted nouns, short hashes', () => {
    assert.equal(painter(false).red('x'), 'x');
    assert.equal(painter(true).red('x'), '\u001b[31mx\u001b[0m');
    assert.equal(plural(2, 'class', 'classes'), '2 classes');
    assert.equal(plural(1, 'PV'), '1 PV');
    assert.equal(shortHash(HASH), 'sha256:abababababab');
  });
});
