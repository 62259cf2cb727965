import { ConnectionError } from './conch-error.ts'

// The slice of the WebSocket API the SDK uses. Browsers, Deno, Bun and Node ≥ 22 have it as
// `globalThis.WebSocket`; the `ws` package implements it too. Listeners take `unknown` so that
// every implementation's own event types fit; the SDK reads events defensively.
//
// On Node the SDK prefers `ws` (≥ 8, an optional peer) when it can be imported, and uses the
// global (undici) otherwise: per sequential `shell.run('true')` the client spent a median 0.93x
// (0.82-1.04x over six runs) the CPU over `ws` that it spent over undici (tests-e2e
// `bench/client-cpu-ab.ts` with `CLIENT_CPU_AB_UNDICI=1`, 20-24 interleaved rounds each, every
// round against the bare client of the same round); undici's path per message (a stream parser,
// a `MessageEvent` and an `EventTarget` dispatch, a `TextDecoder`) and per send (its own queue
// over the socket's `Writable`) is longer. The choice costs about 130 bytes of the gzipped
// bundle. Only Node takes it: Bun's and Deno's globals are native, and a browser bundle never
// imports `ws` (the specifier is a variable behind a runtime check). An injected constructor
// always wins, so `{ WebSocket: globalThis.WebSocket }` keeps undici on Node.

/**
 * A WebSocket as the SDK uses it: the standard browser API, or `ws`.
 *
 * @example
 * ```ts
 * import { WebSocket } from 'ws'
 * const ctor: WebSocketConstructor = WebSocket // ws instances are WebSocketLike
 * ```
 */
export interface WebSocketLike {
  /** 0 connecting, 1 open, 2 closing, 3 closed. */
  readonly readyState: number
  /** Bytes queued but not yet sent, where the implementation reports it. */
  readonly bufferedAmount?: number
  /** How binary messages arrive; the SDK sets `arraybuffer`. */
  binaryType?: string
  /** Sends one text message. */
  send(data: string): void
  /** Starts the closing handshake. */
  close(code?: number, reason?: string): void
  /** Adds an event listener. */
  addEventListener(type: 'open' | 'message' | 'close' | 'error', listener: (event: unknown) => void): void
}

/**
 * A WebSocket constructor: `globalThis.WebSocket`, or the `ws` package's `WebSocket`.
 *
 * @example
 * ```ts
 * import { WebSocket } from 'ws'
 * const sb = await Sandbox.connect(id, { url, apiKey, WebSocket })
 * ```
 */
export type WebSocketConstructor = new (url: string, protocols: string[]) => WebSocketLike

/**
 * The `fetch` function the SDK calls; defaults to `globalThis.fetch`.
 *
 * @example
 * ```ts
 * const sb = await Sandbox.connect(id, { url, apiKey, fetch: (input, init) => fetch(input, { ...init, keepalive: true }) })
 * ```
 */
export type FetchLike = (input: string, init: RequestInit) => Promise<Response>

/** Where the `ws` package is imported from on Node (or a runtime without a global WebSocket). */
const WS_MODULE = 'ws'

/** True on Node itself: not Bun or Deno (which report a Node version too), not a browser. */
function isNode(): boolean {
  const versions = (globalThis as { process?: { versions?: Record<string, string | undefined> } }).process
    ?.versions
  return typeof versions?.node === 'string' && versions.bun === undefined && versions.deno === undefined
}

/**
 * The `ws` package's WebSocket, or `undefined` when it is not installed. `named` takes only a
 * module with a named `WebSocket` export (ws ≥ 8), so an older ws hoisted by another package is
 * never preferred over the global.
 */
async function importWs(named: boolean): Promise<WebSocketConstructor | undefined> {
  try {
    const mod: { default?: unknown; WebSocket?: unknown } = await import(/* @vite-ignore */ WS_MODULE)
    const ctor = named ? mod.WebSocket : (mod.WebSocket ?? mod.default)
    if (typeof ctor === 'function') return ctor as WebSocketConstructor
  } catch {
    // Not installed: the caller falls back.
  }
  return undefined
}

/**
 * Resolves the WebSocket constructor: the injected one; on Node, the optional `ws` peer
 * dependency (≥ 8) when installed; else `globalThis.WebSocket`; else `ws` (Node 20).
 */
export async function resolveWebSocket(injected?: WebSocketConstructor): Promise<WebSocketConstructor> {
  if (injected) return injected
  const node = isNode()
  if (node) {
    const ws = await importWs(true)
    if (ws) return ws
  }
  const global: unknown = (globalThis as { WebSocket?: unknown }).WebSocket
  if (typeof global === 'function') return global as WebSocketConstructor
  const fallback = await importWs(false)
  if (fallback) return fallback
  throw new ConnectionError(
    'no WebSocket implementation: this runtime has no globalThis.WebSocket and the optional peer ' +
      "dependency 'ws' is not installed; run `npm install ws` or pass { WebSocket } in the options",
  )
}
