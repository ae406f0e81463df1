// node:http without its ESM namespace. `import { createServer } from 'node:http'` makes Node build
// the module's ESM namespace, which reads every export, including the lazy WebSocket, CloseEvent
// and MessageEvent getters: that loads undici (~750 KB of source, and it loads http2), about
// +13 MiB RSS in a process that never uses them (docs/benchmarks.md, "Footprint per node").
// The CommonJS module object has the same functions and leaves the getters alone. (This is an
// import by other means, not a read of the process: the one use of `process` core is allowed.)
// eslint-disable-next-line no-restricted-globals -- loads a builtin module, as `import` would
export const { Agent, createServer, request } = process.getBuiltinModule('node:http');
