// The staged source on the in-memory cluster: which copy a node reads (the candidate only in an
// opened wave of an active, not reverted rollout; the stable copy only as the state names it), what
// it asks the API (each copy by name: what the Role's resourceNames allow), the return to stable
// passing the reload guard, what the status and the positions name, the start-up wait for the
// stable copy and the fallback directory, and the probe.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { systemClock } from '../../../src/core/clock.js';
import { ConfigSourceError } from '../../../src/core/errors.js';
import { GUARDED_IMPACTS } from '../../../src/core/config/reload-guard.js';
import { parseRequestedConfigSource, sourceLabel } from '../../../src/core/config/source/port.js';
import type { ConfigSourceStatus, SourceRead } from '../../../src/core/config/source/port.js';
import { StagedConfigSource } from '../../../src/core/config/source/staged.js';
import type { StagedSourceOptions } from '../../../src/core/config/source/staged.js';
import { KubeApiError } from '../../../src/core/kube/cluster.js';
import type { ResourceClient, WatchEvent } from '../../../src/core/kube/cluster.js';
import { MemoryCluster } from '../../../src/core/kube/memory/memory-cluster.js';
import type { ConfigMap } from '../../../src/core/kube/objects.js';
import { MemoryLogger } from '../../../src/core/log.js';
import { writeConfigMapVolume } from '../../support/configmap-volume.js';
import { cuttable } from '../../support/cuttable.js';
import { waitFor } from '../../support/eventually.js';
import { revertedState, rolloutState, writeStaged } from '../../support/staged-objects.js';
import { contentOf } from '../../../src/core/staged-rollout/objects.js';
import { encodeRolloutState } from '../../../src/core/rollout-state/state.js';
import type { RolloutState } from '../../../src/core/rollout-state/state.js';

const NS = 'kube-system';
const CM = 'lvp-config';
const CLASS = (extra = ''): string => `fast:\n  hostDir: /mnt/fast\n  mountDir: /mnt/fast\n${extra}`;
const STABLE = { storageClassMap: CLASS() };
const CANDIDATE = { storageClassMap: CLASS('  fsType: ext4\n') };

interface Setup {
  readonly memory: MemoryCluster;
  readonly down: { value: boolean };
  readonly logger: MemoryLogger;
  readonly source: StagedConfigSource;
  /** listener.changed calls. */
  readonly changes: { count: number };
  readonly statuses: ConfigSourceStatus[];
  start(): Promise<void>;
}

function setup(
  options: Partial<Pick<StagedSourceOptions, 'nodeName' | 'fallbackPath' | 'startTimeoutMs'>> & {
    /** What the source's client is made of the in-memory one (default: as it is). */
    readonly wrap?: (client: ResourceClient<ConfigMap>) => ResourceClient<ConfigMap>;
  } = {},
): Setup {
  const memory = new MemoryCluster();
  memory.addNamespace(NS);
  const { client, down } = cuttable(options.wrap?.(memory.configMaps) ?? memory.configMaps);
  const logger = new MemoryLogger();
  const source = new StagedConfigSource({
    client,
    namespace: NS,
    name: CM,
    nodeName: options.nodeName ?? 'node-a',
    clock: systemClock,
    logger,
    startTimeoutMs: options.startTimeoutMs ?? 5_000,
    ...(options.fallbackPath !== undefined ? { fallbackPath: options.fallbackPath } : {}),
  });
  const changes = { count: 0 };
  const statuses: ConfigSourceStatus[] = [];
  return {
    memory,
    down,
    logger,
    source,
    changes,
    statuses,
    start: () =>
      source.start({
        changed: () => {
          changes.count++;
        },
        statusChanged: (s) => statuses.push(s),
      }),
  };
}

/**
 * Resolves once the source's own watch brought `written` (its cache holds that version): the
 * source chose its copy again on it, so what it reads now is its answer to that write.
 */
