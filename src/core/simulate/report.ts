// What a scenario replay found, as data: each step with what it did, what the agent did in
// response (stamped with virtual time) and the expectations checked after it; then the end state.
// The words for all of it are the renderer's (src/render/simulate-timeline.ts).
import type { GuardedImpact } from '../config/reload-guard.js';
import type { CleanupState } from '../cleanup/table.js';
import type { ReloadChange, ReloadOutcome } from '../agent/reload-types.js';
import type { ConfigIssue } from '../errors.js';
import type { LogFields, LogLevel } from '../log.js';
import type { AppliedResult } from '../fleet/applied-state.js';
import type { StagedRolloutPolicy } from '../staged-rollout/policy.js';
import type { RolloutPhase } from '../rollout-state/state.js';
import type { ExpectationResult } from './expect.js';
import type { EntryType } from './node-facts.js';
import type { RolloutStepType, ScenarioSettings } from './scenario.js';
import type { NodeFailure } from './staged-scenario.js';

/** Virtual time zero of every scenario (timestamps in objects; the timeline shows offsets). */
export const SCENARIO_EPOCH = Date.UTC(2030, 0, 1);

/**
 * One thing the agent did. `volume` names a volume as the timeline does (`class/entry`, or its path
 * when no configured class holds it).
 */
export type TimelineEvent =
  | {
      readonly type: 'agent-started';
      readonly generation: number;
      readonly configHash: string;
      /** PVs of this node it labelled as its own at start-up. */
      readonly adopted: number;
    }
  | { readonly type: 'agent-stopped'; readonly cleanupsInFlight: number }
  | {
      readonly type: 'pv-created';
      readonly pv: string;
      readonly volume: string;
      readonly capacity?: string;
      readonly volumeMode: string;
      readonly fsType?: string;
    }
  | { readonly type: 'pv-deleted'; readonly pv: string }
  | { readonly type: 'pv-adopted'; readonly pv: string }
  | {
      readonly type: 'job-created';
      readonly job: string;
      readonly pv?: string;
      readonly command: readonly string[];
      readonly device?: string;
      readonly image?: string;
    }
  | { readonly type: 'job-deleted'; readonly job: string }
  | {
      readonly type: 'cleanup-started';
      readonly volume: string;
      readonly pv?: string;
      /** The volume's path in the agent's container. */
      readonly path: string;
      /** Block volumes: the cleaner command; none for a filesystem (its contents are deleted). */
      readonly command?: readonly string[];
    }
  | { readonly type: 'cleanup-succeeded'; readonly volume: string; readonly pv?: string }
  /** The cleaner failed (`volume` given), or the cleanup of PV `pv` could not start (no volume). */
  | { readonly type: 'cleanup-failed'; readonly volume?: string; readonly pv?: string; readonly error: string }
  | { readonly type: 'cleanup-interrupted'; readonly volume: string; readonly pv?: string }
  | {
      readonly type: 'reload';
      readonly outcome: ReloadOutcome;
      readonly generation: number;
      readonly appliedHash: string;
      readonly changes: readonly ReloadChange[];
      /** Errors of a rejected config, positions in the user's files. */
      readonly problems: readonly ConfigIssue[];
      readonly error?: string;
      readonly needsAllow?: readonly GuardedImpact[];
    }
  | { readonly type: 'skipped'; readonly volume: string; readonly reason: string; readonly detail: string }
  | { readonly type: 'class-problem'; readonly storageClass: string; readonly detail: string }
  | { readonly type: 'node-updated'; readonly node: string }
  /**
   * Disks by rule: what the agent said about a device a rule selects, once per device and verdict
   * (its log record and Node Event): linked, would be linked (plan mode), carved, skipped and why,
   * or a link that failed. `message` is the agent's.
   */
  | {
      readonly type: 'device';
      readonly device: string;
      readonly storageClass: string;
      readonly level: LogLevel;
      readonly message: string;
    }
  /**
   * The agent held a Released PV back: the disk at its path is not the one it was published for
   * (docs/disk-identity.md). `message` is the agent's (its log record and Warning Event).
   */
  | { readonly type: 'quarantined'; readonly pv: string; readonly volume?: string; readonly message: string }
  /** The agent recorded the disk now at the PV's path as its disk, as the operator asked. */
  | { readonly type: 'identity-accepted'; readonly pv: string; readonly volume?: string; readonly identity: string }
  /** The agent recorded the disk identity of a PV first seen without one (trust on first use). */
  | { readonly type: 'identity-recorded'; readonly pv: string; readonly volume?: string; readonly identity: string }
  /** A warning or error the agent logged that no other action shows. */
  | {
      readonly type: 'log';
      readonly level: LogLevel;
      readonly pv?: string;
      readonly message: string;
      /** The record's fields but `pv` and `reason`. */
      readonly fields: LogFields;
    }
  | RolloutEvent
  | FleetNodeEvent;

