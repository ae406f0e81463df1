// An agent in process for tests: on the in-memory cluster and node for unit tests (node `node-a`,
// the class `fast` with its discovery directory /mnt/fast, config in a kubelet-style ConfigMap
// directory), or on this machine's real volumes for integration tests (startLinuxAgent).
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent } from '../../src/core/agent/agent.js';
import type { AgentOptions } from '../../src/core/agent/agent.js';
import { MemoryCleaner } from '../../src/core/cleanup/cleaner.js';
import type { VolumeCleaner } from '../../src/core/cleanup/cleaner.js';
import { systemClock, type Clock } from '../../src/core/clock.js';
import type { Cluster } from '../../src/core/kube/cluster.js';
import { MemoryCluster } from '../../src/core/kube/memory/memory-cluster.js';
import { MemoryLogger } from '../../src/core/log.js';
import { LinuxVolumes } from '../../src/core/node/linux-volumes.js';
import { MemoryVolumes } from '../../src/core/node/memory-volumes.js';
import { writeConfigMapVolume } from './configmap-volume.js';

export interface MemoryAgentFixture {
  readonly dir: string;
  readonly cluster: MemoryCluster;
  readonly volumes: MemoryVolumes;
  /** The Node's uid (upstream's provisioned-by annotation names it). */
  readonly nodeUid: string;
}

export async function memoryAgentFixture(prefix: string): Promise<MemoryAgentFixture> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  await writeConfigMapVolume(dir, { storageClassMap: 'fast:\n  hostDir: /mnt/fast\n  mountDir: /mnt/fast\n' });
  const cluster = new MemoryCluster();
  await cluster.storageClasses.create({ metadata: { name: 'fast' }, provisioner: 'kubernetes.io/no-provisioner' });
  const node = await cluster.nodes.create({
    metadata: { name: 'node-a', labels: { 'kubernetes.io/hostname': 'node-a' } },
  });
  const volumes = new MemoryVolumes();
  volumes.addDirectory('/mnt/fast');
  return { dir, cluster, volumes, nodeUid: node.metadata.uid ?? '' };
}

/**
 * Starts the agent on a fixture (or another cluster in front of its one). By default one pass at
 * start-up and none after: no periodic pass within a test, no change detection.
 */
export function startMemoryAgent(
  fixture: MemoryAgentFixture,
  options: Partial<AgentOptions> = {},
  cluster: Cluster = fixture.cluster,
  cleaner: VolumeCleaner = new MemoryCleaner(),
  clock: Clock = systemClock,
): Promise<Agent> {
  return Agent.start(
    {
      configPath: fixture.dir,
      nodeName: 'node-a',
      namespace: 'default',
      listenAddress: '127.0.0.1:0',
      metricsPath: '/metrics',
      discoveryPeriodMs: 3_600_000,
      changePollMs: 0,
      createConcurrency: 4,
      cleanupConcurrency: 2,
      jobImage: 'img',
      startTimeoutMs: 2000,
      ...options,
    },
    { cluster, volumes: fixture.volumes, cleaner, clock, logger: new MemoryLogger() },
  );
}

/**
 * Starts the agent in process on this machine's real volumes (LinuxVolumes) against `cluster` (the
 * real apiserver in integration tests): a pass every 200 ms and change detection every 50 ms.
 */
export function startLinuxAgent(
  cluster: Cluster,
  configPath: string,
  nodeName: string,
  options: Partial<AgentOptions> = {},
): Promise<Agent> {
  return Agent.start(
    {
      configPath,
      nodeName,
      namespace: 'default',
      listenAddress: '127.0.0.1:0',
      metricsPath: '/metrics',
      discoveryPeriodMs: 200,
      changePollMs: 50,
      createConcurrency: 8,
      cleanupConcurrency: 4,
      jobImage: undefined,
      ...options,
    },
    {
      cluster,
      volumes: new LinuxVolumes(),
      cleaner: new MemoryCleaner(),
      clock: systemClock,
      logger: new MemoryLogger(),
    },
  );
}
