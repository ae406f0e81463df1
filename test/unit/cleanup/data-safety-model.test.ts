// Data safety as invariants, proven by a model (docs/disk-identity.md "Invariants"): random
// sequences of what happens to a node's disks (mount, unmount, move to another entry, one disk at
// two entries, symlink re-point, a loop device detached and its file recreated under the same
// numbers, a swap while a slow cleanup holds the disk, putting a disk back) mixed with the claim
// lifecycle (bind, release, cleanups in process and by Job, agent restarts) and reloads that remove,
// rename, narrow or swap the classes, run against the agent's own reclaim and discovery steps on
// the in-memory node and cluster. The model knows which physical disk is where; after every step
// it checks:
//   I1  every wipe (in-process or by Job) opened the disk its PV was published for;
//   I2  no two PVs of the node were published for one disk;
//   I3  a PV the agent deleted (to republish its path) was on a disk no tenant's data is left on;
//   and no disk holding a tenant's data is ever published (offered to a new claim);
//   I6  a PV is never cleaned by two cleanups at once (a Job taken for gone while it runs, then
//       redone in-process or by a new Job: the soak's "cleaned twice");
// and the integration tests' checker (test/support/data-safety-invariants.ts) finds nothing in the
// PVs after each step.
// I4 (a Filesystem path that is not a mount point is never emptied: it opens the root disk) and I5
// (a recreated loop device is another disk) are instances of I1 here.
import assert from 'node:assert/strict';
import { setImmediate as tick } from 'node:timers/promises';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { CleanOptions, FilesystemCleanResult, VolumeCleaner } from '../../../src/core/cleanup/cleaner.js';
import { jobLookup, type JobsForbidden } from '../../../src/core/cleanup/job-lookup.js';
import { Reclaimer } from '../../../src/core/cleanup/reclaim.js';
import { CleanupTable } from '../../../src/core/cleanup/table.js';
import { systemClock } from '../../../src/core/clock.js';
import { parseConfigSnapshot } from '../../../src/core/config/decode/parse.js';
import { snapshotFromFileText } from '../../../src/core/config/decode/layout.js';
import { planDiscovery } from '../../../src/core/discovery/plan.js';
import { KubeApiError, type Cluster } from '../../../src/core/kube/cluster.js';
import { EventRecorder } from '../../../src/core/kube/events.js';
import { MemoryCluster } from '../../../src/core/kube/memory/memory-cluster.js';
import type { Job, PersistentVolume } from '../../../src/core/kube/objects.js';
import { MemoryLogger } from '../../../src/core/log.js';
import { createAgentMetrics } from '../../../src/core/metrics/agent-metrics.js';
import { MemoryVolumes } from '../../../src/core/node/memory-volumes.js';
import type { NodeIdentity } from '../../../src/core/pv/naming.js';
import { InvariantRules } from '../../support/data-safety-invariants.js';

const NODE: NodeIdentity = { name: 'node-a', uid: 'uid-a', hostname: 'node-a', labels: {} };
const ENTRIES = 3;
const FS_CLASS = (name: string, dir: string): string => `  ${name}:\n    hostDir: ${dir}\n    mountDir: ${dir}\n`;
const BLK_CLASS = (name: string, dir: string, extra = ''): string =>
  `  ${name}:\n    hostDir: ${dir}\n    mountDir: ${dir}\n    volumeMode: Block\n` +
  `    blockCleanerCommand: ["/scripts/quick_reset.sh"]\n${extra}`;
/**
 * The configs a reload may bring (the seed's questions: what happens to bound and unbound PVs, and
 * to a cleanup under way, when the classes change): 0 the first; 1 the block class removed (its PVs
 * orphaned); 2 the filesystem class renamed (its PVs orphaned, its entries seen by a new class); 3
 * the two classes' directories swapped (every PV's path now under the other class's directory); 4
 * the block class narrowed to entry e1 by namePattern.
 */
const CONFIGS: readonly string[] = [
  FS_CLASS('fs', '/mnt/fs') + BLK_CLASS('blk', '/mnt/blk'),
  FS_CLASS('fs', '/mnt/fs'),
  FS_CLASS('fs-new', '/mnt/fs') + BLK_CLASS('blk', '/mnt/blk'),
  FS_CLASS('blk', '/mnt/blk') + BLK_CLASS('fs', '/mnt/fs'),
  FS_CLASS('fs', '/mnt/fs') + BLK_CLASS('blk', '/mnt/blk', '    namePattern: e1\n'),
];
const CLASSES = (config: number, jobs: boolean): string =>
  `storageClassMap:\n${CONFIGS[config] ?? ''}` + (jobs ? 'useJobForCleaning: "yes"\n' : '');

