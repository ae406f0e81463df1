// Carving: the one place the agent writes to a raw disk. A rule with `partitions: N` takes a
// blank whole disk and writes a GPT of N equal partitions on it (src/core/devices/gpt.ts); the
// next pass links each partition. The caller (decide.ts, on a fresh inventory) has already
// checked the disk; everything is checked again here, as close to the write as it can be:
// the device is held with O_EXCL (the kernel refuses that while the disk is mounted, part of a
// dm/md/LVM device or held by any other exclusive opener, and keeps all of them off it while it
// is held), the kernel must list no partitions and no holders, the caller's own check runs again,
// and both ends of the disk are read back through that same handle and must be all zeros.
import { constants, existsSync, readFileSync, readdirSync } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';

import { buildGpt, GptLayoutError, MiB, type GptImage, type GptPartition, type GptWrite } from '../devices/gpt.js';
import type { DeviceCarver } from '../devices/ports.js';
import { errnoCode, errorMessage } from '../unknown-values.js';
import { SECTOR_BYTES, decodeDeviceNumber } from './linux-volumes.js';
import { childProcess } from '../on-demand-builtins.js';

/** Why a disk was left as it was: the expected refusals, not failures. */
export type CarveRefusal = 'busy' | 'not-blank' | 'too-small' | 'not-a-disk';

/** What a util-linux command did. */
export interface CommandOutcome {
  /** Exit code; null when it was killed (timeout) or could not start. */
  readonly code: number | null;
  /** Its stdout and stderr, the last OUTPUT_KEPT characters. */
  readonly output: string;
  /** Why it did not run to completion: could not start, or timed out. */
  readonly failure?: string;
}

export type CommandRunner = (command: string, args: readonly string[], timeoutMs: number) => Promise<CommandOutcome>;

export interface CarveOptions {
  /**
   * The caller's own check, asked again while the disk is held exclusively (e.g. a fresh
   * inventory read and decide's safety checks): false leaves the disk as it is.
   */
  readonly expectBlank: () => Promise<boolean>;
  readonly runCommand?: CommandRunner;
  /** Per command (default 30 s): re-reading a partition table can wait on a slow disk. */
  readonly commandTimeoutMs?: number;
  /** Default `partx` and `blockdev`, found on PATH. */
  readonly partx?: string;
  readonly blockdev?: string;
  /** Default `/sys`. */
  readonly sysfs?: string;
  /** Makes the GPT's GUIDs (default crypto.randomUUID). */
  readonly random?: () => string;
}

/** A partition as written, and as the kernel shows it once it took the table in. */
export interface CarvedPartition extends GptPartition {
  /** Kernel name (`sdb1`, `loop3p1`); undefined when the kernel does not list it. */
  readonly kernelName?: string;
  /** The GPT partition name as the kernel read it (uevent PARTNAME); undefined when it did not parse the table. */
  readonly kernelPartName?: string;
}

/** How the kernel learned about the new partitions. */
export interface KernelUpdate {
  /** Every partition is listed by the kernel at the offset and size written. */
  readonly updated: boolean;
  /** What made it list them: its own parser (BLKRRPART, names known) or partx (BLKPG, names unknown). */
  readonly via?: 'blockdev --rereadpt' | 'partx --add';
  /** One line per command run: what it said. */
  readonly log: readonly string[];
}

export type CarveResult =
  | {
      readonly ok: true;
      readonly devicePath: string;
      readonly diskGuid: string;
      readonly partitions: readonly CarvedPartition[];
      readonly kernel: KernelUpdate;
    }
  | { readonly ok: false; readonly refusal: CarveRefusal; readonly reason: string };

type Refusal = Extract<CarveResult, { ok: false }>;

const refuse = (refusal: CarveRefusal, reason: string): Refusal => ({ ok: false, refusal, reason });

/** How much of each end must be zero: where every partition table, RAID, LVM and filesystem signature lives. */
export const BLANK_CHECK_BYTES = MiB;

/** Command output kept for the report: enough for util-linux's error lines, bounded whatever it prints. */
export const OUTPUT_KEPT = 4096;

const DEFAULT_COMMAND_TIMEOUT_MS = 30_000;

