// The node's volumes port: what discovery and cleanup need to know about this node's disks.
// Real implementation: linux-volumes.ts (procfs, statfs, sysfs; never spawns a process per entry).
// In-memory: memory-volumes.ts, for fast tests and `simulate`.
import { NodeVolumeError } from './volume-error.js';

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

export interface ChangeWatchOptions {
  /** Directories whose first-level entries are watched (new entries, symlinks, removals). */
  readonly directories: readonly string[];
  /**
   * Called when a watched directory's entries or the mounts at, below or above a watched directory
   * (mountChangeConcerns) may have changed; mounts elsewhere are not reported. May be spurious and
   * may come in bursts: the caller coalesces. Never called after the signal aborted.
   */
  readonly onChange: () => void;
  /** Ends the watch and releases everything it holds (child process, inotify watches). */
  readonly signal: AbortSignal;
}

/** ok: false carries why change events are not (or no longer) delivered; the caller polls instead. */
export type ChangeWatchOutcome = { readonly ok: true } | { readonly ok: false; readonly reason: string };

export interface ChangeWatch {
  /** Settles once changes made from now on are reported, or with the reason they cannot be. */
  readonly ready: Promise<ChangeWatchOutcome>;
  /** Settles when the watch has ended and released everything: ok after the signal, or why it failed. */
  readonly done: Promise<ChangeWatchOutcome>;
}

/** Where a volume's identity comes from, strongest first (docs/disk-identity.md). */
export type IdentitySource = 'wwid' | 'serial' | 'loop' | 'fs-uuid' | 'dev-ino';

/**
 * What identifies the volume at a path across agent restarts and reboots: recorded on its PV at
 * publish and compared before every destructive or binding step. Compared by `id` alone.
 */
export interface VolumeIdentity {
  /**
   * `<source>:<value>`, e.g. `wwid:naa.5000c500a1b2c3d4`, `fs-uuid:0b1e…`, `loop:7:1:131074:<ns>`.
   * The forms (src/core/node/identity.ts): `wwid:<wwid>` and `serial:<serial>` (blanks as `_`; a
   * partition's: its disk's with `-part<N>`), `loop:<backing file's M:m>:<its inode>:<birth ns>`
   * (birth `unknown` when the file cannot be stat'ed here),
   * `fs-uuid:<uuid>` (a mount of a sub-directory: `:ino:<inode>:<birth ns>` added),
   * `dev-ino:<M:m>:<inode>:<birth ns>` (birth 0 where the filesystem keeps none).
   */
  readonly id: string;
  readonly source: IdentitySource;
  /** The device the volume lives on, `major:minor` (for people: it may change across reboots). */
  readonly device: string;
  /** A /dev/disk/by-id name linking to the device, when there is one (for people, not compared). */
  readonly byId?: string;
}

/** One statfs of a volume's filesystem, as df and kubelet count it. */
export interface FilesystemUsage {
  /** blocks × block size. */
  readonly capacityBytes: number;
  /** (blocks − free blocks) × block size: what df calls used (root's reserve counts as not used). */
  readonly usedBytes: number;
  /** Blocks available to unprivileged users × block size (root's reserve excluded). */
  readonly availableBytes: number;
  readonly inodes: number;
  readonly inodesUsed: number;
  readonly inodesFree: number;
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
  /**
   * Bytes and inodes of the filesystem mounted at path, from one statfs (the volume health probe's;
   * docs/observability.md#volume-usage). Optional: a port without it yields no usage, capacity only.
   */
  filesystemUsage?(path: string): Promise<FilesystemUsage>;
  /** Size in bytes of the block device at path (after following symlinks). */
  blockDeviceCapacity(path: string): Promise<number>;
  /**
   * The identity of the volume at path (a block device, or a directory: the filesystem mounted on
   * it, else the directory itself), symlinks followed; undefined when the node offers nothing
   * stable (e.g. a block device with no WWID, serial or loop backing). Rejects with a
   * NodeVolumeError when the path cannot be read (e.g. ENOENT), or is neither (ENOTBLK).
   */
  volumeIdentity(path: string): Promise<VolumeIdentity | undefined>;
  /** Reports changes of the mount table and of directories' entries as they happen, until the signal aborts. */
  watchChanges(options: ChangeWatchOptions): ChangeWatch;
}

/**
 * Whether a mount-table change naming `paths` can change what discovery sees in `directories`: a
 * mount at, below or above one of them (a mount over a parent hides it). No paths: unknown, so yes.
 */
export function mountChangeConcerns(paths: readonly string[], directories: readonly string[]): boolean {
  if (paths.length === 0) return true;
  return paths.some((path) => directories.some((dir) => isSameOrBelow(path, dir) || isSameOrBelow(dir, path)));
}

function isSameOrBelow(path: string, dir: string): boolean {
  if (path === dir) return true;
  return path.startsWith(dir.endsWith('/') ? dir : `${dir}/`);
}

/** A wrapping port's filesystemUsage: the inner port's, or ENOTSUP when it has none. */
export function usageThrough(inner: NodeVolumes, path: string): Promise<FilesystemUsage> {
  if (inner.filesystemUsage === undefined)
    return Promise.reject(new NodeVolumeError('filesystemUsage', path, 'ENOTSUP', 'the node port reads no usage'));
  return inner.filesystemUsage(path);
}
