// Small reads of memory filesystems (sysfs, procfs, udev's tmpfs): synchronous and bounded, so no
// device is waited for, and opened O_NONBLOCK, so a FIFO where an attribute should be cannot hang
// the agent. The block-device inventory and the volumes' disk identity read through them.
import { closeSync, constants, openSync, readSync } from 'node:fs';

/** The buffer the reads share: each is synchronous, so none overlaps another; grown on demand. */
let scratch = Buffer.allocUnsafe(4097);

export interface SmallRead {
  readonly text: string;
  /** The file holds more than the maxBytes read. */
  readonly truncated: boolean;
}

/** At most maxBytes of the file; undefined when it cannot be opened or read. */
export function readSmallFile(path: string, maxBytes: number): SmallRead | undefined {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch {
    return undefined;
  }
  try {
    // One byte more than allowed tells a longer file.
    if (scratch.length < maxBytes + 1) scratch = Buffer.allocUnsafe(maxBytes + 1);
    let length = 0;
    for (let n = -1; n !== 0 && length < maxBytes + 1; length += n) {
      n = readSync(fd, scratch, length, maxBytes + 1 - length, null);
    }
    return { text: scratch.toString('utf8', 0, Math.min(length, maxBytes)), truncated: length > maxBytes };
  } catch {
    return undefined;
  } finally {
    try {
      closeSync(fd);
    } catch {
      // Nothing was written: a failed close loses nothing.
    }
  }
}

/** The whole file when it holds at most maxBytes; undefined when it cannot be read or is longer. */
export function readWholeSmallFile(path: string, maxBytes: number): string | undefined {
  const read = readSmallFile(path, maxBytes);
  return read === undefined || read.truncated ? undefined : read.text;
}
