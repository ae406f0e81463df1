// One checker of the data-safety invariants (docs/disk-identity.md, "The invariants") for a test's
// whole run: started with a way to list PersistentVolumes and the node(s) the test runs, it lists
// the PVs every 200 ms until stopped and records every violation the API shows, each message naming
// the PVs (name, UID, phase, path) and the disk identities. What it can see from the API:
//
//   I2        two PVs of one node whose recorded identities name one disk, in one list, whatever
//             their phase (a PV being deleted still holds its disk: discovery indexes every PV of
//             the node it has cached, Terminating ones too);
//   I2-time   a PV created before another PV of the node recording the same disk was marked for
//             deletion, when the two were never in one list (the creation and deletion timestamps,
//             one-second resolution, say they overlapped);
//   I3        a PV deleted and created again under its name (republished) that records another
//             disk than the one its previous object recorded last, while no operator `accept`
//             re-recorded it (the deletion needs the recorded disk at the path, so the new object
//             must record that disk; see the assumption below);
//   rewrite   a PV whose recorded identity changed in place to another disk (only `accept` does
//             that; recording a first identity, or a legacy loop id extended with its birth, is no
//             change);
//   wiped     with expectWipedOnRepublish: a tenant's PV republished while the test's probe still
//             finds the tenant's token on the volume;
//   outside   with `discoveryDirs`: a PV of the node whose path is not an entry of one of them.
//
// What it cannot see: which disk is at a path (I1, I4, I5 and the cleanup's side of I3 need the
// node; the tests' data checks cover them), and what lived less than a poll (two PVs of one disk
// that never were in one list and whose timestamps do not tell). The I3 rule assumes nothing puts
// another disk at an entry between the deletion of its PV and its republish (nor retires a PV with
// `kubectl delete pv` and puts another disk there): true of the tests that use it; a test that does
// passes `republishKeepsDisk: false`.
import { setTimeout as delay } from 'node:timers/promises';
import {
  ACCEPT_ACTION,
  IDENTITY_ACTION_ANNOTATION,
  IDENTITY_ANNOTATION,
  identityMatches,
  recordedIdentity,
} from '../../src/core/pv/identity.js';
import { HOSTNAME_LABEL, NODE_LABEL, nodeLabelValue } from '../../src/core/pv/naming.js';

/**
 * What the checker reads of a PV: the project's PersistentVolume (src/core/kube/objects.ts) and
 * client-node's V1PersistentVolume (timestamps as Date) both are one.
 */
export interface PvLike {
  readonly metadata?:
    | {
        readonly name?: string | undefined;
        readonly uid?: string | undefined;
        readonly creationTimestamp?: string | Date | undefined;
        readonly deletionTimestamp?: string | Date | undefined;
        readonly labels?: Readonly<Record<string, string>> | undefined;
        readonly annotations?: Readonly<Record<string, string>> | undefined;
      }
    | undefined;
  readonly spec?:
    | {
        readonly local?: { readonly path?: string | undefined } | undefined;
        readonly nodeAffinity?:
          | {
              readonly required?:
                | {
                    readonly nodeSelectorTerms?:
                      | readonly {
                          readonly matchExpressions?:
                            | readonly { readonly key: string; readonly values?: readonly string[] | undefined }[]
                            | undefined;
                        }[]
                      | undefined;
                  }
                | undefined;
            }
          | undefined;
      }
    | undefined;
  readonly status?: { readonly phase?: string | undefined } | undefined;
}

export type InvariantRule = 'I2' | 'I2-time' | 'I3' | 'rewrite' | 'wiped' | 'outside';

export interface Violation {
  readonly rule: InvariantRule;
  readonly message: string;
  /** The PV names involved. */
  readonly pvs: readonly string[];
}

/** A PV as one list showed it, reduced to what the rules read. */
interface PvView {
  readonly name: string;
  readonly uid: string;
  readonly node: string;
  /** The annotation as recorded (`none` included); undefined when none is recorded. */
  readonly annotation: string | undefined;
  /** The recorded identity other than `none` (recordedIdentity). */
  readonly identity: string | undefined;
  readonly path: string;
  readonly phase: string;
  readonly createdMs: number | undefined;
  readonly deletionMs: number | undefined;
  readonly acceptRequested: boolean;
}

const time = (value: string | Date | undefined): number | undefined => {
  if (value === undefined) return undefined;
  const ms = value instanceof Date ? value.getTime() : Date.parse(value);
  return Number.isFinite(ms) ? ms : undefined;
};

