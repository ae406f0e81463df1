// Cleanup Jobs, compatible with upstream's (pkg/deleter/jobcontroller.go NewCleanupJob): same name,
// labels, annotations, mounts and node selector, so Jobs started by either agent are recognised.
import type { ClassConfig, ProvisionerConfig } from '../config/model.js';
import type { Job } from '../kube/objects.js';
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
  /** Device path inside the container. */
  readonly devicePath: string;
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
      annotations: { device: input.devicePath, 'start-time': input.startTime },
    },
    spec: {
      template: {
        spec: {
          containers: [
            {
              name: 'cleaner',
              image: input.image,
              securityContext: { privileged: true },
              command: [...classConfig.blockCleanerCommand],
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
