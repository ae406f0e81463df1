// Disk identity end to end (docs/disk-identity.md): real ext4 filesystems on loop devices, real
// loop devices behind Block classes, the project's cleaners, the real kube-apiserver and the agent
// in-process. A Released PV whose path holds another disk than the one it was published for is
// quarantined (never wiped, never deleted) until the right disk is back or an operator accepts the
// new one; adopted PVs get their identity on first sight; a Node rebuilt under the same name only
// passes PVs whose recorded identity is the disk at the path.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Agent } from '../../../src/core/agent/agent.js';
import { ProcessCleaner } from '../../../src/core/cleanup/cleaner.js';
import { systemClock } from '../../../src/core/clock.js';
import { isAlreadyExists, isNotFound } from '../../../src/core/kube/cluster.js';
import { loadKubeconfig } from '../../../src/core/kube/kubeconfig.js';
import type { CoreEvent, PersistentVolume } from '../../../src/core/kube/objects.js';
import { RestCluster } from '../../../src/core/kube/rest-cluster.js';
import { MemoryLogger } from '../../../src/core/log.js';
import { decodeDeviceNumber, directoryStamp, LinuxVolumes } from '../../../src/core/node/linux-volumes.js';
import { IDENTITY_ACTION_ANNOTATION, IDENTITY_ANNOTATION, NODE_UID_ANNOTATION } from '../../../src/core/pv/identity.js';
import { NODE_LABEL, persistentVolumeName, PROVISIONED_BY_ANNOTATION } from '../../../src/core/pv/naming.js';
import { REPO_ROOT } from '../../support/cli.js';
import { bindPersistentVolume, markPersistentVolumeAvailable, releasePersistentVolume } from '../../support/cluster.js';
import { eventually } from '../../support/eventually.js';
import { parsePrometheusText } from '../../support/prom-text.js';
import { runPvProtectionController } from '../../support/pv-protection.js';
import {
  attachLoopDevice,
  Cleanup,
  detachLoopDevice,
  type LoopDevice,
  makeTempDir,
  mountTable,
  readAt,
  run,
  skipUnlessRoot,
  unmount,
  writeAt,
} from '../../support/real-node.js';
import { adminKubeConfig, requireTestControlPlane } from '../../support/test-cluster.js';

const MiB = 2 ** 20;
const FS_BYTES = 16 * MiB;
const suffix = Math.random().toString(36).slice(2, 8);
/** Every Node, StorageClass and PV of this file starts with it. */
const PREFIX = `di-${suffix}`;
const QUARANTINED = 'local_volume_provisioner_persistentvolume_quarantined';

/** `loop:<M:m of the backing file's filesystem>:<its inode>:<its birth ns>`, as docs/disk-identity.md defines it. */
function loopIdentity(loop: LoopDevice): string {
  const backing = statSync(loop.backingFile, { bigint: true });
  const { major, minor } = decodeDeviceNumber(backing.dev);
  return `loop:${major}:${minor}:${backing.ino}:${directoryStamp(backing).birthNs}`;
}

