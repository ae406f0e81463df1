// The dashboard's text: formatters, the lines of each part, and the plain snapshot.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  configLines,
  devicesSection,
  diffLine,
  errorLines,
  fleetLine,
  formatAge,
  keysLine,
  lastReloadLine,
  lineText,
  reloadSummary,
  sliceLine,
  statusLine,
  titleLine,
  volumesSection,
} from '../../../src/ui/dashboard/lines.js';
import { initialState, update } from '../../../src/ui/dashboard/model.js';
import type { DashboardState } from '../../../src/ui/dashboard/model.js';
import { renderDashboardText } from '../../../src/ui/dashboard/text.js';
import { shortHash } from '../../../src/render/text.js';
import { renderRolloutText } from '../../../src/render/rollout-status.js';
import { fleetPaneLines, fleetWaveLines } from '../../../src/ui/dashboard/fleet.js';
import {
  APPLIED,
  DEVICE_VERDICTS,
  fleetStatus,
  HASH_A,
  HASH_B,
  HASH_C,
  published,
  REJECTED,
  reloadResult,
  status,
  T0,
  withDevices,
} from './fixtures.js';

const SIZE = { columns: 100, rows: 30 };

function noPass(): ReturnType<typeof status> {
  const s = { ...status() };
  delete s.lastPass;
  return s;
}

function state(overrides: Parameters<typeof status>[0] = {}): DashboardState {
  return initialState({ now: T0, size: SIZE, status: status(overrides) });
}

describe('dashboard lines: formatters', () => {
  it('shortens hashes to the algorithm and 12 hex digits', () => {
    assert.equal(shortHash(HASH_A), 'sha256:a1a1a1a1a1a1');
    assert.equal(shortHash(undefined), '-');
    assert.equal(shortHash('weird'), 'weird');
  });

  it('formats ages compactly', () => {
    assert.deepEqual([0, 850, 12_000, 184_000, 7_500_000, 2 * 86_400_000 + 3_600_000, -5].map(formatAge), [
      '0ms',
      '850ms',
      '12s',
      '3m04s',
      '2h05m',
      '2d01h',
      '0ms',
    ]);
  });

  it('summarizes every reload outcome in the words of `provisioner reload`', () => {
    assert.equal(reloadSummary(APPLIED), 'Applied: generation 8 serves sha256:b2b2b2b2b2b2 (1 change, 14 ms).');
    assert.equal(
      reloadSummary(reloadResult('applied', { forced: true })),
      'Applied (forced): generation 7 serves sha256:a1a1a1a1a1a1 (no config changes: the sync loop restarted, 14 ms).',
    );
    assert.equal(
      reloadSummary(reloadResult('noop')),
      'No change: generation 7 already serves sha256:a1a1a1a1a1a1 (14 ms).',
    );
    assert.equal(
      reloadSummary(REJECTED),
      'Rejected: the config read is invalid (2 problems); generation 7 keeps serving sha256:a1a1a1a1a1a1.',
    );
    assert.equal(
      reloadSummary(reloadResult('rolled-back', { error: 'sync timed out' })),
      'Rolled back: sync timed out; generation 7 serves sha256:a1a1a1a1a1a1 again.',
    );
    assert.equal(
      reloadSummary(reloadResult('refused', { needsAllow: ['orphans-pvs', 'ownership-change'] })),
      'Refused by the reload guard (needs --allow orphans-pvs,ownership-change); generation 7 keeps serving sha256:a1a1a1a1a1a1.',
    );
    assert.equal(
      reloadSummary(reloadResult('failed')),
      'Failed: no reason given; generation 7 serves sha256:a1a1a1a1a1a1.',
    );
  });

  it('cuts the first columns off a line, across segments', () => {
    const line = [{ text: 'abc', tone: 'added' as const }, { text: 'defg' }, { text: 'h', tone: 'bad' as const }];
    assert.deepEqual(sliceLine(line, 0), line);
    assert.deepEqual(sliceLine(line, 4), [{ text: 'efg' }, { text: 'h', tone: 'bad' }]);
    assert.deepEqual(sliceLine(line, 3), [{ text: 'defg' }, { text: 'h', tone: 'bad' }]);
    assert.deepEqual(sliceLine(line, 9), []);
  });

  it('colours diff lines by their prefix', () => {
    assert.deepEqual(
      ['--- a', '+++ b', '@@ -1 +1 @@', '+x', '-y', ' z', 'Changes:'].map((l) => diffLine(l)[0]?.tone),
      ['title', 'title', 'hunk', 'added', 'removed', undefined, 'title'],
    );
  });
});

