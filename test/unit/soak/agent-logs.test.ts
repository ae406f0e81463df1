// The chaos soak's log keeper (test/support/soak/agent-logs.ts): the agent's container logs copied
// as they grow, kept after the kubelet removes them (a restart's garbage collection, a replaced
// pod), rotation followed, the bound held, and a violation's excerpt made of the lines of its moment.
import assert from 'node:assert/strict';
import { appendFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';

import { AgentLogKeeper, livenessKills, subjectsOf, violationExcerpt } from '../../support/soak/agent-logs.js';

const T0 = Date.parse('2026-12-05T13:00:00Z');
const cri = (atMs: number, text: string): string => `${new Date(atMs).toISOString()} stderr F ${text}\n`;

const dirs: string[] = [];
after(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function world(): { podLogs: string; out: string; logFile: (pod: string, container: string, n: number) => string } {
  const base = mkdtempSync(join(tmpdir(), 'lvp-agent-logs-test-'));
  dirs.push(base);
  const podLogs = join(base, 'pod-logs');
  mkdirSync(podLogs);
  const logFile = (pod: string, container: string, n: number): string => {
    const dir = join(podLogs, pod, container);
    mkdirSync(dir, { recursive: true });
    return join(dir, `${String(n)}.log`);
  };
  return { podLogs, out: join(base, 'kept'), logFile };
}

const keeperFor = (podLogs: string, out: string, maxBytes?: number): AgentLogKeeper =>
  new AgentLogKeeper({
    podLogsDir: podLogs,
    namespace: 'lvp',
    keepPod: (name) => name.startsWith('lvp-') || name.startsWith('cleanup-'),
    outDir: out,
    ...(maxBytes !== undefined ? { maxBytes } : {}),
  });

const texts = (keeper: AgentLogKeeper): string[] => keeper.lines(0, Infinity).map((l) => `${l.from} ${l.text}`);

describe('the soak keeps the agent logs', () => {
  it('copies whole lines as they come, of the agent and cleanup pods of its namespace only', () => {
    const { podLogs, out, logFile } = world();
    const agent = logFile('lvp_lvp-abcde_u1', 'provisioner', 0);
    writeFileSync(agent, cri(T0, 'agent started') + `${new Date(T0 + 5).toISOString()} stderr F half`);
    writeFileSync(logFile('lvp_w1-0_u2', 'box', 0), cri(T0, 'a tenant'));
    writeFileSync(logFile('other_lvp-zzz_u3', 'provisioner', 0), cri(T0, 'another namespace'));
    writeFileSync(logFile('lvp_cleanup-local-pv-1-x_u4', 'cleaner', 0), cri(T0 + 1, 'wiping /dev/loop7'));
    const keeper = keeperFor(podLogs, out);
    keeper.sweep();
    assert.deepEqual(texts(keeper), [
      'lvp-abcde/provisioner#0 agent started',
      'cleanup-local-pv-1-x/cleaner#0 wiping /dev/loop7',
    ]);
    appendFileSync(agent, ` a line\n${cri(T0 + 10, 'created PersistentVolume pv=local-pv-1')}`);
    keeper.sweep();
    keeper.sweep();
    assert.deepEqual(
      texts(keeper).filter((t) => t.startsWith('lvp-abcde')),
      [
        'lvp-abcde/provisioner#0 agent started',
        'lvp-abcde/provisioner#0 half a line',
        'lvp-abcde/provisioner#0 created PersistentVolume pv=local-pv-1',
      ],
    );
    assert.equal(keeper.kept.files, 2);
  });

  it('keeps a container log the kubelet removed, and a replaced pod’s, and follows a rotation', () => {
    const { podLogs, out, logFile } = world();
    const first = logFile('lvp_lvp-abcde_u1', 'provisioner', 0);
    writeFileSync(first, cri(T0, 'first container') + cri(T0 + 1, 'more of it'));
    const keeper = keeperFor(podLogs, out);
    keeper.sweep();
    // restarted: 1.log; the kubelet's garbage collection removes 0.log; then the pod is replaced
    writeFileSync(logFile('lvp_lvp-abcde_u1', 'provisioner', 1), cri(T0 + 2, 'second container'));
    rmSync(first);
    keeper.sweep();
    rmSync(join(podLogs, 'lvp_lvp-abcde_u1'), { recursive: true });
    const next = logFile('lvp_lvp-fghij_u9', 'provisioner', 0);
    writeFileSync(next, cri(T0 + 3, 'a new pod, a long first line to be rotated away'));
    keeper.sweep();
    // rotated: a shorter file under the same name
    writeFileSync(next, cri(T0 + 4, 'rotated'));
    keeper.sweep();
    assert.deepEqual(texts(keeper), [
      'lvp-abcde/provisioner#0 first container',
      'lvp-abcde/provisioner#0 more of it',
      'lvp-abcde/provisioner#1 second container',
      'lvp-fghij/provisioner#0 a new pod, a long first line to be rotated away',
      'lvp-fghij/provisioner#0 rotated',
    ]);
    const kept = readFileSync(join(out, 'lvp_lvp-abcde_u1', 'provisioner-0.log'), 'utf8');
    assert.equal(kept, cri(T0, 'first container') + cri(T0 + 1, 'more of it'));
  });

  it('keeps no more than its bound, and counts what it drops', () => {
    const { podLogs, out, logFile } = world();
    const line = cri(T0, 'x'.repeat(60));
    writeFileSync(logFile('lvp_lvp-abcde_u1', 'provisioner', 0), line.repeat(3));
    const keeper = keeperFor(podLogs, out, line.length * 2);
    keeper.sweep();
    assert.deepEqual(keeper.kept, { dir: out, files: 1, bytes: line.length * 2, droppedBytes: line.length, errors: 0 });
    appendFileSync(logFile('lvp_lvp-abcde_u1', 'provisioner', 0), line);
    keeper.sweep();
    assert.deepEqual(keeper.kept, {
      dir: out,
      files: 1,
      bytes: line.length * 2,
      droppedBytes: line.length * 2,
      errors: 0,
    });
    assert.equal(readFileSync(join(out, 'lvp_lvp-abcde_u1', 'provisioner-0.log'), 'utf8'), line.repeat(2));
  });

  it('counts a sweep that fails and goes on: keeping logs never stops the soak', async () => {
    const { podLogs, out, logFile } = world();
    writeFileSync(logFile('lvp_lvp-abcde_u1', 'provisioner', 0), cri(T0, 'agent started'));
    const keeper = keeperFor(podLogs, out);
    writeFileSync(join(out, 'lvp_lvp-abcde_u1'), 'a file where the pod’s directory goes');
    const stop = new AbortController();
    const running = keeper.run(stop.signal);
    const until = Date.now() + 5000;
    while (keeper.kept.errors < 1 && Date.now() < until) await new Promise((r) => setTimeout(r, 10));
    stop.abort();
    await running;
    assert.ok(keeper.kept.errors >= 1, JSON.stringify(keeper.kept));
    assert.match(keeper.kept.lastError ?? '', /EEXIST|ENOTDIR/u);
  });

  it('gives a violation the lines of its moment that name what it names, and the agent’s restarts', () => {
    const { podLogs, out, logFile } = world();
    const at = T0 + 600_000;
    writeFileSync(
      logFile('lvp_lvp-abcde_u1', 'provisioner', 0),
      cri(at - 400_000, 'cleanup done pv=local-pv-aa11 (too early: outside the window)') +
        cri(at - 60_000, 'cleanup started pv=local-pv-aa11 device=/dev/loop3') +
        cri(at - 59_000, 'created PersistentVolume pv=local-pv-bb22') +
        cri(at - 50_000, 'stopping'),
    );
    writeFileSync(
      logFile('lvp_lvp-abcde_u1', 'provisioner', 1),
      cri(at - 40_000, 'agent started node=n1') +
        cri(at - 30_000, 'cleanup done pv=local-pv-aa11') +
        cri(at + 60_000, 'deleted PersistentVolume pv=local-pv-aa11 (after the violation)'),
    );
    const keeper = keeperFor(podLogs, out);
    keeper.sweep();
    const excerpt = violationExcerpt(keeper, at, 'local-pv-aa11 was republished after 2 cleanups of /dev/loop3.');
    assert.deepEqual(
      excerpt.map((l) => l.replace(/^\S+ /u, '')),
      [
        '[lvp-abcde/provisioner#0] cleanup started pv=local-pv-aa11 device=/dev/loop3',
        '[lvp-abcde/provisioner#0] stopping',
        '[lvp-abcde/provisioner#1] agent started node=n1',
        '[lvp-abcde/provisioner#1] cleanup done pv=local-pv-aa11',
      ],
    );
    assert.equal(excerpt[0]?.split(' ')[0], new Date(at - 60_000).toISOString());
    assert.equal(violationExcerpt(keeper, at, 'nothing named', 180_000, 2).length, 2);
  });

  it('finds the kubelet’s liveness restarts of the agent in its log, and no other restart', () => {
    const kill = (time: string, pod: string): string =>
      `I1205 ${time}.555605    9452 kuberuntime_manager.go:1319] "Message for Container of pod" containerName="provisioner" ` +
      `containerStatusID={"Type":"containerd","ID":"5b16b0f8"} pod="${pod}" containerMessage="Container provisioner failed liveness probe, will be restarted"`;
    const log = [
      'I1205 13:52:17.072955   29159 prober.go:122] "Probe failed" probeType="Liveness" pod="lvp/lvp-jlmz7" containerName="provisioner"',
      kill('13:52:37', 'lvp/lvp-jlmz7'),
      // after a container died of something else (a SIGKILL): no restart for liveness
      'I1205 14:15:14.101212   29159 kubelet.go:2707] "SyncLoop (probe)" probe="liveness" status="unhealthy" pod="lvp/lvp-sbd9f"',
      kill('13:53:01', 'lvp/w8-0'),
      kill('13:53:02', 'other/lvp-x'),
      kill('14:09:17', 'lvp/lvp-sbd9f'),
    ].join('\n');
    assert.deepEqual(livenessKills(log, 'lvp', 'lvp-'), ['13:52:37 lvp/lvp-jlmz7', '14:09:17 lvp/lvp-sbd9f']);
    assert.deepEqual(livenessKills('', 'lvp', 'lvp-'), []);
  });

  it('finds the PV names, devices and paths a violation names', () => {
    assert.deepEqual(subjectsOf('local-pv-1a2b on /tmp/lvp-soak-x/blk/blk6, then /dev/loop12: (I3) local-pv-1a2b.'), [
      'local-pv-1a2b',
      '/tmp/lvp-soak-x/blk/blk6',
      '/dev/loop12',
    ]);
    assert.deepEqual(subjectsOf('the status Lease applied an unknown hash'), []);
  });
});
