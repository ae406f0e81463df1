// The long chaos soak (test/support/soak/run.ts; the CI-sized one is
// test/integration/node-real/chaos-soak.test.ts): the chart and the image on a real kubelet node, a
// seeded schedule of claims, releases, config edits (through the kubelet, then staged rollouts),
// disk faults and faults of every kind for the given time, the invariants checked throughout.
// Every step is logged as it ends; the report (seed first) at the end, and as JSON with --json-out.
// The agent's container logs (every restart, every pod) are kept in --logs-dir, which stays.
//
// Usage (root, after `npm run build`): node dist/bench/chaos-soak.js [--seed 1] [--minutes 60]
//   [--chores-per-fault 3] [--json-out soak.json] [--logs-dir DIR (default: a new dir in $TMPDIR)]
// Exits 1 when an invariant was violated, a step failed its own expectation, or the kubelet restarted
// the agent for a failed liveness probe.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { Cleanup } from '../test/support/real-node.js';
import { describeSoak, runSoak } from '../test/support/soak/run.js';
import { kubeBinDir, numberFlag } from './support.js';

function stringFlag(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : undefined;
}

const seed = numberFlag('--seed', 1);
const minutes = numberFlag('--minutes', 60);
// the helm binary the chart steps run (test/support/helm.ts reads it from here, as the test runner sets it)
process.env['LVP_KUBE_BIN_DIR'] ??= kubeBinDir();
const logsDir = stringFlag('logs-dir') ?? mkdtempSync(join(tmpdir(), `lvp-soak-logs-seed${String(seed)}-`));
process.stdout.write(`agent logs kept in ${logsDir}\n`);
const cleanup = new Cleanup();
try {
  const report = await runSoak({
    seed,
    durationMs: minutes * 60_000,
    choresPerFault: numberFlag('--chores-per-fault', 3),
    coverEveryFault: true,
    cleanup,
    logsDir,
    log: (line) => process.stdout.write(`${line}\n`),
  });
  process.stdout.write(`\n${describeSoak(report)}\n`);
  const out = stringFlag('json-out');
  if (out !== undefined) writeFileSync(out, `${JSON.stringify(report, null, 2)}\n`);
  process.exitCode =
    report.violations.length > 0 || report.stepErrors.length > 0 || report.livenessKills.length > 0 ? 1 : 0;
} catch (error) {
  process.stderr.write(
    `chaos soak (seed ${String(seed)}) stopped: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
  );
  process.exitCode = 1;
} finally {
  cleanup.run();
}