/** The node (of `nodes`) a PV belongs to: by this agent's node label, else by its node affinity. */
function nodeOf(pv: PvLike, nodes: readonly string[]): string | undefined {
  const label = pv.metadata?.labels?.[NODE_LABEL];
  if (label !== undefined) return nodes.find((n) => nodeLabelValue(n) === label);
  const hostnames = (pv.spec?.nodeAffinity?.required?.nodeSelectorTerms ?? []).flatMap((term) =>
    (term.matchExpressions ?? []).filter((e) => e.key === HOSTNAME_LABEL).flatMap((e) => e.values ?? []),
  );
  return nodes.find((n) => hostnames.includes(n));
}

function view(pv: PvLike, node: string): PvView | undefined {
  const name = pv.metadata?.name;
  const uid = pv.metadata?.uid;
  if (name === undefined || uid === undefined) return undefined;
  const annotations = { ...(pv.metadata?.annotations ?? {}) };
  return {
    name,
    uid,
    node,
    annotation: annotations[IDENTITY_ANNOTATION],
    identity: recordedIdentity({ metadata: { name, annotations }, spec: {} }),
    path: pv.spec?.local?.path ?? '?',
    phase: pv.metadata?.deletionTimestamp !== undefined ? 'Terminating' : (pv.status?.phase ?? 'Pending'),
    createdMs: time(pv.metadata?.creationTimestamp),
    deletionMs: time(pv.metadata?.deletionTimestamp),
    acceptRequested: annotations[IDENTITY_ACTION_ANNOTATION] === ACCEPT_ACTION,
  };
}

/** Whether two recorded identities name one disk (a legacy loop record matches its extension). */
const sameDisk = (a: string, b: string): boolean => identityMatches(a, b) || identityMatches(b, a);

const describePv = (v: PvView): string =>
  `${v.name} (uid ${v.uid}, ${v.phase}, ${v.path}, identity ${v.annotation ?? '<unrecorded>'})`;

const stamp = (ms: number | undefined): string => (ms === undefined ? '?' : new Date(ms).toISOString());

export interface InvariantRulesOptions {
  /** The I3 rule (a republished PV records the disk its previous object recorded); default true. */
  readonly republishKeepsDisk?: boolean;
  /**
   * The discovery directories the node's agent was ever given (now or by an earlier config): a PV
   * whose path is not directly in one of them is reported. Default: not checked.
   */
  readonly discoveryDirs?: () => readonly string[];
}

/**
 * The rules over a sequence of PV lists (the pure part of the checker): observe() each list in
 * order; it returns the violations first seen in it. Each violation is reported once.
 */
export class InvariantRules {
  /** Every PV object seen (by UID): its last view. */
  private readonly lastByUid = new Map<string, PvView>();
  /** For each PV name, the UID of the last object of that name seen. */
  private readonly lastUidByName = new Map<string, string>();
  /** UIDs of PVs on which the test asked for `accept` (the identity may change through it). */
  private readonly accepted = new Set<string>();
  private readonly reported = new Set<string>();
  private readonly all: Violation[] = [];

  constructor(private readonly options: InvariantRulesOptions = {}) {}

  get violations(): readonly Violation[] {
    return this.all;
  }

  /** The test asks for `accept` on this PV object: its recorded identity may change to the disk at its path. */
  operatorAccepts(uid: string): void {
    this.accepted.add(uid);
  }