type Kind = 'fs' | 'blk';
type Op =
  | { readonly op: 'add'; readonly kind: Kind; readonly entry: number }
  | { readonly op: 'remove'; readonly kind: Kind; readonly entry: number }
  | { readonly op: 'move'; readonly kind: Kind; readonly from: number; readonly to: number }
  | { readonly op: 'twice'; readonly kind: Kind; readonly from: number; readonly to: number }
  | { readonly op: 'repoint'; readonly kind: Kind; readonly entry: number; readonly disk: number }
  | { readonly op: 'recreate'; readonly disk: number }
  | { readonly op: 'bind' | 'release'; readonly pv: number }
  | { readonly op: 'pass' | 'restart' | 'slow' | 'finish' | 'jobStart' | 'jobFinish' }
  | { readonly op: 'jobs'; readonly on: boolean }
  /** A reload: another of CONFIGS (a new reclaimer; the cleanup table, like the agent's, stays). */
  | { readonly op: 'reconfigure'; readonly config: number }
  /** How Jobs are seen: a watch cache that has not caught up; an apiserver starting up (403 to every read). */
  | { readonly op: 'lookup'; readonly mode: 'fresh' | 'lagging' | 'starting' };

/** A physical disk: what is written on it, by which tenant (PV uid) last. */
interface Disk {
  readonly name: string;
  readonly kind: Kind;
  /** fs: its filesystem device (major:minor); blk: its device node. */
  readonly at: string;
  tenantData: string | undefined;
}

const entryPath = (kind: Kind, i: number): string => `/mnt/${kind}/e${i}`;

/** The world: the in-memory node and cluster, the agent's steps, and what the model knows. */
class World {
  readonly volumes = new MemoryVolumes();
  readonly cluster = new MemoryCluster();
  readonly logger = new MemoryLogger();
  readonly metrics = createAgentMetrics();
  readonly events = new EventRecorder({
    cluster: this.cluster,
    clock: systemClock,
    logger: this.logger,
    component: 'test',
    host: 'node-a',
  });
  readonly disks: Disk[] = [];
  /** fs device → disk; blk device node → disk. */
  private readonly byDevice = new Map<string, Disk>();
  /** The disk each PV (by uid) was published for. */
  readonly published = new Map<string, Disk>();
  readonly violations: string[] = [];
  /**
   * The integration tests' checker (test/support/data-safety-invariants.ts), over the PVs after each
   * step; without its I3 rule, which assumes no disk is put at an entry between its PV's deletion
   * and its republish (this model re-points entries at any time).
   */
  readonly rules = new InvariantRules({ republishKeepsDisk: false });
  private jobsOn = false;
  private config = 0;
  private lookupMode: 'fresh' | 'lagging' | 'starting' = 'fresh';
  /** The Job watch's cache: what the cluster had at the last pass, unless the watch lags. */
  private jobCache = new Map<string, Job>();
  private forbidden: JobsForbidden = { since: undefined, logged: false };
  /** Cleanups running now per PV name: in-process ones, and Jobs whose pod has not ended. */
  private readonly cleaning = new Map<string, number>();
  private slow = false;
  private gate: { promise: Promise<void>; open: () => void } = openGate();
  /** Jobs whose pod runs: Job uid → the device they were given, and the end of their I6 count. */
  private readonly runningJobs = new Map<string, { readonly device: string; readonly ends: () => void }>();
  private blocked = 0;
  /** Device nodes held open by a cleanup (in-process, or a Job's guard): their loop cannot be re-bound. */
  private readonly held = new Set<string>();

  private async hold(path: string): Promise<string | undefined> {
    const real = (await this.volumes.entryInfo(path)).realPath;
    if (real !== undefined) this.held.add(real);
    return real;
  }
  table!: CleanupTable;
  reclaimer!: Reclaimer;
  /** The config serving now: the reclaimer's and the discovery passes' (one per generation, as in the agent). */
  private serving!: ReturnType<typeof parseConfigSnapshot>['config'];
  private nextDisk = 0;
  private readonly root: Disk = { name: 'root', kind: 'fs', at: '254:0', tenantData: undefined };

  constructor() {
    this.volumes.addDirectory('/mnt/fs').addDirectory('/mnt/blk').addDirectory('/dev/d');
    this.byDevice.set('254:0', this.root);
    this.start();
  }

  /** An agent process: a new cleanup table (in-process cleanups of the last one were killed) and reclaimer. */
  start(): void {
    this.forbidden = { since: undefined, logged: false };
    this.table = new CleanupTable({
      cleaner: this.cleaner(),
      volumes: this.volumes,
      clock: systemClock,
      logger: this.logger,
      concurrency: 2,
      backoff: { initialMs: 0, maxMs: 0 },
    });
    this.configure();
  }

