// The node as `provisioner run --sandbox` sees it: the real filesystem, except that every
// first-level directory of a sandbox discovery directory counts as a mounted volume, so a newcomer
// can "add a disk" with mkdir, without root or real mounts.
import type { ChangeWatch, ChangeWatchOptions, EntryInfo, MountPoint, NodeVolumes } from './volumes.js';

export class SandboxVolumes implements NodeVolumes {
  constructor(
    private readonly real: NodeVolumes,
    /** Discovery directories whose subdirectories are treated as mounts. */
    private readonly discoveryDirs: () => readonly string[],
  ) {}

  async mountPoints(): Promise<readonly MountPoint[]> {
    const mounts = [...(await this.real.mountPoints())];
    for (const dir of this.discoveryDirs()) {
      let names: readonly string[];
      try {
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
