// What the chaos soak knows about the node while it runs: its disks, the tenants writing to them,
// the releases waiting for their cleanup, the configs written, and the violations found. The
// monitors here run beside the steps, every second or faster:
//   - tenants: each Bound tenant's token (a file on a filesystem volume, the first bytes of a block
//     one) is read on the host; anything else there is data changed by someone but its pod;
//   - releases: each released PV must come back as a new object (Available, or already claimed
//     again) within a bound, with the tenant's token gone (the data-safety checker's probe) and, for
//     a block disk, the cleaner having finished exactly once on its device since the release;
//   - the status Lease: every applied hash it shows must be the hash of a config written whole;
//   - the agent's memory, from its /metrics.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';

import type { ChartNode } from '../chart-node.js';
import { STATE } from '../chart-node.js';
import type { InvariantChecker } from '../data-safety-invariants.js';
import { readAt, type LoopDevice } from '../real-node.js';
import { CLEANER_LOG, type ConfigModel, type SoakDirs } from './config-model.js';

export type DiskClass = 'fs' | 'blk' | 'extra';

export interface Disk {
  readonly path: string;
  readonly cls: DiskClass;
  /** ext4 on a loop device (remountable: the same disk again), tmpfs, or a raw loop device (block). */
  readonly kind: 'ext4' | 'tmpfs' | 'block';
  readonly loop?: LoopDevice;
}

export interface Tenant {
  readonly set: string;
  readonly cls: 'fs' | 'blk';
  readonly pvName: string;
  readonly pvUid: string;
  readonly path: string;
  readonly token: string;
  /** While the disk is unmounted on purpose, its token is not read. */
  paused: boolean;
}

export interface Release {
  readonly tenant: Tenant;
  readonly at: number;
  /** The device the block entry pointed at, and the cleaner log's length, at the release. */
  readonly device?: string;
  readonly logOffset: number;
  /** When the log's length was taken (before the claim was released). */
  readonly loggedAt: number;
  /** A step holds it on purpose (a disk unmounted): not late while held. */
  heldUntil?: number;
}

export interface SoakViolation {
  readonly rule: string;
  readonly message: string;
  /** When it was found, in ms since the soak started. */
  readonly at: number;
  readonly step: string;
  /** The kept agent log lines of its moment (agent-logs.ts violationExcerpt), added to the report. */
  readonly agentLog?: readonly string[];
}

export interface MemorySample {
  readonly atMs: number;
  readonly rssBytes: number;
  readonly heapUsedBytes: number;
}

/** How long a released PV may take to come back (faults may land while it waits). */
export const REPUBLISH_BOUND_MS = 180_000;

/** How long an applied hash may wait for its writer to record it. */
const UNRECORDED_GRACE_MS = 30_000;

export class SoakWorld {
  readonly disks = new Map<string, Disk>();
  readonly tenants = new Map<string, Tenant>();
  readonly releases: Release[] = [];
  /** When the agent's container was SIGKILLed (the faults). */
  readonly agentKills: number[] = [];
  /** Block devices republished after a release → the cleaner log's length then: no cleanup may start on one until its next release. */
  private readonly republishedDevices = new Map<string, number>();
  readonly violations: SoakViolation[] = [];
  /** Every config written whole and valid: hash → what it was. */
  readonly written = new Map<string, string>();
  /** Hashes the status Lease showed as applied, in order (deduplicated runs). */
  readonly appliedSeen: string[] = [];
  /** Applied hashes not (yet) among the written ones → when first seen: a writer records its
   * config just after the write, so one may be applied before it is recorded. */
  private readonly unknownApplied = new Map<string, number>();
  readonly memory: MemorySample[] = [];
  readonly counts = { claims: 0, tenantRestarts: 0, releases: 0, republished: 0, configWrites: 0, rollouts: 0 };
  readonly republishMs: number[] = [];
  model: ConfigModel;
  source: 'file' | 'staged' = 'file';
  step = 'setup';
  private sequence = 0;

  constructor(
    readonly env: ChartNode,
    readonly dirs: SoakDirs,
    readonly checker: InvariantChecker,
    readonly started: number,
    model: ConfigModel,
  ) {
    this.model = model;
  }

  /** A name no earlier step used (StatefulSets, mount points). */
  next(prefix: string): string {
    this.sequence += 1;
    return `${prefix}${String(this.sequence)}`;
  }

  violate(rule: string, message: string): void {
    this.violations.push({ rule, message, at: Date.now() - this.started, step: this.step });
  }

  cleanerLog(): string {
    const file = join(this.dirs.blk, CLEANER_LOG);
    return existsSync(file) ? readFileSync(file, 'utf8') : '';
  }

  /** The tenant's token as the host reads it now (undefined: not readable). */
  tokenOnDisk(tenant: Tenant): string | undefined {
    try {
      if (tenant.cls === 'fs') return readFileSync(join(tenant.path, 'token'), 'utf8');
      const disk = this.disks.get(tenant.path);
      return disk?.loop === undefined ? undefined : readAt(disk.loop.path, 0, tenant.token.length).toString('latin1');
    } catch {
      return undefined;
    }
  }