  configure(): void {
    const config = parseConfigSnapshot(snapshotFromFileText('c.yaml', CLASSES(this.config, this.jobsOn))).config;
    this.serving = config;
    const jobs = jobLookup({
      cluster: { jobs: this.jobsAsSeen() },
      namespace: 'default',
      clock: systemClock,
      logger: this.logger,
      ...(this.jobsOn ? { watched: { get: (name: string) => this.jobCache.get(name) } } : {}),
      forbidden: this.forbidden,
    });
    this.reclaimer = new Reclaimer(
      { config, node: NODE, namespace: 'default', jobImage: 'img' },
      {
        cluster: this.cluster,
        volumes: this.volumes,
        clock: systemClock,
        logger: this.logger,
        metrics: this.metrics,
        events: this.events,
        table: this.table,
        jobs,
      },
    );
  }

  /** The cluster's Jobs as the agent's reads see them: a 403 for each while the apiserver starts. */
  private jobsAsSeen(): Cluster['jobs'] {
    const real = this.cluster.jobs;
    return Object.assign(Object.create(real) as Cluster['jobs'], {
      get: (name: string, options: { namespace: string }) =>
        this.lookupMode === 'starting'
          ? Promise.reject(new KubeApiError(403, 'Forbidden', 'jobs.batch is forbidden (the authorizer is starting)'))
          : real.get(name, options),
    });
  }

