// The process port: what core reads from the running Node.js process (its id, CPU and memory use,
// the handles keeping it alive, the Node.js version) and the few process-wide things it does (the
// file-creation mask, signals to process groups). Core takes a ProcessHost like it takes a Clock,
// and eslint's no-restricted-globals bans `process` in the rest of core (node-http.ts aside: it
// loads a builtin module, an import by other means).

export interface ProcessHost {
  readonly pid: number;
  /** `v24.1.0`. */
  readonly nodeVersion: string;
  /** CPU time in microseconds; with `previous`, the time since then. */
  cpuUsage(previous?: NodeJS.CpuUsage): NodeJS.CpuUsage;
  memoryUsage(): NodeJS.MemoryUsage;
  /** The resident set size alone (cheaper than memoryUsage()). */
  residentBytes(): number;
  /** One type name per handle or request keeping the event loop alive. */
  activeResources(): string[];
  /** Sets the file-creation mask; returns the previous one. */
  umask(mask: number): number;
  /** Sends `signal` to a process, or with a negative pid to a process group; 0 only checks it exists. Throws (ESRCH, EPERM) as kill(2). */
  kill(pid: number, signal: NodeJS.Signals | 0): void;
}

// The real side of the port lives here, beside it, as systemClock beside Clock: the one place in core
// that touches `process`. The command layer passes it in (run-agent.ts); the modules that take a
// host default to it so tests and benches that do not care about the process need not build one.
/* eslint-disable no-restricted-globals -- the real process: the one implementation of the port */
export const nodeProcessHost: ProcessHost = {
  pid: process.pid,
  nodeVersion: process.version,
  cpuUsage: (previous) => process.cpuUsage(previous),
  memoryUsage: () => process.memoryUsage(),
  residentBytes: () => process.memoryUsage.rss(),
  activeResources: () => process.getActiveResourcesInfo(),
  umask: (mask) => process.umask(mask),
  kill: (pid, signal) => {
    process.kill(pid, signal);
  },
};
/* eslint-enable no-restricted-globals */
