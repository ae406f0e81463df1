/**
 * Real mounts and block devices for integration tests: temp dirs, tmpfs mounts, bind mounts,
 * loop devices and device nodes, each registered with a {@link Cleanup} tracker that undoes
 * everything in reverse order — also when a test fails half-way, and (as a last resort) when the
 * test process exits or is interrupted (SIGINT/SIGTERM/SIGHUP) without running its `after` hooks.
 *
 * Typical use:
 *
 *   const skip = skipUnlessRoot();           // string when not root, false otherwise
 *   describe('on a real node', { skip }, () => {
 *     const cleanup = new Cleanup();
 *     after(() => { cleanup.run(); });       // throws AggregateError when an undo step failed
 *     it('...', () => {
 *       const dir = makeTempDir(cleanup);
 *       mountTmpfs(cleanup, join(dir, 'disk 1'), 16 * MiB);
 *       const loop = attachLoopDevice(cleanup, join(dir, 'backing'), 64 * MiB);
 *       makeBlockDeviceNode(cleanup, join(dir, 'dev0'), loop.major, loop.minor);
 *     });
 *   });
 *
 * Everything is synchronous (execFileSync, fs *Sync) so the same undo steps can run from a
 * process 'exit' handler. Only paths and devices created here are ever touched: a temp dir is
 * removed only after every mount under it is gone, and a loop device is detached only while it
 * is still backed by the file this module attached it to.
 *
 * Requires root and util-linux (mount, umount, losetup) and coreutils mknod.
 */