  /** One list of PVs (any nodes: only those of `nodes` are checked); the new violations. */
  observe(pvs: readonly PvLike[], nodes: readonly string[]): Violation[] {
    const found: Violation[] = [];
    const report = (key: string, rule: InvariantRule, involved: readonly PvView[], message: string): void => {
      if (this.reported.has(key)) return;
      this.reported.add(key);
      const violation = { rule, message, pvs: involved.map((v) => v.name) };
      this.all.push(violation);
      found.push(violation);
    };
    const views: PvView[] = [];
    for (const pv of pvs) {
      const node = nodeOf(pv, nodes);
      const v = node === undefined ? undefined : view(pv, node);
      if (v !== undefined) views.push(v);
    }
    const present = new Set(views.map((v) => v.uid));

    // I2: two PVs of one node recording one disk, in this list.
    const byNode = new Map<string, PvView[]>();
    for (const v of views) byNode.set(v.node, [...(byNode.get(v.node) ?? []), v]);
    for (const [node, list] of byNode) {
      const withIdentity = list.filter((v) => v.identity !== undefined);
      for (let i = 0; i < withIdentity.length; i++) {
        for (let j = i + 1; j < withIdentity.length; j++) {
          const a = withIdentity[i];
          const b = withIdentity[j];
          if (a === undefined || b === undefined || !sameDisk(a.identity ?? '', b.identity ?? '')) continue;
          const pair = [a, b].sort((x, y) => (x.uid < y.uid ? -1 : 1));
          report(
            `I2:${pair.map((v) => v.uid).join(':')}`,
            'I2',
            pair,
            `I2: on node ${node} one disk backs two PVs: ${describePv(a)} and ${describePv(b)}`,
          );
        }
      }
    }

    for (const v of views) {
      const previous = this.lastByUid.get(v.uid);
      if (previous === undefined) {
        // A PV object seen for the first time.
        // I2 over time: it was created before another PV of its disk (not in this list) was marked for deletion.
        if (v.identity !== undefined && v.createdMs !== undefined) {
          for (const other of this.lastByUid.values()) {
            if (other.node !== v.node || other.name === v.name || present.has(other.uid)) continue;
            if (other.identity === undefined || !sameDisk(other.identity, v.identity)) continue;
            if (other.deletionMs === undefined || Math.floor(v.createdMs / 1000) >= Math.floor(other.deletionMs / 1000))
              continue;
            report(
              `I2-time:${v.uid}:${other.uid}`,
              'I2-time',
              [other, v],
              `I2: on node ${v.node} ${describePv(v)} was created at ${stamp(v.createdMs)}, before ${describePv(other)} ` +
                `of the same disk was marked for deletion at ${stamp(other.deletionMs)}: one disk backed two PVs`,
            );
          }
        }
        // I3: republished under its name, for another disk than its previous object recorded.
        const previousUid = this.lastUidByName.get(v.name);
        const before = previousUid === undefined ? undefined : this.lastByUid.get(previousUid);
        if (
          this.options.republishKeepsDisk !== false &&
          before !== undefined &&
          before.identity !== undefined &&
          v.identity !== undefined &&
          !sameDisk(before.identity, v.identity) &&
          !before.acceptRequested &&
          // An accept on either object may have re-recorded the disk between two lists.
          !this.accepted.has(before.uid) &&
          !this.accepted.has(v.uid)
        ) {
          report(
            `I3:${before.uid}:${v.uid}`,
            'I3',
            [before, v],
            `I3: ${v.name} was deleted and republished for another disk: the deleted object ${describePv(before)}, ` +
              `the new one ${describePv(v)}; the deletion needs the recorded disk at the path, and no accept re-recorded it`,
          );
        }
      } else if (
        previous.annotation !== undefined &&
        v.annotation !== undefined &&
        previous.annotation !== v.annotation &&
        !identityMatches(previous.annotation, v.annotation) &&
        !previous.acceptRequested &&
        !this.accepted.has(v.uid)
      ) {
        report(
          `rewrite:${v.uid}:${previous.annotation}:${v.annotation}`,
          'rewrite',
          [v],
          `the recorded disk of ${v.name} (uid ${v.uid}, ${v.phase}, ${v.path}) changed in place from ` +
            `${previous.annotation} to ${v.annotation} without an accept`,
        );
      }
    }

    const dirs = this.options.discoveryDirs?.();
    if (dirs !== undefined) {
      for (const v of views) {
        const parent = v.path.slice(0, v.path.lastIndexOf('/'));
        if (dirs.includes(parent)) continue;
        report(
          `outside:${v.uid}`,
          'outside',
          [v],
          `${describePv(v)} is not an entry of a discovery directory (${dirs.join(', ')})`,
        );
      }
    }

    for (const v of views) {
      this.lastByUid.set(v.uid, v);
      this.lastUidByName.set(v.name, v.uid);
    }
    return found;
  }
}

/** What expectWipedOnRepublish found. */
export type RepublishProbe =
  | { readonly checked: true; readonly republishedUid: string; readonly tokenFound: boolean }
  | { readonly checked: false; readonly reason: string };

export interface CheckerReport {
  readonly violations: readonly Violation[];
  /** Lists made and checked: a checker that never ran has 0. */
  readonly polls: number;
  /** Lists that failed (an apiserver going away); the last error. */
  readonly errors: number;
  readonly lastError?: string;
}

export interface InvariantChecker {
  /**
   * A tenant's PV (name and UID) is about to be released: on the first list showing its name with
   * another UID (republished), `holds()` is asked whether the tenant's token is still on the volume;
   * true is a violation. Resolves with what was found (not checked: the checker stopped first, or
   * the probe threw).
   */
  expectWipedOnRepublish(
    pv: { readonly name: string; readonly uid: string },
    what: string,
    holds: () => boolean | Promise<boolean>,
  ): Promise<RepublishProbe>;
  /** The test asks for `accept` on this PV object: its recorded disk may change (rules I3, rewrite). */
  operatorAccepts(pv: { readonly uid: string }): void;
  /** The report so far. */
  report(): CheckerReport;
  /** Stops polling (after the list in flight) and returns the report. */
  stop(): Promise<CheckerReport>;
}

