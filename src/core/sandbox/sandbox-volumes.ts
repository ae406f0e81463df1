// The node as `provisioner run --sandbox` sees it: the real filesystem, except that every
// first-level directory of a sandbox discovery directory counts as a mounted volume, so a newcomer
// can "add a disk" with mkdir, without root or real mounts.
import { realpath, stat } from 'node:fs/promises';
import { basename, dirname, isAbsolute, relative, sep } from 'node:path';

import { devInoValue, makeIdentity } from '../node/identity.js';
import { deviceName, directoryStamp } from '../node/linux-volumes.js';
import { wrapSystemError } from '../node/volume-error.js';
import type {
  ChangeWatch,
  ChangeWatchOptions,
  EntryInfo,
  FilesystemUsage,
  MountPoint,
  NodeVolumes,
  VolumeIdentity,
} from '../node/volumes.js';
import { usageThrough } from '../node/volumes.js';

/** Whether `path` lies strictly below `dir` (both absolute, compared as written). */
export function isBelow(dir: string, path: string): boolean {
  const rel = relative(dir, path);
  return rel !== '' && rel !== '..' && !rel.startsWith(`..${sep}`) && !isAbsolute(rel);
}

export class SandboxVolumes implements NodeVolumes {
  constructor(
    private readonly real: NodeVolumes,
    /** Discovery directories whose subdirectories are treated as mounts. */
    private readonly discoveryDirs: () => readonly string[],
    /** The only place fake mounts may be: a discovery directory resolving elsewhere (a symlink out) gets none. */
    private readonly disksDir: string,
  ) {}

  async mountPoints(): Promise<readonly MountPoint[]> {
    const mounts = [...(await this.real.mountPoints())];
    const confine = await realpath(this.disksDir).catch(() => undefined);
    for (const dir of this.discoveryDirs()) {
      let names: readonly string[];
      try {
        if (confine === undefined || !isBelow(confine, await realpath(dir))) continue;
        names = await this.real.listDirectory(dir);
      } catch {
        continue;
      }
      for (const name of names) {
        const path = dir === '/' ? `/${name}` : `${dir}/${name}`;
        const info = await this.real.entryInfo(path);
        if (info.kind === 'directory' && !info.isSymlink) {
          mounts.push({ mountPoint: path, root: '/', fsType: 'sandbox', source: 'sandbox', device: '0:0' });
        }
      }
    }
    return mounts;
  }

  listDirectory(path: string): Promise<readonly string[]> {
    return this.real.listDirectory(path);
  }

  entryInfo(path: string): Promise<EntryInfo> {
    return this.real.entryInfo(path);
  }

  filesystemUsage(path: string): Promise<FilesystemUsage> {
    return usageThrough(this.real, path);
  }

  filesystemCapacity(path: string): Promise<number> {
    return this.real.filesystemCapacity(path);
  }

  blockDeviceCapacity(path: string): Promise<number> {
    return this.real.blockDeviceCapacity(path);
  }

  /**
   * A fake mount has no filesystem of its own: its identity is the directory's device, inode and
   * birth time (so an rm -r and mkdir is a new disk). Everything else is the real node's answer.
   */
  async volumeIdentity(path: string): Promise<VolumeIdentity | undefined> {
    if (!(await this.isFakeMount(path))) return this.real.volumeIdentity(path);
    try {
      const stats = await stat(path, { bigint: true });
      const device = deviceName(stats.dev);
      return makeIdentity('dev-ino', devInoValue(device, directoryStamp(stats)), device);
    } catch (error) {
      throw wrapSystemError('volumeIdentity', path, error);
    }
  }

  /** Whether mountPoints lists path as a fake mount: a directory, not a symlink, right in a confined discovery directory. */
  private async isFakeMount(path: string): Promise<boolean> {
    const confine = await realpath(this.disksDir).catch(() => undefined);
    const parent = await realpath(dirname(path)).catch(() => undefined);
    if (confine === undefined || parent === undefined || !isBelow(confine, parent) || basename(path) === '')
      return false;
    let inDiscoveryDir = false;
    for (const dir of this.discoveryDirs()) {
      if ((await realpath(dir).catch(() => undefined)) === parent) inDiscoveryDir = true;
    }
    if (!inDiscoveryDir) return false;
    const info = await this.real.entryInfo(path).catch(() => undefined);
    return info?.kind === 'directory' && !info.isSymlink;
  }

  /** A "mount" here is a mkdir in a discovery directory: the real node's directory watch sees it. */
  watchChanges(options: ChangeWatchOptions): ChangeWatch {
    return this.real.watchChanges(options);
  }
}