describe('dashboard lines: header and footer', () => {
  it('shows node, version, pid, uptime and the connection', () => {
    const s = update(state(), { type: 'connected', at: T0 }).state;
    assert.equal(
      lineText(titleLine(s)),
      'provisioner dashboard  connected  node worker-7  up 1h02m  ready  agent 1.2.3  pid 4242',
    );
    const lost = update(s, {
      type: 'disconnected',
      at: T0,
      reason: 'the socket does not exist',
      attempt: 3,
      retryAt: T0 + 1000,
    }).state;
    assert.match(lineText(titleLine(lost)), /^provisioner dashboard {2}reconnecting… {2}node worker-7/u);
    assert.equal(
      lineText(statusLine(lost)),
      'agent unreachable for 0ms (attempt 3, next in 1s): the socket does not exist',
    );
  });

  it('shows generation, sync state, source, and the applied hash against the on-disk one', () => {
    assert.deepEqual(configLines(state()).map(lineText), [
      'config  generation 7  [in sync]  /etc/provisioner/config',
      'hashes  applied sha256:a1a1a1a1a1a1  on disk sha256:a1a1a1a1a1a1',
    ]);
    const propagating = state({
      config: { source: '/c', appliedHash: HASH_A, onDiskHash: HASH_B, subPath: true },
      reloadPending: true,
    });
    assert.deepEqual(configLines(propagating).map(lineText), [
      'config  generation 7  [propagating]  reload pending  subPath mount: never updates  /c',
      'hashes  applied sha256:a1a1a1a1a1a1  on disk sha256:b2b2b2b2b2b2',
    ]);
    const rejected = state({
      config: { source: '/c', appliedHash: HASH_A, onDiskHash: HASH_C, subPath: false },
      rejected: REJECTED,
    });
    const [first, second] = configLines(rejected);
    assert.equal(lineText(first), 'config  generation 7  [rejected]  /c');
    assert.equal(first.find((s) => s.text === '[rejected]')?.tone, 'bad');
    assert.equal(second.at(-1)?.tone, 'bad', 'the rejected on-disk hash is marked');
    const invalid = state({
      config: { source: '/c', appliedHash: HASH_A, subPath: false },
      rejected: reloadResult('rejected', { issues: [] }),
    });
    assert.equal(lineText(configLines(invalid)[1]), 'hashes  applied sha256:a1a1a1a1a1a1  on disk (invalid)');
    const unreadable = state({
      config: { source: '/c', appliedHash: HASH_A, subPath: false },
      rejected: reloadResult('failed', { error: 'EACCES' }),
    });
    assert.equal(lineText(configLines(unreadable)[1]), 'hashes  applied sha256:a1a1a1a1a1a1  on disk (unreadable)');
    const none = initialState({ now: T0, size: SIZE });
    assert.equal(lineText(configLines(none)[0]), 'config  waiting for the agent’s status');
  });

  it('shows the last reload and pass, and the rejected errors within a line budget', () => {
    const s = state({ lastReload: APPLIED });
    assert.equal(
      lineText(lastReloadLine(s)),
      'last reload  applied (fs) 1 change  14 ms, 986ms ago  last pass 3s ago (+0 -0, 12 ms)',
    );
    assert.equal(
      lineText(lastReloadLine(initialState({ now: T0, size: SIZE, status: noPass() }))),
      'last reload  none since the agent started',
    );
    const rejected = state({
      config: { source: '/c', appliedHash: HASH_A, onDiskHash: HASH_C, subPath: false },
      rejected: REJECTED,
    });
    assert.equal(errorLines(rejected, 3).length, 2);
    assert.deepEqual(errorLines(rejected, 1).map(lineText), ['  … and 2 more (d shows the on-disk config)']);
    assert.deepEqual(errorLines(state(), 3), []);
  });

  it('shows the keys, or why there are none', () => {
    assert.match(lineText(keysLine(state())), /^r reload {2}d diff {2}\/ filter/u);
    const readOnly = initialState({ now: T0, size: SIZE, status: status(), keys: false });
    assert.match(lineText(keysLine(readOnly)), /^read-only: stdin is not a terminal/u);
  });
});