async function seenBySource(source: StagedConfigSource, written: ConfigMap): Promise<void> {
  const { name, resourceVersion } = written.metadata;
  await waitFor(
    () => source['reflectors'].some((r) => r.get(name)?.metadata.resourceVersion === resourceVersion),
    `the source's watch brought ${name} at version ${String(resourceVersion)}`,
  );
}

/** The path a successful read came from. */
function pathOf(read: SourceRead): string {
  assert.ok(read.ok, read.ok ? '' : read.error.message);
  return read.snapshot.source.path;
}

const copies = async (memory: MemoryCluster, state: Parameters<typeof writeStaged>[5]): Promise<void> => {
  await writeStaged(memory.configMaps, NS, CM, 'stable', STABLE);
  await writeStaged(memory.configMaps, NS, CM, 'candidate', CANDIDATE, state);
};

/** The content reference of `data` as the controller's state records it. */
function refOf(data: Readonly<Record<string, string>>): RolloutState['stable'] {
  return { fingerprint: contentOf(NS, CM, { metadata: { name: CM }, data: { ...data } }).fingerprint };
}

/** The candidate copy with `state` naming `stable` as the stable content (whatever the stable copy holds). */
async function candidateNaming(
  memory: MemoryCluster,
  state: RolloutState,
  stable: Readonly<Record<string, string>>,
): Promise<ConfigMap> {
  const raw = encodeRolloutState({ ...state, candidate: refOf(CANDIDATE), stable: refOf(stable) });
  return writeStaged(memory.configMaps, NS, CM, 'candidate', CANDIDATE, raw);
}

/** The fingerprint a read carries (a successful one). */
function fingerprintOf(read: SourceRead): string {
  assert.ok(read.ok, read.ok ? '' : read.error.message);
  return read.fingerprint;
}

/**
 * `inner` as the agent's Role lets it be used: get, list and watch of the `names` only, each list
 * and watch by a field selector on one of them (resourceNames); anything else is Forbidden.
 * `requests` records every list and watch (`list metadata.name=X`).
 */
function onlyNames(
  inner: ResourceClient<ConfigMap>,
  names: readonly string[],
  requests: string[],
): ResourceClient<ConfigMap> {
  const forbidden = (what: string): KubeApiError =>
    new KubeApiError(403, 'Forbidden', `configmaps is forbidden: ${what} (test: resourceNames ${names.join(', ')})`);
  /** Records the request; the error it gets, if any. */
  const check = (
    verb: string,
    options: { labelSelector?: string; fieldSelector?: string },
  ): KubeApiError | undefined => {
    requests.push(
      `${verb} ${options.fieldSelector ?? '-'}${options.labelSelector !== undefined ? ` label ${options.labelSelector}` : ''}`,
    );
    const named = /^metadata\.name=(.+)$/u.exec(options.fieldSelector ?? '')?.[1];
    return options.labelSelector !== undefined || named === undefined || !names.includes(named)
      ? forbidden(`${verb} ${options.fieldSelector ?? 'every ConfigMap'}`)
      : undefined;
  };
  return {
    ...inner,
    get: (name, options) =>
      names.includes(name) ? inner.get(name, options) : Promise.reject(forbidden(`get ${name}`)),
    list: (options) => {
      const refused = check('list', options ?? {});
      return refused !== undefined ? Promise.reject(refused) : inner.list(options);
    },
    watch: (options) => ({
      [Symbol.asyncIterator]: async function* (): AsyncGenerator<WatchEvent<ConfigMap>> {
        const refused = check('watch', options);
        if (refused !== undefined) throw refused;
        yield* inner.watch(options);
      },
    }),
  };
}

