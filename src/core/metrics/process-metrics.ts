// Process and Node.js runtime series under prom-client's default names and types, so the
// dashboards and alerts written for prom-client (and client_golang's process collector) work
// unchanged: CPU, memory, file descriptors, heap, event-loop delay, GC pauses, active resources.
// Hand-written rather than prom-client itself, which adds ~11 MiB of RSS to the agent
// (docs/observability.md). Linux values come from /proc/self, read at scrape time.
import { readdirSync, readFileSync } from 'node:fs';
import { monitorEventLoopDelay, PerformanceObserver, type ELDHistogram } from 'node:perf_hooks';
import type { Gauge, Histogram, MetricsRegistry } from './registry.js';
import type { ProcessHost } from '../process-host.js';

/**
 * Event-loop delay sampling: one timer a second, started by the first scrape. Every wake-up of an
 * idle agent costs CPU on every node: prom-client's 10 ms timer ~5 ms of CPU a second, 100 ms
 * about a quarter of the idle agent's CPU (docs/benchmarks.md); an agent nobody scrapes pays none.
 */
const EVENT_LOOP_RESOLUTION_MS = 1000;
/** prom-client's GC buckets. */
const GC_BUCKETS = [0.001, 0.01, 0.1, 1, 2, 5];

/** The kinds of perf_hooks GC entries (detail.kind), as prom-client names them. */
const GC_KINDS: Readonly<Record<number, string>> = { 1: 'minor', 2: 'major', 4: 'incremental', 8: 'weakcb' };

/** /proc/self/status fields in bytes (VmRSS, VmSize, VmData); empty off Linux. */
function procStatus(): Map<string, number> {
  const out = new Map<string, number>();
  try {
    for (const line of readFileSync('/proc/self/status', 'utf8').split('\n')) {
      const match = /^(Vm\w+):\s+(\d+) kB$/u.exec(line);
      if (match?.[1] !== undefined && match[2] !== undefined) out.set(match[1], Number(match[2]) * 1024);
    }
  } catch {
    // not Linux: these series stay empty
  }
  return out;
}

function openFds(): number | undefined {
  try {
    return readdirSync('/proc/self/fd').length - 1; // minus the descriptor reading the directory
  } catch {
    return undefined;
  }
}

function maxFds(): number | undefined {
  try {
    const match = /^Max open files\s+(\d+)/mu.exec(readFileSync('/proc/self/limits', 'utf8'));
    return match?.[1] === undefined ? undefined : Number(match[1]);
  } catch {
    return undefined;
  }
}

/** Samplers shared by every registry of the process (they measure the process, not a registry). */
let gcSampling: Set<WeakRef<Histogram>> | undefined;
let delaySampling: ELDHistogram | undefined;

/** The event-loop delay sampler, started on first use (the first scrape). */
function eventLoopDelay(): ELDHistogram {
  if (delaySampling === undefined) {
    delaySampling = monitorEventLoopDelay({ resolution: EVENT_LOOP_RESOLUTION_MS });
    delaySampling.enable();
  }
  return delaySampling;
}

function startGcSampling(): Set<WeakRef<Histogram>> {
  if (gcSampling !== undefined) return gcSampling;
  // Weak: a registry that is gone (a test's agent) takes its histogram with it.
  const gc = new Set<WeakRef<Histogram>>();
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      const detail: unknown = 'detail' in entry ? entry.detail : undefined;
      const code = typeof detail === 'object' && detail !== null && 'kind' in detail ? detail.kind : undefined;
      const kind = typeof code === 'number' ? (GC_KINDS[code] ?? 'unknown') : 'unknown';
      for (const ref of gc) {
        const histogram = ref.deref();
        if (histogram === undefined) gc.delete(ref);
        else histogram.observe({ kind }, entry.duration / 1000);
      }
    }
  });
  observer.observe({ entryTypes: ['gc'] });
  gcSampling = gc;
  return gc;
}

/** CPU time, as client_golang's process collector and prom-client name it. */
function registerCpuTime(registry: MetricsRegistry, host: ProcessHost): void {
  registry.counterFunc('process_cpu_user_seconds_total', 'Total user CPU time spent in seconds.', () => {
    return host.cpuUsage().user / 1e6;
  });
  registry.counterFunc('process_cpu_system_seconds_total', 'Total system CPU time spent in seconds.', () => {
    return host.cpuUsage().system / 1e6;
  });
  registry.counterFunc('process_cpu_seconds_total', 'Total user and system CPU time spent in seconds.', () => {
    const u = host.cpuUsage();
    return (u.user + u.system) / 1e6;
  });
}

/** The process's start time, memory (from /proc/self/status on Linux) and file descriptors. */
function registerProcessResources(registry: MetricsRegistry, startTimeSeconds: number, host: ProcessHost): void {
  registry.gauge('process_start_time_seconds', 'Start time of the process since unix epoch in seconds.', [], (g) => {
    g.set({}, startTimeSeconds);
  });
  registry.gauge('process_resident_memory_bytes', 'Resident memory size in bytes.', [], (g) => {
    g.set({}, host.residentBytes());
  });
  const status = (field: string) => (g: Gauge) => {
    const value = procStatus().get(field);
    if (value !== undefined) g.set({}, value);
  };
  registry.gauge('process_virtual_memory_bytes', 'Virtual memory size in bytes.', [], status('VmSize'));
  registry.gauge('process_heap_bytes', 'Process heap size in bytes.', [], status('VmData'));
  registry.gauge('process_open_fds', 'Number of open file descriptors.', [], (g) => {
    const n = openFds();
    if (n !== undefined) g.set({}, n);
  });
  registry.gauge('process_max_fds', 'Maximum number of open file descriptors.', [], (g) => {
    const n = maxFds();
    if (n !== undefined) g.set({}, n);
  });
}

