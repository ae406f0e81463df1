// Writes a directory exactly the way kubelet's AtomicWriter projects a ConfigMap volume:
// data in a timestamped `..<ts>` directory, `..data` swapped by rename(2), keys as symlinks.
import { mkdir, readdir, readlink, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

let sequence = 0;

export async function writeConfigMapVolume(dir: string, data: Readonly<Record<string, string>>): Promise<string> {
  await mkdir(dir, { recursive: true });
  let previous: string | undefined;
  try {
    previous = await readlink(join(dir, '..data'));
  } catch {
    previous = undefined;
  }
  const stamp = `..${new Date().toISOString().replace(/[-:.TZ]/gu, '_')}${String(process.pid)}_${String(sequence++)}`;
  await mkdir(join(dir, stamp));
  for (const [key, value] of Object.entries(data)) await writeFile(join(dir, stamp, key), value);
  // Steps 7-9: new key symlinks, ..data_tmp, atomic rename over ..data.
  for (const key of Object.keys(data)) {
    await symlink(join('..data', key), join(dir, key)).catch((err: unknown) => {
      if (!(err instanceof Error && 'code' in err && err.code === 'EEXIST')) throw err;
    });
  }
  await symlink(stamp, join(dir, '..data_tmp'));
  await rename(join(dir, '..data_tmp'), join(dir, '..data'));
  // Steps 10-11: remove symlinks of deleted keys and the old data directory.
  for (const name of await readdir(dir)) {
    if (!name.startsWith('..') && !(name in data)) await rm(join(dir, name));
  }
  if (previous !== undefined) await rm(join(dir, previous), { recursive: true, force: true });
  return stamp;
}