describe('--config-source staged:[NAMESPACE/]NAME', () => {
  it('parses like configmap:, and NAME-candidate must be a ConfigMap name too', () => {
    assert.deepEqual(parseRequestedConfigSource('staged:kube-system/lvp-config'), {
      ok: true,
      spec: { kind: 'staged', namespace: 'kube-system', name: 'lvp-config' },
    });
    assert.deepEqual(parseRequestedConfigSource('staged:lvp-config'), {
      ok: true,
      spec: { kind: 'staged', name: 'lvp-config' },
    });
    assert.equal(parseRequestedConfigSource(`configmap:${'a'.repeat(250)}`).ok, true);
    const long = parseRequestedConfigSource(`staged:${'a'.repeat(250)}`);
    assert.ok(!long.ok);
    assert.match(long.message, /is not a valid ConfigMap name to stage \(NAME-candidate must be a ConfigMap name\)/u);
    const other = parseRequestedConfigSource('stage:x');
    assert.ok(!other.ok);
    assert.match(
      other.message,
      /expected `directory`, `configmap:\[NAMESPACE\/\]NAME` or `staged:\[NAMESPACE\/\]NAME`$/u,
    );
  });
});

describe('the staged config source', () => {
  let root = '';
  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'lvp-staged-'));
  });
  after(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it('a node outside the open waves reads the stable copy; the status and the positions name it', async () => {
    const t = setup({ nodeName: 'node-b' });
    await copies(t.memory, rolloutState(1));
    await t.start();
    try {
      const read = await t.source.read();
      assert.equal(pathOf(read), `configmap:${NS}/${CM}-stable`);
      assert.ok(read.ok);
      assert.equal(read.snapshot.entries[0]?.keyPosition.file, `configmap:${NS}/${CM}-stable/storageClassMap`);
      const status = t.source.status();
      assert.deepEqual(status.configured, { kind: 'staged', namespace: NS, name: CM });
      assert.deepEqual(status.inUse, { kind: 'configmap', namespace: NS, name: `${CM}-stable`, staged: true });
      assert.equal(sourceLabel(status.configured), `staged:${NS}/${CM}`);
      assert.equal(sourceLabel(status.inUse), `configmap:${NS}/${CM}-stable (staged)`);
      assert.equal(status.stagedRole, 'stable');
      assert.equal(status.rolloutPhase, 'progressing');
      assert.equal(status.api?.object, 'present');
      assert.equal(status.api.reachable, true);
    } finally {
      await t.source.stop();
    }
  });

  it('a node of an opened wave reads the candidate', async () => {
    const t = setup({ nodeName: 'node-a' });
    await copies(t.memory, rolloutState(1));
    await t.start();
    try {
      const read = await t.source.read();
      assert.equal(pathOf(read), `configmap:${NS}/${CM}-candidate`);
      assert.ok(read.ok);
      assert.equal(read.snapshot.entries[0]?.keyPosition.file, `configmap:${NS}/${CM}-candidate/storageClassMap`);
      assert.equal(sourceLabel(t.source.status().inUse), `configmap:${NS}/${CM}-candidate (staged)`);
      assert.equal(t.source.status().stagedRole, 'candidate');
    } finally {
      await t.source.stop();
    }
  });

  for (const [what, state] of [
    ['halted and reverted', revertedState()],
    ['complete (the stable copy holds the candidate by then)', rolloutState(2, { phase: 'complete' })],
    ['aborted', rolloutState(1, { phase: 'aborted' })],
  ] as const) {
    it(`a rollout ${what}: the node of an opened wave reads the stable copy`, async () => {
      const t = setup({ nodeName: 'node-a' });
      await copies(t.memory, state);
      await t.start();
      try {
        assert.equal(pathOf(await t.source.read()), `configmap:${NS}/${CM}-stable`);
        assert.equal(t.source.status().rolloutPhase, state.phase);
      } finally {
        await t.source.stop();
      }
    });
  }

  it('a damaged rollout state: the stable copy, a warning once per resourceVersion of the candidate', async () => {
    const t = setup({ nodeName: 'node-a' });
    await copies(t.memory, '{"format":1,"phase":"progressing"');
    await t.start();
    const warnings = (): number =>
      t.logger.messages('warn').filter((m) => /staged rollout state is damaged/u.test(m)).length;
    try {
      assert.equal(pathOf(await t.source.read()), `configmap:${NS}/${CM}-stable`);
      assert.equal(t.source.status().rolloutStateError, 'not JSON');
      assert.equal(t.source.status().rolloutPhase, undefined);
      assert.equal(warnings(), 1);
      // Another event (the stable copy changes): the same candidate is not reported again.
      const before = t.changes.count;
      await writeStaged(t.memory.configMaps, NS, CM, 'stable', { storageClassMap: CLASS('  fsType: xfs\n') });
      await waitFor(() => t.changes.count > before, 'the stable change seen');
      assert.equal(warnings(), 1);
      // A new version of the candidate, still damaged: reported again.
      await writeStaged(t.memory.configMaps, NS, CM, 'candidate', CANDIDATE, '{"format":2}');
      await waitFor(() => warnings() === 2, 'the second damaged version reported');
      assert.equal(pathOf(await t.source.read()), `configmap:${NS}/${CM}-stable`);
      // Repaired: the node of the opened wave takes the candidate.
      await writeStaged(t.memory.configMaps, NS, CM, 'candidate', CANDIDATE, rolloutState(1));
      await waitFor(() => t.source.status().stagedRole === 'candidate', 'the repaired state read');
      assert.equal(t.source.status().rolloutStateError, undefined);
    } finally {
      await t.source.stop();
    }
  });

  it('probe() changes when the copy read changes (selection or version), not for the other copy', async () => {
    const t = setup({ nodeName: 'node-a' });
    await copies(t.memory, rolloutState(0));
    await t.start();
    try {
      const first = await t.source.read();
      assert.equal(pathOf(first), `configmap:${NS}/${CM}-stable`);
      const probe = await t.source.probe();
      assert.equal(first.probe, probe);
      // The state changes but this node's wave stays closed: the stable copy is still what is read.
      const before = t.changes.count;
      await writeStaged(t.memory.configMaps, NS, CM, 'candidate', CANDIDATE, rolloutState(0, { updatedAt: 2 }));
      await waitFor(() => t.changes.count > before, 'the candidate change seen');
      assert.equal(await t.source.probe(), probe);
      // The canary opens: another copy, another probe, and the listener was told.
      await writeStaged(t.memory.configMaps, NS, CM, 'candidate', CANDIDATE, rolloutState(1));
      await waitFor(() => t.source.status().stagedRole === 'candidate', 'the canary opened');
      const opened = await t.source.probe();
      assert.notEqual(opened, probe);
      assert.ok(t.statuses.some((s) => s.stagedRole === 'candidate'));
      assert.equal(pathOf(await t.source.read()), `configmap:${NS}/${CM}-candidate`);
      // The stable copy's version changes while the candidate is read: nothing for this node.
      await seenBySource(
        t.source,
        await writeStaged(t.memory.configMaps, NS, CM, 'stable', { storageClassMap: CLASS('  fsType: xfs\n') }),
      );
      assert.equal(await t.source.probe(), opened);
      // Reverted: back to the stable copy (its new version).
      await writeStaged(t.memory.configMaps, NS, CM, 'candidate', CANDIDATE, revertedState());
      await waitFor(() => t.source.status().stagedRole === 'stable', 'the revert seen');
      assert.notEqual(await t.source.probe(), opened);
      assert.notEqual(await t.source.probe(), probe);
    } finally {
      await t.source.stop();
    }
  });

  it('the stable copy not written yet: start() waits for it, then reads it', async () => {
    const t = setup({ nodeName: 'node-a' });
    let started = false;
    const starting = t.start().then(() => {
      started = true;
    });
    try {
      // Listed, and the copy is not there: start() still waits.
      await waitFor(() => t.source.status().api?.object === 'absent', 'the copies listed');
      await new Promise((resolve) => setImmediate(resolve));
      assert.equal(started, false, 'still waiting for the stable copy');
      await writeStaged(t.memory.configMaps, NS, CM, 'stable', STABLE);
      await starting;
      assert.equal(pathOf(await t.source.read()), `configmap:${NS}/${CM}-stable`);
      assert.equal(t.source.status().api?.object, 'present');
    } finally {
      await starting;
      await t.source.stop();
    }
  });

  it('the stable copy never written and no fallback: the read fails after the wait, naming the controller', async () => {
    const t = setup({ nodeName: 'node-a', startTimeoutMs: 150 });
    await t.start();
    try {
      const read = await t.source.read();
      assert.ok(!read.ok);
      assert.ok(read.error instanceof ConfigSourceError);
      assert.equal(read.error.source, `staged:${NS}/${CM}`);
      assert.match(
        read.error.message,
        /^configmap:kube-system\/lvp-config-stable does not exist: the staged rollout controller \(provisioner rollout controller\) writes it from configmap:kube-system\/lvp-config/u,
      );
      assert.equal(read.error.exitCode, 4);
    } finally {
      await t.source.stop();
    }
  });

  it('an empty mounted copy (kubelet’s optional volume of a copy never written) is no fallback: start() waits', async () => {
    const dir = join(root, 'empty');
    await writeConfigMapVolume(dir, {});
    const t = setup({ nodeName: 'node-a', fallbackPath: dir, startTimeoutMs: 150 });
    await t.start();
    try {
      assert.equal(t.source.status().inUse.kind, 'configmap');
      assert.equal(t.source.status().fallbackReason, undefined);
      const read = await t.source.read();
      assert.ok(!read.ok);
      assert.match(read.error.message, /lvp-config-stable does not exist: the staged rollout controller/u);
    } finally {
      await t.source.stop();
    }
  });

  it('the API refusing at start-up: the mounted stable copy serves until the API answers', async () => {
    const dir = join(root, 'fallback');
    await writeConfigMapVolume(dir, { storageClassMap: CLASS('  fsType: xfs\n') });
    const t = setup({ nodeName: 'node-a', fallbackPath: dir, startTimeoutMs: 30_000 });
    t.down.value = true;
    const startedAt = Date.now();
    await t.start();
    try {
      assert.ok(Date.now() - startedAt < 10_000, 'the first failure ended the wait');
      const status = t.source.status();
      assert.deepEqual(status.inUse, { kind: 'directory', path: dir });
      assert.match(status.fallbackReason ?? '', /^cannot read configmap:kube-system\/lvp-config-stable: /u);
      assert.equal(pathOf(await t.source.read()), dir);
      const fallbackProbe = await t.source.probe();
      assert.match(fallbackProbe ?? '', /^fallback:/u);

      await copies(t.memory, rolloutState(1));
      t.down.value = false;
      await waitFor(() => t.source.status().inUse.kind === 'configmap', 'the API read', 10_000);
      assert.equal(t.source.status().fallbackReason, undefined);
      assert.equal(pathOf(await t.source.read()), `configmap:${NS}/${CM}-candidate`);
      assert.notEqual(await t.source.probe(), fallbackProbe);

      // Unreachable later: the last read stays.
      const last = await t.source.read();
      t.down.value = true;
      await waitFor(() => t.source.status().api?.reachable === false, 'unreachable', 5_000);
      const kept = await t.source.read();
      assert.equal(kept.fingerprint, last.fingerprint);
      assert.equal(pathOf(kept), `configmap:${NS}/${CM}-candidate`);
      assert.equal(t.source.status().api?.stale, true);
    } finally {
      await t.source.stop();
    }
  });
});