import { execFileSync } from 'node:child_process';
import {
  closeSync,
  existsSync,
  fsyncSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  readdirSync,
  readSync,
  realpathSync,
  rmSync,
  statSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { parseMountInfo, type MountInfoEntry } from '../../src/core/node/mountinfo.js';

/** The source name of every tmpfs mounted here, so a leak shows up in `findmnt -S lvp-test`. */
export const TEST_TMPFS_SOURCE = 'lvp-test';

/** True when running as root (mounts and loop devices need it). */
export function isRoot(): boolean {
  return process.getuid?.() === 0;
}

/** For `describe(name, { skip: skipUnlessRoot() }, ...)`: a reason to skip when not root, else false. */
export function skipUnlessRoot(): string | false {
  return isRoot()
    ? false
    : `needs root to mount tmpfs and attach loop devices (running as uid ${process.getuid?.() ?? 'unknown'}); CI runs these as root`;
}

/** Runs a command, returning its stdout; throws with the command line and its stderr on failure. */
export function run(command: string, args: readonly string[]): string {
  try {
    return execFileSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (error) {
    const stderr =
      typeof error === 'object' && error !== null && 'stderr' in error ? String(error.stderr).trim() : String(error);
    throw new Error(`${command} ${args.map((a) => JSON.stringify(a)).join(' ')} failed: ${stderr}`, { cause: error });
  }
}

/** This process's mount table. */
export function mountTable(): MountInfoEntry[] {
  return parseMountInfo(readFileSync('/proc/self/mountinfo', 'utf8'));
}

/** Mounts at dir or below it, deepest (and most recent) first, i.e. in the order to unmount them. */
export function mountsUnder(dir: string): MountInfoEntry[] {
  return mountTable()
    .filter((m) => m.mountPoint === dir || m.mountPoint.startsWith(`${dir}/`))
    .reverse()
    .sort((a, b) => b.mountPoint.length - a.mountPoint.length);
}

/** Unmounts the topmost mount at path; if busy, detaches it lazily (`umount -l`) as a last resort. */
export function unmount(path: string): void {
  try {
    run('umount', [path]);
  } catch (error) {
    try {
      run('umount', ['-l', path]);
    } catch {
      throw error;
    }
  }
}

const CLEANUP_SIGNALS: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];

interface UndoStep {
  readonly description: string;
  readonly undo: () => void;
}

/**
 * Undo steps for everything a test created, run in reverse order of registration. A failing
 * step does not stop the others; run() then throws an AggregateError naming each failure.
 * While steps are pending, handlers for process 'exit' and SIGINT/SIGTERM/SIGHUP run them if
 * nothing else did (SIGKILL cannot be caught: nothing can clean up after it).
 */
export class Cleanup {
  private readonly steps: UndoStep[] = [];
  private readonly onExit = (): void => {
    try {
      this.run();
    } catch {
      // Nothing useful can be done while exiting; the steps already tried their best.
    }
  };
  /**
   * A signal would end the process without 'exit' (node --test children install no handlers), so
   * undo first, then let the signal do what it would have done: re-raise it when no one else listens.
   */
  private readonly onSignal = (signal: NodeJS.Signals): void => {
    this.onExit();
    if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
  };

  private watchProcess(on: boolean): void {
    if (on) {
      process.on('exit', this.onExit);
      for (const signal of CLEANUP_SIGNALS) process.on(signal, this.onSignal);
    } else {
      process.off('exit', this.onExit);
      for (const signal of CLEANUP_SIGNALS) process.off(signal, this.onSignal);
    }
  }

  /** Registers an undo step; returns a function that runs just this step now (and unregisters it). */
  defer(description: string, undo: () => void): () => void {
    const step: UndoStep = { description, undo };
    if (this.steps.length === 0) this.watchProcess(true);
    this.steps.push(step);
    return () => {
      const index = this.steps.indexOf(step);
      if (index < 0) return;
      this.steps.splice(index, 1);
      if (this.steps.length === 0) this.watchProcess(false);
      step.undo();
    };
  }

  /** How many undo steps are still registered. */
  get pending(): number {
    return this.steps.length;
  }

  /** Runs every pending undo step, last registered first. Safe to call more than once. */
  run(): void {
    this.watchProcess(false);
    const failures: Error[] = [];
    for (let step = this.steps.pop(); step !== undefined; step = this.steps.pop()) {
      try {
        step.undo();
      } catch (error) {
        failures.push(new Error(`cleanup: ${step.description}: ${String(error)}`, { cause: error }));
      }
    }
    if (failures.length > 0) {
      throw new AggregateError(
        failures,
        `${failures.length} cleanup step(s) failed: ${failures.map((f) => f.message).join('; ')}`,
      );
    }
  }
}

/**
 * A fresh directory under the OS temp dir, returned as a real path (symlinks resolved, as the
 * mount table shows it). Its undo step first unmounts anything still mounted under it (lazily if
 * it must) and detaches loop devices backed by files in it, and refuses to delete while a mount
 * remains, so a recursive delete never reaches into a mounted filesystem.
 */
export function makeTempDir(cleanup: Cleanup, prefix = 'lvp-node-'): string {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), prefix)));
  cleanup.defer(`remove temp dir ${dir}`, () => {
    const problems: unknown[] = [];
    for (const mount of mountsUnder(dir)) {
      try {
        unmount(mount.mountPoint);
      } catch (error) {
        problems.push(error);
      }
    }
    for (const loop of loopDevicesBackedBy(dir)) {
      try {
        detachIfBackedBy(loop, dir);
      } catch (error) {
        problems.push(error); // still safe to delete: an attached loop device keeps its file's inode
      }
    }
    const left = mountsUnder(dir);
    if (left.length > 0) {
      problems.push(new Error(`still mounted, not deleting ${dir}: ${left.map((m) => m.mountPoint).join(', ')}`));
    } else {
      rmSync(dir, { recursive: true, force: true });
    }
    if (problems.length === 1) throw problems[0];
    if (problems.length > 1) throw new AggregateError(problems, problems.map(String).join('; '));
  });
  return dir;
}

/** The mount entry at exactly path that was mounted last, or undefined. */
function topMountAt(path: string): MountInfoEntry | undefined {
  return mountTable().findLast((m) => m.mountPoint === path);
}

function trackMount(cleanup: Cleanup, path: string, what: string): MountInfoEntry {
  const entry = topMountAt(path);
  if (entry === undefined) throw new Error(`${what} on ${path} succeeded but the mount is not in /proc/self/mountinfo`);
  cleanup.defer(`unmount ${what} at ${path}`, () => {
    // Only this very mount (same mount ID at the same path), and only while it is still there.
    if (mountTable().some((m) => m.mountId === entry.mountId && m.mountPoint === path)) unmount(path);
  });
  return entry;
}

