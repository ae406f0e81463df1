// `rollout status` on a staged rollout and `rollout pause|resume|abort|promote`, each run as a
// process against the real apiserver. The staged copies are written here as the controller writes
// them; a stand-in controller (decide on the stored state, as the real one does) carries the
// requests out, so --wait has something to wait for.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { Ajv } from 'ajv';
import { statusLease, statusLeaseName, statusSelector } from '../../../src/core/fleet/applied-state.js';
import { loadKubeconfig } from '../../../src/core/kube/kubeconfig.js';
import type { ConfigMap } from '../../../src/core/kube/objects.js';
import { RestCluster } from '../../../src/core/kube/rest-cluster.js';
import { decide } from '../../../src/core/staged-rollout/decide.js';
import { contentOf, stagedConfigMap, stateAnnotation } from '../../../src/core/staged-rollout/objects.js';
import { ROLLOUT_REQUEST_ANNOTATION, requestOf, stateOf } from '../../../src/core/rollout-state/annotations.js';
import { DEFAULT_POLICY } from '../../../src/core/staged-rollout/policy.js';
import type { RolloutState } from '../../../src/core/rollout-state/state.js';
import type { RequestJson } from '../../../src/render/rollout-request.js';
import type { RolloutJson } from '../../../src/render/rollout-status.js';
import { REPO_ROOT, runCli } from '../../support/cli.js';
import { requireTestControlPlane } from '../../support/test-cluster.js';

const suffix = Math.random().toString(36).slice(2, 8);
const NS = 'default';
const INSTANCE = `lvp-rr-${suffix}`;
const NAME = `${INSTANCE}-config`;
const POOL_LABEL = 'lvp-rollout-requests-test';