describe('disk identity on a real node against the real apiserver', { skip: skipUnlessRoot() }, () => {
  const cleanup = new Cleanup();
  const stopController = new AbortController();
  const running = new Set<Agent>();
  const nodes: string[] = [];
  const classes: string[] = [];
  /** PVs made by hand (without the node label until the agent adopts them). */
  const handMade: string[] = [];
  let cluster: RestCluster;
  let root = '';

  // ---- the node: ext4 on loop devices, mounts ----------------------------------------------------

  /** A new loop device over a sparse file under root, holding a fresh ext4 with uuid. */
  function makeExt4(name: string, uuid: string): LoopDevice {
    const loop = attachLoopDevice(cleanup, join(root, `${name}.img`), FS_BYTES);
    // No lazy initialisation: nothing is written in the background once mounted.
    run('mkfs.ext4', ['-q', '-F', '-U', uuid, '-E', 'lazy_itable_init=0,lazy_journal_init=0', loop.path]);
    return loop;
  }

  /** Mounts the ext4 on loop at path (made if missing); returns a function that unmounts it now. */
  function mountExt4(loop: LoopDevice, path: string): () => void {
    mkdirSync(path, { recursive: true });
    run('mount', ['-t', 'ext4', loop.path, path]);
    const real = realpathSync(path);
    const entry = mountTable().findLast((m) => m.mountPoint === real);
    if (entry === undefined) throw new Error(`mounting ${loop.path} on ${real} succeeded but it is not in mountinfo`);
    return cleanup.defer(`unmount ${loop.path} at ${real}`, () => {
      if (mountTable().some((m) => m.mountId === entry.mountId && m.mountPoint === real)) unmount(real);
    });
  }

  /** The file's content on the ext4 of loop, read through a mount of it elsewhere (undone at once). */
  function readOnDisk(loop: LoopDevice, file: string): string | undefined {
    const where = join(root, `check-${loop.name}-${Math.random().toString(36).slice(2, 8)}`);
    const unmountNow = mountExt4(loop, where);
    try {
      return existsSync(join(where, file)) ? readFileSync(join(where, file), 'utf8') : undefined;
    } finally {
      unmountNow();
    }
  }

  // ---- the cluster -------------------------------------------------------------------------------

  async function createNode(name: string): Promise<string> {
    const node = await cluster.nodes.create({ metadata: { name, labels: { 'kubernetes.io/hostname': name } } });
    if (!nodes.includes(name)) nodes.push(name);
    return node.metadata.uid ?? '';
  }

  /** A Node, a StorageClass `<node>-sc` (reclaim Delete) and a config dir mapping it with classYaml. */
  async function setupNode(
    name: string,
    classYaml: (className: string) => string,
  ): Promise<{ configDir: string; className: string; nodeUid: string }> {
    const nodeUid = await createNode(name);
    const className = `${name}-sc`;
    await cluster.storageClasses.create({
      metadata: { name: className },
      provisioner: 'kubernetes.io/no-provisioner',
      reclaimPolicy: 'Delete',
    });
    classes.push(className);
    const configDir = join(root, `config-${name}`);
    mkdirSync(configDir);
    writeFileSync(join(configDir, 'storageClassMap'), classYaml(className));
    return { configDir, className, nodeUid };
  }

  /** A Filesystem class whose discovery directory is disc (hostDir = mountDir). */
  const filesystemClass =
    (disc: string) =>
    (className: string): string =>
      `${className}:\n  hostDir: ${disc}\n  mountDir: ${disc}\n`;

  async function startAgent(nodeName: string, configDir: string, logger = new MemoryLogger()): Promise<Agent> {
    const agent = await Agent.start(
      {
        configPath: configDir,
        nodeName,
        namespace: 'default',
        listenAddress: '127.0.0.1:0',
        metricsPath: '/metrics',
        discoveryPeriodMs: 300,
        changePollMs: 100,
        createConcurrency: 4,
        cleanupConcurrency: 4,
        jobImage: undefined,
        cleanupBackoff: { initialMs: 300, maxMs: 600 },
      },
      {
        cluster,
        volumes: new LinuxVolumes(),
        cleaner: new ProcessCleaner(process.env),
        clock: systemClock,
        logger,
      },
    );
    running.add(agent);
    return agent;
  }

  async function stopAgent(agent: Agent): Promise<void> {
    running.delete(agent);
    await agent.stop();
  }

  async function getPv(name: string): Promise<PersistentVolume | undefined> {
    try {
      return await cluster.persistentVolumes.get(name);
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  /** The PV the agent publishes for entry (not being deleted). */
  async function pvFor(nodeName: string, entry: string, className: string): Promise<PersistentVolume> {
    const name = persistentVolumeName(entry, nodeName, className);
    return eventually(async () => {
      const pv = await getPv(name);
      return pv?.metadata.deletionTimestamp === undefined ? pv : undefined;
    }, `PV ${name}`);
  }

  /** The PV of the same name with another UID: deleted after its cleanup and published again. */
  async function republished(pv: PersistentVolume): Promise<PersistentVolume> {
    return eventually(
      async () => {
        const now = await getPv(pv.metadata.name);
        return now !== undefined && now.metadata.uid !== pv.metadata.uid && now.metadata.deletionTimestamp === undefined
          ? now
          : undefined;
      },
      `${pv.metadata.name} republished with a new UID`,
      30_000,
    );
  }

  async function bind(pv: PersistentVolume): Promise<void> {
    await bindPersistentVolume(adminKubeConfig(), pv.metadata.name, {
      namespace: 'default',
      name: `claim-${pv.metadata.name}`,
      uid: randomUUID(),
    });
  }

  async function release(pv: PersistentVolume): Promise<void> {
    await releasePersistentVolume(adminKubeConfig(), pv.metadata.name);
  }

  /** The events of reason about the PV of this UID (cluster-scoped objects' events are in `default`). */
  async function eventsOf(pv: PersistentVolume, reason: string): Promise<CoreEvent[]> {
    const list = await cluster.events.list({ namespace: 'default' });
    return list.items.filter((e) => e.reason === reason && e.involvedObject.uid === pv.metadata.uid);
  }

  /** Waits for the first event of reason on the PV whose message includes text. */
  async function eventOf(pv: PersistentVolume, reason: string, text: string): Promise<CoreEvent> {
    return eventually(
      async () => (await eventsOf(pv, reason)).find((e) => e.message.includes(text)),
      `a ${reason} event on ${pv.metadata.name} mentioning ${text}`,
    );
  }

  /** The quarantine gauge's series of a PV: reason → value (empty: no series). */
  function quarantineGauge(agent: Agent, pvName: string): Record<string, number> {
    return pvSeries(agent, QUARANTINED, pvName);
  }

  /** A per-PV gauge's series of a PV: reason → value (empty: no series). */
  function pvSeries(agent: Agent, metric: string, pvName: string): Record<string, number> {
    const family = parsePrometheusText(agent['metrics'].registry.render()).get(metric);
    const series: Record<string, number> = {};
    for (const s of family?.samples ?? [])
      if (s.labels['persistentvolume'] === pvName) series[s.labels['reason'] ?? ''] = s.value;
    return series;
  }

  async function gaugeIs(agent: Agent, pvName: string, reason: string): Promise<void> {
    await eventually(
      () => (quarantineGauge(agent, pvName)[reason] === 1 ? true : undefined),
      `${QUARANTINED}{persistentvolume="${pvName}",reason="${reason}"} = 1`,
    );
    assert.deepEqual(quarantineGauge(agent, pvName), { [reason]: 1 }, 'one series, of that reason');
  }

  /** Waits until the agent ran n more passes (each reads the PVs and checks the quarantined ones again). */
  async function morePasses(agent: Agent, n: number): Promise<void> {
    const from = agent.generation.status().passes;
    await eventually(() => (agent.generation.status().passes >= from + n ? true : undefined), `${n} more passes`);
  }

  /** The PV is still there: same object, Released, not being deleted. */
  async function assertKept(pv: PersistentVolume): Promise<PersistentVolume> {
    const now = await getPv(pv.metadata.name);
    assert.ok(now !== undefined, `${pv.metadata.name} still exists`);
    assert.equal(now.metadata.uid, pv.metadata.uid, 'the same PV object');
    assert.equal(now.metadata.deletionTimestamp, undefined, 'not being deleted');
    assert.equal(now.status?.phase, 'Released');
    return now;
  }

  /** Records every version of the PV from now on (a watch), e.g. one that lives only between two passes. */
  async function recordVersions(name: string): Promise<{ versions: PersistentVolume[]; stop: () => void }> {
    const fieldSelector = `metadata.name=${name}`;
    const list = await cluster.persistentVolumes.list({ fieldSelector });
    const versions = [...list.items];
    const abort = new AbortController();
    void (async () => {
      try {
        for await (const event of cluster.persistentVolumes.watch({
          fieldSelector,
          resourceVersion: list.metadata.resourceVersion ?? '0',
          signal: abort.signal,
        }))
          if (event.type !== 'BOOKMARK') versions.push(event.object);
      } catch {
        // Stopped (or the control plane is going away).
      }
    })();
    return {
      versions,
      stop: () => {
        abort.abort();
      },
    };
  }

  before(async () => {
    try {
      run('mkfs.ext4', ['-V']);
    } catch (err) {
      throw new Error('these tests make ext4 filesystems: mkfs.ext4 (e2fsprogs) is needed', { cause: err });
    }
    cluster = new RestCluster({ connection: await loadKubeconfig(requireTestControlPlane().kubeconfigPath) });
    root = makeTempDir(cleanup, 'lvp-disk-identity-');
    void runPvProtectionController(cluster, stopController.signal);
  });

  after(async () => {
    stopController.abort();
    try {
      for (const agent of [...running]) await stopAgent(agent).catch(() => undefined);
      const labelled = await cluster.persistentVolumes.list({ labelSelector: NODE_LABEL });
      const names = new Set([
        ...handMade,
        ...labelled.items
          .filter((pv) => (pv.metadata.labels?.[NODE_LABEL] ?? '').startsWith(PREFIX))
          .map((pv) => pv.metadata.name),
      ]);
      for (const name of names) {
        await cluster.persistentVolumes.patch(name, { metadata: { finalizers: null } }).catch(() => undefined);
        await cluster.persistentVolumes.delete(name).catch(() => undefined);
      }
      for (const sc of classes) await cluster.storageClasses.delete(sc).catch(() => undefined);
      for (const node of nodes) await cluster.nodes.delete(node).catch(() => undefined);
    } finally {
      cluster.close();
      cleanup.run();
    }
  });

  it('a filesystem replaced while Released is not wiped: quarantined until the right disk is back, then cleaned', async () => {
    const node = `${PREFIX}-swap`;
    const disc = join(root, 'swap');
    mkdirSync(disc);
    const { configDir, className, nodeUid } = await setupNode(node, filesystemClass(disc));
    const [uuidA, uuidB] = [randomUUID(), randomUUID()];
    const diskA = makeExt4('swap-a', uuidA);
    const diskB = makeExt4('swap-b', uuidB);
    const vol = join(disc, 'vol');
    const unmountA = mountExt4(diskA, vol);
    const logger = new MemoryLogger();
    const agent = await startAgent(node, configDir, logger);
    try {
      const pv = await pvFor(node, 'vol', className);
      assert.equal(pv.metadata.annotations?.[IDENTITY_ANNOTATION], `fs-uuid:${uuidA}`);
      assert.equal(pv.metadata.annotations[NODE_UID_ANNOTATION], nodeUid);
      await bind(pv);
      writeFileSync(join(vol, 'tenant-a.txt'), 'data of A');

      // The disk is replaced while the claim is still bound, then the claim is deleted.
      unmountA();
      const unmountB = mountExt4(diskB, vol);
      writeFileSync(join(vol, 'tenant-b.txt'), 'data of B');
      await release(pv);

      const warning = await eventOf(pv, 'VolumeIdentityMismatch', `fs-uuid:${uuidB}`);
      assert.equal(warning.type, 'Warning');
      assert.match(warning.message, new RegExp(`published for disk fs-uuid:${uuidA}\\b`, 'u'));
      assert.match(warning.message, new RegExp(`the disk at the path is fs-uuid:${uuidB}\\b`, 'u'));
      assert.match(warning.message, /not cleaned, the PV is kept \(quarantined\)/u);
      assert.ok(warning.message.includes(`${IDENTITY_ACTION_ANNOTATION}=accept`), 'says how to accept the disk');
      await gaugeIs(agent, pv.metadata.name, 'identity-changed');
      assert.ok(
        logger.records.some(
          (r) =>
            r.level === 'warn' &&
            r.fields['reason'] === 'VolumeIdentityMismatch' &&
            r.fields['pv'] === pv.metadata.name,
        ),
        'a warn log line naming the PV',
      );

      // Passes go on; the PV stays, nothing is wiped, and the Event is not repeated.
      await morePasses(agent, 3);
      await assertKept(pv);
      assert.equal(readFileSync(join(vol, 'tenant-b.txt'), 'utf8'), 'data of B', "B's data at the path is untouched");
      assert.equal(
        (await eventsOf(pv, 'VolumeIdentityMismatch')).filter((e) => e.message.includes(`fs-uuid:${uuidB}`)).length,
        1,
        'one Warning Event for this disk',
      );
      assert.equal((await eventsOf(pv, 'VolumeFailedDelete')).length, 0, 'a quarantine is not a failed cleanup');
      assert.equal(agent.cleanups.get(pv.metadata.name), undefined, 'no cleanup was started');
      unmountB();
      assert.equal(readOnDisk(diskA, 'tenant-a.txt'), 'data of A', "A's data is untouched");

      // The right disk back at the path: the next pass cleans it and the PV is deleted and republished.
      mountExt4(diskA, vol);
      const again = await republished(pv);
      assert.equal(existsSync(join(vol, 'tenant-a.txt')), false, "A's data is wiped");
      assert.equal(again.spec.local?.path, vol);
      assert.equal(again.metadata.annotations?.[IDENTITY_ANNOTATION], `fs-uuid:${uuidA}`);
      assert.equal(again.metadata.annotations[NODE_UID_ANNOTATION], nodeUid);
      await morePasses(agent, 1);
      assert.deepEqual(quarantineGauge(agent, pv.metadata.name), {}, 'no longer quarantined');
      assert.equal(readOnDisk(diskB, 'tenant-b.txt'), 'data of B', 'B was never wiped');
    } finally {
      await stopAgent(agent);
    }
  });

  it('an operator accepts the disk now at the path: its identity recorded, the annotation removed, it is cleaned and republished', async () => {
    const node = `${PREFIX}-accept`;
    const disc = join(root, 'accept');
    mkdirSync(disc);
    const { configDir, className, nodeUid } = await setupNode(node, filesystemClass(disc));
    const [uuidA, uuidB] = [randomUUID(), randomUUID()];
    const diskA = makeExt4('accept-a', uuidA);
    const diskB = makeExt4('accept-b', uuidB);
    const vol = join(disc, 'vol');
    const unmountA = mountExt4(diskA, vol);
    const agent = await startAgent(node, configDir);
    try {
      const pv = await pvFor(node, 'vol', className);
      assert.equal(pv.metadata.annotations?.[IDENTITY_ANNOTATION], `fs-uuid:${uuidA}`);
      await bind(pv);
      writeFileSync(join(vol, 'tenant-a.txt'), 'data of A');
      unmountA();
      mountExt4(diskB, vol);
      writeFileSync(join(vol, 'tenant-b.txt'), 'data of B');
      await release(pv);
      await eventOf(pv, 'VolumeIdentityMismatch', `fs-uuid:${uuidB}`);
      await gaugeIs(agent, pv.metadata.name, 'identity-changed');
      assert.ok(existsSync(join(vol, 'tenant-b.txt')), 'not wiped while quarantined');

      // kubectl annotate pv <pv> local-static-provisioner/identity-action=accept
      const watch = await recordVersions(pv.metadata.name);
      try {
        await cluster.persistentVolumes.patch(pv.metadata.name, {
          metadata: { annotations: { [IDENTITY_ACTION_ANNOTATION]: 'accept' } },
        });
        const accepted = await eventOf(pv, 'VolumeIdentityAccepted', `fs-uuid:${uuidB}`);
        assert.equal(accepted.type, 'Normal');
        // The PV may be gone by now (cleaned and deleted on the next passes): its versions tell.
        const recorded = await eventually(
          () =>
            watch.versions.find(
              (v) =>
                v.metadata.uid === pv.metadata.uid &&
                v.metadata.annotations?.[IDENTITY_ANNOTATION] === `fs-uuid:${uuidB}`,
            ),
          'the PV with the identity of B recorded',
        );
        assert.equal(recorded.metadata.annotations?.[IDENTITY_ACTION_ANNOTATION], undefined, 'the annotation removed');
        assert.equal(recorded.metadata.annotations?.[NODE_UID_ANNOTATION], nodeUid);
        assert.equal(recorded.status?.phase, 'Released');
        assert.ok(
          !watch.versions.some(
            (v) =>
              v.metadata.uid === pv.metadata.uid &&
              v.metadata.annotations?.[IDENTITY_ANNOTATION] !== `fs-uuid:${uuidA}` &&
              v.metadata.annotations?.[IDENTITY_ACTION_ANNOTATION] !== undefined,
          ),
          'identity and annotation changed in one patch',
        );
      } finally {
        watch.stop();
      }

      const again = await republished(pv);
      assert.equal(existsSync(join(vol, 'tenant-b.txt')), false, "B's data is wiped");
      assert.equal(again.metadata.annotations?.[IDENTITY_ANNOTATION], `fs-uuid:${uuidB}`);
      assert.equal(again.metadata.annotations[NODE_UID_ANNOTATION], nodeUid);
      assert.equal(again.metadata.annotations[IDENTITY_ACTION_ANNOTATION], undefined);
      await morePasses(agent, 1);
      assert.deepEqual(quarantineGauge(agent, pv.metadata.name), {}, 'no longer quarantined');
      assert.equal(readOnDisk(diskA, 'tenant-a.txt'), 'data of A', 'A, not at the path, is untouched');
    } finally {
      await stopAgent(agent);
    }
  });

  it('Block: a loop device swapped for one backed by another file is not wiped', async () => {
    const node = `${PREFIX}-blk`;
    const disc = join(root, 'blk');
    mkdirSync(disc);
    const { configDir, className } = await setupNode(
      node,
      (sc) =>
        `${sc}:\n  hostDir: /dev/disk/by-lvp\n  mountDir: ${disc}\n  volumeMode: Block\n  blockCleanerCommand: ["${join(REPO_ROOT, 'cleaners/dd_zero.sh')}"]\n`,
    );
    const first = attachLoopDevice(cleanup, join(root, 'blk-first.img'), FS_BYTES);
    const link = join(disc, 'nvme-a');
    symlinkSync(first.path, link);
    const agent = await startAgent(node, configDir);
    try {
      const pv = await pvFor(node, 'nvme-a', className);
      assert.equal(pv.spec.volumeMode, 'Block');
      const recorded = loopIdentity(first);
      assert.equal(pv.metadata.annotations?.[IDENTITY_ANNOTATION], recorded);
      await bind(pv);

      // The disk is swapped: another backing file (with data) on another loop device behind the
      // same discovery entry, and the first loop device gone.
      const second = attachLoopDevice(cleanup, join(root, 'blk-second.img'), FS_BYTES);
      const pattern = Buffer.from('OTHER-TENANT-DATA-'.repeat(200));
      writeAt(second.path, 0, pattern);
      writeAt(second.path, 8 * MiB, pattern);
      // Made outside the discovery directory and renamed over the entry: no pass sees a new entry.
      const staged = join(root, 'nvme-a.staged');
      symlinkSync(second.path, staged);
      renameSync(staged, link);
      detachLoopDevice(first);
      const found = loopIdentity(second);
      assert.notEqual(found, recorded);
      await release(pv);

      const warning = await eventOf(pv, 'VolumeIdentityMismatch', found);
      assert.equal(warning.type, 'Warning');
      assert.ok(warning.message.includes(`published for disk ${recorded},`), warning.message);
      await gaugeIs(agent, pv.metadata.name, 'identity-changed');
      await morePasses(agent, 2);
      await assertKept(pv);
      assert.equal(agent.cleanups.get(pv.metadata.name), undefined, 'no cleanup was started');
      assert.ok(readAt(second.path, 0, pattern.length).equals(pattern), 'the start of the device is untouched');
      assert.ok(readAt(second.path, 8 * MiB, pattern.length).equals(pattern), 'the middle of the device is untouched');
      assert.ok(readAt(second.backingFile, 0, pattern.length).equals(pattern), 'so is the backing file');
    } finally {
      await stopAgent(agent);
    }
  });

  it('an adopted PV without an identity gets it on first sight (trust on first use), and is then protected', async () => {
    const node = `${PREFIX}-tofu`;
    const disc = join(root, 'tofu');
    mkdirSync(disc);
    const { configDir, className, nodeUid } = await setupNode(node, filesystemClass(disc));
    const [uuidA, uuidB] = [randomUUID(), randomUUID()];
    const diskA = makeExt4('tofu-a', uuidA);
    const diskB = makeExt4('tofu-b', uuidB);
    const vol = join(disc, 'vol');
    const unmountA = mountExt4(diskA, vol);
    // As upstream published it: its name, its provisioned-by annotation, no node label, no identity.
    const name = persistentVolumeName('vol', node, className);
    handMade.push(name);
    const created = await cluster.persistentVolumes.create({
      metadata: {
        name,
        annotations: { [PROVISIONED_BY_ANNOTATION]: `local-volume-provisioner-${node}-${nodeUid}` },
      },
      spec: {
        capacity: { storage: '10Mi' },
        accessModes: ['ReadWriteOnce'],
        persistentVolumeReclaimPolicy: 'Delete',
        storageClassName: className,
        volumeMode: 'Filesystem',
        local: { path: vol },
        nodeAffinity: {
          required: {
            nodeSelectorTerms: [
              { matchExpressions: [{ key: 'kubernetes.io/hostname', operator: 'In', values: [node] }] },
            ],
          },
        },
      },
    });
    // The PV controller would make it Available; a bare apiserver leaves it Pending.
    await cluster.persistentVolumes.updateStatus({ ...created, status: { phase: 'Available' } });

    const logger = new MemoryLogger();
    const agent = await startAgent(node, configDir, logger);
    try {
      const pv = await eventually(async () => {
        const now = await getPv(name);
        return now?.metadata.annotations?.[IDENTITY_ANNOTATION] !== undefined ? now : undefined;
      }, 'the identity recorded on the adopted PV');
      assert.equal(pv.metadata.uid, created.metadata.uid, 'the same PV, patched');
      assert.equal(pv.metadata.annotations?.[IDENTITY_ANNOTATION], `fs-uuid:${uuidA}`);
      assert.equal(pv.metadata.annotations[NODE_UID_ANNOTATION], nodeUid);
      assert.equal(pv.metadata.labels?.[NODE_LABEL], node, 'adopted');
      assert.deepEqual(pv.spec, created.spec, 'nothing else changed');
      assert.equal(pv.status?.phase, 'Available');
      // The agent logs once its patch has answered; the GET above can see the patch first.
      await eventually(
        async () =>
          Promise.resolve(
            logger.records.some((r) => r.message === 'disk identity recorded' && r.fields['pv'] === name)
              ? true
              : undefined,
          ),
        'logged as `disk identity recorded`',
      );

      await bind(pv);
      writeFileSync(join(vol, 'tenant-a.txt'), 'data of A');
      unmountA();
      mountExt4(diskB, vol);
      writeFileSync(join(vol, 'tenant-b.txt'), 'data of B');
      await release(pv);

      const warning = await eventOf(pv, 'VolumeIdentityMismatch', `fs-uuid:${uuidB}`);
      assert.ok(warning.message.includes(`published for disk fs-uuid:${uuidA},`), warning.message);
      await gaugeIs(agent, name, 'identity-changed');
      await morePasses(agent, 2);
      const kept = await assertKept(pv);
      assert.equal(kept.metadata.annotations?.[IDENTITY_ANNOTATION], `fs-uuid:${uuidA}`, 'the identity stays');
      assert.equal(readFileSync(join(vol, 'tenant-b.txt'), 'utf8'), 'data of B', "B's data is untouched");
      assert.equal(readOnDisk(diskA, 'tenant-a.txt'), 'data of A', "A's data is untouched");
    } finally {
      await stopAgent(agent);
    }
  });

  it('a Node recreated under the same name (new UID): a changed disk is quarantined as node-rebuilt, an unchanged one is cleaned', async () => {
    const node = `${PREFIX}-rebuilt`;
    const disc = join(root, 'rebuilt');
    mkdirSync(disc);
    const { configDir, className, nodeUid: oldUid } = await setupNode(node, filesystemClass(disc));
    const [uuidOld, uuidNew, uuidKept] = [randomUUID(), randomUUID(), randomUUID()];
    const oldDisk = makeExt4('rebuilt-old', uuidOld);
    const newDisk = makeExt4('rebuilt-new', uuidNew);
    const keptDisk = makeExt4('rebuilt-kept', uuidKept);
    const changedVol = join(disc, 'changed');
    const keptVol = join(disc, 'kept');
    const unmountOld = mountExt4(oldDisk, changedVol);
    mountExt4(keptDisk, keptVol);

    const first = await startAgent(node, configDir);
    let changed: PersistentVolume;
    let kept: PersistentVolume;
    try {
      changed = await pvFor(node, 'changed', className);
      kept = await pvFor(node, 'kept', className);
      for (const [pv, uuid] of [
        [changed, uuidOld],
        [kept, uuidKept],
      ] as const) {
        assert.equal(pv.metadata.annotations?.[IDENTITY_ANNOTATION], `fs-uuid:${uuid}`);
        assert.equal(pv.metadata.annotations[NODE_UID_ANNOTATION], oldUid);
        await bind(pv);
      }
      writeFileSync(join(changedVol, 'tenant-old.txt'), 'data of the old disk');
      writeFileSync(join(keptVol, 'tenant-kept.txt'), 'data of the kept disk');
    } finally {
      await stopAgent(first);
    }

    // The node is reinstalled: its Node object registered again (another UID), one disk replaced.
    await cluster.nodes.delete(node);
    const newUid = await eventually(
      async () =>
        createNode(node).catch((err: unknown) => {
          // The old object may still be on its way out.
          if (isAlreadyExists(err)) return undefined;
          throw err;
        }),
      'the Node created again',
    );
    assert.notEqual(newUid, oldUid);
    unmountOld();
    mountExt4(newDisk, changedVol);
    writeFileSync(join(changedVol, 'tenant-new.txt'), 'data of the new disk');
    await release(changed);
    await release(kept);

    const agent = await startAgent(node, configDir);
    try {
      const warning = await eventOf(changed, 'VolumeIdentityMismatch', `fs-uuid:${uuidNew}`);
      assert.equal(warning.type, 'Warning');
      assert.ok(
        warning.message.includes(
          `published on Node UID ${oldUid} for disk fs-uuid:${uuidOld}; this Node is ${newUid} and the disk at the path is fs-uuid:${uuidNew}`,
        ),
        warning.message,
      );
      await gaugeIs(agent, changed.metadata.name, 'node-rebuilt');

      // The unchanged disk's identity proves it is the PV's: cleaned, deleted, republished for the new Node.
      const again = await republished(kept);
      assert.equal(existsSync(join(keptVol, 'tenant-kept.txt')), false, 'the kept disk is wiped');
      assert.equal(again.metadata.annotations?.[IDENTITY_ANNOTATION], `fs-uuid:${uuidKept}`);
      assert.equal(again.metadata.annotations[NODE_UID_ANNOTATION], newUid);
      assert.deepEqual(quarantineGauge(agent, kept.metadata.name), {}, 'the kept disk was never quarantined');
      assert.equal((await eventsOf(kept, 'VolumeIdentityMismatch')).length, 0);

      await morePasses(agent, 2);
      await assertKept(changed);
      await gaugeIs(agent, changed.metadata.name, 'node-rebuilt');
      assert.equal(
        readFileSync(join(changedVol, 'tenant-new.txt'), 'utf8'),
        'data of the new disk',
        "the new disk's data is untouched",
      );
      assert.equal(readOnDisk(oldDisk, 'tenant-old.txt'), 'data of the old disk', "the old disk's data is untouched");
    } finally {
      await stopAgent(agent);
    }
  });

  /** The volume health gauge's series of a PV: reason → value (empty: healthy). */
  function healthGauge(agent: Agent, pvName: string): Record<string, number> {
    return pvSeries(agent, 'local_volume_provisioner_volume_health_abnormal', pvName);
  }

  /** The events of reason about an object of kind and name (the claim's are in its namespace, `default`). */
  async function eventsAbout(kind: string, name: string, reason: string): Promise<CoreEvent[]> {
    const list = await cluster.events.list({ namespace: 'default' });
    return list.items.filter(
      (e) => e.reason === reason && e.involvedObject.kind === kind && e.involvedObject.name === name,
    );
  }

  it('volume health: an unmounted disk is abnormal once (PV and claim, gauge), normal again when remounted', async () => {
    const node = `${PREFIX}-health`;
    const disc = join(root, 'health');
    mkdirSync(disc);
    const { configDir, className } = await setupNode(node, filesystemClass(disc));
    const disk = makeExt4('health', randomUUID());
    const vol = join(disc, 'vol');
    const unmountNow = mountExt4(disk, vol);
    const agent = await startAgent(node, configDir);
    try {
      const pv = await pvFor(node, 'vol', className);
      await bind(pv);
      const claim = `claim-${pv.metadata.name}`;
      await morePasses(agent, 2);
      assert.deepEqual(healthGauge(agent, pv.metadata.name), {}, 'healthy while mounted');

      unmountNow();
      await eventually(
        () => (healthGauge(agent, pv.metadata.name)['not-mounted'] === 1 ? true : undefined),
        'the gauge says not-mounted',
      );
      const onPv = await eventually(async () => {
        const found = await eventsAbout('PersistentVolume', pv.metadata.name, 'VolumeConditionAbnormal');
        return found.length > 0 ? found : undefined;
      }, 'VolumeConditionAbnormal on the PV');
      assert.equal(onPv[0]?.type, 'Warning');
      assert.match(onPv[0].message, /nothing is mounted at .*\(not-mounted\)/u);
      await eventually(async () => {
        const found = await eventsAbout('PersistentVolumeClaim', claim, 'VolumeConditionAbnormal');
        return found.length > 0 ? found : undefined;
      }, 'VolumeConditionAbnormal on the claim (kubectl describe pvc)');
      await morePasses(agent, 3);
      assert.equal(
        (await eventsAbout('PersistentVolume', pv.metadata.name, 'VolumeConditionAbnormal')).length,
        1,
        'said once, not every pass',
      );
      assert.equal((await getPv(pv.metadata.name))?.metadata.uid, pv.metadata.uid, 'a Bound PV is never deleted');

      mountExt4(disk, vol);
      await eventually(async () => {
        const found = await eventsAbout('PersistentVolume', pv.metadata.name, 'VolumeConditionNormal');
        return found.length > 0 ? found : undefined;
      }, 'VolumeConditionNormal on the PV');
      assert.deepEqual(healthGauge(agent, pv.metadata.name), {}, 'the gauge is cleared');
    } finally {
      await stopAgent(agent);
    }
  });

  it('the missing-disk policy deletes an Available PV whose disk stays missing, never a Bound one, and the disk back is published again', async () => {
    const node = `${PREFIX}-missing`;
    const disc = join(root, 'missing');
    mkdirSync(disc);
    const { configDir, className } = await setupNode(
      node,
      (name) => `${filesystemClass(disc)(name)}  deleteMissingAfter: 2s\n`,
    );
    const idle = makeExt4('missing-idle', randomUUID());
    const used = makeExt4('missing-used', randomUUID());
    const idleVol = join(disc, 'idle');
    const usedVol = join(disc, 'used');
    const unmountIdle = mountExt4(idle, idleVol);
    const unmountUsed = mountExt4(used, usedVol);
    const agent = await startAgent(node, configDir);
    try {
      const available = await pvFor(node, 'idle', className);
      const bound = await pvFor(node, 'used', className);
      // The PV controller's part (this plane runs none here): new PVs become Available.
      await markPersistentVolumeAvailable(adminKubeConfig(), available.metadata.name);
      await bind(bound);
      await morePasses(agent, 2);
      unmountIdle();
      unmountUsed();
      const deleted = await eventually(async () => {
        const found = await eventsAbout('PersistentVolume', available.metadata.name, 'VolumeMissingDeleted');
        return found.length > 0 ? found : undefined;
      }, 'VolumeMissingDeleted on the Available PV');
      assert.match(deleted[0]?.message ?? '', /deleteMissingAfter: 2s/u);
      await eventually(async () => {
        const now = await getPv(available.metadata.name);
        return now === undefined ||
          now.metadata.uid !== available.metadata.uid ||
          now.metadata.deletionTimestamp !== undefined
          ? true
          : undefined;
      }, 'the Available PV deleted');
      await morePasses(agent, 3);
      const boundNow = await getPv(bound.metadata.name);
      assert.ok(boundNow !== undefined, 'the Bound PV is kept');
      assert.equal(boundNow.metadata.uid, bound.metadata.uid, 'the same Bound PV');
      assert.equal(boundNow.metadata.deletionTimestamp, undefined);
      assert.deepEqual(await eventsAbout('PersistentVolume', bound.metadata.name, 'VolumeMissingDeleted'), []);

      // The disk is back: published again, a new PV of the same name recording it.
      mountExt4(idle, idleVol);
      const again = await republished(available);
      assert.equal(
        again.metadata.annotations?.[IDENTITY_ANNOTATION],
        available.metadata.annotations?.[IDENTITY_ANNOTATION],
      );
    } finally {
      await stopAgent(agent);
    }
  });
});
