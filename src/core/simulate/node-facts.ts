// Node facts: what the agent would see on a node — discovery directories, their entries, mounts
// and capacities — as a YAML fixture loaded into MemoryVolumes (the in-memory NodeVolumes). The
// same entry vocabulary describes a scenario's disks.
//
//   paths:
//     /mnt/fast:
//       - { name: disk1, type: directory, capacity: 20Gi }          # a mounted filesystem
//       - { name: scratch, type: directory, mounted: false }        # a plain directory
//       - { name: notes.txt, type: file }
//     /dev/lvp:
//       - { name: nvme0, type: block, capacity: 1Ti }
//       - { name: nvme1, type: symlink, target: /dev/nvme1n1 }
//   devices:                                                        # block devices (disks by rule): devices.ts
//     - { name: nvme2n1, size: 1769Gi, model: Amazon EC2 NVMe Instance Storage, serial: AWS1A2B3C4D }
import { posix } from 'node:path';
import type { Node } from 'yaml';
import { MemoryVolumes } from '../node/memory-volumes.js';
import { errorMessage } from '../unknown-values.js';
import { readDevices, SimulatedDevices } from './devices.js';
import type { DeviceSpec } from './devices.js';
import { Input, readInputText } from './input.js';

export const ENTRY_TYPES = ['directory', 'block', 'file', 'symlink'] as const;
export type EntryType = (typeof ENTRY_TYPES)[number];

export interface EntrySpec {
  /** The directory holding the entry (a class's mountDir for discovery). */
  readonly dir: string;
  readonly name: string;
  readonly type: EntryType;
  /** directory: size of its filesystem when mounted; block: size of the device. */
  readonly capacity?: number;
  /** directory only: whether a filesystem is mounted there (default true). */
  readonly mounted: boolean;
  readonly fsType?: string;
  /** symlink only: where it points (need not exist). */
  readonly target?: string;
}

export const ENTRY_KEYS = ['name', 'type', 'capacity', 'mounted', 'fsType', 'target'] as const;

export function entryPath(e: Pick<EntrySpec, 'dir' | 'name'>): string {
  return posix.join(e.dir, e.name);
}

/** Reads one entry mapping (shared by fixtures and scenario disk steps). */
export function readEntry(
  input: Input,
  node: Node | null,
  path: string,
  dir: string,
  options: { extraKeys?: readonly string[] } = {},
): EntrySpec | undefined {
  const map = input.map(node, path);
  if (!map) return undefined;
  const errorsBefore = input.sink.issues.length;
  input.pairs(map, path, [...ENTRY_KEYS, ...(options.extraKeys ?? [])]);
  const name = input.string(input.get(map, 'name'), `${path}.name`, { required: true });
  const type = input.oneOf(input.get(map, 'type'), `${path}.type`, ENTRY_TYPES, 'directory');
  const capacityNode = input.get(map, 'capacity');
  const capacity = capacityNode === null ? undefined : input.bytes(capacityNode, `${path}.capacity`);
  const mounted = input.boolean(input.get(map, 'mounted'), `${path}.mounted`, type === 'directory');
  const fsType = input.string(input.get(map, 'fsType'), `${path}.fsType`);
  const target = input.string(input.get(map, 'target'), `${path}.target`, { required: type === 'symlink' });
  if (name !== undefined && (name === '' || name.includes('/') || name === '.' || name === '..'))
    input.error(`${path}.name`, `"${name}" is not a directory entry name (no slashes)`, input.get(map, 'name'));
  if (type === 'block' && capacityNode === null)
    input.error(`${path}.capacity`, 'a block device needs a capacity (e.g. 1Ti)', map);
  if (type !== 'directory' && input.get(map, 'mounted') !== null)
    input.error(`${path}.mounted`, `only a directory can be mounted (this is a ${type})`, input.get(map, 'mounted'));
  if (type !== 'symlink' && target !== undefined)
    input.error(`${path}.target`, `only a symlink has a target (this is a ${type})`, input.get(map, 'target'));
  if (target !== undefined && !target.startsWith('/'))
    input.error(`${path}.target`, 'must be an absolute path', input.get(map, 'target'));
  if (input.sink.issues.length > errorsBefore && input.failed) return undefined;
  if (name === undefined || type === undefined || mounted === undefined) return undefined;
  return {
    dir,
    name,
    type,
    mounted: type === 'directory' && mounted,
    ...(capacity !== undefined ? { capacity } : {}),
    ...(fsType !== undefined ? { fsType } : {}),
    ...(target !== undefined ? { target } : {}),
  };
}

/**
 * Creates the entry on the in-memory node; throws NodeVolumeError (EEXIST…) when it cannot. A
 * mounted filesystem gets the `uuid` given, a block device the `wwid` (none: no identity but the
 * node's own, as a tmpfs or a disk that reports nothing).
 */
