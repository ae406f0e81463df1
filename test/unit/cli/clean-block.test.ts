// `provisioner clean-block` (what cleanup Jobs run) as a process: its usage errors (exit 2), the
// command line a Job gets from buildCleanupJob parsed as written, and a device that cannot be held
// (exit 1, the cleaner never started). One line `error: …`, no stack trace. The refusal of another
// disk (exit 7) needs a real block device: test/integration/image/image.test.ts.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { buildCleanupJob } from '../../../src/core/cleanup/jobs.js';
import { snapshotFromFileText } from '../../../src/core/config/decode/layout.js';
import { parseConfigSnapshot } from '../../../src/core/config/decode/parse.js';
import { runCli } from '../../support/cli.js';

const HANG_MS = 30_000;

function oneErrorLine(stderr: string, message: RegExp): void {
  assert.match(stderr, /^error: /u);
  assert.match(stderr, message);
  assert.doesNotMatch(stderr, /\n\s+at /u, 'no stack trace');
}

describe('provisioner clean-block', () => {
  const dir = mkdtempSync(join(tmpdir(), 'lvp-clean-block-'));
  const marker = join(dir, 'ran');
  after(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  for (const [args, message] of [
    [['--device', '/dev/loop9', '--identity', 'none'], /give the cleaner command after --/u],
    [['--device', '/dev/loop9', '--identity', 'none', '--'], /give the cleaner command after --/u],
    [['--device', '/dev/loop9', '--identity', 'none', 'touch', marker], /give the cleaner command after --/u],
    [['--identity', 'none', '--', 'touch', marker], /Missing required flag device/u],
    [['--device', '/dev/loop9', '--', 'touch', marker], /Missing required flag identity/u],
    [['--device', '', '--identity', 'none', '--', 'touch', marker], /must not be empty/u],
    [
      ['--device', '/dev/loop9', '--dry-run', '--identity', 'none', '--', 'touch', marker],
      /Nonexistent flag: --dry-run/u,
    ],
    [
      ['--device', '/dev/loop9', '--identity', 'none', 'extra', '--', 'touch', marker],
      /unexpected before --: extra$/mu,
    ],
  ] as const) {
    it(`${args.join(' ')}: a usage error (exit 2), nothing run`, async () => {
      const r = await runCli(['clean-block', ...args], { timeoutMs: HANG_MS });
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, message);
      assert.doesNotMatch(r.stderr, /\n\s+at /u, 'no stack trace');
      assert.equal(existsSync(marker), false, 'the cleaner did not run');
    });
  }

  it("a Job's command line as buildCleanupJob writes it; a device that cannot be opened: exit 1, the cleaner never ran", async () => {
    const config = parseConfigSnapshot(
      snapshotFromFileText(
        'c.yaml',
        `storageClassMap:\n  raw:\n    hostDir: /dev/lvp\n    mountDir: /dev/lvp\n    volumeMode: Block\n    blockCleanerCommand: ["touch", "${marker}", "--help"]\n`,
      ),
    ).config;
    const classConfig = config.storageClassMap['raw'];
    assert.ok(classConfig);
    const device = join(dir, 'no-such-device');
    const job = buildCleanupJob({
      pvName: 'pv',
      pvUid: 'uid',
      nodeName: 'n',
      namespace: 'ns',
      image: 'i',
      classConfig,
      config,
      devicePath: device,
      identity: 'serial:S1',
      startTime: '2024-01-01T00:00:00Z',
    });
    const [provisioner, ...args] = job.spec?.template.spec.containers[0]?.command ?? [];
    assert.equal(provisioner, 'provisioner');
    const r = await runCli(args, { timeoutMs: HANG_MS });
    assert.equal(r.code, 1, `${r.stdout}\n${r.stderr}`);
    oneErrorLine(r.stderr, new RegExp(`^error: ${device} not cleaned: cannot open ${device}: .*ENOENT.*\\n$`, 'u'));
    assert.equal(r.stdout, '', 'no help: the --help after -- is the cleaner’s');
    assert.equal(existsSync(marker), false, 'the cleaner did not run');
  });

  it('a path that is not a block device: exit 1, the cleaner never ran', async () => {
    const r = await runCli(['clean-block', '--device', dir, '--identity', 'none', '--', 'touch', marker], {
      timeoutMs: HANG_MS,
    });
    assert.equal(r.code, 1, r.stderr);
    oneErrorLine(r.stderr, /not cleaned: .*is not a block device\n$/u);
    assert.equal(existsSync(marker), false);
  });
});
