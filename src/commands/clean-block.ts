import { Flags } from '@oclif/core';
import { ProvisionerCommand } from '../cli/base-command.js';
import { UsageError } from '../core/errors.js';

/** The cleaner command: everything after the first `--` of the command line, verbatim. */
function cleanerCommand(argv: readonly string[]): string[] {
  const dashes = argv.indexOf('--');
  const command = dashes < 0 ? [] : argv.slice(dashes + 1);
  if (command.length === 0 || command[0] === '') {
    throw new UsageError('give the cleaner command after --, e.g. -- /scripts/quick_reset.sh');
  }
  return command;
}

export default class CleanBlock extends ProvisionerCommand {
  static override summary =
    "What cleanup Jobs run: a block volume's cleaner, only on the disk the Job was created for.";

  static override description = `Cleanup Jobs (useJobForCleaning) run this, in the agent's image, around the class's blockCleanerCommand. It opens --device and holds it, checks that the disk there has the identity --identity (as docs/disk-identity.md reads it; \`none\` for a disk that offers none), and only then runs the command with LOCAL_PV_BLKDEVICE=--device. After the command exited 0 it reads the identity again: a disk swapped in meanwhile makes the cleanup not count. The command's output is passed through.

Exit codes: 0 cleaned, and the disk is still the expected one; 1 the cleaner failed (exited non-zero or on a signal, could not be started, or the device could not be opened); 2 usage error; 7 refused: the disk at --device is not the expected one, or its identity cannot be read (before the cleaner: nothing was written; after it: the cleanup does not count). See docs/cleanup.md#what-a-cleanup-job-runs.`;

  static override usage = '<%= command.id %> --device <path> --identity <id> -- <command...>';

  static override examples = [
    '<%= config.bin %> <%= command.id %> --device /dev/sdb --identity wwid:naa.5000c500a1b2c3d4 -- /scripts/quick_reset.sh',
    '<%= config.bin %> <%= command.id %> --device /dev/loop3 --identity none -- /scripts/shred.sh 2',
  ];

  // The cleaner command follows `--`, with arguments of its own.
  static override strict = false;

  static override flags = {
    device: Flags.string({
      description: 'The block device node to clean (not a symlink): LOCAL_PV_BLKDEVICE of the cleaner.',
      required: true,
    }),
    identity: Flags.string({
      description:
        'The identity the disk at --device must have, before and after the cleaner (`none`: it offers none).',
      required: true,
    }),
  };

  async run(): Promise<void> {
    const { flags, argv } = await this.parse(CleanBlock);
    const command = cleanerCommand(this.argv);
    // Not strict, for the command after `--`: anything else is a mistake, not to be ignored before a wipe.
    const unexpected = argv.slice(0, argv.length - command.length);
    if (unexpected.length > 0) throw new UsageError(`unexpected before --: ${unexpected.join(' ')}`);
    if (flags.device === '' || flags.identity === '') throw new UsageError('--device and --identity must not be empty');
    const { cleanBlockGuarded } = await import('../core/cleanup/guard.js');
    const { ProcessCleaner } = await import('../core/cleanup/cleaner.js');
    const { LinuxVolumes } = await import('../core/node/linux-volumes.js');
    const { installSignalHandlers } = await import('../cli/lifecycle.js');
    const { renderCleanBlockText } = await import('../render/clean-block.js');
    // In a Job this process is PID 1, which ignores signals it has no handler for.
    const abort = new AbortController();
    const uninstall = installSignalHandlers({
      shutdown: () => {
        abort.abort();
      },
    });
    try {
      const result = await cleanBlockGuarded(
        { device: flags.device, identity: flags.identity, command },
        {
          volumes: new LinuxVolumes(),
          cleaner: new ProcessCleaner(process.env),
          onOutput: (line, stream) => {
            if (stream === 'stdout') this.writeOut(line);
            else this.writeErr(line);
          },
        },
        abort.signal,
      );
      this.writeOut(renderCleanBlockText(result));
    } finally {
      uninstall();
    }
  }
}