describe('dashboard lines: volumes', () => {
  it('aligns the columns to the widest cell', () => {
    const section = volumesSection(state());
    assert.deepEqual(section.rows.map(lineText), [
      'fast-disks  /mnt/fast-disks  (2 PVs, 1 skipped)',
      '  local-pv-11111111 100Gi    Bound     db/data-0 /mnt/fast-disks/nvme0',
      '  local-pv-22222222 100Gi    Available -         /mnt/fast-disks/nvme1',
      '  skipped lost+found: not-a-mount-point (not mounted)',
      'slow-disks  /mnt/slow-disks  (1 PV)',
      '  local-pv-33333333 2Ti      Released  web/cache /mnt/slow-disks/sda',
    ]);
    assert.equal(lineText(section.header ?? []), '  PV                CAPACITY PHASE     CLAIM     PATH');
    assert.equal(lineText(section.title), '> Volumes  2 classes, 3 PVs');
  });

  it('shows the condition of a PV that is not healthy or is quarantined, and the filter finds it', () => {
    const base = status();
    const classes = base.classes.map((c) =>
      c.name !== 'slow-disks'
        ? c
        : {
            ...c,
            persistentVolumes: c.persistentVolumes.map((pv) => ({
              ...pv,
              condition: { reason: 'quarantined: identity-changed', message: 'published for disk fs-uuid:a…' },
            })),
          },
    );
    const s = { ...state(), status: { ...base, classes } };
    const rows = volumesSection(s).rows.map(lineText);
    assert.equal(
      rows[5],
      '  local-pv-33333333 2Ti      Released  web/cache /mnt/slow-disks/sda  quarantined: identity-changed',
    );
    const filtered = volumesSection({ ...s, filter: 'quarantined' }).rows.map(lineText);
    assert.deepEqual(filtered, [
      'slow-disks  /mnt/slow-disks  (1 PV)',
      '  local-pv-33333333 2Ti      Released  web/cache /mnt/slow-disks/sda  quarantined: identity-changed',
    ]);
  });

  it('shows an entry not published because its disk is already used as a problem, and the filter finds it', () => {
    const base = status();
    const conflict = {
      entry: 'nvme9',
      reason: 'identity-conflict',
      message: 'the disk at /mnt/slow-disks/nvme9 (wwid:x) is PersistentVolume local-pv-33333333’s',
    };
    const classes = base.classes.map((c) => (c.name !== 'slow-disks' ? c : { ...c, skipped: [conflict] }));
    const s = { ...state(), status: { ...base, classes } };
    const row = volumesSection(s).rows.find((r) => lineText(r).includes('nvme9'));
    assert.ok(row);
    assert.equal(lineText(row), `  skipped nvme9: identity-conflict (${conflict.message})`);
    assert.equal(row[0]?.tone, 'bad');
    const routine = volumesSection(state()).rows.find((r) => lineText(r).includes('lost+found'));
    assert.equal(routine?.[0]?.tone, 'dim', 'a routine skip stays dim');
    const filtered = volumesSection({ ...s, filter: 'identity-conflict' }).rows.map(lineText);
    assert.ok(
      filtered.some((l) => l.includes('nvme9')),
      filtered.join('\n'),
    );
  });

  it('shows the scroll range and the filter in the title', () => {
    const s = { ...state(), filter: 'nvme' };
    assert.equal(
      lineText(volumesSection(s, { offset: 2, shown: 1 }).title),
      '> Volumes  2 classes, 3 PVs  3-3 of 3  filter "nvme"',
    );
  });
});

