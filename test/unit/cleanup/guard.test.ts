// The Job's guard (`provisioner clean-block`'s core) with the in-memory node and cleaner: the
// cleaner runs only on the expected disk, and a disk swapped in while it runs makes the cleanup
// not count; every refusal is a typed error with its exit code.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MemoryCleaner } from '../../../src/core/cleanup/cleaner.js';
import type { RecordedClean } from '../../../src/core/cleanup/cleaner.js';
import { BlockCleanerError, cleanBlockGuarded, DiskMismatchError } from '../../../src/core/cleanup/guard.js';
import { ExitCode } from '../../../src/core/errors.js';
import { MemoryVolumes } from '../../../src/core/node/memory-volumes.js';
import { waitFor } from '../../support/eventually.js';

const DEVICE = '/dev/loop9';
const COMMAND = ['/scripts/dd_zero.sh', '2'];

function world() {
  const volumes = new MemoryVolumes();
  volumes.addDirectory('/dev');
  const opened: RecordedClean[] = [];
  const wiped: RecordedClean[] = [];
  const cleaner = new MemoryCleaner({
    volumes,
    onOpen: (call) => opened.push(call),
    onWiped: (call) => wiped.push(call),
  });
  const clean = (identity: string, signal = new AbortController().signal) =>
    cleanBlockGuarded({ device: DEVICE, identity, command: COMMAND }, { volumes, cleaner }, signal);
  return { volumes, cleaner, opened, wiped, clean };
}

function mismatch(stage: 'before' | 'after', found: string | undefined, message: RegExp) {
  return (err: unknown): boolean => {
    assert.ok(err instanceof DiskMismatchError, String(err));
    assert.equal(err.exitCode, ExitCode.DiskMismatch);
    assert.equal(err.exitCode, 7);
    assert.equal(err.stage, stage);
    assert.equal(err.found, found);
    assert.match(err.message, message);
    return true;
  };
}

describe('cleanBlockGuarded', () => {
  it('the expected disk: the cleaner runs on the device with the class command, and the result names the disk', async () => {
    const w = world();
    w.volumes.addBlockDevice(DEVICE, 2 ** 30, { serial: 'S1' });
    const result = await w.clean('serial:S1');
    assert.deepEqual(result, { device: DEVICE, identity: 'serial:S1', command: COMMAND });
    assert.deepEqual(w.cleaner.calls, [{ kind: 'block', path: DEVICE, command: COMMAND }]);
    assert.equal(w.opened.length, 1);
    assert.equal(w.wiped.length, 1);
  });

  it('`none` is expected of a disk that offers no identity, and refused for one that does', async () => {
    const w = world();
    w.volumes.addBlockDevice(DEVICE, 2 ** 30);
    assert.equal((await w.clean('none')).identity, 'none');
    await assert.rejects(w.clean('serial:S1'), mismatch('before', 'none', /is none, not serial:S1; not cleaned$/u));
    w.volumes.replaceBlockDevice(DEVICE, 2 ** 30, { wwid: 'naa.1' });
    await assert.rejects(w.clean('none'), mismatch('before', 'wwid:naa.1', /is wwid:naa\.1, not none/u));
  });

  it('another disk at the device: refused before anything is written (the cleaner never holds it)', async () => {
    const w = world();
    w.volumes.addBlockDevice(DEVICE, 2 ** 30, { serial: 'OTHER' });
    await assert.rejects(
      w.clean('serial:S1'),
      mismatch('before', 'serial:OTHER', /^the disk at \/dev\/loop9 is serial:OTHER, not serial:S1; not cleaned$/u),
    );
    assert.deepEqual(w.opened, [], 'the cleaner never got past beforeWipe');
    assert.deepEqual(w.wiped, []);
  });

  it('a disk swapped in while the cleaner holds the device: refused after, the cleanup does not count', async () => {
    const w = world();
    w.volumes.addBlockDevice(DEVICE, 2 ** 30, { serial: 'S1' });
    let release = (): void => undefined;
    w.cleaner.hold(DEVICE, new Promise<void>((resolve) => (release = resolve)));
    const cleaning = w.clean('serial:S1');
    await waitFor(() => w.opened.length === 1, 'the cleaner to hold the device');
    w.volumes.replaceBlockDevice(DEVICE, 2 ** 30, { serial: 'S2' });
    release();
    await assert.rejects(
      cleaning,
      mismatch(
        'after',
        'serial:S2',
        /changed while it was cleaned \(now serial:S2, expected serial:S1\); the cleanup does not count$/u,
      ),
    );
    assert.equal(w.wiped.length, 1, 'the cleaner ran');
  });

  it('the identity cannot be read (the device is gone): refused, not cleaned', async () => {
    const w = world();
    const cleaner = new MemoryCleaner({ onOpen: () => assert.fail('the cleaner held the device') });
    await assert.rejects(
      cleanBlockGuarded(
        { device: '/dev/gone', identity: 'serial:S1', command: COMMAND },
        { volumes: w.volumes, cleaner },
        new AbortController().signal,
      ),
      mismatch('before', undefined, /^cannot read the identity of \/dev\/gone: .*ENOENT.*; not cleaned$/u),
    );
  });

  it('the cleaner fails or is aborted: a BlockCleanerError (exit 1) with its message, no identity check after', async () => {
    const w = world();
    w.volumes.addBlockDevice(DEVICE, 2 ** 30, { serial: 'S1' });
    w.cleaner.fail(DEVICE, '/scripts/dd_zero.sh 2 exited with status 3');
    await assert.rejects(w.clean('serial:S1'), (err: unknown) => {
      assert.ok(err instanceof BlockCleanerError, String(err));
      assert.equal(err.exitCode, ExitCode.CleanerFailed);
      assert.equal(err.exitCode, 1);
      assert.equal(err.message, '/dev/loop9 not cleaned: /scripts/dd_zero.sh 2 exited with status 3');
      return true;
    });
    w.cleaner.clear(DEVICE);
    w.cleaner.hold(DEVICE, new Promise<void>(() => undefined));
    const abort = new AbortController();
    const cleaning = w.clean('serial:S1', abort.signal);
    await waitFor(() => w.opened.length === 2, 'the cleaner to hold the device');
    abort.abort();
    await assert.rejects(cleaning, BlockCleanerError);
  });
});
