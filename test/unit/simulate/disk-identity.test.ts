// Rehearsing disk identities (docs/disk-identity.md) with `provisioner simulate`: the steps that
// swap or pull a disk, rebuild the Node and accept a disk (parsed with their problems named by
// file, line, step and field; carried out on the replay's world), every disk's default identity,
// the Node UIDs the agent sees, the timeline's quarantine and acceptance lines, the `quarantined`
// expectation, and the JSON of the shipped scenarios against the schema.
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Ajv } from 'ajv';
import { ManualClock } from '../../../src/core/clock.js';
import type { ProvisionerConfig } from '../../../src/core/config/model.js';
import { loadConfig } from '../../../src/core/config/source/load.js';
import { MemoryCluster } from '../../../src/core/kube/memory/memory-cluster.js';
import { MemoryVolumes } from '../../../src/core/node/memory-volumes.js';
import { IDENTITY_ACTION_ANNOTATION, IDENTITY_ANNOTATION, NODE_UID_ANNOTATION } from '../../../src/core/pv/identity.js';
import { ConfigFiles } from '../../../src/core/simulate/config-files.js';
import { derivedIdentity, derivedUuid, Disks } from '../../../src/core/simulate/disks.js';
import { SimulatedDevices } from '../../../src/core/simulate/devices.js';
import { InvalidInputError } from '../../../src/core/simulate/input.js';
import { logEvent, NodeUids, pvWriteEvent } from '../../../src/core/simulate/observe.js';
import type { StepOutcome, TimelineAction } from '../../../src/core/simulate/report.js';
import { runScenario } from '../../../src/core/simulate/run.js';
import { loadScenario, parseScenario } from '../../../src/core/simulate/scenario.js';
import type { Step } from '../../../src/core/simulate/scenario.js';
import { ScriptedCleaner } from '../../../src/core/simulate/stand-ins.js';
import { applyStep } from '../../../src/core/simulate/steps.js';
import type { StepWorld } from '../../../src/core/simulate/steps.js';
import { renderScenarioText, toScenarioJson } from '../../../src/render/simulate.js';
import { actionJson, describeAction, stepSummary } from '../../../src/render/simulate-timeline.js';
import { REPO_ROOT } from '../../support/cli.js';

const SCENARIOS = join(REPO_ROOT, 'docs/scenarios');
const CLASSES = 'config:\n  storageClassMap:\n    fast: { hostDir: /mnt/fast, mountDir: /mnt/fast }\n';
const DISKS =
  'disks:\n  - { name: disk1, class: fast, capacity: 20Gi }\n  - { name: blk, dir: /mnt/fast, type: block, capacity: 5Gi }\n';
const UUID = '77aa0c3e-5b1d-4f2a-9c4e-2b7d1e6f0a93';

const never = (text: string): never => {
  throw new Error(text);
};

function scenario(steps: readonly string[], disks = DISKS): ReturnType<typeof parseScenario> {
  return parseScenario('s.yaml', `name: t\n${CLASSES}${disks}steps:\n${steps.join('\n')}\n`, { baseDir: '/' });
}

function issuesOf(fn: () => unknown): string[] {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof InvalidInputError, String(err));
    return err.issues.map((i) => `${i.position?.line ?? '?'}:${i.position?.column ?? '?'} ${i.path}: ${i.message}`);
  }
  return assert.fail('expected an InvalidInputError');
}

