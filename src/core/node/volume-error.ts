// The one error type of the NodeVolumes port, shared by the Linux and in-memory implementations so
// callers (and the shared contract tests) can rely on the same shape from both.

import { errnoCode, errorMessage } from '../unknown-values.js';

export type NodeVolumeOperation =
  | 'mountPoints'
  | 'listDirectory'
  | 'entryInfo'
  | 'filesystemCapacity'
  | 'filesystemUsage'
  | 'blockDeviceCapacity'
  | 'volumeIdentity'
  /** A mutation of the in-memory node (test / simulate set-up). */
  | 'mutate';

/** A NodeVolumes operation failed on a path. */
export class NodeVolumeError extends Error {
  constructor(
    readonly operation: NodeVolumeOperation,
    /** The path the caller passed in (not a resolved one). */
    readonly path: string,
    /**
     * errno-style code: the system error's code (`ENOENT`, `ENOTDIR`, `EACCES`, ...), `ENOTBLK`
     * when a block device (for volumeIdentity: a block device or a directory) was expected,
     * `EINVAL` for unusable data (e.g. an unreadable sysfs size).
     */
    readonly code: string,
    detail: string,
    options?: { cause?: unknown },
  ) {
    super(`${operation} ${JSON.stringify(path)}: ${code}: ${detail}`, options);
    this.name = 'NodeVolumeError';
  }
}

/** Wraps a system error from operation on path; keeps it as the cause. */
export function wrapSystemError(operation: NodeVolumeOperation, path: string, error: unknown): NodeVolumeError {
  if (error instanceof NodeVolumeError) return error;
  const code = errnoCode(error) ?? 'EIO';
  const message = errorMessage(error);
  // Node's messages start with the code ("ENOENT: no such file or directory, scandir '/x'").
  const detail = message.startsWith(`${code}: `) ? message.slice(code.length + 2) : message;
  return new NodeVolumeError(operation, path, code, detail, { cause: error });
}
