import { Flags } from '@oclif/core';
import { ProvisionerCommand } from '../cli/base-command.js';
import { ALLOW_NAMES } from '../core/config/reload-guard.js';
import { adminSocketFlag, outputFlag } from './flags.js';

export default class Reload extends ProvisionerCommand {
  static override summary = 'Make the running agent reload its config now, and print the outcome.';

  static override description = `Asks the agent on this node (\`provisioner run\`) through its admin socket to read its config source and apply it, and waits until the reload finished. The agent also reloads by itself when the ConfigMap changes; use this to apply a change at once, or with --force to restart its sync loop on an unchanged config.

A change that would orphan existing PVs or change their ownership is refused by the reload guard (docs/reload.md) unless --allow names its impact class; a restart of the agent also applies it.

Exit codes: 0 applied or no change, 1 not applied (rejected, refused, rolled back or failed: the previous config keeps serving), 2 no agent reachable (or a usage error), 3 the agent did not answer within --timeout.`;

  static override examples = [
    '<%= config.bin %> <%= command.id %>',
    '<%= config.bin %> <%= command.id %> --force -o json',
    '<%= config.bin %> <%= command.id %> --allow orphans-pvs',
    'kubectl -n kube-system exec ds/local-volume-provisioner -- provisioner <%= command.id %>',
  ];

  static override flags = {
    'admin-socket': adminSocketFlag(),
    allow: Flags.string({
      description: `Apply changes of these guarded impact classes (comma-separated), which a live reload otherwise refuses: ${Object.keys(ALLOW_NAMES).join(', ')}.`,
      multiple: true,
      delimiter: ',',
      options: Object.keys(ALLOW_NAMES),
    }),
    force: Flags.boolean({
      description: 'Restart the sync loop even when the config is unchanged.',
      default: false,
    }),
    output: outputFlag(),
    timeout: Flags.string({
      description: 'Longest wait for the reload to finish (Go duration).',
      default: '30s',
    }),
  };

  async run(): Promise<void> {
    const { flags } = await this.parse(Reload);
    this.machineOutput = flags.output === 'json';
    const { durationFlagMs } = await import('../cli/duration-flag.js');
    const timeoutMs = durationFlagMs('timeout', flags.timeout, '1ms');
    const { AdminClient } = await import('../core/agent/admin-client.js');
    const render = await import('../render/reload.js');
    const client = new AdminClient(flags['admin-socket'], { timeoutMs });
    const allow = [...new Set((flags.allow ?? []).flatMap((name) => ALLOW_NAMES[name] ?? []))];
    const result = await client.reload({ force: flags.force, allow });
    this.writeOut(
      this.machineOutput ? JSON.stringify(render.toReloadJson(result), null, 2) : render.renderReloadText(result),
    );
    const code = render.reloadExitCode(result);
    if (code !== 0) await this.exitDrained(code);
  }
}
