import { Flags } from '@oclif/core';
import { ProvisionerCommand, useColor } from '../cli/base-command.js';
import { formatIssue } from '../core/errors.js';
import type { ImpactClass } from '../core/config/effects.js';

/** --fail-on vocabulary: short aliases and the impact class names themselves. */
const FAIL_ON: Readonly<Record<string, readonly ImpactClass[]>> = {
  any: ['none', 'new-pvs-only', 'next-cleanup', 'needs-pod-change', 'orphans-pvs', 'ownership-change'],
  orphans: ['orphans-pvs'],
  ownership: ['ownership-change'],
  pod: ['needs-pod-change'],
  cleanup: ['next-cleanup'],
  'new-pvs': ['new-pvs-only'],
  'orphans-pvs': ['orphans-pvs'],
  'ownership-change': ['ownership-change'],
  'needs-pod-change': ['needs-pod-change'],
  'next-cleanup': ['next-cleanup'],
  'new-pvs-only': ['new-pvs-only'],
};

export default class DiffConfig extends ProvisionerCommand {
  static override summary = 'Show what changes between two provisioner configs and what each change does to PVs.';

  static override description = `Each side is a mounted ConfigMap directory (kubelet's ..data layout), a YAML file of config keys, or a ConfigMap manifest. Both are normalized (defaults filled in, keys sorted) before comparing, so formatting and layout never show up as changes.

Exit codes: 0 no differences, 1 differences (with --fail-on: a change of a listed impact class), 2 usage error, 3 invalid config, 4 config source unreadable.`;

  static override examples = [
    '<%= config.bin %> <%= command.id %> --to new-configmap.yaml',
    '<%= config.bin %> <%= command.id %> --from /etc/provisioner/config --to ./config-dir -o json',
    '<%= config.bin %> <%= command.id %> --from old.yaml --to new.yaml --fail-on orphans,ownership',
  ];

  static override flags = {
    from: Flags.string({
      description: 'The current config (directory, YAML file or ConfigMap manifest).',
      default: '/etc/provisioner/config',
    }),
    to: Flags.string({
      description: 'The candidate config (directory, YAML file or ConfigMap manifest).',
      required: true,
    }),
    output: Flags.string({ char: 'o', description: 'Output format.', options: ['text', 'json'], default: 'text' }),
    'fail-on': Flags.string({
      description: `Exit 1 only when a change of these impact classes exists (comma-separated): ${Object.keys(FAIL_ON).join(', ')}.`,
      multiple: true,
      delimiter: ',',
      options: Object.keys(FAIL_ON),
    }),
    context: Flags.integer({ char: 'C', description: 'Lines of context in the unified diff.', default: 3, min: 0 }),
    color: Flags.boolean({
      description: 'Colour the output (default: only on a terminal, and not with NO_COLOR).',
      allowNo: true,
    }),
  };

  async run(): Promise<void> {
    const { flags } = await this.parse(DiffConfig);
    this.machineOutput = flags.output === 'json';
    const { compareConfigs } = await import('../core/config/compare.js');
    const render = await import('../render/diff-config.js');
    const comparison = await compareConfigs({
      from: flags.from,
      to: flags.to,
      failOn: (flags['fail-on'] ?? []).flatMap((name) => FAIL_ON[name] ?? []),
      context: flags.context,
    });
    if (this.machineOutput) {
      this.writeOut(JSON.stringify(render.toDiffConfigJson(comparison), null, 2));
    } else {
      for (const w of comparison.warnings) this.writeErr(`warning: ${formatIssue(w)}`);
      this.writeOut(render.renderDiffConfigText(comparison, { color: useColor(flags.color) }));
    }
    const code = render.diffConfigExitCode(comparison);
    if (code !== 0) this.exit(code);
  }
}
