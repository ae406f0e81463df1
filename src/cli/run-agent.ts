// Assembles the real dependency bag for `provisioner run` (the one place that does), starts the
// agent and keeps the process alive until a shutdown signal, then stops it within a deadline.
import { LinuxBlockDevices } from '../core/node/block-devices.js';
import { fsDiscoveryLinks } from '../core/node/discovery-links.js';
import { linuxDeviceCarver } from '../core/node/carve.js';
import { blankOnFreshRead } from '../core/disk-rules/service.js';
import { Agent } from '../core/agent/agent.js';
import type { AgentDeps, AgentOptions } from '../core/agent/agent.js';
import { ProcessCleaner } from '../core/cleanup/cleaner.js';
import { systemClock, within } from '../core/clock.js';
import type { Cluster, LeaseCluster } from '../core/kube/cluster.js';
import { LinuxVolumes } from '../core/node/linux-volumes.js';
import type { NodeVolumes } from '../core/node/volumes.js';
import { nodeProcessHost } from '../core/process-host.js';
import type { Sandbox } from '../core/sandbox/sandbox.js';
import { stopWithin, untilStopSignal } from './lifecycle.js';
import { connectCluster, type ClusterProcessOptions, type Product } from './cluster-connection.js';
import { StderrLogger } from './logger.js';

export interface RunAgentProcessOptions extends ClusterProcessOptions {
  readonly agent: AgentOptions;
  /** Named in the User-Agent and field manager of every API request. */
  readonly product: Product;
  /** `--sandbox DIR`: in-memory cluster, config and disks under DIR. */
  readonly sandbox: string | undefined;
  /** Whether --config-dir was chosen by the user (else the sandbox's config is DIR/config). */
  readonly configPathExplicit: boolean;
  /** Whether --admin-socket was chosen by the user (else the sandbox puts it under DIR). */
  readonly adminSocketExplicit: boolean;
  /** The process environment, passed on to cleaner commands. */
  readonly environment: Readonly<Record<string, string | undefined>>;
  /** Publish the applied state as a Lease `<name>-<node>` in the agent's namespace; undefined: off. */
  readonly statusLease: { readonly name: string; readonly heartbeatMs: number } | undefined;
}

/** Disks by rule on the real node: its block devices, the link writer, and the carver. */
function realNodeDevices(): NonNullable<AgentDeps['devices']> {
  const inventory = new LinuxBlockDevices();
  return {
    inventory,
    links: fsDiscoveryLinks,
    carver: linuxDeviceCarver({ expectBlank: blankOnFreshRead(inventory) }),
  };
}

export async function runAgentProcess(options: RunAgentProcessOptions): Promise<void> {
  const logger = new StderrLogger(options.logLevel, options.logFormat);
  let agentOptions = options.agent;
  let cluster: Cluster & LeaseCluster;
  let close = (): void => undefined;
  let volumes: NodeVolumes = new LinuxVolumes();
  const holder: { agent?: Agent } = {};
  let sandbox: Sandbox | undefined;
  if (options.sandbox !== undefined) {
    // Loaded only here: the in-memory cluster is not part of a real agent's memory and start-up.
    const { openSandbox } = await import('../core/sandbox/sandbox.js');
    sandbox = await openSandbox({
      dir: options.sandbox,
      configPath: options.configPathExplicit ? options.agent.configPath : undefined,
      adminSocket: options.adminSocketExplicit ? options.agent.adminSocket : undefined,
      nodeName: options.agent.nodeName,
      node: volumes,
    });
    cluster = sandbox.cluster;
    volumes = sandbox.volumes;
    agentOptions = { ...agentOptions, ...sandbox.agentOptions };
    logger.log('info', 'sandbox: in-memory cluster, edit the config and add volumes as directories', {
      config: sandbox.layout.configDir,
      disks: sandbox.layout.disksDir,
      adminSocket: agentOptions.adminSocket,
    });
  } else {
    const rest = await connectCluster({
      product: options.product,
      kubeconfig: options.kubeconfig,
      inCluster: options.inCluster,
      qps: options.qps,
      burst: options.burst,
      clock: systemClock,
    });
    cluster = rest;
    close = () => {
      rest.close();
    };
  }
  // Signals are handled from before start-up, so a SIGTERM while starting still stops cleanly.
  const { stopped, uninstall } = untilStopSignal(() => {
    void holder.agent?.reload({ trigger: 'signal' });
  });
  try {
    const agent = await Agent.start(agentOptions, {
      cluster,
      volumes,
      // disks by rule: the real node's block devices (a sandbox has directories only: no rules run there)
      ...(sandbox === undefined ? { devices: realNodeDevices() } : {}),
      cleaner: new ProcessCleaner(options.environment, { host: nodeProcessHost }),
      clock: systemClock,
      logger,
      host: nodeProcessHost,
    });
    holder.agent = agent;
    sandbox?.attach(agent);
    const publishing =
      options.statusLease === undefined
        ? undefined
        : await startStatePublisher(agent, cluster, agentOptions, options.statusLease, logger);
    const signal = await stopped;
    logger.log('info', 'stopping', { signal });
    // A write in flight to an unreachable API must not hold up the stop: its request would time out only after 30 s.
    if (publishing !== undefined) await within(systemClock, publishing.stop(), 2000);
    await stopWithin(agent.stop(), options.shutdownTimeoutMs, logger);
  } finally {
    uninstall();
    close();
  }
}

async function startStatePublisher(
  agent: Agent,
  cluster: LeaseCluster,
  agentOptions: AgentOptions,
  lease: { readonly name: string; readonly heartbeatMs: number },
  logger: StderrLogger,
): Promise<{ stop(): Promise<void> }> {
  const { publishAgentState } = await import('../core/fleet/agent-state.js');
  const { statusLeaseName } = await import('../core/fleet/applied-state.js');
  const target = {
    name: statusLeaseName(lease.name, agentOptions.nodeName),
    namespace: agentOptions.namespace,
    instance: lease.name,
  };
  logger.log('info', 'publishing the applied state', { lease: `${target.namespace}/${target.name}` });
  return publishAgentState(agent, {
    leases: cluster.leases,
    target,
    clock: systemClock,
    logger,
    heartbeatMs: lease.heartbeatMs,
  });
}
