// Data safety end to end (the invariants of docs/disk-identity.md): real ext4 filesystems on loop
// devices, real loop devices behind Block classes, `provisioner run` as a process against the real
// kube-apiserver. Every case writes a unique token on every disk it uses BEFORE anything happens,
// and reads the bytes of EVERY disk AFTER: a disk that must keep its data still has its token, a
// disk that must be wiped no longer has it.
//
//   I1 no wipe touches a disk whose identity is not the PV's recorded one;
//   I2 on one node one disk backs at most one PV, whatever its phase;
//   I3 a PV is deleted (republished) only after a cleanup that ran on the PV's own disk and completed on it;
//   I4 a Filesystem PV's path that is not a mount point is never emptied;
//   I5 an identity never matches a different disk that reuses freed numbers.
//
// Checks of the data are hard assertions (the test stops there); checks of what the agent says
// (Events, gauges, skip reasons) are collected and fail the test at its end, so one run shows
// everything that is wrong. Across all the cases, the invariant checker of
// test/support/data-safety-invariants.ts lists the PVs of every node of this file every 200 ms (the
// cases make conflicting entries on purpose: none may be published) and fails the last test with
// what it found.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import type { ChildProcess } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  rmdirSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { TestContext } from 'node:test';
import { CoreV1Api } from '@kubernetes/client-node';
import { isNotFound } from '../../../src/core/kube/cluster.js';
import { loadKubeconfig } from '../../../src/core/kube/kubeconfig.js';
import type { CoreEvent, Job, PersistentVolume } from '../../../src/core/kube/objects.js';
import { RestCluster } from '../../../src/core/kube/rest-cluster.js';
import { IDENTITY_ACTION_ANNOTATION, IDENTITY_ANNOTATION } from '../../../src/core/pv/identity.js';
import { NODE_LABEL, persistentVolumeName } from '../../../src/core/pv/naming.js';
import { CLI, runCli } from '../../support/cli.js';
import { bindPersistentVolume, markJob, releasePersistentVolume } from '../../support/cluster.js';
import { describeReport, startInvariantChecker, type InvariantChecker } from '../../support/data-safety-invariants.js';
import { eventually } from '../../support/eventually.js';
import { parsePrometheusText } from '../../support/prom-text.js';
import { runPvProtectionController } from '../../support/pv-protection.js';
import {
  attachLoopDevice,
  bindMount,
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
const DISK_BYTES = 16 * MiB;
/** Where a Block disk's token is written and read: the start and the middle of the device. */
const TOKEN_OFFSETS = [0, 8 * MiB] as const;
const suffix = Math.random().toString(36).slice(2, 8);
/** Every Node, StorageClass, PV and namespace of this file starts with it. */
const PREFIX = `ds-${suffix}`;
const NAMESPACE = `${PREFIX}-ns`;
const P = 'local_volume_provisioner';
const QUARANTINED = `${P}_persistentvolume_quarantined`;
const HEALTH = `${P}_volume_health_abnormal`;
const SKIPPED = `${P}_discovery_skipped_entries`;
const PASSES = `${P}_discovery_passes_total`;
/** How long a check of the agent's behaviour waits (a data check never waits). */
const SOFT_WAIT_MS = 12_000;

/** A token no other disk, test or run has: 4 KiB of a repeated unique text. */
function makeToken(label: string): Buffer {
  const unit = `DATA-SAFETY-${suffix}-${label}-${Math.random().toString(36).slice(2, 10)}|`;
  return Buffer.from(unit.repeat(Math.ceil(4096 / unit.length))).subarray(0, 4096);
}

/** Replaces the symlink at link by one to target in one rename (no pass sees the entry missing). */
function repoint(link: string, target: string): void {
  const staged = `${link}.staged-${Math.random().toString(36).slice(2, 8)}`;
  symlinkSync(target, staged);
  renameSync(staged, link);
}

/**
 * Checks of what the agent says, collected: each failure is recorded (and told as a diagnostic at
 * once), the test goes on so its data checks still run, and done() fails the test with them all.
 */
class Soft {
  readonly failures: string[] = [];
  constructor(private readonly t: TestContext) {}

  ok(condition: unknown, message: string): boolean {
    if (condition) return true;
    this.failures.push(message);
    this.t.diagnostic(`CHECK FAILED: ${message}`);
    return false;
  }

  equal(actual: unknown, expected: unknown, message: string): boolean {
    return this.ok(
      JSON.stringify(actual) === JSON.stringify(expected),
      `${message}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`,
    );
  }

  async eventually<T>(
    probe: () => T | undefined | Promise<T | undefined>,
    what: string,
    ms = SOFT_WAIT_MS,
  ): Promise<T | undefined> {
    try {
      return await eventually(probe, what, ms, 50);
    } catch (err) {
      this.ok(false, err instanceof Error ? err.message : String(err));
      return undefined;
    }
  }

  note(text: string): void {
    this.t.diagnostic(text);
  }

  done(): void {
    assert.deepEqual(this.failures, [], `${this.failures.length} check(s) of the agent's behaviour failed`);
  }
}

/** `provisioner run` as a process for one node. */
interface RunningAgent {
  readonly node: string;
  readonly child: ChildProcess;
  readonly port: string;
  readonly log: () => string;
  stop(): Promise<void>;
}

describe('data safety on a real node: `provisioner run` against the real apiserver', { skip: skipUnlessRoot() }, () => {
  const cleanup = new Cleanup();
  const stopController = new AbortController();
  const running = new Set<RunningAgent>();
  const logs: { name: string; text: () => string }[] = [];
  const nodes: string[] = [];
  const classes: string[] = [];
  /** Files whose existence lets a waiting cleaner script go on (all made in `after`, so none lingers). */
  const gates: string[] = [];
  let failed = false;
  let cluster: RestCluster;
  /** The invariant checker over every node of this file, from `before` to the last test. */
  let invariants: InvariantChecker | undefined;
  let root = '';
  let kubeconfigPath = '';

  // ---- disks -------------------------------------------------------------------------------------

  /** A new loop device over a sparse file under root, holding a fresh ext4. */
  function makeExt4(name: string, extraMkfs: readonly string[] = []): LoopDevice {
    const loop = attachLoopDevice(cleanup, join(root, `${name}.img`), DISK_BYTES);
    run('mkfs.ext4', ['-q', '-F', ...extraMkfs, '-E', 'lazy_itable_init=0,lazy_journal_init=0', loop.path]);
    return loop;
  }

  /** Mounts the ext4 on loop at path (made if missing); returns a function that unmounts this mount now. */
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

  /** The token file on the ext4 of loop, read through a mount of it outside every discovery directory. */
  function fsTokenOf(loop: LoopDevice): string | undefined {
    const where = join(root, 'checks', `${loop.name}-${Math.random().toString(36).slice(2, 8)}`);
    const unmountNow = mountExt4(loop, where);
    try {
      const file = join(where, 'token');
      return existsSync(file) ? readFileSync(file, 'utf8') : undefined;
    } finally {
      unmountNow();
      rmSync(where, { recursive: true, force: true });
    }
  }

  /** An ext4 disk with its token file written: assert kept with assertFsKept. */
  function ext4Disk(name: string): { loop: LoopDevice; token: string } {
    const loop = makeExt4(name);
    const token = makeToken(name).toString('latin1');
    const where = join(root, 'checks', `write-${name}`);
    const unmountNow = mountExt4(loop, where);
    try {
      writeFileSync(join(where, 'token'), token);
    } finally {
      unmountNow();
      rmSync(where, { recursive: true, force: true });
    }
    return { loop, token };
  }

  function assertFsKept(disk: { loop: LoopDevice; token: string }, what: string): void {
    assert.ok(fsTokenOf(disk.loop) === disk.token, `${what} (${disk.loop.path}) still has its data (token file)`);
  }

  /** A loop device with the token written at each offset. */
  function blockDisk(name: string): { loop: LoopDevice; token: Buffer } {
    const loop = attachLoopDevice(cleanup, join(root, `${name}.img`), DISK_BYTES);
    const token = makeToken(name);
    for (const offset of TOKEN_OFFSETS) writeAt(loop.path, offset, token);
    return { loop, token };
  }

  function hasBlockToken(device: string, token: Buffer): boolean {
    return TOKEN_OFFSETS.every((offset) => readAt(device, offset, token.length).equals(token));
  }

  function isZeroed(device: string, length: number): boolean {
    const zeros = Buffer.alloc(length);
    return TOKEN_OFFSETS.every((offset) => readAt(device, offset, length).equals(zeros));
  }

  function assertBlockKept(disk: { loop: LoopDevice; token: Buffer }, what: string): void {
    assert.ok(
      hasBlockToken(disk.loop.path, disk.token),
      `${what} (${disk.loop.path}) still has its token on the device`,
    );
    assert.ok(
      TOKEN_OFFSETS.every((offset) => readAt(disk.loop.backingFile, offset, disk.token.length).equals(disk.token)),
      `${what}: its backing file ${disk.loop.backingFile} still has the token`,
    );
  }

  function assertBlockWiped(disk: { loop: LoopDevice; token: Buffer }, what: string): void {
    assert.ok(!hasBlockToken(disk.loop.path, disk.token), `${what} (${disk.loop.path}) no longer has its token`);
    assert.ok(
      isZeroed(disk.loop.path, disk.token.length),
      `${what} (${disk.loop.path}) is zeroed at the token offsets`,
    );
  }

  /** Attaches file to the loop device of this exact path (e.g. a number just freed); undone like attachLoopDevice's. */
  function attachAt(device: string, file: string): LoopDevice {
    try {
      run('losetup', [device, file]);
    } catch (err) {
      throw new Error(
        `could not attach ${file} to ${device} again: another process may have taken the number meanwhile (a parallel test's losetup --find); rerun`,
        { cause: err },
      );
    }
    const name = device.replace(/^\/dev\//u, '');
    const [major, minor] = readFileSync(`/sys/block/${name}/dev`, 'utf8').trim().split(':').map(Number);
    const loop: LoopDevice = {
      path: device,
      name,
      major: major ?? 0,
      minor: minor ?? 0,
      backingFile: file,
      sizeBytes: statSync(file).size,
    };
    cleanup.defer(`detach ${device} (${file})`, () => {
      detachLoopDevice(loop);
    });
    return loop;
  }

  /** A cleaner script: records each run (`start DEVICE`, `done DEVICE`), waits for gate when given, zeroes the device. */
  function cleanerScript(name: string, gate?: string): { script: string; marker: string } {
    const script = join(root, `${name}.sh`);
    const marker = join(root, `${name}.marker`);
    if (gate !== undefined) gates.push(gate);
    const wait =
      gate === undefined
        ? ''
        : `i=0\nwhile [ ! -e '${gate}' ]; do sleep 0.05; i=$((i+1)); if [ $i -gt 1200 ]; then echo "timeout $LOCAL_PV_BLKDEVICE" >> '${marker}'; exit 9; fi; done\n`;
    writeFileSync(
      script,
      `#!/bin/sh\necho "start $LOCAL_PV_BLKDEVICE" >> '${marker}'\n${wait}` +
        `dd if=/dev/zero of="$LOCAL_PV_BLKDEVICE" bs=1M count=${DISK_BYTES / MiB} conv=fsync status=none || { echo "dd-failed $LOCAL_PV_BLKDEVICE" >> '${marker}'; exit 1; }\n` +
        `echo "done $LOCAL_PV_BLKDEVICE" >> '${marker}'\n`,
    );
    chmodSync(script, 0o755);
    return { script, marker };
  }

  const markerLines = (marker: string): string[] =>
    existsSync(marker) ? readFileSync(marker, 'utf8').trim().split('\n').filter(Boolean) : [];

  // ---- the cluster -------------------------------------------------------------------------------

  /** A Node, its StorageClasses (reclaim Delete) and a config dir with storageClassMap (and extra files). */
  async function setupNode(
    name: string,
    classMap: Record<string, string>,
    extraFiles: Record<string, string> = {},
  ): Promise<string> {
    await cluster.nodes.create({ metadata: { name, labels: { 'kubernetes.io/hostname': name } } });
    nodes.push(name);
    for (const className of Object.keys(classMap)) {
      await cluster.storageClasses.create({
        metadata: { name: className },
        provisioner: 'kubernetes.io/no-provisioner',
        reclaimPolicy: 'Delete',
      });
      classes.push(className);
    }
    const configDir = join(root, `config-${name}`);
    mkdirSync(configDir);
    writeFileSync(join(configDir, 'storageClassMap'), Object.values(classMap).join(''));
    for (const [file, text] of Object.entries(extraFiles)) writeFileSync(join(configDir, file), text);
    return configDir;
  }

  /** A Filesystem class whose discovery directory is disc. */
  const fsClass = (className: string, disc: string): string =>
    `${className}:\n  hostDir: ${disc}\n  mountDir: ${disc}\n`;
  /** A Block class whose discovery directory is disc (symlinks to device nodes), cleaned by script. */
  const blockClass = (className: string, disc: string, script: string): string =>
    `${className}:\n  hostDir: ${disc}\n  mountDir: ${disc}\n  volumeMode: Block\n  blockCleanerCommand: ["${script}"]\n`;

  let agentCount = 0;
  /** Spawns `provisioner run` for node, as the discovery tests do; resolves once it serves /ready. */
  async function startAgent(node: string, configDir: string, env: Record<string, string> = {}): Promise<RunningAgent> {
    agentCount += 1;
    const child = spawn(
      process.execPath,
      [
        CLI,
        'run',
        '--config-dir',
        configDir,
        '--listen-address',
        '127.0.0.1:0',
        '--admin-socket',
        join(root, `admin-${agentCount}.sock`),
        '--discovery-period',
        '300ms',
        '--change-poll-interval',
        '100ms',
        '--log-format',
        'json',
      ],
      {
        env: { ...process.env, MY_NODE_NAME: node, MY_NAMESPACE: NAMESPACE, KUBECONFIG: kubeconfigPath, ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    logs.push({ name: `${node}-${agentCount}`, text: () => stderr });
    const exited = new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) resolve();
      else
        child.on('exit', () => {
          resolve();
        });
    });
    // Last resort (a test process that dies): never leave an agent running.
    const kill = cleanup.defer(`kill agent ${String(child.pid)}`, () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    });
    const agent: RunningAgent = {
      node,
      child,
      port: '',
      log: () => stderr,
      stop: async () => {
        running.delete(agent);
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
        await exited;
        clearTimeout(timer);
        kill();
      },
    };
    running.add(agent);
    const port = await eventually(
      () =>
        /"msg":"agent started".*?"listen":"[^"]*:(\d+)"/u.exec(stderr)?.[1] ??
        (child.exitCode !== null ? 'exited' : undefined),
      `agent for ${node} to start`,
      20_000,
    );
    assert.notEqual(port, 'exited', `the agent exited at start:\n${stderr}`);
    Object.assign(agent, { port });
    await eventually(
      async () =>
        (await fetch(`http://127.0.0.1:${port}/ready`).catch(() => undefined))?.status === 200 ? true : undefined,
      `agent for ${node} ready`,
      20_000,
    );
    return agent;
  }

  async function metricSeries(
    agent: RunningAgent,
    metric: string,
  ): Promise<{ labels: Readonly<Record<string, string>>; value: number }[]> {
    const text = await (await fetch(`http://127.0.0.1:${agent.port}/metrics`)).text();
    return parsePrometheusText(text).get(metric)?.samples ?? [];
  }

  /** A per-PV gauge's series: reason → value. */
  async function pvGauge(agent: RunningAgent, metric: string, pv: string): Promise<Record<string, number>> {
    const out: Record<string, number> = {};
    for (const s of await metricSeries(agent, metric))
      if (s.labels['persistentvolume'] === pv && s.value !== 0) out[s.labels['reason'] ?? ''] = s.value;
    return out;
  }

  async function skippedCount(agent: RunningAgent, className: string, reason: string): Promise<number> {
    return (await metricSeries(agent, SKIPPED))
      .filter((s) => s.labels['storageclass'] === className && s.labels['reason'] === reason)
      .reduce((n, s) => n + s.value, 0);
  }

  async function passCount(agent: RunningAgent): Promise<number> {
    return (await metricSeries(agent, PASSES)).reduce((n, s) => n + s.value, 0);
  }

  /** Waits until the agent completed n more discovery passes (each also runs health and reclaim). */
  async function morePasses(agent: RunningAgent, n: number): Promise<void> {
    const from = await passCount(agent);
    await eventually(
      async () => ((await passCount(agent)) >= from + n ? true : undefined),
      `${n} more passes`,
      20_000,
      50,
    );
  }

  async function getPv(name: string): Promise<PersistentVolume | undefined> {
    try {
      return await cluster.persistentVolumes.get(name);
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  async function pvsOfNode(node: string): Promise<PersistentVolume[]> {
    return (await cluster.persistentVolumes.list({ labelSelector: `${NODE_LABEL}=${node}` })).items;
  }

  /** The PV the agent publishes for entry (not being deleted). */
  async function pvFor(node: string, entry: string, className: string): Promise<PersistentVolume> {
    const name = persistentVolumeName(entry, node, className);
    return eventually(async () => {
      const pv = await getPv(name);
      return pv?.metadata.deletionTimestamp === undefined ? pv : undefined;
    }, `PV ${name}`);
  }

  async function bind(pv: PersistentVolume): Promise<void> {
    await bindPersistentVolume(adminKubeConfig(), pv.metadata.name, {
      namespace: NAMESPACE,
      name: `claim-${pv.metadata.name}`.slice(0, 63),
      uid: randomUUID(),
    });
  }

  async function release(pv: PersistentVolume): Promise<void> {
    await releasePersistentVolume(adminKubeConfig(), pv.metadata.name);
  }

  /** The PV still there: the same object, not being deleted. */
  async function assertKept(pv: PersistentVolume, what: string): Promise<PersistentVolume> {
    const now = await getPv(pv.metadata.name);
    assert.ok(now !== undefined, `${what}: ${pv.metadata.name} still exists`);
    assert.equal(now.metadata.uid, pv.metadata.uid, `${what}: the same PV object (not deleted and republished)`);
    assert.equal(now.metadata.deletionTimestamp, undefined, `${what}: not being deleted`);
    return now;
  }

  async function events(reason: string): Promise<CoreEvent[]> {
    const found: CoreEvent[] = [];
    for (const namespace of ['default', NAMESPACE])
      found.push(...(await cluster.events.list({ namespace })).items.filter((e) => e.reason === reason));
    return found;
  }

  /** Events of reason about the PV (this very object) or the node. */
  async function eventsAbout(reason: string, pv: PersistentVolume | undefined, node?: string): Promise<CoreEvent[]> {
    return (await events(reason)).filter(
      (e) =>
        (pv !== undefined && e.involvedObject.uid === pv.metadata.uid) ||
        (pv !== undefined &&
          e.involvedObject.kind === 'PersistentVolume' &&
          e.involvedObject.name === pv.metadata.name) ||
        (node !== undefined && e.involvedObject.kind === 'Node' && e.involvedObject.name === node),
    );
  }

  const describeEvents = (list: readonly CoreEvent[]): string =>
    list
      .map((e) => `${e.type} ${e.reason} on ${e.involvedObject.kind}/${e.involvedObject.name ?? ''}: ${e.message}`)
      .join(' | ') || 'none';

  /** Every version of the PVs of a node from now on (a watch): a PV that lives only between two looks. */
  async function recordVersions(node: string): Promise<{ versions: PersistentVolume[]; stop: () => void }> {
    const labelSelector = `${NODE_LABEL}=${node}`;
    const list = await cluster.persistentVolumes.list({ labelSelector });
    const versions = [...list.items];
    const abort = new AbortController();
    void (async () => {
      try {
        for await (const event of cluster.persistentVolumes.watch({
          labelSelector,
          resourceVersion: list.metadata.resourceVersion ?? '0',
          signal: abort.signal,
        }))
          if (event.type !== 'BOOKMARK') versions.push(event.object);
      } catch {
        // Stopped.
      }
    })();
    return {
      versions,
      stop: () => {
        abort.abort();
      },
    };
  }

  // ---- Jobs: this plane has no kubelet and no Job controller; the test plays both ----------------

  /** The command line of the Job's container as it would run on the node: `provisioner` is the built CLI. */
  function jobCommand(job: Job): { argv: string[]; env: Record<string, string> } {
    const container = job.spec?.template.spec.containers[0];
    const argv = [...(container?.command ?? []), ...(container?.args ?? [])];
    const env: Record<string, string> = {};
    for (const e of container?.env ?? []) if (e.value !== undefined) env[e.name] = e.value;
    return { argv, env };
  }

  /** Runs a Job's container command on the host (the guard through bin/run.js) and writes its outcome as the Job controller would. */
  async function runJob(job: Job, t: Soft): Promise<{ code: number | null; output: string }> {
    const { argv, env } = jobCommand(job);
    let result;
    if (argv[0] === 'provisioner') {
      result = await runCli(argv.slice(1), { env, timeoutMs: 60_000 });
    } else {
      // Not behind the guard: run as a kubelet would.
      result = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
        const child = spawn(argv[0] ?? 'false', argv.slice(1), {
          env: { ...process.env, ...env },
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        let out = '';
        child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
        child.stderr.setEncoding('utf8').on('data', (d: string) => (out += d));
        child.on('error', reject);
        child.on('close', (code) => {
          resolve({ code, stdout: out, stderr: '' });
        });
      });
    }
    const output = `${result.stdout}${result.stderr}`.trim();
    t.note(
      `ran Job ${job.metadata.name} (${job.metadata.uid ?? ''}): ${argv.join(' ')} → exit ${String(result.code)}: ${output.slice(0, 400)}`,
    );
    await markJob(adminKubeConfig(), NAMESPACE, job.metadata.name, result.code === 0 ? 'succeeded' : 'failed');
    return { code: result.code, output };
  }

  before(async () => {
    try {
      run('mkfs.ext4', ['-V']);
    } catch (err) {
      throw new Error('these tests make ext4 filesystems: mkfs.ext4 (e2fsprogs) is needed', { cause: err });
    }
    const plane = requireTestControlPlane();
    kubeconfigPath = plane.kubeconfigPath;
    cluster = new RestCluster({ connection: await loadKubeconfig(kubeconfigPath) });
    await adminKubeConfig()
      .makeApiClient(CoreV1Api)
      // eslint-disable-next-line @typescript-eslint/no-unsafe-class-instance-assignment -- client-node's models are plain data
      .createNamespace({ body: { metadata: { name: NAMESPACE } } });
    root = makeTempDir(cleanup, 'lvp-data-safety-');
    mkdirSync(join(root, 'checks'));
    void runPvProtectionController(cluster, stopController.signal);
    invariants = startInvariantChecker({
      listPersistentVolumes: async () => (await cluster.persistentVolumes.list()).items,
      node: () => nodes,
      onViolation: (v) => process.stderr.write(`data-safety: invariant violated: ${v.message}\n`),
    });
  });

  after(async () => {
    await invariants?.stop();
    stopController.abort();
    for (const gate of gates) if (existsSync(join(gate, '..'))) writeFileSync(gate, '');
    try {
      for (const agent of [...running]) await agent.stop().catch(() => undefined);
      if (failed) {
        const dir = join(tmpdir(), `lvp-data-safety-logs-${suffix}`);
        mkdirSync(dir, { recursive: true });
        for (const log of logs) writeFileSync(join(dir, `${log.name}.log`), log.text());
        process.stderr.write(`data-safety: agent logs of this run in ${dir}\n`);
      }
      const jobs = await cluster.jobs.list({ namespace: NAMESPACE }).catch(() => ({ items: [] as Job[] }));
      for (const job of jobs.items)
        await cluster.jobs
          .delete(job.metadata.name, { namespace: NAMESPACE, propagationPolicy: 'Background' })
          .catch(() => undefined);
      const labelled = await cluster.persistentVolumes.list({ labelSelector: NODE_LABEL });
      for (const pv of labelled.items.filter((p) => (p.metadata.labels?.[NODE_LABEL] ?? '').startsWith(PREFIX))) {
        await cluster.persistentVolumes
          .patch(pv.metadata.name, { metadata: { finalizers: null } })
          .catch(() => undefined);
        await cluster.persistentVolumes.delete(pv.metadata.name).catch(() => undefined);
      }
      for (const sc of classes) await cluster.storageClasses.delete(sc).catch(() => undefined);
      for (const node of nodes) await cluster.nodes.delete(node).catch(() => undefined);
      await adminKubeConfig()
        .makeApiClient(CoreV1Api)
        .deleteNamespace({ name: NAMESPACE })
        .catch(() => undefined);
    } finally {
      cluster.close();
      cleanup.run();
    }
  });

  /** Runs a case; marks the run failed (its agents' logs kept) when it throws. */
  function safely(fn: (t: TestContext, soft: Soft) => Promise<void>): (t: TestContext) => Promise<void> {
    return async (t) => {
      const soft = new Soft(t);
      try {
        await fn(t, soft);
        soft.done();
      } catch (err) {
        failed = true;
        if (
          soft.failures.length > 0 &&
          !(err instanceof assert.AssertionError && err.message.includes('check(s) of the agent'))
        ) {
          throw new Error(`${err instanceof Error ? err.message : String(err)}\n(also: ${soft.failures.join('; ')})`, {
            cause: err,
          });
        }
        throw err;
      }
    };
  }

  // ---- 1. moved while Bound ----------------------------------------------------------------------

  it(
    '1. a Bound disk moved to another entry: the new entry is not published, the PV says `moved`, and once released nothing is wiped',
    safely(async (_t, soft) => {
      const node = `${PREFIX}-moved`;
      const sc = `${node}-fs`;
      const disc = join(root, 'moved');
      mkdirSync(disc);
      const configDir = await setupNode(node, { [sc]: fsClass(sc, disc) });
      const disk = ext4Disk('moved');
      const vol1 = join(disc, 'vol1');
      const vol2 = join(disc, 'vol2');
      const unmount1 = mountExt4(disk.loop, vol1);
      const agent = await startAgent(node, configDir);
      try {
        const a = await pvFor(node, 'vol1', sc);
        const identity = a.metadata.annotations?.[IDENTITY_ANNOTATION];
        soft.note(`PV A ${a.metadata.name} recorded ${String(identity)}`);
        await bind(a);
        writeFileSync(join(vol1, 'tenant.txt'), 'tenant data of A');

        // The disk moves: unmounted from vol1, the same filesystem mounted at vol2.
        unmount1();
        writeFileSync(join(vol1, 'root-fs-file.txt'), 'a file of the root filesystem, under the bare vol1');
        mountExt4(disk.loop, vol2);

        const conflictSeen = await soft.eventually(
          async () => ((await skippedCount(agent, sc, 'identity-conflict')) >= 1 ? true : undefined),
          `${SKIPPED}{storageclass="${sc}",reason="identity-conflict"} >= 1 (vol2 skipped)`,
        );
        if (conflictSeen === undefined) await morePasses(agent, 3);
        const conflict = await soft.eventually(
          async () => (await eventsAbout('VolumeIdentityConflict', a, node)).find((e) => e.message.includes('vol2')),
          'a VolumeIdentityConflict Event naming vol2',
        );
        soft.ok(conflict === undefined || conflict.type === 'Warning', 'VolumeIdentityConflict is a Warning');
        const moved = await soft.eventually(
          async () => ((await pvGauge(agent, HEALTH, a.metadata.name))['moved'] === 1 ? true : undefined),
          `${HEALTH}{persistentvolume="${a.metadata.name}",reason="moved"} = 1`,
        );
        const abnormal = await soft.eventually(
          async () =>
            (await eventsAbout('VolumeConditionAbnormal', a)).find(
              (e) => e.message.includes('moved') && e.message.includes('vol2'),
            ),
          'a VolumeConditionAbnormal Event on A saying `moved` and naming vol2',
        );
        if (moved === undefined || abnormal === undefined)
          soft.note(
            `A's health gauge: ${JSON.stringify(await pvGauge(agent, HEALTH, a.metadata.name))}; Events on A: ${describeEvents(await eventsAbout('VolumeConditionAbnormal', a))}`,
          );
        await morePasses(agent, 3);
        assert.equal(
          await getPv(persistentVolumeName('vol2', node, sc)),
          undefined,
          'no PV for vol2: the disk is A’s (I2)',
        );
        assert.deepEqual(
          (await pvsOfNode(node)).map((pv) => pv.metadata.name),
          [a.metadata.name],
          'A is the only PV of the node',
        );
        soft.equal(
          (await eventsAbout('VolumeIdentityConflict', a, node)).length,
          1,
          'VolumeIdentityConflict said once over passes',
        );

        // The claim is deleted: A's path (vol1) is a bare directory, not A's disk.
        await release(a);
        await morePasses(agent, 4);
        const quarantine = await pvGauge(agent, QUARANTINED, a.metadata.name);
        soft.note(
          `after the release: quarantine gauge of A ${JSON.stringify(quarantine)}; Events: ${describeEvents([
            ...(await eventsAbout('VolumeIdentityMismatch', a)),
            ...(await eventsAbout('VolumeFailedDelete', a)),
          ])}`,
        );
        await assertKept(a, 'A after its release');
        assert.equal(
          readFileSync(join(vol1, 'root-fs-file.txt'), 'utf8'),
          'a file of the root filesystem, under the bare vol1',
          'the bare vol1 was not emptied (I4)',
        );
        assert.equal(
          readFileSync(join(vol2, 'tenant.txt'), 'utf8'),
          'tenant data of A',
          'the disk (at vol2) keeps A’s data',
        );
        assert.equal(await getPv(persistentVolumeName('vol2', node, sc)), undefined, 'still no PV for vol2');
        assertFsKept(disk, 'the moved disk');
      } finally {
        await agent.stop();
      }
    }),
  );

  // ---- 2. moved while Released -------------------------------------------------------------------

  it(
    '2. a Released disk moved to another entry: the released tenant’s data is never offered, nothing is wiped, said once across restarts',
    safely(async (_t, soft) => {
      const node = `${PREFIX}-relmoved`;
      const sc = `${node}-fs`;
      const disc = join(root, 'relmoved');
      mkdirSync(disc);
      const configDir = await setupNode(node, { [sc]: fsClass(sc, disc) });
      const disk = ext4Disk('relmoved');
      const vol1 = join(disc, 'vol1');
      const vol2 = join(disc, 'vol2');
      const unmount1 = mountExt4(disk.loop, vol1);
      const first = await startAgent(node, configDir);
      let a: PersistentVolume;
      try {
        a = await pvFor(node, 'vol1', sc);
        await bind(a);
        writeFileSync(join(vol1, 'tenant.txt'), 'tenant data of A');
      } finally {
        await first.stop();
      }
      // Released while no agent runs (else it would be cleaned at once: it is A's disk), then moved.
      await release(a);
      unmount1();
      writeFileSync(join(vol1, 'root-fs-file.txt'), 'a file of the root filesystem, under the bare vol1');
      mountExt4(disk.loop, vol2);

      let agent = await startAgent(node, configDir);
      try {
        await soft.eventually(
          async () => ((await skippedCount(agent, sc, 'identity-conflict')) >= 1 ? true : undefined),
          `${SKIPPED}{reason="identity-conflict"} >= 1 (vol2 skipped)`,
        );
        await soft.eventually(
          async () => (await eventsAbout('VolumeIdentityConflict', a, node)).find((e) => e.message.includes('vol2')),
          'a VolumeIdentityConflict Event naming vol2',
        );
        await morePasses(agent, 4);
        assert.equal(
          await getPv(persistentVolumeName('vol2', node, sc)),
          undefined,
          'no PV for vol2: the released tenant’s data is not offered',
        );
        await assertKept(a, 'A');
        assert.equal(
          readFileSync(join(vol1, 'root-fs-file.txt'), 'utf8'),
          'a file of the root filesystem, under the bare vol1',
          'the bare vol1 not emptied',
        );
        assert.equal(readFileSync(join(vol2, 'tenant.txt'), 'utf8'), 'tenant data of A', 'the disk keeps A’s data');
        soft.note(
          `observed for A (Released, its disk at vol2, vol1 bare): quarantine gauge ${JSON.stringify(await pvGauge(agent, QUARANTINED, a.metadata.name))}, phase ${String((await getPv(a.metadata.name))?.status?.phase)}, cleanups ${JSON.stringify(await metricSeries(agent, `${P}_persistentvolume_quarantined`))}; Events on A: ${describeEvents(
            [
              ...(await eventsAbout('VolumeIdentityMismatch', a)),
              ...(await eventsAbout('VolumeIdentityConflict', a, node)),
              ...(await eventsAbout('VolumeFailedDelete', a)),
            ],
          )}`,
        );
        const said = {
          conflict: (await eventsAbout('VolumeIdentityConflict', a, node)).length,
          mismatch: (await eventsAbout('VolumeIdentityMismatch', a)).length,
        };
        soft.equal(said.conflict, 1, 'VolumeIdentityConflict said once');

        // A restart: the same findings are not said again (the `reported` annotation on the PV).
        await agent.stop();
        agent = await startAgent(node, configDir);
        await soft.eventually(
          async () => ((await skippedCount(agent, sc, 'identity-conflict')) >= 1 ? true : undefined),
          'vol2 skipped again after the restart',
        );
        await morePasses(agent, 4);
        soft.equal(
          {
            conflict: (await eventsAbout('VolumeIdentityConflict', a, node)).length,
            mismatch: (await eventsAbout('VolumeIdentityMismatch', a)).length,
          },
          said,
          'no finding said again after a restart (VolumeIdentityConflict, VolumeIdentityMismatch counts)',
        );
        soft.note(`A's annotations: ${JSON.stringify((await getPv(a.metadata.name))?.metadata.annotations)}`);
        await assertKept(a, 'A after the restart');
        assert.equal(await getPv(persistentVolumeName('vol2', node, sc)), undefined, 'still no PV for vol2');
        assert.equal(
          readFileSync(join(vol1, 'root-fs-file.txt'), 'utf8'),
          'a file of the root filesystem, under the bare vol1',
          'the bare vol1 not emptied',
        );
        assertFsKept(disk, 'the moved disk');
      } finally {
        await agent.stop();
      }
    }),
  );

  // ---- 3. two entries, one disk -----------------------------------------------------------------

  it(
    '3. two entries of one disk: neither published when found together; a second entry of a published disk is not published and the PV is unaffected',
    safely(async (_t, soft) => {
      const node = `${PREFIX}-twice`;
      const scFs = `${node}-fs`;
      const scBlk = `${node}-blk`;
      const discFs = join(root, 'twice-fs');
      const discBlk = join(root, 'twice-blk');
      mkdirSync(discFs);
      mkdirSync(discBlk);
      const { script } = cleanerScript('twice-cleaner');
      const configDir = await setupNode(node, {
        [scFs]: fsClass(scFs, discFs),
        [scBlk]: blockClass(scBlk, discBlk, script),
      });
      // (a) a filesystem at vol1 and bind-mounted at vol2; (b) two symlinks to one loop device.
      const fsDisk = ext4Disk('twice-fs');
      mountExt4(fsDisk.loop, join(discFs, 'vol1'));
      bindMount(cleanup, join(discFs, 'vol1'), join(discFs, 'vol2'));
      const blk = blockDisk('twice-blk');
      symlinkSync(blk.loop.path, join(discBlk, 'a'));
      symlinkSync(blk.loop.path, join(discBlk, 'b'));

      const agent = await startAgent(node, configDir);
      try {
        await soft.eventually(
          async () => ((await skippedCount(agent, scFs, 'identity-conflict')) === 2 ? true : undefined),
          `${SKIPPED}{storageclass="${scFs}",reason="identity-conflict"} = 2 (vol1 and vol2)`,
        );
        await soft.eventually(
          async () => ((await skippedCount(agent, scBlk, 'identity-conflict')) === 2 ? true : undefined),
          `${SKIPPED}{storageclass="${scBlk}",reason="identity-conflict"} = 2 (a and b)`,
        );
        await morePasses(agent, 3);
        const published = (await pvsOfNode(node)).map((pv) => pv.spec.local?.path);
        soft.equal(published, [], 'neither entry of either disk is published');

        // One of the two entries removed: the other is published.
        unmount(join(discFs, 'vol2'));
        rmdirSync(join(discFs, 'vol2'));
        rmSync(join(discBlk, 'b'));
        const v1 = await pvFor(node, 'vol1', scFs);
        const ba = await pvFor(node, 'a', scBlk);
        soft.note(
          `published once alone: ${v1.metadata.name} (${String(v1.metadata.annotations?.[IDENTITY_ANNOTATION])}), ${ba.metadata.name} (${String(ba.metadata.annotations?.[IDENTITY_ANNOTATION])})`,
        );
        await bind(v1);
        await morePasses(agent, 2);

        // A second entry of a published disk appears later: not published, the PV unaffected.
        bindMount(cleanup, join(discFs, 'vol1'), join(discFs, 'vol3'));
        symlinkSync(blk.loop.path, join(discBlk, 'c'));
        await soft.eventually(
          async () => ((await skippedCount(agent, scFs, 'identity-conflict')) === 1 ? true : undefined),
          'vol3 skipped as identity-conflict',
        );
        await soft.eventually(
          async () => ((await skippedCount(agent, scBlk, 'identity-conflict')) === 1 ? true : undefined),
          'c skipped as identity-conflict',
        );
        await morePasses(agent, 3);
        assert.equal(
          await getPv(persistentVolumeName('vol3', node, scFs)),
          undefined,
          'no PV for vol3 (the disk of vol1’s PV)',
        );
        assert.equal(
          await getPv(persistentVolumeName('c', node, scBlk)),
          undefined,
          'no PV for c (the disk of a’s PV)',
        );
        await assertKept(v1, 'vol1’s PV');
        await assertKept(ba, 'a’s PV');
        soft.equal((await getPv(v1.metadata.name))?.status?.phase, 'Bound', 'vol1’s PV still Bound');
        soft.equal(await pvGauge(agent, HEALTH, v1.metadata.name), {}, 'vol1’s PV healthy (its disk is at its path)');
        soft.equal(await pvGauge(agent, HEALTH, ba.metadata.name), {}, 'a’s PV healthy');
        soft.equal(
          describeEvents(await eventsAbout('VolumeConditionAbnormal', v1)),
          'none',
          'no VolumeConditionAbnormal on vol1’s PV',
        );
        assertFsKept(fsDisk, 'the filesystem disk');
        assertBlockKept(blk, 'the loop device');
      } finally {
        await agent.stop();
      }
    }),
  );

  // ---- 4. a swap during an in-process Block cleanup -----------------------------------------------

  it(
    '4. the entry re-pointed to another disk while its in-process cleaner runs: the other disk untouched, the PV deleted only once its own disk is back and clean',
    safely(async (_t, soft) => {
      const node = `${PREFIX}-swap`;
      const sc = `${node}-blk`;
      const disc = join(root, 'swap');
      mkdirSync(disc);
      const gate = join(root, 'swap.go');
      const { script, marker } = cleanerScript('swap-cleaner', gate);
      const configDir = await setupNode(node, { [sc]: blockClass(sc, disc, script) });
      const own = blockDisk('swap-own');
      const other = blockDisk('swap-other');
      const link = join(disc, 'nvme');
      symlinkSync(own.loop.path, link);
      const agent = await startAgent(node, configDir);
      const watch = await recordVersions(node);
      try {
        const pv = await pvFor(node, 'nvme', sc);
        const ownIdentity = pv.metadata.annotations?.[IDENTITY_ANNOTATION];
        soft.note(`PV ${pv.metadata.name} recorded ${String(ownIdentity)}`);
        await bind(pv);
        await release(pv);
        const started = await eventually(
          () => markerLines(marker).find((l) => l.startsWith('start ')),
          'the cleaner to start',
          20_000,
        );
        soft.equal(started, `start ${own.loop.path}`, 'the cleaner is given the resolved device node, not the entry');
        const holders = readdirSync(`/proc/${String(agent.child.pid)}/fd`).flatMap((fd) => {
          try {
            return [readlinkSync(`/proc/${String(agent.child.pid)}/fd/${fd}`)];
          } catch {
            return [];
          }
        });
        soft.ok(
          holders.includes(own.loop.path),
          `the agent holds ${own.loop.path} open while its cleaner runs (it holds: ${holders.filter((h) => h.startsWith('/dev/')).join(', ') || 'no device'})`,
        );

        // The entry now names another disk; then the cleaner goes on and finishes.
        repoint(link, other.loop.path);
        writeFileSync(gate, '');
        await eventually(
          () =>
            markerLines(marker).some((l) => l.startsWith('done ') || l.startsWith('dd-failed')) ? true : undefined,
          'the cleaner to finish',
        );
        await morePasses(agent, 4);
        assertBlockKept(other, 'the disk swapped in (I1)');
        await assertKept(pv, 'the PV while another disk is at its path (I3)');
        assert.ok(
          !watch.versions.some((v) => v.metadata.uid !== pv.metadata.uid),
          'no PV republished for the entry while it names the other disk',
        );
        const ownWiped = isZeroed(own.loop.path, own.token.length);
        soft.note(
          `after the cleaner ended on the swapped entry: own disk ${ownWiped ? 'wiped' : 'not wiped'}; quarantine ${JSON.stringify(await pvGauge(agent, QUARANTINED, pv.metadata.name))}; cleaner runs ${JSON.stringify(markerLines(marker))}; Events: ${describeEvents(
            [...(await eventsAbout('VolumeIdentityMismatch', pv)), ...(await eventsAbout('VolumeFailedDelete', pv))],
          )}`,
        );

        // The own disk back at the entry: cleaned (again, if need be), then deleted and republished.
        repoint(link, own.loop.path);
        const again = await eventually(
          () =>
            watch.versions.find(
              (v) => v.metadata.uid !== pv.metadata.uid && v.metadata.deletionTimestamp === undefined,
            ),
          'the PV republished with a new UID once its own disk is back',
          30_000,
        );
        assertBlockWiped(own, 'the PV’s own disk, when it is republished (I3)');
        assertBlockKept(other, 'the other disk');
        assert.equal(again.metadata.annotations?.[IDENTITY_ANNOTATION], ownIdentity, 'republished for its own disk');
        const republishedIds = new Set(
          watch.versions
            .filter((v) => v.metadata.uid !== pv.metadata.uid)
            .map((v) => v.metadata.annotations?.[IDENTITY_ANNOTATION]),
        );
        assert.deepEqual(
          [...republishedIds],
          [ownIdentity],
          'every new PV of the entry records its own disk, never the other',
        );
        soft.note(`cleaner runs: ${JSON.stringify(markerLines(marker))}`);
        soft.ok(
          markerLines(marker).every((l) => l.endsWith(own.loop.path)),
          `every cleaner run was given ${own.loop.path}: ${JSON.stringify(markerLines(marker))}`,
        );
      } finally {
        watch.stop();
        writeFileSync(gate, '');
        await agent.stop();
      }
    }),
  );

  // ---- 5. the same with a cleanup Job, behind the guard --------------------------------------------

  it(
    '5. the entry re-pointed while its cleanup Job is pending: the Job’s guard (`provisioner clean-block`) wipes only the disk it names, the PV is deleted only once its own disk is back',
    safely(async (_t, soft) => {
      const node = `${PREFIX}-job`;
      const sc = `${node}-blk`;
      const disc = join(root, 'job');
      mkdirSync(disc);
      const { script, marker } = cleanerScript('job-cleaner');
      const configDir = await setupNode(node, { [sc]: blockClass(sc, disc, script) }, { useJobForCleaning: 'true\n' });
      const own = blockDisk('job-own');
      const other = blockDisk('job-other');
      const link = join(disc, 'nvme');
      symlinkSync(own.loop.path, link);
      const agent = await startAgent(node, configDir, { JOB_CONTAINER_IMAGE: 'registry.example/provisioner:test' });
      const watch = await recordVersions(node);
      const ran = new Set<string>();
      /** Runs each cleanup Job of the PV not run yet; how many it ran. */
      const runNewJobs = async (pvName: string): Promise<number> => {
        const jobs = await cluster.jobs.list({ namespace: NAMESPACE, labelSelector: `pv=${pvName}` });
        let n = 0;
        for (const job of jobs.items) {
          if (ran.has(job.metadata.uid ?? '') || job.metadata.deletionTimestamp !== undefined) continue;
          ran.add(job.metadata.uid ?? '');
          await runJob(job, soft);
          n += 1;
        }
        return n;
      };
      try {
        const pv = await pvFor(node, 'nvme', sc);
        const ownIdentity = pv.metadata.annotations?.[IDENTITY_ANNOTATION] ?? '';
        await bind(pv);
        await release(pv);
        const job = await eventually(
          async () => cluster.jobs.get(`cleanup-${pv.metadata.name}`, { namespace: NAMESPACE }).catch(() => undefined),
          'the cleanup Job',
        );
        const { argv, env } = jobCommand(job);
        soft.note(`Job command: ${JSON.stringify(argv)} env ${JSON.stringify(env)}`);
        soft.equal(argv.slice(0, 2), ['provisioner', 'clean-block'], 'the Job runs behind the guard');
        soft.equal(
          argv[argv.indexOf('--device') + 1],
          own.loop.path,
          'the guard is given the resolved device node (--device)',
        );
        soft.equal(
          argv[argv.indexOf('--identity') + 1],
          ownIdentity,
          'the guard is given the PV’s recorded identity (--identity)',
        );
        soft.equal(argv.slice(argv.indexOf('--') + 1), [script], 'the class’s cleaner after `--`');

        // The entry names another disk before the Job's pod runs; then it runs (on the host, for real).
        repoint(link, other.loop.path);
        await morePasses(agent, 2);
        ran.add(job.metadata.uid ?? '');
        await runJob(job, soft);
        await morePasses(agent, 4);
        await runNewJobs(pv.metadata.name);
        await morePasses(agent, 2);
        assertBlockKept(other, 'the disk swapped in (I1)');
        await assertKept(pv, 'the PV while another disk is at its path (I3)');
        assert.ok(
          !watch.versions.some((v) => v.metadata.uid !== pv.metadata.uid),
          'no PV republished while the entry names the other disk',
        );
        soft.note(
          `after the Job while swapped: own disk ${isZeroed(own.loop.path, own.token.length) ? 'wiped' : 'not wiped'}; quarantine ${JSON.stringify(await pvGauge(agent, QUARANTINED, pv.metadata.name))}; cleaner runs ${JSON.stringify(markerLines(marker))}; Events: ${describeEvents(
            [...(await eventsAbout('VolumeIdentityMismatch', pv)), ...(await eventsAbout('VolumeFailedDelete', pv))],
          )}`,
        );

        // The own disk back: (another Job if need be, run too) deleted and republished.
        repoint(link, own.loop.path);
        const again = await eventually(
          async () => {
            await runNewJobs(pv.metadata.name);
            return watch.versions.find(
              (v) => v.metadata.uid !== pv.metadata.uid && v.metadata.deletionTimestamp === undefined,
            );
          },
          'the PV republished once its own disk is back',
          30_000,
        );
        assertBlockWiped(own, 'the PV’s own disk, when it is republished (I3)');
        assertBlockKept(other, 'the other disk');
        assert.equal(again.metadata.annotations?.[IDENTITY_ANNOTATION], ownIdentity, 'republished for its own disk');
        assert.ok(
          markerLines(marker).every((l) => l.endsWith(own.loop.path)),
          `every cleaner run was on ${own.loop.path}: ${JSON.stringify(markerLines(marker))}`,
        );

        // The guard alone: a Job made for this disk whose device node now holds another disk refuses.
        const refused = await runCli(
          ['clean-block', '--device', other.loop.path, '--identity', ownIdentity, '--', script],
          {
            env: { LOCAL_PV_BLKDEVICE: other.loop.path },
            timeoutMs: 60_000,
          },
        );
        soft.note(
          `guard on another disk: exit ${String(refused.code)}: ${(refused.stdout + refused.stderr).trim().slice(0, 300)}`,
        );
        assert.notEqual(refused.code, 0, 'the guard refuses a device that is not the identity it was given');
        soft.equal(refused.code, 7, 'the guard’s exit code for a refusal (docs: 7)');
        assertBlockKept(other, 'the other disk, after the guard was pointed at it');
        // The control: the same command line on the disk of that identity runs the cleaner (so the
        // refusal above is the guard's, not a missing command).
        const fresh = { loop: own.loop, token: makeToken('job-own-again') };
        for (const offset of TOKEN_OFFSETS) writeAt(fresh.loop.path, offset, fresh.token);
        const allowed = await runCli(
          ['clean-block', '--device', own.loop.path, '--identity', ownIdentity, '--', script],
          {
            env: { LOCAL_PV_BLKDEVICE: own.loop.path },
            timeoutMs: 60_000,
          },
        );
        soft.note(
          `guard on its disk: exit ${String(allowed.code)}: ${(allowed.stdout + allowed.stderr).trim().slice(0, 300)}`,
        );
        assert.equal(allowed.code, 0, 'the guard runs the cleaner on the disk of the identity it was given');
        assertBlockWiped(fresh, 'the disk the guard was given with its identity');
      } finally {
        watch.stop();
        await agent.stop();
      }
    }),
  );

  // ---- 6. numbers reused -------------------------------------------------------------------------

  it(
    '6. a new file under the same name, likely the same inode, on the same loop number: not the PV’s disk, never wiped (I5)',
    safely(async (_t, soft) => {
      const node = `${PREFIX}-reuse`;
      const sc = `${node}-blk`;
      const disc = join(root, 'reuse');
      mkdirSync(disc);
      const { script, marker } = cleanerScript('reuse-cleaner');
      const configDir = await setupNode(node, { [sc]: blockClass(sc, disc, script) });
      // The backing files live on a small ext4 of their own (256-byte inodes: birth times), where a
      // file made right after one is deleted gets its inode number back.
      const store = makeExt4('reuse-store', ['-I', '256']);
      const storeDir = join(root, 'reuse-store');
      mountExt4(store, storeDir);
      const file = join(storeDir, 'disk.img');
      const first = attachLoopDevice(cleanup, file, DISK_BYTES);
      const firstToken = makeToken('reuse-first');
      for (const offset of TOKEN_OFFSETS) writeAt(first.path, offset, firstToken);
      symlinkSync(first.path, join(disc, 'nvme'));
      const firstInode = statSync(file).ino;

      let agent = await startAgent(node, configDir);
      let pv: PersistentVolume;
      try {
        pv = await pvFor(node, 'nvme', sc);
        await bind(pv);
      } finally {
        await agent.stop();
      }
      await release(pv);
      // The disk is replaced while no agent runs: the file deleted, a new one under its name on the same loop number.
      detachLoopDevice(first);
      rmSync(file);
      writeFileSync(file, '', { flag: 'wx' });
      run('truncate', ['-s', String(DISK_BYTES), file]);
      const second = attachAt(first.path, file);
      const secondDisk = { loop: second, token: makeToken('reuse-second') };
      for (const offset of TOKEN_OFFSETS) writeAt(second.path, offset, secondDisk.token);
      const secondInode = statSync(file).ino;
      soft.note(
        `recorded ${String(pv.metadata.annotations?.[IDENTITY_ANNOTATION])}; inode ${String(firstInode)} → ${String(secondInode)} (${firstInode === secondInode ? 'reused' : 'NOT reused: the case is weaker'}), ${first.path} again`,
      );
      soft.ok(firstInode === secondInode, 'the test reproduced an inode reuse (else it proves less)');

      agent = await startAgent(node, configDir);
      try {
        await soft.eventually(
          async () =>
            (await pvGauge(agent, QUARANTINED, pv.metadata.name))['identity-changed'] === 1 ? true : undefined,
          `${QUARANTINED}{persistentvolume="${pv.metadata.name}",reason="identity-changed"} = 1`,
        );
        const mismatch = await soft.eventually(
          async () => (await eventsAbout('VolumeIdentityMismatch', pv))[0],
          'a VolumeIdentityMismatch Event on the PV',
        );
        if (mismatch !== undefined) soft.note(`mismatch: ${mismatch.message}`);
        await morePasses(agent, 4);
        assert.deepEqual(markerLines(marker), [], 'no cleaner ever ran');
        assertBlockKept(secondDisk, 'the new disk on the reused numbers (I5)');
        await assertKept(pv, 'the PV (quarantined)');
      } finally {
        await agent.stop();
      }
    }),
  );

  // ---- 7. accept where nothing is mounted ----------------------------------------------------------

  it(
    '7. `accept` on a Filesystem PV whose path is no longer a mount point is refused: the bare directory is not emptied, the PV kept',
    safely(async (_t, soft) => {
      const node = `${PREFIX}-bare`;
      const sc = `${node}-fs`;
      const disc = join(root, 'bare');
      mkdirSync(disc);
      const configDir = await setupNode(node, { [sc]: fsClass(sc, disc) });
      const disk = ext4Disk('bare');
      const vol = join(disc, 'vol');
      const unmountNow = mountExt4(disk.loop, vol);
      const agent = await startAgent(node, configDir);
      try {
        const a = await pvFor(node, 'vol', sc);
        const identity = a.metadata.annotations?.[IDENTITY_ANNOTATION];
        await bind(a);
        unmountNow();
        // The directory is now the root filesystem's (of this test's temp dir).
        writeFileSync(join(vol, 'root-fs-file.txt'), 'root filesystem data');
        mkdirSync(join(vol, 'sub'));
        writeFileSync(join(vol, 'sub', 'nested.txt'), 'nested root filesystem data');
        await release(a);
        await morePasses(agent, 3);
        soft.note(
          `released, path bare: quarantine ${JSON.stringify(await pvGauge(agent, QUARANTINED, a.metadata.name))}`,
        );

        await cluster.persistentVolumes.patch(a.metadata.name, {
          metadata: { annotations: { [IDENTITY_ACTION_ANNOTATION]: 'accept' } },
        });
        const refused = await soft.eventually(
          async () => (await eventsAbout('VolumeIdentityAcceptRefused', a))[0],
          'a VolumeIdentityAcceptRefused Event on the PV',
        );
        if (refused !== undefined) {
          soft.equal(refused.type, 'Warning', 'VolumeIdentityAcceptRefused is a Warning');
          soft.note(`refused: ${refused.message}`);
        }
        await morePasses(agent, 4);
        const now = await assertKept(a, 'the PV after `accept` on a bare path');
        assert.equal(
          readFileSync(join(vol, 'root-fs-file.txt'), 'utf8'),
          'root filesystem data',
          'the bare directory is not emptied (I4)',
        );
        assert.equal(
          readFileSync(join(vol, 'sub', 'nested.txt'), 'utf8'),
          'nested root filesystem data',
          'nor its sub-directories',
        );
        soft.equal(
          now.metadata.annotations?.[IDENTITY_ACTION_ANNOTATION],
          'accept',
          'the annotation is left for the operator',
        );
        soft.equal(now.metadata.annotations?.[IDENTITY_ANNOTATION], identity, 'nothing recorded');
        soft.equal(describeEvents(await eventsAbout('VolumeIdentityAccepted', a)), 'none', 'no VolumeIdentityAccepted');
        soft.equal((await eventsAbout('VolumeIdentityAcceptRefused', a)).length, 1, 'said once');
        assertFsKept(disk, 'the PV’s disk (unmounted)');
      } finally {
        await agent.stop();
      }
    }),
  );

  // ---- 8. action values other than `accept` -------------------------------------------------------

  it(
    '8. `identity-action` values other than exactly `accept` (`yes`, `Accept`) are reported and not acted on; `accept` then is',
    safely(async (_t, soft) => {
      const node = `${PREFIX}-action`;
      const sc = `${node}-fs`;
      const disc = join(root, 'action');
      mkdirSync(disc);
      const configDir = await setupNode(node, { [sc]: fsClass(sc, disc) });
      const own = ext4Disk('action-own');
      const other = ext4Disk('action-other');
      const vol = join(disc, 'vol');
      const unmountOwn = mountExt4(own.loop, vol);
      const agent = await startAgent(node, configDir);
      try {
        const a = await pvFor(node, 'vol', sc);
        const identity = a.metadata.annotations?.[IDENTITY_ANNOTATION];
        await bind(a);
        unmountOwn();
        mountExt4(other.loop, vol);
        await release(a);
        await soft.eventually(
          async () => (await eventsAbout('VolumeIdentityMismatch', a))[0],
          'the PV quarantined (VolumeIdentityMismatch)',
        );

        for (const value of ['yes', 'Accept']) {
          await cluster.persistentVolumes.patch(a.metadata.name, {
            metadata: { annotations: { [IDENTITY_ACTION_ANNOTATION]: value } },
          });
          const invalid = await soft.eventually(
            async () =>
              (await eventsAbout('VolumeIdentityActionInvalid', a)).find(
                (e) => e.message.includes(`"${value}"`) || e.message.includes(`=${value} `),
              ),
            `a VolumeIdentityActionInvalid Event naming ${value}`,
          );
          if (invalid !== undefined) soft.equal(invalid.type, 'Warning', 'VolumeIdentityActionInvalid is a Warning');
          await morePasses(agent, 4);
          const now = await assertKept(a, `the PV after ${IDENTITY_ACTION_ANNOTATION}=${value}`);
          soft.equal(now.metadata.annotations?.[IDENTITY_ACTION_ANNOTATION], value, `the annotation ${value} is left`);
          soft.equal(now.metadata.annotations?.[IDENTITY_ANNOTATION], identity, `nothing recorded on ${value}`);
          soft.equal(
            describeEvents(await eventsAbout('VolumeIdentityAccepted', a)),
            'none',
            `no VolumeIdentityAccepted on ${value}`,
          );
          assert.ok(existsSync(join(vol, 'token')), `the disk at the path is not cleaned on ${value}`);
          assertFsKept(other, `the disk at the path, after ${value}`);
          assertFsKept(own, `the PV’s own disk, after ${value}`);
        }

        // The control: exactly `accept` is acted on (so the checks above could see a wipe).
        invariants?.operatorAccepts({ uid: a.metadata.uid ?? '' });
        await cluster.persistentVolumes.patch(a.metadata.name, {
          metadata: { annotations: { [IDENTITY_ACTION_ANNOTATION]: 'accept' } },
        });
        await eventually(
          async () => {
            const now = await getPv(a.metadata.name);
            return now === undefined || now.metadata.uid !== a.metadata.uid ? true : undefined;
          },
          'the PV cleaned and republished after `accept`',
          20_000,
        );
        assert.equal(fsTokenOf(other.loop), undefined, 'the accepted disk is wiped');
        assertFsKept(own, 'the PV’s own disk (not at the path)');
      } finally {
        await agent.stop();
      }
    }),
  );

  it('no invariant violated on any node of these cases (the checker, over all of them)', async (t) => {
    assert.ok(invariants, 'the invariant checker started');
    const report = await invariants.stop();
    t.diagnostic(describeReport(report));
    assert.ok(report.polls > 0, `the checker listed the PVs: ${describeReport(report)}`);
    assert.deepEqual(
      report.violations.map((v) => v.message),
      [],
      describeReport(report),
    );
  });
});