describe('simulate: rehearsing disk identities — the steps, parsed', () => {
  it('every form of the new steps, and uuid/wwid on disks', () => {
    const s = scenario(
      [
        '  - disk swapped: disk1',
        `  - disk swapped: { volume: disk1, uuid: ${UUID.toUpperCase()} }`,
        '  - disk swapped: { volume: blk, wwid: "naa.5000c500 a1b2c3d4" }',
        '  - disk swapped: { volume: disk1, original: true }',
        '  - disk pulled: disk1',
        '  - identity accepted: fast/disk1',
        '  - node rebuilt',
        '  - node rebuilt:',
        '    expect: { quarantined: { disk1: identity-changed, blk: none, disk2: node-rebuilt } }',
      ],
      `disks:\n  - { name: disk1, class: fast, uuid: ${UUID} }\n  - { name: blk, class: fast, type: block, capacity: 1Gi, wwid: naa.1 }\n`,
    );
    assert.deepEqual(
      s.disks.map((d) => d.identity),
      [{ uuid: UUID }, { wwid: 'naa.1' }],
    );
    const strip = (step: Step): unknown =>
      Object.fromEntries(Object.entries(step).filter(([key]) => key !== 'index' && key !== 'position'));
    assert.deepEqual(s.steps.map(strip), [
      { type: 'disk swapped', volume: 'disk1', to: { kind: 'another' } },
      { type: 'disk swapped', volume: 'disk1', to: { kind: 'given', uuid: UUID } },
      { type: 'disk swapped', volume: 'blk', to: { kind: 'given', wwid: 'naa.5000c500_a1b2c3d4' } },
      { type: 'disk swapped', volume: 'disk1', to: { kind: 'original' } },
      { type: 'disk pulled', volume: 'disk1' },
      { type: 'identity accepted', volume: 'fast/disk1' },
      { type: 'node rebuilt' },
      {
        type: 'node rebuilt',
        expect: {
          pv: [],
          cleanups: {},
          cleaned: {},
          skipped: {},
          events: {},
          quarantined: { disk1: 'identity-changed', blk: 'none', disk2: 'node-rebuilt' },
          devices: {},
        },
      },
    ]);
  });

  it('a bad argument names the file line, the step and the field, every problem at once', () => {
    const issues = issuesOf(() =>
      scenario([
        '  - disk swapped: { volume: disk1, uuid: not-a-uuid }',
        `  - disk swapped: { volume: disk1, uuid: ${UUID}, wwid: naa.1 }`,
        '  - disk swapped: { volume: disk1, original: true, wwid: naa.1 }',
        '  - disk swapped: { volume: disk1, uuuid: x }',
        '  - disk swapped: { original: maybe }',
        '  - disk pulled: { volume: disk1, slot: 3 }',
        '  - identity accepted:',
        '  - node rebuilt: now',
        '  - check:',
        '    expect: { quarantined: { disk1: changed, blk: 3 } }',
        '  - disk added: { name: d2, class: fast, type: block, capacity: 1Gi, uuid: 0b1e0000-0000-4000-8000-000000000000 }',
        '  - disk added: { name: d3, class: fast, mounted: false, wwid: naa.2 }',
        '  - disk swapped: { volume: disk1, wwid: "" }',
      ]),
    );
    const expected = [
      /^9:\d+ steps\[1\]\.disk swapped\.uuid: "not-a-uuid" is not a UUID \(8-4-4-4-12 hex digits\)$/u,
      /^10:\d+ steps\[2\]\.disk swapped: give uuid \(a filesystem\) or wwid \(a block device\), not both$/u,
      /^11:\d+ steps\[3\]\.disk swapped\.original: the original disk has its own identity: give original or uuid\/wwid, not both$/u,
      /^12:\d+ steps\[4\]\.disk swapped\.uuuid: unknown key "uuuid"; did you mean "uuid"\?/u,
      /^13:\d+ steps\[5\]\.disk swapped\.volume: is required$/u,
      /^13:\d+ steps\[5\]\.disk swapped\.original: expected true or false, found/u,
      /^14:\d+ steps\[6\]\.disk pulled\.slot: unknown key "slot"/u,
      /^15:\d+ steps\[7\]\.identity accepted: is required$/u,
      /^16:\d+ steps\[8\]\.node rebuilt: "node rebuilt" takes no arguments$/u,
      /^18:\d+ steps\[9\]\.expect\.quarantined\.disk1: "changed" is not one of identity-changed, node-rebuilt, none/u,
      /^18:\d+ steps\[9\]\.expect\.quarantined\.blk: "3" is not one of identity-changed, node-rebuilt, none$/u,
      /^19:\d+ steps\[10\]\.disk added\.uuid: only a mounted filesystem \(type directory\) has a filesystem UUID$/u,
      /^20:\d+ steps\[11\]\.disk added\.wwid: only a block device \(type block\) has a WWID$/u,
      /^21:\d+ steps\[12\]\.disk swapped\.wwid: must not be empty nor hold control characters$/u,
    ];
    for (const re of expected)
      assert.ok(
        issues.some((i) => re.test(i)),
        `${re.source} in\n${issues.join('\n')}`,
      );
    assert.equal(issues.length, expected.length, issues.join('\n'));
  });

  it('a step that cannot be carried out fails the run (exit 3) naming the step and why', async () => {
    const failure = async (steps: readonly string[], disks?: string): Promise<string> => {
      try {
        await runScenario(scenario(steps, disks));
      } catch (err) {
        assert.ok(err instanceof InvalidInputError, String(err));
        const issue = err.issues[0];
        return `${issue?.position?.line ?? '?'} ${issue?.path ?? ''}: ${issue?.message ?? ''}`;
      }
      return assert.fail('expected the run to fail');
    };
    const plain = 'disks:\n  - { name: d, class: fast, mounted: false }\n';
    assert.equal(
      await failure(['  - disk swapped: d'], plain),
      '8 steps[1].disk swapped: fast/d: only a mounted filesystem or a block device can be swapped; at /mnt/fast/d it is a directory with nothing mounted on it',
    );
    assert.equal(
      await failure([`  - disk swapped: { volume: blk, uuid: ${UUID} }`]),
      '9 steps[1].disk swapped: fast/blk is a block device: give wwid, not uuid',
    );
    assert.equal(
      await failure(['  - disk pulled: d'], plain),
      '8 steps[1].disk pulled: fast/d: nothing is mounted at /mnt/fast/d: a plain directory has no disk to pull (disk removed takes it away)',
    );
    assert.equal(
      await failure(['  - disk removed: disk1', '  - disk swapped: disk1']),
      '10 steps[2].disk swapped: fast/disk1: only a mounted filesystem or a block device can be swapped; at /mnt/fast/disk1 nothing is there',
    );
    assert.match(
      await failure(['  - identity accepted: d'], plain),
      /^8 steps\[1\]\.identity accepted: no PV for fast\/d \(local-pv-[0-9a-f]{8}\) exists at this point$/u,
    );
  });
});