/** Runs a command with no shell and no stdin; killed (SIGKILL) after timeoutMs. */
export const runCommand: CommandRunner = (command, args, timeoutMs) =>
  new Promise((resolve) => {
    let output = '';
    let failure: string | undefined;
    const child = childProcess().spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    const keep = (chunk: Buffer): void => {
      output = (output + chunk.toString('utf8')).slice(-OUTPUT_KEPT);
    };
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    const timer = setTimeout(() => {
      failure = `timed out after ${timeoutMs} ms`;
      child.kill('SIGKILL');
    }, timeoutMs);
    const finish = (code: number | null): void => {
      clearTimeout(timer);
      resolve({ code, output: output.trim(), ...(failure === undefined ? {} : { failure }) });
    };
    child.once('error', (error) => {
      failure ??= `cannot run ${command}: ${error.message}`;
      finish(null);
    });
    child.once('close', finish);
  });

/** The sysfs facts of the held device: its node, size and what the kernel already builds on it. */
interface HeldDisk {
  readonly sysDir: string;
  readonly sizeBytes: number;
  readonly logicalBlockBytes: number;
}

const readSys = (dir: string, file: string): string => readFileSync(join(dir, file), 'utf8').trim();

/** Partitions the kernel lists for a disk: children with a `partition` file. */
function kernelPartitions(sysDir: string): { name: string; number: number; start: number; size: number }[] {
  return readdirSync(sysDir, { withFileTypes: true })
    .filter((e) => e.isDirectory() && existsSync(join(sysDir, e.name, 'partition')))
    .map((e) => {
      const dir = join(sysDir, e.name);
      const sectors = (file: string): number => Number(readSys(dir, file)) * SECTOR_BYTES;
      return {
        name: e.name,
        number: Number(readSys(dir, 'partition')),
        start: sectors('start'),
        size: sectors('size'),
      };
    })
    .sort((a, b) => a.number - b.number);
}

/** What the kernel says about the device behind the handle: refusals for anything but an unused whole disk. */
async function heldDisk(handle: FileHandle, devicePath: string, sysfs: string): Promise<HeldDisk | Refusal> {
  const stat = await handle.stat({ bigint: true });
  if (!stat.isBlockDevice()) return refuse('not-a-disk', `${devicePath} is not a block device`);
  const { major, minor } = decodeDeviceNumber(stat.rdev);
  const sysDir = join(sysfs, 'dev', 'block', `${major}:${minor}`);
  if (existsSync(join(sysDir, 'partition'))) return refuse('not-a-disk', `${devicePath} is a partition, not a disk`);
  const partitions = kernelPartitions(sysDir).map((p) => p.name);
  if (partitions.length > 0)
    return refuse('not-blank', `the kernel lists partitions on ${devicePath}: ${partitions.join(', ')}`);
  const holders = readdirSync(join(sysDir, 'holders'));
  if (holders.length > 0) return refuse('busy', `${devicePath} is in use by ${holders.join(', ')}`);
  return {
    sysDir,
    sizeBytes: Number(readSys(sysDir, 'size')) * SECTOR_BYTES,
    logicalBlockBytes: Number(readSys(sysDir, 'queue/logical_block_size')),
  };
}

/** Reads exactly length bytes at offset through the handle. */
async function readExactly(handle: FileHandle, devicePath: string, offset: number, length: number): Promise<Buffer> {
  const buffer = Buffer.alloc(length);
  let done = 0;
  while (done < length) {
    const { bytesRead } = await handle.read(buffer, done, length - done, offset + done);
    if (bytesRead === 0) throw new Error(`${devicePath}: unexpected end of device at offset ${offset + done}`);
    done += bytesRead;
  }
  return buffer;
}

/** The first non-zero byte's offset in the first and last BLANK_CHECK_BYTES; undefined: all zero. */
async function firstWritten(handle: FileHandle, devicePath: string, sizeBytes: number): Promise<number | undefined> {
  const length = Math.min(BLANK_CHECK_BYTES, sizeBytes);
  for (const offset of new Set([0, sizeBytes - length])) {
    const bytes = await readExactly(handle, devicePath, offset, length);
    const at = bytes.findIndex((b) => b !== 0);
    if (at >= 0) return offset + at;
  }
  return undefined;
}

