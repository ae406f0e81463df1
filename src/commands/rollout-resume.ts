import { REQUEST_EXAMPLES, requestDescription, RolloutRequestCommand } from './rollout-request.js';

export default class RolloutResume extends RolloutRequestCommand {
  static override summary = 'Resume a paused or halted staged rollout from the wave it stopped at.';
  static override description = requestDescription(
    'Asks the staged rollout controller to resume the paused or halted rollout of the ConfigMap: the halt is cleared, the waves opened so far run the candidate again (a halt that reverted them included), and the next wave opens once they applied it and baked.',
  );
  static override examples = REQUEST_EXAMPLES;
  protected readonly action = 'resume';
}