describe("simulate: rehearsing disk identities — the replay's disks", () => {
  let dir = '';
  let config: ProvisionerConfig;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'lvp-sim-identity-'));
    const files = new ConfigFiles(dir);
    await files.write(
      { kind: 'inline', keys: { storageClassMap: { fast: { hostDir: '/mnt/fast', mountDir: '/mnt/fast' } } } },
      never,
    );
    config = (await loadConfig(files.path)).config;
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  function world(): { disks: Disks; volumes: MemoryVolumes; cluster: MemoryCluster; asked: string[]; w: StepWorld } {
    const clock = new ManualClock(0);
    const volumes = new MemoryVolumes();
    volumes.addDirectory('/mnt/fast');
    const cluster = new MemoryCluster({ clock });
    const disks = new Disks({ volumes, cluster, nodeName: 'node-a', config: () => config });
    const asked: string[] = [];
    const w: StepWorld = {
      cluster,
      disks,
      devices: new SimulatedDevices(volumes),
      configFiles: new ConfigFiles(dir),
      cleaner: new ScriptedCleaner(clock),
      clock,
      namespace: 'default',
      ensureClassesFor: () => Promise.resolve(),
      reload: () => Promise.resolve(),
      restartAgent: () => Promise.resolve(),
      rebuildNode: () => {
        asked.push('rebuild');
        return Promise.resolve({ node: 'node-a', previousUid: 'u1', uid: 'u2' });
      },
    };
    return { disks, volumes, cluster, asked, w };
  }

  const id = async (volumes: MemoryVolumes, path: string): Promise<string | undefined> =>
    (await volumes.volumeIdentity(path))?.id;

  it('every disk has its own identity by default, the same on every replay; a disk added again is another', async () => {
    const { disks, volumes } = world();
    disks.add({ name: 'disk1', className: 'fast', type: 'directory', mounted: true }, never);
    disks.add({ name: 'disk2', className: 'fast', type: 'directory', mounted: true }, never);
    disks.add({ name: 'blk', className: 'fast', type: 'block', mounted: false, capacity: 2 ** 30 }, never);
    disks.add({ name: 'plain', className: 'fast', type: 'directory', mounted: false }, never);
    disks.add({ name: 'given', className: 'fast', type: 'directory', mounted: true, identity: { uuid: UUID } }, never);
    const first = derivedIdentity('filesystem', '/mnt/fast/disk1', 0);
    assert.ok('uuid' in first);
    assert.match(first.uuid, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/u);
    assert.equal(await id(volumes, '/mnt/fast/disk1'), `fs-uuid:${first.uuid}`);
    assert.notEqual(await id(volumes, '/mnt/fast/disk2'), await id(volumes, '/mnt/fast/disk1'));
    assert.match((await id(volumes, '/mnt/fast/blk')) ?? '', /^wwid:naa\.5[0-9a-f]{15}$/u);
    assert.match((await id(volumes, '/mnt/fast/plain')) ?? '', /^dev-ino:/u, 'a plain directory: only its own');
    assert.equal(await id(volumes, '/mnt/fast/given'), `fs-uuid:${UUID}`);
    assert.deepEqual(derivedIdentity('block', '/x', 1), derivedIdentity('block', '/x', 1));
    assert.equal(derivedUuid('a'), derivedUuid('a'));
    assert.notEqual(derivedUuid('a'), derivedUuid('b'));
    await disks.remove(await disks.resolve('disk1'), never);
    disks.add({ name: 'disk1', className: 'fast', type: 'directory', mounted: true }, never);
    const again = derivedIdentity('filesystem', '/mnt/fast/disk1', 1);
    assert.ok('uuid' in again);
    assert.equal(await id(volumes, '/mnt/fast/disk1'), `fs-uuid:${again.uuid}`, 'a new disk in the slot');
  });

  it('disk swapped: another disk at the same path with the same capacity; original: true puts the first back', async () => {
    const { disks, volumes, w } = world();
    disks.add({ name: 'disk1', className: 'fast', type: 'directory', mounted: true, capacity: 20 * 2 ** 30 }, never);
    disks.add({ name: 'blk', className: 'fast', type: 'block', mounted: false, capacity: 2 ** 30 }, never);
    const before = await id(volumes, '/mnt/fast/disk1');
    const steps = scenario([
      '  - disk swapped: disk1',
      '  - disk swapped: { volume: disk1, original: true }',
      `  - disk swapped: { volume: disk1, uuid: ${UUID} }`,
      '  - disk swapped: { volume: blk, wwid: naa.600a0b80 }',
      '  - disk swapped: blk',
    ]).steps;
    const outcomes: StepOutcome[] = [];
    for (const step of steps) outcomes.push(await applyStep(step, w, never));
    const second = derivedIdentity('filesystem', '/mnt/fast/disk1', 1);
    assert.ok('uuid' in second);
    const blk = derivedIdentity('block', '/mnt/fast/blk', 0);
    const blk2 = derivedIdentity('block', '/mnt/fast/blk', 1);
    assert.ok('wwid' in blk && 'wwid' in blk2);
    const swapped = (
      volume: string,
      path: string,
      kind: 'filesystem' | 'block',
      from: string,
      to: string,
      original = false,
    ) => ({
      type: 'disk swapped',
      volume,
      path,
      kind,
      original,
      before: from,
      after: to,
    });
    assert.deepEqual(outcomes, [
      swapped('fast/disk1', '/mnt/fast/disk1', 'filesystem', before ?? '', `fs-uuid:${second.uuid}`),
      swapped('fast/disk1', '/mnt/fast/disk1', 'filesystem', `fs-uuid:${second.uuid}`, before ?? '', true),
      swapped('fast/disk1', '/mnt/fast/disk1', 'filesystem', before ?? '', `fs-uuid:${UUID}`),
      swapped('fast/blk', '/mnt/fast/blk', 'block', `wwid:${blk.wwid}`, 'wwid:naa.600a0b80'),
      swapped('fast/blk', '/mnt/fast/blk', 'block', 'wwid:naa.600a0b80', `wwid:${blk2.wwid}`),
    ]);
    assert.equal(await volumes.filesystemCapacity('/mnt/fast/disk1'), 20 * 2 ** 30, 'the capacity stays');
    assert.equal(await volumes.blockDeviceCapacity('/mnt/fast/blk'), 2 ** 30);
    const mounts = (await volumes.mountPoints()).filter((m) => m.mountPoint === '/mnt/fast/disk1');
    assert.equal(mounts.length, 1, 'one filesystem mounted there, not one on top of another');
  });

  it('disk pulled: a filesystem leaves its empty mount point, a device goes; identity accepted annotates the PV', async () => {
    const { disks, volumes, cluster, asked, w } = world();
    disks.add({ name: 'disk1', className: 'fast', type: 'directory', mounted: true }, never);
    disks.add({ name: 'blk', className: 'fast', type: 'block', mounted: false, capacity: 2 ** 30 }, never);
    const v = await disks.resolve('disk1');
    await cluster.persistentVolumes.create({
      metadata: { name: v.pvName ?? '' },
      spec: {
        capacity: { storage: '1Gi' },
        accessModes: ['ReadWriteOnce'],
        local: { path: v.path },
        nodeAffinity: {
          required: {
            nodeSelectorTerms: [
              { matchExpressions: [{ key: 'kubernetes.io/hostname', operator: 'In', values: ['node-a'] }] },
            ],
          },
        },
      },
    });
    const [pullFs, pullBlk, accept, rebuild] = scenario([
      '  - disk pulled: disk1',
      '  - disk pulled: blk',
      '  - identity accepted: disk1',
      '  - node rebuilt',
    ]).steps;
    assert.ok(pullFs && pullBlk && accept && rebuild);
    assert.deepEqual(await applyStep(pullFs, w, never), {
      type: 'disk pulled',
      volume: 'fast/disk1',
      path: '/mnt/fast/disk1',
      left: 'mount-point',
    });
    assert.equal((await volumes.entryInfo('/mnt/fast/disk1')).kind, 'directory');
    assert.equal(
      (await volumes.mountPoints()).some((m) => m.mountPoint === '/mnt/fast/disk1'),
      false,
    );
    assert.deepEqual(await applyStep(pullBlk, w, never), {
      type: 'disk pulled',
      volume: 'fast/blk',
      path: '/mnt/fast/blk',
      left: 'nothing',
    });
    assert.equal((await volumes.entryInfo('/mnt/fast/blk')).kind, 'missing');
    assert.equal(disks.present, 1, 'the mount point directory is still there');
    assert.deepEqual(await applyStep(accept, w, never), {
      type: 'identity accepted',
      pv: v.pvName,
      volume: 'fast/disk1',
    });
    const pv = await cluster.persistentVolumes.get(v.pvName ?? '');
    assert.equal(pv.metadata.annotations?.[IDENTITY_ACTION_ANNOTATION], 'accept');
    assert.deepEqual(await applyStep(rebuild, w, never), {
      type: 'node rebuilt',
      node: 'node-a',
      previousUid: 'u1',
      uid: 'u2',
    });
    assert.deepEqual(asked, ['rebuild']);
  });
});

