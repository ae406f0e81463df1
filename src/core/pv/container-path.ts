// Where a PV's volume is inside the agent's container: its path on the host (spec.local.path) is
// below the class's hostDir, and the DaemonSet mounts hostDir at mountDir.
import type { PersistentVolumeView } from './cached.js';

/** mountDir + rel(hostDir, the PV's path); undefined when the PV's path is not under hostDir (or climbs out with `..`). */
export function containerPath(pv: PersistentVolumeView, hostDir: string, mountDir: string): string | undefined {
  const path = pv.spec.local?.path;
  if (path === undefined) return undefined;
  const prefix = hostDir === '/' ? '/' : `${hostDir}/`;
  if (!path.startsWith(prefix)) return undefined;
  const rest = path.slice(prefix.length);
  if (rest === '' || rest.split('/').includes('..')) return undefined;
  return mountDir === '/' ? `/${rest}` : `${mountDir}/${rest}`;
}
