// SandboxVolumes.volumeIdentity: a fake mount (a directory right in a sandbox discovery directory)
// is identified by its own device, inode and birth time; everything else is the real node's answer.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, realpathSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';

import { LinuxVolumes, deviceName, directoryStamp } from '../../../src/core/node/linux-volumes.js';
import type { NodeVolumes, VolumeIdentity } from '../../../src/core/node/volumes.js';
import { SandboxVolumes } from '../../../src/core/sandbox/sandbox-volumes.js';

/** The real node, with the paths volumeIdentity was asked about. */
class RecordingVolumes extends LinuxVolumes {
  readonly asked: string[] = [];
  override volumeIdentity(path: string): Promise<VolumeIdentity | undefined> {
    this.asked.push(path);
    return super.volumeIdentity(path);
  }
}

describe('SandboxVolumes.volumeIdentity', () => {
  let dir = '';
  let disks = '';
  let discovery = '';
  let real: RecordingVolumes;
  let volumes: NodeVolumes;

  before(() => {
    dir = realpathSync(mkdtempSync(join(tmpdir(), 'lvp-sandbox-identity-')));
    disks = join(dir, 'disks');
    discovery = join(disks, 'fast');
    mkdirSync(join(discovery, 'vol1'), { recursive: true });
    mkdirSync(join(dir, 'outside', 'vol'), { recursive: true });
    symlinkSync(join(dir, 'outside', 'vol'), join(discovery, 'link'));
    real = new RecordingVolumes();
    volumes = new SandboxVolumes(real, () => [discovery, join(dir, 'outside')], disks);
  });
  after(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  function expectedDevIno(path: string): VolumeIdentity {
    const stats = statSync(path, { bigint: true });
    const { ino, birthNs } = directoryStamp(stats);
    const device = deviceName(stats.dev);
    return { id: `dev-ino:${device}:${ino}:${birthNs}`, source: 'dev-ino', device };
  }

  it('identifies a fake mount by its directory, without asking the real node', async () => {
    const vol = join(discovery, 'vol1');
    assert.ok(
      (await volumes.mountPoints()).some((m) => m.mountPoint === vol),
      'listed as a mount',
    );
    assert.deepEqual(await volumes.volumeIdentity(vol), expectedDevIno(vol));
    assert.deepEqual(real.asked, []);
  });

  it('asks the real node about everything else: a symlink, a directory outside the disks directory, a deeper one', async () => {
    real.asked.length = 0;
    const paths = [join(discovery, 'link'), join(dir, 'outside', 'vol'), discovery];
    mkdirSync(join(discovery, 'vol1', 'deeper'));
    paths.push(join(discovery, 'vol1', 'deeper'));
    for (const path of paths) await volumes.volumeIdentity(path);
    assert.deepEqual(real.asked, paths);
  });

  it('rejects a missing path with a NodeVolumeError from the real node', async () => {
    const missing = join(discovery, 'missing');
    await assert.rejects(volumes.volumeIdentity(missing), {
      code: 'ENOENT',
      operation: 'volumeIdentity',
      path: missing,
    });
  });
});