export interface InvariantCheckerOptions extends InvariantRulesOptions {
  /** Every PV (or at least those of the nodes), e.g. `async () => (await core.listPersistentVolume()).items`. */
  readonly listPersistentVolumes: () => Promise<readonly PvLike[]>;
  /** The node's name, or the nodes' names now (a test that adds nodes as it goes). */
  readonly node: string | (() => readonly string[]);
  readonly intervalMs?: number;
  /** Stops the checker too. */
  readonly signal?: AbortSignal;
  /** Called with each violation when it is found (e.g. to print it at once). */
  readonly onViolation?: (violation: Violation) => void;
}

interface PendingProbe {
  readonly name: string;
  readonly uid: string;
  readonly what: string;
  readonly holds: () => boolean | Promise<boolean>;
  readonly resolve: (outcome: RepublishProbe) => void;
}

/** Starts polling; see the file's comment for the rules. */
export function startInvariantChecker(options: InvariantCheckerOptions): InvariantChecker {
  const rules = new InvariantRules(options);
  const interval = options.intervalMs ?? 200;
  const nodes = (): readonly string[] => (typeof options.node === 'string' ? [options.node] : options.node());
  const stopping = new AbortController();
  const signal = options.signal === undefined ? stopping.signal : AbortSignal.any([stopping.signal, options.signal]);
  const pending: PendingProbe[] = [];
  const extra: Violation[] = [];
  let polls = 0;
  let errors = 0;
  let lastError: string | undefined;

  const found = (violation: Violation): void => {
    options.onViolation?.(violation);
  };

  async function runProbes(pvs: readonly PvLike[]): Promise<void> {
    for (const probe of [...pending]) {
      const now = pvs.find((pv) => pv.metadata?.name === probe.name && pv.metadata.uid !== probe.uid);
      const republishedUid = now?.metadata?.uid;
      if (republishedUid === undefined) continue;
      pending.splice(pending.indexOf(probe), 1);
      let tokenFound: boolean;
      try {
        tokenFound = await probe.holds();
      } catch (err) {
        probe.resolve({ checked: false, reason: `the probe failed: ${String(err)}` });
        continue;
      }
      if (tokenFound) {
        const violation: Violation = {
          rule: 'wiped',
          message:
            `${probe.name} was republished (uid ${probe.uid} → ${republishedUid}) while ${probe.what} of the tenant ` +
            `of ${probe.uid} was still on the volume: a deletion before its cleanup completed on the disk (I3)`,
          pvs: [probe.name],
        };
        extra.push(violation);
        found(violation);
      }
      probe.resolve({ checked: true, republishedUid, tokenFound });
    }
  }

  /** A function: the loop reads it again after each await (a property read would stay narrowed). */
  const stopped = (): boolean => signal.aborted;
  const loop = (async () => {
    while (!signal.aborted) {
      const started = Date.now();
      try {
        const pvs = await options.listPersistentVolumes();
        // Stopped while listing: the list is not counted (stop() reports the lists it waited for).
        if (stopped()) break;
        for (const violation of rules.observe(pvs, nodes())) found(violation);
        await runProbes(pvs);
        polls += 1;
      } catch (err) {
        errors += 1;
        lastError = err instanceof Error ? err.message : String(err);
      }
      try {
        await delay(Math.max(0, interval - (Date.now() - started)), undefined, { signal });
      } catch {
        // Stopped.
      }
    }
    for (const probe of pending.splice(0))
      probe.resolve({ checked: false, reason: `the checker stopped before ${probe.name} was republished` });
  })();

  const report = (): CheckerReport => ({
    violations: [...rules.violations, ...extra],
    polls,
    errors,
    ...(lastError !== undefined ? { lastError } : {}),
  });

  return {
    expectWipedOnRepublish(pv, what, holds) {
      return new Promise<RepublishProbe>((resolve) => {
        if (signal.aborted) resolve({ checked: false, reason: 'the checker is stopped' });
        else pending.push({ name: pv.name, uid: pv.uid, what, holds, resolve });
      });
    },
    operatorAccepts(pv) {
      rules.operatorAccepts(pv.uid);
    },
    report,
    async stop() {
      stopping.abort();
      await loop;
      return report();
    },
  };
}

/** The assertion message of a report with violations (or none); for `assert.deepEqual(report.violations, [], …)`. */
export function describeReport(report: CheckerReport): string {
  const head = `${report.polls} lists of the PVs checked (${report.errors} failed${report.lastError !== undefined ? `, last: ${report.lastError}` : ''})`;
  if (report.violations.length === 0) return `${head}: no violation`;
  return `${head}: ${report.violations.length} violation(s):\n${report.violations.map((v) => `- ${v.message}`).join('\n')}`;
}
