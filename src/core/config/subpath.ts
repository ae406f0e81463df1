// Detects a config mounted with `subPath`, which never updates (docs/reload.md): kubelet
// bind-mounts the single file, pinning its inode, while updates go to a new `..data` directory
// the container never sees. The signature: the config directory has no `..data` entry, and the
// config path (the file, or a key file in the directory) is itself a mount point.
//
// detectSubPathMount is pure over the path, the mount table text and the directory listing;
// detectSubPathMountOnHost reads them (/proc/self/mountinfo, lstat, readdir).

import { lstat, readFile, readdir, realpath } from 'node:fs/promises';
import { parseMountInfo } from '../node/mountinfo.js';
import { errorMessage } from '../unknown-values.js';

export interface SubPathDetection {
  /** True when the config is a bind-mounted file (subPath): it will never see a ConfigMap update. */
  readonly subPath: boolean;
  /** Why: set when subPath is true, and when detection was not possible (subPath is then false). */
  readonly reason?: string;
  /** The mount point found at the config path (a file), when subPath is true. */
  readonly mountPoint?: string;
}

/** What is at the config path: a file, or a directory with these entry names. */
export type ConfigPathLayout =
  { readonly kind: 'file' } | { readonly kind: 'directory'; readonly entries: readonly string[] };

/**
 * Pure: whether the config at configPath (an absolute path as the mount table shows it, i.e. with
 * symlinks resolved) is a subPath mount, given the text of /proc/self/mountinfo and what is at the
 * path. A directory with `..data` is a ConfigMap volume (updates arrive); a directory without it
 * is a subPath-style setup when one of its key files is a mount point; a file is one when it is a
 * mount point itself. Throws MountInfoParseError on a malformed mount table.
 */
export function detectSubPathMount(
  configPath: string,
  mountInfoText: string,
  layout: ConfigPathLayout = { kind: 'file' },
): SubPathDetection {
  const mountPoints = new Set(parseMountInfo(mountInfoText).map((m) => m.mountPoint));
  const path = configPath.length > 1 ? configPath.replace(/\/+$/, '') : configPath;
  let candidates: string[];
  if (layout.kind === 'directory') {
    if (layout.entries.includes('..data')) return { subPath: false };
    candidates = layout.entries
      .filter((name) => !name.startsWith('..'))
      .sort()
      .map((name) => (path === '/' ? `/${name}` : `${path}/${name}`));
  } else {
    candidates = [path];
  }
  const mounted = candidates.find((file) => mountPoints.has(file));
  if (mounted === undefined) return { subPath: false };
  return {
    subPath: true,
    mountPoint: mounted,
    reason:
      `${mounted} is a bind mount of a single file (a subPath mount?) and ` +
      `${layout.kind === 'directory' ? `${path} has no ..data` : 'not part of a ConfigMap volume directory'}: ` +
      'kubelet never updates subPath mounts, so ConfigMap changes will not reach this agent; ' +
      'mount the ConfigMap volume as a directory to get hot reload',
  };
}

export interface DetectSubPathOptions {
  /** The mount table to read; default `/proc/self/mountinfo`. */
  readonly mountInfoPath?: string;
}

/**
 * Reads what detectSubPathMount needs: the real path of configPath, whether it is a directory (and
 * its entries), and the mount table. Never throws: when something cannot be read, the result is
 * `{ subPath: false, reason }`.
 */
export async function detectSubPathMountOnHost(
  configPath: string,
  options: DetectSubPathOptions = {},
): Promise<SubPathDetection> {
  const mountInfoPath = options.mountInfoPath ?? '/proc/self/mountinfo';
  try {
    const path = await realpath(configPath);
    const info = await lstat(path);
    const layout: ConfigPathLayout = info.isDirectory()
      ? { kind: 'directory', entries: await readdir(path) }
      : { kind: 'file' };
    return detectSubPathMount(path, await readFile(mountInfoPath, 'utf8'), layout);
  } catch (error) {
    return {
      subPath: false,
      reason: `could not check for a subPath mount: ${errorMessage(error)}`,
    };
  }
}
