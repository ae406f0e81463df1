// The one write disks by rule makes on the node: a symlink in a discovery directory. symlink(2)
// fails with EEXIST rather than replace an entry, so an operator's entry, or a link made before
// (whose device may be gone: volume health reports it), is never re-pointed.
import { symlink } from 'node:fs/promises';

import type { DiscoveryLinkWriter } from '../devices/ports.js';
import type { MemoryVolumes } from './memory-volumes.js';

export const fsDiscoveryLinks: DiscoveryLinkWriter = {
  createLink: (path, target) => symlink(target, path),
};

/** The same on an in-memory node (simulate, the sandbox, tests). */
export function memoryDiscoveryLinks(volumes: MemoryVolumes): DiscoveryLinkWriter {
  return {
    createLink: (path, target) => {
      try {
        volumes.addSymlink(path, target);
        return Promise.resolve();
      } catch (err) {
        return Promise.reject(err instanceof Error ? err : new Error(String(err)));
      }
    },
  };
}