/** The V8 heap and external memory, from process.memoryUsage(). */
function registerHeap(registry: MetricsRegistry, host: ProcessHost): void {
  const memory = (read: (m: NodeJS.MemoryUsage) => number) => (g: Gauge) => {
    g.set({}, read(host.memoryUsage()));
  };
  registry.gauge(
    'nodejs_heap_size_total_bytes',
    'Process heap size from Node.js in bytes.',
    [],
    memory((m) => m.heapTotal),
  );
  registry.gauge(
    'nodejs_heap_size_used_bytes',
    'Process heap size used from Node.js in bytes.',
    [],
    memory((m) => m.heapUsed),
  );
  registry.gauge(
    'nodejs_external_memory_bytes',
    'Node.js external memory size in bytes.',
    [],
    memory((m) => m.external),
  );
  // No nodejs_heap_space_*: they need node:v8, whose import alone costs ~2 MiB and ~50 ms.
}

type LagWindow = Record<'min' | 'max' | 'mean' | 'stddev' | 'p50' | 'p90' | 'p99', number>;

/**
 * Event-loop delay since the previous scrape (the sampler is reset after each, as prom-client
 * does); the first scrape starts the sampler and reports zeros. The lag gauge reads the window the
 * others report.
 */
function registerEventLoopLag(registry: MetricsRegistry): void {
  let window: LagWindow = { min: 0, max: 0, mean: 0, stddev: 0, p50: 0, p90: 0, p99: 0 };
  const seconds = (ns: number): number => (Number.isFinite(ns) ? ns / 1e9 : 0);
  registry.gauge(
    'nodejs_eventloop_lag_seconds',
    'Lag of event loop in seconds (mean since the last scrape).',
    [],
    (g) => {
      const delay = eventLoopDelay();
      window = {
        min: seconds(delay.min),
        max: seconds(delay.max),
        mean: seconds(delay.mean),
        stddev: seconds(delay.stddev),
        p50: seconds(delay.percentile(50)),
        p90: seconds(delay.percentile(90)),
        p99: seconds(delay.percentile(99)),
      };
      if (delay.count > 0) delay.reset();
      g.set({}, window.mean);
    },
  );
  for (const [stat, help] of [
    ['min', 'The minimum recorded event loop delay.'],
    ['max', 'The maximum recorded event loop delay.'],
    ['mean', 'The mean of the recorded event loop delays.'],
    ['stddev', 'The standard deviation of the recorded event loop delays.'],
    ['p50', 'The 50th percentile of the recorded event loop delays.'],
    ['p90', 'The 90th percentile of the recorded event loop delays.'],
    ['p99', 'The 99th percentile of the recorded event loop delays.'],
  ] as const) {
    registry.gauge(`nodejs_eventloop_lag_${stat}_seconds`, help, [], (g) => {
      g.set({}, window[stat]);
    });
  }
}

function registerGcDuration(registry: MetricsRegistry, gc: Set<WeakRef<Histogram>>): void {
  const gcDuration = registry.histogram(
    'nodejs_gc_duration_seconds',
    'Garbage collection duration by kind, one of major, minor, incremental or weakcb.',
    ['kind'],
    GC_BUCKETS,
  );
  gc.add(new WeakRef(gcDuration));
}

/** What keeps the event loop alive, and the Node.js version. */
function registerRuntimeInfo(registry: MetricsRegistry, host: ProcessHost): void {
  registry.gauge(
    'nodejs_active_resources',
    'Number of active resources that are currently keeping the event loop alive, grouped by async resource type.',
    ['type'],
    (g) => {
      g.reset();
      const counts = new Map<string, number>();
      for (const type of host.activeResources()) counts.set(type, (counts.get(type) ?? 0) + 1);
      for (const [type, n] of counts) g.set({ type }, n);
    },
  );
  registry.gauge('nodejs_active_resources_total', 'Total number of active resources.', [], (g) => {
    g.set({}, host.activeResources().length);
  });
  const [major = '', minor = '', patch = ''] = host.nodeVersion.replace(/^v/u, '').split('.');
  registry.gauge('nodejs_version_info', 'Node.js version info.', ['version', 'major', 'minor', 'patch'], (g) => {
    g.set({ version: host.nodeVersion, major, minor, patch }, 1);
  });
}

export function registerProcessMetrics(
  registry: MetricsRegistry,
  options: { readonly startTimeSeconds: number; readonly host: ProcessHost },
): void {
  const { host } = options;
  const gc = startGcSampling();
  // In this order: /metrics lists the series in the order they are registered.
  registerCpuTime(registry, host);
  registerProcessResources(registry, options.startTimeSeconds, host);
  registerHeap(registry, host);
  registerEventLoopLag(registry);
  registerGcDuration(registry, gc);
  registerRuntimeInfo(registry, host);
}