describe('dashboard lines: devices', () => {
  const devices = (filter = ''): DashboardState => ({
    ...initialState({ now: T0, size: SIZE, status: withDevices() }),
    filter,
  });

  it('lists each selected device: skipped first, then what is still to do, then what is done; by name within each', () => {
    const section = devicesSection(devices());
    assert.equal(lineText(section.title), '  Devices  8 devices selected (3 linked, 2 planned, 2 skipped)');
    assert.deepEqual(section.rows.map(lineText), [
      '  nvme3n1  fast-disks skipped: signature  xfs signature at offset 0',
      '  sdb      slow-disks skipped: mounted  mounted at /var/lib/containerd',
      '  nvme2n1  fast-disks linking → nvme-Amazon_EC2_NVMe_Instance_Storage_AWS2A',
      '  nvme4n1  fast-disks skipped: settling  size stable for 4000 ms of 10000',
      '  nvme10n1 fast-disks will link → nvme-Amazon_EC2_NVMe_Instance_Storage_AWS10A (plan)',
      '  sdd      slow-disks will carve into 2 partitions (plan)',
      '  nvme0n1  fast-disks linked → nvme-Amazon_EC2_NVMe_Instance_Storage_AWS0A',
      '  sdc      slow-disks carved into 4 partitions',
    ]);
    assert.deepEqual(
      section.rows.map((r) => r[2]?.tone),
      ['warn', 'warn', 'accent', 'dim', 'accent', 'accent', 'ok', 'ok'],
      'a skip stands out, one still settling does not; planned and linking are accents, done is green',
    );
  });

  it('the order does not depend on the order the agent sent', () => {
    const reversed = withDevices([...DEVICE_VERDICTS].reverse());
    const state = initialState({ now: T0, size: SIZE, status: reversed });
    assert.deepEqual(devicesSection(state).rows.map(lineText), devicesSection(devices()).rows.map(lineText));
  });

  it('says how many rows the view shows, and how many match the filter', () => {
    assert.equal(
      lineText(devicesSection(devices(), 5).title),
      '  Devices  8 devices selected (3 linked, 2 planned, 2 skipped), 5 shown',
    );
    const planned = devicesSection(devices('plan'), 5);
    assert.equal(
      lineText(planned.title),
      '  Devices  8 devices selected (3 linked, 2 planned, 2 skipped), 2 match  filter "plan"',
    );
    assert.deepEqual(planned.rows.map(lineText), [
      '  nvme10n1 fast-disks will link → nvme-Amazon_EC2_NVMe_Instance_Storage_AWS10A (plan)',
      '  sdd      slow-disks will carve into 2 partitions (plan)',
    ]);
    assert.deepEqual(
      devicesSection(devices('containerd')).rows.map(lineText),
      ['  sdb slow-disks skipped: mounted  mounted at /var/lib/containerd'],
      'the filter reads the detail of a skip (the columns fit the rows shown)',
    );
    assert.deepEqual(devicesSection(devices('no-such-device')).rows, []);
  });

  it('the snapshot lists every device between the volumes and the cleanups', () => {
    const text = renderDashboardText(withDevices(), { now: T0 });
    const lines = text.split('\n');
    const at = lines.indexOf('Devices  8 devices selected (3 linked, 2 planned, 2 skipped)');
    assert.ok(at > lines.indexOf('Volumes  2 classes, 3 PVs'), text);
    assert.deepEqual(lines.slice(at + 1, at + 11), [
      '  nvme3n1  fast-disks skipped: signature  xfs signature at offset 0',
      '  sdb      slow-disks skipped: mounted  mounted at /var/lib/containerd',
      '  nvme2n1  fast-disks linking → nvme-Amazon_EC2_NVMe_Instance_Storage_AWS2A',
      '  nvme4n1  fast-disks skipped: settling  size stable for 4000 ms of 10000',
      '  nvme10n1 fast-disks will link → nvme-Amazon_EC2_NVMe_Instance_Storage_AWS10A (plan)',
      '  sdd      slow-disks will carve into 2 partitions (plan)',
      '  nvme0n1  fast-disks linked → nvme-Amazon_EC2_NVMe_Instance_Storage_AWS0A',
      '  sdc      slow-disks carved into 4 partitions',
      '',
      'Cleanups  1 in flight',
    ]);
  });

  it('no Devices section without rules, nor when the rules select no device', () => {
    const plain = renderDashboardText(status(), { now: T0 });
    assert.doesNotMatch(plain, /Devices/u);
    assert.equal(renderDashboardText(withDevices([], { linked: 0, skipped: 0, planned: 0 }), { now: T0 }), plain);
  });
});

