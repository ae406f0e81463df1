// What each step of a scenario does to the replay's world — disks put on the node or taken off,
// claims bound and released, the ConfigMap edited, reloads asked for, cleanups and Jobs that end
// as scripted, the agent restarted, disks swapped, the Node rebuilt, a disk identity accepted by
// the operator — and what it reports having done (data for the timeline).
import { posix } from 'node:path';
import type { ReloadRequest } from '../agent/reload-types.js';
import { cleanupJobName } from '../cleanup/jobs.js';
import type { Clock } from '../clock.js';
import type { ProvisionerConfig } from '../config/model.js';
import { loadConfig } from '../config/source/load.js';
import type { Cluster } from '../kube/cluster.js';
import type { Job, PersistentVolume } from '../kube/objects.js';
import { IDENTITY_ACTION_ANNOTATION } from '../pv/identity.js';
import { errorMessage } from '../unknown-values.js';
import type { ConfigFiles } from './config-files.js';
import { bindClaim, releaseClaim } from './controllers.js';
import { StepError } from './disks.js';
import type { Disks, ResolvedVolume } from './disks.js';
import type { SimulatedDevices } from './devices.js';
import type { StepOutcome } from './report.js';
import type { RolloutStepType, Step } from './scenario.js';
import type { RolloutAction } from '../staged-rollout/state.js';
import type { ScriptedCleaner } from './stand-ins.js';
import type { StagedWorld } from './fleet.js';

/** What a step may change: the replay's world, and the agent through the runner. */
export interface StepWorld {
  readonly cluster: Cluster;
  readonly disks: Disks;
  /** The node's block devices (disks by rule). */
  readonly devices: SimulatedDevices;
  readonly configFiles: ConfigFiles;
  readonly cleaner: ScriptedCleaner;
  readonly clock: Clock;
  /** Of cleanup Jobs. */
  readonly namespace: string;
  /** Gives the classes of a config their discovery directory and StorageClass, as the settings say. */
  ensureClassesFor(config: ProvisionerConfig): Promise<void>;
  /** Asks the running agent for a reload; the runner records its answer. */
  reload(request: ReloadRequest, fail: (text: string) => never): Promise<void>;
  /** Stops the agent and starts a new one (an empty cleanup table), same cluster and disks. */
  restartAgent(): Promise<void>;
  /**
   * Stops the agent, deletes the Node object and registers it again under the same name (a new
   * UID), and starts a new agent: a node reinstalled with its disks. Returns the UIDs the agent saw.
   */
  rebuildNode(): Promise<{ readonly node: string; readonly previousUid: string; readonly uid: string }>;
  /** A staged scenario's rollout, and the keys of the operator's ConfigMap (`apply config` changes them). */
  readonly staged?: { readonly world: StagedWorld; readonly operatorConfig: ConfigFiles };
}

/** The PV of a volume, which must exist and not be being deleted. */
async function pvOf(cluster: Cluster, volume: ResolvedVolume, fail: (t: string) => never): Promise<PersistentVolume> {
  if (volume.pvName === undefined) fail(`${volume.display} has no storage class: no PV can be named`);
  const pv = await cluster.persistentVolumes.get(volume.pvName).catch(() => undefined);
  if (!pv || pv.metadata.deletionTimestamp !== undefined)
    fail(`no PV for ${volume.display} (${volume.pvName}) exists at this point`);
  return pv;
}

