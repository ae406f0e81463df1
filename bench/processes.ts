// A benchmark's forked helper processes, one role each (fleet-scale.ts: the real agents' workers,
// the emulated fleet, the rollout controller), so that each one's CPU seconds and RSS in /proc are
// its own. A role starts, says it is ready (with a value), answers named calls from the parent
// over IPC (each answer is sent through the IPC channel's serialization: plain data only), and
// stops when asked, or exits when the parent goes away: nothing outlives the benchmark.
import { fork } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { setTimeout as delay } from 'node:timers/promises';

type ToRole = { readonly type: 'call'; readonly id: number; readonly what: string } | { readonly type: 'stop' };
type FromRole =
  | { readonly type: 'ready'; readonly value: unknown }
  | { readonly type: 'reply'; readonly id: number; readonly value?: unknown; readonly error?: string }
  | { readonly type: 'stopped' }
  | { readonly type: 'failed'; readonly message: string };

/** A role once started: what it says when ready, the calls it answers, and how it stops. */
export interface RunningRole {
  readonly ready: unknown;
  readonly calls: Readonly<Record<string, () => unknown>>;
  stop(): Promise<void>;
}

const messageOf = (err: unknown): string => (err instanceof Error ? (err.stack ?? err.message) : String(err));

/** In the child: starts the role and serves the parent's calls until it asks the role to stop. */
export async function serveRole(label: string, start: () => Promise<RunningRole>): Promise<void> {
  const send = (message: FromRole): void => {
    if (process.connected) process.send?.(message);
  };
  const disconnect = (): void => {
    if (process.connected) process.disconnect();
  };
  // The parent gone (it failed, or was stopped): the role goes too.
  process.once('disconnect', () => process.exit(0));
  try {
    const role = await start();
    process.on('message', (raw) => {
      const message = raw as ToRole;
      if (message.type === 'stop') {
        void role.stop().finally(() => {
          send({ type: 'stopped' });
          disconnect();
        });
        return;
      }
      void (async () => {
        try {
          send({ type: 'reply', id: message.id, value: await role.calls[message.what]?.() });
        } catch (err) {
          send({ type: 'reply', id: message.id, error: messageOf(err) });
        }
      })();
    });
    send({ type: 'ready', value: role.ready });
  } catch (err) {
    const message = messageOf(err);
    console.error(`[${label}] ${message}`);
    send({ type: 'failed', message });
    disconnect();
  }
}

/** In the parent: one forked role. */
export interface RoleHandle {
  readonly label: string;
  readonly child: ChildProcess;
  /** Resolves with the role's ready value; rejects if it failed or exited first. */
  readonly ready: Promise<unknown>;
  /** Asks the role `what`; resolves with its answer. */
  call(what: string): Promise<unknown>;
  /** Asks it to stop (30 s at most, then kills it). */
  stop(): Promise<void>;
}

/** Forks `script` with `args` (which select the role) and an IPC channel. */
export function forkRole(script: string, args: readonly string[], label: string): RoleHandle {
  const child = fork(script, [...args], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const replies = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  let nextId = 0;
  let stopped: (() => void) | undefined;
  let readyResolve: (value: unknown) => void = () => undefined;
  let readyReject: (err: Error) => void = () => undefined;
  const ready = new Promise<unknown>((resolve, reject) => {
    readyResolve = resolve;
    readyReject = reject;
  });
  child.on('message', (raw) => {
    const message = raw as FromRole;
    if (message.type === 'ready') readyResolve(message.value);
    else if (message.type === 'failed') readyReject(new Error(`${label} failed: ${message.message}`));
    else if (message.type === 'stopped') stopped?.();
    else {
      const waiting = replies.get(message.id);
      replies.delete(message.id);
      if (message.error !== undefined) waiting?.reject(new Error(`${label}: ${message.error}`));
      else waiting?.resolve(message.value);
    }
  });
  child.on('exit', (code) => {
    readyReject(new Error(`${label} exited (${String(code)}) before it was ready`));
    for (const w of replies.values()) w.reject(new Error(`${label} exited (${String(code)})`));
    replies.clear();
  });
  // A role that died: its exit rejects what waits on it; a send racing its exit is no further news.
  child.on('error', () => undefined);
  const running = (): boolean => child.exitCode === null && child.signalCode === null;
  return {
    label,
    child,
    ready,
    call: (what) =>
      new Promise((resolve, reject) => {
        if (!running() || !child.connected) {
          reject(new Error(`${label} is not running`));
          return;
        }
        const id = nextId++;
        replies.set(id, { resolve, reject });
        child.send({ type: 'call', id, what } satisfies ToRole);
      }),
    stop: async () => {
      if (!running() || !child.connected) return;
      const done = new Promise<void>((resolve) => (stopped = resolve));
      child.send({ type: 'stop' } satisfies ToRole);
      await Promise.race([done, delay(30_000)]);
      if (running()) child.kill();
    },
  };
}
