// What a cleanup Job runs (`provisioner clean-block`): the class's blockCleanerCommand behind an
// identity check. The agent checked the disk when it created the Job; the Job may start minutes
// later, and a slow cleaner runs for hours, so the Job checks again itself: on the device it holds,
// before the cleaner writes, and once more after it, so a disk swapped in meanwhile is never
// wiped, and a cleanup that may have touched another disk does not count (invariant I1).
import type { CleanOptions, VolumeCleaner } from './cleaner.js';
import { ExitCode, ProvisionerError } from '../errors.js';
import type { NodeVolumes } from '../node/volumes.js';
import { NO_IDENTITY } from '../pv/identity.js';
import { errorMessage } from '../unknown-values.js';

export interface GuardedCleanInput {
  /** The device node to wipe (LOCAL_PV_BLKDEVICE of the cleaner). */
  readonly device: string;
  /** The identity the disk must have (`VolumeIdentity.id`, or `none`). */
  readonly identity: string;
  /** The class's blockCleanerCommand. */
  readonly command: readonly string[];
  /** The PV the cleanup is for, when known (passed to the cleaner). */
  readonly pv?: string;
}

export interface GuardedCleanDeps {
  readonly volumes: Pick<NodeVolumes, 'volumeIdentity'>;
  readonly cleaner: VolumeCleaner;
  /** Each line the cleaner prints (so the Job's log shows it). */
  readonly onOutput?: CleanOptions['onOutput'];
}

export interface GuardedCleanResult {
  readonly device: string;
  /** The identity found before and after the cleaner (equal to the expected one). */
  readonly identity: string;
  readonly command: readonly string[];
}

/** When the disk was found not to be the expected one: nothing written yet, or after the cleaner ran. */
export type DiskCheckStage = 'before' | 'after';

/** The disk at the device is not (or no longer, or cannot be verified as) the expected one. */
export class DiskMismatchError extends ProvisionerError {
  readonly exitCode = ExitCode.DiskMismatch;
  readonly code = 'disk-mismatch';
  constructor(
    readonly stage: DiskCheckStage,
    readonly expected: string,
    /** The identity found; undefined when it could not be read. */
    readonly found: string | undefined,
    message: string,
  ) {
    super(message);
  }
}

/** The cleaner did not succeed (exited non-zero, on a signal, could not start, the device could not be opened). */
export class BlockCleanerError extends ProvisionerError {
  readonly exitCode = ExitCode.CleanerFailed;
  readonly code = 'cleaner-failed';
}

async function checkIdentity(
  volumes: GuardedCleanDeps['volumes'],
  input: GuardedCleanInput,
  stage: DiskCheckStage,
): Promise<string> {
  const { device, identity: expected } = input;
  let found: string;
  try {
    found = (await volumes.volumeIdentity(device))?.id ?? NO_IDENTITY;
  } catch (err) {
    const what = stage === 'before' ? 'not cleaned' : 'the cleanup does not count';
    throw new DiskMismatchError(
      stage,
      expected,
      undefined,
      `cannot read the identity of ${device}: ${errorMessage(err)}; ${what}`,
    );
  }
  if (found === expected) return found;
  const message =
    stage === 'before'
      ? `the disk at ${device} is ${found}, not ${expected}; not cleaned`
      : `the disk at ${device} changed while it was cleaned (now ${found}, expected ${expected}); the cleanup does not count`;
  throw new DiskMismatchError(stage, expected, found, message);
}

/**
 * Runs the cleaner on the device only when the disk it holds is the expected one, and counts the
 * cleanup only when that disk is still there after the cleaner exited 0. Rejects with a
 * DiskMismatchError (before: the cleaner never ran; after: it ran) or a BlockCleanerError.
 */
export async function cleanBlockGuarded(
  input: GuardedCleanInput,
  deps: GuardedCleanDeps,
  signal: AbortSignal,
): Promise<GuardedCleanResult> {
  const { volumes, cleaner } = deps;
  try {
    await cleaner.cleanBlock(input.device, input.command, {
      signal,
      // The cleaner holds the device open here, so what is checked is what it then wipes.
      beforeWipe: async () => {
        await checkIdentity(volumes, input, 'before');
      },
      ...(deps.onOutput !== undefined ? { onOutput: deps.onOutput } : {}),
      ...(input.pv !== undefined ? { pv: input.pv } : {}),
    });
  } catch (err) {
    if (err instanceof DiskMismatchError) throw err;
    throw new BlockCleanerError(`${input.device} not cleaned: ${errorMessage(err)}`, { cause: err });
  }
  const identity = await checkIdentity(volumes, input, 'after');
  return { device: input.device, identity, command: input.command };
}