  /** I6: a cleanup of pvName starts (ended by the function returned). */
  private cleanupStarts(pvName: string | undefined, by: string): () => void {
    const name = pvName ?? '?';
    const now = (this.cleaning.get(name) ?? 0) + 1;
    this.cleaning.set(name, now);
    if (now > 1) this.violations.push(`I6: a ${by} cleanup of ${name} started while another one runs`);
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      this.cleaning.set(name, (this.cleaning.get(name) ?? 1) - 1);
    };
  }

  /** The physical disk a path leads to now: a mount's filesystem, a device node's disk; the root disk for a bare directory. */
  async diskAt(path: string): Promise<Disk | undefined> {
    const info = await this.volumes.entryInfo(path);
    if (info.kind === 'missing' || info.realPath === undefined) return undefined;
    if (info.kind === 'block-device') return this.byDevice.get(info.realPath);
    const mounts = await this.volumes.mountPoints();
    const top = mounts.findLast((m) => m.mountPoint === info.realPath);
    return top === undefined ? this.root : this.byDevice.get(top.device);
  }

  private async pvByName(name: string | undefined): Promise<PersistentVolume | undefined> {
    if (name === undefined) return undefined;
    return this.cluster.persistentVolumes.get(name).catch(() => undefined);
  }

  /** I1, when a cleaner opens what it will wipe: the PV's own disk. */
  private async opened(disk: Disk | undefined, pvName: string | undefined, by: string): Promise<void> {
    const pv = await this.pvByName(pvName);
    const own = pv === undefined ? undefined : this.published.get(pv.metadata.uid ?? '');
    if (disk === undefined) return;
    if (own !== disk)
      this.violations.push(
        `I1: ${by} cleanup of ${pvName ?? '?'} opened ${disk.name}, its disk is ${own?.name ?? '?'}`,
      );
  }

  private cleaner(): VolumeCleaner {
    // A block cleaner opens its target more than once (quick_reset: mkfs, then wipefs), each open
    // resolving the path again; the device the agent holds stays that disk (a held loop device
    // cannot be re-bound). A filesystem cleanup works through the one directory handle it holds.
    const wipe = async (path: string, options: CleanOptions, by: 'block' | 'filesystem'): Promise<void> => {
      const disk = await this.diskAt(path);
      if (disk === undefined) throw new Error(`${path}: nothing there`);
      const held = by === 'block' && options.beforeWipe !== undefined ? await this.hold(path) : undefined;
      const ends = this.cleanupStarts(options.pv, 'in-process');
      try {
        await options.beforeWipe?.();
        await this.opened(disk, options.pv, by);
        disk.tenantData = undefined;
        if (this.slow) {
          this.blocked += 1;
          try {
            await Promise.race([this.gate.promise, aborted(options.signal)]);
          } finally {
            this.blocked -= 1;
          }
        }
        const again = by === 'block' ? await this.diskAt(path) : disk;
        if (again === undefined) throw new Error(`${path}: nothing there`);
        await this.opened(again, options.pv, by);
        again.tenantData = undefined;
      } finally {
        ends();
        if (held !== undefined) this.held.delete(held);
      }
    };
    return {
      cleanBlock: (device: string, _command: readonly string[], options: CleanOptions) =>
        wipe(device, options, 'block'),
      cleanFilesystem: async (path: string, options: CleanOptions): Promise<FilesystemCleanResult> => {
        await wipe(path, options, 'filesystem');
        return { removed: 1, skippedMounts: [] };
      },
    };
  }

  async apply(op: Op): Promise<void> {
    switch (op.op) {
      case 'add':
        return this.add(op.kind, op.entry);
      case 'remove':
        return this.remove(op.kind, op.entry);
      case 'move':
      case 'twice':
        return this.place(op.kind, op.from, op.to, op.op === 'move');
      case 'repoint':
        return this.repoint(op.kind, op.entry, op.disk);
      case 'recreate':
        this.recreate(op.disk);
        return;
      case 'bind':
      case 'release':
        return this.claim(op.op, op.pv);
      case 'pass':
        return this.pass();
      case 'restart':
        await this.table.stop();
        this.start();
        return;
      case 'slow':
        this.slow = true;
        return;
      case 'finish':
        this.slow = false;
        this.gate.open();
        this.gate = openGate();
        return this.settle();
      case 'jobs':
        this.jobsOn = op.on;
        this.configure();
        return;
      case 'reconfigure':
        this.config = op.config % CONFIGS.length;
        this.configure();
        return;
      case 'lookup':
        this.lookupMode = op.mode;
        return;
      case 'jobStart':
      case 'jobFinish':
        return this.runJobs(op.op === 'jobStart' ? 'start' : 'finish');
    }
  }

  private async free(kind: Kind, entry: number): Promise<boolean> {
    return (
      (await this.volumes.entryInfo(entryPath(kind, entry))).kind === 'missing' ||
      (await this.diskAt(entryPath(kind, entry))) === this.root
    );
  }

  private async add(kind: Kind, entry: number): Promise<void> {
    if (!(await this.free(kind, entry))) return;
    const n = this.nextDisk++;
    const hex = n.toString(16).padStart(12, '0');
    if (kind === 'fs') {
      const disk: Disk = { name: `fs${n}`, kind, at: `8:${n + 1}`, tenantData: undefined };
      this.disks.push(disk);
      this.byDevice.set(disk.at, disk);
      this.volumes.addMount(entryPath(kind, entry), {
        fsType: 'ext4',
        device: disk.at,
        uuid: `00000000-0000-4000-8000-${hex}`,
      });
      return;
    }
    const disk: Disk = { name: `blk${n}`, kind, at: `/dev/d/${n}`, tenantData: undefined };
    this.disks.push(disk);
    this.byDevice.set(disk.at, disk);
    this.volumes.addBlockDevice(disk.at, 2 ** 30, { device: `7:${n}`, loop: { device: '254:0', inode: 1000 + n } });
    this.volumes.addSymlink(entryPath(kind, entry), disk.at);
  }

  private async remove(kind: Kind, entry: number): Promise<void> {
    const path = entryPath(kind, entry);
    const disk = await this.diskAt(path);
    if (disk === undefined || disk === this.root) return;
    if (kind === 'fs') this.volumes.removeMount(path);
    else this.volumes.remove(path);
  }

  /** Moves (or adds a second place for) the disk at one entry to another, free, entry. */
  private async place(kind: Kind, from: number, to: number, move: boolean): Promise<void> {
    const disk = await this.diskAt(entryPath(kind, from));
    if (disk === undefined || disk === this.root || from === to || !(await this.free(kind, to))) return;
    if (kind === 'blk') {
      if (move) this.volumes.remove(entryPath(kind, from));
      this.volumes.addSymlink(entryPath(kind, to), disk.at);
    } else if (move) {
      this.volumes.removeMount(entryPath(kind, from));
      this.mountAt(disk, entryPath(kind, to));
    } else {
      this.volumes.addBindMount(entryPath(kind, from), entryPath(kind, to));
    }
  }

  private mountAt(disk: Disk, path: string): void {
    const n = Number(disk.at.split(':')[1]) - 1;
    const hex = n.toString(16).padStart(12, '0');
    this.volumes.addMount(path, { fsType: 'ext4', device: disk.at, uuid: `00000000-0000-4000-8000-${hex}` });
  }

  /** Puts a given disk (not mounted or linked anywhere else is not required) at an entry, replacing what is there. */
  private async repoint(kind: Kind, entry: number, index: number): Promise<void> {
    const candidates = this.disks.filter((d) => d.kind === kind);
    const disk = candidates[index % Math.max(1, candidates.length)];
    if (disk === undefined) return;
    const path = entryPath(kind, entry);
    if (kind === 'blk') {
      if ((await this.volumes.entryInfo(path)).isSymlink || (await this.volumes.entryInfo(path)).kind !== 'missing')
        this.volumes.remove(path);
      this.volumes.addSymlink(path, disk.at);
      return;
    }
    const mounts = await this.volumes.mountPoints();
    if (mounts.some((m) => m.device === disk.at)) return; // a filesystem is mounted at one place here (or bound)
    if ((await this.diskAt(path)) !== this.root && (await this.diskAt(path)) !== undefined)
      this.volumes.removeMount(path);
    this.mountAt(disk, path);
  }

  /** A loop device detached, its file deleted and a new one attached under the same numbers: another disk. */
  private recreate(index: number): void {
    const candidates = this.disks.filter((d) => d.kind === 'blk' && this.byDevice.get(d.at) === d);
    const old = candidates[index % Math.max(1, candidates.length)];
    if (old === undefined || this.held.has(old.at)) return; // EBUSY: a held loop device is not re-bound
    const n = this.nextDisk++;
    const disk: Disk = { name: `blk${n}-reused`, kind: 'blk', at: old.at, tenantData: undefined };
    this.disks.push(disk);
    this.byDevice.set(old.at, disk);
    const inode = 1000 + Number(old.at.split('/').pop());
    this.volumes.replaceBlockDevice(old.at, 2 ** 30, { loop: { device: '254:0', inode } });
  }

  private async claim(what: 'bind' | 'release', index: number): Promise<void> {
    const pvs = (await this.live()).filter((pv) => pv.status?.phase === (what === 'bind' ? 'Available' : 'Bound'));
    const pv = pvs[index % Math.max(1, pvs.length)];
    if (pv === undefined) return;
    if (what === 'release') {
      await this.cluster.persistentVolumes.updateStatus({ ...pv, status: { phase: 'Released' } });
      return;
    }
    const bound = await this.cluster.persistentVolumes.update({
      ...pv,
      spec: {
        ...pv.spec,
        claimRef: { namespace: 'default', name: `claim-${pv.metadata.name}`, uid: `c-${pv.metadata.uid ?? ''}` },
      },
    });
    await this.cluster.persistentVolumes.updateStatus({ ...bound, status: { phase: 'Bound' } });
    // The tenant writes to its disk. (Another disk put at the path of an Available PV is reported,
    // identity-changed, but kubelet would still mount it for a claim: outside what the agent controls.)
    const disk = await this.diskAt(pv.spec.local?.path ?? '');
    if (disk !== undefined && disk === this.published.get(pv.metadata.uid ?? ''))
      disk.tenantData = pv.metadata.uid ?? '';
  }

  /** Every PV, those being deleted too (as the agent's cache lists them). */
  async list(): Promise<PersistentVolume[]> {
    return (await this.cluster.persistentVolumes.list()).items;
  }

  /** The PVs not being deleted. */
  async live(): Promise<PersistentVolume[]> {
    return (await this.list()).filter((pv) => pv.metadata.deletionTimestamp === undefined);
  }

  /** One sync-loop pass, as the generation runs it: reclaim, then discovery (publish as planned). */
  async pass(): Promise<void> {
    const before = new Set((await this.live()).map((pv) => pv.metadata.uid ?? ''));
    if (this.lookupMode !== 'lagging')
      this.jobCache = new Map(
        (await this.cluster.jobs.list({ namespace: 'default' })).items.map((j) => [j.metadata.name, j]),
      );
    await this.reclaimer.pass(await this.list());
    await this.settle();
    const listed = await this.list();
    const live = await this.live();
    for (const uid of before)
      if (!live.some((pv) => pv.metadata.uid === uid)) {
        const disk = this.published.get(uid);
        if (disk?.tenantData !== undefined)
          this.violations.push(`I3: a PV on ${disk.name} was deleted while a tenant's data is on it`);
      }
    const plan = await planDiscovery({
      config: this.serving,
      node: NODE,
      volumes: this.volumes,
      persistentVolumes: listed,
      storageClass: (name) => ({ metadata: { name }, provisioner: 'kubernetes.io/no-provisioner' }),
      cleanupInProgress: (name) => this.table.inProgress(name),
    });
    for (const planned of plan.create) {
      const disk = await this.diskAt(planned.path);
      const created = await this.cluster.persistentVolumes.create(planned.persistentVolume);
      await this.cluster.persistentVolumes.updateStatus({ ...created, status: { phase: 'Available' } });
      if (disk === undefined) continue;
      this.published.set(created.metadata.uid ?? '', disk);
      if (disk.tenantData !== undefined)
        this.violations.push(`offered: ${planned.path} (${disk.name}) published with a tenant's data on it`);
    }
  }

  /** Waits until every in-process cleanup has ended or waits at the slow gate. */
  async settle(): Promise<void> {
    for (let i = 0; i < 1000; i++) {
      const busy = this.table
        .list()
        .filter((e) => e.method === 'process' && (e.state === 'running' || e.state === 'queued'));
      if (busy.length <= this.blocked) return;
      await tick();
    }
  }

  /**
   * Runs the cleanup Jobs as a node would: the guard (`provisioner clean-block`) when the Job has it.
   * A Job deleted while its pod runs ends at the next finish (the pod is killed, not at once).
   */
  private async runJobs(step: 'start' | 'finish'): Promise<void> {
    const listed = (await this.cluster.jobs.list({ namespace: 'default' })).items;
    if (step === 'finish')
      for (const [uid, running] of this.runningJobs)
        if (!listed.some((j) => j.metadata.uid === uid)) {
          this.runningJobs.delete(uid);
          running.ends();
          const real = (await this.volumes.entryInfo(running.device)).realPath;
          if (real !== undefined) this.held.delete(real);
        }
    for (const job of listed) {
      if ((job.status?.succeeded ?? 0) > 0 || (job.status?.conditions ?? []).length > 0) continue;
      const uid = job.metadata.uid ?? '';
      const command = job.spec?.template.spec.containers[0]?.command ?? [];
      const env = job.spec?.template.spec.containers[0]?.env ?? [];
      const device = env.find((e) => e.name === 'LOCAL_PV_BLKDEVICE')?.value ?? '';
      const expected = command[0] === 'provisioner' ? command[command.indexOf('--identity') + 1] : undefined;
      const identityNow = async (): Promise<string> =>
        await this.volumes.volumeIdentity(device).then(
          (i) => i?.id ?? 'none',
          () => 'unreadable',
        );
      const running = this.runningJobs.get(uid);
      if (step === 'start' && running === undefined) {
        if (expected !== undefined && (await identityNow()) !== expected) {
          await this.markJob(job, false);
          continue;
        }
        const disk = await this.diskAt(device);
        if (disk === undefined) continue;
        if (expected !== undefined) await this.hold(device);
        const ends = this.cleanupStarts(job.metadata.labels?.['pv'], 'Job');
        await this.opened(disk, job.metadata.labels?.['pv'], 'Job');
        disk.tenantData = undefined;
        this.runningJobs.set(uid, { device, ends });
      } else if (step === 'finish' && running !== undefined) {
        this.runningJobs.delete(uid);
        running.ends();
        const disk = await this.diskAt(device);
        if (disk !== undefined) {
          await this.opened(disk, job.metadata.labels?.['pv'], 'Job');
          disk.tenantData = undefined;
        }
        const real = (await this.volumes.entryInfo(device)).realPath;
        if (real !== undefined) this.held.delete(real);
        await this.markJob(job, expected === undefined || (await identityNow()) === expected);
      }
    }
  }

  private async markJob(job: Job, ok: boolean): Promise<void> {
    const now = new Date().toISOString();
    const status: NonNullable<Job['status']> = ok
      ? { succeeded: 1, startTime: now, completionTime: now, conditions: [{ type: 'Complete', status: 'True' }] }
      : { failed: 1, startTime: now, conditions: [{ type: 'Failed', status: 'True', reason: 'BackoffLimitExceeded' }] };
    await this.cluster.jobs.updateStatus({ ...job, status }, { namespace: 'default' });
  }

  /** I2, and what the last steps found. */
  async check(): Promise<void> {
    for (const v of this.rules.observe(await this.list(), [NODE.name])) this.violations.push(`checker: ${v.message}`);
    const owners = new Map<Disk, string>();
    for (const pv of await this.live()) {
      const disk = this.published.get(pv.metadata.uid ?? '');
      if (disk === undefined) continue;
      const other = owners.get(disk);
      if (other !== undefined) this.violations.push(`I2: ${pv.metadata.name} and ${other} are both on ${disk.name}`);
      owners.set(disk, pv.metadata.name);
    }
  }

  async stop(): Promise<void> {
    this.gate.open();
    await this.table.stop();
  }
}