/** The table for this disk, or the refusal when it cannot hold N partitions of 1 MiB. */
function tableFor(disk: HeldDisk, devicePath: string, partitions: number, options: CarveOptions): GptImage | Refusal {
  try {
    return buildGpt({
      sizeBytes: disk.sizeBytes,
      logicalBlockBytes: disk.logicalBlockBytes,
      partitions,
      ...(options.random === undefined ? {} : { random: options.random }),
    });
  } catch (error) {
    if (error instanceof GptLayoutError && error.code === 'too-small')
      return refuse('too-small', `${devicePath}: ${error.message}`);
    throw error;
  }
}

/** Every check made while the disk is held; the table to write when they all pass. */
async function checkHeld(
  handle: FileHandle,
  devicePath: string,
  partitions: number,
  options: CarveOptions,
): Promise<{ readonly disk: HeldDisk; readonly image: GptImage } | Refusal> {
  const disk = await heldDisk(handle, devicePath, options.sysfs ?? '/sys');
  if ('ok' in disk) return disk;
  const image = tableFor(disk, devicePath, partitions, options);
  if ('ok' in image) return image;
  if (!(await options.expectBlank()))
    return refuse('not-blank', `${devicePath} is no longer blank by the caller's checks`);
  const written = await firstWritten(handle, devicePath, disk.sizeBytes);
  if (written !== undefined) return refuse('not-blank', `${devicePath} has data: a non-zero byte at offset ${written}`);
  return { disk, image };
}

async function writeAll(handle: FileHandle, devicePath: string, write: GptWrite): Promise<void> {
  let done = 0;
  while (done < write.bytes.length) {
    const { bytesWritten } = await handle.write(write.bytes, done, write.bytes.length - done, write.offset + done);
    if (bytesWritten === 0) throw new Error(`${devicePath}: short write at offset ${write.offset + done}`);
    done += bytesWritten;
  }
}

/**
 * Backup first, flushed, then the primary: the page cache writes back in any order, and a
 * crash between the two must leave no protective MBR or primary header, so no tool or kernel
 * takes the half-written table for a real one (the inventory still sees the backup: not blank).
 */
async function writeTable(handle: FileHandle, devicePath: string, image: GptImage): Promise<void> {
  await writeAll(handle, devicePath, image.backup);
  await handle.datasync();
  await writeAll(handle, devicePath, image.primary);
  await handle.datasync();
}

/** Opens the device for writing, exclusively; a busy device is a refusal. */
async function openExclusive(devicePath: string): Promise<FileHandle | Refusal> {
  try {
    // O_EXCL without O_CREAT on a block device: Linux fails it with EBUSY while anything holds the disk.
    return await open(devicePath, constants.O_RDWR | constants.O_EXCL);
  } catch (error) {
    if (errnoCode(error) === 'EBUSY')
      return refuse('busy', `${devicePath} is in use (mounted, or held by another device or process)`);
    throw new Error(`cannot open ${devicePath} for carving: ${errorMessage(error)}`, { cause: error });
  }
}

/** Checks and writes under the exclusive handle; the handle is closed whatever happens. */
async function writeHeld(
  devicePath: string,
  partitions: number,
  options: CarveOptions,
): Promise<{ readonly disk: HeldDisk; readonly image: GptImage } | Refusal> {
  const handle = await openExclusive(devicePath);
  if ('ok' in handle) return handle;
  let checked: Awaited<ReturnType<typeof checkHeld>>;
  try {
    checked = await checkHeld(handle, devicePath, partitions, options);
    if (!('ok' in checked)) await writeTable(handle, devicePath, checked.image);
  } catch (error) {
    await handle.close().catch(() => undefined);
    throw new Error(`carving ${devicePath}: ${errorMessage(error)}`, { cause: error });
  }
  // The close is where a block device reports a write-back error; the table may not be whole.
  await handle.close().catch((error: unknown) => {
    throw new Error(`closing ${devicePath} after carving: ${errorMessage(error)}`, { cause: error });
  });
  return checked;
}