  private checkTenants(): void {
    for (const tenant of this.tenants.values()) {
      if (tenant.paused) continue;
      const now = this.tokenOnDisk(tenant);
      if (now !== tenant.token)
        this.violate(
          'tenant-data',
          `the data of ${tenant.set} on ${tenant.path} (PV ${tenant.pvName}) changed while Bound: ` +
            `${JSON.stringify(now)} instead of its token ${tenant.token}`,
        );
    }
  }

  private async checkReleases(): Promise<void> {
    const pvs = (await this.env.core.listPersistentVolume()).items;
    for (const release of [...this.releases]) {
      const { tenant } = release;
      // a new object of that name, whatever its phase: a claim may bind it before the next round
      const back = pvs.find((pv) => pv.metadata?.name === tenant.pvName && pv.metadata.uid !== tenant.pvUid);
      const now = Date.now();
      if (back === undefined) {
        const late = now - release.at > REPUBLISH_BOUND_MS && (release.heldUntil ?? 0) < now - REPUBLISH_BOUND_MS;
        if (late) {
          this.violate(
            'republish',
            `${tenant.pvName} (${tenant.path}) not republished ${REPUBLISH_BOUND_MS} ms after its release`,
          );
          this.releases.splice(this.releases.indexOf(release), 1);
        }
        continue;
      }
      this.releases.splice(this.releases.indexOf(release), 1);
      this.counts.republished += 1;
      this.republishMs.push(now - release.at);
      if (release.device === undefined) continue;
      const log = this.cleanerLog();
      const done = log
        .slice(release.logOffset)
        .split('\n')
        .filter((l) => l === `done ${release.device}`).length;
      // A cleanup that finished just before a SIGKILL, its PV not deleted yet, runs again after the
      // restart (the agent cannot know it finished): the same released disk, wiped twice.
      const killed = this.agentKills.some((t) => t >= release.loggedAt);
      if (done === 0 || (done > 1 && !killed))
        this.violate(
          'cleaned-once',
          `${tenant.pvName} (${tenant.path} → ${release.device}) republished after ${String(done)} finished cleanups of its device (one expected; more only after the agent was killed)`,
        );
      this.republishedDevices.set(release.device, log.length);
    }
  }

  /** No cleanup starts on a republished block device before its next release. */
  private checkCleanedWhilePublished(): void {
    if (this.republishedDevices.size === 0) return;
    const log = this.cleanerLog();
    for (const [device, offset] of this.republishedDevices) {
      const next = this.releases.find((r) => r.device === device && r.logOffset >= offset);
      const segment = log.slice(offset, next?.logOffset ?? log.length).split('\n');
      if (segment.includes(`start ${device}`)) {
        this.violate(
          'cleaned-while-published',
          `a cleanup started on ${device} while a PV published it, before any release`,
        );
        this.republishedDevices.delete(device);
      } else if (next !== undefined) this.republishedDevices.delete(device);
    }
  }

  private async checkLease(): Promise<void> {
    const lease = await this.env.statusLease();
    const applied = lease[`${STATE}applied-hash`];
    if (applied !== undefined && applied !== this.appliedSeen.at(-1)) {
      this.appliedSeen.push(applied);
      if (!this.written.has(applied) && !this.unknownApplied.has(applied)) this.unknownApplied.set(applied, Date.now());
    }
    for (const [hash, seen] of this.unknownApplied) {
      if (this.written.has(hash)) this.unknownApplied.delete(hash);
      else if (Date.now() - seen > UNRECORDED_GRACE_MS) {
        this.unknownApplied.delete(hash);
        this.violate('config-written', `the status Lease says ${hash} is applied: no config written has that hash`);
      }
    }
  }

  private async sampleMemory(): Promise<void> {
    const pod = (await this.env.agentPods()).find((p) => p.status?.podIP !== undefined);
    const ip = pod?.status?.podIP;
    if (ip === undefined) return;
    const res = await fetch(`http://${ip}:8080/metrics`, { signal: AbortSignal.timeout(2000) });
    const text = await res.text();
    const value = (name: string): number => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
    const rss = value('process_resident_memory_bytes');
    if (Number.isFinite(rss))
      this.memory.push({
        atMs: Date.now() - this.started,
        rssBytes: rss,
        heapUsedBytes: value('nodejs_heap_size_used_bytes'),
      });
  }

  /** Runs the monitors until `signal` aborts (an apiserver fault only makes a round fail). */
  async monitor(signal: AbortSignal): Promise<void> {
    let round = 0;
    while (!signal.aborted) {
      this.checkTenants();
      this.checkCleanedWhilePublished();
      await this.checkReleases().catch(() => undefined);
      await this.checkLease().catch(() => undefined);
      if (round % 10 === 0) await this.sampleMemory().catch(() => undefined);
      round += 1;
      await delay(1000, undefined, { signal }).catch(() => undefined);
    }
  }
}
