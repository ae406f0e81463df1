import { Flags } from '@oclif/core';
import type { Interfaces } from '@oclif/core';
import { defaultConfigDir, ProvisionerCommand, useColor } from '../cli/base-command.js';
import { formatIssue, UsageError } from '../core/errors.js';
import type { PlanOptions } from '../core/simulate/plan.js';
import { colorFlag, kubeconfigFlag, NODE_CONFIG_HELP, outputFlag } from './flags.js';

export default class Simulate extends ProvisionerCommand {
  static override summary = 'Show what the agent would do on a node, before it does it; replay scenarios.';

  static override description = `Plan mode (the default) runs one pass of a freshly started agent — the same adoption, reclaim and discovery code as \`run\` — against this node (read-only) or a node-facts fixture, and the cluster (read-only, through --kubeconfig) or a cluster fixture. It prints the PVs it would create, the cleanups and deletions of Released PVs, the entries it would skip and why, and the orphaned PVs; with device rules in the config, each block device a rule selects and its verdict (linked, planned, skipped and why), the links it would make being seen by the discovery of the same pass. Nothing is ever written: every API call goes through a read-only wrapper that refuses writes, and no cleaner is ever run; on a live node, the links device rules would make are recorded, never created. With --from, it also shows what a reload from that config to --config would change on this node.

Scenario mode (--scenario FILE, or --demo for a built-in story) replays a timeline of events — disks added and removed, block devices arriving and going, claims bound and released, config changes, cleanups that fail or are slow, Jobs that finish, agent restarts, time passing — against the real agent on an in-memory cluster and node with a virtual clock, and checks the expectations written after each step. A scenario with a stagedRollout block rehearses a staged config rollout across a fleet: the real rollout controller, the real agent on one node and stand-in agents on the others (the canary, the waves, a halt and its revert, pause, resume, abort, promote).

Exit codes: 0 plan printed / every expectation passed, 1 an expectation failed, 2 usage error, 3 invalid config, fixture or scenario (file, step and field are named), 4 a config or input file cannot be read, 5 the cluster cannot be read or the Node does not exist.`;

  static override examples = [
    '<%= config.bin %> <%= command.id %> --demo',
    '<%= config.bin %> <%= command.id %> --scenario docs/scenarios/cleanup-in-process-to-job.yaml',
    '<%= config.bin %> <%= command.id %> --scenario docs/scenarios/staged-rollout-halted-canary.yaml',
    '<%= config.bin %> <%= command.id %> --config new-configmap.yaml --node-facts node.yaml --cluster cluster.yaml',
    '<%= config.bin %> <%= command.id %> --config ./new --from /etc/provisioner/config --node node-a --kubeconfig ~/.kube/config -o yaml',
  ];

  static override flags = {
    config: Flags.string({
      description: `The config to plan with (ConfigMap directory, YAML file or manifest). Default: ${NODE_CONFIG_HELP}.`,
    }),
    from: Flags.string({
      description: 'The config applied now: also show what a reload from it to --config changes on this node.',
    }),
    node: Flags.string({
      description: 'The node to plan for (default: MY_NODE_NAME, or the only Node of a cluster fixture).',
    }),
    'node-facts': Flags.string({
      description: 'Node facts: "live" (this machine, read-only) or a fixture YAML file.',
      default: 'live',
    }),
    cluster: Flags.string({ description: 'Cluster state from a fixture YAML file instead of a live cluster.' }),
    kubeconfig: kubeconfigFlag(
      'Kubeconfig of the live cluster, read-only (default: ~/.kube/config, else the in-cluster service account).',
    ),
    namespace: Flags.string({ description: 'Namespace of cleanup Jobs (default: MY_NAMESPACE, else "default").' }),
    'job-image': Flags.string({ description: 'Image of cleanup Jobs (default: JOB_CONTAINER_IMAGE).' }),
    scenario: Flags.string({ description: 'Replay a scenario file instead of planning.', exclusive: ['demo'] }),
    demo: Flags.boolean({ description: 'Replay the built-in demo scenario (no cluster, no root).', default: false }),
    output: outputFlag(['text', 'json', 'yaml']),
    color: colorFlag(),
  };

  async run(): Promise<void> {
    const { flags } = await this.parse(Simulate);
    this.machineOutput = flags.output === 'json';
    const render = await import('../render/simulate.js');
    const output = { render, color: flags.output === 'text' && useColor(flags.color) };
    if (flags.demo || flags.scenario !== undefined) await this.replay(flags, output);
    else await this.plan(flags, output);
  }