/**
 * What the staged rollout controller did, read off the rollout state it wrote (hashes are config
 * hashes; absent for a candidate that does not parse).
 */
export type RolloutEvent =
  /** The first start: the operator's ConfigMap became the stable config. */
  | { readonly type: 'rollout-adopted'; readonly configHash?: string }
  | {
      readonly type: 'rollout-started';
      readonly candidate?: string;
      readonly stable?: string;
      /** Each wave with its nodes in the simulated fleet. */
      readonly waves: readonly { readonly name: string; readonly nodes: readonly string[] }[];
    }
  | { readonly type: 'rollout-wave-opened'; readonly wave: string; readonly nodes: readonly string[] }
  /** Every node of the open waves reported the candidate applied: the bake started. */
  | { readonly type: 'rollout-baking'; readonly wave: string; readonly bakeMs: number }
  | {
      readonly type: 'rollout-halted';
      /** The wave the halting node belongs to (absent: the rollout halted before its first wave). */
      readonly wave?: string;
      /** Empty when no one node halted it. */
      readonly node: string;
      readonly reason: string;
      /** The open waves went back to stable (on halt: revert). */
      readonly reverted: boolean;
      readonly stable?: string;
    }
  | { readonly type: 'rollout-paused'; readonly wave?: string; readonly by?: string }
  | { readonly type: 'rollout-resumed'; readonly by?: string }
  | {
      readonly type: 'rollout-aborted';
      /** `request`: rollout abort; `configmap`: the ConfigMap was set back to the stable config. */
      readonly cause: 'request' | 'configmap';
      readonly stable?: string;
      readonly by?: string;
    }
  | { readonly type: 'rollout-promoted'; readonly candidate?: string; readonly by?: string }
  | { readonly type: 'rollout-completed'; readonly candidate?: string; readonly waves: number; readonly nodes: number }
  /** The ConfigMap changed to the stable config in other bytes: nothing to roll out. */
  | { readonly type: 'rollout-unchanged'; readonly stable?: string }
  | { readonly type: 'rollout-superseded'; readonly previous?: string; readonly candidate?: string }
  | { readonly type: 'rollout-invalid'; readonly reason: string };

/** What a node of the fleet reported in its status Lease (or, silent, stopped reporting). */
export type FleetNodeEvent =
  | {
      readonly type: 'node-applied';
      readonly node: string;
      readonly hash: string;
      /** What the hash is to the rollout now. */
      readonly config: 'candidate' | 'stable' | 'other';
      readonly generation: number;
    }
  /** Back on the stable config after running the candidate (a revert, an abort). */
  | { readonly type: 'node-reverted'; readonly node: string; readonly hash: string; readonly generation: number }
  | {
      readonly type: 'node-not-applied';
      readonly node: string;
      readonly result: AppliedResult;
      readonly hash?: string;
      readonly reason?: string;
    }
  /** Discovery or cleanup errors since it applied what it runs. */
  | { readonly type: 'node-errors'; readonly node: string; readonly errors: number; readonly hash: string }
  | { readonly type: 'node-silent'; readonly node: string };

export type ActionType = TimelineEvent['type'];

/** The lines of a staged rollout: what the controller did, what a node of the fleet reported. */
export function isRolloutAction(type: ActionType): boolean {
  return type.startsWith('rollout-') || (type.startsWith('node-') && type !== 'node-updated');
}

/** One thing the agent did, at virtual time `at` (ms since the scenario started). */
export type TimelineAction = { readonly at: number } & TimelineEvent;

