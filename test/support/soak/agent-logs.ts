// The agent's container logs, kept for the whole soak. The kubelet keeps a container's current and
// previous log only, and a pod's logs go with the pod: a violation found after a few kills or a pod
// replacement had no log of its moment (seed 36). The keeper copies every agent container's log as
// it grows, into a directory of its own, bounded; a violation's report then carries the lines of
// its moment that name what it names. The kubelet's own log tells the restarts it made for a
// failed liveness probe (livenessKills).
import { appendFileSync, closeSync, mkdirSync, openSync, readdirSync, readFileSync, readSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';

/** How much of one log file one sweep reads at most (the rest comes at the next sweep). */
const READ_CHUNK = 1024 * 1024;

export interface AgentLogKeeperOptions {
  /** The kubelet's --pod-logs directory: `<namespace>_<pod>_<uid>/<container>/<restart>.log`. */
  readonly podLogsDir: string;
  readonly namespace: string;
  /** The pods whose containers' logs are kept, by name (the agent's, its cleanup Jobs'). */
  readonly keepPod: (name: string) => boolean;
  /** Where the copies go: `<pod dir>/<container>-<restart>.log`, CRI lines as the kubelet wrote them. */
  readonly outDir: string;
  /** Bytes copied at most over the soak (default 256 MiB); what comes after is counted, not kept. */
  readonly maxBytes?: number;
  readonly intervalMs?: number;
}

export interface KeptLogs {
  readonly dir: string;
  readonly files: number;
  readonly bytes: number;
  /** Bytes not kept once maxBytes was reached. */
  readonly droppedBytes: number;
  /** Sweeps that failed (the soak goes on; the last error is kept). */
  readonly errors: number;
  readonly lastError?: string;
}

interface Source {
  offset: number;
  readonly out: string;
  readonly label: string;
}

/** A kept line: when the kubelet wrote it, which container it came from, the agent's text. */
export interface KeptLine {
  readonly at: number;
  readonly from: string;
  readonly text: string;
}

const CRI_LINE = /^(\S+) (?:stdout|stderr) [FP] (.*)$/u;

export class AgentLogKeeper {
  private readonly sources = new Map<string, Source>();
  private bytes = 0;
  private droppedBytes = 0;
  private errors = 0;
  private lastError: string | undefined;
  private readonly maxBytes: number;

  constructor(private readonly options: AgentLogKeeperOptions) {
    this.maxBytes = options.maxBytes ?? 256 * 1024 * 1024;
    mkdirSync(options.outDir, { recursive: true });
  }

  /** Sweeps every intervalMs until the signal, then once more. */
  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      this.sweepCounted();
      await delay(this.options.intervalMs ?? 1000, undefined, { signal }).catch(() => undefined);
    }
    this.sweepCounted();
  }

  /** A failed sweep (the kept directory unwritable, say) is counted: keeping logs never stops the soak. */
  private sweepCounted(): void {
    try {
      this.sweep();
    } catch (error) {
      this.errors += 1;
      this.lastError = error instanceof Error ? error.message : String(error);
    }
  }

  /** Copies what each agent container's log gained since the last sweep (whole lines only). */
  sweep(): void {
    for (const path of this.logFiles()) this.copyNew(path);
  }

  get kept(): KeptLogs {
    return {
      dir: this.options.outDir,
      files: this.sources.size,
      bytes: this.bytes,
      droppedBytes: this.droppedBytes,
      errors: this.errors,
      ...(this.lastError !== undefined ? { lastError: this.lastError } : {}),
    };
  }

  /** The kept lines written in [fromMs, toMs], oldest first. */
  lines(fromMs: number, toMs: number): KeptLine[] {
    const found: KeptLine[] = [];
    for (const source of this.sources.values()) {
      let text: string;
      try {
        text = readFileSync(source.out, 'utf8');
      } catch {
        continue;
      }
      for (const raw of text.split('\n')) {
        const match = CRI_LINE.exec(raw);
        if (match === null) continue;
        const at = Date.parse(match[1] ?? '');
        if (at >= fromMs && at <= toMs) found.push({ at, from: source.label, text: match[2] ?? '' });
      }
    }
    return found.sort((a, b) => a.at - b.at);
  }

  private logFiles(): string[] {
    const { podLogsDir, namespace, keepPod } = this.options;
    const files: string[] = [];
    for (const pod of listDir(podLogsDir)) {
      const [ns, name] = pod.split('_');
      if (ns !== namespace || name === undefined || !keepPod(name)) continue;
      for (const container of listDir(join(podLogsDir, pod))) {
        const dir = join(podLogsDir, pod, container);
        for (const file of listDir(dir)) if (/^\d+\.log$/u.test(file)) files.push(join(dir, file));
      }
    }
    return files;
  }

  private copyNew(path: string): void {
    const source = this.sourceOf(path);
    let chunk: Buffer;
    try {
      const size = statSync(path).size;
      if (size < source.offset) source.offset = 0; // rotated: a new file under the same name
      if (size === source.offset) return;
      chunk = readRange(path, source.offset, Math.min(size - source.offset, READ_CHUNK));
    } catch (error) {
      if (isMissing(error)) return; // removed by the kubelet's garbage collection since the listing
      throw error;
    }
    // a line still being written waits for the next sweep, unless it alone fills a chunk
    const whole = chunk.lastIndexOf(0x0a) + 1;
    const end = whole > 0 || chunk.length < READ_CHUNK ? whole : chunk.length;
    if (end === 0) return;
    source.offset += end;
    // within the bound, whole lines only: the first that does not fit, and all after it, are counted
    const room = this.maxBytes - this.bytes;
    const keep = end <= room ? end : chunk.subarray(0, Math.max(0, room)).lastIndexOf(0x0a) + 1;
    this.droppedBytes += end - keep;
    if (keep === 0) return;
    appendFileSync(source.out, chunk.subarray(0, keep));
    this.bytes += keep;
  }

  private sourceOf(path: string): Source {
    const known = this.sources.get(path);
    if (known !== undefined) return known;
    // <pod dir>/<container>/<restart>.log → <outDir>/<pod dir>/<container>-<restart>.log
    const [restart = '', container = '', pod = ''] = path.split('/').reverse();
    const podName = pod.split('_')[1] ?? pod;
    mkdirSync(join(this.options.outDir, pod), { recursive: true });
    const source: Source = {
      offset: 0,
      out: join(this.options.outDir, pod, `${container}-${restart}`),
      label: `${podName}/${container}#${restart.replace(/\.log$/u, '')}`,
    };
    this.sources.set(path, source);
    return source;
  }
}

