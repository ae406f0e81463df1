// The chart's two leader-elected controllers (`rollout controller`, `node-cleanup`) as the soak runs
// them: two replicas each of the built CLI as processes on the host, with the plane's admin
// kubeconfig (their pods could not reach the test apiserver: no kube-proxy), kept running by a
// supervisor that starts a killed replica again a second later, as a Deployment would. They die
// with the test process (spawnLogged's pdeathsig), even when it is killed.
import type { ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import type { CoordinationV1Api } from '@kubernetes/client-node';

import { CLI } from '../cli.js';
import { spawnLogged } from '../control-plane.js';

export interface ControllerReplicasOptions {
  /** `rollout controller …` or `node-cleanup …` arguments, without the leader-election flags. */
  readonly args: readonly string[];
  readonly leaseName: string;
  readonly namespace: string;
  readonly kubeconfig: string;
  readonly logDir: string;
  readonly leases: CoordinationV1Api;
}

/** Short leader-election timings: a SIGKILLed leader's Lease expires in 4 s. */
const LEADER_FLAGS = [
  '--leader-elect-lease-duration=4s',
  '--leader-elect-renew-deadline=3s',
  '--leader-elect-retry-period=500ms',
];

export class ControllerReplicas {
  private readonly children = new Map<string, ChildProcess>();
  private stopped = false;
  private spawned = 0;
  /** Replicas that exited without being stopped (a kill counts). */
  exits = 0;

  constructor(private readonly options: ControllerReplicasOptions) {}

  start(replicas = 2): void {
    for (let i = 0; i < replicas; i++) this.spawnReplica(i);
  }

  /** A replica started again gets a new identity, as a Deployment's new pod gets a new name. */
  private spawnReplica(slot: number): void {
    if (this.stopped) return;
    this.spawned += 1;
    const identity = `${this.options.leaseName}-${String(slot)}-${String(this.spawned)}`;
    const child = spawnLogged(
      process.execPath,
      [
        CLI,
        ...this.options.args,
        `--leader-elect-lease-name=${this.options.leaseName}`,
        `--leader-elect-lease-namespace=${this.options.namespace}`,
        `--leader-elect-identity=${identity}`,
        ...LEADER_FLAGS,
      ],
      join(this.options.logDir, `${identity}.log`),
      { KUBECONFIG: this.options.kubeconfig },
    );
    this.children.set(identity, child);
    child.once('exit', () => {
      if (this.children.get(identity) === child) this.children.delete(identity);
      if (this.stopped) return;
      this.exits += 1;
      void delay(1000).then(() => {
        this.spawnReplica(slot);
      });
    });
  }

  /** The Lease's holder now (undefined: none, or no Lease yet). */
  async leader(): Promise<{ identity: string; renewMs: number } | undefined> {
    const lease = await this.options.leases
      .readNamespacedLease({ name: this.options.leaseName, namespace: this.options.namespace })
      .catch(() => undefined);
    const identity = lease?.spec?.holderIdentity;
    if (identity === undefined || identity === '') return undefined;
    // client-node leaves a MicroTime as the apiserver's string (typed Date)
    const renew: unknown = lease?.spec?.renewTime;
    return { identity, renewMs: renew instanceof Date ? renew.getTime() : Date.parse(String(renew)) };
  }

  /** SIGKILLs the replica holding the Lease; its identity, or undefined when none held it. */
  async killLeader(): Promise<string | undefined> {
    const leader = await this.leader();
    const child = leader === undefined ? undefined : this.children.get(leader.identity);
    if (leader === undefined || child === undefined) return undefined;
    child.kill('SIGKILL');
    return leader.identity;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    const exits = [...this.children.values()].map(
      (child) =>
        new Promise<void>((resolve) => {
          if (child.exitCode !== null || child.signalCode !== null) resolve();
          else
            child.once('exit', () => {
              resolve();
            });
          child.kill('SIGTERM');
          setTimeout(() => child.kill('SIGKILL'), 10_000).unref();
        }),
    );
    await Promise.all(exits);
  }
}
