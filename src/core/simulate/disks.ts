// The disks of a replay's node: what the scenario put there (and took away), and how a step's
// volume reference — entry (`disk1`), class and entry (`fast/disk1`), PV name or container path —
// resolves to one of them under the config the agent applies now.
import { posix } from 'node:path';
import type { ProvisionerConfig } from '../config/model.js';
import type { Cluster } from '../kube/cluster.js';
import type { MemoryVolumes } from '../node/memory-volumes.js';
import { persistentVolumeName } from '../pv/naming.js';
import { errorMessage } from '../unknown-values.js';
import { addEntry, removeEntry } from './node-facts.js';
import type { EntrySpec } from './node-facts.js';
import type { DiskSpec } from './scenario.js';

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
    try {
      addEntry(this.ctx.volumes, entry);
    } catch (err) {
      fail(`cannot add ${posix.join(dir, disk.name)}: ${errorMessage(err)}`);
    }
    const record: DiskRecord = { dir, name: disk.name, className, type: disk.type, mounted: entry.mounted };
    this.records.set(posix.join(dir, disk.name), record);
    return record;
  }

  /** Puts an entry of a node-facts fixture on the node. */
  addFact(entry: EntrySpec, fail: (text: string) => never): void {
    try {
      addEntry(this.ctx.volumes, entry);
    } catch (err) {
      fail(`${entry.name}: ${errorMessage(err)}`);
    }
    this.records.set(posix.join(entry.dir, entry.name), {
      dir: entry.dir,
      name: entry.name,
      className: this.classOfDir(entry.dir),
      type: entry.type,
      mounted: entry.mounted,
    });
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
