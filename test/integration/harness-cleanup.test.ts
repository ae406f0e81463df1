/**
 * The control-plane harness itself: a second control plane starts next to the shared one, and
 * stop() (or an abort during start-up) leaves no process and no temp dir behind.
 */
// Lint: client-node's models are plain data classes; object literals are what its API takes.
/* eslint-disable @typescript-eslint/no-unsafe-class-instance-assignment */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';

import { CoreV1Api } from '@kubernetes/client-node';

import { CONTROLLERS, ControlPlaneStartError, startControlPlane } from '../support/control-plane.js';
import { eventually } from '../support/eventually.js';
import { kubeBinDir, requireTestControlPlane, tokenKubeConfig } from '../support/test-cluster.js';

function readCmdline(pid: number): string[] {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
  } catch {
    return [];
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Pids of every process whose command line mentions `dir` (the temp dir is in all their flags). */
function processesUsing(dir: string): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .map(Number)
    .filter((pid) => pid !== process.pid && readCmdline(pid).some((arg) => arg.includes(dir)));
}

void describe('control plane harness', () => {
  void it('starts a second control plane and stop() leaves no process or temp dir behind', async () => {
    const plane = await startControlPlane({ binDir: kubeBinDir() });
    let stopped = false;
    try {
      assert.ok(existsSync(plane.dir));
      assert.ok(existsSync(plane.kubeconfigPath));
      assert.ok(alive(plane.pids.etcd) && alive(plane.pids.apiserver));
      assert.notEqual(plane.server, requireTestControlPlane().server);

      const core = tokenKubeConfig(plane.server, plane.caFile, plane.adminToken).makeApiClient(CoreV1Api);
      const namespaces = await core.listNamespace();
      assert.ok(namespaces.items.some((ns) => ns.metadata?.name === 'default'));

      assert.deepEqual(processesUsing(plane.dir).sort(), [plane.pids.etcd, plane.pids.apiserver].sort());
      await plane.stop();
      stopped = true;
      assert.equal(alive(plane.pids.apiserver), false, 'kube-apiserver is gone');
      assert.equal(alive(plane.pids.etcd), false, 'etcd is gone');
      assert.deepEqual(processesUsing(plane.dir), []);
      assert.equal(existsSync(plane.dir), false, 'temp dir removed');
      await plane.stop(); // idempotent
    } finally {
      if (!stopped) await plane.stop();
    }
  });

  void it('with controllers: kube-controller-manager and kube-scheduler run beside it, a component that exits is started again, and stop() ends them all', async () => {
    const plane = await startControlPlane({ binDir: kubeBinDir(), controllers: true });
    let stopped = false;
    try {
      const { etcd, apiserver, controllerManager, scheduler } = plane.pids;
      assert.ok(controllerManager !== undefined && scheduler !== undefined, 'both pids reported');
      const all = [etcd, apiserver, controllerManager, scheduler];
      for (const pid of all) assert.ok(alive(pid), `pid ${pid} alive`);
      assert.deepEqual(processesUsing(plane.dir).sort(), [...all].sort());
      assert.match(readCmdline(controllerManager).join(' '), new RegExp(`--controllers=${CONTROLLERS.join(',')}`));
      // The controllers act: a new PV is made Available by the PV binder (a bare apiserver leaves it Pending).
      const core = tokenKubeConfig(plane.server, plane.caFile, plane.adminToken).makeApiClient(CoreV1Api);
      await core.createPersistentVolume({
        body: {
          metadata: { name: 'harness-pv' },
          spec: {
            capacity: { storage: '1Mi' },
            accessModes: ['ReadWriteOnce'],
            hostPath: { path: '/nonexistent/harness-pv' },
          },
        },
      });
      await eventually(
        async () =>
          (await core.readPersistentVolume({ name: 'harness-pv' })).status?.phase === 'Available' ? true : undefined,
        'the PV Available',
        60_000,
      );
      // kube-scheduler exits on purpose at times (a corrupted cache, a lost lease): started again,
      // as the kubelet of a static pod would
      process.kill(scheduler, 'SIGKILL');
      const respawned = await eventually(
        () =>
          processesUsing(plane.dir).find(
            (pid) => pid !== scheduler && readCmdline(pid).some((arg) => arg.endsWith('/kube-scheduler')),
          ),
        'kube-scheduler started again',
        30_000,
      );
      await plane.stop();
      stopped = true;
      for (const pid of [...all, respawned]) assert.equal(alive(pid), false, `pid ${pid} is gone`);
      assert.deepEqual(processesUsing(plane.dir), []);
      assert.equal(existsSync(plane.dir), false, 'temp dir removed');
    } finally {
      if (!stopped) await plane.stop();
    }
  });

  void it('an abort during start-up stops what was started and removes the temp dir', async () => {
    const controller = new AbortController();
    const started = startControlPlane({ binDir: kubeBinDir(), signal: controller.signal });
    // Abort while etcd or kube-apiserver is still starting (the apiserver needs seconds to be ready).
    setTimeout(() => {
      controller.abort(new Error('test abort'));
    }, 300);
    const error = await started.then(
      async (plane) => {
        await plane.stop();
        return assert.fail('start-up finished before the abort');
      },
      (e: unknown) => e,
    );
    assert.ok(error instanceof ControlPlaneStartError, String(error));
    assert.equal(error.aborted, true);
    assert.ok(error.pids.length >= 1, 'at least etcd had been spawned');
    for (const pid of error.pids) assert.equal(alive(pid), false, `pid ${pid} is gone`);
    assert.equal(existsSync(error.dir), false);
    assert.deepEqual(processesUsing(error.dir), []);
  });

  void it('rejects a bin dir without the binaries', async () => {
    await assert.rejects(
      startControlPlane({ binDir: join('/nonexistent', String(process.pid)) }),
      (e: unknown) => e instanceof ControlPlaneStartError && /is missing/.test(e.message),
    );
  });
});
