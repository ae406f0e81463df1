// Cleanup Jobs, compatible with upstream's (pkg/deleter/jobcontroller.go NewCleanupJob): same name,
// labels, annotations, mounts and node selector, so Jobs started by either agent are recognised.
import type { ClassConfig, ProvisionerConfig } from '../config/model.js';
import type { Job } from '../kube/objects.js';
import { IDENTITY_ANNOTATION } from '../pv/identity.js';
import { fnv1a32, HOSTNAME_LABEL } from '../pv/naming.js';

export function cleanupJobName(pvName: string): string {
  return `cleanup-${pvName}`;
}

export interface CleanupJobInput {
  readonly pvName: string;
  readonly pvUid: string;
  readonly nodeName: string;
  readonly namespace: string;
  readonly image: string;
  readonly classConfig: ClassConfig;
  readonly config: ProvisionerConfig;
  /** Device path inside the container: the device node the entry resolved to when it was checked. */
  readonly devicePath: string;
  /** The identity checked at devicePath (`none` when the node offers none); the Job's guard refuses any other disk. */
  readonly identity?: string;
  readonly startTime: string;
}

export function buildCleanupJob(input: CleanupJobInput): Job {
  const { classConfig } = input;
  const mountName = `mount-${fnv1a32(classConfig.hostDir + classConfig.mountDir).toString(16)}`;
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: {
      name: cleanupJobName(input.pvName),
      namespace: input.namespace,
      labels: { [HOSTNAME_LABEL]: input.nodeName, pv: input.pvName, pvuuid: input.pvUid },
      annotations: {
        device: input.devicePath,
        'start-time': input.startTime,
        ...(input.identity !== undefined ? { [JOB_IDENTITY_ANNOTATION]: input.identity } : {}),
      },
    },
    spec: {
      template: {
        spec: {
          containers: [
            {
              name: 'cleaner',
              image: input.image,
              securityContext: { privileged: true },
              command: jobCommand(classConfig.blockCleanerCommand, input.devicePath, input.identity),
              env: [{ name: 'LOCAL_PV_BLKDEVICE', value: input.devicePath }],
              volumeMounts: [
                { name: mountName, mountPath: classConfig.mountDir },
                { name: 'dev', mountPath: '/dev' },
              ],
            },
          ],
          restartPolicy: 'OnFailure',
          nodeSelector: { [HOSTNAME_LABEL]: input.nodeName },
          tolerations: input.config.jobTolerations.map((t) => ({ ...t })),
          volumes: [
            { name: mountName, hostPath: { path: classConfig.hostDir } },
            { name: 'dev', hostPath: { path: '/dev' } },
          ],
        },
      },
    },
  };
}

/** On a cleanup Job of this agent's: the disk identity its guard checks before and after the cleaner. */
export const JOB_IDENTITY_ANNOTATION = IDENTITY_ANNOTATION;

/** The identity a Job was created for, as a CleanupSpec field (absent on a Job that does not say). */
export function identityOfJob(job: Job): { readonly identity?: string } {
  const identity = job.metadata.annotations?.[JOB_IDENTITY_ANNOTATION];
  return identity !== undefined ? { identity } : {};
}

/**
 * The identity a succeeded Job held and checked, when it ran behind the guard (its command is
 * `provisioner clean-block`); undefined for a Job that does not (an earlier agent's, upstream's).
 * Read from the command, which is what the guard checked: a pod template cannot be changed after
 * the Job is created, its annotations can.
 */
export function guardedJobIdentity(job: Job): string | undefined {
  const command = job.spec?.template.spec.containers[0]?.command ?? [];
  if (!isGuarded(command)) return undefined;
  const dashes = command.indexOf('--', GUARD_COMMAND.length);
  const flags = command.slice(GUARD_COMMAND.length, dashes < 0 ? undefined : dashes);
  const at = flags.indexOf('--identity');
  if (at >= 0) return flags[at + 1];
  return flags.find((f) => f.startsWith('--identity='))?.slice('--identity='.length);
}

/** The Job's guard: the CLI in the agent's image, wrapping the class's blockCleanerCommand. */
export const GUARD_COMMAND: readonly string[] = ['provisioner', 'clean-block'];

/**
 * The container command: with an identity, the cleaner behind the guard, which holds the device
 * and checks its identity before and after the cleaner; without one, the cleaner alone (upstream's).
 */
function jobCommand(cleaner: readonly string[], devicePath: string, identity: string | undefined): string[] {
  if (identity === undefined) return [...cleaner];
  return [...GUARD_COMMAND, '--device', devicePath, '--identity', identity, '--', ...cleaner];
}

/**
 * The class's cleaner a Job runs (its blockCleanerCommand), guarded or not: what the cleanup
 * records as its command (the metric label `cleanup_command` is its first word, as upstream's).
 */
export function cleanerCommandOfJob(job: Job): readonly string[] {
  const command = job.spec?.template.spec.containers[0]?.command ?? [];
  if (!isGuarded(command)) return command;
  const dashes = command.indexOf('--', GUARD_COMMAND.length);
  return dashes < 0 ? [] : command.slice(dashes + 1);
}

function isGuarded(command: readonly string[]): boolean {
  return GUARD_COMMAND.every((word, i) => command[i] === word);
}

export type JobOutcome = 'running' | 'succeeded' | 'failed';

/** Complete/succeeded wins; a Failed condition is final (the Job's own retries are exhausted). */
export function jobOutcome(job: Job): JobOutcome {
  const conditions = job.status?.conditions ?? [];
  if ((job.status?.succeeded ?? 0) > 0 || conditions.some((c) => c.type === 'Complete' && c.status === 'True'))
    return 'succeeded';
  if (conditions.some((c) => c.type === 'Failed' && c.status === 'True')) return 'failed';
  return 'running';
}

export function jobFailureMessage(job: Job): string {
  const failed = job.status?.conditions?.find((c) => c.type === 'Failed');
  return `cleanup Job ${job.metadata.name} failed${failed?.reason !== undefined ? ` (${failed.reason}${failed.message !== undefined ? `: ${failed.message}` : ''})` : ''}`;
}
