// The lists a generation starts from, asked for before it exists: at start-up with the request for
// the Node, and on a config change while it is debounced, read and validated (a reload then waits
// only for what is left of them). A generation's guards against its own cache lagging (a PV it
// deleted and still sees) start empty, so the lists it takes must hold every PV write the agent
// made: they are asked for only when no PV write is in flight, and given to the generation only if
// none started since. Otherwise it lists again, as without a head start.
import type { Clock } from '../clock.js';
import type { Cluster } from '../kube/cluster.js';
import type { WriteLedger } from '../kube/write-ledger.js';
import type { Logger } from '../log.js';
import { requestFirstLists } from './generation.js';
import type { GenerationFirstLists } from './generation.js';

/** Lists older than this are not taken (a watch from an old resourceVersion replays, or is Gone). */
export const HEAD_START_MAX_AGE_MS = 30_000;
/** After lists that no generation took (a change that was no reload), none are asked for this long. */
export const HEAD_START_PAUSE_AFTER_UNUSED_MS = 10_000;

export interface ListHeadStartDeps {
  readonly cluster: Pick<Cluster, 'persistentVolumes' | 'storageClasses'>;
  readonly clock: Clock;
  readonly logger: Logger;
  /** The agent's PV writes, every one of them. */
  readonly writes: WriteLedger;
  readonly nodeName: string;
}

interface Held {
  readonly lists: GenerationFirstLists;
  readonly writesBefore: number;
  readonly at: number;
}

export class ListHeadStart {
  private held: Held | undefined;
  private unusedAt = -Infinity;

  constructor(private readonly deps: ListHeadStartDeps) {}

  /** Asks for the lists now, unless some are held, a PV write is in flight, or the last went unused lately. */
  request(): boolean {
    const { writes, clock } = this.deps;
    if (this.held !== undefined || writes.inFlight > 0) return false;
    if (clock.now() - this.unusedAt < HEAD_START_PAUSE_AFTER_UNUSED_MS) return false;
    this.held = {
      lists: requestFirstLists(this.deps.cluster, this.deps.nodeName),
      writesBefore: writes.started,
      at: clock.now(),
    };
    return true;
  }

  /** The lists held, if they hold every PV write the agent made; forgotten either way. */
  take(): GenerationFirstLists | undefined {
    const held = this.held;
    this.held = undefined;
    if (held === undefined) return undefined;
    const written = this.deps.writes.started - held.writesBefore;
    const age = this.deps.clock.now() - held.at;
    if (written === 0 && age <= HEAD_START_MAX_AGE_MS) return held.lists;
    this.deps.logger.log('debug', 'lists asked for ahead not taken: the generation lists again', {
      pvWritesSince: written,
      ageMs: age,
    });
    return undefined;
  }

  /** A config change decided without a new generation: the lists held go unused. */
  drop(): void {
    if (this.held === undefined) return;
    this.held = undefined;
    this.unusedAt = this.deps.clock.now();
  }
}
