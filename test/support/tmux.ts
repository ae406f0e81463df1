// A private tmux server for tests that need a real pseudo-terminal (the dashboard's live view).
// tmux is required: scripts/setup.sh installs it; without it such a test fails, it never skips.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { setTimeout as delay } from 'node:timers/promises';

/** A private tmux server (its own socket file, no user config), so the test never touches the user's sessions. */
export class Tmux {
  constructor(readonly socket: string) {}

  static require(): void {
    const probe = spawnSync('tmux', ['-V'], { encoding: 'utf8' });
    if (probe.error !== undefined || probe.status !== 0) {
      assert.fail(
        'tmux is not installed, and the dashboard end-to-end test needs a pseudo-terminal from it: ' +
          'run scripts/setup.sh as root (it installs tmux with apt-get) or install tmux yourself ' +
          `(${probe.error?.message ?? probe.stderr.trim()})`,
      );
    }
  }

  run(...args: string[]): string {
    const r = spawnSync('tmux', ['-S', this.socket, '-f', '/dev/null', ...args], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`tmux ${args.join(' ')} failed: ${r.stderr.trim()}`);
    return r.stdout;
  }

  /** The screen of the session `dash` (start it with `run('new-session', '-d', '-s', 'dash', ...)`). */
  screen(): string {
    return this.run('capture-pane', '-p', '-t', 'dash');
  }

  keys(...keys: string[]): void {
    this.run('send-keys', '-t', 'dash', ...keys);
  }

  async waitFor(pattern: RegExp, what: string, ms = 10_000): Promise<string> {
    const until = Date.now() + ms;
    for (;;) {
      const screen = this.screen();
      if (pattern.test(screen)) return screen;
      if (Date.now() > until) assert.fail(`timed out waiting for ${what}; the screen:\n${screen}`);
      await delay(50);
    }
  }

  kill(): void {
    spawnSync('tmux', ['-S', this.socket, 'kill-server'], { stdio: 'ignore' });
  }
}