function openGate(): { promise: Promise<void>; open: () => void } {
  let open = (): void => undefined;
  const promise = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { promise, open };
}

function aborted(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    if (signal.aborted) reject(new Error('aborted'));
    signal.addEventListener(
      'abort',
      () => {
        reject(new Error('aborted'));
      },
      { once: true },
    );
  });
}

const kind = fc.constantFrom<Kind>('fs', 'blk');
const entry = fc.nat({ max: ENTRIES - 1 });
const op: fc.Arbitrary<Op> = fc.oneof(
  { arbitrary: fc.record({ op: fc.constant('add' as const), kind, entry }), weight: 4 },
  { arbitrary: fc.record({ op: fc.constant('remove' as const), kind, entry }), weight: 1 },
  { arbitrary: fc.record({ op: fc.constant('move' as const), kind, from: entry, to: entry }), weight: 2 },
  { arbitrary: fc.record({ op: fc.constant('twice' as const), kind, from: entry, to: entry }), weight: 1 },
  { arbitrary: fc.record({ op: fc.constant('repoint' as const), kind, entry, disk: fc.nat({ max: 5 }) }), weight: 2 },
  { arbitrary: fc.record({ op: fc.constant('recreate' as const), disk: fc.nat({ max: 5 }) }), weight: 1 },
  {
    arbitrary: fc.record({ op: fc.constantFrom('bind' as const, 'release' as const), pv: fc.nat({ max: 5 }) }),
    weight: 4,
  },
  { arbitrary: fc.record({ op: fc.constant('pass' as const) }), weight: 6 },
  {
    arbitrary: fc.record({ op: fc.constantFrom('restart' as const, 'slow' as const, 'finish' as const) }),
    weight: 2,
  },
  { arbitrary: fc.record({ op: fc.constantFrom('jobStart' as const, 'jobFinish' as const) }), weight: 2 },
  { arbitrary: fc.record({ op: fc.constant('jobs' as const), on: fc.boolean() }), weight: 1 },
  {
    arbitrary: fc.record({ op: fc.constant('reconfigure' as const), config: fc.nat({ max: CONFIGS.length - 1 }) }),
    weight: 2,
  },
  {
    arbitrary: fc.record({
      op: fc.constant('lookup' as const),
      mode: fc.constantFrom('fresh' as const, 'lagging' as const, 'starting' as const),
    }),
    weight: 1,
  },
);

