// Built-in modules the agent needs only after its first PV is published: child_process (findmnt,
// a cleanup, a carve, a credential plugin) and zlib (an apiserver's gzipped answer of ~128 KiB and
// up, a GPT's checksums). An import loads one at start-up, compiled from source under the agent's
// `--jitless`; loaded here on first use they cost the start nothing (docs/benchmarks.md, "Start →
// first PV, a third time"). Like src/core/node-http.ts, an import by other means, not a read of the
// process.
import type * as ChildProcessModule from 'node:child_process';
import type * as ZlibModule from 'node:zlib';

/** node:child_process, loaded on the first call. */
export function childProcess(): typeof ChildProcessModule {
  // eslint-disable-next-line no-restricted-globals -- loads a builtin module, as `import` would
  return process.getBuiltinModule('node:child_process');
}

/** node:zlib, loaded on the first call. */
export function zlib(): typeof ZlibModule {
  // eslint-disable-next-line no-restricted-globals -- loads a builtin module, as `import` would
  return process.getBuiltinModule('node:zlib');
}
