// The provisioner image that scripts/build-image.sh builds from the Dockerfile with podman, for the
// tests that run it: where it is (LVP_IMAGE, the script's JSON line, when the test runner passes it;
// else the script is run here: cached by content, a few seconds when nothing changed), and
// containers that never outlive a test: each one is named, tracked and removed with `podman rm -f`
// by a Cleanup step, which also runs when the test process exits or is interrupted.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { REPO_ROOT } from './cli.js';
import type { Cleanup } from './real-node.js';

/** The last stdout line of scripts/build-image.sh. */
export interface BuiltImage {
  /** The image reference in podman's storage, e.g. localhost/local-volume-provisioner-ts:0.1.0-test. */
  readonly image: string;
  readonly id: string;
  /** The image as an OCI archive (`podman save --format oci-archive`), for containerd. */
  readonly archive: string;
  /** Bytes, as `podman image inspect` reports them (uncompressed layers). */
  readonly size: number;
  readonly archiveSize: number;
  /** The stand-in for node:24-bookworm-slim the Dockerfile's FROM lines find in podman's storage. */
  readonly base: string;
  readonly baseId: string;
  readonly key: string;
  /** podman and the global flags this host needs (`--runtime runc` where crun refuses cgroup v1). */
  readonly podman: readonly string[];
  /** Flags every `podman run` needs here (`--ulimit` where root lacks CAP_SYS_RESOURCE). */
  readonly runArgs: readonly string[];
}

/** The environment variable through which the test runner passes the built image (JSON). */
export const IMAGE_ENV = 'LVP_IMAGE';
export const BUILD_IMAGE_SCRIPT = join(REPO_ROOT, 'scripts/build-image.sh');

const isStringArray = (v: unknown): v is string[] => Array.isArray(v) && v.every((s) => typeof s === 'string');

export function parseBuiltImage(text: string): BuiltImage {
  const v = JSON.parse(text) as Record<string, unknown>;
  for (const key of ['image', 'id', 'archive', 'base', 'baseId', 'key']) {
    assert.equal(typeof v[key], 'string', `built image: "${key}" is a string in ${text}`);
  }
  for (const key of ['size', 'archiveSize']) {
    assert.equal(typeof v[key], 'number', `built image: "${key}" is a number in ${text}`);
  }
  assert.ok(isStringArray(v['podman']) && v['podman'].length > 0, `built image: "podman" in ${text}`);
  assert.ok(isStringArray(v['runArgs']), `built image: "runArgs" in ${text}`);
  return v as unknown as BuiltImage;
}

/** The image from LVP_IMAGE, else from running scripts/build-image.sh (its log goes to stderr). */
export function builtImage(): BuiltImage {
  const fromEnv = process.env[IMAGE_ENV];
  if (fromEnv !== undefined && fromEnv !== '') return parseBuiltImage(fromEnv);
  const r = spawnSync('bash', [BUILD_IMAGE_SCRIPT], {
    stdio: ['ignore', 'pipe', 'inherit'],
    encoding: 'utf8',
    timeout: 40 * 60_000,
  });
  if (r.error) throw r.error;
  assert.equal(r.status, 0, `scripts/build-image.sh failed (exit ${String(r.status)}); its log is above`);
  return parseBuiltImage(r.stdout.trim().split('\n').pop() ?? '');
}

export interface PodmanResult {
  readonly status: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

export interface RunOptions {
  /** Another image (reference or id) than the built one, e.g. its base. */
  readonly image?: string;
  /** Replaces the image's ENTRYPOINT (as a Job's `command` does). */
  readonly entrypoint?: string;
  /** More `podman run` flags (volumes, env, devices), before the image. */
  readonly flags?: readonly string[];
  /** Kill the podman client after this long (a hang detector); the container is removed in cleanup. */
  readonly timeoutMs?: number;
}

/**
 * Containers of one test file, all named `<prefix>-<n>`, all started with `--network none` and the
 * host's run flags. Every name is removed (`podman rm -f`) by the Cleanup step registered here,
 * unless its `podman run --rm` returned normally (podman removed it then).
 */
export class Containers {
  readonly prefix = `lvp-image-test-${Math.random().toString(36).slice(2, 8)}`;
  private count = 0;
  private readonly live = new Set<string>();

