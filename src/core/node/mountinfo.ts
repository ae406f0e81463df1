// A pure parser of /proc/<pid>/mountinfo (see proc_pid_mountinfo(5)). One line per mount:
//
//   36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//   (1)(2) (3)   (4)   (5)      (6)      (7)   (8) (9)   (10)         (11)
//
// (1) mount ID, (2) parent ID, (3) major:minor, (4) root, (5) mount point, (6) mount options,
// (7) zero or more optional fields (shared:N, master:N, propagate_from:N, unbindable), (8) the
// `-` separator, (9) filesystem type, (10) source, (11) super options.
//
// Fields are separated by single spaces. The kernel escapes space, tab, newline and backslash in
// paths as 3-digit octal (`\040`, `\011`, `\012`, `\134`), so a field never holds a literal space
// and a line never holds a literal newline; every other byte (UTF-8 included) is written as is.

import type { MountPoint } from './volumes.js';

/** One line of mountinfo. Paths and the source have their octal escapes decoded. */
export interface MountInfoEntry extends MountPoint {
  readonly mountId: number;
  readonly parentId: number;
  readonly major: number;
  readonly minor: number;
  /** Per-mount options (field 6), e.g. `['rw', 'relatime']`. */
  readonly mountOptions: readonly string[];
  /** Optional fields (field 7) as written, e.g. `['shared:1', 'master:2']`; often empty. */
  readonly optionalFields: readonly string[];
  /** Per-superblock options (field 11), decoded, e.g. `rw,size=16384k`. */
  readonly superOptions: string;
}

export class MountInfoParseError extends Error {
  constructor(
    /** 1-based line number in the parsed text. */
    readonly line: number,
    readonly text: string,
    reason: string,
  ) {
    super(`mountinfo line ${line}: ${reason}: ${JSON.stringify(text)}`);
    this.name = 'MountInfoParseError';
  }
}

const ESCAPE = /\\([0-3][0-7]{2})/g;

/**
 * Decodes the kernel's octal escapes (`\ooo`, one byte each). Escapes are decoded as bytes and the
 * result re-read as UTF-8, so an escaped byte of a multi-byte character also decodes correctly.
 * A backslash not followed by three octal digits is kept as is.
 */
export function decodeMountInfoField(field: string): string {
  if (!field.includes('\\')) return field;
  if (!/\\[23][0-7]{2}/.test(field)) {
    // Fast path: every escape stands for an ASCII character (the kernel only writes \040 \011 \012 \134).
    return field.replace(ESCAPE, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));
  }
  const bytes: number[] = [];
  let last = 0;
  for (const match of field.matchAll(ESCAPE)) {
    bytes.push(...Buffer.from(field.slice(last, match.index), 'utf8'));
    bytes.push(parseInt(match[1] ?? '0', 8));
    last = match.index + match[0].length;
  }
  bytes.push(...Buffer.from(field.slice(last), 'utf8'));
  return Buffer.from(bytes).toString('utf8');
}

/**
 * Escapes a path the way the kernel writes it to mountinfo (`mangle()` / `seq_escape()`): space,
 * tab, newline and backslash become `\ooo`. Used by tests and by the in-memory node to render a
 * mountinfo-shaped table.
 */
export function encodeMountInfoField(field: string): string {
  return field.replace(/[ \t\n\\]/g, (c) => `\\${c.charCodeAt(0).toString(8).padStart(3, '0')}`);
}

function parseId(value: string | undefined, what: string, line: number, text: string): number {
  if (value === undefined || !/^\d+$/.test(value)) {
    throw new MountInfoParseError(line, text, `${what} is not a number`);
  }
  return Number(value);
}

const NO_FIELDS: readonly string[] = Object.freeze([]);

/**
 * Equal values of one table, shared: a node's mounts repeat their options, filesystem types,
 * sources and devices (1,000 bind mounts of one disk: one of each instead of 1,000), and the
 * agent keeps its last table.
 */
class SharedValues {
  private readonly strings = new Map<string, string>();
  private readonly lists = new Map<string, readonly string[]>();

  string(value: string): string {
    const known = this.strings.get(value);
    if (known !== undefined) return known;
    this.strings.set(value, value);
    return value;
  }

  /** `text` split at `separator`, frozen (entries share it). */
  list(text: string, separator: string): readonly string[] {
    if (text === '') return NO_FIELDS;
    const known = this.lists.get(text);
    if (known !== undefined) return known;
    const list = Object.freeze(text.split(separator).map((v) => this.string(v)));
    this.lists.set(text, list);
    return list;
  }
}

function parseLine(text: string, line: number, shared: SharedValues): MountInfoEntry {
  const fields = text.split(' ');
  // Optional fields start at index 6; root and mount point always start with '/', options are
  // never '-', so the first '-' from index 6 on is the separator.
  const separator = fields.indexOf('-', 6);
  if (separator < 0) throw new MountInfoParseError(line, text, "no '-' separator after six fields");
  if (fields.length - separator - 1 < 2) {
    throw new MountInfoParseError(line, text, 'missing filesystem type or source after the separator');
  }
  const [id, parent, device, root, mountPoint, options] = fields;
  const mountId = parseId(id, 'mount ID', line, text);
  const parentId = parseId(parent, 'parent ID', line, text);
  const deviceMatch = /^(\d+):(\d+)$/.exec(device ?? '');
  if (deviceMatch === null) throw new MountInfoParseError(line, text, 'major:minor is malformed');
  if (root === undefined || mountPoint === undefined || options === undefined) {
    throw new MountInfoParseError(line, text, 'too few fields');
  }
  return {
    mountId,
    parentId,
    device: shared.string(deviceMatch[0]),
    major: Number(deviceMatch[1]),
    minor: Number(deviceMatch[2]),
    root: decodeMountInfoField(root),
    mountPoint: decodeMountInfoField(mountPoint),
    mountOptions: shared.list(options, ','),
    optionalFields: shared.list(fields.slice(6, separator).join(' '), ' '),
    fsType: shared.string(decodeMountInfoField(fields[separator + 1] ?? '')),
    source: shared.string(decodeMountInfoField(fields[separator + 2] ?? '')),
    // Super options carry no unescaped spaces either; joining keeps a malformed tail rather than losing it.
    superOptions: shared.string(decodeMountInfoField(fields.slice(separator + 3).join(' '))),
  };
}

/**
 * Parses the whole text of a mountinfo file, in file order (the kernel lists mounts in mount
 * order, so a later entry for the same mount point is the one on top). Blank lines are ignored;
 * a malformed line throws MountInfoParseError.
 */
export function parseMountInfo(text: string): MountInfoEntry[] {
  const entries: MountInfoEntry[] = [];
  const shared = new SharedValues();
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] ?? '';
    if (line === '') continue;
    entries.push(parseLine(line, i + 1, shared));
  }
  return entries;
}

/** Renders one entry as a mountinfo line, escaping as the kernel does (inverse of parsing). */
export function formatMountInfoLine(entry: MountInfoEntry): string {
  return [
    String(entry.mountId),
    String(entry.parentId),
    entry.device,
    encodeMountInfoField(entry.root),
    encodeMountInfoField(entry.mountPoint),
    entry.mountOptions.join(','),
    ...entry.optionalFields,
    '-',
    encodeMountInfoField(entry.fsType),
    encodeMountInfoField(entry.source),
    encodeMountInfoField(entry.superOptions),
  ].join(' ');
}
