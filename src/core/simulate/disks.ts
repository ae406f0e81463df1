// The disks of a replay's node: what the scenario put there (and took away), and how a step's
// volume reference — entry (`disk1`), class and entry (`fast/disk1`), PV name or container path —
// resolves to one of them under the config the agent applies now.
import { createHash } from 'node:crypto';
import { posix } from 'node:path';
import type { ProvisionerConfig } from '../config/model.js';
import type { Cluster } from '../kube/cluster.js';
import { formatUuid } from '../node/identity.js';
import type { MemoryVolumes } from '../node/memory-volumes.js';
import { persistentVolumeName } from '../pv/naming.js';
import { errorMessage } from '../unknown-values.js';
import { addEntry, entryPath, removeEntry } from './node-facts.js';
import type { EntrySpec } from './node-facts.js';
import type { DiskIdentity, DiskSpec, SwapTarget } from './scenario.js';

/** A volume reference that names nothing: the step (or expectation) that used it fails. */
export class StepError extends Error {}

export interface DiskRecord {
  /** Removed by a step: still resolvable by name (its PV may outlive it). */
  readonly removed?: boolean;
  readonly dir: string;
  readonly name: string;
  readonly className: string | undefined;
  readonly type: EntrySpec['type'];
  readonly mounted: boolean;
  /** The disk there now (none: a plain directory, a file, a symlink). */
  readonly identity?: DiskIdentity;
  /** The disk the volume had when it was added (what `disk swapped: {original: true}` puts back). */
  readonly original?: DiskIdentity;
}

/** What `disk swapped` did: the identities the node reports at the path before and after. */
export interface SwapResult {
  readonly kind: 'filesystem' | 'block';
  readonly before: string | undefined;
  readonly after: string | undefined;
}

/**
 * A filesystem UUID (version 4 form) or an NAA WWID derived from a path and a count: every disk of
 * a replay has its own, and the same scenario gives the same ones every time.
 */
export function derivedIdentity(kind: 'filesystem' | 'block', path: string, n: number): DiskIdentity {
  const seed = `simulated disk ${n} at ${path}`;
  if (kind === 'block') return { wwid: `naa.5${createHash('sha256').update(seed).digest('hex').slice(0, 15)}` };
  return { uuid: derivedUuid(seed) };
}

/** A UUID (version 4 form) derived from a seed: the same seed, the same UUID. */
export function derivedUuid(seed: string): string {
  const bytes = new Uint8Array(createHash('sha256').update(seed).digest().subarray(0, 16));
  bytes[6] = ((bytes[6] ?? 0) & 0x0f) | 0x40;
  bytes[8] = ((bytes[8] ?? 0) & 0x3f) | 0x80;
  return formatUuid(bytes);
}

export interface ResolvedVolume {
  readonly dir: string;
  readonly name: string;
  readonly className: string | undefined;
  /** Path in the agent's container. */
  readonly path: string;
  readonly pvName: string | undefined;
  /** How the timeline names it: `class/entry`, or its path. */
  readonly display: string;
}

export interface DisksContext {
  readonly volumes: MemoryVolumes;
  readonly cluster: Cluster;
  readonly nodeName: string;
  /** The config the agent applies now (it changes with reloads). */
  config(): ProvisionerConfig;
}

export class Disks {
  private readonly records = new Map<string, DiskRecord>();

  constructor(private readonly ctx: DisksContext) {}

  /** Disks not removed by a step. */
  get present(): number {
    return [...this.records.values()].filter((d) => d.removed !== true).length;
  }

  classOfDir(dir: string): string | undefined {
    return Object.entries(this.ctx.config().storageClassMap).find(([, c]) => c.mountDir === dir)?.[0];
  }

  /** How the timeline names the volume at dir/name. */
  display(dir: string, name: string, className: string | undefined): string {
    return className !== undefined ? `${className}/${name}` : posix.join(dir, name);
  }

