// The config source port under the real agent: the source is read once per change (start-up
// included), the watcher's read is the one applied, an idle directory is only stat'ed, and the API
// source (a ConfigMap in the in-memory cluster) with the same validation, rejection and guard,
// through outages, deletion and re-creation, and the start-up fallback to the mounted directory;
// and the staged source: the candidate applied while the node's wave is open, stable otherwise.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { Agent } from '../../../src/core/agent/agent.js';
import type { AgentOptions } from '../../../src/core/agent/agent.js';
import { MemoryCleaner } from '../../../src/core/cleanup/cleaner.js';
import { systemClock } from '../../../src/core/clock.js';
import { ConfigSourceError } from '../../../src/core/errors.js';
import { DirectoryConfigSource } from '../../../src/core/config/source/directory.js';
import type { ConfigSource, SourceListener, SourceRead } from '../../../src/core/config/source/port.js';
import type { Cluster } from '../../../src/core/kube/cluster.js';
import { MemoryCluster } from '../../../src/core/kube/memory/memory-cluster.js';
import type { ConfigMap } from '../../../src/core/kube/objects.js';
import { MemoryLogger } from '../../../src/core/log.js';
import { MemoryVolumes } from '../../../src/core/node/memory-volumes.js';
import { publishAgentState } from '../../../src/core/fleet/agent-state.js';
import { stateFromLease } from '../../../src/core/fleet/applied-state.js';
import type { PublishedState } from '../../../src/core/fleet/applied-state.js';
import type { RolloutState } from '../../../src/core/rollout-state/state.js';
import { revertedState, rolloutState, writeStaged } from '../../support/staged-objects.js';
import { cuttable } from '../../support/cuttable.js';
import { writeConfigMapVolume } from '../../support/configmap-volume.js';
import { eventually, waitFor } from '../../support/eventually.js';

const CLASS = (extra = ''): string => `fast:\n  hostDir: /mnt/fast\n  mountDir: /mnt/fast\n${extra}`;
const NS = 'kube-system';
const CM = 'lvp-config';

/** A source that counts every read and probe of the one it wraps, and can replace reads. */
class CountingSource implements ConfigSource {
  reads = 0;
  probes = 0;
  /** Called instead of the inner read when set: scripted content. */
  override: ((n: number) => Promise<SourceRead> | undefined) | undefined;
  constructor(private readonly inner: ConfigSource) {}
  get fsWatchPath(): string | undefined {
    return this.inner.fsWatchPath;
  }
  status(): ReturnType<ConfigSource['status']> {
    return this.inner.status();
  }
  start(listener: SourceListener): Promise<void> {
    return this.inner.start(listener);
  }
  probe(): Promise<string | undefined> {
    this.probes++;
    return this.inner.probe();
  }
  read(): Promise<SourceRead> {
    this.reads++;
    return this.override?.(this.reads) ?? this.inner.read();
  }
  stop(): Promise<void> {
    return this.inner.stop();
  }
}

