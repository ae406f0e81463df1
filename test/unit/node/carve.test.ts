// The parts of carving (src/core/node/carve.ts) that need no root and no block device: the
// command runner's timeout and bounded output, and the refusals that come before any write.
// The carve itself is tested on real loop devices in test/integration/node/carve.test.ts.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';

import { OUTPUT_KEPT, carveDevice, linuxDeviceCarver, runCommand } from '../../../src/core/node/carve.js';

const node = process.execPath;

describe('runCommand', () => {
  it('reports the exit code and what the command printed on stdout and stderr', async () => {
    const outcome = await runCommand(node, ['-e', 'console.log("out"); console.error("err"); process.exit(3)'], 5000);
    assert.deepEqual(outcome, { code: 3, output: 'out\nerr' });
  });

  it('keeps only the last OUTPUT_KEPT characters of a chatty command', async () => {
    const outcome = await runCommand(node, ['-e', 'process.stdout.write("x".repeat(100000) + "END")'], 5000);
    assert.equal(outcome.code, 0);
    assert.equal(outcome.output.length, OUTPUT_KEPT);
    assert.ok(outcome.output.endsWith('END'));
  });

  it('kills a command that overruns its timeout, and says so', async () => {
    const started = Date.now();
    const outcome = await runCommand(node, ['-e', 'setTimeout(() => {}, 60000)'], 200);
    assert.equal(outcome.code, null);
    assert.equal(outcome.failure, 'timed out after 200 ms');
    assert.ok(Date.now() - started < 10_000);
  });

  it('reports a command that cannot start', async () => {
    const outcome = await runCommand('/nonexistent/partx', ['--add'], 5000);
    assert.equal(outcome.code, null);
    assert.match(outcome.failure ?? '', /^cannot run \/nonexistent\/partx: .*ENOENT/u);
  });
});

describe('carveDevice, before any write', () => {
  const dir = mkdtempSync(join(tmpdir(), 'lvp-carve-unit-'));
  after(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('refuses what is not a block device, leaving it as it is', async () => {
    const file = join(dir, 'image');
    writeFileSync(file, Buffer.alloc(4 * 1024 * 1024));
    let asked = false;
    const result = await carveDevice(file, 1, {
      expectBlank: () => {
        asked = true;
        return Promise.resolve(true);
      },
    });
    assert.deepEqual(result, { ok: false, refusal: 'not-a-disk', reason: `${file} is not a block device` });
    assert.equal(asked, false, 'nothing further is checked');
    assert.ok(readFileSync(file).every((b) => b === 0));
  });

  it('throws on a partition count it cannot write, naming the device', async () => {
    for (const n of [0, 129, 2.5])
      await assert.rejects(
        carveDevice('/dev/sdz', n, { expectBlank: () => Promise.resolve(true) }),
        (e: unknown) => e instanceof RangeError && e.message.includes('/dev/sdz'),
      );
  });

  it('throws, naming the device, when it cannot be opened', async () => {
    const missing = join(dir, 'gone');
    await assert.rejects(
      linuxDeviceCarver({ expectBlank: () => Promise.resolve(true) }).carve(missing, 2),
      (e: unknown) => e instanceof Error && e.message.startsWith(`cannot open ${missing} for carving:`),
    );
  });
});