  /** The timeline's name of the volume at a container path (its class known or looked up). */
  volumeAt(path: string, className?: string): string {
    return this.display(posix.dirname(path), posix.basename(path), className);
  }

  /** The class of the volume at a path: the disk's, or that of the discovery directory holding it. */
  classOfPath(path: string): string | undefined {
    return this.records.get(path)?.className ?? this.classOfDir(posix.dirname(path));
  }

  /** The PV name the agent gives the volume at a path, if a class holds it. */
  pvNameAt(path: string): string | undefined {
    const className = this.classOfPath(path);
    return className !== undefined
      ? persistentVolumeName(posix.basename(path), this.ctx.nodeName, className)
      : undefined;
  }

  private resolved(dir: string, name: string, className: string | undefined): ResolvedVolume {
    return {
      dir,
      name,
      className,
      path: posix.join(dir, name),
      pvName: className !== undefined ? persistentVolumeName(name, this.ctx.nodeName, className) : undefined,
      display: this.display(dir, name, className),
    };
  }

  /** Identities derived so far per path: a disk added again, or swapped in, is another disk. */
  private readonly derived = new Map<string, number>();

  private nextIdentity(kind: 'filesystem' | 'block', path: string): DiskIdentity {
    const n = this.derived.get(path) ?? 0;
    this.derived.set(path, n + 1);
    return derivedIdentity(kind, path, n);
  }

  /** The identity an entry gets: the one given, else a derived one (a mounted filesystem, a block device). */
  private identityFor(entry: EntrySpec, given: DiskIdentity | undefined): DiskIdentity | undefined {
    const path = entryPath(entry);
    if (entry.type === 'directory' && entry.mounted) return given ?? this.nextIdentity('filesystem', path);
    if (entry.type === 'block') return given ?? this.nextIdentity('block', path);
    return undefined;
  }

  /** The timeline's name of the volume whose PV is named pvName, if a disk of the replay has it. */
  volumeOfPv(pvName: string): string | undefined {
    for (const [path, d] of this.records)
      if (this.pvNameAt(path) === pvName) return this.display(d.dir, d.name, d.className);
    return undefined;
  }

  private known(name: string, className: string): DiskRecord | undefined {
    return [...this.records.values()].find((d) => d.name === name && d.className === className);
  }

  async resolve(ref: string): Promise<ResolvedVolume> {
    const classes = this.ctx.config().storageClassMap;
    if (ref.startsWith('/')) {
      const dir = posix.dirname(ref);
      return this.resolved(dir, posix.basename(ref), this.records.get(ref)?.className ?? this.classOfDir(dir));
    }
    if (ref.startsWith('local-pv-')) {
      const pv = await this.ctx.cluster.persistentVolumes.get(ref).catch(() => undefined);
      if (!pv) throw new StepError(`no PersistentVolume named ${ref}`);
      const className = pv.spec.storageClassName ?? '';
      const name = posix.basename(pv.spec.local?.path ?? '');
      const dir =
        this.known(name, className)?.dir ?? classes[className]?.mountDir ?? posix.dirname(pv.spec.local?.path ?? '/');
      return { ...this.resolved(dir, name, className), pvName: ref };
    }
    const slash = ref.indexOf('/');
    if (slash > 0) {
      const className = ref.slice(0, slash);
      const name = ref.slice(slash + 1);
      const dir = this.known(name, className)?.dir ?? classes[className]?.mountDir;
      if (dir === undefined) throw new StepError(`no volume ${ref}: class ${className} is not configured`);
      return this.resolved(dir, name, className);
    }
    const named = [...this.records.values()].filter((d) => d.name === ref);
    const present = named.filter((d) => d.removed !== true);
    const matches = present.length > 0 ? present : named;
    if (matches.length > 1)
      throw new StepError(
        `volume "${ref}" is ambiguous: ${matches.map((m) => this.display(m.dir, m.name, m.className)).join(', ')}; write class/entry`,
      );
    const only = matches[0];
    if (only) return this.resolved(only.dir, only.name, only.className);
    for (const [className, c] of Object.entries(classes)) {
      const names = await this.ctx.volumes.listDirectory(c.mountDir).catch(() => [] as readonly string[]);
      if (names.includes(ref)) return this.resolved(c.mountDir, ref, className);
    }
    throw new StepError(
      `no volume named "${ref}" (disks: ${[...this.records.values()].map((d) => d.name).join(', ') || 'none'})`,
    );
  }

