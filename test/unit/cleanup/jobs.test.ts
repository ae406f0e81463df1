// Cleanup Jobs: upstream's shape, and with a disk identity the class's cleaner behind the guard
// (`provisioner clean-block`), which the agent recognises again when it adopts the Job.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  buildCleanupJob,
  cleanerCommandOfJob,
  GUARD_COMMAND,
  guardedJobIdentity,
  identityOfJob,
  JOB_IDENTITY_ANNOTATION,
} from '../../../src/core/cleanup/jobs.js';
import type { CleanupJobInput } from '../../../src/core/cleanup/jobs.js';
import { snapshotFromFileText } from '../../../src/core/config/decode/layout.js';
import { parseConfigSnapshot } from '../../../src/core/config/decode/parse.js';
import type { ClassConfig } from '../../../src/core/config/model.js';
import type { Job } from '../../../src/core/kube/objects.js';

const CONFIG = parseConfigSnapshot(
  snapshotFromFileText(
    'c.yaml',
    'storageClassMap:\n  raw:\n    hostDir: /dev/lvp\n    mountDir: /dev/lvp\n    volumeMode: Block\n    blockCleanerCommand: ["/scripts/shred.sh", "2"]\nuseJobForCleaning: true\n',
  ),
).config;
const RAW = ((): ClassConfig => {
  const raw = CONFIG.storageClassMap['raw'];
  assert.ok(raw);
  return raw;
})();

function input(identity?: string): CleanupJobInput {
  return {
    pvName: 'local-pv-1',
    pvUid: 'uid-1',
    nodeName: 'node-a',
    namespace: 'kube-system',
    image: 'provisioner:test',
    classConfig: RAW,
    config: CONFIG,
    devicePath: '/dev/loop9',
    startTime: '2024-01-01T00:00:00.000Z',
    ...(identity !== undefined ? { identity } : {}),
  };
}

const container = (job: Job) => job.spec?.template.spec.containers[0];

describe('buildCleanupJob', () => {
  it('with an identity: the guard wraps the class cleaner; the env, labels, name and mounts stay upstream’s', () => {
    const job = buildCleanupJob(input('serial:S1'));
    const plain = buildCleanupJob(input());
    assert.deepEqual(GUARD_COMMAND, ['provisioner', 'clean-block']);
    assert.deepEqual(container(job)?.command, [
      'provisioner',
      'clean-block',
      '--device',
      '/dev/loop9',
      '--identity',
      'serial:S1',
      '--',
      '/scripts/shred.sh',
      '2',
    ]);
    assert.deepEqual(container(job)?.env, [{ name: 'LOCAL_PV_BLKDEVICE', value: '/dev/loop9' }]);
    assert.equal(job.metadata.name, 'cleanup-local-pv-1');
    assert.deepEqual(job.metadata.labels, plain.metadata.labels);
    assert.deepEqual(job.metadata.annotations, {
      device: '/dev/loop9',
      'start-time': '2024-01-01T00:00:00.000Z',
      [JOB_IDENTITY_ANNOTATION]: 'serial:S1',
    });
    const withoutCommand = (j: Job) => ({ ...container(j), command: undefined });
    assert.deepEqual(withoutCommand(job), withoutCommand(plain), 'only the command differs');
    assert.equal(guardedJobIdentity(job), 'serial:S1');
    assert.deepEqual(identityOfJob(job), { identity: 'serial:S1' });
    assert.deepEqual(cleanerCommandOfJob(job), ['/scripts/shred.sh', '2'], 'the class cleaner, for cleanup_command');
  });

  it('`none` is passed as is: the guard then requires a disk without identity', () => {
    const job = buildCleanupJob(input('none'));
    assert.deepEqual(container(job)?.command?.slice(2, 7), ['--device', '/dev/loop9', '--identity', 'none', '--']);
    assert.equal(guardedJobIdentity(job), 'none');
  });

  it('without an identity: the class cleaner alone, as upstream (no annotation, not guarded)', () => {
    const job = buildCleanupJob(input());
    assert.deepEqual(container(job)?.command, ['/scripts/shred.sh', '2']);
    assert.deepEqual(job.metadata.annotations, { device: '/dev/loop9', 'start-time': '2024-01-01T00:00:00.000Z' });
    assert.equal(guardedJobIdentity(job), undefined);
    assert.deepEqual(identityOfJob(job), {});
    assert.deepEqual(cleanerCommandOfJob(job), ['/scripts/shred.sh', '2']);
  });
});

describe('reading an adopted Job', () => {
  const withCommand = (command: string[], annotations: Record<string, string> = {}): Job => {
    const job = buildCleanupJob(input());
    const first = container(job);
    assert.ok(first);
    return {
      ...job,
      metadata: { ...job.metadata, annotations: { ...job.metadata.annotations, ...annotations } },
      spec: { template: { spec: { ...job.spec?.template.spec, containers: [{ ...first, command }] } } },
    };
  };

  it('cleanerCommandOfJob: the cleaner after the guard’s `--`, even when the cleaner has a `--` of its own', () => {
    const cleaner = ['/bin/sh', '-c', 'exec "$@"', '--', 'dd', 'if=/dev/zero'];
    const job = buildCleanupJob({ ...input('wwid:naa.1'), classConfig: { ...RAW, blockCleanerCommand: cleaner } });
    assert.deepEqual(cleanerCommandOfJob(job), cleaner);
    assert.equal(guardedJobIdentity(job), 'wwid:naa.1');
    assert.deepEqual(cleanerCommandOfJob(withCommand([])), []);
    assert.deepEqual(cleanerCommandOfJob(withCommand(['provisioner', 'clean-block', '--device', '/dev/x'])), []);
  });

  it('guardedJobIdentity: what the guard was told (the command), not an annotation edited since', () => {
    const guarded = ['provisioner', 'clean-block', '--device', '/dev/x', '--identity', 'serial:A', '--', 'wipe'];
    assert.equal(guardedJobIdentity(withCommand(guarded, { [JOB_IDENTITY_ANNOTATION]: 'serial:B' })), 'serial:A');
    assert.equal(
      guardedJobIdentity(
        withCommand(['provisioner', 'clean-block', '--identity=serial:C', '--device', '/dev/x', '--', 'w']),
      ),
      'serial:C',
    );
    // An upstream Job (the cleaner alone) checked nothing, whatever its annotations say.
    assert.equal(guardedJobIdentity(withCommand(['wipe'], { [JOB_IDENTITY_ANNOTATION]: 'serial:A' })), undefined);
    // The guard's flags end at `--`: an `--identity` of the cleaner is not the guard's.
    assert.equal(
      guardedJobIdentity(withCommand(['provisioner', 'clean-block', '--', 'w', '--identity', 'x'])),
      undefined,
    );
  });
});
