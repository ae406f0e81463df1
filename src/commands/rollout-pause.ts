import { REQUEST_EXAMPLES, requestDescription, RolloutRequestCommand } from './rollout-request.js';

export default class RolloutPause extends RolloutRequestCommand {
  static override summary = 'Pause a staged rollout: no further wave opens; the open waves keep the candidate.';
  static override description = requestDescription(
    'Asks the staged rollout controller to pause the progressing rollout of the ConfigMap: the nodes of the open waves keep the candidate, the others stay on stable, and no wave opens until `rollout resume`. A node of an open wave that fails still halts it.',
  );
  static override examples = REQUEST_EXAMPLES;
  protected readonly action = 'pause';
}