/** What a step did to the world (the start: set it up and started the agent). */
export type StepOutcome =
  | {
      readonly type: 'start';
      readonly node: string;
      readonly disks: number;
      readonly classes: number;
      /** A staged scenario: the nodes of the fleet, this one included. */
      readonly fleet?: number;
      /** Block devices of the node (disks by rule), partitions not counted. */
      readonly devices?: number;
    }
  | {
      readonly type: 'disk added';
      readonly volume: string;
      readonly path: string;
      readonly entryType: EntryType;
      readonly mounted: boolean;
      readonly capacity?: number;
    }
  | { readonly type: 'disk removed'; readonly volume: string; readonly path: string }
  /** `left`: what stays at the path (a filesystem's mount point directory), or nothing (a device). */
  | {
      readonly type: 'disk pulled';
      readonly volume: string;
      readonly path: string;
      readonly left: 'mount-point' | 'nothing';
    }
  | {
      readonly type: 'device added';
      readonly devices: readonly {
        readonly name: string;
        readonly sizeBytes: number;
        readonly model: string;
        /** Its first /dev/disk/by-id name, if it has one. */
        readonly byId?: string;
        readonly partitions: number;
        readonly signatures: readonly string[];
      }[];
    }
  | { readonly type: 'device removed'; readonly devices: readonly string[] }
  | { readonly type: 'claim bound'; readonly claim: string; readonly pv: string; readonly volume: string }
  /** `claim`: namespace/name of the claim the PV was bound to, if it named one. */
  | { readonly type: 'claim released'; readonly claim?: string; readonly pv: string; readonly volume: string }
  | {
      readonly type: 'config changed';
      readonly config:
        | { readonly kind: 'file'; readonly display: string }
        | { readonly kind: 'inline'; readonly keys: readonly string[] };
    }
  | { readonly type: 'reload requested'; readonly allow: readonly GuardedImpact[]; readonly force: boolean }
  | {
      readonly type: 'cleanup succeeds' | 'cleanup fails';
      readonly volume: string;
      readonly message?: string;
      /** A cleanup of the volume was running and finished at once. */
      readonly finishedRunning: boolean;
    }
  | {
      readonly type: 'cleanup is slow';
      readonly volume: string;
      readonly durationMs: number;
      readonly then: 'succeed' | 'fail';
    }
  | { readonly type: 'job succeeds' | 'job fails'; readonly job: string }
  | { readonly type: 'agent restarted' }
  | {
      readonly type: 'disk swapped';
      readonly volume: string;
      readonly path: string;
      readonly kind: 'filesystem' | 'block';
      /** The disk the volume was added with was put back. */
      readonly original: boolean;
      /** The identities the node reports at the path before and after (none: it reports nothing). */
      readonly before?: string;
      readonly after?: string;
    }
  | { readonly type: 'node rebuilt'; readonly node: string; readonly previousUid: string; readonly uid: string }
  | { readonly type: 'identity accepted'; readonly pv: string; readonly volume: string }
  | { readonly type: 'time passes'; readonly durationMs: number }
  | { readonly type: 'check' }
  | {
      readonly type: 'apply config';
      readonly config:
        | { readonly kind: 'file'; readonly display: string }
        | { readonly kind: 'inline'; readonly keys: readonly string[] };
    }
  /** The request written for the rollout of `candidate` (its hash), in `phase` then. */
  | { readonly type: RolloutStepType; readonly candidate?: string; readonly phase: RolloutPhase; readonly by?: string }
  | {
      readonly type: 'node fails candidate';
      readonly node: string;
      readonly how: NodeFailure;
      readonly reason?: string;
      readonly errors: number;
    }
  | { readonly type: 'node fixed'; readonly node: string };

export interface StepInfo {
  /** 0: the start (world set up, agent started); then the scenario's steps, 1-based. */
  readonly index: number;
  readonly at: number;
  readonly note?: string;
  readonly actions: readonly TimelineAction[];
  readonly expectations: readonly ExpectationResult[];
}

export type StepReport = StepOutcome & StepInfo;

export interface FinalPV {
  readonly pv: string;
  readonly volume: string;
  readonly phase: string;
  readonly capacity: string;
}

/** A node of the fleet at the end: what its status Lease reports. */
export interface FinalFleetNode {
  readonly node: string;
  /** The real agent (the scenario's node) or a stand-in. */
  readonly agent: 'real' | 'stand-in';
  /** Hash of the config it runs; absent: it never reported. */
  readonly applied?: string;
  readonly config: 'candidate' | 'stable' | 'other' | 'unknown';
  readonly result?: AppliedResult;
  /** Its heartbeat is older than its Lease allows. */
  readonly stale: boolean;
}

/** The staged rollout at the end, as the controller stored it and the fleet reported it. */
export interface FinalRollout {
  readonly phase: RolloutPhase | 'none';
  readonly candidate?: string;
  readonly stable?: string;
  readonly waves: readonly { readonly name: string; readonly nodes: readonly string[]; readonly open: boolean }[];
  readonly halt?: { readonly wave?: string; readonly node: string; readonly reason: string };
  readonly reverted: boolean;
  readonly message?: string;
  readonly nodes: readonly FinalFleetNode[];
}

export interface ScenarioReport {
  readonly name: string;
  readonly file: string;
  readonly description?: string;
  readonly node: string;
  readonly settings: ScenarioSettings;
  /** A staged scenario: the controller's policy, the operator's ConfigMap and the fleet. */
  readonly stagedRollout?: {
    readonly policy: StagedRolloutPolicy;
    readonly configMap: string;
    readonly fleet: readonly { readonly node: string; readonly agent: 'real' | 'stand-in' }[];
  };
  readonly steps: readonly StepReport[];
  readonly expectations: { readonly total: number; readonly failed: number };
  readonly passed: boolean;
  readonly final: {
    readonly at: number;
    readonly generation: number;
    readonly configHash: string;
    readonly persistentVolumes: readonly FinalPV[];
    readonly cleanups: readonly { readonly pv: string; readonly method: string; readonly state: CleanupState }[];
    /** A staged scenario's rollout. */
    readonly rollout?: FinalRollout;
  };
}
