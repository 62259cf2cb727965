// Node's `http` module, taken without evaluating its ES module namespace. An
// `import { … } from 'node:http'` runs every export's getter, `WebSocket`'s included, which loads
// undici (Node's fetch and WebSocket: about 6 MB of memory, 2 MB of it heap) into a runner that
// never uses them; `process.getBuiltinModule` returns the same module without touching the getter.
// Type-only imports of `node:http` cost nothing and stay plain imports.

const http = process.getBuiltinModule('node:http')

/** `http.Agent`. */
export const Agent = http.Agent
/** `http.createServer`. */
export const createServer = http.createServer
/** `http.request`. */
export const request = http.request
