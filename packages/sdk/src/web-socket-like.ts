import { ConnectionError } from './conch-error.ts'

// The slice of the WebSocket API the SDK uses. Browsers, Deno, Bun and Node ≥ 22 have it as
// `globalThis.WebSocket`; the `ws` package implements it too. Listeners take `unknown` so that
// every implementation's own event types fit; the SDK reads events defensively. On Node the
// global (undici) is used even where `ws` could be loaded: measured side by side in one process
// against one runner, `shell.run('true')` cost the same client CPU and latency over either, so
// preferring `ws` would only add an import and a second code path.

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

/** Where the `ws` package is imported from on runtimes without a global WebSocket. */
const WS_MODULE = 'ws'

/**
 * Resolves the WebSocket constructor: the injected one, else `globalThis.WebSocket`, else the
 * optional `ws` peer dependency (Node 20).
 */
export async function resolveWebSocket(injected?: WebSocketConstructor): Promise<WebSocketConstructor> {
  if (injected) return injected
  const global: unknown = (globalThis as { WebSocket?: unknown }).WebSocket
  if (typeof global === 'function') return global as WebSocketConstructor
  try {
    const mod: { default?: unknown; WebSocket?: unknown } = await import(/* @vite-ignore */ WS_MODULE)
    const ctor = mod.WebSocket ?? mod.default
    if (typeof ctor === 'function') return ctor as WebSocketConstructor
  } catch {
    // Reported below.
  }
  throw new ConnectionError(
    'no WebSocket implementation: this runtime has no globalThis.WebSocket and the optional peer ' +
      "dependency 'ws' is not installed; run `npm install ws` or pass { WebSocket } in the options",
  )
}
