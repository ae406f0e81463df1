// The ports the disk-rules step writes and reads the node through; src/core/node implements them.
import type { DeviceFacts } from './model.js';

/** The node's block devices (src/core/node/block-devices.ts, or an in-memory one). */
export interface DeviceInventory {
  devices(options?: { readonly previous?: readonly DeviceFacts[] }): Promise<readonly DeviceFacts[]>;
  /** Changes when devices come, go or resize (no device opened); absent: every pass reads devices(). */
  changeStamp?(): Promise<string>;
}

/** Creates a link in a discovery directory; fails (never replaces) when the entry exists. */
export interface DiscoveryLinkWriter {
  createLink(path: string, target: string): Promise<void>;
}

/** Writes a GPT of N equal partitions on a blank disk (src/core/node/carve.ts); refuses a busy or written one. */
export interface DeviceCarver {
  carve(
    devicePath: string,
    partitions: number,
  ): Promise<{ readonly ok: true } | { readonly ok: false; readonly reason: string }>;
}
