// /metrics of a real `provisioner run` process (the sandbox: no cluster needed), parsed as text
// format 0.0.4: upstream's series, the process and Node.js runtime series under prom-client's
// names and types (what operators' dashboards query), and a GC observed under load.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { CLI } from '../../support/cli.js';
import { parsePrometheusText } from '../../support/prom-text.js';

describe('/metrics of provisioner run (process)', () => {
  it('is valid text format 0.0.4 with the process and runtime series operators expect', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'lvp-metrics-'));
    const child = spawn(
      process.execPath,
      [CLI, 'run', '--sandbox', dir, '--listen-address', '127.0.0.1:0', '--log-format', 'json'],
      // The image's young generation (Dockerfile NODE_OPTIONS), so that scrapes soon fill it.
      {
        stdio: ['ignore', 'ignore', 'pipe'],
        env: { ...process.env, MY_NODE_NAME: '', NODE_OPTIONS: '--max-semi-space-size=1' },
      },
    );
    let stderr = '';
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
    const listen = new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => {
        reject(new Error(`no "agent started" line within 20 s:\n${stderr}`));
      }, 20_000);
      child.stderr.setEncoding('utf8').on('data', (d: string) => {
        stderr += d;
        const match = /"msg":"agent started".*?"listen":"([^"]+)"/u.exec(stderr);
        if (match?.[1] !== undefined) {
          clearTimeout(timer);
          resolve(match[1]);
        }
      });
    });
    try {
      const address = await listen;
      const scrape = async (): Promise<{ type: string | null; text: string }> => {
        const res = await fetch(`http://${address}/metrics`);
        assert.equal(res.status, 200);
        return { type: res.headers.get('content-type'), text: await res.text() };
      };
      // The event-loop sampler starts at the first scrape (an agent nobody scrapes runs no timer for
      // it), so the first scrape has nothing recorded.
      const lag = (text: string, stat: string): number =>
        parsePrometheusText(text).get(`nodejs_eventloop_lag_${stat}_seconds`)?.samples[0]?.value ?? NaN;
      assert.equal(lag((await scrape()).text, 'max'), 0);
      // A stopped process is an event loop blocked for that long: the next scrape sees it. The
      // sampler's first tick only sets its reference time, so the stop comes after that tick.
      await new Promise((r) => setTimeout(r, 1500));
      child.kill('SIGSTOP');
      await new Promise((r) => setTimeout(r, 2500));
      child.kill('SIGCONT');
      await new Promise((r) => setTimeout(r, 1500));
      assert.ok(lag((await scrape()).text, 'max') >= 1, 'the stop is in the event-loop delay');
      const { type, text } = await scrape();
      assert.equal(type, 'text/plain; version=0.0.4; charset=utf-8');
      const families = parsePrometheusText(text);
      const expected: Record<string, string> = {
        local_volume_provisioner_persistentvolume_discovery_total: 'counter',
        local_volume_provisioner_apiserver_requests_total: 'counter',
        process_cpu_seconds_total: 'counter',
        process_start_time_seconds: 'gauge',
        process_resident_memory_bytes: 'gauge',
        process_open_fds: 'gauge',
        process_max_fds: 'gauge',
        nodejs_eventloop_lag_seconds: 'gauge',
        nodejs_gc_duration_seconds: 'histogram',
        nodejs_heap_size_used_bytes: 'gauge',
        nodejs_heap_size_total_bytes: 'gauge',
        nodejs_version_info: 'gauge',
      };
      for (const [name, kind] of Object.entries(expected)) assert.equal(families.get(name)?.type, kind, name);
      const first = (name: string): number => families.get(name)?.samples[0]?.value ?? NaN;
      assert.ok(first('process_open_fds') >= 3 && first('process_open_fds') < first('process_max_fds'));
      assert.ok(first('process_resident_memory_bytes') > 10 * 2 ** 20);
      assert.ok(first('nodejs_heap_size_used_bytes') <= first('nodejs_heap_size_total_bytes'));
      assert.ok(Math.abs(first('process_start_time_seconds') - Date.now() / 1000) < 120);
      assert.ok(first('nodejs_eventloop_lag_seconds') >= 0 && first('nodejs_eventloop_lag_seconds') < 1);
      assert.equal(families.get('nodejs_version_info')?.samples[0]?.labels['version'], process.version);
      // Every scrape allocates (the text, the HTTP exchange): scraping until the young generation
      // fills observes a collection. The observer starts with the agent, so start-up's own
      // collections (before it, or none on the lean path) cannot be relied on.
      const gcCount = (f: typeof families): number =>
        f
          .get('nodejs_gc_duration_seconds')
          ?.samples.filter((s) => s.name === 'nodejs_gc_duration_seconds_count')
          .reduce((n, s) => n + s.value, 0) ?? 0;
      let collections = gcCount(families);
      for (let i = 0; i < 200 && collections === 0; i++)
        collections = gcCount(parsePrometheusText((await scrape()).text));
      assert.ok(collections > 0, 'GC pauses observed');
    } finally {
      child.kill('SIGTERM');
      assert.equal(await exited, 0, stderr);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
