import { Flags } from '@oclif/core';
import { defaultConfigDir, ProvisionerCommand, useColor } from '../cli/base-command.js';
import { ConfigSourceError, formatIssue, ProvisionerError, UsageError } from '../core/errors.js';
import type { AgentConfigSide } from '../core/config/compare.js';
import { IMPACT_CLASSES } from '../core/config/effects.js';
import type { ImpactClass } from '../core/config/effects.js';
import { adminSocketFlag, colorFlag, NODE_CONFIG_HELP, outputFlag } from './flags.js';

/** How long diff-config waits for the running agent's config before giving up. */
const AGENT_TIMEOUT_MS = 5000;

/** --fail-on vocabulary: short aliases and the impact class names themselves. */
const FAIL_ON: Readonly<Record<string, readonly ImpactClass[]>> = {
  any: IMPACT_CLASSES,
  orphans: ['orphans-pvs'],
  ownership: ['ownership-change'],
  pod: ['needs-pod-change'],
  cleanup: ['next-cleanup'],
  'new-pvs': ['new-pvs-only'],
  devices: ['claims-devices'],
  'orphans-pvs': ['orphans-pvs'],
  'ownership-change': ['ownership-change'],
  'needs-pod-change': ['needs-pod-change'],
  'next-cleanup': ['next-cleanup'],
  'new-pvs-only': ['new-pvs-only'],
  'claims-devices': ['claims-devices'],
};

export default class DiffConfig extends ProvisionerCommand {
  static override summary = 'Show what changes between two provisioner configs and what each change does to PVs.';

  static override description = `Each side is a mounted ConfigMap directory (kubelet's ..data layout), a YAML file of config keys, or a ConfigMap manifest. Without --from, the current config is the one the agent running on this node applies (asked through --admin-socket); when no agent answers there, it is ${NODE_CONFIG_HELP}. Both are normalized (defaults filled in, keys sorted) before comparing, so formatting and layout never show up as changes.

Exit codes: 0 no differences, 1 differences (with --fail-on: a change of a listed impact class), 2 usage error, 3 invalid config, 4 config source unreadable.`;

  static override examples = [
    '<%= config.bin %> <%= command.id %> --to new-configmap.yaml',
    '<%= config.bin %> <%= command.id %> --from /etc/provisioner/config --to ./config-dir -o json',
    '<%= config.bin %> <%= command.id %> --from old.yaml --to new.yaml --fail-on orphans,ownership',
  ];

  static override flags = {
    from: Flags.string({
      description: `The current config (directory, YAML file or ConfigMap manifest). Default: the running agent's applied config, else ${NODE_CONFIG_HELP}.`,
    }),
    'admin-socket': adminSocketFlag(
      'Admin socket of the running agent, asked for the current config when --from is not given.',
    ),
    to: Flags.string({
      description: 'The candidate config (directory, YAML file or ConfigMap manifest).',
      required: true,
    }),
    output: outputFlag(),
    'fail-on': Flags.string({
      description: `Exit 1 only when a change of these impact classes exists (comma-separated): ${Object.keys(FAIL_ON).join(', ')}.`,
      multiple: true,
      delimiter: ',',
      options: Object.keys(FAIL_ON),
    }),
    context: Flags.integer({ char: 'C', description: 'Lines of context in the unified diff.', default: 3, min: 0 }),
    color: colorFlag(),
  };

  async run(): Promise<void> {
    const { flags } = await this.parse(DiffConfig);
    this.machineOutput = flags.output === 'json';
    // An empty path would be reported as ": no such file or directory", naming nothing.
    for (const [flag, what] of [
      ['to', 'a config directory, YAML file or ConfigMap manifest'],
      ['from', 'a config directory, YAML file or ConfigMap manifest'],
      ['admin-socket', "the path of the agent's admin socket"],
    ] as const) {
      if (flags[flag] === '') throw new UsageError(`--${flag}: must not be empty; give ${what}`);
    }
    const { compareConfigs } = await import('../core/config/compare.js');
    const render = await import('../render/diff-config.js');
    const fallback = defaultConfigDir();
    const from = flags.from ?? (await this.runningAgentConfig(flags['admin-socket'], fallback));
    const comparison = await compareConfigs({
      from,
      to: flags.to,
      failOn: (flags['fail-on'] ?? []).flatMap((name) => FAIL_ON[name] ?? []),
      context: flags.context,
    }).catch((err: unknown) => {
      if (flags.from === undefined && err instanceof ConfigSourceError && err.source === fallback) {
        throw new ConfigSourceError(
          err.source,
          `${err.message} (and no agent answered on ${flags['admin-socket']}); pass --from`,
        );
      }
      throw err;
    });
    if (this.machineOutput) {
      this.writeOut(JSON.stringify(render.toDiffConfigJson(comparison), null, 2));
    } else {
      for (const w of comparison.warnings) this.writeErr(`warning: ${formatIssue(w)}`);
      this.writeOut(render.renderDiffConfigText(comparison, { color: useColor(flags.color) }));
    }
    const code = render.diffConfigExitCode(comparison);
    if (code !== 0) await this.exitDrained(code);
  }

  /** The running agent's applied config, or the default path when no agent answers on the socket. */
  private async runningAgentConfig(socketPath: string, fallback: string): Promise<AgentConfigSide | string> {
    const { AdminClient, AgentUnreachableError } = await import('../core/agent/admin-client.js');
    try {
      const applied = await new AdminClient(socketPath, { timeoutMs: AGENT_TIMEOUT_MS }).config();
      return { kind: 'agent', path: socketPath, hash: applied.hash, config: applied.config };
    } catch (err) {
      if (err instanceof AgentUnreachableError) {
        // A missing socket is the normal case off a node; say so only when an agent may be there.
        if (err.reason !== 'missing' && !this.machineOutput) {
          this.writeErr(`note: no agent answered on ${socketPath} (${err.detail}); comparing ${fallback}`);
        }
        return fallback;
      }
      if (err instanceof ProvisionerError) {
        throw new ConfigSourceError(
          socketPath,
          `cannot read the running agent's config: ${err.message}; pass --from to compare a file instead`,
        );
      }
      throw err;
    }
  }
}