void describe('staged rollout status and requests, as processes against the real apiserver', () => {
  let cluster: RestCluster;
  let kubeconfig = '';
  const nodes = [`rr-a-${suffix}`, `rr-b-${suffix}`];
  const stableData = { storageClassMap: 'c:\n  hostDir: /mnt/c\n  mountDir: /mnt/c\n' };
  const candidateData = { storageClassMap: `${stableData.storageClassMap}d:\n  hostDir: /mnt/d\n  mountDir: /mnt/d\n` };
  const cm = (data: Record<string, string>): ConfigMap => ({ metadata: { name: NAME, namespace: NS }, data });
  const stable = contentOf(NS, NAME, cm(stableData));
  const candidate = contentOf(NS, NAME, cm(candidateData));
  const ref = (c: typeof stable) => ({ fingerprint: c.fingerprint, ...(c.hash !== undefined ? { hash: c.hash } : {}) });
  let controller: { stop: boolean; done: Promise<void> } | undefined;

  const cli = (args: readonly string[]): ReturnType<typeof runCli> =>
    runCli([...args], { env: { KUBECONFIG: kubeconfig }, timeoutMs: 60_000 });
  const request = (action: string, args: readonly string[] = []) =>
    cli(['rollout', action, '-n', NS, '--name', INSTANCE, ...args]);

  async function readCandidate(): Promise<ConfigMap> {
    return cluster.configMaps.get(`${NAME}-candidate`, { namespace: NS });
  }

  async function phaseNow(): Promise<string | undefined> {
    const decoded = stateOf(await readCandidate());
    return decoded?.ok === true ? decoded.state.phase : undefined;
  }

  async function writeState(state: RolloutState): Promise<void> {
    const existing = await readCandidate().catch(() => undefined);
    const object = stagedConfigMap(NS, NAME, 'candidate', candidateData, stateAnnotation(state), existing);
    if (existing === undefined) await cluster.configMaps.create(object, { namespace: NS });
    else await cluster.configMaps.update(object, { namespace: NS });
  }

  /** A stand-in controller: carries out each request as decide says, every 100 ms. */
  function startController(): void {
    const handle = { stop: false, done: Promise.resolve() };
    handle.done = (async () => {
      while (!handle.stop) {
        const current = await readCandidate();
        const pending = requestOf(current);
        const decoded = stateOf(current);
        if (pending !== undefined && decoded?.ok === true) {
          const decision = decide({
            now: Date.now(),
            policy: DEFAULT_POLICY,
            desired: candidate,
            stable: ref(stable),
            state: decoded.state,
            request: pending,
            nodes: nodes.map((name) => ({ name })),
            reports: new Map(),
          });
          const annotations = Object.fromEntries(
            Object.entries(current.metadata.annotations ?? {}).filter(([k]) => k !== ROLLOUT_REQUEST_ANNOTATION),
          );
          await cluster.configMaps.update(
            {
              ...current,
              metadata: {
                ...current.metadata,
                annotations: {
                  ...annotations,
                  ...(decision.state !== undefined ? stateAnnotation(decision.state.state) : {}),
                },
              },
            },
            { namespace: NS },
          );
        }
        await delay(100);
      }
    })();
    controller = handle;
  }

  async function stopController(): Promise<void> {
    if (controller === undefined) return;
    controller.stop = true;
    await controller.done;
    controller = undefined;
  }

  async function validator(schema: string) {
    const ajv = new Ajv({ allErrors: true, strict: false });
    const validate = ajv.compile(JSON.parse(await readFile(join(REPO_ROOT, 'docs/schemas', schema), 'utf8')) as object);
    return (value: unknown): void => {
      assert.ok(validate(value), ajv.errorsText(validate.errors));
    };
  }

  before(async () => {
    kubeconfig = requireTestControlPlane().kubeconfigPath;
    cluster = new RestCluster({ connection: await loadKubeconfig(kubeconfig) });
    await cluster.configMaps.create(
      { metadata: { name: NAME, namespace: NS }, data: candidateData },
      { namespace: NS },
    );
    await cluster.configMaps.create(stagedConfigMap(NS, NAME, 'stable', stableData, {}, undefined), {
      namespace: NS,
    });
    const now = Date.now();
    for (const [i, node] of nodes.entries()) {
      await cluster.nodes.create({ metadata: { name: node, labels: { [POOL_LABEL]: suffix } } });
      await cluster.leases.create(
        statusLease(
          { name: statusLeaseName(INSTANCE, node), namespace: NS, instance: INSTANCE },
          {
            node,
            appliedHash: (i === 0 ? candidate.hash : stable.hash) ?? '',
            generation: 1,
            result: 'applied',
            source: `staged:${NS}/${NAME}`,
            agentVersion: 'test',
          },
          now,
          180_000,
        ),
        { namespace: NS },
      );
    }
  });

  after(async () => {
    await stopController();
    for (const name of [NAME, `${NAME}-stable`, `${NAME}-candidate`])
      await cluster.configMaps.delete(name, { namespace: NS }).catch(() => undefined);
    const leases = await cluster.leases.list({ namespace: NS, labelSelector: statusSelector(INSTANCE) });
    for (const lease of leases.items) await cluster.leases.delete(lease.metadata.name, { namespace: NS });
    for (const node of nodes) await cluster.nodes.delete(node).catch(() => undefined);
    cluster.close();
  });

  void it('rollout promote without a staged rollout: exit 1, saying so', async () => {
    const r = await request('promote');
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.match(
      r.stderr,
      new RegExp(`^error: no staged rollout of configmap ${NS}/${NAME}: ${NS}/${NAME}-candidate does not exist`, 'm'),
    );
    const json = await request('promote', ['-o', 'json']);
    assert.equal(json.code, 1);
    (await validator('rollout-request.v1.schema.json'))(JSON.parse(json.stdout));
  });

  void it('rollout status shows the staged view: waves, each node against its wave’s config; exit 6 while it progresses', async () => {
    const t = Date.now();
    await writeState({
      phase: 'progressing',
      candidate: ref(candidate),
      stable: ref(stable),
      waves: [
        { name: 'canary', nodes: [nodes[0] ?? ''], size: 1 },
        { name: 'wave-1', nodes: [nodes[1] ?? ''], size: 1 },
      ],
      opened: 1,
      waveOpenedAt: t,
      bakeStartedAt: t,
      reverted: false,
      startedAt: t,
      updatedAt: t,
    });
    const status = (args: readonly string[]) =>
      cli(['rollout', 'status', '-n', NS, '--name', INSTANCE, '-l', `${POOL_LABEL}=${suffix}`, ...args]);
    const text = await status([]);
    assert.equal(text.code, 6, text.stdout + text.stderr);
    assert.match(
      text.stdout,
      /^rollout in progress \(staged, progressing\): 1 of 2 waves open; 2 of 2 nodes run the config of their wave/,
    );
    assert.match(text.stdout, /^canary +1 +yes +1 +0 +0 +opened \d+s ago, baking since \d+s ago$/m);
    assert.match(text.stdout, new RegExp(`^${nodes[1] ?? ''} +wave-1 +sha256:\\w+ +in sync`, 'm'));
    const json = await status(['-o', 'json']);
    const parsed = JSON.parse(json.stdout) as RolloutJson;
    (await validator('rollout-status.v1.schema.json'))(parsed);
    assert.equal(parsed.staged?.phase, 'progressing');
    assert.deepEqual(
      parsed.nodes.map((n) => n.expects),
      ['candidate', 'stable'],
    );
  });

  void it('rollout pause: writes the request for the current candidate (exit 0); resume is refused while it progresses', async () => {
    const r = await request('pause');
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.match(
      r.stdout,
      /^pause requested for the staged rollout of configmap .* \(candidate sha256:\w{12}, progressing\)/,
    );
    const written = requestOf(await readCandidate());
    assert.equal(written?.action, 'pause');
    assert.equal(written.candidate, candidate.fingerprint);
    assert.equal(written.by, 'lvp-test-admin', 'the kubeconfig user');
    const resume = await request('resume');
    assert.equal(resume.code, 1, resume.stdout + resume.stderr);
    assert.match(
      resume.stderr,
      /^error: cannot resume the staged rollout of .*: the rollout is progressing; only a paused or halted rollout can be resumed$/m,
    );
  });

  void it('rollout resume --wait: exit 0 once the controller carried it out', async () => {
    startController();
    try {
      // The pending pause is carried out first.
      const until = Date.now() + 10_000;
      while ((await phaseNow()) !== 'paused') {
        assert.ok(Date.now() < until, 'the stand-in controller paused the rollout');
        await delay(100);
      }
      const r = await request('resume', ['--wait', '--timeout', '20s']);
      assert.equal(r.code, 0, r.stdout + r.stderr);
      assert.match(
        r.stdout,
        /^resumed the staged rollout of configmap .*; now progressing\nmessage: resumed by lvp-test-admin\n$/,
      );
    } finally {
      await stopController();
    }
  });

  void it('rollout abort --wait -o json: the documented result; promote --wait without a controller: exit 6 at the timeout', async () => {
    startController();
    let aborted;
    try {
      aborted = await request('abort', ['--wait', '-o', 'json']);
    } finally {
      await stopController();
    }
    assert.equal(aborted.code, 0, aborted.stdout + aborted.stderr);
    const json = JSON.parse(aborted.stdout) as RequestJson;
    (await validator('rollout-request.v1.schema.json'))(json);
    assert.equal(json.outcome, 'done');
    assert.equal(json.phaseBefore, 'progressing');
    assert.equal(json.phase, 'aborted');
    const started = Date.now();
    const promote = await request('promote', ['--wait', '--timeout', '2s']);
    assert.equal(promote.code, 6, promote.stdout + promote.stderr);
    assert.ok(Date.now() - started >= 2000);
    assert.match(
      promote.stdout,
      /^promote requested for .*, not taken up within 2s: the staged rollout controller has not taken the request up/,
    );
  });
});