function said(command: string, outcome: CommandOutcome): string {
  const status = outcome.failure ?? `exit code ${String(outcome.code)}`;
  return `${command}: ${status}${outcome.output === '' ? '' : `: ${outcome.output}`}`;
}

/**
 * Has the kernel take in the new table, once the disk is closed (BLKRRPART refuses a disk held
 * exclusively). Its own parser first: only then does it know the partition names (uevent
 * PARTNAME), which is how the inventory recognises the partitions as the agent's. partx adds
 * them one by one (BLKPG) when the kernel cannot re-read the disk or has no GPT parser built in.
 */
async function tellKernel(
  devicePath: string,
  disk: HeldDisk,
  image: GptImage,
  options: CarveOptions,
): Promise<{
  readonly log: readonly string[];
  readonly via?: KernelUpdate['via'];
  readonly partitions: CarvedPartition[];
}> {
  const run = options.runCommand ?? runCommand;
  const timeout = options.commandTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS;
  const blockdev = options.blockdev ?? 'blockdev';
  const partx = options.partx ?? 'partx';
  const count = image.partitions.length;
  const log: string[] = [];
  let via: KernelUpdate['via'];
  const reread = await run(blockdev, ['--rereadpt', devicePath], timeout);
  log.push(said(`${blockdev} --rereadpt ${devicePath}`, reread));
  if (reread.code === 0 && kernelPartitions(disk.sysDir).length > 0) via = 'blockdev --rereadpt';
  else {
    const added = await run(partx, ['--add', '--nr', `1:${count}`, devicePath], timeout);
    log.push(said(`${partx} --add --nr 1:${count} ${devicePath}`, added));
    if (kernelPartitions(disk.sysDir).length > 0) via = 'partx --add';
  }
  return { log, ...(via === undefined ? {} : { via }), partitions: matchKernel(disk.sysDir, image.partitions) };
}

/** The written partitions, each with the kernel's name for it where the kernel lists it as written. */
function matchKernel(sysDir: string, written: readonly GptPartition[]): CarvedPartition[] {
  const listed = kernelPartitions(sysDir);
  return written.map((p) => {
    const seen = listed.find((k) => k.number === p.number && k.start === p.startBytes && k.size === p.sizeBytes);
    if (seen === undefined) return p;
    const uevent = readSys(join(sysDir, seen.name), 'uevent');
    const partName = /^PARTNAME=(.*)$/mu.exec(uevent)?.[1];
    return { ...p, kernelName: seen.name, ...(partName === undefined ? {} : { kernelPartName: partName }) };
  });
}

/**
 * Writes a GPT of `partitions` equal partitions on the blank whole disk at devicePath, then has
 * the kernel list them. Refusals (busy, not blank, too small, not a whole disk) are results and
 * leave the disk untouched; an I/O error throws, naming the device.
 */
export async function carveDevice(devicePath: string, partitions: number, options: CarveOptions): Promise<CarveResult> {
  if (!Number.isInteger(partitions) || partitions < 1 || partitions > 128)
    throw new RangeError(`carving ${devicePath}: partitions must be an integer from 1 to 128, not ${partitions}`);
  const held = await writeHeld(devicePath, partitions, options);
  if ('ok' in held) return held;
  const { log, via, partitions: carved } = await tellKernel(devicePath, held.disk, held.image, options);
  const updated = carved.every((p) => p.kernelName !== undefined);
  return {
    ok: true,
    devicePath,
    diskGuid: held.image.diskGuid,
    partitions: carved,
    kernel: { updated, ...(via === undefined ? {} : { via }), log },
  };
}

/** The service's DeviceCarver (devices/ports.ts), with the caller's check for the device about to be carved. */
export function linuxDeviceCarver(
  options: Omit<CarveOptions, 'expectBlank'> & { readonly expectBlank: (devicePath: string) => Promise<boolean> },
): DeviceCarver & { carve(devicePath: string, partitions: number): Promise<CarveResult> } {
  return {
    carve: (devicePath, partitions) =>
      carveDevice(devicePath, partitions, { ...options, expectBlank: () => options.expectBlank(devicePath) }),
  };
}
