// The node as `provisioner run --sandbox` sees it: the real filesystem, except that every
// first-level directory of a sandbox discovery directory counts as a mounted volume, so a newcomer
// can "add a disk" with mkdir, without root or real mounts.
import { realpath } from 'node:fs/promises';
import { isAbsolute, relative, sep } from 'node:path';
import type { ChangeWatch, ChangeWatchOptions, EntryInfo, MountPoint, NodeVolumes } from '../node/volumes.js';

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

  filesystemCapacity(path: string): Promise<number> {
    return this.real.filesystemCapacity(path);
  }

  blockDeviceCapacity(path: string): Promise<number> {
    return this.real.blockDeviceCapacity(path);
  }

  /** A "mount" here is a mkdir in a discovery directory: the real node's directory watch sees it. */
  watchChanges(options: ChangeWatchOptions): ChangeWatch {
    return this.real.watchChanges(options);
  }
}
