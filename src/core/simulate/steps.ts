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
import type { RolloutAction } from '../rollout-state/state.js';
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

type Fail = (text: string) => never;
type StepKind = Step['type'];
type StepOfKind<K extends StepKind> = Extract<Step, { readonly type: K }>;
/** Carries out one kind of step in the world; `fail` fails it (bad input, naming the step). */
type StepApplier<K extends StepKind> = (step: StepOfKind<K>, w: StepWorld, fail: Fail) => Promise<StepOutcome>;

/** The volume a step names; an unknown one fails the step. */
async function resolveIn(w: StepWorld, ref: string, fail: Fail): Promise<ResolvedVolume> {
  try {
    return await w.disks.resolve(ref);
  } catch (err) {
    if (err instanceof StepError) fail(err.message);
    throw err;
  }
}

/** Runs a staged-rollout action; a StepError (no such node, nothing to act on) fails the step. */
function asStep<T>(run: () => T, fail: Fail): T {
  try {
    return run();
  } catch (err) {
    if (err instanceof StepError) fail(err.message);
    throw err;
  }
}

/** What a config step reports of the config it wrote. */
function configShown(
  config: StepOfKind<'config changed'>['config'],
): { kind: 'file'; display: string } | { kind: 'inline'; keys: string[] } {
  return config.kind === 'file'
    ? { kind: 'file', display: config.display }
    : { kind: 'inline', keys: Object.keys(config.keys) };
}

function diskAdded(step: StepOfKind<'disk added'>, w: StepWorld, fail: Fail): Promise<StepOutcome> {
  const d = w.disks.add(step.disk, fail);
  return Promise.resolve({
    type: step.type,
    volume: w.disks.display(d.dir, d.name, d.className),
    path: posix.join(d.dir, d.name),
    entryType: step.disk.type,
    mounted: d.mounted,
    ...(step.disk.capacity !== undefined ? { capacity: step.disk.capacity } : {}),
  });
}

async function claimBound(step: StepOfKind<'claim bound'>, w: StepWorld, fail: Fail): Promise<StepOutcome> {
  const v = await resolveIn(w, step.volume, fail);
  const pv = await pvOf(w.cluster, v, fail);
  const [namespace = 'default', name = `claim-${v.name}`] = (step.claim ?? `default/claim-${v.name}`).split('/');
  await bindClaim(w.cluster, pv, namespace, name);
  return { type: step.type, claim: `${namespace}/${name}`, pv: pv.metadata.name, volume: v.display };
}

