// The soak's config: a small model of what its edits change (fsType, labels, the cleaner, a third
// class, a broken edit), rendered to ConfigMap data the way the chart writes it, and the hash the
// agent reports for it (the same parse the agent runs), so every hash the status Lease shows can
// be checked against the configs actually written.
import { snapshotFromDirectoryFiles } from '../../../src/core/config/decode/layout.js';
import { parseConfigSnapshot } from '../../../src/core/config/decode/parse.js';

export interface SoakDirs {
  readonly fs: string;
  readonly blk: string;
  readonly extra: string;
  readonly spare: string;
}

export interface ConfigModel {
  readonly fsType: 'ext4' | 'ext3' | 'xfs';
  readonly labelsRevision: number;
  readonly useJobForCleaning: boolean;
  /** The class with disks: removing it is refused (it would orphan its PVs). */
  readonly extraClass: boolean;
  /** A class with no disk: added and removed freely. */
  readonly spareClass: boolean;
  /** A broken edit (volumeMode "Blok"): rejected, never applied. */
  readonly broken: boolean;
}

export const INITIAL_MODEL: ConfigModel = {
  fsType: 'ext4',
  labelsRevision: 0,
  useJobForCleaning: false,
  extraClass: true,
  spareClass: false,
  broken: false,
};

/** The file the block cleaner logs `start <device>` / `done <device>` to (in the block class's dir). */
export const CLEANER_LOG = 'cleaner.log';
/** While this file exists in the block class's dir, the block cleaner waits before it writes. */
export const CLEANER_HOLD = 'hold';

/** The block class's cleaner: logs, waits while held, zeroes the device, logs again. */
export function blockCleaner(dirs: SoakDirs): string[] {
  const log = `${dirs.blk}/${CLEANER_LOG}`;
  const hold = `${dirs.blk}/${CLEANER_HOLD}`;
  return [
    '/bin/sh',
    '-c',
    `echo "start $LOCAL_PV_BLKDEVICE" >> ${log}; while [ -e ${hold} ]; do sleep 0.2; done; ` +
      `/scripts/dd_zero.sh 1 && echo "done $LOCAL_PV_BLKDEVICE" >> ${log}`,
  ];
}

const q = JSON.stringify;

function classYaml(name: string, dir: string, fields: readonly (readonly [string, string])[]): string[] {
  return [`${q(name)}:`, `  hostDir: ${q(dir)}`, `  mountDir: ${q(dir)}`, ...fields.map(([k, v]) => `  ${k}: ${v}`)];
}

/** The ConfigMap data of `model`: `base` (the chart's keys) with the soak's keys replaced. */
export function configData(
  base: Readonly<Record<string, string>>,
  dirs: SoakDirs,
  model: ConfigModel,
): Record<string, string> {
  const cleaner = blockCleaner(dirs)
    .map((arg) => `\n    - ${q(arg)}`)
    .join('');
  const lines = [
    ...classYaml('fs-disks', dirs.fs, [
      ['volumeMode', q(model.broken ? 'Blok' : 'Filesystem')],
      ['fsType', q(model.fsType)],
    ]),
    ...classYaml('blk-disks', dirs.blk, [
      ['volumeMode', q('Block')],
      ['namePattern', q('blk*')],
      ['blockCleanerCommand', cleaner],
    ]),
    ...(model.extraClass ? classYaml('extra-disks', dirs.extra, [['volumeMode', q('Filesystem')]]) : []),
    ...(model.spareClass ? classYaml('spare-disks', dirs.spare, [['volumeMode', q('Filesystem')]]) : []),
  ];
  const data: Record<string, string> = {
    ...base,
    storageClassMap: `${lines.join('\n')}\n`,
    labelsForPV: `"soak-revision": ${q(String(model.labelsRevision))}\n`,
  };
  if (model.useJobForCleaning) data['useJobForCleaning'] = 'yes';
  else delete data['useJobForCleaning'];
  return data;
}

/** The agent's hash of this ConfigMap data (undefined when the agent would reject it). */
export function configHash(data: Readonly<Record<string, string>>): string | undefined {
  try {
    return parseConfigSnapshot(
      snapshotFromDirectoryFiles(
        '/etc/provisioner/config',
        Object.entries(data).map(([name, text]) => ({ name, text })),
      ),
    ).hash;
  } catch {
    return undefined;
  }
}