const isMissing = (error: unknown): boolean =>
  error instanceof Error && 'code' in error && (error.code === 'ENOENT' || error.code === 'ENOTDIR');

function listDir(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

function readRange(path: string, offset: number, length: number): Buffer {
  const fd = openSync(path, 'r');
  try {
    const buffer = Buffer.alloc(length);
    const read = readSync(fd, buffer, 0, length, offset);
    return buffer.subarray(0, read);
  } finally {
    closeSync(fd);
  }
}

/** What a violation's message names that an agent log line would too: PV names, devices, soak paths. */
export function subjectsOf(message: string): string[] {
  const found = message.match(/local-pv-[0-9a-f]+|\/dev\/[\w/-]+|\/tmp\/[\w./-]+/gu) ?? [];
  return [...new Set(found.map((s) => s.replace(/[.,:;)]+$/u, '')))];
}

/** An agent's start and stop: kept in every excerpt, so that its restarts show. */
const LIFECYCLE = /\b(?:agent started|stopping|agent stopped)\b/u;

/**
 * The kept lines of a violation's moment: those of the `windowMs` before it (and 2 s after) that name
 * one of its subjects or mark an agent's start or stop (with no subject, all of them); at most
 * maxLines, the latest.
 */
export function violationExcerpt(
  keeper: AgentLogKeeper,
  atMs: number,
  message: string,
  windowMs = 180_000,
  maxLines = 60,
): string[] {
  const subjects = subjectsOf(message);
  const inWindow = keeper.lines(atMs - windowMs, atMs + 2000);
  const relevant =
    subjects.length === 0
      ? inWindow
      : inWindow.filter((l) => LIFECYCLE.test(l.text) || subjects.some((s) => l.text.includes(s)));
  return relevant.slice(-maxLines).map((l) => `${new Date(l.at).toISOString()} [${l.from}] ${l.text}`);
}

/**
 * The kubelet's log line when it restarts a container for its liveness probe. (Its `"SyncLoop
 * (probe)" probe="liveness" status="unhealthy"` line also follows a container that died of
 * anything else, the soak's own SIGKILLs included.)
 */
const LIVENESS_KILL =
  /^I\d{4} (\d{2}:\d{2}:\d{2})\.\d+ .* pod="([^"/]+)\/([^"]+)" containerMessage="Container \S+ failed liveness probe, will be restarted"$/u;

/**
 * The restarts the kubelet made because a container's liveness probe failed (from its log:
 * `HH:MM:SS namespace/pod`, in order), of the pods of a namespace whose names start with podPrefix.
 */
export function livenessKills(kubeletLog: string, namespace: string, podPrefix: string): string[] {
  const kills: string[] = [];
  for (const line of kubeletLog.split('\n')) {
    const match = LIVENESS_KILL.exec(line);
    if (match?.[2] === namespace && (match[3] ?? '').startsWith(podPrefix))
      kills.push(`${match[1] ?? ''} ${namespace}/${match[3] ?? ''}`);
  }
  return kills;
}