describe('dashboard text snapshot', () => {
  it('prints the status as plain text, without colours or the connection', () => {
    const text = renderDashboardText(
      status({
        config: { source: '/etc/provisioner/config', appliedHash: HASH_A, onDiskHash: HASH_C, subPath: false },
        rejected: REJECTED,
        lastReload: REJECTED,
      }),
      { now: T0 },
    );
    assert.equal(
      text,
      [
        'provisioner dashboard  node worker-7  up 1h02m  ready  agent 1.2.3  pid 4242',
        'config  generation 7  [rejected]  /etc/provisioner/config',
        'hashes  applied sha256:a1a1a1a1a1a1  on disk sha256:c3c3c3c3c3c3',
        'last reload  rejected (fs)  14 ms, 986ms ago  last pass 3s ago (+0 -0, 12 ms)',
        '  error: /etc/provisioner/config/storageClassMap:4: storageClassMap.fast-disks.volumeMode: unsupported volume mode "Blok"',
        '  error: useJobForCleaning: not a boolean',
        '',
        'Volumes  2 classes, 3 PVs',
        '  PV                CAPACITY PHASE     CLAIM     PATH',
        'fast-disks  /mnt/fast-disks  (2 PVs, 1 skipped)',
        '  local-pv-11111111 100Gi    Bound     db/data-0 /mnt/fast-disks/nvme0',
        '  local-pv-22222222 100Gi    Available -         /mnt/fast-disks/nvme1',
        '  skipped lost+found: not-a-mount-point (not mounted)',
        'slow-disks  /mnt/slow-disks  (1 PV)',
        '  local-pv-33333333 2Ti      Released  web/cache /mnt/slow-disks/sda',
        '',
        'Cleanups  1 in flight',
        '  local-pv-44444444    process running   42s     attempt 1',
        '',
        'Live events, reload (r) and diff (d): run in a terminal, e.g. kubectl exec -it <pod> -- provisioner dashboard',
        '',
      ].join('\n'),
    );
    assert.ok(!text.includes('\u001b'), 'no escape sequences');
  });

  it('says when nothing is configured or cleaning', () => {
    const text = renderDashboardText(status({ classes: [], cleanups: [] }), { now: T0 });
    assert.match(text, /^Volumes {2}0 classes, 0 PVs\n {2}no classes configured$/mu);
    assert.match(text, /^Cleanups {2}none in flight$/mu);
  });
});

