// `provisioner simulate --demo`: a built-in scenario that tells the agent's story in a few seconds
// with no cluster and no root. docs/scenarios/demo.yaml is the same text (a test keeps them equal).
import { parseScenario } from './scenario.js';
import type { Scenario } from './scenario.js';

export const DEMO_FILE = '<demo>';

export const DEMO_SCENARIO = `# The built-in demo: \`provisioner simulate --demo\` (also docs/scenarios/demo.yaml).
name: 'demo: a day in the life of a node'
description: |
  Two disks on node-a are published as PersistentVolumes. A claim is released and its disk is
  cleaned and published again. The config changes and reloads without a restart; an invalid
  edit is rejected while the running config keeps serving; the fix is applied.
node: node-a
config:
  storageClassMap:
    fast-disks:
      hostDir: /mnt/fast-disks
      mountDir: /mnt/fast-disks
disks:
  - { name: disk1, class: fast-disks, capacity: 100Gi }
  - { name: disk2, class: fast-disks, capacity: 200Gi }
steps:
  - check:
    note: At start-up the agent publishes every mounted disk it finds.
    expect: { pvs: 2, generation: 1 }

  - claim bound: { volume: disk1, claim: shop/data-db-0 }
    note: A StatefulSet pod claims disk1.
    expect: { pv: { volume: disk1, phase: Bound } }

  - claim released: disk1
    note: The claim is deleted. The agent wipes the disk, deletes the PV and publishes the disk again.
    expect:
      cleaned: { disk1: 1 }
      pv: { volume: disk1, exists: true, phase: Available }

  - disk added: { name: disk3, class: fast-disks, capacity: 50Gi }
    note: A new disk is mounted; the agent is told at once (mount-table and directory events).
    expect: { pvs: 3 }

  - config changed:
      storageClassMap:
        fast-disks:
          hostDir: /mnt/fast-disks
          mountDir: /mnt/fast-disks
          fsType: ext4
    note: The ConfigMap is edited (new PVs get fsType ext4). The agent reloads in place.
    expect: { reload: applied, generation: 2 }

  - disk added: { name: disk4, class: fast-disks, capacity: 50Gi }
    expect:
      pv:
        - { volume: disk4, fsType: ext4 }
        - { volume: disk1, fsType: '' }

  - config changed:
      storageClassMap: |
        fast-disks:
          hostDir: /mnt/fast-disks
          mountDir: /mnt/fast-disks
          fsType: ext4
          namePattern: *
    note: A bad edit (an unquoted * is a YAML alias). It is rejected; generation 2 keeps serving.
    expect: { reload: rejected, generation: 2 }

  - disk added: { name: disk5, class: fast-disks, capacity: 50Gi }
    note: The running config still works.
    expect: { pvs: 5, pv: { volume: disk5, fsType: ext4 } }

  - config changed:
      storageClassMap:
        fast-disks:
          hostDir: /mnt/fast-disks
          mountDir: /mnt/fast-disks
          fsType: ext4
          namePattern: 'disk*'
    note: The fix is applied.
    expect: { reload: applied, generation: 3, pvs: 5 }
`;

export function demoScenario(): Scenario {
  return parseScenario(DEMO_FILE, DEMO_SCENARIO, { baseDir: '/' });
}
