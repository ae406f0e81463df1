// A first pass over many entries on the real node: until the change watch (findmnt) runs, each
// entry's identity reads the whole mount table again, so the watch starts beside a first pass over
// more than EARLY_WATCH_ENTRIES entries and the rest of the pass shares one table. With 300 bind
// mounts the first pass used to read /proc/self/mountinfo once per entry (300 reads of a table of
// 300 lines and more); here it must read it for well under half of them, and publish every entry.
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Agent } from '../../../src/core/agent/agent.js';
import { EARLY_WATCH_ENTRIES } from '../../../src/core/agent/generation.js';
import { MemoryCleaner } from '../../../src/core/cleanup/cleaner.js';
import { systemClock } from '../../../src/core/clock.js';
import { isNotFound } from '../../../src/core/kube/cluster.js';
import { loadKubeconfig } from '../../../src/core/kube/kubeconfig.js';
import { RestCluster } from '../../../src/core/kube/rest-cluster.js';
import { MemoryLogger } from '../../../src/core/log.js';
import { LinuxVolumes } from '../../../src/core/node/linux-volumes.js';
import { NODE_LABEL } from '../../../src/core/pv/naming.js';
import { eventually } from '../../support/eventually.js';
import { bindMount, Cleanup, makeTempDir, mountTmpfs, skipUnlessRoot } from '../../support/real-node.js';
import { requireTestControlPlane } from '../../support/test-cluster.js';

const ENTRIES = 300;
const suffix = Math.random().toString(36).slice(2, 8);
const NODE = `many-${suffix}`;
const CLASS = `many-${suffix}-fast`;

describe('a first pass over many entries on a real node', { skip: skipUnlessRoot() }, () => {
  const cleanup = new Cleanup();
  let cluster: RestCluster;
  let root = '';

  before(async () => {
    assert.ok(ENTRIES > 2 * EARLY_WATCH_ENTRIES);
    const plane = requireTestControlPlane();
    cluster = new RestCluster({ connection: await loadKubeconfig(plane.kubeconfigPath) });
    await cluster.nodes.create({ metadata: { name: NODE, labels: { 'kubernetes.io/hostname': NODE } } });
    await cluster.storageClasses.create({ metadata: { name: CLASS }, provisioner: 'kubernetes.io/no-provisioner' });
    root = makeTempDir(cleanup, 'lvp-many-');
    const source = join(root, 'source');
    mountTmpfs(cleanup, source, 4 * 2 ** 20);
    for (let i = 0; i < ENTRIES; i++) {
      mkdirSync(join(source, `d${String(i)}`));
      bindMount(cleanup, join(source, `d${String(i)}`), join(root, 'fast', `d${String(i)}`));
    }
    mkdirSync(join(root, 'config'));
    writeFileSync(
      join(root, 'config', 'storageClassMap'),
      `${CLASS}:\n  hostDir: ${join(root, 'fast')}\n  mountDir: ${join(root, 'fast')}\n`,
    );
  });

  after(async () => {
    try {
      const all = await cluster.persistentVolumes.list({ labelSelector: `${NODE_LABEL}=${NODE}` });
      for (const pv of all.items)
        await cluster.persistentVolumes.delete(pv.metadata.name).catch((err: unknown) => {
          if (!isNotFound(err)) throw err;
        });
      await cluster.storageClasses.delete(CLASS).catch(() => undefined);
      await cluster.nodes.delete(NODE).catch(() => undefined);
    } finally {
      cluster.close();
      cleanup.run();
    }
  });

  it(`reads the mount table for well under half of its ${String(ENTRIES)} entries, and publishes them all`, async () => {
    let reads = 0;
    const volumes = new LinuxVolumes({
      readMountTable: (path) => {
        reads += 1;
        return readFileSync(path, 'utf8');
      },
    });
    const agent = await Agent.start(
      {
        configPath: join(root, 'config'),
        nodeName: NODE,
        namespace: 'default',
        listenAddress: '127.0.0.1:0',
        metricsPath: '/metrics',
        discoveryPeriodMs: 3_600_000,
        changePollMs: 50,
        createConcurrency: 8,
        cleanupConcurrency: 2,
        jobImage: undefined,
      },
      { cluster, volumes, cleaner: new MemoryCleaner(), clock: systemClock, logger: new MemoryLogger() },
    );
    try {
      await agent.generation.whenReady;
      const firstPass = reads;
      assert.ok(firstPass < ENTRIES / 2, `${String(firstPass)} mount table reads in the first pass`);
      await eventually(
        async () => {
          const listed = await cluster.persistentVolumes.list({ labelSelector: `${NODE_LABEL}=${NODE}` });
          return listed.items.length === ENTRIES ? true : undefined;
        },
        `${String(ENTRIES)} PVs`,
      );
    } finally {
      await agent.stop();
    }
  });
});