describe('the staged source: what it asks the API, which stable copy it applies, the return to stable', () => {
  const STABLE_NAME = `${CM}-stable`;
  const CANDIDATE_NAME = `${CM}-candidate`;
  const HAND_EDIT = { storageClassMap: CLASS('  fsType: xfs\n') };
  const NEXT = { storageClassMap: CLASS('  fsType: ext3\n') };

  it('lists and watches each copy by its name (a field selector), as a Role naming only the two allows', async () => {
    const requests: string[] = [];
    const t = setup({ nodeName: 'node-a', wrap: (c) => onlyNames(c, [STABLE_NAME, CANDIDATE_NAME], requests) });
    await copies(t.memory, rolloutState(1));
    await t.start();
    try {
      assert.equal(pathOf(await t.source.read()), `configmap:${NS}/${CANDIDATE_NAME}`);
      const api = t.source.status().api;
      assert.equal(api?.reachable, true, api?.lastError);
      assert.equal(api.lastError, undefined);
      await waitFor(() => requests.filter((r) => r.startsWith('watch ')).length >= 2, 'both watches open');
      assert.deepEqual(
        [...new Set(requests)].sort(),
        [
          `list metadata.name=${CANDIDATE_NAME}`,
          `list metadata.name=${STABLE_NAME}`,
          `watch metadata.name=${CANDIDATE_NAME}`,
          `watch metadata.name=${STABLE_NAME}`,
        ],
        'no label selector, no list of every ConfigMap, never the operator’s ConfigMap',
      );
      // The watches bring the changes: reverted, the node reads the stable copy again.
      await writeStaged(t.memory.configMaps, NS, CM, 'candidate', CANDIDATE, revertedState());
      await waitFor(() => t.source.status().stagedRole === 'stable', 'the revert seen through the watch');
      assert.equal(pathOf(await t.source.read()), `configmap:${NS}/${STABLE_NAME}`);
      assert.equal(t.source.status().api?.reachable, true);
    } finally {
      await t.source.stop();
    }
  });

  it('a stable copy the state does not name is not applied until it does; a hand edit never while it names another', async () => {
    const t = setup({ nodeName: 'node-b' });
    await copies(t.memory, rolloutState(1));
    await t.start();
    try {
      const first = await t.source.read();
      assert.equal(pathOf(first), `configmap:${NS}/${STABLE_NAME}`);
      assert.equal(fingerprintOf(first), refOf(STABLE).fingerprint);
      const probe = await t.source.probe();

      // The stable copy changes before the state names it (the two watches are two streams): kept.
      const changes = t.changes.count;
      await seenBySource(t.source, await writeStaged(t.memory.configMaps, NS, CM, 'stable', NEXT));
      assert.equal(fingerprintOf(await t.source.read()), refOf(STABLE).fingerprint, 'the unnamed copy not read');
      assert.equal(await t.source.probe(), probe);
      assert.equal(t.changes.count, changes, 'nothing to reload');
      // The state names it: read.
      await writeStaged(t.memory.configMaps, NS, CM, 'candidate', CANDIDATE, rolloutState(1, { updatedAt: 2 }));
      await waitFor(
        async () => fingerprintOf(await t.source.read()) === refOf(NEXT).fingerprint,
        'the named stable copy read',
      );
      assert.ok(t.changes.count > changes);

      // A hand edit of the stable copy while the state names NEXT: never read, through later
      // changes of the candidate that still name NEXT.
      const named = await t.source.probe();
      await seenBySource(t.source, await writeStaged(t.memory.configMaps, NS, CM, 'stable', HAND_EDIT));
      await seenBySource(t.source, await candidateNaming(t.memory, rolloutState(1, { updatedAt: 3 }), NEXT));
      assert.equal(fingerprintOf(await t.source.read()), refOf(NEXT).fingerprint, 'the hand edit not read');
      assert.equal(await t.source.probe(), named);
      assert.equal(t.source.status().stagedRole, 'stable');
      // Once the state names what the copy holds (the controller adopted it), it is read.
      await candidateNaming(t.memory, rolloutState(1, { updatedAt: 4 }), HAND_EDIT);
      await waitFor(
        async () => fingerprintOf(await t.source.read()) === refOf(HAND_EDIT).fingerprint,
        'the adopted stable copy read',
      );
    } finally {
      await t.source.stop();
    }
  });

  it('the first choice at start takes the stable copy as it is, named by the state or not', async () => {
    const t = setup({ nodeName: 'node-b', startTimeoutMs: 2_000 });
    await copies(t.memory, rolloutState(1));
    await writeStaged(t.memory.configMaps, NS, CM, 'stable', HAND_EDIT);
    const startedAt = Date.now();
    await t.start();
    try {
      assert.ok(Date.now() - startedAt < 1_500, 'start() did not wait for a stable copy the state names');
      assert.equal(fingerprintOf(await t.source.read()), refOf(HAND_EDIT).fingerprint);
    } finally {
      await t.source.stop();
    }
  });

  it('the read of the stable copy returned to from the candidate passes the reload guard; no other read does', async () => {
    const t = setup({ nodeName: 'node-a' });
    await copies(t.memory, rolloutState(0));
    await t.start();
    try {
      const atStart = await t.source.read();
      assert.equal(pathOf(atStart), `configmap:${NS}/${STABLE_NAME}`);
      assert.equal(atStart.guardAllows, undefined, 'stable from the start is no return');
      await writeStaged(t.memory.configMaps, NS, CM, 'candidate', CANDIDATE, rolloutState(1));
      await waitFor(() => t.source.status().stagedRole === 'candidate', 'the canary opened');
      assert.equal((await t.source.read()).guardAllows, undefined, 'the candidate is guarded');

      // Halted and reverted: the stable copy at the version returned to is applied whatever it removes.
      await writeStaged(t.memory.configMaps, NS, CM, 'candidate', CANDIDATE, revertedState());
      await waitFor(() => t.source.status().stagedRole === 'stable', 'the revert seen');
      const reverted = await t.source.read();
      assert.equal(pathOf(reverted), `configmap:${NS}/${STABLE_NAME}`);
      assert.deepEqual(reverted.guardAllows, GUARDED_IMPACTS);
      // Read again (a forced reload, a relist): still that return.
      assert.deepEqual((await t.source.read()).guardAllows, GUARDED_IMPACTS);

      // A later change of the stable copy (named by the state: a promotion, an adoption) is a plain
      // change: guarded.
      await writeStaged(t.memory.configMaps, NS, CM, 'stable', NEXT);
      await writeStaged(t.memory.configMaps, NS, CM, 'candidate', CANDIDATE, revertedState());
      await waitFor(
        async () => fingerprintOf(await t.source.read()) === refOf(NEXT).fingerprint,
        'the next stable copy read',
      );
      assert.equal((await t.source.read()).guardAllows, undefined);
    } finally {
      await t.source.stop();
    }
  });

  it('completion or promotion (the candidate becomes the stable copy) is no return: guarded', async () => {
    const t = setup({ nodeName: 'node-a' });
    await copies(t.memory, rolloutState(0));
    await t.start();
    try {
      await writeStaged(t.memory.configMaps, NS, CM, 'candidate', CANDIDATE, rolloutState(1));
      await waitFor(() => t.source.status().stagedRole === 'candidate', 'the canary opened');
      // As the controller completes: the stable copy first, then the state (complete).
      await writeStaged(t.memory.configMaps, NS, CM, 'stable', CANDIDATE);
      await writeStaged(t.memory.configMaps, NS, CM, 'candidate', CANDIDATE, rolloutState(1, { phase: 'complete' }));
      await waitFor(() => t.source.status().stagedRole === 'stable', 'the completion seen');
      const read = await t.source.read();
      assert.equal(fingerprintOf(read), refOf(CANDIDATE).fingerprint);
      assert.equal(read.guardAllows, undefined);
    } finally {
      await t.source.stop();
    }
  });

  it('a node that never ran the candidate gets no pass on its stable reads', async () => {
    const t = setup({ nodeName: 'node-b' });
    await copies(t.memory, rolloutState(1));
    await t.start();
    try {
      await writeStaged(t.memory.configMaps, NS, CM, 'candidate', CANDIDATE, revertedState());
      await waitFor(() => t.source.status().rolloutPhase === 'halted', 'the halt seen');
      assert.equal((await t.source.read()).guardAllows, undefined);
    } finally {
      await t.source.stop();
    }
  });
});
