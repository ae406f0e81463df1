// findmnt --poll's lines (`ACTION TARGET [OLD-TARGET]`, --raw escapes) and which changes concern
// the discovery directories: the filter that keeps kubelet's pod mounts from costing passes.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { MountChangeLines } from '../../../src/core/node/linux-change-watch.js';
import { mountChangeConcerns } from '../../../src/core/node/volumes.js';

describe('findmnt --poll lines', () => {
  it('reads mount, move and umount lines as findmnt writes them, escapes decoded', () => {
    const lines = new MountChangeLines();
    // As printed by util-linux findmnt --poll --raw --output ACTION,TARGET,OLD-TARGET.
    assert.deepEqual(
      lines.push('mount /mnt/fast/a\\x20b \nmove /mnt/fast/c /mnt/fast/a\\x20b\numount /mnt/fast/c /mnt/fast/c\n'),
      [['/mnt/fast/a b'], ['/mnt/fast/c', '/mnt/fast/a b'], ['/mnt/fast/c', '/mnt/fast/c']],
    );
    assert.deepEqual(lines.push('mount /mnt/d\\xc3\\xa9j\\xc3\\xa0\\x5cx \n'), [['/mnt/déjà\\x']]);
  });

  it('keeps a line split across chunks until its end arrives', () => {
    const lines = new MountChangeLines();
    assert.deepEqual(lines.push('mount /mnt/fa'), []);
    assert.deepEqual(lines.push('st/disk1 \nmou'), [['/mnt/fast/disk1']]);
    assert.deepEqual(lines.push('nt /x \n'), [['/x']]);
  });

  it('a line it cannot read, or one too long, is an unknown change (an empty list)', () => {
    const lines = new MountChangeLines();
    assert.deepEqual(lines.push('garbage\nMOUNT /x\nmount relative/path\n'), [[], [], []]);
    assert.deepEqual(lines.push('mount /' + 'a'.repeat(70 * 1024)), [[]]);
    assert.deepEqual(lines.push('\nmount /y \n'), [['/y']], 'the rest of the overlong line is dropped');
  });
});

describe('which mount changes concern discovery', () => {
  const dirs = ['/mnt/fast', '/mnt/slow/'];
  it('at, below or above a directory: yes; beside or elsewhere: no; unknown: yes', () => {
    assert.equal(mountChangeConcerns(['/mnt/fast'], dirs), true);
    assert.equal(mountChangeConcerns(['/mnt/fast/disk1'], dirs), true);
    assert.equal(mountChangeConcerns(['/mnt/slow/d/e'], dirs), true);
    assert.equal(mountChangeConcerns(['/mnt'], dirs), true, 'a mount over a parent hides the directory');
    assert.equal(mountChangeConcerns(['/'], dirs), true);
    assert.equal(mountChangeConcerns(['/mnt/faster'], dirs), false, 'a sibling with a common prefix');
    assert.equal(mountChangeConcerns(['/var/lib/kubelet/pods/u/volumes/kubernetes.io~secret/t'], dirs), false);
    assert.equal(mountChangeConcerns(['/elsewhere', '/mnt/fast/x'], dirs), true, 'a move into a directory');
    assert.equal(mountChangeConcerns([], dirs), true);
    assert.equal(mountChangeConcerns(['/mnt/fast'], []), false);
  });

  it('property: a path below a directory always concerns it, and one outside every directory and its parents never does', () => {
    const segment = fc.stringMatching(/^[a-z]{1,6}$/u);
    fc.assert(
      fc.property(
        fc.array(segment, { minLength: 1, maxLength: 3 }),
        fc.array(segment, { minLength: 1, maxLength: 3 }),
        (a, b) => {
          const dir = `/d/${a.join('/')}`;
          assert.equal(mountChangeConcerns([`${dir}/${b.join('/')}`], [dir]), true);
          assert.equal(mountChangeConcerns([`/other/${b.join('/')}`], [dir]), false);
        },
      ),
    );
  });
});
