// Loads the interactive dashboard (ink, React, yoga) for `provisioner dashboard`.
//
// yoga-layout's Emscripten loader probes `typeof fetch` and then fetch()es its own inlined
// `data:` URL, which makes Node load undici's whole fetch stack just to decode base64: about a
// third of the time the UI takes to load. With fetch hidden while the modules evaluate, the
// loader decodes the base64 itself. Nothing else runs fetch meanwhile (the admin client speaks
// node:http), and the global is put back however the import ends.
export async function loadDashboard(): Promise<typeof import('./run.js')> {
  const saved = Object.getOwnPropertyDescriptor(globalThis, 'fetch');
  Object.defineProperty(globalThis, 'fetch', { value: undefined, configurable: true, writable: true });
  try {
    return await import('./run.js');
  } finally {
    if (saved === undefined) Reflect.deleteProperty(globalThis, 'fetch');
    else Object.defineProperty(globalThis, 'fetch', saved);
  }
}
