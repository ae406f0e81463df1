// Where the rollout state lives on the staged copies: their names, labels and annotations, and
// reading the state and the operator's request back (staged-rollout/objects.ts writes them). Below
// config, so the agent's staged config source reads them without the controller's code. Pure.
import type { ConfigMap } from '../kube/objects.js';
import type { DecodedState, RolloutRequest } from './state.js';
import { decodeRolloutRequest, decodeRolloutState } from './state.js';

export const STAGED_PREFIX = 'local-static-provisioner/';
/** Label on both copies: the operator's ConfigMap they stage (its label-value form). */
export const STAGED_CONFIG_OF_LABEL = `${STAGED_PREFIX}staged-config-of`;
/** Label on both copies: `stable` or `candidate`. */
export const STAGED_ROLE_LABEL = `${STAGED_PREFIX}staged-config-role`;
export const ROLLOUT_STATE_ANNOTATION = `${STAGED_PREFIX}rollout-state`;
export const ROLLOUT_REQUEST_ANNOTATION = `${STAGED_PREFIX}rollout-request`;
/** On the stable copy: the config hash it holds. */
export const CONFIG_HASH_ANNOTATION = `${STAGED_PREFIX}config-hash`;

export type StagedRole = 'stable' | 'candidate';

export function stagedConfigMapName(name: string, role: StagedRole): string {
  return `${name}-${role}`;
}

/** The state stored on a candidate ConfigMap (absent: none; damaged: why). */
export function stateOf(candidate: ConfigMap | undefined): DecodedState | undefined {
  const raw = candidate?.metadata.annotations?.[ROLLOUT_STATE_ANNOTATION];
  return raw === undefined ? undefined : decodeRolloutState(raw);
}

export function requestOf(candidate: ConfigMap | undefined): RolloutRequest | undefined {
  const raw = candidate?.metadata.annotations?.[ROLLOUT_REQUEST_ANNOTATION];
  return raw === undefined ? undefined : decodeRolloutRequest(raw);
}
