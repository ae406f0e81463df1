import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';

import {
  MountInfoParseError,
  decodeMountInfoField,
  encodeMountInfoField,
  formatMountInfoLine,
  parseMountInfo,
  type MountInfoEntry,
} from '../../../src/core/node/mountinfo.js';

// Lines as a 6.x kernel writes them (the first from proc_pid_mountinfo(5)).
const SAMPLE = [
  '36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue',
  '26 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw,discard',
  '41 26 0:38 / /mnt/disks/vol\\0401 rw,relatime - tmpfs tmpfs rw,size=16384k',
  '42 26 0:38 /sub\\040dir /var/lib/kubelet/pods/x/volumes/local\\011pv rw,relatime shared:7 master:3 propagate_from:2 - tmpfs tmpfs rw,size=16384k',
  '43 26 0:39 / /mnt/disks/line\\012break\\134back rw,nosuid,nodev unbindable - tmpfs my\\040source rw',
  '44 26 7:0 / /mnt/disks/ssd-ä-日本-🙂 ro,relatime - ext4 /dev/loop0 ro',
  '45 26 0:40 / /mnt/empty-source rw - tmpfs  rw',
].join('\n');

describe('parseMountInfo', () => {
  const entries = parseMountInfo(`${SAMPLE}\n`);
  function entry(index: number): MountInfoEntry {
    const found = entries[index];
    assert.ok(found !== undefined, `entry ${index}`);
    return found;
  }

  it('parses every field of a line with one optional field', () => {
    assert.deepEqual(entries[0], {
      mountId: 36,
      parentId: 35,
      device: '98:0',
      major: 98,
      minor: 0,
      root: '/mnt1',
      mountPoint: '/mnt2',
      mountOptions: ['rw', 'noatime'],
      optionalFields: ['master:1'],
      fsType: 'ext3',
      source: '/dev/root',
      superOptions: 'rw,errors=continue',
    } satisfies MountInfoEntry);
  });

  it('takes zero to several optional fields before the separator', () => {
    assert.deepEqual(
      entries.map((e) => e.optionalFields),
      [['master:1'], ['shared:1'], [], ['shared:7', 'master:3', 'propagate_from:2'], ['unbindable'], [], []],
    );
    assert.deepEqual(
      entries.map((e) => e.fsType),
      ['ext3', 'ext4', 'tmpfs', 'tmpfs', 'tmpfs', 'ext4', 'tmpfs'],
    );
  });

  it('decodes \\040 (space), \\011 (tab), \\012 (newline) and \\134 (backslash) in root, mount point and source', () => {
    assert.equal(entry(2).mountPoint, '/mnt/disks/vol 1');
    assert.equal(entry(3).root, '/sub dir');
    assert.equal(entry(3).mountPoint, '/var/lib/kubelet/pods/x/volumes/local\tpv');
    assert.equal(entry(4).mountPoint, '/mnt/disks/line\nbreak\\back');
    assert.equal(entry(4).source, 'my source');
  });

  it('keeps non-ASCII mount points (written unescaped as UTF-8)', () => {
    assert.equal(entry(5).mountPoint, '/mnt/disks/ssd-ä-日本-🙂');
    assert.equal(entry(5).device, '7:0');
  });

  it('accepts an empty source', () => {
    assert.equal(entry(6).source, '');
    assert.equal(entry(6).superOptions, 'rw');
  });

  it('ignores blank lines and reports a malformed line with its number', () => {
    assert.deepEqual(parseMountInfo(''), []);
    assert.equal(parseMountInfo('\n\n26 1 254:0 / / rw - ext4 /dev/vda rw\n\n').length, 1);
    assert.throws(
      () => parseMountInfo('26 1 254:0 / / rw - ext4 /dev/vda rw\n27 26 0:5 / /x rw ext4 /dev/vda rw'),
      (error) => error instanceof MountInfoParseError && error.line === 2 && /separator/.test(error.message),
    );
    assert.throws(() => parseMountInfo('x 1 254:0 / / rw - ext4 /dev/vda rw'), /mount ID is not a number/);
    assert.throws(() => parseMountInfo('26 1 254-0 / / rw - ext4 /dev/vda rw'), /major:minor/);
    assert.throws(() => parseMountInfo('26 1 254:0 / / rw - ext4'), /missing filesystem type or source/);
  });

  it("treats a mount point named '-' as a path, not the separator", () => {
    const [entry] = parseMountInfo('50 26 0:41 / /- rw - tmpfs - rw');
    assert.equal(entry?.mountPoint, '/-');
    assert.equal(entry.source, '-');
  });
});