  /** Puts a scenario's disk on the node (in a class's mountDir, or an explicit directory). */
  add(disk: DiskSpec, fail: (text: string) => never): DiskRecord {
    let dir = disk.dir;
    let className = disk.className;
    if (dir === undefined) {
      const c = this.ctx.config().storageClassMap[className ?? ''];
      if (!c) fail(`class ${className ?? ''} is not configured: use a configured class or dir`);
      dir = c.mountDir;
    } else {
      className = this.classOfDir(dir);
    }
    const entry: EntrySpec = {
      dir,
      name: disk.name,
      type: disk.type,
      mounted: disk.mounted,
      ...(disk.capacity !== undefined ? { capacity: disk.capacity } : {}),
      ...(disk.fsType !== undefined ? { fsType: disk.fsType } : {}),
      ...(disk.target !== undefined ? { target: disk.target } : {}),
    };
    const identity = this.identityFor(entry, disk.identity);
    try {
      addEntry(this.ctx.volumes, entry, identity ?? {});
    } catch (err) {
      fail(`cannot add ${posix.join(dir, disk.name)}: ${errorMessage(err)}`);
    }
    const record: DiskRecord = {
      dir,
      name: disk.name,
      className,
      type: disk.type,
      mounted: entry.mounted,
      ...(identity !== undefined ? { identity, original: identity } : {}),
    };
    this.records.set(posix.join(dir, disk.name), record);
    return record;
  }

  /** Puts an entry of a node-facts fixture on the node. */
  addFact(entry: EntrySpec, fail: (text: string) => never): void {
    const identity = this.identityFor(entry, undefined);
    try {
      addEntry(this.ctx.volumes, entry, identity ?? {});
    } catch (err) {
      fail(`${entry.name}: ${errorMessage(err)}`);
    }
    this.records.set(posix.join(entry.dir, entry.name), {
      dir: entry.dir,
      name: entry.name,
      className: this.classOfDir(entry.dir),
      type: entry.type,
      mounted: entry.mounted,
      ...(identity !== undefined ? { identity, original: identity } : {}),
    });
  }

  /**
   * The disk goes away as a pulled disk does once the node has noticed: a filesystem is unmounted
   * and its mount point directory stays behind (empty, on the filesystem holding it); a block
   * device's node goes. Its record stays (its PV may outlive it).
   */
  async pull(v: ResolvedVolume, fail: (text: string) => never): Promise<'mount-point' | 'nothing'> {
    const { volumes } = this.ctx;
    const known = this.records.get(v.path);
    const info = await volumes.entryInfo(v.path);
    const real = info.realPath ?? v.path;
    const mounted = (await volumes.mountPoints()).some((m) => m.mountPoint === real);
    if (info.kind === 'directory' && !mounted)
      fail(
        `${v.display}: nothing is mounted at ${v.path}: a plain directory has no disk to pull (disk removed takes it away)`,
      );
    if (info.kind !== 'directory' && info.kind !== 'block-device')
      fail(
        `${v.display}: only a mounted filesystem or a block device can be pulled; ${info.kind === 'missing' ? `nothing is at ${v.path}` : `${v.path} is neither`}`,
      );
    try {
      if (mounted) volumes.removeMount(real);
      else volumes.remove(real);
    } catch (err) {
      fail(`cannot pull the disk at ${v.path}: ${errorMessage(err)}`);
    }
    if (known) {
      // No disk there any more: no identity but the directory's (or nothing).
      this.records.set(v.path, {
        dir: known.dir,
        name: known.name,
        className: known.className,
        type: known.type,
        mounted: false,
        ...(mounted ? {} : { removed: true }),
        ...(known.original !== undefined ? { original: known.original } : {}),
      });
    }
    return mounted ? 'mount-point' : 'nothing';
  }