describe('simulate: rehearsing disk identities — what the agent sees and says', () => {
  it('the agent sees a fixed UID per registration of its Node: in reads, watches and what it writes back', async () => {
    const inner = new MemoryCluster({ clock: new ManualClock(0) });
    const node = await inner.nodes.create({ metadata: { name: 'node-a' } });
    const uids = new NodeUids();
    uids.set(node.metadata.uid ?? '', 'shown-1');
    const nodes = uids.client(inner.nodes);
    const got = await nodes.get('node-a');
    assert.equal(got.metadata.uid, 'shown-1');
    assert.equal((await nodes.list()).items[0]?.metadata.uid, 'shown-1');
    assert.equal((await nodes.listMetadata()).items[0]?.metadata.uid, 'shown-1');
    const updated = await nodes.update({ ...got, metadata: { ...got.metadata, labels: { a: 'b' } } });
    assert.equal(updated.metadata.uid, 'shown-1', 'the UID precondition is translated back');
    assert.equal((await inner.nodes.get('node-a')).metadata.uid, node.metadata.uid, 'the server keeps its own');
    const stop = new AbortController();
    const seen: string[] = [];
    for await (const ev of nodes.watch({ resourceVersion: '0', signal: stop.signal })) {
      if (ev.type !== 'BOOKMARK') seen.push(ev.object.metadata.uid ?? '');
      stop.abort();
    }
    assert.deepEqual(seen, ['shown-1']);
    assert.equal(uids.shown('other'), 'other', 'objects it does not know keep their UID');
  });

  it('a rebuilt node: the agents see a UID per registration, derived from the name; a replay is the same every time', async () => {
    const s = scenario([
      '  - claim bound: disk1',
      '  - disk swapped: disk1',
      '  - node rebuilt',
      '  - claim released: disk1',
      '    expect: { quarantined: { disk1: node-rebuilt } }',
    ]);
    const a = await runScenario(s);
    const b = await runScenario(s);
    assert.deepEqual(toScenarioJson(a), toScenarioJson(b));
    assert.equal(a.passed, true);
    const rebuilt = a.steps[3];
    assert.ok(rebuilt?.type === 'node rebuilt');
    assert.equal(rebuilt.previousUid, derivedUuid('simulated Node node-a, registration 1'));
    assert.equal(rebuilt.uid, derivedUuid('simulated Node node-a, registration 2'));
    assert.deepEqual(
      rebuilt.actions.slice(0, 2).map((x) => x.type),
      ['agent-stopped', 'agent-started'],
    );
    // What the first agent recorded on the PV, and what the new one reads from its Node.
    const quarantined = a.steps[4]?.actions.find((x) => x.type === 'quarantined');
    assert.ok(quarantined?.type === 'quarantined');
    assert.ok(
      quarantined.message.startsWith(`published on Node UID ${rebuilt.previousUid} for disk fs-uuid:`),
      quarantined.message,
    );
    assert.ok(quarantined.message.includes(`; this Node is ${rebuilt.uid} and the disk at the path is`));
  });

  it("the agent's quarantine, acceptance and first recording make their own events; its identity patch is no adoption", () => {
    const record = (level: 'info' | 'warn', message: string, fields: Record<string, unknown>) => ({
      at: 0,
      level,
      message,
      fields,
    });
    const at = (path: string): string => path;
    const volumeOf = (pv: string): string | undefined => (pv === 'local-pv-1' ? 'fast/disk1' : undefined);
    const text =
      'published for disk fs-uuid:a, but the disk at the path is fs-uuid:b; not cleaned, the PV is kept (quarantined). To wipe and reuse the disk now at the path: kubectl annotate pv local-pv-1 x=accept; to retire the PV: kubectl delete pv local-pv-1';
    assert.deepEqual(
      logEvent(record('warn', text, { pv: 'local-pv-1', reason: 'VolumeIdentityMismatch' }), at, volumeOf),
      { type: 'quarantined', pv: 'local-pv-1', volume: 'fast/disk1', message: text },
    );
    assert.deepEqual(
      logEvent(record('info', 'disk identity accepted', { pv: 'local-pv-2', identity: 'wwid:x' }), at, volumeOf),
      { type: 'identity-accepted', pv: 'local-pv-2', identity: 'wwid:x' },
    );
    assert.deepEqual(
      logEvent(record('info', 'disk identity recorded', { pv: 'local-pv-1', identity: 'none' }), at, volumeOf),
      { type: 'identity-recorded', pv: 'local-pv-1', volume: 'fast/disk1', identity: 'none' },
    );
    const pv = { metadata: { name: 'local-pv-1' }, spec: {} };
    const identityPatch = {
      metadata: { annotations: { [IDENTITY_ANNOTATION]: 'wwid:x', [NODE_UID_ANNOTATION]: 'u' } },
    };
    assert.equal(pvWriteEvent({ verb: 'patch', object: pv, patch: identityPatch }), undefined);
    assert.deepEqual(
      pvWriteEvent({
        verb: 'patch',
        object: pv,
        patch: { metadata: { labels: { 'local-static-provisioner/node': 'a' } } },
      }),
      { type: 'pv-adopted', pv: 'local-pv-1' },
    );
  });

  it('the words: a quarantine on its own line with the choices under it; the new steps in one sentence', () => {
    const message =
      'published for disk fs-uuid:a, but the disk at the path is fs-uuid:b; not cleaned, the PV is kept (quarantined). To wipe and reuse the disk now at the path: kubectl annotate pv p x=accept; to retire the PV: kubectl delete pv p';
    const quarantined: TimelineAction = { at: 0, type: 'quarantined', pv: 'p', volume: 'fast/d', message };
    assert.deepEqual(describeAction(quarantined), {
      summary:
        'quarantined p (fast/d): published for disk fs-uuid:a, but the disk at the path is fs-uuid:b; not cleaned',
      details: [
        'To wipe and reuse the disk now at the path: kubectl annotate pv p x=accept',
        'To retire the PV: kubectl delete pv p',
      ],
    });
    assert.deepEqual(describeAction({ at: 0, type: 'quarantined', pv: 'p', message: 'something else' }), {
      summary: 'quarantined p: something else',
    });
    assert.deepEqual(actionJson(quarantined), {
      at: 0,
      type: 'quarantined',
      pv: 'p',
      volume: 'fast/d',
      summary:
        'quarantined p (fast/d): published for disk fs-uuid:a, but the disk at the path is fs-uuid:b; not cleaned',
      details: [
        'To wipe and reuse the disk now at the path: kubectl annotate pv p x=accept',
        'To retire the PV: kubectl delete pv p',
      ],
      time: '+0s',
    });
    assert.equal(
      describeAction({ at: 0, type: 'identity-accepted', pv: 'p', volume: 'fast/d', identity: 'wwid:x' }).summary,
      `disk identity accepted: p (fast/d) now records wwid:x as its disk (the operator's ${IDENTITY_ACTION_ANNOTATION}=accept)`,
    );
    assert.equal(
      describeAction({ at: 0, type: 'identity-recorded', pv: 'p', identity: 'none' }).summary,
      'disk identity recorded: p is the disk none (first seen without one)',
    );
    const cases: [StepOutcome, string][] = [
      [
        {
          type: 'disk swapped',
          volume: 'fast/d',
          path: '/mnt/fast/d',
          kind: 'filesystem',
          original: false,
          before: 'fs-uuid:a',
          after: 'fs-uuid:b',
        },
        'another filesystem at /mnt/fast/d (fast/d): fs-uuid:a -> fs-uuid:b',
      ],
      [
        { type: 'disk swapped', volume: 'raw/b', path: '/dev/b', kind: 'block', original: true, after: 'wwid:x' },
        'the original disk is back at /dev/b (raw/b): no identity -> wwid:x',
      ],
      [
        { type: 'disk pulled', volume: 'fast/d', path: '/mnt/fast/d', left: 'mount-point' },
        'the disk of fast/d is gone: nothing is mounted at /mnt/fast/d any more, the empty directory stays',
      ],
      [
        { type: 'disk pulled', volume: 'raw/b', path: '/dev/b', left: 'nothing' },
        'the disk of raw/b is gone: nothing is at /dev/b any more',
      ],
      [
        { type: 'node rebuilt', node: 'node-a', previousUid: 'u1', uid: 'u2' },
        'Node node-a deleted and registered again (UID u1 -> u2); a new agent starts, same disks',
      ],
      [
        { type: 'identity accepted', pv: 'p', volume: 'fast/d' },
        `the operator annotates PV p (fast/d) ${IDENTITY_ACTION_ANNOTATION}=accept`,
      ],
    ];
    for (const [step, words] of cases) assert.equal(stepSummary(step), words);
  });

  it('the quarantined expectation fails as the others do, naming what the last pass said', async () => {
    const r = await runScenario(
      scenario([
        '  - claim bound: disk1',
        '  - disk swapped: disk1',
        '  - claim released: disk1',
        '    expect: { quarantined: { disk1: none, blk: identity-changed } }',
      ]),
    );
    assert.deepEqual(
      r.steps[3]?.expectations.map((e) => [e.key, e.expected, e.actual, e.ok]),
      [
        ['quarantined.disk1', 'none', 'identity-changed', false],
        ['quarantined.blk', 'identity-changed', 'none', false],
      ],
    );
    const text = renderScenarioText(r, { color: false });
    assert.match(text, /^ {2}step 3\. claim released: quarantined\.disk1: expected "none", got "identity-changed"$/mu);
    assert.match(text, /^ {10}\+2s {5}quarantined local-pv-[0-9a-f]{8} \(fast\/disk1\): published for disk fs-uuid:/mu);
  });

  it('the shipped disk identity scenarios pass, and their JSON follows the schema', async () => {
    const schema: unknown = JSON.parse(await readFile(join(REPO_ROOT, 'docs/schemas/simulate.v1.schema.json'), 'utf8'));
    const ajv = new Ajv({ allErrors: true, strict: false });
    const validate = ajv.compile(schema as object);
    const types = new Set<string>();
    for (const f of ['disk-swapped.yaml', 'disk-pulled.yaml', 'node-rebuilt.yaml']) {
      const json = toScenarioJson(await runScenario(await loadScenario(join(SCENARIOS, f))));
      assert.ok(validate(json), `${f}: ${ajv.errorsText(validate.errors)}`);
      assert.deepEqual([json.result.passed, json.exitCode], [true, 0], f);
      for (const s of json.steps) {
        types.add(s.type);
        for (const a of s.actions) types.add(a.type);
      }
    }
    for (const t of [
      'disk swapped',
      'disk pulled',
      'node rebuilt',
      'identity accepted',
      'quarantined',
      'identity-accepted',
    ])
      assert.ok(types.has(t), t);
  });
});