describe('mountinfo escapes', () => {
  it('decodes an escaped byte inside a multi-byte sequence and leaves a stray backslash alone', () => {
    assert.equal(decodeMountInfoField('/a\\303\\244'), '/aä');
    assert.equal(decodeMountInfoField('/ü\\040x'), '/ü x');
    assert.equal(decodeMountInfoField('/a\\b\\12'), '/a\\b\\12');
  });

  it('encodes exactly space, tab, newline and backslash', () => {
    assert.equal(encodeMountInfoField('/a b\tc\nd\\e-ü'), '/a\\040b\\011c\\012d\\134e-ü');
  });

  // The kernel escapes these four; any other character (UTF-8 included) goes out as is.
  const pathChar = fc.oneof(
    fc.constantFrom(' ', '\t', '\n', '\\', '/', '-', '0', '4'),
    fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }),
  );
  const path = fc
    .array(pathChar, { maxLength: 40 })
    .map((chars) => `/${chars.join('')}`)
    .filter((p) => !p.includes('\0'));

  it('property: a path escaped the kernel way parses back to itself, in every decoded field', () => {
    fc.assert(
      fc.property(
        path,
        path,
        path,
        fc.array(fc.constantFrom('shared:1', 'master:2', 'unbindable'), { maxLength: 3 }),
        (mountPoint, root, source, optional) => {
          const line = `99 1 0:77 ${encodeMountInfoField(root)} ${encodeMountInfoField(mountPoint)} rw ${optional.map((o) => `${o} `).join('')}- tmpfs ${encodeMountInfoField(source)} rw`;
          assert.ok(!line.includes('\n'), 'an escaped line holds no newline');
          const [entry, ...rest] = parseMountInfo(`${line}\n`);
          assert.deepEqual(rest, []);
          assert.equal(entry?.mountPoint, mountPoint);
          assert.equal(entry.root, root);
          assert.equal(entry.source, source);
          assert.deepEqual(entry.optionalFields, optional);
        },
      ),
    );
  });

  it('property: formatMountInfoLine and parseMountInfo are inverse', () => {
    fc.assert(
      fc.property(path, path, fc.nat(), fc.nat(), (mountPoint, root, major, minor) => {
        const entry: MountInfoEntry = {
          mountId: 7,
          parentId: 1,
          device: `${major}:${minor}`,
          major,
          minor,
          root,
          mountPoint,
          mountOptions: ['rw', 'relatime'],
          optionalFields: ['shared:3'],
          fsType: 'ext4',
          source: mountPoint,
          superOptions: 'rw,discard',
        };
        assert.deepEqual(parseMountInfo(formatMountInfoLine(entry)), [entry]);
      }),
    );
  });
});

describe('parseMountInfo: what a table keeps', () => {
  it('shares the equal options, types, sources and devices of its mounts (frozen), and keeps each path', () => {
    const lines = [0, 1, 2].map(
      (i) =>
        `${String(100 + i)} 20 0:45 /v${String(i)} /disc/v${String(i)} rw,relatime shared:7 - tmpfs tmpfs rw,size=65536k`,
    );
    const [a, b, c] = parseMountInfo(lines.join('\n'));
    assert.ok(a && b && c);
    assert.equal(a.mountOptions, b.mountOptions, 'one options array');
    assert.equal(b.optionalFields, c.optionalFields);
    assert.ok(Object.isFrozen(a.mountOptions) && Object.isFrozen(a.optionalFields));
    assert.deepEqual(a.mountOptions, ['rw', 'relatime']);
    assert.deepEqual([a.fsType, a.source, a.superOptions, a.device], ['tmpfs', 'tmpfs', 'rw,size=65536k', '0:45']);
    assert.deepEqual(
      [a, b, c].map((m) => [m.root, m.mountPoint]),
      [
        ['/v0', '/disc/v0'],
        ['/v1', '/disc/v1'],
        ['/v2', '/disc/v2'],
      ],
    );
    assert.deepEqual(parseMountInfo('1 0 8:1 / / rw - ext4 /dev/sda1 rw')[0]?.optionalFields, []);
  });
});