export function addEntry(
  volumes: MemoryVolumes,
  e: EntrySpec,
  identity: { readonly uuid?: string; readonly wwid?: string } = {},
): void {
  const path = entryPath(e);
  switch (e.type) {
    case 'directory':
      if (e.mounted) {
        volumes.addMount(path, {
          ...(e.capacity !== undefined ? { capacity: e.capacity } : {}),
          fsType: e.fsType ?? 'ext4',
          source: `/dev/simulated/${e.name}`,
          ...(identity.uuid !== undefined ? { uuid: identity.uuid } : {}),
        });
      } else {
        volumes.addDirectory(path);
      }
      return;
    case 'block':
      volumes.addBlockDevice(path, e.capacity ?? 0, identity.wwid !== undefined ? { wwid: identity.wwid } : {});
      return;
    case 'file':
      volumes.addFile(path);
      return;
    case 'symlink':
      volumes.addSymlink(path, e.target ?? '');
      return;
  }
}

/** Removes an entry (unmounting it first), like a disk pulled from the node. */
export function removeEntry(volumes: MemoryVolumes, e: Pick<EntrySpec, 'dir' | 'name' | 'type' | 'mounted'>): void {
  const path = entryPath(e);
  if (e.type === 'directory' && e.mounted) volumes.removeMount(path);
  volumes.remove(path);
}

export interface NodeFacts {
  readonly file: string;
  readonly entries: readonly EntrySpec[];
  /** Discovery directories listed, even empty ones. */
  readonly directories: readonly string[];
  /** The node's block devices (`devices:`), for disks by rule. */
  readonly devices: readonly DeviceSpec[];
}

/** The in-memory node of a fixture: its volumes, and its block devices (also in the volumes, at /dev). */
export interface FixtureNode {
  readonly volumes: MemoryVolumes;
  readonly devices: SimulatedDevices;
}

export function parseNodeFacts(file: string, text: string): NodeFacts {
  const input = new Input('node-facts fixture', file, text);
  const entries: EntrySpec[] = [];
  const directories: string[] = [];
  let devices: DeviceSpec[] = [];
  const root = input.docs.length === 1 ? (input.docs[0]?.root ?? null) : null;
  if (input.docs.length !== 1) input.error('', 'expected one YAML document with a "paths" mapping');
  else {
    const map = input.map(root, '');
    if (map) {
      input.pairs(map, '', ['paths', 'devices', 'kind', 'description']);
      devices = readDevices(input, input.get(map, 'devices'), 'devices');
      // `devices:` alone describes a node too: its discovery directories may all be empty.
      const pathsNode = input.get(map, 'paths');
      const paths = pathsNode === null && devices.length > 0 ? undefined : input.map(pathsNode, 'paths');
      for (const { key: dir, keyNode, value } of paths ? input.pairs(paths, 'paths') : []) {
        const at = `paths.${dir}`;
        if (!dir.startsWith('/')) {
          input.error(at, 'must be an absolute directory path', keyNode);
          continue;
        }
        directories.push(posix.resolve(dir));
        if (value === null || input.toJS(value) === null) continue;
        const items = input.list(value, at);
        const seen = new Set<string>();
        (items ?? []).forEach((item, i) => {
          const entry = readEntry(input, item, `${at}[${i}]`, posix.resolve(dir));
          if (!entry) return;
          if (seen.has(entry.name)) input.error(`${at}[${i}].name`, `duplicate entry "${entry.name}"`, item);
          seen.add(entry.name);
          entries.push(entry);
        });
      }
    }
  }
  input.check();
  return { file, entries, directories, devices };
}

/** Builds the in-memory node of a fixture. Problems creating entries are reported like parse errors. */
export function nodeFactsVolumes(facts: NodeFacts): MemoryVolumes {
  return nodeFactsNode(facts).volumes;
}

/** Builds the in-memory node of a fixture, its block devices included; problems are reported like parse errors. */
export function nodeFactsNode(facts: NodeFacts): FixtureNode {
  const volumes = new MemoryVolumes();
  const devices = new SimulatedDevices(volumes);
  const input = new Input('node-facts fixture', facts.file, '');
  // Devices first: an entry of `paths` may be a symlink to one of their /dev/disk/by-id names.
  devices.addAll(facts.devices, (text) => {
    input.error('devices', text);
  });
  for (const dir of facts.directories) {
    try {
      volumes.addDirectory(dir);
    } catch (err) {
      input.error(`paths.${dir}`, errorMessage(err));
    }
  }
  // Plain entries first, then symlinks (their targets may be other entries).
  for (const e of [...facts.entries].sort((a, b) => Number(a.type === 'symlink') - Number(b.type === 'symlink'))) {
    try {
      addEntry(volumes, e);
    } catch (err) {
      input.error(`paths.${e.dir}`, `${e.name}: ${errorMessage(err)}`);
    }
  }
  input.check();
  return { volumes, devices };
}

export async function loadNodeFacts(path: string): Promise<{ facts: NodeFacts } & FixtureNode> {
  const facts = parseNodeFacts(path, await readInputText(path, 'node-facts fixture'));
  return { facts, ...nodeFactsNode(facts) };
}
