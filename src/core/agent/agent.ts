// The process-level agent (supervisor): owns what outlives a sync-loop generation — the HTTP
// server, the metrics registry, the event recorder — and the current generation.
import type { Clock } from '../clock.js';
import { loadConfig } from '../config/source.js';
import type { LoadedConfig } from '../config/source.js';
import { StartupError } from '../errors.js';
import type { Cluster } from '../kube/cluster.js';
import { EventRecorder } from '../kube/events.js';
import type { Node } from '../kube/objects.js';
import type { Logger } from '../log.js';
import { createAgentMetrics } from '../metrics/agent-metrics.js';
import type { AgentMetrics } from '../metrics/agent-metrics.js';
import type { NodeVolumes } from '../node/volumes.js';
import type { VolumeCleaner } from '../cleanup/cleaner.js';
import { CleanupTable } from '../cleanup/table.js';
import { reportCleanupFailures } from '../cleanup/reclaim.js';
import type { BackoffPolicy } from '../cleanup/table.js';
import { provisionerName } from '../pv/naming.js';
import type { NodeIdentity } from '../pv/naming.js';
import { adoptNodeVolumes } from './adoption.js';
import { Generation, nodeIdentity } from './generation.js';
import type { GenerationStatus } from './generation.js';
import { startHttpServer } from './http.js';
import type { RunningHttpServer } from './http.js';

export interface AgentOptions {
  readonly configPath: string;
  readonly nodeName: string;
  readonly namespace: string;
  readonly listenAddress: string;
  readonly metricsPath: string;
  readonly discoveryPeriodMs: number;
  readonly changePollMs: number;
  readonly createConcurrency: number;
  /** In-process cleanups running at once. */
  readonly cleanupConcurrency: number;
  /** JOB_CONTAINER_IMAGE: the image of cleanup Jobs. */
  readonly jobImage: string | undefined;
  readonly cleanupBackoff?: BackoffPolicy;
}

export interface AgentDeps {
  readonly cluster: Cluster;
  readonly volumes: NodeVolumes;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly cleaner: VolumeCleaner;
  readonly metrics?: AgentMetrics;
  readonly loadConfig?: (path: string) => Promise<LoadedConfig>;
}

export interface AgentStatus {
  readonly node: string;
  readonly startedAt: number;
  readonly config: { readonly hash: string; readonly source: string };
  readonly generation: GenerationStatus;
  readonly adopted: number;
  readonly httpPort: number;
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

async function fetchNode(deps: AgentDeps, name: string): Promise<Node> {
  let last: unknown;
  for (let attempt = 1; attempt <= 3; attempt++) {
    try {
      return await deps.cluster.nodes.get(name);
    } catch (err) {
      last = err;
      deps.logger.log('warn', 'could not get the Node', { node: name, attempt, error: message(err) });
      if (attempt < 3) await deps.clock.sleep(1000);
    }
  }
  throw new StartupError(`cannot get Node ${name}: ${message(last)}`);
}

export class Agent {
  private generationCounter = 0;

  private constructor(
    private readonly options: AgentOptions,
    private readonly deps: AgentDeps & { readonly metrics: AgentMetrics },
    private readonly loaded: LoadedConfig,
    readonly node: NodeIdentity,
    private readonly http: RunningHttpServer,
    private readonly events: EventRecorder,
    readonly cleanups: CleanupTable,
    private current: Generation,
    private readonly adopted: number,
    private readonly startedAt: number,
  ) {}

  static async start(options: AgentOptions, inputDeps: AgentDeps): Promise<Agent> {
    const deps = { ...inputDeps, metrics: inputDeps.metrics ?? createAgentMetrics() };
    const loaded = await (deps.loadConfig ?? loadConfig)(options.configPath);
    for (const w of loaded.warnings) deps.logger.log('warn', 'config warning', { path: w.path, detail: w.message });
    const nodeObject = await fetchNode(deps, options.nodeName);
    const node = nodeIdentity(nodeObject);
    if (nodeObject.metadata.labels?.['kubernetes.io/hostname'] === undefined) {
      deps.logger.log('warn', 'the Node has no kubernetes.io/hostname label; PV node affinity uses the node name', {
        node: node.name,
      });
    }
    const adoption = await adoptNodeVolumes(deps, node);
    const events = new EventRecorder({
      cluster: deps.cluster,
      clock: deps.clock,
      logger: deps.logger,
      component: provisionerName(node, loaded.config.useNodeNameOnly),
      host: node.name,
    });
    const holder: { agent?: Agent } = {};
    let http: RunningHttpServer;
    try {
      http = await startHttpServer({
        listenAddress: options.listenAddress,
        metricsPath: options.metricsPath,
        metrics: () => deps.metrics.registry.render(),
        live: () => ({ ok: true, reason: '' }),
        ready: () => holder.agent?.readiness() ?? { ok: false, reason: 'starting' },
      });
    } catch (err) {
      throw new StartupError(`cannot listen on ${options.listenAddress}: ${message(err)}`);
    }
    const reportFailures = reportCleanupFailures({ events, metrics: deps.metrics });
    // Process-level: survives every reload; a finished cleanup wakes the current generation.
    const cleanups = new CleanupTable({
      cleaner: deps.cleaner,
      clock: deps.clock,
      logger: deps.logger,
      concurrency: options.cleanupConcurrency,
      ...(options.cleanupBackoff ? { backoff: options.cleanupBackoff } : {}),
      onChange: (entry) => {
        reportFailures(entry);
        if (entry.state === 'succeeded' || entry.state === 'failed') holder.agent?.current.trigger();
      },
    });
    deps.metrics.cleanupStats = () => ({
      running: cleanups.count('running'),
      succeeded: cleanups.succeededTotal,
      failed: cleanups.failedTotal,
    });
    const generation = new Generation(
      1,
      loaded.config,
      loaded.hash,
      node,
      { ...deps, events, table: cleanups },
      {
        discoveryPeriodMs: options.discoveryPeriodMs,
        changePollMs: options.changePollMs,
        createConcurrency: options.createConcurrency,
        namespace: options.namespace,
        jobImage: options.jobImage,
      },
    );
    const agent = new Agent(
      options,
      deps,
      loaded,
      node,
      http,
      events,
      cleanups,
      generation,
      adoption.adopted.length,
      deps.clock.now(),
    );
    holder.agent = agent;
    agent.generationCounter = 1;
    generation.start();
    deps.logger.log('info', 'agent started', {
      node: node.name,
      config: loaded.hash,
      classes: Object.keys(loaded.config.storageClassMap).length,
      listen: `${http.host}:${http.port}`,
      adoptionScan: { scanned: adoption.scanned, pages: adoption.pages, adopted: adoption.adopted.length },
    });
    return agent;
  }

  get generation(): Generation {
    return this.current;
  }

  get httpPort(): number {
    return this.http.port;
  }

  readiness(): { ok: boolean; reason: string } {
    const s = this.current.status();
    if (!s.synced) return { ok: false, reason: 'caches not synced' };
    if (!s.ready) return { ok: false, reason: 'first discovery pass not done' };
    return { ok: true, reason: '' };
  }

  status(): AgentStatus {
    return {
      node: this.node.name,
      startedAt: this.startedAt,
      config: { hash: this.loaded.hash, source: this.options.configPath },
      generation: this.current.status(),
      adopted: this.adopted,
      httpPort: this.http.port,
    };
  }

  async stop(): Promise<void> {
    await this.current.stop();
    await this.cleanups.stop();
    await this.events.flush();
    await this.http.close();
    this.deps.logger.log('info', 'agent stopped', { generations: this.generationCounter });
  }
}
