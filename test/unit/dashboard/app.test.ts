// The ink view, rendered with ink-testing-library against a fake feed and fake services.
// (The tsconfig compiles test/**/*.ts only, so this file uses createElement instead of JSX.)
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { cleanup, render } from 'ink-testing-library';
import { createElement } from 'react';
import type { ReloadResult } from '../../../src/core/agent/reload-types.js';
import { initialState } from '../../../src/ui/dashboard/model.js';
import type { Size } from '../../../src/ui/dashboard/model.js';
import { DashboardApp } from '../../../src/ui/dashboard/app.js';
import type { DashboardServices, DiffContent } from '../../../src/ui/dashboard/app.js';
import { eventually } from '../../support/fake-admin.js';
import { errorMessage } from '../../../src/core/unknown-values.js';
import {
  APPLIED,
  cleanup as cleanupStatus,
  FakeFeed,
  fleetStatus,
  HASH_A,
  HASH_B,
  HASH_C,
  logEvent,
  published,
  REJECTED,
  status,
  T0,
  withDevices,
} from './fixtures.js';

const ESC = '\u001b';
const KEYS = {
  down: `${ESC}[B`,
  up: `${ESC}[A`,
  right: `${ESC}[C`,
  left: `${ESC}[D`,
  pageDown: `${ESC}[6~`,
  escape: ESC,
  enter: '\r',
  backspace: '\u007f',
};
// eslint-disable-next-line no-control-regex -- ANSI escape sequences
const ANSI = /\u001b\[[0-9;?]*[A-Za-z]/gu;

class FakeServices implements DashboardServices {
  reloads: boolean[] = [];
  diffs = 0;
  reloadAnswer: () => Promise<ReloadResult> = () => Promise.resolve(APPLIED);
  diffAnswer: () => Promise<DiffContent> = () =>
    Promise.resolve({
      ok: true,
      title: 'Diff: applied (generation 7) -> on disk',
      lines: [
        '--- from: agent',
        '+++ to: /etc/provisioner/config',
        '@@ -1,3 +1,3 @@',
        '-    fsType: ""',
        '+    fsType: ext4',
      ],
    });
  reload(force: boolean): Promise<ReloadResult> {
    this.reloads.push(force);
    return this.reloadAnswer();
  }
  diff(): Promise<DiffContent> {
    this.diffs += 1;
    return this.diffAnswer();
  }
  fleets = 0;
  fleetAnswer: () => Promise<DiffContent> = () => Promise.resolve({ ok: false, title: 'Fleet: none', lines: [] });
  fleet(): Promise<DiffContent> {
    this.fleets += 1;
    return this.fleetAnswer();
  }
}

interface Harness {
  feed: FakeFeed;
  services: FakeServices;
  frame: () => string;
  press: (...keys: string[]) => Promise<void>;
  waitFor: (text: string | RegExp, what?: string) => Promise<string>;
  unmount: () => void;
}

function mount(
  options: { size?: Size; color?: boolean; connect?: boolean; status?: ReturnType<typeof status> } = {},
): Harness {
  const feed = new FakeFeed();
  const services = new FakeServices();
  const size = options.size ?? { columns: 100, rows: 30 };
  const app = render(
    createElement(DashboardApp, {
      initial: initialState({ now: T0, size }),
      feed,
      services,
      color: options.color ?? false,
      now: () => T0,
      size,
      tickMs: 50,
    }),
  );
  if (options.connect !== false) {
    feed.send({ type: 'connected', at: T0 });
    feed.event({ type: 'status', at: T0, status: options.status ?? status() });
  }
  const frame = (): string => app.lastFrame() ?? '';
  const waitFor = async (text: string | RegExp, what?: string): Promise<string> => {
    const ok = (): boolean => (typeof text === 'string' ? frame().includes(text) : text.test(frame()));
    await eventually(ok, what ?? `the frame to show ${String(text)}`, 3000).catch((err: unknown) => {
      throw new Error(`${errorMessage(err)}; last frame:\n${frame()}`);
    });
    return frame();
  };
  const press = async (...keys: string[]): Promise<void> => {
    for (const k of keys) {
      app.stdin.write(k);
      // Let ink parse the key (a lone Esc waits for a possible sequence) and React commit.
      await new Promise((resolve) => setTimeout(resolve, k === ESC ? 80 : 20));
    }
  };
  return { feed, services, frame, press, waitFor, unmount: app.unmount };
}

function widths(frame: string): number[] {
  return frame.split('\n').map((line) => Array.from(line.replace(ANSI, '')).length);
}

afterEach(() => {
  cleanup();
});

describe('dashboard view', () => {
  it('shows the node, generation, hashes, volumes, cleanups and events from the feed', async () => {
    const h = mount({ connect: false });
    await h.waitFor('connecting…');
    h.feed.send({ type: 'connected', at: T0 });
    h.feed.event({ type: 'status', at: T0, status: status() });
    const frame = await h.waitFor('local-pv-11111111');
    for (const text of [
      'connected  node worker-7  up 1h02m  ready  agent 1.2.3  pid 4242',
      'config  generation 7  [in sync]  /etc/provisioner/config',
      'hashes  applied sha256:a1a1a1a1a1a1  on disk sha256:a1a1a1a1a1a1',
      'fast-disks  /mnt/fast-disks  (2 PVs, 1 skipped)',
      'local-pv-11111111 100Gi    Bound     db/data-0 /mnt/fast-disks/nvme0',
      'local-pv-33333333 2Ti      Released  web/cache /mnt/slow-disks/sda',
      'Cleanups  1 in flight',
      'local-pv-44444444    process running   42s     attempt 1',
      'connection connected to the agent',
    ]) {
      assert.ok(frame.includes(text), `missing ${JSON.stringify(text)} in\n${frame}`);
    }
    h.feed.event({ type: 'reload', at: T0, result: APPLIED });
    h.feed.event({
      type: 'cleanup',
      at: T0,
      cleanup: cleanupStatus({ pv: 'local-pv-55555555', method: 'job', state: 'queued' }),
    });
    const after = await h.waitFor('applied (fs): generation 8, 1 change');
    assert.match(after, /config {2}generation 8 {2}\[in sync\]/u);
    assert.match(after, /applied sha256:b2b2b2b2b2b2 {2}on disk sha256:b2b2b2b2b2b2/u);
    assert.match(after, /local-pv-55555555 +job +queued/u);
    assert.match(after, /Cleanups {2}2 in flight/u);
  });

  it('shows a rejected config with its errors', async () => {
    const h = mount({
      status: status({
        config: { source: '/etc/provisioner/config', appliedHash: HASH_A, onDiskHash: HASH_C, subPath: false },
        rejected: REJECTED,
        lastReload: REJECTED,
      }),
    });
    const frame = await h.waitFor('[rejected]');
    assert.match(frame, /generation 7 {2}\[rejected\]/u);
    assert.match(frame, /applied sha256:a1a1a1a1a1a1 {2}on disk sha256:c3c3c3c3c3c3/u);
    assert.match(
      frame,
      /error: \/etc\/provisioner\/config\/storageClassMap:4: storageClassMap\.fast-disks\.volumeMode: unsupp/u,
    );
    assert.match(frame, /error: useJobForCleaning: not a boolean/u);
  });

  it('? shows the help, Esc closes it', async () => {
    const h = mount();
    await h.waitFor('local-pv-11111111');
    await h.press('?');
    const help = await h.waitFor('Keys  (? or Esc closes)');
    assert.match(help, /q Ctrl-C +quit/u);
    assert.doesNotMatch(help, /local-pv-11111111/u, 'the panel covers the lists');
    await h.press(KEYS.escape);
    await h.waitFor('local-pv-11111111', 'the lists back');
  });

  it('/ filters volumes and events by substring; Esc clears', async () => {
    const h = mount();
    h.feed.event(logEvent('published slow volume'));
    h.feed.event(logEvent('something else'));
    await h.waitFor('something else');
    await h.press('/', 's', 'l', 'o', 'w');
    const filtered = await h.waitFor('filter: slow_');
    assert.match(filtered, /local-pv-33333333/u);
    assert.doesNotMatch(filtered, /local-pv-11111111/u);
    assert.match(filtered, /published slow volume/u);
    assert.doesNotMatch(filtered, /something else/u);
    assert.match(filtered, /Volumes {2}2 classes, 3 PVs {2}filter "slow"/u);
    await h.press(KEYS.enter);
    await h.waitFor('filter "slow" (Esc clears)');
    await h.press(KEYS.escape);
    const cleared = await h.waitFor('local-pv-11111111');
    assert.match(cleared, /something else/u);
  });

  it('d opens the diff panel with the on-disk changes; d closes it', async () => {
    const h = mount();
    let resolve: (d: DiffContent) => void = () => undefined;
    h.services.diffAnswer = () =>
      new Promise((r) => {
        resolve = r;
      });
    await h.waitFor('local-pv-11111111');
    await h.press('d');
    await h.waitFor('Diff: loading…');
    resolve({
      ok: true,
      title: 'Diff: applied (generation 7) -> on disk',
      lines: ['-    fsType: ""', '+    fsType: ext4'],
    });
    const frame = await h.waitFor('+    fsType: ext4');
    assert.match(frame, /Diff: applied \(generation 7\) -> on disk {2}\(d or Esc closes\)/u);
    assert.equal(h.services.diffs, 1);
    await h.press('d');
    await h.waitFor('local-pv-11111111');
  });

  it('f opens the fleet pane with every node against the desired config (the rollout service); f closes it', async () => {
    const h = mount();
    const { summarizeRollout } = await import('../../../src/core/staged-rollout/status.js');
    const { fleetPane } = await import('../../../src/ui/dashboard/services.js');
    const hash = `sha256:${'a'.repeat(64)}`;
    const status = summarizeRollout(
      { hash, source: 'configmap kube-system/lvp-config' },
      { namespace: 'kube-system', instance: 'lvp' },
      ['node-a', 'node-b'],
      [
        {
          node: 'node-a',
          appliedHash: hash,
          generation: 2,
          result: 'applied',
          source: '/etc/provisioner/config',
          agentVersion: '0.1.0',
          heartbeatAt: Date.now(),
          staleAfterMs: 180_000,
        },
      ],
      Date.now(),
    );
    h.services.fleetAnswer = () => fleetPane(() => Promise.resolve(status));
    await h.waitFor('local-pv-11111111');
    await h.press('f');
    const frame = await h.waitFor('missing agent');
    assert.match(frame, /Fleet: 1 of 2 nodes in sync/u);
    assert.match(frame, /node-a +sha256:aaaaaaaaaaaa +in sync/u);
    assert.match(frame, /\(f or Esc closes/u);
    assert.equal(h.services.fleets, 1);
    await h.press('f');
    await h.waitFor('local-pv-11111111');
  });

  it("f with a staged rollout: the pane starts with its waves, the halted node and why, within the terminal's width", async () => {
    const h = mount();
    const { fleetPane } = await import('../../../src/ui/dashboard/services.js');
    const status = fleetStatus(
      [
        published('worker-1', { result: 'rejected', candidateHash: HASH_B, reason: 'fsType: unsupported' }),
        ...['worker-2', 'worker-3', 'worker-4', 'worker-5'].map((n) => published(n)),
      ],
      {
        phase: 'halted',
        reverted: true,
        halt: { wave: 0, node: 'worker-1', reason: 'rejected the candidate: fsType: unsupported', at: T0 - 30_000 },
      },
    );
    h.services.fleetAnswer = () => fleetPane(() => Promise.resolve(status));
    await h.waitFor('local-pv-11111111');
    await h.press('f');
    const frame = await h.waitFor('Staged rollout');
    assert.match(frame, /Staged rollout {2}halted {2}1 of 3 waves open/u);
    assert.match(frame, /canary {2}open {6}0\/1 applied {2}1 failed/u);
    assert.match(frame, /wave-2 {2}not open {2}0\/2 applied {2}0 failed/u);
    assert.match(frame, /halted at canary 30s ago: node worker-1: rejected the candidate/u);
    assert.match(frame, /Left\/Right scroll/u, 'the halt line is wider than the pane: it scrolls sideways');
    assert.ok(
      frame.split('\n').every((l) => l.length <= 100),
      frame,
    );
  });

  it('d shows why there is no diff when the on-disk config is invalid', async () => {
    const h = mount();
    h.services.diffAnswer = () =>
      Promise.resolve({ ok: false, title: 'Diff: the config on disk is invalid', lines: ['error: x: not a boolean'] });
    await h.waitFor('local-pv-11111111');
    await h.press('d');
    const frame = await h.waitFor('error: x: not a boolean');
    assert.match(frame, /Diff: the config on disk is invalid/u);
  });

  it('the diff panel scrolls', async () => {
    const h = mount();
    h.services.diffAnswer = () =>
      Promise.resolve({
        ok: true,
        title: 'Diff',
        lines: Array.from({ length: 60 }, (_, i) => (i === 0 ? `line 0 ${'x'.repeat(120)} TAIL` : `line ${i}`)),
      });
    await h.waitFor('local-pv-11111111');
    await h.press('d');
    await h.waitFor('line 0');
    assert.match(h.frame(), /Diff {2}1-\d+ of 60 {2}\(d or Esc closes, Left\/Right scroll\)/u);
    assert.doesNotMatch(h.frame(), /TAIL/u);
    await h.press(...Array.from({ length: 5 }, () => KEYS.right));
    const sideways = await h.waitFor('TAIL');
    assert.match(sideways, /from column 35/u);
    await h.press(...Array.from({ length: 5 }, () => KEYS.left));
    await h.waitFor('line 0 xxx');
    await h.press(KEYS.down, KEYS.down);
    const scrolled = await h.waitFor(/Diff {2}3-/u);
    assert.doesNotMatch(scrolled, /line 1\b/u);
    await h.press(KEYS.pageDown, KEYS.pageDown, KEYS.pageDown);
    await h.waitFor('line 59');
  });

  it('r reloads through the service and shows the outcome', async () => {
    const h = mount();
    let finish: (r: ReloadResult) => void = () => undefined;
    h.services.reloadAnswer = () =>
      new Promise((r) => {
        finish = r;
      });
    await h.waitFor('local-pv-11111111');
    await h.press('r');
    await h.waitFor('reload: running…');
    assert.deepEqual(h.services.reloads, [false]);
    finish(APPLIED);
    await h.waitFor('reload: Applied: generation 8 serves sha256:b2b2b2b2b2b2 (1 change, 14 ms).');
    h.services.reloadAnswer = () => Promise.reject(new Error('the agent did not answer within 2m'));
    await h.press('R');
    await h.waitFor('reload: the agent did not answer within 2m');
    assert.deepEqual(h.services.reloads, [false, true]);
  });

  it('shows "reconnecting…" while the agent is away, and comes back', async () => {
    const h = mount();
    await h.waitFor('local-pv-11111111');
    h.feed.send({ type: 'disconnected', at: T0, reason: 'the socket does not exist', attempt: 2, retryAt: T0 + 500 });
    const away = await h.waitFor('reconnecting…');
    assert.match(away, /agent unreachable for 0ms \(attempt 2, next in 500ms\): the socket does not exist/u);
    assert.match(away, /connection lost: the socket does not exist/u);
    assert.match(away, /local-pv-11111111/u, 'the last status stays on screen');
    h.feed.send({ type: 'connected', at: T0 + 600 });
    await h.waitFor('reconnected to the agent');
  });

  it('q quits and stops the feed; Ctrl-C too', async () => {
    for (const quit of ['q', '\u0003']) {
      const h = mount();
      await h.waitFor('local-pv-11111111');
      assert.equal(h.feed.started, 1);
      await h.press(quit);
      await eventually(() => h.feed.stopped === 1, `the feed stopped after ${JSON.stringify(quit)}`);
    }
  });

  it('fits 80x24: no line wider than 80, no more than 24 lines, long content truncated', async () => {
    const long = '/mnt/a-very-long-discovery-directory-name/that-goes-on-and-on/and-on-and-on';
    const h = mount({
      size: { columns: 80, rows: 24 },
      status: status({
        config: { source: `${long}/config`, appliedHash: HASH_A, onDiskHash: HASH_C, subPath: true },
        rejected: REJECTED,
        lastReload: REJECTED,
        cleanups: Array.from({ length: 5 }, (_, i) =>
          cleanupStatus({
            pv: `local-pv-cleanup-${i}`,
            lastError: 'the cleaner exited with status 1 after a long time',
          }),
        ),
        classes: [
          {
            name: 'a-storage-class-with-a-long-name',
            hostDir: long,
            mountDir: long,
            persistentVolumes: Array.from({ length: 30 }, (_, i) => ({
              name: `local-pv-${String(i).padStart(8, '0')}`,
              path: `${long}/volume-${i}`,
              capacity: '1000Gi',
              phase: 'Bound',
              claim: 'a-namespace-with-a-long-name/a-claim-with-a-long-name',
            })),
            skipped: [],
          },
        ],
      }),
    });
    for (let i = 0; i < 40; i++) h.feed.event(logEvent(`event ${i} ${'with a very long message '.repeat(5)}`, 'warn'));
    await h.waitFor('event 39');
    const check = (what: string): void => {
      const frame = h.frame();
      const lines = frame.split('\n');
      assert.ok(lines.length <= 24, `${what}: ${lines.length} lines:\n${frame}`);
      const wide = widths(frame).filter((w) => w > 80);
      assert.deepEqual(wide, [], `${what}: lines wider than 80:\n${frame}`);
    };
    check('main view');
    assert.match(h.frame(), /…/u, 'long lines are truncated with an ellipsis');
    assert.match(h.frame(), /generation 7 {2}\[rejected\]/u);
    assert.match(
      h.frame(),
      /hashes {2}applied sha256:a1a1a1a1a1a1 {2}on disk sha256:c3c3c3c3c3c3/u,
      'both hashes fit in 80 columns',
    );
    await h.press('?');
    await h.waitFor('Keys');
    check('help');
    await h.press('?', 'd');
    await h.waitFor('fsType: ext4');
    check('diff');
    await h.press('d', '/', 'v', 'o', 'l', 'u', 'm', 'e', '-', '2');
    await h.waitFor('filter: volume-2_');
    check('filter');
  });

  it('shows the devices the rules select between the volumes and the cleanups, skipped first, at most five rows', async () => {
    const h = mount({ status: withDevices() });
    const frame = await h.waitFor('Devices');
    const lines = frame.split('\n');
    const at = lines.indexOf('  Devices  8 devices selected (3 linked, 2 planned, 2 skipped), 5 shown');
    assert.ok(at > lines.findIndex((l) => l.includes('local-pv-33333333')), frame);
    assert.deepEqual(lines.slice(at + 1, at + 7), [
      '  nvme3n1  fast-disks skipped: signature  xfs signature at offset 0',
      '  sdb      slow-disks skipped: mounted  mounted at /var/lib/containerd',
      '  nvme2n1  fast-disks linking → nvme-Amazon_EC2_NVMe_Instance_Storage_AWS2A',
      '  nvme4n1  fast-disks skipped: settling  size stable for 4000 ms of 10000',
      '  nvme10n1 fast-disks will link → nvme-Amazon_EC2_NVMe_Instance_Storage_AWS10A (plan)',
      '  Cleanups  1 in flight',
    ]);
    assert.equal(lines.length, 30);
    await h.press('/', 's', 'd', 'c');
    const filtered = await h.waitFor('filter: sdc_');
    assert.match(
      filtered,
      /^ {2}Devices {2}8 devices selected \(3 linked, 2 planned, 2 skipped\), 1 match {2}filter "sdc"$/mu,
    );
    assert.match(
      filtered,
      /^ {2}sdc slow-disks carved into 4 partitions$/mu,
      'the filter finds a row the view had cut',
    );
  });

  it('a small terminal cuts the device rows to its width and its height', async () => {
    const h = mount({ size: { columns: 60, rows: 16 }, status: withDevices() });
    const frame = await h.waitFor('Devices');
    const lines = frame.split('\n');
    assert.ok(lines.length <= 16, frame);
    assert.deepEqual(
      widths(frame).filter((w) => w > 60),
      [],
      frame,
    );
    const at = lines.findIndex((l) => l.startsWith('  Devices'));
    assert.deepEqual(lines.slice(at, at + 4), [
      '  Devices  8 devices selected (3 linked, 2 planned, 2 skipp…',
      '  nvme3n1  fast-disks skipped: signature  xfs signature at …',
      '  sdb      slow-disks skipped: mounted  mounted at /var/lib…',
      '  Cleanups  1 in flight',
    ]);
  });

  it('shows no Devices section when no rule selects a device', async () => {
    for (const agent of [status(), withDevices([], { linked: 0, skipped: 0, planned: 0 })]) {
      const h = mount({ status: agent });
      const frame = await h.waitFor('local-pv-33333333');
      assert.doesNotMatch(frame, /Devices/u);
      assert.match(
        frame,
        /^ {2}local-pv-33333333 .*\n {2}Cleanups {2}1 in flight$/mu,
        'the cleanups follow the volumes',
      );
      h.unmount();
    }
  });

  it('says so when the terminal is too small', async () => {
    const h = mount({ size: { columns: 30, rows: 8 } });
    const frame = await h.waitFor('terminal too small');
    assert.ok(
      widths(frame).every((w) => w <= 30),
      frame,
    );
  });

  it('prints no colour codes when colour is off', async () => {
    const h = mount({ color: false });
    await h.waitFor('local-pv-11111111');
    await h.press('?');
    const frame = await h.waitFor('Keys');
    assert.doesNotMatch(frame, ANSI);
    assert.match(frame, /^\+-+\+$/mu, 'ASCII borders without colour');
  });
});
