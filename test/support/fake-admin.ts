// A scriptable AdminTarget for the admin endpoint and the commands that talk to it.
import { spawn } from 'node:child_process';
import type { ProvisionerConfig } from '../../src/core/config/model.js';
import type {
  AdminTarget,
  AgentEvent,
  AgentStatusJson,
  AppliedConfigJson,
  ReloadOutcome,
  ReloadRequest,
  ReloadResult,
} from '../../src/core/agent/reload-types.js';

export const HASH_A = `sha256:${'a'.repeat(64)}`;
export const HASH_B = `sha256:${'b'.repeat(64)}`;

export const EMPTY_CONFIG: ProvisionerConfig = {
  storageClassMap: {},
  nodeLabelsForPV: [],
  labelsForPV: {},
  useAlphaAPI: false,
  useJobForCleaning: false,
  jobTolerations: [],
  minResyncPeriod: '5m0s',
  useNodeNameOnly: false,
  setPVOwnerRef: false,
  removeNodeNotReadyTaint: false,
  provisionerNotReadyNodeTaintKey: '',
};

export function reloadResult(
  outcome: ReloadOutcome,
  overrides: Partial<ReloadResult> & { force?: boolean } = {},
): ReloadResult {
  const { force, ...rest } = overrides;
  return {
    outcome,
    trigger: 'admin',
    forced: force ?? false,
    generation: 7,
    appliedHash: HASH_A,
    changes: [],
    issues: [],
    startedAt: 1_780_000_000_000,
    durationMs: 12,
    ...rest,
  };
}

export class FakeAdminTarget implements AdminTarget {
  readonly listeners = new Set<(event: AgentEvent) => void>();
  readonly reloadRequests: ReloadRequest[] = [];
  applied: AppliedConfigJson = {
    formatVersion: 1,
    hash: HASH_A,
    source: '/etc/provisioner/config',
    generation: 7,
    config: EMPTY_CONFIG,
  };
  generation = 7;
  /** What reload() does; by default a no-op answer at once. */
  onReload: (request: ReloadRequest) => Promise<ReloadResult> = (request) =>
    Promise.resolve(reloadResult('noop', { force: request.force ?? false }));

  status(): AgentStatusJson {
    return {
      formatVersion: 1,
      node: 'node-a',
      version: '0.1.0',
      pid: process.pid,
      startedAt: 1_780_000_000_000,
      now: Date.now(),
      generation: this.generation,
      ready: true,
      config: { source: this.applied.source, appliedHash: this.applied.hash, subPath: false },
      source: {
        configured: { kind: 'directory', path: this.applied.source },
        inUse: { kind: 'directory', path: this.applied.source },
      },
      reloadPending: false,
      classes: [],
      cleanups: [],
    };
  }

  appliedConfig(): AppliedConfigJson {
    return this.applied;
  }

  reload(request: ReloadRequest): Promise<ReloadResult> {
    this.reloadRequests.push(request);
    return this.onReload(request);
  }

  subscribe(listener: (event: AgentEvent) => void): () => void {
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
  }

  emit(event: AgentEvent): void {
    for (const listener of this.listeners) listener(event);
  }
}

/** Polls until `check` holds; fails after `ms`. */
export async function eventually(check: () => boolean, what: string, ms = 3000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** Leaves a stale socket file at `path`: a process listens there and is killed with SIGKILL. */
export async function leaveStaleSocket(path: string): Promise<void> {
  const child = spawn(
    process.execPath,
    ['-e', "require('net').createServer().listen(process.argv[1], () => console.log('ready'))", path],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  await new Promise<void>((resolve, reject) => {
    child.once('error', reject);
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      if (d.includes('ready')) resolve();
    });
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGKILL');
  await exited;
}