  constructor(
    readonly image: BuiltImage,
    cleanup: Cleanup,
  ) {
    cleanup.defer(`remove the containers ${this.prefix}-*`, () => {
      this.removeAll();
    });
  }

  /** podman (with the host's global flags), to completion. */
  podman(args: readonly string[], timeoutMs = 120_000): PodmanResult {
    const [command = 'podman', ...global] = this.image.podman;
    const r = spawnSync(command, [...global, ...args], {
      encoding: 'utf8',
      timeout: timeoutMs,
      killSignal: 'SIGKILL',
      maxBuffer: 64 * 2 ** 20,
    });
    if (r.error && r.status === null && r.signal === null) throw r.error;
    return { status: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr };
  }

  private newName(): string {
    this.count += 1;
    const name = `${this.prefix}-${String(this.count)}`;
    this.live.add(name);
    return name;
  }

  private runArgs(name: string, options: RunOptions): string[] {
    return [
      '--name',
      name,
      '--network',
      'none',
      ...this.image.runArgs,
      ...(options.entrypoint === undefined ? [] : ['--entrypoint', options.entrypoint]),
      ...(options.flags ?? []),
      // By id: the tag names whichever checkout's build ran last on this machine.
      options.image ?? this.image.id,
    ];
  }

  /** `podman run --rm <image> <args>` to completion (asynchronous, so several can run at once). */
  run(args: readonly string[], options: RunOptions = {}): Promise<PodmanResult> {
    const name = this.newName();
    const [command = 'podman', ...global] = this.image.podman;
    return new Promise((resolve, reject) => {
      const child = spawn(command, [...global, 'run', '--rm', ...this.runArgs(name, options), ...args], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
      child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
      }, options.timeoutMs ?? 120_000);
      child.on('error', (error) => {
        clearTimeout(timer);
        reject(error);
      });
      child.on('close', (status, signal) => {
        clearTimeout(timer);
        // A normal return of `run --rm`: podman removed the container.
        if (status !== null) this.live.delete(name);
        resolve({ status, signal, stdout, stderr });
      });
    });
  }

  /** `podman run -d`: starts a container in the background; returns its name. */
  start(args: readonly string[], options: RunOptions = {}): string {
    const name = this.newName();
    const r = this.podman(['run', '--detach', ...this.runArgs(name, options), ...args], options.timeoutMs);
    assert.equal(r.status, 0, `podman run --detach ${args.join(' ')}: ${r.stderr}`);
    return name;
  }

  /** `podman exec <name> <args>` to completion. */
  exec(name: string, args: readonly string[], timeoutMs = 60_000): PodmanResult {
    return this.podman(['exec', name, ...args], timeoutMs);
  }

  /** `podman rm -f` (a running container gets SIGKILL after `--time`, default 0 s here). */
  remove(name: string): void {
    const r = this.podman(['rm', '--force', '--ignore', '--time', '0', name]);
    if (r.status !== 0) throw new Error(`podman rm -f ${name}: ${r.stderr}`);
    this.live.delete(name);
  }

  removeAll(): void {
    const names = [...this.live];
    if (names.length === 0) return;
    const r = this.podman(['rm', '--force', '--ignore', '--time', '0', ...names]);
    if (r.status !== 0) throw new Error(`podman rm -f ${names.join(' ')}: ${r.stderr}`);
    this.live.clear();
  }

  /** The names of the containers of this prefix podman still has, running or not. */
  leftovers(): string[] {
    const r = this.podman(['ps', '--all', '--filter', `name=^${this.prefix}-`, '--format', '{{.Names}}']);
    assert.equal(r.status, 0, r.stderr);
    return r.stdout.split('\n').filter((l) => l !== '');
  }
}