/** Carries out a step; `fail` fails it (bad input, naming the step). Returns what it did. */
export async function applyStep(step: Step, w: StepWorld, fail: (text: string) => never): Promise<StepOutcome> {
  const resolve = async (ref: string): Promise<ResolvedVolume> => {
    try {
      return await w.disks.resolve(ref);
    } catch (err) {
      if (err instanceof StepError) fail(err.message);
      throw err;
    }
  };
  switch (step.type) {
    case 'disk added': {
      const d = w.disks.add(step.disk, fail);
      return {
        type: step.type,
        volume: w.disks.display(d.dir, d.name, d.className),
        path: posix.join(d.dir, d.name),
        entryType: step.disk.type,
        mounted: d.mounted,
        ...(step.disk.capacity !== undefined ? { capacity: step.disk.capacity } : {}),
      };
    }
    case 'disk removed': {
      const v = await resolve(step.volume);
      await w.disks.remove(v, fail);
      return { type: step.type, volume: v.display, path: v.path };
    }
    case 'disk pulled': {
      const v = await resolve(step.volume);
      const left = await w.disks.pull(v, fail);
      return { type: step.type, volume: v.display, path: v.path, left };
    }
    case 'device added':
    case 'device removed':
      return deviceStep(step, w.devices, fail);
    case 'claim bound': {
      const v = await resolve(step.volume);
      const pv = await pvOf(w.cluster, v, fail);
      const [namespace = 'default', name = `claim-${v.name}`] = (step.claim ?? `default/claim-${v.name}`).split('/');
      await bindClaim(w.cluster, pv, namespace, name);
      return { type: step.type, claim: `${namespace}/${name}`, pv: pv.metadata.name, volume: v.display };
    }
    case 'claim released': {
      const v = await resolve(step.volume);
      const pv = await pvOf(w.cluster, v, fail);
      await releaseClaim(w.cluster, pv);
      const ref = pv.spec.claimRef;
      return {
        type: step.type,
        ...(ref ? { claim: `${ref.namespace ?? ''}/${ref.name ?? ''}` } : {}),
        pv: pv.metadata.name,
        volume: v.display,
      };
    }
    case 'config changed': {
      await w.configFiles.write(step.config, fail);
      const candidate = await loadConfig(w.configFiles.path).catch(() => undefined);
      if (candidate) await w.ensureClassesFor(candidate.config);
      // The watcher would notice within its debounce; the reload itself is the real one.
      await w.reload({ trigger: 'fs' }, fail);
      return {
        type: step.type,
        config:
          step.config.kind === 'file'
            ? { kind: 'file', display: step.config.display }
            : { kind: 'inline', keys: Object.keys(step.config.keys) },
      };
    }
    case 'reload requested':
      await w.reload(
        { trigger: 'admin', force: step.force, ...(step.allow.length > 0 ? { allow: step.allow } : {}) },
        fail,
      );
      return { type: step.type, allow: step.allow, force: step.force };
    case 'cleanup succeeds':
    case 'cleanup fails':
    case 'cleanup is slow': {
      const v = await resolve(step.volume);
      if (step.type === 'cleanup is slow') {
        w.cleaner.set(v.path, {
          result: step.then,
          durationMs: step.durationMs,
          ...(step.message !== undefined ? { message: step.message } : {}),
        });
        return { type: step.type, volume: v.display, durationMs: step.durationMs, then: step.then };
      }
      const behaviour =
        step.type === 'cleanup succeeds'
          ? { result: 'succeed' as const, durationMs: 0 }
          : { result: 'fail' as const, durationMs: 0, message: step.message };
      w.cleaner.set(v.path, behaviour);
      const finished = w.cleaner.finish(v.path, behaviour);
      return {
        type: step.type,
        volume: v.display,
        ...(step.type === 'cleanup fails' ? { message: step.message } : {}),
        finishedRunning: finished > 0,
      };
    }
    case 'job succeeds':
    case 'job fails': {
      const v = await resolve(step.volume);
      if (v.pvName === undefined) fail(`${v.display} has no storage class: no Job can be named`);
      const name = cleanupJobName(v.pvName);
      const job = await w.cluster.jobs.get(name, { namespace: w.namespace }).catch(() => undefined);
      if (!job)
        fail(`no cleanup Job ${name} in namespace ${w.namespace} (is useJobForCleaning on, and the volume Block?)`);
      const now = new Date(w.clock.now()).toISOString();
      const status: NonNullable<Job['status']> =
        step.type === 'job succeeds'
          ? { succeeded: 1, startTime: now, completionTime: now, conditions: [{ type: 'Complete', status: 'True' }] }
          : {
              failed: 7,
              startTime: now,
              conditions: [
                {
                  type: 'Failed',
                  status: 'True',
                  reason: 'BackoffLimitExceeded',
                  message: step.message ?? 'Job has reached the specified backoff limit',
                },
              ],
            };
      await w.cluster.jobs.updateStatus({ ...job, status }, { namespace: w.namespace });
      return { type: step.type, job: name };
    }
    case 'agent restarted':
      await w.restartAgent();
      return { type: step.type };
    case 'disk swapped': {
      const v = await resolve(step.volume);
      const swapped = await w.disks.swap(v, step.to, fail);
      return {
        type: step.type,
        volume: v.display,
        path: v.path,
        kind: swapped.kind,
        original: step.to.kind === 'original',
        ...(swapped.before !== undefined ? { before: swapped.before } : {}),
        ...(swapped.after !== undefined ? { after: swapped.after } : {}),
      };
    }
    case 'node rebuilt':
      return { type: step.type, ...(await w.rebuildNode()) };
    case 'identity accepted': {
      const v = await resolve(step.volume);
      const pv = await pvOf(w.cluster, v, fail);
      await w.cluster.persistentVolumes.patch(pv.metadata.name, {
        metadata: { annotations: { [IDENTITY_ACTION_ANNOTATION]: 'accept' } },
      });
      return { type: step.type, pv: pv.metadata.name, volume: v.display };
    }
    case 'time passes':
      return { type: step.type, durationMs: step.durationMs };
    case 'check':
      return { type: step.type };
    case 'apply config': {
      const staged = stagedOf(w, fail);
      await staged.operatorConfig.write(step.config, fail);
      const candidate = await loadConfig(staged.operatorConfig.path).catch(() => undefined);
      // The chart's StorageClasses and the DaemonSet's mounts for a new class, as `config changed` does.
      if (candidate) await w.ensureClassesFor(candidate.config);
      await staged.world.applyConfig(staged.operatorConfig.data);
      return {
        type: step.type,
        config:
          step.config.kind === 'file'
            ? { kind: 'file', display: step.config.display }
            : { kind: 'inline', keys: Object.keys(step.config.keys) },
      };
    }
    case 'rollout pause':
    case 'rollout resume':
    case 'rollout abort':
    case 'rollout promote': {
      const staged = stagedOf(w, fail);
      const action = ROLLOUT_ACTION_OF[step.type];
      try {
        const { candidate, phase } = await staged.world.request(action, step.by);
        return {
          type: step.type,
          phase,
          ...(candidate !== undefined ? { candidate } : {}),
          ...(step.by !== undefined ? { by: step.by } : {}),
        };
      } catch (err) {
        if (err instanceof StepError) fail(err.message);
        throw err;
      }
    }
    case 'node fails candidate':
    case 'node fixed': {
      const staged = stagedOf(w, fail);
      try {
        if (step.type === 'node fixed') {
          staged.world.fix(step.node);
          return { type: step.type, node: step.node };
        }
        const failure = {
          how: step.how,
          errors: step.errors,
          ...(step.reason !== undefined ? { reason: step.reason } : {}),
        };
        staged.world.fail(step.node, failure);
        return { type: step.type, node: step.node, ...failure };
      } catch (err) {
        if (err instanceof StepError) fail(err.message);
        throw err;
      }
    }
  }
}

