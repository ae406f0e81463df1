import { REQUEST_EXAMPLES, requestDescription, RolloutRequestCommand } from './rollout-request.js';

export default class RolloutAbort extends RolloutRequestCommand {
  static override summary = 'Abort a staged rollout: every node returns to the stable config.';
  static override description = requestDescription(
    "Asks the staged rollout controller to abort the rollout of the ConfigMap (progressing, paused or halted): every node runs the stable config again and the candidate goes nowhere. The operator's ConfigMap keeps the candidate's content: apply the stable config (or a fixed one) to it, or a later `rollout promote` still makes it stable.",
  );
  static override examples = REQUEST_EXAMPLES;
  protected readonly action = 'abort';
}