/**
 * Mounts a tmpfs of exactly sizeBytes (a multiple of the page size) on dir, creating dir (and
 * its parents) first. Source is {@link TEST_TMPFS_SOURCE}. Returns the new mount's entry (whose
 * mountPoint is dir's real path).
 */
export function mountTmpfs(cleanup: Cleanup, dir: string, sizeBytes: number): MountInfoEntry {
  mkdirSync(dir, { recursive: true });
  run('mount', ['-t', 'tmpfs', '-o', `size=${sizeBytes}`, TEST_TMPFS_SOURCE, dir]);
  // The kernel records the real path (symlinks resolved); so does the undo step.
  return trackMount(cleanup, realpathSync(dir), 'tmpfs');
}

/** Bind-mounts source on target (`mount --bind`), creating target as a directory if missing. */
export function bindMount(cleanup: Cleanup, source: string, target: string): MountInfoEntry {
  if (!existsSync(target)) mkdirSync(target, { recursive: true });
  run('mount', ['--bind', source, target]);
  return trackMount(cleanup, realpathSync(target), `bind mount of ${source}`);
}

export interface LoopDevice {
  /** e.g. `/dev/loop3`. */
  readonly path: string;
  readonly name: string;
  readonly major: number;
  readonly minor: number;
  readonly backingFile: string;
  readonly sizeBytes: number;
}

/** The backing file of loop device `name` (`loop3`) per sysfs, or undefined when it is not attached. */
export function loopBackingFile(name: string): string | undefined {
  try {
    return readFileSync(`/sys/block/${name}/loop/backing_file`, 'utf8').trim();
  } catch {
    return undefined; // not attached (or gone)
  }
}

/** Names (`loop3`) of the attached loop devices whose backing file is `path` or lies under it. */
export function loopDevicesBackedBy(path: string): string[] {
  return readdirSync('/sys/block')
    .filter((name) => name.startsWith('loop'))
    .filter((name) => {
      const backing = loopBackingFile(name)?.replace(/ \(deleted\)$/, '');
      return backing !== undefined && (backing === path || backing.startsWith(`${path}/`));
    });
}

/** Blocks the thread for ms (cleanup steps are synchronous so they can run from an 'exit' handler). */
function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/** How long a detach may stay pending before it counts as failed. */
const DETACH_TIMEOUT_MS = 10_000;

/**
 * Loop devices backed by the device node of loop `name` itself: the kubelet stacks one on every
 * Block volume it maps into a pod, and a kubelet stopped by force leaves it there, holding the
 * device open. Matched by the node's inode and filesystem (sysfs shows only a path, often "/").
 */