  /**
   * Puts another disk behind the volume, at the same path with the same capacity: a filesystem is
   * unmounted and another one (another UUID, a new device) mounted there; a block device gets
   * another disk (another WWID) behind the same device node.
   */
  async swap(v: ResolvedVolume, to: SwapTarget, fail: (text: string) => never): Promise<SwapResult> {
    const { volumes } = this.ctx;
    const known = this.records.get(v.path);
    const info = await volumes.entryInfo(v.path);
    const real = info.realPath ?? v.path;
    const mount = (await volumes.mountPoints()).findLast((m) => m.mountPoint === real);
    const kind = info.kind === 'block-device' ? 'block' : info.kind === 'directory' && mount ? 'filesystem' : undefined;
    if (kind === undefined) {
      const what =
        info.kind === 'missing'
          ? 'nothing is there'
          : info.kind === 'directory'
            ? 'it is a directory with nothing mounted on it'
            : 'it is neither a directory nor a block device';
      fail(`${v.display}: only a mounted filesystem or a block device can be swapped; at ${v.path} ${what}`);
    }
    let identity: DiskIdentity;
    if (to.kind === 'given') {
      identity = 'uuid' in to ? { uuid: to.uuid } : { wwid: to.wwid };
      if ('uuid' in identity !== (kind === 'filesystem'))
        fail(
          kind === 'filesystem'
            ? `${v.display} is a mounted filesystem: give uuid, not wwid`
            : `${v.display} is a block device: give wwid, not uuid`,
        );
    } else if (to.kind === 'original') {
      if (known?.original === undefined) fail(`${v.display}: the replay did not add this disk: it has no original`);
      identity = known.original;
    } else {
      identity = this.nextIdentity(kind, v.path);
    }
    const before = await volumes.volumeIdentity(v.path).catch(() => undefined);
    try {
      if (kind === 'block') {
        volumes.replaceBlockDevice(
          v.path,
          await volumes.blockDeviceCapacity(v.path),
          'wwid' in identity ? { wwid: identity.wwid } : {},
        );
      } else if (mount) {
        const capacity = await volumes.filesystemCapacity(v.path);
        volumes.removeMount(real);
        volumes.addMount(real, {
          fsType: mount.fsType,
          source: mount.source,
          capacity,
          ...('uuid' in identity ? { uuid: identity.uuid } : {}),
        });
      }
    } catch (err) {
      fail(`cannot swap the disk at ${v.path}: ${errorMessage(err)}`);
    }
    const after = await volumes.volumeIdentity(v.path).catch(() => undefined);
    if (known) this.records.set(v.path, { ...known, identity });
    return { kind, before: before?.id, after: after?.id };
  }

  /** Takes the volume off the node (unmounted, gone); its record stays, marked removed. */
  async remove(v: ResolvedVolume, fail: (text: string) => never): Promise<void> {
    const known = this.records.get(v.path);
    const info = await this.ctx.volumes.entryInfo(v.path);
    if (info.kind === 'missing' && !info.isSymlink) fail(`${v.display}: nothing at ${v.path}`);
    const mounted = (await this.ctx.volumes.mountPoints()).some((m) => m.mountPoint === v.path);
    try {
      removeEntry(this.ctx.volumes, {
        dir: v.dir,
        name: v.name,
        type: known?.type ?? (info.kind === 'directory' ? 'directory' : 'file'),
        mounted,
      });
    } catch (err) {
      fail(`cannot remove ${v.path}: ${errorMessage(err)}`);
    }
    if (known) this.records.set(v.path, { ...known, removed: true });
  }
}
