// The real block cleaner with real scripts that start a background `sleep 1000`: whether it is
// aborted or exits by itself, nothing it started is left running afterwards, and a background
// child holding its output pipes does not keep the cleanup waiting.
import assert from 'node:assert/strict';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ProcessCleaner } from '../../../src/core/cleanup/cleaner.js';
import { waitFor } from '../../support/eventually.js';

/** Running (not gone, not a zombie waiting to be reaped). */
async function running(pid: number): Promise<boolean> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

describe('ProcessCleaner: the cleaner’s process group', () => {
  let dir = '';
  const pids: number[] = [];

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'lvp-cleaner-'));
  });
  after(async () => {
    // Whatever a failing test left behind.
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
    await rm(dir, { recursive: true, force: true });
  });

  /** A cleaner script: starts `child` in the background, records its pid, then runs `rest`. */
  async function script(name: string, child: string, rest: string): Promise<{ path: string; pidFile: string }> {
    const path = join(dir, `${name}.sh`);
    const pidFile = join(dir, `${name}.pid`);
    await writeFile(
      path,
      `#!/bin/sh\n${child} &\necho $! > '${pidFile}'\necho "wiping $LOCAL_PV_BLKDEVICE"\n${rest}\n`,
    );
    await chmod(path, 0o755);
    return { path, pidFile };
  }

  async function childPid(pidFile: string): Promise<number> {
    let pid = 0;
    await waitFor(async () => {
      pid = Number((await readFile(pidFile, 'utf8').catch(() => '')).trim());
      return pid > 0;
    }, `the script wrote ${pidFile}`);
    pids.push(pid);
    assert.ok(await running(pid), 'the background child runs');
    return pid;
  }

  it('abort ends the whole group: the background child is gone, not only the script', async () => {
    const { path, pidFile } = await script('abort', 'sleep 1000', 'wait');
    const abort = new AbortController();
    const lines: string[] = [];
    const cleaning = new ProcessCleaner({ PATH: process.env['PATH'] }).cleanBlock('/dev/fake', [path], {
      signal: abort.signal,
      onOutput: (line) => lines.push(line),
    });
    const pid = await childPid(pidFile);
    const started = Date.now();
    abort.abort();
    await assert.rejects(cleaning, /aborted/u);
    assert.ok(Date.now() - started < 4_000, 'SIGTERM is enough here: no grace period waited');
    await waitFor(async () => !(await running(pid)), `sleep ${pid} is gone after the abort`);
    assert.deepEqual(lines, ['wiping /dev/fake']);
  });

  it('a child that ignores SIGTERM gets SIGKILL after the grace period', async () => {
    const { path, pidFile } = await script('stubborn', `sh -c 'trap "" TERM; sleep 1000 & wait'`, 'wait');
    const abort = new AbortController();
    const cleaning = new ProcessCleaner({ PATH: process.env['PATH'] }, { killGraceMs: 300 }).cleanBlock(
      '/dev/fake',
      [path],
      { signal: abort.signal },
    );
    const pid = await childPid(pidFile);
    abort.abort();
    await assert.rejects(cleaning, /aborted/u);
    await waitFor(async () => !(await running(pid)), `the TERM-ignoring shell ${pid} is gone`);
  });

  it('a script that exits 0 with a child still running: the cleanup returns at once and the child is ended', async () => {
    // The child inherits the output pipes: waiting for them to close would wait 1000 s.
    const { path, pidFile } = await script('leftover', 'sleep 1000', 'exit 0');
    const started = Date.now();
    await new ProcessCleaner({ PATH: process.env['PATH'] }).cleanBlock('/dev/fake', [path], {
      signal: new AbortController().signal,
    });
    assert.ok(Date.now() - started < 4_000, `returned after ${Date.now() - started} ms`);
    const pid = Number((await readFile(pidFile, 'utf8')).trim());
    pids.push(pid);
    await waitFor(async () => !(await running(pid)), `the leftover sleep ${pid} is gone`);
  });

  it('a failing script: its status is reported and its leftovers are ended too', async () => {
    const { path, pidFile } = await script('fails', 'sleep 1000', 'exit 3');
    await assert.rejects(
      new ProcessCleaner({ PATH: process.env['PATH'] }).cleanBlock('/dev/fake', [path], {
        signal: new AbortController().signal,
      }),
      /exited with status 3/u,
    );
    const pid = Number((await readFile(pidFile, 'utf8')).trim());
    pids.push(pid);
    await waitFor(async () => !(await running(pid)), `the leftover sleep ${pid} is gone`);
  });
});
