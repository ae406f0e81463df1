// The node's volumes port: what discovery and cleanup need to know about this node's disks.
// Real implementation: linux-volumes.ts (procfs, statfs, sysfs; never spawns a process per entry).
// In-memory: memory-volumes.ts, for fast tests and `simulate`.

/** What a discovery directory entry is, after following symlinks. */
export type EntryKind = 'directory' | 'block-device' | 'other' | 'missing';

export interface EntryInfo {
  readonly kind: EntryKind;
  /** The entry's path with every symlink resolved (undefined when missing or a dangling link). */
  readonly realPath?: string;
  /** True when the entry itself is a symlink. */
  readonly isSymlink: boolean;
}

export interface MountPoint {
  /** The mount point path, octal escapes (\040 etc.) decoded. */
  readonly mountPoint: string;
  /** The root of the mount within its filesystem (bind mounts show a sub-path). */
  readonly root: string;
  readonly fsType: string;
  readonly source: string;
  /** `major:minor` of the filesystem's device. */
  readonly device: string;
}

export interface NodeVolumes {
  /** Mount table of this process's mount namespace (/proc/self/mountinfo). */
  mountPoints(): Promise<readonly MountPoint[]>;
  /** Names of the first-level entries of a directory (no recursion, unsorted, hidden included). */
  listDirectory(path: string): Promise<readonly string[]>;
  /** Kind of an entry, following symlinks; `missing` when it or its link target does not exist. */
  entryInfo(path: string): Promise<EntryInfo>;
  /** Total size in bytes of the filesystem mounted at path (statfs blocks × block size). */
  filesystemCapacity(path: string): Promise<number>;
  /** Size in bytes of the block device at path (after following symlinks). */
  blockDeviceCapacity(path: string): Promise<number>;
}