async function claimReleased(step: StepOfKind<'claim released'>, w: StepWorld, fail: Fail): Promise<StepOutcome> {
  const v = await resolveIn(w, step.volume, fail);
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

async function configChanged(step: StepOfKind<'config changed'>, w: StepWorld, fail: Fail): Promise<StepOutcome> {
  await w.configFiles.write(step.config, fail);
  const candidate = await loadConfig(w.configFiles.path).catch(() => undefined);
  if (candidate) await w.ensureClassesFor(candidate.config);
  // The watcher would notice within its debounce; the reload itself is the real one.
  await w.reload({ trigger: 'fs' }, fail);
  return { type: step.type, config: configShown(step.config) };
}

async function cleanupEnds(
  step: StepOfKind<'cleanup succeeds' | 'cleanup fails' | 'cleanup is slow'>,
  w: StepWorld,
  fail: Fail,
): Promise<StepOutcome> {
  const v = await resolveIn(w, step.volume, fail);
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

async function jobEnds(step: StepOfKind<'job succeeds' | 'job fails'>, w: StepWorld, fail: Fail): Promise<StepOutcome> {
  const v = await resolveIn(w, step.volume, fail);
  if (v.pvName === undefined) fail(`${v.display} has no storage class: no Job can be named`);
  const name = cleanupJobName(v.pvName);
  const job = await w.cluster.jobs.get(name, { namespace: w.namespace }).catch(() => undefined);
  if (!job) fail(`no cleanup Job ${name} in namespace ${w.namespace} (is useJobForCleaning on, and the volume Block?)`);
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

async function diskSwapped(step: StepOfKind<'disk swapped'>, w: StepWorld, fail: Fail): Promise<StepOutcome> {
  const v = await resolveIn(w, step.volume, fail);
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

async function identityAccepted(step: StepOfKind<'identity accepted'>, w: StepWorld, fail: Fail): Promise<StepOutcome> {
  const v = await resolveIn(w, step.volume, fail);
  const pv = await pvOf(w.cluster, v, fail);
  await w.cluster.persistentVolumes.patch(pv.metadata.name, {
    metadata: { annotations: { [IDENTITY_ACTION_ANNOTATION]: 'accept' } },
  });
  return { type: step.type, pv: pv.metadata.name, volume: v.display };
}

async function applyConfig(step: StepOfKind<'apply config'>, w: StepWorld, fail: Fail): Promise<StepOutcome> {
  const staged = stagedOf(w, fail);
  await staged.operatorConfig.write(step.config, fail);
  const candidate = await loadConfig(staged.operatorConfig.path).catch(() => undefined);
  // The chart's StorageClasses and the DaemonSet's mounts for a new class, as `config changed` does.
  if (candidate) await w.ensureClassesFor(candidate.config);
  await staged.world.applyConfig(staged.operatorConfig.data);
  return { type: step.type, config: configShown(step.config) };
}

async function rolloutRequest(step: StepOfKind<RolloutStepType>, w: StepWorld, fail: Fail): Promise<StepOutcome> {
  const staged = stagedOf(w, fail);
  const action = ROLLOUT_ACTION_OF[step.type];
  let answer: Awaited<ReturnType<StagedWorld['request']>>;
  try {
    answer = await staged.world.request(action, step.by);
  } catch (err) {
    if (err instanceof StepError) fail(err.message);
    throw err;
  }
  const { candidate, phase } = answer;
  return {
    type: step.type,
    phase,
    ...(candidate !== undefined ? { candidate } : {}),
    ...(step.by !== undefined ? { by: step.by } : {}),
  };
}

function nodeFailsCandidate(step: StepOfKind<'node fails candidate'>, w: StepWorld, fail: Fail): Promise<StepOutcome> {
  const staged = stagedOf(w, fail);
  const failure = { how: step.how, errors: step.errors, ...(step.reason !== undefined ? { reason: step.reason } : {}) };
  asStep(() => {
    staged.world.fail(step.node, failure);
  }, fail);
  return Promise.resolve({ type: step.type, node: step.node, ...failure });
}

function nodeFixed(step: StepOfKind<'node fixed'>, w: StepWorld, fail: Fail): Promise<StepOutcome> {
  const staged = stagedOf(w, fail);
  asStep(() => {
    staged.world.fix(step.node);
  }, fail);
  return Promise.resolve({ type: step.type, node: step.node });
}

/** Each kind of step: what it does to the world, and what it reports. */
const STEP_APPLIERS: { readonly [K in StepKind]: StepApplier<K> } = {
  'disk added': diskAdded,
  'disk removed': async (step, w, fail: Fail) => {
    const v = await resolveIn(w, step.volume, fail);
    await w.disks.remove(v, fail);
    return { type: step.type, volume: v.display, path: v.path };
  },
  'disk pulled': async (step, w, fail: Fail) => {
    const v = await resolveIn(w, step.volume, fail);
    const left = await w.disks.pull(v, fail);
    return { type: step.type, volume: v.display, path: v.path, left };
  },
  'disk swapped': diskSwapped,
  'device added': (step, w, fail) => Promise.resolve(deviceStep(step, w.devices, fail)),
  'device removed': (step, w, fail) => Promise.resolve(deviceStep(step, w.devices, fail)),
  'claim bound': claimBound,
  'claim released': claimReleased,
  'config changed': configChanged,
  'reload requested': async (step, w, fail) => {
    const allow = step.allow.length > 0 ? { allow: step.allow } : {};
    await w.reload({ trigger: 'admin', force: step.force, ...allow }, fail);
    return { type: step.type, allow: step.allow, force: step.force };
  },
  'cleanup succeeds': cleanupEnds,
  'cleanup fails': cleanupEnds,
  'cleanup is slow': cleanupEnds,
  'job succeeds': jobEnds,
  'job fails': jobEnds,
  'identity accepted': identityAccepted,
  'agent restarted': async (step, w) => {
    await w.restartAgent();
    return { type: step.type };
  },
  'node rebuilt': async (step, w) => ({ type: step.type, ...(await w.rebuildNode()) }),
  'time passes': (step) => Promise.resolve({ type: step.type, durationMs: step.durationMs }),
  check: (step) => Promise.resolve({ type: step.type }),
  'apply config': applyConfig,
  'rollout pause': rolloutRequest,
  'rollout resume': rolloutRequest,
  'rollout abort': rolloutRequest,
  'rollout promote': rolloutRequest,
  'node fails candidate': nodeFailsCandidate,
  'node fixed': nodeFixed,
};

/** One kind's applier for a step of that kind (the kind passed apart so the two stay correlated). */
function applyKind<K extends StepKind>(kind: K, step: StepOfKind<K>, w: StepWorld, fail: Fail): Promise<StepOutcome> {
  const apply: StepApplier<K> = STEP_APPLIERS[kind];
  return apply(step, w, fail);
}

/** Carries out a step; `fail` fails it (bad input, naming the step). Returns what it did. */
export async function applyStep(step: Step, w: StepWorld, fail: Fail): Promise<StepOutcome> {
  return applyKind(step.type, step, w, fail);
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
