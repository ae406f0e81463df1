// A running agent (real config watcher: chokidar and the poll; in-memory cluster and node) whose
// reload guard applies everything (`--reload-guard apply`: a config that drops classes is applied,
// not refused) watches a kubelet ConfigMap volume while kubelet swaps it in bursts of 50,
// emptying each old data directory file by file with small, varied pauses, so the agent's reads
// meet every stage of kubelet's update; the agent's reader is held up a few milliseconds after
// some of its resolves of `..data`, as on a busy node, so kubelet gets on meanwhile. Every config
// the agent applies is one that was written whole (its hash, its classes), never a part of one;
// and after each burst the config of its last swap ends up applied.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { Agent } from '../../../src/core/agent/agent.js';
import type { ReloadOutcome } from '../../../src/core/agent/reload-types.js';
import { MemoryCleaner } from '../../../src/core/cleanup/cleaner.js';
import { systemClock } from '../../../src/core/clock.js';
import { parseConfigSnapshot } from '../../../src/core/config/decode/parse.js';
import { snapshotFromDirectoryFiles } from '../../../src/core/config/decode/layout.js';
import { DirectoryConfigSource } from '../../../src/core/config/source/directory.js';
import { nodeDirectoryFs } from '../../../src/core/config/source/directory-read.js';
import type { DirectoryFs } from '../../../src/core/config/source/directory-read.js';
import { MemoryCluster } from '../../../src/core/kube/memory/memory-cluster.js';
import { MemoryLogger } from '../../../src/core/log.js';
import { MemoryVolumes } from '../../../src/core/node/memory-volumes.js';
import { kubeletUpdate, writeConfigMapVolume } from '../../support/configmap-volume.js';
import { waitFor } from '../../support/eventually.js';
import { seededRandom } from '../../support/soak/plan.js';

type Data = Readonly<Record<string, string>>;

const CLASS_NAMES = ['fast', 'slow', 'bulk', 'archive', 'scratch'] as const;

const classMap = (count: number, fsType: string): string =>
  CLASS_NAMES.slice(0, count)
    .map((n) => `${n}:\n  hostDir: /mnt/${n}\n  mountDir: /mnt/${n}\n  fsType: ${fsType}\n`)
    .join('');

/** Three whole configs of 3, 5 and 6 key files, with 3, 4 and 5 classes. */
const CONFIGS: readonly Data[] = [
  {
    storageClassMap: classMap(3, 'ext4'),
    nodeLabelsForPV: '- topology.kubernetes.io/zone\n',
    labelsForPV: 'config: a\n',
  },
  {
    storageClassMap: classMap(4, 'xfs'),
    nodeLabelsForPV: '- topology.kubernetes.io/zone\n- topology.kubernetes.io/region\n',
    labelsForPV: 'config: b\n',
    minResyncPeriod: '7m0s',
    setPVOwnerRef: 'true',
  },
  {
    storageClassMap: classMap(5, 'ext4'),
    nodeLabelsForPV: '- topology.kubernetes.io/region\n',
    labelsForPV: 'config: c\n',
    minResyncPeriod: '9m0s',
    useNodeNameOnly: 'true',
    provisionerNotReadyNodeTaintKey: 'example.com/lvp-not-ready',
  },
];
/** Bursts of swaps, each waited out until its last config serves. */
const BURSTS = 3;
const SWAPS = 50;

/** What the agent applies when it applies `data` whole: its hash and its number of classes. */
function whole(data: Data): { readonly hash: string; readonly classes: number } {
  const files = Object.entries(data).map(([name, text]) => ({ name, text }));
  const loaded = parseConfigSnapshot(snapshotFromDirectoryFiles('/config', files));
  return { hash: loaded.hash, classes: Object.keys(loaded.config.storageClassMap).length };
}

/**
 * nodeDirectoryFs as the agent's reader meets it on a busy node: after some of its resolves of
 * `..data` it is held up for a few milliseconds (`pauseMs`), as a descheduled thread would be, so
 * kubelet gets on with its update in between. Counts the reads (one stat of the source each) and
 * the resolves of `..data` (two per read that needed no retry).
 */
function slowReaderFs(
  dir: string,
  pauseMs: () => number,
): { readonly fs: DirectoryFs; readonly counts: { reads: number; resolves: number } } {
  const counts = { reads: 0, resolves: 0 };
  const inner = nodeDirectoryFs;
  return {
    counts,
    fs: {
      ...inner,
      stat: (path) => {
        if (path === dir) counts.reads++;
        return inner.stat(path);
      },
      realpath: async (path) => {
        const real = await inner.realpath(path);
        if (path === join(dir, '..data')) {
          counts.resolves++;
          const ms = pauseMs();
          if (ms > 0) await delay(ms);
        }
        return real;
      },
    },
  };
}

