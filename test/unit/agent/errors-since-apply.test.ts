// The count of error Events since the config serving now was applied: which reasons count, the
// cap, and the reset on another config (not on the same one again).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ErrorsSinceApply, MAX_ERRORS_SINCE_APPLY } from '../../../src/core/agent/errors-since-apply.js';
import type { EventSink } from '../../../src/core/kube/events.js';

const NODE = { apiVersion: 'v1', kind: 'Node', name: 'node-a' };

describe('errors since apply', () => {
  it('counts DiscoveryFailed and VolumeFailedDelete Warnings, passes every event on, resets on another config', () => {
    const recorded: string[] = [];
    const inner: EventSink = { record: (_o, _t, reason) => recorded.push(reason) };
    const errors = new ErrorsSinceApply();
    errors.applying('sha256:a');
    const sink = errors.counting(() => inner);
    sink.record(NODE, 'Warning', 'DiscoveryFailed', 'storage class slow: cannot read');
    sink.record(NODE, 'Warning', 'VolumeFailedDelete', 'Error cleaning PV');
    sink.record(NODE, 'Warning', 'VolumeDiscoverySkipped', '/mnt/fast/x: not a mount point');
    sink.record(NODE, 'Warning', 'ConfigRefused', 'not a discovery or cleanup failure');
    sink.record(NODE, 'Normal', 'DiscoveryFailed', 'not a Warning');
    assert.equal(errors.count, 2);
    assert.deepEqual(recorded, [
      'DiscoveryFailed',
      'VolumeFailedDelete',
      'VolumeDiscoverySkipped',
      'ConfigRefused',
      'DiscoveryFailed',
    ]);
    errors.applying('sha256:a');
    assert.equal(errors.count, 2, 'the same config again (a forced reload, a noop) keeps the count');
    errors.applying('sha256:b');
    assert.equal(errors.count, 0, 'another config starts from 0');
  });

  it('a failure the previous config recorded too is not new: it does not count', () => {
    const errors = new ErrorsSinceApply();
    const sink = errors.counting(() => ({ record: () => undefined }));
    errors.applying('sha256:stable');
    sink.record(NODE, 'Warning', 'DiscoveryFailed', 'storage class slow: StorageClass slow not found');
    errors.applying('sha256:candidate');
    sink.record(NODE, 'Warning', 'DiscoveryFailed', 'storage class slow: StorageClass slow not found');
    assert.equal(errors.count, 0, 'the standing failure');
    sink.record(NODE, 'Warning', 'DiscoveryFailed', 'storage class extra: cannot read discovery directory');
    assert.equal(errors.count, 1, 'the new one');
    errors.applying('sha256:next');
    sink.record(NODE, 'Warning', 'DiscoveryFailed', 'storage class extra: cannot read discovery directory');
    assert.equal(errors.count, 0, 'only the config just before counts as before');
  });

  it('stops at the cap', () => {
    const errors = new ErrorsSinceApply();
    const sink = errors.counting(() => ({ record: () => undefined }));
    for (let i = 0; i < MAX_ERRORS_SINCE_APPLY + 5; i++) sink.record(NODE, 'Warning', 'DiscoveryFailed', 'x');
    assert.equal(errors.count, MAX_ERRORS_SINCE_APPLY);
  });
});