async function run(ops: readonly Op[]): Promise<readonly string[]> {
  const world = new World();
  try {
    for (const step of ops) {
      await world.apply(step);
      await world.check();
      if (world.violations.length > 0) return world.violations;
    }
    return world.violations;
  } finally {
    await world.stop();
  }
}

/** A longer search than the suite's, without editing this file (docs/testing.md, "The data-safety model"). */
function searchSettings(env: NodeJS.ProcessEnv): { numRuns: number; maxLength: number; seed?: number } {
  const positive = (name: string, fallback: number): number => {
    const text = env[name];
    if (text === undefined || text === '') return fallback;
    const n = Number(text);
    if (!Number.isSafeInteger(n) || n <= 0) throw new Error(`${name}=${text}: a positive integer`);
    return n;
  };
  const seed = env['LVP_MODEL_SEED'];
  if (seed !== undefined && seed !== '' && !Number.isSafeInteger(Number(seed)))
    throw new Error(`LVP_MODEL_SEED=${seed}: an integer`);
  return {
    numRuns: positive('LVP_MODEL_RUNS', 300),
    maxLength: positive('LVP_MODEL_MAX_STEPS', 40),
    ...(seed !== undefined && seed !== '' ? { seed: Number(seed) } : {}),
  };
}

describe('data safety invariants under random disk operations and claims (model-based)', () => {
  it('I1–I6 hold after every step of any sequence', async () => {
    const { numRuns, maxLength, seed } = searchSettings(process.env);
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 5, maxLength }), async (ops) => {
        assert.deepEqual(await run(ops), []);
      }),
      { numRuns, ...(seed !== undefined ? { seed } : {}) },
    );
  });

  it('the cases the outside test found, as sequences', async () => {
    const p = { op: 'pass' } as const;
    const cases: Record<string, readonly Op[]> = {
      'moved while Bound': [
        { op: 'add', kind: 'fs', entry: 0 },
        p,
        { op: 'bind', pv: 0 },
        { op: 'move', kind: 'fs', from: 0, to: 1 },
        p,
        p,
      ],
      'moved while Released': [
        { op: 'add', kind: 'blk', entry: 0 },
        p,
        { op: 'bind', pv: 0 },
        { op: 'release', pv: 0 },
        { op: 'move', kind: 'blk', from: 0, to: 1 },
        p,
        p,
      ],
      'one disk at two entries': [
        { op: 'add', kind: 'fs', entry: 0 },
        { op: 'twice', kind: 'fs', from: 0, to: 1 },
        p,
        { op: 'bind', pv: 0 },
        { op: 'release', pv: 0 },
        p,
      ],
      'swap during a slow in-process cleanup, then put back': [
        { op: 'add', kind: 'blk', entry: 0 },
        { op: 'add', kind: 'blk', entry: 1 },
        p,
        { op: 'bind', pv: 0 },
        { op: 'bind', pv: 0 },
        { op: 'release', pv: 0 },
        { op: 'slow' },
        p,
        { op: 'repoint', kind: 'blk', entry: 0, disk: 1 },
        { op: 'finish' },
        p,
        { op: 'repoint', kind: 'blk', entry: 0, disk: 0 },
        p,
        p,
      ],
      'swap during a Job cleanup, then put back': [
        { op: 'jobs', on: true },
        { op: 'add', kind: 'blk', entry: 0 },
        { op: 'add', kind: 'blk', entry: 1 },
        p,
        { op: 'bind', pv: 0 },
        { op: 'bind', pv: 0 },
        { op: 'release', pv: 0 },
        p,
        { op: 'repoint', kind: 'blk', entry: 0, disk: 1 },
        { op: 'jobStart' },
        { op: 'jobFinish' },
        p,
        { op: 'repoint', kind: 'blk', entry: 0, disk: 0 },
        p,
        p,
      ],
      'numbers reused': [
        { op: 'add', kind: 'blk', entry: 0 },
        p,
        { op: 'bind', pv: 0 },
        { op: 'release', pv: 0 },
        { op: 'recreate', disk: 0 },
        p,
        p,
      ],
      'a running Job read as 403 by an apiserver starting up, cleaning switched to in-process (I6)': [
        { op: 'jobs', on: true },
        { op: 'add', kind: 'blk', entry: 0 },
        p,
        { op: 'bind', pv: 0 },
        { op: 'release', pv: 0 },
        p,
        { op: 'jobStart' },
        { op: 'jobs', on: false },
        { op: 'lookup', mode: 'starting' },
        p,
        p,
        { op: 'lookup', mode: 'fresh' },
        p,
        p,
        { op: 'jobFinish' },
        p,
        p,
      ],
      'a Job the watch has not seen yet (I6)': [
        { op: 'jobs', on: true },
        { op: 'add', kind: 'blk', entry: 0 },
        p,
        { op: 'bind', pv: 0 },
        { op: 'release', pv: 0 },
        { op: 'lookup', mode: 'lagging' },
        p,
        { op: 'jobStart' },
        p,
        p,
        { op: 'jobFinish' },
        { op: 'jobStart' },
        { op: 'lookup', mode: 'fresh' },
        p,
        p,
      ],
      'unmounted under a Released PV (I4)': [
        { op: 'add', kind: 'fs', entry: 0 },
        p,
        { op: 'bind', pv: 0 },
        { op: 'release', pv: 0 },
        { op: 'remove', kind: 'fs', entry: 0 },
        p,
      ],
    };
    for (const [name, ops] of Object.entries(cases)) assert.deepEqual(await run(ops), [], name);
  });

  it('a reload keeps the reload table’s promises (docs/reload.md) for Released PVs and cleanups under way', async () => {
    const p = { op: 'pass' } as const;
    /** Each PV as `class path phase[ deleting]`, after the steps. */
    const after = async (world: World, ops: readonly Op[]): Promise<string[]> => {
      for (const step of ops) {
        await world.apply(step);
        await world.check();
      }
      assert.deepEqual(world.violations, []);
      return (await world.list()).map(
        (pv) =>
          `${pv.spec.storageClassName ?? ''} ${pv.spec.local?.path ?? ''} ${pv.status?.phase ?? ''}` +
          (pv.metadata.deletionTimestamp === undefined ? '' : ' deleting'),
      );
    };
    const released = (kind: Kind): Op[] => [
      { op: 'add', kind, entry: 0 },
      p,
      { op: 'bind', pv: 0 },
      { op: 'release', pv: 0 },
    ];
    const withWorld = async (check: (world: World) => Promise<void>): Promise<void> => {
      const world = new World();
      try {
        await check(world);
      } finally {
        await world.stop();
      }
    };
    // renamed: the old PV is an orphan (not cleaned, its path not published under the new class);
    // the class back, it is cleaned and deleted
    await withWorld(async (world) => {
      assert.deepEqual(await after(world, [...released('fs'), { op: 'reconfigure', config: 2 }, p, p]), [
        'fs /mnt/fs/e0 Released',
      ]);
      assert.ok(world.logger.records.some((r) => r.message.includes('storage class fs is not configured')));
      assert.deepEqual(await after(world, [{ op: 'reconfigure', config: 0 }, p, p]), [
        'fs /mnt/fs/e0 Released deleting',
      ]);
    });
    // the block class removed while its cleanup runs: the cleanup finishes, its PV is deleted, and
    // nothing is published for the class any more
    await withWorld(async (world) => {
      const steps: Op[] = [...released('blk'), { op: 'slow' }, p, { op: 'reconfigure', config: 1 }, { op: 'finish' }];
      assert.deepEqual(await after(world, [...steps, p, p]), ['blk /mnt/blk/e0 Released deleting']);
    });
    // the directories swapped: a Bound PV is left alone, a Released one cleaned as what it is
    await withWorld(async (world) => {
      const steps: Op[] = [...released('fs'), { op: 'add', kind: 'blk', entry: 1 }, p, { op: 'bind', pv: 0 }];
      assert.deepEqual(await after(world, [...steps, { op: 'reconfigure', config: 3 }, p, p]), [
        'fs /mnt/fs/e0 Released deleting',
        'blk /mnt/blk/e1 Bound',
      ]);
      assert.ok(world.logger.records.some((r) => r.message === 'cleanup started' && r.fields['mode'] === 'Filesystem'));
    });
  });
});