describe('a live agent under bursts of kubelet ConfigMap swaps', () => {
  let root = '';
  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'lvp-kubelet-live-'));
  });
  after(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it(
    `applies only whole configs through ${String(BURSTS)} bursts of ${String(SWAPS)} swaps, and the last one of each wins`,
    { timeout: 30_000 },
    async (t) => {
      const dir = join(root, 'config');
      const initial = CONFIGS[0] ?? {};
      await writeConfigMapVolume(dir, initial);
      /** The last config of burst `n`: one of the three with a label of its own. */
      const finalOf = (n: number): Data => ({
        ...CONFIGS[n % CONFIGS.length],
        labelsForPV: `config: final-${String(n)}\n`,
      });
      const written = new Map(
        [...CONFIGS, ...Array.from({ length: BURSTS }, (_, i) => finalOf(i + 1))].map((data) => {
          const w = whole(data);
          return [w.hash, w.classes];
        }),
      );
      assert.equal(written.size, CONFIGS.length + BURSTS, 'every config written differs');

      const memory = new MemoryCluster();
      await memory.nodes.create({ metadata: { name: 'node-a', labels: { 'kubernetes.io/hostname': 'node-a' } } });
      const volumes = new MemoryVolumes();
      for (const name of CLASS_NAMES) {
        await memory.storageClasses.create({ metadata: { name }, provisioner: 'kubernetes.io/no-provisioner' });
        volumes.addDirectory(`/mnt/${name}`);
        volumes.addMount(`/mnt/${name}/disk1`);
      }
      const random = seededRandom(20_260_101); // the same delays on every run
      /** 0 half of the time, else 0 to `max` - 1 ms. */
      const pause = (max: number) => (): number => (random() < 0.5 ? 0 : Math.floor(random() * max));
      // The reader held up to 9 ms after a resolve of ..data, kubelet up to 3 ms before each removal
      // of an old file (a few times as long as a read of a small file): kubelet can swap and empty
      // part of the directory the reader resolved before the reader lists it.
      const { fs, counts } = slowReaderFs(dir, pause(10));
      const removalDelayMs = pause(4);
      const agent = await Agent.start(
        {
          configPath: dir,
          nodeName: 'node-a',
          namespace: 'default',
          listenAddress: '127.0.0.1:0',
          metricsPath: '/metrics',
          discoveryPeriodMs: 3_600_000,
          changePollMs: 0,
          createConcurrency: 4,
          cleanupConcurrency: 2,
          jobImage: 'img',
          startTimeoutMs: 5_000,
          reloadGuard: 'apply',
          // A short debounce and poll: the agent reads while kubelet is still at work.
          watch: { pollIntervalMs: 20, debounceMs: 2 },
        },
        {
          cluster: memory,
          volumes,
          cleaner: new MemoryCleaner(),
          clock: systemClock,
          logger: new MemoryLogger(),
          configSource: new DirectoryConfigSource(dir, fs),
        },
      );
      // Every config the agent applies, as it applies it.
      const applied: { hash: string; classes: number }[] = [];
      const outcomes = new Map<ReloadOutcome, number>();
      const unsubscribe = agent.subscribe((event) => {
        if (event.type !== 'reload') return;
        const { outcome } = event.result;
        outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
        if (outcome === 'applied') {
          const config = agent.appliedConfig();
          applied.push({ hash: config.hash, classes: Object.keys(config.config.storageClassMap).length });
        }
      });
      try {
        assert.equal(agent.appliedConfig().hash, whole(initial).hash);
        let swaps = 0;
        for (let burst = 1; burst <= BURSTS; burst++) {
          for (let i = 1; i <= SWAPS; i++) {
            // Consecutive swaps always change the config. The last one of a burst writes a config
            // not written before, so the agent serving it means it read after that swap.
            swaps++;
            const data = i < SWAPS ? (CONFIGS[swaps % CONFIGS.length] ?? initial) : finalOf(burst);
            await kubeletUpdate(dir, data, { removalDelayMs });
            if (random() < 0.3) await delay(Math.floor(random() * 5));
          }
          const lastHash = whole(finalOf(burst)).hash;
          await waitFor(
            () => agent.appliedConfig().hash === lastHash,
            `the config of the last swap of burst ${String(burst)} applied`,
            10_000,
          );
        }

        t.diagnostic(
          `${String(swaps)} swaps; reloads: ${[...outcomes].map(([o, n]) => `${o} ${String(n)}`).join(', ')}; ` +
            `reader: ${String(counts.reads)} reads, ${String(counts.resolves)} resolves of ..data (2 per read without a retry)`,
        );
        assert.ok(applied.length > 0, 'the agent applied something during the burst');
        const notWritten = applied
          .map((a, i) => ({ ...a, n: i + 1 }))
          .filter((a) => written.get(a.hash) !== a.classes)
          .map((a) => `#${String(a.n)} ${a.hash.slice(0, 19)} with ${String(a.classes)} classes`);
        assert.deepEqual(
          notWritten,
          [],
          `${String(notWritten.length)} of the ${String(applied.length)} configs applied are none of the configs written whole`,
        );
        for (const outcome of ['rejected', 'refused', 'rolled-back'] as const)
          assert.equal(outcomes.get(outcome) ?? 0, 0, `no reload ${outcome}`);
      } finally {
        unsubscribe();
        await agent.stop();
      }
    },
  );
});
