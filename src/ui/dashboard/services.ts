// What the dashboard's keys do, against the agent's admin endpoint: `r` reloads through it, `d`
// compares the config on disk (the agent's source, read here) with the one it applies.
import type { AdminClient } from '../../core/agent/admin-client.js';
import { formatIssue, InvalidConfigError, ProvisionerError } from '../../core/errors.js';
import { shortHash } from '../../render/text.js';
import type { RolloutStatus } from '../../core/staged-rollout/status.js';
import type { DashboardServices, DiffContent } from './app.js';

/** The on-disk config against the applied one, as the lines of `provisioner diff-config`. */
export async function onDiskDiff(client: AdminClient): Promise<DiffContent> {
  // Loaded on the first `d`, not before the first frame: the config loader brings the YAML parser.
  const [applied, { compareConfigs }, { renderDiffConfigText }] = await Promise.all([
    client.config(),
    import('../../core/config/compare.js'),
    import('../../render/diff-config.js'),
  ]);
  try {
    const comparison = await compareConfigs({
      from: { kind: 'agent', path: client.socketPath, hash: applied.hash, config: applied.config },
      to: applied.source,
      failOn: [],
      context: 3,
    });
    // The hashes are on the diff's ---/+++ lines.
    const title = comparison.identical
      ? `Diff: on disk = applied (generation ${applied.generation})`
      : `Diff: applied (generation ${applied.generation}) -> on disk`;
    const text = comparison.identical
      ? `No differences: the agent applies what is on disk in ${applied.source}.\n`
      : renderDiffConfigText(comparison, { color: false });
    return { ok: true, title, lines: text.trimEnd().split('\n') };
  } catch (err) {
    if (err instanceof InvalidConfigError) {
      return {
        ok: false,
        title: `Diff: the config on disk is invalid (${applied.source})`,
        lines: [
          `The agent keeps serving generation ${applied.generation} (${shortHash(applied.hash)}).`,
          '',
          ...err.issues.map((i) => `${i.severity}: ${formatIssue(i)}`),
        ],
      };
    }
    if (err instanceof ProvisionerError)
      return { ok: false, title: 'Diff: cannot read the config on disk', lines: [err.message] };
    throw err;
  }
}

/**
 * The fleet pane: the rollout service's result as the lines of `provisioner rollout status`, a
 * staged rollout's waves in a compact block first.
 */
export async function fleetPane(read: () => Promise<RolloutStatus>): Promise<DiffContent> {
  const { fleetPaneLines, fleetSummary, readFleet } = await import('./fleet.js');
  const fleet = await readFleet(read);
  if ('problem' in fleet) return { ok: false, title: 'Fleet: cannot read the rollout', lines: [fleet.problem] };
  return { ok: true, title: `Fleet: ${fleetSummary(fleet.status)} (f refreshes)`, lines: fleetPaneLines(fleet.status) };
}

export function agentServices(
  client: AdminClient,
  reloadClient: AdminClient,
  fleet: () => Promise<RolloutStatus>,
): DashboardServices {
  return {
    reload: (force) => reloadClient.reload({ force }),
    diff: () => onDiskDiff(client),
    fleet: () => fleetPane(fleet),
  };
}
