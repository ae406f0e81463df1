// Text of `provisioner clean-block` (what cleanup Jobs run): one line, the last of the Job's log.
import type { GuardedCleanResult } from '../core/cleanup/guard.js';

export function renderCleanBlockText(result: GuardedCleanResult): string {
  return `cleaned ${result.device} (disk ${result.identity}, the same before and after): ${result.command.join(' ')}\n`;
}
