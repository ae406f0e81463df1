import { REQUEST_EXAMPLES, requestDescription, RolloutRequestCommand } from './rollout-request.js';

export default class RolloutPromote extends RolloutRequestCommand {
  static override summary = 'Promote the candidate: make it the stable config on every node now.';
  static override description = requestDescription(
    'Asks the staged rollout controller to end the rollout of the ConfigMap by making its candidate the stable config at once, on every node, skipping the waves not opened yet and their bake (a halt included). Refused when the rollout is complete already or the candidate does not parse.',
  );
  static override examples = REQUEST_EXAMPLES;
  protected readonly action = 'promote';
}