describe('dashboard lines: the fleet pane', () => {
  /** The canary rejected the candidate and the halt reverted it: the rollout stops there. */
  function halted(): ReturnType<typeof fleetStatus> {
    return fleetStatus(
      [
        published('worker-1', { result: 'rejected', candidateHash: HASH_B, reason: 'fsType: unsupported "xfs2"' }),
        ...['worker-2', 'worker-3', 'worker-4', 'worker-5'].map((n) => published(n)),
      ],
      {
        phase: 'halted',
        reverted: true,
        halt: {
          wave: 0,
          node: 'worker-1',
          reason: 'rejected the candidate: fsType: unsupported "xfs2"',
          at: T0 - 30_000,
        },
      },
    );
  }

  const HALTED_BLOCK = [
    'Staged rollout  halted  1 of 3 waves open  candidate sha256:b2b2b2b2b2b2',
    '  canary  open      0/1 applied  1 failed',
    '  wave-1  not open  0/2 applied  0 failed',
    '  wave-2  not open  0/2 applied  0 failed',
    '  halted at canary 30s ago: node worker-1: rejected the candidate: fsType: unsupported "xfs2"; its nodes run stable again',
  ];

  it('a staged rollout: its waves in a compact block (open or not, applied of total, failed), then the halted node and why', () => {
    const s = halted();
    assert.ok(s.staged !== undefined);
    assert.deepEqual(fleetWaveLines(s.staged, s.checkedAt), HALTED_BLOCK);
    const progressing = fleetStatus(
      [
        published('worker-1', { appliedHash: HASH_B }),
        published('worker-2', { appliedHash: HASH_B }),
        ...['worker-3', 'worker-4', 'worker-5'].map((n) => published(n)),
      ],
      { opened: 2 },
    );
    assert.ok(progressing.staged !== undefined);
    assert.deepEqual(fleetWaveLines(progressing.staged, progressing.checkedAt), [
      'Staged rollout  progressing  2 of 3 waves open  candidate sha256:b2b2b2b2b2b2',
      '  canary  open      1/1 applied  0 failed',
      '  wave-1  open      1/2 applied  0 failed',
      '  wave-2  not open  0/2 applied  0 failed',
    ]);
  });

  it('the pane: the waves block above the lines of `rollout status` (without its own waves section)', () => {
    const s = halted();
    const lines = fleetPaneLines(s);
    assert.deepEqual(lines.slice(0, HALTED_BLOCK.length + 1), [...HALTED_BLOCK, '']);
    assert.deepEqual(
      lines.slice(HALTED_BLOCK.length + 1),
      renderRolloutText(s, undefined, { staged: false }).trimEnd().split('\n'),
    );
    assert.match(lines.join('\n'), /^rollout halted at canary: node worker-1;/mu);
    assert.doesNotMatch(lines.join('\n'), /^WAVE +NODES/mu, 'the waves once, in the compact block');
    assert.deepEqual(
      lines.map((l) => fleetLine(l)[0]?.tone),
      lines.map((l, i) => (i === 0 ? 'title' : i === 1 || i === 4 ? 'bad' : undefined)),
      'the head a title; the failed wave and the halt red; the rest as `rollout status` prints it',
    );
  });

  it('no staged rollout: the pane is the text of `rollout status`, unchanged', () => {
    const s = fleetStatus([published('worker-1', { appliedHash: HASH_B }), published('worker-2')]);
    assert.equal(s.staged, undefined);
    assert.deepEqual(fleetPaneLines(s), renderRolloutText(s).trimEnd().split('\n'));
    assert.ok(fleetPaneLines(s).every((l) => fleetLine(l)[0]?.tone === undefined));
  });

  it('the snapshot: a Fleet section (with --fleet) with the waves block; without it the snapshot is unchanged', () => {
    const agent = status();
    const plain = renderDashboardText(agent, { now: T0 });
    assert.doesNotMatch(plain, /Fleet|Staged rollout/u);
    const withFleet = renderDashboardText(agent, { now: T0, fleet: { status: halted() } });
    const [before, after] = plain.split('\nLive events');
    assert.equal(
      withFleet,
      `${before ?? ''}\n${['Fleet  5 of 5 nodes in sync  configmap kube-system/lvp-config', ...HALTED_BLOCK, ''].join('\n')}\nLive events${after ?? ''}`,
    );
    const unstaged = renderDashboardText(agent, { now: T0, fleet: { status: fleetStatus([published('worker-1')]) } });
    assert.match(unstaged, /^Fleet {2}0 of 5 nodes in sync {2}configmap kube-system\/lvp-config\n\nLive events/mu);
    assert.doesNotMatch(unstaged, /Staged rollout/u);
    const failed = renderDashboardText(agent, { now: T0, fleet: { problem: 'cannot list the Nodes: forbidden' } });
    assert.match(failed, /^Fleet {2}cannot read the rollout: cannot list the Nodes: forbidden$/mu);
  });
});