function loopsStackedOn(name: string): string[] {
  let node: { ino: number; dev: number };
  try {
    node = statSync(`/dev/${name}`);
  } catch {
    return [];
  }
  const dev = `${String(Math.floor(node.dev / 256) & 0xfff)}:${String((node.dev & 0xff) | ((node.dev >> 12) & 0xfff00))}`;
  const listed = JSON.parse(run('losetup', ['--json', '--list', '--output', 'NAME,BACK-INO,BACK-MAJ:MIN']) || '{}') as {
    loopdevices?: { name: string; 'back-ino'?: number | string; 'back-maj:min'?: string }[];
  };
  return (listed.loopdevices ?? [])
    .filter((l) => Number(l['back-ino']) === node.ino && (l['back-maj:min'] ?? '').trim() === dev)
    .map((l) => l.name.replace(/^\/dev\//, ''));
}

/** Detaches the loops stacked on loop `name` (and theirs), waiting until each let go. */
function detachStackedOn(name: string): void {
  for (const stacked of loopsStackedOn(name)) {
    detachStackedOn(stacked);
    const backing = loopBackingFile(stacked);
    if (backing !== undefined) detachIfBackedBy(stacked, backing.replace(/ \(deleted\)$/, ''));
  }
}

/**
 * Detaches loop device `name` if it is backed by path (or a file under it), and waits until the
 * kernel has really let go. `losetup -d` on a device that something else holds open (udev,
 * blkid, or another `losetup --find` scanning devices) only marks it auto-clear: the detach
 * happens at the last close, so sysfs keeps the backing file and size for a moment; and if
 * the deferred detach lands first, `losetup -d` fails with ENXIO, which is success here.
 */
/**
 * Deletes the partitions the kernel lists on a loop device (`partx -d`). Partitions added by
 * `partx -a` (BLKPG, as the carver does without the kernel's GPT parser) outlive a detach of a
 * device attached without --partscan, and the next user of that loop number would find them.
 */
export function dropLoopPartitions(name: string): void {
  const listed = (): string[] => {
    try {
      return readdirSync(`/sys/block/${name}`).filter((entry) => entry.startsWith(`${name}p`));
    } catch {
      return [];
    }
  };
  if (listed().length === 0) return;
  try {
    run('partx', ['-d', `/dev/${name}`]);
  } catch (error) {
    // partx may complain about the table it reads first; what counts is that they are gone
    if (listed().length > 0) throw error;
  }
}

function detachIfBackedBy(name: string, path: string): void {
  if (!loopDevicesBackedBy(path).includes(name)) return;
  detachStackedOn(name);
  dropLoopPartitions(name);
  try {
    run('losetup', ['-d', `/dev/${name}`]);
  } catch (error) {
    if (loopDevicesBackedBy(path).includes(name)) throw error;
    return;
  }
  const deadline = Date.now() + DETACH_TIMEOUT_MS;
  while (loopDevicesBackedBy(path).includes(name)) {
    if (Date.now() > deadline) {
      throw new Error(`/dev/${name} still backed by ${path} ${DETACH_TIMEOUT_MS} ms after losetup -d (held open?)`);
    }
    sleepSync(20);
  }
}

/**
 * Creates a sparse file of sizeBytes at backingFile (which must not exist) and attaches it to a
 * free loop device (`losetup --find --show`). Undo: detach, only while it is still backed by
 * that file. The file itself is left to the temp dir's removal. `partscan`: the kernel lists the
 * partitions of a table on it (`loop3p1`...); detaching drops them.
 */
export function attachLoopDevice(
  cleanup: Cleanup,
  backingFile: string,
  sizeBytes: number,
  options: { readonly partscan?: boolean } = {},
): LoopDevice {
  writeFileSync(backingFile, '', { flag: 'wx' });
  run('truncate', ['-s', String(sizeBytes), backingFile]);
  const scan = options.partscan === true ? ['--partscan'] : [];
  const path = run('losetup', ['--find', '--show', ...scan, backingFile]).trim();
  const name = path.replace(/^\/dev\//, '');
  cleanup.defer(`detach ${path} (${backingFile})`, () => {
    detachIfBackedBy(name, backingFile);
  });
  // partitions an earlier user of this loop number left behind belong to another file
  if (options.partscan !== true) dropLoopPartitions(name);
  const [major, minor] = readFileSync(`/sys/block/${name}/dev`, 'utf8').trim().split(':').map(Number);
  if (major === undefined || minor === undefined) throw new Error(`cannot read /sys/block/${name}/dev`);
  return { path, name, major, minor, backingFile, sizeBytes };
}

/** Detaches a loop device now (`losetup -d`) if it is still backed by its file, and waits until it is detached. */
export function detachLoopDevice(loop: LoopDevice): void {
  detachIfBackedBy(loop.name, loop.backingFile);
}

/**
 * Creates a block device node (`mknod path b major minor`), e.g. a private alias of a loop device
 * that a test may delete to simulate a vanished disk without touching /dev. Undo: remove it.
 */
export function makeBlockDeviceNode(cleanup: Cleanup, path: string, major: number, minor: number): void {
  run('mknod', [path, 'b', String(major), String(minor)]);
  cleanup.defer(`remove device node ${path}`, () => {
    rmSync(path, { force: true });
  });
}

/** length bytes at offset of a device (or file), read with one pread. */
export function readAt(device: string, offset: number, length: number): Buffer {
  const fd = openSync(device, 'r');
  try {
    const buf = Buffer.alloc(length);
    readSync(fd, buf, 0, length, offset);
    return buf;
  } finally {
    closeSync(fd);
  }
}

/** Writes data at offset of a device (or file) and flushes it (through a loop device: down to its backing file). */
export function writeAt(device: string, offset: number, data: Buffer): void {
  const fd = openSync(device, 'r+');
  try {
    writeSync(fd, data, 0, data.length, offset);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
