// The identity rules on PVs: what is recorded, and when the disk at the path is the PV's disk.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { PersistentVolume } from '../../../src/core/kube/objects.js';
import type { IdentitySource, VolumeIdentity } from '../../../src/core/node/volumes.js';
import {
  identityAction,
  BY_ID_ANNOTATION,
  checkIdentity,
  IDENTITY_ACTION_ANNOTATION,
  IDENTITY_ANNOTATION,
  NODE_UID_ANNOTATION,
  recordIdentityPatch,
  withIdentity,
} from '../../../src/core/pv/identity.js';

const NODE = { uid: 'uid-a' };

function pv(annotations?: Record<string, string>): PersistentVolume {
  return {
    metadata: { name: 'local-pv-1', ...(annotations ? { annotations } : {}) },
    spec: { local: { path: '/mnt/fast/disk1' } },
  };
}

function identity(source: IdentitySource, value: string, byId?: string): VolumeIdentity {
  return { id: `${source}:${value}`, source, device: '8:16', ...(byId !== undefined ? { byId } : {}) };
}

const identities = fc
  .tuple(fc.constantFrom<IdentitySource>('wwid', 'serial', 'loop', 'fs-uuid', 'dev-ino'), fc.string({ minLength: 1 }))
  .map(([source, value]) => identity(source, value));
const uids = fc.constantFrom('uid-a', 'uid-b', 'uid-c');

describe('disk identity on PVs', () => {
  it('records the identity, the Node UID and the by-id name, keeping the PV’s other annotations', () => {
    const before = pv({ 'pv.kubernetes.io/provisioned-by': 'local-volume-provisioner-a-uid-a' });
    const after = withIdentity(before, identity('wwid', 'naa.5000c500a1b2c3d4', 'wwn-0x5000c500a1b2c3d4'), NODE);
    assert.deepEqual(after.metadata.annotations, {
      'pv.kubernetes.io/provisioned-by': 'local-volume-provisioner-a-uid-a',
      [IDENTITY_ANNOTATION]: 'wwid:naa.5000c500a1b2c3d4',
      [NODE_UID_ANNOTATION]: 'uid-a',
      [BY_ID_ANNOTATION]: 'wwn-0x5000c500a1b2c3d4',
    });
    assert.equal(before.metadata.annotations?.[IDENTITY_ANNOTATION], undefined, 'the input is not changed');
    assert.equal(withIdentity(pv(), undefined, NODE).metadata.annotations?.[IDENTITY_ANNOTATION], 'none');
  });

  it('a PV matches the disk it was published for, on the node it was published on', () => {
    fc.assert(
      fc.property(identities, (id) => {
        assert.deepEqual(checkIdentity(withIdentity(pv(), id, NODE), id, NODE), { kind: 'match' });
      }),
    );
  });

  it('another disk at the path is a mismatch, whatever the two identities are', () => {
    fc.assert(
      fc.property(identities, fc.option(identities, { nil: undefined }), (recorded, found) => {
        fc.pre(recorded.id !== found?.id);
        const verdict = checkIdentity(withIdentity(pv(), recorded, NODE), found, NODE);
        assert.equal(verdict.kind, 'mismatch');
        assert.equal(verdict.reason, 'identity-changed');
        assert.equal(verdict.recorded, recorded.id);
        assert.equal(verdict.found, found?.id ?? 'none');
        assert.ok(verdict.message.includes(recorded.id));
      }),
    );
  });

  it('a node rebuilt under the same name: only a recorded identity that matches passes', () => {
    fc.assert(
      fc.property(
        fc.option(identities, { nil: undefined }),
        fc.option(identities, { nil: undefined }),
        uids,
        (recorded, found, publishedOn) => {
          const published = withIdentity(pv(), recorded, { uid: publishedOn });
          const verdict = checkIdentity(published, found, NODE);
          const sameNode = publishedOn === NODE.uid;
          const sameDisk = recorded !== undefined && recorded.id === found?.id;
          if (sameDisk || (sameNode && recorded === undefined)) assert.deepEqual(verdict, { kind: 'match' });
          else {
            assert.equal(verdict.kind, 'mismatch');
            assert.equal(verdict.reason, sameNode ? 'identity-changed' : 'node-rebuilt');
          }
        },
      ),
    );
  });

  it('a PV without an identity (from upstream) is unrecorded on its node, and unverifiable from another', () => {
    assert.deepEqual(checkIdentity(pv(), identity('wwid', 'x'), NODE), { kind: 'unrecorded' });
    assert.deepEqual(checkIdentity(pv({ [NODE_UID_ANNOTATION]: 'uid-a' }), undefined, NODE), { kind: 'unrecorded' });
    const rebuilt = checkIdentity(pv({ [NODE_UID_ANNOTATION]: 'uid-old' }), identity('wwid', 'x'), NODE);
    assert.equal(rebuilt.kind, 'mismatch');
    assert.equal(rebuilt.reason, 'node-rebuilt');
    assert.match(rebuilt.message, /uid-old.*uid-a.*cannot be verified/u);
  });

  it('the operator’s action is `accept` exactly, any other value is invalid, and the patch that records the new disk clears it', () => {
    assert.equal(identityAction(pv({ [IDENTITY_ACTION_ANNOTATION]: 'accept' })), 'accept');
    for (const value of [' Accept ', 'Accept', 'yes', 'retire', ''])
      assert.deepEqual(identityAction(pv({ [IDENTITY_ACTION_ANNOTATION]: value })), { invalid: value }, value);
    assert.equal(identityAction(pv()), undefined);
    assert.deepEqual(recordIdentityPatch(identity('fs-uuid', 'u1'), NODE), {
      metadata: {
        annotations: {
          [IDENTITY_ANNOTATION]: 'fs-uuid:u1',
          [NODE_UID_ANNOTATION]: 'uid-a',
          [BY_ID_ANNOTATION]: null,
          [IDENTITY_ACTION_ANNOTATION]: null,
        },
      },
    });
  });
});
