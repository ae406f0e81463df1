// Disks by rule as users meet it: the chart and the image on a real kubelet node
// (test/support/chart-node.ts), a class whose rule in apply mode selects loop devices of one exact
// size chosen for this run (no other test's device has it). A blank loop device appears on the
// host after the install; the agent links it into the class's directory and publishes it; a pod
// claims it in Filesystem mode and the kubelet formats it (fsType ext4) and mounts it; the claim is
// released, the agent cleans the device and publishes it again, and the next claimant sees an
// empty volume.
import assert from 'node:assert/strict';
import { mkdirSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';

import { box, CHART_NS, ChartNode } from '../../support/chart-node.js';
import { skipUnlessKubeletNodePossible } from '../../support/kubelet-node.js';
import { isRunning, logMatches, podWhen } from '../../support/node-pods.js';
import { attachLoopDevice, Cleanup, run } from '../../support/real-node.js';

const MiB = 2 ** 20;
const SLOW = 120_000;
/** 32 MiB and a random number of 4 KiB pages. */
const SIZE = 32 * MiB + 4096 * (1 + Math.floor(Math.random() * 250));
const CLASS = 'rule-disks';

/** blkid's TYPE of the device, or '' when it finds no signature. */
function signature(device: string): string {
  try {
    return /^TYPE=(.*)$/mu.exec(run('blkid', ['-p', '-o', 'export', device]))?.[1] ?? '';
  } catch {
    return ''; // blkid exits 2 when it finds nothing
  }
}

describe('disks by rule through the chart on a real kubelet node', { skip: skipUnlessKubeletNodePossible() }, () => {
  const cleanup = new Cleanup();
  let env: ChartNode | undefined;
  after(async () => {
    try {
      await env?.stop();
    } finally {
      cleanup.run();
    }
  });

  it('a blank device that appears is linked, published, formatted by the kubelet for a claim, and cleaned and published again', async (t) => {
    env = await ChartNode.start({ cleanup, prefix: 'lvp-rules-node-' });
    const dir = join(env.base, 'rules');
    mkdirSync(dir);
    env.helm(
      'install',
      env.valuesWith({
        classes: [
          {
            name: CLASS,
            hostDir: dir,
            volumeMode: 'Filesystem',
            fsType: 'ext4',
            storageClass: true,
            deviceRules: [
              { mode: 'apply', types: ['loop'], minSize: String(SIZE), maxSize: String(SIZE), settle: '1s' },
            ],
          },
        ],
      }),
    );
    await env.agentPod();
    const appeared = Date.now();
    const loop = attachLoopDevice(cleanup, join(env.base, 'new-disk.img'), SIZE);
    const path = join(dir, loop.name);
    const pv = await env.pvAt(path, 'published from the link', (p) => p.status?.phase === 'Available');
    t.diagnostic(`device attached → PV Available: ${String(Date.now() - appeared)} ms`);
    assert.equal(readlinkSync(path), loop.path, 'the link the agent made');
    assert.equal(pv.spec?.storageClassName, CLASS);
    assert.equal(pv.spec.volumeMode, 'Filesystem');
    assert.equal(pv.spec.local?.fsType, 'ext4');
    assert.equal(signature(loop.path), '', 'blank until claimed');

    await env.apps.createNamespacedStatefulSet({
      namespace: CHART_NS,
      body: env.statefulSet('ruled', CLASS, 'Filesystem', box('ls /data', 'write /data/hello hi', 'ls /data', 'sleep')),
    });
    await podWhen(env.core, CHART_NS, 'ruled-0', 'Running', isRunning, SLOW);
    await logMatches(env.core, CHART_NS, 'ruled-0', /ls \/data: .*hello/su, SLOW);
    assert.equal(signature(loop.path), 'ext4', 'the kubelet formatted the device with the class fsType');

    await env.releaseClaim('ruled');
    const again = await env.pvAt(
      path,
      'cleaned and published again',
      (p) => p.metadata?.uid !== pv.metadata?.uid && p.status?.phase === 'Available',
    );
    assert.equal(signature(loop.path), '', 'the cleaner wiped the filesystem');
    assert.ok(again.metadata?.uid !== undefined);

    await env.apps.createNamespacedStatefulSet({
      namespace: CHART_NS,
      body: env.statefulSet('next', CLASS, 'Filesystem', box('ls /data', 'sleep')),
    });
    const log = await logMatches(env.core, CHART_NS, 'next-0', /ls \/data: /u, SLOW);
    assert.doesNotMatch(log, /hello/u, 'the next claimant sees an empty volume');
    await env.releaseClaim('next');
  });
});