  /** Scenario mode: the replay's report; exit 1 when an expectation failed. */
  private async replay(flags: SimulateFlags, { render, color }: Output): Promise<void> {
    rejectPlanFlags(flags);
    const { runScenario } = await import('../core/simulate/run.js');
    const scenario = flags.demo
      ? (await import('../core/simulate/demo.js')).demoScenario()
      : await (await import('../core/simulate/scenario.js')).loadScenario(flags.scenario ?? '');
    const report = await runScenario(scenario);
    if (flags.output === 'text') this.writeOut(render.renderScenarioText(report, { color }));
    else {
      const json = render.toScenarioJson(report);
      this.writeOut(flags.output === 'json' ? JSON.stringify(json, null, 2) : render.toYaml(json));
    }
    const code = render.scenarioExitCode(report);
    if (code !== 0) await this.exitDrained(code);
  }

  /** Plan mode: the plan of one pass (and of a reload with --from), its warnings on stderr. */
  private async plan(flags: SimulateFlags, { render, color }: Output): Promise<void> {
    const { simulatePlan } = await import('../core/simulate/plan.js');
    const nodeName = await planNodeName(flags);
    const { cluster, close } = await this.planCluster(flags);
    try {
      const plan = await simulatePlan(planOptions(flags, nodeName, cluster));
      if (flags.output === 'text') {
        for (const w of plan.warnings) this.writeErr(`warning: ${formatIssue(w)}`);
        this.writeOut(render.renderPlanText(plan, { color }));
      } else {
        const json = render.toPlanJson(plan);
        this.writeOut(flags.output === 'json' ? JSON.stringify(json, null, 2) : render.toYaml(json));
      }
    } finally {
      close();
    }
  }

  /** The cluster to plan against: a fixture, or the live one (read only) with how to close it. */
  private async planCluster(
    flags: SimulateFlags,
  ): Promise<{ readonly cluster: PlanOptions['cluster']; readonly close: () => void }> {
    if (flags.cluster !== undefined)
      return { cluster: { kind: 'fixture', path: flags.cluster }, close: () => undefined };
    const { commandKubeconfig, connectCommandCluster } = await import('../cli/cluster-connection.js');
    const kubeconfig = commandKubeconfig(flags.kubeconfig);
    const rest = await connectCommandCluster(kubeconfig, {
      name: this.config.name,
      version: this.config.version,
    });
    return {
      cluster: {
        kind: 'live',
        cluster: rest,
        description: kubeconfig !== undefined ? `kubeconfig ${kubeconfig}` : 'in-cluster',
      },
      close: () => {
        rest.close();
      },
    };
  }
}

type SimulateFlags = Interfaces.InferredFlags<typeof Simulate.flags>;

/** Where the chosen output's words come from (loaded once the flags are read). */
interface Output {
  readonly render: typeof import('../render/simulate.js');
  readonly color: boolean;
}

/** A replay takes none of the flags of a plan. */
function rejectPlanFlags(flags: SimulateFlags): void {
  const planFlags = ['config', 'from', 'node', 'cluster'] as const;
  const extra = planFlags.filter((f) => flags[f] !== undefined);
  if (extra.length > 0 || flags['node-facts'] !== 'live')
    throw new UsageError(
      `${flags.demo ? '--demo' : '--scenario'} replays a scenario; these flags only apply to plans: ${[...extra, ...(flags['node-facts'] !== 'live' ? ['node-facts'] : [])].map((f) => `--${f}`).join(', ')}`,
    );
}

/** The node to plan for (--node, else MY_NODE_NAME), checked when given. */
async function planNodeName(flags: SimulateFlags): Promise<string | undefined> {
  const nodeName = flags.node ?? process.env['MY_NODE_NAME'];
  // An empty MY_NODE_NAME counts as unset (as in `run`); an empty --node is a mistake.
  if (flags.node !== undefined || (nodeName !== undefined && nodeName !== '')) {
    const { nodeNameProblem } = await import('../core/kube/validation.js');
    const problem = nodeNameProblem(nodeName ?? '');
    if (problem !== undefined)
      throw new UsageError(`${flags.node !== undefined ? '--node' : 'MY_NODE_NAME'}: ${problem}`);
  }
  return nodeName;
}

/** The plan's options from the flags and the agent's environment (MY_NAMESPACE, JOB_CONTAINER_IMAGE). */
function planOptions(flags: SimulateFlags, nodeName: string | undefined, cluster: PlanOptions['cluster']): PlanOptions {
  const jobImage = flags['job-image'] ?? process.env['JOB_CONTAINER_IMAGE'];
  return {
    config: flags.config ?? defaultConfigDir(),
    ...(flags.from !== undefined ? { from: flags.from } : {}),
    ...(nodeName !== undefined && nodeName !== '' ? { nodeName } : {}),
    nodeFacts: flags['node-facts'] === 'live' ? { kind: 'live' } : { kind: 'fixture', path: flags['node-facts'] },
    cluster,
    namespace: flags.namespace ?? process.env['MY_NAMESPACE'] ?? 'default',
    jobImage: jobImage === '' ? undefined : jobImage,
  };
}
