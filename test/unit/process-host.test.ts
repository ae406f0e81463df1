// Core reads the process only through the ProcessHost port (src/core/process-host.ts): what the
// metrics, the admin socket and the cleaner do to the process comes from the host they are given.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startAdminServer } from '../../src/core/agent/admin-server.js';
import { ProcessCleaner } from '../../src/core/cleanup/cleaner.js';
import { MemoryLogger } from '../../src/core/log.js';
import { createAgentMetrics } from '../../src/core/metrics/agent-metrics.js';
import { MetricsRegistry } from '../../src/core/metrics/registry.js';
import { nodeProcessHost } from '../../src/core/process-host.js';
import type { ProcessHost } from '../../src/core/process-host.js';
import { FakeAdminTarget } from '../support/fake-admin.js';

/** A host with fixed readings that records what is done to the process, and does it for real. */
function recordingHost(): ProcessHost & { readonly calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    pid: 4242,
    nodeVersion: 'v99.8.7',
    cpuUsage: () => ({ user: 3_000_000, system: 1_000_000 }),
    memoryUsage: () => ({ rss: 7_000, heapTotal: 6_000, heapUsed: 5_000, external: 4_000, arrayBuffers: 3_000 }),
    residentBytes: () => 7_000,
    activeResources: () => ['Timeout', 'Timeout', 'TCPWRAP'],
    umask: (mask) => {
      calls.push(`umask ${mask.toString(8)}`);
      return nodeProcessHost.umask(mask);
    },
    kill: (pid, signal) => {
      calls.push(`kill ${pid < 0 ? 'group' : 'pid'} ${String(signal)}`);
      nodeProcessHost.kill(pid, signal);
    },
  };
}

describe('the process host port', () => {
  let dir = '';
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'lvp-host-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('process and runtime metrics read the host they are given', () => {
    const text = createAgentMetrics(new MetricsRegistry(), {
      startTimeSeconds: 1,
      host: recordingHost(),
    }).registry.render();
    for (const line of [
      'process_cpu_user_seconds_total 3',
      'process_cpu_system_seconds_total 1',
      'process_cpu_seconds_total 4',
      'process_resident_memory_bytes 7000',
      'nodejs_heap_size_used_bytes 5000',
      'nodejs_active_resources{type="Timeout"} 2',
      'nodejs_active_resources_total 3',
      'nodejs_version_info{version="v99.8.7",major="99",minor="8",patch="7"} 1',
    ])
      assert.ok(text.split('\n').includes(line), `${line} in\n${text}`);
  });

  it('the admin socket narrows the umask through the host around its bind, and restores it', async () => {
    const host = recordingHost();
    const previous = nodeProcessHost.umask(0o022);
    nodeProcessHost.umask(previous);
    const server = await startAdminServer({
      socketPath: join(dir, 'admin', 'admin.sock'),
      target: new FakeAdminTarget(),
      logger: new MemoryLogger(),
      host,
    });
    await server.close();
    assert.deepEqual(host.calls, ['umask 177', `umask ${previous.toString(8)}`]);
  });

  it('an aborted cleaner signals its process group through the host', async () => {
    const host = recordingHost();
    const abort = new AbortController();
    // The command says when it runs, so there is a group to end.
    let running: () => void = () => undefined;
    const started = new Promise<void>((resolve) => (running = resolve));
    const cleaning = new ProcessCleaner({ PATH: process.env['PATH'] }, { host }).cleanBlock(
      '/dev/fake',
      ['sh', '-c', 'echo running; exec sleep 1000'],
      {
        signal: abort.signal,
        onOutput: () => {
          running();
        },
      },
    );
    await started;
    abort.abort();
    await assert.rejects(cleaning, /aborted/u);
    assert.deepEqual(host.calls.slice(0, 2), ['kill group 0', 'kill group SIGTERM']);
  });
});