/** Block devices arrive on the node, or go away; their /dev nodes and by-id links with them. */
function deviceStep(
  step: Extract<Step, { type: 'device added' | 'device removed' }>,
  devices: SimulatedDevices,
  fail: (text: string) => never,
): StepOutcome {
  if (step.type === 'device removed') {
    for (const name of step.devices) {
      try {
        devices.remove(name);
      } catch (err) {
        fail(errorMessage(err));
      }
    }
    return { type: step.type, devices: step.devices };
  }
  const added = step.devices.map((d) => {
    let disk;
    try {
      [disk] = devices.add(d);
    } catch (err) {
      fail(`cannot add ${d.name}: ${errorMessage(err)}`);
    }
    const byId = disk?.byIdNames[0];
    return {
      name: d.name,
      sizeBytes: d.sizeBytes,
      model: d.model,
      ...(byId !== undefined ? { byId } : {}),
      partitions: d.partitions.length,
      signatures: d.signatures,
    };
  });
  return { type: step.type, devices: added };
}

const ROLLOUT_ACTION_OF = {
  'rollout pause': 'pause',
  'rollout resume': 'resume',
  'rollout abort': 'abort',
  'rollout promote': 'promote',
} as const satisfies Record<RolloutStepType, RolloutAction>;

function stagedOf(w: StepWorld, fail: (text: string) => never): NonNullable<StepWorld['staged']> {
  if (w.staged === undefined) fail('needs a stagedRollout: block');
  return w.staged;
}