describe('the config source port', () => {
  let root = '';
  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'lvp-source-'));
  });
  after(async () => {
    await rm(root, { recursive: true, force: true });
  });

  interface Started {
    readonly agent: Agent;
    readonly memory: MemoryCluster;
    readonly logger: MemoryLogger;
    readonly down: { value: boolean };
  }

  async function start(
    options: {
      source?: ConfigSource;
      configPath?: string;
      configMap?: boolean;
      /** Read the staged copies of the ConfigMap (staged:NS/NAME). */
      staged?: boolean;
      watch?: AgentOptions['watch'];
      prepare?: (memory: MemoryCluster) => Promise<void>;
      down?: boolean;
      /** More classes than `fast`: their StorageClass and (empty) discovery directory /mnt/NAME. */
      classes?: readonly string[];
      /** Counts the PV lists the agent asks for. */
      pvLists?: { count: number };
    } = {},
  ): Promise<Started> {
    const memory = new MemoryCluster();
    memory.addNamespace(NS);
    await memory.storageClasses.create({ metadata: { name: 'fast' }, provisioner: 'kubernetes.io/no-provisioner' });
    await memory.nodes.create({ metadata: { name: 'node-a', labels: { 'kubernetes.io/hostname': 'node-a' } } });
    for (const name of options.classes ?? [])
      await memory.storageClasses.create({ metadata: { name }, provisioner: 'kubernetes.io/no-provisioner' });
    await options.prepare?.(memory);
    const { client, down } = cuttable(memory.configMaps);
    down.value = options.down === true;
    const { pvLists } = options;
    const cluster: Cluster = {
      persistentVolumes:
        pvLists === undefined
          ? memory.persistentVolumes
          : {
              ...memory.persistentVolumes,
              list: (o) => {
                pvLists.count += 1;
                return memory.persistentVolumes.list(o);
              },
            },
      storageClasses: memory.storageClasses,
      nodes: memory.nodes,
      events: memory.events,
      jobs: memory.jobs,
      configMaps: client,
    };
    const volumes = new MemoryVolumes();
    volumes.addDirectory('/mnt/fast');
    volumes.addMount('/mnt/fast/disk1');
    for (const name of options.classes ?? []) volumes.addDirectory(`/mnt/${name}`);
    const logger = new MemoryLogger();
    const agent = await Agent.start(
      {
        configPath: options.configPath ?? join(root, 'absent'),
        ...(options.configMap === true ? { configMap: { namespace: NS, name: CM } } : {}),
        ...(options.staged === true ? { configMap: { namespace: NS, name: CM, staged: true } } : {}),
        nodeName: 'node-a',
        namespace: NS,
        listenAddress: '127.0.0.1:0',
        metricsPath: '/metrics',
        discoveryPeriodMs: 50,
        changePollMs: 20,
        createConcurrency: 4,
        cleanupConcurrency: 2,
        jobImage: 'img',
        startTimeoutMs: 2000,
        ...(options.watch !== undefined ? { watch: options.watch } : {}),
      },
      {
        cluster,
        volumes,
        cleaner: new MemoryCleaner(),
        clock: systemClock,
        logger,
        ...(options.source !== undefined ? { configSource: options.source } : {}),
      },
    );
    await agent.generation.whenReady;
    return { agent, memory, logger, down };
  }

  const metrics = (agent: Agent): string => agent['metrics'].registry.render();

  describe('the directory source', () => {
    it('start-up reads the source once (it was three times: fingerprint, load, watcher start)', async () => {
      const dir = join(root, 'once');
      await writeConfigMapVolume(dir, { storageClassMap: CLASS() });
      const source = new CountingSource(new DirectoryConfigSource(dir));
      // The debounce spans the kubelet-style write's steps even on a loaded machine (at 10 ms a step
      // could land after a check of the half-written directory: a third read, no change).
      const t = await start({ source, watch: { pollIntervalMs: 60_000, debounceMs: 500 } });
      try {
        assert.equal(source.reads, 1);
        assert.equal(t.agent.status().source.inUse.kind, 'directory');
        // A watched change is read once too: the watcher's read is the one applied.
        await writeConfigMapVolume(dir, { storageClassMap: CLASS('  fsType: ext4\n') });
        await waitFor(() => t.agent.generation.number === 2, 'the change applied');
        assert.equal(t.agent.status().lastReload?.trigger, 'fs');
        assert.equal(source.reads, 2);
      } finally {
        await t.agent.stop();
      }
    });

    it('applies the snapshot the watcher read, not a later read of the source', async () => {
      const dir = join(root, 'snapshot');
      await writeConfigMapVolume(dir, { storageClassMap: CLASS() });
      const inner = new DirectoryConfigSource(dir);
      const source = new CountingSource(inner);
      const t = await start({ source, watch: { pollIntervalMs: 60_000, debounceMs: 10, useFsEvents: false } });
      try {
        await writeConfigMapVolume(dir, { storageClassMap: CLASS('  fsType: ext4\n') });
        const seen = await inner.read();
        // From now on the directory reads as xfs; the watcher's check below saw ext4.
        await writeConfigMapVolume(dir, { storageClassMap: CLASS('  fsType: xfs\n') });
        source.override = (n) => (n === 2 ? Promise.resolve(seen) : undefined);
        t.agent['watcher']?.request('poll');
        await waitFor(() => t.agent.generation.number === 2, 'the change applied');
        assert.equal(t.agent.appliedConfig().config.storageClassMap['fast']?.fsType, 'ext4');
      } finally {
        await t.agent.stop();
      }
    });

    it('an idle poll only stats the directory: no content read until something changes', async () => {
      const dir = join(root, 'idle');
      await writeConfigMapVolume(dir, { storageClassMap: CLASS() });
      // Timestamps younger than 2 s are not trusted (a same-size rewrite in the same tick): let them age.
      await delay(2_100);
      const source = new CountingSource(new DirectoryConfigSource(dir));
      const t = await start({ source, watch: { pollIntervalMs: 20, debounceMs: 10, useFsEvents: false } });
      try {
        await waitFor(() => source.probes >= 10, 'ten polls', 5_000);
        assert.equal(source.reads, 1, 'no read after the initial one');
        await writeConfigMapVolume(dir, { storageClassMap: CLASS('  fsType: ext4\n') });
        await waitFor(() => t.agent.generation.number === 2, 'the poll saw the change', 5_000);
        assert.equal(t.agent.status().lastReload?.trigger, 'poll');
      } finally {
        await t.agent.stop();
      }
    });
  });

  describe('the API source', () => {
    const configMap = (data: Record<string, string>): ConfigMap => ({
      metadata: { name: CM, namespace: NS },
      data,
    });
    const create = (data: Record<string, string>) => async (memory: MemoryCluster) => {
      await memory.configMaps.create(configMap(data), { namespace: NS });
    };
    const update = async (memory: MemoryCluster, data: Record<string, string>): Promise<void> => {
      const current = await memory.configMaps.get(CM, { namespace: NS });
      await memory.configMaps.update({ ...current, data }, { namespace: NS });
    };
    const api = { pollIntervalMs: 60_000, debounceMs: 10 };

    it('applies an update of the ConfigMap (trigger api), rejects an invalid one and keeps serving', async () => {
      const t = await start({ configMap: true, watch: api, prepare: create({ storageClassMap: CLASS() }) });
      try {
        const status = t.agent.status();
        assert.deepEqual(status.source.configured, { kind: 'configmap', namespace: NS, name: CM });
        assert.deepEqual(status.source.inUse, status.source.configured);
        assert.equal(status.source.api?.reachable, true);
        assert.equal(status.source.api.object, 'present');
        assert.equal(status.config.source, `configmap:${NS}/${CM}`);
        await update(t.memory, { storageClassMap: CLASS('  fsType: ext4\n') });
        await waitFor(() => t.agent.generation.number === 2, 'the update applied');
        assert.equal(t.agent.status().lastReload?.trigger, 'api');
        const good = t.agent.status().config.appliedHash;

        await update(t.memory, { storageClassMap: CLASS('  volumeMode: Sideways\n') });
        const rejected = await eventually(() => t.agent.status().rejected, 'the rejection');
        assert.equal(rejected.outcome, 'rejected');
        assert.ok(
          rejected.issues.some((i) => i.position?.file === `configmap:${NS}/${CM}/storageClassMap`),
          JSON.stringify(rejected.issues),
        );
        assert.equal(t.agent.status().config.appliedHash, good);
        assert.equal(t.agent.generation.number, 2);

        // Bounded as a mounted directory: a key over 1 MiB is rejected, naming it.
        await update(t.memory, { storageClassMap: CLASS(), big: 'x'.repeat(1024 * 1024 + 1) });
        await waitFor(
          () =>
            t.agent.status().rejected?.issues.some((i) => i.path === 'big' && /larger than 1 MiB/u.test(i.message)) ===
            true,
          'the oversized key rejected',
        );
        assert.equal(t.agent.status().config.appliedHash, good);
      } finally {
        await t.agent.stop();
      }
    });

    it("a write of the ConfigMap that changes none of its data asks for no list (no reload's head start for API events)", async () => {
      const pvLists = { count: 0 };
      const t = await start({ configMap: true, watch: api, prepare: create({ storageClassMap: CLASS() }), pvLists });
      try {
        const lists = pvLists.count;
        const checks = (): number => t.agent['watcher']?.stats.checks ?? 0;
        const before = checks();
        const current = await t.memory.configMaps.get(CM, { namespace: NS });
        const annotated = { ...current.metadata, annotations: { touched: 'yes' } };
        await t.memory.configMaps.update({ ...current, metadata: annotated }, { namespace: NS });
        // Noticed, read, found unchanged: the change is decided and nothing is held any more.
        await waitFor(() => checks() > before && t.agent['configChangeSince'] === undefined, 'the event, decided');
        assert.equal(pvLists.count, lists, 'no PV list for it');
        assert.equal(t.agent.generation.number, 1);
      } finally {
        await t.agent.stop();
      }
    });

    it('a deleted ConfigMap is reported and ignored; re-created, it is applied', async () => {
      const t = await start({ configMap: true, watch: api, prepare: create({ storageClassMap: CLASS() }) });
      try {
        const applied = t.agent.status().config.appliedHash;
        const checks = (): number => t.agent['watcher']?.stats.checks ?? 0;
        const checksBefore = checks();
        await t.memory.configMaps.delete(CM, { namespace: NS });
        await waitFor(() => t.agent.status().source.api?.object === 'deleted', 'the deletion seen');
        assert.match(
          metrics(t.agent),
          /^local_volume_provisioner_config_source_state\{kind="configmap",state="deleted"\} 1$/mu,
        );
        assert.ok(t.logger.messages('warn').some((m) => /ConfigMap of the config was deleted/u.test(m)));
        await waitFor(async () => {
          const events = await t.memory.events.list({ namespace: 'default' });
          return events.items.some((e) => e.reason === 'ConfigSourceDeleted');
        }, 'the ConfigSourceDeleted Node event');
        // A check of the source after the deletion (the watcher's poll, asked for now), decided:
        // it reads the last content, so nothing is applied and nothing held.
        t.agent['watcher']?.request('poll');
        await waitFor(
          () => checks() > checksBefore && t.agent['configChangeSince'] === undefined,
          'a check after the deletion, decided',
        );
        assert.equal(t.agent.status().config.appliedHash, applied, 'nothing wiped');
        assert.equal(t.agent.generation.number, 1, 'no reload');

        await create({ storageClassMap: CLASS('  fsType: xfs\n') })(t.memory);
        await waitFor(() => t.agent.generation.number === 2, 'the re-created ConfigMap applied');
        assert.equal(t.agent.appliedConfig().config.storageClassMap['fast']?.fsType, 'xfs');
        assert.equal(t.agent.status().source.api?.object, 'present');
        assert.match(
          metrics(t.agent),
          /^local_volume_provisioner_config_source_state\{kind="configmap",state="ok"\} 1$/mu,
        );
      } finally {
        await t.agent.stop();
      }
    });

    it('the API unreachable: the last good config stays and the status, a log line and the metric say so', async () => {
      const t = await start({ configMap: true, watch: api, prepare: create({ storageClassMap: CLASS() }) });
      try {
        const applied = t.agent.status().config.appliedHash;
        t.down.value = true;
        await waitFor(() => t.agent.status().source.api?.reachable === false, 'unreachable', 5_000);
        const source = t.agent.status().source;
        assert.equal(source.api?.stale, true);
        assert.match(source.api.lastError ?? '', /connection refused/u);
        assert.ok(t.logger.messages('warn').includes('config source unreachable: the last good config stays'));
        assert.match(metrics(t.agent), /state="unreachable"\} 1$/mu);
        assert.equal(t.agent.status().config.appliedHash, applied);
        // An update made meanwhile is applied once the API answers again.
        await update(t.memory, { storageClassMap: CLASS('  fsType: ext4\n') });
        t.down.value = false;
        await waitFor(() => t.agent.generation.number === 2, 'the update applied after the outage', 10_000);
        assert.equal(t.agent.status().source.api?.reachable, true);
      } finally {
        await t.agent.stop();
      }
    });

    it('at start-up without the ConfigMap readable, the mounted directory serves; the status says which and why', async () => {
      const dir = join(root, 'fallback');
      await writeConfigMapVolume(dir, { storageClassMap: CLASS('  fsType: ext4\n') });
      const t = await start({ configMap: true, configPath: dir, watch: api, down: true });
      try {
        const status = t.agent.status();
        assert.deepEqual(status.source.inUse, { kind: 'directory', path: dir });
        assert.match(
          status.source.fallbackReason ?? '',
          /cannot read configmap:kube-system\/lvp-config: connection refused/u,
        );
        assert.equal(t.agent.appliedConfig().config.storageClassMap['fast']?.fsType, 'ext4');
        assert.match(metrics(t.agent), /state="fallback"\} 1$/mu);
        await create({ storageClassMap: CLASS('  fsType: xfs\n') })(t.memory);
        t.down.value = false;
        await waitFor(() => t.agent.generation.number === 2, 'the ConfigMap applied once readable', 10_000);
        assert.equal(t.agent.appliedConfig().config.storageClassMap['fast']?.fsType, 'xfs');
        assert.equal(t.agent.status().source.inUse.kind, 'configmap');
        assert.equal(t.agent.status().source.fallbackReason, undefined);
      } finally {
        await t.agent.stop();
      }
    });

    it('without a fallback directory, a missing ConfigMap fails start-up with exit code 4', async () => {
      await assert.rejects(start({ configMap: true, watch: api }), (err: unknown) => {
        assert.ok(err instanceof ConfigSourceError);
        assert.match(err.message, /configmap:kube-system\/lvp-config does not exist/u);
        assert.equal(err.exitCode, 4);
        return true;
      });
    });
  });

  describe('the staged source', () => {
    const api = { pollIntervalMs: 60_000, debounceMs: 10 };
    const STABLE = { storageClassMap: CLASS() };
    const CANDIDATE = { storageClassMap: CLASS('  fsType: ext4\n') };
    const copies = (state: RolloutState) => async (memory: MemoryCluster) => {
      await writeStaged(memory.configMaps, NS, CM, 'stable', STABLE);
      await writeStaged(memory.configMaps, NS, CM, 'candidate', CANDIDATE, state);
    };
    const LEASE = 'lvp-node-a';
    const published = async (memory: MemoryCluster): Promise<PublishedState | undefined> => {
      const lease = await memory.leases.get(LEASE, { namespace: NS }).catch(() => undefined);
      return lease === undefined ? undefined : stateFromLease(lease);
    };

    it('applies the candidate when the state opens its wave, the stable config again when reverted; its Lease says which', async () => {
      const t = await start({ staged: true, watch: api, prepare: copies(rolloutState(0)) });
      const publishing = publishAgentState(t.agent, {
        leases: t.memory.leases,
        target: { name: LEASE, namespace: NS, instance: 'lvp' },
        clock: systemClock,
        logger: t.logger,
      });
      try {
        // Outside the open waves (none yet): the stable copy.
        const stableHash = t.agent.status().config.appliedHash;
        assert.equal(t.agent.appliedConfig().config.storageClassMap['fast']?.fsType, '');
        assert.equal(t.agent.status().config.source, `configmap:${NS}/${CM}-stable (staged)`);
        assert.deepEqual(t.agent.status().source.configured, { kind: 'staged', namespace: NS, name: CM });
        assert.equal(t.agent.status().source.stagedRole, 'stable');
        await waitFor(async () => (await published(t.memory))?.appliedHash === stableHash, 'the stable hash published');

        // The canary (node-a) opens: the candidate is applied, as a watch event.
        await writeStaged(t.memory.configMaps, NS, CM, 'candidate', CANDIDATE, rolloutState(1));
        await waitFor(() => t.agent.generation.number === 2, 'the candidate applied');
        assert.equal(t.agent.appliedConfig().config.storageClassMap['fast']?.fsType, 'ext4');
        assert.equal(t.agent.status().lastReload?.trigger, 'api');
        assert.equal(t.agent.status().source.stagedRole, 'candidate');
        const candidateHash = t.agent.status().config.appliedHash;
        assert.notEqual(candidateHash, stableHash);
        const onCandidate = await eventually(async () => {
          const state = await published(t.memory);
          return state?.appliedHash === candidateHash ? state : undefined;
        }, 'the candidate hash published');
        assert.equal(onCandidate.source, `configmap:${NS}/${CM}-candidate (staged)`);
        assert.equal(onCandidate.result, 'applied');

        // Halted and reverted: back to the stable config.
        await writeStaged(t.memory.configMaps, NS, CM, 'candidate', CANDIDATE, revertedState());
        await waitFor(() => t.agent.generation.number === 3, 'the revert applied');
        assert.equal(t.agent.status().config.appliedHash, stableHash);
        assert.equal(t.agent.status().source.rolloutPhase, 'halted');
        const reverted = await eventually(async () => {
          const state = await published(t.memory);
          return state?.appliedHash === stableHash ? state : undefined;
        }, 'the stable hash published again');
        assert.equal(reverted.source, `configmap:${NS}/${CM}-stable (staged)`);
        assert.match(
          metrics(t.agent),
          /^local_volume_provisioner_config_source_state\{kind="staged",state="ok"\} 1$/mu,
        );
      } finally {
        await publishing.stop();
        await t.agent.stop();
      }
    });

    it('an agent whose wave is open starts on the candidate; one outside starts on stable', async () => {
      const inWave = await start({ staged: true, watch: api, prepare: copies(rolloutState(1)) });
      try {
        assert.equal(inWave.agent.appliedConfig().config.storageClassMap['fast']?.fsType, 'ext4');
        assert.equal(inWave.agent.status().generation, 1);
      } finally {
        await inWave.agent.stop();
      }
      const outside = await start({
        staged: true,
        watch: api,
        prepare: copies(
          rolloutState(1, {
            waves: [
              { name: 'canary', nodes: ['node-b'], size: 1 },
              { name: 'wave-1', nodes: ['node-a'], size: 1 },
            ],
          }),
        ),
      });
      try {
        assert.equal(outside.agent.appliedConfig().config.storageClassMap['fast']?.fsType, '');
      } finally {
        await outside.agent.stop();
      }
    });

    it('the revert of a candidate that added a class is applied although removing a class orphans PVs; a plain removal is refused', async () => {
      const CLASS_OF = (name: string): string => `${name}:\n  hostDir: /mnt/${name}\n  mountDir: /mnt/${name}\n`;
      const TWO = { storageClassMap: CLASS() + CLASS_OF('slow') };
      const ADDS_EXTRA = { storageClassMap: CLASS() + CLASS_OF('slow') + CLASS_OF('extra') };
      const classes = (): string[] => Object.keys(t.agent.appliedConfig().config.storageClassMap).sort();
      const t = await start({
        staged: true,
        watch: api,
        classes: ['slow', 'extra'],
        prepare: async (memory) => {
          await writeStaged(memory.configMaps, NS, CM, 'stable', TWO);
          await writeStaged(memory.configMaps, NS, CM, 'candidate', ADDS_EXTRA, rolloutState(0));
        },
      });
      const publishing = publishAgentState(t.agent, {
        leases: t.memory.leases,
        target: { name: LEASE, namespace: NS, instance: 'lvp' },
        clock: systemClock,
        logger: t.logger,
      });
      try {
        assert.deepEqual(classes(), ['fast', 'slow']);
        const stableHash = t.agent.status().config.appliedHash;

        // The canary (node-a) opens: the candidate adds `extra` (not guarded).
        await writeStaged(t.memory.configMaps, NS, CM, 'candidate', ADDS_EXTRA, rolloutState(1));
        await waitFor(() => t.agent.generation.number === 2, 'the candidate applied');
        assert.deepEqual(classes(), ['extra', 'fast', 'slow']);
        const candidateHash = t.agent.status().config.appliedHash;
        await waitFor(
          async () => (await published(t.memory))?.appliedHash === candidateHash,
          'the candidate published',
        );

        // Halted and reverted: removing `extra` is orphans-pvs, but the rollout decided the return.
        await writeStaged(t.memory.configMaps, NS, CM, 'candidate', ADDS_EXTRA, revertedState());
        const reload = await eventually(() => {
          const last = t.agent.status().lastReload;
          return last?.candidateHash === stableHash ? last : undefined;
        }, 'the revert reloaded');
        assert.equal(reload.outcome, 'applied', JSON.stringify(reload));
        assert.equal(reload.trigger, 'api');
        assert.ok(
          reload.changes.some((c) => c.impact === 'orphans-pvs'),
          `the removal was a guarded change: ${JSON.stringify(reload.changes)}`,
        );
        assert.equal(reload.needsAllow, undefined);
        assert.deepEqual(classes(), ['fast', 'slow']);
        assert.equal(t.agent.status().config.appliedHash, stableHash);
        assert.equal(t.agent.status().rejected, undefined);
        const reverted = await eventually(async () => {
          const state = await published(t.memory);
          return state?.appliedHash === stableHash ? state : undefined;
        }, 'the stable hash published again');
        assert.equal(reverted.result, 'applied');
        assert.equal(reverted.source, `configmap:${NS}/${CM}-stable (staged)`);

        // A plain change of the stable copy (the state names it; no return from the candidate)
        // removing `slow`: the guard refuses it as any live edit.
        await writeStaged(t.memory.configMaps, NS, CM, 'stable', { storageClassMap: CLASS() });
        await writeStaged(t.memory.configMaps, NS, CM, 'candidate', ADDS_EXTRA, revertedState());
        const refused = await eventually(() => {
          const last = t.agent.status().rejected;
          return last?.outcome === 'refused' ? last : undefined;
        }, 'the removal refused');
        assert.deepEqual(refused.needsAllow, ['orphans-pvs']);
        assert.equal(t.agent.generation.number, 3);
        assert.deepEqual(classes(), ['fast', 'slow']);
        assert.equal(t.agent.status().config.appliedHash, stableHash);
        await waitFor(async () => (await published(t.memory))?.result === 'refused', 'the refusal published');
      } finally {
        await publishing.stop();
        await t.agent.stop();
      }
    });
  });
});
